//! A group node (paper Algorithm 1, `group_t`): a sorted record array of
//! immutable shape, up to `m` linear models over it (and, for lookups, a
//! router that may hold finer segments, see [`Router`]), a delta index for
//! inserts, the temporary delta used while the group is being rebuilt, and
//! the `next` link to groups created by a split that the root does not
//! index yet.
//!
//! Keys live in one flat array and the records' value and version words in
//! a parallel array of [`CellBlock`]s (seven records per cache line, 9.1
//! bytes each): no per-record allocation, and a lookup touches the key
//! array and then one block.
//!
//! The record array and the delta are behind `Arc`s because several group
//! nodes share them: a model split/merge clones the node with new models,
//! and a group split first installs one logical group per part over the
//! same data (Algorithm 4, step 1).

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_epoch::Atomic;
use lidx_core::Key;
use lidx_core::model::{LinearModel, PositionModel, optimal_pla, round_clamp};
use lidx_core::prefetch::{CACHE_LINE, prefetch, prefetch_lines, prefetch_slice};
use lidx_core::search::{counted_within, exponential_by, window_around};

use crate::delta::Delta;
use crate::hint::ArrayHint;
use crate::pages::{Pages, Span, SpanView};
use crate::record::{CellBlock, Record, RecordCell, RemovedBounds, SLOTS, blocks_of, record_at};
use crate::submodels::{SubModel, fewest_models, worst_error};
use crate::tail::{Tail, TailSpec};

/// Keys and their record cells, sorted by key, never resized; optionally
/// followed by an append-only [`Tail`] (the sequential-insert fast path).
pub(crate) struct Records<K> {
    /// Shared with every group node over these records, which keeps its
    /// own handle so a lookup skips one pointer hop.
    pub(crate) keys: Span<K>,
    pub(crate) cells: Span<CellBlock>,
    pub(crate) tail: Option<Tail<K>>,
    /// Records removed since this array was built: a compaction trigger.
    pub(crate) removed: AtomicUsize,
    /// Set when a scan skipped a long run of removed array records
    /// ([`LONG_REMOVED_RUN`]): compacted at the next pass, whatever share
    /// of the records is removed. Not in the paper: without it a prefix
    /// removed from a large group (a queue drained from the front, a range
    /// cleared) stays until `f` of the group is removed, and every scan
    /// from its start skips it.
    pub(crate) removed_run: AtomicBool,
    /// The removed prefix and suffix scans have read, which later scans
    /// jump.
    pub(crate) removed_bounds: RemovedBounds,
}

/// Removed array records a scan skips in one go that make it ask for the
/// group's compaction ([`Records::removed_run`]).
pub(crate) const LONG_REMOVED_RUN: usize = 256;

impl<K: Key> Records<K> {
    /// The records of `keys` and `cells`, with a tail as `tail` says whose
    /// first model is the last of `models` (the array's), extended.
    fn new(
        pages: &Pages,
        keys: Vec<K>,
        cells: Vec<CellBlock>,
        models: &[SubModel<K>],
        tail: Option<TailSpec>,
        tail_open: bool,
    ) -> Self {
        debug_assert_eq!(keys.len().div_ceil(SLOTS), cells.len());
        // `Config::tail` gives a spec only for a non-zero capacity.
        let tail =
            tail.map(|spec| Tail::new(spec, tail_open, tail_start_model(models, keys.len())));
        let len = keys.len();
        Records {
            keys: pages.store(keys),
            cells: pages.store(cells),
            tail,
            removed: AtomicUsize::new(0),
            removed_run: AtomicBool::new(false),
            removed_bounds: RemovedBounds::new(len),
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
    pub(crate) fn cell_at(&self, i: usize) -> Record<'_> {
        match i.checked_sub(self.keys.len()) {
            None => record_at(&self.cells, i),
            Some(j) => self
                .tail
                .as_ref()
                .expect("index below lengths()")
                .cell(j)
                .record(),
        }
    }

    /// Whether `key` is above every array key (tail territory).
    #[inline]
    pub(crate) fn above_array(&self, key: &K) -> bool {
        above_all(&self.keys, key)
    }
}

/// Whether `key` is above every key of the sorted `keys`.
#[inline]
fn above_all<K: Ord>(keys: &[K], key: &K) -> bool {
    keys.last().is_none_or(|last| key > last)
}

/// The array's last model, moved to predict tail indexes (array position
/// minus `array_len`): keys arriving at the rate it learned need no
/// retraining. `None` over an empty array, whose models learned nothing.
fn tail_start_model<K: Key>(models: &[SubModel<K>], array_len: usize) -> Option<LinearModel<K>> {
    let last = models.last().filter(|m| m.len > 0)?;
    let shift = last.start as f64 - array_len as f64;
    Some(LinearModel::new(
        last.model.origin.clone(),
        last.model.slope,
        last.model.intercept + shift,
    ))
}

/// Segments a [`Router`] holds inline; a group with more models than
/// this (`max_models` above it) uses its boxed models when its keys need
/// more segments too.
const ROUTER_SEGMENTS: usize = 16;

/// Error bounds tried, tightest first, for segments fitted to the group's
/// keys. At 6 (measured errors up to 7) a stored key's answer lies inside
/// the first count's [`SEARCH_WINDOW`] around the prediction, so the second
/// count is left to keys the segments were not fitted to.
const ROUTER_EPS: [usize; 2] = [6, 14];

// `Router::segment_of`'s binary search takes four halving steps.
const _: () = assert!(ROUTER_SEGMENTS == 16);

/// One router segment's line: the predicted array position of `key` is
/// `intercept + slope * key.offset_from(origin)`, and the answer lies at
/// most `reach` positions from it.
#[derive(Clone, Copy, Debug, Default)]
struct Line {
    slope: f64,
    /// Array positions fit an `f32` to well under a position for any
    /// group small enough to rebuild; `reach` is measured with it.
    intercept: f32,
    reach: u32,
}

/// The group's position model in lookup form, stored inline in the group
/// node so that predicting a position reads no other allocation.
///
/// The paper's models (up to `m`, each within the error bound `e`) decide
/// when a group splits, and they alone would route a lookup; but an error
/// of up to `e` = 32 sends a third of geolite2's lookups past the first
/// count's window to a second one. So the router holds whichever serves
/// lookups better: the paper's models, or segments fitted to the group's
/// keys with a small error bound ([`ROUTER_EPS`]), up to
/// [`ROUTER_SEGMENTS`] of them. Both are rebuilt with the node, and each
/// segment's `reach` is measured on every key with the lookup's own
/// arithmetic.
///
/// Alternated A/Bs against the paper's models alone (1M gets, 1 thread,
/// ratio to `btreemap` in the same run): geolite2 `lookup` 1.37x -> 1.72x
/// (medians of 5), lognormal 10M 1.46x -> 1.78x and geolite2 `mixed:0.9`
/// 1.45x -> 1.68x (medians of 3); books and osm, whose models already hit
/// the window, unchanged. A first version that counted all 15 first keys
/// instead of binary-searching them cost books 90 instructions per `get`
/// and a quarter of its throughput.
#[repr(C)]
#[derive(Clone)]
struct Router<K> {
    /// Segments in use; 0 when neither candidate fits, and the boxed
    /// models serve.
    count: usize,
    /// `origins[j]` is the first key of segment `j` (for segment 0 the
    /// origin of its line), and the key its line's offsets are taken from.
    /// Entries from `count` on are copies of the last one in use.
    origins: [K; ROUTER_SEGMENTS],
    lines: [Line; ROUTER_SEGMENTS],
}

impl<K: Key> Router<K> {
    /// The better router of the paper's `models` and segments fitted to
    /// `keys`: fewer keys outside the first count's window, then the
    /// smaller worst reach, then the paper's.
    fn new(keys: &[K], models: &[SubModel<K>]) -> Self {
        let paper = Self::from_models(models);
        let mut best = paper.map(|mut r| {
            let score = r.score(keys);
            (r, score)
        });
        if best.as_ref().is_some_and(|(_, (outside, _))| *outside == 0) {
            return best.expect("checked").0;
        }
        for eps in ROUTER_EPS {
            let fit = match optimal_pla::build_at_most(keys, eps, ROUTER_SEGMENTS) {
                Ok(Some(fit)) => fit,
                Ok(None) => continue,
                Err(_) => break,
            };
            if fit.model.is_empty() {
                continue;
            }
            let segments = fit.model.into_segments();
            let mut fitted = Self::from_lines(
                segments
                    .iter()
                    .map(|seg| (seg.origin.clone(), seg.slope, seg.intercept)),
            );
            let score = fitted.score(keys);
            if best.as_ref().is_none_or(|(_, s)| score < *s) {
                best = Some((fitted, score));
            }
            break;
        }
        best.map_or_else(
            || Router {
                count: 0,
                origins: std::array::from_fn(|_| models[0].model.origin.clone()),
                lines: [Line::default(); ROUTER_SEGMENTS],
            },
            |(r, _)| r,
        )
    }

