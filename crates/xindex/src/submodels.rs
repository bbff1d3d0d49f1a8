//! A group's linear models (the paper's up to `m` models per group, each
//! over an equal share of the record array, §3.1.4) and how they are
//! fitted: a given count, the fewest meeting the error bound, and the
//! ranges a bulk load or a split cuts so that every group meets it.
//!
//! Settling a range tries 1, 2, .. `m` shares and halves the range when
//! `m` do not meet the bound; a half's shares are then often shares its
//! parent already fitted (a half's 1 and 2 are its parent's 2 and 4), so
//! fits are kept per key range for the whole settling ([`ShareFits`]).

use std::collections::HashMap;
use std::ops::Range;

use lidx_core::Key;
use lidx_core::model::range_least_squares::RangeLeastSquares;
use lidx_core::model::{LinearModel, max_error};

/// One linear model over `keys[start..start + len]`.
#[derive(Clone)]
pub(crate) struct SubModel<K> {
    /// Smallest key of the model's range; `None` for the first model,
    /// which also serves keys below the group's first record.
    pub(crate) first_key: Option<K>,
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) model: LinearModel<K>,
    pub(crate) max_error: usize,
}

/// The largest error of `models`.
pub(crate) fn worst_error<K>(models: &[SubModel<K>]) -> usize {
    models.iter().map(|m| m.max_error).max().unwrap_or(0)
}

/// Fits `count` models (clamped to `1..=keys.len()`) over equal shares of
/// `keys`, as model split and merge reassign data evenly (§3.1.4).
pub(crate) fn fit_models<K: Key>(keys: &[K], count: usize) -> Box<[SubModel<K>]> {
    ShareFits::new(keys, usize::MAX).models(0..keys.len(), count)
}

/// The fewest models (up to `max_models`) over `keys` whose errors stay
/// within `error_bound`, and whether that bound was met (if not, the
/// `max_models` fit is returned).
pub(crate) fn fewest_models<K: Key>(
    keys: &[K],
    error_bound: usize,
    max_models: usize,
) -> (Box<[SubModel<K>]>, bool) {
    let mut fits = ShareFits::new(keys, error_bound);
    match fits.fewest(0..keys.len(), max_models) {
        Some(models) => (models, true),
        None => (fits.models(0..keys.len(), max_models), false),
    }
}

/// A range of a key array and the models fitted to it.
pub(crate) type FittedRange<K> = (Range<usize>, Box<[SubModel<K>]>);

/// Ranges of sorted `keys`, in order, each with its fewest models (up to
/// `max_models`) meeting `error_bound`, found by halving the whole range
/// until they do (or a range has one key): the groups a bulk load makes of
/// one chunk, and the parts a group split makes of one piece.
pub(crate) fn settled_ranges<K: Key>(
    keys: &[K],
    error_bound: usize,
    max_models: usize,
) -> Vec<FittedRange<K>> {
    let mut fits = ShareFits::new(keys, error_bound);
    let mut out = Vec::new();
    // Ranges still to place, rightmost on top of the stack.
    let mut pending = Vec::new();
    pending.push(0..keys.len());
    while let Some(range) = pending.pop() {
        let models = match fits.fewest(range.clone(), max_models) {
            Some(models) => models,
            None if range.len() >= 2 => {
                let middle = range.start + range.len() / 2;
                pending.push(middle..range.end);
                pending.push(range.start..middle);
                continue;
            }
            // A model over one key (or none) is exact, so this is not
            // reached; kept as the contract says, the `max_models` fit.
            None => fits.models(range.clone(), max_models),
        };
        out.push((range, models));
    }
    out
}

/// `models`, fitted to keys that may have changed since, measured again
/// on `keys`: `Some` (with the new errors and first keys) if they cover
/// exactly `keys.len()` positions and every error stays within
/// `error_bound`. A split fits its parts on a snapshot of the group's
/// keys; the parts' keys at the freeze are mostly the same, and one pass
/// of measuring costs a fraction of fitting again.
pub(crate) fn remeasured<K: Key>(
    mut models: Box<[SubModel<K>]>,
    keys: &[K],
    error_bound: usize,
) -> Option<Box<[SubModel<K>]>> {
    let covered = models.last().map_or(0, |m| m.start + m.len);
    if covered != keys.len() || models.first().is_none_or(|m| m.start != 0) {
        return None;
    }
    for m in models.iter_mut() {
        let share = keys.get(m.start..m.start + m.len)?;
        m.max_error = max_error(&m.model, share).ok()?;
        if m.max_error > error_bound {
            return None;
        }
        if m.first_key.is_some() {
            m.first_key = share.first().cloned();
        }
    }
    Some(models)
}

