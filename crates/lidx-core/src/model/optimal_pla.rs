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
//! The cone itself is generic over its arithmetic and takes one vertical
//! interval per point; [`IntervalCone`] exposes it with exact `i128`
//! coordinates for callers whose intervals are not `rank ± eps` (AirIndex's
//! band layers).
//!
//! Coordinates are relative to the segment's first key and rank (exact
//! offsets for integer keys below 2^53 apart), in `f64`. Rounding can make
//! the construction imperfect on adversarial inputs, which is why the
//! reported [`Fitted::max_error`] is measured: it is at most `eps + 1` (and
//! in practice `eps`).

use super::Fitted;
use super::pla::{Pla, SegmentFitter, build_capped, build_with};
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

/// [`build`] for a caller that can use at most `max_segments` segments:
/// `Ok(None)` if the keys need more, found as soon as one more segment is
/// closed, so a failing attempt costs only the keys up to that point.
/// Otherwise the same model and error as [`build`]. The same errors too,
/// except that keys after the point where it gives up are not read: an
/// unsorted key there gives `Ok(None)`, not
/// [`Error::Unsorted`](crate::Error::Unsorted).
pub fn build_at_most<K: Key>(
    keys: &[K],
    eps: usize,
    max_segments: usize,
) -> Result<Option<Fitted<Pla<K>>>> {
    build_capped(keys, eps, max_segments, &mut Hull::new(eps as f64))
}

/// Arithmetic the cone runs on: `f64` for [`build`] (rounded, guarded by
/// the driver's measured error), or exact integers for [`IntervalCone`].
///
/// The cone only ever multiplies a `y` difference by a *positive* `x`
/// difference (a later point's `x` minus an earlier one's), and only
/// compares such products, so the exact flavour can keep `x` unsigned and
/// use one widening multiply per product.
trait Coord {
    type X: Copy + PartialOrd + Default + std::fmt::Debug;
    type Y: Copy + PartialOrd + Default + std::fmt::Debug;
    type Area: PartialOrd;
    /// `(y_b - y_a) * (x_d - x_c)` for `x_d > x_c`.
    fn area(y_a: Self::Y, y_b: Self::Y, x_c: Self::X, x_d: Self::X) -> Self::Area;
}

/// `f64` coordinates.
#[derive(Clone, Copy, Debug, Default)]
struct Float;

impl Coord for Float {
    type X = f64;
    type Y = f64;
    type Area = f64;
    #[inline(always)]
    fn area(y_a: f64, y_b: f64, x_c: f64, x_d: f64) -> f64 {
        (y_b - y_a) * (x_d - x_c)
    }
}

/// Exact coordinates: `u64` x, `i64` y with `|y| <= 2^61` (so `y`
/// differences fit an `i64`), products in `i128` (below 2^126).
#[derive(Clone, Copy, Debug, Default)]
struct Exact;

impl Coord for Exact {
    type X = u64;
    type Y = i64;
    type Area = i128;
    #[inline(always)]
    fn area(y_a: i64, y_b: i64, x_c: u64, x_d: u64) -> i128 {
        let dy = y_b - y_a;
        let p = (dy.unsigned_abs() as u128 * (x_d - x_c) as u128) as i128;
        if dy < 0 { -p } else { p }
    }
}

struct Pt<C: Coord> {
    x: C::X,
    y: C::Y,
}

impl<C: Coord> Clone for Pt<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: Coord> Copy for Pt<C> {}

impl<C: Coord> Default for Pt<C> {
    fn default() -> Self {
        Pt {
            x: C::X::default(),
            y: C::Y::default(),
        }
    }
}

impl<C: Coord> std::fmt::Debug for Pt<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({:?}, {:?})", self.x, self.y)
    }
}

/// `slope(a→b) < slope(c→d)` for `b.x > a.x` and `d.x > c.x`, without
/// dividing.
#[inline(always)]
fn slope_lt<C: Coord>(a: Pt<C>, b: Pt<C>, c: Pt<C>, d: Pt<C>) -> bool {
    C::area(a.y, b.y, c.x, d.x) < C::area(c.y, d.y, a.x, b.x)
}

