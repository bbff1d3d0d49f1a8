//! Piecewise-linear models: one [`LinearModel`] per segment, each anchored
//! at the segment's first key, plus the streaming driver shared by the PLA
//! builders.

use std::cmp::Ordering;

use super::linear::LinearModel;
use super::{Fitted, PositionModel, check_eps, round_clamp};
use crate::error::{Error, Result};
use crate::key::Key;

/// A piecewise-linear model.
///
/// Segment origins are strictly increasing. A key is predicted by the last
/// segment whose origin is `<=` the key; keys below the first origin use the
/// first segment. An empty `Pla` predicts 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Pla<K> {
    segments: Vec<LinearModel<K>>,
}

impl<K: Key> Pla<K> {
    /// Builds a model from segments whose origins must be strictly
    /// increasing ([`Error::InvalidArgument`] otherwise).
    pub fn new(segments: Vec<LinearModel<K>>) -> Result<Self> {
        if let Some(i) = segments.windows(2).position(|w| w[0].origin >= w[1].origin) {
            return Err(Error::invalid(format!(
                "PLA segment origins must be strictly increasing: segment {} does not start after segment {i}",
                i + 1
            )));
        }
        Ok(Pla { segments })
    }

    /// The segments, in origin order.
    pub fn segments(&self) -> &[LinearModel<K>] {
        &self.segments
    }

    /// Gives the segments back.
    pub fn into_segments(self) -> Vec<LinearModel<K>> {
        self.segments
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// Whether there are no segments.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Index of the segment that predicts `key` (0 for an empty model).
    #[inline]
    pub fn segment_index(&self, key: &K) -> usize {
        self.segments
            .partition_point(|s| s.origin <= *key)
            .saturating_sub(1)
    }
}

impl<K: Key> PositionModel<K> for Pla<K> {
    #[inline]
    fn predict(&self, key: &K) -> f64 {
        match self.segments.get(self.segment_index(key)) {
            Some(seg) => seg.predict(key),
            None => 0.0,
        }
    }

    /// Walks keys and segments together instead of binary-searching per key;
    /// the result equals the per-key definition.
    fn max_error(&self, keys: &[K]) -> Result<usize> {
        let n = keys.len();
        if self.segments.is_empty() {
            return super::max_error_by(keys, |_| 0);
        }
        let mut seg = 0usize;
        super::max_error_by(keys, |key| {
            while seg + 1 < self.segments.len() && self.segments[seg + 1].origin <= *key {
                seg += 1;
            }
            round_clamp(self.segments[seg].predict(key), n)
        })
    }
}

/// Fits one segment at a time to points streamed in increasing `x`.
///
/// Coordinates are relative to the segment's first point, which is always
/// `(0, 0)`: `x` is the key offset from the segment origin, `y` the
/// first-occurrence rank minus the origin's rank.
pub(crate) trait SegmentFitter {
    /// Starts a new segment at `(0, 0)`.
    fn reset(&mut self);
    /// Tries to extend the segment by a point with `x` strictly greater than
    /// the previous one; `false` (state unchanged) if no line can cover it.
    fn add(&mut self, x: f64, y: f64) -> bool;
    /// `(slope, value at x = 0)` of a line covering every accepted point.
    fn line(&self) -> (f64, f64);
}

/// Streams sorted `keys` through `fitter`, closing a segment whenever the
/// fitter refuses a point, and measures the exact error of each segment as
/// soon as it is closed (its keys are still in cache).
///
/// A point also opens a new segment when its offset from the current origin
/// is not finite or does not increase (distinct keys that the numeric view
/// cannot separate), so the fitters only ever see strictly increasing `x`.
///
/// Safety net: a closed segment whose line is not finite or whose measured
/// error exceeds `eps + 1` (floating point defeated the fitter, e.g. offsets
/// near f64's range limits) is split in half and each half rebuilt, down to
/// single-key segments, which are exact.
pub(crate) fn build_with<K: Key, F: SegmentFitter>(
    keys: &[K],
    eps: usize,
    fitter: &mut F,
) -> Result<Fitted<Pla<K>>> {
    Ok(build_capped(keys, eps, usize::MAX, fitter)?.expect("no segment limit to exceed"))
}

/// [`build_with`] that gives up, returning `None`, as soon as a
/// `max_segments + 1`-th segment is closed: a caller that can only use a
/// few segments does not pay for fitting the rest of the keys. When it
/// returns a model, that model is the one `build_with` returns.
pub(crate) fn build_capped<K: Key, F: SegmentFitter>(
    keys: &[K],
    eps: usize,
    max_segments: usize,
    fitter: &mut F,
) -> Result<Option<Fitted<Pla<K>>>> {
    check_eps(eps)?;
    let mut driver = Driver {
        keys,
        bound: eps + 1,
        fitter,
        segments: Vec::new(),
        worst: 0,
        max_segments,
    };
    if !keys.is_empty() {
        let mut xs = Vec::with_capacity(256);
        let mut ys = Vec::with_capacity(256);
        driver.run(0, keys.len(), &mut xs, &mut ys)?;
    }
    if driver.over_limit() {
        return Ok(None);
    }
    Ok(Some(Fitted {
        max_error: driver.worst,
        model: Pla {
            segments: driver.segments,
        },
    }))
}

struct Driver<'a, K, F> {
    keys: &'a [K],
    /// Largest acceptable measured error of one segment.
    bound: usize,
    fitter: &'a mut F,
    segments: Vec<LinearModel<K>>,
    worst: usize,
    /// Segments beyond which the fit is abandoned.
    max_segments: usize,
}

