//! The shared state behind an [`XIndex`](crate::XIndex) and the
//! foreground operations (paper Algorithm 2): get, put, remove and the
//! batch collection behind range scans.
//!
//! Every operation pins the index's epoch collector once, routes through
//! the current root to a group and finishes inside that pin. Lookups take
//! no lock and allocate nothing: a root model, a search from the group
//! model's prediction, one seqlock read, and only on a miss in the array
//! the delta indexes.

use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_epoch::{self as epoch, Atomic, Guard, Shared};
use crossbeam_utils::CachePadded;
use lidx_core::Key;
use lidx_core::search::partition_by;
use parking_lot::Mutex;

use crate::budget::DeltaBudget;
use crate::config::Config;
use crate::delta::{Delta, Upserted};
use crate::delta_tree::Cursor;
use crate::group::{Group, Prediction};
use crate::hooks::Hooks;
use crate::maintenance::{NOT_QUIET, Pass};
use crate::node_slab::{NodeSlab, SlabBox};
use crate::pages::Pages;
use crate::reclaim::Reclaimer;
use crate::record::{CellBlock, Outcome, Record, SLOTS, Write, record_at};
use crate::root::Root;
use crate::shard;
use crate::sync::Backoff;
use crate::value::Value;

/// Keys per software-pipelined batch of [`Inner::get_many`]: enough misses
/// in flight to fill the memory system, few enough that the first key's
/// lines are still cached when its last stage runs.
const GET_BATCH: usize = 16;

/// Maintenance event counters.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) compactions: AtomicU64,
    pub(crate) model_splits: AtomicU64,
    pub(crate) model_merges: AtomicU64,
    pub(crate) group_splits: AtomicU64,
    pub(crate) group_merges: AtomicU64,
    pub(crate) root_updates: AtomicU64,
    pub(crate) passes: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Live-key count split over cache lines, so writers on different threads
/// do not contend on one counter. Each shard counts keys added and keys
/// removed separately: their difference is the length, and their sum only
/// grows with every write that changes the set of keys, which tells the
/// maintenance thread whether anything happened since its last pass.
pub(crate) struct LenCounter {
    shards: [CachePadded<LenShard>; shard::SHARDS],
}

#[derive(Default)]
struct LenShard {
    added: AtomicU64,
    removed: AtomicU64,
}

impl LenCounter {
    fn new(initial: usize) -> Self {
        let counter = LenCounter {
            shards: std::array::from_fn(|_| CachePadded::new(LenShard::default())),
        };
        counter.shards[0]
            .added
            .store(initial as u64, Ordering::Relaxed);
        counter
    }

    fn shard(&self) -> &LenShard {
        &self.shards[shard::current()]
    }

    /// A key was added.
    fn added(&self) {
        self.shard().added.fetch_add(1, Ordering::Release);
    }

    /// A key was removed.
    fn removed(&self) {
        self.shard().removed.fetch_add(1, Ordering::Release);
    }

    pub(crate) fn get(&self) -> usize {
        let (added, removed) = self.totals();
        (added.wrapping_sub(removed) as i64).max(0) as usize
    }

    /// Keys added plus keys removed so far (wrapping): unchanged means no
    /// insert of a new key and no remove happened in between. The counts
    /// are bumped (Release) after the write itself and read here with
    /// Acquire, so a pass that counts a write also sees it.
    pub(crate) fn changes(&self) -> u64 {
        let (added, removed) = self.totals();
        added.wrapping_add(removed)
    }

    fn totals(&self) -> (u64, u64) {
        self.shards.iter().fold((0u64, 0u64), |(a, r), s| {
            (
                a.wrapping_add(s.added.load(Ordering::Acquire)),
                r.wrapping_add(s.removed.load(Ordering::Acquire)),
            )
        })
    }
}

/// Everything the foreground operations and the maintenance thread share.
pub(crate) struct Inner<K: Key> {
    /// The current root; replaced by root updates, never null.
    pub(crate) root: Atomic<Root<K>>,
    pub(crate) config: Config,
    /// Held for a whole maintenance pass: structural changes are serial,
    /// as in the paper's background threads "sharing no conflicts".
    pub(crate) maintenance: Mutex<()>,
    pub(crate) counters: Counters,
    pub(crate) len: LenCounter,
    /// Bytes of delta entries not yet compacted, against the configured budget.
    pub(crate) budget: DeltaBudget,
    pub(crate) hooks: Hooks,
    /// The index's own epoch collector: every operation pins it, and
    /// maintenance retires through it.
    pub(crate) reclaimer: Reclaimer,
    /// Origin of the maintenance clock (how long small deltas have waited).
    started: Instant,
    /// [`LenCounter::changes`] as the last pass found it, if that pass
    /// found nothing to do, left no delta waiting and began with nothing
    /// retired waiting to be freed; else `NOT_QUIET`.
    /// Lets an idle index's background thread skip its walks.
    pub(crate) quiet_at: AtomicU64,
    /// Set when a maintenance pass panicked. The pass may have left a
    /// group frozen without its `tmp_buf`, which inserts would wait for
    /// forever, so they and later passes panic instead (see
    /// [`XIndex::is_poisoned`](crate::XIndex::is_poisoned)).
    pub(crate) poisoned: AtomicBool,
    /// Where the groups' arrays are allocated.
    pub(crate) pages: Pages,
    /// Where the group nodes are allocated.
    pub(crate) nodes: Arc<NodeSlab<Group<K>>>,
}

/// Outcome of one routed attempt at a put.
pub(crate) enum Attempt {
    /// The put took effect.
    Done(Upserted),
    /// `buf` is frozen and `tmp_buf` not allocated yet (or the node is
    /// stale): unpin and route again (Algorithm 2, line 23).
    Retry,
    /// The key is new, and the put was told not to create keys.
    Refused,
}

