//! The optimal piecewise-linear model for a maximum error `eps`: the fewest
//! segments such that every key's predicted position lies within `eps` of
//! its first-occurrence rank. This is the PGM-index construction.
//!
//! # Algorithm
//!
//! Each distinct key `x` with rank `y` asks for a line passing through the
//! vertical segment `[y - eps, y + eps]`. Segments are grown greedily, which
//! is optimal because feasibility is monotone in the set of points. Whether
//! a new point keeps the set feasible is decided in amortised O(1) with
//! O'Rourke's streaming algorithm: the feasible lines are bracketed by a
//! minimum-slope and a maximum-slope line, each touching one upper and one
//! lower endpoint; the upper endpoints are kept as a lower convex chain and
//! the lower endpoints as an upper convex chain, so a new point only needs a
//! tangent search from the chains' current starts (which only move forward)
//! and a monotone-chain push. The emitted line is the average of the two
//! extreme lines, which lies in the convex set of feasible lines.
//!
//! Coordinates are relative to the segment's first key and rank (exact
//! offsets for integer keys below 2^53 apart), in `f64`. Rounding can make
//! the construction imperfect on adversarial inputs, which is why the
//! reported [`Fitted::max_error`] is measured: it is at most `eps + 1` (and
//! in practice `eps`).

use super::Fitted;
use super::pla::{Pla, SegmentFitter, build_with};
use crate::error::Result;
use crate::key::Key;

/// Builds the optimal PLA of the sorted `keys` (duplicates allowed) with
/// error bound `eps`, in one O(n) pass.
///
/// `eps` may be 0; values above [`MAX_EPS`](super::MAX_EPS) are
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument), unsorted keys
/// [`Error::Unsorted`](crate::Error::Unsorted). No keys gives an empty model.
pub fn build<K: Key>(keys: &[K], eps: usize) -> Result<Fitted<Pla<K>>> {
    build_with(keys, eps, &mut Hull::new(eps as f64))
}

#[derive(Clone, Copy, Debug, Default)]
struct Pt {
    x: f64,
    y: f64,
}

/// `slope(a→b) < slope(c→d)` for `b.x > a.x` and `d.x > c.x`, without
/// dividing.
#[inline(always)]
fn slope_lt(a: Pt, b: Pt, c: Pt, d: Pt) -> bool {
    (b.y - a.y) * (d.x - c.x) < (d.y - c.y) * (b.x - a.x)
}

/// z-component of `(a - o) × (b - o)`: positive for a left turn.
#[inline(always)]
fn cross(o: Pt, a: Pt, b: Pt) -> f64 {
    (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x)
}

/// Streaming feasibility state of one segment.
struct Hull {
    eps: f64,
    /// Upper endpoints `(x, y + eps)`, as a lower convex chain.
    upper: Vec<Pt>,
    /// Lower endpoints `(x, y - eps)`, as an upper convex chain.
    lower: Vec<Pt>,
    upper_start: usize,
    lower_start: usize,
    /// Min-slope line through `rect[0]` (upper) and `rect[2]` (lower);
    /// max-slope line through `rect[1]` (lower) and `rect[3]` (upper).
    rect: [Pt; 4],
    points: usize,
}

impl Hull {
    fn new(eps: f64) -> Self {
        Hull {
            eps,
            upper: Vec::with_capacity(64),
            lower: Vec::with_capacity(64),
            upper_start: 0,
            lower_start: 0,
            rect: [Pt::default(); 4],
            points: 0,
        }
    }
}

impl SegmentFitter for Hull {
    fn reset(&mut self) {
        self.upper.clear();
        self.lower.clear();
        self.upper_start = 0;
        self.lower_start = 0;
        let u = Pt {
            x: 0.0,
            y: self.eps,
        };
        let l = Pt {
            x: 0.0,
            y: -self.eps,
        };
        self.rect = [u, l, l, u];
        self.upper.push(u);
        self.lower.push(l);
        self.points = 1;
    }

