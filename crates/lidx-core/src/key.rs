//! The [`Key`] trait: what an index needs from a key type.
//!
//! Learned indexes need three things from a key beyond a total order: a
//! stable byte encoding for files, a *numeric view* that models can regress
//! on, and an exact-as-possible *offset* between two keys so that models
//! anchored at a segment's first key stay precise even for keys near 2^64
//! (where `u64 as f64` alone cannot tell neighbours apart).

use std::cmp::Ordering;
use std::fmt::Debug;

use crate::error::{Error, Result};

/// A key type usable by every lidx engine.
///
/// Implemented for `u64`, `i64`, [`F64Key`] (an `f64` that is never NaN)
/// and `Vec<u8>` (byte strings, ordered lexicographically).
pub trait Key: Ord + Clone + Debug + Send + Sync + 'static {
    /// Width of [`Key::encode_le`] in bytes, or `None` for variable-length keys.
    const ENCODED_WIDTH: Option<usize>;

    /// Appends the little-endian encoding of the key to `out`
    /// (variable-length keys are prefixed with their length as a `u32`).
    fn encode_le(&self, out: &mut Vec<u8>);

    /// Decodes a key from the front of `bytes`, returning it and the number
    /// of bytes consumed. Short or invalid input is [`Error::Corrupt`].
    fn decode_le(bytes: &[u8]) -> Result<(Self, usize)>;

    /// Numeric view used by models: monotone non-decreasing in key order.
    fn to_f64(&self) -> f64;

    /// `self - origin` in the numeric view, computed with as little rounding
    /// as the type allows (exact for integer offsets below 2^53).
    fn offset_from(&self, origin: &Self) -> f64;

    /// A 64-bit value monotone non-decreasing in key order (`a <= b`
    /// implies `a.ordered_prefix() <= b.ordered_prefix()`), for radix
    /// tables that bucket keys by their high bits. The default orders the
    /// bits of [`Key::to_f64`]; integer keys override it with themselves.
    #[inline]
    fn ordered_prefix(&self) -> u64 {
        ordered_f64_bits(self.to_f64())
    }

    /// Heap bytes the key owns besides `size_of::<Self>()`, for engines
    /// that keep memory budgets. Zero for fixed-width keys.
    #[inline]
    fn heap_bytes(&self) -> usize {
        0
    }
}

fn short(what: &str, need: usize, have: usize) -> Error {
    Error::corrupt(format!("{what} key needs {need} bytes, {have} available"))
}

fn read_array<const N: usize>(bytes: &[u8], what: &str) -> Result<[u8; N]> {
    bytes
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| short(what, N, bytes.len()))
}

/// `x as f64`, through the one-instruction signed conversion whenever `x`
/// fits an `i64` (all but astronomically spread keys). Without AVX-512,
/// x86-64 has no unsigned conversion, and the generic sequence is four
/// dependent instructions on every model evaluation of a lookup. Both
/// conversions round the same exact integer to nearest, so the result is
/// identical.
#[inline]
pub fn u64_to_f64(x: u64) -> f64 {
    match i64::try_from(x) {
        Ok(signed) => signed as f64,
        // Out of line, so the compiler keeps the branch instead of
        // computing both conversions and selecting one.
        Err(_) => wide_u64_to_f64(x),
    }
}

#[cold]
#[inline(never)]
fn wide_u64_to_f64(x: u64) -> f64 {
    x as f64
}

/// The bits of `x` as an integer that orders like `x` (negatives below
/// positives, `-0.0` just below `0.0`); NaN sorts beyond the infinities.
#[inline]
pub fn ordered_f64_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

