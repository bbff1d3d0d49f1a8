//! Least-squares lines of many ranges of one sorted array, each in O(1)
//! after one O(n) pass over the array.
//!
//! A search for the fewest models meeting an error bound fits the same
//! keys many times: one to `m` equal shares of a range, then of its
//! halves when `m` do not fit. [`fit_least_squares`](super::linear::fit_least_squares) reads a share twice
//! per fit (its means, then its centred sums). Here one pass keeps prefix
//! sums of `x`, `x²` and `x·i` (`x` a key's offset from the array's first
//! key, `i` its position), and a fit of any range takes their
//! differences. What is left per fit is its error pass, which
//! a failing fit stops at the first key past the bound.
//!
//! # Precision
//!
//! The prefix sums are compensated (Neumaier): each stores its running
//! sum and the carry of its rounding errors, so the difference of two of
//! them is accurate to about the last bit of the *range's* sum, however
//! large the prefix. What remains is the cancellation inside one range:
//! `Σ(x - x̄)²` is `Σx² - x̄·Σx`, which loses about twice the bits of the
//! ratio of the range's distance from the array's first key to its
//! spread. A range where that leaves fewer than 22 bits (a tight cluster
//! far from the array's start), and every range of an array with
//! duplicate, unsorted or non-finite keys (or offsets whose squares
//! overflow), falls back to
//! [`fit_least_squares`](super::linear::fit_least_squares)'s own two-pass fit. Offsets are not scaled: keys
//! at integer offsets below 2^26 (squares below 2^53) sum exactly, so
//! evenly spaced keys get the exact line, as from the two-pass fit. Either
//! way the reported
//! error is measured on every key of the range, as the module docs of
//! [`model`](super) define it.

use super::linear::{CompensatedSum, LinearModel, fit_least_squares_within};
use super::{PositionModel, max_error_within_by};
use crate::error::Result;
use crate::key::Key;

/// A range sum must keep this many bits against its own cancellation.
const KEPT_BITS: i32 = 22;

/// Prefix sums over one sorted, distinct key array, for least-squares fits
/// of its ranges (see the module docs).
#[derive(Debug)]
pub struct RangeLeastSquares<'k, K> {
    keys: &'k [K],
    /// Whether fits use the sums; `false` when every fit falls back:
    /// duplicates, unsorted or non-finite keys, fewer than two keys.
    usable: bool,
    /// Prefix sums of `x`, `x²` and `x·i`: entry `j` sums the keys before
    /// position `j`.
    prefix: Vec<[CompensatedSum; 3]>,
}

impl<'k, K: Key> RangeLeastSquares<'k, K> {
    /// The prefix sums of `keys`, in one pass.
    pub fn new(keys: &'k [K]) -> Self {
        let mut fits = RangeLeastSquares {
            keys,
            usable: false,
            prefix: Vec::new(),
        };
        let Some(first) = keys.first() else {
            return fits;
        };
        if keys.len() < 2 {
            return fits;
        }
        let mut prefix = Vec::with_capacity(keys.len() + 1);
        let mut sums = [CompensatedSum::default(); 3];
        prefix.push(sums);
        for (i, key) in keys.iter().enumerate() {
            // Duplicate or unsorted keys: every fit falls back.
            if i > 0 && *key <= keys[i - 1] {
                return fits;
            }
            let x = key.offset_from(first);
            if !(x * x).is_finite() {
                return fits;
            }
            sums[0].add(x);
            sums[1].add(x * x);
            sums[2].add(x * i as f64);
            prefix.push(sums);
        }
        fits.usable = true;
        fits.prefix = prefix;
        fits
    }