/// Least-squares fits of ranges of one sorted key array, each computed
/// once, for a search of the fewest models within an error bound.
///
/// Most fits such a search makes fail the bound (settling a bulk load's
/// chunk of geolite2 tries 1 to 4 models at three or four sizes before
/// one fits), and a failing fit's error is never used. So a fit's error
/// pass stops at the first key past the bound, and a count of models
/// stops at its first failing share; the shares it leaves unfitted are
/// fitted if a later range needs them. Only a caller that keeps a failing
/// fit ([`fewest_models`]) asks for its exact errors ([`Self::models`]).
/// Each line comes from prefix sums over the whole array
/// ([`RangeLeastSquares`]) instead of two passes over its share: bulk
/// loads of geolite2 and osm took a quarter less time
/// (`docs/results/xindex-session45.md`).
struct ShareFits<'k, K> {
    keys: &'k [K],
    /// Least-squares lines of any range of `keys`, each in O(1).
    sums: RangeLeastSquares<'k, K>,
    /// The error bound: errors above it are not measured.
    bound: usize,
    /// Model and error (`None`: above `bound`) per `(start, end)`.
    fitted: HashMap<(usize, usize), (LinearModel<K>, Option<usize>)>,
}

impl<'k, K: Key> ShareFits<'k, K> {
    fn new(keys: &'k [K], bound: usize) -> Self {
        ShareFits {
            keys,
            sums: RangeLeastSquares::new(keys),
            bound,
            fitted: HashMap::new(),
        }
    }

    /// The model over `keys[start..end]` and its error, `None` if above
    /// the bound.
    fn fit_within(&mut self, start: usize, end: usize) -> (LinearModel<K>, Option<usize>) {
        let (keys, bound, sums) = (self.keys, self.bound, &self.sums);
        self.fitted
            .entry((start, end))
            .or_insert_with(|| match sums.fit_within(start, end, bound) {
                Ok(fitted) => fitted,
                Err(_) => fallback(keys, start, end, bound),
            })
            .clone()
    }

    /// The model over `keys[start..end]` and its exact error.
    fn fit_exact(&mut self, start: usize, end: usize) -> (LinearModel<K>, usize) {
        let (model, error) = self.fit_within(start, end);
        let error = error.unwrap_or_else(|| {
            // The same line (fitting is deterministic): only its error pass
            // stopped early. A share whose fit failed keeps its full width.
            let error = max_error(&model, &self.keys[start..end]).unwrap_or(end - start);
            self.fitted
                .insert((start, end), (model.clone(), Some(error)));
            error
        });
        (model, error)
    }

    /// Where share `i` of `count` over `range` starts and ends, relative to
    /// the range's start; `count` is clamped to `1..=range.len()`.
    fn shares(range: &Range<usize>, count: usize) -> impl Iterator<Item = (usize, usize)> {
        let n = range.len();
        let count = count.clamp(1, n.max(1));
        (0..count).map(move |i| (i * n / count, (i + 1) * n / count))
    }

    fn sub_model(
        &self,
        range: &Range<usize>,
        (start, end): (usize, usize),
        model: LinearModel<K>,
        max_error: usize,
    ) -> SubModel<K> {
        SubModel {
            first_key: (start > 0).then(|| self.keys[range.start + start].clone()),
            start,
            len: end - start,
            model,
            max_error,
        }
    }

    /// `count` models (clamped to `1..=range.len()`) over equal shares of
    /// `range`, positions relative to its start, with exact errors.
    fn models(&mut self, range: Range<usize>, count: usize) -> Box<[SubModel<K>]> {
        Self::shares(&range, count)
            .map(|share| {
                let (model, error) = self.fit_exact(range.start + share.0, range.start + share.1);
                self.sub_model(&range, share, model, error)
            })
            .collect()
    }

    /// [`models`](Self::models) if every one is within the bound, else
    /// `None`, as soon as one share is not.
    fn models_within(&mut self, range: &Range<usize>, count: usize) -> Option<Box<[SubModel<K>]>> {
        Self::shares(range, count)
            .map(|share| {
                let (model, error) = self.fit_within(range.start + share.0, range.start + share.1);
                error.map(|error| self.sub_model(range, share, model, error))
            })
            .collect()
    }

    /// The fewest models (1 to `max_models`) over `range` meeting the
    /// bound, or `None`.
    fn fewest(&mut self, range: Range<usize>, max_models: usize) -> Option<Box<[SubModel<K>]>> {
        (1..=max_models.max(1)).find_map(|count| self.models_within(&range, count))
    }
}