impl Key for u64 {
    const ENCODED_WIDTH: Option<usize> = Some(8);
    #[inline(always)]
    fn ordered_prefix(&self) -> u64 {
        *self
    }
    fn encode_le(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode_le(bytes: &[u8]) -> Result<(Self, usize)> {
        Ok((u64::from_le_bytes(read_array(bytes, "u64")?), 8))
    }
    fn to_f64(&self) -> f64 {
        *self as f64
    }
    #[inline]
    fn offset_from(&self, origin: &Self) -> f64 {
        // The magnitude fits a u64 and converts natively (an i128 -> f64
        // conversion is a slow library call on the lookup path); rounding is
        // the same round-to-nearest of the exact difference, exact below 2^53.
        if *self >= *origin {
            u64_to_f64(*self - *origin)
        } else {
            -u64_to_f64(*origin - *self)
        }
    }
}

impl Key for i64 {
    const ENCODED_WIDTH: Option<usize> = Some(8);
    #[inline(always)]
    fn ordered_prefix(&self) -> u64 {
        (*self as u64) ^ 1 << 63
    }
    fn encode_le(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode_le(bytes: &[u8]) -> Result<(Self, usize)> {
        Ok((i64::from_le_bytes(read_array(bytes, "i64")?), 8))
    }
    fn to_f64(&self) -> f64 {
        *self as f64
    }
    #[inline]
    fn offset_from(&self, origin: &Self) -> f64 {
        // Same as the u64 case: the magnitude of the difference fits a u64.
        let magnitude = u64_to_f64(self.abs_diff(*origin));
        if *self >= *origin {
            magnitude
        } else {
            -magnitude
        }
    }
}

/// An `f64` key: never NaN, totally ordered, with `-0.0` folded into `0.0`.
///
/// Construct with [`F64Key::new`] or `TryFrom<f64>`; both reject NaN with
/// [`Error::NanKey`]. Infinities are allowed and sort at the ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct F64Key(f64);

impl F64Key {
    /// Wraps `value`, rejecting NaN.
    pub fn new(value: f64) -> Result<Self> {
        if value.is_nan() {
            Err(Error::NanKey { index: 0 })
        } else {
            // -0.0 == 0.0 numerically; folding keeps Eq consistent with `==` on f64.
            Ok(F64Key(if value == 0.0 { 0.0 } else { value }))
        }
    }

    /// The wrapped value.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for F64Key {
    type Error = Error;
    fn try_from(value: f64) -> Result<Self> {
        F64Key::new(value)
    }
}

impl Eq for F64Key {}

impl PartialOrd for F64Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for F64Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl std::hash::Hash for F64Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state)
    }
}

impl Key for F64Key {
    const ENCODED_WIDTH: Option<usize> = Some(8);
    fn encode_le(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }
    fn decode_le(bytes: &[u8]) -> Result<(Self, usize)> {
        let v = f64::from_le_bytes(read_array(bytes, "f64")?);
        F64Key::new(v)
            .map(|k| (k, 8))
            .map_err(|_| Error::corrupt("NaN in an encoded f64 key"))
    }
    fn to_f64(&self) -> f64 {
        self.0
    }
    #[inline]
    fn offset_from(&self, origin: &Self) -> f64 {
        self.0 - origin.0
    }
}

/// Bytes of a byte-string key used for its numeric view.
pub const BYTES_PREFIX_LEN: usize = 8;

/// The first [`BYTES_PREFIX_LEN`] bytes as a big-endian integer, zero-padded.
/// Monotone non-decreasing in lexicographic order.
#[inline]
pub fn bytes_prefix_u64(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; BYTES_PREFIX_LEN];
    let n = bytes.len().min(BYTES_PREFIX_LEN);
    buf[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(buf)
}

