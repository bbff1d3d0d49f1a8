//! Do reads slow down after churn? Loads every other key of a real set,
//! then, on one thread with background maintenance, swaps a random live key
//! for a random spare one three times the live count over; then compares
//! `get` throughput of the live keys against a fresh bulk load of the same
//! keys (best of five passes of 2M random gets, three alternated rounds).
//!
//! `cargo run --release -p lidx-bench --example xindex_churn_reads [-- DATASET]`
//! (default `osm`).

mod common;

use common::lookups_per_sec;
use lidx_bench::datasets::load_u64;
use lidx_xindex::{Config, XIndex};
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

fn main() -> lidx_core::Result<()> {
    let spec = std::env::args().nth(1).unwrap_or("osm".into());
    let set = load_u64(&spec, None, 1, None)?;
    let mut live: Vec<u64> = set.keys.iter().copied().step_by(2).collect();
    let mut spare: Vec<u64> = set.keys.iter().copied().skip(1).step_by(2).collect();
    let index = XIndex::bulk_load(live.iter().map(|&k| (k, k)), Config::default())?;
    println!(
        "{spec}: {} live, fresh-load groups {}",
        live.len(),
        index.stats().group_count()
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let t = Instant::now();
    let steps = 3 * live.len();
    for _ in 0..steps {
        let i = rng.random_range(0..live.len());
        let j = rng.random_range(0..spare.len());
        let gone = live[i];
        index.remove(&gone);
        let k = spare[j];
        index.insert(k, k);
        live[i] = k;
        spare[j] = gone;
    }
    println!("churn {} steps in {:?}", steps, t.elapsed());
    std::thread::sleep(Duration::from_millis(1500));
    let s = index.stats();
    println!(
        "after churn: groups {}, splits {}, merges {}",
        s.group_count(),
        s.group_splits,
        s.group_merges
    );
    let mut sorted = live.clone();
    sorted.sort_unstable();
    let fresh = XIndex::bulk_load(sorted.iter().map(|&k| (k, k)), Config::default())?;
    for r in 0..3 {
        let a = lookups_per_sec(&index, &live, 5) / 1e6;
        let b = lookups_per_sec(&fresh, &live, 5) / 1e6;
        println!(
            "round {r}: churned {a:.2} Mops/s, fresh {b:.2}, ratio {:.2}",
            a / b
        );
    }
    Ok(())
}
