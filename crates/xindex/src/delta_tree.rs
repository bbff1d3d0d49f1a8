//! The ordered index inside a delta: a B+-tree of record pointers (each
//! beside its key's ordered prefix, so searches rarely read a record)
//! under optimistic lock coupling (the paper's §3.5.1, "a scalable delta index":
//! optimistic concurrency control for reads, fine-grained locks for
//! writes, nothing physically removed, memory reclaimed with the whole
//! structure after the compaction).
//!
//! Why not a reader-writer lock around a `BTreeSet` (the paper's basic
//! version, and this crate's first one): taking a read lock writes the
//! lock's cache line, so readers of one group's delta on different cores
//! kept stealing that line from each other, and every reader waited while
//! an insert of a new key held the lock. Here a reader writes nothing.
//!
//! The protocol:
//! - Every node has a version word. Bit 0 is set while a writer holds the
//!   node; every unlock adds 2 to the version it locked.
//! - A reader reads a node's version (waiting while it is locked), reads
//!   the node's atomics, and then *validates*: the version must be
//!   unchanged, or the operation restarts from the root. Going down, it
//!   reads the child's version before validating the parent (lock
//!   coupling), so it never acts on a child pointer of a parent state that
//!   did not exist.
//! - A writer goes down like a reader and splits every full node on the
//!   way (the parent is never full then, so a split never has to go up
//!   further). It locks a node only by a compare-and-swap from the version
//!   it read, never waiting while it holds another lock, so writers cannot
//!   deadlock; a failed lock restarts the operation.
//! - Nothing is ever removed. A removal is the record's own flag, and
//!   nodes are never merged or freed before the tree is dropped. So every
//!   non-null pointer a reader loads, even from a torn read of a node that
//!   a writer is changing, points at a live node or record: validation
//!   decides whether an *answer* stands, never whether memory is safe.
//! - A node's key range only ever shrinks, and only when the node itself
//!   splits (which changes its version). So a leaf reached through
//!   validated parents and locked at the version read on the way covers
//!   the key it was reached for.

use std::ops::Bound;
use std::ptr::{self, NonNull};

use lidx_core::Key;
use lidx_core::prefetch::prefetch_lines;

use crate::arena::Arena;
use crate::delta::DeltaRecord;
use crate::sync::{
    AtomicPtr, AtomicU64, AtomicUsize, Backoff, Mutex, Ordering, fence, lock, try_lock,
};

/// Entries per node. Small under loom so that models reach splits.
pub(crate) const FANOUT: usize = if cfg!(xindex_loom) { 4 } else { 16 };

/// Version bit set while a writer holds the node.
const LOCKED: u64 = 1;

/// Child pointers of an inner node.
type Children<K> = [AtomicPtr<Node<K>>; FANOUT + 1];

/// One node. Leaves hold records; inner nodes hold separators and children.
struct Node<K> {
    version: AtomicU64,
    len: AtomicUsize,
    /// `keys[i]`'s [`Key::ordered_prefix`]. Searches compare these and
    /// read a record's key only where its prefix ties with the sought
    /// key's: records sit in the delta's arena in the order they were
    /// inserted, so for random inserts every record read was a cache miss
    /// (most of a leaf search's time; session 46).
    prefixes: [AtomicU64; FANOUT],
    /// Leaf: its records, in key order. Inner: the separators, where
    /// `keys[i]` is the smallest key under `children[i + 1]`.
    keys: [AtomicPtr<DeltaRecord<K>>; FANOUT],
    /// Inner: `len + 1` children; `None` in leaves. Boxed, so a leaf (most
    /// nodes) is 288 bytes instead of 424; inner nodes are few and hot.
    children: Option<Box<Children<K>>>,
    /// Leaf: the leaf to the right (for scans). Unused in inner nodes.
    next: AtomicPtr<Node<K>>,
}

impl<K: Key> Node<K> {
    fn new(leaf: bool) -> Self {
        Node {
            version: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            prefixes: std::array::from_fn(|_| AtomicU64::new(0)),
            keys: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            children: (!leaf)
                .then(|| Box::new(std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())))),
            next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    #[inline]
    fn is_leaf(&self) -> bool {
        self.children.is_none()
    }

    /// An inner node's child pointers.
    #[inline]
    fn children(&self) -> &Children<K> {
        self.children
            .as_deref()
            .expect("only inner nodes are asked for children")
    }

    /// The version, if no writer holds the node.
    #[inline]
    fn stable_version(&self) -> Option<u64> {
        let v = self.version.load(Ordering::Acquire);
        (v & LOCKED == 0).then_some(v)
    }

    /// The version, once no writer holds the node (writers hold a node for
    /// one short shift or split).
    #[inline]
    fn wait_version(&self) -> u64 {
        if let Some(v) = self.stable_version() {
            return v;
        }
        let backoff = Backoff::new();
        loop {
            backoff.snooze();
            if let Some(v) = self.stable_version() {
                return v;
            }
        }
    }

    /// Whether nothing changed the node since its version was `v`: what was
    /// read from it in between is one consistent state.
    #[inline]
    fn validate(&self, v: u64) -> bool {
        // Orders the reads of the node's contents before the version read:
        // a reader that saw any store of a writer sees its lock too.
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == v
    }

    /// Locks the node if its version is still `v`.
    #[inline]
    fn try_lock(&self, v: u64) -> bool {
        if self
            .version
            .compare_exchange(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // Pairs with the reader's fence in `validate`: a reader that sees
        // one of the stores that follow also sees the lock.
        fence(Ordering::Release);
        true
    }

    /// Unlocks a node locked at version `v`, publishing a new version.
    #[inline]
    fn unlock(&self, v: u64) {
        self.version.store(v + 2, Ordering::Release);
    }

    /// Entries, clamped so a torn read never indexes out of bounds.
    #[inline]
    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire).min(FANOUT)
    }

    /// The record in `keys[i]`; `None` if the slot was never written (only
    /// possible in a torn read).
    #[inline]
    fn key_record(&self, i: usize) -> Option<&DeltaRecord<K>> {
        let p = self.keys[i].load(Ordering::Acquire);
        // SAFETY: every non-null pointer stored in a node points at a record
        // of the tree's arena, initialised before the Release store that
        // published it and freed only when the tree is dropped, which the
        // `&self` borrow of the tree rules out for the returned lifetime.
        unsafe { p.as_ref() }
    }

    /// The child in `children[i]`; `None` only in a torn read.
    #[inline]
    fn child(&self, i: usize) -> Option<&Node<K>> {
        let p = self.children()[i].load(Ordering::Acquire);
        // SAFETY: as in `key_record`, for the tree's node arena.
        unsafe { p.as_ref() }
    }

    /// Hints the CPU to load the records of slots `from..len`: a scan
    /// reading a leaf's records one by one would otherwise miss on each
    /// (records lie in the arena in insertion order, not key order).
    /// Called after the caller's validation, so the length read here may
    /// be a later one than the caller's (a split may have halved it:
    /// loom found the slice that then started past its end).
    #[inline]
    fn prefetch_records(&self, from: usize) {
        let len = self.len();
        for slot in &self.keys[from.min(len)..len] {
            prefetch_lines(slot.load(Ordering::Relaxed).cast_const(), 1);
        }
    }

    /// The right neighbour of a leaf.
    #[inline]
    fn next_leaf(&self) -> Option<&Node<K>> {
        let p = self.next.load(Ordering::Acquire);
        // SAFETY: as in `child`.
        unsafe { p.as_ref() }
    }

    /// Whether `keys[i]` is below the sought key (with `inclusive`: at or
    /// below). Decided by the prefixes unless they tie; `None` when a torn
    /// read left a hole where the record had to be read.
    #[inline]
    fn slot_below(&self, i: usize, sought: &Sought<'_, K>, inclusive: bool) -> Option<bool> {
        let prefix = self.prefixes[i].load(Ordering::Relaxed);
        if prefix != sought.prefix {
            // Prefixes are monotone in key order, so unequal ones order
            // their keys.
            return Some(prefix < sought.prefix);
        }
        let k = self.key_record(i)?.key();
        Some(if inclusive {
            k <= sought.key
        } else {
            k < sought.key
        })
    }

    /// Entries whose key is below the sought key (with `inclusive`: at or
    /// below), by binary search; `None` when a torn read left a hole.
    fn count_below(&self, sought: &Sought<'_, K>, inclusive: bool) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.slot_below(mid, sought, inclusive)? {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// Where the sought key is or would go in a leaf, and its record if it
    /// is there; `None` when a torn read left a hole.
    fn find(&self, sought: &Sought<'_, K>) -> Option<(usize, Option<&DeltaRecord<K>>)> {
        let at = self.count_below(sought, false)?;
        let record = (at < self.len()
            && self.prefixes[at].load(Ordering::Relaxed) == sought.prefix)
            .then(|| self.key_record(at))
            .flatten()
            .filter(|r| r.key() == sought.key);
        Some((at, record))
    }

    /// [`find`](Self::find) that compares with the last record first: a
    /// key above it (an append) is placed after one comparison, which
    /// matters when other threads are appending too, since every record
    /// compared with was just written by another core.
    #[inline]
    fn find_from_top(&self, sought: &Sought<'_, K>) -> Option<(usize, Option<&DeltaRecord<K>>)> {
        let len = self.len();
        if len > 0 && self.slot_below(len - 1, sought, false)? {
            return Some((len, None));
        }
        self.find(sought)
    }

    /// The child of an inner node that covers the sought key (`None`: the
    /// leftmost child).
    #[inline]
    fn child_for(&self, sought: Option<&Sought<'_, K>>) -> Option<&Node<K>> {
        let i = match sought {
            Some(sought) => self.count_below(sought, true)?,
            None => 0,
        };
        self.child(i)
    }

    /// Shifts `keys[at..len]` (and, with `child`, `children[at + 1..=len]`)
    /// one place right and writes the new entry into the gap. The caller
    /// holds the lock and has checked `len < FANOUT`.
    fn insert_at(
        &self,
        at: usize,
        (prefix, key): (u64, NonNull<DeltaRecord<K>>),
        child: Option<NonNull<Node<K>>>,
    ) {
        let len = self.len.load(Ordering::Relaxed);
        debug_assert!(len < FANOUT && at <= len);
        for i in (at..len).rev() {
            let moved = self.prefixes[i].load(Ordering::Relaxed);
            self.prefixes[i + 1].store(moved, Ordering::Relaxed);
            let moved = self.keys[i].load(Ordering::Relaxed);
            self.keys[i + 1].store(moved, Ordering::Release);
            if child.is_some() {
                let moved = self.children()[i + 1].load(Ordering::Relaxed);
                self.children()[i + 2].store(moved, Ordering::Release);
            }
        }
        self.prefixes[at].store(prefix, Ordering::Relaxed);
        self.keys[at].store(key.as_ptr(), Ordering::Release);
        if let Some(child) = child {
            self.children()[at + 1].store(child.as_ptr(), Ordering::Release);
        }
        self.len.store(len + 1, Ordering::Release);
    }
}

