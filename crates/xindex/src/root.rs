//! The root node (paper Algorithm 1, `root_t`): group pivots, one slot per
//! group, and a two-stage RMI of linear models predicting a key's slot (or,
//! where the RMI predicts badly, a piecewise-linear model:
//! [`pla_serves_better`]).
//!
//! A root is immutable except for its slots, which maintenance overwrites
//! when it replaces a group (compaction, model and group split/merge). A
//! root update builds a new root from the current chain of groups and
//! swaps the global pointer. Slots merged away hold null and are skipped.

use std::ops::Bound;
use std::sync::atomic::Ordering;

use crossbeam_epoch::{Atomic, Guard, Shared};
use lidx_core::Key;
use lidx_core::model::linear::fit_least_squares;
use lidx_core::model::{LinearModel, round_clamp};
use lidx_core::prefetch::prefetch_lines;
use lidx_core::search::{exponential_by, upper_bound_within};

use crate::group::Group;
use crate::hint::ArrayHint;
use crate::pivot_pla::PivotPla;

/// One second-stage model: predicts a pivot position, with its exact error.
struct Leaf<K> {
    model: LinearModel<K>,
    max_error: usize,
}

/// A two-stage RMI over the sorted pivots.
struct Rmi<K> {
    stage1: LinearModel<K>,
    leaves: Box<[Leaf<K>]>,
}

impl<K: Key> Rmi<K> {
    fn fit(pivots: &[K], leaf_count: usize) -> Self {
        let n = pivots.len();
        let leaf_count = leaf_count.clamp(1, n.max(1));
        let base = match fit_least_squares(pivots) {
            Ok(f) => f.model,
            // Pivots are strictly sorted by construction; a flat model only
            // costs search time (every search verifies its window).
            Err(_) => LinearModel::constant(pivots[0].clone(), 0.0),
        };
        let scale = leaf_count as f64 / n.max(1) as f64;
        let stage1 = LinearModel::new(base.origin, base.slope * scale, base.intercept * scale);
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); leaf_count];
        for (i, p) in pivots.iter().enumerate() {
            members[round_clamp(
                stage1.predict_offset(p.offset_from(&stage1.origin)),
                leaf_count,
            )]
            .push(i);
        }
        let mut before = 0usize;
        let leaves = members
            .iter()
            .map(|idx| {
                let leaf = Self::fit_leaf(pivots, idx, before);
                before += idx.len();
                leaf
            })
            .collect();
        Rmi { stage1, leaves }
    }

    /// A leaf over the pivots at `idx` (ascending); `before` is the number
    /// of pivots routed to earlier leaves, the best guess for an empty leaf.
    fn fit_leaf(pivots: &[K], idx: &[usize], before: usize) -> Leaf<K> {
        let Some(&first) = idx.first() else {
            let origin = pivots[before.min(pivots.len() - 1)].clone();
            return Leaf {
                model: LinearModel::constant(origin, before as f64),
                max_error: 0,
            };
        };
        let keys: Vec<K> = idx.iter().map(|&i| pivots[i].clone()).collect();
        let model = match fit_least_squares(&keys) {
            // The stage-1 model is monotone, so a leaf's pivots are
            // contiguous and local position j is global position first + j.
            Ok(f) => LinearModel::new(
                f.model.origin,
                f.model.slope,
                f.model.intercept + first as f64,
            ),
            Err(_) => LinearModel::constant(pivots[first].clone(), first as f64),
        };
        let max_error = idx
            .iter()
            .map(|&i| {
                round_clamp(
                    model.predict_offset(pivots[i].offset_from(&model.origin)),
                    pivots.len(),
                )
                .abs_diff(i)
            })
            .max()
            .unwrap_or(0);
        Leaf { model, max_error }
    }

    fn mean_error(&self) -> f64 {
        let total: usize = self.leaves.iter().map(|l| l.max_error).sum();
        total as f64 / self.leaves.len() as f64
    }

    /// Predicted number of pivots `<= key` among `pivot_count`, and the
    /// leaf's error bound around it.
    #[inline(always)]
    fn predict(&self, key: &K, pivot_count: usize) -> (usize, usize) {
        let leaf = round_clamp(
            self.stage1
                .predict_offset(key.offset_from(&self.stage1.origin)),
            self.leaves.len(),
        );
        let leaf = &self.leaves[leaf];
        let predicted = round_clamp(
            leaf.model
                .predict_offset(key.offset_from(&leaf.model.origin)),
            pivot_count,
        );
        (predicted, leaf.max_error)
    }
}

