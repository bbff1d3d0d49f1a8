//! Index nodes: fixed-size records mapping a key to a logical byte window of
//! the layer below.
//!
//! Every record starts with its u64 *tag*, the first key it covers, so a
//! layer of nodes is searched like any other sorted layer. All integers are
//! little-endian.
//!
//! # Step node with `p` pieces (`16p + 8` bytes)
//!
//! | bytes | field |
//! |---|---|
//! | `8k .. 8k+8`, `k < p` | key `a_{k+1}` |
//! | `8p + 8k .. 8p + 8k + 8`, `k <= p` | position `b_{k+1}` |
//!
//! Piece `k` covers keys `[a_k, a_{k+1})` and predicts the window
//! `[b_k, b_{k+1})`. A node with fewer real pieces repeats its last key and
//! its end position, so padded pieces are empty and no count field is
//! needed; this stays unambiguous when a real key is `u64::MAX`. A query
//! `x` is clamped to `[a_1, a_p]` and then takes the *first* piece with
//! `a_k == x` if there is one, else the last piece with `a_k < x`.
//! Keys must be non-decreasing and positions non-decreasing.
//!
//! # Band node (48 bytes)
//!
//! | bytes | field |
//! |---|---|
//! | `0..8` | `x1`, the first key covered |
//! | `8..16` | `x2`, the last key covered (`x1 <= x2`) |
//! | `16..24` | `y1` |
//! | `24..32` | `y2` (`y1 <= y2`) |
//! | `32..40` | `delta_lo` |
//! | `40..48` | `delta_hi` |
//!
//! The center is `c(x) = y1 + floor((x' - x1) * (y2 - y1) / (x2 - x1))`
//! with `x' = clamp(x, x1, x2)`, computed exactly in `u128` (`c = y1` when
//! `x1 == x2`); the window is `[c - delta_lo (saturating at 0), c +
//! delta_hi (saturating))`.
//!
//! # Contract
//!
//! Windows are monotone in `x`. Builders guarantee, for every entry `i` a
//! node covers, that every `x` in `[x_i, x_{i+1})` (the keys whose
//! predecessor is entry `i`, clamped to the node) predicts a window
//! containing the whole position of entry `i`. That is the paper's Eq. 1
//! over key ranges rather than only at the keys, and it is what lets a
//! lookup find the predecessor record inside the window at index layers.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use lidx_core::{Error, Result};

/// Bytes of a band record.
pub const BAND_RECORD_SIZE: u64 = 48;

/// The node type of one index layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum NodeKind {
    /// A step function of `pieces` constant pieces.
    Step {
        /// Pieces per node, real or padded (at least 1).
        pieces: u32,
    },
    /// A linear band.
    Band,
}

impl NodeKind {
    /// Bytes of one node record: `16 * pieces + 8` for a step node, 48 for a
    /// band.
    pub fn record_size(&self) -> u64 {
        match *self {
            NodeKind::Step { pieces } => 16 * pieces as u64 + 8,
            NodeKind::Band => BAND_RECORD_SIZE,
        }
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeKind::Step { pieces } => write!(f, "step({pieces})"),
            NodeKind::Band => f.write_str("band"),
        }
    }
}

impl FromStr for NodeKind {
    type Err = Error;

    /// Parses the [`Display`](fmt::Display) form: `step(16)` or `band`.
    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if s == "band" {
            return Ok(NodeKind::Band);
        }
        let pieces = s
            .strip_prefix("step(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .filter(|&p| p > 0)
            .ok_or_else(|| {
                Error::invalid(format!("unknown node kind {s:?}: expected step(P) or band"))
            })?;
        Ok(NodeKind::Step { pieces })
    }
}

/// The tag of a record: its first 8 bytes as a little-endian `u64` (0 for a
/// record shorter than 8 bytes, which no layer holds).
#[inline]
pub fn record_key(record: &[u8]) -> u64 {
    word(record, 0).unwrap_or(0)
}

