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
//! # Read as servers read it
//!
//! The filter must resolve a request to the URL the server will serve, not to the bytes the
//! client chose: every spelling a common server (nginx, Apache, Node, Python's `http.server`)
//! maps to a banned path is matched as that path. The rules, each the lenient side of what
//! servers do (so a spelling is at worst matched more strictly, never let through):
//!
//! - **Line ends**: a bare LF ends a line as CRLF does (RFC 9112 §2.2: "a recipient MAY
//!   recognize a single LF as a line terminator"); empty lines before the request line are
//!   skipped (§2.2).
//! - **Request-line whitespace**: the method, target and version are split on runs of SP,
//!   HTAB, VT, FF or bare CR (§3: "a recipient MAY instead parse on whitespace-delimited word
//!   boundaries"); whatever lies between the method and the version is the target, spaces and
//!   all.
//! - **Percent-encoding**: every `%XX` of the path is decoded before it is matched (RFC 3986
//!   §6.2.2.2 decodes the unreserved characters; nginx decodes every one before it maps a
//!   location, `%2F` included), once — a server decodes once.
//! - **Backslashes** are slashes (IIS and some application servers treat them so).
//! - **Dot segments** are removed as RFC 3986 §5.2.4 says (`/a/./b` → `/a/b`, `/a/x/../b` →
//!   `/a/b`, never above the root), after decoding (`%2e%2e` is `..`).
//! - **Repeated slashes** are merged (`//bad` → `/bad`: nginx's `merge_slashes`, on by default).
//! - The **query** (from the first `?` of the target as sent) is kept as it came, after the
//!   normalised path; the **host** is lower-cased, without port, userinfo or trailing dot.
//! - **Host**: absolute-form targets name it (RFC 9112 §3.2.2: the Host header is ignored);
//!   otherwise the Host header does; a head with two Host headers naming different hosts is
//!   treated as one without (undecided: denied by default), since servers pick either.
//!
//! Banned patterns go through the same normalisation, so they may be written either way.

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