    /// The paper's models as segments (each line re-expressed from its
    /// first key), or `None` if there are more than [`ROUTER_SEGMENTS`].
    fn from_models(models: &[SubModel<K>]) -> Option<Self> {
        if models.len() > ROUTER_SEGMENTS {
            return None;
        }
        Some(Self::from_lines(models.iter().map(|m| {
            let origin = m
                .first_key
                .clone()
                .unwrap_or_else(|| m.model.origin.clone());
            let shift = m.model.origin.offset_from(&origin);
            let intercept = m.start as f64 + m.model.intercept - m.model.slope * shift;
            if intercept.is_finite() {
                (origin, m.model.slope, intercept)
            } else {
                // A shift beyond f64 range (extreme `F64Key`s): predict
                // the model's start; the search still finds the key.
                (origin, 0.0, m.start as f64)
            }
        })))
    }

    /// A router over `(origin, slope, intercept)` lines in key order (at
    /// least one, at most [`ROUTER_SEGMENTS`]), reaches not yet measured.
    fn from_lines(lines: impl Iterator<Item = (K, f64, f64)>) -> Self {
        let mut origins: Vec<K> = Vec::with_capacity(ROUTER_SEGMENTS);
        let mut out = [Line::default(); ROUTER_SEGMENTS];
        for (j, (origin, slope, intercept)) in lines.enumerate() {
            origins.push(origin);
            out[j] = Line {
                slope: if slope.is_finite() { slope } else { 0.0 },
                intercept: intercept as f32,
                reach: 0,
            };
        }
        let count = origins.len();
        let last = origins.last().expect("at least one line").clone();
        origins.resize(ROUTER_SEGMENTS, last);
        Router {
            count,
            origins: origins
                .try_into()
                .unwrap_or_else(|_| unreachable!("resized")),
            lines: out,
        }
    }

    /// The segment serving `key`: the last one whose first key is `<= key`
    /// (segment 0 also takes every key below its own).
    #[inline(always)]
    fn segment_of(&self, key: &K) -> usize {
        if std::mem::needs_drop::<K>() {
            // Keys that own memory compare slowly: stop at the first miss.
            let mut chosen = 0;
            while chosen + 1 < self.count && self.origins[chosen + 1] <= *key {
                chosen += 1;
            }
            chosen
        } else {
            // Branch-free binary search over the 15 later first keys. The
            // unused entries repeat the last first key, so they count only
            // for keys the last segment serves, and the `min` takes them
            // back out.
            let o = &self.origins;
            let mut j = 0;
            j += usize::from(o[j + 8] <= *key) * 8;
            j += usize::from(o[j + 4] <= *key) * 4;
            j += usize::from(o[j + 2] <= *key) * 2;
            j += usize::from(o[j + 1] <= *key);
            j.min(self.count - 1)
        }
    }

    /// `key`'s segment and predicted position among `len` records.
    #[inline(always)]
    fn predict(&self, key: &K, len: usize) -> (usize, usize) {
        let j = self.segment_of(key);
        let line = self.lines[j];
        let x = key.offset_from(&self.origins[j]);
        let pos = round_clamp(f64::from(line.intercept) + line.slope * x, len);
        (j, pos)
    }

    /// Sets every segment's reach from the errors it makes on `keys` (plus
    /// one position for a key between two records and one for rounding),
    /// and returns how many keys fall outside the first count's window
    /// and the worst reach.
    ///
    /// `keys` are sorted, so each segment serves one run of them: the walk
    /// moves to the next segment where [`segment_of`](Self::segment_of)
    /// would, and keeps the segment's worst error in a register instead
    /// of searching the segments and updating an array per key.
    fn score(&mut self, keys: &[K]) -> (usize, usize) {
        let mut worst = [0usize; ROUTER_SEGMENTS];
        let mut outside = 0;
        let len = keys.len();
        let mut j = 0;
        let mut at = 0;
        while at < len {
            // The run of keys segment `j` serves: up to the next origin.
            let end = if j + 1 < self.count {
                at + keys[at..].partition_point(|k| *k < self.origins[j + 1])
            } else {
                len
            };
            let (line, origin) = (self.lines[j], &self.origins[j]);
            let mut run_worst = 0;
            for (i, key) in keys[at..end].iter().enumerate() {
                let x = key.offset_from(origin);
                let pos = round_clamp(f64::from(line.intercept) + line.slope * x, len);
                let error = pos.abs_diff(at + i);
                run_worst = run_worst.max(error);
                outside += usize::from(error >= SEARCH_WINDOW / 2);
            }
            worst[j] = worst[j].max(run_worst);
            at = end;
            j += 1;
        }
        let mut worst_reach = 0;
        for (line, error) in self.lines.iter_mut().zip(worst).take(self.count) {
            let reach = error.saturating_add(2);
            line.reach = u32::try_from(reach).unwrap_or(u32::MAX);
            worst_reach = worst_reach.max(reach);
        }
        (outside, worst_reach)
    }
}

/// A group node. Laid out (`repr(C)`, cache-line aligned) so that what a
/// lookup reads — `next`, the arrays' addresses and the inline models —
/// comes first, in as few cache lines as possible.
#[repr(C, align(64))]
pub(crate) struct Group<K> {
    /// The next group in key order when the root does not index it yet.
    pub(crate) next: Atomic<Group<K>>,
    /// `records.keys`, held here too.
    keys: SpanView<K>,
    /// `records.cells`, held here too.
    cells: SpanView<CellBlock>,
    router: Router<K>,
    /// Whether `records` has a tail, held here so that a lookup or insert
    /// missing the array need not load the shared `Records` to find out.
    has_tail: bool,
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
    /// Where the arrays are and a model of positions in them, relative to
    /// `pivot`, for the root to copy: fitted by [`hint`](Self::hint) when
    /// a root that keeps hints first asks. Most roots keep none (their
    /// group nodes fit in the L2), and fitting every rebuilt group's hint
    /// took a quarter of the maintenance thread's time in a burst of
    /// inserts on osm.
    hint: OnceLock<ArrayHint>,
}

impl<K: Key> Group<K> {
    /// A group over live records (bulk load), with the fewest models
    /// (up to `max_models`) that keep every error within `error_bound`.
    pub(crate) fn from_values(
        pages: &Pages,
        pivot: Option<K>,
        keys: Vec<K>,
        words: Vec<u64>,
        error_bound: usize,
        max_models: usize,
        tail: Option<TailSpec>,
    ) -> Self {
        let (models, _) = fewest_models(&keys, error_bound, max_models);
        Self::with_models(pages, pivot, keys, words, models, tail)
    }