impl<K: Key> Inner<K> {
    pub(crate) fn new(
        root: Root<K>,
        config: Config,
        len: usize,
        reclaimer: Reclaimer,
        pages: Pages,
        nodes: Arc<NodeSlab<Group<K>>>,
    ) -> Self {
        Inner {
            pages,
            nodes,
            reclaimer,
            root: Atomic::new(root),
            budget: DeltaBudget::new(config.delta_budget_bytes),
            config,
            maintenance: Mutex::new(()),
            counters: Counters::default(),
            len: LenCounter::new(len),
            hooks: Hooks::default(),
            started: Instant::now(),
            quiet_at: AtomicU64::new(NOT_QUIET),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Nanoseconds since the index was built: the maintenance clock.
    pub(crate) fn clock(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Retires a group node allocated in `nodes`: it is freed after an
    /// epoch barrier, by maintenance.
    ///
    /// # Safety
    ///
    /// As [`Reclaimer::retire`]: unlinked, retired once.
    pub(crate) unsafe fn retire_group(&self, group: Shared<'_, Group<K>>) {
        let node = NonNull::new(group.as_raw().cast_mut()).expect("a group node");
        // SAFETY: forwarded: every group node is allocated in `nodes`, and
        // this is its only owner now.
        let owner = unsafe { SlabBox::from_raw(node, Arc::clone(&self.nodes)) };
        // SAFETY: forwarded.
        unsafe { self.reclaimer.retire_owned(owner) };
    }

    /// The current root.
    #[inline]
    pub(crate) fn root<'g>(&self, guard: &'g Guard) -> &'g Root<K> {
        // SAFETY: the root is never null; a replaced root is reclaimed with
        // `Reclaimer::retire`, so it outlives every guard pinned before that.
        unsafe { self.root.load(Ordering::Acquire, guard).deref() }
    }

    lidx_core::x86_64_v3_twin! {
        /// `get`: array, then `buf`, then `tmp_buf` — the same order puts use,
        /// so an empty answer means the creating put has not committed (I3).
        ///
        /// The whole array path is forced inline: in a large binary (the `lidx`
        /// bench) the compiler otherwise left it as separate calls, which cost
        /// a fifth of `get`'s throughput (`docs/results/xindex-session12.md`).
        ///
        /// On a CPU with AVX2 the x86-64-v3 build runs, whose window counts
        /// take four keys per instruction and whose models' clamps select
        /// without branches. Lognormal 10M `lookup`, 1 thread: 1.65–1.72x ->
        /// 1.82–2.05x `btreemap` (`docs/results/xindex-session19.md`).
        #[inline(always)]
        pub(crate) fn get(&self, key: &K) -> Option<u64> => get_x86_64_v3, get_baseline, get_portable;
    }

    /// [`get`](Self::get) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn get_portable(&self, key: &K) -> Option<u64> {
        let guard = self.reclaimer.pin();
        let group = self.root(&guard).route(key, &guard);
        read_in_group(group, key)
    }

    lidx_core::x86_64_v3_twin! {
        /// `get` of every key of `keys`, appended to `out` in order, in
        /// software-pipelined batches: each stage (root and slot, group model,
        /// key search and value) runs for a whole batch before the next, so the
        /// cache misses of different keys overlap instead of following each
        /// other. One epoch pin per batch.
        pub(crate) fn get_many<V: Value>(&self, keys: &[K], out: &mut Vec<Option<V>>)
            => get_many_x86_64_v3, get_many_baseline, get_many_portable;
    }

