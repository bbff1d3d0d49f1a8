//! Shared by the band builders: fitting a band node's deltas exactly to
//! the entries it covers, and the largest layer they index.

use std::ops::Range;

use lidx_core::{Error, Result};

use crate::keypos::KeyPositions;
use crate::node::Band;

/// Largest layer (in logical bytes) a band builder indexes. Keeping every
/// position and center below 2^58 keeps the exact `i128` arithmetic of the
/// fits and of [`IntervalCone`](lidx_core::model::optimal_pla::IntervalCone)
/// in range; it is far beyond any real layer.
pub const MAX_BAND_LAYER_BYTES: u64 = 1 << 58;

/// Rejects collections whose layer is too large for exact band arithmetic.
pub(crate) fn check_layer(d: &KeyPositions) -> Result<()> {
    let g = d.geometry();
    match g.records.checked_mul(g.record_size) {
        Some(len) if len <= MAX_BAND_LAYER_BYTES => Ok(()),
        _ => Err(Error::Unsupported(format!(
            "band layers index at most {MAX_BAND_LAYER_BYTES} bytes; this layer has {} records of {} bytes",
            g.records, g.record_size
        ))),
    }
}

/// The band over `entries` (non-empty) of `d` whose center runs from
/// `(x_first, y1)` to `(x_last, y2)`, with the smallest deltas meeting the
/// node contract: every key in `[x_i, x_{i+1})` (clamped to the band)
/// predicts a window holding `position(i)`.
///
/// Because the center is monotone, it suffices that the window at `x_i`
/// reaches `position(i).end` and the window at `x_{i+1} - 1` (or at `x_i`
/// for the last entry) starts at or before `position(i).start`. Both
/// maxima are taken over exact products scaled by `dx = x_last - x_first`
/// (the floor in the center commutes with the maximum), so there is one
/// division per node. Needs `y1 <= y2` and positions and `y`s below
/// [`MAX_BAND_LAYER_BYTES`] (times 16), which the builders ensure.
pub(crate) fn fit(d: &KeyPositions, entries: Range<usize>, y1: u64, y2: u64) -> Band {
    let keys = d.keys();
    let (first, last) = (entries.start, entries.end - 1);
    let (x1, x2) = (keys[first], keys[last]);
    let y2 = y2.max(y1);
    if x1 == x2 {
        let p = d.position(first);
        return Band {
            x1,
            x2,
            y1,
            y2: y1,
            delta_lo: y1.saturating_sub(p.start),
            delta_hi: p.end.saturating_sub(y1),
        };
    }
    let dx = x2 - x1;
    let dy = y2 - y1;
    let base = y1 as i64;
    // Scaled by dx: (c(x) - y1) * dx = floor-able (x - x1) * dy. Positions
    // and y are below 2^62 (see `MAX_BAND_LAYER_BYTES`), so every product
    // is below 2^126 and each is one widening multiply.
    let (mut worst_lo, mut worst_hi) = (i128::MIN, i128::MIN);
    for i in entries {
        let p = d.position(i);
        let rise = wide(keys[i] - x1, dy);
        let reach = if i < last {
            wide(keys[i + 1] - 1 - x1, dy)
        } else {
            rise
        };
        worst_lo = worst_lo.max(reach - signed_wide(p.start as i64 - base, dx));
        worst_hi = worst_hi.max(signed_wide(p.end as i64 - base, dx) - rise);
    }
    let dx = dx as i128;
    // c - s = floor(.. / dx) and e - c = ceil(.. / dx).
    let delta_lo = worst_lo.div_euclid(dx).max(0);
    let delta_hi = (-(-worst_hi).div_euclid(dx)).max(0);
    Band {
        x1,
        x2,
        y1,
        y2,
        delta_lo: delta_lo as u64,
        delta_hi: delta_hi as u64,
    }
}

/// `a * b` exactly, for products below 2^127.
#[inline(always)]
fn wide(a: u64, b: u64) -> i128 {
    (a as u128 * b as u128) as i128
}

/// `a * b` exactly, for products below 2^127 in magnitude.
#[inline(always)]
fn signed_wide(a: i64, b: u64) -> i128 {
    let p = wide(a.unsigned_abs(), b);
    if a < 0 { -p } else { p }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_cover_key_ranges() {
        // Four entries of 8 bytes at keys 0, 10, 20, 30, center 0 -> 24.
        let d = KeyPositions::from_sorted_keys(&[0, 10, 20, 30], 8, 512).unwrap();
        let b = fit(&d, 0..4, 0, 24);
        // At key 9 the center is floor(9 * 24 / 30) = 7; entry 0 starts at 0.
        assert_eq!(b.delta_lo, 7);
        // Entry i ends at 8i + 8 where the center is 8i.
        assert_eq!(b.delta_hi, 8);
        for (i, &k) in d.keys().iter().enumerate() {
            let next = d.keys().get(i + 1).map_or(k, |n| n - 1);
            for x in [k, next] {
                let w = b.window(x);
                let p = d.position(i);
                assert!(w.start <= p.start && p.end <= w.end, "{x}: {w:?} {p:?}");
            }
        }
    }

    #[test]
    fn single_key_and_too_large_layers() {
        let d = KeyPositions::from_sorted_keys(&[5, 5, 5], 16, 512).unwrap();
        let b = fit(&d, 0..1, 0, 0);
        assert_eq!((b.delta_lo, b.delta_hi), (0, 48));
        assert!(check_layer(&d).is_ok());
        let big = KeyPositions::new(
            vec![1],
            vec![0],
            vec![1],
            crate::geometry::RecordGeometry::new(1 << 20, 1 << 40, 512),
        )
        .unwrap();
        assert!(matches!(check_layer(&big), Err(Error::Unsupported(_))));
    }
}