/// The `i`-th little-endian `u64` of `bytes`, if present.
#[inline(always)]
fn word(bytes: &[u8], i: usize) -> Option<u64> {
    let b = bytes.get(8 * i..8 * i + 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// Decodes and validates one `kind` record, then predicts the logical
/// window of the layer below for key `x`.
///
/// A record of the wrong length or violating its encoding's invariants is
/// [`Error::Corrupt`]; nothing here panics on arbitrary bytes.
pub fn predict(kind: NodeKind, record: &[u8], x: u64) -> Result<Range<u64>> {
    if record.len() as u64 != kind.record_size() {
        return Err(Error::corrupt(format!(
            "{kind} record is {} bytes, expected {}",
            record.len(),
            kind.record_size()
        )));
    }
    match kind {
        NodeKind::Step { pieces } => {
            let step = StepRecord::new(record, pieces as usize)?;
            step.validate()?;
            Ok(step.window(x))
        }
        NodeKind::Band => Ok(Band::decode(record)?.window(x)),
    }
}

/// Predicts without validating: for records this crate encoded (a
/// [`Layer`](crate::builders::Layer)'s own). Garbage gives a meaningless
/// window but never a panic; a wrong length gives `0..0`.
#[inline]
pub(crate) fn predict_trusted(kind: NodeKind, record: &[u8], x: u64) -> Range<u64> {
    match kind {
        NodeKind::Step { pieces } => match StepRecord::new(record, pieces as usize) {
            Ok(step) => step.window(x),
            Err(_) => 0..0,
        },
        NodeKind::Band => Band::read(record).map_or(0..0, |b| b.window(x)),
    }
}

/// A borrowed step record of `pieces` pieces.
#[derive(Clone, Copy)]
struct StepRecord<'a> {
    bytes: &'a [u8],
    pieces: usize,
}

impl<'a> StepRecord<'a> {
    fn new(bytes: &'a [u8], pieces: usize) -> Result<Self> {
        if pieces == 0 || bytes.len() != 16 * pieces + 8 {
            return Err(Error::corrupt(format!(
                "step record of {} bytes cannot hold {pieces} pieces",
                bytes.len()
            )));
        }
        Ok(StepRecord { bytes, pieces })
    }

    #[inline(always)]
    fn key(&self, k: usize) -> u64 {
        word(self.bytes, k).unwrap_or(0)
    }

    #[inline(always)]
    fn bound(&self, k: usize) -> u64 {
        word(self.bytes, self.pieces + k).unwrap_or(0)
    }

    fn validate(&self) -> Result<()> {
        for k in 1..self.pieces {
            if self.key(k) < self.key(k - 1) {
                return Err(Error::corrupt(format!(
                    "step record keys decrease at piece {k}"
                )));
            }
        }
        for k in 1..=self.pieces {
            if self.bound(k) < self.bound(k - 1) {
                return Err(Error::corrupt(format!(
                    "step record positions decrease at piece {k}"
                )));
            }
        }
        Ok(())
    }

    #[inline]
    fn window(&self, x: u64) -> Range<u64> {
        let x = x.clamp(self.key(0), self.key(self.pieces - 1).max(self.key(0)));
        // First piece whose key is >= x; it is x's own piece if its key
        // equals x, else x belongs to the piece before (which exists since
        // x >= a_1, and the search stays below `pieces` since x <= a_p).
        let (mut lo, mut hi) = (0, self.pieces);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let k = if lo < self.pieces && self.key(lo) == x {
            lo
        } else {
            lo.saturating_sub(1)
        };
        let (start, end) = (self.bound(k), self.bound(k + 1));
        start..end.max(start)
    }
}

/// Writes a step record of `pieces` pieces from the real pieces' keys
/// (`keys[k]` starts piece `k`) and their `keys.len() + 1` boundaries,
/// padding the rest.
///
/// Needs `1 <= keys.len() <= pieces`, `bounds.len() == keys.len() + 1` and
/// `out.len() == 16 * pieces + 8` ([`Error::InvalidArgument`] otherwise);
/// sortedness is the caller's.
pub fn encode_step(pieces: u32, keys: &[u64], bounds: &[u64], out: &mut [u8]) -> Result<()> {
    let p = pieces as usize;
    if keys.is_empty()
        || keys.len() > p
        || bounds.len() != keys.len() + 1
        || out.len() as u64 != (NodeKind::Step { pieces }).record_size()
    {
        return Err(Error::invalid(format!(
            "cannot encode {} keys and {} bounds as a step({pieces}) record of {} bytes",
            keys.len(),
            bounds.len(),
            out.len()
        )));
    }
    let (key_part, bound_part) = out.split_at_mut(8 * p);
    let last_key = keys[keys.len() - 1];
    for (k, slot) in key_part.chunks_exact_mut(8).enumerate() {
        slot.copy_from_slice(&keys.get(k).copied().unwrap_or(last_key).to_le_bytes());
    }
    let last_bound = bounds[bounds.len() - 1];
    for (k, slot) in bound_part.chunks_exact_mut(8).enumerate() {
        slot.copy_from_slice(&bounds.get(k).copied().unwrap_or(last_bound).to_le_bytes());
    }
    Ok(())
}

/// A linear band node; see the [module docs](self) for its meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Band {
    /// First key covered.
    pub x1: u64,
    /// Last key covered.
    pub x2: u64,
    /// Center at `x1`.
    pub y1: u64,
    /// Center at `x2`.
    pub y2: u64,
    /// Window extent below the center.
    pub delta_lo: u64,
    /// Window extent above the center.
    pub delta_hi: u64,
}

