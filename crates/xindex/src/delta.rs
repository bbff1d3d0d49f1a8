//! A group's delta index: a concurrent ordered map from key to
//! [`RecordCell`], plus the `frozen` flag of Two-Phase Compaction.
//!
//! Entries are never physically removed (removal is the record's flag), so
//! a cell's address is stable for the life of the delta: the merge phase
//! can point new records at it. The whole delta is freed when the last
//! group node sharing it is reclaimed.
//!
//! The skip list is `crossbeam_skiplist::base::SkipList` on the default
//! epoch collector, so lookups borrow entries from the caller's epoch
//! guard without touching reference counts. It is created by the first
//! insert: an empty skip list takes about 600 bytes (its head tower), and
//! most groups' deltas stay empty between compactions. "Not created yet"
//! is exactly "empty", so the protocol is unchanged; two first inserts
//! racing meet in `OnceLock::get_or_init`, which creates one list.

use std::ops::Bound;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crossbeam_epoch::{self as epoch, Guard};
use crossbeam_skiplist::base::{Entry, SkipList};
use lidx_core::Key;

use crate::budget::{DeltaBudget, entry_bytes};
use crate::record::{Outcome, RecordCell, Write};

/// A delta index (the paper's `buf` / `tmp_buf`).
pub(crate) struct Delta<K> {
    list: OnceLock<Box<SkipList<K, RecordCell>>>,
    /// Set once by maintenance; afterwards no new key enters this delta.
    /// Shared by every group node that shares the delta, so a writer on a
    /// stale node sees the freeze too.
    frozen: AtomicBool,
    /// Bytes this delta's entries are charged against the [`DeltaBudget`],
    /// refunded once when a compaction has merged them.
    charged: AtomicUsize,
}

/// What [`Delta::upsert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Upserted {
    /// The key's previous value.
    pub(crate) previous: Option<u64>,
    /// The upsert created an entry and the delta budget is now exceeded.
    pub(crate) over_budget: bool,
}

impl<K: Key> Delta<K> {
    /// An empty, unfrozen delta.
    pub(crate) fn new() -> Self {
        Delta {
            list: OnceLock::new(),
            frozen: AtomicBool::new(false),
            charged: AtomicUsize::new(0),
        }
    }

    /// Whether inserts are closed.
    #[inline]
    pub(crate) fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Closes inserts (the merge phase starts after an epoch barrier).
    pub(crate) fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Number of keys ever inserted (live or removed).
    pub(crate) fn len(&self) -> usize {
        self.list.get().map_or(0, |list| list.len())
    }

    /// The record for `key`, if the key was ever inserted.
    #[inline]
    pub(crate) fn get<'g>(&'g self, key: &K, guard: &'g Guard) -> Option<&'g RecordCell> {
        self.list.get()?.get(key, guard).map(|e| e.value())
    }

    /// Inserts or updates `key` (reviving a removed record): the caller
    /// must have seen the delta unfrozen within its current epoch pin.
    /// A new entry is charged to `budget`.
    pub(crate) fn upsert(&self, key: &K, word: u64, guard: &Guard, budget: &DeltaBudget) -> Upserted
    where
        K: Key,
    {
        let list = self
            .list
            .get_or_init(|| Box::new(SkipList::new(epoch::default_collector().clone())));
        let mut over_budget = false;
        let outcome = match list.get(key, guard) {
            Some(entry) => entry.value().write(Write::Put(word), true),
            None => {
                // Insert a removed placeholder and revive it through the
                // record lock, so a racing insert of the same key serialises
                // on one cell whichever thread created it. (A racing insert
                // may build a node that loses; it is charged all the same,
                // and refunded with the rest of this delta.)
                let entry = list.get_or_insert_with(
                    key.clone(),
                    || {
                        let bytes = entry_bytes(key);
                        self.charged.fetch_add(bytes, Ordering::Relaxed);
                        over_budget = budget.charge(bytes);
                        RecordCell::removed()
                    },
                    guard,
                );
                let outcome = entry.value().write(Write::Put(word), true);
                entry.release(guard);
                outcome
            }
        };
        let previous = match outcome {
            Outcome::Applied(previous) => previous,
            // Reviving is allowed, so a put always applies.
            Outcome::Dead => None,
        };
        Upserted {
            previous,
            over_budget,
        }
    }

