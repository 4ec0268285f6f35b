//! The URL filter as an attacker meets it (issue 34): the hosted dataplane (the URL filter
//! alone, `reset = true`, port 80 declared HTTP) between a client and a real HTTP server,
//! each in a network namespace of its own:
//!
//! ```text
//!  netns …c (client, kernel TCP)   netns cad… (hosted dataplane, AF_XDP)   netns …s (server)
//!  10.77.0.1  ════════════════════ port 0        port 1 ═══════════════════ 10.77.0.2:80
//! ```
//!
//! The server is Python's `http.server` speaking HTTP/1.1 (keep-alive), logging every request
//! it parsed (`tests/evasion/server.py`); the client (`tests/evasion/client.py`) sends each
//! variant's bytes over its own connection, one segment per chunk. The dataplane answers no
//! ARP, so both hosts have static neighbours; the veths' checksum and segmentation offloads
//! are off, so the segments on the wire carry full checksums, as on a real link.
//!
//! Then the variants a kernel TCP client cannot send, from `tests/evasion/raw.py`, which speaks
//! TCP itself over raw frames from an address the client's kernel does not own: the banned
//! request's segments in reverse order; conflicting overlaps either way (a second copy of
//! bytes the server already has, and an out-of-order copy the server replaces with the
//! in-order one); insertion of a harmless request's rest with a bad TCP checksum or without
//! ACK (segments the server discards), followed by the real bytes; the request in one
//! segment carried by two IPv4 fragments; and two must-pass controls (in order, reordered).
//! Checked to have teeth: passing fragments, reading segments with a bad checksum or without
//! ACK, or ignoring conflicting overlaps each shows up as a bypass of its variant.
//!
//! The kernel-TCP variants run under a spoofed SYN flood of 2 500 SYNs/s from random addresses
//! (`tests/evasion/flood.py`): the dataplane's counters must show the flood went through the
//! filter without taking a slab or the flow table from anyone.
//!
//! Each variant is a must-block or a must-pass with its reason. A must-block passes when the
//! server never logged its marker (the banned request never reached it — the filter may also
//! stop the connection's earlier requests); a must-pass when the server answered and logged
//! it. A variant the server would not answer as a banned URL is a must-pass or left out: only
//! what the server would serve counts as a bypass.
//!
//! The image runs the same suite (`the_image_stops_every_spelling_of_a_banned_url_before_a_real_server`):
//! the firmware under QEMU (TCG) with virtio-net on tap interfaces moved into the two
//! namespaces, the same chain, flood, variants and counters.
//!
//! Timeouts are hang guards; nothing asserts on time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::hosts::{Dataplane, Kill, Netns, counter, ip, run};
use cadence_harness::netns::{IP, VethPairs};
use cadence_tests::mac_text;

const CLIENT: &str = "10.77.0.1";
const SERVER: &str = "10.77.0.2";

/// One request variant: its name (a marker that appears in the banned request's target), its
/// chunks (one segment each), whether the banned request must be stopped, and why.
struct Variant {
    name: &'static str,
    chunks: Vec<Vec<u8>>,
    block: bool,
    why: &'static str,
}

fn get(target: &str, host: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes()
}

fn v(name: &'static str, block: bool, why: &'static str, chunks: Vec<Vec<u8>>) -> Variant {
    Variant { name, chunks, block, why }
}

/// One chunk.
fn one(b: &[u8]) -> Vec<Vec<u8>> {
    vec![b.to_vec()]
}

