//! Oracle and contract tests for the peer adapters.
//!
//! Every writable peer replays random operation sequences next to a
//! `BTreeMap` and must agree on every answer. The `pgm` peer is the one
//! exception, by design: pgm-extra is known to miss some present keys, and
//! the adapter does not hide that. Its tests therefore measure and print the
//! disagreements, assert the API contract on every answer, and assert full
//! agreement only where the crate is known to be right.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use lidx_core::Error;
use proptest::prelude::*;

use super::*;
use crate::engine::{BenchEngine, EngineFactory};

#[derive(Clone, Debug)]
enum Op {
    Get(u64),
    Insert(u64, u64),
    Remove(u64),
    Scan(u64, usize),
    /// A predecessor query, on engines that have one.
    Floor(u64),
}

/// Keys from a small space so hits and misses both happen, plus the extremes.
fn key() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..48,
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 1),
        1 => Just(1u64 << 63),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => key().prop_map(Op::Get),
        3 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => key().prop_map(Op::Remove),
        1 => (key(), 0usize..12).prop_map(|(k, n)| Op::Scan(k, n)),
        1 => key().prop_map(Op::Floor),
    ]
}

/// A sorted, duplicate-free bulk load drawn from the same key space.
fn bulk() -> impl Strategy<Value = Vec<(u64, u64)>> {
    proptest::collection::btree_map(key(), any::<u64>(), 0..40)
        .prop_map(|m| m.into_iter().collect())
}

fn oracle_scan(map: &BTreeMap<u64, u64>, start: u64, n: usize) -> Vec<(u64, u64)> {
    map.range(start..).take(n).map(|(&k, &v)| (k, v)).collect()
}

/// Builds `factory` over `pairs` in a fresh temp dir (kept alive by the caller).
fn build(
    factory: &dyn EngineFactory,
    pairs: &[(u64, u64)],
    writes: bool,
) -> (tempfile::TempDir, Box<dyn BenchEngine>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = factory
        .build(pairs, dir.path(), writes)
        .unwrap_or_else(|e| panic!("{}: build failed: {e}", factory.info().name));
    (dir, engine)
}

/// Replays `ops` on the peer and on a `BTreeMap`; returns the number of
/// answers that differ (0 for a correct engine). Answers are always checked
/// against the API contract, which no engine may break.
fn replay(factory: &dyn EngineFactory, pairs: &[(u64, u64)], ops: &[Op]) -> usize {
    let name = factory.info().name;
    let (_dir, engine) = build(factory, pairs, true);
    let mut oracle: BTreeMap<u64, u64> = pairs.iter().copied().collect();
    let mut wrong = 0;
    let mut out = Vec::new();
    for op in ops {
        match *op {
            Op::Get(k) => {
                let got = engine.get(k).unwrap();
                wrong += usize::from(got != oracle.get(&k).copied());
            }
            Op::Insert(k, v) => {
                engine.insert(k, v).unwrap();
                oracle.insert(k, v);
            }
            Op::Remove(k) => {
                let got = engine.remove(k).unwrap();
                wrong += usize::from(got != oracle.remove(&k).is_some());
            }
            Op::Scan(start, n) => {
                engine.scan(start, n, &mut out).unwrap();
                assert!(out.len() <= n, "{name}: scan returned more than {n}");
                assert!(
                    out.iter().all(|&(k, _)| k >= start),
                    "{name}: scan below start"
                );
                assert!(
                    out.windows(2).all(|w| w[0].0 < w[1].0),
                    "{name}: scan not strictly ascending: {out:?}"
                );
                wrong += usize::from(out != oracle_scan(&oracle, start, n));
            }
            Op::Floor(k) => match engine.floor(k) {
                Ok(got) => {
                    assert!(
                        factory.info().floor,
                        "{name}: floor answered, info says none"
                    );
                    assert!(got.is_none_or(|(f, _)| f <= k), "{name}: floor above {k}");
                    let want = oracle.range(..=k).next_back().map(|(&k, &v)| (k, v));
                    wrong += usize::from(got != want);
                }
                Err(Error::Unsupported(_)) => {
                    assert!(!factory.info().floor, "{name}: info promises floor");
                }
                Err(e) => panic!("{name}: floor({k}): {e}"),
            },
        }
    }
    // The batched lookup agrees with the map, over present and absent keys.
    let probes: Vec<u64> = oracle
        .keys()
        .copied()
        .chain(ops.iter().filter_map(|op| match *op {
            Op::Get(k) | Op::Remove(k) => Some(k),
            _ => None,
        }))
        .collect();
    let mut values = vec![Some(1)];
    engine.get_many(&probes, &mut values).unwrap();
    assert_eq!(values.len(), probes.len(), "{name}: get_many length");
    wrong += probes
        .iter()
        .zip(&values)
        .filter(|&(k, v)| *v != oracle.get(k).copied())
        .count();
    engine.sync().unwrap();
    if factory.info().persistent {
        assert!(
            engine.disk_bytes().is_some_and(|b| b > 0),
            "{name}: disk_bytes"
        );
    } else {
        assert_eq!(engine.disk_bytes(), None, "{name}: in-memory disk_bytes");
    }
    wrong
}

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(32)
}

