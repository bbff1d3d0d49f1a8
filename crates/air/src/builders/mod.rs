//! Layer builders (paper §5.2, appendix A.1): functions from a key-position
//! collection `D` to an index layer over it.
//!
//! All three are greedy left to right and written as a memoryless
//! `next_node_end(d, start)`, so [`greedy::partition`](crate::greedy) can run
//! them over key-range chunks in parallel with the sequential result.
//! `lambda` is in logical bytes of the layer below.
//!
//! - [`gstep`]: `GStep(p, lambda)`, step nodes of `p` pieces, each piece at
//!   most `lambda` bytes wide unless one entry alone is wider.
//! - [`gband`]: `GBand(lambda)`, the longest bands of precision `<= lambda`
//!   (+2 bytes of rounding).
//! - [`eband`]: `EBand(lambda)`, bands over groups spanning `<= lambda`
//!   bytes.
//!
//! Every builder meets the [node contract](crate::node): for each entry
//! `i`, every key in `[x_i, x_{i+1})` (clamped to its node) predicts a
//! window containing `position(i)`. Builders never produce an empty node,
//! and an empty `D` gives an empty layer.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use lidx_core::{Error, Result};

use crate::geometry::RecordGeometry;
use crate::keypos::KeyPositions;
use crate::node::{self, NodeKind};

pub mod band;
pub mod eband;
pub mod gband;
pub mod gstep;

/// Largest accepted piece count of a step node (a 1 MiB record); larger
/// records are far beyond any useful node and would only waste memory.
pub const MAX_PIECES: u32 = 1 << 16;

/// A layer builder and its hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BuilderSpec {
    /// Greedy step nodes of `pieces` pieces, each at most `lambda` bytes.
    GStep {
        /// Pieces per node (1..=[`MAX_PIECES`]).
        pieces: u32,
        /// Largest piece width in bytes.
        lambda: u64,
    },
    /// Greedy band nodes of precision at most `lambda` (+2) bytes.
    GBand {
        /// Largest precision in bytes.
        lambda: u64,
    },
    /// Band nodes over groups of entries spanning at most `lambda` bytes.
    EBand {
        /// Largest group span in bytes.
        lambda: u64,
    },
}

impl BuilderSpec {
    /// The node type this builder produces.
    pub fn node_kind(&self) -> NodeKind {
        match *self {
            BuilderSpec::GStep { pieces, .. } => NodeKind::Step { pieces },
            BuilderSpec::GBand { .. } | BuilderSpec::EBand { .. } => NodeKind::Band,
        }
    }

    /// The granularity `lambda`.
    pub fn lambda(&self) -> u64 {
        match *self {
            BuilderSpec::GStep { lambda, .. }
            | BuilderSpec::GBand { lambda }
            | BuilderSpec::EBand { lambda } => lambda,
        }
    }

    /// Builds the layer over `d`, in parallel over chunks of
    /// [`greedy::DEFAULT_CHUNK`](crate::greedy::DEFAULT_CHUNK) entries.
    ///
    /// A step piece count outside `1..=MAX_PIECES` is
    /// [`Error::InvalidArgument`].
    pub fn build(&self, d: &KeyPositions) -> Result<Layer> {
        self.build_chunked(d, crate::greedy::DEFAULT_CHUNK)
    }

    /// [`build`](Self::build) with an explicit parallel chunk size (the
    /// result does not depend on it).
    pub fn build_chunked(&self, d: &KeyPositions, chunk: usize) -> Result<Layer> {
        match *self {
            BuilderSpec::GStep { pieces, lambda } => gstep::build(d, pieces, lambda, chunk),
            BuilderSpec::GBand { lambda } => gband::build(d, lambda, chunk),
            BuilderSpec::EBand { lambda } => eband::build(d, lambda, chunk),
        }
    }

    /// The end of the node that starts at entry `start` (memoryless; the
    /// builder's node boundaries are the chain of this function from 0).
    /// Panics if `start >= d.len()`.
    pub fn next_node_end(&self, d: &KeyPositions, start: usize) -> usize {
        match *self {
            BuilderSpec::GStep { pieces, lambda } => gstep::next_node_end(d, start, pieces, lambda),
            BuilderSpec::GBand { lambda } => gband::next_node_end(d, start, lambda),
            BuilderSpec::EBand { lambda } => eband::next_node_end(d, start, lambda),
        }
    }
}

