//! Learned models: functions from a key to its position in a sorted array,
//! with exact error bounds.
//!
//! # Error semantics
//!
//! Every model here is trained on keys sorted ascending; duplicates are
//! allowed. The *target* position of `keys[i]` is the index of the first
//! occurrence of that key (lower-bound semantics), so a run of equal keys
//! shares one target.
//!
//! A model exposes [`PositionModel::predict`], a real-valued position, and
//! [`PositionModel::predict_pos`], that value rounded to nearest (ties up,
//! see [`round_clamp`]) and clamped to `[0, len - 1]`.
//!
//! [`Fitted::max_error`] is the *exact* maximum over the training keys of
//! `|predict_pos(key, n) - target(key)|`, measured by evaluating the final
//! model on every training key. It therefore bounds the real error even when
//! floating point made the construction itself slightly imperfect. A searcher
//! finds the lower bound of any training key inside
//! `[pos - max_error, pos + max_error]` (clamped to the array).
//!
//! For keys that were not in the training set, no bound is promised; an
//! engine must widen or fall back (e.g. exponential search) itself.
//!
//! # Models
//!
//! - [`linear`]: one line, fitted by least squares ([`linear::fit_least_squares`]).
//! - [`range_least_squares`]: least-squares lines of many ranges of one
//!   array, each in O(1) after one pass.
//! - [`pla`]: a piecewise-linear model over segment origins.
//! - [`optimal_pla`]: the PGM-index construction, the fewest segments for a
//!   given error.
//! - [`greedy_pla`]: the FITing-tree shrinking cone, faster to reason about,
//!   never fewer segments than the optimal one.
//! - [`fmcd`]: LIPP's key→slot model minimising the number of keys sharing a
//!   slot.
//!
//! All numeric work goes through [`Key::offset_from`] relative to a model's
//! origin key, so models stay precise for `u64` keys near 2^64.

use crate::error::{Error, Result};
use crate::key::Key;

pub mod fmcd;
pub mod greedy_pla;
pub mod linear;
pub mod optimal_pla;
pub mod pla;
pub mod range_least_squares;

pub use linear::LinearModel;
pub use pla::Pla;

/// A trained model together with its exact maximum error on the training keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Fitted<M> {
    /// The model.
    pub model: M,
    /// Exact maximum over the training keys of
    /// `|predict_pos(key, n) - first index of key|` (see the module docs).
    pub max_error: usize,
}

/// A model predicting a key's position in a sorted array.
pub trait PositionModel<K: Key> {
    /// Real-valued predicted position (may be negative or beyond the array).
    fn predict(&self, key: &K) -> f64;

    /// [`predict`](Self::predict) rounded and clamped to `[0, len - 1]`
    /// (`0` when `len == 0`), see [`round_clamp`].
    #[inline]
    fn predict_pos(&self, key: &K, len: usize) -> usize {
        round_clamp(self.predict(key), len)
    }

    /// Exact maximum error of this model on `keys` (sorted ascending,
    /// duplicates allowed), as defined in the module docs.
    ///
    /// Unsorted input is [`Error::Unsorted`]. Models with a cheaper exact
    /// evaluation than one [`predict_pos`](Self::predict_pos) per key
    /// override this; the result must be identical.
    fn max_error(&self, keys: &[K]) -> Result<usize> {
        max_error_by(keys, |key| self.predict_pos(key, keys.len()))
    }
}

/// Exact maximum error of `model` on the sorted `keys`; see
/// [`PositionModel::max_error`].
pub fn max_error<K: Key, M: PositionModel<K> + ?Sized>(model: &M, keys: &[K]) -> Result<usize> {
    model.max_error(keys)
}

