use std::ops::Bound;
use std::time::Duration;

use lidx_core::{Error, Key};

use super::{settle, tiny_config, wait_until};
use crate::{Config, XIndex};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn is_send_and_sync() {
    assert_send_sync::<XIndex<u64, u64>>();
    assert_send_sync::<XIndex<Vec<u8>, i64>>();
    // A range iterator holds no epoch guard between fetches (a guard is
    // neither), so it can move to another thread mid-walk.
    assert_send_sync::<crate::Range<'static, u64, u64>>();
    assert_send_sync::<crate::Range<'static, Vec<u8>, i64>>();
}

#[test]
fn bulk_load_rejects_bad_input_and_config() {
    let unsorted = XIndex::<u64, u64>::bulk_load([(1, 1), (3, 3), (2, 2)], Config::default());
    assert!(matches!(unsorted, Err(Error::Unsorted { index: 2 })));
    let dup = XIndex::<u64, u64>::bulk_load([(1, 1), (1, 2)], Config::default());
    assert!(matches!(dup, Err(Error::InvalidArgument(m)) if m.contains("duplicate")));
    let bad = Config {
        max_models: 0,
        ..Config::default()
    };
    assert!(XIndex::<u64, u64>::new(bad).is_err());
    let no_budget = Config {
        delta_budget_bytes: 0,
        ..Config::default()
    };
    let err = XIndex::<u64, u64>::new(no_budget).err().unwrap();
    assert!(err.to_string().contains("delta_budget_bytes"), "{err}");
    // Values that would abort on allocation or make fits quadratic are
    // refused up front, each naming its field.
    let rejected = [
        (
            Config {
                sequential_capacity: usize::MAX / 8,
                ..Config::default()
            },
            "sequential_capacity",
        ),
        (
            Config {
                max_models: usize::MAX,
                ..Config::default()
            },
            "max_models",
        ),
        (
            Config {
                tolerance: f64::NAN,
                ..Config::default()
            },
            "tolerance",
        ),
        (
            Config {
                tolerance: -0.5,
                ..Config::default()
            },
            "tolerance",
        ),
        (
            Config {
                delta_threshold: 0,
                ..Config::default()
            },
            "delta_threshold",
        ),
        (
            Config {
                initial_group_size: 0,
                ..Config::default()
            },
            "initial_group_size",
        ),
        (
            Config {
                max_root_models: 0,
                ..Config::default()
            },
            "max_root_models",
        ),
    ];
    for (config, field) in rejected {
        let err = XIndex::<u64, u64>::new(config.clone()).err().unwrap();
        assert!(err.to_string().contains(field), "{field}: {err}");
        let pairs = (0..10u64).map(|k| (k, k));
        assert!(
            XIndex::<u64, u64>::bulk_load(pairs, config).is_err(),
            "{field}"
        );
    }
    let largest = Config {
        sequential_capacity: crate::MAX_SEQUENTIAL_CAPACITY,
        max_models: crate::MAX_MODELS,
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..1000u64).map(|k| (k, k)), largest).unwrap();
    assert_eq!(index.get(&999), Some(999));
}

/// A key type whose encoding of zero is invalid (`decode_le` rejects it),
/// as a user's checked or non-zero key type might be.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct NonZeroKey(u64);

impl Key for NonZeroKey {
    const ENCODED_WIDTH: Option<usize> = Some(8);

    fn encode_le(&self, out: &mut Vec<u8>) {
        self.0.encode_le(out);
    }

    fn decode_le(bytes: &[u8]) -> lidx_core::Result<(Self, usize)> {
        match u64::decode_le(bytes)? {
            (0, _) => Err(Error::corrupt("NonZeroKey is never zero")),
            (k, width) => Ok((NonZeroKey(k), width)),
        }
    }

    fn to_f64(&self) -> f64 {
        self.0.to_f64()
    }

    fn offset_from(&self, origin: &Self) -> f64 {
        self.0.offset_from(&origin.0)
    }
}

/// A key type with a single value, taking no memory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct UnitKey;

impl Key for UnitKey {
    const ENCODED_WIDTH: Option<usize> = Some(0);

    fn encode_le(&self, _out: &mut Vec<u8>) {}

    fn decode_le(_bytes: &[u8]) -> lidx_core::Result<(Self, usize)> {
        Ok((UnitKey, 0))
    }

    fn to_f64(&self) -> f64 {
        0.0
    }

    fn offset_from(&self, _origin: &Self) -> f64 {
        0.0
    }
}

#[test]
fn a_zero_sized_key_type_keeps_its_one_record() {
    // Its array of keys takes no bytes, yet holds one key: an array that
    // came out empty lost the bulk-loaded record at the first compaction.
    let index = XIndex::<UnitKey, u64>::bulk_load([(UnitKey, 7)], Config::default()).unwrap();
    assert_eq!(index.get(&UnitKey), Some(7));
    assert_eq!(index.insert(UnitKey, 8), Some(7));
    index.maintain_now();
    assert_eq!(index.get(&UnitKey), Some(8));
    assert_eq!(index.len(), 1);
    assert_eq!(index.range(..).collect::<Vec<_>>(), vec![(UnitKey, 8)]);
    assert_eq!(index.remove(&UnitKey), Some(8));
    index.maintain_now();
    assert_eq!(index.get(&UnitKey), None);
    assert_eq!(index.insert(UnitKey, 9), None);
    index.maintain_now();
    assert_eq!(index.get(&UnitKey), Some(9));
    assert_eq!(index.len(), 1);
}

