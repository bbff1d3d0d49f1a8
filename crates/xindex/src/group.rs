//! A group node (paper Algorithm 1, `group_t`): a sorted record array of
//! immutable shape, up to `m` linear models over it, a delta index for
//! inserts, the temporary delta used while the group is being rebuilt, and
//! the `next` link to groups created by a split that the root does not
//! index yet.
//!
//! Keys live in one flat array and the records' value and version words in
//! a parallel flat array: no per-record allocation, and a lookup touches
//! the key array and then one 16-byte cell.
//!
//! The record array and the delta are behind `Arc`s because several group
//! nodes share them: a model split/merge clones the node with new models,
//! and a group split first installs two logical groups over the same data
//! (Algorithm 4, step 1).

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_epoch::Atomic;
use lidx_core::Key;
use lidx_core::model::linear::fit_least_squares;
use lidx_core::model::{LinearModel, PositionModel};
use lidx_core::search::{lower_bound_within, partition_by};

use crate::delta::Delta;
use crate::record::RecordCell;
use crate::tail::Tail;

/// Keys and their record cells, sorted by key, never resized; optionally
/// followed by an append-only [`Tail`] (the sequential-insert fast path).
pub(crate) struct Records<K> {
    pub(crate) keys: Box<[K]>,
    pub(crate) cells: Box<[RecordCell]>,
    pub(crate) tail: Option<Tail<K>>,
    /// Records removed since this array was built: a compaction trigger.
    pub(crate) removed: AtomicUsize,
}

impl<K: Ord + Clone> Records<K> {
    fn new(keys: Vec<K>, cells: Vec<RecordCell>, tail_capacity: usize, tail_open: bool) -> Self {
        debug_assert_eq!(keys.len(), cells.len());
        Records {
            keys: keys.into_boxed_slice(),
            cells: cells.into_boxed_slice(),
            tail: (tail_capacity > 0).then(|| Tail::new(tail_capacity, tail_open)),
            removed: AtomicUsize::new(0),
        }
    }

    /// Array length and published tail length: records `0..array` are in
    /// the array, `array..array + tail` in the tail, all in key order.
    #[inline]
    pub(crate) fn lengths(&self) -> (usize, usize) {
        (self.keys.len(), self.tail.as_ref().map_or(0, |t| t.len()))
    }

    /// Key of record `i` of the combined order (`i` below the summed
    /// [`lengths`](Self::lengths)).
    #[inline]
    pub(crate) fn key_at(&self, i: usize) -> Option<&K> {
        match i.checked_sub(self.keys.len()) {
            None => self.keys.get(i),
            Some(j) => self.tail.as_ref()?.key(j),
        }
    }

    /// Cell of record `i` of the combined order.
    #[inline]
    pub(crate) fn cell_at(&self, i: usize) -> &RecordCell {
        match i.checked_sub(self.keys.len()) {
            None => &self.cells[i],
            Some(j) => self.tail.as_ref().expect("index below lengths()").cell(j),
        }
    }

    /// Whether `key` is above every array key (tail territory).
    #[inline]
    pub(crate) fn above_array(&self, key: &K) -> bool {
        self.keys.last().is_none_or(|last| key > last)
    }
}

/// One linear model over `keys[start..start + len]`.
#[derive(Clone)]
pub(crate) struct SubModel<K> {
    /// Smallest key of the model's range; `None` for the first model,
    /// which also serves keys below the group's first record.
    pub(crate) first_key: Option<K>,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) model: LinearModel<K>,
    pub(crate) max_error: usize,
}

/// Fits `count` models (clamped to `1..=keys.len()`) over equal shares of
/// `keys`, as model split and merge reassign data evenly (§3.1.4).
pub(crate) fn fit_models<K: Key>(keys: &[K], count: usize) -> Box<[SubModel<K>]> {
    let n = keys.len();
    let count = count.clamp(1, n.max(1));
    (0..count)
        .map(|i| {
            let start = i * n / count;
            let end = (i + 1) * n / count;
            let slice = &keys[start..end];
            let (model, max_error) = match fit_least_squares(slice) {
                Ok(fitted) => (fitted.model, fitted.max_error),
                // Record arrays are sorted by construction, so this cannot
                // happen; a flat model with a full-width error stays correct
                // because every search verifies its window anyway.
                Err(_) => (LinearModel::constant(keys[start].clone(), 0.0), slice.len()),
            };
            SubModel {
                first_key: (i > 0).then(|| keys[start].clone()),
                start,
                len: end - start,
                model,
                max_error,
            }
        })
        .collect()
}

