//! The root's piecewise-linear pivot model: the alternative the issue
//! allows to the two-stage RMI ("a two-stage RMI of linear models or
//! piecewise-linear models, with a bounded search"), used when the RMI's
//! predictions land far from their pivots.
//!
//! A stage-1 linear model splits the pivots among the second-stage
//! models by key, so on skewed keys most pivots crowd into a few leaves
//! whatever their number: on lognormal at 10M keys (2,531 pivots, 316
//! leaves) 69% of lookups land more than 32 pivots from their slot, and
//! the galloping search that follows is a chain of mispredicted branches.
//! Here every level is instead the optimal PLA of the level below with a
//! small error bound ([`EPS`]), as in the PGM-index: level 0 over the pivots, level `i` over the first
//! keys of level `i - 1`'s segments, up to a top level of at most
//! [`TOP_SEGMENTS`]. A lookup searches the top level without branches,
//! in a fixed number of steps, then at every level predicts a position in the level below
//! and counts, branch-free, the entries `<=` the key in the
//! [`WINDOW`] around it; each segment's `reach` is measured on every
//! entry it serves, so the count is exact unless a key lies beyond it,
//! when the search widens ([`counted_within`]).
//!
//! When level 0's segments start at keys spread evenly enough, a radix
//! table over their first keys ([`RadixTop`]) finds a key's segment in
//! one load and one count instead, and the levels above are not read.

use lidx_core::Key;
use lidx_core::model::{optimal_pla, round_clamp};
use lidx_core::search::{counted_within, exponential_by};

/// Error bound of every level's fit. At 6 the measured errors stay
/// within 7, so the answer lies in the [`WINDOW`] counted around the
/// prediction.
const EPS: usize = 6;

/// Entries counted around a prediction: two cache lines of `u64` keys.
const WINDOW: usize = 16;

/// Most segments of the top level, which is searched in a fixed six
/// steps ([`top_segment`]); a power of two. At 64 one level serves osm
/// (1,551 pivots, 48 segments) and books.
const TOP_SEGMENTS: usize = 64;
const _: () = assert!(TOP_SEGMENTS.is_power_of_two());

/// One segment's line: the predicted position of `key` in the level
/// below is `intercept + slope * key.offset_from(origin)`, and the answer
/// lies at most `reach` positions from it.
#[derive(Clone, Copy, Debug)]
struct Line {
    slope: f64,
    intercept: f64,
    reach: usize,
}

/// One level: its segments' first keys (segment 0 also serves every key
/// below its own) and their lines, in separate arrays so that a count
/// over the first keys reads only keys.
struct Level<K> {
    origins: Box<[K]>,
    lines: Box<[Line]>,
}

/// A multi-level piecewise-linear model over sorted, distinct pivots
/// predicting how many pivots are `<=` a key.
pub(crate) struct PivotPla<K> {
    /// `levels[0]` predicts positions among the pivots, `levels[i]` among
    /// `levels[i - 1].origins`; the last holds at most [`TOP_SEGMENTS`].
    levels: Box<[Level<K>]>,
    /// The top level's origins, padded to [`TOP_SEGMENTS`] with copies of
    /// its last one so that [`top_segment`] takes a fixed number of steps.
    top: Box<[K; TOP_SEGMENTS]>,
    /// A radix table straight into level 0's segments, when the segments'
    /// first keys spread evenly enough: it then replaces every level above.
    radix: Option<RadixTop<K>>,
}