impl<K: Key, F: SegmentFitter> Driver<'_, K, F> {
    /// Whether more segments were closed than the caller can use; every
    /// `run` returns early once this holds.
    #[inline]
    fn over_limit(&self) -> bool {
        self.segments.len() > self.max_segments
    }

    /// Segments `keys[lo..hi]`; `lo` must start a run of equal keys.
    /// `xs`/`ys` are reused buffers holding the open segment's distinct
    /// points (offset from its origin, rank minus the origin's rank).
    fn run(&mut self, lo: usize, hi: usize, xs: &mut Vec<f64>, ys: &mut Vec<f64>) -> Result<()> {
        let keys = self.keys;
        let mut start = lo;
        let mut origin = &keys[lo];
        self.fitter.reset();
        xs.clear();
        ys.clear();
        xs.push(origin.offset_from(origin));
        ys.push(0.0);
        let mut last_x = 0.0f64;

        for i in lo + 1..hi {
            let key = &keys[i];
            match key.cmp(&keys[i - 1]) {
                Ordering::Equal => continue,
                Ordering::Less => return Err(Error::Unsorted { index: i }),
                Ordering::Greater => {}
            }
            let x = key.offset_from(origin);
            let y = (i - start) as f64;
            // `x > last_x` is also false for NaN.
            if x > last_x && x.is_finite() && self.fitter.add(x, y) {
                xs.push(x);
                ys.push(y);
                last_x = x;
                continue;
            }
            self.close(origin, start, i, xs, ys)?;
            if self.over_limit() {
                return Ok(());
            }
            start = i;
            origin = key;
            self.fitter.reset();
            xs.clear();
            ys.clear();
            xs.push(origin.offset_from(origin));
            ys.push(0.0);
            last_x = 0.0;
        }
        self.close(origin, start, hi, xs, ys)
    }

    /// Emits the open segment covering `keys[start..end]`, or splits it when
    /// its measured error is out of bounds.
    #[inline]
    fn close(
        &mut self,
        origin: &K,
        start: usize,
        end: usize,
        xs: &[f64],
        ys: &[f64],
    ) -> Result<()> {
        let n = self.keys.len();
        let (slope, at_origin) = self.fitter.line();
        let seg = LinearModel::new(origin.clone(), slope, start as f64 + at_origin);
        // Duplicates share their key's prediction and target, so the distinct
        // points determine the segment's error.
        let mut worst = 0usize;
        for (&x, &y) in xs.iter().zip(ys) {
            let pos = round_clamp(seg.predict_offset(x), n);
            worst = worst.max(pos.abs_diff(start + y as usize));
        }
        if (worst <= self.bound && slope.is_finite() && seg.intercept.is_finite()) || xs.len() < 2 {
            self.worst = self.worst.max(worst);
            self.segments.push(seg);
            return Ok(());
        }
        self.split(start, end, xs, ys)
    }

    #[cold]
    #[inline(never)]
    fn split(&mut self, start: usize, end: usize, xs: &[f64], ys: &[f64]) -> Result<()> {
        // Splitting at a distinct point keeps every half starting at the
        // first occurrence of its key.
        let mid = start + ys[xs.len() / 2] as usize;
        let (mut bx, mut by) = (Vec::new(), Vec::new());
        self.run(start, mid, &mut bx, &mut by)?;
        if self.over_limit() {
            return Ok(());
        }
        self.run(mid, end, &mut bx, &mut by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_rejects_unordered_origins() {
        let s = |o: u64| LinearModel::new(o, 1.0, o as f64);
        assert!(Pla::new(vec![s(1), s(5), s(9)]).is_ok());
        assert!(matches!(
            Pla::new(vec![s(1), s(5), s(5)]),
            Err(Error::InvalidArgument(_))
        ));
        assert!(Pla::new(vec![s(5), s(1)]).is_err());
    }

    #[test]
    fn picks_last_segment_at_or_below_key() {
        let pla = Pla::new(vec![
            LinearModel::new(10u64, 0.0, 100.0),
            LinearModel::new(20u64, 0.0, 200.0),
            LinearModel::new(30u64, 1.0, 300.0),
        ])
        .unwrap();
        assert_eq!(pla.predict(&0), 100.0);
        assert_eq!(pla.predict(&10), 100.0);
        assert_eq!(pla.predict(&19), 100.0);
        assert_eq!(pla.predict(&20), 200.0);
        assert_eq!(pla.predict(&35), 305.0);
        assert_eq!(pla.segment_index(&u64::MAX), 2);
        assert_eq!(pla.predict_pos(&35, 50), 49);
        assert_eq!((pla.len(), pla.is_empty()), (3, false));

        let empty: Pla<u64> = Pla::new(Vec::new()).unwrap();
        assert_eq!(empty.predict(&7), 0.0);
        assert_eq!(empty.max_error(&[1, 2, 3]).unwrap(), 2);
    }

    #[test]
    fn walking_max_error_matches_per_key_definition() {
        let pla = Pla::new(vec![
            LinearModel::new(10u64, 0.5, 0.0),
            LinearModel::new(20u64, 0.1, 7.0),
        ])
        .unwrap();
        let keys = [1u64, 10, 12, 12, 19, 20, 20, 25, 40, 41, 90];
        let per_key = keys
            .iter()
            .map(|k| {
                pla.predict_pos(k, keys.len())
                    .abs_diff(keys.partition_point(|x| x < k))
            })
            .max()
            .unwrap();
        assert_eq!(pla.max_error(&keys).unwrap(), per_key);
        assert!(pla.max_error(&[3u64, 1]).is_err());
    }
}
