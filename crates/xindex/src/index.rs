//! The public [`XIndex`] handle: construction, operations, statistics and
//! the background maintenance thread it owns.

use std::fmt;
use std::iter::FusedIterator;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use lidx_core::{Error, Key, Result, background};
use parking_lot::{Condvar, Mutex};

use crate::config::{Config, SequentialGroups};
use crate::group::Group;
use crate::inner::{Inner, ResumeGuess};
use crate::maintenance::Pass;
use crate::node_slab::NodeSlab;
use crate::pages::{Pages, reserved_bytes};
use crate::parallel;
use crate::reclaim::Reclaimer;
use crate::record::{CellBlock, SLOTS};
use crate::root::{self, Root};
use crate::stats::{GroupStats, Stats};
use crate::submodels::{SubModel, settled_ranges};
use crate::value::Value;

/// The batch a range iterator walked by `next` settles at until the walk
/// is long (see [`walk_batch`]).
const RANGE_BATCH: usize = 64;

/// Records a range iterator's first fetch from either end takes; each
/// further fetch from that end takes [`RANGE_BATCH_GROWTH`] times as
/// many, up to [`RANGE_BATCH`] (more on long walks, [`walk_batch`], and
/// folds). A fetch costs about as much as copying a few dozen records, so
/// a first batch of 16 serves `range(k..).next()` and
/// `range(..=k).next_back()` (`BTreeMap`'s successor and predecessor
/// idioms; [`XIndex::lower_bound`] and [`XIndex::upper_bound`] fetch one
/// record) for a little more than a first batch of 4 did (osm, in
/// `examples/scan_lengths.rs`: 251-258 -> 262-281 ns; reverse 280 ->
/// 330), and `take(10)` with one fetch instead of two (410-420 -> 273-292
/// ns; reverse 490-540 -> 330-340).
const RANGE_FIRST_BATCH: usize = 16;
/// Growth of a range iterator's batches: 16, then 64 (a fold's go on to
/// 256 and 1,024).
const RANGE_BATCH_GROWTH: usize = 4;

/// The size of a range end's next fetch for iteration by `next`, after a
/// fetch of `batch` records that brought the records fetched from that
/// end to `fetched`: 16, then 64 ([`RANGE_FIRST_BATCH`],
/// [`RANGE_BATCH_GROWTH`]), and once the end has fetched more than 256
/// records, a quarter of them, up to [`SCAN_BATCH`].
///
/// A fetch costs about as much as copying 50 records (its search from the
/// root and its pin; before session 58's resumed fetches), so a long walk
/// in batches of 64 spent more than a third of its time fetching. Larger
/// batches copy records a consumer that stops early never takes (larger
/// ones from the third fetch on made `take(100)` 20-45% slower, session
/// 57); batches of a quarter of what was fetched keep those under a
/// quarter of the records taken, and leave walks of up to 256 records as
/// they were. A walk of 10,000 records makes 23 fetches instead of 157
/// (osm, a bounded range of 10,000 in a `for` loop: 20.8-22.7 µs instead
/// of 32.1-32.9, session 58).
fn walk_batch(batch: usize, fetched: usize) -> usize {
    (batch * RANGE_BATCH_GROWTH)
        .min(RANGE_BATCH)
        .max((fetched / 4).min(SCAN_BATCH))
}

/// Records [`XIndex::scan`] collects under one epoch pin: its caller's
/// buffer is filled in one call, so the batch only bounds how long one pin
/// holds back reclamation on a long scan.
const SCAN_BATCH: usize = 1024;

/// A concurrent learned ordered map (XIndex-R).
///
/// All operations take `&self`; the index is `Send + Sync`. Keys use the
/// core [`Key`] trait; values are any [`Value`] (one 64-bit word, so
/// reads are never torn).
pub struct XIndex<K: Key, V: Value> {
    inner: Arc<Inner<K>>,
    worker: Option<Worker>,
    _values: PhantomData<fn() -> V>,
}

/// The background maintenance thread and its stop signal.
struct Worker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl<K: Key, V: Value> XIndex<K, V> {
    /// An empty index.
    pub fn new(config: Config) -> Result<Self> {
        Self::bulk_load(std::iter::empty(), config)
    }