impl Key for Vec<u8> {
    const ENCODED_WIDTH: Option<usize> = None;
    #[inline]
    fn ordered_prefix(&self) -> u64 {
        bytes_prefix_u64(self)
    }
    #[inline]
    fn heap_bytes(&self) -> usize {
        self.capacity()
    }
    fn encode_le(&self, out: &mut Vec<u8>) {
        // Keys longer than u32::MAX bytes cannot be built in practice; the
        // saturating cast keeps encode infallible and decode then reports it.
        out.extend_from_slice(&(u32::try_from(self.len()).unwrap_or(u32::MAX)).to_le_bytes());
        out.extend_from_slice(self);
    }
    fn decode_le(bytes: &[u8]) -> Result<(Self, usize)> {
        let len = u32::from_le_bytes(read_array(bytes, "byte-string length")?) as usize;
        let body = bytes
            .get(4..4 + len)
            .ok_or_else(|| short("byte-string", 4 + len, bytes.len()))?;
        Ok((body.to_vec(), 4 + len))
    }
    fn to_f64(&self) -> f64 {
        bytes_prefix_u64(self) as f64
    }
    #[inline]
    fn offset_from(&self, origin: &Self) -> f64 {
        (bytes_prefix_u64(self) as i128 - bytes_prefix_u64(origin) as i128) as f64
    }
}

/// Checks that `keys` is sorted ascending (duplicates allowed).
/// The error names the first index whose key is smaller than its predecessor.
pub fn check_sorted<K: Ord>(keys: &[K]) -> Result<()> {
    match keys.windows(2).position(|w| w[1] < w[0]) {
        None => Ok(()),
        Some(i) => Err(Error::Unsorted { index: i + 1 }),
    }
}