    /// A group over live records with already fitted `models`.
    pub(crate) fn with_models(
        pages: &Pages,
        pivot: Option<K>,
        keys: Vec<K>,
        words: Vec<u64>,
        models: Box<[SubModel<K>]>,
        tail: Option<TailSpec>,
    ) -> Self {
        let cells = CellBlock::live(&words);
        let records = Records::new(pages, keys, cells, &models, tail, true);
        Self::assemble(pivot, Arc::new(records), models, Arc::new(Delta::new()))
    }

    /// A node over `records` and `buf` with `models`, unlinked, no `tmp`.
    fn assemble(
        pivot: Option<K>,
        records: Arc<Records<K>>,
        models: Box<[SubModel<K>]>,
        buf: Arc<Delta<K>>,
    ) -> Self {
        let router = Router::new(&records.keys, &models);
        Self::assemble_routed(pivot, records, models, router, buf)
    }

    /// [`assemble`](Self::assemble) with the router already fitted.
    fn assemble_routed(
        pivot: Option<K>,
        records: Arc<Records<K>>,
        models: Box<[SubModel<K>]>,
        router: Router<K>,
        buf: Arc<Delta<K>>,
    ) -> Self {
        Group {
            next: Atomic::null(),
            // SAFETY: the node owns `records` (through the `Arc`) and
            // never replaces it, so the arrays outlive the views.
            keys: unsafe { SpanView::of(&records.keys) },
            // SAFETY: as for `keys`.
            cells: unsafe { SpanView::of(&records.cells) },
            router,
            has_tail: records.tail.is_some(),
            pivot,
            records,
            models,
            buf,
            tmp: OnceLock::new(),
            hint: OnceLock::new(),
        }
    }

    /// The merge phase's new group: every record points at the live record
    /// it was merged from, and `fit` gives the models over its keys. Its
    /// tail (if `tail` asks for one) stays closed until maintenance opens
    /// it after the copy phase.
    ///
    /// # Safety
    ///
    /// Every target must stay allocated until this group's copy phase has
    /// resolved all pointers and every thread that may have read a pointer
    /// has finished (see [`CellBlock::pointing_to`]).
    pub(crate) unsafe fn from_pointers(
        pages: &Pages,
        pivot: Option<K>,
        merged: Vec<(K, Record<'_>)>,
        fit: impl FnOnce(&[K]) -> Box<[SubModel<K>]>,
        buf: Arc<Delta<K>>,
        tail: Option<TailSpec>,
    ) -> Self {
        let (keys, targets): (Vec<K>, Vec<Record<'_>>) = merged.into_iter().unzip();
        // SAFETY: forwarded from this function's contract.
        let cells = unsafe { CellBlock::pointing_to(&targets) };
        let models = fit(&keys);
        let records = Records::new(pages, keys, cells, &models, tail, false);
        Self::assemble(pivot, Arc::new(records), models, buf)
    }

    /// The group's array hint ([`ArrayHint::NONE`] without a pivot),
    /// fitted on the first call.
    pub(crate) fn hint(&self) -> ArrayHint {
        *self.hint.get_or_init(|| {
            self.pivot.as_ref().map_or(ArrayHint::NONE, |p| {
                ArrayHint::fit(p, &self.records.keys, &self.records.cells)
            })
        })
    }

    /// A new node over this group's records and delta, with `pivot` and
    /// `models`: model split/merge.
    pub(crate) fn sharing(&self, pivot: Option<K>, models: Box<[SubModel<K>]>) -> Self {
        Self::assemble(
            pivot,
            Arc::clone(&self.records),
            models,
            Arc::clone(&self.buf),
        )
    }

    /// A new node over this group's records, delta, models and router,
    /// with `pivot`: a logical part of a group split. (Refitting the router
    /// over the whole array for every part cost a split of a 300K-record
    /// group into 200 parts 300 ms.)
    pub(crate) fn part(&self, pivot: Option<K>) -> Self {
        Self::assemble_routed(
            pivot,
            Arc::clone(&self.records),
            self.models.clone(),
            self.router.clone(),
            Arc::clone(&self.buf),
        )
    }

    /// The sorted key array and its parallel cell array (without the tail).
    #[inline]
    pub(crate) fn arrays(&self) -> (&[K], &[CellBlock]) {
        (&self.keys, &self.cells)
    }

    /// Key of record `i` of the array-then-tail order (`i` below the
    /// summed [`lengths`](Self::lengths)), from this node's own slice for
    /// an array record: only a tail record needs the shared `Records`
    /// (one more line to miss).
    #[inline(always)]
    pub(crate) fn key_at(&self, i: usize) -> Option<&K> {
        self.keys.get(i).or_else(|| self.records.key_at(i))
    }

    /// The value of record `i` of the array-then-tail order (`None` if
    /// removed), read like [`key_at`](Self::key_at).
    #[inline(always)]
    pub(crate) fn read_at(&self, i: usize) -> Option<u64> {
        if i < self.keys.len() {
            record_at(&self.cells, i).read()
        } else {
            self.records.cell_at(i).read()
        }
    }

    /// Array and published tail length, like [`Records::lengths`], without
    /// loading the shared `Records` when there is no tail.
    #[inline]
    pub(crate) fn lengths(&self) -> (usize, usize) {
        if self.has_tail {
            self.records.lengths()
        } else {
            (self.keys.len(), 0)
        }
    }

    /// Starts loading the delta index's header, so that its miss overlaps
    /// the key search's when the operation will likely need both (scans,
    /// puts).
    #[inline]
    pub(crate) fn prefetch_delta(&self) {
        prefetch(&*self.buf);
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

    /// The model's predicted array position of `key` (0 for an empty array).
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn predict(&self, key: &K) -> usize {
        self.prediction(key).pos
    }

    /// The serving model's predicted array position of `key` and how far
    /// from it the answer can be.
    #[inline(always)]
    pub(crate) fn prediction(&self, key: &K) -> Prediction {
        let router = &self.router;
        if router.count == 0 {
            let model = self.model_for(key);
            return Prediction {
                pos: model.start + model.model.predict_pos(key, model.len),
                reach: reach(model),
            };
        }
        let (j, pos) = router.predict(key, self.keys.len());
        Prediction {
            pos,
            reach: router.lines[j].reach as usize,
        }
    }

    /// Position of the first record whose key is `>= key`.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn lower_bound(&self, key: &K) -> usize {
        self.lower_bound_from(key, self.prediction(key))
    }

    /// The first array index whose key is not below `key`, searched from a
    /// prediction.
    ///
    /// First a branch-free count over the [`SEARCH_WINDOW`] keys around the
    /// predicted position (their two or three cache lines load in parallel,
    /// and no branch depends on a loaded key). When the answer lies outside
    /// that window — 3% of geolite2's lookups with the router's own
    /// segments, a third with the paper's models — a second count over
    /// the rest of the model's error range on the answer's side, with the
    /// cells of those records requested first, so the keys and the value
    /// take one more round trip to memory rather than one per galloping
    /// step plus one for the value. Counting the whole `±max_error` range
    /// at once would load more lines for the common case.
    ///
    /// Keys that own heap memory (strings) gallop only: counting would
    /// compare, and load, all of the window's keys.
    #[inline(always)]
    fn lower_bound_from(&self, key: &K, predicted: Prediction) -> usize {
        if std::mem::needs_drop::<K>() {
            exponential_by(&self.keys, predicted.pos, |k| k < key)
        } else {
            counted_within(
                &self.keys,
                predicted.pos,
                SEARCH_WINDOW,
                predicted.reach.min(MAX_COUNTED_REACH),
                |k| k < key,
                |start, end| {
                    prefetch_slice(blocks_of(&self.cells, start, end), OUTER_CELL_LINES);
                },
            )
        }
    }

    /// Index of the record holding exactly `key`.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn find(&self, key: &K) -> Option<usize> {
        let i = self.lower_bound(key);
        (self.keys.get(i) == Some(key)).then_some(i)
    }

    /// The array or tail record holding exactly `key`.
    #[inline(always)]
    pub(crate) fn record(&self, key: &K) -> Option<Record<'_>> {
        let predicted = self.prediction(key);
        // The record's cell sits in a parallel array: start loading its
        // likely lines now, so that miss overlaps the key search's miss.
        self.prefetch_cells(predicted.pos);
        self.record_near(key, predicted)
    }

