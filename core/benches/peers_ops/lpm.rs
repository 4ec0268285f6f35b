//! The LPM figures of `peers` (`lpm`, `lpm6`): Cadence's IPv4 structures and `Lpm6` over the
//! route and address files `dpdk-test-fib` wrote, timed as it times `rte_fib_lookup_bulk`.

use std::hint::black_box;

use super::common::tsc::rdtsc;
use super::report;

/// Lookups per burst of the LPM figure: `dpdk-test-fib`'s `BURST_SZ`.
const LPM_BURST: usize = 64;

/// Cycles per IPv4 longest-prefix lookup with the route and address files `dpdk-test-fib`
/// wrote (`-w`, `-u`: `a.b.c.d/len next-hop` and `a.b.c.d` lines), measured as it measures
/// `rte_fib_lookup_bulk`: one pass over the addresses right after the build, in bursts of
/// [`LPM_BURST`], `rdtsc` around each burst. Four structures, each built from the same routes
/// and timed in turn: `lpm4` (`Lpm4` with a 24-bit first level: DIR-24-8 as `rte_fib`'s `dir`),
/// `lpm4_s16` (`Lpm4` with the L3 forwarder's 16-bit first level), `lpm4_pop16` and
/// `lpm4_pop18` (`Poptrie4` with a 16- and an 18-bit direct array). More passes go to a `PEERINFO` line (warm
/// figures, for reading only), with the bytes each structure's lookups read and its build time.
pub fn lpm(routes: &str, ips: &str, label: &str) -> Result<(), String> {
    use cadence_core::pna::lpm::{Lpm4, LpmConfig, MAX_NEXT_HOP};
    use cadence_core::pna::poptrie::Poptrie4;
    let addr = |s: &str| s.parse::<std::net::Ipv4Addr>().map(u32::from).map_err(|e| format!("{s:?}: {e}"));
    let list = read_routes(routes, addr, MAX_NEXT_HOP)?;
    let keys: Vec<u32> = read_addrs(ips, addr)?;
    let keys = &keys[..keys.len() / LPM_BURST * LPM_BURST];
    if keys.is_empty() {
        return Err(format!("{ips}: fewer than {LPM_BURST} addresses"));
    }
    // One pass in bursts; the first right after the build is the figure, three more are shown.
    let measure = |op: &str, built_ms: f64, bytes: usize, burst: &BurstFn<'_>| {
        let mut out = [None; LPM_BURST];
        let mut pass = || {
            let mut spent = 0;
            for b in keys.chunks_exact(LPM_BURST) {
                let t0 = rdtsc();
                burst(black_box(b), &mut out);
                spent += rdtsc() - t0;
                black_box(&out);
            }
            spent as f64 / keys.len() as f64
        };
        let first = pass();
        let warm: Vec<String> = (0..3).map(|_| format!("{:.1}", pass())).collect();
        report(op, label, vec![first], keys.len());
        println!(
            "PEERINFO impl=cadence op={op} size={label} routes={} lookups={} lookup_bytes={bytes} build_ms={built_ms:.1} warm_passes={}",
            list.len(),
            keys.len(),
            warm.join(",")
        );
    };
    // Route changes while the table is full: UPDATES routes not in the set (lengths drawn from
    // the set's), each added then deleted; microseconds per change, median and largest.
    const UPDATES: usize = 200;
    let present: std::collections::HashSet<(u32, u8)> =
        list.iter().map(|&(a, l, _)| (a & (u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0)), l)).collect();
    let mut fresh = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while fresh.len() < UPDATES && !list.is_empty() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let l = list[(x % list.len() as u64) as usize].1;
        let p = (x >> 32) as u32 & u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0);
        if !present.contains(&(p, l)) && !fresh.iter().any(|&(q, m, _)| (q, m) == (p, l)) {
            fresh.push((p, l, (x % 1000) as u32));
        }
    }
    let changes = |op: &str,
                   add: &mut dyn FnMut(u32, u8, u32) -> Result<(), String>,
                   del: &mut dyn FnMut(u32, u8) -> Result<(), String>| {
        let (mut adds, mut dels) = (Vec::new(), Vec::new());
        for &(p, l, nh) in &fresh {
            let t0 = std::time::Instant::now();
            add(p, l, nh)?;
            adds.push(t0.elapsed().as_secs_f64() * 1e6);
            let t0 = std::time::Instant::now();
            del(p, l)?;
            dels.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        let stat = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v.get(v.len() / 2).copied().unwrap_or(0.0), v.last().copied().unwrap_or(0.0))
        };
        let ((am, ax), (dm, dx)) = (stat(&mut adds), stat(&mut dels));
        println!(
            "PEERINFO impl=cadence op={op} size={label} changes={} add_us_median={am:.1} add_us_max={ax:.1} delete_us_median={dm:.1} delete_us_max={dx:.1}",
            fresh.len()
        );
        Ok::<(), String>(())
    };
    // After a build: the figure, every answer (one by one and in a burst), the changes.
    let finish = |op: &str, ms: f64, t: &mut dyn BenchLpm4, answers: &mut Vec<Vec<Option<u32>>>| {
        measure(op, ms, t.bytes(), &|k, o| t.burst(k, o));
        answers.push(keys.iter().map(|&a| t.one(a)).collect());
        let mut burst = vec![None; keys.len()];
        t.burst(keys, &mut burst);
        answers.push(burst);
        let t = std::cell::RefCell::new(t);
        changes(
            op,
            &mut |p, l, nh| t.borrow_mut().add(p, l, nh).map_err(|e| format!("{op} add: {e:?}")),
            &mut |p, l| t.borrow_mut().delete(p, l).map_err(|e| format!("{op} delete: {e:?}")),
        )
    };
    let mut answers: Vec<Vec<Option<u32>>> = Vec::new();
    for (stride, op) in [(24u8, "lpm4"), (16, "lpm4_s16")] {
        let t0 = std::time::Instant::now();
        // The groups the routes need: one per distinct prefix at each level boundary that a
        // longer route crosses.
        let mut need = std::collections::HashSet::new();
        for &(a, len, _) in &list {
            for b in (u32::from(stride)..32).step_by(8).filter(|&b| u32::from(len) > b) {
                need.insert((b, a >> (32 - b)));
            }
        }
        let mut cfg = LpmConfig::ipv4(need.len() + 2 * UPDATES + 1);
        cfg.first_stride = stride;
        let mut t = Lpm4::try_new(cfg).map_err(|e| format!("{e:?}"))?;
        for &(a, len, nh) in &list {
            t.add(a, len, nh).map_err(|e| format!("route {a:#x}/{len}: {e:?}"))?;
        }
        finish(op, t0.elapsed().as_secs_f64() * 1e3, &mut t, &mut answers)?;
    }
    for (bits, op) in [(16u8, "lpm4_pop16"), (18, "lpm4_pop18"), (24, "lpm4_pop24")] {
        let t0 = std::time::Instant::now();
        let mut t = Poptrie4::build(bits, &list).map_err(|e| format!("{op}: {e:?}"))?;
        finish(op, t0.elapsed().as_secs_f64() * 1e3, &mut t, &mut answers)?;
    }
    // Every structure gives every address the same next hop, one by one and in bursts (the
    // figures are of the same work).
    if let Some(i) = answers.iter().position(|a| *a != answers[0]) {
        return Err(format!("structure {} ({}) answers differently from DIR-24-8", i / 2, ["lookup", "burst"][i % 2]));
    }
    Ok(())
}