/// Leaf error bound above which the pivot search gallops from the
/// prediction instead of binary-searching the whole error window: the
/// prediction is usually much closer than the bound. Measured (stage tool,
/// interleaved A/B): the route stage drops by 6-8 ns on osm (leaf errors up
/// to ~70) and 3-4 ns on geolite2; on books, whose leaves are exact to a
/// few pivots, the small window's binary search stays as fast.
const GALLOP_ABOVE_ERROR: usize = 4;

/// Cache lines of a group node a lookup reads: the node's array pointers
/// and its router (16 first keys and 16 lines, `u64` keys) end at offset
/// 432. The whole router is requested: which of its lines the lookup reads
/// depends on the key.
const GROUP_LINES: usize = 7;

/// Bytes of a group node a lookup reads.
const GROUP_LOOKUP_BYTES: usize = GROUP_LINES * 64;

/// The root node.
pub(crate) struct Root<K> {
    /// `pivots[j]` is the pivot of `slots[j + 1]`; slot 0 takes every key
    /// below `pivots[0]`.
    pivots: Box<[K]>,
    /// Group pointers. Not owned: groups are freed by maintenance (retire)
    /// or by the index's `Drop`, never by dropping a root.
    pub(crate) slots: Box<[Atomic<Group<K>>]>,
    rmi: Option<Rmi<K>>,
    pla: Option<PivotPla<K>>,
    /// Per slot, its group's [`ArrayHint`] when this root was built (empty
    /// for small roots and keys that own memory).
    hints: Box<[ArrayHint]>,
}

/// Whether a root over `slots` groups keeps [`ArrayHint`]s, on a core whose
/// L2 holds `l2_bytes`: only when the lines a lookup reads of the group
/// nodes ([`GROUP_LINES`] each) outgrow the L2.
///
/// A hint lets the key window's and the cells' loads start while the group
/// node is still on its way. When the nodes stay in the L2 they arrive at
/// once, and the hint only adds work: about 45 instructions and eleven
/// prefetches per lookup, a tenth of a `get`. Measured (stage tool
/// `hint_ab`, random gets, one process, alternated, medians of 8):
///
/// | host (L2 per core) | key set, groups | no hints | hints |
/// |---|---|---|---|
/// | AMD guest (512 KiB), session 22 | books, 258 | 247–302 ns | 286–321 ns |
/// | | osm, 1,551 | 320–350 ns | 285–333 ns |
/// | | geolite2, 6,727 | 381–587 ns | 344–496 ns |
/// | Intel guest (2 MiB), session 30 | osm, 1,552 | 107 ns | 119 ns |
/// | | lognormal 10M, 4,887 | 191 ns | 197 ns |
/// | | geolite2, 6,736 | 180 ns | 176 ns |
///
/// On the Intel guest, `lidx bench` osm `lookup` at 1 thread went from
/// 1.71–2.25x (median 1.88x) `btreemap` with hints to 1.92–2.21x (median
/// 2.14x) without, in eight alternated pairs.
fn hints_pay_off(slots: usize, l2_bytes: usize) -> bool {
    slots.saturating_mul(GROUP_LOOKUP_BYTES) > l2_bytes
}

/// Whether a root over `slots` groups keeps their array hints, as
/// [`Root::with_model`] decides it on the calling thread: a builder that
/// fits groups on other threads fits their hints there too.
pub(crate) fn keeps_hints<K>(slots: usize) -> bool {
    !std::mem::needs_drop::<K>() && hints_pay_off(slots, hint_l2_bytes())
}

/// The L2 size [`hints_pay_off`] compares against: the running core's,
/// bounded so that a CPU reporting a strange figure (or none, 1 MiB) still
/// gets hints for large roots and none for small ones.
fn hint_l2_bytes() -> usize {
    #[cfg(all(test, not(xindex_loom)))]
    if let Some(l2) = HINT_L2_OVERRIDE.with(std::cell::Cell::get) {
        return l2;
    }
    lidx_core::cpu_cache::l2_bytes()
        .unwrap_or(1 << 20)
        .clamp(HINT_L2_MIN, HINT_L2_MAX)
}