    /// [`record`](Self::record) for a put: a key predicted at the array's
    /// end and above its last key (an append) skips the key search (a few
    /// percent of an append, `examples/burst_pass.rs`). Other keys pay one
    /// compare, and no line the search would not load.
    #[inline(always)]
    pub(crate) fn record_unless_above(&self, key: &K) -> Option<Record<'_>> {
        let predicted = self.prediction(key);
        if predicted.pos + 1 >= self.keys.len() && above_all(&self.keys, key) {
            return None;
        }
        self.prefetch_cells(predicted.pos);
        self.record_near(key, predicted)
    }

    /// First half of a pipelined [`record`](Self::record): the predicted
    /// position of `key`, with its key and cell lines requested.
    #[inline]
    pub(crate) fn predict_prefetched(&self, key: &K) -> Prediction {
        let predicted = self.prediction(key);
        if std::mem::needs_drop::<K>() {
            if let Some(k) = self.keys.get(predicted.pos) {
                prefetch(k);
            }
        } else {
            let (lo, hi) = window_around(predicted.pos, self.keys.len(), SEARCH_WINDOW);
            prefetch_slice(&self.keys[lo..hi], 3);
        }
        // Only the predicted cells: a batch already has every other key's
        // window in flight, and the whole windows' cells on top of that
        // overflow the CPU's outstanding-miss slots.
        prefetch_near(&self.cells, predicted.pos);
        predicted
    }

    /// The serving model's prediction for a scan's first key `key`, with
    /// the key and cell lines of the `records` records the scan will most
    /// likely copy requested from half a search window before it: in
    /// flight together with the window that finds the start, the copy then
    /// waits for one round trip to memory instead of two (the start's
    /// window, then the run). At most [`SCAN_PREFETCH_LINES`] lines of each,
    /// the ones nearest the start. Runs of at most [`SHORT_RUN`] records
    /// get what a `get` requests instead (they end inside the window).
    /// Keys that own memory are left to the copy.
    ///
    /// The keys go first, the search's window among them: the search waits
    /// on those lines (leaving the window to the search's own loads, after
    /// the run's requests, made 100-record scans of osm 3% slower, session
    /// 54). The cells go out as a count of whole blocks from the first
    /// one's address (a block is a line; one past the array is a hint that
    /// never faults), without slicing.
    ///
    /// `records` run upwards from the start, or with `downwards` below it
    /// (a reverse scan's).
    #[inline(always)]
    fn scan_prediction(&self, key: &K, records: usize, downwards: bool) -> Prediction {
        let predicted = self.prediction(key);
        let len = self.keys.len();
        if std::mem::needs_drop::<K>() || len == 0 || !scan_early_prefetch() {
            return predicted;
        }
        if records <= SHORT_RUN {
            // A short run lies in the search's window (unless the model
            // missed by more than half of it), so a get's requests serve
            // it: the window's first key line, then its cells.
            self.prefetch_cells(predicted.pos);
            return predicted;
        }
        let (below, above) = if downwards {
            (records, 0)
        } else {
            (0, records)
        };
        let start = predicted
            .pos
            .saturating_sub(SEARCH_WINDOW / 2)
            .saturating_sub(below)
            .min(len);
        let end = predicted
            .pos
            .saturating_add(above)
            .saturating_add(SEARCH_WINDOW / 2)
            .clamp(start, len);
        self.prefetch_span(start, end, downwards);
        predicted
    }

