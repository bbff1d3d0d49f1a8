//! The removals built from the single-key ones: `retain`, `remove_range`
//! and `clear`, alone and racing writers and maintenance. (Their
//! sequential results are in the oracle tests.)

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::api::within_seconds;
use super::{join_then_stop, tiny_config};
use crate::{Config, XIndex};

/// Small groups and a 1 ms background thread, so that compactions, splits
/// and merges run while the removals do.
fn busy_config() -> Config {
    Config {
        error_bound: 4,
        delta_threshold: 16,
        initial_group_size: 64,
        maintenance_interval: Some(Duration::from_millis(1)),
        small_delta_delay: Duration::from_millis(2),
        ..tiny_config()
    }
}

#[test]
fn retain_keeps_a_record_written_after_keep_saw_it() {
    let index = Arc::new(
        XIndex::<u64, u64>::bulk_load((0..1_000u64).map(|k| (k, 0)), tiny_config()).unwrap(),
    );
    let inner = Arc::clone(&index);
    // `keep` rejects every record, but first writes to some keys itself:
    // to the key it is deciding on (the removal must then fail) and to a
    // key two further on (which retain sees with its new value and removes,
    // or saw with the old one in a batch already fetched, and keeps).
    let seen = within_seconds(60, move || {
        let mut seen = Vec::new();
        inner.retain(|&k, v| {
            seen.push((k, v));
            if k % 10 == 3 {
                inner.insert(k, 1);
            }
            if k % 10 == 5 {
                inner.insert(k + 2, 2);
            }
            false
        });
        seen
    });
    assert_eq!(seen.len(), 1_000, "every record visited once");
    let left: BTreeMap<u64, u64> = index.iter().collect();
    for (k, v) in seen {
        let stays = match k % 10 {
            // Written by `keep` itself between the read and the removal.
            3 => Some(1),
            // Written while retain ran: seen before (in a batch already
            // fetched), so the removal failed and the new value stays, or
            // after, and rejected with it.
            7 if v == 0 => Some(2),
            7 => {
                assert_eq!(v, 2, "key {k}");
                None
            }
            _ => {
                assert_eq!(v, 0, "key {k}");
                None
            }
        };
        assert_eq!(left.get(&k).copied(), stays, "key {k}, seen with {v}");
    }
    assert_eq!(index.len(), left.len());
}

#[test]
fn clear_and_remove_range_on_small_and_extreme_indexes() {
    let index = XIndex::<u64, u64>::new(tiny_config()).unwrap();
    index.clear();
    assert_eq!(index.remove_range(..), 0);
    index.insert(u64::MAX, 1);
    index.insert(0, 2);
    assert_eq!(index.remove_range(1..), 1);
    assert_eq!(index.iter().collect::<Vec<_>>(), [(0, 2)]);
    assert_eq!(index.remove_range(..=0), 1);
    assert!(index.is_empty());
    for k in 0..500u64 {
        index.insert(k * 3, k);
    }
    assert_eq!(index.remove_range(10..=20), 3); // 12, 15, 18
    let (start, end) = (20, 10);
    assert_eq!(
        index.remove_range(start..end),
        0,
        "an inverted range is empty"
    );
    index.clear();
    assert!(index.is_empty());
    assert_eq!(index.iter().next(), None);
    // Cleared records leave with compaction.
    super::settle(&index);
    assert_eq!(
        index
            .stats()
            .groups
            .iter()
            .map(|g| g.records)
            .sum::<usize>(),
        0
    );
}

#[test]
fn retain_and_remove_range_race_with_writers_exactly() {
    const KEYS: u64 = 100_000;
    for round in 0..3u64 {
        // Even keys hold even values; the writer writes odd values to even
        // keys (updates) and inserts odd keys.
        let index = XIndex::<u64, u64>::bulk_load((0..KEYS).map(|k| (k * 2, k * 2)), busy_config())
            .unwrap();
        let (done, writing) = (AtomicBool::new(false), AtomicBool::new(false));
        let (low, high) = (KEYS / 2, KEYS + KEYS / 2);
        let (removed, written) = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut rng = ChaCha8Rng::seed_from_u64(round);
                let mut written = BTreeMap::new();
                while !done.load(Ordering::Relaxed) {
                    let k = rng.random_range(0..2 * KEYS);
                    let v = rng.random::<u64>() | 1;
                    index.insert(k, v);
                    written.insert(k, v);
                    if written.len() == 1_000 {
                        writing.store(true, Ordering::Release);
                    }
                }
                written
            });
            // Started once the writer is running, so that they race it.
            let (index, writing) = (&index, &writing);
            let wait = move || {
                while !writing.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            };
            let workers = vec![
                s.spawn(move || {
                    wait();
                    index.retain(|_, v| v % 2 == 1);
                    0
                }),
                s.spawn(move || {
                    wait();
                    index.remove_range(low..high)
                }),
            ];
            let removed = join_then_stop(workers, || done.store(true, Ordering::Relaxed));
            (removed[1], writer.join().unwrap())
        });
        let left: BTreeMap<u64, u64> = index.iter().collect();
        assert_eq!(left.len(), index.len());
        // Nothing but the writer's values survive retain.
        for (k, v) in &left {
            assert_eq!(
                written.get(k),
                Some(v),
                "key {k} kept a value nobody wrote last"
            );
        }
        // A key the writer wrote outside the removed range stays with its
        // last value: retain keeps odd values, and an even one it saw and
        // rejected was replaced, so its exchange failed.
        for (k, v) in &written {
            if !(low..high).contains(k) {
                assert_eq!(
                    left.get(k),
                    Some(v),
                    "key {k}, written outside the range, lost"
                );
            }
        }
        // Every key present in the range throughout is gone; what
        // remove_range counts is exactly what it took.
        let in_range_before: BTreeSet<u64> = (low..high).filter(|k| k % 2 == 0).collect();
        let written_in_range: BTreeSet<u64> = written
            .keys()
            .copied()
            .filter(|k| (low..high).contains(k))
            .collect();
        for k in in_range_before.difference(&written_in_range) {
            assert!(!left.contains_key(k), "key {k} survived remove_range");
        }
        assert!(removed <= in_range_before.union(&written_in_range).count());
    }
}