    #[inline]
    fn add(&mut self, x: f64, y: f64) -> bool {
        let u = Pt { x, y: y + self.eps };
        let l = Pt { x, y: y - self.eps };
        if self.points == 1 {
            self.rect[2] = l;
            self.rect[3] = u;
            self.upper.push(u);
            self.lower.push(l);
            self.points = 2;
            return true;
        }
        let [r0, r1, r2, r3] = self.rect;
        // u below the min-slope line, or l above the max-slope line: no line
        // through every segment so far reaches this one.
        if slope_lt(r2, u, r0, r2) || slope_lt(r1, r3, r3, l) {
            return false;
        }

        let mut pushed_u = false;
        if slope_lt(r1, u, r1, r3) {
            // u cuts the max-slope line: the new one is tangent from u to
            // the lower chain.
            let mut best = self.lower_start;
            for i in self.lower_start + 1..self.lower.len() {
                if slope_lt(self.lower[best], u, self.lower[i], u) {
                    break;
                }
                best = i;
            }
            self.rect[1] = self.lower[best];
            self.rect[3] = u;
            self.lower_start = best;

            let mut end = self.upper.len();
            while end >= self.upper_start + 2
                && cross(self.upper[end - 2], self.upper[end - 1], u) <= 0.0
            {
                end -= 1;
            }
            self.upper.truncate(end);
            self.upper.push(u);
            pushed_u = true;
        }

        if slope_lt(r0, r2, r0, l) {
            // l cuts the min-slope line: tangent from l to the upper chain.
            // The u just pushed sits at the same x (a vertical "slope"), so
            // it must not take part; with eps = 0 it would compare as a tie.
            let limit = self.upper.len() - usize::from(pushed_u);
            let mut best = self.upper_start;
            for i in self.upper_start + 1..limit {
                if slope_lt(self.upper[i], l, self.upper[best], l) {
                    break;
                }
                best = i;
            }
            self.rect[0] = self.upper[best];
            self.rect[2] = l;
            self.upper_start = best;

            let mut end = self.lower.len();
            while end >= self.lower_start + 2
                && cross(self.lower[end - 2], self.lower[end - 1], l) >= 0.0
            {
                end -= 1;
            }
            self.lower.truncate(end);
            self.lower.push(l);
        }
        self.points += 1;
        true
    }

