//! [`ObjectStorage`]: a [`Storage`] over any `object_store` backend
//! (in-memory, local filesystem, Amazon S3 and S3-compatible servers).

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::runtime::{Handle, Runtime};

use super::{Bytes, Storage, check_object_name};
use crate::{Error, Result};

/// How many range requests of one [`Storage::read_many`] call are in flight
/// at once; enough to hide S3 latency without opening hundreds of sockets.
const READ_MANY_CONCURRENCY: usize = 16;

/// Name used in [`Error::Backend`] for failures reported by `object_store`.
const ENGINE: &str = "object_store";

/// Explicit connection settings for [`ObjectStorage::s3_with`], for callers
/// (tests, tools) that must not depend on the process environment.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Options {
    /// Endpoint URL of an S3-compatible server (`http://127.0.0.1:9000`);
    /// `None` means Amazon S3 itself.
    pub endpoint: Option<String>,
    /// Region, e.g. `us-east-1`.
    pub region: String,
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key.
    pub secret_access_key: String,
    /// Whether plain `http://` endpoints are accepted.
    pub allow_http: bool,
}

impl fmt::Debug for S3Options {
    // Hand-written so the secret never ends up in logs or panic messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// A [`Storage`] over an [`ObjectStore`], optionally confined to a key
/// prefix.
///
/// `object_store` is asynchronous; this type owns a small tokio runtime
/// (two worker threads, started on first use) and blocks on it, so callers
/// stay synchronous. Its methods therefore **must not be called from inside
/// a tokio runtime** — that includes async tasks and `spawn_blocking`
/// threads, which carry a runtime handle. Such calls return
/// [`Error::Unsupported`] instead of blocking a runtime worker or panicking;
/// call from a plain thread instead.
///
/// Object names map to keys `prefix/name`. `write` is a single PUT, which S3
/// and the local filesystem backend (write to a temporary file, fsync,
/// rename) both apply atomically.
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    /// Key prefix without leading or trailing `/`; empty for none.
    prefix: String,
    /// URL of the storage root, for `describe` and error messages.
    url: String,
    /// Built lazily so constructors stay infallible where the backend is,
    /// and storages that are never used start no threads.
    runtime: OnceLock<std::io::Result<Runtime>>,
}

impl fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("url", &self.url)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Drop for ObjectStorage {
    fn drop(&mut self) {
        // Dropping a runtime waits for its threads, which tokio forbids
        // (by panicking) inside another runtime; shutting down in the
        // background is always allowed.
        if let Some(Ok(runtime)) = self.runtime.take() {
            if Handle::try_current().is_ok() {
                runtime.shutdown_background();
            } else {
                drop(runtime);
            }
        }
    }
}

impl ObjectStorage {
    /// Wraps any [`ObjectStore`]. `prefix` (may be empty) is a `/`-separated
    /// key prefix every object name is placed under; `url` describes the
    /// store root (without the prefix) in messages.
    pub fn from_store(store: Arc<dyn ObjectStore>, prefix: &str, url: &str) -> Result<Self> {
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() {
            check_object_name(prefix)
                .map_err(|_| Error::invalid(format!("invalid key prefix {prefix:?}")))?;
            parse_key(prefix)?;
        }
        let root = url.trim_end_matches('/');
        let url = if prefix.is_empty() {
            root.to_string()
        } else {
            format!("{root}/{prefix}")
        };
        Ok(ObjectStorage {
            store,
            prefix: prefix.to_string(),
            url,
            runtime: OnceLock::new(),
        })
    }

    /// An empty in-memory object store (`memory://`), for tests.
    pub fn memory() -> Self {
        ObjectStorage {
            store: Arc::new(InMemory::new()),
            prefix: String::new(),
            url: "memory://".to_string(),
            runtime: OnceLock::new(),
        }
    }

