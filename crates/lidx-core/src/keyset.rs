//! Key-set files: SOSD binary arrays and one-key-per-line text.
//!
//! SOSD layout: a little-endian `u64` count `n`, then `n` little-endian keys
//! (`u64` or IEEE-754 `f64`). Reading maps the file and hands out a slice
//! into the mapping without copying; writing is atomic (temporary file in the
//! same directory, `fsync`, then `rename`), so a crash never leaves a
//! half-written key set under the final name.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::{Error, Result};

const HEADER: usize = 8;

/// Element types that can live in a SOSD file.
pub trait SosdElement: Copy + Send + Sync + 'static + sealed::Sealed {
    /// Name used in error messages.
    const NAME: &'static str;
    /// Decodes one little-endian element.
    fn from_le(bytes: [u8; 8]) -> Self;
    /// Encodes one element little-endian.
    fn to_le(self) -> [u8; 8];
    /// Checks one element read from a file (`f64` rejects NaN).
    fn validate(self, index: usize) -> Result<()>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u64 {}
    impl Sealed for f64 {}
}

impl SosdElement for u64 {
    const NAME: &'static str = "u64";
    fn from_le(bytes: [u8; 8]) -> Self {
        u64::from_le_bytes(bytes)
    }
    fn to_le(self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn validate(self, _index: usize) -> Result<()> {
        Ok(())
    }
}

impl SosdElement for f64 {
    const NAME: &'static str = "f64";
    fn from_le(bytes: [u8; 8]) -> Self {
        f64::from_le_bytes(bytes)
    }
    fn to_le(self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn validate(self, index: usize) -> Result<()> {
        if self.is_nan() {
            Err(Error::NanKey { index })
        } else {
            Ok(())
        }
    }
}

enum Backing {
    Mapped(Mmap),
    Owned(Vec<u64>),
}

/// Keys of a SOSD file, borrowed straight from a read-only memory map.
pub struct SosdKeys<T: SosdElement> {
    backing: Backing,
    len: usize,
    path: PathBuf,
    _elem: PhantomData<T>,
}

impl<T: SosdElement> SosdKeys<T> {
    /// The keys.
    pub fn as_slice(&self) -> &[T] {
        match &self.backing {
            Backing::Mapped(map) => {
                let payload = &map[HEADER..HEADER + self.len * 8];
                // SAFETY: `open` checked that the payload holds exactly `len`
                // 8-byte elements, that it starts 8-byte aligned (the mapping is
                // page aligned and the header is 8 bytes), and that the target is
                // little-endian, so the bytes are valid `T`s (every bit pattern is
                // a valid u64/f64). The mapping is read-only and lives as long as
                // `self`, which the returned borrow cannot outlive.
                unsafe { std::slice::from_raw_parts(payload.as_ptr().cast::<T>(), self.len) }
            }
            Backing::Owned(words) => {
                // SAFETY: `T` is u64 or f64 (sealed), both 8 bytes with the same
                // alignment as u64 and valid for every bit pattern.
                unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<T>(), self.len) }
            }
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the file holds no keys.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Path the keys were read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks that the keys are sorted ascending; names the first bad index.
    pub fn require_sorted(self) -> Result<Self>
    where
        T: PartialOrd,
    {
        let keys = self.as_slice();
        match keys.windows(2).position(|w| w[1] < w[0]) {
            None => Ok(self),
            Some(i) => Err(Error::Unsorted { index: i + 1 }),
        }
    }
}

/// Opens a SOSD file of `T` keys: validates the header against the file
/// size and (for `f64`) rejects NaN keys, naming the first one.
pub fn open_sosd<T: SosdElement>(path: &Path) -> Result<SosdKeys<T>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if size < HEADER as u64 {
        return Err(Error::Truncated {
            path: path.to_owned(),
            expected: HEADER as u64,
            found: size,
        });
    }
    let mut header = [0u8; HEADER];
    {
        use std::io::Read;
        (&file)
            .read_exact(&mut header)
            .map_err(|e| Error::io(path, e))?;
    }
    let count = u64::from_le_bytes(header);
    let payload = size - HEADER as u64;
    let expected = count
        .checked_mul(8)
        .and_then(|b| b.checked_add(HEADER as u64));
    match expected {
        Some(exp) if exp == size => {}
        Some(exp) if exp > size && payload.is_multiple_of(8) && count > payload / 8 => {
            return Err(Error::Truncated {
                path: path.to_owned(),
                expected: exp,
                found: size,
            });
        }
        _ => {
            return Err(Error::CountMismatch {
                path: path.to_owned(),
                header_count: count,
                payload_bytes: payload,
                key_width: 8,
            });
        }
    }
    let len = usize::try_from(count)
        .map_err(|_| Error::invalid(format!("{}: too many keys", path.display())))?;
    let backing = if cfg!(target_endian = "little") && len > 0 {
        // SAFETY: the file is opened read-only and key-set files are treated as
        // immutable inputs; a concurrent writer truncating the file is the
        // usual mmap caveat (SIGBUS), documented on `SosdKeys`.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        if map.len() as u64 != size || map.as_ptr().align_offset(8) != 0 {
            return Err(Error::corrupt(format!(
                "{}: file changed while being mapped",
                path.display()
            )));
        }
        Backing::Mapped(map)
    } else {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        if bytes.len() as u64 != size {
            return Err(Error::corrupt(format!(
                "{}: file changed while being read",
                path.display()
            )));
        }
        Backing::Owned(
            bytes[HEADER..]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
                .collect(),
        )
    };
    let keys: SosdKeys<T> = SosdKeys {
        backing,
        len,
        path: path.to_owned(),
        _elem: PhantomData,
    };
    for (i, &k) in keys.as_slice().iter().enumerate() {
        k.validate(i)?;
    }
    Ok(keys)
}

