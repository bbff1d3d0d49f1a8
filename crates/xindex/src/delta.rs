//! A group's delta index: an ordered map from key to [`RecordCell`], plus
//! the `frozen` flag of Two-Phase Compaction.
//!
//! Each entry is a [`DeltaRecord`], made by the insert that created the key
//! and freed only when the delta is dropped (removal is the record's flag),
//! so a record's address is stable for the life of the delta: the merge
//! phase can point new records at it, and a reference handed out lives as
//! long as the `&Delta` it came from (the delta itself is reclaimed through
//! the epoch, with the last group node sharing it).
//!
//! The ordered index over the records is a [`DeltaTree`]: the paper's
//! scalable delta index (§3.5.1), a B+-tree whose readers validate node
//! versions instead of locking and whose writers lock single nodes. A
//! lookup writes no shared memory, then reads or writes the record through
//! its own version word, so neither readers nor updates of existing keys
//! ever wait for each other, and inserts of new keys into one delta only
//! wait for each other when they hit the same node.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lidx_core::Key;

use crate::budget::{DeltaBudget, entry_bytes};
use crate::delta_tree::{Cursor, DeltaTree};
use crate::record::{Outcome, RecordCell, Write};

/// One key of a delta index and its record.
pub(crate) struct DeltaRecord<K> {
    key: K,
    cell: RecordCell,
}

impl<K> DeltaRecord<K> {
    /// A live record of `key` holding `word`.
    pub(crate) fn live(key: K, word: u64) -> Self {
        DeltaRecord {
            key,
            cell: RecordCell::live(word),
        }
    }

