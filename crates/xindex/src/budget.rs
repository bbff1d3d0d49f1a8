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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use lidx_core::Key;

use crate::record::RecordCell;

/// Bytes of a delta entry besides its key and cell: its share of the
/// arenas' unused slots (under half of a chunk), and its share of the delta
/// tree's nodes. A leaf is 160 bytes for 8 to 16 entries (at most 20 per
/// entry); inner nodes add about a ninth of that again.
const NODE_OVERHEAD: usize = 48;

/// Bytes charged for one delta entry holding `key`.
pub(crate) fn entry_bytes<K: Key>(key: &K) -> usize {
    std::mem::size_of::<K>() + key.heap_bytes() + std::mem::size_of::<RecordCell>() + NODE_OVERHEAD
}

/// Bytes held by delta entries not yet compacted, against a limit.
pub(crate) struct DeltaBudget {
    used: CachePadded<AtomicUsize>,
    limit: usize,
    /// Writers that had to help or wait before returning.
    pub(crate) waits: AtomicU64,
}

impl DeltaBudget {
    pub(crate) fn new(limit: usize) -> Self {
        DeltaBudget {
            used: CachePadded::new(AtomicUsize::new(0)),
            limit,
            waits: AtomicU64::new(0),
        }
    }

    /// Charges `bytes`; true if the total is now above the limit.
    #[inline]
    pub(crate) fn charge(&self, bytes: usize) -> bool {
        self.used.fetch_add(bytes, Ordering::Relaxed) + bytes > self.limit
    }

    /// Returns `bytes` charged earlier.
    pub(crate) fn refund(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Whether the total is above the limit.
    #[inline]
    pub(crate) fn over(&self) -> bool {
        self.used.load(Ordering::Relaxed) > self.limit
    }

    /// Bytes currently charged.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
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
    fn entries_cost_their_key_cell_and_node() {
        assert_eq!(entry_bytes(&5u64), 8 + 16 + NODE_OVERHEAD);
        let key = Vec::with_capacity(100);
        assert_eq!(entry_bytes::<Vec<u8>>(&key), 24 + 100 + 16 + NODE_OVERHEAD);
    }
}
