//! The paper's Fig. 2 lost-update interleaving, driven step by step with
//! the phase hooks: an update to a record the merge phase has already
//! referenced, an update through a pointer before the copy phase, and a
//! straggler still writing the old array while the copy phase waits.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::hooks::Phase;
use crate::inner::{Attempt, try_put};
use crate::{Config, XIndex};

/// Installs a hook that reports each phase and waits for a go-ahead.
fn stepper(index: &XIndex<u64, u64>) -> (Receiver<Phase>, Sender<()>) {
    let (phase_tx, phase_rx) = channel();
    let (go_tx, go_rx) = channel::<()>();
    let (phase_tx, go_rx) = (Mutex::new(phase_tx), Mutex::new(go_rx));
    index.inner().hooks.set(Some(Arc::new(move |phase| {
        phase_tx.lock().unwrap().send(phase).unwrap();
        go_rx.lock().unwrap().recv().unwrap();
    })));
    (phase_rx, go_tx)
}

/// Lets a stepped pass run to its end if the test thread panics, so that
/// a failed check fails the test instead of leaving the scope waiting
/// for the pass forever.
struct ReleaseOnPanic<'a>(&'a Sender<()>);

impl Drop for ReleaseOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for _ in 0..8 {
                let _ = self.0.send(());
            }
        }
    }
}

fn index_needing_compaction() -> XIndex<u64, u64> {
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..32u64).map(|k| (k, k)), config).unwrap();
    // One delta record: the next pass compacts this (only) group.
    index.insert(1000, 1);
    index
}

/// Runs one compaction pass of `index`, calling `at_merge` while the pass
/// waits between the merge phase and the install, then lets it finish.
fn compact_acting_after_merge(index: &XIndex<u64, u64>, at_merge: impl FnOnce()) {
    let (phases, go) = stepper(index);
    std::thread::scope(|s| {
        let pass = s.spawn(|| index.maintain_now());
        assert_eq!(phases.recv().unwrap(), Phase::Frozen);
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Merged);
        at_merge();
        go.send(()).unwrap();
        for expected in [Phase::Installed, Phase::Copied] {
            assert_eq!(phases.recv().unwrap(), expected);
            go.send(()).unwrap();
        }
        assert!(pass.join().unwrap());
    });
    index.inner().hooks.set(None);
}

#[test]
fn update_after_merge_phase_is_not_lost() {
    let index = index_needing_compaction();
    // (1) the merge phase has "copied" record 5 into the new array.
    compact_acting_after_merge(&index, || {
        {
            // The old group is still installed: its array holds the value.
            let guard = index.inner().reclaimer.pin();
            let group = index.inner().root(&guard).route(&5, &guard);
            let cell = group.records.cell_at(group.find(&5).unwrap());
            assert!(!cell.is_pointer());
        }
        // (2) op1 updates record 5 in the old array.
        assert_eq!(index.insert(5, 500), Some(5));
    });
    // (3) the compaction finished.
    assert_eq!(
        index.get(&5),
        Some(500),
        "the in-place update survived compaction"
    );
    assert_eq!(index.get(&1000), Some(1));
    assert_eq!(index.stats().compactions, 1);
}

#[test]
fn pointer_writes_and_stragglers_survive_the_copy_phase() {
    let index = index_needing_compaction();
    let (phases, go) = stepper(&index);
    std::thread::scope(|s| {
        let pass = s.spawn(|| index.maintain_now());
        assert_eq!(phases.recv().unwrap(), Phase::Frozen);
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Merged);
        // A straggler routes to the old group and stays pinned on it.
        let straggler_guard = index.inner().reclaimer.pin();
        let old = index
            .inner()
            .root(&straggler_guard)
            .route(&7, &straggler_guard);
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Installed);
        {
            // New operations see the new group, whose records still point
            // at the old ones.
            let guard = index.inner().reclaimer.pin();
            let new = index.inner().root(&guard).route(&6, &guard);
            assert!(!std::ptr::eq(new, old));
            assert!(new.records.cell_at(new.find(&6).unwrap()).is_pointer());
        }
        assert_eq!(index.insert(6, 600), Some(6), "written through the pointer");
        assert_eq!(index.remove(&8), Some(8), "removed through the pointer");
        go.send(()).unwrap();
        // The copy phase's barrier must wait for the pinned straggler.
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            phases.try_recv().is_err(),
            "copy phase ran while a straggler was pinned"
        );
        match try_put(old, &7, 700, false, &index.inner().budget, true) {
            Attempt::Done(done) => assert_eq!(done.previous, Some(7)),
            Attempt::Retry | Attempt::Refused => {
                panic!("an existing array record is always updatable")
            }
        }
        drop(straggler_guard);
        assert_eq!(phases.recv().unwrap(), Phase::Copied);
        go.send(()).unwrap();
        assert!(pass.join().unwrap());
    });
    index.inner().hooks.set(None);
    assert_eq!(index.get(&6), Some(600));
    assert_eq!(
        index.get(&7),
        Some(700),
        "the straggler's in-place update survived"
    );
    assert_eq!(index.get(&8), None);
    assert_eq!(index.len(), 32);
    // Resolved: the records no longer point anywhere.
    let guard = index.inner().reclaimer.pin();
    let group = index.inner().root(&guard).route(&7, &guard);
    assert!((0..group.records.keys.len()).all(|i| !group.records.cell_at(i).is_pointer()));
}

