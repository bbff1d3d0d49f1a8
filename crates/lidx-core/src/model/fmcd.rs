//! LIPP's Fastest Minimum Conflict Degree (FMCD) algorithm: a linear
//! key→slot model that spreads sorted distinct keys over `L` slots so that
//! few keys share a slot.
//!
//! # Algorithm
//!
//! The *conflict degree* of a model is the largest number of keys mapped to
//! one slot. FMCD looks for the smallest `D` such that the line with slot
//! width `U(D) = (keys[n-1-D] - keys[D]) / (L - 2)` gives every window of
//! `D + 1` consecutive keys a span of at least `U(D)`: then no slot can hold
//! more than `D` keys. The `D` keys at either end are sent to the first and
//! last slot by clamping, the line itself maps `keys[D]..=keys[n-1-D]` onto
//! slots `1..L-1`. Growing `D` shrinks `U(D)` and widens the windows, so a
//! window that passed keeps passing and one scan with a moving cursor finds
//! `D` in O(n).
//!
//! As in LIPP, FMCD gives up when `3 D > n` (the ends would swallow a third
//! of the keys), when fewer than 3 keys or 3 slots make the construction
//! meaningless, or when the keys' numeric view cannot separate them. Then a
//! fallback line is used: the better (by measured conflict degree) of the
//! min/max line through the first and last key and LIPP's line through the
//! keys at the first and second third.
//!
//! The reported [`FmcdFit::conflict_degree`] is always measured on the final
//! model, not taken from `D`.

use super::PositionModel;
use super::linear::{LinearModel, empty_origin};
use crate::error::{Error, Result};
use crate::key::{Key, check_strictly_sorted};

/// A key→slot model: `slot(key) = clamp(⌊line(key)⌋, 0, slots - 1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotModel<K> {
    /// The line whose floor is the slot.
    pub line: LinearModel<K>,
    /// Number of slots `L` (at least 1).
    pub slots: usize,
}

impl<K: Key> SlotModel<K> {
    /// The slot of `key`, always in `[0, slots)`.
    #[inline]
    pub fn slot(&self, key: &K) -> usize {
        // The saturating cast floors non-negative values and sends negatives
        // and NaN to 0.
        (self.line.predict(key) as usize).min(self.slots - 1)
    }

    /// Exact conflict degree on `keys` (sorted ascending): the largest number
    /// of keys sharing a slot, 0 for no keys.
    pub fn conflict_degree(&self, keys: &[K]) -> usize {
        let mut worst = 0usize;
        let mut run = 0usize;
        let mut prev: Option<usize> = None;
        let mut direction = 0i8;
        for key in keys {
            let s = self.slot(key);
            match prev {
                Some(p) if p == s => run += 1,
                Some(p) => {
                    let d = if s > p { 1 } else { -1 };
                    if direction != 0 && d != direction {
                        // A non-monotone line (only constructible by hand)
                        // breaks the run argument; count exactly instead.
                        return self.conflict_degree_by_sorting(keys);
                    }
                    direction = d;
                    run = 1;
                }
                None => run = 1,
            }
            prev = Some(s);
            worst = worst.max(run);
        }
        worst
    }

    fn conflict_degree_by_sorting(&self, keys: &[K]) -> usize {
        let mut slots: Vec<usize> = keys.iter().map(|k| self.slot(k)).collect();
        slots.sort_unstable();
        slots
            .chunk_by(|a, b| a == b)
            .map(<[usize]>::len)
            .max()
            .unwrap_or(0)
    }
}

/// How the model of an [`FmcdFit`] was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FmcdMethod {
    /// FMCD succeeded; `degree_bound` is its `D`, which bounds the conflict
    /// degree up to floating-point rounding.
    Fmcd {
        /// The `D` FMCD settled on.
        degree_bound: usize,
    },
    /// FMCD's conditions failed (or the input was trivial); a fallback line
    /// was used.
    Fallback,
}

/// Result of [`build`].
#[derive(Clone, Debug, PartialEq)]
pub struct FmcdFit<K> {
    /// The key→slot model.
    pub model: SlotModel<K>,
    /// Exact largest number of training keys sharing a slot.
    pub conflict_degree: usize,
    /// Whether FMCD or the fallback produced the model.
    pub method: FmcdMethod,
}

/// Relative slack between the window width FMCD verifies and the slot width
/// of the emitted line, so that rounding in the final evaluation cannot merge
/// two keys that FMCD proved to be a slot apart.
const SLACK: f64 = 1e-7;

