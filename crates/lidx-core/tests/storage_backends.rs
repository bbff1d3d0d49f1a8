//! One behavioural contract checked against every storage backend, plus the
//! page cache's equivalence, budget and concurrency guarantees.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use lidx_core::Error;
use lidx_core::storage::{LocalDir, LocalOptions, Memory, Mmap, PageCache, Storage, open_url};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A temporary directory on the workspace's disk (ext4, which supports
/// `O_DIRECT`; tmpfs would not).
fn work_tempdir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

fn assert_invalid<T: std::fmt::Debug>(result: lidx_core::Result<T>, what: &str) {
    assert!(
        matches!(result, Err(Error::InvalidArgument(_))),
        "{what}: expected InvalidArgument, got {result:?}"
    );
}

fn assert_not_found<T: std::fmt::Debug>(result: lidx_core::Result<T>, what: &str) {
    assert!(
        matches!(result, Err(Error::NotFound(_))),
        "{what}: expected NotFound, got {result:?}"
    );
}

/// The contract every backend must meet.
fn conformance(store: &dyn Storage) {
    let name = store.describe();
    assert_not_found(store.read("a", 0..1), &name);
    assert_not_found(store.read_all("a"), &name);
    assert_not_found(store.len("a"), &name);
    assert_not_found(store.read_many("a", &[0..1, 1..2]), &name);

    let a = pattern(10_000, 1);
    store.write("a", &a).unwrap();
    store.write("dir/b", b"bee").unwrap();
    store.write("dir/c/d", &pattern(5000, 2)).unwrap();
    store.write("dir2", b"").unwrap();

    assert_eq!(store.len("a").unwrap(), 10_000, "{name}");
    assert_eq!(&store.read_all("a").unwrap()[..], &a[..], "{name}");
    for range in [0..1, 0..10_000, 4095..4097, 9_999..10_000, 5_000..5_000] {
        let got = store.read("a", range.clone()).unwrap();
        assert_eq!(
            &got[..],
            &a[range.start as usize..range.end as usize],
            "{name} {range:?}"
        );
    }
    let ranges = [100..200, 0..0, 9_000..10_000, 100..200, 3..4097];
    let many = store.read_many("a", &ranges).unwrap();
    assert_eq!(many.len(), ranges.len(), "{name}");
    for (range, got) in ranges.iter().zip(&many) {
        assert_eq!(
            &got[..],
            &a[range.start as usize..range.end as usize],
            "{name} {range:?}"
        );
    }
    assert!(store.read_many("a", &[]).unwrap().is_empty(), "{name}");
    assert_eq!(&store.read("dir/b", 1..3).unwrap()[..], b"ee", "{name}");
    assert!(store.read_all("dir2").unwrap().is_empty(), "{name}");
    assert!(store.read("dir2", 0..0).unwrap().is_empty(), "{name}");

    match store.read("a", 9_999..10_001) {
        Err(Error::Truncated {
            expected, found, ..
        }) => assert_eq!((expected, found), (10_001, 10_000), "{name}"),
        other => panic!("{name}: expected Truncated, got {other:?}"),
    }
    assert!(
        matches!(
            store.read_many("a", &[0..1, 10_000..10_001]),
            Err(Error::Truncated { .. })
        ),
        "{name}"
    );
    let reversed = Range { start: 5, end: 4 };
    assert_invalid(store.read("a", reversed), &format!("{name} reversed range"));

    assert_eq!(
        store.list("").unwrap(),
        ["a", "dir/b", "dir/c/d", "dir2"],
        "{name}"
    );
    assert_eq!(store.list("dir/").unwrap(), ["dir/b", "dir/c/d"], "{name}");
    assert_eq!(
        store.list("dir").unwrap(),
        ["dir/b", "dir/c/d", "dir2"],
        "{name}"
    );
    assert_eq!(store.list("dir/c").unwrap(), ["dir/c/d"], "{name}");
    assert!(store.list("zzz").unwrap().is_empty(), "{name}");

    // Overwrite with shorter contents: old bytes must not show through.
    let a2 = pattern(3000, 9);
    store.write("a", &a2).unwrap();
    assert_eq!(store.len("a").unwrap(), 3000, "{name}");
    assert_eq!(&store.read_all("a").unwrap()[..], &a2[..], "{name}");
    assert_eq!(
        &store.read("a", 2000..3000).unwrap()[..],
        &a2[2000..],
        "{name}"
    );
    assert!(
        matches!(store.read("a", 2000..3001), Err(Error::Truncated { .. })),
        "{name}"
    );
    store.evict("a").unwrap();
    assert_eq!(&store.read("a", 10..20).unwrap()[..], &a2[10..20], "{name}");

    store.delete("a").unwrap();
    store.delete("a").unwrap();
    assert_not_found(store.read("a", 0..1), &name);
    assert_eq!(
        store.list("").unwrap(),
        ["dir/b", "dir/c/d", "dir2"],
        "{name}"
    );

    for bad in ["", "/abs", "x/../y", "x//y", ".", "x/"] {
        let what = format!("{name} {bad:?}");
        assert_invalid(store.write(bad, b"x"), &what);
        assert_invalid(store.read(bad, 0..0), &what);
        assert_invalid(store.delete(bad), &what);
    }
}