/// An LPM structure's burst lookup, as [`lpm`] times it.
type BurstFn<'a> = dyn Fn(&[u32], &mut [Option<u32>]) + 'a;

/// What [`lpm`] asks of each IPv4 structure.
trait BenchLpm4 {
    fn one(&self, a: u32) -> Option<u32>;
    fn burst(&self, a: &[u32], out: &mut [Option<u32>]);
    fn add(&mut self, p: u32, len: u8, nh: u32) -> Result<(), cadence_core::pna::lpm::LpmError>;
    fn delete(&mut self, p: u32, len: u8) -> Result<(), cadence_core::pna::lpm::LpmError>;
    fn bytes(&self) -> usize;
}

macro_rules! bench_lpm4 {
    ($t:ty) => {
        impl BenchLpm4 for $t {
            fn one(&self, a: u32) -> Option<u32> {
                self.lookup(a)
            }
            fn burst(&self, a: &[u32], out: &mut [Option<u32>]) {
                self.lookup_burst(a, out)
            }
            fn add(&mut self, p: u32, len: u8, nh: u32) -> Result<(), cadence_core::pna::lpm::LpmError> {
                <$t>::add(self, p, len, nh)
            }
            fn delete(&mut self, p: u32, len: u8) -> Result<(), cadence_core::pna::lpm::LpmError> {
                <$t>::delete(self, p, len)
            }
            fn bytes(&self) -> usize {
                self.lookup_bytes()
            }
        }
    };
}
bench_lpm4!(cadence_core::pna::lpm::Lpm4);
bench_lpm4!(cadence_core::pna::poptrie::Poptrie4);