    /// An index over `pairs`, which must be sorted by strictly ascending
    /// key ([`Error::Unsorted`] names the first key smaller than its
    /// predecessor; a repeated key is [`Error::InvalidArgument`]).
    ///
    /// A group emptied by removes is refitted over no keys, from the key
    /// decoded from all-zero bytes, so a [`Key`] type that cannot decode
    /// that is refused here rather than failing in maintenance.
    pub fn bulk_load(pairs: impl IntoIterator<Item = (K, V)>, config: Config) -> Result<Self> {
        config.validate()?;
        lidx_core::model::linear::empty_origin::<K>().map_err(|e| {
            Error::invalid(format!(
                "key type cannot decode its all-zero encoding, which models over no keys start from: {e}"
            ))
        })?;
        let pairs: Vec<(K, V)> = pairs.into_iter().collect();
        if let Some(i) = pairs.windows(2).position(|w| w[1].0 <= w[0].0) {
            return Err(if pairs[i + 1].0 < pairs[i].0 {
                Error::Unsorted { index: i + 1 }
            } else {
                Error::invalid(format!("duplicate key at index {} in bulk load", i + 1))
            });
        }
        let len = pairs.len();
        let reclaimer = Reclaimer::new();
        let guard = reclaimer.pin();
        let pages = Pages::new();
        let step = config.initial_group_size.max(1);
        let threads = parallel::threads_for(config.build_threads, len);
        let chunks: Vec<usize> = (0..len.div_ceil(step)).collect();
        let plans = parallel::map_runs(
            chunks,
            threads,
            || {},
            |run| {
                run.into_iter()
                    .flat_map(|i| {
                        let chunk = &pairs[i * step..((i + 1) * step).min(len)];
                        settled_groups(chunk, i * step, &config)
                    })
                    .collect()
            },
        );
        // Every array in one region, sized to fit: a fresh index's arrays
        // then share huge pages and waste none.
        let bytes = plans.iter().map(GroupPlan::bytes).sum();
        if bytes > 0 {
            pages.reserve(bytes);
        }
        // Every group node in one block too.
        let nodes = Arc::new(NodeSlab::with_capacity(plans.len().max(1)));
        let mut groups = Vec::with_capacity(plans.len().max(1));
        if plans.is_empty() {
            let empty = Group::from_values(
                &pages,
                None,
                Vec::new(),
                Vec::new(),
                config.error_bound,
                1,
                config.tail(),
            );
            groups.push(nodes.alloc_shared(empty, &guard));
        }
        let last_plan = plans.len().saturating_sub(1);
        // Hints are fitted with their groups (on the helpers) if the root
        // will keep them.
        let hints = root::keeps_hints::<K>(plans.len().max(1));
        let indexed: Vec<(usize, &GroupPlan<K>)> = plans.iter().enumerate().collect();
        let built = parallel::map_runs(
            indexed,
            threads,
            || {},
            |run| {
                run.into_iter()
                    .map(|(i, plan)| {
                        let records = &pairs[plan.range.clone()];
                        // Detection starts from the last group, where keys above
                        // every key arrive; the others get tails once maintenance
                        // sees ascending inserts in them.
                        let tail = config.tail().filter(|_| {
                            i == last_plan || config.sequential_groups == SequentialGroups::All
                        });
                        // The leftmost group has no pivot: it takes every key
                        // below the next one's.
                        let pivot = (plan.range.start > 0).then(|| records[0].0.clone());
                        let group = Group::with_models(
                            &pages,
                            pivot,
                            records.iter().map(|(k, _)| k.clone()).collect(),
                            records.iter().map(|(_, v)| v.to_word()).collect(),
                            plan.models.clone(),
                            tail,
                        );
                        if hints {
                            group.hint();
                        }
                        group
                    })
                    .collect()
            },
        );
        for group in built {
            debug_assert_eq!(group.pivot.is_none(), groups.is_empty());
            groups.push(nodes.alloc_shared(group, &guard));
        }
        let leaves = groups.len().div_ceil(4);
        let root = Root::new(
            groups,
            leaves,
            config.max_root_models,
            config.error_bound,
            config.merge_error(),
        );
        drop(guard);
        let interval = config.maintenance_interval;
        let inner = Arc::new(Inner::new(root, config, len, reclaimer, pages, nodes));
        let worker = interval
            .map(|interval| Worker::start(Arc::clone(&inner), interval))
            .transpose()?;
        Ok(XIndex {
            inner,
            worker,
            _values: PhantomData,
        })
    }

    /// The value stored under `key`. Allocation-free, and takes no lock: a
    /// key in its group's array (the common case after a compaction) costs one
    /// seqlock read; otherwise one optimistic search of the group's delta
    /// B+-tree, which writes nothing and retries only if a node changed
    /// under it. Never waits for maintenance.
    #[inline]
    pub fn get(&self, key: &K) -> Option<V> {
        self.inner.get(key).map(V::from_word)
    }

    /// The values of `keys`, appended to `out` in the same order (`None`
    /// for an absent key). Each answer is what [`get`](Self::get) would
    /// have returned at some instant during the call; the batch is not an
    /// atomic snapshot. Faster than calling `get` per key: the lookups run
    /// in software-pipelined batches whose cache misses overlap.
    pub fn get_many(&self, keys: &[K], out: &mut Vec<Option<V>>) {
        self.inner.get_many(keys, out);
    }

    /// Inserts or updates `key`; returns the previous value.
    ///
    /// # Panics
    ///
    /// If the index [is poisoned](Self::is_poisoned) and this insert
    /// would have to wait for the interrupted rebuild (the key is then
    /// not inserted), or would run a maintenance pass because its new key
    /// took the deltas over their byte budget (the key is then inserted
    /// before it panics), or is of a new key while the deltas are over
    /// that budget (the key is not inserted; updates of present keys
    /// still apply, so memory stays bounded).
    pub fn insert(&self, key: K, value: V) -> Option<V> {
        self.inner.put(&key, value.to_word()).map(V::from_word)
    }

    /// Removes `key`; returns its value.
    pub fn remove(&self, key: &K) -> Option<V> {
        self.inner.remove(key).map(V::from_word)
    }

