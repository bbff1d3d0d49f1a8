//! A maintenance pass that panics between a group's freeze and its
//! `tmp_buf` (the only window in which inserts wait for maintenance)
//! poisons the index: reads and in-place writes go on, and an insert that
//! would wait forever panics instead.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::time::Duration;

use crate::hooks::Phase;
use crate::{Config, XIndex};

/// Makes the next pass to freeze a group panic right after the freeze.
fn panic_once_after_freeze(index: &XIndex<u64, u64>) {
    let fired = AtomicBool::new(false);
    index.inner().hooks.set(Some(Arc::new(move |phase| {
        if phase == Phase::Frozen && !fired.swap(true, Ordering::Relaxed) {
            panic!("injected maintenance panic");
        }
    })));
}

/// 0..32 in the array, 1000 in the delta: a pass compacts the one group.
fn index_with_delta(maintenance_interval: Option<Duration>) -> XIndex<u64, u64> {
    let config = Config {
        maintenance_interval,
        ..Config::default()
    };
    let index = XIndex::bulk_load((0..32u64).map(|k| (k, k)), config).unwrap();
    index.insert(1000, 1);
    index
}

/// Runs `op` on another thread; `Err` if it panicked. Fails the test
/// instead of hanging if `op` never returns (the defect this guards).
fn outcome<T: Send + 'static>(op: impl FnOnce() -> T + Send + 'static) -> Result<T, ()> {
    let (done, result) = channel();
    std::thread::spawn(move || {
        let _ = done.send(catch_unwind(AssertUnwindSafe(op)).map_err(|_| ()));
    });
    result
        .recv_timeout(Duration::from_secs(30))
        .expect("the operation neither returned nor panicked")
}

/// Checks a poisoned index frozen by [`panic_once_after_freeze`].
fn check_poisoned(index: Arc<XIndex<u64, u64>>) {
    assert!(index.is_poisoned());
    // Reads see every committed put, the frozen delta's included.
    assert_eq!(index.get(&1000), Some(1));
    assert_eq!(index.get(&5), Some(5));
    assert_eq!(index.range(..).count(), 33);
    // Updates and removes of existing keys need no rebuild.
    assert_eq!(index.insert(5, 50), Some(5));
    assert_eq!(index.insert(1000, 2), Some(1));
    assert_eq!(index.remove(&6), Some(6));
    assert_eq!(index.remove(&6), None);
    assert_eq!(index.get(&5), Some(50));
    assert_eq!(index.get(&1000), Some(2));
    // A new key would wait for the missing `tmp_buf`: it panics.
    let inserting = Arc::clone(&index);
    assert!(outcome(move || inserting.insert(2000, 1)).is_err());
    assert_eq!(index.get(&2000), None);
    // So does any further pass.
    let maintaining = Arc::clone(&index);
    assert!(outcome(move || maintaining.maintain_now()).is_err());
    assert_eq!(index.len(), 32);
    let expected: Vec<(u64, u64)> = (0..32u64)
        .filter(|&k| k != 6)
        .map(|k| (k, if k == 5 { 50 } else { k }))
        .chain([(1000, 2)])
        .collect();
    assert_eq!(index.range(..).collect::<Vec<_>>(), expected);
}

#[test]
fn a_panicking_foreground_pass_poisons_instead_of_stalling_inserts() {
    let index = Arc::new(index_with_delta(None));
    assert!(!index.is_poisoned());
    panic_once_after_freeze(&index);
    let maintaining = Arc::clone(&index);
    assert!(outcome(move || maintaining.maintain_now()).is_err());
    check_poisoned(index);
}

#[test]
fn a_panicking_background_pass_poisons_the_index() {
    let index = Arc::new(index_with_delta(Some(Duration::from_millis(1))));
    panic_once_after_freeze(&index);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !index.is_poisoned() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Dropping the index joins the panicked thread without panicking.
    check_poisoned(index);
}

#[test]
fn a_pass_completed_during_an_unrelated_unwind_does_not_poison() {
    /// Runs a pass from its destructor, as a caller's cleanup might.
    struct MaintainOnDrop<'a>(&'a XIndex<u64, u64>, &'a std::cell::Cell<bool>);
    impl Drop for MaintainOnDrop<'_> {
        fn drop(&mut self) {
            self.1.set(self.0.maintain_now());
        }
    }
    let index = index_with_delta(None);
    let changed = std::cell::Cell::new(false);
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let _cleanup = MaintainOnDrop(&index, &changed);
        panic!("a panic unrelated to the index");
    }));
    assert!(unwound.is_err());
    assert!(changed.get(), "the pass compacted the delta");
    assert!(!index.is_poisoned());
    assert_eq!(index.stats().delta_total(), 0);
    assert_eq!(index.insert(2000, 2), None);
    assert!(index.maintain_now());
    assert_eq!(index.get(&2000), Some(2));
}

#[test]
fn a_poisoned_index_over_its_delta_budget_refuses_new_keys_but_takes_updates() {
    // Groups of 8 keys (0, 10, .., 390), a budget of 16 delta entries.
    let config = crate::tests::tiny_budget_config();
    let limit = config.delta_budget_bytes / crate::budget::entry_bytes(&0u64);
    let index = Arc::new(XIndex::bulk_load((0..40u64).map(|k| (k * 10, k)), config).unwrap());
    index.insert(5, 5);
    panic_once_after_freeze(&index);
    let maintaining = Arc::clone(&index);
    assert!(outcome(move || maintaining.maintain_now()).is_err());
    assert!(index.is_poisoned());
    // New keys in the groups that were not frozen, each put on its own
    // thread as a caller that catches the panics would: they go in until
    // one takes the deltas over the budget (inserted, then the pass it
    // would run panics); after that every new key is refused, not stored.
    let mut stored = Vec::new();
    let mut refused = Vec::new();
    for k in (100..390u64).step_by(10).map(|k| k + 1) {
        let inserting = Arc::clone(&index);
        match outcome(move || inserting.insert(k, k)) {
            Ok(previous) => {
                assert_eq!(previous, None);
                stored.push(k);
            }
            Err(()) if index.get(&k).is_some() => stored.push(k),
            Err(()) => refused.push(k),
        }
    }
    assert!(!refused.is_empty(), "the budget was never reached");
    // Counting key 5: the budget, plus the one insert that crossed it.
    assert!(stored.len() < limit + 1, "{} keys stored", stored.len());
    assert!(index.stats().delta_total() <= limit + 1);
    for k in &refused {
        assert_eq!(index.get(k), None);
    }
    // Updates of keys in arrays and in deltas still apply.
    assert_eq!(index.insert(200, 7), Some(20));
    assert_eq!(index.insert(stored[0], 8), Some(stored[0]));
    assert_eq!(index.get(&stored[0]), Some(8));
    // A removed delta key may come back: that takes no memory.
    assert_eq!(index.remove(&stored[1]), Some(stored[1]));
    assert_eq!(index.insert(stored[1], 9), None);
    assert_eq!(index.get(&stored[1]), Some(9));
    let expected = 40 + 1 + stored.len();
    assert_eq!(index.len(), expected);
    assert_eq!(index.range(..).count(), expected);
}