impl Band {
    /// Reads a 48-byte record without validating it.
    fn read(record: &[u8]) -> Option<Band> {
        if record.len() as u64 != BAND_RECORD_SIZE {
            return None;
        }
        Some(Band {
            x1: word(record, 0)?,
            x2: word(record, 1)?,
            y1: word(record, 2)?,
            y2: word(record, 3)?,
            delta_lo: word(record, 4)?,
            delta_hi: word(record, 5)?,
        })
    }

    /// Decodes and validates a record ([`Error::Corrupt`] on a wrong length,
    /// `x1 > x2` or `y1 > y2`).
    pub fn decode(record: &[u8]) -> Result<Band> {
        let band = Band::read(record).ok_or_else(|| {
            Error::corrupt(format!(
                "band record is {} bytes, expected {BAND_RECORD_SIZE}",
                record.len()
            ))
        })?;
        if band.x1 > band.x2 || band.y1 > band.y2 {
            return Err(Error::corrupt(format!(
                "band record out of order: x1 {} x2 {} y1 {} y2 {}",
                band.x1, band.x2, band.y1, band.y2
            )));
        }
        Ok(band)
    }

    /// Writes the 48-byte record ([`Error::InvalidArgument`] if `out` is
    /// not 48 bytes).
    pub fn encode(&self, out: &mut [u8]) -> Result<()> {
        if out.len() as u64 != BAND_RECORD_SIZE {
            return Err(Error::invalid(format!(
                "a band record is {BAND_RECORD_SIZE} bytes, not {}",
                out.len()
            )));
        }
        let fields = [
            self.x1,
            self.x2,
            self.y1,
            self.y2,
            self.delta_lo,
            self.delta_hi,
        ];
        for (slot, v) in out.chunks_exact_mut(8).zip(fields) {
            slot.copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }

    /// The center `c(x)`, exact. On an invalid band (`x1 > x2` or
    /// `y1 > y2`) the result is meaningless but computed without panicking.
    #[inline]
    pub fn center(&self, x: u64) -> u64 {
        if self.x2 <= self.x1 {
            return self.y1;
        }
        let x = x.clamp(self.x1, self.x2);
        // (x - x1) * (y2 - y1) < 2^128, and the quotient is at most y2 - y1.
        let rise = (x - self.x1) as u128 * self.y2.saturating_sub(self.y1) as u128;
        self.y1
            .saturating_add((rise / (self.x2 - self.x1) as u128) as u64)
    }

    /// The predicted window for `x`.
    #[inline]
    pub fn window(&self, x: u64) -> Range<u64> {
        let c = self.center(x);
        c.saturating_sub(self.delta_lo)..c.saturating_add(self.delta_hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn step(pieces: u32, keys: &[u64], bounds: &[u64]) -> Vec<u8> {
        let mut out = vec![0; NodeKind::Step { pieces }.record_size() as usize];
        encode_step(pieces, keys, bounds, &mut out).unwrap();
        out
    }

    #[test]
    fn kinds_display_parse_and_size() {
        let s16 = NodeKind::Step { pieces: 16 };
        assert_eq!(s16.to_string(), "step(16)");
        assert_eq!(NodeKind::Band.to_string(), "band");
        assert_eq!("step(16)".parse::<NodeKind>().unwrap(), s16);
        assert_eq!(" band ".parse::<NodeKind>().unwrap(), NodeKind::Band);
        for bad in ["step(0)", "step()", "step(x)", "bend", "step(16"] {
            assert!(matches!(
                bad.parse::<NodeKind>(),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert_eq!(s16.record_size(), 264);
        assert_eq!(NodeKind::Band.record_size(), 48);
        let json = serde_json::to_string(&s16).unwrap();
        assert_eq!(serde_json::from_str::<NodeKind>(&json).unwrap(), s16);
    }

    #[test]
    fn figure_six_step_node() {
        // The paper's example: (1,[0,10)), (4,[10,20)), (5,[20,25)), (7,[25,35)).
        let kind = NodeKind::Step { pieces: 5 };
        let rec = step(5, &[1, 4, 5, 7], &[0, 10, 20, 25, 35]);
        assert_eq!(record_key(&rec), 1);
        let p = |x| predict(kind, &rec, x).unwrap();
        assert_eq!(p(0), 0..10);
        assert_eq!(p(1), 0..10);
        assert_eq!(p(3), 0..10);
        assert_eq!(p(4), 10..20);
        assert_eq!(p(6), 20..25);
        assert_eq!(p(7), 25..35);
        // Above the last real key: clamped to it, not the empty padding.
        assert_eq!(p(u64::MAX), 25..35);
    }

    #[test]
    fn step_padding_with_max_key() {
        let kind = NodeKind::Step { pieces: 4 };
        let rec = step(4, &[3, u64::MAX], &[8, 16, 40]);
        assert_eq!(predict(kind, &rec, u64::MAX).unwrap(), 16..40);
        assert_eq!(predict(kind, &rec, u64::MAX - 1).unwrap(), 8..16);
        assert_eq!(predict(kind, &rec, 0).unwrap(), 8..16);
        let single = step(4, &[u64::MAX], &[0, 8]);
        assert_eq!(predict(kind, &single, 0).unwrap(), 0..8);
        assert_eq!(predict(kind, &single, u64::MAX).unwrap(), 0..8);
    }

    #[test]
    fn encode_step_checks_shapes() {
        let mut out = vec![0; 40];
        assert!(encode_step(2, &[1], &[0, 8], &mut out).is_ok());
        assert!(encode_step(2, &[], &[0], &mut out).is_err());
        assert!(encode_step(2, &[1, 2, 3], &[0, 1, 2, 3], &mut out).is_err());
        assert!(encode_step(2, &[1], &[0], &mut out).is_err());
        assert!(encode_step(3, &[1], &[0, 8], &mut out).is_err());
    }

    #[test]
    fn band_center_is_exact_at_extremes() {
        let b = Band {
            x1: 0,
            x2: u64::MAX,
            y1: 0,
            y2: u64::MAX,
            delta_lo: 5,
            delta_hi: 5,
        };
        assert_eq!(b.center(u64::MAX), u64::MAX);
        assert_eq!(b.center(u64::MAX - 1), u64::MAX - 1);
        assert_eq!(b.window(u64::MAX), u64::MAX - 5..u64::MAX);
        assert_eq!(b.window(2), 0..7);
        let flat = Band {
            x1: 7,
            x2: 7,
            y1: 100,
            y2: 100,
            delta_lo: 0,
            delta_hi: 8,
        };
        assert_eq!(flat.window(0), 100..108);
        assert_eq!(flat.window(u64::MAX), 100..108);
        let mut rec = [0u8; 48];
        b.encode(&mut rec).unwrap();
        assert_eq!(Band::decode(&rec).unwrap(), b);
        assert_eq!(predict(NodeKind::Band, &rec, 9).unwrap(), b.window(9));
        assert!(b.encode(&mut [0u8; 40]).is_err());
    }

    #[test]
    fn band_figure_six() {
        // The paper's band through (1, 0) and (4, 10); with exact deltas it
        // covers every position of the example.
        let b = Band {
            x1: 1,
            x2: 7,
            y1: 0,
            y2: 30,
            delta_lo: 5,
            delta_hi: 10,
        };
        for (x, pos) in [(1, 0..10), (4, 10..20), (5, 20..25), (7, 25..35)] {
            let w = b.window(x);
            assert!(
                w.start <= pos.start && pos.end <= w.end,
                "{x}: {w:?} vs {pos:?}"
            );
        }
    }

    #[test]
    fn invalid_records_are_corrupt() {
        let kind = NodeKind::Step { pieces: 2 };
        let rec = step(2, &[5, 9], &[0, 8, 16]);
        assert!(predict(kind, &rec[..39], 5).is_err());
        let mut bad_keys = rec.clone();
        bad_keys[8..16].copy_from_slice(&1u64.to_le_bytes());
        assert!(matches!(
            predict(kind, &bad_keys, 5),
            Err(Error::Corrupt(_))
        ));
        let mut bad_bounds = rec.clone();
        bad_bounds[32..40].copy_from_slice(&1u64.to_le_bytes());
        assert!(matches!(
            predict(kind, &bad_bounds, 5),
            Err(Error::Corrupt(_))
        ));
        assert!(matches!(
            predict(NodeKind::Step { pieces: 0 }, &[0u8; 8], 5),
            Err(Error::Corrupt(_))
        ));
        // Reversed key range, then reversed position range.
        let reversed = [
            Band {
                x1: 9,
                x2: 3,
                ..Band::default()
            },
            Band {
                y1: 9,
                y2: 3,
                ..Band::default()
            },
        ];
        for corrupt in reversed {
            let mut band = [0u8; 48];
            corrupt.encode(&mut band).unwrap();
            assert!(matches!(
                predict(NodeKind::Band, &band, 5),
                Err(Error::Corrupt(_))
            ));
        }
        assert_eq!(record_key(&[1, 2]), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn garbage_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            pieces in 0u32..20,
            x in any::<u64>(),
        ) {
            for kind in [NodeKind::Step { pieces }, NodeKind::Band] {
                let size = (kind.record_size() as usize).min(bytes.len());
                for rec in [&bytes[..], &bytes[..size]] {
                    match predict(kind, rec, x) {
                        Ok(w) => prop_assert!(w.start <= w.end),
                        Err(e) => prop_assert!(matches!(e, Error::Corrupt(_)), "{e}"),
                    }
                    let w = predict_trusted(kind, rec, x);
                    prop_assert!(w.start <= w.end);
                }
            }
            let _ = record_key(&bytes);
        }

        #[test]
        fn step_windows_are_monotone(
            mut keys in proptest::collection::vec(any::<u64>(), 1..10),
            widths in proptest::collection::vec(0u64..100, 10),
            extra in 0u32..4,
            mut xs in proptest::collection::vec(any::<u64>(), 2..20),
        ) {
            keys.sort_unstable();
            keys.dedup();
            let mut bounds = vec![0u64];
            for w in &widths[..keys.len()] {
                bounds.push(bounds.last().unwrap() + w);
            }
            let pieces = keys.len() as u32 + extra;
            let rec = step(pieces, &keys, &bounds);
            let kind = NodeKind::Step { pieces };
            xs.sort_unstable();
            let ws: Vec<_> = xs.iter().map(|&x| predict(kind, &rec, x).unwrap()).collect();
            for w in ws.windows(2) {
                prop_assert!(w[0].start <= w[1].start && w[0].end <= w[1].end);
            }
            for (k, &key) in keys.iter().enumerate() {
                prop_assert_eq!(predict(kind, &rec, key).unwrap(), bounds[k]..bounds[k + 1]);
            }
        }
    }
}
