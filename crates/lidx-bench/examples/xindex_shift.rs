//! XIndex paper §6.2.3, distribution shift: while readers run, remove every
//! key of distribution A and insert the keys of distribution B; then compare
//! lookup throughput on B against a fresh bulk load of B.
//!
//! `cargo run --release -p lidx-bench --example xindex_shift [-- KEYS]`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;

use common::lookups_per_sec;
use lidx_bench::keygen::{Distribution, generate};
use lidx_xindex::{Config, XIndex};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

fn summary(index: &XIndex<u64, u64>) -> String {
    let s = index.stats();
    format!(
        "{} keys, {} groups, max models/group {}, delta {}, compactions {}, model splits/merges {}/{}, group splits/merges {}/{}, root updates {}",
        s.len,
        s.group_count(),
        s.models_per_group().iter().max().unwrap_or(&0),
        s.delta_total(),
        s.compactions,
        s.model_splits,
        s.model_merges,
        s.group_splits,
        s.group_merges,
        s.root_updates
    )
}

fn main() -> lidx_core::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("KEYS must be a number"))
        .unwrap_or(1_000_000);
    // A: lognormal; B: uniform, shifted past A's range so the sets are disjoint.
    let a = generate(Distribution::Lognormal, n, 1)?;
    let mut b: Vec<u64> = generate(Distribution::UniformSparse, n, 2)?
        .into_iter()
        .map(|k| (k >> 2) | (1 << 62))
        .filter(|k| a.binary_search(k).is_err())
        .collect();
    b.sort_unstable();
    b.dedup();
    let pairs: Vec<(u64, u64)> = a.iter().map(|&k| (k, k ^ 1)).collect();
    let index = Arc::new(XIndex::bulk_load(pairs, Config::default())?);
    println!("before: {}", summary(&index));

    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (index, stop, reads) = (index.clone(), stop.clone(), reads.clone());
        let (a, b) = (a.clone(), b.clone());
        std::thread::spawn(move || {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
            while !stop.load(Ordering::Relaxed) {
                let k = if rng.random_bool(0.5) {
                    a[rng.random_range(0..a.len())]
                } else {
                    b[rng.random_range(0..b.len())]
                };
                // Any answer must be the value its one writer put.
                if let Some(v) = index.get(&k) {
                    assert_eq!(v, k ^ 1, "wrong value for {k}");
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let started = Instant::now();
    let mut order_a = a.clone();
    let mut order_b = b.clone();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
    order_a.shuffle(&mut rng);
    order_b.shuffle(&mut rng);
    for i in 0..order_a.len().max(order_b.len()) {
        if let Some(ka) = order_a.get(i) {
            assert_eq!(index.remove(ka), Some(ka ^ 1));
        }
        if let Some(kb) = order_b.get(i) {
            index.insert(*kb, kb ^ 1);
        }
    }
    let shift_s = started.elapsed().as_secs_f64();
    // Let maintenance settle: wait until passes stop changing the shape.
    let mut last = String::new();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(200));
        let now = summary(&index);
        if now == last {
            break;
        }
        last = now;
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("reader panicked");
    println!(
        "shift: {} removes + {} inserts in {shift_s:.2} s while a reader did {} checked reads",
        a.len(),
        b.len(),
        reads.load(Ordering::Relaxed)
    );
    println!("after:  {}", summary(&index));
    assert_eq!(index.len(), b.len());
    for k in a.iter().step_by(97) {
        assert_eq!(index.get(k), None);
    }
    let shifted = lookups_per_sec(&index, &b, 5);
    drop(index);
    let fresh_pairs: Vec<(u64, u64)> = {
        let mut s = b.clone();
        s.sort_unstable();
        s.into_iter().map(|k| (k, k ^ 1)).collect()
    };
    let fresh = XIndex::bulk_load(fresh_pairs, Config::default())?;
    println!("fresh:  {}", summary(&fresh));
    let fresh_rate = lookups_per_sec(&fresh, &b, 5);
    println!(
        "lookups on B, 1 thread, best of 5 x 2M: after shift {:.2} Mops/s, fresh bulk load {:.2} Mops/s, ratio {:.2}",
        shifted / 1e6,
        fresh_rate / 1e6,
        shifted / fresh_rate
    );
    Ok(())
}