/// Whether `o → a → b` (increasing `x`) turns clockwise or goes straight,
/// i.e. the z-component of `(a - o) × (b - o)` is `<= 0`. Written as a
/// comparison of two products rather than their difference so integer
/// coordinates only need each product to fit.
#[inline(always)]
fn turns_right_or_straight<C: Coord>(o: Pt<C>, a: Pt<C>, b: Pt<C>) -> bool {
    C::area(o.y, b.y, o.x, a.x) <= C::area(o.y, a.y, o.x, b.x)
}

/// Whether `o → a → b` (increasing `x`) turns counter-clockwise or goes
/// straight.
#[inline(always)]
fn turns_left_or_straight<C: Coord>(o: Pt<C>, a: Pt<C>, b: Pt<C>) -> bool {
    C::area(o.y, b.y, o.x, a.x) >= C::area(o.y, a.y, o.x, b.x)
}

/// Streaming feasibility state: the lines passing through every vertical
/// interval pushed so far.
#[derive(Clone, Debug)]
struct Cone<C: Coord> {
    /// Upper endpoints, as a lower convex chain.
    upper: Vec<Pt<C>>,
    /// Lower endpoints, as an upper convex chain.
    lower: Vec<Pt<C>>,
    upper_start: usize,
    lower_start: usize,
    /// Min-slope line through `rect[0]` (upper) and `rect[2]` (lower);
    /// max-slope line through `rect[1]` (lower) and `rect[3]` (upper).
    rect: [Pt<C>; 4],
    points: usize,
}

impl<C: Coord> Cone<C> {
    fn new() -> Self {
        Cone {
            upper: Vec::with_capacity(64),
            lower: Vec::with_capacity(64),
            upper_start: 0,
            lower_start: 0,
            rect: [Pt::default(); 4],
            points: 0,
        }
    }

    fn clear(&mut self) {
        self.upper.clear();
        self.lower.clear();
        self.upper_start = 0;
        self.lower_start = 0;
        self.points = 0;
    }

    /// Adds the interval `[lo, hi]` at `x`, which must exceed every `x`
    /// pushed before, and `lo <= hi`; `false` (state unchanged) if no line
    /// passes through it and all earlier intervals.
    #[inline]
    fn push(&mut self, x: C::X, lo: C::Y, hi: C::Y) -> bool {
        self.push_bounded::<true>(x, lo, hi)
    }

    /// [`push`](Self::push) of an interval that is bounded below only if
    /// `BELOW`: otherwise `lo` is a floor standing in for minus infinity
    /// while the cone has fewer than two points (so it must be below every
    /// line that matters), and the lower end is never tested afterwards.
    #[inline]
    fn push_bounded<const BELOW: bool>(&mut self, x: C::X, lo: C::Y, hi: C::Y) -> bool {
        let u = Pt { x, y: hi };
        let l = Pt { x, y: lo };
        if self.points < 2 {
            // One interval, or two at distinct x, always admit a line.
            if self.points == 0 {
                self.rect = [u, l, l, u];
            } else {
                self.rect[2] = l;
                self.rect[3] = u;
            }
            self.upper.push(u);
            self.lower.push(l);
            self.points += 1;
            return true;
        }
        let [r0, r1, r2, r3] = self.rect;
        // u below the min-slope line, or l above the max-slope line: no line
        // through every interval so far reaches this one.
        if slope_lt(r2, u, r0, r2) || (BELOW && slope_lt(r1, r3, r3, l)) {
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
                && turns_right_or_straight(self.upper[end - 2], self.upper[end - 1], u)
            {
                end -= 1;
            }
            self.upper.truncate(end);
            self.upper.push(u);
            pushed_u = true;
        }

        if BELOW && slope_lt(r0, r2, r0, l) {
            // l cuts the min-slope line: tangent from l to the upper chain.
            // The u just pushed sits at the same x (a vertical "slope"), so
            // it must not take part; with lo == hi it would compare as a tie.
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
                && turns_left_or_straight(self.lower[end - 2], self.lower[end - 1], l)
            {
                end -= 1;
            }
            self.lower.truncate(end);
            self.lower.push(l);
        }
        self.points += 1;
        true
    }
}

