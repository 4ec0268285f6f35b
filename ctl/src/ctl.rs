//! The host side of the management channel (docs/PROTOCOL.md, "Management channel").
//!
//! - [`Line`]: one `@ctl` reply line parsed; [`Replies`] gathers them into whole [`Reply`]s.
//! - [`Relay`]: what `cargo xtask run` (and any `cadence_harness::rig::Rig` that asks for it) serves
//!   on a Unix socket: request lines from clients go to the dataplane's management input
//!   (QEMU's COM1 / the hosted build's stdin), every `@ctl` line the dataplane prints goes to
//!   every client.
//! - [`Client`]: `cargo xtask ctl`'s end. It speaks the same lines to a relay or straight to a
//!   QEMU serial socket (`-serial unix:PATH,server=on,wait=off`), where it also sees every
//!   other COM1 line and keeps only its own replies.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

/// The socket `cargo xtask run` serves and `cadence-ctl ctl` connects to by default: this
/// checkout's `target/cadence-ctl.sock`.
pub fn default_socket() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).join("target").join("cadence-ctl.sock")
}

/// One `@ctl` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// `@ctl id=ID | TEXT`.
    Data(String),
    /// `@ctl id=ID ok [TEXT]`.
    Ok(String),
    /// `@ctl id=ID error=NAME msg="TEXT"`.
    Error { name: String, msg: String },
}

/// Parses an `@ctl` line: its id (`None` for `id=-`) and what it says.
pub fn parse_line(line: &str) -> Option<(Option<u32>, Line)> {
    let rest = line.trim_end_matches(['\r', '\n']).strip_prefix("@ctl id=")?;
    let (id, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let id = if id == "-" { None } else { Some(id.parse().ok()?) };
    let l = if let Some(d) = rest.strip_prefix("| ") {
        Line::Data(d.to_string())
    } else if rest == "ok" {
        Line::Ok(String::new())
    } else if let Some(s) = rest.strip_prefix("ok ") {
        Line::Ok(s.to_string())
    } else if let Some(e) = rest.strip_prefix("error=") {
        let (name, msg) = e.split_once(' ').unwrap_or((e, ""));
        let msg = msg.strip_prefix("msg=\"").and_then(|m| m.strip_suffix('"')).unwrap_or(msg);
        Line::Error { name: name.to_string(), msg: msg.to_string() }
    } else {
        return None;
    };
    Some((id, l))
}

/// A whole reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The request's id.
    pub id: u32,
    /// Its data lines, in order.
    pub data: Vec<String>,
    /// `Ok(text)` of the `ok` line, or `Err((name, msg))` of the `error=` line.
    pub result: std::result::Result<String, (String, String)>,
}

impl Reply {
    /// The `ok` text, or an error naming the request's failure.
    pub fn ok(&self) -> Result<&str> {
        match &self.result {
            Ok(s) => Ok(s),
            Err((name, msg)) => bail!("request {} failed: error={name} msg=\"{msg}\"", self.id),
        }
    }

    /// The `error=` name, if it failed.
    pub fn error(&self) -> Option<&str> {
        self.result.as_ref().err().map(|(n, _)| n.as_str())
    }
}

/// Gathers `@ctl` lines into replies.
#[derive(Debug, Default, Clone)]
pub struct Replies {
    partial: BTreeMap<u32, Vec<String>>,
    done: BTreeMap<u32, Reply>,
    /// Errors without an id (`id=-`: a line that was not a request).
    pub anonymous: Vec<(String, String)>,
}

impl Replies {
    /// Feeds one console line (anything not `@ctl` is ignored); returns whether it was one.
    pub fn feed(&mut self, line: &str) -> bool {
        let Some((id, l)) = parse_line(line) else { return false };
        match (id, l) {
            (None, Line::Error { name, msg }) => self.anonymous.push((name, msg)),
            (None, _) => {}
            (Some(id), Line::Data(d)) => self.partial.entry(id).or_default().push(d),
            (Some(id), Line::Ok(s)) => {
                let data = self.partial.remove(&id).unwrap_or_default();
                self.done.insert(id, Reply { id, data, result: Ok(s) });
            }
            (Some(id), Line::Error { name, msg }) => {
                let data = self.partial.remove(&id).unwrap_or_default();
                self.done.insert(id, Reply { id, data, result: Err((name, msg)) });
            }
        }
        true
    }

    /// Takes the finished reply to `id`, if it is there.
    pub fn take(&mut self, id: u32) -> Option<Reply> {
        self.done.remove(&id)
    }
}

/// A request line for `cmd` with id `id`.
pub fn request(id: u32, cmd: &str) -> Result<String> {
    let cmd = cmd.trim();
    if cmd.contains(['\n', '\r']) {
        bail!("a management command is one line");
    }
    Ok(format!("ctl {id} {cmd}\n"))
}

/// A fresh random 128-bit key (from the OS): the rig's control key for each image it boots,
/// and the source of request ids.
pub fn random_ctl_key() -> [u8; 16] {
    let mut k = [0u8; 16];
    // getrandom via std: a RandomState hash of two values is not a key; read the OS pool.
    if let Ok(mut f) = std::fs::File::open("/dev/urandom")
        && f.read_exact(&mut k).is_ok()
    {
        return k;
    }
    // No /dev/urandom: derive one from the clock and the process (tests only need
    // distinct keys, not secret ones).
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    k[..8].copy_from_slice(&(t as u64).to_le_bytes());
    k[8..].copy_from_slice(&(u64::from(std::process::id()) ^ (t >> 64) as u64).to_le_bytes());
    k
}

