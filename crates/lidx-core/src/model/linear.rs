//! A single line anchored at an origin key, and its least-squares fit.

use std::cmp::Ordering;

use super::{Fitted, PositionModel};
use crate::error::{Error, Result};
use crate::key::Key;

/// `predict(key) = intercept + slope * key.offset_from(&origin)`.
///
/// Anchoring at an origin key keeps the regression variable small: for
/// `u64` keys near 2^64 the offset is exact below 2^53 while the raw
/// `to_f64` view could not tell neighbours apart.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearModel<K> {
    /// Key at which the line takes the value `intercept`.
    pub origin: K,
    /// Positions per unit of key offset.
    pub slope: f64,
    /// Predicted position of `origin`.
    pub intercept: f64,
}

impl<K: Key> LinearModel<K> {
    /// A line with the given parameters.
    pub fn new(origin: K, slope: f64, intercept: f64) -> Self {
        LinearModel {
            origin,
            slope,
            intercept,
        }
    }

    /// A constant model predicting `value` everywhere.
    pub fn constant(origin: K, value: f64) -> Self {
        LinearModel::new(origin, 0.0, value)
    }

    /// The line through `(k0, y0)` and `(k1, y1)`, anchored at `k0`.
    ///
    /// When the keys coincide in the numeric view (or their offset is not
    /// finite) the line degenerates to the constant `y0`.
    pub fn through_points(k0: &K, y0: f64, k1: &K, y1: f64) -> Self {
        let dx = k1.offset_from(k0);
        let slope = if dx != 0.0 && dx.is_finite() {
            (y1 - y0) / dx
        } else {
            0.0
        };
        let slope = if slope.is_finite() { slope } else { 0.0 };
        LinearModel::new(k0.clone(), slope, y0)
    }

    /// The line's value at `x = key.offset_from(&origin)`.
    ///
    /// Exposed so hot loops that already know the offset do not recompute
    /// it; `predict(k) == predict_offset(k.offset_from(&origin))` always.
    #[inline]
    pub fn predict_offset(&self, x: f64) -> f64 {
        let v = self.intercept + self.slope * x;
        // NaN only arises from 0 * inf (flat line, infinite offset) or from
        // inf - inf (the key *is* an infinite origin); both mean "at the
        // origin's value".
        if v.is_nan() { self.intercept } else { v }
    }
}

impl<K: Key> PositionModel<K> for LinearModel<K> {
    #[inline]
    fn predict(&self, key: &K) -> f64 {
        self.predict_offset(key.offset_from(&self.origin))
    }
}

/// Neumaier's compensated sum: error independent of the number of terms.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct CompensatedSum {
    pub(crate) sum: f64,
    pub(crate) carry: f64,
}

impl CompensatedSum {
    #[inline]
    pub(crate) fn add(&mut self, v: f64) {
        let t = self.sum + v;
        if self.sum.abs() >= v.abs() {
            self.carry += (self.sum - t) + v;
        } else {
            self.carry += (v - t) + self.sum;
        }
        self.sum = t;
    }

    fn value(self) -> f64 {
        self.sum + self.carry
    }
}

/// Least-squares line from key to first-occurrence position.
///
/// `keys` must be sorted ascending (duplicates allowed) or the result is
/// [`Error::Unsorted`]. The fit is numerically careful: offsets are taken
/// from the first key with a finite numeric view, scaled to `[0, 1]` by
/// the key range, and the two-pass centred sums use compensated summation,
/// so keys near `u64::MAX`, ranges spanning `0..=u64::MAX` and millions of
/// keys all behave.
///
/// Degenerate inputs: no keys gives a model predicting 0 with
/// `max_error == 0` (there is nothing to be wrong about); keys that all
/// coincide in the numeric view give the constant mean position. Keys whose
/// offset is not finite (e.g. infinite [`F64Key`](crate::F64Key)s) take no
/// part in the fit; the reported error still covers them.
pub fn fit_least_squares<K: Key>(keys: &[K]) -> Result<Fitted<LinearModel<K>>> {
    let model = least_squares_line(keys)?;
    let max_error = model.max_error(keys)?;
    Ok(Fitted { model, max_error })
}

/// [`fit_least_squares`] for a caller that can use the model only if its
/// error is at most `cap` (a search for the fewest models meeting a bound
/// discards the rest): the same model, with its maximum error if that is
/// at most `cap`, else `None`, found at the first key further off (the
/// rest of the error pass is skipped). The same errors too: sortedness is
/// checked on every key while fitting.
pub fn fit_least_squares_within<K: Key>(
    keys: &[K],
    cap: usize,
) -> Result<(LinearModel<K>, Option<usize>)> {
    let model = least_squares_line(keys)?;
    let len = keys.len();
    let max_error = super::max_error_within_by(keys, cap, |key| model.predict_pos(key, len))?;
    Ok((model, max_error))
}

