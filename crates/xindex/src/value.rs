//! Values stored in an [`XIndex`](crate::XIndex): anything that round-trips
//! through one 64-bit word.
//!
//! A record's value lives in a single atomic word next to its version word,
//! so a reader can never observe half of a write (no torn reads) without
//! any `unsafe` racing access. Larger values can be stored as handles (an
//! index into a slab the caller owns).

/// A value type that fits in one atomic 64-bit word.
pub trait Value: Copy + Send + Sync + 'static {
    /// The value as a word.
    fn to_word(self) -> u64;
    /// The value back from a word produced by [`Value::to_word`].
    fn from_word(word: u64) -> Self;
}

impl Value for u64 {
    #[inline]
    fn to_word(self) -> u64 {
        self
    }
    #[inline]
    fn from_word(word: u64) -> Self {
        word
    }
}

impl Value for i64 {
    #[inline]
    fn to_word(self) -> u64 {
        self as u64
    }
    #[inline]
    fn from_word(word: u64) -> Self {
        word as i64
    }
}

impl Value for u32 {
    #[inline]
    fn to_word(self) -> u64 {
        u64::from(self)
    }
    #[inline]
    fn from_word(word: u64) -> Self {
        // Only words made by `to_word` reach here, so the high half is zero.
        word as u32
    }
}

impl Value for usize {
    #[inline]
    fn to_word(self) -> u64 {
        self as u64
    }
    #[inline]
    fn from_word(word: u64) -> Self {
        word as usize
    }
}

impl Value for f64 {
    #[inline]
    fn to_word(self) -> u64 {
        self.to_bits()
    }
    #[inline]
    fn from_word(word: u64) -> Self {
        f64::from_bits(word)
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        assert_eq!(u64::from_word(u64::MAX.to_word()), u64::MAX);
        assert_eq!(i64::from_word((-5i64).to_word()), -5);
        assert_eq!(u32::from_word(7u32.to_word()), 7);
        assert_eq!(usize::from_word(9usize.to_word()), 9);
        assert_eq!(f64::from_word((-0.5f64).to_word()), -0.5);
    }
}
