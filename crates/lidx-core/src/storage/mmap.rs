//! [`Mmap`]: the [`LocalDir`] layout, read through memory maps.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use super::local::drop_os_cache;
use super::{LocalDir, LocalOptions, Storage, check_range};
use crate::{Error, Result};

/// Maps kept per store; beyond this an arbitrary one is dropped (it stays
/// alive while reads still hold bytes of it).
const MAX_MAPS: usize = 256;

/// A [`Storage`] over a local directory whose reads are zero-copy views of a
/// read-only memory map of each object, mapped on first use.
///
/// Writes, deletes and listing are those of [`LocalDir`]; a write or delete
/// through this value drops the old map (bytes already returned keep the old
/// contents alive). Files must not be modified in place behind its back:
/// truncating a mapped file makes later accesses fault.
#[derive(Debug)]
pub struct Mmap {
    files: LocalDir,
    maps: RwLock<HashMap<String, Arc<memmap2::Mmap>>>,
}

/// Owner of a zero-copy read: keeps the map alive while the bytes live.
struct MappedRange {
    map: Arc<memmap2::Mmap>,
    range: Range<usize>,
}

impl AsRef<[u8]> for MappedRange {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

impl Mmap {
    /// Opens (creating it if missing) the directory `root` as a store.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        Ok(Self {
            files: LocalDir::open(root, LocalOptions::default())?,
            maps: RwLock::new(HashMap::new()),
        })
    }

    /// The directory holding the objects.
    pub fn root(&self) -> &Path {
        self.files.root()
    }

    /// The map of `object`, mapping it on first use.
    fn map(&self, object: &str) -> Result<Arc<memmap2::Mmap>> {
        if let Some(map) = self.maps.read().get(object) {
            return Ok(Arc::clone(map));
        }
        // Mapping under the write lock orders it against `forget_map`, which
        // writers call after their rename, so a stale map is never cached.
        let mut maps = self.maps.write();
        if let Some(map) = maps.get(object) {
            return Ok(Arc::clone(map));
        }
        let (file, _) = self.files.open_plain(object)?;
        // SAFETY: lidx never modifies an object file in place: writes go to a
        // temporary file that is renamed over the old one, so the mapped
        // file's contents stay fixed while mapped. (Another process truncating
        // it would make accesses fault; that is documented on `Mmap`.)
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| Error::io(self.files.root().join(object), e))?;
        let map = Arc::new(map);
        if maps.len() >= MAX_MAPS
            && let Some(victim) = maps.keys().next().cloned()
        {
            maps.remove(&victim);
        }
        maps.insert(object.to_owned(), Arc::clone(&map));
        Ok(map)
    }

    fn forget_map(&self, object: &str) {
        self.maps.write().remove(object);
    }

    fn slice(map: Arc<memmap2::Mmap>, object: &str, range: Range<u64>) -> Result<Bytes> {
        check_range(object, &range, map.len() as u64)?;
        // check_range bounds both ends by the map length, which is a usize.
        let range = range.start as usize..range.end as usize;
        Ok(Bytes::from_owner(MappedRange { map, range }))
    }
}

impl Storage for Mmap {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        Self::slice(self.map(object)?, object, range)
    }

    fn read_all(&self, object: &str) -> Result<Bytes> {
        let map = self.map(object)?;
        let len = map.len() as u64;
        Self::slice(map, object, 0..len)
    }

    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let map = self.map(object)?;
        ranges
            .iter()
            .map(|r| Self::slice(Arc::clone(&map), object, r.clone()))
            .collect()
    }

    fn len(&self, object: &str) -> Result<u64> {
        Ok(self.map(object)?.len() as u64)
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        self.files.write(object, data)?;
        self.forget_map(object);
        Ok(())
    }

    fn delete(&self, object: &str) -> Result<()> {
        self.files.delete(object)?;
        self.forget_map(object);
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.files.list(prefix)
    }

    /// Unmaps the resident pages of `object`'s map and drops the operating
    /// system's cached pages of its file, so the next read faults from the
    /// device.
    fn evict(&self, object: &str) -> Result<()> {
        let path = self.files.object_path(object)?;
        let map = self.maps.read().get(object).cloned();
        if let Some(map) = map {
            // Page-cache pages still mapped into this process cannot be
            // dropped by fadvise, so unmap them from our page tables first.
            // SAFETY: the map is a read-only shared mapping of a file that is
            // never modified in place; MADV_DONTNEED on it only discards page
            // table entries, and later accesses (including through bytes
            // already handed out) refault the same file contents.
            unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) }
                .map_err(|e| Error::io(&path, e))?;
        }
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) => {
                return match self.files.open_error(object, &path, e) {
                    Error::NotFound(_) => Ok(()),
                    other => Err(other),
                };
            }
        };
        drop_os_cache(&file, 0, 0).map_err(|e| Error::io(&path, e))
    }

    fn describe(&self) -> String {
        format!("mmap://{}", self.files.root().display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_views_of_one_map() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Mmap::open(tmp.path()).unwrap();
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
        store.write("m", &data).unwrap();
        let all = store.read_all("m").unwrap();
        let part = store.read("m", 100..200).unwrap();
        assert_eq!(&part[..], &data[100..200]);
        assert_eq!(part.as_ptr(), all[100..].as_ptr(), "zero-copy view");
        let many = store.read_many("m", &[0..1, 19_999..20_000]).unwrap();
        assert_eq!((many[0][0], many[1][0]), (data[0], data[19_999]));
    }

    #[test]
    fn bytes_outlive_rewrites_and_evictions() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Mmap::open(tmp.path()).unwrap();
        store.write("m", &[1u8; 8192]).unwrap();
        let old = store.read("m", 0..8192).unwrap();
        // Exercises the madvise and fadvise paths with a live view.
        store.evict("m").unwrap();
        assert!(old.iter().all(|&b| b == 1));
        store.write("m", &[2u8; 100]).unwrap();
        assert!(old.iter().all(|&b| b == 1), "old view keeps old contents");
        assert_eq!(&store.read_all("m").unwrap()[..], &[2u8; 100][..]);
        store.evict("m").unwrap();
        assert_eq!(store.len("m").unwrap(), 100);
        store.delete("m").unwrap();
        assert!(matches!(store.read("m", 0..1), Err(Error::NotFound(_))));
        store.evict("m").unwrap();
    }

    #[test]
    fn empty_objects_map_to_empty_reads() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Mmap::open(tmp.path()).unwrap();
        store.write("e", b"").unwrap();
        assert!(store.read_all("e").unwrap().is_empty());
        assert!(store.read("e", 0..0).unwrap().is_empty());
        assert!(matches!(
            store.read("e", 0..1),
            Err(Error::Truncated { .. })
        ));
    }
}
