//! A machine probe, not an index benchmark: how much of a random lookup's
//! memory latency the CPU can hide by overlapping consecutive lookups, and
//! how that depends on the instructions each lookup executes and on the
//! bytes per record.
//!
//! It answers why `lidx bench --workload lookup` stays below 2x `BTreeMap`
//! for XIndex (see `docs/results/xindex-session11.md`):
//! - **overlap**: a loop of independent lookups (a key load, then the
//!   record it names) with `pad` extra register-writing instructions per
//!   lookup. Without padding the out-of-order core keeps several lookups'
//!   misses in flight; from a few hundred instructions per lookup on, every
//!   lookup waits for its own misses.
//! - **footprint**: lookups made serial on purpose (each address depends on
//!   the previous result), touching one key line and one record line, with
//!   16-byte records (value + version word, as XIndex's cells), 9-byte
//!   records (one version word shared by seven values) and no records.
//!
//! `cargo run --release -p lidx-bench --example overlap_probe [-- KEYS]`
//! (default 1M keys; run pinned, e.g. under `taskset -c 0`).

use std::hint::black_box;
use std::time::Instant;

/// Lookups per timed loop.
const LOOKUPS: usize = 2_000_000;

/// xorshift64: cheap, deterministic positions.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `PAD` independent register writes (x86-64; elsewhere black-boxed adds).
#[inline(always)]
fn pad<const PAD: usize>() {
    for _ in 0..PAD {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: writes one scratch register the compiler allocates for
        // it; touches no memory, stack or flags the program relies on.
        unsafe {
            std::arch::asm!("mov {0}, 1", out(reg) _, options(nomem, nostack, preserves_flags));
        }
        #[cfg(not(target_arch = "x86_64"))]
        black_box(0u64);
    }
}

/// Nanoseconds per independent lookup (key, then the record it names)
/// with `PAD` extra instructions each.
fn independent<const PAD: usize>(keys: &[u64], records: &[[u64; 2]], positions: &[usize]) -> f64 {
    let started = Instant::now();
    let mut sum = 0u64;
    for &p in positions {
        let record = keys[p] as usize;
        sum = sum.wrapping_add(records[record][1]);
        pad::<PAD>();
    }
    black_box(sum);
    started.elapsed().as_nanos() as f64 / positions.len() as f64
}

/// Nanoseconds per serial lookup touching `keys[p]` and the record line of
/// `p` in `records`, whose records are `record_bytes` wide (0: no record).
fn serial(keys: &[u64], records: &[u64], record_bytes: usize, positions: &[usize]) -> f64 {
    let n = keys.len();
    let started = Instant::now();
    let mut carry = 0usize;
    for &p in positions {
        let p = (p + carry) % n;
        let key = keys[p];
        let record = records[(p * record_bytes / 8) % records.len()];
        // Always 0 (keys and records are small), but only known at run
        // time: the next address waits for both loads.
        carry = ((key ^ record) >> 63) as usize;
    }
    black_box(carry);
    started.elapsed().as_nanos() as f64 / positions.len() as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("KEYS must be a number"))
        .unwrap_or(1_000_000);
    let mut state = 0x2545_f491_4f6c_dd1d;
    let positions: Vec<usize> = (0..LOOKUPS)
        .map(|_| (next(&mut state) % n as u64) as usize)
        .collect();
    // keys[i] names a random record, so the record load depends on the key load.
    let keys: Vec<u64> = (0..n).map(|_| next(&mut state) % n as u64).collect();
    let records: Vec<[u64; 2]> = (0..n as u64).map(|i| [0, i]).collect();
    println!("{n} keys, {LOOKUPS} lookups per loop, medians of 5");

    let mut rows: [Vec<f64>; 5] = Default::default();
    for _ in 0..5 {
        rows[0].push(independent::<0>(&keys, &records, &positions));
        rows[1].push(independent::<50>(&keys, &records, &positions));
        rows[2].push(independent::<100>(&keys, &records, &positions));
        rows[3].push(independent::<200>(&keys, &records, &positions));
        rows[4].push(independent::<400>(&keys, &records, &positions));
    }
    println!("overlap: ns per independent lookup (key, then its record) by extra instructions");
    for (pad, row) in [0, 50, 100, 200, 400].iter().zip(rows) {
        println!("  +{pad:>3} instructions: {:6.1} ns", median(row));
    }

    let small_keys: Vec<u64> = (0..n as u64).collect();
    let wide: Vec<u64> = vec![1; n * 2];
    let shared: Vec<u64> = vec![1; n * 9 / 8 + 1];
    let none: Vec<u64> = vec![1; 8];
    let mut rows: [Vec<f64>; 3] = Default::default();
    for _ in 0..5 {
        rows[0].push(serial(&small_keys, &wide, 16, &positions));
        rows[1].push(serial(&small_keys, &shared, 9, &positions));
        rows[2].push(serial(&small_keys, &none, 0, &positions));
    }
    println!("footprint: ns per serial lookup (8-byte key line + record line)");
    for (label, row) in [
        "16-byte records (value + version word)",
        " 9-byte records (7 values share a version word)",
        "keys only",
    ]
    .iter()
    .zip(rows)
    {
        println!("  {label}: {:6.1} ns", median(row));
    }
}
