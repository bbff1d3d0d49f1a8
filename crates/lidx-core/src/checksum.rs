//! Checksums for on-disk formats.
//!
//! lidx uses CRC-32C (Castagnoli): hardware-accelerated on x86-64 and
//! aarch64, and strong enough to detect torn writes and bit flips in pages.

use crate::error::{Error, Result};

/// CRC-32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Continues a CRC-32C computation: `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, bytes)
}

/// Checks that `bytes` has checksum `expected`; `what` names the structure in the error.
pub fn verify(bytes: &[u8], expected: u32, what: &str) -> Result<()> {
    let actual = crc32c(bytes);
    if actual == expected {
        Ok(())
    } else {
        Err(Error::corrupt(format!(
            "{what}: checksum mismatch (stored {expected:#010x}, computed {actual:#010x})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_equals_whole() {
        let a = b"learned ";
        let b = b"index";
        assert_eq!(crc32c_append(crc32c(a), b), crc32c(b"learned index"));
    }

    #[test]
    fn known_vector() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn verify_detects_flip() {
        let mut data = vec![7u8; 100];
        let sum = crc32c(&data);
        verify(&data, sum, "page").unwrap();
        data[40] ^= 1;
        let err = verify(&data, sum, "page").unwrap_err();
        assert!(matches!(err, Error::Corrupt(ref m) if m.contains("page")));
    }
}