    /// [`get_many`](Self::get_many) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn get_many_portable<V: Value>(&self, keys: &[K], out: &mut Vec<Option<V>>) {
        out.reserve(keys.len());
        for batch in keys.chunks(GET_BATCH) {
            let guard = self.reclaimer.pin();
            let root = self.root(&guard);
            let mut slots = [0usize; GET_BATCH];
            for (slot, key) in slots.iter_mut().zip(batch) {
                *slot = root.slot_prefetched(key, &guard);
            }
            let mut groups: [Option<&Group<K>>; GET_BATCH] = [None; GET_BATCH];
            let mut predicted = [Prediction { pos: 0, reach: 0 }; GET_BATCH];
            for (i, key) in batch.iter().enumerate() {
                let group = root.route_from(slots[i], key, &guard);
                predicted[i] = group.predict_prefetched(key);
                groups[i] = Some(group);
            }
            for (i, key) in batch.iter().enumerate() {
                let group = groups[i].expect("routed above");
                let word = read_record(group, group.record_near(key, predicted[i]), key);
                out.push(word.map(V::from_word));
            }
        }
    }

    lidx_core::x86_64_v3_twin! {
        /// `put` (upsert): returns the previous value.
        pub(crate) fn put(&self, key: &K, word: u64) -> Option<u64> => put_x86_64_v3, put_baseline, put_portable;
    }

    /// [`put`](Self::put) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn put_portable(&self, key: &K, word: u64) -> Option<u64> {
        self.put_with(key, word, false)
    }

    lidx_core::x86_64_v3_twin! {
        /// An insert of `key` only if it is absent: `None` if it was
        /// inserted, else the value found (nothing written).
        pub(crate) fn put_if_absent(&self, key: &K, word: u64) -> Option<u64> => put_if_absent_x86_64_v3, put_if_absent_baseline, put_if_absent_portable;
    }

    /// [`put_if_absent`](Self::put_if_absent) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn put_if_absent_portable(&self, key: &K, word: u64) -> Option<u64> {
        self.put_with(key, word, true)
    }

    lidx_core::x86_64_v3_twin! {
        /// Makes `key`'s value `new` (`None`: removed) only if it is
        /// `current` now (`None`: absent). `Ok` with the value found
        /// (`current`) if it wrote, `Err` with the value found otherwise.
        pub(crate) fn exchange(&self, key: &K, current: Option<u64>, new: Option<u64>) -> Result<Option<u64>, Option<u64>> => exchange_x86_64_v3, exchange_baseline, exchange_portable;
    }

    /// [`exchange`](Self::exchange) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn exchange_portable(
        &self,
        key: &K,
        current: Option<u64>,
        new: Option<u64>,
    ) -> Result<Option<u64>, Option<u64>> {
        if let (None, Some(word)) = (current, new) {
            // The one exchange that may create a record: the put's path.
            return match self.put_if_absent_portable(key, word) {
                None => Ok(None),
                found => Err(found),
            };
        }
        // Every other exchange writes only to a live record, so it takes
        // the remove's path, which never waits.
        let guard = self.reclaimer.pin();
        let group = self.root(&guard).route(key, &guard);
        self.exchange_existing(group, key, current, new)
    }

    /// An exchange that inserts nothing (`current` is a value, or `new` is
    /// `None`) on `group`, routed to inside the caller's pin.
    #[inline(always)]
    fn exchange_existing(
        &self,
        group: &Group<K>,
        key: &K,
        current: Option<u64>,
        new: Option<u64>,
    ) -> Result<Option<u64>, Option<u64>> {
        let found = try_write_existing(group, key, Write::Exchange { current, new });
        if found != current {
            return Err(found);
        }
        if found.is_some() && new.is_none() {
            self.len.removed();
        }
        Ok(found)
    }

    lidx_core::x86_64_v3_twin! {
        /// `fetch_update` on words: `f` maps the value found (`None`:
        /// absent) to the new one (`Some(None)` removes) or declines
        /// (`None`); `Ok` with the value replaced, `Err` with the value
        /// declined.
        pub(crate) fn update(&self, key: &K, f: &mut dyn FnMut(Option<u64>) -> Option<Option<u64>>) -> Result<Option<u64>, Option<u64>> => update_x86_64_v3, update_baseline, update_portable;
    }

    /// [`update`](Self::update) for the build's baseline target: a read,
    /// then exchanges until one succeeds or `f` declines. `f` runs with the
    /// thread unpinned. A closure that inserts into this index may wait
    /// for an epoch barrier (an insert over the delta budget runs a pass),
    /// which waits for every pinned thread: run inside the read's pin, it
    /// would wait for itself. A slow closure holds up no barrier either.
    /// (Reading and exchanging inside one pin saved a route per attempt,
    /// about a tenth of an increment's time, session 47; not worth a
    /// closure that must not write.)
    #[inline(always)]
    pub(crate) fn update_portable(
        &self,
        key: &K,
        f: &mut dyn FnMut(Option<u64>) -> Option<Option<u64>>,
    ) -> Result<Option<u64>, Option<u64>> {
        let mut current = self.get_portable(key);
        loop {
            let Some(new) = f(current) else {
                return Err(current);
            };
            match self.exchange_portable(key, current, new) {
                Ok(replaced) => return Ok(replaced),
                Err(now) => current = now,
            }
        }
    }

    /// [`put`](Self::put), or with `if_absent` [`put_if_absent`](Self::put_if_absent).
    #[inline(always)]
    fn put_with(&self, key: &K, word: u64, if_absent: bool) -> Option<u64> {
        let backoff = Backoff::new();
        loop {
            // A poisoned index cannot compact, so once its deltas are over
            // their budget it takes no new keys (updates still apply):
            // memory stays bounded even for a caller that catches the
            // panics and goes on inserting.
            let create = !self.poisoned.load(Ordering::Relaxed) || !self.budget.over();
            let guard = self.reclaimer.pin();
            let group = self.root(&guard).route_write(key, &guard);
            match try_put(group, key, word, if_absent, &self.budget, create) {
                Attempt::Done(done) => {
                    drop(guard);
                    if done.previous.is_none() {
                        self.len.added();
                    }
                    if done.over_budget {
                        self.relieve_delta_budget();
                    }
                    return done.previous;
                }
                Attempt::Refused => {
                    drop(guard);
                    refuse_new_key();
                }
                Attempt::Retry => {
                    // Unpin before waiting: maintenance allocates
                    // `tmp_buf` only after an epoch barrier that waits for
                    // us.
                    drop(guard);
                    self.panic_if_poisoned();
                    backoff.snooze();
                }
            }
        }
    }

    /// Panics if a maintenance pass panicked: what this thread would wait
    /// for may never come.
    #[cold]
    pub(crate) fn panic_if_poisoned(&self) {
        if self.poisoned.load(Ordering::Acquire) {
            panic!(
                "lidx-xindex: a maintenance pass panicked earlier, so this index is poisoned \
                 and can no longer compact or wait for a rebuild"
            );
        }
    }

    /// Backpressure for a writer whose (completed) insert left the deltas
    /// above their byte budget: run maintenance passes, or wait for the
    /// running one, until compaction has brought them back under it.
    /// Called unpinned, since a pass waits for every pinned thread.
    #[cold]
    fn relieve_delta_budget(&self) {
        Counters::bump(&self.budget.waits);
        while self.budget.over() {
            let serial = self.maintenance.lock();
            if self.budget.over() {
                self.maintain_locked(&serial, Pass::Full);
            }
        }
    }

    lidx_core::x86_64_v3_twin! {
        /// `remove`: returns the removed value.
        pub(crate) fn remove(&self, key: &K) -> Option<u64> => remove_x86_64_v3, remove_baseline, remove_portable;
    }

    /// [`remove`](Self::remove) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn remove_portable(&self, key: &K) -> Option<u64> {
        let guard = self.reclaimer.pin();
        let group = self.root(&guard).route(key, &guard);
        let removed = try_write_existing(group, key, Write::Remove);
        if removed.is_some() {
            self.len.removed();
        }
        removed
    }

    lidx_core::x86_64_v3_twin! {
        /// Appends up to `limit` live records with keys after `lower` and
        /// within `upper`, in key order. Returns where to resume, or `None`
        /// when the range is exhausted. The lines of `lookahead` records
        /// past the limit are requested with the start's: a range
        /// iterator's next batch then finds them loaded. `guess` is where
        /// to try the start first (where the previous fetch from the same
        /// place stopped, or [`ResumeGuess::NONE`]) and receives where this
        /// fetch stopped.
        ///
        /// Built for x86-64-v3 like `get`, with the start's search inlined:
        /// the root's and the array's counts then compare four keys per
        /// instruction. A one-record scan of osm thinned to 43K keys (in
        /// cache) went from 123-125 to 107-110 ns (`examples/scan_lengths.rs`,
        /// session 54); out of cache the search's miss hides most of it.
        pub(crate) fn collect<V: Value, C: Collector<K, V>>(&self, lower: Bound<K>, upper: &Bound<K>, limit: usize, lookahead: usize, out: &mut C, guess: &mut ResumeGuess) -> Option<Bound<K>>
            => collect_x86_64_v3, collect_baseline, collect_portable;
    }

    /// [`collect`](Self::collect) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn collect_portable<V: Value, C: Collector<K, V>>(
        &self,
        lower: Bound<K>,
        upper: &Bound<K>,
        limit: usize,
        lookahead: usize,
        out: &mut C,
        guess: &mut ResumeGuess,
    ) -> Option<Bound<K>> {
        if limit == 0 {
            return Some(lower);
        }
        let guard = self.reclaimer.pin();
        let root = self.root(&guard);
        let mut lower = lower;
        let mut taken = 0usize;
        let out_start = out.count();
        loop {
            let (slot, group, group_end) = match &lower {
                Bound::Included(k) | Bound::Excluded(k) => {
                    root.route_bounded_from(k, guess.slot, &guard)
                }
                Bound::Unbounded => {
                    let (group, end) = root.route_first(&guard);
                    (0, group, end)
                }
            };
            group.prefetch_delta();
            let in_range = |k: &K| group_end.is_none_or(|end| k < end) && below_upper(k, upper);
            let lower_ref = bound_ref(&lower);
            let (array_len, tail_len) = group.lengths();
            let end = array_len + tail_len;
            // The run's lines go out with the start's key window, not after
            // it: scans of 100 records took 9-18% less time on osm, books,
            // geolite2 and lognormal 10M (`scan_ab`, session 31). They are
            // not requested again once the start is found: that second
            // request (kept from before session 31) cost a scan of one
            // record on osm 10-20% of its time, in cache or not
            // (`examples/scan_lengths.rs`, session 54).
            let mut at = group.first_index(
                lower_ref,
                tail_len,
                (limit - taken).saturating_add(lookahead),
                guess.at,
            );
            let mut buf = group.buf.seek(lower_ref);
            let mut tmp = group.tmp().and_then(|t| t.seek(lower_ref));
            let (keys, cells) = group.arrays();
            loop {
                let buf_key = buf.map(|e| e.record().key()).filter(|k| in_range(k));
                let tmp_key = tmp.map(|e| e.record().key()).filter(|k| in_range(k));
                let first_buffered = match (buf_key, tmp_key) {
                    (Some(b), Some(t)) => Some(b.min(t)),
                    (b, t) => b.or(t),
                };
                // Array records before every buffered key need no merge:
                // copy that run straight from the slices (after a
                // compaction, with nothing buffered, this is the whole scan).
                // The run's end is found first, by a binary search of the
                // keys the limit can still take (their lines are already
                // requested), so that the copy loop tests no key: a scan's
                // cost is that loop. One seqlock round per block of records.
                while at < keys.len() && taken < limit {
                    // Removed records (a prefix drained, a range cleared,
                    // before compaction drops them) a block at a time.
                    let long_run;
                    (at, long_run) = group.skip_removed_from(at);
                    if long_run {
                        self.wake_maintenance();
                    }
                    let span_end = keys.len().min(at.saturating_add(limit - taken));
                    let run_end = at
                        + partition_by(&keys[at..span_end], |k| {
                            in_range(k) && first_buffered.is_none_or(|b| k < b)
                        });
                    out.copy_run(keys, cells, at, run_end);
                    at = run_end;
                    taken = out.count() - out_start;
                    if let Some(bound) = resume_at_limit(out, taken, limit) {
                        *guess = ResumeGuess { slot, at };
                        return Some(bound);
                    }
                    if run_end < span_end {
                        // Stopped by a buffered key or the range's end.
                        break;
                    }
                }
                // One merge step: the smallest of the array (or tail) head
                // and the two buffered heads.
                let array_key = (at < end)
                    .then(|| group.key_at(at))
                    .flatten()
                    .filter(|k| in_range(k));
                let Some(smallest) = [array_key, buf_key, tmp_key].into_iter().flatten().min()
                else {
                    break;
                };
                // One key may have a removed copy in an earlier place and
                // the live one in a later place: take the first live copy in
                // get's order and skip the rest, so no key repeats.
                let mut value = None;
                if array_key == Some(smallest) {
                    value = group.read_at(at);
                    at += 1;
                }
                if buf_key == Some(smallest) {
                    take_head(&mut buf, &mut value, |e| group.buf.next(e));
                }
                if tmp_key == Some(smallest) {
                    take_head(&mut tmp, &mut value, |e| {
                        group.tmp().and_then(|t| t.next(e))
                    });
                }
                if let Some(word) = value {
                    out.push(smallest.clone(), V::from_word(word));
                    taken += 1;
                    if taken == limit {
                        *guess = ResumeGuess { slot, at };
                        return Some(Bound::Excluded(smallest.clone()));
                    }
                }
            }
            match group_end {
                Some(end) if below_upper(end, upper) => lower = Bound::Included(end.clone()),
                _ => return None,
            }
        }
    }
}