/// `s` without leading and trailing request-line whitespace ([`ws`]).
fn trim_ws(mut s: &[u8]) -> &[u8] {
    while let [b, rest @ ..] = s
        && ws(*b)
    {
        s = rest;
    }
    while let [rest @ .., b] = s
        && ws(*b)
    {
        s = rest;
    }
    s
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

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes `path` into `out` (backslashes as slashes); returns the bytes written
/// (at most `out.len()`: a longer path is cut).
fn decode(path: &[u8], out: &mut [u8]) -> usize {
    let (mut r, mut w) = (0, 0);
    while let (Some(&b), true) = (path.get(r), w < out.len()) {
        let (byte, used) = match (b, path.get(r + 1).copied().and_then(hex), path.get(r + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => (h << 4 | l, 3),
            (b'\\', _, _) => (b'/', 1),
            (b, _, _) => (b, 1),
        };
        if let Some(o) = out.get_mut(w) {
            *o = byte;
        }
        w += 1;
        r += used;
    }
    w
}

/// Removes dot segments and merges slashes in `b[..m]` (a path that starts with `/`),
/// in place; returns the new length. RFC 3986 §5.2.4 on segments, with empty segments
/// dropped: the output is `/seg/seg…`, with a trailing `/` when the input ended in `/`, `.`
/// or `..`.
fn remove_dots(b: &mut [u8], m: usize) -> usize {
    if b.first() != Some(&b'/') {
        return m;
    }
    let (mut r, mut w, mut trailing) = (0, 0, false);
    while r < m {
        if b.get(r) == Some(&b'/') {
            r += 1;
            trailing = true;
            continue;
        }
        let start = r;
        while r < m && b.get(r) != Some(&b'/') {
            r += 1;
        }
        match b.get(start..r) {
            Some(b".") => trailing = true,
            Some(b"..") => {
                // Back to the last `/` written (never above the root).
                w = b.get(..w).and_then(|o| o.iter().rposition(|&c| c == b'/')).unwrap_or(0);
                trailing = true;
            }
            _ => {
                // `/` + the segment; the source had at least one `/` before it, so the write
                // never overtakes the read.
                if let Some(o) = b.get_mut(w) {
                    *o = b'/';
                }
                b.copy_within(start..r, w + 1);
                w += 1 + (r - start);
                trailing = false;
            }
        }
    }
    if (trailing || w == 0)
        && let Some(o) = b.get_mut(w)
    {
        *o = b'/';
        w += 1;
    }
    w
}

/// Writes `host` (lower case, without a trailing dot) then `target`'s path, normalised
/// (percent-decoded, dot segments removed, slashes merged: module docs), then its query as
/// sent, into `out`; returns the bytes written (a URL longer than `out` is cut).
pub(super) fn write_url(host: &[u8], target: &[u8], out: &mut [u8]) -> usize {
    let host = host.strip_suffix(b".").unwrap_or(host);
    let mut n = 0;
    for (o, &b) in out.iter_mut().zip(host) {
        *o = b.to_ascii_lowercase();
        n += 1;
    }
    let q = target.iter().position(|&b| b == b'?').unwrap_or(target.len());
    let (path, query) = target.split_at(q);
    let rest = out.get_mut(n..).unwrap_or(&mut []);
    let m = decode(path, rest);
    n += remove_dots(rest, m);
    for (o, &b) in out.iter_mut().skip(n).zip(query) {
        *o = b;
        n += 1;
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

/// Whitespace a request line may be split on (RFC 9112 §3): SP, HTAB, VT, FF, bare CR.
fn ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | 0x0b | 0x0c | b'\r')
}

/// The complete lines of `s` (each without its LF or CRLF), and the offset after the last.
fn lines(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    let complete = s.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    s.get(..complete).unwrap_or(&[]).split_inclusive(|&b| b == b'\n').map(|l| {
        let l = l.strip_suffix(b"\n").unwrap_or(l);
        l.strip_suffix(b"\r").unwrap_or(l)
    })
}

/// Analyses the contiguous stream prefix `s`; `full` says that the window is full (no more
/// bytes will come). On `Url(n)` the URL is in `out[..n]`.
pub(super) fn analyse(s: &[u8], full: bool, out: &mut [u8]) -> Outcome {
    let more = if full { Outcome::GaveUp } else { Outcome::Wait };
    // RFC 9112 §2.2: "a server that is expecting to receive and parse a request-line SHOULD
    // ignore at least one empty line (CRLF) received prior to the request-line" — servers
    // skip any number (and bare LFs), so the filter reads the request after them too.
    let s = s.get(s.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(s.len())..).unwrap_or(&[]);
    // The method: a token, then whitespace.
    let method_end = s.iter().position(|&b| !tchar(b));
    match method_end {
        None if s.len() > MAX_METHOD => return Outcome::NotHttp,
        None => return more,
        Some(0) => return Outcome::NotHttp,
        Some(i) if i > MAX_METHOD || !s.get(i).copied().is_some_and(|b| ws(b) && b != b'\r') => {
            return Outcome::NotHttp;
        }
        Some(_) => {}
    }
    let mut all = lines(s);
    let Some(line) = all.next() else { return more };
    // Method, target (everything between), version: split on runs of whitespace.
    let mut words = line.split(|&b| ws(b)).filter(|w| !w.is_empty());
    let (Some(method), Some(version)) = (words.next(), words.next_back()) else { return Outcome::NotHttp };
    let after_method = line.get(method.len()..).unwrap_or(&[]);
    let target_end = after_method.len().saturating_sub(version.len());
    let target = trim_ws(after_method.get(..target_end).unwrap_or(&[]));
    if target.is_empty() || !version.starts_with(b"HTTP/") {
        return Outcome::NotHttp;
    }
    if let Some((host, path)) = absolute(target) {
        let path: &[u8] = if path.is_empty() { b"/" } else { path };
        return Outcome::Url(write_url(host, path, out));
    }
    let path: &[u8] = if target.first().is_some_and(|&b| b == b'/' || b == b'\\') { target } else { b"/" };
    if method == b"CONNECT" {
        return Outcome::Url(write_url(authority_host(target), b"/", out));
    }
    // Header lines up to the empty line (or the last complete line when the window is full).
    let mut ended = false;
    let mut host: Option<&[u8]> = None;
    for l in all {
        if l.is_empty() {
            ended = true;
            break;
        }
        let Some(colon) = l.iter().position(|&b| b == b':') else { continue };
        let (name, value) = l.split_at(colon);
        if name.eq_ignore_ascii_case(b"host") {
            let h = authority_host(trim(value.get(1..).unwrap_or(&[])));
            let h = h.strip_suffix(b".").unwrap_or(h);
            match host {
                // Two different hosts: servers pick either; undecided.
                Some(first) if !first.eq_ignore_ascii_case(h) => return Outcome::NoHost,
                _ => host = Some(h),
            }
        }
    }
    if !ended && !full {
        return Outcome::Wait;
    }
    match host {
        Some(h) if !h.is_empty() => Outcome::Url(write_url(h, path, out)),
        _ if ended => Outcome::NoHost,
        _ => Outcome::GaveUp,
    }
}

/// Where the request whose head [`analyse`] read ends on the stream, so that the next one
/// on the connection is read too (keep-alive, pipelining).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// The head has not ended yet.
    Wait,
    /// The next request starts this many bytes into the stream (the head, then a
    /// `Content-Length` body or none: RFC 9112 §6.3, a request without either has none); it
    /// may lie past what has arrived.
    At(u64),
    /// The head ends this many bytes into the stream and a chunked body follows.
    Chunked(usize),
    /// The request asks to leave HTTP (`CONNECT`, or an `Upgrade` header); the next request,
    /// if any, starts this many bytes into the stream (the head: neither has a body here).
    /// Whether the server agreed shows only in its answer, which the filter does not read: the
    /// bytes after it are read as a request all the same, and only if they are not one is
    /// the connection let go (`flow`).
    Switch(usize),
    /// The head does not end within the window, or its framing is ambiguous — `Content-Length`
    /// twice with different values, or not a number, both `Content-Length` and
    /// `Transfer-Encoding`, or a transfer coding that does not end in `chunked` (RFC 9112
    /// §6.1, §6.3: the server would reject or mis-frame it; request smuggling).
    Unframed,
}

/// The byte offset of the first LF at or after `from`.
fn lf(s: &[u8], from: usize) -> Option<usize> {
    s.get(from..)?.iter().position(|&b| b == b'\n').map(|i| from + i)
}

/// `s[a..b]` without a trailing CR.
fn line_at(s: &[u8], a: usize, b: usize) -> &[u8] {
    let l = s.get(a..b).unwrap_or(&[]);
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// How the request at the start of `s` (empty lines before it skipped, as [`analyse`] does)
/// is framed; `full`: no more bytes will come into the window.
pub(super) fn next_request(s: &[u8], full: bool) -> Next {
    let wait = if full { Next::Unframed } else { Next::Wait };
    let mut at = s.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(s.len());
    let Some(end) = lf(s, at) else { return wait };
    let request_line = line_at(s, at, end);
    let connect = request_line.split(|&b| ws(b)).next().is_some_and(|m| m == b"CONNECT");
    at = end + 1;
    let (mut length, mut chunked, mut coded, mut upgrade) = (None::<u64>, false, false, false);
    loop {
        let Some(end) = lf(s, at) else { return wait };
        let l = line_at(s, at, end);
        at = end + 1;
        if l.is_empty() {
            break;
        }
        let Some(colon) = l.iter().position(|&b| b == b':') else { continue };
        let (name, value) = l.split_at(colon);
        let value = trim(value.get(1..).unwrap_or(&[]));
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = (!value.is_empty() && value.len() <= 18 && value.iter().all(u8::is_ascii_digit))
                .then(|| value.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')));
            match (n, length) {
                (None, _) => return Next::Unframed,
                (Some(n), Some(m)) if n != m => return Next::Unframed,
                (Some(n), _) => length = Some(n),
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            coded = true;
            let last = value.rsplit(|&b| b == b',').next().map(trim).unwrap_or(&[]);
            chunked = last.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade = true;
        }
    }
    if connect || upgrade {
        Next::Switch(at)
    } else if coded && (!chunked || length.is_some()) {
        Next::Unframed
    } else if chunked {
        Next::Chunked(at)
    } else {
        Next::At(at as u64 + length.unwrap_or(0))
    }
}

/// One step through a chunked body (RFC 9112 §7.1), from a chunk-size line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
    /// The chunk-size line is not complete yet.
    Wait,
    /// A chunk: the next chunk-size line starts this many bytes on (past the data; the CRLF
    /// after the data is skipped with the next line's leading line ends).
    Data(u64),
    /// The last chunk (size 0): the trailer section starts this many bytes on.
    Last(usize),
    /// Not a chunk-size line (or the window filled before one ended): undecided.
    Bad,
}

/// Reads the chunk-size line at the start of `s` (line ends before it skipped).
pub(super) fn chunk(s: &[u8], full: bool) -> Chunk {
    let at = s.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(s.len());
    let Some(end) = lf(s, at) else { return if full { Chunk::Bad } else { Chunk::Wait } };
    let l = line_at(s, at, end);
    let digits = l.iter().position(|&b| !b.is_ascii_hexdigit()).unwrap_or(l.len());
    let (size, ext) = l.split_at(digits);
    if size.is_empty() || size.len() > 15 || !ext.first().is_none_or(|&b| b == b';' || ws(b)) {
        return Chunk::Bad;
    }
    let n = size.iter().fold(0u64, |n, &d| n << 4 | u64::from(hex(d).unwrap_or(0)));
    if n == 0 { Chunk::Last(end + 1) } else { Chunk::Data((end + 1) as u64 + n) }
}

/// The length of the trailer section at the start of `s` (up to and including its empty
/// line), `None` if it has not ended yet.
pub(super) fn trailers(s: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let end = lf(s, at)?;
        let empty = line_at(s, at, end).is_empty();
        at = end + 1;
        if empty {
            return Some(at);
        }
    }
}
