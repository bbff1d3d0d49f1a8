//! [`LocalDir`]: objects as files under a directory, read positionally,
//! optionally bypassing the operating system's page cache with `O_DIRECT`.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::RwLock;

use super::{Storage, check_object_name, check_range};
use crate::{Error, Result};

/// Name prefix of the temporary files `write` renames into place; `list`
/// skips them and object names may not use it.
const TEMP_PREFIX: &str = ".lidx-tmp-";

/// Alignment of offsets, lengths and buffers for `O_DIRECT` reads; 4096
/// satisfies both 512-byte and 4 KiB logical-block devices.
const DIRECT_ALIGN: u64 = 4096;

/// Open file descriptors kept per directory; beyond this an arbitrary one is
/// closed so a store with many objects cannot exhaust descriptors.
const MAX_OPEN_HANDLES: usize = 256;

/// Most threads one `read_many` call spreads its reads over.
const MAX_READ_THREADS: usize = 16;

/// Makes temporary file names unique between concurrent writers in one
/// process (the process id separates processes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// How a [`LocalDir`] reads its files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalOptions {
    /// Read with `O_DIRECT`, bypassing the operating system's page cache, so
    /// every read costs a device access (for cold-read measurements). On
    /// file systems without `O_DIRECT` (tmpfs) reads fall back to buffered
    /// reads followed by `POSIX_FADV_DONTNEED`.
    pub direct_io: bool,
}

/// A [`Storage`] over a local directory: each object is a file, names with
/// `/` are subdirectories.
///
/// Writes are atomic and durable (temporary file, `fsync`, `rename`,
/// directory `fsync`). Open file handles are cached per object and dropped
/// when the object is rewritten or deleted through this value; files changed
/// behind its back by other processes are not detected.
#[derive(Debug)]
pub struct LocalDir {
    root: PathBuf,
    options: LocalOptions,
    handles: RwLock<HashMap<String, Arc<Handle>>>,
}

/// One open object file and how to read it.
#[derive(Debug)]
struct Handle {
    file: File,
    len: u64,
    mode: ReadMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadMode {
    /// Plain positional reads through the page cache.
    Buffered,
    /// `O_DIRECT` reads of aligned covering ranges.
    Direct,
    /// `O_DIRECT` was refused: buffered reads, then drop the pages read.
    BufferedThenDrop,
}

impl LocalDir {
    /// Opens (creating it if missing) the directory `root` as a store.
    pub fn open(root: impl AsRef<Path>, options: LocalOptions) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
        let meta = fs::metadata(&root).map_err(|e| Error::io(&root, e))?;
        if !meta.is_dir() {
            return Err(Error::invalid(format!(
                "{}: not a directory",
                root.display()
            )));
        }
        Ok(Self {
            root,
            options,
            handles: RwLock::new(HashMap::new()),
        })
    }

    /// The directory holding the objects.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The options this store was opened with.
    pub fn options(&self) -> LocalOptions {
        self.options
    }

    /// Validates `object` and returns the file that holds it.
    pub(super) fn object_path(&self, object: &str) -> Result<PathBuf> {
        check_object_name(object)?;
        if object.split('/').any(|c| c.starts_with(TEMP_PREFIX)) {
            return Err(Error::invalid(format!(
                "invalid object name {object:?}: names starting with {TEMP_PREFIX:?} are reserved for temporary files"
            )));
        }
        Ok(self.root.join(object))
    }