/// What the share `keys[start..end]` gets if its fit fails (record arrays are sorted by
/// construction, and a fit over no keys fails only for a key type without
/// an all-zero encoding, which `XIndex::bulk_load` refuses: this cannot
/// happen). A flat model with a full-width error stays correct because
/// every search verifies its window anyway.
fn fallback<K: Key>(
    keys: &[K],
    start: usize,
    end: usize,
    bound: usize,
) -> (LinearModel<K>, Option<usize>) {
    let error = end - start;
    (
        LinearModel::constant(keys[start].clone(), 0.0),
        (error <= bound).then_some(error),
    )
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fewest_models_reports_whether_the_bound_is_met() {
        // Quadratic keys need several models or groups at a small bound.
        let keys: Vec<u64> = (0..5000u64).map(|i| 16 * i * i + (i % 7) * 13).collect();
        let (models, fits) = fewest_models(&keys, 4, 2);
        assert!(!fits, "too hard for 2 models at error 4");
        assert_eq!(models.len(), 2);
        let line: Vec<u64> = (0..50u64).map(|i| i * 10).collect();
        let (models, fits) = fewest_models(&line, 4, 2);
        assert!(fits && models.iter().all(|m| m.max_error <= 4));
    }

    /// Each of `count` shares of `keys[range]` fitted alone, as the paper
    /// states it (uncached, with the sums over all of `keys`, as
    /// [`ShareFits`] fits them): `(start, len, error)`, starts relative to
    /// the range.
    fn fitted_alone(keys: &[u64], range: Range<usize>, count: usize) -> Vec<(usize, usize, usize)> {
        let sums = RangeLeastSquares::new(keys);
        let n = range.len();
        let count = count.clamp(1, n.max(1));
        (0..count)
            .map(|i| {
                let (start, end) = (i * n / count, (i + 1) * n / count);
                let fitted = sums.fit_within(range.start + start, range.start + end, usize::MAX);
                let error = fitted.map_or(end - start, |(_, e)| e.expect("no cap"));
                (start, end - start, error)
            })
            .collect()
    }

    /// Sorted distinct keys, as a group's records are.
    fn record_keys(max_len: usize) -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::vec(any::<u64>(), 0..max_len).prop_map(|mut keys| {
            keys.sort_unstable();
            keys.dedup();
            keys
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::tests::soak::proptest_cases(64)))]
        #[test]
        fn settled_ranges_fit_every_share_as_if_alone(
            keys in record_keys(3000),
            bound in 0usize..40,
            max_models in 1usize..5,
        ) {
            // Fits reused across ranges must be the fits of those ranges:
            // every range's models are what fitting it alone gives, the
            // ranges tile the keys, and each meets the bound or is one key.
            let settled = settled_ranges(&keys, bound, max_models);
            let mut next = 0;
            for (range, models) in &settled {
                prop_assert_eq!(range.start, next);
                next = range.end;
                let share = &keys[range.clone()];
                let alone = fitted_alone(&keys, range.clone(), models.len());
                let got: Vec<_> = models.iter().map(|m| (m.start, m.len, m.max_error)).collect();
                prop_assert_eq!(got, alone);
                for m in models.iter() {
                    prop_assert_eq!(m.first_key, (m.start > 0).then(|| share[m.start]));
                }
                prop_assert!(worst_error(models) <= bound || range.len() < 2);
            }
            prop_assert_eq!(next, keys.len());
        }

        #[test]
        fn fewest_models_is_the_first_count_whose_shares_all_fit(
            keys in record_keys(2000),
            bound in 0usize..40,
            max_models in 1usize..5,
        ) {
            // The shares a failing count never fitted, and the errors its
            // fits stopped measuring, must not show: the answer is the one
            // of fitting every count in full.
            let (models, fits) = fewest_models(&keys, bound, max_models);
            let got: Vec<_> = models.iter().map(|m| (m.start, m.len, m.max_error)).collect();
            let first_fitting = (1..=max_models)
                .map(|count| fitted_alone(&keys, 0..keys.len(), count))
                .find(|shares| shares.iter().all(|&(_, _, error)| error <= bound));
            prop_assert_eq!(fits, first_fitting.is_some());
            let want = first_fitting.unwrap_or_else(|| fitted_alone(&keys, 0..keys.len(), max_models));
            prop_assert_eq!(got, want);
            for m in models.iter() {
                prop_assert_eq!(m.first_key, (m.start > 0).then(|| keys[m.start]));
            }
        }
    }

    #[test]
    fn remeasured_models_keep_their_shares_or_are_refused() {
        let keys: Vec<u64> = (0..1000u64).map(|i| i * 7 + (i % 3)).collect();
        let (models, fits) = fewest_models(&keys, 8, 4);
        assert!(fits);
        // The same keys: the same errors.
        let same = remeasured(models.clone(), &keys, 8).expect("unchanged keys still fit");
        let errors = |m: &[SubModel<u64>]| m.iter().map(|m| m.max_error).collect::<Vec<_>>();
        assert_eq!(errors(&same), errors(&models));
        // One key replaced by a neighbour: measured on the new keys.
        let mut moved = keys.clone();
        moved[500] += 1;
        let again = remeasured(models.clone(), &moved, 8).expect("a small change still fits");
        for m in again.iter() {
            let share = &moved[m.start..m.start + m.len];
            assert_eq!(m.max_error, max_error(&m.model, share).unwrap());
            assert_eq!(m.first_key, (m.start > 0).then(|| share[0]));
        }
        // Another count of keys, or an error past the bound: refused.
        assert!(remeasured(models.clone(), &keys[1..], 8).is_none());
        let mut far = keys.clone();
        for k in &mut far[600..700] {
            *k += 3_000;
        }
        far.sort_unstable();
        assert!(remeasured(models, &far, 8).is_none());
    }
}
