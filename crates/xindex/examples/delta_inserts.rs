//! Random inserts that stay in the deltas: every other key of a set is
//! bulk-loaded, the rest are inserted in a seeded random order with
//! background maintenance off and a delta budget they cannot reach (so
//! every new key stays in its group's delta, a few hundred to a few
//! thousand per group), and then each of them is read back.
//! What this times is the delta index itself: its descent, its leaf
//! search and its record arena, beside the array search every insert
//! makes first. One thread; medians of the rounds.
//!
//! `cargo run -p lidx-xindex --release --example delta_inserts [SOSD u64 file] [rounds]`
//! (default: osm from `../shared/data`, 5 rounds).

mod common;

use std::hint::black_box;
use std::time::Instant;

use lidx_xindex::{Config, XIndex};

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let loaded: Vec<u64> = keys.iter().copied().step_by(2).collect();
    let rest: Vec<u64> = keys.iter().copied().skip(1).step_by(2).collect();
    let inserted = common::shuffled(&rest);
    let n = inserted.len() as f64;
    let (mut insert_ns, mut get_ns) = (Vec::new(), Vec::new());
    let (mut groups, mut delta_len) = (0, 0);
    for _ in 0..rounds {
        // No background pass, and a budget no writer reaches (over it, a
        // writer runs passes itself).
        let config = Config {
            maintenance_interval: None,
            delta_budget_bytes: 1 << 40,
            ..Config::default()
        };
        let index = XIndex::bulk_load(loaded.iter().map(|&k| (k, k)), config)?;
        let started = Instant::now();
        for &k in &inserted {
            black_box(index.insert(k, k));
        }
        insert_ns.push(started.elapsed().as_secs_f64() * 1e9 / n);
        let started = Instant::now();
        for k in &inserted {
            assert_eq!(black_box(index.get(k)), Some(*k));
        }
        get_ns.push(started.elapsed().as_secs_f64() * 1e9 / n);
        let stats = index.stats();
        groups = stats.group_count();
        delta_len = stats.groups.iter().map(|g| g.delta_len).max().unwrap_or(0);
    }
    println!(
        "{}: {} keys loaded, {} inserted into the deltas of {groups} groups (largest delta {delta_len}), {rounds} rounds",
        path.display(),
        loaded.len(),
        inserted.len()
    );
    println!(
        "insert {:.0} ns, get of an inserted key {:.0} ns (medians)",
        common::median(insert_ns),
        common::median(get_ns)
    );
    Ok(())
}
