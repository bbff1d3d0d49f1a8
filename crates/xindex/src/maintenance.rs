//! Background structure maintenance (paper §3.1.3, §3.1.4 and §3.3):
//! Two-Phase Compaction, model split/merge, group split/merge and root
//! update, with the trigger conditions of Table 2.
//!
//! A pass holds the maintenance lock, so structural changes never overlap
//! (the paper's background threads "share no conflicts"). While holding it,
//! this module reads the structure through the unprotected epoch guard:
//! only code holding the lock unlinks and retires groups and roots, so
//! everything reachable from the current root stays allocated for the
//! whole pass (a node the pass itself retired may be freed by its later
//! barriers, and the pass never touches a node after retiring it). It
//! never stays pinned, because its epoch barriers wait for every thread
//! pinned on the index's collector.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};
use lidx_core::Key;
use lidx_core::model::linear::fit_least_squares;

use parking_lot::MutexGuard;

use crate::config::{Config, SequentialGroups};
use crate::delta::Delta;
use crate::group::Group;
use crate::hooks::Phase;
use crate::inner::{Counters, Inner};
#[cfg(doc)]
use crate::pages::Pages;
use crate::parallel;
use crate::record::Record;
use crate::root::{self, Root};
use crate::submodels::{SubModel, fewest_models, fit_models, remeasured, settled_ranges};
use crate::tail::TailSpec;

/// A group pointer as read by maintenance: alive for the whole pass.
type GroupPtr<K> = Shared<'static, Group<K>>;

/// Groups waiting for compaction in this pass, in key order, with the
/// location each is installed at.
type Pending<K> = Vec<(&'static Atomic<Group<K>>, GroupPtr<K>)>;

/// Records compacted together under one pair of epoch barriers; bounds the
/// transient memory of a batch (pointer records plus cloned keys, about
/// `10 + size_of::<K>()` bytes per record).
#[cfg(not(test))]
const BATCH_RECORDS: usize = 1 << 18;
/// Tests use tiny indexes; a small batch makes passes flush mid-walk.
#[cfg(test)]
const BATCH_RECORDS: usize = 48;

/// Every live record of `group`'s array and (frozen) delta, in key order.
/// A key may have a removed copy in the array and its live copy in the
/// delta; removed records are skipped, so each key appears at most once.
fn live_records<K: Key>(group: &'static Group<K>) -> Vec<(K, Record<'static>)> {
    live_record_parts(group, &[])
        .pop()
        .expect("one part without cuts")
}

/// [`live_records`], cut into `cuts.len() + 1` parts: part `i + 1` starts
/// at the first key at or above `cuts[i]` (`cuts` ascending).
///
/// The delta's records are streamed into the merge and each record goes
/// straight into its part: a split of a group grown by a burst of
/// appends (900K records) spent a fifth of its time on the whole-group
/// vector and its copies into the parts, most of it faulting in fresh
/// pages for them (`docs/results/xindex-session45.md`).
fn live_record_parts<K: Key>(
    group: &'static Group<K>,
    cuts: &[K],
) -> Vec<Vec<(K, Record<'static>)>> {
    let records = &group.records;
    let (array_len, tail_len) = records.lengths();
    let mut end = array_len + tail_len;
    let total = end + group.buf.len();
    let per_part = total / (cuts.len() + 1) + 1;
    let mut parts: Vec<Vec<(K, Record<'static>)>> = Vec::with_capacity(cuts.len() + 1);
    parts.push(Vec::with_capacity(per_part));
    let mut emit = |key: &K, cell: Record<'static>| {
        if cell.read().is_none() {
            return;
        }
        while cuts.get(parts.len() - 1).is_some_and(|cut| key >= cut) {
            parts.push(Vec::with_capacity(per_part));
        }
        let part = parts.last_mut().expect("never empty");
        debug_assert!(
            part.last().is_none_or(|(k, _)| k < key),
            "duplicate live key"
        );
        part.push((key.clone(), cell));
    };
    // Array records up to each delta record's key go first (on a tie the
    // array's copy, as `get` reads them); the array ends at its first
    // unpublished tail slot.
    let mut at = 0usize;
    let mut array_until = |bound: Option<&K>, emit: &mut dyn FnMut(&K, Record<'static>)| {
        while at < end {
            let Some(key) = records.key_at(at) else {
                end = at;
                break;
            };
            if bound.is_some_and(|b| key > b) {
                break;
            }
            emit(key, records.cell_at(at));
            at += 1;
        }
    };
    group.buf.for_each_record(|d| {
        array_until(Some(d.key()), &mut emit);
        emit(d.key(), d.value().record());
    });
    array_until(None, &mut emit);
    parts.resize_with(cuts.len() + 1, Vec::new);
    parts
}

/// What a pass's walk over the groups carries from group to group.
struct Walk<K: 'static> {
    pass: Pass,
    /// Groups due for compaction, compacted in batches.
    pending: Pending<K>,
    /// Records in `pending`'s groups.
    pending_records: usize,
    /// Some group's small delta was left to wait.
    waiting: bool,
    /// Groups due for a split into more than [`CHAINED_SPLIT_PARTS`]
    /// parts, with their plans: split after the walk, their parts taking
    /// root slots at once.
    wide: Vec<(GroupPtr<K>, SplitPlan<K>)>,
}

/// `Inner::quiet_at` when the last pass did something, left a delta
/// waiting or began while retired nodes were waiting to be freed, so the
/// next background pass must walk.
pub(crate) const NOT_QUIET: u64 = u64::MAX;

/// Who runs a maintenance pass, which decides how patient it is with small
/// deltas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// The background thread: a small delta waits up to
    /// [`Config::small_delta_delay`].
    Background,
    /// [`XIndex::maintain_now`](crate::XIndex::maintain_now) or a writer
    /// over the delta budget: every non-empty delta is compacted.
    Full,
}

/// What one pass sees in a group that may call for a compaction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Backlog {
    /// Keys in the delta index.
    pub(crate) delta: usize,
    /// How long the delta has been seen non-empty.
    pub(crate) delta_waited: Duration,
    /// Records in the array.
    pub(crate) records: usize,
    /// Of those, removed ones.
    pub(crate) removed: usize,
    /// Records appended to the tail (§3.5.2).
    pub(crate) appended: usize,
    /// Whether the array sits in a region less than half full of live
    /// arrays ([`Pages::is_sparse`]): rebuilt, it moves to the current
    /// region, so that the old one can be freed.
    pub(crate) sparse_region: bool,
    /// Whether a scan skipped a long run of removed array records
    /// ([`Records::removed_run`](crate::group::Records::removed_run)).
    pub(crate) removed_run: bool,
}

/// A delta holding at least one key per this many array records is
/// compacted at the next pass: the copy then costs at most this many
/// records per new key, and at most this share of a group's keys pays the
/// second search (in the delta) of a lookup.
const RECORDS_PER_DELTA_KEY: usize = 64;

/// Whether a pass compacts a group with `backlog` (after Table 2's splits
/// and merges, which compact anyway, have been decided):
/// - a delta larger than `s * f`, or than 1/[`RECORDS_PER_DELTA_KEY`] of
///   the array, at once, since a lookup of a new key searches it after the
///   array;
/// - a smaller non-empty one once it has waited `small_delta_delay`, or at
///   a [`Pass::Full`];
/// - removed records reaching `f` of the records, so they are dropped;
/// - a half-full tail, so a fresh tail is ready before sequential inserts
///   would spill into the delta;
/// - an array in a sparse region (not in the paper: it bounds the memory
///   that regions hold to about twice the live arrays);
/// - a long run of removed records a scan had to skip (not in the paper:
///   a prefix drained from a large group would otherwise stay until `f`
///   of the group is removed, and slow every scan from its start).
pub(crate) fn compaction_due(config: &Config, backlog: &Backlog, pass: Pass) -> bool {
    let delta_due = backlog.delta > 0
        && (pass == Pass::Full
            || backlog.delta > config.merge_delta()
            || backlog.delta.saturating_mul(RECORDS_PER_DELTA_KEY) >= backlog.records
            || backlog.delta_waited >= config.small_delta_delay);
    let all_records = (backlog.records + backlog.appended) as f64;
    let removed_due =
        backlog.removed > 0 && backlog.removed as f64 >= all_records * config.tolerance;
    let tail_half_full =
        config.sequential_capacity > 0 && backlog.appended * 2 >= config.sequential_capacity;
    delta_due || removed_due || tail_half_full || backlog.sparse_region || backlog.removed_run
}

