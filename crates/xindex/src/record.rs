//! The per-record version word (paper §3.1.1 and Algorithm 5).
//!
//! A record is one value word plus its slot in a meta word packing
//! `lock (bit 63) | removed (bits 56..63, one per slot) | is-pointer (bits
//! 49..56, one per slot) | version (bits 0..49)`.
//!
//! - A record of a delta index or of a tail is a [`RecordCell`]: its own
//!   meta word and value word (slot 0).
//! - The records of a group's sorted array come in [`CellBlock`]s: one
//!   cache line holding a meta word shared by [`SLOTS`] value words. The
//!   array then takes 9.1 bytes per record instead of 16: the whole index
//!   holds a quarter less memory (books, 1M keys: 16.8 MiB instead of
//!   23.3), at no measured cost to lookups or writes.
//!
//! The protocol, per meta word:
//! - Writers take the lock bit with a CAS, change a value word and their
//!   slot's flags, then release the lock with a single store that also
//!   bumps the version. Writers of records sharing a meta word serialise.
//! - Readers never lock: they read meta, value, meta again (a seqlock) and
//!   retry if the lock was held or the version moved, whichever slot the
//!   write was for.
//! - While a slot's is-pointer flag is set its value word holds the address
//!   of another record (in the group being compacted) that owns the value;
//!   reads and writes follow it, and [`Record::resolve_pointer`] (the copy
//!   phase) replaces the address with the current value under the lock.
//!   Locks nest only from a pointer record to its target, never back.
//!
//! Removal is a flag, so in-place updates and removes never block readers
//! and never move records. Whether a removed record may be revived is the
//! caller's decision (see [`Record::write`]).

use std::ptr::NonNull;

use crate::sync::{AtomicU64, AtomicUsize, Ordering, spin};
use crate::value::Value;

/// Records per [`CellBlock`]: one meta word and seven value words fill a
/// 64-byte line.
pub(crate) const SLOTS: usize = 7;

const LOCK: u64 = 1 << 63;
const REMOVED_SHIFT: u32 = 56;
const POINTER_SHIFT: u32 = 49;
const VERSION: u64 = (1 << POINTER_SHIFT) - 1;
/// Every slot's removed and is-pointer flags.
const FLAGS: u64 = !VERSION & !LOCK;
/// Marks a pointer word that names a [`CellBlock`] slot rather than a
/// [`RecordCell`] (whose address, 8-aligned, has this bit clear). The slot
/// number sits in the bits above it, below the block's line alignment.
const BLOCK_TARGET: u64 = 1;

#[inline]
const fn removed(slot: usize) -> u64 {
    1 << (REMOVED_SHIFT + slot as u32)
}

#[inline]
const fn pointer(slot: usize) -> u64 {
    1 << (POINTER_SHIFT + slot as u32)
}

/// One record with its own meta word (slot 0): delta and tail records.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct RecordCell {
    meta: AtomicU64,
    word: AtomicU64,
}

/// [`SLOTS`] records of a sorted array sharing one meta word, in one cache
/// line.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct CellBlock {
    meta: AtomicU64,
    words: [AtomicU64; SLOTS],
}

/// A record: a value word and its slot of a meta word. Cheap to copy; the
/// protocol's operations live here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record<'a> {
    meta: &'a AtomicU64,
    word: &'a AtomicU64,
    slot: usize,
    /// Whether `meta` is a [`CellBlock`]'s (for pointer encoding).
    in_block: bool,
    /// The whole `CellBlock` or `RecordCell` holding this record, with
    /// the provenance of a reference to all of it: [`address`](Self::address)
    /// exposes this one, because `meta`'s covers only the meta word and
    /// [`target_of`] rebuilds a reference to the whole container. Only
    /// pointer encoding reads it; reads and writes compile it away.
    owner: NonNull<u8>,
}

// SAFETY: a `Record` is shared references to atomics (`Sync`) plus
// `owner`, the address of the `CellBlock` or `RecordCell` holding them,
// which is only ever read through the same shared access (pointer
// encoding); the container is all atomics, so handing these to another
// thread is handing it `&CellBlock`/`&RecordCell`, which are `Send`. A
// maintenance pass builds the parts of a split on helper threads from
// records of the group being split
// (`tests::maintenance::a_split_built_on_helper_threads_matches_the_oracle`).
unsafe impl Send for Record<'_> {}
// SAFETY: as for `Send`: shared access to atomics only.
unsafe impl Sync for Record<'_> {}

/// What a writer wants to do to a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// Store this value word.
    Put(u64),
    /// Mark the record removed.
    Remove,
    /// Make the key's value `new` (a word, or `None`: removed) only if it
    /// is `current` now (`None`: the key is absent). Either way the
    /// outcome reports the value found, so the caller tells success by
    /// comparing it with `current`.
    Exchange {
        current: Option<u64>,
        new: Option<u64>,
    },
}

impl Write {
    /// The value a write gives a key it finds absent: what an insert
    /// path stores in a record it creates (`None`: the write never
    /// creates one).
    #[inline(always)]
    pub(crate) fn created(self) -> Option<u64> {
        match self {
            Write::Put(word) => Some(word),
            Write::Exchange { current: None, new } => new,
            Write::Remove | Write::Exchange { .. } => None,
        }
    }
}

/// Result of [`Record::write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The write took effect here; the record's previous value, `None` if
    /// it was removed (a revived record or a remove of an absent key).
    Applied(Option<u64>),
    /// The record is removed and may not be revived: the key's live copy,
    /// if any, is elsewhere.
    Dead,
}

impl RecordCell {
    /// A live record holding `word`.
    pub(crate) fn live(word: u64) -> Self {
        RecordCell {
            meta: AtomicU64::new(0),
            word: AtomicU64::new(word),
        }
    }

    /// A removed record.
    pub(crate) fn removed() -> Self {
        RecordCell {
            meta: AtomicU64::new(removed(0)),
            word: AtomicU64::new(0),
        }
    }

    /// This cell as a [`Record`].
    #[inline]
    pub(crate) fn record(&self) -> Record<'_> {
        Record {
            meta: &self.meta,
            word: &self.word,
            slot: 0,
            in_block: false,
            owner: NonNull::from(self).cast(),
        }
    }

    /// [`Record::read`].
    #[inline]
    pub(crate) fn read(&self) -> Option<u64> {
        self.record().read()
    }

    /// [`Record::write`].
    pub(crate) fn write(&self, op: Write, revive: bool) -> Outcome {
        self.record().write(op, revive)
    }

    /// [`Record::is_pointer`].
    #[cfg(test)]
    pub(crate) fn is_pointer(&self) -> bool {
        self.record().is_pointer()
    }
}

impl CellBlock {
    /// Blocks holding the live records `words`, in order; slots past the
    /// last word are removed and never used.
    pub(crate) fn live(words: &[u64]) -> Vec<CellBlock> {
        words
            .chunks(SLOTS)
            .map(|chunk| Self::filled(|slot| chunk.get(slot).map(|&w| (w, 0))))
            .collect()
    }

