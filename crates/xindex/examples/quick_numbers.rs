//! Rough single-process numbers for XIndex-R against `BTreeMap`: bulk load,
//! lookups (1 and 2 threads), inserts of new keys with background
//! maintenance. Not a benchmark harness — the bench crate owns those.
//!
//! `cargo run -p lidx-xindex --release --example quick_numbers [n]`

use std::collections::BTreeMap;
use std::time::Instant;

use lidx_xindex::{Config, XIndex};

fn main() -> lidx_core::Result<()> {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    // Deterministic pseudo-random keys (splitmix64), sorted and deduplicated.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut keys: Vec<u64> = (0..n).map(|_| next() >> 1).collect();
    keys.sort_unstable();
    keys.dedup();
    let probes: Vec<u64> = (0..keys.len())
        .map(|_| keys[(next() % keys.len() as u64) as usize])
        .collect();

    let t = Instant::now();
    let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), Config::default())?;
    println!(
        "bulk load {} keys: {:.2?}; {} groups",
        keys.len(),
        t.elapsed(),
        index.stats().group_count()
    );
    // Let the initial model/group splits finish so they do not compete
    // with the measurement for the CPU.
    let t = Instant::now();
    let mut passes = 0;
    while index.maintain_now() && passes < 50 {
        passes += 1;
    }
    let s = index.stats();
    let errors: Vec<usize> = s
        .groups
        .iter()
        .flat_map(|g| g.error_bounds.iter().copied())
        .collect();
    println!(
        "settled in {:.2?} ({passes} passes): {} groups, mean model error {:.1}, root models {} (max error {})",
        t.elapsed(),
        s.group_count(),
        errors.iter().sum::<usize>() as f64 / errors.len() as f64,
        s.root_models,
        s.root_max_error
    );

    let t = Instant::now();
    let mut hits = 0u64;
    for k in &probes {
        hits += u64::from(index.get(k).is_some());
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "xindex get, 1 thread: {:.2} Mops/s ({hits} hits)",
        probes.len() as f64 / secs / 1e6
    );

    let t = Instant::now();
    std::thread::scope(|s| {
        for half in probes.chunks(probes.len().div_ceil(2)) {
            let index = &index;
            s.spawn(move || half.iter().filter(|k| index.get(k).is_some()).count());
        }
    });
    let secs = t.elapsed().as_secs_f64();
    println!(
        "xindex get, 2 threads: {:.2} Mops/s",
        probes.len() as f64 / secs / 1e6
    );

    let tree: BTreeMap<u64, u64> = keys.iter().map(|&k| (k, k)).collect();
    let t = Instant::now();
    let hits = probes.iter().filter(|k| tree.contains_key(k)).count();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "BTreeMap get, 1 thread: {:.2} Mops/s ({hits} hits)",
        probes.len() as f64 / secs / 1e6
    );

    let fresh: Vec<u64> = (0..keys.len() / 10).map(|_| next() >> 1).collect();
    let t = Instant::now();
    for &k in &fresh {
        index.insert(k, k);
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "xindex insert of {} new keys, 1 thread: {:.2} Mops/s",
        fresh.len(),
        fresh.len() as f64 / secs / 1e6
    );
    let t = Instant::now();
    while index.stats().delta_total() > 0 && t.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let s = index.stats();
    println!(
        "maintenance caught up in {:.2?}: {} groups, {} compactions, {} group splits, {} model splits",
        t.elapsed(),
        s.group_count(),
        s.compactions,
        s.group_splits,
        s.model_splits
    );
    let t = Instant::now();
    let hits = probes.iter().filter(|k| index.get(k).is_some()).count();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "xindex get after inserts: {:.2} Mops/s ({hits} hits)",
        probes.len() as f64 / secs / 1e6
    );
    drop(index);

    // Ascending inserts above every key, without and with the §3.5.2 hint.
    for capacity in [0, 256] {
        let config = Config {
            sequential_capacity: capacity,
            ..Config::default()
        };
        let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), config)?;
        let top = *keys.last().unwrap_or(&0);
        let count = 200_000u64;
        let t = Instant::now();
        for i in 1..=count {
            index.insert(top + i, i);
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "ascending inserts, sequential_capacity {capacity}: {:.2} Mops/s (delta now {})",
            count as f64 / secs / 1e6,
            index.stats().delta_total()
        );
    }
    Ok(())
}