/// What a rebuild sees of the keys inserted into one group since it was
/// built: the evidence for the §3.5.2 sequential-insert pattern.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TopInserts {
    /// Records appended to the group's tail.
    pub(crate) appended: usize,
    /// Live delta keys above every array record.
    pub(crate) above: usize,
    /// Keys in the delta, live or removed.
    pub(crate) delta: usize,
    /// Whether the group has a tail: kept while no new key says otherwise
    /// (a group compacted, then merged in the same pass, has seen none).
    pub(crate) had_tail: bool,
}

/// Fewest keys that must have arrived above a group's records (or its
/// tail capacity, if smaller) before its rebuild counts as sequential.
const SEQUENTIAL_MIN_KEYS: usize = 16;

/// The paper's detection of sequential insertion (§3.5.2): at least
/// [`SEQUENTIAL_MIN_KEYS`] (or `capacity`) of the group's new keys arrived
/// above its records, and they are at least three quarters of its new keys.
/// Random inserts land above a group's last key about once per group
/// size, so they do not qualify; a single run of ascending keys does.
/// Without new keys, a group keeps what it had.
pub(crate) fn sequential_pattern(capacity: usize, top: &TopInserts) -> bool {
    let at_top = top.appended + top.above;
    let new = top.appended + top.delta;
    if new == 0 {
        return top.had_tail;
    }
    at_top >= SEQUENTIAL_MIN_KEYS.min(capacity).max(1) && at_top * 4 >= new * 3
}

/// The tail a rebuilt group gets: every group's with
/// [`SequentialGroups::All`]; with [`SequentialGroups::Detected`] only
/// that of a group holding the old group's top whose `top` inserts were
/// sequential (`None`: the group does not hold the top).
pub(crate) fn rebuilt_tail(config: &Config, top: Option<&TopInserts>) -> Option<TailSpec> {
    let spec = config.tail()?;
    match config.sequential_groups {
        SequentialGroups::All => Some(spec),
        SequentialGroups::Detected => top
            .is_some_and(|top| sequential_pattern(spec.capacity, top))
            .then_some(spec),
    }
}

