//! Read-modify-write from several threads: every key of a set is a
//! counter, and `threads` threads each add one to uniformly random
//! counters, with `XIndex::fetch_update` and with `BTreeMap` behind an
//! `RwLock` (its write lock held for the `get_mut`), in one process. Then
//! the same threads claim keys above the set with `XIndex::try_insert`
//! against the lock's `entry().or_insert`, every thread trying every key
//! in its own order. Prints the time per operation of each, medians of
//! five runs, and checks every counter and every claim.
//!
//! `cargo run -p lidx-xindex --release --example counters [SOSD u64 file] [threads] [ops per thread]`
//! (default: osm from `../shared/data`, 2 threads, 500,000 operations each).

mod common;

use std::collections::BTreeMap;
use std::sync::{Barrier, RwLock};
use std::time::Instant;

use lidx_xindex::{Config, XIndex};

const RUNS: usize = 5;

/// A map the threads share: one read-modify-write and one claim.
trait Counters: Sync {
    fn add_one(&self, key: u64);
    /// Whether this call inserted `key`.
    fn claim(&self, key: u64, owner: u64) -> bool;
    fn value(&self, key: u64) -> Option<u64>;
}

impl Counters for XIndex<u64, u64> {
    fn add_one(&self, key: u64) {
        let add = |v: Option<u64>| Some(Some(v.unwrap_or(0) + 1));
        self.fetch_update(&key, add)
            .expect("the closure never declines");
    }
    fn claim(&self, key: u64, owner: u64) -> bool {
        self.try_insert(key, owner).is_ok()
    }
    fn value(&self, key: u64) -> Option<u64> {
        self.get(&key)
    }
}

impl Counters for RwLock<BTreeMap<u64, u64>> {
    fn add_one(&self, key: u64) {
        *self.write().expect("not poisoned").entry(key).or_insert(0) += 1;
    }
    fn claim(&self, key: u64, owner: u64) -> bool {
        let mut map = self.write().expect("not poisoned");
        let mut inserted = false;
        map.entry(key).or_insert_with(|| {
            inserted = true;
            owner
        });
        inserted
    }
    fn value(&self, key: u64) -> Option<u64> {
        self.read().expect("not poisoned").get(&key).copied()
    }
}

/// xorshift64*: a thread's own random positions.
fn positions(seed: u64, n: usize, len: usize) -> Vec<usize> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) % len as u64) as usize
        })
        .collect()
}

/// Nanoseconds per operation of `threads` threads, each running `work`
/// on its own list, and what the lists did (counted per thread).
fn timed<M: Counters>(
    map: &M,
    lists: &[Vec<u64>],
    work: impl Fn(&M, u64, u64) -> bool + Sync,
) -> (f64, u64) {
    let start = Barrier::new(lists.len() + 1);
    let (elapsed, counted) = std::thread::scope(|s| {
        let handles: Vec<_> = lists
            .iter()
            .enumerate()
            .map(|(t, list)| {
                let (start, work) = (&start, &work);
                s.spawn(move || {
                    start.wait();
                    list.iter().filter(|&&k| work(map, k, t as u64)).count() as u64
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let counted: u64 = handles.into_iter().map(|h| h.join().expect("worker")).sum();
        (t0.elapsed(), counted)
    });
    let ops: usize = lists.iter().map(Vec::len).sum();
    (elapsed.as_nanos() as f64 / ops as f64, counted)
}

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let arg = |i: usize, default: usize| -> lidx_core::Result<usize> {
        std::env::args()
            .nth(i)
            .map_or(Ok(default), |a| a.parse())
            .map_err(|e| lidx_core::Error::invalid(format!("argument {i}: {e}")))
    };
    let threads = arg(2, 2)?.max(1);
    let ops = arg(3, 500_000)?;
    println!(
        "{}: {} counters, {threads} threads x {ops} increments; then {} claims tried by every thread",
        path.display(),
        keys.len(),
        ops / 4
    );
    let increments: Vec<Vec<u64>> = (0..threads)
        .map(|t| {
            positions(t as u64 * 7919 + 13, ops, keys.len())
                .into_iter()
                .map(|i| keys[i])
                .collect()
        })
        .collect();
    let top = keys.last().copied().unwrap_or(0);
    let fresh: Vec<u64> = (1..=(ops / 4) as u64).map(|i| top + i).collect();
    let order = common::shuffled(&fresh);
    // Each thread its own order: the shared shuffle, rotated.
    let claims: Vec<Vec<u64>> = (0..threads)
        .map(|t| {
            let shift = t * order.len() / threads;
            order[shift..]
                .iter()
                .chain(&order[..shift])
                .copied()
                .collect()
        })
        .collect();
    let mut rows: [(Vec<f64>, Vec<f64>); 2] = Default::default();
    for _ in 0..RUNS {
        let pairs = keys.iter().map(|&k| (k, 0));
        let maps: (XIndex<u64, u64>, RwLock<BTreeMap<u64, u64>>) = (
            XIndex::bulk_load(pairs.clone(), Config::default())?,
            RwLock::new(pairs.collect()),
        );
        let (x_add, _) = timed(&maps.0, &increments, |m, k, _| {
            m.add_one(k);
            true
        });
        let (b_add, _) = timed(&maps.1, &increments, |m, k, _| {
            m.add_one(k);
            true
        });
        let (x_claim, x_won) = timed(&maps.0, &claims, |m, k, t| m.claim(k, t));
        let (b_claim, b_won) = timed(&maps.1, &claims, |m, k, t| m.claim(k, t));
        check(&maps.0, &keys, &increments, &claims, x_won);
        check(&maps.1, &keys, &increments, &claims, b_won);
        rows[0].0.push(x_add);
        rows[0].1.push(x_claim);
        rows[1].0.push(b_add);
        rows[1].1.push(b_claim);
    }
    for (name, (add, claim)) in ["XIndex", "RwLock<BTreeMap>"].iter().zip(rows) {
        println!(
            "{name:>16}: {:.0} ns per increment, {:.0} ns per claim (medians of {RUNS})",
            common::median(add),
            common::median(claim)
        );
    }
    Ok(())
}

/// Every counter holds its increments; every claim was won exactly once.
fn check<M: Counters>(
    map: &M,
    keys: &[u64],
    increments: &[Vec<u64>],
    claims: &[Vec<u64>],
    won: u64,
) {
    let mut want: BTreeMap<u64, u64> = keys.iter().map(|&k| (k, 0)).collect();
    for &k in increments.iter().flatten() {
        *want.get_mut(&k).expect("a counter") += 1;
    }
    for (&k, &n) in &want {
        assert_eq!(map.value(k), Some(n), "counter {k}");
    }
    assert_eq!(won, claims[0].len() as u64, "each claim won once");
    for &k in &claims[0] {
        assert!(map.value(k).is_some_and(|t| (t as usize) < claims.len()));
    }
}
