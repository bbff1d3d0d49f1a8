//! Array hints: where a group keeps its sorted keys and cells, and up to
//! [`HINT_SEGMENTS`] lines predicting a key's position in them, packed in
//! one cache line so the root can hold one per slot.
//!
//! A lookup on a host whose cache cannot hold the group nodes pays one
//! memory round trip for the node and, only once its router has predicted
//! a position, a second for the key window. With the root's copy of the
//! group's hint, the lookup requests the likely key and cell lines at the
//! same time as the node, so both misses overlap.
//!
//! A hint is only ever used as prefetch addresses, never dereferenced: a
//! hint made stale by maintenance (arrays replaced, old ones freed) wastes
//! some memory requests but cannot cause a wrong read.
//!
//! The hint is fitted when its group node is built (which already costs
//! O(keys): the router's fit), so a root update only copies one line per
//! group.
//!
//! Why four segments: over chunks of geolite2 and osm the size of their
//! groups (456 and 560 keys), the best single line per group puts 50% and
//! 52% of the keys within 16 positions of their prediction; the best four
//! segments 94.5% and 93.9% (two: 76% and 82%, eight: 99.9% and 98.6%).
//! Four is what fits one line with the arrays' addresses. The time it buys
//! is smaller than that accuracy suggests: the `hint_ab` stage tool (one
//! process alternating roots with and without hints over one bulk load,
//! medians of 8 rounds) gives `get` 0.84-0.90 of the time without hints
//! on geolite2 and 0.87-0.93 on osm (AMD guest, 2 MB of usable cache);
//! with one segment per group 0.88, with two 0.85-0.91; requesting 8 keys
//! on each side instead of 16, 0.90-0.92. What remains of a `get` is
//! mostly the route's misses in the root and one memory round trip.

use lidx_core::Key;
use lidx_core::model::{LinearModel, PositionModel, optimal_pla};
use lidx_core::prefetch::{CACHE_LINE, prefetch_lines};

use crate::record::{CellBlock, SLOTS};

/// Segments a hint holds.
const HINT_SEGMENTS: usize = 4;

/// Error bounds tried, tightest first, for the hint's segments; the first
/// that needs at most [`HINT_SEGMENTS`] segments is kept.
const HINT_EPS: [usize; 4] = [8, 16, 32, 64];

/// Keys on each side of a hint's prediction whose lines are requested.
const HINT_REACH: usize = 16;

/// The hint's segments are fitted to every `HINT_STRIDE`-th point, at
/// `eps / HINT_STRIDE` in sampled positions, and scaled back: within `eps`
/// of every sampled point, and (a rising line between two sampled points
/// two positions apart) within `eps + 1` of the point between them, which
/// the packed hint's measured error (`eps + 2` at most) then confirms.
/// Fitting halves as many points halves the hint's cost, which was as
/// much as the router's (26-50 ns per key at geolite2's, osm's and books'
/// group sizes, against 21-29): two optimal PLA attempts per key or more,
/// the tighter bounds failing after most of the keys.
const HINT_STRIDE: usize = 2;
// Every bound halves exactly.
const _: () = {
    let mut i = 0;
    while i < HINT_EPS.len() {
        assert!(HINT_EPS[i].is_multiple_of(HINT_STRIDE));
        i += 1;
    }
};

/// A group's array addresses and a piecewise-linear model of its key
/// positions, measured in key offsets from the group's pivot.
///
/// Segment `j` serves offsets from `breaks[j - 1]` (segment 0: everything
/// below `breaks[0]`) and predicts `bases[j] + slopes[j] * (x - anchor)`,
/// anchored where it starts (`breaks[j - 1]`; segment 0 at
/// `first_anchor`): each base is then a position (fits a `u16`) and the
/// offset it multiplies stays within the segment's span, which `f32`
/// slopes keep precise for keys spread over the whole `u64` range.
///
/// Segment 0's line may pass below position 0 at the pivot (an optimal
/// line only has to come within `eps` of it), where no `u16` base can
/// hold it; it is then anchored further right, where it reaches 0.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct ArrayHint {
    /// Address of the key array; 0 for no hint. Never dereferenced.
    keys: usize,
    /// Offsets (from the pivot) where segments 1.. start; unused ones
    /// are `+inf`.
    breaks: [f64; HINT_SEGMENTS - 1],
    slopes: [f32; HINT_SEGMENTS],
    bases: [u16; HINT_SEGMENTS],
    /// Bytes from the key array to the cell array (they are stored one
    /// after the other, so this is small).
    cells: i32,
    /// Offset from the pivot where segment 0 is anchored (0, or where its
    /// line reaches position 0).
    first_anchor: f32,
}

