//! The index's own epoch collector: how operations pin, how maintenance
//! retires unlinked nodes, and the RCU-style barrier of two-phase
//! compaction.
//!
//! Each index has a `crossbeam_epoch::Collector` of its own rather than
//! crossbeam's process-wide default one. The barrier waits for every thread
//! pinned on the collector, and writers may wait for the barrier (an insert
//! into a frozen delta, an insert over the delta budget), so on the default
//! collector a thread that called the index while holding a guard for
//! something else (its own `crossbeam_epoch::pin()`, or a closure another
//! crossbeam-based structure runs while pinned) would wait for itself. On a
//! collector of its own, only threads inside one of this index's calls are
//! ever pinned on it, and none of them waits while pinned.
//!
//! The paper's `rcu_barrier` waits until every worker has finished one
//! request, which stalls when a worker thread is idle. Here the barrier
//! waits until every thread that was *pinned* when it started has unpinned:
//! a closure deferred now runs only after the collector's epoch has
//! advanced twice, which needs every thread pinned at deferral time to
//! unpin. Idle threads are not pinned and do not delay it.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_epoch::{Collector, Guard, LocalHandle, Shared};

/// Collectors a thread keeps a registration with, most recently registered
/// first. A thread that alternates between more indexes than this
/// registers anew on each switch (a small allocation), which stays correct.
const CACHED_HANDLES: usize = 4;

thread_local! {
    /// This thread's registrations, one per collector it used lately.
    static HANDLES: RefCell<Vec<LocalHandle>> = const { RefCell::new(Vec::new()) };
}

/// An index's epoch collector.
pub(crate) struct Reclaimer {
    collector: Collector,
}

impl Reclaimer {
    /// A collector of its own.
    pub(crate) fn new() -> Self {
        Reclaimer {
            collector: Collector::new(),
        }
    }

    /// Pins the calling thread on this index's collector.
    ///
    /// The cache is only borrowed shared while pinning: a pin may run
    /// expired destructors, and a destructor that pinned again must find
    /// the cache readable (or, on a miss, falls back to a registration of
    /// its own instead of reordering a borrowed cache).
    #[inline(always)]
    pub(crate) fn pin(&self) -> Guard {
        HANDLES
            .try_with(|handles| {
                if let Ok(cached) = handles.try_borrow()
                    && let Some(first) = cached.first()
                    && first.collector() == &self.collector
                {
                    return first.pin();
                }
                self.pin_slow(handles)
            })
            // The thread is exiting and its cache is gone: a one-off
            // registration (its `Local` lives until the guard drops).
            .unwrap_or_else(|_| self.collector.register().pin())
    }

    /// [`pin`](Self::pin) when this collector is not the thread's most
    /// recent one: moves its registration to the front, registering the
    /// thread first if it has none (in place of the oldest).
    #[cold]
    #[inline(never)]
    fn pin_slow(&self, handles: &RefCell<Vec<LocalHandle>>) -> Guard {
        let Ok(mut cached) = handles.try_borrow_mut() else {
            return self.collector.register().pin();
        };
        match cached.iter().position(|h| h.collector() == &self.collector) {
            Some(i) => {
                let handle = cached.remove(i);
                cached.insert(0, handle);
            }
            None => {
                if cached.len() >= CACHED_HANDLES {
                    // A dropped handle's `Local` is finalised once its last
                    // guard drops; the evicted one may still have some.
                    cached.pop();
                }
                cached.insert(0, self.collector.register());
            }
        }
        drop(cached);
        match handles
            .try_borrow()
            .ok()
            .and_then(|c| c.first().map(LocalHandle::pin))
        {
            Some(guard) => guard,
            None => self.collector.register().pin(),
        }
    }

    /// Defers the destruction of an unlinked node until every thread
    /// pinned now has unpinned.
    ///
    /// # Safety
    ///
    /// `node` must be unlinked (unreachable for threads pinning from now
    /// on), retired exactly once, and reachable only from nodes of this
    /// index (whose readers pin this collector).
    pub(crate) unsafe fn retire<T>(&self, node: Shared<'_, T>) {
        let guard = self.pin();
        // SAFETY: forwarded from the contract; readers that may still hold
        // `node` pinned this collector before it was unlinked.
        unsafe { guard.defer_destroy(node) };
    }

    /// Hands this thread's retired nodes to the collector's global queue
    /// and frees whatever no pinned thread can still reach. `retire`
    /// defers into the thread's own bag, which crossbeam hands over only
    /// when it fills (64 nodes), and the global queue is collected only by
    /// later pins: without this, an index left idle after a burst of
    /// writes would keep up to 63 retired groups, arrays and deltas
    /// included, until the next burst. Background passes run every
    /// `maintenance_interval`, idle ones included, so retired memory is
    /// returned within a few intervals.
    pub(crate) fn release_retired(&self) {
        self.pin().flush();
    }