/// Runs FMCD on sorted distinct `keys` for `slots` slots.
///
/// Errors: `slots == 0` is [`Error::InvalidArgument`]; unsorted or duplicate
/// keys are [`Error::Unsorted`] / [`Error::InvalidArgument`]. No keys gives
/// a constant model with conflict degree 0.
pub fn build<K: Key>(keys: &[K], slots: usize) -> Result<FmcdFit<K>> {
    if slots == 0 {
        return Err(Error::invalid("FMCD needs at least one slot"));
    }
    check_strictly_sorted(keys)?;
    let n = keys.len();
    let l = slots as f64;
    let (line, method) = match n {
        0 => (
            LinearModel::constant(empty_origin()?, 0.0),
            FmcdMethod::Fallback,
        ),
        1 => (
            LinearModel::constant(keys[0].clone(), l / 2.0),
            FmcdMethod::Fallback,
        ),
        _ => match fmcd(keys, l) {
            Some((line, d)) => (line, FmcdMethod::Fmcd { degree_bound: d }),
            None => (fallback(keys, slots), FmcdMethod::Fallback),
        },
    };
    let model = SlotModel { line, slots };
    let conflict_degree = model.conflict_degree(keys);
    Ok(FmcdFit {
        model,
        conflict_degree,
        method,
    })
}

/// The FMCD search; `None` when its conditions fail.
fn fmcd<K: Key>(keys: &[K], l: f64) -> Option<(LinearModel<K>, usize)> {
    let n = keys.len();
    if n < 3 || l < 3.0 {
        return None;
    }
    let width = |d: usize| -> Option<f64> {
        let u = keys[n - 1 - d].offset_from(&keys[d]) / (l - 2.0) * (1.0 + SLACK);
        (u > 0.0 && u.is_finite()).then_some(u)
    };
    let mut d = 1usize;
    let mut u = width(d)?;
    let mut i = 0usize;
    loop {
        while i + d < n && keys[i + d].offset_from(&keys[i]) >= u {
            i += 1;
        }
        if i + d >= n {
            break;
        }
        d += 1;
        if 3 * d > n {
            return None;
        }
        u = width(d)?;
    }
    // Slope slightly above 1/u: verified windows then span more than one
    // slot, while keys[D]..=keys[n-1-D] still fit strictly inside 1..L-1.
    let slope = (1.0 + SLACK / 2.0) / u;
    let span = keys[n - 1 - d].offset_from(&keys[d]);
    let intercept = l / 2.0 - slope * span / 2.0;
    Some((LinearModel::new(keys[d].clone(), slope, intercept), d))
}

