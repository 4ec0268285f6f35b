//! The HTTP/1.x request head (RFC 9112 §3 request line, RFC 9110 §7.2 Host) and the URL
//! that the banned patterns are matched against: `host` (lower case, port and a trailing
//! dot removed) followed by the path of the request target.
//!
//! - origin-form (`GET /a/b?c HTTP/1.1` + `Host: Example.COM:8080`) → `example.com/a/b?c`;
//! - absolute-form (`GET http://example.com/a HTTP/1.1`): RFC 9112 §3.2.2, the server
//!   "MUST ignore the received Host header field" and uses the target's authority →
//!   `example.com/a`;
//! - authority-form (`CONNECT example.com:443 HTTP/1.1`) → `example.com/`;
//! - asterisk-form (`OPTIONS * HTTP/1.1`) → `host/`.
//!
//! Not normalized: percent-encoding, dot segments, repeated slashes (a client can spell a
//! banned path another way; see the module docs of `urlfilter`).

/// What the bytes seen so far say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Not enough bytes yet.
    Wait,
    /// The stream does not open with an HTTP request line.
    NotHttp,
    /// The window filled up before the request line (or the Host header) was complete.
    GaveUp,
    /// A complete head without a host (HTTP/1.0 without Host).
    NoHost,
    /// The URL to match, in the first `n` bytes of the output buffer.
    Url(usize),
}

/// Longest method token accepted.
const MAX_METHOD: usize = 24;

/// RFC 9110 §5.6.2 `tchar`.
fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The host of an authority (`user@host:port`): no userinfo, no port.
fn authority_host(a: &[u8]) -> &[u8] {
    let a = match a.iter().rposition(|&b| b == b'@') {
        Some(i) => a.get(i + 1..).unwrap_or(&[]),
        None => a,
    };
    if a.first() == Some(&b'[') {
        // An IPv6 literal keeps its brackets.
        return match a.iter().position(|&b| b == b']') {
            Some(i) => a.get(..=i).unwrap_or(a),
            None => a,
        };
    }
    match a.iter().position(|&b| b == b':') {
        Some(i) => a.get(..i).unwrap_or(a),
        None => a,
    }
}

/// Writes `host` (lower case, without a trailing dot) then `path` into `out`.
pub(super) fn write_url(host: &[u8], path: &[u8], out: &mut [u8]) -> usize {
    let host = host.strip_suffix(b".").unwrap_or(host);
    let mut n = 0;
    for (o, &b) in out.iter_mut().zip(host.iter().chain(path)) {
        *o = b;
        n += 1;
    }
    if let Some(h) = out.get_mut(..host.len().min(n)) {
        h.make_ascii_lowercase();
    }
    n
}

/// Splits an absolute-form target into its host and path (`None`: not absolute-form).
fn absolute(target: &[u8]) -> Option<(&[u8], &[u8])> {
    let starts = |p: &[u8]| target.get(..p.len()).is_some_and(|t| t.eq_ignore_ascii_case(p));
    let skip = if starts(b"http://") {
        7
    } else if starts(b"https://") {
        8
    } else {
        return None;
    };
    let rest = target.get(skip..).unwrap_or(&[]);
    let end = rest.iter().position(|&b| matches!(b, b'/' | b'?' | b'#')).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(end);
    Some((authority_host(auth), path))
}

/// Analyses the contiguous stream prefix `s`; `full` says that the window is full (no more
/// bytes will come). On `Url(n)` the URL is in `out[..n]`.
pub(super) fn analyse(s: &[u8], full: bool, out: &mut [u8]) -> Outcome {
    let more = if full { Outcome::GaveUp } else { Outcome::Wait };
    // RFC 9112 §2.2: "a server that is expecting to receive and parse a request-line SHOULD
    // ignore at least one empty line (CRLF) received prior to the request-line" — servers
    // skip any number (and bare LFs), so the filter reads the request after them too.
    let s = s.get(s.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(s.len())..).unwrap_or(&[]);
    // The method: a token, then one space.
    let method_end = s.iter().position(|&b| !tchar(b));
    match method_end {
        None if s.len() > MAX_METHOD => return Outcome::NotHttp,
        None => return more,
        Some(0) => return Outcome::NotHttp,
        Some(i) if i > MAX_METHOD || s.get(i) != Some(&b' ') => return Outcome::NotHttp,
        Some(_) => {}
    }
    let Some(line_end) = find(s, b"\r\n") else { return more };
    let line = s.get(..line_end).unwrap_or(&[]);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Outcome::NotHttp;
    };
    if target.is_empty() || !version.starts_with(b"HTTP/") {
        return Outcome::NotHttp;
    }
    if let Some((host, path)) = absolute(target) {
        let path: &[u8] = if path.is_empty() { b"/" } else { path };
        return Outcome::Url(write_url(host, path, out));
    }
    let path: &[u8] = if target.first() == Some(&b'/') { target } else { b"/" };
    if method == b"CONNECT" {
        return Outcome::Url(write_url(authority_host(target), b"/", out));
    }
    // Header lines up to the empty line (or the last complete line when the window is full).
    let head_end = find(s, b"\r\n\r\n").map(|i| i + 2);
    if head_end.is_none() && !full {
        return Outcome::Wait;
    }
    let headers = s.get(line_end + 2..head_end.unwrap_or(s.len())).unwrap_or(&[]);
    let lines = headers.split(|&b| b == b'\n');
    let complete = |l: &&[u8]| l.last() == Some(&b'\r');
    for l in lines.filter(complete) {
        let l = l.get(..l.len() - 1).unwrap_or(&[]);
        let Some(colon) = l.iter().position(|&b| b == b':') else { continue };
        let (name, value) = l.split_at(colon);
        if name.eq_ignore_ascii_case(b"host") {
            let host = authority_host(trim(value.get(1..).unwrap_or(&[])));
            if host.is_empty() {
                break;
            }
            return Outcome::Url(write_url(host, path, out));
        }
    }
    if head_end.is_some() { Outcome::NoHost } else { Outcome::GaveUp }
}
