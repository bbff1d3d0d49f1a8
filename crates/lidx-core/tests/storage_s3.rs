//! Conformance of `ObjectStorage` over its three backends: in-memory, local
//! filesystem, and S3 (against a local moto server).

use std::time::Instant;

use lidx_core::Error;
use lidx_core::storage::moto::MotoServer;
use lidx_core::storage::{Bytes, ObjectStorage, Storage};

/// Deterministic bytes whose value depends on position, so a misplaced
/// slice cannot go unnoticed.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The behaviour every `Storage` must have; `s` must start empty.
fn conformance(s: &dyn Storage) {
    let what = s.describe();
    assert!(s.list("").unwrap().is_empty(), "{what}: not empty");

    // write / read_all / len / read
    let data = pattern(10_000, 7);
    s.write("meta", &data).unwrap();
    assert_eq!(s.len("meta").unwrap(), data.len() as u64, "{what}");
    assert_eq!(s.read_all("meta").unwrap(), Bytes::from(data.clone()));
    for range in [0..1, 0..10_000, 123..4567, 9_999..10_000, 500..500] {
        let got = s.read("meta", range.clone()).unwrap();
        assert_eq!(
            &got[..],
            &data[range.start as usize..range.end as usize],
            "{what}: {range:?}"
        );
    }

    // read_many keeps request order, including overlaps and duplicates
    let ranges = [9_000..9_100, 0..16, 8..24, 0..16, 5_000..5_000, 16..32];
    let got = s.read_many("meta", &ranges).unwrap();
    assert_eq!(got.len(), ranges.len());
    for (range, bytes) in ranges.iter().zip(&got) {
        assert_eq!(
            &bytes[..],
            &data[range.start as usize..range.end as usize],
            "{what}: {range:?}"
        );
    }
    assert!(s.read_many("meta", &[]).unwrap().is_empty());

    // Truncated: past the end, starting inside and outside the object
    for range in [9_990..10_001, 10_000..10_001, 20_000..30_000] {
        match s.read("meta", range.clone()) {
            Err(Error::Truncated {
                expected, found, ..
            }) => assert_eq!((expected, found), (range.end, 10_000), "{what}: {range:?}"),
            other => panic!("{what}: {range:?}: expected Truncated, got {other:?}"),
        }
    }
    assert!(
        matches!(
            s.read_many("meta", &[0..4, 9_999..10_004]),
            Err(Error::Truncated {
                expected: 10_004,
                ..
            })
        ),
        "{what}"
    );

    // NotFound for every reading call
    assert!(
        matches!(s.read("nope", 0..1), Err(Error::NotFound(_))),
        "{what}"
    );
    assert!(
        matches!(s.read_all("nope"), Err(Error::NotFound(_))),
        "{what}"
    );
    assert!(matches!(s.len("nope"), Err(Error::NotFound(_))), "{what}");
    assert!(
        matches!(s.read_many("nope", &[0..1, 2..3]), Err(Error::NotFound(_))),
        "{what}"
    );

    // Invalid names are rejected before touching the backend
    for bad in ["", "/abs", "a//b", "../x", "a/./b", "a/..", "trailing/"] {
        assert!(
            matches!(s.write(bad, b"x"), Err(Error::InvalidArgument(_))),
            "{what}: write {bad:?}"
        );
        assert!(
            matches!(s.read(bad, 0..1), Err(Error::InvalidArgument(_))),
            "{what}: read {bad:?}"
        );
        assert!(
            matches!(s.delete(bad), Err(Error::InvalidArgument(_))),
            "{what}: delete {bad:?}"
        );
    }

    // Overwrite replaces the whole object, shorter or longer
    s.write("meta", b"short").unwrap();
    assert_eq!(s.read_all("meta").unwrap(), Bytes::from_static(b"short"));
    assert_eq!(s.len("meta").unwrap(), 5);
    let long = pattern(70_000, 3);
    s.write("meta", &long).unwrap();
    assert_eq!(s.read_all("meta").unwrap(), Bytes::from(long.clone()));
    assert_eq!(
        &s.read("meta", 65_000..70_000).unwrap()[..],
        &long[65_000..]
    );

    // Empty objects exist and have length 0
    s.write("empty", b"").unwrap();
    assert_eq!(s.len("empty").unwrap(), 0);
    assert!(s.read_all("empty").unwrap().is_empty());
    assert!(s.read("empty", 0..0).unwrap().is_empty());
    assert!(matches!(
        s.read("empty", 0..1),
        Err(Error::Truncated { .. })
    ));

    // list: sorted, by string prefix (not only whole path segments)
    for name in ["layers/1", "layers/10", "layers/2", "lay", "other/x/y"] {
        s.write(name, name.as_bytes()).unwrap();
    }
    assert_eq!(
        s.list("").unwrap(),
        [
            "empty",
            "lay",
            "layers/1",
            "layers/10",
            "layers/2",
            "meta",
            "other/x/y"
        ]
    );
    assert_eq!(
        s.list("lay").unwrap(),
        ["lay", "layers/1", "layers/10", "layers/2"]
    );
    assert_eq!(s.list("layers/1").unwrap(), ["layers/1", "layers/10"]);
    assert_eq!(
        s.list("layers/").unwrap(),
        ["layers/1", "layers/10", "layers/2"]
    );
    assert_eq!(s.list("other/x/").unwrap(), ["other/x/y"]);
    assert!(s.list("zzz").unwrap().is_empty());
    assert!(s.list("missing/dir/").unwrap().is_empty());

    // delete, and deleting twice is fine
    s.delete("layers/10").unwrap();
    s.delete("layers/10").unwrap();
    s.delete("never-existed").unwrap();
    assert!(matches!(s.len("layers/10"), Err(Error::NotFound(_))));
    assert_eq!(s.list("layers/").unwrap(), ["layers/1", "layers/2"]);
    assert_eq!(
        s.read_all("layers/2").unwrap(),
        Bytes::from_static(b"layers/2")
    );

    // Storages are shared between threads.
    std::thread::scope(|scope| {
        for t in 0..4u8 {
            scope.spawn(move || {
                let name = format!("threads/{t}");
                let body = pattern(1000 + t as usize, t);
                s.write(&name, &body).unwrap();
                assert_eq!(s.read_all(&name).unwrap(), Bytes::from(body));
            });
        }
    });
    assert_eq!(s.list("threads/").unwrap().len(), 4);
}