impl fmt::Display for BuilderSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuilderSpec::GStep { pieces, lambda } => write!(f, "gstep({pieces},{lambda})"),
            BuilderSpec::GBand { lambda } => write!(f, "gband({lambda})"),
            BuilderSpec::EBand { lambda } => write!(f, "eband({lambda})"),
        }
    }
}

impl FromStr for BuilderSpec {
    type Err = Error;

    /// Parses the [`Display`](fmt::Display) form: `gstep(16,4096)`,
    /// `gband(4096)`, `eband(4096)` (spaces allowed around numbers).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(format!(
                "unknown layer builder {s:?}: expected gstep(P,LAMBDA), gband(LAMBDA) or eband(LAMBDA)"
            ))
        };
        let t = s.trim();
        let open = t.find('(').ok_or_else(bad)?;
        let args = t[open + 1..].strip_suffix(')').ok_or_else(bad)?;
        let nums: Vec<&str> = args.split(',').map(str::trim).collect();
        let spec = match (&t[..open], nums.as_slice()) {
            ("gstep", [p, l]) => BuilderSpec::GStep {
                pieces: p.parse().map_err(|_| bad())?,
                lambda: l.parse().map_err(|_| bad())?,
            },
            ("gband", [l]) => BuilderSpec::GBand {
                lambda: l.parse().map_err(|_| bad())?,
            },
            ("eband", [l]) => BuilderSpec::EBand {
                lambda: l.parse().map_err(|_| bad())?,
            },
            _ => return Err(bad()),
        };
        if let BuilderSpec::GStep { pieces, .. } = spec {
            check_pieces(pieces)?;
        }
        Ok(spec)
    }
}

/// Rejects step piece counts outside `1..=MAX_PIECES`.
pub(crate) fn check_pieces(pieces: u32) -> Result<()> {
    if pieces == 0 || pieces > MAX_PIECES {
        return Err(Error::invalid(format!(
            "a step node needs 1..={MAX_PIECES} pieces, not {pieces}"
        )));
    }
    Ok(())
}

/// An index layer: fixed-size node records over a [`KeyPositions`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The builder that made it.
    pub spec: BuilderSpec,
    /// Its node type.
    pub kind: NodeKind,
    /// The node records, concatenated (`nodes() * kind.record_size()`
    /// bytes).
    pub records: Vec<u8>,
    /// Record key (tag) of each node: the first key it covers.
    pub node_keys: Vec<u64>,
    /// Node `j` covers entries `[node_entries[j], node_entries[j + 1])` of
    /// the collection it was built over; `nodes() + 1` long.
    pub node_entries: Vec<usize>,
}

impl Layer {
    /// Assembles a layer from node boundaries over `d`, encoding node `j`
    /// into its record with `encode(j, entries, record)` in parallel.
    pub(crate) fn assemble(
        spec: BuilderSpec,
        d: &KeyPositions,
        node_entries: Vec<usize>,
        encode: impl Fn(usize, Range<usize>, &mut [u8]) -> Result<()> + Sync,
    ) -> Result<Layer> {
        use rayon::prelude::*;

        let kind = spec.node_kind();
        let rs = kind.record_size() as usize;
        let nodes = node_entries.len().saturating_sub(1);
        let bytes = nodes.checked_mul(rs).ok_or_else(|| {
            Error::invalid(format!("{nodes} nodes of {rs} bytes overflow memory"))
        })?;
        let mut records = vec![0u8; bytes];
        records
            .par_chunks_mut(rs)
            .enumerate()
            .with_min_len(256)
            .try_for_each(|(j, rec)| encode(j, node_entries[j]..node_entries[j + 1], rec))?;
        let keys = d.keys();
        let node_keys = node_entries[..nodes].iter().map(|&e| keys[e]).collect();
        Ok(Layer {
            spec,
            kind,
            records,
            node_keys,
            node_entries,
        })
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.node_keys.len()
    }

    /// Logical size in bytes (records only, no block checksums).
    pub fn size_bytes(&self) -> u64 {
        self.records.len() as u64
    }

    /// The record of node `j`. Panics if `j >= nodes()`.
    pub fn record(&self, j: usize) -> &[u8] {
        let rs = self.kind.record_size() as usize;
        &self.records[j * rs..(j + 1) * rs]
    }