#[test]
fn key_types_without_an_all_zero_encoding_are_refused() {
    // Emptied groups are refitted from the all-zero key; without one the
    // refit would fail inside maintenance, so construction says so first.
    let err = XIndex::<NonZeroKey, u64>::new(Config::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("all-zero"), "{err}");
    let pairs = (1..100u64).map(|k| (NonZeroKey(k), k));
    assert!(XIndex::<NonZeroKey, u64>::bulk_load(pairs, Config::default()).is_err());
}

#[test]
fn calls_from_a_thread_pinned_elsewhere_do_not_wait_for_themselves() {
    // The index pins a collector of its own, so a caller holding a guard
    // on crossbeam's default collector (its own, or one another structure
    // holds while it runs the caller's closure) is not waited for by the
    // epoch barriers that inserts over the budget and `maintain_now` run.
    let config = Config {
        delta_budget_bytes: 1 << 10,
        ..tiny_config()
    };
    let index = XIndex::<u64, u64>::new(config).unwrap();
    let foreign = crossbeam_epoch::pin();
    for k in 0..3_000u64 {
        assert_eq!(index.insert(k * 7, k), None);
    }
    index.maintain_now();
    assert!(index.stats().budget_waits > 0, "inserts ran passes inline");
    drop(foreign);
    assert_eq!(index.len(), 3_000);
    for k in 0..3_000u64 {
        assert_eq!(index.get(&(k * 7)), Some(k));
    }
}

/// Runs `f` on a thread of its own and fails if it has not returned
/// within a generous time (a deadlock would otherwise hang the suite).
pub(super) fn within_seconds<T: Send + 'static>(
    secs: u64,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("did not return: waiting for itself?")
}

#[test]
fn a_fetch_update_closure_may_write_to_the_same_index() {
    // The closure's inserts go over the delta budget, so they run passes
    // whose epoch barriers wait for every thread pinned on the index: a
    // closure run while its own call held a pin would wait for itself.
    let index = std::sync::Arc::new(
        XIndex::<u64, u64>::new(Config {
            delta_budget_bytes: 1 << 10,
            ..tiny_config()
        })
        .unwrap(),
    );
    let inner = std::sync::Arc::clone(&index);
    let result = within_seconds(60, move || {
        let mut calls = 0u64;
        let result = inner.fetch_update(&1, |now| {
            calls += 1;
            for k in 0..2_000u64 {
                inner.insert(10 + k * 7 + calls, k);
            }
            // And a nested conditional write to the key being updated:
            // the outer attempt then finds it changed and runs again.
            if calls == 1 {
                assert_eq!(inner.fetch_update(&1, |_| Some(Some(5))), Ok(None));
            }
            Some(Some(now.unwrap_or(0) + 1))
        });
        (result, calls)
    });
    assert_eq!(result, (Ok(Some(5)), 2));
    assert_eq!(index.get(&1), Some(6));
    assert!(index.stats().budget_waits > 0, "inserts ran passes inline");
    assert_eq!(index.len(), 1 + 4_000);
}

#[test]
fn empty_index_accepts_everything() {
    let index = XIndex::<u64, u64>::new(tiny_config()).unwrap();
    assert!(index.is_empty());
    assert_eq!(index.get(&0), None);
    assert_eq!(index.remove(&0), None);
    // Quadratic keys: no single line fits them, so groups must split.
    for k in (0..200u64).rev() {
        assert_eq!(index.insert(4 * k * k, k), None);
        if k % 7 == 0 {
            index.maintain_now();
        }
    }
    settle(&index);
    assert_eq!(index.len(), 200);
    for k in 0..200u64 {
        assert_eq!(index.get(&(4 * k * k)), Some(k));
        assert_eq!(index.get(&(4 * k * k + 1)), None);
    }
    let stats = index.stats();
    assert!(stats.group_count() > 1, "{stats:?}");
    assert!(stats.group_splits > 0 && stats.root_updates > 0);
    assert_eq!(
        stats.delta_total(),
        0,
        "a quiescent pass compacts every delta"
    );
}

#[test]
fn range_bounds_and_scan() {
    let index = XIndex::bulk_load((0..100u64).map(|k| (k * 10, k)), tiny_config()).unwrap();
    index.insert(55, 1000);
    index.remove(&60);
    let keys = |it: crate::Range<'_, u64, u64>| it.map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(keys(index.range(40..70)), vec![40, 50, 55]);
    assert_eq!(keys(index.range(40..=70)), vec![40, 50, 55, 70]);
    assert_eq!(
        keys(index.range((Bound::Excluded(40), Bound::Included(55)))),
        vec![50, 55]
    );
    assert_eq!(index.range(..).count(), 100);
    assert_eq!(keys(index.range(985..)), vec![990]);
    assert_eq!(index.range(2000..).next(), None);
    let mut out = Vec::new();
    index.scan(&51, 3, &mut out);
    assert_eq!(out, vec![(55, 1000), (70, 7), (80, 8)]);
    out.clear();
    index.scan(&0, 0, &mut out);
    assert!(out.is_empty());
    index.scan(&985, 10, &mut out);
    assert_eq!(out, vec![(990, 99)]);
}