impl<K: Key> Inner<K> {
    lidx_core::x86_64_v3_twin! {
        /// [`collect_rev_portable`](Self::collect_rev_portable), built for
        /// x86-64-v3 like [`collect`](Self::collect) (a range iterator's
        /// `next_back` ran the baseline build's searches).
        pub(crate) fn collect_rev<V: Value, C: Collector<K, V>>(&self, lower: &Bound<K>, upper: Bound<K>, limit: usize, lookahead: usize, out: &mut C, guess: &mut ResumeGuess) -> Option<Bound<K>>
            => collect_rev_x86_64_v3, collect_rev_baseline, collect_rev_portable;
    }

    /// [`collect`](Self::collect) backwards: takes up to `limit` live
    /// records with keys inside `upper` and `lower` into `out`, in
    /// descending key order, requesting the lines of `lookahead` more
    /// with the start's. Returns the upper bound to resume from, or
    /// `None` when the range is exhausted; `guess` as for `collect`.
    ///
    /// Group by group from the one holding the range's largest keys
    /// ([`Root::route_within`]), each merged backwards from its array (and
    /// tail), `buf` and `tmp_buf` as `collect` merges forwards, with the
    /// same rule for a key in two places; then the group below the
    /// group's pivot. A group's pivot is its lower end and is read with
    /// it, so every key present throughout the call lies in one of the
    /// groups visited, as for `collect`.
    ///
    /// Array records above every buffered key are read as `collect` reads
    /// them, a block per seqlock round, and then put in descending order
    /// ([`Collector::copy_run_rev`]), not one seqlock round per record.
    #[inline(always)]
    pub(crate) fn collect_rev_portable<V: Value, C: Collector<K, V>>(
        &self,
        lower: &Bound<K>,
        upper: Bound<K>,
        limit: usize,
        lookahead: usize,
        out: &mut C,
        guess: &mut ResumeGuess,
    ) -> Option<Bound<K>> {
        if limit == 0 {
            return Some(upper);
        }
        let guard = self.reclaimer.pin();
        let root = self.root(&guard);
        let mut upper = upper;
        let mut taken = 0usize;
        let out_start = out.count();
        loop {
            let (slot, group) = root.route_within(&upper, guess.slot, &guard);
            group.prefetch_delta();
            let inside = |k: &K| {
                above_lower(k, lower) && group.pivot.as_ref().is_none_or(|pivot| k >= pivot)
            };
            let upper_ref = bound_ref(&upper);
            let (array_len, tail_len) = group.lengths();
            // Records `0..at` of the array-then-tail order lie inside
            // `upper`: the first index outside it.
            let run = (limit - taken).saturating_add(lookahead);
            let mut at = match upper_ref {
                Bound::Unbounded => array_len + tail_len,
                Bound::Included(k) => {
                    group.first_index_rev(Bound::Excluded(k), tail_len, run, guess.at)
                }
                Bound::Excluded(k) => {
                    group.first_index_rev(Bound::Included(k), tail_len, run, guess.at)
                }
            };
            let mut buf = group.buf.seek_last(upper_ref);
            let mut tmp = group.tmp().and_then(|t| t.seek_last(upper_ref));
            let (keys, cells) = group.arrays();
            loop {
                if at <= array_len {
                    // As in `collect`: removed records a block at a time.
                    let long_run;
                    (at, long_run) = group.skip_removed_before(at);
                    if long_run {
                        self.wake_maintenance();
                    }
                }
                let buf_key = buf.map(|e| e.record().key()).filter(|k| inside(k));
                let tmp_key = tmp.map(|e| e.record().key()).filter(|k| inside(k));
                // Array records above every buffered key need no merge: the
                // run's start is found by a binary search of the keys the
                // limit can still take, and the run is copied as `collect`
                // copies one. (Not for one record: the merge step below
                // reads it as cheaply.)
                if at <= array_len && limit - taken >= 2 {
                    let last_buffered = buf_key.max(tmp_key);
                    let span_start = at.saturating_sub(limit - taken);
                    let run_start = span_start
                        + partition_by(&keys[span_start..at], |k| {
                            !(inside(k) && last_buffered.is_none_or(|b| k > b))
                        });
                    if at - run_start >= 2 {
                        out.copy_run_rev(keys, cells, run_start, at);
                        at = run_start;
                        taken = out.count() - out_start;
                        if let Some(bound) = resume_at_limit(out, taken, limit) {
                            *guess = ResumeGuess { slot, at };
                            return Some(bound);
                        }
                        continue;
                    }
                }
                let array_key = at
                    .checked_sub(1)
                    .and_then(|i| group.key_at(i))
                    .filter(|k| inside(k));
                let Some(largest) = [array_key, buf_key, tmp_key].into_iter().flatten().max()
                else {
                    break;
                };
                // As in `collect`: the first live copy in get's order.
                let mut value = None;
                if array_key == Some(largest) {
                    at -= 1;
                    value = group.read_at(at);
                }
                if buf_key == Some(largest) {
                    take_head(&mut buf, &mut value, |e| group.buf.prev(e));
                }
                if tmp_key == Some(largest) {
                    take_head(&mut tmp, &mut value, |e| {
                        group.tmp().and_then(|t| t.prev(e))
                    });
                }
                if let Some(word) = value {
                    out.push(largest.clone(), V::from_word(word));
                    taken += 1;
                    if taken == limit {
                        *guess = ResumeGuess { slot, at };
                        return Some(Bound::Excluded(largest.clone()));
                    }
                }
            }
            // On to the group below the pivot, if the range goes below it
            // (and, defensively, only if that tightens the bound, so the
            // loop ends whatever the groups say).
            match &group.pivot {
                Some(pivot) if below_lower_end(pivot, lower) && below_upper(pivot, &upper) => {
                    upper = Bound::Excluded(pivot.clone());
                }
                // The leftmost group, or the range ends in this one.
                _ => return None,
            }
        }
    }

