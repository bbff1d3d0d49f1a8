//! The sequential-insert fast path (paper §3.5.2): spare capacity after a
//! group's sorted array into which keys above every array key are appended
//! in place, instead of going through the delta index.
//!
//! Which groups get one is the user's hint ([`Config::sequential_capacity`]
//! and [`Config::sequential_groups`](crate::Config::sequential_groups)) and
//! maintenance's detection ([`crate::maintenance::sequential_pattern`]).
//!
//! Records appended here are found by learned models, retrained only when
//! they stop generalising (the paper's conditional retraining): each
//! append checks the newest model's prediction for its key, and only when
//! it is off by more than the error bound `e` does a new model, fitted to
//! the latest keys, take over from that record on. A key arriving at the
//! rate the models learned costs one prediction and no training.
//!
//! Slots are written once: the key goes into a `OnceLock`, the record cell
//! is revived, and only then is the length published (Release), so a
//! reader that sees the length (Acquire) sees complete records — no
//! `unsafe`. Models are write-once slots too, each published (Release
//! on their count) before the length that first includes a record they
//! serve.
//!
//! Concurrency rules (see `docs/xindex-concurrency.md`):
//! - every insert of a key above the group's array into this group takes
//!   [`Tail::lock`], so "the key is neither in the tail nor in the delta,
//!   append it" cannot race with an insert of the same key into the delta;
//! - appends need the delta unfrozen (checked inside the operation's epoch
//!   pin), so the merge phase sees a stable length, exactly like delta
//!   inserts;
//! - a group built by maintenance opens its tail only after the copy
//!   phase, when no operation on its predecessor (which could insert into
//!   the shared delta without this lock) is still running.
//!
//! [`Config::sequential_capacity`]: crate::Config::sequential_capacity

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use lidx_core::Key;
use lidx_core::model::linear::fit_least_squares;
use lidx_core::model::{LinearModel, PositionModel, round_clamp};
use lidx_core::search::{exponential_by, partition_by};
use parking_lot::Mutex;

use crate::record::{Outcome, RecordCell, Write};

/// Tail slots per model slot: a tail holds `capacity / 64` models (at
/// least `min(capacity, 16)`). Past them the newest model keeps serving
/// every later record (its search is exponential, so a poor model costs
/// probes, not answers) until the compaction that a half-full tail
/// triggers rebuilds the group.
const SLOTS_PER_MODEL: usize = 64;

/// Most latest records a retrain fits the slope to: enough to average
/// out jitter, and no older than the model being replaced, so that after
/// a change of rate the second retrain sees only the new rate.
const RETRAIN_KEYS: usize = 1024;

/// Model slots of a tail of `capacity` records.
pub(crate) fn model_slots(capacity: usize) -> usize {
    (capacity / SLOTS_PER_MODEL).max(capacity.min(16))
}

/// Which groups a rebuild gives a tail, and how large.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TailSpec {
    /// Slots to pre-allocate.
    pub(crate) capacity: usize,
    /// The error bound `e` beyond which an append retrains.
    pub(crate) error_bound: usize,
}

/// One model of a tail: serves the records from `first` up to the next
/// model's `first`, and keys from `first_key` up to the next model's.
struct TailModel<K> {
    first: usize,
    /// `None` for the first model, which also serves keys below the tail.
    first_key: Option<K>,
    /// Predicts a key's index in the tail.
    model: LinearModel<K>,
}

/// Append area of one record array.
pub(crate) struct Tail<K> {
    keys: Box<[OnceLock<K>]>,
    cells: Box<[RecordCell]>,
    len: AtomicUsize,
    /// Serialises appends with every insert of a key above the array.
    pub(crate) lock: Mutex<()>,
    open: AtomicBool,
    /// Ordered by `first` and by `first_key`.
    models: Box<[OnceLock<TailModel<K>>]>,
    /// Published models, a prefix of `models`.
    model_count: AtomicUsize,
    error_bound: usize,
}

impl<K: Key> Tail<K> {
    /// An empty tail, accepting appends if `open`. `start` (the array's
    /// last model, moved to tail positions) is the first model; without
    /// one, the first append starts a flat model at its key.
    pub(crate) fn new(spec: TailSpec, open: bool, start: Option<LinearModel<K>>) -> Self {
        let tail = Tail {
            keys: (0..spec.capacity).map(|_| OnceLock::new()).collect(),
            cells: (0..spec.capacity).map(|_| RecordCell::removed()).collect(),
            len: AtomicUsize::new(0),
            lock: Mutex::new(()),
            open: AtomicBool::new(open),
            models: (0..model_slots(spec.capacity).max(1))
                .map(|_| OnceLock::new())
                .collect(),
            model_count: AtomicUsize::new(0),
            error_bound: spec.error_bound,
        };
        if let Some(model) = start {
            tail.publish_model(0, None, model);
        }
        tail
    }