#[test]
fn byte_string_keys_and_signed_values() {
    let keys: Vec<Vec<u8>> = (0..300u32)
        .map(|i| format!("user{i:05}").into_bytes())
        .collect();
    let index = XIndex::bulk_load(
        keys.iter()
            .cloned()
            .enumerate()
            .map(|(i, k)| (k, -(i as i64))),
        tiny_config(),
    )
    .unwrap();
    assert_eq!(index.insert(b"user00010a".to_vec(), 5), None);
    assert_eq!(index.remove(&b"user00020".to_vec()), Some(-20));
    settle(&index);
    assert_eq!(index.get(&b"user00010a".to_vec()), Some(5));
    assert_eq!(index.get(&b"user00299".to_vec()), Some(-299));
    assert_eq!(index.get(&b"user00020".to_vec()), None);
    let all: Vec<Vec<u8>> = index.range(..).map(|(k, _)| k).collect();
    assert_eq!(all.len(), 300);
    assert!(all.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn ascending_inserts_append_in_place() {
    let config = Config {
        sequential_capacity: 64,
        ..Config::default()
    };
    let config = Config {
        maintenance_interval: None,
        ..config
    };
    let index = XIndex::bulk_load((0..10_000u64).map(|k| (k, k)), config).unwrap();
    for k in 10_000..12_000u64 {
        assert_eq!(index.insert(k, k), None);
        if k % 50 == 49 {
            // Every batch fits the last group's tail: nothing in any delta.
            assert_eq!(index.stats().delta_total(), 0, "after key {k}");
            index.maintain_now();
        }
    }
    assert_eq!(index.len(), 12_000);
    assert_eq!(index.get(&11_999), Some(11_999));
    assert_eq!(
        index.insert(11_999, 5),
        Some(11_999),
        "update of an appended record"
    );
    assert_eq!(index.remove(&11_998), Some(11_998));
    assert_eq!(
        index.insert(11_998, 6),
        None,
        "re-insert after removal goes to the delta"
    );
    assert_eq!(index.stats().delta_total(), 1);
    let tail: Vec<(u64, u64)> = index.range(11_996..).collect();
    assert_eq!(
        tail,
        vec![(11_996, 11_996), (11_997, 11_997), (11_998, 6), (11_999, 5)]
    );
    settle(&index);
    assert_eq!(index.len(), 12_000);
    assert!(index.range(..).map(|(k, _)| k).eq(0..12_000u64));
}

#[test]
fn ascending_inserts_at_the_learned_rate_need_no_retraining() {
    let config = Config {
        sequential_capacity: 1024,
        maintenance_interval: None,
        ..Config::default()
    };
    // Every 7th key: the last group's model extends over the appends.
    let index = XIndex::bulk_load((0..10_000u64).map(|k| (k * 7, k)), config).unwrap();
    for k in 10_000..10_400u64 {
        assert_eq!(index.insert(k * 7, k), None);
    }
    let stats = index.stats();
    let last = stats.groups.last().unwrap();
    assert_eq!((last.tail_capacity, last.tail_models), (1024, 1));
    assert_eq!(stats.delta_total(), 0);
    // A jump to every 1000th key: the model stops generalising, and one
    // or two retrains (the first fit still sees the old rate) take over.
    for k in 0..400u64 {
        assert_eq!(index.insert(1_000_000 + k * 1_000, k), None);
    }
    let last = index.stats().groups.last().unwrap().clone();
    assert!((2..=3).contains(&last.tail_models), "{last:?}");
    for k in 0..400u64 {
        assert_eq!(index.get(&(1_000_000 + k * 1_000)), Some(k));
        assert_eq!(index.get(&(1_000_001 + k * 1_000)), None);
    }
    assert!((0..10_400u64).all(|k| index.get(&(k * 7)) == Some(k)));
}

/// Keys `device << 32 | 2 * time`, one group per device at bulk load.
fn per_device_keys(devices: u64, times: u64) -> Vec<(u64, u64)> {
    (0..devices)
        .flat_map(|d| (0..times).map(move |t| ((d << 32) | (2 * t), t)))
        .collect()
}

/// Device 5's keys between its existing ones.
fn odd_key(t: u64) -> u64 {
    (5 << 32) | ((t - 1000) * 18 + 1)
}

#[test]
fn tails_go_where_keys_ascend() {
    let config = Config {
        sequential_capacity: 256,
        initial_group_size: 1000,
        maintenance_interval: None,
        ..Config::default()
    };
    let index = XIndex::bulk_load(per_device_keys(8, 1000), config.clone()).unwrap();
    let tails = |index: &XIndex<u64, u64>| -> Vec<usize> {
        index
            .stats()
            .groups
            .iter()
            .map(|g| g.tail_capacity)
            .collect()
    };
    // Bulk load: only the last group, where keys above every key arrive.
    assert_eq!(tails(&index), [0, 0, 0, 0, 0, 0, 0, 256]);
    // Device 3 appends; device 5 gets keys between its existing ones.
    for t in 1000..1100u64 {
        index.insert((3 << 32) | (2 * t), t);
        index.insert(odd_key(t), t);
    }
    index.maintain_now();
    let after = tails(&index);
    assert_eq!(after.len(), 8, "{after:?}");
    assert_eq!(after[3], 256, "device 3's ascending keys were detected");
    assert_eq!(after[5], 0, "{after:?}");
    // Device 3's next keys go to its tail, not the delta.
    for t in 1100..1200u64 {
        index.insert((3 << 32) | (2 * t), t);
    }
    assert_eq!(index.stats().delta_total(), 0);
    let mut expected = per_device_keys(8, 1000);
    expected.extend((1000..1200).map(|t| ((3 << 32) | (2 * t), t)));
    expected.extend((1000..1100).map(|t| (odd_key(t), t)));
    expected.sort_unstable();
    assert!(index.range(..).eq(expected.iter().copied()));

    // With `All`, every group pre-allocates a tail at bulk load.
    let all = Config {
        sequential_groups: crate::SequentialGroups::All,
        ..config
    };
    let index = XIndex::bulk_load(per_device_keys(8, 1000), all).unwrap();
    assert_eq!(tails(&index), [256; 8]);
}

#[test]
fn background_thread_compacts_and_stops_on_drop() {
    let config = Config {
        maintenance_interval: Some(Duration::from_millis(1)),
        // One-key deltas are compacted once they are 5 ms old.
        small_delta_delay: Duration::from_millis(5),
        ..tiny_config()
    };
    let index = XIndex::<u64, u64>::new(config).unwrap();
    for k in 0..100 {
        index.insert(k, k);
    }
    wait_until(Duration::from_secs(4), || {
        let s = index.stats();
        s.delta_total() == 0 && s.maintenance_passes > 0
    });
    let stats = index.stats();
    assert_eq!(stats.delta_total(), 0, "{stats:?}");
    assert!(stats.maintenance_passes > 0);
    // Dropping stops and joins the thread (a hang here fails the suite).
    drop(index);
}

#[test]
fn background_passes_leave_small_recent_deltas_to_wait() {
    let config = Config {
        maintenance_interval: Some(Duration::from_millis(1)),
        small_delta_delay: Duration::from_secs(3600),
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..10_000u64).map(|k| (k * 2, k)), config).unwrap();
    // Merge what merges first: a group merge compacts too.
    settle(&index);
    // Three new keys in one group: s * f = 64 is far off.
    for k in [101, 103, 105] {
        assert_eq!(index.insert(k, k), None);
    }
    let passes = index.stats().maintenance_passes;
    wait_until(Duration::from_secs(10), || {
        index.stats().maintenance_passes >= passes + 3
    });
    let stats = index.stats();
    assert!(stats.maintenance_passes >= passes + 3, "{stats:?}");
    assert_eq!(stats.delta_total(), 3, "the delta waits: {stats:?}");
    assert_eq!(index.get(&103), Some(103));
    // An explicit pass compacts every delta.
    index.maintain_now();
    assert_eq!(index.stats().delta_total(), 0);
    assert_eq!(index.get(&103), Some(103));
    // A large delta is compacted by the background thread at once.
    for k in 0..200u64 {
        index.insert(4_001 + 2 * k, k);
    }
    wait_until(Duration::from_secs(10), || {
        index.stats().delta_total() <= 64
    });
    assert!(index.stats().delta_total() <= 64, "{:?}", index.stats());
    assert_eq!(index.len(), 10_203);
}

#[test]
fn an_idle_index_stops_walking_until_keys_change() {
    let config = Config {
        maintenance_interval: Some(Duration::from_millis(1)),
        small_delta_delay: Duration::from_millis(10),
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..20_000u64).map(|k| (k * 3, k)), config).unwrap();
    let passes = || index.stats().maintenance_passes;
    // Walks stop once a pass finds nothing to do (after any merges). The
    // pass that finds it records so after counting itself, and no other
    // thread runs passes here: from then on the count stays put.
    let wait_quiet = || {
        let inner = index.inner();
        let quiet =
            || inner.quiet_at.load(std::sync::atomic::Ordering::Relaxed) == inner.len.changes();
        wait_until(Duration::from_secs(20), quiet);
        assert!(quiet(), "never quiet");
        passes()
    };
    let quiet = wait_quiet();
    // In-place updates leave it quiet.
    for k in 0..100u64 {
        assert_eq!(index.insert(k * 3, 7), Some(k));
    }
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(passes(), quiet, "updates in place need no pass");
    // A new key wakes it: the delta waits 10 ms, then is compacted.
    assert_eq!(index.insert(1, 1), None);
    wait_until(Duration::from_secs(20), || index.stats().delta_total() == 0);
    assert_eq!(index.stats().delta_total(), 0);
    assert!(passes() > quiet);
    let quiet = wait_quiet();
    // So does a remove.
    assert_eq!(index.remove(&3), Some(7));
    wait_until(Duration::from_secs(20), || passes() > quiet);
    assert!(passes() > quiet);
    assert_eq!(index.len(), 20_000);
}

