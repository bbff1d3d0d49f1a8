//! `GStep(p, lambda)`: step nodes of at most `p` pieces, packed greedily.
//!
//! Walking the entries, a new piece starts at entry `i` when the current
//! piece would otherwise span more than `lambda` bytes (`position(i).end -
//! b > lambda` for the current piece start `b`); a piece always takes at
//! least one entry, so an entry wider than `lambda` gets a piece of its
//! own. A node closes when it would need a `p + 1`-th piece. This is the
//! bulk loading of a sparse B-tree of fanout `p` and page size `lambda`
//! (the paper's B-TREE baseline is `GStep(255, 4096)`).
//!
//! Piece `k` predicts exactly the bytes of its entries, so every key in a
//! piece's key range predicts a window holding its predecessor entry.

use lidx_core::Result;

use super::{BuilderSpec, Layer, check_pieces};
use crate::greedy;
use crate::keypos::KeyPositions;
use crate::node::encode_step;

/// Builds the `GStep(pieces, lambda)` layer over `d`, in parallel over
/// chunks of `chunk` entries.
pub fn build(d: &KeyPositions, pieces: u32, lambda: u64, chunk: usize) -> Result<Layer> {
    check_pieces(pieces)?;
    let spec = BuilderSpec::GStep { pieces, lambda };
    let bounds = greedy::partition(d.len(), chunk, |s| next_node_end(d, s, pieces, lambda));
    Layer::assemble(spec, d, bounds, |_, entries, record| {
        let mut keys = Vec::with_capacity(pieces as usize);
        let mut starts = Vec::with_capacity(pieces as usize + 1);
        walk(d, entries.start, pieces, lambda, |i| {
            keys.push(d.keys()[i]);
            starts.push(d.position(i).start);
        });
        starts.push(d.position(entries.end - 1).end);
        encode_step(pieces, &keys, &starts, record)
    })
}

/// End of the node starting at entry `start` (memoryless). Panics if
/// `start >= d.len()`.
pub fn next_node_end(d: &KeyPositions, start: usize, pieces: u32, lambda: u64) -> usize {
    walk(d, start, pieces, lambda, |_| {})
}

/// Walks the node starting at `start`, calling `piece_start` with the first
/// entry of each piece, and returns the node's end.
#[inline]
fn walk(
    d: &KeyPositions,
    start: usize,
    pieces: u32,
    lambda: u64,
    mut piece_start: impl FnMut(usize),
) -> usize {
    let n = d.len();
    piece_start(start);
    let mut used = 1;
    let mut b = d.position(start).start;
    let mut i = start + 1;
    while i < n {
        let p = d.position(i);
        if p.end - b > lambda {
            if used >= pieces {
                break;
            }
            used += 1;
            b = p.start;
            piece_start(i);
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{NodeKind, predict};

    #[test]
    fn btree_like_packing() {
        // 100 keys of 8 bytes, pieces of at most 32 bytes (4 keys), 3 pieces
        // per node: 12 keys per node.
        let keys: Vec<u64> = (0..100).map(|i| i * 10).collect();
        let d = KeyPositions::from_sorted_keys(&keys, 8, 512).unwrap();
        let layer = build(&d, 3, 32, 1 << 20).unwrap();
        assert_eq!(layer.kind, NodeKind::Step { pieces: 3 });
        assert_eq!(layer.nodes(), 9);
        assert_eq!(&layer.node_entries[..3], &[0, 12, 24]);
        assert_eq!(layer.node_keys[1], 120);
        assert_eq!(layer.window(1, 120), 96..128);
        assert_eq!(layer.window(1, 165), 128..160);
        assert_eq!(layer.window(1, 235), 160..192);
        // The last node holds 4 keys in one real piece, padded.
        let last = layer.nodes() - 1;
        assert_eq!(layer.window(last, u64::MAX), 768..800);
        let rec = layer.record(last);
        assert_eq!(predict(layer.kind, rec, 990).unwrap(), 768..800);
    }

    #[test]
    fn wide_entries_get_their_own_piece() {
        let d = KeyPositions::from_sorted_keys(&[1, 2, 2, 2, 2, 3], 8, 512).unwrap();
        let layer = build(&d, 2, 16, 1 << 20).unwrap();
        // Entry 1 (four duplicates, 32 bytes) exceeds lambda on its own.
        assert_eq!(layer.node_entries, vec![0, 2, 3]);
        assert_eq!(layer.window(0, 2), 8..40);
        assert_eq!(layer.window(1, 3), 40..48);
    }
}