    /// Inserts `key` only if it is absent: `Ok(())` if this call inserted
    /// it, otherwise `Err` with the value present (and nothing written).
    /// Linearizable like [`insert`](Self::insert): of several racing
    /// `try_insert`s of an absent key exactly one succeeds, and the others
    /// see its value (or a later one).
    ///
    /// # Panics
    ///
    /// As [`insert`](Self::insert), when the index is poisoned.
    pub fn try_insert(&self, key: K, value: V) -> Result<(), V> {
        match self.inner.put_if_absent(&key, value.to_word()) {
            None => Ok(()),
            Some(present) => Err(V::from_word(present)),
        }
    }

    /// Sets `key`'s value to `new` (`None`: removes the key) only if it is
    /// `current` (`None`: the key is absent), in one linearizable step, as
    /// [`AtomicU64::compare_exchange`](std::sync::atomic::AtomicU64::compare_exchange)
    /// does for a word. Returns `Ok(current)` if it wrote, otherwise `Err`
    /// with the value it found.
    ///
    /// Values compare by their word ([`Value::to_word`]): an `f64` NaN
    /// equals a NaN of the same bits, and `0.0` differs from `-0.0`. An
    /// exchange that does not insert (`current` is a value, or `new` is
    /// `None`) never waits for maintenance, like [`remove`](Self::remove).
    ///
    /// ```
    /// # use lidx_xindex::{Config, XIndex};
    /// let index: XIndex<u64, u64> = XIndex::new(Config::default())?;
    /// assert_eq!(index.compare_exchange(&7, None, Some(1)), Ok(None));
    /// assert_eq!(index.compare_exchange(&7, None, Some(2)), Err(Some(1)));
    /// assert_eq!(index.compare_exchange(&7, Some(1), None), Ok(Some(1)));
    /// assert_eq!(index.get(&7), None);
    /// # Ok::<(), lidx_core::Error>(())
    /// ```
    ///
    /// # Panics
    ///
    /// As [`insert`](Self::insert), when it would insert a key into a
    /// poisoned index.
    pub fn compare_exchange(
        &self,
        key: &K,
        current: Option<V>,
        new: Option<V>,
    ) -> Result<Option<V>, Option<V>> {
        let word = |v: Option<V>| v.map(V::to_word);
        let back = |w: Option<u64>| w.map(V::from_word);
        self.inner
            .exchange(key, word(current), word(new))
            .map(back)
            .map_err(back)
    }

    /// Updates `key` with `f` in a loop of a read and a
    /// [`compare_exchange`](Self::compare_exchange), as
    /// [`AtomicU64::fetch_update`](std::sync::atomic::AtomicU64::fetch_update)
    /// does: `f` gets the current value (`None`: absent) and returns the
    /// new one (`Some(None)` removes the key) or `None` to stop. Returns
    /// `Ok` with the value `f` replaced, or `Err` with the value `f`
    /// declined. `f` may run more than once when writers race. It runs
    /// outside the index's epoch pin, so it may take its time without
    /// holding up maintenance, and may call this index, writes included
    /// (a write to `key` itself makes the exchange fail and `f` run
    /// again with the value found).
    ///
    /// ```
    /// # use lidx_xindex::{Config, XIndex};
    /// let index: XIndex<u64, u64> = XIndex::new(Config::default())?;
    /// // A counter: every increment counts, however many threads race.
    /// let add_one = |n: Option<u64>| Some(Some(n.unwrap_or(0) + 1));
    /// assert_eq!(index.fetch_update(&3, add_one), Ok(None));
    /// assert_eq!(index.fetch_update(&3, add_one), Ok(Some(1)));
    /// assert_eq!(index.get(&3), Some(2));
    /// # Ok::<(), lidx_core::Error>(())
    /// ```
    ///
    /// # Panics
    ///
    /// As [`compare_exchange`](Self::compare_exchange).
    pub fn fetch_update(
        &self,
        key: &K,
        mut f: impl FnMut(Option<V>) -> Option<Option<V>>,
    ) -> Result<Option<V>, Option<V>> {
        let back = |w: Option<u64>| w.map(V::from_word);
        let mut on_words = |w: Option<u64>| f(back(w)).map(|new: Option<V>| new.map(V::to_word));
        self.inner
            .update(key, &mut on_words)
            .map(back)
            .map_err(back)
    }

    /// Whether `key` is present: [`get`](Self::get) without the value.
    #[inline]
    pub fn contains_key(&self, key: &K) -> bool {
        self.inner.get(key).is_some()
    }

    /// Live keys (exact when no operation is in flight).
    pub fn len(&self) -> usize {
        self.inner.len.get()
    }

