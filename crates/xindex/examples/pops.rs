//! Why `XIndex` has no `pop_first`: taking the smallest record out, again
//! and again, as `first_key_value` and a `compare_exchange` to absent (the
//! pop the API would offer), for a drain of a bulk load and for a timer
//! queue (take the earliest deadline, schedule a later one) at a constant
//! size. Against `BTreeMap` behind an `RwLock` (`pop_first`) and
//! `crossbeam_skiplist::SkipMap` (`pop_front`), one thread, in one
//! process. Prints nanoseconds per pop (per pop and insert for the
//! queue), medians of five runs, and checks that every map handed out the
//! same keys and values.
//!
//! Removed records stay until maintenance compacts their group. Scans jump
//! an array's removed prefix once one has read it, but each pop still
//! visits the groups drained since the last pass (7-9 per pop in the
//! drain) and, in the queue, steps through 100-190 removed delta records
//! (session 53's counts; `docs/xindex-design-notes.md`, "Pops").
//!
//! `cargo run -p lidx-xindex --release --example pops [keys] [drain|timers]`
//! (default 1,000,000 keys, both patterns; the queue holds a tenth of the
//! keys and runs as many rounds as there are keys; naming one pattern
//! runs only `xindex`, for a profiler).

mod common;

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Instant;

use crossbeam_skiplist::SkipMap;
use lidx_xindex::{Config, XIndex};

const RUNS: usize = 5;

trait Queue {
    fn name(&self) -> &'static str;
    fn load(&mut self, keys: &[u64]);
    fn pop_first(&self) -> Option<(u64, u64)>;
    fn insert(&self, key: u64, value: u64);
}

struct X(Option<XIndex<u64, u64>>);
struct B(RwLock<BTreeMap<u64, u64>>);
struct S(SkipMap<u64, u64>);

impl Queue for X {
    fn name(&self) -> &'static str {
        "xindex"
    }
    fn load(&mut self, keys: &[u64]) {
        let pairs = keys.iter().map(|&k| (k, k ^ 1));
        self.0 = Some(XIndex::bulk_load(pairs, Config::default()).expect("sorted keys"));
    }
    fn pop_first(&self) -> Option<(u64, u64)> {
        let index = self.0.as_ref().expect("loaded");
        loop {
            let (key, value) = index.first_key_value()?;
            // Err: another writer took or changed it first; look again.
            if index.compare_exchange(&key, Some(value), None).is_ok() {
                return Some((key, value));
            }
        }
    }
    fn insert(&self, key: u64, value: u64) {
        self.0.as_ref().expect("loaded").insert(key, value);
    }
}

impl Queue for B {
    fn name(&self) -> &'static str {
        "btreemap"
    }
    fn load(&mut self, keys: &[u64]) {
        self.0 = RwLock::new(keys.iter().map(|&k| (k, k ^ 1)).collect());
    }
    fn pop_first(&self) -> Option<(u64, u64)> {
        self.0.write().expect("not poisoned").pop_first()
    }
    fn insert(&self, key: u64, value: u64) {
        self.0.write().expect("not poisoned").insert(key, value);
    }
}

impl Queue for S {
    fn name(&self) -> &'static str {
        "skipmap"
    }
    fn load(&mut self, keys: &[u64]) {
        self.0 = keys.iter().map(|&k| (k, k ^ 1)).collect();
    }
    fn pop_first(&self) -> Option<(u64, u64)> {
        self.0.pop_front().map(|e| (*e.key(), *e.value()))
    }
    fn insert(&self, key: u64, value: u64) {
        self.0.insert(key, value);
    }
}

/// Pops every key of `keys`; ns per pop and a checksum of what came out.
fn drain(q: &mut dyn Queue, keys: &[u64]) -> (f64, u64) {
    q.load(keys);
    let start = Instant::now();
    let mut sum = 0u64;
    let mut n = 0usize;
    while let Some((k, v)) = q.pop_first() {
        assert_eq!(v, k ^ 1, "{}: value of {k}", q.name());
        sum = sum.wrapping_mul(31).wrapping_add(k);
        n += 1;
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    assert_eq!(n, keys.len(), "{}: popped count", q.name());
    (ns, sum)
}

/// A timer queue: `keys` scheduled, then `rounds` times the earliest
/// deadline comes out and one up to `horizon` later goes in.
fn timers(q: &mut dyn Queue, keys: &[u64], rounds: usize, horizon: u64) -> (f64, u64) {
    q.load(keys);
    let mut state = 11u64;
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..rounds {
        let (k, v) = q.pop_first().expect("the queue never empties");
        assert_eq!(v, k ^ 1, "{}: value of {k}", q.name());
        sum = sum.wrapping_mul(31).wrapping_add(k);
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Odd keys only, so a later deadline never collides with a
        // loaded (even) one; collisions between later ones overwrite.
        let next = (k + 1 + (state >> 20) % horizon) | 1;
        q.insert(next, next ^ 1);
    }
    let ns = start.elapsed().as_nanos() as f64 / rounds as f64;
    (ns, sum)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("a key count"));
    let keys: Vec<u64> = (0..n as u64).map(|i| i * 1024).collect();
    let small: Vec<u64> = keys[..n / 10].to_vec();
    let only = std::env::args().nth(2);
    if let Some(pattern) = only.as_deref() {
        let mut x = X(None);
        for _ in 0..RUNS {
            let ns = match pattern {
                "drain" => drain(&mut x, &keys).0,
                "timers" => timers(&mut x, &small, n, 1024 * n as u64 / 10).0,
                other => panic!("unknown pattern {other:?}: drain or timers"),
            };
            println!("xindex {pattern}: {ns:.0} ns");
        }
        return;
    }
    let horizon = 1024 * n as u64 / 10;
    let mut queues: Vec<Box<dyn Queue>> = vec![
        Box::new(X(None)),
        Box::new(B(RwLock::new(BTreeMap::new()))),
        Box::new(S(SkipMap::new())),
    ];
    println!(
        "{n} keys (spacing 1024); queue: {} keys, {n} rounds, horizon {horizon}",
        small.len()
    );
    println!("{:<10} {:>12} {:>12}", "map", "drain ns", "timers ns");
    let mut sums = Vec::new();
    let mut medians = Vec::new();
    for q in &mut queues {
        let (mut d, mut t) = (Vec::new(), Vec::new());
        let mut sum = (0, 0);
        for _ in 0..RUNS {
            let (ns, s) = drain(q.as_mut(), &keys);
            d.push(ns);
            sum.0 = s;
            let (ns, s) = timers(q.as_mut(), &small, n, horizon);
            t.push(ns);
            sum.1 = s;
        }
        let (dm, tm) = (common::median(d), common::median(t));
        println!("{:<10} {dm:>12.0} {tm:>12.0}", q.name());
        sums.push(sum);
        medians.push((dm, tm));
    }
    assert!(
        sums.windows(2).all(|w| w[0] == w[1]),
        "maps disagree: {sums:?}"
    );
    for (q, (d, t)) in queues.iter().zip(&medians).skip(1) {
        println!(
            "xindex vs {}: drain {:.2}x, timers {:.2}x (time ratio)",
            q.name(),
            medians[0].0 / d,
            medians[0].1 / t
        );
    }
}