/// The line of [`fit_least_squares`], without its error.
fn least_squares_line<K: Key>(keys: &[K]) -> Result<LinearModel<K>> {
    let Some(first) = keys.first() else {
        return Ok(LinearModel::constant(empty_origin()?, 0.0));
    };
    let origin = keys
        .iter()
        .find(|k| k.to_f64().is_finite())
        .unwrap_or(first)
        .clone();

    // Pass 1: sortedness, range and means.
    let (mut sx, mut sy) = (CompensatedSum::default(), CompensatedSum::default());
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut count = 0usize;
    let mut target = 0usize;
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            match key.cmp(&keys[i - 1]) {
                Ordering::Less => return Err(Error::Unsorted { index: i }),
                Ordering::Greater => target = i,
                Ordering::Equal => {}
            }
        }
        let x = key.offset_from(&origin);
        if x.is_finite() {
            sx.add(x);
            sy.add(target as f64);
            lo = lo.min(x);
            hi = hi.max(x);
            count += 1;
        }
    }
    Ok(if count == 0 {
        LinearModel::constant(origin, 0.0)
    } else {
        let scale = hi - lo;
        let mean_y = sy.value() / count as f64;
        if !(scale > 0.0 && scale.is_finite()) {
            LinearModel::constant(origin, mean_y)
        } else {
            // Scaled offsets u = x / scale lie in [-1, 1]: squares cannot
            // overflow even when the raw offsets are ~1.8e19 or larger.
            let mean_u = sx.value() / count as f64 / scale;
            let (mut suu, mut suy) = (CompensatedSum::default(), CompensatedSum::default());
            let mut target = 0usize;
            for (i, key) in keys.iter().enumerate() {
                if i > 0 && key != &keys[i - 1] {
                    target = i;
                }
                let x = key.offset_from(&origin);
                if x.is_finite() {
                    let du = x / scale - mean_u;
                    suu.add(du * du);
                    suy.add(du * (target as f64 - mean_y));
                }
            }
            let slope_u = suy.value() / suu.value();
            if slope_u.is_finite() {
                LinearModel::new(origin, slope_u / scale, mean_y - slope_u * mean_u)
            } else {
                LinearModel::constant(origin, mean_y)
            }
        }
    })
}