    /// Blocks of records whose values live in `targets` (in order) until
    /// each is resolved with [`Record::resolve_pointer`].
    ///
    /// # Safety
    ///
    /// Every target must stay allocated at its address for as long as any
    /// thread may access the new records while their is-pointer flags are
    /// set: until `resolve_pointer` has run on each and every thread that
    /// could have observed a flag before that has finished its operation.
    pub(crate) unsafe fn pointing_to(targets: &[Record<'_>]) -> Vec<CellBlock> {
        targets
            .chunks(SLOTS)
            .map(|chunk| Self::filled(|slot| chunk.get(slot).map(|t| (t.address(), pointer(slot)))))
            .collect()
    }

    /// A block whose slot `s` holds `slot(s)`'s word and flags, or is a
    /// removed placeholder when that is `None`.
    fn filled(mut slot: impl FnMut(usize) -> Option<(u64, u64)>) -> CellBlock {
        let mut meta = 0;
        let words = std::array::from_fn(|s| {
            let (word, flags) = slot(s).unwrap_or((0, removed(s)));
            meta |= flags;
            AtomicU64::new(word)
        });
        CellBlock {
            meta: AtomicU64::new(meta),
            words,
        }
    }

    /// Record `slot` (below [`SLOTS`]).
    #[inline]
    pub(crate) fn record(&self, slot: usize) -> Record<'_> {
        Record {
            meta: &self.meta,
            word: &self.words[slot],
            slot,
            in_block: true,
            owner: NonNull::from(self).cast(),
        }
    }
}

impl CellBlock {
    /// Appends `(keys[j], value)` to `out` for each live record of slots
    /// `first..first + keys.len()`, in one seqlock round for the block
    /// (scans read runs of records this way, not one round per record).
    /// The values are read between two loads of the meta word; if a writer
    /// changed the block in between, the round's appends are taken back
    /// and it runs again. Removed and unused slots append nothing; pointer
    /// records are read through [`Record::read`].
    ///
    /// Inline, the round where every wanted slot is live (every round in a
    /// compacted array) is a bounds computation and a copy; the general
    /// round is out of line.
    #[inline(always)]
    pub(crate) fn append_live<K: Clone, V: Value>(
        &self,
        first: usize,
        keys: &[K],
        out: &mut Vec<(K, V)>,
    ) {
        let end = first.saturating_add(keys.len()).min(SLOTS);
        let first = first.min(end);
        let wanted = slot_mask(first, end);
        let before = self.meta.load(Ordering::Acquire);
        if before & LOCK == 0
            && live_slots(before) & wanted == wanted
            && self.copy_live(keys, &self.words[first..end], before, out)
        {
            return;
        }
        self.append_live_by_slot(first, keys, out);
    }

    /// [`append_live`](Self::append_live)'s general round: waits out a
    /// writer's lock and reads each slot by kind.
    #[inline(never)]
    fn append_live_by_slot<K: Clone, V: Value>(
        &self,
        first: usize,
        keys: &[K],
        out: &mut Vec<(K, V)>,
    ) {
        const SLOT_BITS: u64 = (1 << SLOTS) - 1;
        let mark = out.len();
        let end = first.saturating_add(keys.len()).min(SLOTS);
        let wanted = slot_mask(first.min(end), end);
        loop {
            let before = self.meta.load(Ordering::Acquire);
            if before & LOCK != 0 {
                spin();
                continue;
            }
            let pointers = before >> POINTER_SHIFT & SLOT_BITS;
            let live = live_slots(before);
            if live & wanted == wanted {
                if self.copy_live(keys, &self.words[first.min(end)..end], before, out) {
                    return;
                }
                continue;
            }
            for (slot, key) in (first..SLOTS).zip(keys) {
                // Acquire loads keep the second meta load after all of
                // them, as in `Record::read`.
                let value = if live >> slot & 1 != 0 {
                    Some(self.words[slot].load(Ordering::Acquire))
                } else if pointers >> slot & 1 != 0 {
                    self.record(slot).read()
                } else {
                    None
                };
                if let Some(word) = value {
                    out.push((key.clone(), V::from_word(word)));
                }
            }
            if self.meta.load(Ordering::Acquire) == before {
                return;
            }
            out.truncate(mark);
        }
    }

    /// [`append_live`](Self::append_live) of the whole block, whose
    /// records' keys are `keys`: with every slot live (a compacted
    /// array's), a copy of fixed length with no test per slot.
    #[inline]
    pub(crate) fn append_block<K: Clone, V: Value>(
        &self,
        keys: &[K; SLOTS],
        out: &mut Vec<(K, V)>,
    ) {
        const ALL_LIVE: u64 = (1 << SLOTS) - 1;
        let before = self.meta.load(Ordering::Acquire);
        // Locked, or holding pointers, or removed records, or a writer
        // during the copy: the general path (which waits for the lock and
        // reads each slot by kind).
        if before & LOCK == 0
            && live_slots(before) == ALL_LIVE
            && self.copy_live(keys, &self.words, before, out)
        {
            return;
        }
        self.append_live_by_slot(0, keys, out);
    }

    /// Appends `keys` paired with the values in `words`, slots that the
    /// meta word `before` showed live, with no test per slot (`extend`
    /// writes them without a capacity check per record; inlined into
    /// [`append_block`](Self::append_block), the lengths are constant and
    /// the copy unrolls). Whether the meta word still is `before`: if
    /// not, the appends are taken back.
    #[inline(always)]
    fn copy_live<K: Clone, V: Value>(
        &self,
        keys: &[K],
        words: &[AtomicU64],
        before: u64,
        out: &mut Vec<(K, V)>,
    ) -> bool {
        let mark = out.len();
        out.extend(
            keys.iter()
                .zip(words)
                .map(|(key, word)| (key.clone(), V::from_word(word.load(Ordering::Acquire)))),
        );
        // Acquire loads keep the second meta load after all of them.
        if self.meta.load(Ordering::Acquire) == before {
            return true;
        }
        out.truncate(mark);
        false
    }
}

/// The slots holding their value in place (neither removed, nor unused,
/// nor pointers) of a block whose meta word is `meta`.
#[inline(always)]
fn live_slots(meta: u64) -> u64 {
    const SLOT_BITS: u64 = (1 << SLOTS) - 1;
    SLOT_BITS & !(meta >> POINTER_SHIFT) & !(meta >> REMOVED_SHIFT)
}

/// The slots of `block` removed (and not pointers), in one load of its
/// meta word: an instant at which none of them was present. `None` if the
/// block is locked (the caller reads its records as usual).
#[inline]
fn removed_slots(block: &CellBlock) -> Option<u64> {
    let meta = block.meta.load(Ordering::Acquire);
    (meta & LOCK == 0).then_some((meta >> REMOVED_SHIFT) & !(meta >> POINTER_SHIFT))
}

/// Whether record `at` of an array stored as `blocks` reads as removed in
/// one load of its block's meta word, as [`skip_removed`] reads it (a
/// locked block reads as not removed: the caller reads the record; so
/// does a slot past the array's blocks, where a skip would stop too).
#[inline(always)]
fn removed_at(blocks: &[CellBlock], at: usize) -> bool {
    blocks
        .get(at / SLOTS)
        .and_then(removed_slots)
        .is_some_and(|removed| removed >> (at % SLOTS) & 1 != 0)
}

/// Bits `first..end`.
#[inline]
fn slot_mask(first: usize, end: usize) -> u64 {
    (1u64 << end) - (1u64 << first)
}

/// The first index from `at` (below `len`) of a record not seen removed:
/// scans skip runs of removed records a block (seven records, one load)
/// at a time instead of one seqlock round per record. Each skipped record
/// was removed at the instant its block was loaded.
#[inline]
pub(crate) fn skip_removed(blocks: &[CellBlock], mut at: usize, len: usize) -> usize {
    while at < len {
        let (block, first) = (at / SLOTS, at % SLOTS);
        let base = at - first;
        let end = (len - base).min(SLOTS);
        let Some(removed) = removed_slots(&blocks[block]) else {
            break;
        };
        let present = !removed & slot_mask(first, end);
        if present != 0 {
            return base + present.trailing_zeros() as usize;
        }
        at = base + end;
    }
    at
}

