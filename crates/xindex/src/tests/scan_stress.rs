//! Scans, forwards and backwards, while writers update values in place,
//! remove and re-insert keys, insert new ones between them, and
//! maintenance compacts, splits and merges: every scan must come back
//! sorted, without duplicates, with each value one that was written for
//! its key, and with every key that no writer ever removes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{TestKey, soak};
use crate::{Config, XIndex};

/// Keys `0..KEYS` step 2 are bulk-loaded, the rest written by the
/// writers; those divisible by 4 are never removed.
const KEYS: u64 = 4_000;
const RUN: Duration = Duration::from_millis(600);

/// A value names its key, so a value copied beside the wrong key (a torn
/// block read) is caught.
fn value_for(key: u64, version: u64) -> u64 {
    (version << 32) | key
}

#[test]
fn scans_stay_consistent_under_writers_and_maintenance() {
    for round in soak::rounds("scans_stay_consistent_under_writers_and_maintenance") {
        scans_under_writers::<u64>(round);
    }
}

/// The same with byte-string keys, whose scans clone heap keys out of
/// arrays and delta records that maintenance retires meanwhile.
#[test]
fn byte_string_scans_stay_consistent_under_writers_and_maintenance() {
    for round in soak::rounds("byte_string_scans_stay_consistent_under_writers_and_maintenance") {
        scans_under_writers::<Vec<u8>>(round);
    }
}

/// `(logical key, value)` pairs from the index's records.
fn logical<K: TestKey>(records: impl IntoIterator<Item = (K, u64)>) -> Vec<(u64, u64)> {
    records.into_iter().map(|(k, v)| (k.logical(), v)).collect()
}