/// Opens a SOSD file of `u64` keys.
pub fn open_sosd_u64(path: &Path) -> Result<SosdKeys<u64>> {
    open_sosd::<u64>(path)
}

/// Opens a SOSD file of `f64` keys (NaN rejected).
pub fn open_sosd_f64(path: &Path) -> Result<SosdKeys<f64>> {
    open_sosd::<f64>(path)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory is written, synced and renamed over `path`, and the directory
/// is synced so the rename itself is durable.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> std::io::Result<()> {
        let file = File::create(&tmp)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // Directory fsync makes the rename durable; not all platforms allow
        // opening a directory, so failure to open it is not an error.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// Writes `keys` as a SOSD file, atomically.
pub fn write_sosd<T: SosdElement>(path: &Path, keys: &[T]) -> Result<()> {
    if let Some(i) = keys
        .iter()
        .enumerate()
        .find_map(|(i, k)| k.validate(i).err().map(|_| i))
    {
        return Err(Error::NanKey { index: i });
    }
    write_atomic(path, |out| {
        out.write_all(&(keys.len() as u64).to_le_bytes())?;
        for &k in keys {
            out.write_all(&k.to_le())?;
        }
        Ok(())
    })
}

/// Reads a text key set: one key per line (the line terminator `\n` or
/// `\r\n` is not part of the key). A final empty line is ignored; other
/// empty lines are empty keys.
pub fn read_text_keys(path: &Path) -> Result<Vec<Vec<u8>>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut keys = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        keys.push(line.clone());
    }
    Ok(keys)
}