    /// Requests the key and cell lines of array records `start..end`, at
    /// most [`SCAN_PREFETCH_LINES`] of each, from `start` up or, with
    /// `downwards`, from `end` down. The caller checked that the keys own
    /// no memory and the array is not empty.
    #[inline(always)]
    fn prefetch_span(&self, start: usize, end: usize, downwards: bool) {
        // The lines requested are the ones nearest the start: the first
        // ones of an upward run, the last ones of a downward run longer
        // than the lines cover. Taken from the run's low end, a reverse
        // fold fetching 256 records with a lookahead of 1,024 requested
        // lines none of which its copy reads first (100-record `rfold`s
        // 25% slower than `next_back`, session 58; with the lookahead
        // capped at 64, as `Range` now passes it, no difference shows).
        let (mut key_start, mut first_block) = (start, start / SLOTS);
        let mut blocks = (end - start).div_ceil(SLOTS) + 1;
        if downwards {
            let keys_per_line = (CACHE_LINE / std::mem::size_of::<K>().max(1)).max(1);
            key_start = start.max(end.saturating_sub((SCAN_PREFETCH_LINES - 1) * keys_per_line));
            let excess = blocks.saturating_sub(SCAN_PREFETCH_LINES);
            (first_block, blocks) = (first_block + excess, blocks - excess);
        }
        prefetch_slice(&self.keys[key_start..end], SCAN_PREFETCH_LINES);
        prefetch_lines(
            self.cells.as_ptr().wrapping_add(first_block),
            blocks.min(SCAN_PREFETCH_LINES),
        );
    }

    /// Hints the CPU to load the first key line of the window counted from
    /// `predicted`, then the cells the search most likely ends on: those of
    /// the whole counted window, whose keys load at the same time (the
    /// answer lies in the window unless the model missed by more than half
    /// of it), or for galloped keys the ones near the prediction.
    #[inline(always)]
    fn prefetch_cells(&self, predicted: usize) {
        if std::mem::needs_drop::<K>() {
            prefetch_near(&self.cells, predicted);
        } else {
            // The window's blocks start at its first record's block; a
            // fixed count of lines (one may lie past the window, or past
            // the array: a hint never faults) spares computing the last.
            let (lo, _) = window_around(predicted, self.keys.len(), SEARCH_WINDOW);
            // The window's first key line goes first: the count waits on
            // it, and the cells' requests (another array, so another
            // page to translate) must not delay it. Alternated A/Bs, 1.5M
            // gets, ratio to `btreemap`, medians of 5: books `lookup`
            // 1.71x -> 1.93x, 1.73x -> 1.94x, 1.78x -> 1.94x, `mixed:0.9`
            // 1.69x -> 1.87x; geolite2, osm and lognormal 10M unchanged.
            prefetch_lines(self.keys.as_ptr().wrapping_add(lo), 1);
            prefetch_lines(
                self.cells.as_ptr().wrapping_add(lo / SLOTS),
                CELL_WINDOW_LINES,
            );
        }
    }

    /// Second half of [`record`](Self::record), searching from `predicted`.
    #[inline(always)]
    pub(crate) fn record_near(&self, key: &K, predicted: Prediction) -> Option<Record<'_>> {
        let i = self.lower_bound_from(key, predicted);
        if self.keys.get(i) == Some(key) {
            return Some(record_at(&self.cells, i));
        }
        if !self.has_tail {
            return None;
        }
        match &self.records.tail {
            Some(tail) if self.records.above_array(key) => tail.find(key).map(RecordCell::record),
            _ => None,
        }
    }

    /// The tail whose lock an insert of `key` must take, if the group has
    /// one and `key` is above the array.
    #[inline]
    pub(crate) fn tail_for(&self, key: &K) -> Option<&Tail<K>> {
        if !self.has_tail {
            return None;
        }
        self.records
            .tail
            .as_ref()
            .filter(|_| self.records.above_array(key))
    }

    /// Index (in the combined array-then-tail order, of which the first
    /// `tail_len` tail records count) of the first record inside `bound`,
    /// for a scan that will copy about `run` records from there: their
    /// lines are requested with the search's ([`scan_prediction`](Self::scan_prediction)).
    ///
    /// `guess` (`usize::MAX` for none) is an array index to try first: if
    /// the array's keys around it show it is the answer, the model and the
    /// search are skipped (a range iterator's next fetch guesses where its
    /// last one stopped, in whichever group that was).
    #[inline(always)]
    pub(crate) fn first_index(
        &self,
        bound: Bound<&K>,
        tail_len: usize,
        run: usize,
        guess: usize,
    ) -> usize {
        self.first_index_with(bound, tail_len, run, false, guess)
    }

    /// [`first_index`](Self::first_index) for a reverse scan, which will
    /// copy about `run` records below the index returned.
    #[inline(always)]
    pub(crate) fn first_index_rev(
        &self,
        bound: Bound<&K>,
        tail_len: usize,
        run: usize,
        guess: usize,
    ) -> usize {
        self.first_index_with(bound, tail_len, run, true, guess)
    }

    #[inline(always)]
    fn first_index_with(
        &self,
        bound: Bound<&K>,
        tail_len: usize,
        run: usize,
        downwards: bool,
        guess: usize,
    ) -> usize {
        let keys = &self.keys;
        let array = match bound {
            Bound::Unbounded => 0,
            Bound::Included(key) if self.guess_holds(guess, |k| k < key) => {
                self.prefetch_run(guess, run, downwards)
            }
            Bound::Excluded(key) if self.guess_holds(guess, |k| k <= key) => {
                self.prefetch_run(guess, run, downwards)
            }
            Bound::Included(key) => {
                self.lower_bound_from(key, self.scan_prediction(key, run, downwards))
            }
            Bound::Excluded(key) => {
                // Array keys are unique: past `key` is one step past it at
                // most (a search of the rest of the array cost a predecessor
                // query a miss per step).
                let i = self.lower_bound_from(key, self.scan_prediction(key, run, downwards));
                i + usize::from(keys.get(i) == Some(key))
            }
        };
        if !self.has_tail {
            return array;
        }
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

    /// Whether array index `guess` is where the keys stop being `before`
    /// the bound: the first index whose key is not, so the answer of a
    /// search (the array is sorted, so only one index passes).
    #[inline(always)]
    fn guess_holds(&self, guess: usize, before: impl Fn(&K) -> bool) -> bool {
        let keys = &self.keys;
        guess <= keys.len()
            && guess.checked_sub(1).is_none_or(|i| before(&keys[i]))
            && keys.get(guess).is_none_or(|k| !before(k))
    }

    /// Requests the lines of the `run` records from array index `at` up
    /// (or, `downwards`, below it), as
    /// [`scan_prediction`](Self::scan_prediction) does around a predicted
    /// start, and returns `at`.
    #[inline(always)]
    fn prefetch_run(&self, at: usize, run: usize, downwards: bool) -> usize {
        let len = self.keys.len();
        if !std::mem::needs_drop::<K>() && len > 0 && scan_early_prefetch() {
            let (start, end) = if downwards {
                (at.saturating_sub(run), at)
            } else {
                (at, at.saturating_add(run).min(len))
            };
            if start < end {
                self.prefetch_span(start, end, downwards);
            }
        }
        at
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

    /// The first array index from `at` of a record not seen removed
    /// ([`RemovedBounds::skip_from`]), starting from the end of the array's known
    /// removed prefix if `at` lies inside it, and extending that prefix
    /// when the run skipped starts at its end. Also returns whether the
    /// removed run from `at`, jumped or read, was long enough to ask for a
    /// compaction ([`note_removed_run`](Self::note_removed_run)): a
    /// removed prefix costs scans little now, but a group drained by pops
    /// still costs each of them a visit until a pass drops its records.
    #[inline]
    pub(crate) fn skip_removed_from(&self, at: usize) -> (usize, bool) {
        let len = self.keys.len();
        let end = self.records.removed_bounds.skip_from(&self.cells, at, len);
        (end, self.note_removed_run(end - at))
    }

    /// [`skip_removed_from`](Self::skip_removed_from) backwards: the end
    /// (exclusive) of the array records before `end` once the removed ones
    /// just below it are skipped, using and extending the array's known
    /// removed suffix.
    #[inline]
    pub(crate) fn skip_removed_before(&self, end: usize) -> (usize, bool) {
        let at = self.records.removed_bounds.skip_before(&self.cells, end);
        (at, self.note_removed_run(end - at))
    }

    /// The array's known removed prefix and suffix: records
    /// `0..prefix` and `suffix_start..` are removed.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn known_removed(&self) -> (usize, usize) {
        self.records.removed_bounds.known()
    }

    /// Notes that a scan skipped `skipped` removed array records in one
    /// run; returns whether that asks for a compaction (a long run).
    #[inline]
    pub(crate) fn note_removed_run(&self, skipped: usize) -> bool {
        if skipped < LONG_REMOVED_RUN {
            return false;
        }
        let flag = &self.records.removed_run;
        if !flag.load(Ordering::Relaxed) {
            flag.store(true, Ordering::Relaxed);
        }
        true
    }
}