const _: () = assert!(std::mem::size_of::<ArrayHint>() == CACHE_LINE);

/// Moves the start of each segment after the first back to the
/// unsampled point just before it (see [`HINT_STRIDE`]) when its line
/// predicts that point better than the segment before does. A segment
/// starts at a sampled point, and no fitted line vouches for the point
/// before it: at a jump between clusters of keys, the line before may
/// miss it by far more than the bound, and the line after may not.
/// `segments` are fitted to the pivot (position 0) followed by `keys`.
fn start_at_unsampled_points<K: Key>(segments: &mut [LinearModel<K>], pivot: &K, keys: &[K]) {
    for j in 1..segments.len() {
        // The origin's position among the points (pivot, then keys).
        let at = 1 + keys.partition_point(|k| *k < segments[j].origin);
        if at < 2 || at > keys.len() {
            continue;
        }
        let before = &keys[at - 2];
        if before <= pivot {
            continue;
        }
        let target = (at - 1) as f64;
        let by_this = segments[j].predict(before);
        let by_previous = segments[j - 1].predict(before);
        if (by_this - target).abs() < (by_previous - target).abs() {
            segments[j] = LinearModel::new(before.clone(), segments[j].slope, by_this);
        }
    }
}

impl ArrayHint {
    /// No hint: [`prefetch`](Self::prefetch) requests nothing.
    pub(crate) const NONE: ArrayHint = ArrayHint {
        keys: 0,
        cells: 0,
        breaks: [f64::INFINITY; HINT_SEGMENTS - 1],
        slopes: [0.0; HINT_SEGMENTS],
        bases: [0; HINT_SEGMENTS],
        first_anchor: 0.0,
    };