    /// Whether [`len`](Self::len) is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends to `out` up to `n` records with keys `>= start`, in key
    /// order. Each record's value was current at some instant during the
    /// call, and every key present throughout the call is among the
    /// records up to the last one returned; the scan as a whole is not an
    /// atomic snapshot (a key inserted or removed meanwhile may or may not
    /// appear).
    pub fn scan(&self, start: &K, n: usize, out: &mut Vec<(K, V)>) {
        let mut lower = Bound::Included(start.clone());
        let mut remaining = n;
        // Batches bound how long one epoch pin is held on a long scan;
        // each after the first starts where the last stopped.
        let mut guess = ResumeGuess::NONE;
        while remaining > 0 {
            let before = out.len();
            let batch = remaining.min(SCAN_BATCH);
            let next = self
                .inner
                .collect(lower, &Bound::Unbounded, batch, 0, out, &mut guess);
            remaining -= out.len() - before;
            match next {
                Some(resume) => lower = resume,
                None => break,
            }
        }
    }

    /// Records with keys in `range`, in key order, fetched in small
    /// batches (no epoch pin is held between calls to `next`, so a slow
    /// consumer never delays maintenance). Same consistency as [`scan`](Self::scan).
    ///
    /// Double-ended, like `BTreeMap::range`: `next_back` walks down from
    /// the range's end, so `range(..=k).next_back()` is the last record at
    /// or below `k` (a predecessor query) and `range(..).rev()` iterates in
    /// descending order. Both ends together return each key at most once.
    /// Unlike `BTreeMap::range`, a range whose start is above its end is
    /// empty instead of a panic.
    ///
    /// Consumers that take every record through a fold (`for_each`,
    /// `sum`, `count`, `fold`, and `rev()` of them) get batches of up to
    /// 1,024 records, at about half the cost per record of a `for` loop on
    /// long ranges; `last`, `min` and `max` fetch from the end they need.
    pub fn range<R: RangeBounds<K>>(&self, range: R) -> Range<'_, K, V> {
        Range {
            index: self,
            lower: range.start_bound().cloned(),
            upper: range.end_bound().cloned(),
            exhausted: false,
            front: Vec::new().into_iter(),
            back: Vec::new().into_iter(),
            front_batch: RANGE_FIRST_BATCH,
            back_batch: RANGE_FIRST_BATCH,
            front_fetched: 0,
            back_fetched: 0,
            front_resume: ResumeGuess::NONE,
            back_resume: ResumeGuess::NONE,
        }
    }

    /// Every record, in key order: [`range(..)`](Self::range), with its
    /// consistency (not an atomic snapshot). Also what `for (k, v) in
    /// &index` iterates.
    pub fn iter(&self) -> Range<'_, K, V> {
        self.range(..)
    }

    /// The record with the smallest key inside the lower bound `bound`
    /// (`Included(k)`: the first key `>= k`, a successor query;
    /// `Unbounded`: the first record), as `crossbeam_skiplist::SkipMap`
    /// names it: `range((bound, Unbounded)).next()` without allocating.
    /// As a [`scan`](Self::scan) of one record: the
    /// record returned was present with that value at some instant during
    /// the call, and no key between the bound and it was present
    /// throughout the call (one inserted or removed meanwhile may or may
    /// not be seen).
    pub fn lower_bound(&self, bound: Bound<&K>) -> Option<(K, V)> {
        let (mut found, mut guess) = (None, ResumeGuess::NONE);
        self.inner.collect(
            bound.cloned(),
            &Bound::Unbounded,
            1,
            0,
            &mut found,
            &mut guess,
        );
        found
    }

    /// The record with the largest key inside the upper bound `bound`
    /// (`Included(k)`: the last key `<= k`, a predecessor or floor query,
    /// such as which IP range holds an address; `Unbounded`: the last
    /// record), as `crossbeam_skiplist::SkipMap` names it:
    /// `range((Unbounded, bound)).next_back()` without allocating. Same
    /// consistency as [`lower_bound`](Self::lower_bound), mirrored.
    pub fn upper_bound(&self, bound: Bound<&K>) -> Option<(K, V)> {
        self.inner
            .last_within(bound)
            .map(|(k, word)| (k, V::from_word(word)))
    }

    /// The record with the smallest key, if any.
    pub fn first_key_value(&self) -> Option<(K, V)> {
        self.lower_bound(Bound::Unbounded)
    }

    /// The record with the largest key, if any.
    pub fn last_key_value(&self) -> Option<(K, V)> {
        self.upper_bound(Bound::Unbounded)
    }

    /// Keeps only the records for which `keep` returns `true`, as
    /// `BTreeMap::retain` does, visiting them in key order as
    /// [`iter`](Self::iter) does (not an atomic snapshot: every key
    /// present throughout the call is visited once; one inserted meanwhile
    /// may or may not be).
    ///
    /// A record `keep` rejects is removed only if it still holds the value
    /// `keep` saw ([`compare_exchange`](Self::compare_exchange)): a value
    /// written after `keep` looked is not removed unseen. `keep` runs
    /// outside the index's epoch pin (it may take its time, and may call
    /// this index). Removes never wait for maintenance.
    pub fn retain(&self, mut keep: impl FnMut(&K, V) -> bool) {
        for (key, value) in self.iter() {
            if !keep(&key, value) {
                // Err: the record changed after `keep` saw it; it stays.
                let _ = self.compare_exchange(&key, Some(value), None);
            }
        }
    }

    /// Removes every record with a key in `range`; returns how many this
    /// call removed. Not atomic: every key present in the range throughout
    /// the call is removed; one inserted meanwhile may stay.
    pub fn remove_range<R: RangeBounds<K>>(&self, range: R) -> usize {
        let mut removed = 0;
        for (key, _) in self.range(range) {
            removed += usize::from(self.remove(&key).is_some());
        }
        removed
    }

    /// Removes every record, with the consistency of
    /// [`remove_range(..)`](Self::remove_range): every key present
    /// throughout the call is removed; one inserted meanwhile may stay.
    /// The memory of the removed records returns as maintenance compacts
    /// their groups.
    pub fn clear(&self) {
        self.remove_range(..);
    }

    /// Runs one maintenance pass now, on the calling thread (serialised
    /// with the background thread). Unlike a background pass, it compacts
    /// every non-empty delta, however small and recent
    /// ([`Config::small_delta_delay`]). Returns whether the structure
    /// changed.
    ///
    /// # Panics
    ///
    /// If the pass panics (a bug in this crate), which poisons the index,
    /// or if the index [is poisoned](Self::is_poisoned) already.
    pub fn maintain_now(&self) -> bool {
        self.inner.maintain(Pass::Full)
    }

    /// Whether a maintenance pass panicked (which would be a bug in this
    /// crate). Like a poisoned [`std::sync::Mutex`], the index then stops
    /// trusting its own progress: the pass may have stopped between two
    /// steps of a rebuild, leaving a group that refuses new keys until
    /// the rebuild completes. Reads, updates of existing keys and removes
    /// keep working and stay correct, since every step of a rebuild leaves
    /// a structure they can use; no further maintenance runs, and an
    /// insert that would wait for the rebuild or for compaction (the
    /// delta budget) panics instead of waiting forever. Once the deltas
    /// are over their budget, new keys are refused with a panic.
    pub fn is_poisoned(&self) -> bool {
        self.inner
            .poisoned
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The index's current shape and maintenance counters.
    pub fn stats(&self) -> Stats {
        let guard = self.inner.reclaimer.pin();
        let root = self.inner.root(&guard);
        let mut groups = Vec::new();
        // Right after a root update a group can briefly be both in a slot
        // and behind a `next` link; count it once.
        let mut seen = std::collections::HashSet::new();
        // The logical parts of a split in progress share the split group's
        // records and delta, and the two groups of a merge in progress one
        // temporary delta; the first to be met reports them.
        let mut seen_records = std::collections::HashSet::new();
        let mut seen_deltas = std::collections::HashSet::new();
        for slot in root.slots.iter() {
            let mut shared = slot.load(Ordering::Acquire, &guard);
            let mut linked = false;
            // SAFETY: groups reachable from the root are reclaimed only with
            // `Reclaimer::retire` after being unlinked; `guard` is pinned.
            while let Some(group) = unsafe { shared.as_ref() } {
                if !seen.insert(shared.as_raw()) {
                    break;
                }
                let own_records = seen_records.insert(Arc::as_ptr(&group.records));
                let own_delta = seen_deltas.insert(Arc::as_ptr(&group.buf));
                let (array, tail) = group.records.lengths();
                groups.push(GroupStats {
                    records: if own_records { array + tail } else { 0 },
                    tail_capacity: group.records.tail.as_ref().map_or(0, |t| t.capacity()),
                    tail_models: group.records.tail.as_ref().map_or(0, |t| t.model_count()),
                    removed_records: if own_records {
                        group.records.removed.load(Ordering::Relaxed)
                    } else {
                        0
                    },
                    error_bounds: group.models.iter().map(|m| m.max_error).collect(),
                    delta_len: if own_delta { group.buf.len() } else { 0 }
                        + group
                            .tmp()
                            .filter(|t| seen_deltas.insert(std::ptr::from_ref(*t)))
                            .map_or(0, |t| t.len()),
                    linked_only: linked,
                });
                linked = true;
                shared = group.next.load(Ordering::Acquire, &guard);
            }
        }
        let c = &self.inner.counters;
        let (array_region_bytes, array_live_bytes) = self.inner.pages.usage();
        Stats {
            len: self.len(),
            groups,
            root_models: root.model_count(),
            root_max_error: root.max_error(),
            root_piecewise: root.routes_piecewise(),
            compactions: c.compactions.load(Ordering::Relaxed),
            model_splits: c.model_splits.load(Ordering::Relaxed),
            model_merges: c.model_merges.load(Ordering::Relaxed),
            group_splits: c.group_splits.load(Ordering::Relaxed),
            group_merges: c.group_merges.load(Ordering::Relaxed),
            root_updates: c.root_updates.load(Ordering::Relaxed),
            maintenance_passes: c.passes.load(Ordering::Relaxed),
            delta_bytes: self.inner.budget.used(),
            budget_waits: self.inner.budget.waits.load(Ordering::Relaxed),
            array_region_bytes,
            array_live_bytes,
            node_block_bytes: self.inner.nodes.held_bytes(),
        }
    }

    #[cfg(test)]
    #[cfg_attr(xindex_loom, allow(dead_code))]
    pub(crate) fn inner(&self) -> &Inner<K> {
        &self.inner
    }
}

