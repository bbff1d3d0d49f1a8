//! Structural statistics reported by [`XIndex::stats`](crate::XIndex::stats).

/// One group's shape.
///
/// While a group split runs, its logical parts share the split group's
/// records and delta: the first part reports them, the others report 0
/// records and only their own temporary deltas. The two groups of a
/// running merge share one temporary delta, which the first reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStats {
    /// Records in the sorted array and its §3.5.2 append tail (live or
    /// removed).
    pub records: usize,
    /// Slots of the group's §3.5.2 append tail (0: no tail).
    pub tail_capacity: usize,
    /// Models over the tail's records: the first, plus one per retrain
    /// (an append its newest model predicted more than `e` off).
    pub tail_models: usize,
    /// Array and tail records removed since the array was built: the
    /// count behind Table 2's compaction trigger. A remove that lands
    /// between a compaction's install and its copy phase is counted twice
    /// (once by the remove, once when the copy phase finds its target
    /// removed), so this can exceed the records actually removed.
    pub removed_records: usize,
    /// Exact maximum error of each linear model, in model order.
    pub error_bounds: Vec<usize>,
    /// Keys in the delta index (live or removed).
    pub delta_len: usize,
    /// Whether the root does not index this group yet (reached by `next`).
    pub linked_only: bool,
}

/// The index's shape and maintenance history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Live keys.
    pub len: usize,
    /// Groups, in key order.
    pub groups: Vec<GroupStats>,
    /// Models of the root's slot-predicting stage: the RMI's second-stage
    /// models, or the lowest-level segments of the piecewise-linear root
    /// when that routes (see [`root_piecewise`](Self::root_piecewise)).
    pub root_models: usize,
    /// Worst error, in slots, of one of those models. For the
    /// piecewise-linear root it is a segment's search reach: the largest
    /// distance measured between a prediction and its pivot's slot, plus
    /// one slot for keys that fall between two pivots and one for
    /// rounding.
    pub root_max_error: usize,
    /// Whether the piecewise-linear root routes lookups instead of the RMI.
    /// Chosen at each root build when a radix table over the keys' leading
    /// bits finds the piecewise root's segments (every bucket holds only a
    /// few segment starts; never for key types that own memory, such as
    /// byte strings), or else when more than half of the pivots are
    /// predicted more than 4 slots off by the RMI (skewed or clustered keys).
    pub root_piecewise: bool,
    /// Two-Phase Compactions run (excluding those inside splits and merges).
    pub compactions: u64,
    /// Model splits.
    pub model_splits: u64,
    /// Model merges.
    pub model_merges: u64,
    /// Group splits.
    pub group_splits: u64,
    /// Group merges.
    pub group_merges: u64,
    /// Root updates.
    pub root_updates: u64,
    /// Maintenance passes completed. A background pass is skipped, and not
    /// counted, when no key was added or removed since a pass that found
    /// nothing to do and left no delta waiting.
    pub maintenance_passes: u64,
    /// Bytes charged to the delta budget now (entries not yet compacted).
    pub delta_bytes: usize,
    /// Writes that went over the delta budget and had to help compaction
    /// before returning.
    pub budget_waits: u64,
    /// Bytes of memory holding the groups' sorted arrays (keys and record
    /// cells), which share regions (those of 2 MiB or more advised for
    /// huge pages).
    pub array_region_bytes: usize,
    /// Of those, bytes of arrays in use, including those of replaced
    /// groups not reclaimed yet. Maintenance rebuilds the groups of a
    /// region less than half in use, so that it can be freed.
    pub array_live_bytes: usize,
    /// Bytes of the blocks holding the group nodes: those of the most
    /// groups alive at once (freed slots are reused, blocks are returned
    /// when the index drops).
    pub node_block_bytes: usize,
}

impl Stats {
    /// Number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Models per group, in key order.
    pub fn models_per_group(&self) -> Vec<usize> {
        self.groups.iter().map(|g| g.error_bounds.len()).collect()
    }

    /// Total keys waiting in delta indexes.
    pub fn delta_total(&self) -> usize {
        self.groups.iter().map(|g| g.delta_len).sum()
    }

    /// The largest error bound of any group's models (0 without models).
    pub fn worst_model_error(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|g| g.error_bounds.iter().copied())
            .max()
            .unwrap_or(0)
    }
}
