//! `GBand(lambda)`: the longest band nodes of precision at most `lambda`,
//! grown greedily.
//!
//! A band of precision `delta_lo + delta_hi <= lambda` covering entries
//! `i..j` exists exactly when some line `l` has, for every entry,
//! `position(i).end - lambda/2 <= l(x_i) <= position(i).start + lambda/2`
//! and, for the node contract over key ranges, also `l(x_{i+1} - 1) <=
//! position(i).start + lambda/2` for every entry but the node's last (the
//! window must still hold entry `i` just below the next key). Shift the line
//! down by `lambda/2` to get the window. That is one vertical interval per
//! point, tested incrementally by the exact `i128`
//! [`IntervalCone`] shared with lidx-core's optimal PLA
//! (amortised O(1) per entry). Coordinates are doubled so odd `lambda`
//! stays integral, and relative to the node's first key and position.
//!
//! The line must also be non-negative at the node's first key, since the
//! encoding's `y1` is unsigned; this only binds within `lambda/2` of the
//! layer's start. Greedy extension is maximal (among such lines) because
//! feasibility is closed under taking a prefix. Once the node's entries are fixed, the average of the cone's
//! two extreme lines is rounded to integer endpoints `(x1, y1)`, `(x2,
//! y2)` and the deltas are fitted exactly to that integer center, so the
//! contract always holds; rounding (endpoints to nearest, the center's
//! floor) can make the precision exceed `lambda` by up to 2 bytes. A
//! decreasing line is replaced by the horizontal one at its last value,
//! which is feasible too. An entry wider than `lambda` gets a node of its
//! own.

use lidx_core::Result;
use lidx_core::model::optimal_pla::{IntLine, IntervalCone};

use super::{BuilderSpec, Layer, band};
use crate::greedy;
use crate::keypos::KeyPositions;
use crate::node::Band;

/// Builds the `GBand(lambda)` layer over `d`, in parallel over chunks of
/// `chunk` entries. A layer beyond
/// [`MAX_BAND_LAYER_BYTES`](band::MAX_BAND_LAYER_BYTES) is
/// [`Error::Unsupported`](lidx_core::Error::Unsupported).
pub fn build(d: &KeyPositions, lambda: u64, chunk: usize) -> Result<Layer> {
    band::check_layer(d)?;
    let spec = BuilderSpec::GBand { lambda };
    let (bounds, bands) = greedy::partition_nodes(d.len(), chunk, IntervalCone::new, |cone, s| {
        let end = grow(cone, d, s, lambda);
        (end, center_band(cone, d, s, end))
    });
    Layer::assemble(spec, d, bounds, |j, _, record| bands[j].encode(record))
}

/// End of the node starting at entry `start` (memoryless). Panics if
/// `start >= d.len()`.
pub fn next_node_end(d: &KeyPositions, start: usize, lambda: u64) -> usize {
    grow(&mut IntervalCone::new(), d, start, lambda)
}

/// Fills `cone` with the node starting at `start` and returns its end.
fn grow(cone: &mut IntervalCone, d: &KeyPositions, start: usize, lambda: u64) -> usize {
    // Every layer here is at most 2^58 bytes (checked by `build`), so a
    // wider lambda admits the same bands as 2^58 does, and every doubled
    // relative coordinate below stays within +-3 * 2^58.
    let lambda = lambda.min(band::MAX_BAND_LAYER_BYTES) as i64;
    let keys = d.keys();
    let x0 = keys[start];
    let base = d.position(start).start as i64;
    // Doubled, relative interval of an entry: [2 (end - base) - lambda,
    // 2 (start - base) + lambda].
    let interval = |i: usize| {
        let p = d.position(i);
        (
            2 * (p.end as i64 - base) - lambda,
            2 * (p.start as i64 - base) + lambda,
        )
    };
    cone.clear();
    let (lo, hi) = interval(start);
    // A band's y1 is unsigned: keep the line at or above absolute position
    // 0 (relative -2 base) at the first key. This only binds near the start
    // of a layer, and a horizontal line through a group never needs more.
    let lo = lo.max(-2 * base);
    // Pushes cannot fail: coordinates are in range (see above).
    if !cone.push(0, lo, hi).unwrap_or(false) {
        return start + 1;
    }
    let (mut prev_x, mut prev_hi) = (0u64, hi);
    let mut end = start + 1;
    while end < d.len() {
        let x = keys[end] - x0;
        let (lo, hi) = interval(end);
        // Entry end-1's key range now reaches x - 1, where only its upper
        // bound applies.
        if x - 1 > prev_x && !cone.push_upper(x - 1, prev_hi).unwrap_or(false) {
            break;
        }
        if !cone.push(x, lo, hi).unwrap_or(false) {
            break;
        }
        (prev_x, prev_hi) = (x, hi);
        end += 1;
    }
    end
}

/// Floor of the value at `x` of the line through the two points.
fn line_at(((px, py), (qx, qy)): IntLine, x: u64) -> i128 {
    if qx <= px {
        return py as i128;
    }
    let (dx, dy) = ((qx - px) as i128, qy as i128 - py as i128);
    // |x - px| < 2^64 and |dy| < 2^62: exact.
    py as i128 + ((x as i128 - px as i128) * dy).div_euclid(dx)
}

/// The band over `[start, end)` through the cone's average line.
fn center_band(cone: &IntervalCone, d: &KeyPositions, start: usize, end: usize) -> Band {
    let first = d.position(start).start;
    let Some((min, max)) = cone.extreme_lines().filter(|_| end - start > 1) else {
        return band::fit(d, start..end, first, first);
    };
    let dx = d.keys()[end - 1] - d.keys()[start];
    // Both lines are in doubled coordinates: average and halve, to nearest.
    let at = |x: u64| {
        let sum = line_at(min, x) + line_at(max, x);
        (first as i128 + (sum + 2).div_euclid(4)).max(0) as u64
    };
    let (y1, y2) = (at(0), at(dx));
    band::fit(d, start..end, y1.min(y2), y2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_positions_make_one_node() {
        let keys: Vec<u64> = (0..5000u64).map(|i| u64::MAX - 7 * 5000 + 7 * i).collect();
        let d = KeyPositions::from_sorted_keys(&keys, 24, 512).unwrap();
        let layer = build(&d, 64, 1 << 20).unwrap();
        assert_eq!(layer.nodes(), 1);
        let b = Band::decode(layer.record(0)).unwrap();
        assert!(b.delta_lo + b.delta_hi <= 66, "{b:?}");
        assert_eq!(next_node_end(&d, 0, 64), 5000);
        assert_eq!(next_node_end(&d, 4999, 64), 5000);
    }

    #[test]
    fn wide_entries_are_alone() {
        let d = KeyPositions::from_sorted_keys(&[1, 2, 2, 2, 3, 4], 8, 512).unwrap();
        let layer = build(&d, 16, 1 << 20).unwrap();
        assert_eq!(layer.node_entries, vec![0, 1, 2, 4]);
        assert_eq!(layer.window(1, 2), 8..32);
    }
}