/// [`TopInserts`] of the frozen `group`, whose live records are `merged`.
fn top_inserts<K: Key>(group: &Group<K>, merged: &[(K, Record<'_>)]) -> TopInserts {
    top_inserts_by(group, merged, |(k, _)| k)
}

/// [`top_inserts`] of the frozen `group` whose live records are cut
/// into `parts`.
fn top_inserts_of_parts<K: Key>(group: &Group<K>, parts: &[Vec<(K, Record<'_>)>]) -> TopInserts {
    let (_, appended) = group.records.lengths();
    let above_array = match group.records.keys.last() {
        Some(top) => parts
            .iter()
            .map(|part| part.len() - part.partition_point(|(k, _)| k <= top))
            .sum(),
        None => parts.iter().map(Vec::len).sum(),
    };
    top_inserts_from(group, appended, above_array)
}

/// [`top_inserts`] over any sorted run of `group`'s keys (`key` reads
/// one from an item).
fn top_inserts_by<K: Key, T>(group: &Group<K>, sorted: &[T], key: impl Fn(&T) -> &K) -> TopInserts {
    let (_, appended) = group.records.lengths();
    // Above the array, not above the tail: keys that arrived while the
    // tail was still closed (in the rebuild that built this group) sit in
    // the delta below the tail's, and are as sequential as those.
    let above_array = match group.records.keys.last() {
        Some(top) => sorted.len() - sorted.partition_point(|t| key(t) <= top),
        None => sorted.len(),
    };
    top_inserts_from(group, appended, above_array)
}

/// [`TopInserts`] of `group` with `appended` tail records, `above_array`
/// of its keys above its array.
fn top_inserts_from<K: Key>(group: &Group<K>, appended: usize, above_array: usize) -> TopInserts {
    let above = above_array - appended.min(above_array);
    TopInserts {
        appended,
        above,
        delta: group.buf.len(),
        had_tail: group.records.tail.is_some(),
    }
}

/// Poisons the index if dropped while its thread unwinds from a panic
/// that began after it was made, that is, if the maintenance pass holding
/// it panicked. (A pass may run inside a destructor during an unrelated
/// unwind, through `maintain_now` or an insert over the delta budget, and
/// completing it must not poison the index.)
struct PoisonOnUnwind<'a> {
    poisoned: &'a AtomicBool,
    panicking_before: bool,
}

impl<'a> PoisonOnUnwind<'a> {
    fn new(poisoned: &'a AtomicBool) -> Self {
        PoisonOnUnwind {
            poisoned,
            panicking_before: std::thread::panicking(),
        }
    }
}

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        if !self.panicking_before && std::thread::panicking() {
            self.poisoned.store(true, Ordering::Release);
        }
    }
}

impl<K: Key> Inner<K> {
    /// One maintenance pass; true if any group or the root changed.
    pub(crate) fn maintain(&self, pass: Pass) -> bool {
        self.maintain_locked(&self.maintenance.lock(), pass)
    }

    /// [`maintain`](Self::maintain) for a caller already holding the
    /// maintenance lock (`_serial`).
    pub(crate) fn maintain_locked(&self, _serial: &MutexGuard<'_, ()>, pass: Pass) -> bool {
        // A pass that unwound may have stopped anywhere between two steps
        // of a rebuild; running another on top of it is not covered by
        // the protocol's argument.
        self.panic_if_poisoned();
        let _poison = PoisonOnUnwind::new(&self.poisoned);
        // Read before the walk: a write during it makes the next pass run.
        let changes = self.len.changes();
        if pass == Pass::Background && self.quiet_at.load(Ordering::Relaxed) == changes {
            // The last pass found nothing to do and left no delta waiting,
            // and no key was added or removed since: this walk would find
            // nothing either. (In-place updates never call for maintenance,
            // and nothing retired was waiting to be freed.)
            self.reclaimer.release_retired();
            return false;
        }
        // Freeing a retired array can leave its region sparse, which only
        // a walk notices: a pass is quiet only if nothing retired was
        // still waiting to be freed when its walk began.
        let all_freed = self.reclaimer.all_freed();
        // SAFETY: see the module docs: we hold the maintenance lock, the
        // only licence to unlink and retire groups and roots.
        let guard = unsafe { epoch::unprotected() };
        let mut changed = false;
        let mut reshaped = false;

        let root = self.current_root(guard);
        // Compactions are batched: every group due for one in this pass is
        // frozen, merged and copied together, so the pass waits for two
        // epoch barriers per batch instead of two per group.
        let mut walk = Walk {
            pass,
            pending: Vec::new(),
            pending_records: 0,
            waiting: false,
            wide: Vec::new(),
        };
        for slot in root.slots.iter() {
            let mut location: &'static Atomic<Group<K>> = slot;
            loop {
                let shared = location.load(Ordering::Acquire, guard);
                if shared.is_null() {
                    break;
                }
                let (mut last, acted, new_groups) = self.adjust(location, shared, &mut walk, guard);
                changed |= acted;
                reshaped |= new_groups;
                if walk.pending_records >= BATCH_RECORDS {
                    let queued_last = walk
                        .pending
                        .last()
                        .is_some_and(|(_, g)| std::ptr::eq(g.as_raw(), last));
                    let replacement = self.compact_batch(&mut walk.pending, guard);
                    // If `last` itself was just replaced, the walk continues
                    // from its replacement's `next`.
                    if let (true, Some(replacement)) = (queued_last, replacement) {
                        last = replacement;
                    }
                    walk.pending_records = 0;
                }
                location = &last.next;
            }
        }
        self.compact_batch(&mut walk.pending, guard);
        if !walk.wide.is_empty() {
            // Every group in a root slot first, where a wide split finds it.
            if reshaped {
                self.update_root(guard);
            }
            self.split_wide(std::mem::take(&mut walk.wide), guard);
            // The wide splits' parts took over their own slots in a root
            // update that also flattened every `next` link made before it.
            reshaped = false;
            changed = true;
        }
        if reshaped {
            self.update_root(guard);
        }
        if self.merge_neighbours(self.current_root(guard), guard) {
            changed = true;
            self.update_root(guard);
        }
        Counters::bump(&self.counters.passes);
        self.reclaimer.release_retired();
        let quiet = !(changed || reshaped || walk.waiting) && all_freed;
        self.quiet_at
            .store(if quiet { changes } else { NOT_QUIET }, Ordering::Relaxed);
        changed || reshaped
    }

    fn current_root(&self, guard: &'static Guard) -> &'static Root<K> {
        // SAFETY: never null; only this (locked) code retires roots.
        unsafe { self.root.load(Ordering::Acquire, guard).deref() }
    }

    /// Applies Table 2 to one group at `location`. Returns the last group
    /// now standing where it stood (its `next` continues the walk), whether
    /// anything changed, and whether groups were created.
    /// A group due for compaction is queued in `walk.pending` instead.
    fn adjust(
        &self,
        location: &'static Atomic<Group<K>>,
        shared: GroupPtr<K>,
        walk: &mut Walk<K>,
        guard: &'static Guard,
    ) -> (&'static Group<K>, bool, bool) {
        let c = &self.config;
        // SAFETY: reachable from the current root; see the module docs.
        let group = unsafe { shared.deref() };
        let error = group.max_error();
        let models = group.models.len();
        // Exact up to `s`, which is all the decisions below need: a larger
        // delta splits the group, or if the split cannot run, is above
        // every compaction threshold (`s·f` and at most `s`).
        let delta = group.buf.len_up_to(c.delta_threshold);
        if delta > c.delta_threshold || (error > c.error_bound && models >= c.max_models) {
            // Table 2 rows c and d.
            let plan = split_plan(group, c);
            if plan.cuts.len() + 1 > CHAINED_SPLIT_PARTS {
                walk.wide.push((shared, plan));
                return (group, true, false);
            }
            if let Some(last) = self.split_group(location, shared, plan, guard) {
                return (last, true, true);
            }
        }
        let mut current = shared;
        let mut acted = false;
        if error > c.error_bound && models < c.max_models {
            // Row a.
            current = self.resize_models(location, current, models + 1, guard);
            Counters::bump(&self.counters.model_splits);
            acted = true;
        } else if models > 1 && error <= c.merge_error() {
            // Row b, unless merging would immediately call for a split.
            let fewer = fit_models(&group.records.keys, models - 1);
            if fewer.iter().all(|m| m.max_error <= c.error_bound) {
                current = self.install_models(location, current, fewer, guard);
                Counters::bump(&self.counters.model_merges);
                acted = true;
            }
        }
        // SAFETY: as above (a freshly installed node or the original one).
        let node = unsafe { current.deref() };
        // `node` shares `group`'s delta (a model split or merge keeps it).
        let (records, appended) = node.records.lengths();
        let backlog = Backlog {
            delta,
            // The clock is read only for the groups with new keys.
            delta_waited: if delta > 0 {
                node.buf.waited(self.clock())
            } else {
                Duration::ZERO
            },
            records,
            removed: node.records.removed.load(Ordering::Relaxed),
            appended,
            sparse_region: self.pages.is_sparse(&node.records.keys)
                || self.pages.is_sparse(&node.records.cells),
            removed_run: node.records.removed_run.load(Ordering::Relaxed),
        };
        if compaction_due(c, &backlog, walk.pass) {
            walk.pending.push((location, current));
            walk.pending_records += records + appended + delta;
            return (node, true, false);
        }
        // A small delta left to wait is due later without any new write.
        walk.waiting |= delta > 0;
        (node, acted, false)
    }

    /// Model split or merge to `count` models: a new node over the same
    /// records and delta, swapped in; no barrier is needed because both
    /// nodes see the same data and the same (shared) frozen flag.
    fn resize_models(
        &self,
        location: &Atomic<Group<K>>,
        shared: GroupPtr<K>,
        count: usize,
        guard: &'static Guard,
    ) -> GroupPtr<K> {
        // SAFETY: reachable from the current root.
        let group = unsafe { shared.deref() };
        let models = fit_models(&group.records.keys, count);
        self.install_models(location, shared, models, guard)
    }

    fn install_models(
        &self,
        location: &Atomic<Group<K>>,
        shared: GroupPtr<K>,
        models: Box<[SubModel<K>]>,
        guard: &'static Guard,
    ) -> GroupPtr<K> {
        // SAFETY: reachable from the current root.
        let group = unsafe { shared.deref() };
        let node = group.sharing(group.pivot.clone(), models);
        node.next
            .store(group.next.load(Ordering::Acquire, guard), Ordering::Relaxed);
        let node = self.nodes.alloc_shared(node, guard);
        location.store(node, Ordering::Release);
        // SAFETY: just unlinked from its only location.
        unsafe { self.retire_group(shared) };
        node
    }

    /// Two-Phase Compaction (Algorithm 3) of every queued group, sharing
    /// the barriers. Returns the replacement of the last queued group.
    fn compact_batch(
        &self,
        pending: &mut Pending<K>,
        guard: &'static Guard,
    ) -> Option<&'static Group<K>> {
        if pending.is_empty() {
            return None;
        }
        // Merge phase. Freeze, then wait until every writer that saw a
        // `buf` unfrozen has finished: from here on the deltas only get
        // in-place updates and every record can be referenced.
        for (_, shared) in pending.iter() {
            // SAFETY: reachable from the current root.
            unsafe { shared.deref() }.buf.freeze();
        }
        self.hooks.fire(Phase::Frozen);
        self.reclaimer.barrier();
        // Every `tmp` before any merging: an insert into a frozen group
        // retries until its `tmp` exists, and merging the whole batch can
        // take milliseconds.
        for (_, shared) in pending.iter() {
            // SAFETY: reachable from the current root.
            let old = unsafe { shared.deref() };
            old.tmp.get_or_init(|| Arc::new(Delta::new()));
        }
        let mut built = Vec::with_capacity(pending.len());
        // Right to left: a group reached through its predecessor's `next`
        // is installed there first, so the predecessor's replacement copies
        // the new link.
        for &(location, shared) in pending.iter().rev() {
            // SAFETY: reachable from the current root.
            let old = unsafe { shared.deref() };
            let tmp = Arc::clone(old.tmp.get_or_init(|| Arc::new(Delta::new())));
            let merged = live_records(old);
            let tail = rebuilt_tail(&self.config, Some(&top_inserts(old, &merged)));
            let models = old.models.len();
            // SAFETY: the targets live in `old`'s records and delta, and
            // `old` is retired only after the copy phase, with `Reclaimer::retire`.
            let new = unsafe {
                Group::from_pointers(
                    &self.pages,
                    old.pivot.clone(),
                    merged,
                    |keys| fit_models(keys, models),
                    tmp,
                    tail,
                )
            };
            new.next
                .store(old.next.load(Ordering::Acquire, guard), Ordering::Relaxed);
            let new = self.nodes.alloc_shared(new, guard);
            self.hooks.fire(Phase::Merged);
            location.store(new, Ordering::Release);
            self.hooks.fire(Phase::Installed);
            // SAFETY: just built and installed; only this pass retires it.
            built.push(unsafe { new.deref() });
        }
        self.copy_phase(&built);
        for (_, shared) in pending.drain(..) {
            // SAFETY: reachable until now; retired just below.
            self.refund_merged(unsafe { shared.deref() });
            // SAFETY: replaced at its only location above; the copy phase
            // no longer needs its records.
            unsafe { self.retire_group(shared) };
            Counters::bump(&self.counters.compactions);
        }
        built.first().copied()
    }

    /// Returns the delta budget charged for `group`'s `buf`, whose records
    /// the copy phase just finished moving into a new array. (Its memory is
    /// freed when the retired node is reclaimed, one epoch later.)
    fn refund_merged(&self, group: &Group<K>) {
        self.budget.refund(group.buf.take_charge());
    }

    /// Copy phase: after a barrier (no operation still uses the replaced
    /// nodes, so every writer of a pointed-to record now goes through the
    /// new record's lock) replace each pointer with its current value.
    fn copy_phase(&self, groups: &[&Group<K>]) {
        self.reclaimer.synchronize();
        for group in groups {
            // Removes that reached a record's old copy after the merge are
            // removed records of this array too: counted here, they reach
            // the compaction trigger (Table 2's removed share). A remove
            // that found the new pointer record was already counted on this
            // group and is counted again; the trigger only fires sooner.
            let mut removed = 0;
            for i in 0..group.records.keys.len() {
                removed += usize::from(group.records.cell_at(i).resolve_pointer());
            }
            if removed > 0 {
                group.records.removed.fetch_add(removed, Ordering::Relaxed);
            }
            // The barrier above also retired every operation on the
            // predecessor, the only writers that could insert into this
            // group's delta without its tail lock: appends are safe now.
            if let Some(tail) = &group.records.tail {
                tail.open();
            }
        }
        self.hooks.fire(Phase::Copied);
    }

    /// Group split (Algorithm 4) by `plan` (from [`split_plan`]; at most
    /// [`CHAINED_SPLIT_PARTS`] parts): the paper's two parts, or a few more, each
    /// reached through the one before it until the pass's root update.
    /// Returns the last part, or `None` when it has no cuts (fewer than
    /// two keys to split between).
    fn split_group(
        &self,
        location: &Atomic<Group<K>>,
        shared: GroupPtr<K>,
        plan: SplitPlan<K>,
        guard: &'static Guard,
    ) -> Option<&'static Group<K>> {
        if plan.cuts.is_empty() {
            return None;
        }
        // Step 1: logical groups over the shared data.
        let logical = self.logical_parts(shared, &plan.cuts, guard);
        location.store(logical[0], Ordering::Release);
        // Step 2.1, merge phase.
        let built = self.merged_parts(shared, &logical, plan, true, guard);
        self.hooks.fire(Phase::Merged);
        location.store(built[0], Ordering::Release);
        self.hooks.fire(Phase::Installed);
        self.finish_split(shared, logical, &built)
    }

    /// Group splits into more than [`CHAINED_SPLIT_PARTS`] parts, each at
    /// its `plan` (from [`split_plan`]): a group grown to several times
    /// `initial_group_size`, by a burst of inserts between passes, is back
    /// to the shape a bulk load gives in one pass, instead of after a
    /// halving and model splits per pass. Each operation routed to a chain
    /// of `next` links walks it, and a burst's chain may be hundreds of
    /// parts long, so once every group's logical parts are installed, one
    /// root update gives each part a slot, and each new group replaces its
    /// logical part there. A group not in a slot of the current root is
    /// left for a later pass.
    fn split_wide(&self, wide: Vec<(GroupPtr<K>, SplitPlan<K>)>, guard: &'static Guard) {
        let slots_of = |root: &Root<K>| -> HashMap<*const Group<K>, usize> {
            root.slots
                .iter()
                .enumerate()
                .map(|(i, s)| (s.load(Ordering::Acquire, guard).as_raw(), i))
                .collect()
        };
        // Step 1 for every group, then one root over all the parts.
        let root = self.current_root(guard);
        let slots = slots_of(root);
        let mut splits = Vec::with_capacity(wide.len());
        for (shared, plan) in wide {
            let Some(&slot) = slots.get(&shared.as_raw()) else {
                continue;
            };
            let logical = self.logical_parts(shared, &plan.cuts, guard);
            root.slots[slot].store(logical[0], Ordering::Release);
            splits.push((shared, plan, logical));
        }
        if splits.is_empty() {
            return;
        }
        self.update_root(guard);
        let root = self.current_root(guard);
        let slots = slots_of(root);
        for (shared, plan, logical) in splits {
            let first = slots[&logical[0].as_raw()];
            debug_assert!(
                logical
                    .iter()
                    .enumerate()
                    .all(|(i, &part)| root.slots[first + i].load(Ordering::Acquire, guard) == part),
                "a root update gives the parts consecutive slots"
            );
            // Step 2.1, merge phase.
            let built = self.merged_parts(shared, &logical, plan, false, guard);
            self.hooks.fire(Phase::Merged);
            for (i, &group) in built.iter().enumerate() {
                root.slots[first + i].store(group, Ordering::Release);
            }
            self.hooks.fire(Phase::Installed);
            self.finish_split(shared, logical, &built);
        }
    }

    /// Step 1 of a split: one logical group per part over `shared`'s
    /// records, delta, models and router, with the part's pivot (the
    /// group's own, then `cuts`), each linked to the next and the last to
    /// `shared`'s successor. Not installed yet.
    fn logical_parts(
        &self,
        shared: GroupPtr<K>,
        cuts: &[K],
        guard: &'static Guard,
    ) -> Vec<GroupPtr<K>> {
        // SAFETY: reachable from the current root.
        let old = unsafe { shared.deref() };
        let pivots = std::iter::once(old.pivot.clone()).chain(cuts.iter().cloned().map(Some));
        let logical: Vec<GroupPtr<K>> = pivots
            .map(|pivot| self.nodes.alloc_shared(old.part(pivot), guard))
            .collect();
        // SAFETY: just allocated; not yet reachable by anyone else.
        unsafe { link_chain(&logical, old.next.load(Ordering::Acquire, guard)) };
        logical
    }

    /// Step 2.1 of a split, once the `logical` parts are installed: freeze
    /// `shared`'s delta, wait out its writers, and build one group per
    /// part from the merged records, each with the fewest models meeting
    /// the error bound (the plan's, if they still meet it on the part's
    /// keys now) and the part's temporary delta as its own. With
    /// `chained`, each links to the next and the last to `shared`'s
    /// successor; otherwise none links (each takes a root slot).
    fn merged_parts(
        &self,
        shared: GroupPtr<K>,
        logical: &[GroupPtr<K>],
        plan: SplitPlan<K>,
        chained: bool,
        guard: &'static Guard,
    ) -> Vec<GroupPtr<K>> {
        // SAFETY: reachable until `finish_split` retires it.
        let old = unsafe { shared.deref() };
        old.buf.freeze();
        self.hooks.fire(Phase::Frozen);
        self.reclaimer.barrier();
        // Each part's temporary delta: where writers to its key range went
        // since the freeze, and the new group's delta.
        let tmps: Vec<Arc<Delta<K>>> = logical
            .iter()
            .map(|part| {
                // SAFETY: built by `logical_parts`, retired by `finish_split`.
                let part = unsafe { part.deref() };
                Arc::clone(part.tmp.get_or_init(|| Arc::new(Delta::new())))
            })
            .collect();
        let SplitPlan { cuts, models } = plan;
        let records = live_record_parts(old, &cuts);
        // Ascending inserts arrived at the top, which the last part takes.
        let top_tail = rebuilt_tail(&self.config, Some(&top_inserts_of_parts(old, &records)));
        let pivots = std::iter::once(old.pivot.clone()).chain(cuts.into_iter().map(Some));
        let (error_bound, max_models) = (self.config.error_bound, self.config.max_models);
        let last = records.len() - 1;
        let threads = parallel::threads_for(
            self.config.build_threads,
            records.iter().map(Vec::len).sum(),
        );
        // The root update after this split fits the parts' hints if the
        // root keeps hints; helpers fit them here instead.
        let hints =
            threads > 1 && root::keeps_hints::<K>(self.current_root(guard).slots.len() + last);
        let parts: Vec<_> = records
            .into_iter()
            .zip(pivots)
            .zip(tmps)
            // Every part has an entry when there are cuts; none is ever
            // dropped for want of one.
            .zip(models.into_iter().chain(std::iter::repeat_with(|| None)))
            .enumerate()
            .map(|(i, (((records, pivot), tmp), planned))| {
                let tail = if i == last {
                    top_tail
                } else {
                    rebuilt_tail(&self.config, None)
                };
                (records, pivot, tmp, planned, tail)
            })
            .collect();
        let setup = parallel::lower_to(self.config.maintenance_nice);
        let groups = parallel::map_runs(parts, threads, setup, |run| {
            run.into_iter()
                .map(|(records, pivot, tmp, planned, tail)| {
                    // SAFETY: the targets live in `old`, retired after the
                    // copy phase (`finish_split`), after every helper has
                    // returned.
                    let group = unsafe {
                        Group::from_pointers(
                            &self.pages,
                            pivot,
                            records,
                            |keys| {
                                planned
                                    .and_then(|models| remeasured(models, keys, error_bound))
                                    .unwrap_or_else(|| {
                                        fewest_models(keys, error_bound, max_models).0
                                    })
                            },
                            tmp,
                            tail,
                        )
                    };
                    if hints {
                        group.hint();
                    }
                    group
                })
                .collect()
        });
        let built: Vec<GroupPtr<K>> = groups
            .into_iter()
            .map(|group| self.nodes.alloc_shared(group, guard))
            .collect();
        if chained {
            // SAFETY: just built; not yet reachable by anyone else.
            unsafe { link_chain(&built, old.next.load(Ordering::Acquire, guard)) };
        }
        built
    }

    /// Step 2.2 of a split, once the `built` groups are installed: the
    /// copy phase, then `shared` and its `logical` parts retired. Returns
    /// the last new group.
    fn finish_split(
        &self,
        shared: GroupPtr<K>,
        logical: Vec<GroupPtr<K>>,
        built: &[GroupPtr<K>],
    ) -> Option<&'static Group<K>> {
        // SAFETY: just built and installed; only this pass retires them.
        let built: Vec<&'static Group<K>> = built.iter().map(|g| unsafe { g.deref() }).collect();
        self.copy_phase(&built);
        // SAFETY: retired just below.
        self.refund_merged(unsafe { shared.deref() });
        // SAFETY: all are unlinked: `shared` and the first logical part were
        // replaced where they were installed, and each other part was
        // reachable only through the one before it, or (a wide split) was
        // replaced in its own slot.
        unsafe {
            self.retire_group(shared);
            for part in logical {
                self.retire_group(part);
            }
        }
        Counters::bump(&self.counters.group_splits);
        built.last().copied()
    }

    /// Group merge of flat neighbours (Table 2 row e), at most once per
    /// group per pass. Returns whether any merge happened.
    fn merge_neighbours(&self, root: &'static Root<K>, guard: &'static Guard) -> bool {
        let c = &self.config;
        let mergeable = |g: &Group<K>| {
            g.models.len() == 1
                && g.max_error() <= c.merge_error()
                && g.buf.len_up_to(c.merge_delta()) <= c.merge_delta()
                && g.next.load(Ordering::Acquire, guard).is_null()
        };
        // Keys ascending into a group's tail would land inside the merged
        // group's array range, in its delta: a group whose tail is in use
        // keeps its top.
        let tail_in_use = |g: &Group<K>| {
            g.records
                .tail
                .as_ref()
                .is_some_and(|t| c.sequential_groups == SequentialGroups::Detected || t.len() > 0)
        };
        let mut merged_any = false;
        let mut i = 0;
        while i + 1 < root.slots.len() {
            let (a, b) = (
                root.slots[i].load(Ordering::Acquire, guard),
                root.slots[i + 1].load(Ordering::Acquire, guard),
            );
            // SAFETY: reachable from the current root.
            let pair = unsafe { a.as_ref().zip(b.as_ref()) };
            match pair {
                Some((ga, gb))
                    if mergeable(ga)
                        && mergeable(gb)
                        && !tail_in_use(ga)
                        && merged_fits(ga, gb, c.error_bound) =>
                {
                    self.merge_pair(&root.slots[i], &root.slots[i + 1], a, b, guard);
                    merged_any = true;
                    i += 2;
                }
                _ => i += 1,
            }
        }
        merged_any
    }

    /// Merges the groups in two neighbouring slots into the first slot and
    /// empties the second, with one shared temporary delta.
    fn merge_pair(
        &self,
        first: &Atomic<Group<K>>,
        second: &Atomic<Group<K>>,
        a: GroupPtr<K>,
        b: GroupPtr<K>,
        guard: &'static Guard,
    ) {
        // SAFETY: reachable from the current root.
        let (ga, gb) = unsafe { (a.deref(), b.deref()) };
        ga.buf.freeze();
        gb.buf.freeze();
        self.hooks.fire(Phase::Frozen);
        self.reclaimer.barrier();
        let shared_tmp = Arc::new(Delta::new());
        let tmp_a = Arc::clone(ga.tmp.get_or_init(|| Arc::clone(&shared_tmp)));
        let tmp_b = Arc::clone(gb.tmp.get_or_init(|| shared_tmp));
        debug_assert!(Arc::ptr_eq(&tmp_a, &tmp_b));
        let mut merged = live_records(ga);
        let upper = live_records(gb);
        // The merged group's top is `gb`'s.
        let tail = rebuilt_tail(&self.config, Some(&top_inserts(gb, &upper)));
        merged.extend(upper);
        // SAFETY: targets live in `ga` and `gb`, retired after the copy phase.
        let m = unsafe {
            Group::from_pointers(
                &self.pages,
                ga.pivot.clone(),
                merged,
                |keys| fit_models(keys, 1),
                tmp_a,
                tail,
            )
        };
        let m = self.nodes.alloc_shared(m, guard);
        self.hooks.fire(Phase::Merged);
        // Install the merged group before emptying the second slot, so a
        // reader routed to either slot always finds a group holding its key.
        first.store(m, Ordering::Release);
        second.store(Shared::null(), Ordering::Release);
        self.hooks.fire(Phase::Installed);
        // SAFETY: just built and installed.
        self.copy_phase(&[unsafe { m.deref() }]);
        self.refund_merged(ga);
        self.refund_merged(gb);
        // SAFETY: both were unlinked from their only locations above.
        unsafe {
            self.retire_group(a);
            self.retire_group(b);
        }
        Counters::bump(&self.counters.group_merges);
    }

    /// Root update: a new root over every group in key order (flattening
    /// `next` links and dropping merged-away slots), with the RMI retrained.
    fn update_root(&self, guard: &'static Guard) {
        let old = self.root.load(Ordering::Acquire, guard);
        // SAFETY: never null; only this locked code retires roots.
        let old_root = unsafe { old.deref() };
        let mut groups: Vec<GroupPtr<K>> = Vec::new();
        for slot in old_root.slots.iter() {
            let mut group = slot.load(Ordering::Acquire, guard);
            // SAFETY: reachable from the current root.
            while let Some(g) = unsafe { group.as_ref() } {
                groups.push(group);
                group = g.next.load(Ordering::Acquire, guard);
            }
        }
        let c = &self.config;
        let root = Root::new(
            groups.clone(),
            old_root.leaf_count(),
            c.max_root_models,
            c.error_bound,
            c.merge_error(),
        );
        self.root.store(Owned::new(root), Ordering::Release);
        // Readers still on the old root may need `next` links to reach the
        // groups it does not index; once they are gone, cut the links so
        // every group has exactly one location again.
        self.reclaimer.synchronize();
        for g in &groups {
            // SAFETY: reachable from the new root.
            unsafe { g.deref() }
                .next
                .store(Shared::null(), Ordering::Release);
        }
        // SAFETY: unlinked by the store above; dropping a root frees only
        // its own arrays, never the groups.
        unsafe { self.reclaimer.retire(old) };
        Counters::bump(&self.counters.root_updates);
    }
}

