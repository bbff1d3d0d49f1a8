//! A group's delta index: an ordered map from key to [`RecordCell`], plus
//! the `frozen` flag of Two-Phase Compaction.
//!
//! Each entry is a [`DeltaRecord`] in the delta's [`Arena`], made by the
//! insert that created the key and freed only when the delta is dropped
//! (removal is the record's flag), so a record's address is stable for the
//! life of the delta: the merge phase can point new records at it, and a
//! reference handed out lives as long as the `&Delta` it came from (the
//! delta itself is reclaimed through the epoch, with the last group node
//! sharing it).
//!
//! The ordered index over the records is a `BTreeSet` of record pointers
//! behind a reader-writer lock, the paper's "basic version" (§3.5.1: an
//! `stx::Btree` under a read-write lock). The lock only guards the
//! *index*: a lookup holds the read lock for one tree search and then reads
//! or writes the record through its own version word, so updates of delta
//! records never block readers, as in the array. Only an insert of a new
//! key takes the write lock, for one tree insert. A B-tree node holds many
//! record pointers, so a search costs a few cache misses where a skip list
//! (the first implementation) cost about one per level: inserts of new keys
//! became 1.3-1.5x faster.

use std::borrow::Borrow;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use lidx_core::Key;
use parking_lot::{RwLock, RwLockUpgradableReadGuard};

use crate::arena::Arena;
use crate::budget::{DeltaBudget, entry_bytes};
use crate::record::{Outcome, RecordCell, Write};

/// One key of a delta index and its record.
pub(crate) struct DeltaRecord<K> {
    key: K,
    cell: RecordCell,
}

impl<K> DeltaRecord<K> {
    /// The record's key.
    #[inline]
    pub(crate) fn key(&self) -> &K {
        &self.key
    }

    /// The record's cell.
    #[inline]
    pub(crate) fn value(&self) -> &RecordCell {
        &self.cell
    }
}

/// A pointer to a [`DeltaRecord`] in the delta's arena, ordered by its key.
struct Slot<K>(NonNull<DeltaRecord<K>>);

impl<K> Slot<K> {
    #[inline]
    fn record(&self) -> &DeltaRecord<K> {
        // SAFETY: the pointer comes from the arena of the `Index` holding
        // this slot, which frees records only when it is dropped with the
        // slot; until then a record is never written except through its
        // atomics.
        unsafe { self.0.as_ref() }
    }
}

// SAFETY: a slot only gives `&DeltaRecord` (a `K` and atomics) to a record
// owned by the arena next to it.
unsafe impl<K: Send + Sync> Send for Slot<K> {}
// SAFETY: as above.
unsafe impl<K: Send + Sync> Sync for Slot<K> {}

/// The ordered index over a delta's records, and the records themselves.
struct Index<K> {
    set: BTreeSet<Slot<K>>,
    /// Declared after `set`, so the slots are gone before their records.
    records: Arena<DeltaRecord<K>>,
}

impl<K> Borrow<K> for Slot<K> {
    #[inline]
    fn borrow(&self) -> &K {
        &self.record().key
    }
}

impl<K: Ord> PartialEq for Slot<K> {
    fn eq(&self, other: &Self) -> bool {
        self.record().key == other.record().key
    }
}

impl<K: Ord> Eq for Slot<K> {}

impl<K: Ord> PartialOrd for Slot<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> Ord for Slot<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.record().key.cmp(&other.record().key)
    }
}