macro_rules! oracle_test {
    ($name:ident, $factory:expr) => {
        proptest! {
            #![proptest_config(config())]
            #[test]
            fn $name(pairs in bulk(), ops in proptest::collection::vec(op(), 0..200)) {
                prop_assert_eq!(replay(&$factory, &pairs, &ops), 0);
            }
        }
    };
}

oracle_test!(oracle_btreemap, btreemap::BTreeMapFactory);
oracle_test!(oracle_scc_tree, scc_tree::SccTreeFactory);
oracle_test!(oracle_skipmap, skipmap::SkipMapFactory);
oracle_test!(oracle_lmdb, lmdb::LmdbFactory);
oracle_test!(oracle_redb, redb::RedbFactory);
oracle_test!(oracle_fjall, fjall::FjallFactory);
oracle_test!(oracle_xindex_adapter, crate::engines::xindex::XINDEX);
oracle_test!(
    oracle_xindex_seq_adapter,
    crate::engines::xindex::XINDEX_SEQ
);

proptest! {
    #![proptest_config(config())]
    /// pgm-extra's dynamic index on the shared op sequences. Its known
    /// lookup misses are not asserted away here: disagreements are counted
    /// and printed, and only the API contract (checked inside `replay`) is
    /// asserted. `pgm_dense_keys_are_exact` asserts exactness where the crate
    /// is right.
    #[test]
    fn oracle_pgm_dynamic_contract(pairs in bulk(), ops in proptest::collection::vec(op(), 0..200)) {
        let wrong = replay(&pgm::PgmFactory, &pairs, &ops);
        if wrong > 0 {
            eprintln!("pgm (pgm-extra Dynamic): {wrong} of {} answers differ from BTreeMap", ops.len());
        }
    }
}

/// On dense small keys pgm-extra is exact: every model predicts within its
/// bound, so here both variants must agree with the oracle completely.
#[test]
fn pgm_dense_keys_are_exact() {
    let pairs: Vec<(u64, u64)> = (0..5_000u64).map(|k| (k * 3, k ^ 0xabcd)).collect();
    let mut ops = Vec::new();
    for k in 0..15_010u64 {
        ops.push(Op::Get(k));
    }
    for k in (0..15_000u64).step_by(7) {
        ops.push(Op::Insert(k, k + 1));
        ops.push(Op::Remove(k + 3));
        ops.push(Op::Scan(k, 5));
    }
    for k in 0..15_010u64 {
        ops.push(Op::Get(k));
    }
    assert_eq!(replay(&pgm::PgmFactory, &pairs, &ops), 0);
    assert_eq!(read_only_misses(&pgm::PgmFactory, &pairs), 0);
}