/// Keys the search around a prediction compares without branches before
/// it falls back to galloping. Stage tool (4M random gets, 1 thread),
/// against galloping alone: books `get` 121-130 -> 96-106 ns, osm
/// 170-179 -> 142-160, geolite2 284-300 -> 284-288 (its models miss by
/// more than 8 records a third of the time).
const SEARCH_WINDOW: usize = 16;

/// Farthest from a prediction the second count of a search goes before
/// it gallops: four error bounds of the paper's `e`, beyond every healthy
/// model's reach. A badly fitted group (the late-arrival part of a split
/// that took a burst of appends: four models, errors of 5K to 10K
/// positions on geolite2) otherwise had every search miss the window
/// count thousands of keys, microseconds per insert, until a pass refit
/// it; galloping from here costs a few more dependent loads instead.
const MAX_COUNTED_REACH: usize = 128;

/// Cache lines of keys (and, separately, of cells) a scan requests with
/// its start's search in a group's array: enough for a 100-record scan of
/// 8-byte keys, bounded so a long range does not flood the memory system.
pub(crate) const SCAN_PREFETCH_LINES: usize = 32;

/// Longest run [`Group::scan_prediction`] requests as a get requests its
/// window (one key line and the window's cells) instead of counting the
/// run's lines: a run this short ends inside the window, and counting
/// them took 131 of a one-record scan's 867 instructions (session 59).
const SHORT_RUN: usize = SEARCH_WINDOW / 2;

/// Whether a scan requests its run's lines with its start's search
/// ([`Group::scan_prediction`]); a measuring tool turns it off to time
/// scans without (`tests::lookup_stages::scan_ab`).
#[cfg(all(test, not(xindex_loom)))]
pub(crate) static SCAN_EARLY_PREFETCH: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

#[inline(always)]
fn scan_early_prefetch() -> bool {
    #[cfg(all(test, not(xindex_loom)))]
    return SCAN_EARLY_PREFETCH.load(Ordering::Relaxed);
    #[cfg(not(all(test, not(xindex_loom))))]
    true
}

/// Most cache lines of cells requested for the second count of a search
/// (see [`Group::lower_bound_from`]): a model's error bound is 32 by
/// default, so the rest of its range holds at most 24 records beside the
/// window, in at most five blocks.
const OUTER_CELL_LINES: usize = 5;

/// A model's predicted array position and how far from it a key's lower
/// bound can lie.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prediction {
    pub(crate) pos: usize,
    pub(crate) reach: usize,
}

/// How far from `model`'s prediction a lower bound can lie, when the
/// boxed models serve (a [`Router`] measures its own reaches): the exact
/// error bound over the model's keys plus two positions, the margin the
/// router's reaches also take, for a key between two records. Only a hint
/// for the search, which gallops past it anyway.
fn reach<K>(model: &SubModel<K>) -> usize {
    model.max_error.saturating_add(2)
}

/// Records fetched ahead around a predicted position: the blocks holding
/// records `predicted - PREFETCH_REACH ..= predicted + PREFETCH_REACH`.
const PREFETCH_REACH: usize = 2;

/// Blocks (cache lines) holding the records of one [`SEARCH_WINDOW`]: 16
/// records lie in three blocks, or four when they start late in one.
const CELL_WINDOW_LINES: usize = (SEARCH_WINDOW + SLOTS - 2) / SLOTS + 1;
const _: () = assert!(std::mem::size_of::<CellBlock>() == CACHE_LINE || cfg!(xindex_loom));

