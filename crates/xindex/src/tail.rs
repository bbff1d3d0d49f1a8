//! The sequential-insert fast path (paper §3.5.2): spare capacity after a
//! group's sorted array into which keys above every array key are appended
//! in place, instead of going through the delta index.
//!
//! Enabled by the user's hint (`Config::sequential_capacity > 0`). Slots
//! are written once: the key goes into a `OnceLock`, the record cell is
//! revived, and only then is the length published (Release), so a reader
//! that sees the length (Acquire) sees complete records — no `unsafe`.
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

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use lidx_core::search::partition_by;
use parking_lot::Mutex;

use crate::record::{Outcome, RecordCell, Write};

/// Append area of one record array.
pub(crate) struct Tail<K> {
    keys: Box<[OnceLock<K>]>,
    cells: Box<[RecordCell]>,
    len: AtomicUsize,
    /// Serialises appends with every insert of a key above the array.
    pub(crate) lock: Mutex<()>,
    open: AtomicBool,
}

impl<K: Ord + Clone> Tail<K> {
    /// An empty tail of `capacity` slots, accepting appends if `open`.
    pub(crate) fn new(capacity: usize, open: bool) -> Self {
        Tail {
            keys: (0..capacity).map(|_| OnceLock::new()).collect(),
            cells: (0..capacity).map(|_| RecordCell::removed()).collect(),
            len: AtomicUsize::new(0),
            lock: Mutex::new(()),
            open: AtomicBool::new(open),
        }
    }

    /// Published records.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
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

    /// The published record holding `key`.
    #[inline]
    pub(crate) fn find(&self, key: &K) -> Option<&RecordCell> {
        let len = self.len();
        let i = self.partition(len, |k| k < key);
        (self.key(i) == Some(key) && i < len).then(|| &self.cells[i])
    }

    /// Appends `key` with `word` if the tail is open, has room and `key`
    /// is above its last record. The caller holds [`Tail::lock`], has
    /// checked that `key` is above the array and not in the delta, and saw
    /// the delta unfrozen within its current epoch pin.
    pub(crate) fn try_append(&self, key: &K, word: u64) -> bool {
        let len = self.len.load(Ordering::Relaxed);
        if !self.open.load(Ordering::Acquire)
            || len == self.keys.len()
            || len > 0 && self.key(len - 1).is_none_or(|last| last >= key)
        {
            return false;
        }
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
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn appends_in_order_only_while_open_and_not_full() {
        let tail = Tail::<u64>::new(3, false);
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
        assert_eq!(tail.partition(3, |k| *k < 8), 2);
    }
}