#[test]
fn an_index_goes_quiet_only_once_what_it_retired_is_freed() {
    // Freeing a retired array can leave its region less than half in
    // use, which only a walk notices: a pass that leaves retired nodes
    // waiting must not let the next background passes skip their walks.
    let config = Config {
        maintenance_interval: None,
        small_delta_delay: Duration::ZERO,
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..20_000u64).map(|k| (k * 3, k)), config).unwrap();
    let inner = index.inner();
    let quiet = || inner.quiet_at.load(std::sync::atomic::Ordering::Relaxed) == inner.len.changes();
    for round in 0..20u64 {
        // A compaction retires the group it rebuilds.
        assert_eq!(index.insert(round * 3 + 1, round), None);
        let compactions = index.stats().compactions;
        let mut passes = 0;
        while !quiet() {
            inner.maintain(crate::maintenance::Pass::Background);
            passes += 1;
            assert!(passes < 10_000, "never quiet");
        }
        assert!(index.stats().compactions > compactions);
        assert!(inner.reclaimer.all_freed(), "quiet after {passes} passes");
    }
    assert_eq!(index.len(), 20_020);
}

/// Nice values of this process's threads named like the maintenance
/// thread (`comm` holds the first 15 bytes of a thread's name).
#[cfg(target_os = "linux")]
fn maintenance_thread_nice_values() -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| {
            let path = task.ok()?.path();
            let comm = std::fs::read_to_string(path.join("comm")).ok()?;
            if comm.trim_end() != "xindex-maintena" {
                return None;
            }
            // `stat` fields after the parenthesised name: state is the
            // first, nice the seventeenth (field 19 of proc(5)).
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().nth(16)?.parse().ok()
        })
        .collect()
}

