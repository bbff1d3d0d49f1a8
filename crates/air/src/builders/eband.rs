//! `EBand(lambda)`: band nodes over groups of consecutive entries spanning
//! at most `lambda` bytes.
//!
//! A group grows while `position(last).end - position(first).start <=
//! lambda` and always takes at least one entry. Its band runs through the
//! first and last entries' `(key, position start)` points, with deltas
//! fitted exactly, so the precision depends on how linear the group is;
//! grouping by position keeps the worst case bounded by the group span.

use lidx_core::Result;

use super::{BuilderSpec, Layer, band};
use crate::greedy;
use crate::keypos::KeyPositions;

/// Builds the `EBand(lambda)` layer over `d`, in parallel over chunks of
/// `chunk` entries. A layer beyond
/// [`MAX_BAND_LAYER_BYTES`](band::MAX_BAND_LAYER_BYTES) is
/// [`Error::Unsupported`](lidx_core::Error::Unsupported).
pub fn build(d: &KeyPositions, lambda: u64, chunk: usize) -> Result<Layer> {
    band::check_layer(d)?;
    let spec = BuilderSpec::EBand { lambda };
    let bounds = greedy::partition(d.len(), chunk, |s| next_node_end(d, s, lambda));
    Layer::assemble(spec, d, bounds, |_, entries, record| {
        let y1 = d.position(entries.start).start;
        let y2 = d.position(entries.end - 1).start;
        band::fit(d, entries, y1, y2).encode(record)
    })
}

/// End of the group starting at entry `start` (memoryless). Panics if
/// `start >= d.len()`.
pub fn next_node_end(d: &KeyPositions, start: usize, lambda: u64) -> usize {
    let first = d.position(start).start;
    let mut end = start + 1;
    while end < d.len() && d.position(end).end - first <= lambda {
        end += 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_span() {
        let keys: Vec<u64> = (0..10).map(|i| i * i).collect();
        let d = KeyPositions::from_sorted_keys(&keys, 8, 512).unwrap();
        let layer = build(&d, 24, 1 << 20).unwrap();
        assert_eq!(layer.node_entries, vec![0, 3, 6, 9, 10]);
        // A lambda below one entry still makes progress.
        assert_eq!(build(&d, 0, 1 << 20).unwrap().nodes(), 10);
    }
}