    /// Makes the next background pass walk the groups even if no key
    /// changed since the last one found nothing to do: a scan has marked a
    /// group for compaction ([`Group::note_removed_run`]). A pass ending
    /// meanwhile may mark the index quiet again; the next long skip wakes
    /// it once more.
    #[cold]
    fn wake_maintenance(&self) {
        if self.quiet_at.load(Ordering::Relaxed) != NOT_QUIET {
            self.quiet_at.store(NOT_QUIET, Ordering::Relaxed);
        }
    }

    lidx_core::x86_64_v3_twin! {
        /// The last live record inside the upper bound `upper` (with
        /// `Included(k)`, a predecessor or floor query): one record of
        /// [`collect_rev`](Self::collect_rev), with no buffer.
        ///
        /// Built for x86-64-v3 like [`collect`](Self::collect): out of cache
        /// four alternated rounds on books and geolite2 could not tell it
        /// from the baseline build (session 48); in cache (osm thinned to
        /// 43K keys) a floor query went from 111-112 to 104-105 ns
        /// (session 54).
        pub(crate) fn last_within(&self, upper: Bound<&K>) -> Option<(K, u64)>
            => last_within_x86_64_v3, last_within_baseline, last_within_portable;
    }

    /// [`last_within`](Self::last_within) for the build's baseline target.
    #[inline(always)]
    pub(crate) fn last_within_portable(&self, upper: Bound<&K>) -> Option<(K, u64)> {
        let (mut found, mut guess) = (None, ResumeGuess::NONE);
        self.collect_rev_portable::<u64, _>(
            &Bound::Unbounded,
            upper.cloned(),
            1,
            0,
            &mut found,
            &mut guess,
        );
        found
    }
}