/// Streaming feasibility state of one PLA segment: intervals `y ± eps`.
struct Hull {
    eps: f64,
    cone: Cone<Float>,
}

impl Hull {
    fn new(eps: f64) -> Self {
        Hull {
            eps,
            cone: Cone::new(),
        }
    }
}

impl SegmentFitter for Hull {
    fn reset(&mut self) {
        self.cone.clear();
        self.cone.push(0.0, -self.eps, self.eps);
    }

    #[inline]
    fn add(&mut self, x: f64, y: f64) -> bool {
        self.cone.push(x, y - self.eps, y + self.eps)
    }

    fn line(&self) -> (f64, f64) {
        if self.cone.points < 2 {
            return (0.0, 0.0);
        }
        let [r0, r1, r2, r3] = self.cone.rect;
        let s_min = (r2.y - r0.y) / (r2.x - r0.x);
        let s_max = (r3.y - r1.y) / (r3.x - r1.x);
        let a_min = r0.y - s_min * r0.x;
        let a_max = r1.y - s_max * r1.x;
        ((s_min + s_max) / 2.0, (a_min + a_max) / 2.0)
    }
}

/// A line given by two points `(x, y)` it passes through, the first with
/// the smaller `x`.
pub type IntLine = ((u64, i64), (u64, i64));

/// Exact streaming test of whether one straight line passes through every
/// vertical interval `[lo, hi]` pushed so far (at strictly increasing `x`).
///
/// This is the same O'Rourke cone [`build`] uses for `rank ± eps`, with
/// per-point intervals and integer coordinates: every turn and slope test
/// compares two products of a `y` difference (below 2^62) and an `x`
/// difference (below 2^64), which are exact in `i128`. Pushing is
/// amortised O(1).
#[derive(Clone, Debug)]
pub struct IntervalCone {
    cone: Cone<Exact>,
    /// `x` of the last accepted interval.
    last_x: u64,
}

impl Default for IntervalCone {
    fn default() -> Self {
        Self::new()
    }
}

impl IntervalCone {
    /// Largest accepted `|lo|`, `|hi|`.
    pub const MAX_ABS_Y: i64 = 1 << 61;

    /// An empty cone (every line is feasible).
    pub fn new() -> Self {
        IntervalCone {
            cone: Cone::new(),
            last_x: 0,
        }
    }

    /// Forgets every interval, keeping the buffers.
    pub fn clear(&mut self) {
        self.cone.clear();
    }

    /// Number of intervals accepted since the last [`clear`](Self::clear).
    pub fn len(&self) -> usize {
        self.cone.points
    }

    /// Whether no interval has been accepted.
    pub fn is_empty(&self) -> bool {
        self.cone.points == 0
    }

    /// Adds the interval `[lo, hi]` at `x` if some line passes through it
    /// and every interval accepted before, returning whether it did; a
    /// refused interval leaves the cone unchanged. An empty interval
    /// (`lo > hi`) is always refused.
    ///
    /// `|lo|` or `|hi|` beyond [`MAX_ABS_Y`](Self::MAX_ABS_Y), or an `x`
    /// not above the previous accepted one, is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    #[inline]
    pub fn push(&mut self, x: u64, lo: i64, hi: i64) -> Result<bool> {
        self.check(x, lo, hi)?;
        if lo > hi || !self.cone.push(x, lo, hi) {
            return Ok(false);
        }
        self.last_x = x;
        Ok(true)
    }