    /// Published records.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether every slot is published: no append will ever succeed
    /// again (the length only grows).
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.len() == self.keys.len()
    }

    /// Slots, published or not.
    pub(crate) fn capacity(&self) -> usize {
        self.keys.len()
    }

    /// Models published so far: 1 plus the retrains (0 before a first
    /// append when the array had no model to start from).
    pub(crate) fn model_count(&self) -> usize {
        self.model_count.load(Ordering::Acquire)
    }

    /// Allows appends (maintenance, after the copy phase).
    pub(crate) fn open(&self) {
        self.open.store(true, Ordering::Release);
    }

    /// Key of published record `i` (`i < len()` as read by the caller).
    #[inline]
    pub(crate) fn key(&self, i: usize) -> Option<&K> {
        self.keys.get(i)?.get()
    }

    /// Cell of record `i`.
    #[inline]
    pub(crate) fn cell(&self, i: usize) -> &RecordCell {
        &self.cells[i]
    }

    /// Index of the first of the first `len` records whose key is not
    /// `before`.
    #[inline]
    pub(crate) fn partition(&self, len: usize, before: impl Fn(&K) -> bool) -> usize {
        // Published slots are always set; an unset one (impossible) would
        // count as "not before", which keeps the search in bounds.
        partition_by(&self.keys[..len], |slot| slot.get().is_some_and(&before))
    }

    /// The published record holding `key`: the model serving `key`
    /// predicts its index, and an exponential search from there within
    /// that model's records finds it (or its absence) whatever the
    /// prediction's error.
    #[inline]
    pub(crate) fn find(&self, key: &K) -> Option<&RecordCell> {
        // Length first: every model serving a record below it is
        // published (Release) before the length that includes the record.
        let len = self.len();
        // Ascending inserts probe for keys above every record: one compare.
        if len == 0 || self.key(len - 1).is_none_or(|last| key > last) {
            return None;
        }
        let (first, end, predicted) = self.serving(key, len);
        let slice = &self.keys[first..end];
        let local = predicted.saturating_sub(first);
        let i = first + exponential_by(slice, local, |slot| slot.get().is_some_and(|k| k < key));
        (i < end && self.key(i) == Some(key)).then(|| &self.cells[i])
    }

    /// The records `first..end` (within `0..len`) among which `key` must
    /// lie, and the serving model's predicted index for it.
    #[inline]
    fn serving(&self, key: &K, len: usize) -> (usize, usize, usize) {
        // Published models a reader of `len` records may use: those
        // serving from a record below `len` (later ones are for appends
        // this reader's length predates).
        let count = self.model_count();
        let usable = |m: &OnceLock<TailModel<K>>| m.get().is_some_and(|m| m.first < len);
        let models = &self.models[..count];
        let usable = partition_by(models, usable);
        // The serving model: the last usable one whose first key is not
        // above `key` (the first model also serves keys below the tail).
        let after = 1 + partition_by(models.get(1..usable).unwrap_or(&[]), |m| {
            m.get()
                .and_then(|m| m.first_key.as_ref())
                .is_some_and(|first| first <= key)
        });
        let Some(m) = models
            .get(after - 1)
            .and_then(OnceLock::get)
            .filter(|_| usable > 0)
        else {
            // No model serves before the first append publishes one; the
            // search over every published record would be right anyway.
            return (0, len, 0);
        };
        let end = if after < usable {
            models[after].get().map_or(len, |next| next.first)
        } else {
            len
        };
        let span = end - m.first;
        let local = round_clamp(m.model.predict(key) - m.first as f64, span);
        (m.first, end, m.first + local)
    }

    /// Appends `key` with `word` if the tail is open, has room and `key`
    /// is above its last record; first retrains if the newest model
    /// predicts `key`'s index more than `e` off. The caller holds
    /// [`Tail::lock`], has checked that `key` is above the array and not
    /// in the delta, and saw the delta unfrozen within its current epoch
    /// pin.
    pub(crate) fn try_append(&self, key: &K, word: u64) -> bool {
        let len = self.len.load(Ordering::Relaxed);
        if !self.open.load(Ordering::Acquire)
            || len == self.keys.len()
            || len > 0 && self.key(len - 1).is_none_or(|last| last >= key)
        {
            return false;
        }
        self.train_for(key, len);
        if self.keys[len].set(key.clone()).is_err() {
            // Unreachable under the lock (slots past `len` are never set);
            // refusing keeps the tail consistent regardless.
            return false;
        }
        let revived = self.cells[len].write(Write::Put(word), true);
        debug_assert_eq!(revived, Outcome::Applied(None));
        self.len.store(len + 1, Ordering::Release);
        true
    }

    /// Conditional retraining (§3.5.2): a new model from record `at` on if
    /// the newest one does not generalise to `key` at `at`.
    fn train_for(&self, key: &K, at: usize) {
        let count = self.model_count.load(Ordering::Relaxed);
        let newest = count.checked_sub(1).and_then(|i| self.models[i].get());
        let model = match newest {
            None => LinearModel::constant(key.clone(), at as f64),
            Some(m) if generalises(&m.model, key, at, self.error_bound) => return,
            Some(_) if count == self.models.len() => return,
            Some(m) => self.refit(m.first, key, at),
        };
        self.publish_model(count, (count > 0).then(|| key.clone()), model);
    }

    /// The model from record `at` (key `key`) on: the least-squares slope
    /// of the latest keys since `since` (at most [`RETRAIN_KEYS`]) and
    /// `key`, through `key` at `at`, so the new model starts exact.
    fn refit(&self, since: usize, key: &K, at: usize) -> LinearModel<K> {
        let from = since.max(at.saturating_sub(RETRAIN_KEYS));
        let mut keys: Vec<K> = (from..at).filter_map(|i| self.key(i).cloned()).collect();
        keys.push(key.clone());
        let slope = fit_least_squares(&keys).map_or(0.0, |fitted| fitted.model.slope);
        // The fit's keys are sorted appends, so it cannot fail; a flat
        // model would still be correct (searches verify).
        LinearModel::new(key.clone(), slope, at as f64)
    }

    /// Publishes model `index` serving from the next record on.
    fn publish_model(&self, index: usize, first_key: Option<K>, model: LinearModel<K>) {
        let first = self.len.load(Ordering::Relaxed);
        let set = self.models[index].set(TailModel {
            first,
            first_key,
            model,
        });
        // Slots past the count are only set here, under the lock (or
        // before the tail is shared).
        debug_assert!(set.is_ok());
        if set.is_ok() {
            self.model_count.store(index + 1, Ordering::Release);
        }
    }
}