/// One merge step of a scan for a delta whose head holds the key the step
/// emits: takes the head's value unless an earlier place in get's order
/// gave one (a removed copy there reads as none), and moves the head on
/// with `next` (the record after it, or before it for a reverse scan).
#[inline(always)]
fn take_head<'a, K: Key>(
    head: &mut Option<Cursor<'a, K>>,
    value: &mut Option<u64>,
    next: impl FnOnce(Cursor<'a, K>) -> Option<Cursor<'a, K>>,
) {
    let entry = head.take().expect("the head holds the key emitted");
    if value.is_none() {
        *value = entry.record().value().read();
    }
    *head = next(entry);
}

/// After an array run was copied into `out`, which now holds `taken` of
/// the call's records: where to resume if that is the limit (past the
/// last record taken), else `None`.
#[inline(always)]
fn resume_at_limit<K: Key, V, C: Collector<K, V>>(
    out: &C,
    taken: usize,
    limit: usize,
) -> Option<Bound<K>> {
    (taken == limit).then(|| {
        let last = out
            .last_key()
            .expect("the run took the limit's last record");
        Bound::Excluded(last.clone())
    })
}

/// Where [`Inner::collect`] puts the records it takes, in key order (and
/// [`Inner::collect_rev`], in descending order): a `Vec` for scans and
/// ranges, an `Option` for the one record of a successor or predecessor
/// query (which then allocates nothing).
/// Where a fetch stopped, as the next fetch from the same place guesses
/// its start: the root slot it routed to last and the array index after
/// the last array record it took. Only a guess: the next fetch checks it
/// against the root and the array it finds (two key comparisons each)
/// and searches as usual where it does not hold, so a guess from a
/// replaced root or group, or from another group, is harmless.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ResumeGuess {
    slot: usize,
    at: usize,
}

impl ResumeGuess {
    /// No guess: the fetch searches from the root.
    pub(crate) const NONE: Self = ResumeGuess {
        slot: usize::MAX,
        at: usize::MAX,
    };
}

pub(crate) trait Collector<K, V> {
    /// Records taken so far (a `Vec` counts what it held before too).
    fn count(&self) -> usize;
    /// The key of the last record taken.
    fn last_key(&self) -> Option<&K>;
    /// Takes one record.
    fn push(&mut self, key: K, value: V);
    /// Takes the live records `at..end` of a sorted array (`keys` and
    /// their `cells`); `collect` never passes more than it may still take.
    fn copy_run(&mut self, keys: &[K], cells: &[CellBlock], at: usize, end: usize);
    /// [`copy_run`](Self::copy_run) in descending key order, for
    /// `collect_rev`.
    fn copy_run_rev(&mut self, keys: &[K], cells: &[CellBlock], at: usize, end: usize);
}

impl<K: Key, V: Value> Collector<K, V> for Vec<(K, V)> {
    fn count(&self) -> usize {
        self.len()
    }

    fn last_key(&self) -> Option<&K> {
        self.last().map(|(k, _)| k)
    }

    fn push(&mut self, key: K, value: V) {
        Vec::push(self, (key, value));
    }

    fn copy_run(&mut self, keys: &[K], cells: &[CellBlock], at: usize, end: usize) {
        copy_array_run(keys, cells, at, end, self);
    }

    fn copy_run_rev(&mut self, keys: &[K], cells: &[CellBlock], at: usize, end: usize) {
        // Copied in key order, a block per seqlock round, then turned.
        let mark = self.len();
        copy_array_run(keys, cells, at, end, self);
        self[mark..].reverse();
    }
}