/// Links each of `groups` to the one after it through `next`, and the last
/// to `after`.
///
/// # Safety
///
/// The groups are alive and not yet reachable by any other thread.
unsafe fn link_chain<K: Key>(groups: &[GroupPtr<K>], after: GroupPtr<K>) {
    let mut link = after;
    for group in groups.iter().rev() {
        // SAFETY: forwarded from the contract.
        unsafe { group.deref() }.next.store(link, Ordering::Relaxed);
        link = *group;
    }
}

/// Most parts a split installs as a chain of `next` links, walked by the
/// operations routed to it until the pass's root update (at most three
/// extra hops). Splits into more parts take root slots at once
/// (`Inner::split_wide`), at the cost of one root update per pass.
const CHAINED_SPLIT_PARTS: usize = 4;

/// Into how many groups a split cuts a group of `records` records: two
/// (the paper's Algorithm 4), or one per `group_size` records when that is
/// more.
pub(crate) fn split_parts(records: usize, group_size: usize) -> usize {
    (records / group_size.max(1)).max(2)
}

/// Where a split cuts a group, and the models fitted to each part's keys
/// as the plan saw them.
pub(crate) struct SplitPlan<K> {
    /// The pivots of the parts after the first, strictly ascending.
    pub(crate) cuts: Vec<K>,
    /// One entry per part (`cuts.len() + 1`, or none without cuts): the
    /// models fitted to the part's keys in the snapshot, `None` for a part
    /// the snapshot did not fit (the late-arrival part and the one before
    /// it).
    models: Vec<Option<Box<[SubModel<K>]>>>,
}