#[test]
fn inserts_during_compaction_go_to_the_temporary_delta() {
    let index = index_needing_compaction();
    let (phases, go) = stepper(&index);
    std::thread::scope(|s| {
        let pass = s.spawn(|| index.maintain_now());
        assert_eq!(phases.recv().unwrap(), Phase::Frozen);
        // `buf` is frozen but `tmp_buf` not allocated: an insert must wait
        // (it retries) until the barrier has passed.
        let writer = s.spawn(|| index.insert(2000, 2));
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !writer.is_finished(),
            "insert must not enter a frozen delta"
        );
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Merged);
        assert_eq!(writer.join().unwrap(), None);
        // The frozen delta's record is still updatable in place.
        assert_eq!(index.insert(1000, 3), Some(1));
        go.send(()).unwrap();
        for expected in [Phase::Installed, Phase::Copied] {
            assert_eq!(phases.recv().unwrap(), expected);
            go.send(()).unwrap();
        }
        pass.join().unwrap();
    });
    index.inner().hooks.set(None);
    assert_eq!(index.get(&2000), Some(2));
    assert_eq!(index.get(&1000), Some(3));
    let stats = index.stats();
    assert_eq!(
        stats.groups[0].delta_len, 1,
        "the insert sits in the new group's delta"
    );
    assert_eq!(stats.groups[0].records, 33);
}

#[test]
fn a_remove_of_the_old_copy_after_the_merge_counts_in_the_new_group() {
    let index = index_needing_compaction();
    // The old group is still installed: the remove marks its cell, which
    // the new array's record 7 points at, and is counted there.
    compact_acting_after_merge(&index, || assert_eq!(index.remove(&7), Some(7)));
    assert_eq!(index.get(&7), None);
    let guard = index.inner().reclaimer.pin();
    let group = index.inner().root(&guard).route(&7, &guard);
    assert_eq!(
        group
            .records
            .removed
            .load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the new group's removed-record count, which triggers compactions"
    );
}

/// `try_insert`, `compare_exchange` and `fetch_update` at every phase of a
/// compaction: on a frozen delta, on the old group's array after the
/// merge, through the new group's pointers, and into `tmp_buf`.
#[test]
fn conditional_writes_hold_in_every_phase_of_a_compaction() {
    let index = index_needing_compaction();
    // A removed record in the delta: the key is absent.
    index.insert(2000, 2);
    assert_eq!(index.remove(&2000), Some(2));
    let (phases, go) = stepper(&index);
    std::thread::scope(|s| {
        let pass = s.spawn(|| index.maintain_now());
        assert_eq!(phases.recv().unwrap(), Phase::Frozen);
        // Frozen, maybe no `tmp_buf` yet: exchanges that cannot insert
        // never wait, and apply to the frozen delta's live record.
        assert_eq!(index.compare_exchange(&1000, Some(1), Some(2)), Ok(Some(1)));
        assert_eq!(
            index.compare_exchange(&1000, Some(1), Some(3)),
            Err(Some(2))
        );
        assert_eq!(index.compare_exchange(&2000, Some(2), None), Err(None));
        assert_eq!(index.compare_exchange(&2000, None, None), Ok(None));
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Merged);
        // The old group is installed, `tmp_buf` takes new keys.
        assert_eq!(
            index.try_insert(1000, 9),
            Err(2),
            "live in the frozen delta"
        );
        assert_eq!(
            index.try_insert(2000, 20),
            Ok(()),
            "removed there: into tmp_buf"
        );
        assert_eq!(index.try_insert(2000, 21), Err(20));
        assert_eq!(index.try_insert(3000, 30), Ok(()));
        assert_eq!(index.compare_exchange(&5, Some(5), Some(50)), Ok(Some(5)));
        assert_eq!(index.try_insert(5, 51), Err(50));
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Installed);
        {
            let guard = index.inner().reclaimer.pin();
            let new = index.inner().root(&guard).route(&6, &guard);
            assert!(new.records.cell_at(new.find(&6).unwrap()).is_pointer());
        }
        // Through the new group's pointers to the old records.
        assert_eq!(index.compare_exchange(&6, Some(6), None), Ok(Some(6)));
        assert_eq!(index.compare_exchange(&6, Some(6), Some(60)), Err(None));
        assert_eq!(
            index.try_insert(6, 61),
            Ok(()),
            "absent: into the new delta"
        );
        assert_eq!(index.try_insert(7, 70), Err(7));
        let add = |v: Option<u64>| Some(Some(v.unwrap_or(0) + 1));
        assert_eq!(index.fetch_update(&8, add), Ok(Some(8)));
        assert_eq!(index.fetch_update(&3000, add), Ok(Some(30)));
        assert_eq!(index.fetch_update(&4000, add), Ok(None));
        assert_eq!(index.fetch_update(&8, |_| None), Err(Some(9)));
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Copied);
        go.send(()).unwrap();
        assert!(pass.join().unwrap());
    });
    index.inner().hooks.set(None);
    let want = [
        (5, Some(50)),
        (6, Some(61)),
        (7, Some(7)),
        (8, Some(9)),
        (1000, Some(2)),
        (2000, Some(20)),
        (3000, Some(31)),
        (4000, Some(1)),
    ];
    for _ in 0..2 {
        for (k, v) in want {
            assert_eq!(index.get(&k), v, "key {k}");
        }
        assert_eq!(index.len(), 32 + 4);
        assert_eq!(index.range(..).count(), 32 + 4);
        // Once more after every delta is merged.
        while index.maintain_now() {}
    }
}

