//! Scans of 1 to 100 records from random loaded keys, `XIndex::scan`
//! beside `BTreeMap::range` behind an `RwLock`: what a scan costs to start
//! and what each record adds. One thread, medians of five passes.
//!
//! `cargo run -p lidx-xindex --release --example scan_lengths [SOSD u64 file]`
//!
//! `SCAN_LENGTHS=1,100` picks the lengths, `SCAN_STARTS=N` how many scans
//! a pass makes, and `SCAN_DELTAS=N` holds every `N`-th key back from the
//! bulk load and inserts it afterwards (both maps, in random order, with
//! the index's maintenance off), so scans merge that many keys from the
//! groups' deltas. `SCAN_REVERSE=1` adds range iterators of each length,
//! both maps: `range(..=start).rev()` (rows `rN`) and `range(start..)`
//! (rows `fN`) taking `N` records, and bounded ranges of `N` records
//! walked by a `for` loop (`bN`), summed through `fold` (`sN`) and
//! through `rfold` (`rsN`).

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::RwLock;
use std::time::Instant;

use lidx_xindex::{Config, XIndex};

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let count = std::env::var("SCAN_STARTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let starts: Vec<u64> = common::shuffled(&keys).into_iter().take(count).collect();
    let held_back_every: Option<usize> = std::env::var("SCAN_DELTAS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0);
    let held_back = |i: usize| held_back_every.is_some_and(|n| i % n == n / 2);
    let loaded = keys.iter().enumerate().filter(|&(i, _)| !held_back(i));
    let config = Config {
        maintenance_interval: held_back_every
            .map_or(Config::default().maintenance_interval, |_| None),
        ..Config::default()
    };
    let index = XIndex::bulk_load(loaded.clone().map(|(_, &k)| (k, k)), config)?;
    let btree = RwLock::new(loaded.map(|(_, &k)| (k, k)).collect::<BTreeMap<u64, u64>>());
    let inserted: Vec<u64> = keys
        .iter()
        .enumerate()
        .filter(|&(i, _)| held_back(i))
        .map(|(_, &k)| k)
        .collect();
    for k in common::shuffled(&inserted) {
        index.insert(k, k);
        btree.write().expect("never poisoned").insert(k, k);
    }
    println!(
        "{} ({} keys, {} of them inserted after the bulk load): ns per scan, medians of 5",
        path.display(),
        keys.len(),
        inserted.len()
    );
    println!(
        "{:>5} {:>10} {:>10} {:>7}",
        "len", "xindex", "btreemap", "ratio"
    );
    // A get of the same keys, for what starting a scan adds to a search.
    race(
        "get",
        &starts,
        "both return the loaded values",
        |s| index.get(&s).expect("loaded"),
        |s| {
            *btree
                .read()
                .expect("never poisoned")
                .get(&s)
                .expect("loaded")
        },
    );
    // A predecessor query one above each key: a backwards scan of one.
    race(
        "floor",
        &starts,
        "both find the same predecessors",
        |s| {
            let below = s.saturating_add(1);
            index
                .upper_bound(Bound::Included(&below))
                .expect("loaded")
                .0
        },
        |s| {
            let below = s.saturating_add(1);
            let map = btree.read().expect("never poisoned");
            *map.range(..=below).next_back().expect("loaded").0
        },
    );
    let lengths: Vec<usize> = std::env::var("SCAN_LENGTHS").map_or_else(
        |_| vec![1, 2, 5, 10, 25, 50, 100],
        |s| s.split(',').filter_map(|l| l.parse().ok()).collect(),
    );
    let mut out = Vec::with_capacity(128);
    let reverse = std::env::var("SCAN_REVERSE").is_ok_and(|v| v == "1");
    // Keys summed (wrapping), so both maps must return the same records.
    let sum = |a: u64, k: u64| a.wrapping_add(k);
    for &len in lengths.iter().filter(|_| reverse) {
        let agree = "both return the same records";
        race(
            &format!("r{len}"),
            &starts,
            agree,
            |s| {
                index
                    .range(..=s)
                    .rev()
                    .take(len)
                    .fold(0, |a, (k, _)| sum(a, k))
            },
            |s| {
                let map = btree.read().expect("never poisoned");
                map.range(..=s)
                    .rev()
                    .take(len)
                    .fold(0, |a, (&k, _)| sum(a, k))
            },
        );
        race(
            &format!("f{len}"),
            &starts,
            agree,
            |s| index.range(s..).take(len).fold(0, |a, (k, _)| sum(a, k)),
            |s| {
                let map = btree.read().expect("never poisoned");
                map.range(s..).take(len).fold(0, |a, (&k, _)| sum(a, k))
            },
        );
    }
    // Bounded ranges of `len` records, `start..end`: walked by `next` in
    // a `for` loop (rows `bN`), and summed, which runs `fold` (`sN`) or,
    // reversed, `rfold` (`rsN`). Timed over positions in `bounded`, so
    // that neither side pays for finding the end key.
    for &len in lengths.iter().filter(|_| reverse) {
        let bounded: Vec<(u64, u64)> = starts
            .iter()
            .map(|&s| {
                (
                    s,
                    keys[(keys.partition_point(|&k| k < s) + len).min(keys.len() - 1)],
                )
            })
            .collect();
        let at: Vec<u64> = (0..bounded.len() as u64).collect();
        let agree = "both return the same records";
        race(
            &format!("b{len}"),
            &at,
            agree,
            |i| {
                let (s, e) = bounded[i as usize];
                let mut a = 0;
                for (k, _) in index.range(s..e) {
                    a = sum(a, k);
                }
                a
            },
            |i| {
                let (s, e) = bounded[i as usize];
                let map = btree.read().expect("never poisoned");
                let mut a = 0;
                for (&k, _) in map.range(s..e) {
                    a = sum(a, k);
                }
                a
            },
        );
        race(
            &format!("s{len}"),
            &at,
            agree,
            |i| {
                let (s, e) = bounded[i as usize];
                index.range(s..e).map(|(k, _)| k).fold(0, sum)
            },
            |i| {
                let (s, e) = bounded[i as usize];
                let map = btree.read().expect("never poisoned");
                map.range(s..e).map(|(&k, _)| k).fold(0, sum)
            },
        );
        race(
            &format!("rs{len}"),
            &at,
            agree,
            |i| {
                let (s, e) = bounded[i as usize];
                index.range(s..e).rev().map(|(k, _)| k).fold(0, sum)
            },
            |i| {
                let (s, e) = bounded[i as usize];
                let map = btree.read().expect("never poisoned");
                map.range(s..e).rev().map(|(&k, _)| k).fold(0, sum)
            },
        );
    }
    for len in lengths {
        let mut scanned = Vec::with_capacity(128);
        race(
            &len.to_string(),
            &starts,
            "both return as many records",
            |s| {
                out.clear();
                index.scan(&s, len, &mut out);
                out.len() as u64
            },
            |s| {
                scanned.clear();
                let map = btree.read().expect("never poisoned");
                scanned.extend(map.range(s..).take(len).map(|(&k, &v)| (k, v)));
                scanned.len() as u64
            },
        );
    }
    Ok(())
}

/// Times `xindex` and then `btree` answering every start, five passes
/// each, and prints the medians in nanoseconds per start beside their
/// ratio. Each closure returns a figure per answer; both must add up to
/// the same sum (`agree` says what that checks).
fn race(
    label: &str,
    starts: &[u64],
    agree: &str,
    mut xindex: impl FnMut(u64) -> u64,
    mut btree: impl FnMut(u64) -> u64,
) {
    let per_start = |t: Instant| t.elapsed().as_nanos() as f64 / starts.len() as f64;
    let (mut xs, mut bs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let mut sum = 0u64;
        let t = Instant::now();
        for &s in starts {
            sum = sum.wrapping_add(xindex(s));
        }
        xs.push(per_start(t));
        let t = Instant::now();
        for &s in starts {
            sum = sum.wrapping_sub(btree(s));
        }
        bs.push(per_start(t));
        assert_eq!(sum, 0, "{agree}");
    }
    let (x, b) = (common::median(xs), common::median(bs));
    println!("{label:>5} {x:>10.0} {b:>10.0} {:>6.2}x", b / x);
}
