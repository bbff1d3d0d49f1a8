//! The one error type shared by every lidx crate.

use std::path::PathBuf;

/// Result alias used across lidx.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in lidx, as a value the caller can match on.
///
/// The enum is `#[non_exhaustive]`: engines add failure modes over time, so
/// downstream matches need a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed; `path` names the file involved.
    #[error("{}: {source}", path.display())]
    Io {
        /// File or directory the failing call touched.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is shorter than its own header says it should be.
    #[error("{}: truncated: expected {expected} bytes, found {found}", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes the header promised.
        expected: u64,
        /// Bytes actually present.
        found: u64,
    },
    /// A file's size does not match the element count in its header.
    #[error("{}: header says {header_count} keys but the payload holds {payload_bytes} bytes ({} bytes per key)", path.display(), key_width)]
    CountMismatch {
        /// The file.
        path: PathBuf,
        /// Count stored in the header.
        header_count: u64,
        /// Bytes after the header.
        payload_bytes: u64,
        /// Width of one key in bytes.
        key_width: u64,
    },
    /// Input that must be sorted is not; `index` is the first element that is
    /// smaller than its predecessor.
    #[error("input is not sorted: key at index {index} is smaller than the key before it")]
    Unsorted {
        /// Index of the first out-of-order key.
        index: usize,
    },
    /// A floating-point key is NaN, which has no place in a total order.
    #[error("NaN key at index {index}: NaN has no place in a total order")]
    NanKey {
        /// Index of the NaN key (0 when not part of a sequence).
        index: usize,
    },
    /// A persisted structure failed a checksum, magic-number or bounds check.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// A caller-supplied argument is invalid (unknown name, bad parameter...).
    #[error("{0}")]
    InvalidArgument(String),
    /// A line of a text input could not be parsed.
    #[error("line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What was wrong with it.
        message: String,
    },
    /// The engine does not support the requested operation.
    #[error("unsupported operation: {0}")]
    Unsupported(String),
    /// A named thing (dataset, engine, workload, object) does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// An error reported by a third-party storage engine used as a peer.
    #[error("{engine}: {message}")]
    Backend {
        /// Which engine reported it.
        engine: &'static str,
        /// Its message.
        message: String,
    },
}

impl Error {
    /// Wraps an [`std::io::Error`] with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds an [`Error::InvalidArgument`] from anything printable.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    /// Builds an [`Error::Corrupt`] from anything printable.
    pub fn corrupt(message: impl Into<String>) -> Self {
        Error::Corrupt(message.into())
    }
}