#[test]
fn memory_meets_the_contract() {
    conformance(&Memory::new());
}

#[test]
fn local_dir_meets_the_contract() {
    let tmp = work_tempdir();
    conformance(&LocalDir::open(tmp.path().join("store"), LocalOptions::default()).unwrap());
}

#[test]
fn local_dir_with_direct_io_meets_the_contract() {
    let tmp = work_tempdir();
    let store = LocalDir::open(tmp.path(), LocalOptions { direct_io: true }).unwrap();
    assert!(store.describe().starts_with("direct+file://"));
    conformance(&store);
}

#[test]
fn mmap_meets_the_contract() {
    let tmp = work_tempdir();
    conformance(&Mmap::open(tmp.path()).unwrap());
}

#[test]
fn page_cache_meets_the_contract() {
    conformance(&PageCache::new(Memory::new(), 512, 6000).unwrap());
    let tmp = work_tempdir();
    let local = open_url(&format!("file://{}", tmp.path().display())).unwrap();
    conformance(&PageCache::new(local, 4096, 1 << 20).unwrap());
}

#[test]
fn backends_share_one_directory_layout() {
    let tmp = work_tempdir();
    let local = LocalDir::open(tmp.path(), LocalOptions::default()).unwrap();
    local.write("x/y", b"shared").unwrap();
    let mapped = Mmap::open(tmp.path()).unwrap();
    assert_eq!(&mapped.read_all("x/y").unwrap()[..], b"shared");
    let direct = LocalDir::open(tmp.path(), LocalOptions { direct_io: true }).unwrap();
    assert_eq!(&direct.read("x/y", 2..6).unwrap()[..], b"ared");
}

#[test]
fn partial_last_page_is_cached_then_completed() {
    let inner = Arc::new(Memory::new());
    let data = pattern(1000, 3);
    inner.write("o", &data).unwrap();
    let cache = PageCache::new(Arc::clone(&inner), 256, 4096).unwrap();
    // Page 3 (768..1024) lies past the end (1000); only 768..900 is fetched.
    assert_eq!(&cache.read("o", 800..900).unwrap()[..], &data[800..900]);
    assert_eq!(cache.stats().resident_bytes, 132);
    assert_eq!(&cache.read("o", 770..890).unwrap()[..], &data[770..890]);
    assert_eq!(cache.stats().misses, 1, "covered by the partial page");
    assert_eq!(&cache.read("o", 900..1000).unwrap()[..], &data[900..1000]);
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (1, 2), "needing more refetches");
    assert_eq!(stats.resident_bytes, 232);
    assert!(matches!(
        cache.read("o", 990..1001),
        Err(Error::Truncated { .. })
    ));
}

#[test]
fn eviction_counters_move_and_budget_holds() {
    let inner = Memory::new();
    inner.write("o", &pattern(64 * 100, 4)).unwrap();
    let cache = PageCache::new(inner, 64, 64 * 10).unwrap();
    for page in 0..100u64 {
        cache.read("o", page * 64..page * 64 + 64).unwrap();
        assert!(cache.stats().resident_bytes <= 640);
    }
    let stats = cache.stats();
    assert_eq!(stats.misses, 100);
    assert_eq!(stats.evictions, 90);
    assert_eq!(stats.resident_bytes, 640);
    cache.read("o", 99 * 64..100 * 64).unwrap();
    assert_eq!(cache.stats().hits, 1, "the latest page survives");
    cache.clear();
    assert_eq!(cache.stats().resident_bytes, 0);
}