#[test]
#[cfg(target_os = "linux")]
fn maintenance_thread_runs_at_the_configured_nice() {
    // 13 is used by no other test, so a thread at it is this index's.
    let inherited = lidx_core::background::current_thread_nice()
        .unwrap()
        .unwrap();
    let expected = inherited.max(13);
    let config = Config {
        maintenance_interval: Some(Duration::from_millis(1)),
        maintenance_nice: 13,
        ..tiny_config()
    };
    let index = XIndex::<u64, u64>::new(config).unwrap();
    wait_until(Duration::from_secs(5), || {
        maintenance_thread_nice_values().contains(&expected)
    });
    assert!(
        maintenance_thread_nice_values().contains(&expected),
        "no maintenance thread at nice {expected}: {:?}",
        maintenance_thread_nice_values()
    );
    // The application's thread keeps its priority.
    assert_eq!(
        lidx_core::background::current_thread_nice().unwrap(),
        Some(inherited)
    );
    // A lower-priority maintenance thread still does its work.
    for k in 0..50 {
        index.insert(k, k);
    }
    wait_until(Duration::from_secs(5), || index.stats().delta_total() == 0);
    assert_eq!(index.stats().delta_total(), 0);
}

#[test]
fn bulk_load_builds_groups_that_need_no_split() {
    let config = Config {
        error_bound: 4,
        max_models: 2,
        initial_group_size: 1000,
        maintenance_interval: None,
        ..Config::default()
    };
    // Quadratic keys with jitter: far from one line per 1000 keys.
    let keys: Vec<u64> = (0..5000u64).map(|i| 16 * i * i + (i % 7) * 13).collect();
    let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k + 1)), config).unwrap();
    let before = index.stats();
    assert!(before.group_count() > 5, "{before:?}");
    for g in &before.groups {
        assert!(g.records > 0 && !g.linked_only);
        assert!((1..=2).contains(&g.error_bounds.len()), "{g:?}");
        assert!(g.error_bounds.iter().all(|&e| e <= 4), "{g:?}");
    }
    assert_eq!(before.groups.iter().map(|g| g.records).sum::<usize>(), 5000);
    index.maintain_now();
    let after = index.stats();
    assert_eq!(
        (after.group_splits, after.model_splits),
        (0, 0),
        "{after:?}"
    );
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(index.get(&k), Some(k + 1), "key {i}");
        assert_eq!(
            index.get(&(k + 1)).is_some(),
            keys.binary_search(&(k + 1)).is_ok()
        );
    }
    let all: Vec<(u64, u64)> = index.range(..).collect();
    assert_eq!(all.len(), 5000);
    assert!(
        all.iter()
            .zip(&keys)
            .all(|(&(k, v), &want)| k == want && v == k + 1)
    );
}

#[test]
fn an_insert_burst_stays_within_the_delta_budget() {
    // No background thread: without the budget, 50k inserts into 16 groups
    // would all sit in delta indexes (about 3 MiB) until someone compacted.
    let budget = 64 << 10;
    let config = Config {
        maintenance_interval: None,
        delta_budget_bytes: budget,
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..16_000u64).map(|k| (k * 8, k)), config).unwrap();
    for i in 0..50_000u64 {
        let key = ((i * 7919) % 128_000) | 1; // odd: never bulk loaded
        index.insert(key, i);
        if i % 1000 == 0 {
            let used = index.stats().delta_bytes;
            assert!(used <= budget, "{used} bytes charged after {i} inserts");
        }
    }
    let stats = index.stats();
    assert!(
        stats.delta_bytes <= budget && stats.budget_waits > 0,
        "{stats:?}"
    );
    assert!(stats.compactions > 0, "{stats:?}");
    for i in 0..50_000u64 {
        let key = ((i * 7919) % 128_000) | 1;
        assert!(index.get(&key).is_some(), "key {key} lost");
    }
    assert_eq!(index.get(&8), Some(1));
}