#[cfg(all(test, not(xindex_loom)))]
thread_local! {
    /// The L2 size [`hint_l2_bytes`] reports on this thread instead of the
    /// core's, unclamped (measuring tools: roots with or without hints
    /// whatever the host).
    pub(crate) static HINT_L2_OVERRIDE: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// Bounds of [`hint_l2_bytes`].
const HINT_L2_MIN: usize = 256 << 10;
const HINT_L2_MAX: usize = 4 << 20;
/// Roots over at most this many slots (585) keep no hints on any host.
#[cfg(all(test, not(xindex_loom)))]
pub(crate) const NEVER_HINTED_SLOTS: usize = HINT_L2_MIN / GROUP_LOOKUP_BYTES;
/// Roots over more slots than this (9,362) keep hints on any host.
#[cfg(all(test, not(xindex_loom)))]
pub(crate) const ALWAYS_HINTED_SLOTS: usize = HINT_L2_MAX / GROUP_LOOKUP_BYTES;

/// Which model routes a lookup to its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RootModel {
    /// The piecewise-linear root or the paper's RMI, as
    /// [`pla_serves_better`] chooses.
    Auto,
    /// The RMI (tests: its search paths).
    #[cfg(all(test, not(xindex_loom)))]
    Rmi,
    /// The piecewise-linear model (tests: its search path).
    #[cfg(all(test, not(xindex_loom)))]
    Pla,
}

/// How far (in pivots) an RMI prediction must land from its slot to count
/// as far: beyond [`GALLOP_ABOVE_ERROR`]-sized windows, the galloping
/// search takes several steps, each a branch on a loaded pivot that
/// predicts badly.
const FAR_PREDICTION: usize = 4;

/// Whether the piecewise-linear root should route instead of the RMI:
/// when it finds its segments through a radix table (`radix`), or else
/// when more than half of the `pivots` are predicted by the RMI more than
/// [`FAR_PREDICTION`] slots from their own (`far` of them).
///
/// The RMI's linear first stage splits the pivots among its leaves by key,
/// so on skewed or clustered keys most pivots crowd into a few leaves
/// whatever their number. osm (1,551 pivots): 70% of lookups land more
/// than 4 slots off, the median about 10; lognormal at 10M keys: 69% land
/// more than 32 off. There the piecewise-linear root (one level of 48
/// segments on osm) routes in 15-16 ns instead of 42-44, and `get` took
/// 80 ns instead of 85-86 (stage tool, alternated runs). Where the RMI is
/// close — geolite2 (3% land more than 4 off) and books (none) — its
/// first guess lets a lookup request the likely group's lines before its
/// search ends, while the piecewise root's search must finish first:
/// through the levels, their `get`s were 40% and 10% slower. Through the
/// radix table (`pivot_pla::RadixTop`) the piecewise root is as fast or
/// faster there too: one process alternating the two roots, 10 rounds
/// each, median `get` RMI against piecewise, geolite2 185.2 against 176.8
/// and 195.9 against 184.3 ns (piecewise faster in 7 of 10 pairs each
/// time), books 104.0 against 101.7 (7 of 10), generated log-uniform
/// gaps 155.2 against 153.9 (4 of 10).
pub(crate) fn pla_serves_better(radix: bool, far: usize, pivots: usize) -> bool {
    radix || far.saturating_mul(2) > pivots
}

impl<K: Key> Root<K> {
    /// A root over `groups` in key order (the first one's pivot is ignored,
    /// every other group must have one), with an RMI of about `leaf_count`
    /// leaves adapted as in §3.3: more leaves while the mean leaf error
    /// exceeds `error_bound`, fewer while it stays within `merge_error`.
    pub(crate) fn new(
        groups: Vec<Shared<'_, Group<K>>>,
        leaf_count: usize,
        max_leaves: usize,
        error_bound: usize,
        merge_error: usize,
    ) -> Self {
        Self::with_model(
            groups,
            leaf_count,
            max_leaves,
            error_bound,
            merge_error,
            RootModel::Auto,
        )
    }