/// Holds at most one record: `collect` with a limit of one.
impl<K: Key, V: Value> Collector<K, V> for Option<(K, V)> {
    fn count(&self) -> usize {
        usize::from(self.is_some())
    }

    fn last_key(&self) -> Option<&K> {
        self.as_ref().map(|(k, _)| k)
    }

    fn push(&mut self, key: K, value: V) {
        debug_assert!(self.is_none(), "a limit of one takes one record");
        *self = Some((key, value));
    }

    fn copy_run(&mut self, keys: &[K], cells: &[CellBlock], at: usize, end: usize) {
        // The run is at most one record long (the limit is one); reading
        // on past a removed one would not hurt either.
        for (i, key) in keys[at..end].iter().enumerate() {
            if let Some(word) = record_at(cells, at + i).read() {
                self.push(key.clone(), V::from_word(word));
                return;
            }
        }
    }

    fn copy_run_rev(&mut self, keys: &[K], cells: &[CellBlock], at: usize, end: usize) {
        // As `copy_run`, from the run's end.
        for (i, key) in keys[at..end].iter().enumerate().rev() {
            if let Some(word) = record_at(cells, at + i).read() {
                self.push(key.clone(), V::from_word(word));
                return;
            }
        }
    }
}

/// Appends the live records `at..end` of a sorted array (`keys` and their
/// `cells`) to `out`, in order, with one seqlock round per block. Out of
/// line: a scan's time is this loop, and in its own function it keeps its
/// counters in registers.
#[inline(never)]
fn copy_array_run<K: Key, V: Value>(
    keys: &[K],
    cells: &[CellBlock],
    mut at: usize,
    end: usize,
    out: &mut Vec<(K, V)>,
) {
    out.reserve(end.saturating_sub(at));
    let (mut block, first) = (at / SLOTS, at % SLOTS);
    if first != 0 && at < end {
        let block_end = end.min(at + (SLOTS - first));
        cells[block].append_live(first, &keys[at..block_end], out);
        (at, block) = (block_end, block + 1);
    }
    // Whole blocks through a copy of fixed length: the general one spent
    // about as many instructions setting up each block as copying it.
    while end.saturating_sub(at) >= SLOTS {
        let whole: &[K; SLOTS] = keys[at..at + SLOTS]
            .try_into()
            .expect("a slice of SLOTS keys");
        cells[block].append_block(whole, out);
        (at, block) = (at + SLOTS, block + 1);
    }
    if at < end {
        cells[block].append_live(0, &keys[at..end], out);
    }
}

/// Reads `key` in `group`: array, `buf`, `tmp_buf`.
#[inline(always)]
pub(crate) fn read_in_group<K: Key>(group: &Group<K>, key: &K) -> Option<u64> {
    read_record(group, group.record(key), key)
}

/// [`read_in_group`] given the array (or tail) lookup's result `record`.
#[inline(always)]
fn read_record<K: Key>(group: &Group<K>, record: Option<Record<'_>>, key: &K) -> Option<u64> {
    if let Some(cell) = record
        && let Some(word) = cell.read()
    {
        return Some(word);
    }
    read_delta(group, key)
}

/// The rest of [`read_record`] when the array holds no live record of
/// `key`: kept out of line so that the array path, which most gets take,
/// stays short enough to inline into its callers.
#[inline(never)]
fn read_delta<K: Key>(group: &Group<K>, key: &K) -> Option<u64> {
    if let Some(cell) = group.buf.get(key)
        && let Some(word) = cell.read()
    {
        return Some(word);
    }
    group.tmp()?.get(key)?.read()
}

/// The panic of a put that a poisoned index over its delta budget refuses.
#[cold]
fn refuse_new_key() -> ! {
    panic!(
        "lidx-xindex: a maintenance pass panicked earlier, so this index is poisoned, and its \
         deltas are over their byte budget: it takes no new keys (the key was not inserted)"
    );
}

/// `delta.write`, or, without `create`, a write to a key the delta
/// already holds (reviving a removed one: that takes no memory), and
/// [`Attempt::Refused`] for a new key.
#[inline(always)]
fn upsert_into<K: Key>(
    delta: &Delta<K>,
    key: &K,
    op: Write,
    budget: &DeltaBudget,
    create: bool,
) -> Attempt {
    if create {
        return Attempt::Done(delta.write(key, op, budget));
    }
    delta
        .write_existing(key, op)
        .map_or(Attempt::Refused, Attempt::Done)
}

