//! AirIndex end to end: build into storage, open, and check every answer
//! against a sorted-array oracle; corruption, faults and the cost model.

use std::sync::Arc;
use std::time::Duration;

use lidx_air::baseline;
use lidx_air::format::{self, BLOCK_TARGET};
use lidx_air::keypos::KeyPositions;
use lidx_air::{AirIndex, DataInput, DesignChoice, TuneConfig, Tuned};
use lidx_core::Error;
use lidx_core::storage::{Counting, Fault, Faulty, Memory, Storage, StorageProfile};
use proptest::prelude::*;

fn profile(latency_us: u64, mb_s: f64) -> StorageProfile {
    StorageProfile::affine(Duration::from_micros(latency_us), mb_s * 1e6).unwrap()
}

/// The oracle's lower bound: first index with key >= x.
fn oracle_lb(keys: &[u64], x: u64) -> usize {
    keys.partition_point(|&k| k < x)
}

#[derive(Debug, Clone, Copy)]
enum Layout {
    Sosd,
    Values,
}

fn build(keys: &[u64], layout: Layout, p: &StorageProfile, design: DesignChoice) -> AirIndex {
    let storage: Arc<dyn Storage> = Arc::new(Memory::new());
    let values: Vec<u64> = keys.iter().map(|k| k.wrapping_mul(31) ^ 7).collect();
    let input = match layout {
        Layout::Sosd => DataInput::SosdKeys(keys),
        Layout::Values => DataInput::KeyValues {
            keys,
            values: &values,
        },
    };
    lidx_air::build(&*storage, input, p, design).unwrap();
    AirIndex::open(storage).unwrap()
}

fn expected_value(keys: &[u64], layout: Layout, rank: usize) -> u64 {
    match layout {
        Layout::Sosd => rank as u64,
        Layout::Values => keys[rank].wrapping_mul(31) ^ 7,
    }
}

/// Checks every key, probes between and around keys, lower bounds, ranges
/// and batched lookups.
fn check_against_oracle(index: &AirIndex, keys: &[u64], layout: Layout, probes: &[u64]) {
    for (i, &k) in keys.iter().enumerate() {
        let first = oracle_lb(keys, k);
        if first != i {
            continue;
        }
        assert_eq!(
            index.get(k).unwrap(),
            Some(expected_value(keys, layout, first)),
            "key {k} (rank {first})"
        );
    }
    let mut all_probes: Vec<u64> = probes.to_vec();
    all_probes.extend([0, 1, u64::MAX, u64::MAX - 1]);
    for &k in keys.iter().take(64) {
        all_probes.extend([k.wrapping_add(1), k.wrapping_sub(1)]);
    }
    for &x in &all_probes {
        let lb = oracle_lb(keys, x);
        let got = index.lower_bound(x).unwrap();
        match got {
            None => assert_eq!(lb, keys.len(), "lower_bound({x})"),
            Some(e) => {
                assert_eq!(e.rank as usize, lb, "lower_bound({x})");
                assert_eq!(e.key, keys[lb]);
            }
        }
        let present = lb < keys.len() && keys[lb] == x;
        assert_eq!(
            index.get(x).unwrap(),
            present.then(|| expected_value(keys, layout, lb)),
            "get({x})"
        );
    }
    let batch = index.get_many(&all_probes).unwrap();
    for (x, got) in all_probes.iter().zip(batch) {
        assert_eq!(got, index.get(*x).unwrap(), "get_many({x})");
    }
    if let (Some(&lo), Some(&hi)) = (all_probes.first(), all_probes.get(1)) {
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let got: Vec<u64> = index
            .range(lo..hi)
            .unwrap()
            .map(|e| e.unwrap().key)
            .collect();
        let want: Vec<u64> = keys
            .iter()
            .copied()
            .filter(|k| (lo..hi).contains(k))
            .collect();
        assert_eq!(got, want, "range {lo}..{hi}");
    }
    let all: Vec<u64> = index.range(..).unwrap().map(|e| e.unwrap().key).collect();
    assert_eq!(all, keys);
    index.verify().unwrap();
}

