//! The byte budget of the delta indexes.
//!
//! Compaction keeps deltas small in steady state, but a burst of inserts
//! can outrun the maintenance thread, and nothing in the paper's design
//! stops a delta from growing without limit meanwhile. Every new delta
//! entry is charged here; a compaction that merges a delta into an array
//! refunds it. A writer whose insert leaves the total above the budget
//! finishes its insert (it is acknowledged like any other), then, before
//! returning, helps: it runs maintenance passes itself (or waits for the
//! running one) until the total is back under the budget. Writers thus
//! slow down to the speed compaction can absorb instead of growing memory.
//!
//! The charge is an estimate of what an entry costs: the key (with its
//! heap bytes), the record cell, their allocation and the index slot.
//!
//! Charges go to the writing thread's shard ([`crate::shard`]), and a
//! writer adds up the shards only when its own crosses a multiple of a
//! step, 1/1024 of the limit (at most 64 KiB): one counter for every
//! writer cost two appending threads about a tenth of each append. So the
//! total can pass the limit by up to one step per shard before a writer
//! notices, 1/64 of the limit (1 MiB over the default 64 MiB); under a
//! budget of 1024 entries a step is smaller than an entry, and every
//! charge looks at the total.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use lidx_core::Key;

use crate::record::RecordCell;
use crate::shard;

/// Bytes of a delta entry besides its key and cell: its share of the
/// arenas' unused slots (under half of a chunk), and its share of the delta
/// tree's nodes. A leaf is 288 bytes for 8 to 16 entries: 18 to 36 bytes
/// per entry, about 26 after random inserts and 21 after ascending ones;
/// inner nodes add about a ninth of that again. An estimate, not a bound
/// for every shape: raising it from 48 to 56 with the leaves' growth from
/// 160 bytes (session 46) made osm's 872K ascending inserts from empty
/// cross the default budget and wait for a pass (43 → 113–180 ns each).
const NODE_OVERHEAD: usize = 48;

/// Most bytes a shard charges between two looks at the total.
const MAX_CHECK_EVERY: usize = 64 << 10;

/// Bytes charged for one delta entry holding `key`.
pub(crate) fn entry_bytes<K: Key>(key: &K) -> usize {
    std::mem::size_of::<K>() + key.heap_bytes() + std::mem::size_of::<RecordCell>() + NODE_OVERHEAD
}

/// Bytes held by delta entries not yet compacted, against a limit.
pub(crate) struct DeltaBudget {
    /// Bytes charged, per thread shard; each only grows (wrapping).
    charged: [CachePadded<AtomicUsize>; shard::SHARDS],
    /// Bytes refunded; only grows (wrapping).
    refunded: CachePadded<AtomicUsize>,
    limit: usize,
    /// A writer adds up the shards when its own crosses a multiple of this.
    check_every: usize,
    /// Writers that had to help or wait before returning.
    pub(crate) waits: AtomicU64,
}

impl DeltaBudget {
    pub(crate) fn new(limit: usize) -> Self {
        DeltaBudget {
            charged: std::array::from_fn(|_| CachePadded::new(AtomicUsize::new(0))),
            refunded: CachePadded::new(AtomicUsize::new(0)),
            limit,
            check_every: (limit / 1024).clamp(1, MAX_CHECK_EVERY),
            waits: AtomicU64::new(0),
        }
    }

    /// Charges `bytes`; true if the total is now found above the limit
    /// (looked at when this thread's shard crosses a multiple of
    /// `check_every`).
    #[inline]
    pub(crate) fn charge(&self, bytes: usize) -> bool {
        let before = self.charged[shard::current()].fetch_add(bytes, Ordering::Relaxed);
        let after = before.wrapping_add(bytes);
        before / self.check_every != after / self.check_every && self.over()
    }

    /// Returns `bytes` charged earlier.
    pub(crate) fn refund(&self, bytes: usize) {
        self.refunded.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Whether the total is above the limit.
    #[inline]
    pub(crate) fn over(&self) -> bool {
        self.used() > self.limit
    }

    /// Bytes currently charged.
    pub(crate) fn used(&self) -> usize {
        // Refunds first: every byte refunded was charged before (the
        // compaction that refunds a delta runs after an epoch barrier that
        // follows its writers' charges), so charges read after it cover
        // it. Saturating in case a shard's load is older.
        let refunded = self.refunded.load(Ordering::Relaxed);
        let charged = self
            .charged
            .iter()
            .fold(0usize, |sum, s| sum.wrapping_add(s.load(Ordering::Relaxed)));
        charged.saturating_sub(refunded)
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn charges_refunds_and_limit() {
        let budget = DeltaBudget::new(100);
        assert!(!budget.charge(60));
        assert!(!budget.over());
        assert!(budget.charge(60));
        assert!(budget.over());
        budget.refund(60);
        assert_eq!(budget.used(), 60);
        assert!(!budget.over());
    }

    #[test]
    fn a_large_budget_is_looked_at_once_per_step_of_a_shard() {
        let limit = 64 << 20;
        let budget = DeltaBudget::new(limit);
        assert_eq!(budget.check_every, MAX_CHECK_EVERY);
        let entry = entry_bytes(&0u64);
        // Up to the limit: never over.
        let mut charged = 0;
        while charged + entry <= limit {
            assert!(!budget.charge(entry));
            charged += entry;
        }
        // Past it: found over within one step of this thread's shard.
        let mut found = false;
        while charged <= limit + MAX_CHECK_EVERY + entry {
            charged += entry;
            if budget.charge(entry) {
                found = true;
                break;
            }
        }
        assert!(
            found,
            "over the limit by {} bytes, unnoticed",
            charged - limit
        );
        assert!(budget.over());
        assert_eq!(budget.used(), charged);
    }

    #[test]
    fn charges_from_many_threads_add_up() {
        let budget = DeltaBudget::new(usize::MAX);
        std::thread::scope(|s| {
            for _ in 0..24 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        budget.charge(7);
                    }
                });
            }
        });
        assert_eq!(budget.used(), 24 * 7000);
        budget.refund(24 * 7000);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn entries_cost_their_key_cell_and_node() {
        assert_eq!(entry_bytes(&5u64), 8 + 16 + NODE_OVERHEAD);
        let key = Vec::with_capacity(100);
        assert_eq!(entry_bytes::<Vec<u8>>(&key), 24 + 100 + 16 + NODE_OVERHEAD);
    }
}