/// Checks a read-only build: every present key, absent neighbours of each,
/// and scans from several starts. Returns how many present keys were not
/// found with their value; absent keys must never be reported and scans must
/// keep the contract.
fn read_only_misses(factory: &dyn EngineFactory, pairs: &[(u64, u64)]) -> usize {
    let name = factory.info().name;
    let (_dir, engine) = build(factory, pairs, false);
    let oracle: BTreeMap<u64, u64> = pairs.iter().copied().collect();
    let mut misses = 0;
    for &(k, v) in pairs {
        misses += usize::from(engine.get(k).unwrap() != Some(v));
        for probe in [k.wrapping_sub(1), k.wrapping_add(1)] {
            if !oracle.contains_key(&probe) {
                assert_eq!(
                    engine.get(probe).unwrap(),
                    None,
                    "{name}: absent key {probe}"
                );
            }
        }
    }
    let mut out = Vec::new();
    let starts = pairs
        .iter()
        .step_by(pairs.len() / 50 + 1)
        .map(|p| p.0)
        .chain([0, 1, u64::MAX]);
    for start in starts {
        engine.scan(start, 10, &mut out).unwrap();
        assert!(out.len() <= 10, "{name}: scan too long");
        assert!(
            out.iter().all(|&(k, _)| k >= start),
            "{name}: scan below start"
        );
        assert!(
            out.windows(2).all(|w| w[0].0 < w[1].0),
            "{name}: scan not ascending"
        );
        misses += usize::from(out != oracle_scan(&oracle, start, 10));
    }
    if factory.info().floor {
        let probes = pairs
            .iter()
            .flat_map(|&(k, _)| [k, k.wrapping_sub(1), k.wrapping_add(1)])
            .chain([0, 1, u64::MAX]);
        for probe in probes {
            let want = oracle.range(..=probe).next_back().map(|(&k, &v)| (k, v));
            misses += usize::from(engine.floor(probe).unwrap() != want);
        }
    }
    misses
}

proptest! {
    #![proptest_config(config())]
    /// The lidx PGM reference must be exact on any key set.
    #[test]
    fn pgm_lidx_read_only_exact(keys in proptest::collection::btree_set(any::<u64>(), 0..3000)) {
        let pairs: Vec<(u64, u64)> = keys.iter().map(|&k| (k, k.rotate_left(17))).collect();
        prop_assert_eq!(read_only_misses(&pgm_lidx::PgmLidxFactory, &pairs), 0);
    }

    /// pgm-extra's static index: contract asserted, misses measured.
    #[test]
    fn pgm_static_contract(keys in proptest::collection::btree_set(any::<u64>(), 0..3000)) {
        let pairs: Vec<(u64, u64)> = keys.iter().map(|&k| (k, !k)).collect();
        let misses = read_only_misses(&pgm::PgmFactory, &pairs);
        if misses > 0 {
            eprintln!("pgm (pgm-extra Static): {misses} misses over {} keys", pairs.len());
        }
    }
}

#[test]
fn read_only_peers_cover_edge_keys() {
    let pairs = vec![
        (0, 1),
        (1, 2),
        (1 << 40, 3),
        (u64::MAX - 1, 4),
        (u64::MAX, 5),
    ];
    assert_eq!(read_only_misses(&pgm_lidx::PgmLidxFactory, &pairs), 0);
    assert_eq!(read_only_misses(&pgm_lidx::PgmLidxFactory, &[]), 0);
    // pgm-extra on the same input: contract only (see module docs).
    read_only_misses(&pgm::PgmFactory, &pairs);
    read_only_misses(&pgm::PgmFactory, &[]);
}