/// Rounds a predicted position to the nearest integer (ties up) and clamps it
/// to `[0, len - 1]`; `NaN` and negative values give 0.
///
/// Computed as `⌊pred + 0.5⌋` (a truncating cast of a non-negative value),
/// without a libm call, which matters in per-key evaluation loops. Every
/// model and searcher uses this one definition, so reported errors match
/// lookups exactly.
#[inline]
pub fn round_clamp(pred: f64, len: usize) -> usize {
    let x = pred + 0.5;
    let floor = if (0.0..I64_RANGE_END).contains(&x) {
        // SAFETY: `x` is finite, non-negative and below 2^63, so its
        // truncation is an `i64` (and a non-negative one): the one
        // conversion instruction, where the saturating `as usize` below
        // needs a dozen for its NaN, sign and 2^63..2^64 cases.
        unsafe { x.to_int_unchecked::<i64>() as usize }
    } else {
        saturating_floor(x)
    };
    floor.min(len.saturating_sub(1))
}

/// `x as usize` for the rare `x` outside `0..2^63`: saturates, so negatives
/// and NaN become 0 and huge values `usize::MAX`. Out of line, so the
/// compiler keeps the branch to it instead of computing both casts.
#[cold]
#[inline(never)]
fn saturating_floor(x: f64) -> usize {
    x as usize
}

/// 2^63, the first `f64` whose truncation does not fit an `i64`.
const I64_RANGE_END: f64 = 9_223_372_036_854_775_808.0;

/// Shared evaluation loop: `pos_of(key)` is the rounded prediction.
pub(crate) fn max_error_by<K: Key>(keys: &[K], pos_of: impl FnMut(&K) -> usize) -> Result<usize> {
    // No error exceeds `usize::MAX`, so the loop never gives up.
    max_error_within_by(keys, usize::MAX, pos_of).map(|worst| worst.unwrap_or(usize::MAX))
}

/// [`max_error_by`] for a caller that needs the error only if it is at
/// most `cap`: `Ok(None)` as soon as one key is further off, without
/// reading the keys after it (so an unsorted key there goes unreported).
pub(crate) fn max_error_within_by<K: Key>(
    keys: &[K],
    cap: usize,
    mut pos_of: impl FnMut(&K) -> usize,
) -> Result<Option<usize>> {
    let mut worst = 0usize;
    let mut target = 0usize;
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            match key.cmp(&keys[i - 1]) {
                std::cmp::Ordering::Less => return Err(Error::Unsorted { index: i }),
                std::cmp::Ordering::Greater => target = i,
                std::cmp::Ordering::Equal => {}
            }
        }
        let error = pos_of(key).abs_diff(target);
        if error > cap {
            return Ok(None);
        }
        worst = worst.max(error);
    }
    Ok(Some(worst))
}

/// Largest error bound accepted by the PLA builders.
///
/// Beyond this a bound is meaningless for any array that fits in memory, and
/// keeping `y ± eps` well inside f64's exact integer range keeps the
/// geometry exact.
pub const MAX_EPS: usize = 1 << 40;

pub(crate) fn check_eps(eps: usize) -> Result<()> {
    if eps > MAX_EPS {
        Err(Error::invalid(format!(
            "PLA error bound eps={eps} is larger than the maximum {MAX_EPS}"
        )))
    } else {
        Ok(())
    }
}

/// Key-set generators and oracles shared by the model tests.
#[cfg(test)]
pub(crate) mod testutil {
    use proptest::prelude::*;

    /// Sorted `u64` key sets mixing the hard cases: duplicates, 0, u64::MAX,
    /// tiny sets, huge gaps and tight clusters.
    pub fn u64_keys(max_len: usize) -> impl Strategy<Value = Vec<u64>> {
        let one = prop_oneof![
            4 => any::<u64>(),
            2 => 0u64..64,
            2 => (u64::MAX - 64)..=u64::MAX,
            1 => Just(0u64),
            1 => Just(u64::MAX),
            2 => (0u64..1 << 20).prop_map(|d| (1u64 << 40) + d),
        ];
        let cluster = (any::<u64>(), 1usize..200, 1u64..1000).prop_map(|(base, n, step)| {
            (0..n as u64)
                .map(|i| base.saturating_add(i * step / 3))
                .collect::<Vec<_>>()
        });
        prop_oneof![
            3 => proptest::collection::vec(one, 0..max_len),
            1 => proptest::collection::vec(cluster, 1..4).prop_map(|v| v.concat()),
            1 => proptest::collection::vec(0u64..1 << 16, 0..max_len),
        ]
        .prop_map(|mut v| {
            v.sort_unstable();
            v
        })
    }

