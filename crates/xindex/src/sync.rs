//! Atomics facade: `std` normally, `loom` under `--cfg xindex_loom`.
//!
//! Only the record protocol ([`crate::record`]) goes through this facade,
//! so loom can explore its interleavings without modelling the epoch
//! collector or the skip list (neither of which is loom-aware).

#[cfg(xindex_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(xindex_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

/// Back off while another thread holds a record lock. Under loom this must
/// yield, or the model checker would explore an unbounded spin.
#[inline]
pub(crate) fn spin() {
    #[cfg(xindex_loom)]
    loom::thread::yield_now();
    #[cfg(not(xindex_loom))]
    std::hint::spin_loop();
}
