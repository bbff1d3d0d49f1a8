//! How long a maintenance pass takes on a bulk-loaded index: one after a
//! thousand random inserts (it compacts the deltas they filled, and tests
//! every pair of mergeable neighbours), and the next, which only walks.
//! A background pass runs every 20 ms under a steady write load; this is
//! the share of a core it takes.
//!
//! `cargo run --release -p lidx-bench --example xindex_pass_cost [-- DATASET [KEYS]]`
//! (default: `lognormal`, 1M keys).
use std::time::Instant;

use lidx_bench::datasets::load_u64;
use lidx_xindex::{Config, XIndex};
use rand::{Rng, SeedableRng};

fn main() -> lidx_core::Result<()> {
    let spec = std::env::args().nth(1).unwrap_or("lognormal".into());
    let n: Option<usize> = std::env::args().nth(2).map(|s| s.parse().unwrap());
    let set = load_u64(&spec, n, 1, None)?;
    let keys = set.keys.clone();
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), config)?;
    let s = index.stats();
    println!("{} keys {} groups", s.len, s.group_count());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for round in 0..8 {
        for _ in 0..1000 {
            let k = rng.random::<u64>();
            index.insert(k, k);
        }
        let t = Instant::now();
        index.maintain_now();
        let full = t.elapsed();
        let t = Instant::now();
        index.maintain_now();
        let idle = t.elapsed();
        println!(
            "round {round}: pass after 1000 inserts {:?}, next pass {:?}",
            full, idle
        );
    }
    let s = index.stats();
    println!(
        "{} groups, merges {} splits {}",
        s.group_count(),
        s.group_merges,
        s.group_splits
    );
    Ok(())
}