    /// The logical window node `j` predicts for key `x` in the layer below.
    /// Panics if `j >= nodes()`.
    #[inline]
    pub fn window(&self, j: usize, x: u64) -> Range<u64> {
        node::predict_trusted(self.kind, self.record(j), x)
    }

    /// The node a lookup of `x` visits: the last one whose tag is `<= x`,
    /// or the first one for `x` below every tag. `None` for an empty layer.
    pub fn node_for(&self, x: u64) -> Option<usize> {
        if self.node_keys.is_empty() {
            return None;
        }
        Some(
            self.node_keys
                .partition_point(|&k| k <= x)
                .saturating_sub(1),
        )
    }

    /// The collection the next layer up indexes: one entry per node (record
    /// `j`, keyed by its tag), weighing the sum of `d`'s weights in node `j`,
    /// in records of `kind.record_size()` bytes packed into blocks of about
    /// `block_target` bytes. `d` must be the collection this layer was
    /// built over (panics if it has fewer entries).
    pub fn outline(&self, d: &KeyPositions, block_target: u64) -> KeyPositions {
        let nodes = self.nodes();
        let w = d.weights();
        let weights = self
            .node_entries
            .windows(2)
            .map(|e| w[e[0]..e[1]].iter().sum())
            .collect();
        let geometry = RecordGeometry::new(self.kind.record_size(), nodes as u64, block_target);
        KeyPositions::new(
            self.node_keys.clone(),
            (0..nodes as u64).collect(),
            weights,
            geometry,
        )
        // Node tags strictly increase and every node is one record, so the
        // outline always satisfies the invariants.
        .expect("a layer's outline is a valid key-position collection")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_display_and_parse() {
        let specs = [
            BuilderSpec::GStep {
                pieces: 16,
                lambda: 4096,
            },
            BuilderSpec::GBand { lambda: 4096 },
            BuilderSpec::EBand { lambda: 256 },
        ];
        let texts = ["gstep(16,4096)", "gband(4096)", "eband(256)"];
        for (spec, text) in specs.iter().zip(texts) {
            assert_eq!(spec.to_string(), text);
            assert_eq!(text.parse::<BuilderSpec>().unwrap(), *spec);
            let json = serde_json::to_string(spec).unwrap();
            assert_eq!(serde_json::from_str::<BuilderSpec>(&json).unwrap(), *spec);
        }
        assert_eq!(
            " gstep( 255 , 4096 ) ".parse::<BuilderSpec>().unwrap(),
            BuilderSpec::GStep {
                pieces: 255,
                lambda: 4096
            }
        );
        assert_eq!(specs[0].node_kind(), NodeKind::Step { pieces: 16 });
        assert_eq!(specs[1].node_kind(), NodeKind::Band);
        assert_eq!(specs[2].lambda(), 256);
        for bad in [
            "gstep(16)",
            "gstep(0,4096)",
            "gstep(70000,1)",
            "gband()",
            "gband(-1)",
            "eband(1,2)",
            "xband(5)",
            "gband 5",
            "gband(5",
        ] {
            assert!(
                matches!(bad.parse::<BuilderSpec>(), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn bad_pieces_fail_to_build() {
        let d = KeyPositions::from_sorted_keys(&[1, 2, 3], 8, 512).unwrap();
        for pieces in [0, MAX_PIECES + 1] {
            let spec = BuilderSpec::GStep { pieces, lambda: 64 };
            assert!(matches!(spec.build(&d), Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn empty_collection_gives_empty_layer() {
        let d = KeyPositions::from_sorted_keys(&[], 8, 512).unwrap();
        for spec in [
            BuilderSpec::GStep {
                pieces: 4,
                lambda: 64,
            },
            BuilderSpec::GBand { lambda: 64 },
            BuilderSpec::EBand { lambda: 64 },
        ] {
            let layer = spec.build(&d).unwrap();
            assert_eq!(layer.nodes(), 0);
            assert_eq!(layer.size_bytes(), 0);
            assert_eq!(layer.node_entries, vec![0]);
            assert_eq!(layer.node_for(5), None);
            let up = layer.outline(&d, 512);
            assert!(up.is_empty());
        }
    }
}
