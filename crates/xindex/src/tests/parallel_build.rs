//! Groups fitted and built on helper threads (`crate::parallel`): a bulk
//! load, and a pass's split of a group into many parts, give the same
//! index as on one thread, and the index answers like a `BTreeMap`.

use std::collections::BTreeMap;

use crate::parallel::{HELPER_RUNS, MIN_KEYS_OVERRIDE};
use crate::{Config, Stats, XIndex};

/// Keys whose gaps change every few thousand keys, so that chunks settle
/// into groups of different sizes and model counts.
fn bent_keys(n: usize) -> Vec<u64> {
    let mut keys = Vec::with_capacity(n);
    let mut k = 1u64;
    for i in 0..n as u64 {
        let gap = match (i / 3000) % 4 {
            0 => 1,
            1 => 7 + i % 5,
            2 => 1 + (i * i) % 97,
            _ => 40,
        };
        k += gap;
        keys.push(k);
    }
    keys
}

/// What a structure comparison looks at: every group's pivot order,
/// records, model errors and delta.
fn shape(stats: &Stats) -> Vec<(usize, Vec<usize>, usize, usize)> {
    stats
        .groups
        .iter()
        .map(|g| {
            (
                g.records,
                g.error_bounds.clone(),
                g.delta_len,
                g.tail_capacity,
            )
        })
        .collect()
}

/// Runs `f` with every run of the threaded paths given at least `keys`
/// keys on this thread (helpers are only started from it); also returns
/// how many runs went to helper threads.
fn with_min_keys<T>(keys: usize, f: impl FnOnce() -> T) -> (T, usize) {
    MIN_KEYS_OVERRIDE.with(|m| m.set(Some(keys)));
    let before = HELPER_RUNS.with(|n| n.get());
    let out = f();
    MIN_KEYS_OVERRIDE.with(|m| m.set(None));
    (out, HELPER_RUNS.with(|n| n.get()) - before)
}

fn config(build_threads: usize) -> Config {
    Config {
        maintenance_interval: None,
        build_threads,
        ..Config::default()
    }
}

#[test]
fn bulk_loads_on_one_and_several_threads_build_the_same_index() {
    let keys = bent_keys(60_000);
    let load = |threads| {
        with_min_keys(4096, || {
            XIndex::<u64, u64>::bulk_load(keys.iter().map(|&k| (k, k / 3)), config(threads))
                .unwrap()
        })
    };
    let (one, helped) = load(1);
    assert_eq!(helped, 0);
    let one_shape = shape(&one.stats());
    assert!(one_shape.len() > 20, "{} groups", one_shape.len());
    for threads in [2, 3, 8] {
        let (many, helped) = load(threads);
        assert!(helped >= 2 * (threads - 1), "{helped} helper runs");
        assert_eq!(shape(&many.stats()), one_shape, "{threads} threads");
        for &k in &keys {
            assert_eq!(many.get(&k), Some(k / 3));
            assert_eq!(many.get(&(k + 1)), one.get(&(k + 1)));
        }
        let mut out = Vec::new();
        many.scan(&0, keys.len() + 1, &mut out);
        assert_eq!(out.len(), keys.len());
        assert!(out.iter().map(|(k, _)| k).eq(keys.iter()));
    }
}

#[test]
fn a_split_built_on_helper_threads_matches_the_oracle() {
    // The lower half loaded; then ascending keys above it (one group's
    // delta grows to many parts' worth) and keys inside it, some removed
    // and updated, and one pass splits and compacts.
    let keys = bent_keys(80_000);
    let (loaded, burst) = keys.split_at(20_000);
    let run = |threads| {
        with_min_keys(2048, || {
            let index =
                XIndex::<u64, u64>::bulk_load(loaded.iter().map(|&k| (k, k)), config(threads))
                    .unwrap();
            let mut oracle: BTreeMap<u64, u64> = loaded.iter().map(|&k| (k, k)).collect();
            for (i, &k) in burst.iter().enumerate() {
                assert_eq!(index.insert(k, i as u64), oracle.insert(k, i as u64));
                if i % 7 == 0 {
                    let inside = loaded[(i * 13) % loaded.len()] + 1;
                    assert_eq!(index.insert(inside, 1), oracle.insert(inside, 1));
                }
                if i % 11 == 0 {
                    let old = loaded[(i * 17) % loaded.len()];
                    assert_eq!(index.remove(&old), oracle.remove(&old));
                }
            }
            let splits_before = index.stats().group_splits;
            index.maintain_now();
            let stats = index.stats();
            assert!(
                stats.group_splits > splits_before,
                "the pass splits the grown group"
            );
            assert_eq!(stats.len, oracle.len());
            for (&k, &v) in &oracle {
                assert_eq!(index.get(&k), Some(v), "key {k}");
            }
            let mut out = Vec::new();
            index.scan(&0, oracle.len() + 1, &mut out);
            assert!(
                out.iter().eq(oracle
                    .iter()
                    .map(|(k, v)| (*k, *v))
                    .collect::<Vec<_>>()
                    .iter())
            );
            // Inserts keep working on the new groups.
            let top = *keys.last().unwrap();
            for k in top + 1..top + 500 {
                assert_eq!(index.insert(k, k), None);
                oracle.insert(k, k);
            }
            index.maintain_now();
            for (&k, &v) in oracle.range(top - 1000..) {
                assert_eq!(index.get(&k), Some(v));
            }
            shape(&index.stats())
        })
    };
    let (one, helped) = run(1);
    assert_eq!(helped, 0);
    assert!(one.len() > 20, "{} groups", one.len());
    let (three, helped) = run(3);
    // The bulk load's two steps, and the split's plan and build.
    assert!(helped >= 4 * 2, "{helped} helper runs");
    assert_eq!(three, one);
}