    /// Objects stored as files under the directory `root`, which is created
    /// if missing. Writes are fsynced before they return.
    pub fn local(root: &std::path::Path) -> Result<Self> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let root = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
        let store = LocalFileSystem::new_with_prefix(&root)
            .map_err(|e| backend_error(&root.display().to_string(), e))?
            .with_fsync(true)
            .with_automatic_cleanup(true);
        Self::from_store(Arc::new(store), "", &format!("file://{}", root.display()))
    }

    /// Objects in Amazon S3 (or an S3-compatible server) at
    /// `s3://bucket/prefix`, configured from the usual environment
    /// variables: `AWS_ENDPOINT_URL` / `AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
    /// `AWS_ALLOW_HTTP`.
    pub fn s3(url: &str) -> Result<Self> {
        let (bucket, prefix) = parse_s3_url(url)?;
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| backend_error(url, e))?;
        Self::from_store(Arc::new(store), prefix, &format!("s3://{bucket}"))
    }

    /// Objects at `s3://bucket/prefix` with explicit connection settings;
    /// the environment is not consulted.
    pub fn s3_with(url: &str, options: &S3Options) -> Result<Self> {
        let (bucket, prefix) = parse_s3_url(url)?;
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(&options.region)
            .with_access_key_id(&options.access_key_id)
            .with_secret_access_key(&options.secret_access_key)
            .with_allow_http(options.allow_http);
        if let Some(endpoint) = &options.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        let store = builder.build().map_err(|e| backend_error(url, e))?;
        Self::from_store(Arc::new(store), prefix, &format!("s3://{bucket}"))
    }

    /// Runs `future` to completion on this storage's runtime.
    fn block_on<F: Future>(&self, future: F) -> Result<F::Output> {
        if Handle::try_current().is_ok() {
            return Err(Error::Unsupported(format!(
                "{}: ObjectStorage blocks on its own runtime and cannot be used from inside \
                 a tokio runtime (async task or spawn_blocking); call it from a plain thread",
                self.url
            )));
        }
        let runtime = self.runtime.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("lidx-object-store")
                .enable_all()
                .build()
        });
        match runtime {
            Ok(runtime) => Ok(runtime.block_on(future)),
            Err(e) => Err(Error::Backend {
                engine: ENGINE,
                message: format!("{}: cannot start the tokio runtime: {e}", self.url),
            }),
        }
    }

    /// The store key of `object`, after checking its name.
    fn key(&self, object: &str) -> Result<StorePath> {
        check_object_name(object)?;
        if self.prefix.is_empty() {
            parse_key(object)
        } else {
            parse_key(&format!("{}/{object}", self.prefix))
        }
    }

    fn object_url(&self, object: &str) -> String {
        format!("{}/{object}", self.url)
    }

    /// Maps an `object_store` error about `object` to a lidx error.
    fn error(&self, object: &str, e: object_store::Error) -> Error {
        match e {
            object_store::Error::NotFound { .. } => Error::NotFound(self.object_url(object)),
            other => backend_error(&self.object_url(object), other),
        }
    }

    fn truncated(&self, object: &str, expected: u64, found: u64) -> Error {
        Error::Truncated {
            path: self.object_url(object).into(),
            expected,
            found,
        }
    }

    /// Checks that `data` is exactly the bytes of `range`.
    fn verify(&self, object: &str, range: &Range<u64>, data: Bytes) -> Result<Bytes> {
        let want = range.end - range.start;
        let got = data.len() as u64;
        if got < want {
            // Stores clamp ranges to the object's end, so a short answer
            // means the object ends at `start + got`.
            return Err(self.truncated(object, range.end, range.start + got));
        }
        if got > want {
            return Err(Error::Backend {
                engine: ENGINE,
                message: format!(
                    "{}: asked for {want} bytes ({}..{}), got {got}",
                    self.object_url(object),
                    range.start,
                    range.end
                ),
            });
        }
        Ok(data)
    }

    /// Explains a failed range request: stores disagree on how they report a
    /// range that starts past the end (416, a generic range error...), so a
    /// HEAD decides whether it is [`Error::Truncated`].
    async fn range_failure(
        &self,
        object: &str,
        key: &StorePath,
        range: &Range<u64>,
        e: object_store::Error,
    ) -> Error {
        if matches!(e, object_store::Error::NotFound { .. }) {
            return self.error(object, e);
        }
        match self.store.head(key).await {
            Ok(meta) if meta.size < range.end => self.truncated(object, range.end, meta.size),
            Ok(_) => self.error(object, e),
            Err(head_error) => self.error(object, head_error),
        }
    }

    async fn read_range(&self, object: &str, key: &StorePath, range: Range<u64>) -> Result<Bytes> {
        match self.store.get_range(key, range.clone()).await {
            Ok(data) => self.verify(object, &range, data),
            Err(e) => Err(self.range_failure(object, key, &range, e).await),
        }
    }

    async fn head_len(&self, object: &str, key: &StorePath) -> Result<u64> {
        self.store
            .head(key)
            .await
            .map(|meta| meta.size)
            .map_err(|e| self.error(object, e))
    }
}