#[test]
fn a_fast_ascending_run_keeps_its_tail_through_splits() {
    // Inserts far outrun the background thread: the tail fills, the rest
    // piles into the delta, splits rebuild the top while keys keep
    // arriving (into the temporary delta, below the new tail's keys).
    // The top group must keep a tail through all of it.
    let n = 100_000u64;
    let config = Config {
        sequential_capacity: 256,
        maintenance_interval: Some(Duration::from_millis(1)),
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..n).map(|i| (i * 3, i)), config).unwrap();
    for i in 0..50_000u64 {
        index.insert((n + i) * 3, i);
    }
    // Whatever the background thread got through, a full pass now
    // compacts what is left (without waiting on a busy machine).
    index.maintain_now();
    let stats = index.stats();
    assert_eq!(stats.delta_total(), 0, "maintenance caught up");
    assert_eq!(stats.groups.last().map(|g| g.tail_capacity), Some(256));
    assert_eq!(index.len(), 150_000);
    assert!((0..50_000u64).all(|i| index.get(&((n + i) * 3)) == Some(i)));
}

/// A burst of inserts into one group between passes (here: ascending keys
/// above a bulk load, no §3.5.2 hint) is split in one pass into groups
/// that meet the error bound, as a bulk load of the same keys would be,
/// instead of into two halves whose single models err by thousands of
/// positions.
#[test]
fn a_burst_into_one_group_is_split_in_one_pass() {
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let loaded = 4_096u64;
    let index = XIndex::bulk_load((0..loaded).map(|k| (k * 3, k)), config.clone()).unwrap();
    let burst = 50_000u64;
    // Gaps that vary, so one line cannot fit everything.
    let mut key = loaded * 3;
    let mut keys = Vec::new();
    for i in 0..burst {
        key += 1 + (i % 97) * (i % 13);
        keys.push(key);
        index.insert(key, i);
    }
    let before = index.stats();
    index.maintain_now();
    let after = index.stats();
    assert_eq!(after.group_splits, before.group_splits + 1, "{after:?}");
    assert!(
        after.group_count() >= before.group_count() + (burst as usize) / config.initial_group_size,
        "{} groups after the split",
        after.group_count()
    );
    for g in &after.groups {
        assert!(
            g.error_bounds.iter().all(|&e| e <= config.error_bound),
            "a part errs: {g:?}"
        );
        assert!(!g.linked_only, "every part has a root slot: {g:?}");
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(index.get(k), Some(i as u64));
    }
    for k in 0..loaded {
        assert_eq!(index.get(&(k * 3)), Some(k));
    }
    assert_eq!(index.len(), (loaded + burst) as usize);
}

#[test]
fn exchanges_compare_values_by_their_word() {
    let index = XIndex::<u64, f64>::new(Config::default()).unwrap();
    let bits = |r: Result<Option<f64>, Option<f64>>| {
        r.map(|v| v.map(f64::to_bits))
            .map_err(|v| v.map(f64::to_bits))
    };
    assert_eq!(index.try_insert(1, f64::NAN), Ok(()));
    // A NaN of the same bits matches; one of other bits does not.
    let other_nan = f64::from_bits(f64::NAN.to_bits() ^ 1);
    assert!(other_nan.is_nan());
    assert_eq!(
        bits(index.compare_exchange(&1, Some(other_nan), Some(2.0))),
        Err(Some(f64::NAN.to_bits()))
    );
    assert_eq!(
        bits(index.compare_exchange(&1, Some(f64::NAN), Some(0.0))),
        Ok(Some(f64::NAN.to_bits()))
    );
    // 0.0 and -0.0 are different words.
    assert_eq!(
        index.compare_exchange(&1, Some(-0.0), Some(3.0)),
        Err(Some(0.0))
    );
    assert_eq!(index.get(&1).map(f64::to_bits), Some(0.0f64.to_bits()));
    assert_eq!(index.compare_exchange(&1, Some(0.0), None), Ok(Some(0.0)));
    assert_eq!(index.try_insert(1, -0.0), Ok(()));
    assert_eq!(index.get(&1).map(f64::to_bits), Some((-0.0f64).to_bits()));
    // A declining closure stops the loop with the value it saw.
    assert_eq!(index.fetch_update(&1, |_| None), Err(Some(-0.0)));
    assert_eq!(index.fetch_update(&9, |_| None), Err(None));
    assert_eq!(index.len(), 1);
}