    /// The error for a failed open of `object`: missing objects (including
    /// a path component that is a file) become [`Error::NotFound`].
    pub(super) fn open_error(&self, object: &str, path: &Path, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) {
            self.not_found(object)
        } else {
            Error::io(path, e)
        }
    }

    fn not_found(&self, object: &str) -> Error {
        Error::NotFound(format!("object {object:?} in {}", self.describe()))
    }

    /// Opens `object` read-only, rejecting directories as missing objects.
    pub(super) fn open_plain(&self, object: &str) -> Result<(File, u64)> {
        let path = self.object_path(object)?;
        let file = File::open(&path).map_err(|e| self.open_error(object, &path, e))?;
        let len = self.file_len(object, &path, &file)?;
        Ok((file, len))
    }

    fn file_len(&self, object: &str, path: &Path, file: &File) -> Result<u64> {
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        if !meta.is_file() {
            return Err(self.not_found(object));
        }
        Ok(meta.len())
    }

    fn open_handle(&self, object: &str) -> Result<Handle> {
        if !self.options.direct_io {
            let (file, len) = self.open_plain(object)?;
            return Ok(Handle {
                file,
                len,
                mode: ReadMode::Buffered,
            });
        }
        let path = self.object_path(object)?;
        let direct = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path);
        let (file, mode) = match direct {
            Ok(file) => (file, ReadMode::Direct),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let file = File::open(&path).map_err(|e| self.open_error(object, &path, e))?;
                (file, ReadMode::BufferedThenDrop)
            }
            Err(e) => return Err(self.open_error(object, &path, e)),
        };
        let len = self.file_len(object, &path, &file)?;
        Ok(Handle { file, len, mode })
    }

    /// The cached handle of `object`, opening it on first use.
    fn handle(&self, object: &str) -> Result<Arc<Handle>> {
        if let Some(handle) = self.handles.read().get(object) {
            return Ok(Arc::clone(handle));
        }
        // Opening while holding the write lock orders the open against
        // `forget_handle`: a writer forgets after its rename, so a handle
        // opened before the rename is always forgotten, never re-cached.
        let mut handles = self.handles.write();
        if let Some(handle) = handles.get(object) {
            return Ok(Arc::clone(handle));
        }
        let handle = Arc::new(self.open_handle(object)?);
        if handles.len() >= MAX_OPEN_HANDLES
            && let Some(victim) = handles.keys().next().cloned()
        {
            handles.remove(&victim);
        }
        handles.insert(object.to_owned(), Arc::clone(&handle));
        Ok(handle)
    }

    fn forget_handle(&self, object: &str) {
        self.handles.write().remove(object);
    }

    fn read_with(&self, handle: &Handle, object: &str, range: Range<u64>) -> Result<Bytes> {
        check_range(object, &range, handle.len)?;
        if range.start == range.end {
            return Ok(Bytes::new());
        }
        match handle.mode {
            ReadMode::Buffered => self.read_buffered(handle, object, range),
            ReadMode::BufferedThenDrop => {
                let data = self.read_buffered(handle, object, range.clone())?;
                drop_os_cache(&handle.file, range.start, range.end - range.start)
                    .map_err(|e| Error::io(self.root.join(object), e))?;
                Ok(data)
            }
            ReadMode::Direct => self.read_direct(handle, object, range),
        }
    }

    fn read_buffered(&self, handle: &Handle, object: &str, range: Range<u64>) -> Result<Bytes> {
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        handle
            .file
            .read_exact_at(&mut buf, range.start)
            .map_err(|e| self.short_read_error(object, &range, e))?;
        Ok(Bytes::from(buf))
    }

    /// Reads the aligned blocks covering `range` into an aligned window of an
    /// over-allocated buffer and returns the requested part of it, without
    /// copying.
    fn read_direct(&self, handle: &Handle, object: &str, range: Range<u64>) -> Result<Bytes> {
        let first = range.start / DIRECT_ALIGN * DIRECT_ALIGN;
        let last = range.end.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let span = (last - first) as usize;
        let mut buf = vec![0u8; span + DIRECT_ALIGN as usize];
        let offset = buf.as_ptr().align_offset(DIRECT_ALIGN as usize);
        let window = &mut buf[offset..offset + span];
        let mut filled = 0usize;
        while filled < span {
            match handle
                .file
                .read_at(&mut window[filled..], first + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    // A read that is not a whole number of blocks stopped at
                    // the end of the file; the next offset would be unaligned.
                    if !(n as u64).is_multiple_of(DIRECT_ALIGN) {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(self.root.join(object), e)),
            }
        }
        let wanted_end = (range.end - first) as usize;
        if filled < wanted_end {
            // The file shrank since it was opened (changed behind our back).
            return Err(Error::Truncated {
                path: object.into(),
                expected: range.end,
                found: first + filled as u64,
            });
        }
        let start = offset + (range.start - first) as usize;
        Ok(Bytes::from(buf).slice(start..offset + wanted_end))
    }

    fn short_read_error(&self, object: &str, range: &Range<u64>, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            // The file shrank since it was opened (changed behind our back).
            Error::Truncated {
                path: object.into(),
                expected: range.end,
                found: range.start,
            }
        } else {
            Error::io(self.root.join(object), e)
        }
    }

    /// Creates the parent directories of `path` and makes their entries
    /// durable.
    fn create_parents(&self, path: &Path) -> Result<()> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        if parent.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        // Each new directory's entry lives in its own parent, up to the root.
        let mut dir = parent;
        while dir != self.root {
            let Some(up) = dir.parent() else { break };
            sync_dir(up)?;
            dir = up;
        }
        Ok(())
    }

    fn write_temp(tmp: &Path, data: &[u8]) -> Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(|e| Error::io(tmp, e))?;
        file.write_all(data).map_err(|e| Error::io(tmp, e))?;
        file.sync_all().map_err(|e| Error::io(tmp, e))
    }
}