/// A group node.
pub(crate) struct Group<K> {
    /// Smallest key this group is responsible for; `None` for the leftmost
    /// group, which takes every key below the next pivot.
    pub(crate) pivot: Option<K>,
    pub(crate) records: Arc<Records<K>>,
    pub(crate) models: Box<[SubModel<K>]>,
    /// The delta index (`buf`).
    pub(crate) buf: Arc<Delta<K>>,
    /// The temporary delta (`tmp_buf`), set once, after `buf` is frozen and
    /// an epoch barrier has passed.
    pub(crate) tmp: OnceLock<Arc<Delta<K>>>,
    /// The next group in key order when the root does not index it yet.
    pub(crate) next: Atomic<Group<K>>,
}

impl<K: Key> Group<K> {
    /// A group over live records (bulk load), with the fewest models
    /// (up to `max_models`) that keep every error within `error_bound`.
    pub(crate) fn from_values(
        pivot: Option<K>,
        keys: Vec<K>,
        words: Vec<u64>,
        error_bound: usize,
        max_models: usize,
        tail_capacity: usize,
    ) -> Self {
        let mut count = 1;
        let mut models = fit_models(&keys, count);
        while count < max_models && worst_error(&models) > error_bound {
            count += 1;
            models = fit_models(&keys, count);
        }
        let cells = words.into_iter().map(RecordCell::live).collect();
        Group {
            pivot,
            records: Arc::new(Records::new(keys, cells, tail_capacity, true)),
            models,
            buf: Arc::new(Delta::new()),
            tmp: OnceLock::new(),
            next: Atomic::null(),
        }
    }

    /// The merge phase's new group: every record points at the live record
    /// it was merged from. Its tail (if `tail_capacity > 0`) stays closed
    /// until maintenance opens it after the copy phase.
    ///
    /// # Safety
    ///
    /// Every target must stay allocated until this group's copy phase has
    /// resolved all pointers and every thread that may have read a pointer
    /// has finished (see [`RecordCell::pointing_to`]).
    pub(crate) unsafe fn from_pointers(
        pivot: Option<K>,
        merged: Vec<(K, &RecordCell)>,
        model_count: usize,
        buf: Arc<Delta<K>>,
        tail_capacity: usize,
    ) -> Self {
        let mut keys = Vec::with_capacity(merged.len());
        let mut cells = Vec::with_capacity(merged.len());
        for (key, target) in merged {
            keys.push(key);
            // SAFETY: forwarded from this function's contract.
            cells.push(unsafe { RecordCell::pointing_to(target) });
        }
        let models = fit_models(&keys, model_count);
        Group {
            pivot,
            records: Arc::new(Records::new(keys, cells, tail_capacity, false)),
            models,
            buf,
            tmp: OnceLock::new(),
            next: Atomic::null(),
        }
    }

    /// A new node over this group's records and delta, with `pivot` and
    /// `models`: model split/merge and the logical halves of a group split.
    pub(crate) fn sharing(&self, pivot: Option<K>, models: Box<[SubModel<K>]>) -> Self {
        Group {
            pivot,
            records: Arc::clone(&self.records),
            models,
            buf: Arc::clone(&self.buf),
            tmp: OnceLock::new(),
            next: Atomic::null(),
        }
    }

    /// Worst error over the group's models.
    pub(crate) fn max_error(&self) -> usize {
        worst_error(&self.models)
    }

    /// The model serving `key`: the last one whose first key is `<= key`.
    #[inline]
    fn model_for(&self, key: &K) -> &SubModel<K> {
        let mut chosen = &self.models[0];
        for model in &self.models[1..] {
            match &model.first_key {
                Some(first) if first <= key => chosen = model,
                _ => break,
            }
        }
        chosen
    }

    /// Position of the first record whose key is `>= key`.
    #[inline]
    pub(crate) fn lower_bound(&self, key: &K) -> usize {
        let keys = &self.records.keys;
        if keys.is_empty() {
            return 0;
        }
        let model = self.model_for(key);
        let predicted = model.start + model.model.predict_pos(key, model.len);
        lower_bound_within(keys, key, predicted, model.max_error)
    }

    /// Index of the record holding exactly `key`.
    #[inline]
    pub(crate) fn find(&self, key: &K) -> Option<usize> {
        let i = self.lower_bound(key);
        (self.records.keys.get(i) == Some(key)).then_some(i)
    }

    /// The array or tail record holding exactly `key`.
    #[inline]
    pub(crate) fn record(&self, key: &K) -> Option<&RecordCell> {
        if let Some(i) = self.find(key) {
            return Some(&self.records.cells[i]);
        }
        match &self.records.tail {
            Some(tail) if self.records.above_array(key) => tail.find(key),
            _ => None,
        }
    }