/// Range iterators against `BTreeMap::range`, from either end and both,
/// over groups whose arrays hold removed records (single ones and a long
/// run) and whose deltas hold keys between array keys: reverse fetches
/// copy array runs a block at a time between buffered keys, and every
/// batch size boundary (16, then 64) falls somewhere in these takes.
#[test]
fn ranges_from_both_ends_match_a_btreemap_across_runs_and_deltas() {
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..3_000u64).map(|k| (k * 3, k)), config).unwrap();
    let mut oracle: std::collections::BTreeMap<u64, u64> =
        (0..3_000u64).map(|k| (k * 3, k)).collect();
    for k in (0..9_000u64).step_by(21).chain(4_000..4_100) {
        if k % 3 == 0 {
            assert_eq!(index.remove(&k), oracle.remove(&k));
        }
    }
    for k in (1..9_000u64).step_by(37) {
        assert_eq!(index.insert(k, k + 7), oracle.insert(k, k + 7));
    }
    let takes = [1usize, 2, 3, 15, 16, 17, 63, 64, 65, 81, 200];
    for upper in (0..9_100u64).step_by(97).chain([0, 8_997, 8_998, u64::MAX]) {
        for &n in &takes {
            let got: Vec<(u64, u64)> = index.range(..=upper).rev().take(n).collect();
            let want: Vec<(u64, u64)> = oracle
                .range(..=upper)
                .rev()
                .take(n)
                .map(|(&k, &v)| (k, v))
                .collect();
            assert_eq!(got, want, "..={upper} reversed, {n} records");
            let got: Vec<(u64, u64)> = index.range(upper..).take(n).collect();
            let want: Vec<(u64, u64)> = oracle
                .range(upper..)
                .take(n)
                .map(|(&k, &v)| (k, v))
                .collect();
            assert_eq!(got, want, "{upper}.. forwards, {n} records");
        }
        // Both ends of a bounded range, alternating until they meet.
        let lower = upper.saturating_sub(500);
        let bounds = (Bound::Excluded(lower), Bound::Included(upper));
        let mut got = index.range(bounds);
        let mut want = oracle.range(bounds);
        for step in 0.. {
            let (g, w) = if step % 3 == 2 {
                (got.next(), want.next().map(|(&k, &v)| (k, v)))
            } else {
                (got.next_back(), want.next_back().map(|(&k, &v)| (k, v)))
            };
            assert_eq!(g, w, "({lower}, {upper}], step {step}");
            if g.is_none() {
                break;
            }
        }
        assert_eq!(
            index.upper_bound(Bound::Included(&upper)),
            oracle.range(..=upper).next_back().map(|(&k, &v)| (k, v))
        );
    }
    let all: Vec<(u64, u64)> = index.range(..).rev().collect();
    assert_eq!(all.len(), oracle.len());
    assert!(all.iter().rev().map(|&(k, _)| k).eq(oracle.keys().copied()));
}

/// `fold` and `rfold` (and what runs through them: `sum`, `count`,
/// `for_each`, `last`, `map(..).sum()`) against `BTreeMap::range`, after
/// a few records taken from either end: their batches grow past `next`'s
/// 64 to 256 and 1,024 records, across groups, removed runs and deltas,
/// with byte-string keys too (records moved out of the buffer as it is
/// folded).
#[test]
fn folds_over_ranges_match_a_btreemap() {
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..12_000u64).map(|k| (k * 3, k)), config.clone()).unwrap();
    let mut oracle: std::collections::BTreeMap<u64, u64> =
        (0..12_000u64).map(|k| (k * 3, k)).collect();
    for k in (0..36_000u64).step_by(21).chain(9_000..12_000) {
        if k % 3 == 0 {
            assert_eq!(index.remove(&k), oracle.remove(&k));
        }
    }
    for k in (1..36_000u64).step_by(37) {
        assert_eq!(index.insert(k, k + 7), oracle.insert(k, k + 7));
    }
    let keep = |mut all: Vec<(u64, u64)>, record| {
        all.push(record);
        all
    };
    for (lower, span) in [
        (0, 40_000),
        (5, 3),
        (100, 500),
        (7_000, 5_000),
        (20_000, 16_000),
    ] {
        let bounds = (Bound::Included(lower), Bound::Excluded(lower + span));
        let want: Vec<(u64, u64)> = oracle.range(bounds).map(|(&k, &v)| (k, v)).collect();
        // Walked by `next` and `next_back`, whose batches grow past 64
        // once an end has fetched 256 records.
        assert_eq!(index.range(bounds).collect::<Vec<_>>(), want, "{bounds:?}");
        let mut down: Vec<(u64, u64)> = index.range(bounds).rev().collect();
        down.reverse();
        assert_eq!(down, want, "{bounds:?} reversed");
        let (mut range, mut low, mut high) = (index.range(bounds), Vec::new(), Vec::new());
        for step in 0.. {
            let taken = if step % 7 == 6 {
                range.next_back().map(|record| high.push(record))
            } else {
                range.next().map(|record| low.push(record))
            };
            if taken.is_none() {
                break;
            }
        }
        low.extend(high.into_iter().rev());
        assert_eq!(low, want, "{bounds:?} from both ends");
        for (front, back) in [(0, 0), (1, 0), (0, 1), (17, 3), (3, 81), (70, 70)] {
            let taken = |range: &mut crate::Range<'_, u64, u64>| {
                let low: Vec<_> = range.by_ref().take(front).collect();
                let high: Vec<_> = range.by_ref().rev().take(back).collect();
                (low, high)
            };
            let what = format!("{bounds:?} after {front} from the front and {back} from the back");
            // A fresh range with the records taken, and the ones it has left.
            let fresh = || {
                let mut range = index.range(bounds);
                let (low, high) = taken(&mut range);
                let rest = &want[low.len()..want.len() - high.len()];
                (range, low, high, rest)
            };
            let (range, low, high, rest) = fresh();
            let mut all = range.fold(low, keep);
            all.extend(high.iter().rev().copied());
            assert_eq!(all, want, "fold: {what}");
            let (range, low, high, _) = fresh();
            let mut down = range.rfold(high, keep);
            down.extend(low.iter().rev().copied());
            down.reverse();
            assert_eq!(down, want, "rfold: {what}");
            assert_eq!(fresh().0.count(), rest.len(), "count: {what}");
            let sum = rest.iter().map(|&(_, v)| v).sum::<u64>();
            assert_eq!(fresh().0.map(|(_, v)| v).sum::<u64>(), sum, "sum: {what}");
            // `Range`'s own `last`, `min` and `max`: one fetch from an end.
            #[allow(clippy::double_ended_iterator_last, reason = "`Range::last` is tested")]
            let last = fresh().0.last();
            assert_eq!(last, rest.last().copied(), "last: {what}");
            assert_eq!(fresh().0.max(), rest.last().copied(), "max: {what}");
            assert_eq!(fresh().0.min(), rest.first().copied(), "min: {what}");
            let mut seen = Vec::new();
            fresh().0.rev().for_each(|record| seen.push(record));
            assert!(seen.iter().rev().eq(rest.iter()), "rev().for_each: {what}");
        }
    }
    // Byte-string keys: records that own memory, moved out as folded.
    let key = |i: u64| format!("k{i:06}").into_bytes();
    let index = XIndex::bulk_load((0..3_000u64).map(|i| (key(i * 2), i)), config).unwrap();
    for i in (1..6_000u64).step_by(9) {
        index.insert(key(i), i);
    }
    let oracle: std::collections::BTreeMap<Vec<u8>, u64> = index.iter().collect();
    assert_eq!(oracle.len(), 3_000 + 6_000usize.div_ceil(18));
    let all = index
        .range(key(10)..key(5_000))
        .fold(Vec::new(), |mut all, record| {
            all.push(record);
            all
        });
    assert!(
        all.iter()
            .map(|(k, v)| (k, v))
            .eq(oracle.range(key(10)..key(5_000)))
    );
    let mut down = index
        .range(key(10)..key(5_000))
        .rev()
        .fold(Vec::new(), |mut all, record| {
            all.push(record);
            all
        });
    down.reverse();
    assert_eq!(down, all);
}