/// The ordered index of one delta; owns its records.
///
/// `repr(C)` with `root` first: every search starts with that load, and
/// `Group::prefetch_delta` requests the delta's first line. Laid out by
/// the compiler, `root` sat 112 bytes in, two lines past the one
/// requested, so the search that followed missed anyway.
#[repr(C)]
pub(crate) struct DeltaTree<K> {
    root: AtomicPtr<Node<K>>,
    /// The rightmost leaf, or one that was: where a key above every key
    /// of the tree goes. Only a hint for [`DeltaTree::try_append`], which
    /// checks under the leaf's version that the leaf is still rightmost.
    last_leaf: AtomicPtr<Node<K>>,
    /// Serialises changes of the root pointer (the first leaf, root splits).
    grow: Mutex<()>,
    /// A blank leaf and a blank inner node that a split allocated and then
    /// did not use (it gave up when a node changed), for the next split.
    spare: [AtomicPtr<Node<K>>; 2],
    nodes: Mutex<Arena<Node<K>>>,
    /// Where new records are allocated while no two writers meet here.
    records: Mutex<Arena<DeltaRecord<K>>>,
    /// Arenas per writer thread, made when a writer found `records` held
    /// by another (null until then); from then on every record goes to its
    /// thread's lane ([`record_lane`]). Owned: freed with the tree.
    lanes: AtomicPtr<[RecordLane<K>; RECORD_LANES]>,
}

/// Record arenas of a delta tree that writers meet in. Two threads
/// appending to one delta took its one arena's mutex in turn and wrote
/// their records into the same cache lines, so each append moved those
/// lines (and the tree's fields sharing the mutex's line) from the other
/// core; with a lane per thread, two-thread appends on geolite2 went from
/// about 100 to about 80 ns each (session 43). Lanes are made only when
/// writers meet: a delta of random inserts rarely sees two at once, and
/// every lane is one more cache line for an insert to miss (lanes in
/// every delta cost two-thread `mixed:0.5` on geolite2 about 15%).
const RECORD_LANES: usize = if cfg!(xindex_loom) { 1 } else { 4 };

/// One record arena, on a cache line of its own.
#[repr(align(64))]
struct RecordLane<K>(Mutex<Arena<DeltaRecord<K>>>);

/// The calling thread's lane: threads take shards in turn
/// ([`crate::shard::current`]), so up to [`RECORD_LANES`] writers get
/// distinct lanes. One lane under loom, whose models must not depend on
/// which thread first asked for a shard.
#[inline]
fn record_lane() -> usize {
    #[cfg(xindex_loom)]
    {
        0
    }
    #[cfg(not(xindex_loom))]
    {
        crate::shard::current() % RECORD_LANES
    }
}

// SAFETY: the tree owns its nodes and records (through the arenas) and hands
// out only shared references to records; `K` crosses threads inside them.
unsafe impl<K: Send + Sync> Send for DeltaTree<K> {}
// SAFETY: as above; every field shared between threads is an atomic or
// behind a mutex, and keys are only read after their publication.
unsafe impl<K: Send + Sync> Sync for DeltaTree<K> {}

/// What [`DeltaTree::get_or_insert`] found.
pub(crate) struct Entry<'a, K> {
    /// The key's record.
    pub(crate) record: &'a DeltaRecord<K>,
    /// Whether this call created it.
    pub(crate) created: bool,
}

/// The record of a key being inserted: made and placed in the tree's arena
/// at most once, across restarts, and only once the key was found absent.
struct Pending<K, F> {
    make: Option<F>,
    made: Option<NonNull<DeltaRecord<K>>>,
}

impl<K: Key, F: FnOnce() -> DeltaRecord<K>> Pending<K, F> {
    /// The record, in `tree`'s arena but not linked yet. Allocated before
    /// the leaf is locked, so that the arena's mutex, which every insert
    /// into the delta takes, is not held inside a leaf's lock. If the key
    /// then turns out to be present (another writer linked it first), the
    /// record stays unlinked in the arena until the delta is dropped.
    fn take(&mut self, tree: &DeltaTree<K>) -> NonNull<DeltaRecord<K>> {
        match self.made.take() {
            Some(record) => record,
            None => tree.alloc_record((self.make.take().expect("a record is made once"))()),
        }
    }

    /// Keeps a record made for an attempt that restarted.
    fn put_back(&mut self, record: NonNull<DeltaRecord<K>>) {
        self.made = Some(record);
    }
}

/// What [`DeltaTree::try_append`] did.
enum Append<'a, K> {
    Done(Entry<'a, K>),
    /// The rightmost leaf changed or is held by a writer: try again.
    Again,
    /// The key is not the rightmost leaf's, or the leaf is full.
    Descend,
}

/// A key being looked for, with its [`Key::ordered_prefix`], computed once
/// per operation.
struct Sought<'k, K> {
    key: &'k K,
    prefix: u64,
}

impl<'k, K: Key> Sought<'k, K> {
    #[inline]
    fn new(key: &'k K) -> Self {
        Sought {
            key,
            prefix: key.ordered_prefix(),
        }
    }

    /// The key a bound names (`None`: unbounded) and whether the bound
    /// includes it.
    #[inline]
    fn of_bound(bound: Bound<&'k K>) -> (Option<Self>, bool) {
        match bound {
            Bound::Included(k) => (Some(Sought::new(k)), true),
            Bound::Excluded(k) => (Some(Sought::new(k)), false),
            Bound::Unbounded => (None, false),
        }
    }
}

/// One step of a descent: go on, or start over from the root.
enum Step<T> {
    Done(T),
    Restart,
}

/// A record of a [`DeltaTree`] and where a reader found it: the leaf, the
/// leaf's version then, and the record's slot. [`DeltaTree::next`] and
/// [`DeltaTree::prev`] read the neighbouring slot and keep it only while
/// the leaf is still at that version, so a scan merging a delta descends
/// once, not once per record (each descent was about a third of a scan's
/// time with 5% of the keys in deltas; session 55).
pub(crate) struct Cursor<'a, K> {
    record: &'a DeltaRecord<K>,
    /// `None`: found without a place (the walk of a broken tree), so
    /// moving on descends.
    leaf: Option<&'a Node<K>>,
    version: u64,
    slot: usize,
}

impl<K> Clone for Cursor<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Cursor<'_, K> {}

impl<'a, K: Key> Cursor<'a, K> {
    #[inline]
    fn at(record: &'a DeltaRecord<K>, leaf: &'a Node<K>, version: u64, slot: usize) -> Self {
        Cursor {
            record,
            leaf: Some(leaf),
            version,
            slot,
        }
    }

    fn unplaced(record: &'a DeltaRecord<K>) -> Self {
        Cursor {
            record,
            leaf: None,
            version: 0,
            slot: 0,
        }
    }

    /// The first record of `leaf`, read at one instant; `None` if a torn
    /// read left a hole (the caller starts over).
    #[inline]
    fn first_of(leaf: &'a Node<K>) -> Option<Self> {
        loop {
            let v = leaf.wait_version();
            let first = leaf.key_record(0);
            if leaf.validate(v) {
                leaf.prefetch_records(1);
                return first.map(|record| Cursor::at(record, leaf, v, 0));
            }
        }
    }

    /// The record.
    #[inline]
    pub(crate) fn record(&self) -> &'a DeltaRecord<K> {
        self.record
    }
}

impl<K: Key> DeltaTree<K> {
    /// An empty tree (no allocation until the first insert).
    pub(crate) fn new() -> Self {
        DeltaTree {
            root: AtomicPtr::new(ptr::null_mut()),
            last_leaf: AtomicPtr::new(ptr::null_mut()),
            grow: Mutex::new(()),
            spare: [
                AtomicPtr::new(ptr::null_mut()),
                AtomicPtr::new(ptr::null_mut()),
            ],
            // A leaf is 288 bytes and most deltas need one or two.
            nodes: Mutex::new(Arena::with_first_chunk(1)),
            records: Mutex::new(Arena::new()),
            lanes: AtomicPtr::new(ptr::null_mut()),
        }
    }

    fn alloc_node(&self, node: Node<K>) -> NonNull<Node<K>> {
        lock(&self.nodes).alloc(node)
    }

    /// A blank node (a leaf or an inner node) in the arena, not linked
    /// anywhere: a spare if there is one, else a new one. A split takes its
    /// nodes here before it locks anything, so that no allocation (nor
    /// the arena's mutex) runs while it holds node locks.
    fn blank_node(&self, leaf: bool) -> NonNull<Node<K>> {
        let spare = self.spare[usize::from(leaf)].swap(ptr::null_mut(), Ordering::Acquire);
        NonNull::new(spare).unwrap_or_else(|| self.alloc_node(Node::new(leaf)))
    }

    /// Keeps a blank node that a split did not use for the next one. With
    /// a spare of its kind already kept, it stays unused in the arena
    /// until the tree is dropped: one node per split that gave up while
    /// another also had.
    fn keep_blank(&self, node: NonNull<Node<K>>, leaf: bool) {
        // Release: the taker's Acquire sees the node's initialisation.
        let _ = self.spare[usize::from(leaf)].compare_exchange(
            ptr::null_mut(),
            node.as_ptr(),
            Ordering::Release,
            Ordering::Relaxed,
        );
    }

    /// Moves `record` into one of the tree's arenas: the shared one while
    /// no other writer holds it, else the calling thread's lane.
    fn alloc_record(&self, record: DeltaRecord<K>) -> NonNull<DeltaRecord<K>> {
        let lanes = self.lanes.load(Ordering::Acquire);
        // SAFETY: `lanes` is null or the array `record_lanes` published
        // (initialised before its Release CAS), freed only by `drop`.
        let lanes = match unsafe { lanes.as_ref() } {
            Some(lanes) => lanes,
            None => match try_lock(&self.records) {
                Some(mut arena) => return arena.alloc(record),
                None => self.record_lanes(),
            },
        };
        lock(&lanes[record_lane()].0).alloc(record)
    }

    /// The lanes, made now if no writer made them yet.
    #[cold]
    fn record_lanes(&self) -> &[RecordLane<K>; RECORD_LANES] {
        let made = Box::into_raw(Box::new(std::array::from_fn(|_| {
            RecordLane(Mutex::new(Arena::new()))
        })));
        let lanes = match self.lanes.compare_exchange(
            ptr::null_mut(),
            made,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => made,
            Err(theirs) => {
                // SAFETY: `made` came from `Box::into_raw` above and was not
                // published: this is its only owner.
                drop(unsafe { Box::from_raw(made) });
                theirs
            }
        };
        // SAFETY: non-null and published: as in `alloc_record`.
        unsafe { &*lanes }
    }