    /// The keys the sums are over.
    pub fn keys(&self) -> &'k [K] {
        self.keys
    }

    /// The least-squares line of `keys[start..end]` (origin at its first
    /// key, positions relative to `start`) and its maximum error if that
    /// is at most `cap`, else `None`: what
    /// [`fit_least_squares_within`] gives for that slice, up to rounding
    /// (the line's parameters agree to about 22 bits or better, so an
    /// error can differ by one where a prediction lies at a rounding
    /// boundary).
    ///
    /// # Panics
    ///
    /// If `start..end` is not a range of the keys.
    pub fn fit_within(
        &self,
        start: usize,
        end: usize,
        cap: usize,
    ) -> Result<(LinearModel<K>, Option<usize>)> {
        let share = &self.keys[start..end];
        match self.line(start, end) {
            Some(model) => {
                let len = share.len();
                let error = max_error_within_by(share, cap, |k| model.predict_pos(k, len))?;
                Ok((model, error))
            }
            None => fit_least_squares_within(share, cap),
        }
    }

    /// The line of `keys[start..end]` from the prefix sums, or `None` where
    /// the two-pass fit must make it.
    fn line(&self, start: usize, end: usize) -> Option<LinearModel<K>> {
        if !self.usable {
            return None;
        }
        let len = end.checked_sub(start)?;
        // Two keys or fewer: the two-pass fit is as cheap and exact.
        if len < 3 {
            return None;
        }
        let n = len as f64;
        let range = |j: usize| range_sum(&self.prefix[start][j], &self.prefix[end][j]);
        let (sx, sxx, sxi) = (range(0), range(1), range(2));
        let mean_x = sx / n;
        // Σ(x - x̄)² and Σ(x - x̄)(i - ī), with Σi exact (below 2^53).
        let var_n = sxx - mean_x * sx;
        let sum_i = ((start + end - 1) as f64) * n / 2.0;
        let cov_n = sxi - mean_x * sum_i;
        let kept = |result: f64, operand: f64| result > operand * 2f64.powi(-KEPT_BITS);
        if !(kept(var_n, sxx) && kept(cov_n, sxi.abs())) {
            return None;
        }
        let slope = cov_n / var_n;
        let origin = &self.keys[start];
        let origin_x = origin.offset_from(&self.keys[0]);
        let mean_y = (n - 1.0) / 2.0;
        let intercept = mean_y - slope * (mean_x - origin_x);
        (slope.is_finite() && intercept.is_finite())
            .then(|| LinearModel::new(origin.clone(), slope, intercept))
    }
}

