//! Building groups on several threads: a bulk load, and a maintenance
//! pass's split of a group into many parts, fit and build groups that do
//! not depend on one another (a settled chunk, a part's arrays, router and
//! array hint), so those steps run on up to [`Config::build_threads`]
//! scoped threads, each over a contiguous run of the work, and the results
//! are put back together in order: the index built is the same as on one
//! thread, only its arrays sit in a different order in their region.
//!
//! Not in the paper, whose bulk load and background thread are
//! single-threaded. Measured in `docs/results/xindex-session41.md`.
//!
//! [`Config::build_threads`]: crate::Config::build_threads

use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};

/// Fewest keys worth a thread of their own: 64K keys take 3 to 10 ms to
/// fit and build, against tens of microseconds to start a thread.
pub(crate) const MIN_KEYS_PER_THREAD: usize = 1 << 16;

/// [`MIN_KEYS_PER_THREAD`], or this thread's test override.
fn min_keys_per_thread() -> usize {
    #[cfg(all(test, not(xindex_loom)))]
    if let Some(n) = MIN_KEYS_OVERRIDE.with(std::cell::Cell::get) {
        return n;
    }
    MIN_KEYS_PER_THREAD
}

#[cfg(all(test, not(xindex_loom)))]
thread_local! {
    /// Tests: what [`min_keys_per_thread`] answers on this thread, so
    /// that small indexes take the threaded paths.
    pub(crate) static MIN_KEYS_OVERRIDE: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
    /// Tests: runs [`map_runs`] called from this thread gave to helpers.
    pub(crate) static HELPER_RUNS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Tests: helper threads started from this thread fail to start.
    pub(crate) static REFUSE_HELPERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A helper of a maintenance pass: at the maintenance thread's priority.
pub(crate) fn lower_to(nice: u8) -> impl Fn() + Sync {
    move || {
        // A hint only, as for the maintenance thread.
        let _ = lidx_core::background::lower_current_thread(nice);
    }
}

/// Threads to use for a job over `keys` keys, with `configured` threads
/// allowed ([`Config::build_threads`](crate::Config::build_threads); 0:
/// the machine's available parallelism): each thread gets at least
/// [`min_keys_per_thread`] keys. At least 1.
pub(crate) fn threads_for(configured: usize, keys: usize) -> usize {
    threads_with_min(configured, keys, min_keys_per_thread())
}

fn threads_with_min(configured: usize, work: usize, min_per_thread: usize) -> usize {
    let allowed = if configured == 0 {
        std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
    } else {
        configured
    };
    allowed.min(work / min_per_thread.max(1)).max(1)
}

/// `f` applied to `threads` contiguous runs of `items` (as even as the
/// count allows), the runs' outputs concatenated in order: the same
/// `Vec` as `f(items)` for any `f` that maps each item on its own. The
/// first run is done on the calling thread, the others on scoped threads,
/// each first calling `setup` (to lower its priority, say); a run whose
/// thread the system refuses to start is done on the calling thread too.
/// A panic in any run is resumed on the calling thread once all have
/// stopped.
pub(crate) fn map_runs<T, R, S, F>(mut items: Vec<T>, threads: usize, setup: S, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    S: Fn() + Sync,
    F: Fn(Vec<T>) -> Vec<R> + Sync,
{
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return f(items);
    }
    let len = items.len();
    // Runs split off from the back, then put in order. Each waits in a
    // slot for whichever thread does it: its helper, or, if that helper
    // never started, the caller.
    let mut slots: Vec<Mutex<Option<Vec<T>>>> = (1..threads)
        .rev()
        .map(|i| Mutex::new(Some(items.split_off(i * len / threads))))
        .collect();
    slots.reverse();
    let take = |slot: &Mutex<Option<Vec<T>>>| {
        slot.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("each run is done once")
    };
    let (f, setup, take) = (&f, &setup, &take);
    std::thread::scope(|scope| {
        let helpers: Vec<_> = slots
            .iter()
            .map(|slot| {
                spawn_helper(scope, move || {
                    setup();
                    f(take(slot))
                })
            })
            .collect();
        let mut out = f(items);
        for (slot, helper) in slots.iter().zip(helpers) {
            let part = match helper {
                Some(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                None => f(take(slot)),
            };
            out.extend(part);
        }
        out
    })
}

/// A scoped helper thread running `run`, or `None` if the system would
/// not start one.
fn spawn_helper<'scope, R: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    run: impl FnOnce() -> R + Send + 'scope,
) -> Option<std::thread::ScopedJoinHandle<'scope, R>> {
    #[cfg(all(test, not(xindex_loom)))]
    if REFUSE_HELPERS.with(std::cell::Cell::get) {
        return None;
    }
    let handle = std::thread::Builder::new()
        .name("xindex-build".into())
        .spawn_scoped(scope, run)
        .ok()?;
    #[cfg(all(test, not(xindex_loom)))]
    HELPER_RUNS.with(|n| n.set(n.get() + 1));
    Some(handle)
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn runs_are_concatenated_in_order_for_any_thread_count() {
        let items: Vec<u32> = (0..1000).collect();
        let triple = |run: Vec<u32>| run.into_iter().map(|x| x * 3).collect::<Vec<_>>();
        let one = map_runs(items.clone(), 1, || {}, triple);
        assert_eq!(one.len(), 1000);
        for threads in [2, 3, 7, 999, 1000, 5000] {
            let many = map_runs(items.clone(), threads, || {}, triple);
            assert_eq!(many, one, "{threads} threads");
        }
        // Runs may yield more or fewer outputs than items.
        let pairs = map_runs(
            items.clone(),
            4,
            || {},
            |run| {
                run.into_iter()
                    .filter(|x| x % 2 == 0)
                    .flat_map(|x| [x, x])
                    .collect()
            },
        );
        let expected: Vec<u32> = items
            .iter()
            .filter(|x| *x % 2 == 0)
            .flat_map(|&x| [x, x])
            .collect();
        assert_eq!(pairs, expected);
        assert!(map_runs(Vec::<u32>::new(), 4, || {}, |run| run).is_empty());
    }

    #[test]
    fn every_run_but_the_first_is_on_another_thread_after_setup() {
        thread_local! {
            static SET_UP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        fn mark() {
            SET_UP.with(|s| s.set(true));
        }
        let caller = std::thread::current().id();
        let items: Vec<u32> = (0..8).collect();
        let seen = map_runs(items, 4, mark, |run| {
            vec![(
                run[0],
                std::thread::current().id(),
                SET_UP.with(|s| s.get()),
            )]
        });
        assert_eq!(seen.len(), 4);
        assert_eq!((seen[0].1, seen[0].2), (caller, false));
        for (first, id, set_up) in &seen[1..] {
            assert!(*id != caller && *set_up, "run from {first}");
        }
    }

    #[test]
    fn runs_whose_helper_cannot_start_are_done_by_the_caller() {
        let items: Vec<u32> = (0..1000).collect();
        REFUSE_HELPERS.with(|r| r.set(true));
        let before = HELPER_RUNS.with(|n| n.get());
        let caller = std::thread::current().id();
        let out = map_runs(
            items.clone(),
            4,
            || {},
            |run| {
                assert_eq!(std::thread::current().id(), caller);
                run.into_iter().map(|x| x + 1).collect::<Vec<_>>()
            },
        );
        REFUSE_HELPERS.with(|r| r.set(false));
        assert_eq!(HELPER_RUNS.with(|n| n.get()), before);
        assert!(out.into_iter().eq(1..1001));
    }

    #[test]
    #[should_panic(expected = "run failed")]
    fn a_panic_in_a_run_reaches_the_caller() {
        let items: Vec<u32> = (0..100).collect();
        map_runs(
            items,
            4,
            || {},
            |run| {
                if run.contains(&80) {
                    panic!("run failed");
                }
                run
            },
        );
    }

    #[test]
    fn thread_counts_follow_the_work_and_the_setting() {
        assert_eq!(threads_with_min(4, 1000, 100), 4);
        assert_eq!(threads_with_min(4, 250, 100), 2);
        assert_eq!(threads_with_min(4, 10, 100), 1);
        assert_eq!(threads_with_min(1, 1_000_000, 1), 1);
        assert!(threads_with_min(0, 1_000_000, 1) >= 1);
        assert_eq!(threads_with_min(3, 0, 0), 1);
        assert_eq!(threads_for(8, MIN_KEYS_PER_THREAD * 3), 3);
        assert_eq!(threads_for(8, MIN_KEYS_PER_THREAD - 1), 1);
    }
}