/// A fresh request id (random, so several clients rarely collide).
pub fn fresh_id() -> u32 {
    let k = random_ctl_key();
    u32::from_le_bytes([k[0], k[1], k[2], k[3]]) % 1_000_000_000 + 1
}

/// `cargo xtask run`'s side: a Unix socket whose clients' request lines go to the
/// dataplane, and which sends them every `@ctl` line.
#[derive(Debug)]
pub struct Relay {
    listener: UnixListener,
    path: PathBuf,
    clients: Vec<(UnixStream, Vec<u8>)>,
}

impl Relay {
    /// Listens on `path` (a stale socket file there is replaced).
    pub fn bind(path: &Path) -> Result<Relay> {
        if path.exists() {
            std::fs::remove_file(path).with_context(|| format!("removing the stale socket {}", path.display()))?;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let listener = UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
        listener.set_nonblocking(true)?;
        Ok(Relay { listener, path: path.to_path_buf(), clients: Vec::new() })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts new clients and returns the request lines they sent (whole lines only; at
    /// most 64 KiB buffered per client, a client past that is dropped).
    pub fn poll(&mut self) -> Vec<String> {
        while let Ok((s, _)) = self.listener.accept() {
            if s.set_nonblocking(true).is_ok() {
                self.clients.push((s, Vec::new()));
            }
        }
        let mut lines = Vec::new();
        self.clients.retain_mut(|(s, buf)| {
            let mut chunk = [0u8; 4096];
            loop {
                match s.read(&mut chunk) {
                    Ok(0) => return false,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => return false,
                }
            }
            while let Some(at) = buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = buf.drain(..=at).collect();
                lines.push(String::from_utf8_lossy(&line).trim_end().to_string());
            }
            buf.len() < 64 * 1024
        });
        lines
    }

    /// Sends a dataplane line to every client (a client that cannot take it is dropped).
    pub fn broadcast(&mut self, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.clients.retain_mut(|(s, _)| {
            let _ = s.set_nonblocking(false);
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let ok = s.write_all(&bytes).is_ok();
            let _ = s.set_nonblocking(true);
            ok
        });
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `cargo xtask ctl`'s end of a relay or QEMU serial socket.
#[derive(Debug)]
pub struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    replies: Replies,
}

impl Client {
    /// Connects to `path`.
    pub fn connect(path: &Path) -> Result<Client> {
        let s = UnixStream::connect(path).with_context(|| {
            format!(
                "connecting to {} (is `cargo xtask run` running? an image started by hand needs \
                 `-serial unix:{},server=on,wait=off`)",
                path.display(),
                path.display()
            )
        })?;
        let reader = BufReader::new(s.try_clone()?);
        Ok(Client { writer: s, reader, replies: Replies::default() })
    }

    /// Sends `cmd` and waits at most `timeout` for its whole reply.
    pub fn request(&mut self, cmd: &str, timeout: Duration) -> Result<Reply> {
        let id = fresh_id();
        self.writer.write_all(request(id, cmd)?.as_bytes())?;
        let deadline = Instant::now() + timeout;
        let mut line = String::new();
        loop {
            if let Some(r) = self.replies.take(id) {
                return Ok(r);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(anyhow!("no reply to `{cmd}` within {timeout:?}"));
            }
            self.reader.get_ref().set_read_timeout(Some(left))?;
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) => bail!("the dataplane's management channel closed"),
                Ok(_) => {
                    self.replies.feed(&line);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_lines_parse_and_gather() {
        let mut r = Replies::default();
        for l in [
            "@ctl id=7 | default=permit rules=1",
            "@stats t_ms=3 p0_rx=1",
            "@ctl id=8 error=not_found msg=\"acl: no rule 4\"",
            "@ctl id=7 | rule 0 prio:1,src:any",
            "@ctl id=- error=bad_request msg=\"a request is: ctl ID COMMAND\"",
            "@ctl id=7 ok",
        ] {
            r.feed(l);
        }
        let seven = r.take(7).unwrap();
        assert_eq!(seven.data, ["default=permit rules=1", "rule 0 prio:1,src:any"]);
        assert_eq!(seven.ok().unwrap(), "");
        let eight = r.take(8).unwrap();
        assert_eq!(eight.error(), Some("not_found"));
        assert!(eight.ok().unwrap_err().to_string().contains("acl: no rule 4"));
        assert_eq!(r.anonymous, [("bad_request".to_string(), "a request is: ctl ID COMMAND".to_string())]);
        assert_eq!(
            parse_line("@ctl id=3 ok rule=2 generation=1"),
            Some((Some(3), Line::Ok("rule=2 generation=1".into())))
        );
        assert_eq!(parse_line("@ctl id=x ok"), None);
        assert!(request(1, "stats\nstop").is_err());
        assert_eq!(request(5, " show acl ").unwrap(), "ctl 5 show acl\n");
    }

    #[test]
    fn a_relay_passes_requests_in_and_replies_out() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("cadence-relay-{}", std::process::id()));
        let path = dir.join("ctl.sock");
        let mut relay = Relay::bind(&path)?;
        let mut client = UnixStream::connect(&path)?;
        client.write_all(b"ctl 1 stats\nctl 2 sh")?;
        let t = Instant::now();
        let mut got = Vec::new();
        while got.is_empty() && t.elapsed() < Duration::from_secs(5) {
            got = relay.poll();
        }
        assert_eq!(got, ["ctl 1 stats"]);
        relay.broadcast("@ctl id=1 ok");
        let mut line = String::new();
        BufReader::new(client.try_clone()?).read_line(&mut line)?;
        assert_eq!(line, "@ctl id=1 ok\n");
        drop(relay);
        assert!(!path.exists());
        let _ = std::fs::remove_dir(&dir);
        Ok(())
    }
}
