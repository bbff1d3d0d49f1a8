//! Greedy shrinking-cone PLA, as in the FITing-tree.
//!
//! Each segment's line passes exactly through its first key. Every later
//! point narrows the cone of admissible slopes to those passing within
//! `eps` of it; a point whose own slope from the origin falls outside the
//! current cone starts a new segment. The emitted slope is the middle of the
//! final cone. Simple and O(n), but anchoring the line at the first key means
//! it never uses fewer segments than [`optimal_pla`](super::optimal_pla),
//! and usually more.

use super::Fitted;
use super::pla::{Pla, SegmentFitter, build_with};
use crate::error::Result;
use crate::key::Key;

/// Builds the shrinking-cone PLA of the sorted `keys` (duplicates allowed)
/// with error bound `eps`.
///
/// Same contract as [`optimal_pla::build`](super::optimal_pla::build):
/// `eps` may be 0, values above [`MAX_EPS`](super::MAX_EPS) are
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument), unsorted keys
/// [`Error::Unsorted`](crate::Error::Unsorted), and the reported error is
/// measured (at most `eps + 1`).
pub fn build<K: Key>(keys: &[K], eps: usize) -> Result<Fitted<Pla<K>>> {
    build_with(
        keys,
        eps,
        &mut Cone {
            eps: eps as f64,
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
            points: 0,
        },
    )
}

/// Admissible slopes `[lo, hi]` of lines through the segment's origin.
struct Cone {
    eps: f64,
    lo: f64,
    hi: f64,
    points: usize,
}

impl SegmentFitter for Cone {
    fn reset(&mut self) {
        self.lo = f64::NEG_INFINITY;
        self.hi = f64::INFINITY;
        self.points = 1;
    }

    #[inline]
    fn add(&mut self, x: f64, y: f64) -> bool {
        let s = y / x;
        if s < self.lo || s > self.hi {
            return false;
        }
        // Rounding is monotone, so the point's own slope stays inside.
        self.lo = self.lo.max((y - self.eps) / x);
        self.hi = self.hi.min((y + self.eps) / x);
        self.points += 1;
        true
    }

    fn line(&self) -> (f64, f64) {
        if self.points < 2 {
            (0.0, 0.0)
        } else {
            ((self.lo + self.hi) / 2.0, 0.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{repo_keyset, u64_keys};
    use super::super::{PositionModel, max_error};
    use super::*;
    use crate::Error;
    use proptest::prelude::*;

    fn check(keys: &[u64], eps: usize) -> Fitted<Pla<u64>> {
        let f = build(keys, eps).unwrap();
        let measured = keys
            .iter()
            .map(|k| {
                f.model
                    .predict_pos(k, keys.len())
                    .abs_diff(keys.partition_point(|x| x < k))
            })
            .max()
            .unwrap_or(0);
        assert_eq!(f.max_error, measured);
        assert_eq!(f.max_error, max_error(&f.model, keys).unwrap());
        assert!(f.max_error <= eps + 1);
        f
    }

    #[test]
    fn segments_start_at_keys_and_pass_through_them() {
        let keys: Vec<u64> = (0..2000u64).map(|i| i * i).collect();
        let f = check(&keys, 4);
        assert!(f.model.len() > 1);
        for seg in f.model.segments() {
            let rank = keys.binary_search(&seg.origin).unwrap();
            assert_eq!(seg.intercept, rank as f64);
        }
    }

    #[test]
    fn edge_cases() {
        assert!(check(&[], 3).model.is_empty());
        assert_eq!(check(&[u64::MAX], 0).model.len(), 1);
        assert_eq!(check(&[0, u64::MAX], 0).model.len(), 1);
        assert_eq!(check(&[9; 40], 0).model.len(), 1);
        assert!(matches!(
            build(&[2u64, 1], 1),
            Err(Error::Unsorted { index: 1 })
        ));
        assert!(build(&[1u64], usize::MAX).is_err());
    }

    #[test]
    fn real_keyset_if_present() {
        let Some(keys) = repo_keyset("geopointdb_s2cellids_uint64") else {
            return;
        };
        check(&keys, 32);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn error_bounded(keys in u64_keys(400), eps in 0usize..40) {
            check(&keys, eps);
        }
    }
}
