//! [`open_url`]: picks a storage backend from a URL-like string, so command
//! lines and configuration files can name any backend.

use std::path::Path;
use std::sync::Arc;

use super::{LocalDir, LocalOptions, Memory, Mmap, ObjectStorage, Storage};
use crate::{Error, Result};

/// The forms [`open_url`] accepts, for error messages.
const ACCEPTED: &str = "mem://, file:///abs/path, direct+file:///abs/path, mmap:///abs/path, \
                        s3://bucket/prefix, objfs:///abs/path, or a plain path";

/// Opens the storage a URL names:
///
/// | URL                     | Backend                                     |
/// |-------------------------|---------------------------------------------|
/// | `mem://`                | a fresh, empty [`Memory`]                   |
/// | `file:///abs/path`      | [`LocalDir`]                                |
/// | `direct+file:///path`   | [`LocalDir`] with `O_DIRECT` reads          |
/// | `mmap:///abs/path`      | [`Mmap`]                                    |
/// | `s3://bucket/prefix`    | [`ObjectStorage::s3`]                       |
/// | `objfs:///abs/path`     | [`ObjectStorage::local`] (object-store API over a directory) |
/// | `some/dir` (no scheme)  | [`LocalDir`]                                |
///
/// Directories are created if missing. Paths are taken literally (no
/// percent-decoding). An unknown scheme is an
/// [`Error::InvalidArgument`](crate::Error) listing the accepted forms.
pub fn open_url(url: &str) -> Result<Arc<dyn Storage>> {
    let Some((scheme, rest)) = url.split_once("://") else {
        if url.is_empty() {
            return Err(Error::invalid(format!(
                "empty storage URL: use one of {ACCEPTED}"
            )));
        }
        return Ok(Arc::new(LocalDir::open(url, LocalOptions::default())?));
    };
    let storage: Arc<dyn Storage> = match scheme {
        "mem" => {
            if !rest.is_empty() {
                return Err(Error::invalid(format!(
                    "{url:?}: mem:// takes no path (each open is a fresh empty store)"
                )));
            }
            Arc::new(Memory::new())
        }
        "file" => Arc::new(LocalDir::open(
            absolute_path(url, rest)?,
            LocalOptions::default(),
        )?),
        "direct+file" => Arc::new(LocalDir::open(
            absolute_path(url, rest)?,
            LocalOptions { direct_io: true },
        )?),
        "mmap" => Arc::new(Mmap::open(absolute_path(url, rest)?)?),
        "s3" => Arc::new(ObjectStorage::s3(url)?),
        "objfs" => Arc::new(ObjectStorage::local(absolute_path(url, rest)?)?),
        _ => {
            return Err(Error::invalid(format!(
                "unknown storage scheme {scheme:?} in {url:?}: use one of {ACCEPTED}"
            )));
        }
    };
    Ok(storage)
}

/// The path of a `scheme:///abs/path` URL: what follows `://` must be an
/// absolute path (an empty authority), as in `file:///data/index`.
fn absolute_path<'a>(url: &str, rest: &'a str) -> Result<&'a Path> {
    if !rest.starts_with('/') {
        return Err(Error::invalid(format!(
            "{url:?}: expected an absolute path after \"://\" (three slashes, as in file:///data/index)"
        )));
    }
    Ok(Path::new(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url_for(scheme: &str, dir: &Path) -> String {
        format!("{scheme}://{}", dir.display())
    }

    #[test]
    fn each_scheme_opens_its_backend() {
        let tmp = tempfile::tempdir().unwrap();
        let cases = [
            ("mem://".to_owned(), "mem://"),
            (url_for("file", &tmp.path().join("f")), "file://"),
            (
                url_for("direct+file", &tmp.path().join("d")),
                "direct+file://",
            ),
            (url_for("mmap", &tmp.path().join("m")), "mmap://"),
            (tmp.path().join("p").display().to_string(), "file://"),
        ];
        for (url, described) in cases {
            let store = open_url(&url).unwrap();
            assert!(
                store.describe().starts_with(described),
                "{url} -> {}",
                store.describe()
            );
            store.write("x/y", b"hello").unwrap();
            assert_eq!(&store.read("x/y", 1..3).unwrap()[..], b"el");
        }
        // The directory backends share one layout: what file:// wrote,
        // mmap:// reads.
        let again = open_url(&url_for("mmap", &tmp.path().join("f"))).unwrap();
        assert_eq!(&again.read_all("x/y").unwrap()[..], b"hello");
    }

    #[test]
    fn objfs_opens_object_storage_over_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open_url(&url_for("objfs", tmp.path())).unwrap();
        store.write("k", b"value").unwrap();
        assert_eq!(&store.read("k", 0..5).unwrap()[..], b"value");
    }

    #[test]
    fn bad_urls_are_invalid_arguments_naming_the_accepted_forms() {
        for url in ["", "ftp://host/x", "file://relative", "mem://name"] {
            match open_url(url) {
                Err(Error::InvalidArgument(message)) => {
                    assert!(!message.is_empty(), "{url}");
                }
                other => panic!("{url}: expected InvalidArgument, got {other:?}"),
            }
        }
        let Err(Error::InvalidArgument(message)) = open_url("ftp://x") else {
            panic!("ftp should be rejected");
        };
        assert!(message.contains("s3://") && message.contains("mmap://"));
    }
}