/// [`skip_removed`] backwards: the end (exclusive) of the records before
/// `end`, down to `start`, once the removed ones just below it are
/// skipped.
#[inline]
pub(crate) fn skip_removed_back(blocks: &[CellBlock], start: usize, mut end: usize) -> usize {
    while end > start {
        let last = end - 1;
        let (block, last_slot) = (last / SLOTS, last % SLOTS);
        let base = last - last_slot;
        let first_slot = start.max(base) - base;
        let Some(removed) = removed_slots(&blocks[block]) else {
            break;
        };
        let present = !removed & slot_mask(first_slot, last_slot + 1);
        if present != 0 {
            return base + (u64::BITS - present.leading_zeros()) as usize;
        }
        end = base + first_slot;
    }
    end
}

/// The removed prefix and suffix of one array that scans have read:
/// records `0..prefix_end` and `suffix_start..` are removed. Scans raise
/// (lower) a bound past the removed run they skip, so that the next scan
/// from the array's start (end) jumps the run instead of skipping it
/// again. Not in the paper: a queue drained from the front skipped every
/// record it had popped since the last compaction.
///
/// Sound without any write-path cost because a removed array record stays
/// removed for the life of the array: a put never revives one (it goes to
/// the delta, so the compaction that dropped the record cannot lose it),
/// [`skip_removed`] never skips a pointer record (its target decides), and
/// a target is not revived once a pointer points at it. A bound moves only
/// past records read from it (a skip that starts exactly at the bound), so
/// every record behind it was seen removed (model:
/// `loom_removed_bounds_pass_only_records_seen_removed`).
#[derive(Debug)]
pub(crate) struct RemovedBounds {
    prefix_end: AtomicUsize,
    suffix_start: AtomicUsize,
}

impl RemovedBounds {
    /// No known removed records in an array of `len`.
    pub(crate) fn new(len: usize) -> Self {
        RemovedBounds {
            prefix_end: AtomicUsize::new(0),
            suffix_start: AtomicUsize::new(len),
        }
    }

    /// [`skip_removed`] from `at` (below `len`), starting from the end of
    /// the known prefix if `at` lies inside it, and extending the prefix
    /// when the skip starts at its end.
    #[inline(always)]
    pub(crate) fn skip_from(&self, blocks: &[CellBlock], at: usize, len: usize) -> usize {
        // Most scans start at a live record: they decide on its block's
        // meta word, in the line they read next, and leave the bounds'
        // line (in the array's shared `Records`, apart from the group
        // node) alone, without a call.
        if !removed_at(blocks, at) {
            return at;
        }
        self.skip_known_from(blocks, at, len)
    }

    /// [`skip_from`](Self::skip_from) once the record at `at` was seen
    /// removed.
    #[inline(never)]
    fn skip_known_from(&self, blocks: &[CellBlock], at: usize, len: usize) -> usize {
        // Acquire: the records below it were seen removed by the scan that
        // raised it, before this load; removed, they stay removed.
        let known = self.prefix_end.load(Ordering::Acquire);
        let start = at.max(known);
        let end = skip_removed(blocks, start, len);
        if start == known && end > known {
            self.prefix_end.fetch_max(end, Ordering::AcqRel);
        }
        end
    }

    /// [`skip_removed_back`] from `end` down to 0, mirrored.
    #[inline(always)]
    pub(crate) fn skip_before(&self, blocks: &[CellBlock], end: usize) -> usize {
        if end == 0 || !removed_at(blocks, end - 1) {
            return end;
        }
        self.skip_known_before(blocks, end)
    }

    /// [`skip_before`](Self::skip_before) once the record before `end` was
    /// seen removed.
    #[inline(never)]
    fn skip_known_before(&self, blocks: &[CellBlock], end: usize) -> usize {
        let known = self.suffix_start.load(Ordering::Acquire);
        let start = end.min(known);
        let at = skip_removed_back(blocks, 0, start);
        if start == known && at < known {
            self.suffix_start.fetch_min(at, Ordering::AcqRel);
        }
        at
    }

    /// The bounds: `(prefix_end, suffix_start)`.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn known(&self) -> (usize, usize) {
        (
            self.prefix_end.load(Ordering::Relaxed),
            self.suffix_start.load(Ordering::Relaxed),
        )
    }
}

/// Record `i` of an array stored as `blocks`.
#[inline]
pub(crate) fn record_at(blocks: &[CellBlock], i: usize) -> Record<'_> {
    blocks[i / SLOTS].record(i % SLOTS)
}

/// The blocks holding records `start..end` of an array stored as `blocks`
/// (empty when the range is).
#[inline]
pub(crate) fn blocks_of(blocks: &[CellBlock], start: usize, end: usize) -> &[CellBlock] {
    if start >= end {
        return &[];
    }
    let first = (start / SLOTS).min(blocks.len());
    let last = (end - 1) / SLOTS;
    &blocks[first..(last + 1).clamp(first, blocks.len())]
}

impl<'a> Record<'a> {
    /// The word a pointer record stores to name this record: the address
    /// of its `RecordCell`, or of its `CellBlock` plus [`BLOCK_TARGET`] and
    /// the slot. The container's provenance (not the meta word's) is
    /// exposed so that [`target_of`] can rebuild a valid reference to the
    /// whole container from the integer.
    fn address(&self) -> u64 {
        let base = self.owner.as_ptr().expose_provenance() as u64;
        if self.in_block {
            base | ((self.slot as u64) << 1) | BLOCK_TARGET
        } else {
            base
        }
    }

    /// True while the value lives in another record.
    #[cfg(test)]
    pub(crate) fn is_pointer(&self) -> bool {
        self.meta.load(Ordering::Acquire) & pointer(self.slot) != 0
    }

    /// A consistent snapshot of the value: `None` if the record is removed.
    /// Never blocks a writer; retries while one is active. Forced inline:
    /// lookups compiled for x86-64-v3 otherwise called it.
    #[inline(always)]
    pub(crate) fn read(&self) -> Option<u64> {
        loop {
            let before = self.meta.load(Ordering::Acquire);
            if before & LOCK != 0 {
                spin();
                continue;
            }
            // Acquire on the value load keeps the second meta load after it;
            // a writer's lock CAS happens before its value store, so seeing a
            // new value means seeing the lock (or a later version) below.
            let word = self.word.load(Ordering::Acquire);
            if self.meta.load(Ordering::Acquire) != before {
                continue;
            }
            if before & removed(self.slot) != 0 {
                return None;
            }
            if before & pointer(self.slot) == 0 {
                return Some(word);
            }
            if let Some(value) = self.read_through(before, word) {
                return value;
            }
        }
    }

    /// The pointer case of [`read`](Self::read), out of line: only records
    /// in a copy phase take it. `None` means "retry".
    #[cold]
    #[inline(never)]
    fn read_through(&self, before: u64, word: u64) -> Option<Option<u64>> {
        // SAFETY: the meta word was unchanged around the value load, so
        // `word` is the address stored by `pointing_to` and the pointer
        // was not yet resolved; its target outlives this read by the
        // contract of `pointing_to`.
        let value = unsafe { target_of(word) }.read();
        // Unchanged meta means the target still owned the value while
        // it was read (resolution takes the lock and bumps the version).
        (self.meta.load(Ordering::Acquire) == before).then_some(value)
    }