/// Flushes a directory so entries created, renamed or removed in it are
/// durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Asks the kernel to drop its cached pages of `len` bytes of `file` from
/// `offset` (`len == 0` means to the end of the file).
pub(super) fn drop_os_cache(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor
    // is owned by `file`, which stays open for the duration of the call.
    let rc =
        unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

impl Storage for LocalDir {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        let handle = self.handle(object)?;
        self.read_with(&handle, object, range)
    }

    fn read_all(&self, object: &str) -> Result<Bytes> {
        let handle = self.handle(object)?;
        self.read_with(&handle, object, 0..handle.len)
    }

    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let handle = self.handle(object)?;
        if ranges.len() < 2 {
            return ranges
                .iter()
                .map(|r| self.read_with(&handle, object, r.clone()))
                .collect();
        }
        // Validate everything first so no thread starts on a doomed batch.
        for range in ranges {
            check_range(object, range, handle.len)?;
        }
        let threads = ranges.len().min(MAX_READ_THREADS);
        let per_thread = ranges.len().div_ceil(threads);
        let read_chunk = |chunk: &[Range<u64>]| -> Result<Vec<Bytes>> {
            chunk
                .iter()
                .map(|r| self.read_with(&handle, object, r.clone()))
                .collect()
        };
        let mut chunks = ranges.chunks(per_thread);
        let own = chunks.next().unwrap_or_default();
        let parts: Vec<Result<Vec<Bytes>>> = std::thread::scope(|scope| {
            let spawned: Vec<_> = chunks
                .map(|chunk| scope.spawn(move || read_chunk(chunk)))
                .collect();
            // The calling thread takes the first chunk instead of idling.
            let mut parts = vec![read_chunk(own)];
            for thread in spawned {
                parts.push(
                    thread
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                );
            }
            parts
        });
        let mut out = Vec::with_capacity(ranges.len());
        for part in parts {
            out.extend(part?);
        }
        Ok(out)
    }

    fn len(&self, object: &str) -> Result<u64> {
        Ok(self.handle(object)?.len)
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        let path = self.object_path(object)?;
        self.create_parents(&path)?;
        let dir = path.parent().unwrap_or(&self.root);
        let tmp = dir.join(format!(
            "{TEMP_PREFIX}{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let written = Self::write_temp(&tmp, data)
            .and_then(|()| fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e)));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.forget_handle(object);
        sync_dir(dir)
    }

    fn delete(&self, object: &str) -> Result<()> {
        let path = self.object_path(object)?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                self.forget_handle(object);
                return Ok(());
            }
            Err(e) => return Err(Error::io(&path, e)),
        }
        self.forget_handle(object);
        sync_dir(path.parent().unwrap_or(&self.root))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        walk(&self.root, "", prefix, &mut names)?;
        names.sort();
        Ok(names)
    }

    /// Drops the operating system's cached pages of `object` (a missing
    /// object has nothing cached, so that is not an error).
    fn evict(&self, object: &str) -> Result<()> {
        let path = self.object_path(object)?;
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) => {
                return match self.open_error(object, &path, e) {
                    Error::NotFound(_) => Ok(()),
                    other => Err(other),
                };
            }
        };
        drop_os_cache(&file, 0, 0).map_err(|e| Error::io(&path, e))
    }

    fn describe(&self) -> String {
        let scheme = if self.options.direct_io {
            "direct+file"
        } else {
            "file"
        };
        format!("{scheme}://{}", self.root.display())
    }
}