#[test]
fn memory_conforms() {
    let s = ObjectStorage::memory();
    assert_eq!(s.describe(), "memory://");
    conformance(&s);
}

#[test]
fn local_conforms_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("created/by/local");
    let s = ObjectStorage::local(&root).unwrap();
    assert!(s.describe().starts_with("file:///"), "{}", s.describe());
    conformance(&s);
    drop(s);

    // Objects are plain files and survive reopening.
    assert_eq!(std::fs::read(root.join("layers/2")).unwrap(), b"layers/2");
    let reopened = ObjectStorage::local(&root).unwrap();
    assert_eq!(
        reopened.read_all("lay").unwrap(),
        Bytes::from_static(b"lay")
    );
}

#[test]
fn s3_urls_are_checked() {
    for bad in ["bucket/x", "s3://", "s3://b/../x", "http://b/x"] {
        assert!(
            matches!(ObjectStorage::s3(bad), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn s3_on_moto_conforms_with_and_without_prefix_and_isolates_prefixes() {
    let started = Instant::now();
    let server = match MotoServer::start() {
        Ok(server) => server,
        Err(reason) => {
            println!("SKIPPED: {reason}");
            return;
        }
    };
    eprintln!(
        "moto up at {} after {:?}",
        server.endpoint(),
        started.elapsed()
    );
    server.create_bucket("plain").unwrap();
    server.create_bucket("shared").unwrap();

    let plain = server.storage("plain", "").unwrap();
    assert_eq!(plain.describe(), "s3://plain");
    conformance(&plain);

    let a = server.storage("shared", "tenant/a").unwrap();
    assert_eq!(a.describe(), "s3://shared/tenant/a");
    conformance(&a);

    // Same bucket, different prefixes: neither sees the other's objects,
    // including a prefix that is a string prefix of the other ("tenant/a"
    // vs "tenant/ab").
    let ab = server.storage("shared", "tenant/ab").unwrap();
    assert!(ab.list("").unwrap().is_empty());
    assert!(matches!(ab.len("meta"), Err(Error::NotFound(_))));
    ab.write("meta", b"ab's").unwrap();
    assert_eq!(&a.read("meta", 0..5).unwrap()[..], &pattern(70_000, 3)[..5]);
    assert_eq!(ab.list("").unwrap(), ["meta"]);
    ab.delete("meta").unwrap();
    assert_eq!(a.len("meta").unwrap(), 70_000);

    // The bucket root sees the prefixed objects under their full keys.
    let root = server.storage("shared", "").unwrap();
    assert!(
        root.list("tenant/a/")
            .unwrap()
            .contains(&"tenant/a/meta".to_string())
    );
    assert!(root.list("tenant/ab/").unwrap().is_empty());

    // A missing bucket is a clear error, not a panic or NotFound on the object.
    let missing = server.storage("no-such-bucket", "").unwrap();
    assert!(missing.write("x", b"x").is_err());

    eprintln!("moto test took {:?}", started.elapsed());
}