    /// Applies `op` under the record lock.
    ///
    /// A removed record is revived by `Put`, or by an `Exchange` from
    /// absent to a value (and a `Remove`, or any other exchange, finds it
    /// absent), only when `revive` is true; otherwise the result is
    /// [`Outcome::Dead`]. Writes to a pointer record go to its target with
    /// `revive = false`: the merge phase only points at live records, and a
    /// target removed afterwards must stay removed.
    pub(crate) fn write(&self, op: Write, revive: bool) -> Outcome {
        let before = self.lock();
        let (removed, pointer) = (removed(self.slot), pointer(self.slot));
        let mut flags = before & FLAGS;
        let outcome = if before & pointer != 0 {
            // SAFETY: we hold the lock, so the pointer cannot be resolved
            // under us and the target is alive by `pointing_to`'s contract.
            unsafe { target_of(self.word.load(Ordering::Relaxed)) }.write(op, false)
        } else if before & removed != 0 {
            if !revive {
                Outcome::Dead
            } else {
                // The key is absent: a put, or an exchange from absent to a
                // value, revives the record.
                if let Some(word) = op.created() {
                    self.word.store(word, Ordering::Release);
                    flags &= !removed;
                }
                Outcome::Applied(None)
            }
        } else {
            let previous = self.word.load(Ordering::Relaxed);
            let new = match op {
                Write::Put(word) => Some(Some(word)),
                Write::Remove => Some(None),
                Write::Exchange { current, new } => (current == Some(previous)).then_some(new),
            };
            match new {
                Some(Some(word)) => self.word.store(word, Ordering::Release),
                Some(None) => flags |= removed,
                // A failed exchange: the record stays as it is.
                None => {}
            }
            Outcome::Applied(Some(previous))
        };
        self.unlock(before, flags);
        outcome
    }

    /// The copy phase's `replace_pointer`: copies the target's current value
    /// (or removal) into this record and clears its is-pointer flag. A
    /// record that is not a pointer is left as it is. Returns whether the
    /// record was a pointer whose target had been removed since the merge
    /// (it is removed now).
    pub(crate) fn resolve_pointer(&self) -> bool {
        let before = self.lock();
        let (removed, pointer) = (removed(self.slot), pointer(self.slot));
        let mut flags = before & FLAGS;
        let mut found_removed = false;
        if before & pointer != 0 {
            // SAFETY: the lock keeps the pointer in place; the target is
            // alive by `pointing_to`'s contract.
            match unsafe { target_of(self.word.load(Ordering::Relaxed)) }.read() {
                Some(word) => {
                    self.word.store(word, Ordering::Release);
                    flags &= !(pointer | removed);
                }
                None => {
                    flags = (flags & !pointer) | removed;
                    found_removed = true;
                }
            }
        }
        self.unlock(before, flags);
        found_removed
    }

    /// Spins until the lock bit is ours; returns the meta word before locking.
    fn lock(&self) -> u64 {
        loop {
            let current = self.meta.load(Ordering::Relaxed);
            if current & LOCK == 0
                && self
                    .meta
                    .compare_exchange_weak(
                        current,
                        current | LOCK,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            {
                return current;
            }
            spin();
        }
    }

    /// Releases the lock taken when meta was `before`, publishing `flags`
    /// (every slot's) and the next version in one store.
    fn unlock(&self, before: u64, flags: u64) {
        let version = (before & VERSION).wrapping_add(1) & VERSION;
        self.meta.store(version | flags, Ordering::Release);
    }
}

/// The record whose address [`Record::address`] stored in a value word.
///
/// # Safety
///
/// `word` must come from [`CellBlock::pointing_to`] (or, in tests,
/// `RecordCell::pointing_to`) and its target must still be allocated for
/// the returned lifetime.
unsafe fn target_of<'a>(word: u64) -> Record<'a> {
    if word & BLOCK_TARGET != 0 {
        let slot = ((word & (SLOTS_ALIGN - 1)) >> 1) as usize;
        let address = (word & !(SLOTS_ALIGN - 1)) as usize;
        // SAFETY: per the contract, the address was exposed by `address`
        // from a reference to a whole live `CellBlock` (line-aligned, so
        // the slot number in the low bits is not part of it) that is still
        // allocated.
        unsafe { &*std::ptr::with_exposed_provenance::<CellBlock>(address) }.record(slot)
    } else {
        // SAFETY: as above, from a live `RecordCell`.
        unsafe { &*std::ptr::with_exposed_provenance::<RecordCell>(word as usize) }.record()
    }
}

/// Alignment of a [`CellBlock`]: the low bits of its address carry
/// [`BLOCK_TARGET`] and a slot number in a pointer word.
const SLOTS_ALIGN: u64 = 64;
const _: () = assert!(std::mem::align_of::<CellBlock>() as u64 == SLOTS_ALIGN);
// A container's address is its meta word's: pointer words name the
// container, and reads of a rebuilt record start at its meta word.
const _: () = assert!(std::mem::offset_of!(CellBlock, meta) == 0);
const _: () = assert!(std::mem::offset_of!(RecordCell, meta) == 0);
const _: () = assert!((SLOTS as u64) << 1 < SLOTS_ALIGN);

impl RecordCell {
    /// A record whose value lives in `target` until
    /// [`resolve_pointer`](Record::resolve_pointer).
    ///
    /// # Safety
    ///
    /// As [`CellBlock::pointing_to`].
    #[cfg(test)]
    pub(crate) unsafe fn pointing_to(target: Record<'_>) -> Self {
        RecordCell {
            meta: AtomicU64::new(pointer(0)),
            word: AtomicU64::new(target.address()),
        }
    }

