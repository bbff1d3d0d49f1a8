//! Where slow inserts come from: every other key of a set bulk-loaded,
//! then `N` (default 200,000) of the others inserted in a seeded random
//! order with nine gets of loaded keys before each, background maintenance
//! running as configured by default. Every insert is timed alone, with the
//! thread's minor page faults and context switches around it (from
//! `getrusage`). Prints the insert percentiles, how many inserts took over
//! 2, 5 and 20 µs and how many of those faulted or switched, and how many
//! gets took over 20 µs (the host's own interruptions, for comparison).
//!
//! With `INTERVALS=FILE`, writes each insert over 20 µs (or over
//! `INTERVALS_OVER` ns) as `start end` (CLOCK_MONOTONIC ns), to match against
//! `perf record -k CLOCK_MONOTONIC` samples.
//!
//! `cargo run -p lidx-xindex --release --example insert_tail [SOSD u64 file]`
//! (default: osm from `../shared/data`).

mod common;

use std::hint::black_box;
use std::time::Instant;

use lidx_xindex::{Config, XIndex};

/// The calling thread's minor page faults, voluntary and involuntary
/// context switches so far.
fn thread_usage() -> [i64; 3] {
    // SAFETY: `rusage` is plain integers, valid when zeroed.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(rc, 0, "getrusage failed");
    [usage.ru_minflt, usage.ru_nvcsw, usage.ru_nivcsw]
}

/// CLOCK_MONOTONIC in nanoseconds (`perf`'s clock with `-k CLOCK_MONOTONIC`).
fn monotonic_ns() -> u64 {
    // SAFETY: `timespec` is plain integers, valid when zeroed.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid, writable `timespec`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One timed insert.
struct Timed {
    ns: u64,
    faulted: bool,
    switched: bool,
    start: u64,
}

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let loaded: Vec<u64> = keys.iter().copied().step_by(2).collect();
    let rest: Vec<u64> = keys.iter().copied().skip(1).step_by(2).collect();
    let inserted = common::shuffled(&rest);
    let n = std::env::var("N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000usize)
        .min(inserted.len());
    let index = XIndex::bulk_load(loaded.iter().map(|&k| (k, k)), Config::default())?;
    println!(
        "{}: {} keys loaded, {n} inserted",
        path.display(),
        loaded.len()
    );
    let mut timed = Vec::with_capacity(n);
    let mut slow_gets = 0usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for &k in &inserted[..n] {
        for _ in 0..9 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let q = loaded[(state % loaded.len() as u64) as usize];
            let started = Instant::now();
            black_box(index.get(&q));
            slow_gets += usize::from(started.elapsed().as_nanos() > 20_000);
        }
        let before = thread_usage();
        let start = monotonic_ns();
        let started = Instant::now();
        index.insert(k, k);
        let ns = started.elapsed().as_nanos() as u64;
        let after = thread_usage();
        timed.push(Timed {
            ns,
            faulted: after[0] > before[0],
            switched: after[1] > before[1] || after[2] > before[2],
            start,
        });
    }
    let mut sorted: Vec<u64> = timed.iter().map(|t| t.ns).collect();
    sorted.sort_unstable();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
    println!(
        "insert ns: p50 {} p99 {} p99.9 {} max {}",
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    );
    for limit in [2_000u64, 5_000, 20_000] {
        let slow: Vec<&Timed> = timed.iter().filter(|t| t.ns > limit).collect();
        println!(
            "over {limit} ns: {} inserts ({} took a page fault, {} a context switch)",
            slow.len(),
            slow.iter().filter(|t| t.faulted).count(),
            slow.iter().filter(|t| t.switched).count()
        );
    }
    println!("gets over 20000 ns: {slow_gets} of {}", n * 9);
    if let Ok(file) = std::env::var("INTERVALS") {
        let over: u64 = std::env::var("INTERVALS_OVER")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(20_000);
        let lines: String = timed
            .iter()
            .filter(|t| t.ns > over)
            .map(|t| format!("{} {}\n", t.start, t.start + t.ns))
            .collect();
        if let Err(e) = std::fs::write(&file, lines) {
            eprintln!("error: cannot write {file}: {e}");
            std::process::exit(1);
        }
    }
    Ok(())
}