/// Checks that `keys` is strictly ascending (sorted, no duplicates).
pub fn check_strictly_sorted<K: Ord>(keys: &[K]) -> Result<()> {
    check_sorted(keys)?;
    match keys.windows(2).position(|w| w[1] == w[0]) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(format!(
            "duplicate key at index {} where unique keys are required",
            i + 1
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn u64_to_f64_is_the_plain_conversion() {
        let edges = [
            0,
            1,
            (1 << 53) - 1,
            1 << 53,
            (1 << 53) + 1,
            i64::MAX as u64 - 1,
            i64::MAX as u64,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for x in edges {
            assert_eq!(u64_to_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }

    proptest! {
        #[test]
        fn u64_to_f64_matches_as_cast(x in any::<u64>()) {
            prop_assert_eq!(u64_to_f64(x).to_bits(), (x as f64).to_bits());
        }
    }

    fn roundtrip<K: Key>(k: K) {
        let mut buf = Vec::new();
        k.encode_le(&mut buf);
        if let Some(w) = K::ENCODED_WIDTH {
            assert_eq!(buf.len(), w);
        }
        let (back, used) = K::decode_le(&buf).unwrap();
        assert_eq!(back, k);
        assert_eq!(used, buf.len());
        assert!(K::decode_le(&buf[..buf.len() - 1]).is_err());
    }

    #[test]
    fn nan_is_rejected() {
        assert!(matches!(F64Key::new(f64::NAN), Err(Error::NanKey { .. })));
        assert!(F64Key::try_from(f64::INFINITY).is_ok());
        assert_eq!(F64Key::new(-0.0).unwrap(), F64Key::new(0.0).unwrap());
        let nan = f64::NAN.to_le_bytes();
        assert!(matches!(F64Key::decode_le(&nan), Err(Error::Corrupt(_))));
    }

    #[test]
    fn offsets_near_u64_max_are_exact() {
        let a = u64::MAX - 1;
        let b = u64::MAX;
        assert_eq!(b.offset_from(&a), 1.0);
        assert_eq!(a.offset_from(&b), -1.0);
        assert_eq!(u64::MAX.offset_from(&0), u64::MAX as f64);
        assert_eq!(i64::MIN.offset_from(&i64::MAX), -(u64::MAX as f64));
    }

    #[test]
    fn only_byte_strings_own_heap_bytes() {
        assert_eq!(7u64.heap_bytes(), 0);
        assert_eq!(F64Key::new(1.5).unwrap().heap_bytes(), 0);
        let mut key = Vec::with_capacity(40);
        key.extend_from_slice(b"abc");
        assert_eq!(key.heap_bytes(), 40);
    }

    #[test]
    fn sortedness_names_first_bad_index() {
        assert!(check_sorted::<u64>(&[]).is_ok());
        assert!(check_sorted(&[1u64, 1, 2]).is_ok());
        assert!(matches!(
            check_sorted(&[1u64, 3, 2, 0]),
            Err(Error::Unsorted { index: 2 })
        ));
        assert!(check_strictly_sorted(&[1u64, 1]).is_err());
    }

    proptest! {
        #[test]
        fn u64_roundtrip(k: u64) { roundtrip(k) }
        #[test]
        fn i64_roundtrip(k: i64) { roundtrip(k) }
        #[test]
        fn f64_roundtrip(k in proptest::num::f64::ANY.prop_filter("not nan", |v| !v.is_nan())) {
            roundtrip(F64Key::new(k).unwrap())
        }
        #[test]
        fn bytes_roundtrip(k in proptest::collection::vec(any::<u8>(), 0..40)) { roundtrip(k) }

        #[test]
        fn integer_offsets_round_like_the_exact_difference(a: u64, b: u64, c: i64, d: i64) {
            prop_assert_eq!(a.offset_from(&b), (a as i128 - b as i128) as f64);
            prop_assert_eq!(c.offset_from(&d), (c as i128 - d as i128) as f64);
            let near = a.saturating_add(b % 1000);
            prop_assert_eq!(near.offset_from(&a), (near - a) as f64);
        }

        #[test]
        fn numeric_view_is_monotone_u64(a: u64, b: u64) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(lo.to_f64() <= hi.to_f64());
            prop_assert!(hi.offset_from(&lo) >= 0.0);
        }
        #[test]
        fn numeric_view_is_monotone_bytes(
            a in proptest::collection::vec(any::<u8>(), 0..12),
            b in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(lo.to_f64() <= hi.to_f64());
            prop_assert!(hi.offset_from(&lo) >= 0.0);
        }
        #[test]
        fn numeric_view_is_monotone_f64(
            a in proptest::num::f64::NORMAL | proptest::num::f64::ZERO,
            b in proptest::num::f64::NORMAL | proptest::num::f64::ZERO,
        ) {
            let (a, b) = (F64Key::new(a).unwrap(), F64Key::new(b).unwrap());
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(lo.to_f64() <= hi.to_f64());
        }

        #[test]
        fn ordered_prefixes_are_monotone(
            a: u64, b: u64, c: i64, d: i64,
            e in proptest::num::f64::ANY.prop_filter("not nan", |v| !v.is_nan()),
            f in proptest::num::f64::ANY.prop_filter("not nan", |v| !v.is_nan()),
            g in proptest::collection::vec(any::<u8>(), 0..12),
            h in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            fn check<K: Key>(a: K, b: K) -> bool {
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                lo.ordered_prefix() <= hi.ordered_prefix()
            }
            prop_assert!(check(a, b));
            prop_assert!(check(c, d));
            prop_assert!(check(F64Key::new(e).unwrap(), F64Key::new(f).unwrap()));
            prop_assert!(check(g, h));
        }
    }

    #[test]
    fn ordered_prefixes_at_the_edges() {
        assert_eq!(0u64.ordered_prefix(), 0);
        assert_eq!(u64::MAX.ordered_prefix(), u64::MAX);
        assert_eq!(i64::MIN.ordered_prefix(), 0);
        assert_eq!(i64::MAX.ordered_prefix(), u64::MAX);
        assert!((-1i64).ordered_prefix() < 0i64.ordered_prefix());
        let f = |x: f64| F64Key::new(x).unwrap().ordered_prefix();
        assert!(f(f64::NEG_INFINITY) < f(-1.0));
        assert!(f(-1.0) < f(0.0));
        assert!(f(0.0) < f(f64::MIN_POSITIVE));
        assert!(f(1.0) < f(f64::INFINITY));
        assert_eq!(f(-0.0), f(0.0));
        assert!(b"ab".to_vec().ordered_prefix() < b"b".to_vec().ordered_prefix());
    }
}