fn scans_under_writers<K: TestKey>(round: u64) {
    let mut rng = soak::config_rng(round);
    let config = Config {
        error_bound: soak::pick(&mut rng, round, &[4, 1, 16]),
        delta_threshold: soak::pick(&mut rng, round, &[8, 3, 32]),
        max_models: soak::pick(&mut rng, round, &[4, 1, 2]),
        initial_group_size: soak::pick(&mut rng, round, &[64, 16, 256]),
        maintenance_interval: Some(Duration::from_millis(1)),
        small_delta_delay: Duration::ZERO,
        // Not starved by the three busy threads of this test.
        maintenance_nice: 0,
        ..Config::default()
    };
    let index = XIndex::bulk_load(
        (0..KEYS).step_by(2).map(|k| (K::of(k), value_for(k, 0))),
        config,
    )
    .unwrap();
    let stop = AtomicBool::new(false);
    let scans = std::thread::scope(|s| {
        for thread in 0..2u64 {
            let (index, stop) = (&index, &stop);
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(soak::seed(thread, round));
                let mut version = 1;
                while !stop.load(Ordering::Relaxed) {
                    // Even keys are bulk-loaded (array records); odd ones
                    // go to deltas, so compactions have work and scans
                    // meet frozen deltas and `tmp_buf`s.
                    let key = rng.random_range(0..KEYS);
                    version += 1;
                    if version % 256 == 0 {
                        // Four busy threads share two cores here: leave
                        // the maintenance thread a turn, so that passes
                        // finish while the scans run.
                        std::thread::yield_now();
                    }
                    if key % 4 != 0 && rng.random_bool(0.3) {
                        index.remove(&K::of(key));
                    } else {
                        index.insert(K::of(key), value_for(key, version));
                    }
                }
            });
        }
        let forwards = s.spawn(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(soak::seed(99, round));
            let (mut scans, mut found) = (0u64, Vec::new());
            let start = Instant::now();
            while start.elapsed() < RUN {
                let from = rng.random_range(0..KEYS);
                let n = rng.random_range(1..200);
                found.clear();
                index.scan(&K::of(from), n, &mut found);
                let out = logical(found.drain(..));
                assert!(out.len() <= n);
                assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "unsorted: {out:?}");
                for &(k, v) in &out {
                    assert!(k >= from, "key {k} from {from}");
                    assert_eq!(v & 0xffff_ffff, k, "value {v:#x} beside key {k}");
                }
                // Keys divisible by 4 are always present: none may be skipped.
                if out.len() == n {
                    let last = out[n - 1].0;
                    let missing = (from.div_ceil(4) * 4..=last)
                        .step_by(4)
                        .find(|k| out.binary_search_by_key(k, |p| p.0).is_err());
                    assert_eq!(
                        missing, None,
                        "scan of {n} from {from} skipped a key: {out:?}"
                    );
                }
                scans += 1;
            }
            scans
        });
        // Descending ranges down from a key, and ranges taken from both
        // ends at once: the same checks, mirrored.
        let backwards = s.spawn(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(soak::seed(98, round));
            let mut scans = 0u64;
            let start = Instant::now();
            while start.elapsed() < RUN {
                let to = rng.random_range(0..KEYS + 8);
                let n = rng.random_range(1..200);
                // `down`, and the lowest key of the span it covers.
                let (mut down, covered): (Vec<(u64, u64)>, u64) = if rng.random_bool(0.5) {
                    let down = logical(index.range(..=K::of(to)).rev().take(n));
                    let covered = if down.len() == n { down[n - 1].0 } else { 0 };
                    (down, covered)
                } else {
                    // From both ends of `from..=to`: the low end's records
                    // ascending, then the high end's descending; reversed
                    // into one ascending list below. One range in eight
                    // spans most of the keys, so that an end walked by
                    // `next` fetches past 256 records and its batches grow.
                    let span = if rng.random_ratio(1, 8) {
                        KEYS
                    } else {
                        n as u64 * 2
                    };
                    let from = to.saturating_sub(span);
                    // Taken a record at a time, or after `steps` of them
                    // the rest by `fold` (ascending) or `rfold`
                    // (descending), whose batches grow past `next`'s.
                    let mut range = index.range(K::of(from)..=K::of(to));
                    let (mut low, mut high) = (Vec::new(), Vec::new());
                    let finish = rng.random_range(0..3u8);
                    let steps = rng.random_range(0..2 * span as usize);
                    for step in 0.. {
                        if finish != 0 && step == steps {
                            let keep = |mut side: Vec<(u64, u64)>, (k, v): (K, u64)| {
                                side.push((k.logical(), v));
                                side
                            };
                            if finish == 1 {
                                low = range.fold(low, keep);
                            } else {
                                high = range.rfold(high, keep);
                            }
                            break;
                        }
                        let (taken, side) = if rng.random_bool(0.5) {
                            (range.next(), &mut low)
                        } else {
                            (range.next_back(), &mut high)
                        };
                        match taken {
                            Some((k, v)) => side.push((k.logical(), v)),
                            None => {
                                assert_eq!(
                                    range.next(),
                                    None,
                                    "an exhausted range stays exhausted"
                                );
                                break;
                            }
                        }
                    }
                    high.extend(low.into_iter().rev());
                    assert!(
                        high.iter().all(|&(k, _)| k >= from),
                        "below {from}: {high:?}"
                    );
                    (high, from)
                };
                assert!(
                    down.windows(2).all(|w| w[0].0 > w[1].0),
                    "unsorted: {down:?}"
                );
                for &(k, v) in &down {
                    assert!(k <= to, "key {k} to {to}");
                    assert_eq!(v & 0xffff_ffff, k, "value {v:#x} beside key {k}");
                }
                down.reverse();
                let missing = (covered.div_ceil(4) * 4..=to.min(KEYS - 1))
                    .step_by(4)
                    .find(|k| down.binary_search_by_key(k, |p| p.0).is_err());
                assert_eq!(missing, None, "down from {to} skipped a key: {down:?}");
                scans += 1;
            }
            scans
        });
        super::join_then_stop(vec![forwards, backwards], || {
            stop.store(true, Ordering::Relaxed)
        })
    });
    assert!(scans.iter().all(|&n| n > 0), "{scans:?}");
    let stats = index.stats();
    assert!(
        stats.compactions + stats.group_splits + stats.group_merges > 0,
        "maintenance changed nothing under the scans: {stats:?}"
    );
    eprintln!(
        "{scans:?} scans (forwards, backwards); {} compactions, {} group splits, {} merges, {} passes",
        stats.compactions, stats.group_splits, stats.group_merges, stats.maintenance_passes
    );
}