impl Storage for ObjectStorage {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        let key = self.key(object)?;
        check_order(object, &range)?;
        self.block_on(async {
            if range.is_empty() {
                // object_store rejects empty ranges; the contract still
                // wants NotFound / Truncated, which only a HEAD can tell.
                let len = self.head_len(object, &key).await?;
                if range.end > len {
                    return Err(self.truncated(object, range.end, len));
                }
                return Ok(Bytes::new());
            }
            self.read_range(object, &key, range).await
        })?
    }

    fn read_all(&self, object: &str) -> Result<Bytes> {
        let key = self.key(object)?;
        self.block_on(async {
            let result = self
                .store
                .get(&key)
                .await
                .map_err(|e| self.error(object, e))?;
            let size = result.meta.size;
            let data = result.bytes().await.map_err(|e| self.error(object, e))?;
            if (data.len() as u64) != size {
                return Err(self.truncated(object, size, data.len() as u64));
            }
            Ok(data)
        })?
    }

    // Issues one request per range rather than `ObjectStore::get_ranges`:
    // its coalescing reads the gaps between ranges (skewing byte counts) and
    // slices fetched buffers without bounds checks, which panics when a range
    // lies past the end of the object.
    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let key = self.key(object)?;
        for range in ranges {
            check_order(object, range)?;
        }
        self.block_on(async {
            let len_for_empty = if ranges.iter().any(|r| r.is_empty()) {
                Some(self.head_len(object, &key).await?)
            } else {
                None
            };
            let key = &key;
            futures::stream::iter(ranges.iter().cloned())
                .map(|range| async move {
                    match len_for_empty {
                        Some(len) if range.is_empty() => {
                            if range.end > len {
                                Err(self.truncated(object, range.end, len))
                            } else {
                                Ok(Bytes::new())
                            }
                        }
                        _ => self.read_range(object, key, range).await,
                    }
                })
                .buffered(READ_MANY_CONCURRENCY)
                .try_collect()
                .await
        })?
    }

    fn len(&self, object: &str) -> Result<u64> {
        let key = self.key(object)?;
        self.block_on(self.head_len(object, &key))?
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        let key = self.key(object)?;
        let payload = PutPayload::from(Bytes::copy_from_slice(data));
        self.block_on(async {
            self.store
                .put(&key, payload)
                .await
                .map(|_| ())
                .map_err(|e| self.error(object, e))
        })?
    }

    fn delete(&self, object: &str) -> Result<()> {
        let key = self.key(object)?;
        self.block_on(async {
            match self.store.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.error(object, e)),
            }
        })?
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        // object_store lists by whole path segments, while `prefix` is a
        // plain string prefix: list the deepest complete directory it names
        // and filter the rest here.
        let dir = match prefix.rfind('/') {
            Some(slash) if check_object_name(&prefix[..slash]).is_ok() => &prefix[..slash],
            _ => "",
        };
        let listed = match (self.prefix.is_empty(), dir.is_empty()) {
            (true, true) => None,
            (true, false) => Some(parse_key(dir)?),
            (false, true) => Some(parse_key(&self.prefix)?),
            (false, false) => Some(parse_key(&format!("{}/{dir}", self.prefix))?),
        };
        let metas: Vec<object_store::ObjectMeta> = self.block_on(async {
            self.store
                .list(listed.as_ref())
                .try_collect()
                .await
                .map_err(|e| backend_error(&self.object_url(prefix), e))
        })??;
        let mut names: Vec<String> = metas
            .into_iter()
            .filter_map(|meta| {
                let key: &str = meta.location.as_ref();
                let name = if self.prefix.is_empty() {
                    key
                } else {
                    key.strip_prefix(self.prefix.as_str())?.strip_prefix('/')?
                };
                name.starts_with(prefix).then(|| name.to_string())
            })
            .collect();
        names.sort();
        Ok(names)
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}

/// Splits `s3://bucket/prefix` into bucket and prefix (possibly empty).
fn parse_s3_url(url: &str) -> Result<(&str, &str)> {
    let rest = url.strip_prefix("s3://").ok_or_else(|| {
        Error::invalid(format!(
            "invalid S3 URL {url:?}: expected s3://bucket or s3://bucket/prefix"
        ))
    })?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let bucket_ok = !bucket.is_empty()
        && bucket
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !bucket_ok {
        return Err(Error::invalid(format!(
            "invalid S3 URL {url:?}: bad bucket name {bucket:?}"
        )));
    }
    let prefix = prefix.trim_end_matches('/');
    if !prefix.is_empty() && check_object_name(prefix).is_err() {
        return Err(Error::invalid(format!(
            "invalid S3 URL {url:?}: bad key prefix {prefix:?}"
        )));
    }
    Ok((bucket, prefix))
}

