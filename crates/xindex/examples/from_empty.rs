//! An index built by inserts from empty (`XIndex::new`) instead of a bulk
//! load: every key of a set inserted by one thread, in random order and
//! in ascending order, with the default configuration (background
//! maintenance on, no §3.5.2 hint), beside a `BTreeMap` filled the same
//! way. Then random gets of every key through the built index (right
//! after the fills, while maintenance may still be catching up), a fresh
//! bulk load of the same keys and the `BTreeMap`. Medians of three builds;
//! groups and budget waits are the last build's, read after the fills.
//!
//! `cargo run -p lidx-xindex --release --example from_empty [SOSD u64 file]`
//! (default: osm from `../shared/data`).

mod common;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use lidx_xindex::{Config, XIndex};

const RUNS: usize = 3;

/// Nanoseconds per key of `f` over `n` keys.
fn per_key(n: usize, f: impl FnOnce()) -> f64 {
    let started = Instant::now();
    f();
    started.elapsed().as_secs_f64() * 1e9 / n as f64
}

/// Nanoseconds per get of every key of `probes` through `get`, each
/// answer checked.
fn gets(probes: &[u64], get: impl Fn(&u64) -> Option<u64>) -> f64 {
    per_key(probes.len(), || {
        for k in probes {
            assert_eq!(black_box(get(k)), Some(*k));
        }
    })
}

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let n = keys.len();
    // The random insert order, and the order of the gets.
    let shuffled = common::shuffled(&keys);
    let fresh = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), Config::default())?;
    println!("{}: {n} keys, one thread", path.display());
    println!(
        "| order | insert ns: xindex | BTreeMap | get ns: built xindex | fresh bulk load | BTreeMap | groups | budget waits |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (order_name, order) in [("random", &shuffled), ("ascending", &keys)] {
        let mut figures: [Vec<f64>; 5] = Default::default();
        let mut shape = (0, 0);
        for _ in 0..RUNS {
            let index = XIndex::<u64, u64>::new(Config::default())?;
            figures[0].push(per_key(n, || {
                for &k in order.iter() {
                    index.insert(k, k);
                }
            }));
            let mut map = BTreeMap::new();
            figures[1].push(per_key(n, || {
                for &k in order.iter() {
                    map.insert(k, k);
                }
            }));
            // The gets start right after the fills: maintenance may still
            // be absorbing the index's last inserts while they run.
            let stats = index.stats();
            shape = (stats.group_count(), stats.budget_waits);
            figures[2].push(gets(&shuffled, |k| index.get(k)));
            figures[3].push(gets(&shuffled, |k| fresh.get(k)));
            figures[4].push(gets(&shuffled, |k| map.get(k).copied()));
        }
        let [ins, map_ins, get, fresh_get, map_get] = figures.map(common::median);
        println!(
            "| {order_name} | {ins:.0} | {map_ins:.0} | {get:.0} | {fresh_get:.0} | {map_get:.0} | {} | {} |",
            shape.0, shape.1
        );
    }
    Ok(())
}