/// One group of a bulk load before its arrays are allocated: which of the
/// loaded pairs it holds, and its models. (Holding ranges rather than
/// copies keeps the load's peak memory at the pairs plus the arrays.)
struct GroupPlan<K> {
    range: std::ops::Range<usize>,
    models: Box<[SubModel<K>]>,
}

impl<K> GroupPlan<K> {
    /// Bytes its arrays take in a region ([`Pages::reserve`]).
    fn bytes(&self) -> usize {
        let records = self.range.len();
        reserved_bytes::<K>(records) + reserved_bytes::<CellBlock>(records.div_ceil(SLOTS))
    }
}

/// Groups over `chunk` (sorted pairs, starting at position `offset` of the
/// load) that already meet the error bound with at most `max_models`
/// models ([`settled_ranges`]) — the shape maintenance would reach by group
/// splits, built directly so that a fresh index does not spend its first
/// passes (and its first readers' time) splitting.
fn settled_groups<K: Key, V: Value>(
    chunk: &[(K, V)],
    offset: usize,
    config: &Config,
) -> Vec<GroupPlan<K>> {
    let keys: Vec<K> = chunk.iter().map(|(k, _)| k.clone()).collect();
    settled_ranges(&keys, config.error_bound, config.max_models)
        .into_iter()
        .map(|(range, models)| GroupPlan {
            range: offset + range.start..offset + range.end,
            models,
        })
        .collect()
}