    /// Reads a SOSD-format `u64` key file at the repository root's `data/`,
    /// or `None` (with a message) when absent.
    pub fn repo_keyset(name: &str) -> Option<Vec<u64>> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../data")
            .join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("skipping: {} not readable ({e})", path.display());
                return None;
            }
        };
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(bytes.len(), 8 + 8 * n, "{} is not SOSD u64", path.display());
        Some(
            bytes[8..]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition `round_clamp` must match bit for bit.
    fn round_clamp_reference(pred: f64, len: usize) -> usize {
        ((pred + 0.5) as usize).min(len.saturating_sub(1))
    }

    #[test]
    fn round_clamp_matches_its_definition_at_the_edges() {
        let preds = [
            f64::NAN,
            f64::NEG_INFINITY,
            f64::INFINITY,
            -0.0,
            0.0,
            -0.5,
            -0.49,
            0.49,
            0.5,
            1.5,
            2.5,
            -1e300,
            1e300,
            f64::MIN_POSITIVE,
            9_007_199_254_740_993.0,
            I64_RANGE_END - 1024.0,
            I64_RANGE_END - 0.5,
            I64_RANGE_END,
            I64_RANGE_END + 4096.0,
            18_446_744_073_709_551_615.0,
            18_446_744_073_709_551_616.0,
        ];
        for pred in preds {
            for len in [0, 1, 2, 3, 1000, usize::MAX / 2, usize::MAX] {
                assert_eq!(
                    round_clamp(pred, len),
                    round_clamp_reference(pred, len),
                    "pred {pred}, len {len}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn round_clamp_matches_its_definition(bits in any::<u64>(), small in -1e6f64..1e6, len in any::<usize>()) {
            for pred in [f64::from_bits(bits), small] {
                prop_assert_eq!(round_clamp(pred, len), round_clamp_reference(pred, len));
            }
        }
    }

    struct Fixed(f64);
    impl PositionModel<u64> for Fixed {
        fn predict(&self, _: &u64) -> f64 {
            self.0
        }
    }

    #[test]
    fn round_clamp_rounds_and_clamps() {
        assert_eq!(round_clamp(-3.0, 10), 0);
        assert_eq!(round_clamp(f64::NAN, 10), 0);
        assert_eq!(round_clamp(f64::INFINITY, 10), 9);
        assert_eq!(round_clamp(f64::NEG_INFINITY, 10), 0);
        assert_eq!(round_clamp(2.49, 10), 2);
        assert_eq!(round_clamp(2.5, 10), 3);
        assert_eq!(round_clamp(-0.4, 10), 0);
        assert_eq!(round_clamp(5.0, 0), 0);
        assert_eq!(round_clamp(1e300, 4), 3);
    }

    #[test]
    fn max_error_uses_first_occurrence_and_rejects_unsorted() {
        let keys = [1u64, 5, 5, 5, 9];
        // Predicting 4 for everything: targets are 0,1,1,1,4.
        assert_eq!(max_error(&Fixed(4.0), &keys).unwrap(), 4);
        assert_eq!(max_error(&Fixed(1.0), &keys).unwrap(), 3);
        assert_eq!(max_error(&Fixed(1.0), &[] as &[u64]).unwrap(), 0);
        assert!(matches!(
            max_error(&Fixed(0.0), &[3u64, 2]),
            Err(Error::Unsorted { index: 1 })
        ));
    }

    #[test]
    fn eps_bound_is_checked() {
        assert!(check_eps(0).is_ok());
        assert!(check_eps(MAX_EPS).is_ok());
        assert!(matches!(
            check_eps(MAX_EPS + 1),
            Err(Error::InvalidArgument(_))
        ));
    }
}