    /// Blocks until every operation that was in flight (pinned) when this
    /// call started has finished. The caller must not itself be pinned on
    /// this collector, or it never returns.
    pub(crate) fn synchronize(&self) {
        let done = Arc::new(AtomicBool::new(false));
        {
            let guard = self.pin();
            let flag = Arc::clone(&done);
            guard.defer(move || flag.store(true, Ordering::Release));
            guard.flush();
        }
        let mut rounds = 0u32;
        while !done.load(Ordering::Acquire) {
            // Each pin/flush tries to advance the epoch and run expired garbage.
            self.release_retired();
            rounds += 1;
            if rounds < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// Frees what is retired, when no thread can be pinned on this
    /// collector any more (the index is being dropped). Each pass advances
    /// the epoch once, as nobody is pinned, and frees a few bags; without
    /// it the garbage would live as long as some thread's cached handle
    /// keeps the collector alive.
    pub(crate) fn release_all(&self) {
        for _ in 0..RELEASE_ALL_PASSES {
            self.release_retired();
        }
    }
}

/// Collections run when an index is dropped: three advance the epoch past
/// every retired node, and each frees up to eight bags of 64 nodes.
const RELEASE_ALL_PASSES: usize = 64;

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn waits_for_a_thread_pinned_on_its_collector_only() {
        let reclaimer = Arc::new(Reclaimer::new());
        let (pinned_tx, pinned_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let released = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&released);
        let holder_reclaimer = Arc::clone(&reclaimer);
        let holder = std::thread::spawn(move || {
            let guard = holder_reclaimer.pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            flag.store(true, Ordering::SeqCst);
            drop(guard);
        });
        pinned_rx.recv().unwrap();
        let waiter = std::thread::spawn({
            let released = Arc::clone(&released);
            let reclaimer = Arc::clone(&reclaimer);
            move || {
                reclaimer.synchronize();
                // The barrier may only finish after the holder unpinned.
                assert!(released.load(Ordering::SeqCst));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished());
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        waiter.join().unwrap();
        // With nobody pinned it returns promptly, also for a caller that
        // holds a guard on another collector (crossbeam's default one).
        let foreign = crossbeam_epoch::pin();
        reclaimer.synchronize();
        drop(foreign);
    }

    #[test]
    fn a_destructor_run_while_pinning_may_pin_another_collector() {
        // A retired node's destructor runs inside some later `pin` of its
        // collector (crossbeam collects every 128 pins), while that pin
        // holds the thread's cache borrowed. If it pins another index's
        // collector (a key type whose drop touches another index, say),
        // the cache cannot be reordered: that pin takes a one-off
        // registration instead of panicking on the borrow.
        let outer = Reclaimer::new();
        let other = Arc::new(Reclaimer::new());
        let ran = Arc::new(AtomicBool::new(false));
        {
            let guard = outer.pin();
            let (other, ran) = (Arc::clone(&other), Arc::clone(&ran));
            guard.defer(move || {
                let pinned = other.pin();
                // A working guard: what it defers runs later.
                let flag = Arc::clone(&ran);
                pinned.defer(move || flag.store(true, Ordering::Release));
                pinned.flush();
            });
            guard.flush();
        }
        // Only pins, no flush: the destructor must run inside a `pin`.
        let mut pins = 0;
        while Arc::strong_count(&other) > 1 {
            drop(outer.pin());
            pins += 1;
            assert!(pins < 1_000_000, "the deferred destructor never ran");
        }
        let cached = HANDLES.with(|h| h.borrow().iter().any(|h| h.collector() == &other.collector));
        assert!(!cached, "the nested pin must not have touched the cache");
        // What the nested guard deferred still runs, on `other`'s schedule.
        other.synchronize();
        other.synchronize();
        assert!(ran.load(Ordering::Acquire));
    }

    #[test]
    fn a_thread_using_many_collectors_keeps_a_few_registrations() {
        let reclaimers: Vec<Reclaimer> =
            (0..CACHED_HANDLES + 3).map(|_| Reclaimer::new()).collect();
        for _ in 0..3 {
            for r in &reclaimers {
                let guard = r.pin();
                // Nested pins on the same collector reuse the registration.
                let inner = r.pin();
                drop(inner);
                drop(guard);
                r.synchronize();
            }
        }
        assert_eq!(HANDLES.with(|h| h.borrow().len()), CACHED_HANDLES);
    }
}