/// A delta index (the paper's `buf` / `tmp_buf`).
pub(crate) struct Delta<K> {
    index: RwLock<Index<K>>,
    /// Keys ever inserted (live or removed), readable without the lock.
    entries: AtomicUsize,
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
    /// An empty, unfrozen delta (no allocation until the first insert).
    pub(crate) fn new() -> Self {
        Delta {
            index: RwLock::new(Index {
                set: BTreeSet::new(),
                records: Arena::new(),
            }),
            entries: AtomicUsize::new(0),
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
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.entries.load(Ordering::Acquire)
    }

    /// The record for `key`, if the key was ever inserted.
    #[inline]
    pub(crate) fn get(&self, key: &K) -> Option<&RecordCell> {
        if self.len() == 0 {
            return None;
        }
        let index = self.index.read();
        let record = index.set.get(key).map(|slot| slot.0);
        drop(index);
        // SAFETY: records are freed only when the delta is dropped, which
        // `&self` rules out for the returned lifetime.
        record.map(|r| unsafe { &r.as_ref().cell })
    }

    /// Inserts or updates `key` (reviving a removed record): the caller
    /// must have seen the delta unfrozen within its current epoch pin.
    /// A new entry is charged to `budget`.
    pub(crate) fn upsert(&self, key: &K, word: u64, budget: &DeltaBudget) -> Upserted {
        let mut over_budget = false;
        // Upgradable: other readers go on; a second inserter waits here
        // instead of between our search and our insert.
        let index = self.index.upgradable_read();
        let found = index.set.get(key).map(|slot| slot.0);
        let record = match found {
            Some(record) => {
                drop(index);
                record
            }
            None => {
                let mut index = RwLockUpgradableReadGuard::upgrade(index);
                // Insert a removed placeholder and revive it through the
                // record lock below, like any update: a concurrent reader
                // sees the key absent until the put commits.
                let stored = key.clone();
                // Charged for the stored copy (a clone's capacity can be
                // smaller than the caller's key's).
                let bytes = entry_bytes(&stored);
                let record = index.records.alloc(DeltaRecord {
                    key: stored,
                    cell: RecordCell::removed(),
                });
                index.set.insert(Slot(record));
                // Plain stores, not read-modify-writes: every writer of
                // these two counters holds the write lock (`take_charge`
                // runs only after the last insert, past the freeze barrier).
                let entries = self.entries.load(Ordering::Relaxed);
                self.entries.store(entries + 1, Ordering::Release);
                let charged = self.charged.load(Ordering::Relaxed);
                self.charged.store(charged + bytes, Ordering::Relaxed);
                drop(index);
                over_budget = budget.charge(bytes);
                record
            }
        };
        // SAFETY: as in `get`: the record lives as long as `self`.
        let cell = unsafe { &record.as_ref().cell };
        let previous = match cell.write(Write::Put(word), true) {
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

    /// First record whose key is inside `bound`.
    pub(crate) fn first_from(&self, bound: Bound<&K>) -> Option<&DeltaRecord<K>> {
        if self.len() == 0 {
            return None;
        }
        let index = self.index.read();
        let record = index.set.range::<K, _>((bound, Bound::Unbounded)).next()?.0;
        drop(index);
        // SAFETY: as in `get`.
        Some(unsafe { record.as_ref() })
    }

    /// The record after `record` in key order.
    pub(crate) fn next_after(&self, record: &DeltaRecord<K>) -> Option<&DeltaRecord<K>> {
        self.first_from(Bound::Excluded(&record.key))
    }

    /// Every record in key order, as of one instant.
    pub(crate) fn records(&self) -> Vec<&DeltaRecord<K>> {
        let index = self.index.read();
        // SAFETY: as in `get`.
        index
            .set
            .iter()
            .map(|slot| unsafe { slot.0.as_ref() })
            .collect()
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn upsert_get_and_revive() {
        let d = Delta::<u64>::new();
        let budget = DeltaBudget::new(usize::MAX);
        let put = |k: u64, v: u64| d.upsert(&k, v, &budget).previous;
        assert_eq!(put(5, 50), None);
        assert_eq!(put(5, 51), Some(50));
        assert_eq!(d.get(&5).unwrap().read(), Some(51));
        let cell = d.get(&5).unwrap();
        assert_eq!(cell.write(Write::Remove, true), Outcome::Applied(Some(51)));
        assert_eq!(d.get(&5).unwrap().read(), None);
        assert_eq!(put(5, 52), None);
        assert_eq!(d.len(), 1);
        put(1, 10);
        let keys: Vec<u64> = d.records().iter().map(|r| *r.key()).collect();
        assert_eq!(keys, vec![1, 5]);
        let first = d.first_from(Bound::Excluded(&1)).unwrap();
        assert_eq!(*first.key(), 5);
        assert!(d.next_after(first).is_none());
        assert_eq!(
            *d.next_after(d.first_from(Bound::Unbounded).unwrap())
                .unwrap()
                .key(),
            5
        );
        assert!(!d.is_frozen());
        d.freeze();
        assert!(d.is_frozen());
        let empty = Delta::<u64>::new();
        assert_eq!(empty.len(), 0);
        assert!(empty.get(&5).is_none());
        assert!(empty.first_from(Bound::Unbounded).is_none());
        assert!(empty.records().is_empty());
    }

    #[test]
    fn records_keep_their_address_while_the_index_grows() {
        // References taken early stay valid and current while thousands of
        // inserts reshape the B-tree (exercises the raw-pointer slots).
        let d = Delta::<Vec<u8>>::new();
        let budget = DeltaBudget::new(usize::MAX);
        d.upsert(&b"m".to_vec(), 1, &budget);
        let early = d.get(&b"m".to_vec()).unwrap();
        let early_record = d.first_from(Bound::Unbounded).unwrap();
        for i in 0..5000u32 {
            d.upsert(&i.to_be_bytes().to_vec(), u64::from(i), &budget);
        }
        assert_eq!(early.read(), Some(1));
        d.upsert(&b"m".to_vec(), 2, &budget);
        assert_eq!(early.read(), Some(2));
        assert_eq!(early_record.key(), b"m");
        assert!(std::ptr::eq(early_record.value(), early));
        assert_eq!(d.len(), 5001);
        let records = d.records();
        assert!(records.windows(2).all(|w| w[0].key() < w[1].key()));
    }

    #[test]
    fn concurrent_inserts_create_each_key_once() {
        let d = Delta::<u64>::new();
        let budget = DeltaBudget::new(usize::MAX);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (d, budget) = (&d, &budget);
                s.spawn(move || {
                    for k in 0..2000u64 {
                        d.upsert(&(k % 500), t, budget);
                        assert!(d.get(&(k % 500)).unwrap().read().is_some());
                    }
                });
            }
        });
        assert_eq!(d.len(), 500);
        assert_eq!(d.records().len(), 500);
        d.freeze();
        assert_eq!(d.take_charge(), 500 * entry_bytes(&0u64));
    }

    #[test]
    fn new_entries_are_charged_once_and_refunded_once() {
        let d = Delta::<u64>::new();
        let one = entry_bytes(&0u64);
        let budget = DeltaBudget::new(2 * one);
        assert!(!d.upsert(&1, 1, &budget).over_budget);
        // Updates and revivals of an existing entry cost nothing.
        assert!(!d.upsert(&1, 2, &budget).over_budget);
        assert!(!d.upsert(&2, 2, &budget).over_budget);
        assert_eq!(budget.used(), 2 * one);
        let third = d.upsert(&3, 3, &budget);
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