fn key_sets() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        // Dense with duplicates.
        prop::collection::vec(0u64..2_000, 0..400),
        // Anywhere, including the extremes.
        prop::collection::vec(
            prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0u64..100],
            0..300
        ),
        // Clustered: a few far-apart runs.
        (prop::collection::vec(any::<u64>(), 1..5), 1usize..200).prop_map(|(bases, n)| {
            let mut v = Vec::new();
            for (i, b) in bases.iter().enumerate() {
                for j in 0..n as u64 {
                    v.push(b.saturating_add(j * (i as u64 + 1)));
                }
            }
            v
        }),
    ]
    .prop_map(|mut v| {
        v.sort_unstable();
        v
    })
}

fn designs() -> impl Strategy<Value = (u8, u64, usize, u64)> {
    // (kind, param, top_k, latency_us)
    (
        0u8..4,
        0u64..6,
        1usize..6,
        prop_oneof![Just(1u64), Just(250), Just(50_000)],
    )
}

fn choice(
    kind: u8,
    param: u64,
    top_k: usize,
    data: &KeyPositions,
    p: &StorageProfile,
) -> DesignChoice {
    match kind {
        0 => DesignChoice::Tune(TuneConfig {
            top_k,
            lambda_low: 32 << param,
            lambda_high: 32 << (param + 4),
            ..TuneConfig::default()
        }),
        1 => DesignChoice::Fixed(baseline::btree(data, p, 64 << param).unwrap()),
        2 => DesignChoice::Fixed(baseline::pgm(data, p, param).unwrap()),
        _ => DesignChoice::Tune(TuneConfig {
            top_k,
            base: 3.0,
            page_steps: false,
            ..TuneConfig::default()
        }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_design_answers_like_the_oracle(
        keys in key_sets(),
        (kind, param, top_k, latency) in designs(),
        bandwidth in prop_oneof![Just(1.0f64), Just(175.0), Just(5_000.0)],
        sosd in any::<bool>(),
        probes in prop::collection::vec(any::<u64>(), 0..32),
    ) {
        let layout = if sosd { Layout::Sosd } else { Layout::Values };
        let rs = if sosd { 8 } else { 16 };
        let p = profile(latency, bandwidth);
        let data = KeyPositions::from_sorted_keys(&keys, rs, BLOCK_TARGET).unwrap();
        let index = build(&keys, layout, &p, choice(kind, param, top_k, &data, &p));
        check_against_oracle(&index, &keys, layout, &probes);
    }
}

#[test]
fn tiny_inputs_and_extremes() {
    let p = profile(250, 175.0);
    for keys in [
        vec![],
        vec![0],
        vec![u64::MAX],
        vec![0, u64::MAX],
        vec![7, 7],
        vec![5; 1000],
        vec![0, 0, 1, u64::MAX, u64::MAX],
    ] {
        for layout in [Layout::Sosd, Layout::Values] {
            let index = build(&keys, layout, &p, DesignChoice::Tune(TuneConfig::default()));
            check_against_oracle(&index, &keys, layout, &[3, 6, 8]);
        }
    }
}

#[test]
fn deep_designs_on_slow_small_reads() {
    // A tiny-latency, low-bandwidth profile wants many thin layers.
    let keys: Vec<u64> = (0..20_000u64)
        .map(|i| i * i / 3 + (i % 7) * 1_000)
        .collect();
    let mut keys = keys;
    keys.sort_unstable();
    let p = profile(1, 1.0);
    let index = build(
        &keys,
        Layout::Values,
        &p,
        DesignChoice::Tune(TuneConfig::default()),
    );
    assert!(index.meta().layers.len() >= 2, "{:?}", index.meta().layers);
    check_against_oracle(&index, &keys, Layout::Values, &[1, 2, 3]);
}

#[test]
fn unsorted_input_names_the_first_bad_index() {
    let storage = Memory::new();
    let err = lidx_air::build(
        &storage,
        DataInput::SosdKeys(&[1, 2, 9, 3, 4]),
        &StorageProfile::ssd(),
        DesignChoice::Tune(TuneConfig::default()),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Unsorted { index: 3 }), "{err}");
    let err = lidx_air::build(
        &storage,
        DataInput::KeyValues {
            keys: &[1, 2],
            values: &[1],
        },
        &StorageProfile::ssd(),
        DesignChoice::Tune(TuneConfig::default()),
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

fn sample_keys(n: u64) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut keys: Vec<u64> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % (n * 1000)
        })
        .collect();
    keys.sort_unstable();
    keys
}