    /// [`Record::resolve_pointer`].
    #[cfg(test)]
    pub(crate) fn resolve_pointer(&self) -> bool {
        self.record().resolve_pointer()
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn put_remove_revive_rules() {
        let cell = RecordCell::live(5);
        assert_eq!(cell.read(), Some(5));
        assert_eq!(cell.write(Write::Put(6), false), Outcome::Applied(Some(5)));
        assert_eq!(cell.write(Write::Remove, false), Outcome::Applied(Some(6)));
        assert_eq!(cell.read(), None);
        assert_eq!(cell.write(Write::Put(7), false), Outcome::Dead);
        assert_eq!(cell.write(Write::Remove, false), Outcome::Dead);
        assert_eq!(cell.write(Write::Remove, true), Outcome::Applied(None));
        assert_eq!(cell.write(Write::Put(8), true), Outcome::Applied(None));
        assert_eq!(cell.read(), Some(8));
    }

    #[test]
    fn exchange_writes_only_when_the_current_value_matches() {
        let ex = |current, new| Write::Exchange { current, new };
        let cell = RecordCell::live(5);
        // A mismatch reports the value found and leaves it.
        assert_eq!(
            cell.write(ex(Some(4), Some(9)), false),
            Outcome::Applied(Some(5))
        );
        assert_eq!(
            cell.write(ex(None, Some(9)), true),
            Outcome::Applied(Some(5))
        );
        assert_eq!(cell.read(), Some(5));
        assert_eq!(
            cell.write(ex(Some(5), Some(6)), false),
            Outcome::Applied(Some(5))
        );
        assert_eq!(cell.read(), Some(6));
        // To `None`: removed.
        assert_eq!(
            cell.write(ex(Some(6), None), false),
            Outcome::Applied(Some(6))
        );
        assert_eq!(cell.read(), None);
        // A removed record is dead unless reviving is allowed ...
        assert_eq!(cell.write(ex(None, Some(7)), false), Outcome::Dead);
        assert_eq!(cell.write(ex(Some(6), Some(7)), false), Outcome::Dead);
        // ... and then it is the absent key: only an exchange from `None`
        // to a value writes.
        assert_eq!(
            cell.write(ex(Some(6), Some(7)), true),
            Outcome::Applied(None)
        );
        assert_eq!(cell.write(ex(None, None), true), Outcome::Applied(None));
        assert_eq!(cell.read(), None);
        assert_eq!(cell.write(ex(None, Some(7)), true), Outcome::Applied(None));
        assert_eq!(cell.read(), Some(7));
        assert_eq!(Write::Put(3).created(), Some(3));
        assert_eq!(ex(None, Some(3)).created(), Some(3));
        assert_eq!(ex(Some(1), Some(3)).created(), None);
        assert_eq!(Write::Remove.created(), None);
    }

    #[test]
    fn exchange_through_a_pointer_reaches_the_target() {
        let old = RecordCell::live(1);
        // SAFETY: `old` outlives `new` in this scope.
        let new = unsafe { RecordCell::pointing_to(old.record()) };
        let ex = |current, new| Write::Exchange { current, new };
        assert_eq!(
            new.write(ex(Some(2), Some(3)), false),
            Outcome::Applied(Some(1))
        );
        assert_eq!(
            new.write(ex(Some(1), Some(3)), false),
            Outcome::Applied(Some(1))
        );
        assert_eq!(old.read(), Some(3));
        assert_eq!(
            new.write(ex(Some(3), None), false),
            Outcome::Applied(Some(3))
        );
        // The removed target is not revived through the pointer.
        assert_eq!(new.write(ex(None, Some(4)), true), Outcome::Dead);
        assert_eq!(new.read(), None);
    }

    #[test]
    fn pointer_reads_writes_and_resolution() {
        let old = RecordCell::live(1);
        // SAFETY: `old` outlives `new` in this scope.
        let new = unsafe { RecordCell::pointing_to(old.record()) };
        assert!(new.is_pointer());
        assert_eq!(new.read(), Some(1));
        assert_eq!(new.write(Write::Put(2), true), Outcome::Applied(Some(1)));
        assert_eq!(old.read(), Some(2));
        assert_eq!(old.write(Write::Put(3), false), Outcome::Applied(Some(2)));
        assert_eq!(new.read(), Some(3));
        new.resolve_pointer();
        assert!(!new.is_pointer());
        assert_eq!(new.read(), Some(3));
        // After resolution the cells are independent.
        assert_eq!(new.write(Write::Put(4), false), Outcome::Applied(Some(3)));
        assert_eq!(old.read(), Some(3));
    }

    #[test]
    fn removed_target_resolves_to_removed_and_stays_dead() {
        let old = RecordCell::removed();
        // SAFETY: `old` outlives `new`.
        let new = unsafe { RecordCell::pointing_to(old.record()) };
        assert_eq!(new.read(), None);
        // Revival through a pointer is refused even when asked for.
        assert_eq!(new.write(Write::Put(9), true), Outcome::Dead);
        new.resolve_pointer();
        assert_eq!(new.read(), None);
        assert!(!new.is_pointer());
    }

    #[test]
    fn blocks_pack_seven_records_and_keep_their_flags_apart() {
        assert_eq!(std::mem::size_of::<CellBlock>(), 64);
        let blocks = CellBlock::live(&(0..9).collect::<Vec<_>>());
        assert_eq!(blocks.len(), 2);
        for i in 0..9 {
            assert_eq!(record_at(&blocks, i).read(), Some(i as u64));
        }
        // Slots past the last record are removed placeholders.
        for slot in 2..SLOTS {
            assert_eq!(blocks[1].record(slot).read(), None);
        }
        let (a, b) = (record_at(&blocks, 3), record_at(&blocks, 4));
        assert_eq!(a.write(Write::Remove, false), Outcome::Applied(Some(3)));
        assert_eq!(a.read(), None);
        assert_eq!(b.read(), Some(4), "a neighbour's removal is not ours");
        assert_eq!(b.write(Write::Put(40), false), Outcome::Applied(Some(4)));
        assert_eq!(a.write(Write::Put(30), false), Outcome::Dead);
        assert_eq!(a.write(Write::Put(31), true), Outcome::Applied(None));
        assert_eq!((a.read(), b.read()), (Some(31), Some(40)));
        assert!(CellBlock::live(&[]).is_empty());
    }

    #[test]
    fn blocks_of_covers_exactly_the_blocks_of_a_range() {
        let blocks = CellBlock::live(&(0..20).collect::<Vec<_>>()); // 3 blocks
        let span = |a, b| {
            let s = blocks_of(&blocks, a, b);
            if s.is_empty() {
                None
            } else {
                let first = (s.as_ptr() as usize - blocks.as_ptr() as usize) / 64;
                Some((first, s.len()))
            }
        };
        assert_eq!(span(0, 0), None);
        assert_eq!(span(5, 5), None);
        assert_eq!(span(0, 1), Some((0, 1)));
        assert_eq!(span(6, 8), Some((0, 2)));
        assert_eq!(span(7, 14), Some((1, 1)));
        assert_eq!(span(0, 20), Some((0, 3)));
        // Ranges past the end are clipped, never out of bounds.
        assert_eq!(span(19, 100), Some((2, 1)));
        assert_eq!(span(25, 30), None);
    }

    #[test]
    fn block_pointers_to_block_slots_and_to_cells() {
        let old_blocks = CellBlock::live(&(100..110).collect::<Vec<_>>());
        let old_cell = RecordCell::live(7);
        let targets = [
            record_at(&old_blocks, 9),
            old_cell.record(),
            record_at(&old_blocks, 0),
            record_at(&old_blocks, 6),
        ];
        // SAFETY: the targets outlive `new` (dropped first, in reverse order).
        let new = unsafe { CellBlock::pointing_to(&targets) };
        assert_eq!(new.len(), 1);
        let reads: Vec<_> = (0..4).map(|i| record_at(&new, i).read()).collect();
        assert_eq!(reads, [Some(109), Some(7), Some(100), Some(106)]);
        assert!((0..4).all(|i| record_at(&new, i).is_pointer()));
        // Writes through pointers land in the targets.
        assert_eq!(
            record_at(&new, 1).write(Write::Put(70), false),
            Outcome::Applied(Some(7))
        );
        assert_eq!(old_cell.read(), Some(70));
        assert_eq!(
            record_at(&new, 2).write(Write::Remove, false),
            Outcome::Applied(Some(100))
        );
        assert_eq!(record_at(&old_blocks, 0).read(), None);
        assert_eq!(record_at(&old_blocks, 1).read(), Some(101));
        // Resolving one slot leaves its neighbours pointing.
        record_at(&new, 0).resolve_pointer();
        assert!(!record_at(&new, 0).is_pointer());
        assert!(record_at(&new, 3).is_pointer());
        assert_eq!(
            record_at(&old_blocks, 9).write(Write::Put(900), false),
            Outcome::Applied(Some(109))
        );
        assert_eq!(
            record_at(&new, 0).read(),
            Some(109),
            "resolved: independent"
        );
        for i in 1..4 {
            record_at(&new, i).resolve_pointer();
        }
        let reads: Vec<_> = (0..4).map(|i| record_at(&new, i).read()).collect();
        assert_eq!(reads, [Some(109), Some(70), None, Some(106)]);
        assert!((0..4).all(|i| !record_at(&new, i).is_pointer()));
        // The removed one stays dead; unused slots too.
        assert_eq!(
            record_at(&new, 2).write(Write::Put(1), false),
            Outcome::Dead
        );
        assert_eq!(new[0].record(5).read(), None);
    }

    #[test]
    fn block_runs_tell_live_removed_and_pointer_slots_apart() {
        let old = RecordCell::live(77);
        let blocks = CellBlock::live(&[0, 1, 2, 3, 4]);
        // SAFETY: `old` outlives `pointing` (dropped first).
        let pointing = unsafe { CellBlock::pointing_to(&[old.record()]) };
        assert_eq!(
            record_at(&blocks, 2).write(Write::Remove, false),
            Outcome::Applied(Some(2))
        );
        let keys = [10u64, 11, 12, 13, 14, 15, 16];
        let mut out: Vec<(u64, u64)> = vec![(9, 9)];
        blocks[0].append_live(0, &keys, &mut out);
        // Removed slot 2 and unused slots 5 and 6 append nothing.
        assert_eq!(out, [(9, 9), (10, 0), (11, 1), (13, 3), (14, 4)]);
        out.clear();
        blocks[0].append_live(3, &keys[3..5], &mut out);
        assert_eq!(out, [(13, 3), (14, 4)], "a run from the middle");
        out.clear();
        pointing[0].append_live(0, &keys[..1], &mut out);
        assert_eq!(out, [(10, 77)], "a pointer is read through the record");
        pointing[0].record(0).resolve_pointer();
        out.clear();
        pointing[0].append_live(0, &keys[..1], &mut out);
        assert_eq!(out, [(10, 77)]);
        // All slots asked for live: the copy without per-slot tests, for
        // a whole block, a run inside one, and more keys than slots left.
        let full = CellBlock::live(&[0, 1, 2, 3, 4, 5, 6]);
        let whole: Vec<(u64, u64)> = keys.iter().copied().zip(0..).collect();
        out.clear();
        full[0].append_live(0, &keys, &mut out);
        assert_eq!(out, whole);
        out.clear();
        full[0].append_live(1, &keys[1..4], &mut out);
        assert_eq!(out, [(11, 1), (12, 2), (13, 3)]);
        out.clear();
        full[0].append_live(5, &keys, &mut out);
        assert_eq!(out, [(10, 5), (11, 6)], "no slot past the block");
        // Whole blocks: all live (the fixed-length copy), then with a
        // removed slot, unused slots and a pointer (the general path).
        out.clear();
        full[0].append_block(&keys, &mut out);
        assert_eq!(out, whole);
        assert_eq!(
            record_at(&full, 4).write(Write::Remove, false),
            Outcome::Applied(Some(4))
        );
        out.clear();
        full[0].append_block(&keys, &mut out);
        assert_eq!(out, [(10, 0), (11, 1), (12, 2), (13, 3), (15, 5), (16, 6)]);
        out.clear();
        blocks[0].append_block(&keys, &mut out);
        assert_eq!(out, [(10, 0), (11, 1), (13, 3), (14, 4)]);
        out.clear();
        pointing[0].append_block(&keys, &mut out);
        assert_eq!(out, [(10, 77)]);
    }

    #[test]
    fn skips_pass_whole_removed_blocks_and_stop_at_anything_else() {
        // 30 records in five blocks (7, 7, 7, 7, 2).
        let blocks = CellBlock::live(&(0..30).collect::<Vec<u64>>());
        let remove = |range: std::ops::Range<usize>| {
            for i in range {
                assert!(matches!(
                    record_at(&blocks, i).write(Write::Remove, false),
                    Outcome::Applied(Some(_))
                ));
            }
        };
        assert_eq!(skip_removed(&blocks, 0, 30), 0, "nothing removed");
        assert_eq!(skip_removed_back(&blocks, 0, 30), 30);
        // Records 0..17 removed: a skip from 0 stops at 17, from 3 too.
        remove(0..17);
        assert_eq!(skip_removed(&blocks, 0, 30), 17);
        assert_eq!(skip_removed(&blocks, 3, 30), 17);
        assert_eq!(skip_removed(&blocks, 0, 10), 10, "bounded by the end");
        assert_eq!(skip_removed_back(&blocks, 0, 17), 0);
        assert_eq!(skip_removed_back(&blocks, 5, 17), 5, "bounded by the start");
        assert_eq!(skip_removed_back(&blocks, 0, 18), 18, "17 is live");
        // The last records, up to the end of a partial block.
        remove(25..30);
        assert_eq!(skip_removed(&blocks, 25, 30), 30);
        assert_eq!(skip_removed_back(&blocks, 0, 30), 25);
        assert_eq!(skip_removed_back(&blocks, 0, 27), 25);
        // A pointer slot is not skipped, even with its target removed.
        let target = RecordCell::removed();
        // SAFETY: `target` outlives `pointing` (dropped first).
        let pointing = unsafe { CellBlock::pointing_to(&[target.record(), target.record()]) };
        assert_eq!(skip_removed(&pointing, 0, 2), 0);
        assert_eq!(skip_removed_back(&pointing, 0, 2), 2);
        // A locked block is not skipped.
        let locked = blocks[0].record(0).lock();
        assert_eq!(skip_removed(&blocks, 0, 30), 0);
        blocks[0].record(0).unlock(locked, locked & FLAGS);
        assert_eq!(skip_removed(&blocks, 0, 30), 17);
    }

    #[test]
    fn writers_of_one_block_never_lose_each_others_writes() {
        let blocks = CellBlock::live(&[0; SLOTS]);
        let per_thread = 3_000u64;
        std::thread::scope(|s| {
            for slot in 0..3 {
                let block = &blocks[0];
                s.spawn(move || {
                    for i in 1..=per_thread {
                        let record = block.record(slot);
                        if i % 3 == 0 {
                            assert_eq!(
                                record.write(Write::Remove, false),
                                Outcome::Applied(Some(i - 1))
                            );
                            assert_eq!(record.write(Write::Put(i), true), Outcome::Applied(None));
                        } else {
                            assert_eq!(
                                record.write(Write::Put(i), false),
                                Outcome::Applied(Some(i - 1))
                            );
                        }
                    }
                });
            }
            s.spawn(|| {
                let mut last = [0u64; 3];
                for _ in 0..6_000 {
                    for (slot, seen) in last.iter_mut().enumerate() {
                        if let Some(v) = blocks[0].record(slot).read() {
                            assert!(v >= *seen, "slot {slot} went back");
                            *seen = v;
                        }
                    }
                }
            });
        });
        for slot in 0..3 {
            assert_eq!(blocks[0].record(slot).read(), Some(per_thread));
        }
        assert_eq!(blocks[0].record(3).read(), Some(0));
    }

    #[test]
    fn concurrent_writers_and_readers_agree() {
        let cell = RecordCell::live(0);
        let per_thread = 2_000u64;
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let cell = &cell;
                s.spawn(move || {
                    for i in 0..per_thread {
                        // Each value encodes its writer and sequence number.
                        let w = (t << 32) | (i + 1);
                        assert!(matches!(
                            cell.write(Write::Put(w), false),
                            Outcome::Applied(Some(_))
                        ));
                    }
                });
            }
            s.spawn(|| {
                let mut last = [0u64; 2];
                for _ in 0..4_000 {
                    let w = cell.read().expect("never removed");
                    if w != 0 {
                        // Per-writer sequence numbers never go backwards.
                        let (t, i) = ((w >> 32) as usize, w & 0xffff_ffff);
                        assert!(i >= last[t]);
                        last[t] = i;
                    }
                }
            });
        });
        let w = cell.read().unwrap();
        assert_eq!(w & 0xffff_ffff, per_thread);
    }
}