    /// [`push`](Self::push) of the interval `(-infinity, hi]`: only an
    /// upper bound at `x`.
    #[inline]
    pub fn push_upper(&mut self, x: u64, hi: i64) -> Result<bool> {
        self.check(x, hi, hi)?;
        if !self.cone.push_bounded::<false>(x, -Self::MAX_ABS_Y, hi) {
            return Ok(false);
        }
        self.last_x = x;
        Ok(true)
    }

    #[inline(always)]
    fn check(&self, x: u64, lo: i64, hi: i64) -> Result<()> {
        let max_y = Self::MAX_ABS_Y.unsigned_abs();
        if lo.unsigned_abs() > max_y
            || hi.unsigned_abs() > max_y
            || (self.cone.points > 0 && x <= self.last_x)
        {
            return Err(self.rejection(x, lo, hi));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn rejection(&self, x: u64, lo: i64, hi: i64) -> crate::Error {
        if self.cone.points > 0 && x <= self.last_x {
            return crate::Error::invalid(format!(
                "interval x must increase: {x} after {}",
                self.last_x
            ));
        }
        crate::Error::invalid(format!(
            "interval [{lo}, {hi}] is outside the cone's exact range +-{}",
            Self::MAX_ABS_Y
        ))
    }

    /// The feasible lines of least and of greatest slope, each as two
    /// points it passes through; every line between them (e.g. their
    /// average) is feasible too. `None` until two intervals are accepted.
    ///
    /// Minus infinity is stood in for by `-MAX_ABS_Y`: if one of the first
    /// two intervals came from [`push_upper`](Self::push_upper), a line may
    /// pass through that floor until a later bounded interval lifts it.
    pub fn extreme_lines(&self) -> Option<(IntLine, IntLine)> {
        if self.cone.points < 2 {
            return None;
        }
        let [r0, r1, r2, r3] = self.cone.rect;
        Some((((r0.x, r0.y), (r2.x, r2.y)), ((r1.x, r1.y), (r3.x, r3.y))))
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

    /// Whether some line passes through every interval `(x, lo, hi)`, by
    /// Helly's theorem over triples (exact; inputs are small).
    fn intervals_feasible(pts: &[(i128, i128, i128)]) -> bool {
        let reach = |a: (i128, i128, i128), b: (i128, i128, i128), c: (i128, i128, i128)| {
            // Lines through intervals a and c reach, at b.x, from the
            // interpolation of their lower ends to that of their upper ends.
            let (wa, wc, w) = (c.0 - b.0, b.0 - a.0, c.0 - a.0);
            a.1 * wa + c.1 * wc <= b.2 * w && a.2 * wa + c.2 * wc >= b.1 * w
        };
        pts.iter().all(|p| p.1 <= p.2)
            && (0..pts.len()).all(|i| {
                (i + 1..pts.len())
                    .all(|j| (j + 1..pts.len()).all(|k| reach(pts[i], pts[j], pts[k])))
            })
    }

    fn line_fits(line: IntLine, pts: &[(i128, i128, i128)]) -> bool {
        let ((x0, y0), (x1, y1)) = line;
        let (x0, y0, x1, y1) = (x0 as i128, y0 as i128, x1 as i128, y1 as i128);
        pts.iter().all(|&(x, lo, hi)| {
            // y(x) * (x1 - x0) = y0 * (x1 - x0) + (x - x0) * (y1 - y0)
            let v = y0 * (x1 - x0) + (x - x0) * (y1 - y0);
            lo * (x1 - x0) <= v && v <= hi * (x1 - x0)
        })
    }

    #[test]
    fn interval_cone_rejects_bad_input() {
        let top = IntervalCone::MAX_ABS_Y;
        let mut c = IntervalCone::new();
        assert!(c.is_empty());
        assert!(!c.push(0, 5, 4).unwrap(), "empty interval");
        assert!(c.is_empty());
        assert!(c.push(0, 0, 4).unwrap());
        assert!(c.push(0, 0, 4).is_err(), "x must increase");
        assert!(c.push(5, top + 1, top + 2).is_err());
        assert!(c.push(5, i64::MIN, 0).is_err());
        assert!(c.extreme_lines().is_none());
        assert!(c.push(u64::MAX, -top, top).unwrap());
        assert_eq!(c.len(), 2);
        assert!(c.push(u64::MAX - 1, 0, 0).is_err());
        // Off by one at the far end of the range is still seen.
        // (1, -top), (2^63, 0), (2^64 - 1, top) are equally spaced.
        let half = 1u64 << 63;
        for (mid, feasible) in [(0, true), (1, false), (-1, false)] {
            c.clear();
            assert!(c.push(1, -top, -top).unwrap());
            assert!(c.push(half, mid, mid).unwrap());
            assert_eq!(c.push(u64::MAX, top, top).unwrap(), feasible);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(192))]

        #[test]
        fn interval_cone_matches_helly(
            raw in proptest::collection::vec((1i128..6, -20i128..20, 0i128..12, 0u8..4), 1..24),
        ) {
            let mut x = 0;
            let pts: Vec<(i128, i128, i128)> = raw
                .iter()
                .enumerate()
                .map(|(i, &(dx, lo, w, kind))| {
                    x += dx;
                    // After the first two, one point in four is bounded
                    // above only: its lower end is the cone's own stand-in
                    // for minus infinity.
                    let floor = -(IntervalCone::MAX_ABS_Y as i128);
                    let lo = if kind == 0 && i >= 2 { floor } else { lo + x * 2 };
                    (x, lo, lo.max(-20 + x * 2) + w)
                })
                .collect();
            let mut cone = IntervalCone::new();
            let mut accepted = 0;
            for &(x, lo, hi) in &pts {
                let pushed = if lo == -(IntervalCone::MAX_ABS_Y as i128) {
                    cone.push_upper(x as u64, hi as i64)
                } else {
                    cone.push(x as u64, lo as i64, hi as i64)
                };
                if !pushed.unwrap() {
                    break;
                }
                accepted += 1;
            }
            // Greedy prefix: accepted exactly as long as feasible.
            prop_assert!(intervals_feasible(&pts[..accepted]));
            if accepted < pts.len() {
                prop_assert!(!intervals_feasible(&pts[..=accepted]));
            }
            if let Some((min, max)) = cone.extreme_lines() {
                prop_assert!(line_fits(min, &pts[..accepted]));
                prop_assert!(line_fits(max, &pts[..accepted]));
            }
        }

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
        fn capped_build_is_the_build_or_none(
            keys in u64_keys(400),
            eps in 0usize..24,
            cap in 0usize..12,
        ) {
            let full = build(&keys, eps).unwrap();
            match build_at_most(&keys, eps, cap).unwrap() {
                Some(capped) => {
                    prop_assert!(full.model.len() <= cap);
                    prop_assert_eq!(capped.model.segments(), full.model.segments());
                    prop_assert_eq!(capped.max_error, full.max_error);
                }
                None => prop_assert!(full.model.len() > cap, "{} segments fit the cap {cap}", full.model.len()),
            }
        }

        #[test]
        fn capped_build_agrees_where_segments_split(
            mut v in proptest::collection::vec(
                prop_oneof![proptest::num::f64::NORMAL, Just(f64::INFINITY), Just(f64::NEG_INFINITY)], 0..200),
            eps in 0usize..8,
            cap in 0usize..20,
        ) {
            // Extreme offsets defeat the float fitter and exercise the
            // driver's split, which must stop at the cap too.
            let mut keys: Vec<F64Key> = v.drain(..).map(|x| F64Key::new(x).unwrap()).collect();
            keys.sort();
            let full = build(&keys, eps).unwrap();
            let capped = build_at_most(&keys, eps, cap).unwrap();
            prop_assert_eq!(capped.is_some(), full.model.len() <= cap);
            if let Some(capped) = capped {
                prop_assert_eq!(capped.model.segments(), full.model.segments());
            }
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