fn built_in(storage: Arc<dyn Storage>, keys: &[u64], design: DesignChoice) -> AirIndex {
    lidx_air::build(
        &*storage,
        DataInput::SosdKeys(keys),
        &profile(250, 175.0),
        design,
    )
    .unwrap();
    AirIndex::open(storage).unwrap()
}

#[test]
fn flipped_bytes_give_corrupt_or_the_right_answer() {
    let keys = sample_keys(5_000);
    let memory = Arc::new(Memory::new());
    let fixed = {
        let d = KeyPositions::from_sorted_keys(&keys, 8, BLOCK_TARGET).unwrap();
        baseline::btree(&d, &profile(250, 175.0), 256).unwrap()
    };
    assert!(fixed.layers.len() >= 2);
    built_in(memory.clone(), &keys, DesignChoice::Fixed(fixed));
    let objects: Vec<String> = memory
        .list("")
        .unwrap()
        .into_iter()
        .filter(|o| o != format::DESIGN_OBJECT)
        .collect();
    assert!(objects.len() >= 3, "{objects:?}");
    let mut trial = 0u64;
    for object in &objects {
        let original = memory.read_all(object).unwrap();
        for pos in (0..original.len()).step_by(original.len() / 23 + 1) {
            trial += 1;
            let mut bad = original.to_vec();
            bad[pos] ^= 1 << (trial % 8);
            memory.write(object, &bad).unwrap();
            match AirIndex::open(memory.clone()) {
                Err(Error::Corrupt(_)) => {}
                Err(e) => panic!("{object}@{pos}: open failed with {e}"),
                Ok(index) => {
                    let mut corrupt_seen = false;
                    for (i, &k) in keys.iter().enumerate().step_by(7) {
                        if oracle_lb(&keys, k) != i {
                            continue;
                        }
                        match index.get(k) {
                            Ok(v) => assert_eq!(v, Some(i as u64), "{object}@{pos} key {k}"),
                            Err(Error::Corrupt(_)) => corrupt_seen = true,
                            Err(e) => panic!("{object}@{pos}: {e}"),
                        }
                    }
                    assert!(
                        matches!(index.verify(), Err(Error::Corrupt(_))),
                        "{object}@{pos}: verify missed the flip"
                    );
                    let _ = corrupt_seen;
                }
            }
            memory.write(object, &original).unwrap();
        }
        // Truncation.
        memory
            .write(object, &original[..original.len() - 1])
            .unwrap();
        match AirIndex::open(memory.clone()) {
            Err(Error::Corrupt(_)) => {}
            Err(e) => panic!("{object} truncated: open failed with {e}"),
            Ok(index) => {
                assert!(matches!(index.verify(), Err(Error::Corrupt(_))));
                for &k in keys.iter().step_by(11) {
                    match index.get(k) {
                        Ok(Some(_)) | Err(Error::Corrupt(_)) => {}
                        other => panic!("{object} truncated: get({k}) = {other:?}"),
                    }
                }
            }
        }
        memory.write(object, &original).unwrap();
    }
    // Back to intact: everything found.
    let index = AirIndex::open(memory.clone()).unwrap();
    index.verify().unwrap();
}

#[test]
fn storage_faults_propagate() {
    let keys = sample_keys(3_000);
    let faulty = Arc::new(Faulty::new(Memory::new()));
    let d = KeyPositions::from_sorted_keys(&keys, 8, BLOCK_TARGET).unwrap();
    let fixed = baseline::btree(&d, &profile(250, 175.0), 256).unwrap();
    let index = built_in(faulty.clone(), &keys, DesignChoice::Fixed(fixed));
    faulty.set_fault(Fault::FailReadsAfter(0));
    match index.get(keys[100]) {
        Err(Error::Io { .. }) => {}
        other => panic!("expected the injected I/O error, got {other:?}"),
    }
    assert!(matches!(
        AirIndex::open(faulty.clone()),
        Err(Error::Io { .. })
    ));
    faulty.set_fault(Fault::ShortReads);
    match index.get(keys[100]) {
        Err(Error::Corrupt(m)) => assert!(m.contains("short read"), "{m}"),
        other => panic!("expected a short-read error, got {other:?}"),
    }
    faulty.set_fault(Fault::None);
    assert!(index.get(keys[100]).unwrap().is_some());
}