impl<K: Key> PivotPla<K> {
    /// Fits the levels over `pivots` (sorted, distinct, at least one).
    /// `None` if a fit fails, which sorted pivots never make it do, or if
    /// a level does not halve the one below it: keys whose numeric views
    /// coincide (byte strings sharing their first eight bytes) make every
    /// entry a segment of its own, and the levels would never reach the
    /// top. The RMI routes those pivots instead.
    pub(crate) fn fit(pivots: &[K]) -> Option<Self> {
        let mut levels: Vec<Level<K>> = Vec::new();
        loop {
            let below: &[K] = levels.last().map_or(pivots, |l| &l.origins);
            let level = Level::fit(below)?;
            let done = level.origins.len() <= TOP_SEGMENTS;
            // Keys with distinct views pair up at least, so this never
            // rejects them, and the levels then shrink to the top.
            if !done && level.origins.len() > below.len().div_ceil(2) {
                return None;
            }
            if done {
                let mut top = level.origins.to_vec();
                top.resize(TOP_SEGMENTS, level.origins[level.origins.len() - 1].clone());
                levels.push(level);
                let radix = if std::mem::needs_drop::<K>() {
                    // Keys that own memory compare slowly, and byte
                    // strings often share their prefix: the levels route.
                    None
                } else {
                    RadixTop::fit(&levels[0].origins)
                };
                return Some(PivotPla {
                    levels: levels.into_boxed_slice(),
                    top: top.into_boxed_slice().try_into().ok()?,
                    radix,
                });
            }
            levels.push(level);
        }
    }

    /// Whether a radix table finds the level-0 segments ([`RadixTop`]).
    pub(crate) fn has_radix(&self) -> bool {
        self.radix.is_some()
    }

    /// Segments of level 0 (the second-stage models' counterpart).
    pub(crate) fn segment_count(&self) -> usize {
        self.levels[0].origins.len()
    }

    /// Worst reach of level 0, which predicts the pivot positions.
    pub(crate) fn max_error(&self) -> usize {
        self.levels[0]
            .lines
            .iter()
            .map(|l| l.reach)
            .max()
            .unwrap_or(0)
    }

    /// Number of `pivots` (the ones this model was fitted to) `<= key`.
    #[inline(always)]
    pub(crate) fn count_le(&self, pivots: &[K], key: &K) -> usize {
        if let Some(radix) = &self.radix {
            let segment = radix.segment(key).min(self.levels[0].origins.len() - 1);
            return self.levels[0].count_le(segment, pivots, key);
        }
        let top = self.levels.len() - 1;
        let mut segment = top_segment(&self.top, key).min(self.levels[top].origins.len() - 1);
        // One level (up to [`TOP_SEGMENTS`] segments over the pivots): the
        // loop below, without its bookkeeping.
        if let [level] = &*self.levels {
            return level.count_le(segment, pivots, key);
        }
        let mut i = top;
        loop {
            let below: &[K] = if i == 0 {
                pivots
            } else {
                &self.levels[i - 1].origins
            };
            let count = self.levels[i].count_le(segment, below, key);
            if i == 0 {
                return count;
            }
            segment = count.saturating_sub(1);
            i -= 1;
        }
    }
}

impl<K: Key> Level<K> {
    /// Number of `below` (the entries this level was fitted to) `<= key`,
    /// counted around `segment`'s prediction.
    #[inline(always)]
    fn count_le(&self, segment: usize, below: &[K], key: &K) -> usize {
        let line = self.lines[segment];
        let x = key.offset_from(&self.origins[segment]);
        let pos = round_clamp(line.intercept + line.slope * x, below.len());
        if std::mem::needs_drop::<K>() {
            // Keys that own memory compare slowly: gallop, comparing
            // only as many as needed.
            exponential_by(below, pos, |p| p <= key)
        } else {
            counted_within(below, pos, WINDOW, line.reach, |p| p <= key, |_, _| {})
        }
    }

    /// The optimal PLA of `below` at [`EPS`], each segment's reach
    /// measured on the entries it serves with the lookup's arithmetic.
    fn fit(below: &[K]) -> Option<Self> {
        let segments = optimal_pla::build(below, EPS).ok()?.model.into_segments();
        if segments.is_empty() {
            return None;
        }
        let origins: Box<[K]> = segments.iter().map(|s| s.origin.clone()).collect();
        let mut lines: Box<[Line]> = segments
            .iter()
            .map(|s| Line {
                slope: if s.slope.is_finite() { s.slope } else { 0.0 },
                intercept: if s.intercept.is_finite() {
                    s.intercept
                } else {
                    0.0
                },
                reach: 0,
            })
            .collect();
        // Walk entries and segments together: entry `i` is served by the
        // last segment whose first key is `<=` it.
        let mut segment = 0;
        for (i, entry) in below.iter().enumerate() {
            while segment + 1 < origins.len() && origins[segment + 1] <= *entry {
                segment += 1;
            }
            let line = &mut lines[segment];
            let x = entry.offset_from(&origins[segment]);
            let pos = round_clamp(line.intercept + line.slope * x, below.len());
            // A key between two entries may be predicted anywhere between
            // their predictions: one more position, and one for rounding.
            line.reach = line.reach.max(pos.abs_diff(i) + 2);
        }
        Some(Level { origins, lines })
    }
}