fn variants() -> Vec<Variant> {
    let h = "h.example";
    let good = get("/good", h);
    let chunked = b"POST /good HTTP/1.1\r\nHost: h.example\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n";
    let cookie = "c".repeat(600);
    vec![
        v("v01", true, "the banned path as is", one(&get("/bad/v01", h))),
        v("v02", true, "percent-encoded letter", one(&get("/%62ad/v02", h))),
        v("v03", true, "percent-encoded letter inside", one(&get("/b%61d/v03", h))),
        v("v04", true, "repeated slash", one(&get("//bad/v04", h))),
        v("v05", true, "dot segment", one(&get("/./bad/v05", h))),
        v("v06", true, "dot-dot segment", one(&get("/x/../bad/v06", h))),
        v("v07", true, "encoded dot-dot", one(&get("/x/%2e%2e/bad/v07", h))),
        v("v08", true, "encoded dot", one(&get("/%2e/bad/v08", h))),
        v("v09", true, "bare LF line ends (RFC 9112 2.2)", one(b"GET /bad/v09 HTTP/1.1\nHost: h.example\n\n")),
        v("v10", true, "tabs in the request line", one(b"GET\t/bad/v10\tHTTP/1.1\r\nHost: h.example\r\n\r\n")),
        v("v11", true, "runs of spaces", one(b"GET  /bad/v11   HTTP/1.1\r\nHost: h.example\r\n\r\n")),
        v("v12", true, "empty lines before the request", one(b"\r\n\r\nGET /bad/v12 HTTP/1.1\r\nHost: h.example\r\n\r\n")),
        v("v13", true, "absolute-form names the host", one(&get("http://h.example/bad/v13", "other.example"))),
        v("v14", true, "host in capitals", one(&get("/bad/v14", "H.EXAMPLE"))),
        v("v15", true, "host with a trailing dot and a port", one(&get("/bad/v15", "h.example.:80"))),
        v("v16", true, "keep-alive: second request", vec![good.clone(), get("/bad/v16", h)]),
        v("v17", true, "pipelined: both in one segment", one(&[good.clone(), get("/bad/v17", h)].concat())),
        v(
            "v18",
            true,
            "after a Content-Length body",
            vec![b"GET /good HTTP/1.1\r\nHost: h.example\r\nContent-Length: 0\r\n\r\n".to_vec(), get("/bad/v18", h)],
        ),
        v("v19", true, "after a chunked body", vec![chunked.to_vec(), get("/bad/v19", h)]),
        v("v20", true, "one byte per segment", get("/bad/v20", h).chunks(1).map(<[u8]>::to_vec).collect()),
        v("v21", true, "split inside the path", get("/bad/v21", h).chunks(7).map(<[u8]>::to_vec).collect()),
        v("v22", true, "a banned host", one(&get("/v22", "evil.example"))),
        v("v23", true, "a banned host in mixed case", one(&get("/v23", "EVIL.Example"))),
        v(
            "v24",
            true,
            "Host after other headers",
            one(b"GET /bad/v24 HTTP/1.1\r\nAccept: */*\r\nUser-Agent: x\r\nX-A: 1\r\nHost: h.example\r\n\r\n"),
        ),
        v("v25", true, "absolute-form names a banned host", one(&get("http://evil.example/v25", "ok.example"))),
        v("v26", true, "spaces around the host", one(b"GET /bad/v26 HTTP/1.1\r\nHost:    h.example   \r\n\r\n")),
        v("v27", true, "with a query", one(&get("/bad/v27?x=1", h))),
        v("v28", true, "HEAD", one(b"HEAD /bad/v28 HTTP/1.1\r\nHost: h.example\r\n\r\n")),
        v("v29", true, "encoded slash", one(&get("/bad%2fv29", h))),
        v("v30", true, "backslashes (read as slashes)", one(&get("\\bad\\v30", h))),
        v(
            "v31",
            true,
            "Content-Length with Transfer-Encoding (smuggling): undecided",
            one(b"POST /good HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /bad/v31 HTTP/1.1\r\nHost: h.example\r\n\r\n"),
        ),
        v(
            "v32",
            true,
            "two different Host headers: undecided",
            one(b"GET /bad/v32 HTTP/1.1\r\nHost: ok.example\r\nHost: h.example\r\n\r\n"),
        ),
        v(
            "v33",
            true,
            "after an Upgrade the server ignored",
            vec![
                b"GET /good HTTP/1.1\r\nHost: h.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".to_vec(),
                get("/bad/v33", h),
            ],
        ),
        v("v34", true, "HTTP/1.0 with Host", one(b"GET /bad/v34 HTTP/1.0\r\nHost: h.example\r\n\r\n")),
        v(
            "v35",
            true,
            "a long header before Host",
            one(format!("GET /bad/v35 HTTP/1.1\r\nCookie: {cookie}\r\nHost: h.example\r\n\r\n").as_bytes()),
        ),
        v("v36", true, "encoded dot-dot in capitals", one(&get("/x/%2E%2E/bad/v36", h))),
        v("v37", true, "with a fragment", one(&get("/bad/v37#f", h))),
        v("v38", true, "host with a port", one(&get("/bad/v38", "h.example:8080"))),
        v("v39", true, "keep-alive: third request", vec![good.clone(), good.clone(), get("/bad/v39", h)]),
        v("v40", true, "the head's last line end alone", {
            let r = get("/bad/v40", h);
            vec![r[..r.len() - 2].to_vec(), b"\r\n".to_vec()]
        }),
        v("v41", true, "dot-dot above the root", one(&get("/../../bad/v41", h))),
        v(
            "v42",
            true,
            "after a body that reads like a request line",
            vec![
                b"POST /good HTTP/1.1\r\nHost: h.example\r\nContent-Length: 12\r\n\r\nGET /x HTTP/".to_vec(),
                get("/bad/v42", h),
            ],
        ),
        v("p01", false, "an allowed path", one(&get("/good?p01", h))),
        v("p02", false, "dot-dot back to an allowed path", one(&get("/good/../good?p02", h))),
        v("p03", false, "dot-dot out of the banned path", one(&get("/bad/../good?p03", h))),
        v("p04", false, "the banned path in the query", one(&get("/x?/bad/p04", h))),
        v("p05", false, "paths are case-sensitive", one(&get("/BAD/p05", h))),
        v("p06", false, "decoded once: %25 is a percent sign", one(&get("/%2562ad/p06", h))),
        v("p07", false, "another host", one(&get("/bad/p07", "other.example"))),
        v("p08", false, "a host that only starts like a banned one", one(&get("/p08", "evil.example.org"))),
        v("p09", false, "keep-alive: two allowed requests", vec![get("/good?p09a", h), get("/good?p09", h)]),
        v("p10", false, "a chunked POST, then an allowed request", vec![chunked.to_vec(), get("/good?p10", h)]),
    ]
}