    /// The root and its version, read consistently; `None` if the tree is
    /// empty.
    fn root_snapshot(&self) -> Option<(&Node<K>, u64)> {
        loop {
            let p = self.root.load(Ordering::Acquire);
            // SAFETY: as in `Node::child`.
            let root = unsafe { p.as_ref() }?;
            let v = root.wait_version();
            // A root split bumps the old root's version after storing the
            // new root, so a version read after the split sees the new
            // pointer here.
            if self.root.load(Ordering::Acquire) == p {
                return Some((root, v));
            }
        }
    }

    /// The leaf covering the sought key (`None`: the leftmost leaf) and
    /// its version, reached through validated parents; `None` if empty.
    fn leaf_for(&self, sought: Option<&Sought<'_, K>>) -> Option<(&Node<K>, u64)> {
        'restart: loop {
            let (mut node, mut v) = self.root_snapshot()?;
            while !node.is_leaf() {
                let Some(child) = node.child_for(sought) else {
                    continue 'restart;
                };
                let cv = child.wait_version();
                if !node.validate(v) {
                    continue 'restart;
                }
                (node, v) = (child, cv);
            }
            return Some((node, v));
        }
    }

    /// The record of `key`, if it was ever inserted.
    pub(crate) fn get(&self, key: &K) -> Option<&DeltaRecord<K>> {
        let sought = Sought::new(key);
        loop {
            let (leaf, v) = self.leaf_for(Some(&sought))?;
            if let Some((_, found)) = leaf.find(&sought)
                && leaf.validate(v)
            {
                return found;
            }
        }
    }

    /// The first record whose key lies inside `lower` (tests; scans use
    /// [`seek`](Self::seek)).
    #[cfg(test)]
    pub(crate) fn first_from(&self, lower: Bound<&K>) -> Option<&DeltaRecord<K>> {
        self.seek(lower).map(|cursor| cursor.record)
    }

    /// The first record whose key lies inside `lower` (and above it), with
    /// where it was found, so that [`next`](Self::next) can read its
    /// successor from the same leaf.
    pub(crate) fn seek(&self, lower: Bound<&K>) -> Option<Cursor<'_, K>> {
        let (sought, includes) = Sought::of_bound(lower);
        // Records to skip: those below the key, and the key itself if the
        // bound excludes it.
        let inclusive = !includes;
        let sought = sought.as_ref();
        loop {
            let (leaf, v) = self.leaf_for(sought)?;
            let at = match sought {
                Some(sought) => match leaf.count_below(sought, inclusive) {
                    Some(at) => at,
                    None => continue,
                },
                None => 0,
            };
            if at < leaf.len() {
                let record = leaf.key_record(at);
                if let Some(record) = record
                    && leaf.validate(v)
                {
                    leaf.prefetch_records(at + 1);
                    return Some(Cursor::at(record, leaf, v, at));
                }
                continue;
            }
            // Every key of the leaves to the right is above the leaf's
            // range, which contains `key`; leaves are never empty.
            let next = leaf.next_leaf();
            if !leaf.validate(v) {
                continue;
            }
            match Cursor::first_of(next?) {
                Some(cursor) => return Some(cursor),
                None => continue,
            }
        }
    }

    /// The record after the cursor's, with its place. Read from the
    /// cursor's leaf (or the first slot of the leaf to its right) if that
    /// leaf is still at the version the cursor saw: no descent. A leaf
    /// that changed since (an insert into it) sends the call back to a
    /// descent, as [`seek`](Self::seek) past the record's key.
    ///
    /// Why the leaf's next slot is the successor: the leaf's key range is
    /// one interval holding both records, so an insert of any key between
    /// them would have gone into this leaf and changed its version. The
    /// step to the next leaf is `seek`'s own last step.
    #[inline]
    pub(crate) fn next<'a>(&'a self, cursor: Cursor<'a, K>) -> Option<Cursor<'a, K>> {
        if let Some(leaf) = cursor.leaf {
            let after = cursor.slot + 1;
            if after < leaf.len() {
                let record = leaf.key_record(after);
                if let Some(record) = record
                    && leaf.validate(cursor.version)
                {
                    return Some(Cursor::at(record, leaf, cursor.version, after));
                }
            } else {
                let next = leaf.next_leaf();
                // No leaf to the right of a validated last leaf: no
                // successor.
                if leaf.validate(cursor.version)
                    && let Some(found) = Cursor::first_of(next?)
                {
                    return Some(found);
                }
            }
        }
        self.seek(Bound::Excluded(cursor.record.key()))
    }

    /// The last record whose key lies inside `upper` (tests; scans use
    /// [`seek_last`](Self::seek_last)).
    #[cfg(test)]
    pub(crate) fn last_within(&self, upper: Bound<&K>) -> Option<&DeltaRecord<K>> {
        self.seek_last(upper).map(|cursor| cursor.record)
    }

    /// The last record whose key lies inside `upper` (and below it), with
    /// where it was found, so that [`prev`](Self::prev) can read its
    /// predecessor from the same leaf: one descent, like
    /// [`seek`](Self::seek), but leaves have no left links, so it goes
    /// down towards the largest key inside `upper` instead of to the leaf
    /// covering the bound.
    ///
    /// Why one descent finds it: nothing is removed, so the smallest key
    /// under `children[i + 1]` stays `keys[i]`. A descent that took a
    /// child other than the leftmost somewhere did so because that
    /// separator was inside `upper`, so the leaf it reaches holds a key
    /// inside `upper`; only the tree's leftmost leaf can hold none, and
    /// then no record is inside `upper`.
    pub(crate) fn seek_last(&self, upper: Bound<&K>) -> Option<Cursor<'_, K>> {
        let (sought, inclusive) = Sought::of_bound(upper);
        let sought = sought.as_ref();
        // Entries of `node` inside `upper`; `None` when a torn read left a
        // hole.
        let inside = |node: &Node<K>| match sought {
            Some(sought) => node.count_below(sought, inclusive),
            None => Some(node.len()),
        };
        'restart: loop {
            let (mut node, mut v) = self.root_snapshot()?;
            let mut leftmost = true;
            while !node.is_leaf() {
                let Some(i) = inside(node) else {
                    continue 'restart;
                };
                let Some(child) = node.child(i) else {
                    continue 'restart;
                };
                let cv = child.wait_version();
                if !node.validate(v) {
                    continue 'restart;
                }
                leftmost &= i == 0;
                (node, v) = (child, cv);
            }
            let Some(at) = inside(node) else {
                continue 'restart;
            };
            let record = at.checked_sub(1).map(|i| (i, node.key_record(i)));
            if !node.validate(v) {
                continue 'restart;
            }
            return match record {
                Some((i, Some(record))) => Some(Cursor::at(record, node, v, i)),
                // A validated leaf has no holes below its length.
                Some((_, None)) => continue 'restart,
                None if leftmost => None,
                None => self.last_within_by_walk(upper).map(Cursor::unplaced),
            };
        }
    }

    /// [`seek_last`](Self::seek_last) by reading every leaf: only if
    /// the separator invariant it relies on were broken (a bug), so that
    /// such a bug costs time instead of a record.
    #[cold]
    fn last_within_by_walk(&self, upper: Bound<&K>) -> Option<&DeltaRecord<K>> {
        debug_assert!(false, "a non-leftmost leaf held no key inside the bound");
        let mut last = None;
        self.for_each_leaf(None, |leaf| {
            let inside = leaf.partition_point(|r| match upper {
                Bound::Included(k) => r.key() <= k,
                Bound::Excluded(k) => r.key() < k,
                Bound::Unbounded => true,
            });
            if inside > 0 {
                last = Some(leaf[inside - 1]);
            }
        });
        last
    }

    /// The record before the cursor's, with its place: read from the
    /// cursor's leaf while that leaf is still at the version the cursor
    /// saw (as in [`next`](Self::next)), else, and for the leaf's first
    /// slot (leaves have no left links), by a descent as
    /// [`seek_last`](Self::seek_last) below the record's key.
    #[inline]
    pub(crate) fn prev<'a>(&'a self, cursor: Cursor<'a, K>) -> Option<Cursor<'a, K>> {
        if let Some(leaf) = cursor.leaf
            && let Some(before) = cursor.slot.checked_sub(1)
        {
            let record = leaf.key_record(before);
            if let Some(record) = record
                && leaf.validate(cursor.version)
            {
                return Some(Cursor::at(record, leaf, cursor.version, before));
            }
        }
        self.seek_last(Bound::Excluded(cursor.record.key()))
    }

    /// Every record in key order, read as
    /// [`for_each_record`](Self::for_each_record) reads them.
    #[cfg(test)]
    pub(crate) fn records(&self) -> Vec<&DeltaRecord<K>> {
        let mut out = Vec::new();
        self.for_each_leaf(None, |leaf| out.extend_from_slice(leaf));
        out
    }

    /// Calls `visit` with every record in key order. With concurrent
    /// inserts, each leaf is read at one instant: no key repeats and the
    /// order holds; a key inserted meanwhile may be missing.
    pub(crate) fn for_each_record<'a>(&'a self, mut visit: impl FnMut(&'a DeltaRecord<K>)) {
        self.for_each_leaf(None, |leaf| leaf.iter().for_each(|r| visit(r)));
    }

    /// The records whose key is above `key`, in key order, read as
    /// [`for_each_record`](Self::for_each_record) reads them, from the leaf covering `key`
    /// on: no descent per record.
    pub(crate) fn records_above(&self, key: &K) -> Vec<&DeltaRecord<K>> {
        let mut out = Vec::new();
        self.for_each_leaf(Some(key), |leaf| {
            let above = leaf.partition_point(|r| r.key() <= key);
            out.extend_from_slice(&leaf[above..]);
        });
        out
    }

    /// The number of records, counted leaf by leaf (each leaf read at one
    /// instant), or, once the count passes `limit`, the count so far:
    /// callers comparing with a bound read no more leaves than that bound
    /// needs. The tree keeps no running count: one counter that every
    /// insert adds to was a cache line that two threads appending to one
    /// delta took from each other on every insert.
    pub(crate) fn count_up_to(&self, limit: usize) -> usize {
        let Some((mut leaf, _)) = self.leaf_for(None) else {
            return 0;
        };
        let mut count = 0usize;
        loop {
            let v = leaf.wait_version();
            let len = leaf.len();
            let next = leaf.next_leaf();
            if !leaf.validate(v) {
                continue;
            }
            count += len;
            match next {
                Some(next) if count <= limit => leaf = next,
                _ => return count,
            }
        }
    }

    /// Whether no record was ever inserted.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.root.load(Ordering::Acquire).is_null()
    }

    /// The sum of `f` over every record, read as
    /// [`for_each_record`](Self::for_each_record) reads them.
    pub(crate) fn sum_of(&self, f: impl Fn(&DeltaRecord<K>) -> usize) -> usize {
        let mut sum = 0usize;
        self.for_each_leaf(None, |leaf| {
            sum = leaf.iter().fold(sum, |sum, r| sum.wrapping_add(f(r)));
        });
        sum
    }

    /// Calls `visit` with each leaf's records, leaves in key order from
    /// the one covering `from` (`None`: the leftmost), each leaf read at
    /// one instant (read again if a writer changed it).
    fn for_each_leaf<'a>(&'a self, from: Option<&K>, mut visit: impl FnMut(&[&'a DeltaRecord<K>])) {
        let from = from.map(Sought::new);
        let Some((mut leaf, _)) = self.leaf_for(from.as_ref()) else {
            return;
        };
        let mut read: Vec<&DeltaRecord<K>> = Vec::with_capacity(FANOUT);
        loop {
            let v = leaf.wait_version();
            read.clear();
            let complete =
                (0..leaf.len()).all(|i| leaf.key_record(i).map(|r| read.push(r)).is_some());
            let next = leaf.next_leaf();
            if !complete || !leaf.validate(v) {
                continue;
            }
            visit(&read);
            match next {
                Some(next) => leaf = next,
                None => return,
            }
        }
    }

    /// The record of `key`, created from `make` (which must make a record
    /// of `key`: it is placed, and its prefix taken, as `key`'s) if the key
    /// was never inserted. The new record is linked under the leaf's lock,
    /// so exactly one of several concurrent callers creates it.
    pub(crate) fn get_or_insert(
        &self,
        key: &K,
        make: impl FnOnce() -> DeltaRecord<K>,
    ) -> Entry<'_, K> {
        let mut pending = Pending {
            make: Some(make),
            made: None,
        };
        let sought = Sought::new(key);
        let backoff = Backoff::new();
        loop {
            match self.try_append(&sought, &mut pending) {
                Append::Done(entry) => return entry,
                // The last leaf changed under the attempt, or a writer holds
                // it: another writer made progress, so try it again.
                Append::Again => {
                    backoff.snooze();
                    continue;
                }
                Append::Descend => {}
            }
            let step = match self.root_snapshot() {
                None => self.plant(sought.prefix, &mut pending),
                Some((root, v)) => self.descend_and_insert(root, v, &sought, &mut pending),
            };
            if let Step::Done(entry) = step {
                return entry;
            }
        }
    }

    /// Makes the first leaf, holding the pending record (whose key's
    /// prefix is `prefix`).
    fn plant<F: FnOnce() -> DeltaRecord<K>>(
        &self,
        prefix: u64,
        pending: &mut Pending<K, F>,
    ) -> Step<Entry<'_, K>> {
        let record = pending.take(self);
        let _grow = lock(&self.grow);
        if !self.root.load(Ordering::Acquire).is_null() {
            pending.put_back(record);
            return Step::Restart;
        }
        let leaf = Node::new(true);
        leaf.prefixes[0].store(prefix, Ordering::Relaxed);
        leaf.keys[0].store(record.as_ptr(), Ordering::Relaxed);
        leaf.len.store(1, Ordering::Relaxed);
        let leaf = self.alloc_node(leaf);
        self.root.store(leaf.as_ptr(), Ordering::Release);
        self.last_leaf.store(leaf.as_ptr(), Ordering::Release);
        // SAFETY: the record lives in the arena as long as `self`.
        let record = unsafe { record.as_ref() };
        Step::Done(Entry {
            record,
            created: true,
        })
    }

    /// Inserts `key` into the rightmost leaf without a descent if the leaf
    /// covers it (the key is at or above the leaf's first key) and has
    /// room, or finds its record there: the path of keys inserted in
    /// ascending order, also by several threads whose keys interleave.
    #[inline]
    fn try_append<F: FnOnce() -> DeltaRecord<K>>(
        &self,
        sought: &Sought<'_, K>,
        pending: &mut Pending<K, F>,
    ) -> Append<'_, K> {
        let p = self.last_leaf.load(Ordering::Acquire);
        // SAFETY: as in `Node::child`: the hint is null or a leaf of the
        // tree's node arena, published complete by the Release store.
        let Some(leaf) = (unsafe { p.as_ref() }) else {
            return Append::Descend;
        };
        // A right neighbour, once set, stays: checked before the version,
        // so that a stale hint whose leaf descents keep locking sends
        // appends down the tree instead of waiting on it.
        if !leaf.next.load(Ordering::Acquire).is_null() {
            return Append::Descend;
        }
        let Some(v) = leaf.stable_version() else {
            return Append::Again;
        };
        let len = leaf.len();
        if len == 0 || !leaf.next.load(Ordering::Acquire).is_null() {
            return Append::Descend;
        }
        // A stable leaf has every slot below `len`: a hole is a torn read.
        let Some(first_at_or_below) = leaf.slot_below(0, sought, true) else {
            return Append::Again;
        };
        if !first_at_or_below {
            return Append::Descend;
        }
        if len == FANOUT {
            // An existing key is found here; a new one needs the descent,
            // which splits the leaf.
            return match leaf.find(sought) {
                Some((_, Some(record))) if leaf.validate(v) => Append::Done(Entry {
                    record,
                    created: false,
                }),
                _ => Append::Descend,
            };
        }
        // The leaf has no right neighbour, so it covers every key from its
        // first one up, the sought one among them (checked again by the
        // version).
        match self.insert_into_leaf(leaf, v, sought, pending) {
            Some(entry) => Append::Done(entry),
            None => Append::Again,
        }
    }

    /// The last step of an insert: `leaf`, read at version `v` and not full
    /// at it, covers the sought key. Returns the key's record, found or
    /// created, or `None` if the leaf changed since `v` (the caller starts
    /// again).
    #[inline]
    fn insert_into_leaf<'a, F: FnOnce() -> DeltaRecord<K>>(
        &'a self,
        leaf: &'a Node<K>,
        v: u64,
        sought: &Sought<'_, K>,
        pending: &mut Pending<K, F>,
    ) -> Option<Entry<'a, K>> {
        let (at, existing) = leaf.find_from_top(sought)?;
        if let Some(record) = existing {
            return leaf.validate(v).then_some(Entry {
                record,
                created: false,
            });
        }
        // Made before locking: readers and writers of the leaf wait for
        // the shift only, not for the key's clone or its allocation.
        let record = pending.take(self);
        if !leaf.try_lock(v) {
            pending.put_back(record);
            return None;
        }
        // Locked at the version the search ran at: `at` is the position,
        // the key is absent, and the leaf is not full.
        leaf.insert_at(at, (sought.prefix, record), None);
        leaf.unlock(v);
        // SAFETY: the record lives in the arena as long as `self`.
        let record = unsafe { record.as_ref() };
        Some(Entry {
            record,
            created: true,
        })
    }

    fn descend_and_insert<'a, F: FnOnce() -> DeltaRecord<K>>(
        &'a self,
        root: &'a Node<K>,
        root_v: u64,
        sought: &Sought<'_, K>,
        pending: &mut Pending<K, F>,
    ) -> Step<Entry<'a, K>> {
        let (mut node, mut v) = (root, root_v);
        let mut parent: Option<(&Node<K>, u64)> = None;
        loop {
            if node.len() == FANOUT {
                // Whether or not the split happens (another writer may get
                // there first), start over on the changed tree.
                self.split(parent, node, v, sought);
                return Step::Restart;
            }
            if node.is_leaf() {
                break;
            }
            let Some(child) = node.child_for(Some(sought)) else {
                return Step::Restart;
            };
            let cv = child.wait_version();
            if !node.validate(v) {
                return Step::Restart;
            }
            parent = Some((node, v));
            (node, v) = (child, cv);
        }
        match self.insert_into_leaf(node, v, sought, pending) {
            Some(entry) => Step::Done(entry),
            None => Step::Restart,
        }
    }

    /// Splits the full `node` (read at version `v`) in two and links the
    /// new right half into `parent` (read at its version; not full, since
    /// the descent split it otherwise) or into a new root. Gives up
    /// quietly if either node changed. `sought` is the key being inserted:
    /// when it is above all but the last key of the rightmost leaf, that
    /// leaf keeps all but two of its keys (ascending inserts then fill
    /// leaves instead of leaving each half empty).
    fn split(
        &self,
        parent: Option<(&Node<K>, u64)>,
        node: &Node<K>,
        v: u64,
        sought: &Sought<'_, K>,
    ) {
        let leaf = node.is_leaf();
        // Every node the split may link, taken before any lock.
        let right_ptr = self.blank_node(leaf);
        let root_ptr = parent.is_none().then(|| self.blank_node(false));
        let give_up = || {
            self.keep_blank(right_ptr, leaf);
            if let Some(root) = root_ptr {
                self.keep_blank(root, false);
            }
        };
        let _grow = match parent {
            Some(_) => None,
            None => Some(lock(&self.grow)),
        };
        match parent {
            Some((p, pv)) => {
                if !p.try_lock(pv) {
                    give_up();
                    return;
                }
            }
            None => {
                if !ptr::eq(self.root.load(Ordering::Acquire), node) {
                    give_up();
                    return;
                }
            }
        }
        let unlock_parent = || {
            if let Some((p, pv)) = parent {
                p.unlock(pv);
            }
        };
        if !node.try_lock(v) {
            unlock_parent();
            give_up();
            return;
        }
        // Leaves keep `mid` records and move the rest; the separator is the
        // right leaf's first key. Inner nodes keep `mid` separators, move
        // the ones after `keys[mid]`, and push `keys[mid]` up. The
        // rightmost leaf split for a key above all but its last record
        // keeps all but two (so two writers whose ascending keys
        // interleave both find room on either side).
        let rightmost = leaf && node.next.load(Ordering::Relaxed).is_null();
        let mid = if rightmost && node.slot_below(FANOUT - 2, sought, false) == Some(true) {
            FANOUT - 2
        } else {
            FANOUT / 2
        };
        // SAFETY: a blank node of the arena (alive as long as `self`),
        // reachable by no other thread until the Release stores below
        // publish it; it is only written through its atomics.
        let right = unsafe { right_ptr.as_ref() };
        let moved_from = if leaf { mid } else { mid + 1 };
        for (to, from) in (moved_from..FANOUT).enumerate() {
            let prefix = node.prefixes[from].load(Ordering::Relaxed);
            right.prefixes[to].store(prefix, Ordering::Relaxed);
            let k = node.keys[from].load(Ordering::Relaxed);
            right.keys[to].store(k, Ordering::Relaxed);
            if !leaf {
                let c = node.children()[from].load(Ordering::Relaxed);
                right.children()[to].store(c, Ordering::Relaxed);
            }
        }
        if leaf {
            right
                .next
                .store(node.next.load(Ordering::Relaxed), Ordering::Relaxed);
        } else {
            let c = node.children()[FANOUT].load(Ordering::Relaxed);
            right.children()[FANOUT - moved_from].store(c, Ordering::Relaxed);
        }
        right.len.store(FANOUT - moved_from, Ordering::Relaxed);
        let separator = (
            node.prefixes[mid].load(Ordering::Relaxed),
            NonNull::new(node.keys[mid].load(Ordering::Relaxed))
                .expect("a full node has every key"),
        );
        // Published by the Release stores below, after it is complete.
        let right = right_ptr;
        if leaf {
            node.next.store(right.as_ptr(), Ordering::Release);
        }
        node.len.store(mid, Ordering::Release);
        match parent {
            Some((p, _)) => {
                let plen = p.len.load(Ordering::Relaxed);
                let at = (0..=plen)
                    .find(|&i| ptr::eq(p.children()[i].load(Ordering::Relaxed), node))
                    .expect("a locked parent still points at its locked child");
                p.insert_at(at, separator, Some(right));
            }
            None => {
                let root_ptr = root_ptr.expect("taken for a split without a parent");
                // SAFETY: as for `right`.
                let root = unsafe { root_ptr.as_ref() };
                root.prefixes[0].store(separator.0, Ordering::Relaxed);
                root.keys[0].store(separator.1.as_ptr(), Ordering::Relaxed);
                root.children()[0].store(ptr::from_ref(node).cast_mut(), Ordering::Relaxed);
                root.children()[1].store(right.as_ptr(), Ordering::Relaxed);
                root.len.store(1, Ordering::Relaxed);
                self.root.store(root_ptr.as_ptr(), Ordering::Release);
            }
        }
        if rightmost {
            // Published after the link above, so the hint never leads to
            // a leaf the descent cannot reach. A later split of `right`
            // may already have stored a newer hint: then this one is
            // stale, and appends descend until the next rightmost split.
            self.last_leaf.store(right.as_ptr(), Ordering::Release);
        }
        node.unlock(v);
        unlock_parent();
    }
}

