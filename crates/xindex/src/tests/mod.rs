//! Crate-level tests: API behaviour, edge-case inputs and the committed
//! real key sets, a `BTreeMap` oracle, concurrency stress, a
//! linearizability checker, the paper's lost-update interleaving, a
//! distribution shift and a panicking maintenance pass. Unit tests of single modules live beside them.

mod api;
mod edges;
mod hints;
mod linearizability;
mod lookup_stages;
mod lost_update;
mod oracle;
mod parallel_build;
mod poison;
mod reclamation;
mod removals;
mod scan_stress;
mod shift;
pub(crate) mod soak;
mod stress;

use crate::Config;

/// Joins the `workers` of a test's thread scope, then runs `stop` (which
/// ends the scope's background threads), then returns the workers'
/// results or re-raises the first worker's panic. Joined and stopped in
/// that order, a worker that fails a check fails its test instead of
/// leaving the scope waiting for background threads that never stop.
pub(crate) fn join_then_stop<T>(
    workers: Vec<std::thread::ScopedJoinHandle<'_, T>>,
    stop: impl FnOnce(),
) -> Vec<T> {
    let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
    stop();
    joined
        .into_iter()
        .map(|j| j.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        .collect()
}

/// Thresholds so small that every few operations trigger compaction,
/// model and group splits and merges; no background thread.
pub(crate) fn tiny_config() -> Config {
    Config {
        error_bound: 1,
        delta_threshold: 3,
        tolerance: 0.5,
        max_models: 2,
        initial_group_size: 8,
        max_root_models: 4,
        sequential_capacity: 0,
        sequential_groups: crate::SequentialGroups::Detected,
        maintenance_interval: None,
        // Background passes leave one-key deltas (s * f = 1) alone;
        // `maintain_now` compacts them.
        small_delta_delay: std::time::Duration::MAX,
        delta_budget_bytes: 64 << 20,
        maintenance_nice: 0,
        build_threads: 0,
    }
}

/// [`tiny_config`] with a delta budget of 16 `u64` entries, so inserts
/// often run maintenance passes themselves.
pub(crate) fn tiny_budget_config() -> Config {
    Config {
        delta_budget_bytes: 16 * crate::budget::entry_bytes(&0u64),
        ..tiny_config()
    }
}

/// [`tiny_config`] with the sequential-insert fast path on (tiny tails)
/// in every group, so that inserts above arrays take the tail lock as
/// often as the protocol allows.
pub(crate) fn tiny_sequential_config() -> Config {
    Config {
        sequential_capacity: 3,
        sequential_groups: crate::SequentialGroups::All,
        ..tiny_config()
    }
}

/// Polls `done` every 2 ms until it holds or `timeout` has passed (the
/// background thread's progress has no bound on a loaded machine; the
/// caller asserts on the state afterwards).
pub(crate) fn wait_until(timeout: std::time::Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !done() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Runs maintenance until a pass changes nothing (bounded, so an
/// oscillating policy fails the test instead of hanging it).
pub(crate) fn settle<K: lidx_core::Key, V: crate::Value>(index: &crate::XIndex<K, V>) {
    for _ in 0..200 {
        if !index.maintain_now() {
            return;
        }
    }
    // What one more pass still changes, to tell which policy oscillates.
    let before = index.stats();
    index.maintain_now();
    let after = index.stats();
    let moved = |a: u64, b: u64| b - a;
    panic!(
        "maintenance did not settle; one more pass made {} compactions, {} model splits, \
         {} model merges, {} group splits, {} group merges, {} root updates ({} -> {} groups); \
         before it: {before:?}\nafter it: {after:?}",
        moved(before.compactions, after.compactions),
        moved(before.model_splits, after.model_splits),
        moved(before.model_merges, after.model_merges),
        moved(before.group_splits, after.group_splits),
        moved(before.group_merges, after.group_merges),
        moved(before.root_updates, after.root_updates),
        before.group_count(),
        after.group_count(),
    );
}

/// The key type a concurrent test runs with, made from the logical `u64`
/// key its logs record (order-preserving, so ranges by logical key are
/// ranges by key).
pub(crate) trait TestKey: lidx_core::Key {
    fn of(n: u64) -> Self;
    /// The logical key back: `K::of(n).logical() == n`.
    fn logical(&self) -> u64;
}

impl TestKey for u64 {
    fn of(n: u64) -> Self {
        n
    }

    fn logical(&self) -> u64 {
        *self
    }
}

/// Byte strings sharing their first eight bytes (`user/000`), so every
/// delta-tree comparison ties on the ordered prefix its nodes keep and
/// falls through to the records' full keys.
impl TestKey for Vec<u8> {
    fn of(n: u64) -> Self {
        format!("user/{n:012}").into_bytes()
    }

    fn logical(&self) -> u64 {
        std::str::from_utf8(&self[5..])
            .ok()
            .and_then(|digits| digits.parse().ok())
            .unwrap_or_else(|| panic!("not a test key: {self:?}"))
    }
}