/// An origin for a model trained on nothing: the key whose encoding is all
/// zero bytes (0, 0.0 or the empty byte string), the only value every key
/// type can produce without an example. A [`Key`] implementation whose
/// [`decode_le`](Key::decode_le) rejects that encoding gets the error here,
/// and every fit over no keys fails with it; engines that may fit empty
/// key sets check it once, up front.
pub fn empty_origin<K: Key>() -> Result<K> {
    // Fixed-width keys decode from zero bytes (0 / 0.0); byte strings from a
    // zero length prefix (the empty string).
    let buf = vec![0u8; K::ENCODED_WIDTH.unwrap_or(4)];
    K::decode_le(&buf).map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{repo_keyset, u64_keys};
    use super::*;
    use crate::F64Key;
    use crate::model::max_error;
    use proptest::prelude::*;

    fn oracle<K: Key>(m: &LinearModel<K>, keys: &[K]) -> usize {
        let n = keys.len();
        keys.iter()
            .map(|k| {
                let target = keys.partition_point(|x| x < k);
                m.predict_pos(k, n).abs_diff(target)
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn empty_one_two_and_equal_keys() {
        let f = fit_least_squares::<u64>(&[]).unwrap();
        assert_eq!(f.max_error, 0);
        assert_eq!(f.model.predict(&12345), 0.0);
        let f = fit_least_squares::<Vec<u8>>(&[]).unwrap();
        assert_eq!(f.model.predict(&b"abc".to_vec()), 0.0);

        let f = fit_least_squares(&[42u64]).unwrap();
        assert_eq!((f.max_error, f.model.predict_pos(&42, 1)), (0, 0));

        let f = fit_least_squares(&[3u64, u64::MAX]).unwrap();
        assert_eq!(f.max_error, 0);
        assert!((f.model.predict(&u64::MAX) - 1.0).abs() < 1e-9);

        let f = fit_least_squares(&[7u64; 100]).unwrap();
        assert_eq!(f.model.slope, 0.0);
        assert_eq!(f.max_error, 0);
    }

    #[test]
    fn exact_on_dense_keys_near_u64_max() {
        let keys: Vec<u64> = (0..10_000u64).map(|i| u64::MAX - 20_000 + 2 * i).collect();
        let f = fit_least_squares(&keys).unwrap();
        assert_eq!(f.max_error, 0);
        assert!((f.model.slope - 0.5).abs() < 1e-12);
    }

    #[test]
    fn huge_gap_keys() {
        let keys = [0u64, 1, 2, u64::MAX - 1, u64::MAX];
        let f = fit_least_squares(&keys).unwrap();
        assert_eq!(f.max_error, oracle(&f.model, &keys));
        assert!(f.max_error <= 2);
    }

    #[test]
    fn keys_a_few_ulps_apart_are_fitted_and_measured() {
        // Offsets of subnormal size: the line through positions 0..5 over
        // a range of 2e-323 is steeper than any f64, and its error is
        // still measured exactly.
        let tiny: Vec<F64Key> = [0.0, 5e-324, 1e-323, 1.5e-323, 2e-323]
            .into_iter()
            .map(|x| F64Key::new(x).unwrap())
            .collect();
        let f = fit_least_squares(&tiny).unwrap();
        assert_eq!(f.model.slope, f64::INFINITY);
        assert_eq!(f.max_error, oracle(&f.model, &tiny));
        let (model, error) = fit_least_squares_within(&tiny, 8).unwrap();
        assert_eq!(model.slope, f64::INFINITY);
        assert_eq!(error, Some(f.max_error));
    }

    #[test]
    fn unsorted_is_an_error() {
        assert!(matches!(
            fit_least_squares(&[1u64, 3, 2]),
            Err(Error::Unsorted { index: 2 })
        ));
        // Also past the key where the error pass would give up: sortedness
        // is checked while fitting.
        let late = [0u64, 1, 2, 1000, 4, 5];
        assert!(matches!(
            fit_least_squares_within(&late, 0),
            Err(Error::Unsorted { index: 4 })
        ));
    }

    #[test]
    fn through_points_and_degenerate() {
        let m = LinearModel::through_points(&10u64, 5.0, &20u64, 10.0);
        assert_eq!(m.predict(&30), 15.0);
        let m = LinearModel::through_points(&10u64, 5.0, &10u64, 10.0);
        assert_eq!((m.slope, m.predict(&99)), (0.0, 5.0));
        let inf = F64Key::new(f64::INFINITY).unwrap();
        let m = LinearModel::through_points(&inf, 3.0, &inf, 4.0);
        assert_eq!(m.predict(&inf), 3.0);
    }

    #[test]
    fn f64_keys_with_infinities() {
        let keys: Vec<F64Key> = [f64::NEG_INFINITY, -1.0, 0.0, 0.5, 2.0, 1e300, f64::INFINITY]
            .into_iter()
            .map(|v| F64Key::new(v).unwrap())
            .collect();
        let f = fit_least_squares(&keys).unwrap();
        assert_eq!(f.max_error, oracle(&f.model, &keys));
        assert!(f.model.slope.is_finite() && f.model.intercept.is_finite());
    }

    #[test]
    fn real_keyset_if_present() {
        let Some(keys) = repo_keyset("geopointdb_s2cellids_uint64") else {
            return;
        };
        let f = fit_least_squares(&keys).unwrap();
        assert_eq!(f.max_error, oracle(&f.model, &keys));
        assert!(f.max_error < keys.len());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn reported_error_is_exact_u64(keys in u64_keys(300)) {
            let f = fit_least_squares(&keys).unwrap();
            prop_assert_eq!(f.max_error, oracle(&f.model, &keys));
            prop_assert_eq!(f.max_error, max_error(&f.model, &keys).unwrap());
            prop_assert!(f.model.slope.is_finite() && f.model.intercept.is_finite());
        }

        #[test]
        fn perfect_on_arithmetic_progressions(start: u64, step in 1u64..1 << 40, n in 2usize..500) {
            let keys: Vec<u64> = (0..n as u64)
                .map_while(|i| start.checked_add(i.checked_mul(step)?))
                .collect();
            let f = fit_least_squares(&keys).unwrap();
            prop_assert_eq!(f.max_error, 0);
        }

        #[test]
        fn reported_error_is_exact_i64(mut keys in proptest::collection::vec(any::<i64>(), 0..200)) {
            keys.sort_unstable();
            let f = fit_least_squares(&keys).unwrap();
            prop_assert_eq!(f.max_error, oracle(&f.model, &keys));
        }

        #[test]
        fn reported_error_is_exact_f64(mut v in proptest::collection::vec(
            prop_oneof![proptest::num::f64::NORMAL, Just(f64::INFINITY), Just(0.0), -1e3..1e3f64], 0..200)
        ) {
            let mut keys: Vec<F64Key> = v.drain(..).map(|x| F64Key::new(x).unwrap()).collect();
            keys.sort();
            let f = fit_least_squares(&keys).unwrap();
            prop_assert_eq!(f.max_error, oracle(&f.model, &keys));
        }

        #[test]
        fn reported_error_is_exact_bytes(mut keys in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..12), 0..200)
        ) {
            keys.sort();
            let f = fit_least_squares(&keys).unwrap();
            prop_assert_eq!(f.max_error, oracle(&f.model, &keys));
        }

        #[test]
        fn within_a_cap_is_the_same_fit_with_the_error_if_it_is_at_most_the_cap(
            keys in u64_keys(300),
            cap in prop_oneof![0usize..64, Just(usize::MAX)],
        ) {
            let full = fit_least_squares(&keys).unwrap();
            let (model, error) = fit_least_squares_within(&keys, cap).unwrap();
            prop_assert_eq!(model.slope.to_bits(), full.model.slope.to_bits());
            prop_assert_eq!(model.intercept.to_bits(), full.model.intercept.to_bits());
            prop_assert_eq!(model.origin, full.model.origin);
            prop_assert_eq!(error, (full.max_error <= cap).then_some(full.max_error));
        }
    }
}
