//! The edge cases that broke the papers' code — 0/1/2-key inputs, `0` and
//! `u64::MAX` keys, huge key ranges, signed and floating-point extremes —
//! and the committed real key sets, each checked against `BTreeMap` after
//! churn interleaved with maintenance passes.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use lidx_core::{F64Key, Key};

use super::{settle, tiny_config};
use crate::{Config, XIndex};

/// The index holds exactly `oracle`: by range, by `len`, by every `get`.
fn assert_same<K: Key>(index: &XIndex<K, u64>, oracle: &BTreeMap<K, u64>) {
    let all: Vec<(K, u64)> = index.range(..).collect();
    let want: Vec<(K, u64)> = oracle.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!(all, want);
    let mut down: Vec<(K, u64)> = index.range(..).rev().collect();
    down.reverse();
    assert_eq!(down, want, "descending");
    assert_eq!(index.first_key_value(), want.first().cloned());
    assert_eq!(index.last_key_value(), want.last().cloned());
    assert_eq!(index.len(), oracle.len());
    for (k, v) in oracle {
        assert_eq!(index.get(k), Some(*v), "get {k:?}");
    }
    let keys: Vec<K> = oracle.keys().cloned().collect();
    let mut values = Vec::new();
    index.get_many(&keys, &mut values);
    assert!(
        values
            .iter()
            .zip(oracle.values())
            .all(|(got, v)| *got == Some(*v))
    );
}

/// Inserts, removes and gets `keys` in turn (checking every answer), with
/// a maintenance pass every few operations.
fn churn<K: Key>(index: &XIndex<K, u64>, oracle: &mut BTreeMap<K, u64>, keys: &[K]) {
    for (i, k) in keys.iter().enumerate() {
        let value = i as u64;
        match i % 3 {
            0 => assert_eq!(
                index.insert(k.clone(), value),
                oracle.insert(k.clone(), value),
                "insert {k:?}"
            ),
            1 => assert_eq!(index.remove(k), oracle.remove(k), "remove {k:?}"),
            _ => assert_eq!(index.get(k), oracle.get(k).copied(), "get {k:?}"),
        }
        if i % 7 == 6 {
            index.maintain_now();
        }
    }
}

/// Bulk loads `start`, checks it, churns `ops` twice over (so removed keys
/// come back), settles and checks again; also scans from every key.
fn exercise<K: Key>(start: &[K], ops: &[K], config: Config) {
    let mut oracle: BTreeMap<K, u64> = start
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), i as u64))
        .collect();
    let index = XIndex::bulk_load(oracle.iter().map(|(k, v)| (k.clone(), *v)), config).unwrap();
    assert_same(&index, &oracle);
    churn(&index, &mut oracle, ops);
    let mut twice: Vec<K> = ops.to_vec();
    twice.reverse();
    churn(&index, &mut oracle, &twice);
    assert_same(&index, &oracle);
    settle(&index);
    assert_same(&index, &oracle);
    for k in start.iter().chain(ops) {
        let mut got = Vec::new();
        index.scan(k, 3, &mut got);
        let want: Vec<(K, u64)> = oracle
            .range(k.clone()..)
            .take(3)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(got, want, "scan from {k:?}");
        let got: Vec<(K, u64)> = index.range(..=k.clone()).rev().take(3).collect();
        let want: Vec<(K, u64)> = oracle
            .range(..=k.clone())
            .rev()
            .take(3)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(got, want, "three down from {k:?}");
        let got = index.range(..k.clone()).next_back();
        let want = oracle.range(..k.clone()).next_back();
        assert_eq!(got, want.map(|(k, v)| (k.clone(), *v)), "below {k:?}");
        let got = index.upper_bound(Bound::Included(k));
        let want = oracle.range(..=k.clone()).next_back();
        assert_eq!(got, want.map(|(k, v)| (k.clone(), *v)), "at or below {k:?}");
        let got = index.lower_bound(Bound::Excluded(k));
        let want = oracle
            .range((Bound::Excluded(k.clone()), Bound::Unbounded))
            .next();
        assert_eq!(got, want.map(|(k, v)| (k.clone(), *v)), "above {k:?}");
    }
}

#[test]
fn zero_one_and_two_key_inputs() {
    let extremes = [0u64, 1, 2, u64::MAX - 1, u64::MAX];
    let ops: Vec<u64> = extremes.iter().chain(&[7, 1 << 63]).copied().collect();
    let inputs: [&[u64]; 7] = [
        &[],
        &[0],
        &[u64::MAX],
        &[42],
        &[0, u64::MAX],
        &[5, 6],
        &[u64::MAX - 1, u64::MAX],
    ];
    for start in inputs {
        exercise(start, &ops, tiny_config());
        exercise(start, &ops, Config::default());
    }
}