/// Most times [`split_plan`] plans the keys that arrived above its
/// snapshot while it planned. A round runs only for fewer than half the
/// keys of the round before, so each takes a fraction of its time.
const LATE_PLAN_ROUNDS: usize = 3;

/// How to split `group`: its parts after the first start at keys of its
/// array, tail and delta (removed records included; they only shift the
/// cuts slightly) at even steps, strictly ascending and above the
/// smallest key so that no part is empty in key range, each part fitted
/// as it stands ([`split_starts`]). No cuts when the group has fewer than
/// two keys.
fn split_plan<K: Key>(group: &Group<K>, config: &Config) -> SplitPlan<K> {
    split_plan_with(group, config, || {})
}

/// [`split_plan`], calling `snapshot_planned` once the snapshot's parts
/// are planned, before it looks for keys that arrived meanwhile (tests
/// insert some there).
fn split_plan_with<K: Key>(
    group: &Group<K>,
    config: &Config,
    snapshot_planned: impl FnOnce(),
) -> SplitPlan<K> {
    let records = &group.records;
    let (array_len, tail_len) = records.lengths();
    let mut keys: Vec<K> = (0..array_len + tail_len)
        .filter_map(|i| records.key_at(i).cloned())
        .collect();
    group.buf.for_each_record(|r| keys.push(r.key().clone()));
    keys.sort_unstable();
    keys.dedup();
    let parts = split_starts(&keys, config);
    let mut cuts: Vec<K> = parts
        .iter()
        .skip(1)
        .map(|(i, _)| keys[*i].clone())
        .collect();
    let mut models: Vec<_> = parts.into_iter().map(|(_, m)| Some(m)).collect();
    // Keys that kept arriving above the snapshot while it was sorted and
    // fitted (a burst of appends adds hundreds of thousands to a big
    // group meanwhile) would all land in one part, fitted with at most
    // `max_models` models and errors of thousands of positions until
    // another pass split it. Each round plans them too, as parts of
    // their own, while they are at least a group's worth and fewer than
    // half of what the round before planned.
    snapshot_planned();
    let mut planned = keys.len();
    let (mut array_len, mut tail_len) = (array_len, tail_len);
    for _ in 0..LATE_PLAN_ROUNDS {
        let Some(highest) = keys.last() else { break };
        let (now_array, now_tail) = records.lengths();
        let mut late: Vec<K> = (array_len + tail_len..now_array + now_tail)
            .filter_map(|i| records.key_at(i).filter(|k| *k > highest).cloned())
            .collect();
        late.extend(
            group
                .buf
                .records_above(highest)
                .into_iter()
                .map(|r| r.key().clone()),
        );
        (array_len, tail_len) = (now_array, now_tail);
        // Stop once under a group's worth, or when keys arrive faster
        // than the plan fits them (a round would then take longer than
        // the one before, and a writer over the budget waits for all).
        if late.len() < config.initial_group_size.max(2) || late.len() * 2 > planned {
            break;
        }
        planned = late.len();
        late.sort_unstable();
        late.dedup();
        for (i, m) in split_starts(&late, config) {
            cuts.push(late[i].clone());
            models.push(Some(m));
        }
        keys.extend(late);
    }
    // Keys ascending above the array keep arriving until the freeze, and
    // would all land in the top part, unfitted: one more part, from the
    // highest key seen here, takes them, so the others stay as settled.
    // (A split always has new keys or a bad fit; a tail kept without new
    // keys does not ask for the part.)
    let top = TopInserts {
        had_tail: false,
        ..top_inserts_by(group, &keys, |k| k)
    };
    if let Some(highest) = keys.last()
        && keys.len() >= 2
        && sequential_pattern(SEQUENTIAL_MIN_KEYS, &top)
        && cuts.last() != Some(highest)
    {
        cuts.push(highest.clone());
        // The part below gives its highest key to the new one: refitted.
        if let Some(below) = models.last_mut() {
            *below = None;
        }
        models.push(None);
    }
    if cuts.is_empty() {
        models.clear();
    }
    SplitPlan { cuts, models }
}

