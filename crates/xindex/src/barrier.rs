//! An RCU-style barrier on the crossbeam epoch collector.
//!
//! The paper's `rcu_barrier` waits until every worker has finished one
//! request, which stalls when a worker thread is idle. Here the barrier
//! waits until every thread that was *pinned* when it started has unpinned:
//! a closure deferred now runs only after the global epoch has advanced
//! twice, which needs every thread pinned at deferral time to unpin. Idle
//! threads are not pinned and do not delay it.
//!
//! The caller must not itself be pinned, or the barrier never completes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_epoch as epoch;

/// Blocks until every operation that was in flight (pinned) when this call
/// started has finished.
pub(crate) fn synchronize() {
    let done = Arc::new(AtomicBool::new(false));
    {
        let guard = epoch::pin();
        let flag = Arc::clone(&done);
        guard.defer(move || flag.store(true, Ordering::Release));
        guard.flush();
    }
    let mut rounds = 0u32;
    while !done.load(Ordering::Acquire) {
        // Each pin/flush tries to advance the epoch and run expired garbage.
        epoch::pin().flush();
        rounds += 1;
        if rounds < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn waits_for_a_pinned_thread_only() {
        let (pinned_tx, pinned_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let released = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&released);
        let holder = std::thread::spawn(move || {
            let guard = epoch::pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            flag.store(true, Ordering::SeqCst);
            drop(guard);
        });
        pinned_rx.recv().unwrap();
        let waiter = std::thread::spawn({
            let released = Arc::clone(&released);
            move || {
                synchronize();
                // The barrier may only finish after the holder unpinned.
                assert!(released.load(Ordering::SeqCst));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished());
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        waiter.join().unwrap();
        // With nobody pinned it returns promptly.
        synchronize();
    }
}
