//! Atomics facade: `std` normally, `loom` under `--cfg xindex_loom`.
//!
//! The record protocol ([`crate::record`]) and the delta tree's node
//! versions ([`crate::delta_tree`]) go through this facade, so loom can
//! explore their interleavings without modelling the epoch collector
//! (which is not loom-aware).

#[cfg(xindex_loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(xindex_loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, fence};

/// Back off while another thread holds a record lock. Under loom this must
/// yield, or the model checker would explore an unbounded spin.
#[inline]
pub(crate) fn spin() {
    #[cfg(xindex_loom)]
    loom::thread::yield_now();
    #[cfg(not(xindex_loom))]
    std::hint::spin_loop();
}

/// A mutex that loom can model (its `parking_lot` twin would block loom's
/// single scheduler thread for real).
#[cfg(xindex_loom)]
pub(crate) type Mutex<T> = loom::sync::Mutex<T>;
/// A mutex (`parking_lot`'s; loom's under `--cfg xindex_loom`).
#[cfg(not(xindex_loom))]
pub(crate) type Mutex<T> = parking_lot::Mutex<T>;

/// Locks `m`.
#[cfg(xindex_loom)]
pub(crate) fn lock<T>(m: &Mutex<T>) -> loom::sync::MutexGuard<'_, T> {
    m.lock()
        .expect("no test thread panics while holding a lock")
}

/// Locks `m`.
#[cfg(not(xindex_loom))]
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> parking_lot::MutexGuard<'_, T> {
    m.lock()
}

/// Locks `m` if no other thread holds it.
#[cfg(xindex_loom)]
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<loom::sync::MutexGuard<'_, T>> {
    m.try_lock().ok()
}

/// Locks `m` if no other thread holds it.
#[cfg(not(xindex_loom))]
#[inline]
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<parking_lot::MutexGuard<'_, T>> {
    m.try_lock()
}

/// Waiting for another thread to leave a short critical section: spins a
/// few times, then gives up the CPU, so a thread that was descheduled inside
/// the section (with every core busy, e.g. next to the maintenance thread)
/// gets to finish it instead of being spun against for a whole time slice.
/// The maintenance thread, at a lowered priority, sleeps instead of
/// yielding ([`lidx_core::background::yield_while_waiting`]).
pub(crate) struct Backoff {
    #[cfg(not(xindex_loom))]
    step: std::cell::Cell<u32>,
}

/// Spin rounds before a [`Backoff`] gives up the CPU: 1, 2, 4, … 64 spins.
#[cfg(not(xindex_loom))]
const SPIN_ROUNDS: u32 = 7;

impl Backoff {
    #[inline]
    pub(crate) fn new() -> Self {
        Backoff {
            #[cfg(not(xindex_loom))]
            step: std::cell::Cell::new(0),
        }
    }

    /// One wait step, longer each time.
    #[inline]
    pub(crate) fn snooze(&self) {
        #[cfg(xindex_loom)]
        loom::thread::yield_now();
        #[cfg(not(xindex_loom))]
        {
            let step = self.step.get();
            if step < SPIN_ROUNDS {
                for _ in 0..1u32 << step {
                    std::hint::spin_loop();
                }
                self.step.set(step + 1);
            } else {
                lidx_core::background::yield_while_waiting();
            }
        }
    }
}

/// Runs a loom model, exploring every interleaving with at most `bound`
/// preemptions (enough for the small models of this crate; the unbounded
/// ones did not finish in 15 minutes, and the bound keeps spin loops
/// finite), plus `LIDX_LOOM_EXTRA_PREEMPTIONS` for a deeper, much longer
/// run outside the suite.
#[cfg(all(test, xindex_loom))]
pub(crate) fn loom_model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let extra: usize = std::env::var("LIDX_LOOM_EXTRA_PREEMPTIONS")
        .map(|extra| {
            extra.trim().parse().unwrap_or_else(|_| {
                panic!("LIDX_LOOM_EXTRA_PREEMPTIONS must be a count, not {extra:?}")
            })
        })
        .unwrap_or(0);
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound + extra);
    // A reader spinning on a locked cell takes a branch per turn; the
    // default of 1000 branches per run is too few for three threads.
    builder.max_branches = 20_000;
    builder.check(f);
}