impl<K: Key, V: Value> Drop for XIndex<K, V> {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.as_mut() {
            worker.stop();
        }
    }
}

impl Worker {
    fn start<K: Key>(inner: Arc<Inner<K>>, interval: Duration) -> Result<Self> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("xindex-maintenance".into())
            .spawn(move || {
                // A hint only: if the system refuses, maintenance still
                // runs, at the priority it inherited (the budget bounds
                // the deltas either way).
                let _ = background::lower_current_thread(inner.config.maintenance_nice);
                let (stopped, wake) = &*signal;
                loop {
                    {
                        let mut stopped = stopped.lock();
                        if !*stopped {
                            wake.wait_for(&mut stopped, interval);
                        }
                        if *stopped {
                            return;
                        }
                    }
                    inner.maintain(Pass::Background);
                }
            })
            .map_err(|e| Error::Backend {
                engine: "lidx-xindex",
                message: format!("cannot start the maintenance thread: {e}"),
            })?;
        Ok(Worker {
            stop,
            handle: Some(handle),
        })
    }

    fn stop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock() = true;
        wake.notify_all();
        if let Some(handle) = self.handle.take() {
            // A panic in maintenance was already reported by the thread;
            // dropping must not panic again.
            let _ = handle.join();
        }
    }
}

impl<'a, K: Key, V: Value> IntoIterator for &'a XIndex<K, V> {
    type Item = (K, V);
    type IntoIter = Range<'a, K, V>;

    fn into_iter(self) -> Range<'a, K, V> {
        self.iter()
    }
}

/// Inserts every pair in order, as [`insert`](XIndex::insert) does one at
/// a time (an upsert: of two pairs with one key, the later value stays).
/// Through a shared reference, so threads can extend one index together;
/// each insert is linearizable on its own, the whole call is not atomic.
///
/// # Panics
///
/// As [`insert`](XIndex::insert), when the index is poisoned.
impl<K: Key, V: Value> Extend<(K, V)> for &XIndex<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, pairs: I) {
        for (key, value) in pairs {
            self.insert(key, value);
        }
    }
}

/// As `Extend` for `&XIndex`, so `index.extend(pairs)` reads as it does
/// for `BTreeMap`.
impl<K: Key, V: Value> Extend<(K, V)> for XIndex<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, pairs: I) {
        let mut shared: &Self = self;
        shared.extend(pairs);
    }
}

/// Formats the records as a map, as `BTreeMap` does (read by
/// [`iter`](XIndex::iter): not an atomic snapshot while writers run).
impl<K: Key, V: Value + fmt::Debug> fmt::Debug for XIndex<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Iterator over a key range of an [`XIndex`]; see [`XIndex::range`].
///
/// Each end fetches batches under its own epoch pin and narrows the range
/// past what it fetched, so the two ends never fetch the same key; once a
/// fetch finds the remaining range empty, both ends drain what the other
/// fetched.
pub struct Range<'a, K: Key, V: Value> {
    index: &'a XIndex<K, V>,
    /// Below every key still to fetch: the range's start, then just past
    /// the last key the front fetched.
    lower: Bound<K>,
    /// Above every key still to fetch: the range's end, then just below
    /// the last key the back fetched.
    upper: Bound<K>,
    /// Whether a fetch found nothing left between `lower` and `upper`.
    exhausted: bool,
    /// Fetched from the front, ascending, not yet returned.
    front: std::vec::IntoIter<(K, V)>,
    /// Fetched from the back, descending, not yet returned.
    back: std::vec::IntoIter<(K, V)>,
    /// The next fetch's size, from either end.
    front_batch: usize,
    back_batch: usize,
    /// Records fetched so far, from either end.
    front_fetched: usize,
    back_fetched: usize,
    /// Where either end's last fetch stopped, its next fetch's first guess.
    front_resume: ResumeGuess,
    back_resume: ResumeGuess,
}