#[cfg(all(test, xindex_loom))]
mod loom_tests {
    use super::*;
    use crate::sync::loom_model as model;
    use loom::sync::Arc;
    use loom::thread;

    /// The removed-run bounds move only past records seen removed: records
    /// 0 and 2 of three are removed while one scan starts at 2 (forwards)
    /// and at 1 (backwards), inside no bound, and another scans the whole
    /// array from each end. Record 1, never removed, is never jumped,
    /// whatever the first scan did to the bounds.
    #[test]
    fn loom_removed_bounds_pass_only_records_seen_removed() {
        model(3, || {
            let blocks = Arc::new(CellBlock::live(&[1, 2, 3]));
            let bounds = Arc::new(RemovedBounds::new(3));
            let remover = {
                let blocks = blocks.clone();
                thread::spawn(move || {
                    for slot in [0, 2] {
                        let removed = blocks[0].record(slot).write(Write::Remove, false);
                        assert!(matches!(removed, Outcome::Applied(Some(_))));
                    }
                })
            };
            let inner = {
                let (blocks, bounds) = (blocks.clone(), bounds.clone());
                thread::spawn(move || {
                    let forwards = bounds.skip_from(&blocks, 2, 3);
                    let backwards = bounds.skip_before(&blocks, 1);
                    assert!(forwards >= 2 && backwards <= 1);
                })
            };
            let whole = {
                let (blocks, bounds) = (blocks.clone(), bounds.clone());
                thread::spawn(move || {
                    (
                        bounds.skip_from(&blocks, 0, 3),
                        bounds.skip_before(&blocks, 3),
                    )
                })
            };
            let (first, last_end) = whole.join().unwrap();
            assert!(first <= 1, "jumped the live record 1: {first}");
            assert!(
                last_end >= 2,
                "jumped the live record 1 backwards: {last_end}"
            );
            remover.join().unwrap();
            inner.join().unwrap();
            assert_eq!(bounds.skip_from(&blocks, 0, 3), 1);
            assert_eq!(bounds.skip_before(&blocks, 3), 2);
        });
    }