    /// Whether this hint names arrays.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn is_some(&self) -> bool {
        self.keys != 0
    }

    /// The hint for the sorted `keys` (and their `cells`) of a group whose
    /// pivot is `pivot`: the first of [`HINT_EPS`] whose optimal PLA (over
    /// every [`HINT_STRIDE`]-th point) needs at most [`HINT_SEGMENTS`]
    /// segments and whose packed form predicts every key within that bound
    /// (plus two: rounding and the unsampled points); [`NONE`](Self::NONE)
    /// for keys that own memory (they are compared, not offset, by the
    /// lookups that would use the hint), arrays too long for `u16` bases,
    /// and keys no bound fits.
    ///
    /// The PLA is fitted to the pivot (at position 0) followed by the keys
    /// (at their positions plus one), so that segment 0 starts at the
    /// pivot: a lookup measures offsets from the pivot, the only key the
    /// root holds for the slot, and every segment's anchor then lies inside
    /// its own span. A pivot equal to the first key costs nothing; one far
    /// below it can cost a segment.
    pub(crate) fn fit<K: Key>(pivot: &K, keys: &[K], cells: &[CellBlock]) -> ArrayHint {
        if std::mem::needs_drop::<K>()
            || keys.is_empty()
            || keys.len() >= usize::from(u16::MAX)
            || keys[0] < *pivot
        {
            return Self::NONE;
        }
        // Every other point, at half the bound, then scaled back: the
        // same bounds on the sampled points, and one position more between
        // them (see [`HINT_STRIDE`]).
        let points: Vec<K> = std::iter::once(pivot)
            .chain(keys)
            .step_by(HINT_STRIDE)
            .cloned()
            .collect();
        let stride = HINT_STRIDE as f64;
        for eps in HINT_EPS {
            // A bound that needs a fifth segment is abandoned there: the
            // failing attempts cost only the keys up to it (fitting every
            // bound in full took a fifth of a bulk load of geolite2).
            let fit = match optimal_pla::build_at_most(&points, eps / HINT_STRIDE, HINT_SEGMENTS) {
                Ok(Some(fit)) => fit,
                Ok(None) => continue,
                Err(_) => return Self::NONE,
            };
            let mut segments: Vec<LinearModel<K>> = fit
                .model
                .into_segments()
                .into_iter()
                .map(|s| LinearModel::new(s.origin, s.slope * stride, s.intercept * stride))
                .collect();
            start_at_unsampled_points(&mut segments, pivot, keys);
            let Some(hint) = Self::pack(pivot, &segments, keys, cells) else {
                return Self::NONE;
            };
            if hint.max_error(pivot, keys) <= eps + 2 {
                return hint;
            }
        }
        Self::NONE
    }

    /// The packed form of `segments` (at least one, in key order, fitted
    /// with the pivot at position 0), or `None` if an offset or a line is
    /// not finite or the cells lie too far from the keys.
    fn pack<K: Key>(
        pivot: &K,
        segments: &[LinearModel<K>],
        keys: &[K],
        cells: &[CellBlock],
    ) -> Option<ArrayHint> {
        let offsets: Vec<f64> = segments
            .iter()
            .map(|s| s.origin.offset_from(pivot))
            .collect();
        if offsets.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let last = segments.len() - 1;
        let distance = (cells.as_ptr() as isize).wrapping_sub(keys.as_ptr() as isize);
        let mut hint = ArrayHint {
            keys: keys.as_ptr() as usize,
            cells: i32::try_from(distance).ok()?,
            ..Self::NONE
        };
        // Unused entries repeat the last segment (no key selects them).
        for j in 0..HINT_SEGMENTS {
            let (s, origin) = (&segments[j.min(last)], offsets[j.min(last)]);
            let mut anchor = if j == 0 { 0.0 } else { origin };
            // Minus one: the keys were fitted one position after the pivot.
            let mut base = s.intercept + s.slope * (anchor - origin) - 1.0;
            if !base.is_finite() || !s.slope.is_finite() {
                return None;
            }
            if j == 0 && base < 0.0 && s.slope > 0.0 {
                // Where the line reaches 0: every key left of it is
                // predicted at 0, as the clamped line would have it.
                let zero = (anchor - base / s.slope) as f32;
                if zero.is_finite() {
                    hint.first_anchor = zero;
                    anchor = f64::from(zero);
                    base = s.intercept + s.slope * (anchor - origin) - 1.0;
                }
            }
            hint.slopes[j] = s.slope as f32;
            hint.bases[j] = base.round().clamp(0.0, f64::from(u16::MAX)) as u16;
        }
        for (j, b) in hint.breaks.iter_mut().enumerate() {
            *b = offsets.get(j + 1).copied().unwrap_or(f64::INFINITY);
        }
        Some(hint)
    }

    /// Largest distance between a key's position and its prediction.
    fn max_error<K: Key>(&self, pivot: &K, keys: &[K]) -> usize {
        keys.iter()
            .enumerate()
            .map(|(i, k)| self.predict(k.offset_from(pivot)).abs_diff(i))
            .max()
            .unwrap_or(0)
    }

    /// Predicted position of the key at offset `x` from the pivot (a
    /// float-to-int cast saturates: below 0, or NaN, gives 0).
    #[inline(always)]
    pub(crate) fn predict(&self, x: f64) -> usize {
        let b = &self.breaks;
        let j = b.iter().map(|&b| usize::from(x >= b)).sum::<usize>();
        let anchor = if j == 0 {
            f64::from(self.first_anchor)
        } else {
            b[j - 1]
        };
        // At most `u16::MAX`: a key far above the array extrapolates
        // within reach of it, not to an arbitrary address.
        (f64::from(self.bases[j]) + f64::from(self.slopes[j]) * (x - anchor))
            .clamp(0.0, f64::from(u16::MAX)) as usize
    }

    /// Requests the key and cell lines within [`HINT_REACH`] of the
    /// predicted position of the key at offset `x` from the pivot, for an
    /// array of `K`.
    #[inline(always)]
    pub(crate) fn prefetch<K>(&self, x: f64) {
        if self.keys == 0 {
            return;
        }
        let first = self.predict(x).saturating_sub(HINT_REACH);
        let key_lines = (2 * HINT_REACH * std::mem::size_of::<K>()).div_ceil(CACHE_LINE) + 1;
        prefetch_lines((self.keys as *const K).wrapping_add(first), key_lines);
        let cells = self.keys.wrapping_add_signed(self.cells as isize);
        prefetch_lines(
            (cells as *const CellBlock).wrapping_add(first / SLOTS),
            (2 * HINT_REACH).div_ceil(SLOTS) + 1,
        );
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cells_for(n: usize) -> Vec<CellBlock> {
        CellBlock::live(&vec![0; n])
    }

    /// Share of `keys` the hint predicts within `within` positions.
    fn share_within(hint: &ArrayHint, pivot: u64, keys: &[u64], within: usize) -> f64 {
        let near = keys
            .iter()
            .enumerate()
            .filter(|(i, k)| hint.predict(k.offset_from(&pivot)).abs_diff(*i) <= within)
            .count();
        near as f64 / keys.len() as f64
    }

    #[test]
    fn linear_keys_get_one_exact_segment() {
        let keys: Vec<u64> = (0..500u64).map(|i| 1_000 + 3 * i).collect();
        let hint = ArrayHint::fit(&1_000, &keys, &cells_for(keys.len()));
        assert!(hint.is_some());
        assert!(hint.max_error(&1_000, &keys) <= 1);
        // A pivot below the first key bends the line a little.
        let below = ArrayHint::fit(&990, &keys, &cells_for(keys.len()));
        assert!(below.max_error(&990, &keys) <= 3);
        // Below the first key and above the last: clamped or extrapolated,
        // never a panic.
        assert_eq!(hint.predict(0.0), 0);
        assert!((400..=usize::from(u16::MAX)).contains(&hint.predict(1e30)));
        assert_eq!(hint.predict(f64::NAN), 0);
    }

    #[test]
    fn four_clusters_get_four_segments_within_the_bound() {
        // Four runs of different density, far apart.
        let mut keys = Vec::new();
        for (c, step) in [
            (0u64, 1u64),
            (1 << 40, 1000),
            (1 << 50, 7),
            (1 << 60, 1 << 20),
        ] {
            keys.extend((0..150u64).map(|i| c + i * step));
        }
        let pivot = 0u64;
        let hint = ArrayHint::fit(&pivot, &keys, &cells_for(keys.len()));
        assert!(hint.is_some());
        assert!(hint.max_error(&pivot, &keys) <= 10, "{hint:?}");
        assert_eq!(share_within(&hint, pivot, &keys, 10), 1.0);
    }

    #[test]
    fn a_first_line_below_zero_at_the_pivot_keeps_the_tightest_bound() {
        // Sparse first keys, then dense ones: the one optimal line bends
        // below position 0 at the pivot (geolite2's groups did this, and
        // a clamped base cost them their eps-8 hints).
        let mut keys: Vec<u64> = (0..40u64).map(|i| 1_000 + i * 100).collect();
        keys.extend((0..400u64).map(|i| 5_000 + i * 60));
        let points: Vec<u64> = std::iter::once(keys[0])
            .chain(keys.iter().copied())
            .collect();
        let fit = optimal_pla::build(&points, HINT_EPS[0]).unwrap();
        assert!(fit.model.len() <= HINT_SEGMENTS);
        let first = &fit.model.segments()[0];
        assert!(
            first.intercept < -2.0,
            "the case needs a line below 0: {first:?}"
        );
        let hint = ArrayHint::fit(&keys[0], &keys, &cells_for(keys.len()));
        assert!(hint.first_anchor > 0.0, "{hint:?}");
        assert!(
            hint.max_error(&keys[0], &keys) <= HINT_EPS[0] + 2,
            "{hint:?}"
        );
    }

    #[test]
    fn keys_that_no_bound_fits_get_no_hint() {
        // Eight runs of 150 consecutive keys, far apart: each run is a
        // rise of 150 positions over a few keys' width, which no line can
        // follow within 64 on both sides of it, so each needs a steep
        // segment of its own and the flat stretches between them more:
        // over four segments at every bound tried, sampled or not.
        let keys: Vec<u64> = (0..8u64)
            .flat_map(|c| (0..150u64).map(move |i| (c << 40) + i))
            .collect();
        let hint = ArrayHint::fit(&0, &keys, &cells_for(keys.len()));
        assert!(!hint.is_some(), "{hint:?}");
        // Prefetching through no hint requests nothing and is harmless.
        hint.prefetch::<u64>(5.0);
    }

    #[test]
    fn strings_and_huge_arrays_get_no_hint() {
        let strings: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
        assert!(!ArrayHint::fit(&vec![0u8], &strings, &cells_for(100)).is_some());
        let huge: Vec<u64> = (0..70_000u64).collect();
        assert!(!ArrayHint::fit(&0, &huge, &cells_for(huge.len())).is_some());
    }

    proptest! {
        #[test]
        fn a_kept_hint_predicts_every_key_within_its_bound(
            mut keys in proptest::collection::vec(any::<u64>(), 1..600),
            pivot_below in 0u64..1_000_000,
        ) {
            keys.sort_unstable();
            keys.dedup();
            let pivot = keys[0].saturating_sub(pivot_below);
            let hint = ArrayHint::fit(&pivot, &keys, &cells_for(keys.len()));
            if hint.is_some() {
                prop_assert!(hint.max_error(&pivot, &keys) <= HINT_EPS[HINT_EPS.len() - 1] + 2);
            }
            // Any offset, kept hint or not: a prediction, never a panic.
            for x in [f64::NEG_INFINITY, -1.0, 0.0, 1e300, f64::INFINITY, f64::NAN] {
                hint.prefetch::<u64>(x);
                prop_assert!(hint.predict(x) <= usize::from(u16::MAX));
            }
        }
    }
}