    /// Takes back everything charged for this (frozen and merged) delta,
    /// once: later calls return 0.
    pub(crate) fn take_charge(&self) -> usize {
        debug_assert!(self.is_frozen(), "only a merged delta is refunded");
        self.charged.swap(0, Ordering::Relaxed)
    }

    /// First entry whose key is inside `bound`.
    pub(crate) fn first_from<'g>(
        &'g self,
        bound: Bound<&K>,
        guard: &'g Guard,
    ) -> Option<Entry<'g, 'g, K, RecordCell>> {
        self.list.get()?.lower_bound(bound, guard)
    }

    /// All entries in key order.
    pub(crate) fn iter<'g>(
        &'g self,
        guard: &'g Guard,
    ) -> impl Iterator<Item = (&'g K, &'g RecordCell)> + 'g {
        self.list
            .get()
            .into_iter()
            .flat_map(move |list| list.iter(guard))
            .map(|e| (e.key(), e.value()))
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn upsert_get_and_revive() {
        let d = Delta::<u64>::new();
        let budget = DeltaBudget::new(usize::MAX);
        let guard = epoch::pin();
        let put = |k: u64, v: u64| d.upsert(&k, v, &guard, &budget).previous;
        assert_eq!(put(5, 50), None);
        assert_eq!(put(5, 51), Some(50));
        assert_eq!(d.get(&5, &guard).unwrap().read(), Some(51));
        let cell = d.get(&5, &guard).unwrap();
        assert_eq!(cell.write(Write::Remove, true), Outcome::Applied(Some(51)));
        assert_eq!(d.get(&5, &guard).unwrap().read(), None);
        assert_eq!(put(5, 52), None);
        assert_eq!(d.len(), 1);
        put(1, 10);
        let keys: Vec<u64> = d.iter(&guard).map(|(k, _)| *k).collect();
        assert_eq!(keys, vec![1, 5]);
        assert_eq!(*d.first_from(Bound::Excluded(&1), &guard).unwrap().key(), 5);
        assert!(!d.is_frozen());
        d.freeze();
        // An untouched delta allocates no skip list and reads as empty.
        let empty = Delta::<u64>::new();
        assert!(empty.list.get().is_none());
        assert_eq!(empty.len(), 0);
        assert!(empty.get(&5, &guard).is_none());
        assert!(empty.first_from(Bound::Unbounded, &guard).is_none());
        assert_eq!(empty.iter(&guard).count(), 0);
        assert!(d.is_frozen());
    }

    #[test]
    fn new_entries_are_charged_once_and_refunded_once() {
        let d = Delta::<u64>::new();
        let one = entry_bytes(&0u64);
        let budget = DeltaBudget::new(2 * one);
        let guard = epoch::pin();
        assert!(!d.upsert(&1, 1, &guard, &budget).over_budget);
        // Updates and revivals of an existing entry cost nothing.
        assert!(!d.upsert(&1, 2, &guard, &budget).over_budget);
        assert!(!d.upsert(&2, 2, &guard, &budget).over_budget);
        assert_eq!(budget.used(), 2 * one);
        let third = d.upsert(&3, 3, &guard, &budget);
        assert!(third.over_budget);
        assert_eq!(third.previous, None);
        d.freeze();
        let charged = d.take_charge();
        assert_eq!(charged, 3 * one);
        budget.refund(charged);
        assert_eq!(budget.used(), 0);
        assert_eq!(d.take_charge(), 0);
    }
}