/// Ranges read forwards, backwards and from both ends at every phase of a
/// compaction, while writes land in the frozen delta, `tmp_buf` and
/// through the new group's pointers, and one key is removed in the frozen
/// delta but live again in `tmp_buf` (two copies: the live one counts,
/// once).
#[test]
fn ranges_in_both_directions_agree_in_every_phase_of_a_compaction() {
    let index = index_needing_compaction();
    index.insert(2000, 2);
    assert_eq!(index.remove(&2000), Some(2));
    let mut oracle: std::collections::BTreeMap<u64, u64> =
        (0..32u64).map(|k| (k, k)).chain([(1000, 1)]).collect();
    let check = |oracle: &std::collections::BTreeMap<u64, u64>, when: &str| {
        let want: Vec<(u64, u64)> = oracle.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(
            index.range(..).collect::<Vec<_>>(),
            want,
            "{when}: forwards"
        );
        let mut down: Vec<(u64, u64)> = index.range(..).rev().collect();
        down.reverse();
        assert_eq!(down, want, "{when}: backwards");
        // Alternating ends meet without a repeat or a gap.
        let mut range = index.range(..);
        let (mut low, mut high) = (Vec::new(), Vec::new());
        while let Some(record) = range.next() {
            low.push(record);
            match range.next_back() {
                Some(record) => high.push(record),
                None => break,
            }
        }
        low.extend(high.into_iter().rev());
        assert_eq!(low, want, "{when}: both ends");
        for probe in [0, 5, 6, 31, 32, 999, 1000, 1001, 2000, 2001, 3000, u64::MAX] {
            let want = oracle.range(..=probe).next_back().map(|(k, v)| (*k, *v));
            assert_eq!(
                index.range(..=probe).next_back(),
                want,
                "{when}: <= {probe}"
            );
            assert_eq!(
                index.upper_bound(std::ops::Bound::Included(&probe)),
                want,
                "{when}: upper_bound {probe}"
            );
            let want = oracle.range(..probe).next_back().map(|(k, v)| (*k, *v));
            assert_eq!(index.range(..probe).next_back(), want, "{when}: < {probe}");
        }
    };
    let (phases, go) = stepper(&index);
    std::thread::scope(|s| {
        let pass = s.spawn(|| index.maintain_now());
        let _release = ReleaseOnPanic(&go);
        assert_eq!(phases.recv().unwrap(), Phase::Frozen);
        check(&oracle, "frozen");
        assert_eq!(index.insert(1000, 3), Some(1));
        oracle.insert(1000, 3);
        check(&oracle, "frozen, updated");
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Merged);
        check(&oracle, "merged");
        // Removed in the frozen delta, live in `tmp_buf`.
        assert_eq!(index.insert(2000, 20), None);
        assert_eq!(index.insert(3000, 30), None);
        assert_eq!(index.remove(&4), Some(4));
        oracle.extend([(2000, 20), (3000, 30)]);
        oracle.remove(&4);
        check(&oracle, "merged, tmp_buf written");
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Installed);
        check(&oracle, "installed");
        // Through the new group's pointers, and into its delta.
        assert_eq!(index.remove(&6), Some(6));
        assert_eq!(index.insert(7, 70), Some(7));
        assert_eq!(index.insert(2500, 25), None);
        oracle.remove(&6);
        oracle.extend([(7, 70), (2500, 25)]);
        check(&oracle, "installed, written");
        go.send(()).unwrap();
        assert_eq!(phases.recv().unwrap(), Phase::Copied);
        check(&oracle, "copied");
        go.send(()).unwrap();
        assert!(pass.join().unwrap());
    });
    index.inner().hooks.set(None);
    check(&oracle, "after the pass");
    while index.maintain_now() {}
    check(&oracle, "every delta merged");
}