#[test]
fn concurrent_readers_get_exact_bytes_within_the_budget() {
    const BUDGET: u64 = 3000;
    let data = Arc::new(pattern(50_000, 5));
    let inner = Memory::new();
    inner.write("o", &data).unwrap();
    inner.write("p", &data[..777]).unwrap();
    let cache = Arc::new(PageCache::new(inner, 128, BUDGET).unwrap());
    std::thread::scope(|scope| {
        for seed in 0..4u64 {
            let (cache, data) = (Arc::clone(&cache), Arc::clone(&data));
            scope.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                for _ in 0..400 {
                    let object_len = if rng.random_bool(0.2) { 777 } else { 50_000 };
                    let object = if object_len == 777 { "p" } else { "o" };
                    let start = rng.random_range(0..object_len);
                    let end = (start + rng.random_range(0..600)).min(object_len);
                    if rng.random_bool(0.2) {
                        let ranges = [start..end, end / 2..end];
                        let got = cache.read_many(object, &ranges).unwrap();
                        for (r, g) in ranges.iter().zip(&got) {
                            assert_eq!(&g[..], &data[r.start as usize..r.end as usize]);
                        }
                    } else {
                        let got = cache.read(object, start..end).unwrap();
                        assert_eq!(&got[..], &data[start as usize..end as usize]);
                    }
                    assert!(cache.stats().resident_bytes <= BUDGET);
                }
            });
        }
    });
    let stats = cache.stats();
    assert!(
        stats.hits > 0 && stats.misses > 0 && stats.evictions > 0,
        "{stats:?}"
    );
    assert!(stats.resident_bytes <= BUDGET);
}

/// Decrements a counter when dropped (also while unwinding).
struct CountDown<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for CountDown<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn readers_never_see_a_mix_of_versions() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const LEN: u64 = 2000;
    let cache = Arc::new(PageCache::new(Memory::new(), 100, 1500).unwrap());
    cache.write("o", &[0u8; LEN as usize]).unwrap();
    let readers_left = AtomicUsize::new(3);
    let last_version = std::thread::scope(|scope| {
        let writer = {
            let (cache, readers_left) = (Arc::clone(&cache), &readers_left);
            scope.spawn(move || {
                let mut version = 0u8;
                while readers_left.load(Ordering::SeqCst) > 0 {
                    version = version.wrapping_add(1);
                    cache.write("o", &[version; LEN as usize]).unwrap();
                }
                version
            })
        };
        for seed in 0..3u64 {
            let (cache, readers_left) = (Arc::clone(&cache), &readers_left);
            scope.spawn(move || {
                // Counts this reader out even if an assertion fails, so the
                // writer stops and the failure is reported instead of hanging.
                let _done = CountDown(readers_left);
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                for _ in 0..3000 {
                    // Several pages, within the budget, so pages are mixed
                    // from the cache and from fresh fetches.
                    let start = rng.random_range(0..LEN - 1);
                    let end = (start + rng.random_range(150..700)).min(LEN);
                    let got = cache.read("o", start..end).unwrap();
                    assert_eq!(got.len() as u64, end - start);
                    assert!(got.iter().all(|&b| b == got[0]), "mixed versions");
                    assert!(cache.stats().resident_bytes <= 1500);
                }
            });
        }
        writer.join().unwrap()
    });
    let expected = vec![last_version; LEN as usize];
    assert_eq!(&cache.read_all("o").unwrap()[..], &expected[..]);
    assert_eq!(&cache.read("o", 0..LEN).unwrap()[..], &expected[..]);
}

/// One read of the property test: a range that may run past the end.
fn read_strategy(max_len: u64) -> impl Strategy<Value = (u64, u64, bool)> {
    (0..max_len + 64, 0..600u64, any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn cached_reads_equal_inner_reads(
        len in 0usize..3000,
        page_size in 1u64..400,
        budget in 0u64..2500,
        length_known in any::<bool>(),
        reads in prop::collection::vec(read_strategy(3000), 1..40),
    ) {
        let inner = Arc::new(Memory::new());
        let data = pattern(len, 7);
        let cache = PageCache::new(Arc::clone(&inner), page_size, budget).unwrap();
        if length_known {
            cache.write("o", &data).unwrap();
        } else {
            inner.write("o", &data).unwrap();
        }
        let mut pending: Vec<Range<u64>> = Vec::new();
        for (start, extra, batch) in reads {
            let range = start..start + extra;
            pending.push(range.clone());
            if batch && pending.len() < 3 {
                continue;
            }
            let expected = inner.read_many("o", &pending);
            let got = cache.read_many("o", &pending);
            match (expected, got) {
                (Ok(e), Ok(g)) => prop_assert_eq!(e, g),
                (Err(Error::Truncated { .. }), Err(Error::Truncated { .. })) => {}
                (e, g) => prop_assert!(false, "inner {:?} vs cache {:?}", e, g),
            }
            let single = cache.read("o", range.clone());
            match inner.read("o", range) {
                Ok(e) => prop_assert_eq!(e, single.unwrap()),
                Err(_) => {
                    let truncated = matches!(single, Err(Error::Truncated { .. }));
                    prop_assert!(truncated, "cache gave {:?}", single);
                }
            }
            pending.clear();
            prop_assert!(cache.stats().resident_bytes <= budget);
        }
    }
}