/// As above with byte-string keys (records that own memory, so the array run
/// copies clone keys and the removed records are skipped by kind).
#[test]
fn string_key_ranges_from_both_ends_match_a_btreemap() {
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let key = |i: u64| format!("k{i:06}").into_bytes();
    let index = XIndex::bulk_load((0..1_500u64).map(|i| (key(i * 2), i)), config).unwrap();
    let mut oracle: std::collections::BTreeMap<Vec<u8>, u64> =
        (0..1_500u64).map(|i| (key(i * 2), i)).collect();
    for i in (0..3_000u64).step_by(14) {
        assert_eq!(index.remove(&key(i)), oracle.remove(&key(i)));
    }
    for i in (1..3_000u64).step_by(19) {
        assert_eq!(index.insert(key(i), i), oracle.insert(key(i), i));
    }
    for upper in (0..3_100u64).step_by(53) {
        for n in [1usize, 7, 16, 17, 70, 90] {
            let u = key(upper);
            let got: Vec<(Vec<u8>, u64)> = index.range(..=u.clone()).rev().take(n).collect();
            let want: Vec<(Vec<u8>, u64)> = oracle
                .range(..=u)
                .rev()
                .take(n)
                .map(|(k, &v)| (k.clone(), v))
                .collect();
            assert_eq!(got, want, "..={upper} reversed, {n} records");
        }
    }
}

#[test]
fn extend_upserts_in_order_from_one_or_many_threads() {
    // Owned: `BTreeMap`'s `extend`, later pairs winning.
    let mut index: XIndex<u64, u64> = XIndex::new(tiny_config()).expect("valid config");
    let mut oracle = std::collections::BTreeMap::new();
    let pairs: Vec<(u64, u64)> = (0..3_000u64).map(|i| ((i * 7919) % 1_000, i)).collect();
    index.extend(pairs.iter().copied());
    oracle.extend(pairs.iter().copied());
    assert_eq!(index.len(), oracle.len());
    assert!(index.iter().eq(oracle.iter().map(|(&k, &v)| (k, v))));
    // Shared: threads extend one index with disjoint keys, and upsert
    // the keys already there.
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let mut shared = &index;
            s.spawn(move || {
                shared.extend((0..2_000u64).map(|i| (10_000 + i * 2 + t, t)));
                shared.extend([(t, 100 + t)]);
            });
        }
    });
    for t in 0..2u64 {
        oracle.extend((0..2_000u64).map(|i| (10_000 + i * 2 + t, t)));
        oracle.insert(t, 100 + t);
    }
    settle(&index);
    assert_eq!(index.len(), oracle.len());
    assert!(index.iter().eq(oracle.iter().map(|(&k, &v)| (k, v))));
    // Empty input changes nothing.
    index.extend(std::iter::empty());
    assert_eq!(index.len(), oracle.len());
}