impl<K> Drop for DeltaTree<K> {
    fn drop(&mut self) {
        // A load, not `get_mut`, which loom's atomics lack.
        let lanes = self.lanes.load(Ordering::Acquire);
        if !lanes.is_null() {
            // SAFETY: published once from `Box::into_raw` (`record_lanes`)
            // and never freed elsewhere; `&mut self` means no writer or
            // reader is left. Dropping the lanes drops their records.
            drop(unsafe { Box::from_raw(lanes) });
        }
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};

    use proptest::prelude::*;

    use super::*;

    fn insert(tree: &DeltaTree<u64>, k: u64) -> bool {
        tree.get_or_insert(&k, || DeltaRecord::removed(k)).created
    }

    fn keys(tree: &DeltaTree<u64>) -> Vec<u64> {
        tree.records().iter().map(|r| *r.key()).collect()
    }

    /// Depth of the tree, checking on the way that every node is sorted,
    /// within its parent's separators and that all leaves share one depth.
    fn check_structure(tree: &DeltaTree<u64>) -> usize {
        fn walk(node: &Node<u64>, low: Option<u64>, high: Option<u64>) -> usize {
            let n = node.len();
            assert!(n >= 1, "no node is empty");
            let ks: Vec<u64> = (0..n).map(|i| *node.key_record(i).unwrap().key()).collect();
            assert!(
                (0..n).all(|i| node.prefixes[i].load(Ordering::Relaxed) == ks[i].ordered_prefix()),
                "every prefix is its key's"
            );
            assert!(
                ks.windows(2).all(|w| w[0] < w[1]),
                "node keys sorted: {ks:?}"
            );
            assert!(ks.iter().all(|&k| low.is_none_or(|l| k >= l)));
            assert!(ks.iter().all(|&k| high.is_none_or(|h| k < h)));
            if node.is_leaf() {
                return 1;
            }
            let depths: Vec<usize> = (0..=n)
                .map(|i| {
                    let lo = if i == 0 { low } else { Some(ks[i - 1]) };
                    let hi = if i == n { high } else { Some(ks[i]) };
                    walk(node.child(i).unwrap(), lo, hi)
                })
                .collect();
            assert!(depths.windows(2).all(|w| w[0] == w[1]), "balanced");
            depths[0] + 1
        }
        fn leaves<'a>(node: &'a Node<u64>, out: &mut Vec<&'a Node<u64>>) {
            if node.is_leaf() {
                out.push(node);
            } else {
                (0..=node.len()).for_each(|i| leaves(node.child(i).unwrap(), out));
            }
        }
        let Some((root, _)) = tree.root_snapshot() else {
            return 0;
        };
        let depth = walk(root, None, None);
        // The `next` chain visits the leaves in key order, and the last
        // leaf hint is the rightmost leaf or a stale one with a neighbour.
        let mut in_order = Vec::new();
        leaves(root, &mut in_order);
        let mut chained = vec![tree.leaf_for(None).unwrap().0];
        while let Some(next) = chained.last().unwrap().next_leaf() {
            chained.push(next);
        }
        assert!(
            in_order.len() == chained.len()
                && in_order.iter().zip(&chained).all(|(a, b)| ptr::eq(*a, *b)),
            "leaf chain in key order"
        );
        let hint = tree.last_leaf.load(Ordering::Relaxed);
        assert!(
            ptr::eq(hint, *chained.last().unwrap())
                // SAFETY: a leaf of the tree's arena, which outlives this call.
                || unsafe { hint.as_ref() }.is_some_and(|l| l.next_leaf().is_some()),
            "the hint is the rightmost leaf, or stale"
        );
        depth
    }

    #[test]
    fn a_leaf_is_288_bytes() {
        // The delta budget's per-entry overhead assumes this size.
        assert_eq!(std::mem::size_of::<Node<u64>>(), 288);
    }

    #[test]
    fn the_root_pointer_is_the_trees_first_word() {
        // `Group::prefetch_delta` requests the line this word starts.
        assert_eq!(std::mem::offset_of!(DeltaTree<u64>, root), 0);
        assert_eq!(std::mem::offset_of!(DeltaTree<Vec<u8>>, root), 0);
    }

    #[test]
    fn prefetching_from_past_a_leafs_length_requests_nothing() {
        // A cursor's slot can lie past its leaf's length by the time the
        // records after it are requested: a split halved the leaf after
        // the cursor's validation (the race loom found). Here a split
        // leaf is asked for every slot from the old full length on.
        let tree = DeltaTree::new();
        for k in 0..=FANOUT as u64 {
            insert(&tree, k);
        }
        let (first_leaf, _) = tree.leaf_for(None).unwrap();
        assert!(first_leaf.len() < FANOUT);
        for from in 0..=FANOUT + 1 {
            first_leaf.prefetch_records(from);
        }
    }

    #[test]
    fn empty_tree_answers_nothing() {
        let tree = DeltaTree::<u64>::new();
        assert!(tree.get(&0).is_none());
        assert!(tree.first_from(Bound::Unbounded).is_none());
        assert!(tree.first_from(Bound::Included(&u64::MAX)).is_none());
        assert!(tree.last_within(Bound::Unbounded).is_none());
        assert!(tree.last_within(Bound::Included(&0)).is_none());
        assert!(tree.records().is_empty());
        assert_eq!(check_structure(&tree), 0);
    }

    #[test]
    fn ascending_descending_and_extreme_keys_split_into_a_balanced_tree() {
        for keys_in in [
            (0..2000u64).collect::<Vec<_>>(),
            (0..2000u64).rev().collect(),
            (0..2000u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .collect(),
        ] {
            let tree = DeltaTree::new();
            for &k in &keys_in {
                assert!(insert(&tree, k));
                assert!(!insert(&tree, k), "second insert of {k} finds it");
            }
            assert!(insert(&tree, u64::MAX) != keys_in.contains(&u64::MAX));
            assert!(insert(&tree, 0) != keys_in.contains(&0));
            let mut expect: Vec<u64> = keys_in.clone();
            expect.extend([0, u64::MAX]);
            expect.sort_unstable();
            expect.dedup();
            assert_eq!(keys(&tree), expect);
            let depth = check_structure(&tree);
            assert!((3..=5).contains(&depth), "depth {depth} for 2002 keys");
            for &k in &expect {
                assert_eq!(tree.get(&k).map(|r| *r.key()), Some(k));
            }
            // Walking down by predecessors visits every key, across every
            // leaf boundary of a tree 3 to 5 levels deep.
            let mut down = Vec::new();
            let mut upper = Bound::Unbounded;
            while let Some(r) = tree.last_within(upper) {
                down.push(*r.key());
                upper = Bound::Excluded(r.key());
            }
            down.reverse();
            assert_eq!(down, expect);
        }
    }

    /// Leaves, left to right, and the keys each holds.
    fn leaf_sizes(tree: &DeltaTree<u64>) -> Vec<usize> {
        let mut sizes = Vec::new();
        let mut leaf = tree.leaf_for(None).map(|(leaf, _)| leaf);
        while let Some(l) = leaf {
            sizes.push(l.len());
            leaf = l.next_leaf();
        }
        sizes
    }

    #[test]
    fn ascending_inserts_append_to_the_last_leaf_and_fill_the_leaves() {
        let tree = DeltaTree::new();
        let evens: Vec<u64> = (0..2000u64).map(|i| i * 2).collect();
        for &k in &evens {
            assert!(insert(&tree, k));
            let last = tree.last_leaf.load(Ordering::Relaxed);
            // SAFETY: a leaf of the tree's arena, which lives as long as `tree`.
            let last = unsafe { last.as_ref() }.expect("a non-empty tree has a last leaf");
            assert!(last.next_leaf().is_none(), "the hint is the rightmost leaf");
            assert_eq!(
                last.key_record(last.len() - 1).map(|r| *r.key()),
                Some(k),
                "{k} went to the end of the last leaf"
            );
        }
        let sizes = leaf_sizes(&tree);
        // Every split of the rightmost leaf by an append keeps FANOUT - 2
        // keys, so only the last leaf is not nearly full (even splits
        // would leave 250 leaves of 8).
        assert!(sizes[..sizes.len() - 1].iter().all(|&n| n == FANOUT - 2));
        assert!((1..=FANOUT).contains(sizes.last().unwrap()));
        assert_eq!(sizes.iter().sum::<usize>(), 2000);
        assert_eq!(keys(&tree), evens);
        check_structure(&tree);
        // Keys below the last leaf's range or inside it take the descent
        // and land in place; one above every key appends again.
        let mut expect = evens;
        for k in [1u64, 1001, 3997, 3999, u64::MAX] {
            assert!(insert(&tree, k));
            assert!(!insert(&tree, k));
            expect.push(k);
        }
        expect.sort_unstable();
        assert_eq!(keys(&tree), expect);
        check_structure(&tree);
    }

    #[test]
    fn counts_are_exact_up_to_their_limit_and_stop_past_it() {
        let tree = DeltaTree::new();
        assert!(tree.is_empty());
        assert_eq!(tree.count_up_to(usize::MAX), 0);
        for k in (0..1000u64).rev() {
            insert(&tree, k * 3);
        }
        assert!(!tree.is_empty());
        assert_eq!(tree.count_up_to(usize::MAX), 1000);
        assert_eq!(tree.count_up_to(1000), 1000);
        for limit in [0, 1, 7, 8, 100, 999] {
            let count = tree.count_up_to(limit);
            // Past the limit by less than the last leaf it read.
            assert!(count > limit && count <= limit + FANOUT, "{limit}: {count}");
        }
        // While two writers insert, a count is never above what is there
        // by its end.
        std::thread::scope(|s| {
            for w in 0..2u64 {
                let tree = &tree;
                s.spawn(move || {
                    for k in 0..2000u64 {
                        insert(tree, 3000 + k * 2 + w);
                    }
                });
            }
            let mut last = 0;
            while last < 5000 {
                let count = tree.count_up_to(usize::MAX);
                assert!((1000..=5000).contains(&count), "{count}");
                last = count;
            }
        });
        assert_eq!(tree.count_up_to(usize::MAX), 5000);
    }

    #[test]
    fn a_split_that_gives_up_keeps_its_blank_node_for_the_next_split() {
        let tree = DeltaTree::new();
        for k in 0..FANOUT as u64 {
            insert(&tree, k * 10);
        }
        let nodes = || lock(&tree.nodes).len();
        let (root, v) = tree.root_snapshot().expect("one full leaf");
        assert!(root.is_leaf() && root.len() == FANOUT);
        let before = nodes();
        // A stale version: the split takes its blank nodes (a leaf, and an
        // inner node for the new root), fails to lock and keeps both.
        tree.split(None, root, v + 2, &Sought::new(&5));
        assert_eq!(nodes(), before + 2, "both taken before locking");
        assert!(
            tree.spare
                .iter()
                .all(|s| !s.load(Ordering::Relaxed).is_null())
        );
        assert_eq!(root.len(), FANOUT, "nothing changed");
        assert_eq!(
            tree.root.load(Ordering::Relaxed),
            ptr::from_ref(root).cast_mut()
        );
        // The next split uses the spares: no new node, none left over.
        tree.split(None, root, v, &Sought::new(&5));
        assert_eq!(nodes(), before + 2);
        assert!(
            tree.spare
                .iter()
                .all(|s| s.load(Ordering::Relaxed).is_null())
        );
        assert_eq!(check_structure(&tree), 2);
        let all: Vec<u64> = (0..FANOUT as u64).map(|k| k * 10).collect();
        assert_eq!(keys(&tree), all);
        // And the tree goes on growing from them.
        for k in 0..1000u64 {
            insert(&tree, k * 10 + 5);
        }
        assert_eq!(keys(&tree).len(), FANOUT + 1000);
        check_structure(&tree);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::tests::soak::proptest_cases(64)))]

        /// Mostly ascending inserts (each a small step above or below the
        /// largest key so far), where the append path and the descent
        /// alternate, agree with a `BTreeSet`.
        #[test]
        fn mostly_ascending_inserts_agree_with_btreeset(
            steps in proptest::collection::vec((0u64..6, 0u64..4), 0..700),
        ) {
            let tree = DeltaTree::new();
            let mut oracle = BTreeSet::new();
            let mut top = 1_000u64;
            for (up, back) in steps {
                top += up;
                let k = top - back;
                prop_assert_eq!(insert(&tree, k), oracle.insert(k));
                prop_assert_eq!(tree.get(&k).map(|r| *r.key()), Some(k));
            }
            prop_assert_eq!(keys(&tree), oracle.iter().copied().collect::<Vec<_>>());
            check_structure(&tree);
        }

        /// Oracle: inserts, point lookups, successor queries and the
        /// records above a key agree with a `BTreeSet`.
        #[test]
        fn agrees_with_btreeset(
            ops in proptest::collection::vec((0u8..4, 0u64..600), 0..700),
        ) {
            let tree = DeltaTree::new();
            let mut oracle = BTreeSet::new();
            for (op, k) in ops {
                match op {
                    0 | 1 => prop_assert_eq!(insert(&tree, k), oracle.insert(k)),
                    2 => prop_assert_eq!(tree.get(&k).map(|r| *r.key()), oracle.get(&k).copied()),
                    _ => {
                        let got = tree.first_from(Bound::Included(&k)).map(|r| *r.key());
                        prop_assert_eq!(got, oracle.range(k..).next().copied());
                        let got = tree.first_from(Bound::Excluded(&k)).map(|r| *r.key());
                        prop_assert_eq!(got, oracle.range(k + 1..).next().copied());
                        let above: Vec<u64> =
                            tree.records_above(&k).iter().map(|r| *r.key()).collect();
                        prop_assert_eq!(above, oracle.range(k + 1..).copied().collect::<Vec<_>>());
                        let got = tree.last_within(Bound::Included(&k)).map(|r| *r.key());
                        prop_assert_eq!(got, oracle.range(..=k).next_back().copied());
                        let got = tree.last_within(Bound::Excluded(&k)).map(|r| *r.key());
                        prop_assert_eq!(got, oracle.range(..k).next_back().copied());
                        // Cursors walk from the same places, across leaves.
                        let forward: Vec<u64> =
                            std::iter::successors(tree.seek(Bound::Included(&k)), |&c| tree.next(c))
                                .take(40)
                                .map(|c| *c.record().key())
                                .collect();
                        prop_assert_eq!(forward, oracle.range(k..).take(40).copied().collect::<Vec<_>>());
                        let backward: Vec<u64> =
                            std::iter::successors(tree.seek_last(Bound::Included(&k)), |&c| tree.prev(c))
                                .take(40)
                                .map(|c| *c.record().key())
                                .collect();
                        prop_assert_eq!(
                            backward,
                            oracle.range(..=k).rev().take(40).copied().collect::<Vec<_>>()
                        );
                    }
                }
            }
            prop_assert_eq!(keys(&tree), oracle.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(
                tree.first_from(Bound::Unbounded).map(|r| *r.key()),
                oracle.first().copied()
            );
            prop_assert_eq!(
                tree.last_within(Bound::Unbounded).map(|r| *r.key()),
                oracle.last().copied()
            );
            check_structure(&tree);
        }

        /// Cursors moved between inserts that change (shift, split) the
        /// leaf they were read from: each step still gives the neighbour
        /// of the cursor's key among the keys present at that step.
        #[test]
        fn cursors_step_past_inserts_into_their_leaf(
            initial in proptest::collection::btree_set(0u64..400, 1..120),
            steps in proptest::collection::vec((any::<bool>(), 0u64..400), 1..80),
            from in 0u64..400,
        ) {
            for forward in [true, false] {
                let tree = DeltaTree::new();
                let mut oracle = initial.clone();
                for &k in &initial {
                    insert(&tree, k);
                }
                let mut cursor = if forward {
                    tree.seek(Bound::Included(&from))
                } else {
                    tree.seek_last(Bound::Included(&from))
                };
                for &(also_insert, k) in &steps {
                    let Some(at) = cursor else { break };
                    if also_insert {
                        prop_assert_eq!(insert(&tree, k), oracle.insert(k));
                    }
                    let key = *at.record().key();
                    let (got, want) = if forward {
                        (tree.next(at), oracle.range(key + 1..).next().copied())
                    } else {
                        (tree.prev(at), oracle.range(..key).next_back().copied())
                    };
                    prop_assert_eq!(got.map(|c| *c.record().key()), want);
                    cursor = got;
                }
            }
        }

        /// Oracle, with keys whose prefixes tie: byte strings made of one
        /// of three heads (8 bytes, 8 bytes sharing the first, and 2 bytes,
        /// whose zero-padded prefix ties with the same head followed by
        /// zero bytes) and a short tail, inserted in random order and
        /// then ascending (the append path), so that the searches must
        /// read the records wherever prefixes are equal.
        #[test]
        fn agrees_with_btreeset_where_prefixes_tie(
            ops in proptest::collection::vec(
                (0u8..4, 0usize..3, proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(255)], 0..4)),
                0..400,
            ),
            ascending in proptest::collection::vec(
                (0usize..3, proptest::collection::vec(prop_oneof![Just(0u8), Just(1), Just(255)], 0..4)),
                0..200,
            ),
        ) {
            const HEADS: [&[u8]; 3] = [b"abcdefgh", b"abcdefgi", b"ab"];
            let key = |head: usize, tail: &[u8]| [HEADS[head], tail].concat();
            let tree = DeltaTree::<Vec<u8>>::new();
            let mut oracle = BTreeSet::new();
            let insert = |k: &Vec<u8>| {
                tree.get_or_insert(k, || DeltaRecord::removed(k.clone())).created
            };
            for (op, head, tail) in ops {
                let k = key(head, &tail);
                match op {
                    0 | 1 => prop_assert_eq!(insert(&k), oracle.insert(k.clone())),
                    2 => prop_assert_eq!(tree.get(&k).map(|r| r.key().clone()), oracle.get(&k).cloned()),
                    _ => {
                        let got = tree.first_from(Bound::Included(&k)).map(|r| r.key().clone());
                        prop_assert_eq!(got, oracle.range(k.clone()..).next().cloned());
                        let got = tree.first_from(Bound::Excluded(&k)).map(|r| r.key().clone());
                        let want = oracle
                            .range((Bound::Excluded(k.clone()), Bound::Unbounded))
                            .next()
                            .cloned();
                        prop_assert_eq!(got, want);
                        let above: Vec<Vec<u8>> =
                            tree.records_above(&k).iter().map(|r| r.key().clone()).collect();
                        let want: Vec<Vec<u8>> = oracle
                            .range((Bound::Excluded(k.clone()), Bound::Unbounded))
                            .cloned()
                            .collect();
                        prop_assert_eq!(above, want);
                        let got = tree.last_within(Bound::Included(&k)).map(|r| r.key().clone());
                        prop_assert_eq!(got, oracle.range(..=k.clone()).next_back().cloned());
                        let got = tree.last_within(Bound::Excluded(&k)).map(|r| r.key().clone());
                        prop_assert_eq!(got, oracle.range(..k.clone()).next_back().cloned());
                    }
                }
            }
            let mut ascending: Vec<Vec<u8>> =
                ascending.iter().map(|(head, tail)| key(*head, tail)).collect();
            ascending.sort();
            for k in ascending {
                prop_assert_eq!(insert(&k), oracle.insert(k.clone()));
                prop_assert_eq!(tree.get(&k).map(|r| r.key().clone()), Some(k));
            }
            let got: Vec<Vec<u8>> = tree.records().iter().map(|r| r.key().clone()).collect();
            prop_assert_eq!(got, oracle.iter().cloned().collect::<Vec<_>>());
        }
    }

    /// Runs `writer(t)` on a thread for each `t` in `threads` (each
    /// returns the keys it created) beside a thread calling `reader` until
    /// they are done, then checks that every key of `0..count` was created
    /// exactly once and that the tree holds them, sorted and balanced.
    fn writers_beside_reader(
        count: u64,
        threads: &[u64],
        writer: impl Fn(&DeltaTree<u64>, u64) -> Vec<u64> + Sync,
        reader: impl Fn(&DeltaTree<u64>) + Sync,
    ) {
        let tree = &DeltaTree::new();
        let done = AtomicBool::new(false);
        let mut created: Vec<u64> = std::thread::scope(|s| {
            let writers: Vec<_> = threads
                .iter()
                .map(|&t| {
                    let writer = &writer;
                    s.spawn(move || writer(tree, t))
                })
                .collect();
            let reader = s.spawn(|| {
                let mut rounds = 0u64;
                while !done.load(StdOrdering::Acquire) || rounds == 0 {
                    reader(tree);
                    rounds += 1;
                }
            });
            let created = writers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect();
            done.store(true, StdOrdering::Release);
            reader.join().unwrap();
            created
        });
        created.sort_unstable();
        let all: Vec<u64> = (0..count).collect();
        assert_eq!(created, all, "every key created exactly once");
        assert_eq!(keys(tree), all);
        check_structure(tree);
    }

    /// Three writers append interleaved ascending keys (two of them the
    /// same keys) while a reader scans: every key is created exactly once,
    /// found afterwards, and the tree stays sorted and balanced.
    #[test]
    fn concurrent_appenders_race_on_the_last_leaf() {
        const KEYS: u64 = 30_000;
        writers_beside_reader(
            KEYS,
            &[0, 1, 1],
            |tree, t| {
                let mine: Vec<u64> = (t..KEYS).step_by(2).filter(|&k| insert(tree, k)).collect();
                for k in (t..KEYS).step_by(2) {
                    assert_eq!(tree.get(&k).map(|r| *r.key()), Some(k));
                }
                mine
            },
            |tree| {
                // Keys are never removed: a later snapshot holds every key
                // of an earlier one.
                let first = keys(tree);
                let second = keys(tree);
                assert!(first.windows(2).all(|w| w[0] < w[1]));
                assert!(first.iter().all(|k| second.binary_search(k).is_ok()));
            },
        );
    }

    /// Records per arena: the shared one, then each lane (empty if the
    /// tree has none).
    fn arena_lengths<K: Ord>(tree: &DeltaTree<K>) -> (usize, Vec<usize>) {
        let shared = lock(&tree.records).len();
        // SAFETY: as in `alloc_record`.
        let lanes = unsafe { tree.lanes.load(Ordering::Acquire).as_ref() };
        let lanes = lanes.map_or(Vec::new(), |l| l.iter().map(|l| lock(&l.0).len()).collect());
        (shared, lanes)
    }

    /// A writer that finds the shared arena held makes the lanes and
    /// allocates in its own; from then on every record goes to a lane.
    #[test]
    fn a_writer_finding_the_arena_held_moves_records_to_lanes() {
        let tree = DeltaTree::<u64>::new();
        assert!(insert(&tree, 1));
        assert_eq!(arena_lengths(&tree), (1, vec![]));
        let held = lock(&tree.records);
        std::thread::scope(|s| {
            s.spawn(|| assert!(insert(&tree, 2)));
        });
        drop(held);
        assert!(insert(&tree, 3));
        let (shared, lanes) = arena_lengths(&tree);
        assert_eq!((shared, lanes.iter().sum::<usize>()), (1, 2), "{lanes:?}");
        assert_eq!(keys(&tree), [1, 2, 3]);
    }

    /// Eight writers insert into one tree with lanes, every key by two of
    /// them (the loser's record stays unlinked in its lane): the records
    /// land in more than one lane, every key is linked once, and dropping
    /// the tree drops every record made, linked or not.
    #[test]
    fn records_of_every_lane_are_kept_until_the_tree_drops() {
        use std::sync::atomic::AtomicIsize;

        static LIVE: AtomicIsize = AtomicIsize::new(0);
        /// A key that counts its live copies, with a coarse prefix (one
        /// per 16 keys), so the racing writers' searches also compare
        /// records wherever prefixes tie.
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
        struct Counted(u64);
        impl Counted {
            fn new(k: u64) -> Self {
                LIVE.fetch_add(1, StdOrdering::Relaxed);
                Counted(k)
            }
        }
        impl Clone for Counted {
            fn clone(&self) -> Self {
                Counted::new(self.0)
            }
        }
        impl Drop for Counted {
            fn drop(&mut self) {
                LIVE.fetch_sub(1, StdOrdering::Relaxed);
            }
        }
        impl Key for Counted {
            const ENCODED_WIDTH: Option<usize> = Some(8);
            fn encode_le(&self, out: &mut Vec<u8>) {
                self.0.encode_le(out);
            }
            fn decode_le(bytes: &[u8]) -> lidx_core::Result<(Self, usize)> {
                u64::decode_le(bytes).map(|(k, n)| (Counted::new(k), n))
            }
            fn to_f64(&self) -> f64 {
                self.0.to_f64()
            }
            fn offset_from(&self, origin: &Self) -> f64 {
                self.0.offset_from(&origin.0)
            }
            fn ordered_prefix(&self) -> u64 {
                self.0 / 16
            }
        }

        const WRITERS: u64 = 8;
        const KEYS: u64 = 4_000;
        let tree = DeltaTree::<Counted>::new();
        tree.record_lanes();
        let made: u64 = std::thread::scope(|s| {
            let tree = &tree;
            let writers: Vec<_> = (0..WRITERS)
                .map(|t| {
                    s.spawn(move || {
                        // Writer t takes keys k with k % 4 == t % 4, so
                        // each key has two writers racing for it.
                        let mut made = 0u64;
                        for k in (t % 4..KEYS).step_by(4) {
                            tree.get_or_insert(&Counted::new(k), || {
                                made += 1;
                                DeltaRecord::live(Counted::new(k), k)
                            });
                        }
                        made
                    })
                })
                .collect();
            writers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        let linked: Vec<u64> = tree.records().iter().map(|r| r.key().0).collect();
        assert_eq!(
            linked,
            (0..KEYS).collect::<Vec<_>>(),
            "each key linked once, in order"
        );
        let (shared, lanes) = arena_lengths(&tree);
        assert_eq!(shared, 0);
        assert_eq!(lanes.iter().sum::<usize>() as u64, made, "{lanes:?}");
        assert!(
            lanes.iter().filter(|&&n| n > 0).count() >= 2,
            "writers on distinct threads share a lane: {lanes:?}"
        );
        assert_eq!(LIVE.load(StdOrdering::Relaxed), made as isize);
        drop(tree);
        assert_eq!(LIVE.load(StdOrdering::Relaxed), 0, "every record dropped");
    }

    /// Writers race to create overlapping keys while readers check that a
    /// key, once created, is always found and that scans stay sorted.
    #[test]
    fn concurrent_inserts_and_readers() {
        const KEYS: u64 = 20_000;
        writers_beside_reader(
            KEYS,
            &[0, 1, 2],
            |tree, t| {
                let mut mine = Vec::new();
                for i in 0..KEYS {
                    // Overlapping orders: each key is raced by all three.
                    let k = (i * (2 * t + 1) * 7919) % KEYS;
                    if insert(tree, k) {
                        mine.push(k);
                    }
                    assert_eq!(tree.get(&k).map(|r| *r.key()), Some(k));
                }
                mine
            },
            |tree| {
                let snapshot = keys(tree);
                assert!(
                    snapshot.windows(2).all(|w| w[0] < w[1]),
                    "scan sorted, no repeats"
                );
                // Everything seen in the snapshot stays findable.
                for &k in snapshot.iter().step_by(97) {
                    assert_eq!(tree.get(&k).map(|r| *r.key()), Some(k));
                    let next = tree.first_from(Bound::Excluded(&k)).map(|r| *r.key());
                    assert!(next.is_none_or(|n| n > k));
                    // Keys are never removed: the predecessor of `k + 1`
                    // is `k`, and of `k` some smaller key, however the
                    // leaves split meanwhile.
                    let at = tree.last_within(Bound::Included(&k)).map(|r| *r.key());
                    assert_eq!(at, Some(k));
                    let below = tree.last_within(Bound::Excluded(&k)).map(|r| *r.key());
                    assert!(below.is_none_or(|b| b < k));
                    assert!(below.is_some() || k == snapshot[0]);
                }
            },
        );
    }

    #[test]
    fn string_keys() {
        let tree = DeltaTree::<Vec<u8>>::new();
        for i in (0..500u32).rev() {
            let k = format!("key-{i:05}").into_bytes();
            assert!(
                tree.get_or_insert(&k, || DeltaRecord::removed(k.clone()))
                    .created
            );
        }
        let got: Vec<Vec<u8>> = tree.records().iter().map(|r| r.key().clone()).collect();
        assert_eq!(got.len(), 500);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        let probe = b"key-00100x".to_vec();
        assert_eq!(
            tree.first_from(Bound::Included(&probe))
                .map(|r| r.key().clone()),
            Some(b"key-00101".to_vec())
        );
    }
}

#[cfg(all(test, xindex_loom))]
mod loom_tests {
    use crate::sync::loom_model as model;
    use loom::sync::Arc;
    use loom::thread;

    use super::*;

    fn insert(tree: &DeltaTree<u64>, k: u64) -> bool {
        tree.get_or_insert(&k, || DeltaRecord::removed(k)).created
    }

    /// Runs `a` and `b` on two spawned threads over a tree holding `keys`
    /// and returns both results. Both sides are spawned: with the model's
    /// main thread as one side, loom 0.7 explored a single interleaving of
    /// these models (and so missed a planted bug that it catches this way).
    fn race<A: Send + 'static, B: Send + 'static>(
        keys: &[u64],
        a: impl FnOnce(&DeltaTree<u64>) -> A + Send + 'static,
        b: impl FnOnce(&DeltaTree<u64>) -> B + Send + 'static,
    ) -> (Arc<DeltaTree<u64>>, A, B) {
        let tree = Arc::new(DeltaTree::new());
        for &k in keys {
            insert(&tree, k);
        }
        let ta = {
            let tree = tree.clone();
            thread::spawn(move || a(&tree))
        };
        let tb = {
            let tree = tree.clone();
            thread::spawn(move || b(&tree))
        };
        let (a, b) = (ta.join().unwrap(), tb.join().unwrap());
        (tree, a, b)
    }

    fn key_of(r: Option<&DeltaRecord<u64>>) -> Option<u64> {
        r.map(|r| *r.key())
    }

    /// Two inserts if absent of one new key through `Delta::write`: one
    /// creates the record, the other finds it through the tree and its
    /// exchange fails on the winner's value; a budget counts one entry.
    #[test]
    fn loom_inserts_if_absent_race() {
        use crate::budget::DeltaBudget;
        use crate::delta::Delta;
        use crate::record::Write;
        model(3, || {
            let delta = Arc::new(Delta::new());
            let budget = Arc::new(DeltaBudget::new(usize::MAX));
            for k in [10, 30] {
                delta.write(&k, Write::Put(k), &budget);
            }
            let before = budget.used();
            let try_insert = |value| {
                let (delta, budget) = (delta.clone(), budget.clone());
                thread::spawn(move || {
                    let op = Write::Exchange {
                        current: None,
                        new: Some(value),
                    };
                    delta.write(&20, op, &budget).previous
                })
            };
            let (a, b) = (try_insert(1), try_insert(2));
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            let winner = match (a, b) {
                (None, Some(1)) => 1,
                (Some(2), None) => 2,
                other => panic!("both or neither inserted: {other:?}"),
            };
            assert_eq!(delta.get(&20).and_then(|c| c.read()), Some(winner));
            assert_eq!(budget.used() - before, crate::budget::entry_bytes(&20u64));
        });
    }

    /// A reader racing an insert that shifts its key finds the key, and
    /// the new key's neighbour query sees it either not at all or whole.
    #[test]
    fn loom_reader_during_shift() {
        model(3, || {
            let (tree, (), (found, next)) = race(
                &[10, 30, 40],
                |t| assert!(insert(t, 20)),
                |t| {
                    (
                        key_of(t.get(&30)),
                        key_of(t.first_from(Bound::Excluded(&10))),
                    )
                },
            );
            assert_eq!(found, Some(30));
            assert!(matches!(next, Some(20 | 30)), "successor of 10: {next:?}");
            assert_eq!(key_of(tree.get(&20)), Some(20));
        });
    }

    /// A reader racing a leaf split (and the root split above it) still
    /// finds a key that moves to the new right leaf. Planting a bug (a
    /// `get` that skips its validation) makes this model fail.
    #[test]
    fn loom_reader_during_split() {
        model(3, || {
            let (tree, (), (found, last)) = race(
                &[10, 20, 30, 40],
                |t| assert!(insert(t, 50)),
                |t| {
                    (
                        key_of(t.get(&40)),
                        key_of(t.first_from(Bound::Excluded(&30))),
                    )
                },
            );
            assert_eq!(found, Some(40));
            assert_eq!(last, Some(40));
            let keys: Vec<u64> = tree.records().iter().map(|r| *r.key()).collect();
            assert_eq!(keys, vec![10, 20, 30, 40, 50]);
        });
    }

    /// Predecessor queries racing an insert that shifts their leaf and
    /// one that splits it (and the root above it): the keys present
    /// before are always found, the new key either not at all or whole.
    #[test]
    fn loom_predecessor_during_shift_and_split() {
        model(3, || {
            let (_, (), (below_30, at_40)) = race(
                &[10, 30, 40],
                |t| assert!(insert(t, 20)),
                |t| {
                    (
                        key_of(t.last_within(Bound::Excluded(&30))),
                        key_of(t.last_within(Bound::Included(&40))),
                    )
                },
            );
            assert!(matches!(below_30, Some(10 | 20)), "below 30: {below_30:?}");
            assert_eq!(at_40, Some(40));
        });
        model(3, || {
            let (tree, (), (below_40, last)) = race(
                &[10, 20, 30, 40],
                |t| assert!(insert(t, 50)),
                |t| {
                    (
                        key_of(t.last_within(Bound::Excluded(&40))),
                        key_of(t.last_within(Bound::Unbounded)),
                    )
                },
            );
            assert_eq!(below_40, Some(30));
            assert!(matches!(last, Some(40 | 50)), "last: {last:?}");
            assert_eq!(key_of(tree.last_within(Bound::Excluded(&50))), Some(40));
        });
    }

    /// Cursor walks (forwards with `next`, backwards with `prev`) racing
    /// an insert that shifts their leaf and one that splits it (and the
    /// root above it): every key present before is met once, in order,
    /// and the new key at most once, in its place. A cursor step that
    /// trusted its leaf without validating the version fails this model.
    #[test]
    fn loom_cursor_walks_during_shift_and_split() {
        fn walk(t: &DeltaTree<u64>, forward: bool) -> Vec<u64> {
            let first = if forward {
                t.seek(Bound::Unbounded)
            } else {
                t.seek_last(Bound::Unbounded)
            };
            let mut keys: Vec<u64> =
                std::iter::successors(first, |&c| if forward { t.next(c) } else { t.prev(c) })
                    .map(|c| *c.record().key())
                    .collect();
            if !forward {
                keys.reverse();
            }
            keys
        }
        for (before, new) in [(&[10, 30, 40][..], 20), (&[10, 20, 30, 40][..], 50)] {
            for forward in [true, false] {
                model(3, move || {
                    let (_, (), walked) = race(
                        before,
                        move |t| assert!(insert(t, new)),
                        move |t| walk(t, forward),
                    );
                    let mut with_new: Vec<u64> = before.iter().copied().chain([new]).collect();
                    with_new.sort_unstable();
                    assert!(
                        walked == before || walked == with_new,
                        "walked {walked:?} (forward: {forward}) while {new} went in"
                    );
                });
            }
        }
    }

    /// A key whose prefix is one per 20 keys: searches decide some
    /// comparisons by prefix and read the record for the rest.
    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Coarse(u64);

    impl Key for Coarse {
        const ENCODED_WIDTH: Option<usize> = Some(8);
        fn encode_le(&self, out: &mut Vec<u8>) {
            self.0.encode_le(out);
        }
        fn decode_le(bytes: &[u8]) -> lidx_core::Result<(Self, usize)> {
            u64::decode_le(bytes).map(|(k, n)| (Coarse(k), n))
        }
        fn to_f64(&self) -> f64 {
            self.0.to_f64()
        }
        fn offset_from(&self, origin: &Self) -> f64 {
            self.0.offset_from(&origin.0)
        }
        fn ordered_prefix(&self) -> u64 {
            self.0 / 20
        }
    }

    /// The reader and writer of [`loom_reader_during_shift`] and
    /// [`loom_reader_during_split`] with [`Coarse`] keys, whose prefixes
    /// tie in pairs: a torn read may pair a prefix with another slot's
    /// record, and the reader must still find its key.
    fn tied_race(keys: &'static [u64], new: u64, read: u64, after: u64) {
        model(3, move || {
            let insert = |t: &DeltaTree<Coarse>, k: u64| {
                t.get_or_insert(&Coarse(k), || DeltaRecord::removed(Coarse(k)))
                    .created
            };
            let tree = Arc::new(DeltaTree::new());
            for &k in keys {
                insert(&tree, k);
            }
            let writer = {
                let tree = tree.clone();
                thread::spawn(move || assert!(insert(&tree, new)))
            };
            let reader = {
                let tree = tree.clone();
                thread::spawn(move || {
                    (
                        tree.get(&Coarse(read)).map(|r| r.key().0),
                        tree.first_from(Bound::Excluded(&Coarse(after)))
                            .map(|r| r.key().0),
                    )
                })
            };
            writer.join().unwrap();
            let (found, next) = reader.join().unwrap();
            assert_eq!(found, Some(read));
            let successors: Vec<u64> = keys
                .iter()
                .copied()
                .chain([new])
                .filter(|&k| k > after)
                .collect();
            let first_old = keys.iter().copied().find(|&k| k > after);
            assert!(
                next == first_old || next == successors.iter().copied().min(),
                "successor of {after}: {next:?}"
            );
            let mut all: Vec<u64> = keys.iter().copied().chain([new]).collect();
            all.sort_unstable();
            let got: Vec<u64> = tree.records().iter().map(|r| r.key().0).collect();
            assert_eq!(got, all);
        });
    }

    #[test]
    fn loom_reader_during_shift_with_tied_prefixes() {
        // Prefixes 0, 1, 1 (20 and 30), 2.
        tied_race(&[10, 30, 40], 20, 30, 10);
    }

    #[test]
    fn loom_reader_during_split_with_tied_prefixes() {
        // Prefixes 0, 1, 1, 2, 2 (40 and 50); the leaf of four splits.
        tied_race(&[10, 20, 30, 40], 50, 40, 30);
    }

    /// Two writers racing to create `key` in a tree holding `keys`:
    /// exactly one creates it, and both get the same record.
    fn one_creator(keys: &'static [u64], key: u64) {
        model(3, move || {
            let create = move |t: &DeltaTree<u64>| {
                let e = t.get_or_insert(&key, || DeltaRecord::removed(key));
                (e.created, ptr::from_ref(e.record) as usize)
            };
            let (tree, (a_created, a_at), (b_created, b_at)) = race(keys, create, create);
            assert!(a_created != b_created, "exactly one creator");
            assert_eq!(a_at, b_at);
            assert_eq!(tree.records().len(), keys.len() + 1);
        });
    }

    /// Two writers racing to create a key below the last leaf's first
    /// key (on the descent).
    #[test]
    fn loom_one_creator_per_key() {
        one_creator(&[10, 30], 5);
    }

    /// Two appenders racing on the last leaf (together they fill it) and a
    /// reader of a key in it: no key is lost or doubled, the reader finds
    /// its key, and an append after that splits the full leaf.
    #[test]
    fn loom_racing_appends() {
        model(3, || {
            let (tree, (), (found, ())) = race(
                &[10, 20],
                |t| assert!(insert(t, 30)),
                |t| {
                    let found = key_of(t.get(&20));
                    assert!(insert(t, 40));
                    (found, ())
                },
            );
            assert_eq!(found, Some(20));
            let keys: Vec<u64> = tree.records().iter().map(|r| *r.key()).collect();
            assert_eq!(keys, vec![10, 20, 30, 40]);
            assert!(insert(&tree, 50), "an append after a full leaf splits it");
            let keys: Vec<u64> = tree.records().iter().map(|r| *r.key()).collect();
            assert_eq!(keys, vec![10, 20, 30, 40, 50]);
        });
    }

    /// Two appenders racing over a full root leaf, one of them splitting
    /// it (a root split: the new root is published unlocked, and the hint
    /// moves to the new right leaf), and a reader of its last key: no key
    /// is lost or doubled, the reader finds its key, and the hint ends on
    /// the rightmost leaf or a stale leaf with a neighbour.
    #[test]
    fn loom_appends_racing_a_root_split() {
        model(2, || {
            let (tree, (), (found, ())) = race(
                &[10, 20, 30, 40],
                |t| assert!(insert(t, 50)),
                |t| {
                    assert!(insert(t, 60));
                    (key_of(t.get(&40)), ())
                },
            );
            assert_eq!(found, Some(40));
            let keys: Vec<u64> = tree.records().iter().map(|r| *r.key()).collect();
            assert_eq!(keys, vec![10, 20, 30, 40, 50, 60]);
            let hint = tree.last_leaf.load(Ordering::Relaxed);
            // SAFETY: a leaf of the tree's arena, which `tree` keeps alive.
            let hint = unsafe { hint.as_ref() }.expect("a hint");
            let last = hint.key_record(hint.len() - 1).map(|r| *r.key());
            assert!(last == Some(60) || hint.next_leaf().is_some());
        });
    }

    /// Two writers creating the same key above every key on the append
    /// path: one creates it, both get its record.
    #[test]
    fn loom_one_appender_per_key() {
        one_creator(&[10, 20], 30);
    }

    /// Two writers splitting the same full leaf: no key is lost or doubled.
    #[test]
    fn loom_concurrent_splits() {
        model(3, || {
            let (tree, (), ()) = race(
                &[10, 20, 30, 40],
                |t| assert!(insert(t, 25)),
                |t| assert!(insert(t, 50)),
            );
            let keys: Vec<u64> = tree.records().iter().map(|r| *r.key()).collect();
            assert_eq!(keys, vec![10, 20, 25, 30, 40, 50]);
        });
    }
}