/// An index of `pairs` in one group (up to 2^17 keys), with no
/// background thread: removed array records stay until a test's pass.
fn one_quiet_group(pairs: impl IntoIterator<Item = (u64, u64)>) -> XIndex<u64, u64> {
    let config = Config {
        initial_group_size: 1 << 17,
        maintenance_interval: None,
        ..Config::default()
    };
    let index = XIndex::bulk_load(pairs, config).unwrap();
    assert_eq!(index.stats().groups.len(), 1);
    index
}

#[test]
fn a_scan_past_a_long_removed_prefix_gets_its_group_compacted() {
    // A prefix of 1,000 removed records is far below the f = 1/4 that the
    // paper's trigger waits for.
    let index = one_quiet_group((0..100_000u64).map(|k| (k, k)));
    assert_eq!(index.remove_range(..1_000), 1_000);
    let background = || index.inner().maintain(crate::maintenance::Pass::Background);
    background();
    assert_eq!(index.stats().compactions, 0, "below the removed share");
    // A successor query skips the prefix, which marks the group.
    assert_eq!(index.first_key_value(), Some((1_000, 1_000)));
    background();
    let stats = index.stats();
    assert_eq!(stats.compactions, 1, "{stats:?}");
    assert_eq!(stats.groups[0].records, 99_000);
    // And so does a backward scan past a removed suffix.
    assert_eq!(index.remove_range(90_000..), 10_000);
    assert_eq!(index.last_key_value(), Some((89_999, 89_999)));
    background();
    assert_eq!(index.stats().compactions, 2);
    assert_eq!(index.stats().groups[0].records, 89_000);
    // A short run does not.
    assert_eq!(index.remove_range(1_000..1_100), 100);
    assert_eq!(index.first_key_value(), Some((1_100, 1_100)));
    background();
    assert_eq!(index.stats().compactions, 2);
}

/// The removed prefix and suffix a scan has skipped, read from the only
/// group.
fn known_removed(index: &XIndex<u64, u64>) -> (usize, usize) {
    let guard = index.inner().reclaimer.pin();
    let (group, end) = index.inner().root(&guard).route_first(&guard);
    assert!(end.is_none(), "one group");
    group.known_removed()
}

#[test]
fn a_removed_prefix_or_suffix_is_skipped_once_and_keys_put_back_are_still_found() {
    let index = one_quiet_group((0..10_000u64).map(|k| (k, k + 1)));
    assert_eq!(known_removed(&index), (0, 10_000));
    // A queue drained from the front, one record at a time.
    for k in 0..5_000u64 {
        let (key, value) = index.first_key_value().unwrap();
        assert_eq!((key, value), (k, k + 1));
        assert_eq!(
            index.compare_exchange(&key, Some(value), None),
            Ok(Some(value))
        );
        // Each look skipped the records taken before it only once.
        assert_eq!(known_removed(&index).0, k as usize);
    }
    assert_eq!(index.first_key_value(), Some((5_000, 5_001)));
    assert_eq!(known_removed(&index), (5_000, 10_000));
    // And from the back.
    for k in (9_000..10_000u64).rev() {
        assert_eq!(index.last_key_value(), Some((k, k + 1)));
        assert_eq!(index.remove(&k), Some(k + 1));
    }
    assert_eq!(index.last_key_value(), Some((8_999, 9_000)));
    assert_eq!(known_removed(&index), (5_000, 9_000));
    // A successor query from inside the prefix jumps it.
    assert_eq!(
        index.lower_bound(Bound::Included(&3_000)),
        Some((5_000, 5_001))
    );
    // Keys put back go to the delta (a removed array record is never
    // revived), so scans find them however far the bounds have moved.
    for k in [0, 10, 4_999, 9_000, 9_999] {
        assert_eq!(index.insert(k, 7), None);
    }
    assert_eq!(known_removed(&index), (5_000, 9_000));
    assert_eq!(index.first_key_value(), Some((0, 7)));
    assert_eq!(index.last_key_value(), Some((9_999, 7)));
    assert_eq!(index.lower_bound(Bound::Excluded(&10)), Some((4_999, 7)));
    assert_eq!(index.upper_bound(Bound::Excluded(&9_999)), Some((9_000, 7)));
    let all: Vec<u64> = index.iter().map(|(k, _)| k).collect();
    let expected: Vec<u64> = [0, 10, 4_999]
        .into_iter()
        .chain(5_000..9_000)
        .chain([9_000, 9_999])
        .collect();
    assert_eq!(all, expected);
    let back: Vec<u64> = index.iter().rev().map(|(k, _)| k).collect();
    assert_eq!(back, expected.iter().rev().copied().collect::<Vec<_>>());
    // A compaction builds a new array, whose bounds start afresh.
    index.maintain_now();
    assert_eq!(known_removed(&index), (0, expected.len()));
    assert_eq!(index.len(), expected.len());
}
