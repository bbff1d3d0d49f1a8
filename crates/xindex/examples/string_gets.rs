//! Gets of byte-string keys: `XIndex<Vec<u8>, u64>` against `BTreeMap`
//! behind a `RwLock` (what a `bench` cell's best concurrent peer usually
//! is), one thread, every key once in a seeded random order per round.
//! Each index's keys are allocated in random order (see `scattered`).
//! The `lidx bench` harness takes `u64` keys only.
//!
//! `cargo run -p lidx-xindex --release --example string_gets [FILE] [ROUNDS]`
//! (FILE: one key per line; default `../shared/data/words_en_insane.txt`).

mod common;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use lidx_core::Key;
use lidx_xindex::{Config, XIndex};
use parking_lot::RwLock;

fn main() -> lidx_core::Result<()> {
    let path = std::env::args().nth(1).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/words_en_insane.txt")
        },
        PathBuf::from,
    );
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let text = std::fs::read_to_string(&path).map_err(|e| lidx_core::Error::io(&path, e))?;
    let mut keys: Vec<Vec<u8>> = text.lines().map(|l| l.as_bytes().to_vec()).collect();
    keys.sort_unstable();
    keys.dedup();
    let order: Vec<u64> = (0..keys.len() as u64).collect();
    let probes: Vec<Vec<u8>> = common::shuffled(&order)
        .into_iter()
        .map(|i| keys[i as usize].clone())
        .collect();

    let index = XIndex::bulk_load(scattered(&keys).into_iter().zip(0u64..), Config::default())?;
    let map: RwLock<BTreeMap<Vec<u8>, u64>> =
        RwLock::new(scattered(&keys).into_iter().zip(0u64..).collect());
    let stats = index.stats();
    let mut prefixes: Vec<u64> = keys.iter().map(Key::ordered_prefix).collect();
    prefixes.dedup();
    println!(
        "{}: {} keys, {} distinct 8-byte prefixes; {} groups, worst model error {}, piecewise root {}",
        path.display(),
        keys.len(),
        prefixes.len(),
        stats.group_count(),
        stats.worst_model_error(),
        stats.root_piecewise
    );
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let t = Instant::now();
        let mut sum = 0u64;
        for p in &probes {
            sum = sum.wrapping_add(index.get(p).expect("every key was loaded"));
        }
        let xindex = t.elapsed().as_nanos() as f64 / probes.len() as f64;
        let t = Instant::now();
        for p in &probes {
            sum = sum.wrapping_add(*map.read().get(p).expect("every key was loaded"));
        }
        let btree = t.elapsed().as_nanos() as f64 / probes.len() as f64;
        black_box(sum);
        ratios.push(btree / xindex);
        println!(
            "round {round}: xindex {xindex:.0} ns per get, BTreeMap+RwLock {btree:.0} ns ({:.2}x)",
            btree / xindex
        );
    }
    println!("median ratio {:.2}x", common::median(ratios));
    Ok(())
}

/// Copies of `keys`, in their order, each allocated at a random point of
/// the copying, as keys arriving one by one would be: not next to its
/// neighbours in key order (which copying in order gives, and which puts
/// a search's neighbouring keys' bytes in one cache line).
fn scattered(keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let order: Vec<u64> = (0..keys.len() as u64).collect();
    let mut copies: Vec<Vec<u8>> = vec![Vec::new(); keys.len()];
    for i in common::shuffled(&order) {
        copies[i as usize] = keys[i as usize].clone();
    }
    copies
}