    /// Readers see whole writes in order; removal is observed atomically.
    #[test]
    fn loom_version_word_protocol() {
        model(3, || {
            let cell = Arc::new(RecordCell::live(1));
            let writer = {
                let cell = cell.clone();
                thread::spawn(move || {
                    assert_eq!(cell.write(Write::Put(2), false), Outcome::Applied(Some(1)));
                    assert_eq!(cell.write(Write::Remove, false), Outcome::Applied(Some(2)));
                })
            };
            // Both sides on spawned threads: with the model's main thread as
            // one side, loom 0.7 explored a single interleaving.
            let reader = {
                let cell = cell.clone();
                thread::spawn(move || (cell.read(), cell.read()))
            };
            let (first, second) = reader.join().unwrap();
            let rank = |v: Option<u64>| match v {
                Some(1) => 0,
                Some(2) => 1,
                None => 2,
                other => panic!("torn or invented value {other:?}"),
            };
            assert!(rank(first) <= rank(second));
            writer.join().unwrap();
            assert_eq!(cell.read(), None);
        });
    }

    /// Two writers serialise: exactly one sees the initial value.
    #[test]
    fn loom_writers_serialise() {
        loom::model(|| {
            let cell = Arc::new(RecordCell::live(1));
            let other = {
                let cell = cell.clone();
                thread::spawn(move || cell.write(Write::Put(20), false))
            };
            let mine = {
                let cell = cell.clone();
                thread::spawn(move || cell.write(Write::Put(10), false))
            };
            let mine = mine.join().unwrap();
            let theirs = other.join().unwrap();
            let final_value = cell.read().unwrap();
            if mine == Outcome::Applied(Some(1)) {
                assert_eq!(theirs, Outcome::Applied(Some(10)));
                assert_eq!(final_value, 20);
            } else {
                assert_eq!(mine, Outcome::Applied(Some(20)));
                assert_eq!(theirs, Outcome::Applied(Some(1)));
                assert_eq!(final_value, 10);
            }
        });
    }

    /// Two exchanges from the same value serialise on the lock: exactly
    /// one writes, the other finds the winner's value, and each thread's
    /// read after its own exchange sees the winner's value (the loser
    /// writes nothing). A third, reading thread made the model run for
    /// over 15 minutes; reads racing writes are `loom_version_word_protocol`'s.
    #[test]
    fn loom_exchanges_from_one_value_serialise() {
        loom::model(|| {
            let cell = Arc::new(RecordCell::live(1));
            let exchange = |new| {
                let cell = cell.clone();
                thread::spawn(move || {
                    let op = Write::Exchange {
                        current: Some(1),
                        new: Some(new),
                    };
                    (cell.write(op, false), cell.read())
                })
            };
            let (a, b) = (exchange(10), exchange(20));
            let ((a, seen_a), (b, seen_b)) = (a.join().unwrap(), b.join().unwrap());
            let winner = match (a, b) {
                (Outcome::Applied(Some(1)), Outcome::Applied(Some(10))) => 10,
                (Outcome::Applied(Some(20)), Outcome::Applied(Some(1))) => 20,
                other => panic!("both or neither exchanged: {other:?}"),
            };
            assert_eq!(cell.read(), Some(winner));
            assert_eq!((seen_a, seen_b), (Some(winner), Some(winner)));
        });
    }

    /// Before the copy phase: a writer through the new pointer record and
    /// a straggler writing the old record directly serialise on the old
    /// record's lock, and the pointer read sees whichever came last.
    #[test]
    fn loom_pointer_and_straggler_writes_serialise() {
        model(5, || {
            let old = Arc::new(RecordCell::live(1));
            // SAFETY: `old` outlives `new` (both dropped at the end of the
            // closure, after the thread is joined).
            let new = Arc::new(unsafe { RecordCell::pointing_to(old.record()) });
            let straggler = {
                let old = old.clone();
                thread::spawn(move || old.write(Write::Put(3), false))
            };
            let through = {
                let new = new.clone();
                thread::spawn(move || new.write(Write::Put(2), false))
            };
            let through = through.join().unwrap();
            let straggled = straggler.join().unwrap();
            let last = if straggled == Outcome::Applied(Some(2)) {
                3
            } else {
                2
            };
            if last == 2 {
                assert_eq!(
                    (straggled, through),
                    (Outcome::Applied(Some(1)), Outcome::Applied(Some(3)))
                );
            } else {
                assert_eq!(through, Outcome::Applied(Some(1)));
            }
            assert_eq!(new.read(), Some(last));
            assert_eq!(old.read(), Some(last));
        });
    }