/// Hints the CPU to load the cache lines of the cells near `predicted`.
#[inline]
fn prefetch_near(cells: &[CellBlock], predicted: usize) {
    let first = predicted.saturating_sub(PREFETCH_REACH) / SLOTS;
    let last = predicted.saturating_add(PREFETCH_REACH) / SLOTS;
    for block in cells
        .get(first..=last.min(cells.len().saturating_sub(1)))
        .unwrap_or(&[])
    {
        prefetch(block);
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use crate::submodels::fit_models;
    use proptest::prelude::*;

    /// Keys whose gaps change scale every few keys: one line per model
    /// misses by far more than the first count's window.
    fn noisy_keys(n: usize, seed: u64) -> Vec<u64> {
        let mut state = seed;
        let mut key = 0u64;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                key += 1 + ((state >> 33) % 4096) * u64::from((state >> 20).is_multiple_of(3));
                key
            })
            .collect()
    }

    /// Every stored key's error against its segment's measured reach, and
    /// how many keys land outside the first count's window.
    fn router_errors(g: &Group<u64>) -> usize {
        let keys = &g.keys[..];
        let mut outside = 0;
        for (i, k) in keys.iter().enumerate() {
            let (j, pos) = g.router.predict(k, keys.len());
            assert!(j < g.router.count);
            let error = pos.abs_diff(i);
            assert!(
                error + 2 <= g.router.lines[j].reach as usize,
                "reach of segment {j}"
            );
            outside += usize::from(error >= SEARCH_WINDOW / 2);
        }
        outside
    }

    /// [`Router::score`]'s definition, one key at a time through the
    /// lookup's own `predict`: each segment's worst error plus 2, and the
    /// keys outside the first count's window.
    fn score_by_key(router: &Router<u64>, keys: &[u64]) -> (Vec<u32>, usize) {
        let mut worst = vec![0usize; router.count];
        let mut outside = 0;
        for (i, k) in keys.iter().enumerate() {
            let (j, pos) = router.predict(k, keys.len());
            let error = pos.abs_diff(i);
            worst[j] = worst[j].max(error);
            outside += usize::from(error >= SEARCH_WINDOW / 2);
        }
        let reaches = worst.iter().map(|e| (e + 2) as u32).collect();
        (reaches, outside)
    }

    /// A group over `keys` (values their positions) with the paper's
    /// defaults `e` = 32 and `m` = 4, no tail.
    fn group_of(keys: &[u64]) -> Group<u64> {
        Group::from_values(
            &Pages::new(),
            None,
            keys.to_vec(),
            (0..keys.len() as u64).collect(),
            32,
            4,
            None,
        )
    }

    /// Scores `router` over `keys` and checks the reaches, the window
    /// misses and the worst reach against [`score_by_key`].
    fn check_score(mut router: Router<u64>, keys: &[u64], what: &str) {
        let (outside, worst_reach) = router.score(keys);
        let (reaches, want_outside) = score_by_key(&router, keys);
        let got: Vec<u32> = router.lines[..router.count]
            .iter()
            .map(|l| l.reach)
            .collect();
        assert_eq!((got, outside), (reaches.clone(), want_outside), "{what}");
        assert_eq!(worst_reach, *reaches.iter().max().unwrap() as usize);
    }

    #[test]
    fn score_walks_the_segments_as_lookups_choose_them() {
        for (n, seed) in [(2000, 7), (700, 3), (40, 11), (3, 5), (1, 9)] {
            let keys = noisy_keys(n, seed);
            for count in [1, 4, 16] {
                let models = crate::submodels::fit_models(&keys, count);
                if let Some(router) = Router::from_models(&models) {
                    check_score(router, &keys, &format!("{n} keys, {count} models"));
                }
            }
            // Fitted segments too: the router a group builds.
            check_score(
                group_of(&keys).router.clone(),
                &keys,
                &format!("{n} keys, group router"),
            );
        }
    }

    #[test]
    fn router_fits_its_own_segments_where_the_models_miss_the_window() {
        let keys = noisy_keys(2000, 7);
        let g = group_of(&keys);
        let paper = Router::from_models(&g.models).expect("4 models fit");
        let mut paper = paper;
        let (paper_outside, _) = paper.score(&keys);
        assert!(
            paper_outside > 0,
            "the paper's models should miss the window here"
        );
        // The router chose segments fitted to the keys: fewer misses.
        assert!(g.router.count > g.models.len());
        assert!(router_errors(&g) < paper_outside);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(g.find(k), Some(i));
            assert_eq!(g.lower_bound(&(k + 1)), i + 1);
        }
    }

    #[test]
    fn scan_prediction_stays_inside_the_arrays_for_any_start_and_length() {
        // Prefetches never fault, but the slices they are taken from must
        // be in bounds: keys far below, inside and far above the group,
        // run lengths from 0 to usize::MAX, and an empty group. The
        // prediction is the lookup's own.
        let keys: Vec<u64> = (0..3000u64).map(|i| 1_000 + i * 10).collect();
        let g = Group::from_values(&Pages::new(), None, keys, (0..3000).collect(), 32, 4, None);
        for key in [0, 1_000, 5_005, 30_990, 31_000, u64::MAX] {
            for records in [0, 1, 100, 5_000, usize::MAX] {
                for downwards in [false, true] {
                    let predicted = g.scan_prediction(&key, records, downwards);
                    assert_eq!(predicted.pos, g.prediction(&key).pos);
                }
                assert_eq!(
                    g.first_index(Bound::Included(&key), 0, records, usize::MAX),
                    g.lower_bound(&key)
                );
                assert_eq!(
                    g.first_index_rev(Bound::Included(&key), 0, records, usize::MAX),
                    g.lower_bound(&key)
                );
            }
        }
        let empty = Group::from_values(
            &Pages::new(),
            None,
            Vec::<u64>::new(),
            Vec::new(),
            32,
            4,
            None,
        );
        assert_eq!(
            empty.first_index(Bound::Included(&7), 0, 100, usize::MAX),
            0
        );
        let strings: Vec<Vec<u8>> = (0..50).map(|i| format!("k{i:03}").into_bytes()).collect();
        let gs = Group::from_values(&Pages::new(), None, strings, (0..50).collect(), 32, 4, None);
        assert_eq!(
            gs.first_index(Bound::Excluded(&b"k010".to_vec()), 0, 100, usize::MAX),
            11
        );
    }

    #[test]
    fn router_keeps_the_paper_models_when_they_hit_the_window() {
        let keys: Vec<u64> = (0..3000u64).map(|i| i * 10).collect();
        let g = Group::from_values(&Pages::new(), None, keys, (0..3000).collect(), 32, 4, None);
        assert_eq!(g.router.count, g.models.len());
        assert_eq!(router_errors(&g), 0);
    }

    #[test]
    fn router_serves_keys_outside_its_segments() {
        let keys = noisy_keys(500, 3);
        let n = keys.len();
        let g = Group::from_values(
            &Pages::new(),
            Some(0),
            keys.clone(),
            (0..n as u64).collect(),
            32,
            4,
            None,
        );
        // Below the first key, above the last, and the extremes.
        for probe in [0, 1, keys[0] - 1, keys[n - 1] + 1, u64::MAX] {
            assert_eq!(g.lower_bound(&probe), keys.partition_point(|k| *k < probe));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::tests::soak::proptest_cases(64)))]
        #[test]
        fn router_predictions_stay_within_their_reach(
            n in 0usize..3000,
            seed in any::<u64>(),
            probes in proptest::collection::vec(any::<u64>(), 1..20),
        ) {
            let keys = noisy_keys(n, seed);
            let g = Group::from_values(&Pages::new(), None, keys.clone(), (0..n as u64).collect(), 32, 4, None);
            router_errors(&g);
            for p in probes.iter().chain(keys.iter()) {
                prop_assert_eq!(g.lower_bound(p), keys.partition_point(|k| k < p));
            }
            // String keys take the router's comparison loop and gallop.
            let strings: Vec<Vec<u8>> = keys.iter().map(|k| k.to_be_bytes().to_vec()).collect();
            let gs = Group::from_values(&Pages::new(), None, strings.clone(), (0..n as u64).collect(), 32, 4, None);
            for p in probes.iter().chain(keys.iter()) {
                let ps = p.to_be_bytes().to_vec();
                prop_assert_eq!(gs.lower_bound(&ps), strings.partition_point(|k| *k < ps));
            }
        }
    }

    #[test]
    fn models_split_data_evenly_and_find_everything() {
        let keys: Vec<u64> = (0..1000u64).map(|i| i * i).collect();
        let words: Vec<u64> = (0..1000).collect();
        let g = Group::from_values(&Pages::new(), None, keys.clone(), words, 8, 4, None);
        assert!(g.models.len() > 1 && g.models.len() <= 4);
        assert_eq!(g.models.iter().map(|m| m.len).sum::<usize>(), 1000);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(g.find(k), Some(i));
            assert_eq!(g.records.cell_at(i).read(), Some(i as u64));
        }
        assert_eq!(g.find(&2), None);
        assert_eq!(g.first_index(Bound::Excluded(&4), 0, 0, usize::MAX), 3);
        assert_eq!(g.first_index(Bound::Included(&5), 0, 0, usize::MAX), 3);
    }

    #[test]
    fn a_guessed_first_index_is_taken_only_where_it_is_the_answer() {
        // Every guess, right or wrong (out of range, from another group),
        // gives the searched answer: in the array, at its ends, and past
        // it into a tail.
        let g = Group::from_values(
            &Pages::new(),
            None,
            (0..200u64).map(|i| i * 10).collect(),
            (0..200).collect(),
            4,
            4,
            Some(TailSpec {
                capacity: 8,
                error_bound: 4,
            }),
        );
        let tail = g.tail_for(&2_000).expect("above the array");
        assert!(tail.try_append(&2_000, 7) && tail.try_append(&2_010, 8));
        let guesses = (0..=202).chain([usize::MAX, usize::MAX - 1]);
        for key in (0..2_030u64).step_by(5) {
            for bound in [Bound::Included(&key), Bound::Excluded(&key)] {
                let searched = g.first_index(bound, 2, 64, usize::MAX);
                assert_eq!(g.first_index_rev(bound, 2, 64, usize::MAX), searched);
                for guess in guesses.clone() {
                    assert_eq!(
                        g.first_index(bound, 2, 64, guess),
                        searched,
                        "{bound:?}, guess {guess}"
                    );
                    assert_eq!(
                        g.first_index_rev(bound, 2, 64, guess),
                        searched,
                        "{bound:?}, guess {guess}, downwards"
                    );
                }
            }
        }
        let empty = Group::<u64>::from_values(&Pages::new(), None, vec![], vec![], 32, 4, None);
        for guess in [0, 1, usize::MAX] {
            assert_eq!(empty.first_index(Bound::Excluded(&5), 0, 64, guess), 0);
        }
    }

    #[test]
    fn empty_group_finds_nothing() {
        let g = Group::<u64>::from_values(&Pages::new(), None, vec![], vec![], 32, 4, None);
        assert_eq!(g.models.len(), 1);
        assert_eq!(g.find(&7), None);
        assert_eq!(g.first_index(Bound::Unbounded, 0, 0, usize::MAX), 0);
    }

    #[test]
    fn tail_records_follow_the_array() {
        let g = Group::from_values(
            &Pages::new(),
            None,
            vec![10u64, 20, 30],
            vec![1, 2, 3],
            32,
            4,
            Some(TailSpec {
                capacity: 4,
                error_bound: 32,
            }),
        );
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
        assert_eq!(g.first_index(Bound::Excluded(&30), 2, 0, usize::MAX), 3);
        assert_eq!(g.first_index(Bound::Excluded(&35), 2, 0, usize::MAX), 4);
        assert_eq!(g.first_index(Bound::Included(&41), 2, 0, usize::MAX), 5);
        assert_eq!(g.first_index(Bound::Included(&25), 2, 0, usize::MAX), 2);
    }

    #[test]
    fn a_tail_starts_from_the_arrays_last_model() {
        // Keys every 10: the array's model, moved past its 100 records,
        // predicts every appended key at this rate exactly.
        let g = Group::from_values(
            &Pages::new(),
            None,
            (0..100u64).map(|i| i * 10).collect(),
            (0..100).collect(),
            0,
            1,
            Some(TailSpec {
                capacity: 50,
                error_bound: 0,
            }),
        );
        let tail = g.tail_for(&1_000).expect("above the array");
        assert_eq!(tail.model_count(), 1);
        for i in 100..150u64 {
            assert!(tail.try_append(&(i * 10), i));
        }
        assert_eq!(tail.model_count(), 1, "no retraining at the learned rate");
        for i in 0..150u64 {
            assert_eq!(g.record(&(i * 10)).and_then(|c| c.read()), Some(i));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::tests::soak::proptest_cases(64)))]
        #[test]
        fn lower_bound_matches_partition_point(
            mut keys in proptest::collection::vec(any::<u64>(), 0..300),
            probes in proptest::collection::vec(any::<u64>(), 1..20),
            count in 1usize..21,
        ) {
            keys.sort_unstable();
            keys.dedup();
            // Up to 20 models: beyond ROUTER_SEGMENTS the boxed models may serve.
            let models = fit_models(&keys, count);
            let n = keys.len();
            let words = (0..n as u64).collect();
            let g = Group::with_models(&Pages::new(), None, keys.clone(), words, models, None);
            prop_assert!(g.router.count > 0 || g.models.len() > ROUTER_SEGMENTS);
            for p in probes.iter().chain(keys.iter()) {
                let expect = keys.partition_point(|k| k < p);
                prop_assert_eq!(g.lower_bound(p), expect);
                let found = g.record(p).and_then(|c| c.read());
                prop_assert_eq!(found, (keys.get(expect) == Some(p)).then_some(expect as u64));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::tests::soak::proptest_cases(64)))]
        #[test]
        fn search_from_any_prediction_matches_partition_point(
            mut keys in proptest::collection::vec(0u64..200, 0..60),
            probes in proptest::collection::vec(0u64..210, 1..12),
        ) {
            // Short arrays around the window's size, every prediction (also
            // past the end): exercises the window's clamping at both ends,
            // answers inside it, and the gallop on either side of it.
            keys.sort_unstable();
            keys.dedup();
            let n = keys.len();
            let g = Group::from_values(&Pages::new(), None, keys.clone(), (0..n as u64).collect(), 32, 4, None);
            // The same keys as byte strings take the galloping path.
            let strings: Vec<Vec<u8>> = keys.iter().map(|k| k.to_be_bytes().to_vec()).collect();
            let gs = Group::from_values(&Pages::new(), None, strings.clone(), (0..n as u64).collect(), 32, 4, None);
            for p in &probes {
                let expect = keys.partition_point(|k| k < p);
                let ps = p.to_be_bytes().to_vec();
                for pos in (0..=n + 2).chain([usize::MAX]) {
                    // Reaches that cover the answer, fall short of it, or
                    // are absurd: the search must not depend on them.
                    for reach in [0, 3, 10, 34, usize::MAX] {
                        let predicted = Prediction { pos, reach };
                        prop_assert_eq!(g.lower_bound_from(p, predicted), expect);
                        prop_assert_eq!(gs.lower_bound_from(&ps, predicted), expect);
                    }
                }
            }
        }
    }

    #[test]
    fn prefetch_accepts_any_position() {
        let cells = CellBlock::live(&(0..10).collect::<Vec<_>>());
        for predicted in [0, 1, 5, 9, 10, 11, usize::MAX] {
            prefetch_near(&cells, predicted);
        }
        prefetch_near(&[], 0);
        prefetch_near(&[], usize::MAX);
        // A hint changes nothing observable.
        assert_eq!(record_at(&cells, 9).read(), Some(9));
    }
}