    /// [`new`](Self::new) with the routing model chosen by `model`.
    pub(crate) fn with_model(
        groups: Vec<Shared<'_, Group<K>>>,
        leaf_count: usize,
        max_leaves: usize,
        error_bound: usize,
        merge_error: usize,
        model: RootModel,
    ) -> Self {
        let pivots: Vec<K> = groups[1..]
            .iter()
            .filter_map(|g| {
                // SAFETY: callers pass groups reachable from the current root
                // (or freshly built), which are alive while they hold them.
                unsafe { g.deref() }.pivot.clone()
            })
            .collect();
        debug_assert_eq!(
            pivots.len() + 1,
            groups.len(),
            "non-first group without a pivot"
        );
        let rmi = (!pivots.is_empty()).then(|| {
            let max_leaves = max_leaves.clamp(1, pivots.len());
            let mut count = leaf_count.clamp(1, max_leaves);
            let mut rmi = Rmi::fit(&pivots, count);
            while rmi.mean_error() > error_bound as f64 && count < max_leaves {
                count = (count * 2).min(max_leaves);
                rmi = Rmi::fit(&pivots, count);
            }
            if count > 1 && rmi.mean_error() <= merge_error as f64 {
                let fewer = Rmi::fit(&pivots, count / 2);
                if fewer.mean_error() <= error_bound as f64 {
                    rmi = fewer;
                }
            }
            rmi
        });
        let pla = match (model, &rmi) {
            (_, None) => None,
            #[cfg(all(test, not(xindex_loom)))]
            (RootModel::Rmi, _) => None,
            #[cfg(all(test, not(xindex_loom)))]
            (RootModel::Pla, _) => PivotPla::fit(&pivots),
            (RootModel::Auto, Some(rmi)) => {
                let pla = PivotPla::fit(&pivots);
                let radix = pla.as_ref().is_some_and(PivotPla::has_radix);
                let n = pivots.len();
                let far = if radix {
                    0
                } else {
                    pivots
                        .iter()
                        .enumerate()
                        .filter(|(i, p)| rmi.predict(p, n).0.abs_diff(i + 1) > FAR_PREDICTION)
                        .count()
                };
                pla.filter(|_| pla_serves_better(radix, far, n))
            }
        };
        let hints = if !keeps_hints::<K>(groups.len()) {
            Box::default()
        } else {
            groups
                .iter()
                .map(|g| {
                    // SAFETY: as above.
                    unsafe { g.as_ref() }.map_or(ArrayHint::NONE, Group::hint)
                })
                .collect()
        };
        Root {
            pivots: pivots.into_boxed_slice(),
            hints,
            slots: groups.into_iter().map(Atomic::from).collect(),
            rmi,
            pla,
        }
    }

    /// Number of second-stage RMI models (where the next root's fit
    /// starts), whichever model routes.
    pub(crate) fn leaf_count(&self) -> usize {
        self.rmi.as_ref().map_or(1, |r| r.leaves.len())
    }

    /// Models of the stage that predicts slots: the RMI's second-stage
    /// models, or the piecewise-linear root's lowest-level segments.
    pub(crate) fn model_count(&self) -> usize {
        match &self.pla {
            Some(pla) => pla.segment_count(),
            None => self.leaf_count(),
        }
    }

    /// Worst error of the stage that predicts slots.
    pub(crate) fn max_error(&self) -> usize {
        if let Some(pla) = &self.pla {
            return pla.max_error();
        }
        self.rmi.as_ref().map_or(0, |r| {
            r.leaves.iter().map(|l| l.max_error).max().unwrap_or(0)
        })
    }

    /// Whether this root requests its groups' likely array lines before
    /// their nodes arrive (see [`ArrayHint`]).
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn has_hints(&self) -> bool {
        self.hinted_slots() > 0
    }