/// Moves a host end into `ns` as a host at `addr` that reaches `peer` at `peer_mac`,
/// offloads off (full checksums and MTU-sized segments on the wire).
fn host(ns: &str, ifname: &str, addr: &str, peer: &str, peer_mac: &str) -> Result<()> {
    ip(&["link", "set", ifname, "netns", ns])?;
    ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", ifname])?;
    ip(&["-n", ns, "link", "set", ifname, "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    ip(&["-n", ns, "neigh", "replace", peer, "lladdr", peer_mac, "dev", ifname, "nud", "permanent"])?;
    run(Command::new(IP).args(["netns", "exec", ns, "ethtool", "-K", ifname, "tx", "off", "tso", "off", "gso", "off"]))
        .map(|_| ())
}

/// The chain both runs use: the URL filter alone, resets on, port 80 declared HTTP.
const EVASION_TOML: &str = "[chain]\nnfs = [\"urlfilter\"]\n\n[urlfilter]\nbanned = [\"h.example/bad\", \"evil.example\"]\n\
     reset = true\nports = [80]\nflows = 4096\nslabs = 256\n";

/// The raw-frame client's address: one the client's kernel does not own, so it neither
/// answers nor resets the server's segments to it.
const RAW_CLIENT: &str = "10.77.0.9";

/// The variants `tests/evasion/raw.py` sends as raw frames (what a kernel TCP client cannot
/// send): name, must-block, why. Each is its own connection; the banned ones carry
/// `/bad/NAME` on host h.example, the others `/good?NAME`.
const RAW_VARIANTS: [(&str, bool, &str); 8] = [
    ("raw_in_order_good", false, "control: the raw client's own request, in order"),
    ("raw_reordered_good", false, "segments out of order are reassembled, not refused"),
    ("raw_out_of_order", true, "the banned request's segments in reverse order"),
    ("raw_overlap_first_wins", true, "a second copy of bytes 6..20 says otherwise; the server keeps the first"),
    ("raw_overlap_ooo", true, "a queued out-of-order copy of 6..20 says otherwise; the server keeps the in-order one"),
    ("raw_insert_bad_checksum", true, "a harmless request's rest with a bad TCP checksum, which the server discards"),
    ("raw_insert_no_ack", true, "a harmless request's rest without ACK, which the server discards"),
    ("raw_ip_fragments", true, "the banned request in one segment carried by two IPv4 fragments"),
];

/// A counter of the dataplane's `@summary` by name, and the line itself.
type Summary = (String, Box<dyn Fn(&str) -> Result<u64>>);

/// The client's and the server's sides once the dataplane forwards between them: their
/// namespaces, their interfaces, and the two interfaces' MACs (`aa:bb:…`).
struct Sides<'a> {
    cli: &'a str,
    srv: &'a str,
    if_c: &'a str,
    if_s: &'a str,
    cmac: &'a str,
    smac: &'a str,
}

/// The suite over a dataplane that forwards between the two sides: the server, the flood,
/// every variant; `stop` ends the dataplane's run and returns its `@summary`.
fn suite(s: &Sides<'_>, out: &Path, stop: &mut dyn FnMut() -> Result<Summary>) -> Result<()> {
    let root = image::workspace_root();
    // The server: a directory with one file, `good`.
    let www = out.join("www");
    std::fs::create_dir_all(&www)?;
    std::fs::write(www.join("good"), "good\n")?;
    let server_log = out.join("server.log");
    let server = Kill(
        Command::new(IP)
            .args(["netns", "exec", s.srv, "python3"])
            .arg(root.join("tests/evasion/server.py"))
            .arg(&www)
            .args([SERVER, "80"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&server_log)?)
            .spawn()
            .context("starting python3 http.server")?,
    );
    wait_for_server(s.cli, &server_log)?;

    // A spoofed SYN flood (2 500/s) from the client's side for the whole run: legitimate
    // connections must still be read and served.
    let mut flood = Kill(
        Command::new(IP)
            .args(["netns", "exec", s.cli, "python3"])
            .arg(root.join("tests/evasion/flood.py"))
            .args([s.if_c, s.cmac, s.smac, SERVER, "2500"])
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the SYN flood")?,
    );
    std::thread::sleep(Duration::from_secs(1));

    // The client: every variant on its own connection, in parallel.
    let vs = variants();
    let list: String = vs
        .iter()
        .map(|v| {
            let hex: Vec<String> = v.chunks.iter().map(|c| c.iter().map(|b| format!("{b:02x}")).collect()).collect();
            format!("{} {}\n", v.name, hex.join(" "))
        })
        .collect();
    let list_file = out.join("variants.txt");
    std::fs::write(&list_file, list)?;
    let client = Command::new(IP)
        .args(["netns", "exec", s.cli, "python3"])
        .arg(root.join("tests/evasion/client.py"))
        .arg(&list_file)
        .args([SERVER, "80"])
        .output()
        .context("running the client")?;
    if !client.status.success() {
        bail!("the client failed: {}", String::from_utf8_lossy(&client.stderr));
    }
    let mut results = String::from_utf8_lossy(&client.stdout).to_string();
    // SAFETY: kill(2) with a child's PID (still ours: not waited for) and SIGTERM, which the
    // flood script catches to print its count.
    unsafe { libc::kill(flood.0.id() as libc::pid_t, libc::SIGTERM) };
    let mut count = String::new();
    if let Some(o) = flood.0.stdout.as_mut() {
        std::io::Read::read_to_string(o, &mut count)?;
    }
    let flooded: u64 = count.trim().parse().context("the flood's count")?;
    // The raw-frame variants, after the flood (their connections run one after another, and
    // the flood's length stays that of the kernel-TCP variants), one connection each, from an address the client's
    // kernel does not own (the server reaches it through a static neighbour).
    ip(&["-n", s.srv, "neigh", "replace", RAW_CLIENT, "lladdr", s.cmac, "dev", s.if_s, "nud", "permanent"])?;
    let raw = Command::new(IP)
        .args(["netns", "exec", s.cli, "python3"])
        .arg(root.join("tests/evasion/raw.py"))
        .args([s.if_c, s.cmac, s.smac, RAW_CLIENT, SERVER])
        .args(RAW_VARIANTS.iter().map(|v| v.0))
        .output()
        .context("running the raw-frame client")?;
    if !raw.status.success() {
        bail!("the raw-frame client failed: {}", String::from_utf8_lossy(&raw.stderr));
    }
    results.push_str(&String::from_utf8_lossy(&raw.stdout));
    std::fs::write(out.join("client.out"), &results)?;
    // The dataplane's own count of what it saw.
    let (summary, key) = stop()?;
    std::fs::write(out.join("summary.txt"), &summary)?;
    drop(server);
    let log = std::fs::read_to_string(&server_log)?;

    let mut failures = Vec::new();
    let raw_variants = RAW_VARIANTS.iter().map(|&(name, block, why)| Variant { name, chunks: Vec::new(), block, why });
    let all: Vec<Variant> = raw_variants.chain(vs).collect();
    for v in &all {
        let line = results.lines().find(|l| l.split('\t').next() == Some(v.name)).unwrap_or("");
        let statuses: usize = line.split('\t').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let reached = log.lines().any(|l| l.starts_with("REQ ") && l.contains(v.name));
        if v.block && reached {
            failures.push(format!("BYPASS {} ({}): the server logged it; client: {line}", v.name, v.why));
        }
        if !v.block && (!reached || statuses == 0) {
            failures.push(format!("NOT SERVED {} ({}): client: {line}", v.name, v.why));
        }
    }
    // The flood went through the filter (each spoofed SYN a short-lived handshake entry, no
    // slab), and never cost a legitimate connection its inspection.
    assert!(flooded >= 2500, "the flood sent {flooded} SYNs");
    assert!(key("urlfilter_handshakes")? >= flooded / 2, "flooded {flooded}: {summary}");
    // The table never ran out of capacity or stalled an add; a SYN whose bucket held seven
    // live entries is the single-bucket hash's luck (about 10⁻⁶ per SYN at this flood's half
    // an entry per bucket), not the flood taking the table, and stays rare.
    let full = ["urlfilter_slab_exhausted", "urlfilter_full_capacity", "urlfilter_full_busy"];
    for k in full {
        assert_eq!(key(k)?, 0, "{k}: {summary}");
    }
    assert!(key("urlfilter_full_bucket")? <= flooded / 1000, "{summary}");
    let blocked = all.iter().filter(|v| v.block).count();
    assert!(blocked >= 46 && all.len() - blocked >= 11, "the suite keeps its size");
    if !failures.is_empty() {
        bail!(
            "{} of {} variants failed:\n{}\nserver log:\n{log}\n(artifacts in {})",
            failures.len(),
            all.len(),
            failures.join("\n"),
            out.display()
        );
    }
    Ok(())
}

/// One dataplane at a time: each run brings its own (the hosted one, or QEMU under TCG) and
/// a flood onto a 2-CPU machine.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn the_url_filter_stops_every_spelling_of_a_banned_url_before_a_real_server() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !cadence_harness::netns::can_create() {
        bail!("the evasion suite needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_evasion_tools()?;
    let bin = image::build_hosted(Profile::Release)?;
    let out = cadence_tests::out_dir("urlfilter_evasion");
    std::fs::create_dir_all(&out)?;
    let veths = VethPairs::create(1)?;
    let cli = Netns::new(format!("{}c", veths.netns))?;
    let srv = Netns::new(format!("{}s", veths.netns))?;
    let (cmac, smac) = (mac_text(veths.mac_of(false, 0)?), mac_text(veths.mac_of(false, 1)?));
    host(&cli.0, &veths.host[0], CLIENT, SERVER, &smac)?;
    host(&srv.0, &veths.host[1], SERVER, CLIENT, &cmac)?;
    for i in 0..2 {
        run(Command::new(IP).args(["netns", "exec", &veths.netns, "ethtool", "-K", &veths.dut[i], "tx", "off"]))?;
    }
    let toml = out.join("evasion.toml");
    std::fs::write(&toml, EVASION_TOML)?;
    let chain = out.join("evasion.chain");
    std::fs::write(&chain, cadence_ctl::chain::load(&toml)?.text)?;
    let peers = [format!("peer0={cmac}"), format!("peer1={smac}")];
    let mut dp = Some(Dataplane::start(&bin, &veths, &chain, &peers, &out.join("dataplane.stderr"))?);
    let sides =
        Sides { cli: &cli.0, srv: &srv.0, if_c: &veths.host[0], if_s: &veths.host[1], cmac: &cmac, smac: &smac };
    // SIGINT ends the run as STOP does.
    suite(&sides, &out, &mut || {
        let summary = dp.take().ok_or_else(|| anyhow!("stopped twice"))?.stop()?;
        let text = summary.clone();
        Ok((summary, Box::new(move |k: &str| counter(&text, k))))
    })
}

/// The same suite through the image: the firmware under QEMU (TCG) with virtio-net on tap
/// interfaces, which are moved into the client's and the server's namespaces (with the
/// MACs the image's `peer0` / `peer1` name) once QEMU has made them; the run is ended by a
/// signed STOP control frame sent from the client's side.
#[test]
fn the_image_stops_every_spelling_of_a_banned_url_before_a_real_server() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !cadence_harness::netns::can_create() {
        bail!("the evasion suite needs root and iproute2 (network namespaces); CI runs as root");
    }
    cadence_build::provision::ensure_evasion_tools()?;
    let chain_dir = cadence_tests::out_dir("urlfilter_evasion_image_chain");
    std::fs::create_dir_all(&chain_dir)?;
    let toml = chain_dir.join("evasion.toml");
    std::fs::write(&toml, EVASION_TOML)?;
    let text = cadence_ctl::chain::load(&toml)?.text;
    let (mut rig, [if_c, if_s]) = cadence_tests::start_on_taps("urlfilter_evasion_image", text)?;
    let (if_c, if_s) = (&if_c, &if_s);
    let out = rig.out_dir.clone();
    let macs = rig.checker().macs();
    let (cmac, smac) = (mac_text(macs.peer[0].0), mac_text(macs.peer[1].0));
    let pid = std::process::id();
    let cli = Netns::new(format!("cadurl{pid}c"))?;
    let srv = Netns::new(format!("cadurl{pid}s"))?;
    // The image sends port i's frames to peer{i}: the taps take those MACs.
    for (ifname, m) in [(if_c, &cmac), (if_s, &smac)] {
        ip(&["link", "set", ifname, "address", m])?;
    }
    host(&cli.0, if_c, CLIENT, SERVER, &smac)?;
    host(&srv.0, if_s, SERVER, CLIENT, &cmac)?;
    let sides = Sides { cli: &cli.0, srv: &srv.0, if_c, if_s, cmac: &cmac, smac: &smac };
    suite(&sides, &out, &mut || {
        // STOP from the client's side (the rig's own socket on the tap no longer sees it).
        let fw = cadence_tests::stop_from_netns(&mut rig, &cli.0, if_c)?;
        Ok((format!("{fw:?}"), Box::new(move |k: &str| fw.require(k))))
    })
}

/// Waits until the server answers (a plain request from the client namespace, through the
/// dataplane), so the variants do not race its start.
fn wait_for_server(cli: &str, log: &Path) -> Result<()> {
    let probe = "import socket,sys\ns=socket.create_connection((sys.argv[1],80),timeout=2)\n\
                 s.sendall(b'GET /good?probe HTTP/1.1\\r\\nHost: h.example\\r\\n\\r\\n')\nprint(s.recv(100)[:12])";
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let out = Command::new(IP).args(["netns", "exec", cli, "python3", "-c", probe, SERVER]).output()?;
        if out.status.success() && String::from_utf8_lossy(&out.stdout).contains("HTTP/1.1") {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!(
        "the server never answered through the dataplane; its log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    )
}