/// Whether `model` predicts index `at` for `key` within `error_bound`.
fn generalises<K: Key>(model: &LinearModel<K>, key: &K, at: usize, error_bound: usize) -> bool {
    let off = (model.predict(key) - at as f64).abs();
    off <= error_bound as f64
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn spec(capacity: usize, error_bound: usize) -> TailSpec {
        TailSpec {
            capacity,
            error_bound,
        }
    }

    #[test]
    fn appends_in_order_only_while_open_and_not_full() {
        let tail = Tail::<u64>::new(spec(3, 32), false, None);
        assert!(!tail.try_append(&5, 50), "closed");
        tail.open();
        assert!(tail.try_append(&5, 50));
        assert!(!tail.try_append(&5, 51), "not above the last key");
        assert!(!tail.try_append(&4, 40));
        assert!(tail.try_append(&7, 70));
        assert!(tail.try_append(&9, 90));
        assert!(!tail.try_append(&11, 110), "full");
        assert_eq!(tail.len(), 3);
        assert_eq!(tail.find(&7).and_then(|c| c.read()), Some(70));
        assert!(tail.find(&6).is_none());
        assert!(tail.find(&10).is_none());
        assert!(tail.find(&1).is_none());
        assert_eq!(tail.partition(3, |k| *k < 8), 2);
    }

    #[test]
    fn an_empty_tail_finds_nothing() {
        let tail = Tail::<u64>::new(spec(4, 2), true, None);
        assert!(tail.find(&0).is_none());
        assert!(tail.find(&u64::MAX).is_none());
        let started = Tail::new(spec(4, 2), true, Some(LinearModel::new(0u64, 1.0, 0.0)));
        assert_eq!(started.model_count(), 1);
        assert!(started.find(&3).is_none());
    }

    #[test]
    fn a_steady_rate_trains_once_and_a_new_rate_retrains() {
        let tail = Tail::<u64>::new(spec(1000, 4), true, None);
        // Every 10th key: after the flat first model runs out (error > 4),
        // one refit learns the rate and holds for the rest.
        for i in 0..400u64 {
            assert!(tail.try_append(&(1_000 + i * 10), i));
        }
        assert_eq!(tail.model_count(), 2, "flat start, then one retrain");
        // The rate changes to every 1000th key: the model's error grows
        // past 4 within a few appends and a new model takes over.
        let base = 1_000 + 400 * 10;
        for i in 0..400u64 {
            assert!(tail.try_append(&(base + i * 1_000), 400 + i));
        }
        let models = tail.model_count();
        assert!((3..=4).contains(&models), "{models} models");
        for i in 0..400u64 {
            assert_eq!(tail.find(&(1_000 + i * 10)).and_then(|c| c.read()), Some(i));
            assert_eq!(
                tail.find(&(base + i * 1_000)).and_then(|c| c.read()),
                Some(400 + i)
            );
            assert!(tail.find(&(1_001 + i * 10)).is_none());
        }
    }

    #[test]
    fn a_start_model_that_generalises_is_kept() {
        // The array's model predicted key 100 + 2i at array index i of a
        // 50-record array: moved to tail positions, it fits the appends.
        let start = LinearModel::new(100u64, 0.5, -50.0);
        let tail = Tail::new(spec(100, 2), true, Some(start));
        for i in 0..100u64 {
            assert!(tail.try_append(&(200 + 2 * i), i));
        }
        assert_eq!(tail.model_count(), 1, "no retraining");
        assert!((0..100u64).all(|i| tail.find(&(200 + 2 * i)).and_then(|c| c.read()) == Some(i)));
    }

    #[test]
    fn past_the_last_model_slot_lookups_stay_correct() {
        // Doubling gaps defeat every line: the models run out, the last
        // one keeps serving, and exponential search still finds each key.
        let tail = Tail::<u64>::new(spec(60, 0), true, None);
        let keys: Vec<u64> = (0..60).map(|i| 1u64 << i).collect();
        for (i, k) in keys.iter().enumerate() {
            assert!(tail.try_append(k, i as u64));
        }
        assert_eq!(tail.model_count(), model_slots(60));
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(tail.find(k).and_then(|c| c.read()), Some(i as u64));
            if *k > 1 {
                assert!(tail.find(&(k + 1)).is_none());
            }
        }
    }

    /// Measuring tool: the models' search against a binary search over
    /// the same tail (what `find` did before conditional retraining),
    /// alternated in one process, on 60,000 appended keys with gaps
    /// uniform in 1..=50.
    ///
    /// `cargo test --release -p lidx-xindex --lib tail_search_ab -- --ignored --nocapture`
    #[test]
    #[ignore = "measuring tool; run with --ignored --nocapture in release"]
    fn tail_search_ab() {
        let count = 60_000usize;
        let tail = Tail::<u64>::new(spec(65_536, 32), true, None);
        let mut state = 0x1234_5678u64;
        let mut key = 1u64 << 40;
        let mut keys = Vec::with_capacity(count);
        for i in 0..count {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            key += 1 + state % 50;
            assert!(tail.try_append(&key, i as u64));
            keys.push(key);
        }
        let probes: Vec<u64> = (0..count)
            .map(|i| keys[i.wrapping_mul(0x9e37_79b9) % count])
            .collect();
        let binary = |k: &u64| {
            let len = tail.len();
            let i = tail.partition(len, |x| x < k);
            (i < len && tail.key(i) == Some(k)).then(|| tail.cell(i))
        };
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..20 {
            let start = std::time::Instant::now();
            let found = if round % 2 == 0 {
                probes.iter().filter(|k| tail.find(k).is_some()).count()
            } else {
                probes.iter().filter(|k| binary(k).is_some()).count()
            };
            assert_eq!(found, count);
            times[round % 2].push(start.elapsed().as_secs_f64() * 1e9 / count as f64);
        }
        for t in &mut times {
            t.sort_by(f64::total_cmp);
        }
        println!(
            "{count} tail records, {} models: models' search median {:.1} ns, binary search {:.1} ns",
            tail.model_count(),
            times[0][times[0].len() / 2],
            times[1][times[1].len() / 2],
        );
    }

    proptest! {
        #[test]
        fn finds_exactly_the_appended_keys(
            gaps in proptest::collection::vec(1u64..1 << 40, 0..300),
            error_bound in 0usize..8,
            probes in proptest::collection::vec(any::<u64>(), 0..50),
        ) {
            let tail = Tail::<u64>::new(spec(gaps.len(), error_bound), true, None);
            let mut keys = Vec::new();
            let mut key = 0u64;
            for gap in gaps {
                key = key.saturating_add(gap);
                if keys.last() == Some(&key) {
                    break;
                }
                prop_assert!(tail.try_append(&key, key ^ 1));
                keys.push(key);
                // Readers between appends see exactly the published prefix.
                prop_assert_eq!(tail.find(&key).and_then(|c| c.read()), Some(key ^ 1));
            }
            prop_assert!(tail.model_count() <= model_slots(tail.capacity()).max(1));
            for &k in &keys {
                prop_assert_eq!(tail.find(&k).and_then(|c| c.read()), Some(k ^ 1));
            }
            for p in probes {
                let expected = keys.binary_search(&p).is_ok().then_some(p ^ 1);
                prop_assert_eq!(tail.find(&p).and_then(|c| c.read()), expected);
            }
        }
    }
}
