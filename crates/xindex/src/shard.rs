//! Which shard of a per-thread-sharded counter the calling thread writes.
//!
//! A counter every writer bumps is one cache line that every writer's core
//! must own in turn: with two threads appending, the delta's and the
//! budget's counters cost about a fifth of each append (session 40). So
//! counters that writers bump are split over cache-line-padded shards,
//! each thread writing one, and readers add the shards up.

/// Shards of a sharded counter.
pub(crate) const SHARDS: usize = 16;

thread_local! {
    static SHARD: usize = {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SHARDS
    };
}

/// The calling thread's shard, in `0..SHARDS`: threads get them in turn,
/// so the first `SHARDS` threads to ask write distinct ones.
#[inline]
pub(crate) fn current() -> usize {
    SHARD.with(|s| *s)
}