    fn line(&self) -> (f64, f64) {
        if self.points < 2 {
            return (0.0, 0.0);
        }
        let [r0, r1, r2, r3] = self.rect;
        let s_min = (r2.y - r0.y) / (r2.x - r0.x);
        let s_max = (r3.y - r1.y) / (r3.x - r1.x);
        let a_min = r0.y - s_min * r0.x;
        let a_max = r1.y - s_max * r1.x;
        ((s_min + s_max) / 2.0, (a_min + a_max) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{repo_keyset, u64_keys};
    use super::super::{PositionModel, greedy_pla, max_error};
    use super::*;
    use crate::{Error, F64Key};
    use proptest::prelude::*;

    /// Per-key oracle: binary search for the segment and for the target.
    fn oracle<K: Key>(pla: &Pla<K>, keys: &[K]) -> usize {
        keys.iter()
            .map(|k| {
                pla.predict_pos(k, keys.len())
                    .abs_diff(keys.partition_point(|x| x < k))
            })
            .max()
            .unwrap_or(0)
    }

    fn check<K: Key>(keys: &[K], eps: usize) -> Fitted<Pla<K>> {
        let f = build(keys, eps).unwrap();
        assert_eq!(f.max_error, oracle(&f.model, keys), "reported != measured");
        assert_eq!(f.max_error, max_error(&f.model, keys).unwrap());
        assert!(
            f.max_error <= eps + 1,
            "error {} > eps+1 = {}",
            f.max_error,
            eps + 1
        );
        assert!(
            f.model
                .segments()
                .iter()
                .all(|s| s.slope.is_finite() && s.intercept.is_finite())
        );
        f
    }

    #[test]
    fn small_and_degenerate_inputs() {
        let f = check::<u64>(&[], 4);
        assert!(f.model.is_empty());
        assert_eq!(f.model.predict(&9), 0.0);
        assert_eq!(check(&[5u64], 0).model.len(), 1);
        assert_eq!(check(&[5u64, 9], 0).model.len(), 1);
        assert_eq!(check(&[5u64; 50], 0).model.len(), 1);
        assert_eq!(check(&[0u64, u64::MAX], 0).model.len(), 1);
        check(&[0u64, 1, 2, u64::MAX - 2, u64::MAX - 1, u64::MAX], 0);
        check(&[0u64, 1, 2, u64::MAX - 2, u64::MAX - 1, u64::MAX], 1);
    }

    #[test]
    fn invalid_eps_and_unsorted() {
        assert!(matches!(
            build(&[1u64, 2], super::super::MAX_EPS + 1),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            build(&[1u64, 2, 0], 8),
            Err(Error::Unsorted { index: 2 })
        ));
    }

    #[test]
    fn collinear_keys_need_one_segment_even_with_eps_zero() {
        let keys: Vec<u64> = (0..10_000u64).map(|i| u64::MAX - 70_000 + 7 * i).collect();
        let f = check(&keys, 0);
        assert_eq!((f.model.len(), f.max_error), (1, 0));
    }

    #[test]
    fn two_lines_give_two_segments() {
        let mut keys: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        keys.extend((0..1000).map(|i| 1_000_000 + i * 1000));
        let f = check(&keys, 0);
        assert_eq!(f.model.len(), 2);
        assert_eq!(f.model.segments()[1].origin, 1_000_000);
    }

    #[test]
    fn duplicates_map_to_first_occurrence() {
        let keys = [1u64, 1, 1, 1, 2, 3, 3, 3, 3, 3, 4, 10, 10];
        for eps in 0..4 {
            let f = check(&keys, eps);
            assert!(f.model.predict_pos(&3, keys.len()).abs_diff(5) <= f.max_error);
        }
    }

    #[test]
    fn f64_keys_with_infinities_and_tiny_gaps() {
        let vals = [
            f64::NEG_INFINITY,
            -1e300,
            -1.0,
            0.0,
            1e-300,
            0.5,
            0.5 + f64::EPSILON,
            1e300,
            f64::INFINITY,
        ];
        let keys: Vec<F64Key> = vals.iter().map(|&v| F64Key::new(v).unwrap()).collect();
        for eps in [0, 1, 4] {
            check(&keys, eps);
        }
    }

    #[test]
    fn byte_keys_sharing_prefixes() {
        let mut keys: Vec<Vec<u8>> = (0..300u32)
            .map(|i| format!("common-prefix-{i:05}").into_bytes())
            .collect();
        keys.extend((0..300u32).map(|i| i.to_be_bytes().to_vec()));
        keys.sort();
        for eps in [0, 2, 16] {
            check(&keys, eps);
        }
    }

    #[test]
    fn real_keyset_if_present() {
        let Some(keys) = repo_keyset("geopointdb_s2cellids_uint64") else {
            return;
        };
        for eps in [0, 8, 64] {
            let opt = check(&keys, eps);
            let greedy = greedy_pla::build(&keys, eps).unwrap();
            assert!(opt.model.len() <= greedy.model.len());
            assert!(opt.max_error <= eps + 1);
        }
    }

    /// Minimum segment count by brute force in exact integer arithmetic:
    /// a set of intervals admits a line iff every three do (Helly's theorem
    /// in the plane of line parameters), and extending each segment as far
    /// as possible is optimal because feasibility is closed under subsets.
    fn exact_min_segments(keys: &[u64], eps: usize) -> usize {
        let e = eps as i128;
        let mut pts: Vec<(i128, i128)> = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            if i == 0 || k != keys[i - 1] {
                pts.push((k as i128, i as i128));
            }
        }
        let feasible3 = |(x1, y1): (i128, i128), (x2, y2): (i128, i128), (x3, y3): (i128, i128)| {
            // Lines through intervals 1 and 3 reach, at x2, exactly the
            // interpolation of their lower ends up to that of their upper ends.
            let (w1, w3, w) = (x3 - x2, x2 - x1, x3 - x1);
            (y1 - e) * w1 + (y3 - e) * w3 <= (y2 + e) * w
                && (y1 + e) * w1 + (y3 + e) * w3 >= (y2 - e) * w
        };
        let (mut segments, mut i) = (0, 0);
        while i < pts.len() {
            segments += 1;
            let mut j = i + 1;
            'extend: while j < pts.len() {
                for p in i..j {
                    for q in p + 1..j {
                        if !feasible3(pts[p], pts[q], pts[j]) {
                            break 'extend;
                        }
                    }
                }
                j += 1;
            }
            i = j;
        }
        segments
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(192))]

        #[test]
        fn segment_count_is_optimal(
            mut keys in prop_oneof![
                proptest::collection::vec(0u64..1 << 30, 0..40),
                proptest::collection::vec(0u64..120, 0..40),
            ],
            eps in 0usize..6,
        ) {
            keys.sort_unstable();
            let f = check(&keys, eps);
            prop_assert_eq!(f.model.len(), exact_min_segments(&keys, eps));
            // Offsets and ranks are exact here, so rounding cannot cost a position.
            prop_assert!(f.max_error <= eps);
        }

        #[test]
        fn error_bounded_u64(keys in u64_keys(400), eps in prop_oneof![0usize..4, 4usize..64]) {
            check(&keys, eps);
        }

        #[test]
        fn never_more_segments_than_greedy(keys in u64_keys(400), eps in 0usize..32) {
            let opt = check(&keys, eps);
            let greedy = greedy_pla::build(&keys, eps).unwrap();
            prop_assert!(opt.model.len() <= greedy.model.len(),
                "optimal {} > greedy {}", opt.model.len(), greedy.model.len());
        }

        #[test]
        fn error_bounded_i64(mut keys in proptest::collection::vec(any::<i64>(), 0..300), eps in 0usize..16) {
            keys.sort_unstable();
            check(&keys, eps);
        }

        #[test]
        fn error_bounded_f64(mut v in proptest::collection::vec(
            prop_oneof![proptest::num::f64::NORMAL, Just(f64::INFINITY), Just(f64::NEG_INFINITY), -1e3..1e3f64], 0..300),
            eps in 0usize..16,
        ) {
            let mut keys: Vec<F64Key> = v.drain(..).map(|x| F64Key::new(x).unwrap()).collect();
            keys.sort();
            check(&keys, eps);
        }

        #[test]
        fn error_bounded_bytes(mut keys in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..12), 0..300), eps in 0usize..16,
        ) {
            keys.sort();
            check(&keys, eps);
        }
    }
}