/// The model is exact for the layout: replaying every key through a
/// counting storage and charging the profile per request reproduces the
/// modelled expected cost, and every lookup makes L + 1 requests.
#[test]
fn modelled_cost_matches_counted_reads() {
    let keys = sample_keys(40_000);
    let d = KeyPositions::from_sorted_keys(&keys, 8, BLOCK_TARGET).unwrap();
    for p in [profile(250, 175.0), profile(50_000, 12.0), profile(1, 1.0)] {
        let tuned: Tuned = lidx_air::tune::tune(&d, &p, &TuneConfig::default()).unwrap();
        let counting = Arc::new(Counting::new(Memory::new()));
        lidx_air::build(
            &*counting,
            DataInput::SosdKeys(&keys),
            &p,
            DesignChoice::Fixed(tuned.clone()),
        )
        .unwrap();
        let index = AirIndex::open(counting.clone()).unwrap();
        let meta_len = counting.read_all(format::META_OBJECT).unwrap().len() as u64;
        assert_eq!(meta_len, tuned.root_read_bytes);
        let mut total = 0.0;
        let mut n = 0u64;
        for (i, &k) in keys.iter().enumerate() {
            if i > 0 && keys[i - 1] == k {
                continue;
            }
            counting.reset();
            assert!(index.get(k).unwrap().is_some());
            let mut requests = 0;
            let mut cost = p.cost_ns(meta_len);
            for c in counting.counts().values() {
                requests += c.requests;
                // One request per layer object: its bytes are the read size.
                cost += p.cost_ns(c.bytes);
            }
            assert_eq!(requests, tuned.layers.len() as u64, "key {k}");
            total += cost;
            n += 1;
        }
        let measured = total / n as f64;
        let rel = (measured - tuned.modeled_cost_ns).abs() / tuned.modeled_cost_ns;
        assert!(
            rel < 1e-9,
            "{p}: counted {measured} vs modelled {}",
            tuned.modeled_cost_ns
        );
    }
}

/// The committed real key sets (data/), every key.
#[test]
fn committed_real_key_sets() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    for name in ["tor_geoip_ipv4_uint64", "geopointdb_s2cellids_uint64"] {
        let keys = lidx_core::keyset::open_sosd_u64(&root.join(name))
            .unwrap()
            .as_slice()
            .to_vec();
        for p in [StorageProfile::ssd(), StorageProfile::nfs()] {
            let index = build(
                &keys,
                Layout::Sosd,
                &p,
                DesignChoice::Tune(TuneConfig::default()),
            );
            check_against_oracle(&index, &keys, Layout::Sosd, &[12345, 1 << 40]);
        }
    }
}

/// The larger shared sets, thinned to 300k keys, when ../shared is present.
#[test]
fn shared_real_key_sets() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    if !dir.exists() {
        eprintln!("SKIPPED: {} not present", dir.display());
        return;
    }
    for name in [
        "geolite2_city_ipv4_3M_uint64",
        "sosdlike_books_1M_uint64",
        "sosdlike_osm_cellids_1M_uint64",
    ] {
        let path = dir.join(name);
        if !path.exists() {
            eprintln!("SKIPPED: {name} missing");
            continue;
        }
        let all = lidx_core::keyset::open_sosd_u64(&path).unwrap();
        let all = all.as_slice();
        let step = all.len().div_ceil(300_000).max(1);
        let keys: Vec<u64> = all.iter().step_by(step).copied().collect();
        let index = build(
            &keys,
            Layout::Sosd,
            &StorageProfile::ssd(),
            DesignChoice::Tune(TuneConfig::default()),
        );
        check_against_oracle(&index, &keys, Layout::Sosd, &[12345, 1 << 40]);
    }
}