    /// A record of `key` that is removed until a put revives it.
    #[cfg(test)]
    pub(crate) fn removed(key: K) -> Self {
        DeltaRecord {
            key,
            cell: RecordCell::removed(),
        }
    }

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

/// A delta index (the paper's `buf` / `tmp_buf`).
///
/// `repr(C)` with the tree first, so that the tree's root pointer is the
/// delta's first word, the one [`Group::prefetch_delta`](crate::group::Group::prefetch_delta) requests.
#[repr(C)]
pub(crate) struct Delta<K> {
    tree: DeltaTree<K>,
    /// Set once by maintenance; afterwards no new key enters this delta.
    /// Shared by every group node that shares the delta, so a writer on a
    /// stale node sees the freeze too.
    frozen: AtomicBool,
    /// Whether the charge of this delta's entries against the
    /// [`DeltaBudget`] was refunded (once, when a compaction merged them).
    /// The charge itself is not kept: every linked record was charged
    /// [`entry_bytes`] of its key, so the refund adds those up.
    refunded: AtomicBool,
    /// When maintenance first saw this delta non-empty, in nanoseconds of
    /// the index's maintenance clock plus one (0: not yet seen).
    first_seen: AtomicU64,
}

/// A write into an existing delta record, reviving it if removed (a
/// removed delta record is its key absent).
fn write_reviving(cell: &RecordCell, op: Write) -> Upserted {
    let previous = match cell.write(op, true) {
        Outcome::Applied(previous) => previous,
        // Reviving is allowed, so a write always applies.
        Outcome::Dead => None,
    };
    Upserted {
        previous,
        over_budget: false,
    }
}

/// What [`Delta::write`] did.
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
            tree: DeltaTree::new(),
            frozen: AtomicBool::new(false),
            refunded: AtomicBool::new(false),
            first_seen: AtomicU64::new(0),
        }
    }

    /// How long maintenance has seen this delta non-empty, `now` being
    /// the index's maintenance clock (nanoseconds); the first call that
    /// finds an entry starts the wait. Called by maintenance only (under
    /// its lock), so plain loads and stores suffice.
    pub(crate) fn waited(&self, now: u64) -> Duration {
        if self.tree.is_empty() {
            return Duration::ZERO;
        }
        let stamp = now.saturating_add(1);
        match self.first_seen.load(Ordering::Relaxed) {
            0 => {
                self.first_seen.store(stamp, Ordering::Relaxed);
                Duration::ZERO
            }
            seen => Duration::from_nanos(stamp.saturating_sub(seen)),
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

    /// Number of keys ever inserted (live or removed), counted over the
    /// tree's leaves: with inserts going on, a count of some instant per
    /// leaf.
    pub(crate) fn len(&self) -> usize {
        self.tree.count_up_to(usize::MAX)
    }

    /// [`len`](Self::len) if at most `limit`, else some number above
    /// `limit` (counting stops there).
    pub(crate) fn len_up_to(&self, limit: usize) -> usize {
        self.tree.count_up_to(limit)
    }

    /// The record for `key`, if the key was ever inserted.
    #[inline]
    pub(crate) fn get(&self, key: &K) -> Option<&RecordCell> {
        self.tree.get(key).map(DeltaRecord::value)
    }

    /// Applies `op` to `key`'s record, reviving a removed one, and
    /// creates the record (live, with [`Write::created`]'s value) if there
    /// is none and `op` creates: a put inserts or updates, an exchange
    /// from absent inserts only if absent. The caller must have seen the
    /// delta unfrozen within its current epoch pin. A new entry is charged
    /// to `budget`.
    pub(crate) fn write(&self, key: &K, op: Write, budget: &DeltaBudget) -> Upserted {
        let Some(word) = op.created() else {
            return self.write_existing(key, op).unwrap_or(Upserted {
                previous: None,
                over_budget: false,
            });
        };
        // A new key enters live: the put commits when the leaf it is
        // linked into unlocks (no validated read sees the record before),
        // and a racing put of the same key finds that record and writes
        // through its lock.
        let entry = self
            .tree
            .get_or_insert(key, || DeltaRecord::live(key.clone(), word));
        if entry.created {
            return Upserted {
                previous: None,
                // Charged for the stored copy (a clone's capacity can be
                // smaller than the caller's key's), as `take_charge` counts.
                over_budget: budget.charge(entry_bytes(entry.record.key())),
            };
        }
        write_reviving(entry.record.value(), op)
    }

    /// [`write`](Self::write) of a key the delta already holds (live or
    /// removed: reviving takes no memory); `None`, changing nothing, for a
    /// new key. Same precondition as `write`.
    pub(crate) fn write_existing(&self, key: &K, op: Write) -> Option<Upserted> {
        self.get(key).map(|cell| write_reviving(cell, op))
    }

    /// [`write`](Self::write) of a put: inserts or updates `key`.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn upsert(&self, key: &K, word: u64, budget: &DeltaBudget) -> Upserted {
        self.write(key, Write::Put(word), budget)
    }

    /// Takes back everything charged for this (frozen and merged) delta,
    /// once: later calls return 0. Its writers have all charged by then:
    /// the merge runs after the epoch barrier that follows the freeze, and
    /// a writer charges before it unpins.
    pub(crate) fn take_charge(&self) -> usize {
        debug_assert!(self.is_frozen(), "only a merged delta is refunded");
        if self.refunded.swap(true, Ordering::Relaxed) {
            return 0;
        }
        self.tree.sum_of(|record| entry_bytes(record.key()))
    }

    /// The first record whose key is inside `bound`, with its place for
    /// [`next`](Self::next).
    #[inline]
    pub(crate) fn seek(&self, bound: Bound<&K>) -> Option<Cursor<'_, K>> {
        self.non_empty_tree()?.seek(bound)
    }

    /// The tree, unless it is empty: a scan of an empty delta (a group's
    /// right after its compaction) is answered from the root pointer
    /// here, without a call. Not from `len`, for the reason given at
    /// `get`.
    #[inline(always)]
    fn non_empty_tree(&self) -> Option<&DeltaTree<K>> {
        (!self.tree.is_empty()).then_some(&self.tree)
    }

    /// The record after the cursor's in key order.
    #[inline]
    pub(crate) fn next<'a>(&'a self, cursor: Cursor<'a, K>) -> Option<Cursor<'a, K>> {
        self.tree.next(cursor)
    }

    /// The last record whose key is inside `bound` (an upper bound), with
    /// its place for [`prev`](Self::prev).
    #[inline]
    pub(crate) fn seek_last(&self, bound: Bound<&K>) -> Option<Cursor<'_, K>> {
        self.non_empty_tree()?.seek_last(bound)
    }

    /// The record before the cursor's in key order.
    #[inline]
    pub(crate) fn prev<'a>(&'a self, cursor: Cursor<'a, K>) -> Option<Cursor<'a, K>> {
        self.tree.prev(cursor)
    }

    /// Every record in key order, read as
    /// [`for_each_record`](Self::for_each_record) reads them.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn records(&self) -> Vec<&DeltaRecord<K>> {
        self.tree.records()
    }

    /// Calls `visit` with every record in key order. While inserts go on,
    /// each tree leaf is read at one instant (see
    /// [`DeltaTree::for_each_record`]); once the delta is frozen and the
    /// barrier passed, this is every record. A merge of a large delta
    /// streams its records instead of first collecting a pointer to each.
    pub(crate) fn for_each_record<'a>(&'a self, visit: impl FnMut(&'a DeltaRecord<K>)) {
        self.tree.for_each_record(visit);
    }

    /// The records above `key`, in key order, read as
    /// [`for_each_record`](Self::for_each_record) reads them.
    pub(crate) fn records_above(&self, key: &K) -> Vec<&DeltaRecord<K>> {
        self.tree.records_above(key)
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_the_deltas_first_field() {
        // So its root pointer is the word `Group::prefetch_delta` requests.
        assert_eq!(std::mem::offset_of!(Delta<u64>, tree), 0);
    }

    #[test]
    fn a_put_finding_a_record_its_creator_has_not_returned_from_is_visible() {
        // Found by the linearizability test (when new keys entered as
        // removed placeholders, and a delta kept a count bumped after
        // linking): a put created the key's record and was descheduled
        // before counting it; a second put found the record, wrote it and
        // returned; a get then trusted the count of 0 and missed the
        // committed value. The count is now the tree's own.
        let d = Delta::<u64>::new();
        let budget = DeltaBudget::new(usize::MAX);
        let linked = d.tree.get_or_insert(&5, || DeltaRecord::live(5, 40));
        assert!(
            linked.created,
            "the first put's record; that put has not returned"
        );
        assert_eq!(d.len(), 1);
        assert_eq!(d.get(&5).and_then(RecordCell::read), Some(40), "first put");
        assert_eq!(
            d.upsert(&5, 50, &budget).previous,
            Some(40),
            "second put commits over the first"
        );
        assert_eq!(d.get(&5).and_then(RecordCell::read), Some(50));
        assert_eq!(d.seek(Bound::Unbounded).map(|c| *c.record().key()), Some(5));
    }

    #[test]
    fn the_wait_starts_when_maintenance_first_sees_an_entry() {
        let d = Delta::<u64>::new();
        assert_eq!(d.waited(100), Duration::ZERO, "empty: no wait starts");
        d.upsert(&1, 1, &DeltaBudget::new(usize::MAX));
        assert_eq!(d.waited(1_000), Duration::ZERO, "first seen now");
        assert_eq!(d.waited(1_500), Duration::from_nanos(500));
        assert_eq!(d.waited(u64::MAX), Duration::from_nanos(u64::MAX - 1_001));
    }

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
        let first = d.seek(Bound::Excluded(&1)).unwrap();
        assert_eq!(*first.record().key(), 5);
        assert!(d.next(first).is_none());
        let second = d.next(d.seek(Bound::Unbounded).unwrap()).unwrap();
        assert_eq!(*second.record().key(), 5);
        assert_eq!(*d.prev(second).unwrap().record().key(), 1);
        assert!(!d.is_frozen());
        d.freeze();
        assert!(d.is_frozen());
        let empty = Delta::<u64>::new();
        assert_eq!(empty.len(), 0);
        assert!(empty.get(&5).is_none());
        assert!(empty.seek(Bound::Unbounded).is_none());
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
        let early_record = d.seek(Bound::Unbounded).unwrap().record();
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

    #[test]
    fn the_refund_of_byte_string_keys_is_what_their_stored_copies_were_charged() {
        // Keys of several lengths across many leaves; a caller's key with
        // spare capacity is stored as a clone without it.
        let d = Delta::<Vec<u8>>::new();
        let budget = DeltaBudget::new(usize::MAX);
        for i in 0..300usize {
            let mut key = Vec::with_capacity(64);
            key.extend(std::iter::repeat_n(b'k', i % 40));
            key.extend_from_slice(&(i as u32).to_be_bytes());
            d.upsert(&key, i as u64, &budget);
            d.upsert(&key, 0, &budget);
        }
        let charged = budget.used();
        assert!(charged > 300 * entry_bytes(&Vec::<u8>::new()));
        d.freeze();
        assert_eq!(d.take_charge(), charged);
        budget.refund(charged);
        assert_eq!(budget.used(), 0);
    }
}