#[test]
fn read_only_builds_refuse_writes() {
    for factory in [
        Box::new(pgm::PgmFactory) as Box<dyn EngineFactory>,
        Box::new(pgm_lidx::PgmLidxFactory),
    ] {
        let (_dir, engine) = build(factory.as_ref(), &[(1, 1)], false);
        assert!(matches!(engine.insert(2, 2), Err(Error::Unsupported(_))));
        assert!(matches!(engine.remove(1), Err(Error::Unsupported(_))));
        assert_eq!(engine.get(1).unwrap(), Some(1));
    }
}

/// Two threads insert disjoint keys into each peer that accepts writes;
/// afterwards every key is present with its value.
#[test]
fn concurrent_disjoint_inserts() {
    const PER_THREAD: u64 = 500;
    for factory in all().into_iter().filter(|f| f.info().writable) {
        let name = factory.info().name;
        let base: Vec<(u64, u64)> = (0..100u64).map(|k| (k * 1_000_003, k)).collect();
        let (_dir, engine) = build(factory.as_ref(), &base, true);
        let engine: Arc<dyn BenchEngine> = Arc::from(engine);
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let engine = Arc::clone(&engine);
                std::thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let k = (i * 2 + t) * 7 + 1;
                        engine.insert(k, k ^ t).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let mut expected: BTreeMap<u64, u64> = base.into_iter().collect();
        for t in 0..2u64 {
            for i in 0..PER_THREAD {
                let k = (i * 2 + t) * 7 + 1;
                expected.insert(k, k ^ t);
            }
        }
        let mut missing = 0;
        for (&k, &v) in &expected {
            missing += usize::from(engine.get(k).unwrap() != Some(v));
        }
        let mut out = Vec::new();
        engine.scan(0, expected.len() + 1, &mut out).unwrap();
        if name == "pgm" {
            // pgm-extra's known misses are reported, not asserted (module docs).
            let scan_ok = out == oracle_scan(&expected, 0, usize::MAX);
            if missing > 0 || !scan_ok {
                eprintln!(
                    "pgm: {missing} of {} keys not found after concurrent inserts; full scan correct: {scan_ok}",
                    expected.len()
                );
            }
        } else {
            assert_eq!(missing, 0, "{name}: keys missing after concurrent inserts");
            assert_eq!(out, oracle_scan(&expected, 0, usize::MAX), "{name}: scan");
        }
    }
}

#[test]
fn registry_order_and_lookup() {
    let names: Vec<&str> = all().iter().map(|f| f.info().name).collect();
    assert_eq!(
        names,
        [
            "btreemap", "scc-tree", "skipmap", "pgm", "pgm-lidx", "lmdb", "redb", "fjall"
        ]
    );
    for name in &names {
        assert_eq!(by_name(name).unwrap().info().name, *name);
    }
    match by_name("nope") {
        Err(Error::NotFound(msg)) => {
            assert!(msg.contains("'nope'") && msg.contains("fjall"), "{msg}");
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("unknown engine accepted"),
    }
    for f in all() {
        let info = f.info();
        let in_memory = info.durability == "in-memory";
        assert_eq!(
            in_memory, !info.persistent,
            "{}: durability string",
            info.name
        );
        assert!(!info.description.is_empty());
    }
}

#[test]
fn bad_bulk_loads_are_errors_not_panics() {
    for f in all() {
        let name = f.info().name;
        let dir = tempfile::tempdir().unwrap();
        let unsorted = f.build(&[(5, 0), (3, 0)], dir.path(), true);
        assert!(
            matches!(unsorted, Err(Error::Unsorted { index: 1 })),
            "{name}"
        );
        let dir = tempfile::tempdir().unwrap();
        let dup = f.build(&[(3, 0), (3, 1)], dir.path(), false);
        assert!(matches!(dup, Err(Error::InvalidArgument(_))), "{name}");
    }
}

#[test]
fn dir_bytes_sums_nested_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), [0u8; 10]).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub").join("b"), [0u8; 5]).unwrap();
    assert_eq!(dir_bytes(dir.path()).unwrap(), 15);
    assert!(dir_bytes(Path::new("/nonexistent/lidx-peers")).is_err());
}