/// Algorithm 2's put on one group node. Inlined into `put`'s builds, so
/// that its array search runs with their instruction set. Without
/// `create`, a key found nowhere is refused instead of inserted into a
/// delta.
///
/// With `if_absent`, an insert only if absent: an exchange from absent to
/// `word`, which takes the put's path, so it finds the key's record where
/// the put would have written and creates one only where the put would
/// have. The outcome's previous value is then the value found (the key
/// was present, nothing written) or `None` (inserted).
#[inline(always)]
pub(crate) fn try_put<K: Key>(
    group: &Group<K>,
    key: &K,
    word: u64,
    if_absent: bool,
    budget: &DeltaBudget,
    create: bool,
) -> Attempt {
    let op = if if_absent {
        Write::Exchange {
            current: None,
            new: Some(word),
        }
    } else {
        Write::Put(word)
    };
    let done = |previous| {
        Attempt::Done(Upserted {
            previous,
            over_budget: false,
        })
    };
    // A put that misses the array needs the delta next: overlap the misses.
    group.prefetch_delta();
    // A key above the array of a group with a tail (sequential inserts)
    // skips the array search: the tail branches below look in the tail.
    let tail = group.tail_for(key);
    // In place in the array; a removed array record is never revived, so
    // the compaction that skipped it cannot lose this put.
    if tail.is_none()
        && let Some(cell) = group.record_unless_above(key)
        && let Outcome::Applied(previous) = cell.write(op, false)
    {
        return done(previous);
    }
    match tail {
        Some(tail) if !tail.is_full() => {
            // Sequential fast path: every insert above the array holds the
            // tail lock while the tail takes appends, so "in neither tail
            // nor delta, append" cannot race with a delta insert of the
            // same key.
            let _serial = tail.lock.lock();
            if let Some(cell) = tail.find(key)
                && let Outcome::Applied(previous) = cell.write(op, false)
            {
                return done(previous);
            }
            if !group.buf.is_frozen() {
                if group.buf.get(key).is_none() && tail.try_append(key, word) {
                    return done(None);
                }
                return upsert_into(&group.buf, key, op, budget, create);
            }
        }
        full => {
            // A full tail never takes another append (its length only
            // grows), so the lock has nothing left to serialise: inserts
            // above the array go to the delta as in a group without a
            // tail, once an existing tail record is ruled out (a full tail
            // shows every record it will ever have).
            if let Some(tail) = full
                && let Some(cell) = tail.find(key)
                && let Outcome::Applied(previous) = cell.write(op, false)
            {
                return done(previous);
            }
            if !group.buf.is_frozen() {
                // Seen unfrozen inside this pin: the merge phase starts
                // only after a barrier that waits for us, so this insert
                // will be merged.
                return upsert_into(&group.buf, key, op, budget, create);
            }
        }
    }
    // Frozen: update in place if the key is live in `buf`, else insert
    // into `tmp_buf`, the only insertable place (no duplicates, I1).
    if let Some(cell) = group.buf.get(key)
        && let Outcome::Applied(previous) = cell.write(op, false)
    {
        return done(previous);
    }
    match group.tmp() {
        Some(tmp) if !tmp.is_frozen() => upsert_into(tmp, key, op, budget, create),
        _ => Attempt::Retry,
    }
}

/// Remove, as a put of the removed flag, or an exchange that needs no new
/// record (from a value, or to absent): `op` applied to the key's live
/// record, if any; returns the value found there (`None`: absent). Never
/// inserts, so never retries: with `buf` frozen and no `tmp_buf` yet, no
/// live copy can exist anywhere.
#[inline(always)]
fn try_write_existing<K: Key>(group: &Group<K>, key: &K, op: Write) -> Option<u64> {
    debug_assert!(op.created().is_none(), "{op:?} may create a record");
    if let Some(cell) = group.record(key)
        && let Outcome::Applied(previous) = cell.write(op, false)
    {
        if removes(op, previous) {
            group.note_removed();
        }
        return previous;
    }
    let frozen = group.buf.is_frozen();
    if let Some(cell) = group.buf.get(key)
        && let Outcome::Applied(previous) = cell.write(op, !frozen)
    {
        return previous;
    }
    if !frozen {
        return None;
    }
    match group.tmp()?.get(key)?.write(op, true) {
        Outcome::Applied(previous) => previous,
        Outcome::Dead => None,
    }
}

/// Whether `op`, having found `previous`, removed a live record.
#[inline(always)]
fn removes(op: Write, previous: Option<u64>) -> bool {
    match op {
        Write::Remove => previous.is_some(),
        Write::Exchange { current, new: None } => previous.is_some() && previous == current,
        Write::Put(_) | Write::Exchange { .. } => false,
    }
}

fn bound_ref<K>(bound: &Bound<K>) -> Bound<&K> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether `key` lies inside the lower bound `lower`.
fn above_lower<K: Ord>(key: &K, lower: &Bound<K>) -> bool {
    match lower {
        Bound::Included(l) => key >= l,
        Bound::Excluded(l) => key > l,
        Bound::Unbounded => true,
    }
}

/// Whether keys below `key` may lie inside the lower bound `lower`.
fn below_lower_end<K: Ord>(key: &K, lower: &Bound<K>) -> bool {
    match lower {
        Bound::Included(l) | Bound::Excluded(l) => key > l,
        Bound::Unbounded => true,
    }
}

fn below_upper<K: Ord>(key: &K, upper: &Bound<K>) -> bool {
    match upper {
        Bound::Included(u) => key <= u,
        Bound::Excluded(u) => key < u,
        Bound::Unbounded => true,
    }
}

impl<K: Key> Drop for Inner<K> {
    fn drop(&mut self) {
        if *self.poisoned.get_mut() {
            // A pass that stopped mid-rebuild may have left a group in two
            // locations (a slot and a `next` link until a root update cuts
            // the links), and freeing everything reachable would then free
            // it twice: a poisoned index leaks its live groups and root.
            // Retired ones were unlinked from everywhere before retiring.
            self.nodes.abandon_live();
            self.reclaimer.release_all();
            return;
        }
        // SAFETY: `&mut self` means no operation or maintenance pass is
        // running. Groups reachable now are owned by the structure: each is
        // in exactly one slot or one `next` link (root updates clear the
        // links of groups they move into slots), so each is freed once,
        // into the slab it was allocated from. Groups and roots retired
        // earlier are owned by the reclaimer (`release_all` below).
        unsafe {
            let guard = epoch::unprotected();
            let root = self.root.load(Ordering::Relaxed, guard);
            if let Some(r) = root.as_ref() {
                for slot in r.slots.iter() {
                    let mut group = slot.load(Ordering::Relaxed, guard);
                    while let Some(g) = group.as_ref() {
                        let next = g.next.load(Ordering::Relaxed, guard);
                        let node = NonNull::from(g);
                        self.nodes.free(node);
                        group = next;
                    }
                }
                drop(root.into_owned());
            }
        }
        // Groups and roots retired earlier: free them now rather than when
        // the last thread that used the index drops its registration.
        self.reclaimer.release_all();
    }
}
