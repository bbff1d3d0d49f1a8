//! A wrapper that counts the requests and bytes a workload asks of storage,
//! per object and in total.

use std::collections::BTreeMap;
use std::ops::Range;

use parking_lot::Mutex;

use super::{Bytes, Storage};
use crate::Result;

/// Request and byte counts for one object, or for all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectCounts {
    /// Read requests issued: one per `read` or `read_all`, one per range of
    /// a `read_many`. Failed requests count too: they were still sent.
    pub requests: u64,
    /// Bytes returned by successful reads.
    pub bytes: u64,
    /// Metadata requests: `len` calls (and, in the totals only, `list`
    /// calls, which concern a prefix rather than one object).
    pub metadata_requests: u64,
    /// `write` calls, successful or not.
    pub writes: u64,
    /// Bytes passed to successful writes.
    pub bytes_written: u64,
}

impl ObjectCounts {
    fn add(&mut self, other: &ObjectCounts) {
        self.requests += other.requests;
        self.bytes += other.bytes;
        self.metadata_requests += other.metadata_requests;
        self.writes += other.writes;
        self.bytes_written += other.bytes_written;
    }
}

#[derive(Debug, Default)]
struct Tally {
    per_object: BTreeMap<String, ObjectCounts>,
    totals: ObjectCounts,
}

/// Storage that counts what passes through to `inner`.
///
/// One short mutex section per request keeps the counts of an object and
/// the totals consistent with each other.
#[derive(Debug)]
pub struct Counting<S: Storage> {
    inner: S,
    tally: Mutex<Tally>,
}

impl<S: Storage> Counting<S> {
    /// Wraps `inner` with all counts at zero.
    pub fn new(inner: S) -> Self {
        Counting {
            inner,
            tally: Mutex::new(Tally::default()),
        }
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner storage.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Counts per object name, for every object touched since the last
    /// [`reset`](Self::reset).
    pub fn counts(&self) -> BTreeMap<String, ObjectCounts> {
        self.tally.lock().per_object.clone()
    }

    /// Counts over all objects (including `list` calls).
    pub fn totals(&self) -> ObjectCounts {
        self.tally.lock().totals
    }

    /// Sets every count back to zero.
    pub fn reset(&self) {
        *self.tally.lock() = Tally::default();
    }

    fn record(&self, object: Option<&str>, delta: ObjectCounts) {
        let mut tally = self.tally.lock();
        tally.totals.add(&delta);
        if let Some(object) = object {
            // Look up before inserting so the common case allocates nothing.
            match tally.per_object.get_mut(object) {
                Some(counts) => counts.add(&delta),
                None => {
                    tally.per_object.insert(object.to_owned(), delta);
                }
            }
        }
    }

    fn record_reads(&self, object: &str, requests: u64, bytes: u64) {
        let delta = ObjectCounts {
            requests,
            bytes,
            ..ObjectCounts::default()
        };
        self.record(Some(object), delta);
    }
}

impl<S: Storage> Storage for Counting<S> {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        let result = self.inner.read(object, range);
        let bytes = result.as_ref().map_or(0, |b| b.len() as u64);
        self.record_reads(object, 1, bytes);
        result
    }

    fn read_all(&self, object: &str) -> Result<Bytes> {
        let result = self.inner.read_all(object);
        let bytes = result.as_ref().map_or(0, |b| b.len() as u64);
        self.record_reads(object, 1, bytes);
        result
    }

    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let result = self.inner.read_many(object, ranges);
        let bytes = result
            .as_ref()
            .map_or(0, |parts| parts.iter().map(|b| b.len() as u64).sum());
        self.record_reads(object, ranges.len() as u64, bytes);
        result
    }

    fn len(&self, object: &str) -> Result<u64> {
        let delta = ObjectCounts {
            metadata_requests: 1,
            ..ObjectCounts::default()
        };
        self.record(Some(object), delta);
        self.inner.len(object)
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        let result = self.inner.write(object, data);
        let delta = ObjectCounts {
            writes: 1,
            bytes_written: if result.is_ok() { data.len() as u64 } else { 0 },
            ..ObjectCounts::default()
        };
        self.record(Some(object), delta);
        result
    }

    fn delete(&self, object: &str) -> Result<()> {
        self.inner.delete(object)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let delta = ObjectCounts {
            metadata_requests: 1,
            ..ObjectCounts::default()
        };
        self.record(None, delta);
        self.inner.list(prefix)
    }

    fn evict(&self, object: &str) -> Result<()> {
        self.inner.evict(object)
    }

    fn describe(&self) -> String {
        format!("counting+{}", self.inner.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Memory;

    fn store() -> Counting<Memory> {
        let mem = Memory::new();
        mem.write("a", &[1u8; 100]).unwrap();
        mem.write("b", &[2u8; 50]).unwrap();
        Counting::new(mem)
    }

    fn reads(requests: u64, bytes: u64) -> ObjectCounts {
        ObjectCounts {
            requests,
            bytes,
            ..ObjectCounts::default()
        }
    }

    #[test]
    fn counts_every_kind_of_read_exactly() {
        let s = store();
        s.read("a", 0..10).unwrap();
        s.read("a", 90..100).unwrap();
        s.read_all("b").unwrap();
        s.read_many("a", &[0..1, 5..8, 20..20]).unwrap();
        let counts = s.counts();
        assert_eq!(counts["a"], reads(5, 24));
        assert_eq!(counts["b"], reads(1, 50));
        assert_eq!(s.totals(), reads(6, 74));
    }

    #[test]
    fn failed_reads_count_requests_but_no_bytes() {
        let s = store();
        assert!(s.read("a", 50..150).is_err());
        assert!(s.read_all("missing").is_err());
        assert_eq!(s.counts()["a"], reads(1, 0));
        assert_eq!(s.counts()["missing"], reads(1, 0));
    }

    #[test]
    fn metadata_and_writes_are_counted_separately() {
        let s = store();
        assert_eq!(s.len("a").unwrap(), 100);
        assert_eq!(s.list("").unwrap().len(), 2);
        s.write("c", &[0u8; 7]).unwrap();
        let counts = s.counts();
        assert_eq!(counts["a"].metadata_requests, 1);
        assert_eq!(counts["c"].writes, 1);
        assert_eq!(counts["c"].bytes_written, 7);
        let totals = s.totals();
        assert_eq!(totals.metadata_requests, 2);
        assert_eq!(totals.requests, 0);
        assert_eq!(totals.bytes_written, 7);
    }

    #[test]
    fn reset_zeroes_everything() {
        let s = store();
        s.read("a", 0..10).unwrap();
        s.reset();
        assert!(s.counts().is_empty());
        assert_eq!(s.totals(), ObjectCounts::default());
        s.read("b", 0..1).unwrap();
        assert_eq!(s.totals(), reads(1, 1));
    }

    #[test]
    fn counts_are_exact_under_concurrency() {
        let s = store();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..250 {
                        s.read("a", 0..3).unwrap();
                    }
                });
            }
        });
        assert_eq!(s.totals(), reads(1000, 3000));
    }
}