impl<K: Key, V: Value> Iterator for Range<'_, K, V> {
    type Item = (K, V);

    /// Inlined into the caller's loop: all but one call in a batch's
    /// worth is a step of the buffer. (Out of line, with the buffer in a
    /// `VecDeque`, the steps of a 100-record range took as many
    /// instructions as its three fetches.)
    #[inline]
    fn next(&mut self) -> Option<(K, V)> {
        match self.front.next() {
            Some(record) => Some(record),
            None => self.next_fetched(),
        }
    }

    /// Internal iteration (`for_each`, `sum`, `count`, `fold`, and
    /// adapters over them such as `map(..).sum()`): the caller takes every
    /// record, so batches keep growing, to 1,024 records a fetch (what a
    /// [`scan`](XIndex::scan) takes per pin), and each is folded as a
    /// slice. `f` runs outside the fetches' epoch pins, as it would
    /// between calls to `next`.
    fn fold<B, F>(mut self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        let mut acc = self.front.by_ref().fold(init, &mut f);
        while !self.exhausted {
            self.fetch_front((self.front_batch * RANGE_BATCH_GROWTH).min(SCAN_BATCH));
            acc = self.front.by_ref().fold(acc, &mut f);
        }
        // The back's batches, descending, hold the rest.
        self.back.rfold(acc, f)
    }

    /// The record with the largest key left: one fetch from the back, as
    /// `BTreeMap`'s iterators do it, not a walk of the whole range.
    fn last(mut self) -> Option<(K, V)> {
        self.next_back()
    }

    /// The record with the smallest key left (keys are unique, so it is
    /// the least pair): the next one.
    fn min(mut self) -> Option<(K, V)>
    where
        (K, V): Ord,
    {
        self.next()
    }

    /// The record with the largest key left: as [`last`](Iterator::last).
    fn max(mut self) -> Option<(K, V)>
    where
        (K, V): Ord,
    {
        self.next_back()
    }
}

impl<K: Key, V: Value> Range<'_, K, V> {
    /// [`next`](Iterator::next) once the front's buffer is drained: fetch
    /// the next batch, unless the range is exhausted; past the front's
    /// last fetch, the rest is what the back fetched.
    #[inline(never)]
    fn next_fetched(&mut self) -> Option<(K, V)> {
        if !self.exhausted {
            // A short batch ends the range, so counting this one as full
            // is exact whenever another fetch follows.
            self.fetch_front(walk_batch(
                self.front_batch,
                self.front_fetched + self.front_batch,
            ));
            if let Some(record) = self.front.next() {
                return Some(record);
            }
        }
        self.back.next_back()
    }

    /// [`next_back`](DoubleEndedIterator::next_back) once the back's
    /// buffer is drained, as [`next_fetched`](Self::next_fetched) mirrored.
    #[inline(never)]
    fn next_back_fetched(&mut self) -> Option<(K, V)> {
        if !self.exhausted {
            self.fetch_back(walk_batch(
                self.back_batch,
                self.back_fetched + self.back_batch,
            ));
            if let Some(record) = self.back.next() {
                return Some(record);
            }
        }
        self.front.next_back()
    }

    /// Refills the drained front buffer with the next `front_batch`
    /// records, narrows the range past them and makes `next_batch` the
    /// next fetch's size. The lines of up to [`RANGE_BATCH`] records past
    /// the batch are requested with it, for a fold's larger batches too:
    /// a fetch requests at most 32 lines of keys
    /// ([`SCAN_PREFETCH_LINES`](crate::group::SCAN_PREFETCH_LINES)), which
    /// a batch of 256 already fills, and alternated runs could not tell a
    /// lookahead of 0, 64 or the next batch apart (session 58).
    fn fetch_front(&mut self, next_batch: usize) {
        let mut batch = reuse_buffer(&mut self.front, self.front_batch);
        match self.index.inner.collect(
            self.lower.clone(),
            &self.upper,
            self.front_batch,
            next_batch.min(RANGE_BATCH),
            &mut batch,
            &mut self.front_resume,
        ) {
            Some(resume) => self.lower = resume,
            None => self.exhausted = true,
        }
        self.front_fetched += batch.len();
        self.front = batch.into_iter();
        self.front_batch = next_batch;
    }

    /// [`fetch_front`](Self::fetch_front) mirrored: the back buffer, in
    /// descending order.
    fn fetch_back(&mut self, next_batch: usize) {
        let mut batch = reuse_buffer(&mut self.back, self.back_batch);
        match self.index.inner.collect_rev(
            &self.lower,
            self.upper.clone(),
            self.back_batch,
            next_batch.min(RANGE_BATCH),
            &mut batch,
            &mut self.back_resume,
        ) {
            Some(resume) => self.upper = resume,
            None => self.exhausted = true,
        }
        self.back_fetched += batch.len();
        self.back = batch.into_iter();
        self.back_batch = next_batch;
    }
}