    /// The copy phase: resolution races with a writer through the pointer
    /// and a reader. No update is lost and the reader sees only committed
    /// values.
    #[test]
    fn loom_pointer_replacement_keeps_updates() {
        model(5, || {
            let old = Arc::new(RecordCell::live(1));
            // SAFETY: `old` outlives every use of `new` (threads are joined
            // before the closure returns).
            let new = Arc::new(unsafe { RecordCell::pointing_to(old.record()) });
            let writer = {
                let new = new.clone();
                thread::spawn(move || new.write(Write::Put(2), false))
            };
            let resolver = {
                let new = new.clone();
                thread::spawn(move || new.resolve_pointer())
            };
            // The reader stays on the model's main thread: spawned, it made
            // loom exceed its branch limit (spinning reads of a locked
            // cell); here loom explores the writer and the resolver.
            let seen = new.read();
            assert!(matches!(seen, Some(1 | 2)), "reader saw {seen:?}");
            assert_eq!(writer.join().unwrap(), Outcome::Applied(Some(1)));
            resolver.join().unwrap();
            assert!(!new.is_pointer());
            assert_eq!(new.read(), Some(2));
        });
    }

    /// Two writers of neighbouring records of one block serialise on its
    /// meta word without touching each other's value or flags, and a
    /// reader of one of them sees its writes in order.
    #[test]
    fn loom_block_neighbours() {
        model(3, || {
            let blocks = Arc::new(CellBlock::live(&[1, 10]));
            let first = {
                let blocks = blocks.clone();
                thread::spawn(move || {
                    let r = blocks[0].record(0);
                    assert_eq!(r.write(Write::Put(2), false), Outcome::Applied(Some(1)));
                })
            };
            let second = {
                let blocks = blocks.clone();
                thread::spawn(move || {
                    let r = blocks[0].record(1);
                    assert_eq!(r.write(Write::Remove, false), Outcome::Applied(Some(10)));
                })
            };
            let seen = blocks[0].record(0).read();
            assert!(matches!(seen, Some(1 | 2)), "reader saw {seen:?}");
            first.join().unwrap();
            second.join().unwrap();
            assert_eq!(blocks[0].record(0).read(), Some(2));
            assert_eq!(blocks[0].record(1).read(), None);
        });
    }

    /// A scan's run of a block is one instant of it: with a writer
    /// updating one slot and then the other, the reader's copy is one of
    /// the three states in between, never the first slot's old value with
    /// the second's new one.
    #[test]
    fn loom_block_run_is_one_instant() {
        model(3, || {
            let blocks = Arc::new(CellBlock::live(&[1, 10]));
            let writer = {
                let blocks = blocks.clone();
                thread::spawn(move || {
                    let (a, b) = (blocks[0].record(0), blocks[0].record(1));
                    assert_eq!(a.write(Write::Put(2), false), Outcome::Applied(Some(1)));
                    assert_eq!(b.write(Write::Put(20), false), Outcome::Applied(Some(10)));
                })
            };
            let reader = {
                let blocks = blocks.clone();
                thread::spawn(move || {
                    let mut out: Vec<(u64, u64)> = Vec::new();
                    blocks[0].append_live(0, &[100, 101], &mut out);
                    out
                })
            };
            let seen = reader.join().unwrap();
            let states: [&[(u64, u64)]; 3] = [
                &[(100, 1), (101, 10)],
                &[(100, 2), (101, 10)],
                &[(100, 2), (101, 20)],
            ];
            assert!(states.contains(&seen.as_slice()), "torn run {seen:?}");
            writer.join().unwrap();
        });
    }

    /// The same for a whole block's copy of fixed length: with a writer
    /// updating the first slot, then the last, then removing one in
    /// between, the copy is one of the four states (the first slot's old
    /// value with the last's new one would be torn), and a removal seen
    /// during the copy sends it to the general path, not into the output.
    /// A copy that skips its second meta load fails this model.
    #[test]
    fn loom_whole_block_copy_is_one_instant() {
        model(3, || {
            let blocks = Arc::new(CellBlock::live(&[0, 1, 2, 3, 4, 5, 6]));
            let writer = {
                let blocks = blocks.clone();
                thread::spawn(move || {
                    let slot = |i| blocks[0].record(i);
                    assert_eq!(
                        slot(0).write(Write::Put(9), false),
                        Outcome::Applied(Some(0))
                    );
                    assert_eq!(
                        slot(6).write(Write::Put(60), false),
                        Outcome::Applied(Some(6))
                    );
                    assert_eq!(
                        slot(3).write(Write::Remove, false),
                        Outcome::Applied(Some(3))
                    );
                })
            };
            let reader = {
                let blocks = blocks.clone();
                thread::spawn(move || {
                    let mut out: Vec<(u64, u64)> = vec![(1, 1)];
                    let keys: [u64; SLOTS] = std::array::from_fn(|i| 100 + i as u64);
                    blocks[0].append_block(&keys, &mut out);
                    out
                })
            };
            let seen = reader.join().unwrap();
            let state = |first: u64, last: u64, removed: bool| {
                let mut s = vec![(1, 1), (100, first)];
                s.extend(
                    (1..6)
                        .filter(|&i| !(removed && i == 3))
                        .map(|i| (100 + i, i)),
                );
                s.push((106, last));
                s
            };
            let states = [
                state(0, 6, false),
                state(9, 6, false),
                state(9, 60, false),
                state(9, 60, true),
            ];
            assert!(states.contains(&seen), "torn block copy {seen:?}");
            writer.join().unwrap();
        });
    }

    /// The copy phase on a block: one slot is resolved while a writer goes
    /// through its neighbour's pointer; both records end right and stay
    /// apart.
    #[test]
    fn loom_block_resolution_beside_a_pointer_write() {
        model(4, || {
            let old = Arc::new(CellBlock::live(&[1, 10]));
            let targets = [old[0].record(0), old[0].record(1)];
            // SAFETY: `old` outlives every use of `new` (threads are joined
            // before the closure returns, and `new` is dropped first).
            let new = Arc::new(unsafe { CellBlock::pointing_to(&targets) });
            let writer = {
                let new = new.clone();
                thread::spawn(move || new[0].record(1).write(Write::Put(20), false))
            };
            let resolver = {
                let new = new.clone();
                thread::spawn(move || new[0].record(0).resolve_pointer())
            };
            assert_eq!(writer.join().unwrap(), Outcome::Applied(Some(10)));
            resolver.join().unwrap();
            assert!(!new[0].record(0).is_pointer());
            assert_eq!(new[0].record(0).read(), Some(1));
            assert_eq!(new[0].record(1).read(), Some(20));
            new[0].record(1).resolve_pointer();
            assert_eq!(
                old[0].record(1).write(Write::Put(30), false),
                Outcome::Applied(Some(20))
            );
            assert_eq!(new[0].record(1).read(), Some(20));
        });
    }

    /// A remove racing with pointer resolution is never lost.
    #[test]
    fn loom_remove_during_resolution() {
        model(5, || {
            let old = Arc::new(RecordCell::live(1));
            // SAFETY: `old` outlives every use of `new` (threads are joined).
            let new = Arc::new(unsafe { RecordCell::pointing_to(old.record()) });
            let remover = {
                let new = new.clone();
                thread::spawn(move || new.write(Write::Remove, false))
            };
            let resolver = {
                let new = new.clone();
                thread::spawn(move || new.resolve_pointer())
            };
            resolver.join().unwrap();
            assert_eq!(remover.join().unwrap(), Outcome::Applied(Some(1)));
            assert_eq!(new.read(), None);
            assert_eq!(new.write(Write::Put(5), false), Outcome::Dead);
        });
    }
}
