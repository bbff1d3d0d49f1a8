//! Distribution shift: while readers run, every key of distribution A is
//! removed and the keys of a differently shaped distribution B inserted.
//! The map must stay correct throughout and the structure must follow
//! (groups split for B, A's emptied groups merge).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::settle;
use crate::{Config, XIndex};

const N: u64 = 20_000;

/// A: dense, evenly spaced keys.
fn key_a(i: u64) -> u64 {
    i * 3
}

/// B: quadratic keys far above A (a shape no single line fits).
fn key_b(i: u64) -> u64 {
    1 << 40 | (i * i * 17 + i)
}

fn value_of(key: u64) -> u64 {
    key.rotate_left(17) ^ 0x5555
}

#[test]
fn remove_a_insert_b_while_reading() {
    for round in super::soak::rounds("remove_a_insert_b_while_reading") {
        shift(round);
    }
}

fn shift(round: u64) {
    let mut rng = super::soak::config_rng(round);
    let config = Config {
        error_bound: super::soak::pick(&mut rng, round, &[8, 2, 32]),
        delta_threshold: super::soak::pick(&mut rng, round, &[64, 16, 256]),
        tolerance: 0.25,
        max_models: 4,
        initial_group_size: 512,
        max_root_models: 1024,
        sequential_capacity: 0,
        sequential_groups: crate::SequentialGroups::Detected,
        maintenance_interval: Some(Duration::from_millis(1)),
        small_delta_delay: Duration::from_millis(5),
        delta_budget_bytes: 64 << 20,
        maintenance_nice: Config::default().maintenance_nice,
        build_threads: Config::default().build_threads,
    };
    let index = XIndex::bulk_load((0..N).map(|i| (key_a(i), value_of(key_a(i)))), config).unwrap();
    let groups_before = index.stats().group_count();
    let writing = AtomicBool::new(true);
    // Readers that have found a key: the shift starts once both have, so
    // their reads overlap it however late the scheduler starts them.
    let ready = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for reader in 0..2u64 {
            let index = &index;
            let (writing, ready) = (&writing, &ready);
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(super::soak::seed(reader, round));
                let mut seen = 0u64;
                while writing.load(Ordering::Relaxed) {
                    let i = rng.random_range(0..N);
                    let key = if rng.random_bool(0.5) {
                        key_a(i)
                    } else {
                        key_b(i)
                    };
                    // Present or not, a key never maps to a wrong value.
                    if let Some(v) = index.get(&key) {
                        assert_eq!(v, value_of(key), "key {key}");
                        seen += 1;
                        if seen == 1 {
                            ready.fetch_add(1, Ordering::Release);
                        }
                    }
                    if i % 64 == 0 {
                        let mut out = Vec::new();
                        index.scan(&key, 8, &mut out);
                        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
                        assert!(out.iter().all(|(k, v)| *v == value_of(*k)));
                    }
                    if i % 64 == 1 {
                        // Batched lookups race the same splits and merges.
                        let batch: Vec<u64> = (0..40)
                            .map(|j| {
                                let i = (i + j * 7919) % N;
                                if j % 2 == 0 { key_a(i) } else { key_b(i) }
                            })
                            .collect();
                        let mut values = Vec::new();
                        index.get_many(&batch, &mut values);
                        assert_eq!(values.len(), batch.len());
                        for (key, value) in batch.iter().zip(values) {
                            assert!(value.is_none_or(|v| v == value_of(*key)), "key {key}");
                        }
                    }
                }
                assert!(seen > 0);
            });
        }
        // Bounded: a reader that panicked before it found a key never
        // counts, and its panic is reported when the scope ends.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ready.load(Ordering::Acquire) < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
        // Interleave the shift: remove A from both ends while inserting B.
        for i in 0..N {
            let a = if i % 2 == 0 { i / 2 } else { N - 1 - i / 2 };
            assert_eq!(
                index.remove(&key_a(a)),
                Some(value_of(key_a(a))),
                "A key {a}"
            );
            assert_eq!(index.insert(key_b(i), value_of(key_b(i))), None);
        }
        // Let maintenance catch up while readers still run.
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while std::time::Instant::now() < deadline {
            let s = index.stats();
            if s.delta_total() == 0 && s.group_merges > 0 && s.group_splits > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        writing.store(false, Ordering::Relaxed);
    });
    settle(&index);
    assert_eq!(index.len(), N as usize);
    for i in 0..N {
        assert_eq!(index.get(&key_a(i)), None);
        assert_eq!(index.get(&key_b(i)), Some(value_of(key_b(i))));
    }
    let all: Vec<u64> = index.range(..).map(|(k, _)| k).collect();
    let expected: Vec<u64> = (0..N).map(key_b).collect();
    assert_eq!(all, expected);
    let stats = index.stats();
    assert!(
        stats.group_splits > 0,
        "B's inserts split groups: {stats:?}"
    );
    assert!(
        stats.group_merges > 0,
        "A's emptied groups merge: {stats:?}"
    );
    assert!(groups_before > 1);
}