/// An empty `Vec` for the next batch of `records`, with room for a
/// batch of [`RANGE_BATCH`] at least: the drained buffer's allocation,
/// taken back, so a range allocates once (a long walk or a fold, once
/// more for each larger batch). Growing the buffer batch by batch reallocated it, a third of
/// the instructions of a 10-record range.
///
/// Taken back through `map`: `collect` runs a mapped `vec::IntoIter` in
/// place, on its own allocation, however far it was advanced, while
/// collecting the `IntoIter` itself keeps the allocation only when it
/// was never advanced (a drained batch's was freed and the next batch
/// allocated anew: 64 of the 500 instructions of a range's second fetch,
/// callgrind, osm thinned to 43K keys). Allocation behaviour is not
/// something `Vec` promises; `range_buffers_are_reused` fails if a
/// toolchain stops doing it.
fn reuse_buffer<T>(drained: &mut std::vec::IntoIter<T>, records: usize) -> Vec<T> {
    debug_assert_eq!(drained.len(), 0, "only a drained buffer is reused");
    #[allow(
        clippy::map_identity,
        reason = "the map makes `collect` reuse the allocation in place"
    )]
    let mut buffer: Vec<T> = std::mem::take(drained).map(|record| record).collect();
    buffer.clear();
    buffer.reserve(records.max(RANGE_BATCH));
    buffer
}

/// Once `next` or `next_back` returned `None`, both ends are drained and
/// no fetch runs again.
impl<K: Key, V: Value> FusedIterator for Range<'_, K, V> {}

impl<K: Key, V: Value> DoubleEndedIterator for Range<'_, K, V> {
    /// Inlined, as [`next`](Iterator::next) is.
    #[inline]
    fn next_back(&mut self) -> Option<(K, V)> {
        match self.back.next() {
            Some(record) => Some(record),
            None => self.next_back_fetched(),
        }
    }

    /// [`fold`](Iterator::fold) mirrored: `rev().sum()` and the like.
    fn rfold<B, F>(mut self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        let mut acc = self.back.by_ref().fold(init, &mut f);
        while !self.exhausted {
            self.fetch_back((self.back_batch * RANGE_BATCH_GROWTH).min(SCAN_BATCH));
            acc = self.back.by_ref().fold(acc, &mut f);
        }
        self.front.rfold(acc, f)
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::{RANGE_BATCH, RANGE_FIRST_BATCH, SCAN_BATCH, reuse_buffer, walk_batch};

    #[test]
    fn walk_batches_grow_with_the_walk_and_stay_bounded() {
        // The fetches a walk by `next` makes, and what they fetch in all.
        let walk = |records: usize| {
            let (mut batch, mut fetched, mut sizes) = (RANGE_FIRST_BATCH, 0, Vec::new());
            while fetched < records {
                sizes.push(batch);
                fetched += batch;
                batch = walk_batch(batch, fetched);
            }
            (sizes, fetched)
        };
        // Up to 256 records, as before: 16, then 64.
        assert_eq!(walk(100), (vec![16, 64, 64], 144));
        assert_eq!(walk(272).0, vec![16, 64, 64, 64, 64]);
        for records in [300, 1_000, 3_000, 10_000, 100_000, 1_000_000] {
            let (sizes, fetched) = walk(records);
            // Never more than a quarter (plus the last batch of 64) past
            // what the consumer took, never above the scan's pin bound.
            assert!(
                fetched - records < records / 4 + RANGE_BATCH,
                "{records}: {sizes:?}"
            );
            assert!(
                sizes.iter().all(|&b| b <= SCAN_BATCH),
                "{records}: {sizes:?}"
            );
            assert!(
                sizes.windows(2).all(|w| w[0] <= w[1]),
                "{records}: {sizes:?}"
            );
        }
        // A long walk fetches in batches of up to 1,024: 10,000 records
        // in 23 fetches, not 157.
        assert_eq!(walk(10_000).0.len(), 23, "{:?}", walk(10_000).0);
        assert_eq!(walk(100_000).0.last(), Some(&SCAN_BATCH));
    }

    #[test]
    fn range_buffers_are_reused() {
        // Byte-string keys as well: the records are moved out as the
        // iterator is drained, and the buffer comes back empty.
        // A capacity a new buffer would not get (the allocator may well
        // hand a freed block straight back, so the address proves nothing).
        let mut batch: Vec<(Vec<u8>, u64)> = Vec::with_capacity(3 * RANGE_BATCH);
        batch.extend((0..40u64).map(|i| (i.to_be_bytes().to_vec(), i)));
        let allocation = (batch.as_ptr(), batch.capacity());
        let mut drained = batch.into_iter();
        let taken: Vec<u64> = drained.by_ref().map(|(_, v)| v).collect();
        assert_eq!(taken, (0..40).collect::<Vec<_>>());
        let reused = reuse_buffer(&mut drained, RANGE_BATCH);
        assert!(reused.is_empty());
        assert_eq!(
            (reused.as_ptr(), reused.capacity()),
            allocation,
            "the drained batch's allocation was not reused"
        );
        // A range's first batch: nothing to reuse, one allocation.
        let first = reuse_buffer(&mut Vec::<(u64, u64)>::new().into_iter(), RANGE_BATCH);
        assert!(first.capacity() >= RANGE_BATCH);
    }
}