    /// The tail whose lock an insert of `key` must take, if the group has
    /// one and `key` is above the array.
    #[inline]
    pub(crate) fn tail_for(&self, key: &K) -> Option<&Tail<K>> {
        self.records
            .tail
            .as_ref()
            .filter(|_| self.records.above_array(key))
    }

    /// Index (in the combined array-then-tail order, of which the first
    /// `tail_len` tail records count) of the first record inside `bound`.
    pub(crate) fn first_index(&self, bound: Bound<&K>, tail_len: usize) -> usize {
        let keys = &self.records.keys;
        let array = match bound {
            Bound::Unbounded => 0,
            Bound::Included(key) => self.lower_bound(key),
            Bound::Excluded(key) => {
                let i = self.lower_bound(key);
                i + partition_by(&keys[i..], |k| k <= key)
            }
        };
        match &self.records.tail {
            Some(tail) if array == keys.len() => {
                array
                    + match bound {
                        Bound::Unbounded => 0,
                        Bound::Included(key) => tail.partition(tail_len, |k| k < key),
                        Bound::Excluded(key) => tail.partition(tail_len, |k| k <= key),
                    }
            }
            _ => array,
        }
    }

    /// The delta a put must go to when `buf` is frozen, if allocated yet.
    #[inline]
    pub(crate) fn tmp(&self) -> Option<&Delta<K>> {
        self.tmp.get().map(|d| &**d)
    }

    /// Counts a record removed from the array.
    pub(crate) fn note_removed(&self) {
        self.records.removed.fetch_add(1, Ordering::Relaxed);
    }
}

fn worst_error<K>(models: &[SubModel<K>]) -> usize {
    models.iter().map(|m| m.max_error).max().unwrap_or(0)
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn models_split_data_evenly_and_find_everything() {
        let keys: Vec<u64> = (0..1000u64).map(|i| i * i).collect();
        let words: Vec<u64> = (0..1000).collect();
        let g = Group::from_values(None, keys.clone(), words, 8, 4, 0);
        assert!(g.models.len() > 1 && g.models.len() <= 4);
        assert_eq!(g.models.iter().map(|m| m.len).sum::<usize>(), 1000);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(g.find(k), Some(i));
            assert_eq!(g.records.cells[i].read(), Some(i as u64));
        }
        assert_eq!(g.find(&2), None);
        assert_eq!(g.first_index(Bound::Excluded(&4), 0), 3);
        assert_eq!(g.first_index(Bound::Included(&5), 0), 3);
    }

    #[test]
    fn empty_group_finds_nothing() {
        let g = Group::<u64>::from_values(None, vec![], vec![], 32, 4, 0);
        assert_eq!(g.models.len(), 1);
        assert_eq!(g.find(&7), None);
        assert_eq!(g.first_index(Bound::Unbounded, 0), 0);
    }

    #[test]
    fn tail_records_follow_the_array() {
        let g = Group::from_values(None, vec![10u64, 20, 30], vec![1, 2, 3], 32, 4, 4);
        let tail = g.tail_for(&35).expect("35 is above the array");
        assert!(g.tail_for(&25).is_none());
        assert!(tail.try_append(&35, 4));
        assert!(tail.try_append(&40, 5));
        assert_eq!(g.record(&35).and_then(|c| c.read()), Some(4));
        assert_eq!(g.record(&20).and_then(|c| c.read()), Some(2));
        assert!(g.record(&36).is_none());
        assert_eq!(g.records.lengths(), (3, 2));
        assert_eq!(g.records.key_at(4), Some(&40));
        assert_eq!(g.records.cell_at(3).read(), Some(4));
        assert_eq!(g.first_index(Bound::Excluded(&30), 2), 3);
        assert_eq!(g.first_index(Bound::Excluded(&35), 2), 4);
        assert_eq!(g.first_index(Bound::Included(&41), 2), 5);
        assert_eq!(g.first_index(Bound::Included(&25), 2), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn lower_bound_matches_partition_point(
            mut keys in proptest::collection::vec(any::<u64>(), 0..300),
            probes in proptest::collection::vec(any::<u64>(), 1..20),
            count in 1usize..5,
        ) {
            keys.sort_unstable();
            keys.dedup();
            let models = fit_models(&keys, count);
            let n = keys.len();
            let words = vec![0; n];
            let mut g = Group::from_values(None, keys.clone(), words, 32, 1, 0);
            g.models = models;
            for p in probes.iter().chain(keys.iter()) {
                prop_assert_eq!(g.lower_bound(p), keys.partition_point(|k| k < p));
            }
        }
    }
}