#[test]
fn splits_built_on_helper_threads_keep_concurrent_writers_and_readers_right() {
    // Nothing random but the interleaving: a soak repeats it as it is.
    for _ in super::soak::rounds("splits_built_on_helper_threads_keep_concurrent_writers") {
        splits_on_helpers_under_writers();
    }
}

fn splits_on_helpers_under_writers() {
    // Two writers grow the top group (ascending keys of their own, values
    // rewritten now and then) and write inside the loaded range, a reader
    // checks loaded keys, while a third thread keeps running passes whose
    // splits are built on helper threads. Every write is checked by its
    // writer right after it, and everything at the end.
    use std::sync::atomic::{AtomicBool, Ordering};

    // Multiples of 4: room between loaded keys for both writers.
    let loaded: Vec<u64> = bent_keys(20_000).into_iter().map(|k| k * 4).collect();
    let top = *loaded.last().unwrap();
    let index = XIndex::<u64, u64>::bulk_load(loaded.iter().map(|&k| (k, k)), config(3)).unwrap();
    let done = AtomicBool::new(false);
    let (mut helped, mut passes) = (0, 0);
    std::thread::scope(|s| {
        let maintainer = s.spawn(|| {
            with_min_keys(1024, || {
                let mut passes = 0;
                while !done.load(Ordering::Acquire) {
                    index.maintain_now();
                    passes += 1;
                }
                passes
            })
        });
        let reader = s.spawn(|| {
            let mut i = 0usize;
            while !done.load(Ordering::Acquire) {
                let k = loaded[(i * 7919) % loaded.len()];
                // Loaded keys keep their value: writers only touch others.
                assert_eq!(index.get(&k), Some(k), "loaded key {k}");
                i += 1;
            }
        });
        let writers: Vec<_> = (0..2u64)
            .map(|t| {
                let index = &index;
                let loaded = &loaded;
                s.spawn(move || {
                    let mut mine = BTreeMap::new();
                    for i in 0..60_000u64 {
                        let k = top + 1 + 2 * i + t;
                        assert_eq!(index.insert(k, i), None);
                        mine.insert(k, i);
                        if i % 5 == 0 {
                            // Between two loaded keys, owned by this writer.
                            let inside = loaded[(i as usize * 31) % loaded.len()] + 1 + t;
                            let previous = mine.insert(inside, i);
                            assert_eq!(index.insert(inside, i), previous);
                        }
                        if i % 9 == 0 && i > 0 {
                            let back = top + 1 + 2 * (i / 2) + t;
                            assert_eq!(index.insert(back, i), mine.insert(back, i));
                            assert_eq!(index.get(&back), Some(i));
                        }
                        assert_eq!(index.get(&k), Some(mine[&k]));
                    }
                    mine
                })
            })
            .collect();
        let logs: Vec<BTreeMap<u64, u64>> =
            super::join_then_stop(writers, || done.store(true, Ordering::Release));
        reader.join().unwrap();
        let (p, h) = maintainer.join().unwrap();
        (passes, helped) = (p, h);
        index.maintain_now();
        let mut expected: BTreeMap<u64, u64> = loaded.iter().map(|&k| (k, k)).collect();
        for log in logs {
            expected.extend(log);
        }
        assert_eq!(index.len(), expected.len());
        for (&k, &v) in &expected {
            assert_eq!(index.get(&k), Some(v), "key {k}");
        }
        let mut out = Vec::new();
        index.scan(&0, expected.len() + 1, &mut out);
        assert!(
            out.iter()
                .copied()
                .eq(expected.iter().map(|(k, v)| (*k, *v)))
        );
    });
    assert!(passes > 0);
    assert!(
        helped > 0,
        "no pass split on helper threads ({passes} passes)"
    );
}