/// Where the parts of a split of `keys` (sorted, distinct) begin, with
/// the models fitted to each: the first of [`split_parts`] even pieces,
/// each cut further as a bulk load cuts a chunk ([`settled_ranges`]), so
/// that the new groups meet the error bound from the start instead of
/// after more splits. Starts at 0; one start per key at most.
pub(crate) fn split_starts<K: Key>(
    keys: &[K],
    config: &Config,
) -> Vec<(usize, Box<[SubModel<K>]>)> {
    let parts = split_parts(keys.len(), config.initial_group_size).min(keys.len());
    let threads = parallel::threads_for(config.build_threads, keys.len());
    let setup = parallel::lower_to(config.maintenance_nice);
    parallel::map_runs((0..parts).collect(), threads, setup, |run| {
        run.into_iter()
            .flat_map(|i| {
                let piece = i * keys.len() / parts..(i + 1) * keys.len() / parts;
                settled_ranges(&keys[piece.clone()], config.error_bound, config.max_models)
                    .into_iter()
                    .map(move |(range, models)| (piece.start + range.start, models))
            })
            .collect()
    })
}

/// Whether the group a merge of `a` and `b` would build stays within
/// `bound`: one model, fitted as [`Inner::merge_pair`] fits it, over the
/// records it would hold — both groups' live records, from arrays, tails
/// and deltas alike. Fitting the arrays alone (which still hold removed
/// records, and not the tails' records) passed pairs whose merged group
/// broke the bound; with no writes left, each pass split such a group
/// again and merged it back, and maintenance never settled (found by a
/// soak round: `src/tests/soak.rs`).
///
/// The arrays are still fitted first, as a filter: every pass tests every
/// pair of mergeable neighbours, most fail, and copying two key arrays is
/// cheaper than collecting live records. A pair it turns away whose live
/// records would fit (removed records bending the arrays) merges once a
/// compaction has dropped them.
fn merged_fits<K: Key>(a: &'static Group<K>, b: &'static Group<K>, bound: usize) -> bool {
    let arrays: Vec<K> = a
        .records
        .keys
        .iter()
        .chain(b.records.keys.iter())
        .cloned()
        .collect();
    if !fit_least_squares(&arrays).is_ok_and(|f| f.max_error <= bound) {
        return false;
    }
    let mut live: Vec<K> = live_records(a).into_iter().map(|(k, _)| k).collect();
    live.extend(live_records(b).into_iter().map(|(k, _)| k));
    fit_models(&live, 1).iter().all(|m| m.max_error <= bound)
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    fn backlog(delta: usize, waited_ms: u64) -> Backlog {
        Backlog {
            delta,
            delta_waited: Duration::from_millis(waited_ms),
            records: 4096,
            ..Backlog::default()
        }
    }

    #[test]
    fn small_deltas_wait_and_large_ones_do_not() {
        let c = Config::default();
        let due = |b: Backlog, pass| compaction_due(&c, &b, pass);
        assert!(!due(backlog(0, 5_000), Pass::Background), "empty");
        assert!(!due(backlog(0, 5_000), Pass::Full), "empty");
        // Up to s * f = 64 keys and under 1/64 of the 4096 records is
        // small: it waits a second in the background.
        assert!(!due(backlog(1, 0), Pass::Background));
        assert!(!due(backlog(63, 999), Pass::Background));
        assert!(due(backlog(63, 1_000), Pass::Background));
        assert!(due(backlog(64, 0), Pass::Background), "1/64 of the records");
        let small_group = |delta| Backlog {
            records: 640,
            ..backlog(delta, 0)
        };
        assert!(!due(small_group(9), Pass::Background));
        assert!(due(small_group(10), Pass::Background));
        let beyond_s_f = Backlog {
            records: 1 << 20,
            ..backlog(65, 0)
        };
        assert!(due(beyond_s_f, Pass::Background));
        assert!(!due(
            Backlog {
                delta: 64,
                ..beyond_s_f
            },
            Pass::Background
        ));
        // A full pass compacts any non-empty delta.
        assert!(due(backlog(1, 0), Pass::Full));
        let eager = Config {
            small_delta_delay: Duration::ZERO,
            ..Config::default()
        };
        assert!(compaction_due(&eager, &backlog(1, 0), Pass::Background));
    }

    #[test]
    fn removed_records_and_half_full_tails_compact_at_any_pass() {
        let c = Config {
            sequential_capacity: 8,
            ..Config::default()
        };
        let quiet = Backlog {
            records: 100,
            ..Backlog::default()
        };
        assert!(!compaction_due(&c, &quiet, Pass::Full));
        let removed = |n| Backlog {
            removed: n,
            ..quiet
        };
        // f = 1/4 of the records removed.
        assert!(!compaction_due(&c, &removed(24), Pass::Background));
        assert!(compaction_due(&c, &removed(25), Pass::Background));
        let appended = |n| Backlog {
            appended: n,
            ..quiet
        };
        assert!(!compaction_due(&c, &appended(3), Pass::Background));
        assert!(compaction_due(&c, &appended(4), Pass::Background));
        // Without the hint, appends never happen and never trigger.
        let no_tail = Config::default();
        assert!(!compaction_due(&no_tail, &appended(4), Pass::Background));
        let sparse = Backlog {
            sparse_region: true,
            ..quiet
        };
        assert!(compaction_due(&c, &sparse, Pass::Background));
        // A long removed run a scan skipped: due with few records removed.
        let skipped = Backlog {
            removed_run: true,
            removed: 1,
            ..quiet
        };
        assert!(compaction_due(&c, &skipped, Pass::Background));
    }

    #[test]
    fn ascending_inserts_are_detected_and_random_ones_are_not() {
        let top = |appended, above, delta| TopInserts {
            appended,
            above,
            delta,
            had_tail: false,
        };
        // A run of 16 keys above the records, nothing else.
        assert!(sequential_pattern(256, &top(0, 16, 16)));
        assert!(!sequential_pattern(256, &top(0, 15, 15)), "too few");
        // Appends to an existing tail count, and so do keys that spilled
        // into the delta when it filled.
        assert!(sequential_pattern(256, &top(128, 0, 0)));
        assert!(sequential_pattern(256, &top(100, 20, 30)));
        // Three quarters of the new keys must be at the top.
        assert!(sequential_pattern(256, &top(0, 48, 64)));
        assert!(!sequential_pattern(256, &top(0, 47, 64)));
        // Random inserts: about one per group size lands above.
        assert!(!sequential_pattern(256, &top(0, 1, 64)));
        assert!(!sequential_pattern(256, &top(0, 0, 0)), "nothing new");
        let kept = TopInserts {
            had_tail: true,
            ..top(0, 0, 0)
        };
        assert!(sequential_pattern(256, &kept), "nothing new: kept");
        let stopped = TopInserts {
            had_tail: true,
            ..top(0, 1, 64)
        };
        assert!(!sequential_pattern(256, &stopped), "random since: dropped");
        // A tail smaller than 16 slots needs only that many keys.
        assert!(sequential_pattern(3, &top(0, 3, 4)));
        assert!(!sequential_pattern(3, &top(0, 2, 2)));
    }

    #[test]
    fn delta_keys_below_the_tail_count_as_ascending() {
        use crate::budget::DeltaBudget;
        use crate::pages::Pages;
        let spec = TailSpec {
            capacity: 8,
            error_bound: 32,
        };
        // `live_records` takes groups reachable from a root ('static).
        let group: &'static Group<u64> = Box::leak(Box::new(Group::from_values(
            &Pages::new(),
            None,
            (0..100u64).map(|i| i * 2).collect(),
            (0..100).collect(),
            32,
            4,
            Some(spec),
        )));
        let tail = group.tail_for(&1_000).expect("above the array");
        // Keys that reached the delta while the tail was closed, then the
        // tail's appends above them, then keys that spilled past the full
        // tail, and one random insert below the array's top.
        let budget = DeltaBudget::new(usize::MAX);
        for k in 200..220u64 {
            group.buf.upsert(&k, k, &budget);
        }
        for k in 300..308u64 {
            assert!(tail.try_append(&k, k));
        }
        for k in 400..410u64 {
            group.buf.upsert(&k, k, &budget);
        }
        group.buf.upsert(&51, 0, &budget);
        group.buf.freeze();
        let merged = live_records(group);
        let top = top_inserts(group, &merged);
        assert_eq!(
            top,
            TopInserts {
                appended: 8,
                above: 30,
                delta: 31,
                had_tail: true,
            }
        );
        assert!(sequential_pattern(spec.capacity, &top));
    }

    #[test]
    fn rebuilt_groups_get_tails_by_policy() {
        let hint = Config {
            sequential_capacity: 64,
            ..Config::default()
        };
        let ascending = TopInserts {
            appended: 0,
            above: 32,
            delta: 32,
            had_tail: false,
        };
        let random = TopInserts {
            above: 1,
            ..ascending
        };
        let spec = hint.tail();
        assert_eq!(spec.map(|s| (s.capacity, s.error_bound)), Some((64, 32)));
        assert_eq!(rebuilt_tail(&hint, Some(&ascending)), spec);
        assert_eq!(rebuilt_tail(&hint, Some(&random)), None);
        assert_eq!(rebuilt_tail(&hint, None), None, "not the old group's top");
        let all = Config {
            sequential_groups: SequentialGroups::All,
            ..hint.clone()
        };
        assert_eq!(rebuilt_tail(&all, Some(&random)), spec);
        assert_eq!(rebuilt_tail(&all, None), spec);
        // No hint, no tail, whatever the inserts.
        assert_eq!(rebuilt_tail(&Config::default(), Some(&ascending)), None);
    }

    #[test]
    fn splits_cut_two_parts_or_one_per_group_size() {
        assert_eq!(split_parts(0, 8), 2);
        assert_eq!(split_parts(15, 8), 2);
        assert_eq!(split_parts(16, 8), 2);
        assert_eq!(split_parts(24, 8), 3);
        assert_eq!(split_parts(50_000, 2048), 24);
        assert_eq!(split_parts(10, 0), 10, "a zero size counts as one");
    }

    #[test]
    fn split_parts_meet_the_error_bound() {
        let config = Config::default();
        let starts_of = |parts: &[(usize, Box<[SubModel<u64>]>)]| -> Vec<usize> {
            parts.iter().map(|(start, _)| *start).collect()
        };
        // Evenly spaced: one line fits any piece, so the even pieces stand.
        let line: Vec<u64> = (0..10_000u64).map(|k| k * 7).collect();
        assert_eq!(
            starts_of(&split_starts(&line, &config)),
            vec![0, 2_500, 5_000, 7_500]
        );
        // Clustered keys: pieces are cut further until each fits.
        let mut state = 3u64;
        let mut key = 0u64;
        let bent: Vec<u64> = (0..20_000)
            .map(|i| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                key += if i % 500 < 50 { 1 } else { 1 + (state >> 40) };
                key
            })
            .collect();
        let parts = split_starts(&bent, &config);
        let starts = starts_of(&parts);
        assert_eq!(starts[0], 0);
        assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
        assert!(starts.len() > split_parts(bent.len(), config.initial_group_size));
        let ends = starts.iter().skip(1).copied().chain([bent.len()]);
        for ((start, end), (_, models)) in starts.iter().copied().zip(ends).zip(&parts) {
            // The part's models are its fewest fitted alone, and they fit.
            let (alone, fits) =
                fewest_models(&bent[start..end], config.error_bound, config.max_models);
            assert!(fits, "part {start}..{end} does not fit");
            let shape = |m: &[SubModel<u64>]| -> Vec<(usize, usize, usize)> {
                m.iter().map(|m| (m.start, m.len, m.max_error)).collect()
            };
            assert_eq!(shape(models), shape(&alone), "part {start}..{end}");
        }
        // Never more starts than keys, never an empty part.
        for n in 0..5 {
            let keys: Vec<u64> = (0..n).collect();
            let tiny = Config {
                initial_group_size: 1,
                ..Config::default()
            };
            let starts = starts_of(&split_starts(&keys, &tiny));
            assert!(starts.len() <= n as usize);
            assert!(starts.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn keys_arriving_while_a_split_is_planned_get_parts_of_their_own() {
        // A group takes ascending keys with uneven gaps, more while its
        // split is being planned: those are cut into parts as the
        // snapshot's keys are, instead of all landing in one part with
        // `max_models` models and a large error.
        let config = Config {
            maintenance_interval: None,
            ..Config::default()
        };
        let group_size = config.initial_group_size;
        let loaded: Vec<u64> = (0..2_000u64).map(|k| k * 1_000).collect();
        let mut next = *loaded.last().unwrap();
        let mut ascending = move |n: usize| -> Vec<u64> {
            (0..n)
                .map(|i| {
                    next += 1 + (i as u64 * 7_919 + next) % 997;
                    next
                })
                .collect()
        };
        // Fewer arrive during the plan than half the snapshot: a round
        // for them is shorter than the plan was.
        let before = ascending(25_000);
        let during = ascending(5 * group_size);
        let index =
            crate::XIndex::bulk_load(loaded.iter().map(|&k| (k, k)), config.clone()).unwrap();
        for &k in &before {
            assert_eq!(index.insert(k, k), None);
        }
        let inner = index.inner();
        let serial = inner.maintenance.lock();
        // SAFETY: we hold the maintenance lock, as a pass does.
        let guard = unsafe { epoch::unprotected() };
        let slot = &inner.current_root(guard).slots[0];
        let shared = slot.load(Ordering::Acquire, guard);
        // SAFETY: reachable from the current root.
        let group = unsafe { shared.deref() };
        let plan = split_plan_with(group, &inner.config, || {
            for &k in &during {
                assert_eq!(index.insert(k, k), None);
            }
        });
        let first_late = during[0];
        let late_cuts = plan.cuts.iter().filter(|&&c| c >= first_late).count();
        assert!(
            late_cuts >= during.len() / group_size,
            "{late_cuts} cuts among {} late keys",
            during.len()
        );
        inner.split_group(slot, shared, plan, guard).expect("split");
        drop(serial);
        let stats = index.stats();
        let largest = stats.groups.iter().map(|g| g.records).max().unwrap();
        // A split's parts hold one to two groups' worth (without the late
        // rounds, the top part held all of `during`).
        assert!(largest < 2 * group_size, "a part of {largest} records");
        assert!(
            stats.worst_model_error() <= inner.config.error_bound,
            "worst error {}",
            stats.worst_model_error()
        );
        let expected: std::collections::BTreeMap<u64, u64> = loaded
            .iter()
            .chain(&before)
            .chain(&during)
            .map(|&k| (k, k))
            .collect();
        assert_eq!(index.len(), expected.len());
        assert!(index.range(..).eq(expected.into_iter()));
    }

    /// Two neighbouring one-model groups over evenly spaced keys, whose
    /// arrays together fit one line exactly, but whose live records do
    /// not: six keys removed from the middle of the first (still in its
    /// array), or three appended to the second's tail. A merge would build a group
    /// over the live records that breaks the error bound, which the next
    /// pass would split again; with nothing written, that went on for
    /// ever. Merges fit what they would build now, so neither pair merges
    /// and every group stays within the bound.
    #[test]
    fn groups_merge_only_if_the_group_they_would_build_meets_the_bound() {
        let config = Config {
            error_bound: 1,
            tolerance: 0.5,
            max_models: 1,
            initial_group_size: 16,
            delta_threshold: 8,
            ..crate::tests::tiny_config()
        };
        let removed = crate::XIndex::bulk_load((0..32u64).map(|k| (k, k)), config.clone()).unwrap();
        for k in 5..11 {
            assert_eq!(removed.remove(&k), Some(k));
        }
        let appended = crate::XIndex::bulk_load(
            (0..32u64).map(|k| (k, k)),
            Config {
                sequential_capacity: 8,
                sequential_groups: SequentialGroups::All,
                ..config
            },
        )
        .unwrap();
        for k in [32, 33, 800] {
            assert_eq!(appended.insert(k, k), None);
        }
        for (name, index, live) in [("removed", &removed, 26), ("appended", &appended, 35)] {
            let stats = index.stats();
            assert_eq!(stats.group_count(), 2, "{name}: {stats:?}");
            // One pass, then until maintenance has nothing left to do.
            index.maintain_now();
            crate::tests::settle(index);
            let stats = index.stats();
            assert_eq!(stats.group_merges, 0, "{name}: {stats:?}");
            assert!(stats.worst_model_error() <= 1, "{name}: {stats:?}");
            assert_eq!(index.range(..).count(), live, "{name}");
        }
    }

    #[test]
    fn a_compaction_reached_through_a_next_link_keeps_the_chain() {
        // A pass never compacts a group it reaches through a `next` link
        // (chains last from a split to the same pass's root update), but
        // `compact_batch` handles one, right to left: replacing the first
        // group first would copy the old link to the second, and lose the
        // second's replacement.
        let config = Config {
            maintenance_interval: None,
            ..Config::default()
        };
        let index = crate::XIndex::bulk_load((0..2_000u64).map(|k| (k * 2, k)), config).unwrap();
        let inner = index.inner();
        let serial = inner.maintenance.lock();
        // SAFETY: we hold the maintenance lock, as a pass does.
        let guard = unsafe { epoch::unprotected() };
        let slot = &inner.current_root(guard).slots[0];
        let shared = slot.load(Ordering::Acquire, guard);
        // SAFETY: reachable from the current root.
        let plan = split_plan(unsafe { shared.deref() }, &inner.config);
        assert_eq!(plan.cuts.len(), 1, "two parts");
        inner.split_group(slot, shared, plan, guard).expect("split");
        let first = slot.load(Ordering::Acquire, guard);
        // SAFETY: just installed; only this test's calls retire it.
        let second = unsafe { first.deref() }.next.load(Ordering::Acquire, guard);
        assert!(!second.is_null(), "the second part hangs off the first");
        // Odd keys land in both parts' deltas, through the chain.
        for k in 0..2_000u64 {
            assert_eq!(index.insert(k * 2 + 1, k), None);
        }
        // SAFETY: as above.
        let link = unsafe { &first.deref().next };
        let mut pending: Pending<u64> = vec![(slot, first), (link, second)];
        inner.compact_batch(&mut pending, guard);
        let new_first = slot.load(Ordering::Acquire, guard);
        // SAFETY: installed by `compact_batch`.
        let new_first_ref = unsafe { new_first.deref() };
        let new_second = new_first_ref.next.load(Ordering::Acquire, guard);
        assert!(new_first != first && new_second != second, "both replaced");
        // SAFETY: installed by `compact_batch`.
        let new_second_ref = unsafe { new_second.deref() };
        assert!(new_second_ref.next.load(Ordering::Acquire, guard).is_null());
        assert_eq!(new_first_ref.buf.len() + new_second_ref.buf.len(), 0);
        assert_eq!(
            new_first_ref.records.keys.len() + new_second_ref.records.keys.len(),
            4_000
        );
        drop(serial);
        for k in 0..4_000u64 {
            assert_eq!(index.get(&k), Some(k / 2), "key {k}");
        }
        index.maintain_now();
        assert_eq!(index.range(..).count(), 4_000);
    }
}