/// Writes a text key set atomically. Keys containing `\n` cannot be
/// represented and are rejected.
pub fn write_text_keys(path: &Path, keys: &[Vec<u8>]) -> Result<()> {
    if let Some(i) = keys.iter().position(|k| k.contains(&b'\n')) {
        return Err(Error::invalid(format!(
            "key {i} contains a newline and cannot be written to a text key set"
        )));
    }
    write_atomic(path, |out| {
        for k in keys {
            out.write_all(k)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn missing_file_is_io_error() {
        let err = open_sosd_u64(Path::new("/nonexistent/keys")).err().unwrap();
        assert!(matches!(err, Error::Io { .. }));
        assert!(err.to_string().contains("/nonexistent/keys"));
    }

    #[test]
    fn truncated_and_mismatched_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, [1u8, 2, 3]).unwrap();
        assert!(matches!(open_sosd_u64(&p), Err(Error::Truncated { .. })));

        // header says 4 keys, only 2 present
        let mut bytes = 4u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&1u64.to_le_bytes());
        bytes.extend_from_slice(&2u64.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        assert!(matches!(
            open_sosd_u64(&p),
            Err(Error::Truncated {
                expected: 40,
                found: 24,
                ..
            })
        ));

        // header says 1 key, 2 present
        bytes[..8].copy_from_slice(&1u64.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        assert!(matches!(
            open_sosd_u64(&p),
            Err(Error::CountMismatch { .. })
        ));

        // ragged payload
        bytes.push(0);
        std::fs::write(&p, &bytes).unwrap();
        assert!(matches!(
            open_sosd_u64(&p),
            Err(Error::CountMismatch { .. })
        ));

        // absurd count must not overflow
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        assert!(open_sosd_u64(&p).is_err());
    }

    #[test]
    fn unsorted_names_first_index_and_nan_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        write_sosd(&p, &[1u64, 5, 3, 2]).unwrap();
        let keys = open_sosd_u64(&p).unwrap();
        assert!(matches!(
            keys.require_sorted(),
            Err(Error::Unsorted { index: 2 })
        ));

        assert!(matches!(
            write_sosd(&p, &[1.0f64, f64::NAN]),
            Err(Error::NanKey { index: 1 })
        ));
        // a NaN smuggled into a file is found on read
        let mut bytes = 2u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&1.5f64.to_le_bytes());
        bytes.extend_from_slice(&f64::NAN.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        assert!(matches!(open_sosd_f64(&p), Err(Error::NanKey { index: 1 })));
    }

    #[test]
    fn empty_set_roundtrips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        write_sosd::<u64>(&p, &[]).unwrap();
        let keys = open_sosd_u64(&p).unwrap();
        assert!(keys.is_empty());
        assert_eq!(keys.as_slice(), &[] as &[u64]);
    }

    #[test]
    fn write_is_atomic_on_failure() {
        // Writing into a missing directory fails and leaves nothing behind.
        let err = write_sosd(Path::new("/nonexistent-dir/k"), &[1u64]).unwrap_err();
        assert!(matches!(err, Error::Io { .. }));
    }

    #[test]
    fn text_roundtrip_and_newline_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("words.txt");
        let keys = vec![b"".to_vec(), b"a b".to_vec(), vec![0xff, 0], b"zz".to_vec()];
        write_text_keys(&p, &keys).unwrap();
        assert_eq!(read_text_keys(&p).unwrap(), keys);
        std::fs::write(&p, b"x\r\ny\nz").unwrap();
        assert_eq!(
            read_text_keys(&p).unwrap(),
            vec![b"x".to_vec(), b"y".to_vec(), b"z".to_vec()]
        );
        assert!(write_text_keys(&p, &[b"a\nb".to_vec()]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn sosd_u64_roundtrip(keys in proptest::collection::vec(any::<u64>(), 0..2000)) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("k");
            write_sosd(&p, &keys).unwrap();
            let back = open_sosd_u64(&p).unwrap();
            prop_assert_eq!(back.as_slice(), &keys[..]);
            prop_assert_eq!(std::fs::metadata(&p).unwrap().len(), 8 + 8 * keys.len() as u64);
        }

        #[test]
        fn sosd_f64_roundtrip(keys in proptest::collection::vec(
            proptest::num::f64::ANY.prop_filter("no NaN", |v| !v.is_nan()), 0..500)) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("k");
            write_sosd(&p, &keys).unwrap();
            let back = open_sosd_f64(&p).unwrap();
            prop_assert_eq!(back.as_slice().iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                            keys.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
        }
    }
}