/// `to - from` of two compensated prefix sums: the sums' difference is
/// exact to its own last bit, the carries' difference corrects it.
#[inline]
fn range_sum(from: &CompensatedSum, to: &CompensatedSum) -> f64 {
    (to.sum - from.sum) + (to.carry - from.carry)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{repo_keyset, u64_keys};
    use super::*;
    use crate::F64Key;
    use crate::model::linear::fit_least_squares_within;
    use proptest::prelude::*;

    /// Checks the fit of `keys[start..end]` against the two-pass fit of
    /// the same slice: slopes within `2^-20` relative, errors within one,
    /// and (for a cap) the same verdict unless an error sits at the cap.
    fn check_range<K: Key>(fits: &RangeLeastSquares<'_, K>, start: usize, end: usize, cap: usize) {
        let share = &fits.keys()[start..end];
        let (model, error) = fits.fit_within(start, end, cap).unwrap();
        let (exact_model, exact_error) = fit_least_squares_within(share, cap).unwrap();
        let tolerance = exact_model.slope.abs() * 2f64.powi(-20) + f64::MIN_POSITIVE;
        assert!(
            (model.slope - exact_model.slope).abs() <= tolerance,
            "{start}..{end}: slope {} vs {}",
            model.slope,
            exact_model.slope
        );
        match (error, exact_error) {
            (Some(a), Some(b)) => assert!(a.abs_diff(b) <= 1, "{start}..{end}: {a} vs {b}"),
            (None, Some(b)) => assert!(b + 1 >= cap, "{start}..{end}: None vs {b}"),
            (Some(a), None) => assert!(a + 1 >= cap, "{start}..{end}: {a} vs None"),
            (None, None) => {}
        }
    }

    fn distinct(mut keys: Vec<u64>) -> Vec<u64> {
        keys.dedup();
        keys
    }

    #[test]
    fn tiny_and_degenerate_arrays_fall_back_to_the_two_pass_fit() {
        for keys in [vec![], vec![7u64], vec![3, 9], vec![0, u64::MAX]] {
            let fits = RangeLeastSquares::new(&keys);
            for start in 0..=keys.len() {
                for end in start..=keys.len() {
                    let got = fits.fit_within(start, end, 100).unwrap();
                    let want = fit_least_squares_within(&keys[start..end], 100).unwrap();
                    assert_eq!(got, want, "{keys:?} {start}..{end}");
                }
            }
        }
    }

    #[test]
    fn evenly_spaced_keys_get_the_exact_line() {
        // Sums of small integer offsets are exact: the line is the two-pass
        // fit's to the bit (a tail extrapolating it at error 0 relies on it).
        let keys: Vec<u64> = (0..100u64).map(|i| 1_000 + i * 10).collect();
        let fits = RangeLeastSquares::new(&keys);
        for (start, end) in [(0, 100), (0, 50), (37, 91)] {
            let got = fits.fit_within(start, end, 0).unwrap();
            assert_eq!(got, fit_least_squares_within(&keys[start..end], 0).unwrap());
            assert_eq!(got.0.slope, 0.1);
        }
    }

    #[test]
    fn duplicates_and_unsorted_keys_get_what_the_two_pass_fit_gives() {
        let dup = vec![1u64, 5, 5, 5, 9, 12, 12, 40];
        let fits = RangeLeastSquares::new(&dup);
        for (start, end) in [(0, 8), (1, 5), (2, 7)] {
            let got = fits.fit_within(start, end, 3).unwrap();
            let want = fit_least_squares_within(&dup[start..end], 3).unwrap();
            assert_eq!(got, want);
        }
        let unsorted = vec![1u64, 5, 3, 9, 12];
        let fits = RangeLeastSquares::new(&unsorted);
        assert_eq!(
            fits.fit_within(0, 5, 3).unwrap_err().to_string(),
            fit_least_squares_within(&unsorted, 3)
                .unwrap_err()
                .to_string()
        );
    }

    #[test]
    fn infinite_float_keys_fall_back() {
        let keys: Vec<F64Key> = [f64::NEG_INFINITY, -1.0, 0.0, 2.5, 7.0, f64::INFINITY]
            .into_iter()
            .map(|v| F64Key::new(v).unwrap())
            .collect();
        let fits = RangeLeastSquares::new(&keys);
        for (start, end) in [(0, 6), (1, 5), (2, 6)] {
            let got = fits.fit_within(start, end, 2).unwrap();
            let want = fit_least_squares_within(&keys[start..end], 2).unwrap();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn a_tight_cluster_far_from_the_start_stays_exact() {
        // Offsets near 2^62 with a spread of a few thousand: the one-pass
        // variance would cancel every bit; the fit must fall back (or keep
        // enough bits) and agree with the two-pass one.
        let mut keys = vec![0u64, 1, 2];
        keys.extend((0..3000u64).map(|i| (1 << 62) + i * 8 + (i % 7)));
        keys.push(u64::MAX);
        let fits = RangeLeastSquares::new(&keys);
        for (start, end) in [
            (3, 3003),
            (100, 200),
            (3, 40),
            (0, keys.len()),
            (2990, 3004),
        ] {
            check_range(&fits, start, end, 8);
        }
    }

    #[test]
    fn real_key_sets_agree_with_the_two_pass_fit() {
        for name in ["geopointdb_s2cellids_uint64", "tor_geoip_ipv4_uint64"] {
            let Some(keys) = repo_keyset(name) else {
                continue;
            };
            let keys = distinct(keys);
            let (mut ranges, mut from_sums) = (0, 0);
            for chunk in keys.chunks(2048).take(40) {
                let fits = RangeLeastSquares::new(chunk);
                let n = chunk.len();
                for count in 1..=4 {
                    for i in 0..count {
                        let (start, end) = (i * n / count, (i + 1) * n / count);
                        check_range(&fits, start, end, 32);
                        ranges += 1;
                        from_sums += usize::from(fits.line(start, end).is_some());
                    }
                }
            }
            // The point of the sums: real keys rarely need the fallback.
            assert!(
                from_sums * 10 >= ranges * 9,
                "{name}: {from_sums} of {ranges}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn every_range_agrees_with_the_two_pass_fit(
            keys in u64_keys(400).prop_map(distinct),
            picks in proptest::collection::vec((any::<usize>(), any::<usize>()), 1..8),
            cap in 0usize..64,
        ) {
            let fits = RangeLeastSquares::new(&keys);
            for (a, b) in picks {
                let n = keys.len() + 1;
                let (start, end) = ((a % n).min(b % n), (a % n).max(b % n));
                check_range(&fits, start, end, cap);
            }
        }
    }
}