/// Most segment starts one radix bucket may hold: the count that finishes
/// a radix lookup covers this many origins after the bucket's base.
const RADIX_REACH: usize = 8;

/// Fewest and most bits a radix table indexes by: 64 to 4,096 buckets
/// of two bytes, at most 8 KiB next to the pivots.
const RADIX_BITS: std::ops::RangeInclusive<u32> = 6..=12;

/// A radix table over the first keys of level 0's segments (as in
/// RadixSpline, Kipf et al. 2020): a key's [`Key::ordered_prefix`] above
/// the first origin's, shifted, names a bucket; the bucket holds the
/// index of the last origin in an earlier bucket, which is `<=` every key
/// in this one; a branch-free count over the [`RADIX_REACH`] origins after
/// it finishes the search. This replaces the levels' chain of dependent
/// steps (the top level's binary search, then a prediction and a count
/// per level) with a load and one count. osm (48 segments, one level):
/// random `get`s took a median 107.5 ns instead of 116.5 (x86-64-v3
/// build, one process alternating the two, 5 rounds each); geolite2
/// through this root (95 segments, two levels) 175 instead of 216.
struct RadixTop<K> {
    /// Ordered prefix of the first origin; keys below it land in bucket 0.
    base: u64,
    shift: u32,
    /// Per bucket, the index of the last origin whose bucket comes before
    /// it (0 if none).
    before: Box<[u16]>,
    /// Level 0's origins followed by [`RADIX_REACH`] copies of the last,
    /// so every count reads a full window.
    origins: Box<[K]>,
}

impl<K: Key> RadixTop<K> {
    /// The smallest table in [`RADIX_BITS`] whose buckets each hold at
    /// most [`RADIX_REACH`] of `origins` (sorted, distinct); `None` if
    /// none does, or for more origins than a `u16` indexes.
    fn fit(origins: &[K]) -> Option<Self> {
        let last = origins.last()?;
        if origins.len() > usize::from(u16::MAX) {
            return None;
        }
        let base = origins[0].ordered_prefix();
        let span = last.ordered_prefix() - base;
        let span_bits = u64::BITS - span.leading_zeros();
        for bits in RADIX_BITS {
            let shift = span_bits.saturating_sub(bits);
            let buckets = usize::try_from((span >> shift) + 1).ok()?;
            let bucket_of = |o: &K| ((o.ordered_prefix() - base) >> shift) as usize;
            let mut crowded = false;
            let mut run = 0;
            for (i, o) in origins.iter().enumerate() {
                run = if i > 0 && bucket_of(&origins[i - 1]) == bucket_of(o) {
                    run + 1
                } else {
                    1
                };
                crowded |= run > RADIX_REACH;
            }
            if crowded {
                continue;
            }
            let mut before = vec![0u16; buckets];
            let mut next = 0;
            for (b, entry) in before.iter_mut().enumerate() {
                while next < origins.len() && bucket_of(&origins[next]) < b {
                    next += 1;
                }
                *entry = next.saturating_sub(1) as u16;
            }
            let mut padded = origins.to_vec();
            padded.resize(origins.len() + RADIX_REACH, last.clone());
            return Some(RadixTop {
                base,
                shift,
                before: before.into_boxed_slice(),
                origins: padded.into_boxed_slice(),
            });
        }
        None
    }

    /// Index of the last origin `<= key`, or 0 if none is: one more than
    /// the real ones when `key` reaches the padding (callers clamp).
    #[inline(always)]
    fn segment(&self, key: &K) -> usize {
        let offset = key.ordered_prefix().saturating_sub(self.base) >> self.shift;
        let bucket = (offset as usize).min(self.before.len() - 1);
        let first = usize::from(self.before[bucket]);
        // Origins from `first + 1` on in this bucket are counted; later
        // buckets' are above `key` and count nothing.
        let window: &[K; RADIX_REACH] = self.origins[first + 1..first + 1 + RADIX_REACH]
            .try_into()
            .expect("padded");
        first + window.iter().map(|o| usize::from(o <= key)).sum::<usize>()
    }
}

