//! The §3.5.2 sequential-insert fast path, measured: ascending inserts
//! above a bulk-loaded key set, then lookups of the appended keys, without
//! the hint, with tails where maintenance detects the pattern, and with
//! tails in every group. Also keys ascending within many groups at once
//! (`device << 32 | time`, appended round-robin over the devices).
//!
//! `cargo run -p lidx-xindex --release --example sequential_inserts [n] [capacity]`
//!
//! Prints medians of five runs; "tail slots" is the memory the tails
//! pre-allocate (32 bytes per slot for `u64` keys).

use std::time::{Duration, Instant};

use lidx_xindex::{Config, SequentialGroups, XIndex};

/// Slots per tail in the runs with the hint, unless given.
const CAPACITY: usize = 256;
/// Bytes per tail slot for `u64` keys: a `OnceLock<u64>` and a record cell.
const SLOT_BYTES: usize = 32;

struct Run {
    insert_mops: f64,
    get_mops: f64,
    tail_groups: usize,
    tail_bytes: usize,
    delta_left: usize,
}

fn main() -> lidx_core::Result<()> {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let capacity: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(CAPACITY);
    let settings: [(&str, usize, SequentialGroups); 3] = [
        ("no hint", 0, SequentialGroups::Detected),
        ("Detected", capacity, SequentialGroups::Detected),
        ("All", capacity, SequentialGroups::All),
    ];
    println!(
        "{n} keys bulk-loaded, then {} ascending inserts; tails of {capacity} slots",
        n / 5
    );
    println!(
        "| workload | setting | insert Mops/s | get Mops/s (appended keys) | groups with a tail | tail slots | left in deltas |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (workload, per_device) in [("append at the end", false), ("per device", true)] {
        for &(name, capacity, groups) in &settings {
            let config = Config {
                sequential_capacity: capacity,
                sequential_groups: groups,
                ..Config::default()
            };
            let runs: Vec<Run> = (0..5)
                .map(|_| run(n, per_device, config.clone()))
                .collect::<lidx_core::Result<_>>()?;
            let median = |f: fn(&Run) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let last = runs.last().expect("five runs");
            println!(
                "| {workload} | {name} | {:.2} | {:.2} | {} | {} KiB | {} |",
                median(|r| r.insert_mops),
                median(|r| r.get_mops),
                last.tail_groups,
                last.tail_bytes / 1024,
                last.delta_left,
            );
        }
    }
    // The append itself, without a background thread: the same 60,000
    // ascending inserts into the delta (no hint) and into a tail large
    // enough for all of them, alternated, ten rounds each.
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..20 {
        let capacity = if round % 2 == 0 { 0 } else { 65_536 };
        let config = Config {
            sequential_capacity: capacity,
            maintenance_interval: None,
            ..Config::default()
        };
        let index = XIndex::bulk_load((0..n).map(|i| (i * 3, i)), config)?;
        let t = Instant::now();
        for i in 0..60_000u64 {
            index.insert((n + i) * 3, i);
        }
        times[round % 2].push(t.elapsed().as_secs_f64() / 60_000.0 * 1e9);
    }
    for (name, mut v) in ["delta (no hint)", "tail (65,536 slots)"]
        .into_iter()
        .zip(times)
    {
        v.sort_by(f64::total_cmp);
        println!(
            "no background thread, 60,000 ascending inserts into the {name}: median {:.1} ns each",
            v[v.len() / 2]
        );
    }
    Ok(())
}

/// One bulk load, `n / 5` ascending inserts with background maintenance,
/// then one get of each appended key in a scrambled order.
fn run(n: u64, per_device: bool, config: Config) -> lidx_core::Result<Run> {
    let devices = 256u64;
    let base: Vec<(u64, u64)> = if per_device {
        let per = n / devices;
        (0..devices)
            .flat_map(|d| (0..per).map(move |t| ((d << 32) | (t * 3), t)))
            .collect()
    } else {
        (0..n).map(|i| (i * 3, i)).collect()
    };
    let index = XIndex::bulk_load(base.iter().copied(), config)?;
    let count = n / 5;
    let appended: Vec<u64> = if per_device {
        let per = n / devices;
        (0..count)
            .map(|i| ((i % devices) << 32) | ((per + i / devices) * 3))
            .collect()
    } else {
        (0..count).map(|i| (n + i) * 3).collect()
    };
    let t = Instant::now();
    for (i, &k) in appended.iter().enumerate() {
        index.insert(k, i as u64);
    }
    let insert_secs = t.elapsed().as_secs_f64();
    // Let maintenance settle before reading, as a steady state would.
    std::thread::sleep(Duration::from_millis(100));
    // A fixed scramble (multiplicative hashing of the index) of the
    // appended keys, so each get lands somewhere unrelated to the last.
    let len = appended.len() as u64;
    let order: Vec<u64> = (0..len)
        .map(|i| appended[(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % len) as usize])
        .collect();
    let t = Instant::now();
    let hits = order.iter().filter(|k| index.get(k).is_some()).count();
    let get_secs = t.elapsed().as_secs_f64();
    assert_eq!(hits, order.len(), "every appended key is found");
    let stats = index.stats();
    let tails: Vec<usize> = stats
        .groups
        .iter()
        .map(|g| g.tail_capacity)
        .filter(|&c| c > 0)
        .collect();
    Ok(Run {
        insert_mops: count as f64 / insert_secs / 1e6,
        get_mops: len as f64 / get_secs / 1e6,
        tail_groups: tails.len(),
        tail_bytes: tails.iter().sum::<usize>() * SLOT_BYTES,
        delta_left: stats.delta_total(),
    })
}