/// The better of the min/max line and LIPP's thirds line (n >= 2).
fn fallback<K: Key>(keys: &[K], slots: usize) -> LinearModel<K> {
    let n = keys.len();
    let l = slots as f64;
    // Key centres of slot 0 and slot L-1.
    let min_max = LinearModel::through_points(&keys[0], 0.5, &keys[n - 1], l - 0.5);
    let (m1, m2) = ((n - 1) / 3, 2 * (n - 1) / 3);
    if m1 >= m2 {
        return min_max;
    }
    // Midpoints between neighbouring keys, mapped to the slot boundary the
    // keys' ranks would have if spread evenly.
    let x1 = keys[m1 + 1].offset_from(&keys[m1]) / 2.0;
    let x2 = keys[m2].offset_from(&keys[m1]) + keys[m2 + 1].offset_from(&keys[m2]) / 2.0;
    let (t1, t2) = (
        (m1 + 1) as f64 * l / n as f64,
        (m2 + 1) as f64 * l / n as f64,
    );
    let slope = (t2 - t1) / (x2 - x1);
    if !(slope.is_finite() && slope >= 0.0) {
        return min_max;
    }
    let thirds = LinearModel::new(keys[m1].clone(), slope, t1 - slope * x1);
    let degree = |line: &LinearModel<K>| {
        SlotModel {
            line: line.clone(),
            slots,
        }
        .conflict_degree(keys)
    };
    if degree(&thirds) <= degree(&min_max) {
        thirds
    } else {
        min_max
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{repo_keyset, u64_keys};
    use super::*;
    use crate::F64Key;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn oracle<K: Key>(m: &SlotModel<K>, keys: &[K]) -> usize {
        let mut counts = HashMap::new();
        for k in keys {
            let s = m.slot(k);
            assert!(s < m.slots);
            *counts.entry(s).or_insert(0usize) += 1;
        }
        counts.values().copied().max().unwrap_or(0)
    }

    fn check<K: Key>(keys: &[K], slots: usize) -> FmcdFit<K> {
        let f = build(keys, slots).unwrap();
        assert_eq!(f.conflict_degree, oracle(&f.model, keys));
        assert_eq!(f.model.slots, slots);
        f
    }

    #[test]
    fn trivial_inputs() {
        assert_eq!(check::<u64>(&[], 4).conflict_degree, 0);
        assert_eq!(check(&[7u64], 1).conflict_degree, 1);
        assert_eq!(check(&[7u64], 10).model.slot(&7), 5);
        let f = check(&[0u64, u64::MAX], 2);
        assert_eq!((f.conflict_degree, f.method), (1, FmcdMethod::Fallback));
        assert_eq!(check(&[1u64, 2, 3], 1).conflict_degree, 3);
    }

    #[test]
    fn bad_input() {
        assert!(matches!(
            build(&[1u64, 2], 0),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            build(&[1u64, 1], 4),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            build(&[2u64, 1], 4),
            Err(Error::Unsorted { index: 1 })
        ));
    }

    #[test]
    fn uniform_keys_get_degree_one() {
        let keys: Vec<u64> = (0..10_000u64)
            .map(|i| u64::MAX - 1_000_000 + i * 97)
            .collect();
        let f = check(&keys, 20_000);
        assert_eq!(f.method, FmcdMethod::Fmcd { degree_bound: 1 });
        assert_eq!(f.conflict_degree, 1);
    }

    #[test]
    fn exponential_keys_fall_back() {
        let keys: Vec<u64> = (0..64).map(|i| 1u64 << i).collect();
        let f = check(&keys, 128);
        assert_eq!(f.method, FmcdMethod::Fallback);
        assert!(f.conflict_degree > 1);
    }

    #[test]
    fn clustered_keys_have_bounded_degree() {
        // Two clusters far apart: D grows until D neighbours inside a
        // cluster span a slot (about 2^40 / 4000 = 2^28, i.e. D ~ 2^8).
        let mut keys: Vec<u64> = (0..1000).map(|i| i << 20).collect();
        keys.extend((0..1000).map(|i| 1 << 40 | i << 20));
        let f = check(&keys, 4000);
        match f.method {
            FmcdMethod::Fmcd { degree_bound } => {
                assert!((200..300).contains(&degree_bound), "D = {degree_bound}");
                assert!(f.conflict_degree <= degree_bound);
            }
            FmcdMethod::Fallback => panic!("FMCD should succeed with D < n/3"),
        }
    }

    #[test]
    fn hand_made_non_monotone_model_is_counted_exactly() {
        let m = SlotModel {
            line: LinearModel::new(F64Key::new(0.0).unwrap(), f64::NAN, 3.0),
            slots: 8,
        };
        let keys: Vec<F64Key> = [-1.0, 0.0, 1.0]
            .iter()
            .map(|&v| F64Key::new(v).unwrap())
            .collect();
        assert_eq!(m.conflict_degree(&keys), oracle(&m, &keys));
    }

    #[test]
    fn f64_and_byte_keys() {
        let keys: Vec<F64Key> = [
            f64::NEG_INFINITY,
            -2.0,
            -1.0,
            0.0,
            1.5,
            2.0,
            2.5,
            1e300,
            f64::INFINITY,
        ]
        .iter()
        .map(|&v| F64Key::new(v).unwrap())
        .collect();
        check(&keys, 20);
        let words: Vec<Vec<u8>> = (0..500u32)
            .map(|i| format!("k{i:06}").into_bytes())
            .collect();
        check(&words, 1000);
    }

    #[test]
    fn real_keyset_if_present() {
        let Some(mut keys) = repo_keyset("geopointdb_s2cellids_uint64") else {
            return;
        };
        keys.dedup();
        let f = check(&keys, keys.len() * 2);
        eprintln!(
            "s2 cell ids: {:?}, conflict degree {}",
            f.method, f.conflict_degree
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(192))]
        #[test]
        fn degree_is_exact_and_slots_in_range(
            mut keys in u64_keys(400),
            slots in prop_oneof![1usize..8, 8usize..2000],
            probes in proptest::collection::vec(any::<u64>(), 16),
        ) {
            keys.dedup();
            let f = check(&keys, slots);
            for p in &probes {
                prop_assert!(f.model.slot(p) < slots);
            }
            prop_assert!(f.conflict_degree >= keys.len().div_ceil(slots));
            let span_small = keys.last().zip(keys.first()).is_some_and(|(b, a)| b - a < 1 << 50);
            if let (FmcdMethod::Fmcd { degree_bound }, true) = (f.method, span_small) {
                prop_assert!(f.conflict_degree <= degree_bound);
                prop_assert!(3 * degree_bound <= keys.len());
            }
        }
    }
}