/// Collects the object names under `dir` (named `rel` relative to the root)
/// that start with `prefix`, skipping temporary files and subtrees that
/// cannot match.
fn walk(dir: &Path, rel: &str, prefix: &str, out: &mut Vec<String>) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let file_name = entry.file_name();
        // Non-UTF-8 names cannot be object names, so they are not objects.
        let Some(name) = file_name.to_str() else {
            continue;
        };
        if name.starts_with(TEMP_PREFIX) {
            continue;
        }
        let full = if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        };
        let path = entry.path();
        let meta = fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        if meta.is_dir() {
            let as_dir = format!("{full}/");
            if as_dir.starts_with(prefix) || prefix.starts_with(&as_dir) {
                walk(&path, &full, prefix, out)?;
            }
        } else if meta.is_file() && full.starts_with(prefix) {
            out.push(full);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_under_work() -> tempfile::TempDir {
        // /work is ext4, which supports O_DIRECT (tmpfs would not).
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tmp");
        fs::create_dir_all(&base).unwrap();
        tempfile::tempdir_in(base).unwrap()
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn direct_reads_match_buffered_reads_at_unaligned_ranges() {
        let tmp = dir_under_work();
        let direct = LocalDir::open(tmp.path(), LocalOptions { direct_io: true }).unwrap();
        let data = pattern(3 * 4096 + 123);
        direct.write("obj", &data).unwrap();
        let handle = direct.handle("obj").unwrap();
        assert_eq!(handle.mode, ReadMode::Direct, "ext4 should accept O_DIRECT");
        let len = data.len() as u64;
        for range in [
            0..1,
            1..4095,
            4095..4097,
            0..4096,
            4096..8192,
            5000..len,
            len - 1..len,
            0..len,
            len..len,
        ] {
            let got = direct.read("obj", range.clone()).unwrap();
            assert_eq!(&got[..], &data[range.start as usize..range.end as usize]);
        }
        assert!(matches!(
            direct.read("obj", len - 1..len + 1),
            Err(Error::Truncated { .. })
        ));
        assert_eq!(&direct.read_all("obj").unwrap()[..], &data[..]);
        direct.evict("obj").unwrap();
    }

    #[test]
    fn drop_after_read_mode_reads_correctly() {
        let tmp = dir_under_work();
        let store = LocalDir::open(tmp.path(), LocalOptions::default()).unwrap();
        let data = pattern(10_000);
        store.write("x", &data).unwrap();
        // Force the fallback path that tmpfs would take.
        let (file, len) = store.open_plain("x").unwrap();
        let handle = Handle {
            file,
            len,
            mode: ReadMode::BufferedThenDrop,
        };
        let got = store.read_with(&handle, "x", 17..9000).unwrap();
        assert_eq!(&got[..], &data[17..9000]);
    }

    #[test]
    fn drop_os_cache_rejects_nothing_on_a_regular_file() {
        let tmp = dir_under_work();
        let path = tmp.path().join("f");
        fs::write(&path, b"abc").unwrap();
        let file = File::open(&path).unwrap();
        drop_os_cache(&file, 0, 0).unwrap();
        drop_os_cache(&file, 1, 2).unwrap();
        assert!(drop_os_cache(&file, u64::MAX, 0).is_err());
    }

    #[test]
    fn writes_leave_no_temp_files_and_reserved_names_are_rejected() {
        let tmp = dir_under_work();
        let store = LocalDir::open(tmp.path(), LocalOptions::default()).unwrap();
        store.write("a/b/c", b"1").unwrap();
        store.write("a/b/c", b"22").unwrap();
        assert_eq!(store.list("").unwrap(), ["a/b/c"]);
        let raw: Vec<_> = fs::read_dir(tmp.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(raw, ["c"]);
        assert!(matches!(
            store.write(".lidx-tmp-1", b""),
            Err(Error::InvalidArgument(_))
        ));
        // A temp file left by a crash is not listed.
        fs::write(tmp.path().join(".lidx-tmp-crash"), b"x").unwrap();
        assert_eq!(store.list("").unwrap(), ["a/b/c"]);
    }

    #[test]
    fn directories_and_paths_through_files_are_not_objects() {
        let tmp = dir_under_work();
        let store = LocalDir::open(tmp.path(), LocalOptions::default()).unwrap();
        store.write("d/x", b"1").unwrap();
        assert!(matches!(store.read("d", 0..0), Err(Error::NotFound(_))));
        assert!(matches!(store.read("d/x/y", 0..0), Err(Error::NotFound(_))));
        store.delete("d/x/y").unwrap();
        store.evict("missing").unwrap();
    }

    #[test]
    fn read_many_uses_threads_and_keeps_order() {
        let tmp = dir_under_work();
        let store = LocalDir::open(tmp.path(), LocalOptions::default()).unwrap();
        let data = pattern(50_000);
        store.write("o", &data).unwrap();
        let ranges: Vec<_> = (0..40u64).map(|i| i * 1000..i * 1000 + 777).collect();
        let got = store.read_many("o", &ranges).unwrap();
        assert_eq!(got.len(), ranges.len());
        for (range, bytes) in ranges.iter().zip(&got) {
            assert_eq!(&bytes[..], &data[range.start as usize..range.end as usize]);
        }
        let mut bad = ranges.clone();
        bad.push(49_999..50_001);
        assert!(matches!(
            store.read_many("o", &bad),
            Err(Error::Truncated { .. })
        ));
    }
}