/// Parses a key that passed [`check_object_name`]; `object_store` still
/// rejects ASCII control characters.
fn parse_key(key: &str) -> Result<StorePath> {
    StorePath::parse(key).map_err(|e| Error::invalid(format!("invalid object name {key:?}: {e}")))
}

/// Rejects reversed ranges the way [`check_range`](super::check_range) does.
fn check_order(object: &str, range: &Range<u64>) -> Result<()> {
    if range.start > range.end {
        return Err(Error::invalid(format!(
            "{object}: reversed byte range {}..{}",
            range.start, range.end
        )));
    }
    Ok(())
}

fn backend_error(context: &str, e: object_store::Error) -> Error {
    Error::Backend {
        engine: ENGINE,
        message: format!("{context}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_split_into_bucket_and_prefix() {
        assert_eq!(parse_s3_url("s3://b").unwrap(), ("b", ""));
        assert_eq!(parse_s3_url("s3://b/").unwrap(), ("b", ""));
        assert_eq!(parse_s3_url("s3://b/x/y/").unwrap(), ("b", "x/y"));
        for bad in [
            "b/x",
            "s3://",
            "s3:///x",
            "s3://b/../x",
            "s3://b//x",
            "s3://b c/x",
        ] {
            assert!(
                matches!(parse_s3_url(bad), Err(Error::InvalidArgument(_))),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn s3_urls_are_described_with_their_prefix() {
        let options = S3Options {
            endpoint: Some("http://127.0.0.1:1".into()),
            region: "us-east-1".into(),
            access_key_id: "k".into(),
            secret_access_key: "s".into(),
            allow_http: true,
        };
        let s = ObjectStorage::s3_with("s3://bucket/some/prefix/", &options).unwrap();
        assert_eq!(s.describe(), "s3://bucket/some/prefix");
        assert!(!format!("{options:?}").contains("\"s\""));
    }

    #[test]
    fn prefixed_keys_are_joined_and_checked() {
        let s = ObjectStorage::from_store(Arc::new(InMemory::new()), "/p/q/", "memory://").unwrap();
        assert_eq!(s.key("a/b").unwrap().as_ref(), "p/q/a/b");
        assert!(matches!(s.key("a\u{1}b"), Err(Error::InvalidArgument(_))));
        assert!(ObjectStorage::from_store(Arc::new(InMemory::new()), "p/../q", "m://").is_err());
    }

    #[test]
    fn calls_from_inside_a_tokio_runtime_are_refused_not_panicking() {
        let outer = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // A storage used (so its runtime exists) and then dropped inside an
        // async context must neither block nor panic.
        let s = ObjectStorage::memory();
        s.write("x", b"abc").unwrap();
        outer.block_on(async move {
            assert!(matches!(s.len("x"), Err(Error::Unsupported(_))));
            assert!(matches!(s.read("x", 0..1), Err(Error::Unsupported(_))));
            drop(s);
        });
    }

    #[test]
    fn empty_and_reversed_ranges() {
        let s = ObjectStorage::memory();
        s.write("x", b"abc").unwrap();
        assert!(s.read("x", 3..3).unwrap().is_empty());
        assert!(matches!(
            s.read("x", 4..4),
            Err(Error::Truncated {
                expected: 4,
                found: 3,
                ..
            })
        ));
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 2..1;
        assert!(matches!(
            s.read("x", reversed.clone()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            s.read_many("x", &[0..1, reversed]),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(s.read("missing", 0..0), Err(Error::NotFound(_))));
        let got = s.read_many("x", &[1..1, 0..2, 3..3]).unwrap();
        assert_eq!(
            got,
            vec![Bytes::new(), Bytes::from_static(b"ab"), Bytes::new()]
        );
    }

    #[test]
    fn ranges_starting_past_the_end_are_truncated_not_backend_errors() {
        let s = ObjectStorage::memory();
        s.write("x", b"abc").unwrap();
        for range in [3..4, 10..20, 2..5] {
            match s.read("x", range.clone()) {
                Err(Error::Truncated {
                    expected, found, ..
                }) => {
                    assert_eq!((expected, found), (range.end, 3));
                }
                other => panic!("{range:?}: expected Truncated, got {other:?}"),
            }
        }
        assert!(matches!(
            s.read_many("x", &[0..1, 100..200]),
            Err(Error::Truncated { found: 3, .. })
        ));
    }
}
