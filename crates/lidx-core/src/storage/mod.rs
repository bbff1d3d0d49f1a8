//! Storage: named objects read by byte range, over local files, mmap and
//! object stores, with wrappers that simulate, count, fail and cache.
//!
//! Every on-disk engine reads and writes through [`Storage`], so tests can
//! swap in [`Faulty`] to inject errors, [`Simulated`] to charge a
//! [`StorageProfile`]'s latency and bandwidth, [`Counting`] to see how many
//! requests and bytes a lookup costs, and [`PageCache`] to keep hot pages in a
//! fixed byte budget.
//!
//! Objects are named by `/`-separated relative names (`"meta"`,
//! `"layers/1"`). A read of `range` returns exactly `range.end - range.start`
//! bytes or an error: backends never return short reads silently (the
//! [`Faulty`] wrapper does, on purpose, so readers can be tested against it).

// Each backend/wrapper module is enabled by the helper that writes it.
mod cache;
mod counting;
mod faulty;
mod local;
mod memory;
mod mmap;
pub mod moto;
mod object;
mod profile;
mod simulated;
mod url;

pub use bytes::Bytes;
pub use cache::{CacheStats, PageCache};
pub use counting::{Counting, ObjectCounts};
pub use faulty::{Fault, Faulty};
pub use local::{LocalDir, LocalOptions};
pub use memory::Memory;
pub use mmap::Mmap;
pub use object::{ObjectStorage, S3Options};
pub use profile::{Calibration, CalibrationOptions, FitSummary, StorageProfile, calibrate};
pub use simulated::Simulated;
pub use url::open_url;

use std::ops::Range;

use crate::Result;

/// A store of named, immutable-once-written objects read by byte range.
///
/// Implementations are shared between threads (`Send + Sync`); every method
/// takes `&self`.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Reads bytes `range` of `object`.
    ///
    /// Returns exactly `range.end - range.start` bytes. A range that reaches
    /// past the end of the object is an [`Error::Truncated`](crate::Error);
    /// a missing object is [`Error::NotFound`](crate::Error).
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes>;

    /// Reads a whole object in one request (no separate length request).
    fn read_all(&self, object: &str) -> Result<Bytes>;

    /// Reads several ranges of one object, issuing the requests concurrently
    /// where the backend can; results are in the order of `ranges`.
    ///
    /// The default issues them one after another.
    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        ranges
            .iter()
            .map(|r| self.read(object, r.clone()))
            .collect()
    }

    /// Length of `object` in bytes.
    fn len(&self, object: &str) -> Result<u64>;

    /// Replaces `object` with `data` atomically: a reader sees the old
    /// contents or the new ones, never a mix, and after `Ok` the new contents
    /// are durable.
    fn write(&self, object: &str, data: &[u8]) -> Result<()>;

    /// Deletes `object`; deleting a missing object is not an error.
    fn delete(&self, object: &str) -> Result<()>;

    /// Names of the objects whose name starts with `prefix`, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Drops whatever this storage (or the operating system below it) caches
    /// for `object`, so the next read is cold. Backends without a cache do
    /// nothing.
    fn evict(&self, object: &str) -> Result<()> {
        let _ = object;
        Ok(())
    }

    /// A short human-readable description (URL-like) for messages.
    fn describe(&self) -> String;
}

impl<S: Storage + ?Sized> Storage for std::sync::Arc<S> {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        (**self).read(object, range)
    }
    fn read_all(&self, object: &str) -> Result<Bytes> {
        (**self).read_all(object)
    }
    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        (**self).read_many(object, ranges)
    }
    fn len(&self, object: &str) -> Result<u64> {
        (**self).len(object)
    }
    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        (**self).write(object, data)
    }
    fn delete(&self, object: &str) -> Result<()> {
        (**self).delete(object)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        (**self).list(prefix)
    }
    fn evict(&self, object: &str) -> Result<()> {
        (**self).evict(object)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// Checks that an object name is a relative `/`-separated path without `..`,
/// empty or absolute components, so backends can map it onto a directory
/// safely.
pub fn check_object_name(object: &str) -> Result<()> {
    let bad = object.is_empty()
        || object.starts_with('/')
        || object
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..");
    if bad {
        return Err(crate::Error::invalid(format!(
            "invalid object name {object:?}: use a relative path like \"meta\" or \"layers/1\""
        )));
    }
    Ok(())
}

/// Checks `range` against an object of `len` bytes, returning the
/// [`Error::Truncated`](crate::Error) every backend reports for reads past
/// the end, or [`Error::InvalidArgument`](crate::Error) for a reversed range.
pub fn check_range(object: &str, range: &Range<u64>, len: u64) -> Result<()> {
    if range.start > range.end {
        return Err(crate::Error::invalid(format!(
            "{object}: reversed byte range {}..{}",
            range.start, range.end
        )));
    }
    if range.end > len {
        return Err(crate::Error::Truncated {
            path: object.into(),
            expected: range.end,
            found: len,
        });
    }
    Ok(())
}