/// [`lpm`] for IPv6 (`dpdk-test-fib -6`'s files: `a:b:…/len next-hop` and `a:b:…` lines):
/// `Lpm6` (first stride 16, then 8-bit levels) beside `rte_fib6`'s trie, one pass right after
/// the build in bursts of [`LPM_BURST`] (`Lpm6::lookup_burst`: keys walked in lockstep).
pub fn lpm6(routes: &str, ips: &str, label: &str) -> Result<(), String> {
    use cadence_core::pna::lpm::{Lpm6, LpmConfig, MAX_NEXT_HOP};
    let addr = |s: &str| s.parse::<std::net::Ipv6Addr>().map(u128::from).map_err(|e| format!("{s:?}: {e}"));
    let mut list = read_routes(routes, addr, MAX_NEXT_HOP)?;
    // The generator writes host bits past the length: the route is the prefix.
    for (a, len, _) in &mut list {
        *a = if *len == 0 { 0 } else { *a & (u128::MAX << (128 - u32::from((*len).min(128)))) };
    }
    let keys: Vec<u128> = read_addrs(ips, addr)?;
    // Every route may need a group per level past the first: enough for all.
    let groups: usize = list.iter().map(|r| usize::from(r.1.saturating_sub(16)).div_ceil(8)).sum::<usize>() + 256;
    let mut t = Lpm6::try_new(LpmConfig::ipv6(groups)).map_err(|e| format!("{e:?}"))?;
    for &(a, len, nh) in &list {
        t.add(a, len, nh).map_err(|e| format!("route {a:#x}/{len}: {e:?}"))?;
    }
    let keys = &keys[..keys.len() / LPM_BURST * LPM_BURST];
    if keys.is_empty() {
        return Err(format!("{ips}: fewer than {LPM_BURST} addresses"));
    }
    let mut out = [None; LPM_BURST];
    let mut pass = || {
        let mut spent = 0;
        for burst in keys.chunks_exact(LPM_BURST) {
            let t0 = rdtsc();
            t.lookup_burst(black_box(burst), &mut out);
            spent += rdtsc() - t0;
            black_box(&out);
        }
        spent as f64 / keys.len() as f64
    };
    let first = pass();
    let warm: Vec<String> = (0..3).map(|_| format!("{:.1}", pass())).collect();
    report("lpm6", label, vec![first], keys.len());
    println!(
        "PEERINFO impl=cadence op=lpm6 size={label} routes={} lookups={} warm_passes={}",
        list.len(),
        keys.len(),
        warm.join(",")
    );
    Ok(())
}

/// The routes of a `dpdk-test-fib` route file (`prefix/len next-hop` lines; `addr` parses the
/// prefix), each next hop folded into `0..=max_next_hop`: the lookup's cost does not depend on
/// the value.
fn read_routes<A>(
    routes: &str,
    addr: impl Fn(&str) -> Result<A, String>,
    max_next_hop: u32,
) -> Result<Vec<(A, u8, u32)>, String> {
    let text = std::fs::read_to_string(routes).map_err(|e| format!("{routes}: {e}"))?;
    let mut list = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = |what: &str| format!("{routes}:{}: {what}: {line:?}", n + 1);
        let mut w = line.split_whitespace();
        let (Some(pfx), Some(nh)) = (w.next(), w.next()) else { return Err(bad("not `prefix/len next-hop`")) };
        let (a, len) = pfx.split_once('/').ok_or_else(|| bad("no /len"))?;
        let len: u8 = len.parse().map_err(|_| bad("bad length"))?;
        let nh: u64 = nh.parse().map_err(|_| bad("bad next hop"))?;
        list.push((addr(a)?, len, (nh % (u64::from(max_next_hop) + 1)) as u32));
    }
    Ok(list)
}

/// The addresses of a `dpdk-test-fib` lookup file, one a line.
fn read_addrs<A>(ips: &str, addr: impl Fn(&str) -> Result<A, String>) -> Result<Vec<A>, String> {
    let text = std::fs::read_to_string(ips).map_err(|e| format!("{ips}: {e}"))?;
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| addr(l.trim())).collect()
}
