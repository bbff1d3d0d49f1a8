//! The paper's baselines, built in the same framework and costed by the
//! same model: fixed-page B-trees (GStep with page-shaped nodes, stacked to
//! a single root node) and PGM-style indexes (one optimal-PLA band layer
//! per level with the same ε, stacked to a single root segment).
//!
//! Because they share the storage layout and the cost model with AirIndex,
//! the only difference in a comparison is the design.

use lidx_core::Result;
use lidx_core::storage::StorageProfile;

use crate::builders::BuilderSpec;
use crate::keypos::KeyPositions;
use crate::node::NodeKind;
use crate::tune::{Tuned, fixed_design, page_pieces};

/// The paper's B-TREE: 255-piece step nodes over 4 KiB pages.
pub const PAPER_BTREE_PAGE: u64 = 4096;

/// Page sizes of the B-tree sweep: 1 KiB to 1 MiB, doubling.
pub fn btree_pages() -> Vec<u64> {
    (10..=20).map(|s| 1u64 << s).collect()
}

/// ε values of the PGM sweep: 16 to 4096, doubling.
pub fn pgm_epsilons() -> Vec<u64> {
    (4..=12).map(|s| 1u64 << s).collect()
}

/// A B-tree whose nodes are `page`-byte pages, each piece pointing at
/// `page` bytes below (for `page` = 4096 this is 255 pieces: the paper's
/// B-TREE).
pub fn btree(data: &KeyPositions, profile: &StorageProfile, page: u64) -> Result<Tuned> {
    let pieces = if page == PAPER_BTREE_PAGE {
        255
    } else {
        page_pieces(page)
    };
    fixed_design(
        data,
        profile,
        |_| BuilderSpec::GStep {
            pieces,
            lambda: page,
        },
        1,
        32,
    )
}

/// A PGM-index over the same storage: every level is an optimal
/// piecewise-linear band layer whose windows span `2 (eps + 1)` records of
/// the level below, stacked until one segment remains.
pub fn pgm(data: &KeyPositions, profile: &StorageProfile, eps: u64) -> Result<Tuned> {
    let data_record = data.geometry.record_size;
    let band_record = NodeKind::Band.record_size();
    fixed_design(
        data,
        profile,
        |level| {
            let below = if level == 1 { data_record } else { band_record };
            BuilderSpec::GBand {
                lambda: 2 * (eps + 1) * below,
            }
        },
        1,
        32,
    )
}

/// The cheapest of `candidates` by modelled cost, with its parameter.
pub fn best_of(
    candidates: impl IntoIterator<Item = u64>,
    mut design: impl FnMut(u64) -> Result<Tuned>,
) -> Result<Option<(u64, Tuned)>> {
    let mut best: Option<(u64, Tuned)> = None;
    for p in candidates {
        let t = design(p)?;
        if best
            .as_ref()
            .is_none_or(|(_, b)| t.modeled_cost_ns < b.modeled_cost_ns)
        {
            best = Some((p, t));
        }
    }
    Ok(best)
}