/// Index of the last of the padded top-level `origins` that is `<= key`,
/// or 0: a binary search of fixed depth (six steps), unrolled, whose steps
/// add a compare's result instead of branching on the loaded keys. A key
/// at or above the last real origin lands in the padding; the caller
/// clamps it back.
#[inline(always)]
fn top_segment<K: Key>(origins: &[K; TOP_SEGMENTS], key: &K) -> usize {
    let mut s = 0;
    let mut step = TOP_SEGMENTS / 2;
    while step > 0 {
        // `s + step < TOP_SEGMENTS` always (`s` is a sum of larger steps);
        // the mask lets the compiler see it and drop the bounds check.
        s += usize::from(origins[(s + step) & (TOP_SEGMENTS - 1)] <= *key) * step;
        step /= 2;
    }
    s
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use lidx_core::F64Key;
    use proptest::prelude::*;

    fn check(pivots: &[u64], probes: impl IntoIterator<Item = u64>) {
        let pla = PivotPla::fit(pivots).expect("fits");
        for probe in probes {
            assert_eq!(
                pla.count_le(pivots, &probe),
                pivots.partition_point(|p| *p <= probe),
                "probe {probe}"
            );
        }
    }

    #[test]
    fn counts_pivots_of_clustered_keys_through_several_levels() {
        // Clusters of very different densities: many level-0 segments.
        let mut pivots = Vec::new();
        let mut key = 1000u64;
        for cluster in 0..400u64 {
            for _ in 0..(cluster % 13 + 1) * 7 {
                key += 1 + cluster % 5;
                pivots.push(key);
            }
            key += 1 << (cluster % 40);
        }
        let pla = PivotPla::fit(&pivots).expect("fits");
        assert!(pla.levels.len() >= 2, "{} levels", pla.levels.len());
        assert!(pla.max_error() <= EPS + 3, "{}", pla.max_error());
        let around = pivots
            .iter()
            .flat_map(|&p| [p - 1, p, p + 1])
            .chain([0, u64::MAX]);
        check(&pivots, around);
    }

    #[test]
    fn counts_one_and_two_pivots() {
        check(&[5], [0, 4, 5, 6, u64::MAX]);
        check(&[0, u64::MAX], [0, 1, u64::MAX - 1, u64::MAX]);
    }

    proptest! {
        #[test]
        fn counts_like_partition_point(
            mut pivots in proptest::collection::vec(any::<u64>(), 1..2000),
            probes in proptest::collection::vec(any::<u64>(), 0..200),
        ) {
            pivots.sort_unstable();
            pivots.dedup();
            let near: Vec<u64> = pivots.iter().step_by(7).map(|p| p.wrapping_add(1)).collect();
            check(&pivots, probes.into_iter().chain(near).chain(pivots.clone()));
        }

        #[test]
        fn counts_signed_and_float_pivots_like_partition_point(
            mut pivots in proptest::collection::vec(any::<i64>(), 1..1500),
            probes in proptest::collection::vec(any::<i64>(), 0..200),
        ) {
            pivots.sort_unstable();
            pivots.dedup();
            let pla = PivotPla::fit(&pivots).expect("fits");
            for probe in probes.iter().chain(&pivots).chain(&[i64::MIN, i64::MAX, 0, -1]) {
                prop_assert_eq!(pla.count_le(&pivots, probe), pivots.partition_point(|p| p <= probe));
            }
            let mut floats: Vec<F64Key> = pivots
                .iter()
                .map(|&p| F64Key::new(p as f64 / 1e6).expect("not NaN"))
                .collect();
            floats.dedup();
            if let Some(pla) = PivotPla::fit(&floats) {
                for probe in probes.iter().map(|&p| F64Key::new(p as f64 / 1e6).expect("not NaN")) {
                    prop_assert_eq!(pla.count_le(&floats, &probe), floats.partition_point(|p| *p <= probe));
                }
            }
        }

        #[test]
        fn counts_string_pivots_like_partition_point(
            mut pivots in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..6), 1..300),
            probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..6), 0..100),
        ) {
            pivots.sort_unstable();
            pivots.dedup();
            let views_distinct = pivots.windows(2).all(|w| w[1].offset_from(&w[0]) > 0.0);
            let fitted = PivotPla::fit(&pivots);
            // Only pivots whose numeric views coincide may be left to the RMI.
            prop_assert!(fitted.is_some() || !views_distinct);
            if let Some(pla) = fitted {
                for probe in probes.iter().chain(&pivots) {
                    prop_assert_eq!(pla.count_le(&pivots, probe), pivots.partition_point(|p| p <= probe));
                }
            }
        }
    }

    /// Pivots whose level-0 segments crowd where the keys are dense:
    /// clusters of distinct slopes near the bottom of the range, one far
    /// above.
    fn clustered(clusters: u64, far: u64) -> Vec<u64> {
        let mut pivots = Vec::new();
        let mut key = 0u64;
        for c in 0..clusters {
            let step = 1 + (c % 7) * 13;
            for _ in 0..40 {
                key += step;
                pivots.push(key);
            }
            key += 1 << (c % 11);
        }
        pivots.push(far);
        pivots
    }

    #[test]
    fn radix_serves_segments_spread_over_the_range() {
        let pivots: Vec<u64> = (0..5000u64).map(|i| i * i * 977).collect();
        let pla = PivotPla::fit(&pivots).expect("fits");
        assert!(pla.radix.is_some());
        let probes = pivots.iter().flat_map(|&p| [p.saturating_sub(1), p, p + 1]);
        check(&pivots, probes.chain([0, u64::MAX]));
    }

    #[test]
    fn crowded_segments_fall_back_to_the_levels() {
        // A far outlier stretches the span: every cluster shares bucket 0.
        let pivots = clustered(200, u64::MAX - 5);
        let pla = PivotPla::fit(&pivots).expect("fits");
        assert!(pla.levels[0].origins.len() > RADIX_REACH);
        assert!(pla.radix.is_none());
        let probes = pivots
            .iter()
            .flat_map(|&p| [p.saturating_sub(1), p, p.saturating_add(1)]);
        check(&pivots, probes.chain([0, u64::MAX]));
    }

    #[test]
    fn radix_buckets_hold_at_most_their_reach() {
        let mut fitted = 0;
        for far in [1 << 20, 1 << 24, 1 << 40, u64::MAX] {
            let pivots = clustered(60, far);
            let Some(radix) =
                RadixTop::fit(&PivotPla::fit(&pivots).expect("fits").levels[0].origins)
            else {
                continue;
            };
            let real = radix.origins.len() - RADIX_REACH;
            let bucket = |o: &u64| ((o - radix.base) >> radix.shift) as usize;
            let mut per_bucket = std::collections::HashMap::new();
            for o in &radix.origins[..real] {
                *per_bucket.entry(bucket(o)).or_insert(0) += 1;
            }
            assert!(per_bucket.values().all(|&n| n <= RADIX_REACH));
            assert!(radix.before.len() <= 1 << RADIX_BITS.end());
            fitted += 1;
        }
        assert!(fitted > 0, "no table fitted");
    }

    #[test]
    fn radix_over_one_segment() {
        let pivots: Vec<u64> = (1..=1000).map(|i| i * 10).collect();
        let pla = PivotPla::fit(&pivots).expect("fits");
        assert_eq!(pla.segment_count(), 1);
        assert!(pla.radix.is_some());
        check(&pivots, (0..10_020).step_by(3).chain([u64::MAX]));
    }

    #[test]
    fn leaves_pivots_with_one_numeric_view_to_the_rmi() {
        // Byte strings sharing their first eight bytes have one numeric
        // view: each would be a segment of its own, level after level.
        let pivots: Vec<Vec<u8>> = (0..500)
            .map(|i| format!("https://example.com/{i:05}").into_bytes())
            .collect();
        assert!(PivotPla::fit(&pivots).is_none());
    }
}