    /// Slots whose hint names arrays.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn hinted_slots(&self) -> usize {
        self.hints.iter().filter(|h| h.is_some()).count()
    }

    /// Drops the array hints (measuring tools: lookups without them).
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn without_hints(mut self) -> Self {
        self.hints = Box::default();
        self
    }

    /// Whether the piecewise-linear root routes lookups.
    pub(crate) fn routes_piecewise(&self) -> bool {
        self.pla.is_some()
    }

    /// The RMI's predicted slot for `key` and the slot that holds it
    /// (measuring tools: how far the root's predictions land).
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn slot_error(&self, key: &K, guard: &Guard) -> (usize, usize) {
        let predicted = self
            .rmi
            .as_ref()
            .map_or(0, |rmi| rmi.predict(key, self.pivots.len()).0);
        (predicted, self.slot_of(key, guard))
    }

    /// The slot whose pivot range holds `key`.
    #[inline(always)]
    fn slot_of(&self, key: &K, guard: &Guard) -> usize {
        if let Some(pla) = &self.pla {
            // Exact, so the group it names is the one to load: request its
            // node's lines at once (without this, geolite2's `get` through
            // this root was 237-250 ns instead of 206-216: the node's lines
            // arrived one after another).
            let slot = pla.count_le(&self.pivots, key);
            self.prefetch_group(slot, guard);
            return slot;
        }
        match &self.rmi {
            Some(rmi) => {
                let (predicted, error) = rmi.predict(key, self.pivots.len());
                // The predicted slot's group is usually the answer: start
                // loading its node while the bounded pivot search runs.
                self.prefetch_group(predicted, guard);
                // A small window: its binary search is a few probes. A wide
                // one (a leaf with a few far outliers): gallop from the
                // prediction, which is usually much closer than the bound.
                if error <= GALLOP_ABOVE_ERROR {
                    upper_bound_within(&self.pivots, key, predicted, error)
                } else {
                    exponential_by(&self.pivots, predicted, |p| p <= key)
                }
            }
            None => 0,
        }
    }

    /// Requests the cache lines a lookup reads of the group node in `slot`
    /// and the slot's hint (nothing for a slot out of range or merged
    /// away).
    #[inline(always)]
    fn prefetch_group(&self, slot: usize, guard: &Guard) {
        if let Some(group) = self.slots.get(slot) {
            let group = group.load(Ordering::Relaxed, guard);
            if !group.is_null() {
                prefetch_lines(group.as_raw(), GROUP_LINES);
            }
            if let Some(hint) = self.hints.get(slot) {
                prefetch_lines(hint, 1);
            }
        }
    }

    /// The group responsible for `key` (`get_group`): predicted slot, the
    /// merged group before it if the slot was merged away, then `next`
    /// links while their pivots are `<= key`.
    #[inline(always)]
    pub(crate) fn route<'g>(&'g self, key: &K, guard: &'g Guard) -> &'g Group<K> {
        let slot = self.slot_of(key, guard);
        // Slot 0 has no pivot, and its group no hint.
        if let (Some(hint), Some(pivot)) = (self.hints.get(slot), slot.checked_sub(1)) {
            hint.prefetch::<K>(key.offset_from(&self.pivots[pivot]));
        }
        self.route_from(slot, key, guard)
    }

    /// [`route`](Self::route) for a write: a key at or above the last
    /// pivot (an append, most often) goes to the last slot after one
    /// compare, without the root's model or its search.
    #[inline(always)]
    pub(crate) fn route_write<'g>(&'g self, key: &K, guard: &'g Guard) -> &'g Group<K> {
        match self.pivots.last() {
            Some(last) if last <= key => self.route_from(self.pivots.len(), key, guard),
            _ => self.route(key, guard),
        }
    }

    /// First half of a pipelined [`route`](Self::route): the slot for
    /// `key`, with the cache lines of the group node it names requested.
    #[inline]
    pub(crate) fn slot_prefetched(&self, key: &K, guard: &Guard) -> usize {
        let slot = self.slot_of(key, guard);
        self.prefetch_group(slot, guard);
        slot
    }

    /// Second half of [`route`](Self::route), from the slot `slot_of` (or
    /// [`slot_prefetched`](Self::slot_prefetched)) chose for `key`.
    #[inline(always)]
    pub(crate) fn route_from<'g>(&'g self, slot: usize, key: &K, guard: &'g Guard) -> &'g Group<K> {
        let (_, mut group) = self.slot_group(slot, guard);
        // SAFETY: `next` links are unlinked before their groups are
        // reclaimed (with `Reclaimer::retire`), and `guard` is pinned.
        while let Some(next) = unsafe { group.next.load(Ordering::Acquire, guard).as_ref() } {
            match &next.pivot {
                Some(p) if p <= key => group = next,
                _ => break,
            }
        }
        group
    }

    /// The group in `slot`, or in the nearest slot before it if merged
    /// away, and the slot it was found in.
    #[inline(always)]
    fn slot_group<'g>(&'g self, mut slot: usize, guard: &'g Guard) -> (usize, &'g Group<K>) {
        loop {
            let shared = self.slots[slot].load(Ordering::Acquire, guard);
            // SAFETY: groups reachable from a root are reclaimed only through
            // `Reclaimer::retire` after being unlinked, and `guard` was pinned
            // before this root was loaded.
            if let Some(group) = unsafe { shared.as_ref() } {
                return (slot, group);
            }
            // Merged away: the group before it took over its range. Slot 0
            // is never merged away, so this stops.
            slot = slot.saturating_sub(1);
        }
    }

    /// [`route`](Self::route) plus the exclusive upper end of the group's
    /// key range (`None`: unbounded). (Scans route with a guess,
    /// [`route_bounded_from`](Self::route_bounded_from).)
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn route_bounded<'g>(
        &'g self,
        key: &K,
        guard: &'g Guard,
    ) -> (&'g Group<K>, Option<&'g K>) {
        let (_, group, end) = self.route_bounded_from(key, usize::MAX, guard);
        (group, end)
    }

    /// The group responsible for `key` and the exclusive upper end of its
    /// key range (`None`: unbounded), routed from a guessed slot: `slot`
    /// when its pivot range holds `key` (two comparisons with this root's
    /// pivots, so the guess may come from any earlier root), else the
    /// model's. Also returns the slot used, the guess for the next call.
    ///
    /// A range iterator's next fetch starts where its last one ended, in
    /// the same slot nearly always: the root's model and search are then
    /// skipped.
    #[inline(always)]
    pub(crate) fn route_bounded_from<'g>(
        &'g self,
        key: &K,
        slot: usize,
        guard: &'g Guard,
    ) -> (usize, &'g Group<K>, Option<&'g K>) {
        let slot = if self.slot_holds(slot, key) {
            slot
        } else {
            self.slot_of(key, guard)
        };
        let (group, end) = self.locate(slot, Some(key), guard);
        (slot, group, end)
    }

    /// Whether `slot`'s pivot range holds `key`, that is whether
    /// [`slot_of`](Self::slot_of) would return `slot` (`false` for a slot
    /// out of range).
    #[inline(always)]
    fn slot_holds(&self, slot: usize, key: &K) -> bool {
        let pivots = &self.pivots;
        slot <= pivots.len()
            && slot
                .checked_sub(1)
                .is_none_or(|below| &pivots[below] <= key)
            && pivots.get(slot).is_none_or(|above| key < above)
    }

    /// The leftmost group and the upper end of its key range.
    pub(crate) fn route_first<'g>(&'g self, guard: &'g Guard) -> (&'g Group<K>, Option<&'g K>) {
        self.locate(0, None, guard)
    }

    /// The group responsible for the largest keys inside the upper bound
    /// `upper`: for `Included(k)` the group of `k`; for `Excluded(k)` the
    /// group whose range ends at or above `k` and starts below it; for
    /// `Unbounded` the last group. Its lower end is its own `pivot`, read
    /// with it, so a reverse scan needs no second read like
    /// [`locate`](Self::locate)'s upper end.
    ///
    /// Inlined, like [`route`](Self::route), so that the root's search is
    /// built for x86-64-v3 inside `Inner::last_within`: out of line it ran
    /// the baseline build's search, 15% of a floor query's time on osm.
    ///
    /// `guess` is a slot to try before the model, as for
    /// [`route_bounded_from`](Self::route_bounded_from); the slot the group
    /// was found in is returned with it, the guess for the next call
    /// (`usize::MAX`, no guess, for an `Included` bound).
    #[inline(always)]
    pub(crate) fn route_within<'g>(
        &'g self,
        upper: &Bound<K>,
        guess: usize,
        guard: &'g Guard,
    ) -> (usize, &'g Group<K>) {
        let key = match upper {
            Bound::Included(k) => return (usize::MAX, self.route(k, guard)),
            Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        let mut slot = match key {
            Some(k) if self.slot_holds(guess, k) => guess,
            Some(k) => self.slot_of(k, guard),
            None => self.pivots.len(),
        };
        let below = |group: &Group<K>| match (&group.pivot, key) {
            (Some(p), Some(k)) => p < k,
            _ => true,
        };
        let (found, mut group) = loop {
            let (found, group) = self.slot_group(slot, guard);
            // A group starting at `k` holds nothing below it: the one
            // before it does. Slot 0's group has no pivot, so this stops.
            if below(group) || found == 0 {
                break (found, group);
            }
            slot = found - 1;
        };
        // SAFETY: as in `route_from`.
        while let Some(next) = unsafe { group.next.load(Ordering::Acquire, guard).as_ref() } {
            if !below(next) {
                break;
            }
            group = next;
        }
        (found, group)
    }

    /// From the predicted slot: back over merged-away slots, then along
    /// `next` links while their pivots are `<= key` (`None`: stay put).
    ///
    /// The upper end of a group in a slot is the pivot of the next slot in
    /// use, read after the group. A group merge installs the merged group
    /// in the earlier slot before it empties the later one, so a merge of
    /// the group with its neighbour between the two reads would make the
    /// end the merged group's, above every key the group read holds, and a
    /// scan would skip the neighbour's keys. The group still in its slot
    /// after the end was read rules that out (had the later slot been seen
    /// empty, the merged group would be seen in the earlier one); otherwise
    /// it is read again.
    #[inline]
    fn locate<'g>(
        &'g self,
        predicted: usize,
        key: Option<&K>,
        guard: &'g Guard,
    ) -> (&'g Group<K>, Option<&'g K>) {
        loop {
            let (slot, head) = self.slot_group(predicted, guard);
            #[cfg(all(test, not(xindex_loom)))]
            tests::after_slot_read();
            let mut group = head;
            // SAFETY: `next` links are unlinked before their groups are
            // reclaimed (with `Reclaimer::retire`), and `guard` is pinned.
            while let Some(next) = unsafe { group.next.load(Ordering::Acquire, guard).as_ref() } {
                match (&next.pivot, key) {
                    (Some(p), Some(key)) if p <= key => group = next,
                    (pivot, _) => return (group, pivot.as_ref()),
                }
            }
            let upper = (predicted..self.pivots.len())
                .find(|&j| !self.slots[j + 1].load(Ordering::Acquire, guard).is_null())
                .map(|j| &self.pivots[j]);
            if std::ptr::eq(
                self.slots[slot].load(Ordering::Acquire, guard).as_raw(),
                head,
            ) {
                return (group, upper);
            }
        }
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        /// Runs once, on this thread, right after the next `locate` has
        /// read its group's slot: a test's concurrent writer, placed in
        /// the window between that read and the read of the upper end.
        static AFTER_SLOT_READ: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    /// The hook `locate` calls after its slot read.
    pub(super) fn after_slot_read() {
        if let Some(hook) = AFTER_SLOT_READ.with(|h| h.borrow_mut().take()) {
            hook();
        }
    }

    #[test]
    fn hints_only_when_the_group_nodes_outgrow_the_l2() {
        // osm's 1,552 groups: 695 KB of node lines.
        assert!(hints_pay_off(1552, 512 << 10));
        assert!(!hints_pay_off(1552, 2 << 20));
        // geolite2's 6,736: 3 MB.
        assert!(hints_pay_off(6736, 2 << 20));
        assert!(!hints_pay_off(0, 0) && !hints_pay_off(1, 448) && hints_pay_off(2, 448));
        assert!(hints_pay_off(usize::MAX, usize::MAX - 1));
        // The bounds the tests rely on, whatever the host's L2.
        let l2 = hint_l2_bytes();
        assert!((HINT_L2_MIN..=HINT_L2_MAX).contains(&l2));
        assert!(!hints_pay_off(NEVER_HINTED_SLOTS, l2));
        assert!(hints_pay_off(ALWAYS_HINTED_SLOTS + 1, l2));
    }
    use crate::pages::Pages;
    use crossbeam_epoch::{self as epoch, Owned};

    fn groups_at<'g>(pivots: &[u64], guard: &'g Guard) -> Vec<Shared<'g, Group<u64>>> {
        std::iter::once(None)
            .chain(pivots.iter().map(|&p| Some(p)))
            .map(|pivot| {
                Owned::new(Group::from_values(
                    &Pages::new(),
                    pivot,
                    vec![],
                    vec![],
                    32,
                    1,
                    None,
                ))
                .into_shared(guard)
            })
            .collect()
    }

    #[test]
    fn routes_every_key_to_the_last_pivot_not_above_it() {
        let guard = epoch::pin();
        let pivots: Vec<u64> = (1..500u64).map(|i| i * i * 7 + 1000).collect();
        let groups = groups_at(&pivots, &guard);
        // (leaves, most leaves, error bound): the first two keep one leaf with
        // a wide error window (galloping search), the others adapt to small
        // windows (binary search).
        let shapes = [
            (1, 1, 1 << 20),
            (3, 3, 1 << 20),
            (64, 1 << 16, 2),
            (1000, 1 << 16, 2),
        ];
        let mut windows = Vec::new();
        for (leaves, most, bound) in shapes {
            let root = Root::with_model(groups.clone(), leaves, most, bound, 0, RootModel::Rmi);
            windows.push(root.max_error());
            for probe in [0u64, 999, 1000, 1007, 1006, 50_000, u64::MAX]
                .into_iter()
                .chain(pivots.iter().copied())
            {
                let expect = pivots.partition_point(|p| *p <= probe);
                let (g, upper) = root.route_bounded(&probe, &guard);
                let want = groups[expect];
                assert!(std::ptr::eq(g, want.as_raw()), "probe {probe}");
                assert_eq!(upper, pivots.get(expect));
                // From any guessed slot, right, near, wrong or out of range.
                let near = [expect.wrapping_sub(1), expect, expect + 1];
                for guess in near.into_iter().chain([0, 250, 499, 500, usize::MAX]) {
                    let (slot, g, upper) = root.route_bounded_from(&probe, guess, &guard);
                    assert_eq!(slot, expect, "probe {probe}, guess {guess}");
                    assert!(
                        std::ptr::eq(g, want.as_raw()),
                        "probe {probe}, guess {guess}"
                    );
                    assert_eq!(upper, pivots.get(expect));
                }
                // Downwards: the group of the largest keys inside an
                // upper bound, from any guess.
                let below = pivots.partition_point(|p| *p < probe);
                for guess in near.into_iter().chain([0, 250, 499, 500, usize::MAX]) {
                    let (slot, g) = root.route_within(&Bound::Excluded(probe), guess, &guard);
                    assert_eq!(slot, below, "below {probe}, guess {guess}");
                    assert!(std::ptr::eq(g, groups[below].as_raw()), "below {probe}");
                    let (_, g) = root.route_within(&Bound::Included(probe), guess, &guard);
                    assert!(std::ptr::eq(g, want.as_raw()), "at or below {probe}");
                }
            }
        }
        assert!(windows[0] > GALLOP_ABOVE_ERROR, "{windows:?}");
        assert!(windows[3] <= GALLOP_ABOVE_ERROR, "{windows:?}");
        for g in groups {
            // SAFETY (test): no other reference remains.
            drop(unsafe { g.into_owned() });
        }
    }

    #[test]
    fn a_merge_between_the_slot_read_and_the_upper_end_is_read_again() {
        // Groups A, B, C at pivots -, 100, 200; a merge of A and B (as
        // `merge_pair` stores: the merged group into A's slot, then B's
        // slot emptied) lands right after a scan's route read A's slot.
        // Reading the upper end then finds B's slot empty and C's pivot
        // next: A with C's pivot as its end would make the scan skip B's
        // keys. The route must give the merged group instead.
        let guard = epoch::pin();
        let groups = groups_at(&[100, 200], &guard);
        let merged = groups_at(&[], &guard)[0];
        let root = Root::new(groups.clone(), 1, 1, 1 << 20, 0);
        let slots = &root.slots;
        let a = groups[0];
        AFTER_SLOT_READ.with(|h| {
            let slots = std::ptr::from_ref(slots);
            let merged = merged.as_raw();
            *h.borrow_mut() = Some(Box::new(move || {
                // SAFETY (test): the root outlives the route that calls this.
                let slots = unsafe { &*slots };
                slots[0].store(Shared::from(merged), Ordering::Release);
                slots[1].store(Shared::null(), Ordering::Release);
            }));
        });
        let (group, upper) = root.route_bounded(&50, &guard);
        assert!(std::ptr::eq(group, merged.as_raw()), "the merged group");
        assert_eq!(upper, Some(&200));
        // Without a merge in the window the slot's group stands.
        slots[0].store(a, Ordering::Release);
        slots[1].store(groups[1], Ordering::Release);
        let (group, upper) = root.route_bounded(&50, &guard);
        assert!(std::ptr::eq(group, a.as_raw()));
        assert_eq!(upper, Some(&100));
        let (group, upper) = root.route_first(&guard);
        assert!(std::ptr::eq(group, a.as_raw()));
        assert_eq!(upper, Some(&100));
        for g in groups.into_iter().chain([merged]) {
            // SAFETY (test): no other reference remains.
            drop(unsafe { g.into_owned() });
        }
    }

    #[test]
    fn piecewise_root_routes_every_key_to_the_last_pivot_not_above_it() {
        let guard = epoch::pin();
        // Exponentially spaced pivots: one RMI leaf predicts most of them
        // far off, so the automatic choice takes the piecewise root.
        let pivots: Vec<u64> = (0..600u64).map(|i| (1u64 << (i / 10)) + i).collect();
        let groups = groups_at(&pivots, &guard);
        for model in [RootModel::Pla, RootModel::Auto] {
            let root = Root::with_model(groups.clone(), 1, 1, 1 << 20, 0, model);
            assert!(root.routes_piecewise(), "{model:?}");
            assert!(root.model_count() >= 2, "{}", root.model_count());
            for probe in [0u64, 1, 2, u64::MAX]
                .into_iter()
                .chain(pivots.iter().flat_map(|&p| [p - 1, p, p + 1]))
            {
                let expect = pivots.partition_point(|p| *p <= probe);
                let (g, upper) = root.route_bounded(&probe, &guard);
                assert!(std::ptr::eq(g, groups[expect].as_raw()), "probe {probe}");
                assert_eq!(upper, pivots.get(expect));
            }
        }
        // Evenly spaced pivots: one segment, whose radix table serves.
        let even: Vec<u64> = (1..600u64).map(|i| i * 1000).collect();
        let even_groups = groups_at(&even, &guard);
        let root = Root::new(even_groups.clone(), 1, 1, 1 << 20, 0);
        assert!(root.routes_piecewise());
        assert_eq!(root.model_count(), 1);
        for g in groups.into_iter().chain(even_groups) {
            // SAFETY (test): no other reference remains.
            drop(unsafe { g.into_owned() });
        }
    }

    #[test]
    fn piecewise_root_serves_with_its_radix_table_or_when_more_than_half_predict_far() {
        assert!(!pla_serves_better(false, 0, 0));
        assert!(!pla_serves_better(false, 0, 1000));
        assert!(!pla_serves_better(false, 500, 1000));
        assert!(pla_serves_better(false, 501, 1000));
        assert!(pla_serves_better(false, 1, 1));
        assert!(!pla_serves_better(false, usize::MAX / 2, usize::MAX));
        assert!(pla_serves_better(true, 0, 1000));
        assert!(pla_serves_better(true, 0, 0));
    }
}