#[test]
fn u64_extremes_and_huge_ranges() {
    // A dense cluster far from both ends of the key space, plus both ends:
    // every linear model over this spans 2^64 with almost all keys in one
    // point, the shape that overflows naive position arithmetic.
    let mut start: Vec<u64> = (0..2_000u64).map(|i| (1 << 40) + i * 3).collect();
    start.extend([0, 1, 1 << 63, u64::MAX - 1, u64::MAX]);
    start.sort_unstable();
    let ops: Vec<u64> = (0..600u64)
        .map(|i| match i % 6 {
            0 => i,
            1 => u64::MAX - i,
            2 => (1 << 40) + i * 3 + 1,
            3 => (1 << 40) + i * 3,
            4 => i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            _ => 1 << (i % 64),
        })
        .collect();
    exercise(&start, &ops, tiny_config());
    exercise(&start, &ops, Config::default());
}

#[test]
fn byte_strings_sharing_their_first_eight_bytes() {
    // One numeric view for every key: models are flat, and the root's
    // piecewise-linear alternative must decline instead of fitting level
    // after level of one-key segments (it used to loop forever here).
    let url = |i: u32| format!("https://example.com/{i:06}").into_bytes();
    let start: Vec<Vec<u8>> = (0..6_000).map(|i| url(i * 2)).collect();
    let ops: Vec<Vec<u8>> = (0..900).map(|i| url(i * 13 % 12_500)).collect();
    exercise(&start, &ops, tiny_config());
    exercise(&start, &ops, Config::default());
}

#[test]
fn signed_extremes() {
    let start = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
    let ops: Vec<i64> = (0..300i64)
        .map(|i| match i % 4 {
            0 => i64::MIN + i,
            1 => i64::MAX - i,
            2 => -i,
            _ => i * 1_000_003,
        })
        .collect();
    exercise(&start, &ops, tiny_config());
}

#[test]
fn float_extremes() {
    assert!(F64Key::new(f64::NAN).is_err(), "NaN never becomes a key");
    let f = |x: f64| F64Key::new(x).unwrap();
    let mut start: Vec<F64Key> = [
        f64::NEG_INFINITY,
        f64::MIN,
        -1e300,
        -1.0,
        -0.0,
        0.0,
        f64::MIN_POSITIVE,
        1e-300,
        1.0,
        1e300,
        f64::MAX,
        f64::INFINITY,
    ]
    .into_iter()
    .map(f)
    .collect();
    start.sort_unstable();
    start.dedup();
    let ops: Vec<F64Key> = (0..300)
        .map(|i| {
            let x = f64::from(i);
            f(match i % 5 {
                0 => x * 1e298,
                1 => -x * 1e-300,
                2 => x.sqrt(),
                3 => f64::MAX / (x + 1.0),
                _ => -x,
            })
        })
        .collect();
    exercise(&start, &ops, tiny_config());
    exercise(&start, &ops, Config::default());
}

/// Path of a key set committed under `data/`.
pub(super) fn committed(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(name)
}

/// Every key of a committed real set, then churn over a sample of present
/// and absent keys with maintenance passes (default thresholds).
fn real_set<K: Key>(keys: Vec<K>, absent: impl Fn(&K) -> K) {
    let sample: Vec<K> = keys
        .iter()
        .step_by(97)
        .flat_map(|k| [k.clone(), absent(k)])
        .collect();
    let mut oracle: BTreeMap<K, u64> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), i as u64))
        .collect();
    let index = XIndex::bulk_load(
        oracle.iter().map(|(k, v)| (k.clone(), *v)),
        Config {
            maintenance_interval: None,
            ..Config::default()
        },
    )
    .unwrap();
    assert_same(&index, &oracle);
    churn(&index, &mut oracle, &sample);
    settle(&index);
    assert_same(&index, &oracle);
}

#[test]
fn committed_real_key_sets() {
    for name in ["tor_geoip_ipv4_uint64", "geopointdb_s2cellids_uint64"] {
        let keys = lidx_core::keyset::open_sosd_u64(&committed(name))
            .unwrap()
            .as_slice()
            .to_vec();
        real_set(keys, |k| k.wrapping_add(1));
    }
    let longitudes = lidx_core::keyset::open_sosd_f64(&committed("geopointdb_longitudes_f64"))
        .unwrap()
        .as_slice()
        .iter()
        .map(|&x| F64Key::new(x).unwrap())
        .collect();
    real_set(longitudes, |k| F64Key::new(k.get() + 1e-7).unwrap());
}
