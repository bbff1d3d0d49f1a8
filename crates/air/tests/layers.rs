//! Layer builders against the node contract, over random and real key sets.
//!
//! The contract: for every entry `i` of the collection `D` a layer indexes,
//! every key `x` in `[x_i, x_{i+1})` predicts (through the node a lookup
//! visits, with `x` clamped to the node) a window holding `position(i)`.
//! The lookups built on it are simulated here over the logical layout of
//! `D`: at index layers the predecessor record must lie in the window
//! widened to whole records, at the data layer the lower bound must be in
//! it or right after it.

use std::path::Path;
use std::time::Instant;

use lidx_air::builders::{BuilderSpec, Layer};
use lidx_air::greedy;
use lidx_air::keypos::KeyPositions;
use lidx_air::node::{self, Band, NodeKind};
use proptest::prelude::*;

/// The key of every record of `d`'s layer.
fn record_keys(d: &KeyPositions) -> Vec<u64> {
    let mut out = Vec::with_capacity(d.geometry.records as usize);
    for i in 0..d.len() {
        let r = d.records(i);
        out.extend(std::iter::repeat_n(d.keys[i], (r.end - r.start) as usize));
    }
    out
}

/// Structure, Eq. 1 over key ranges, and both lookup rules for `queries`.
fn check_layer(layer: &Layer, d: &KeyPositions, queries: &[u64]) -> Result<(), TestCaseError> {
    let n = d.len();
    let rs = layer.kind.record_size();
    prop_assert_eq!(layer.kind, layer.spec.node_kind());
    prop_assert_eq!(layer.node_entries.first().copied(), Some(0));
    prop_assert_eq!(layer.node_entries.last().copied(), Some(n));
    prop_assert!(
        layer.node_entries.windows(2).all(|w| w[0] < w[1]),
        "empty node"
    );
    prop_assert_eq!(layer.size_bytes(), layer.nodes() as u64 * rs);
    for j in 0..layer.nodes() {
        let rec = layer.record(j);
        prop_assert_eq!(layer.node_keys[j], d.keys[layer.node_entries[j]]);
        prop_assert_eq!(node::record_key(rec), layer.node_keys[j]);
        // The trusted fast path agrees with full validation.
        for x in [0, layer.node_keys[j], u64::MAX] {
            prop_assert_eq!(
                node::predict(layer.kind, rec, x).unwrap(),
                layer.window(j, x)
            );
        }
    }

    for i in 0..n {
        let p = d.position(i);
        let last_key = d.keys.get(i + 1).map_or(u64::MAX, |k| k - 1);
        let mid = d.keys[i] + (last_key - d.keys[i]) / 2;
        for x in [d.keys[i], mid, last_key] {
            let j = layer.node_for(x).unwrap();
            let w = layer.window(j, x);
            prop_assert!(
                w.start <= p.start && p.end <= w.end,
                "{}: entry {} at {:?} (key {}), query {}: node {} predicts {:?}",
                layer.spec,
                i,
                p,
                d.keys[i],
                x,
                j,
                w
            );
        }
    }

    let rec_keys = record_keys(d);
    for &x in queries {
        let Some(j) = layer.node_for(x) else {
            prop_assert!(rec_keys.is_empty());
            continue;
        };
        let r = d.geometry.record_range(&layer.window(j, x));
        let in_window = &rec_keys[r.start as usize..r.end as usize];
        // Data layer: first record >= x in the window, else just after it.
        let lb = r.start as usize + in_window.partition_point(|&k| k < x);
        prop_assert_eq!(
            lb,
            rec_keys.partition_point(|&k| k < x),
            "{} lower bound of {}",
            layer.spec,
            x
        );
        // Index layer: the last record <= x is in the window.
        match rec_keys.partition_point(|&k| k <= x).checked_sub(1) {
            Some(pred) => {
                prop_assert!(
                    r.contains(&(pred as u64)),
                    "{} predecessor of {}: {} not in {:?}",
                    layer.spec,
                    x,
                    pred,
                    r
                );
            }
            None => prop_assert_eq!(r.start, 0),
        }
    }
    Ok(())
}

/// GBand/GStep precision bounds and outline consistency.
fn check_bounds(layer: &Layer, d: &KeyPositions) -> Result<(), TestCaseError> {
    let lambda = layer.spec.lambda();
    for j in 0..layer.nodes() {
        let entries = layer.node_entries[j]..layer.node_entries[j + 1];
        match layer.spec {
            BuilderSpec::GBand { .. } => {
                let b = Band::decode(layer.record(j)).unwrap();
                let precision = b.delta_lo + b.delta_hi;
                let alone = d.position(entries.start);
                if entries.len() == 1 {
                    prop_assert_eq!(precision, alone.end - alone.start);
                } else {
                    prop_assert!(
                        precision <= lambda.saturating_add(2),
                        "gband({}) node {} precision {}",
                        lambda,
                        j,
                        precision
                    );
                }
            }
            BuilderSpec::GStep { .. } => {
                for i in entries {
                    let p = d.position(i);
                    let w = layer.window(j, d.keys[i]);
                    prop_assert!(w.end - w.start <= lambda.max(p.end - p.start));
                }
            }
            BuilderSpec::EBand { .. } => {
                let (a, b) = (d.position(entries.start), d.position(entries.end - 1));
                prop_assert!(entries.len() == 1 || b.end - a.start <= lambda);
            }
        }
    }
    let up = layer.outline(d, 512);
    prop_assert_eq!(up.len(), layer.nodes());
    prop_assert_eq!(up.total_weight(), d.total_weight());
    prop_assert_eq!(&up.keys, &layer.node_keys);
    prop_assert_eq!(up.geometry.record_size, layer.kind.record_size());
    Ok(())
}

fn key_sets() -> impl Strategy<Value = Vec<u64>> {
    let small = proptest::collection::vec(0u64..64, 0..120);
    let wide = proptest::collection::vec(any::<u64>(), 0..200);
    let edges = proptest::collection::vec(
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(u64::MAX - 1),
            Just(u64::MAX),
            any::<u64>()
        ],
        0..8,
    );
    let clustered = proptest::collection::vec((0u64..4, 0u64..300), 0..300).prop_map(|v| {
        v.into_iter()
            .map(|(c, off)| [0, 1 << 20, 1 << 40, u64::MAX - 400][c as usize] + off)
            .collect()
    });
    let linear =
        (1u64..1000, 0usize..300).prop_map(|(step, n)| (0..n as u64).map(|i| i * step).collect());
    (
        prop_oneof![small, wide, edges, clustered, linear],
        any::<bool>(),
    )
        .prop_map(|(mut keys, dup)| {
            if dup && !keys.is_empty() {
                let k = keys[keys.len() / 2];
                keys.extend([k, k, k]);
            }
            keys.sort_unstable();
            keys
        })
}

fn lambdas() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        0u64..200,
        (3u32..21).prop_map(|e| 1u64 << e),
        Just(u64::MAX)
    ]
}

fn specs() -> impl Strategy<Value = BuilderSpec> {
    prop_oneof![
        (1u32..20, lambdas()).prop_map(|(pieces, lambda)| BuilderSpec::GStep { pieces, lambda }),
        lambdas().prop_map(|lambda| BuilderSpec::GBand { lambda }),
        lambdas().prop_map(|lambda| BuilderSpec::EBand { lambda }),
    ]
}

/// Query keys: all around the key set, plus random ones.
fn queries(keys: &[u64], random: &[u64]) -> Vec<u64> {
    let mut q = vec![0, 1, u64::MAX - 1, u64::MAX];
    for &k in keys.iter().step_by(3) {
        q.extend([k.wrapping_sub(1), k, k.wrapping_add(1)]);
    }
    q.extend_from_slice(random);
    q
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn layers_meet_the_contract(
        keys in key_sets(),
        record_size in prop_oneof![Just(8u64), Just(16), Just(24), Just(4104)],
        spec in specs(),
        upper in specs(),
        random in proptest::collection::vec(any::<u64>(), 0..20),
    ) {
        let d = KeyPositions::from_sorted_keys(&keys, record_size, 512).unwrap();
        let q = queries(&keys, &random);
        let layer = spec.build(&d).unwrap();
        check_layer(&layer, &d, &q)?;
        check_bounds(&layer, &d)?;
        // A second layer over the first one's outline.
        let up = layer.outline(&d, 512);
        let second = upper.build(&up).unwrap();
        check_layer(&second, &up, &q)?;
        check_bounds(&second, &up)?;
    }

    #[test]
    fn parallel_build_equals_sequential(
        keys in key_sets(),
        spec in specs(),
        chunk in 1usize..9,
    ) {
        let d = KeyPositions::from_sorted_keys(&keys, 16, 512).unwrap();
        let whole = spec.build_chunked(&d, usize::MAX).unwrap();
        prop_assert_eq!(&spec.build_chunked(&d, chunk).unwrap(), &whole);
        let mut chain = vec![0];
        while *chain.last().unwrap() < d.len() {
            chain.push(spec.next_node_end(&d, *chain.last().unwrap()));
        }
        prop_assert_eq!(&greedy::partition(d.len(), chunk, |s| spec.next_node_end(&d, s)), &chain);
        prop_assert_eq!(&whole.node_entries, &chain);
    }

    #[test]
    fn gband_is_never_worse_than_eband(keys in key_sets(), lambda in lambdas(), rs in prop_oneof![Just(8u64), Just(24)]) {
        let d = KeyPositions::from_sorted_keys(&keys, rs, 512).unwrap();
        let g = BuilderSpec::GBand { lambda }.build(&d).unwrap();
        let e = BuilderSpec::EBand { lambda }.build(&d).unwrap();
        prop_assert!(g.nodes() <= e.nodes(), "gband {} nodes > eband {}", g.nodes(), e.nodes());
    }
}

#[test]
fn linear_positions_need_one_gband_node() {
    for (step, rs) in [(1u64, 8u64), (1000, 24), (1 << 40, 4104)] {
        let keys: Vec<u64> = (0..20_000u64).map(|i| 5 + i * step).collect();
        let d = KeyPositions::from_sorted_keys(&keys, rs, 512).unwrap();
        // One record of slack covers the key range between two keys.
        let layer = BuilderSpec::GBand { lambda: 2 * rs }.build(&d).unwrap();
        assert_eq!(layer.nodes(), 1, "step {step}, record {rs}");
        let b = Band::decode(layer.record(0)).unwrap();
        assert!(b.delta_lo + b.delta_hi <= 2 * rs + 2, "{b:?}");
    }
}

#[test]
fn btree_baseline_shape() {
    let keys: Vec<u64> = (0..10_000u64).map(|i| i * 3).collect();
    let d = KeyPositions::from_sorted_keys(&keys, 16, 512).unwrap();
    let spec: BuilderSpec = "gstep(255,4096)".parse().unwrap();
    let layer = spec.build(&d).unwrap();
    assert_eq!(layer.kind, NodeKind::Step { pieces: 255 });
    // A 4096-byte page holds 256 records of 16 bytes; one node indexes 255
    // pages, so 10k keys fit in one node.
    assert_eq!(layer.nodes(), 1);
    assert_eq!(layer.window(0, 3 * 300), 4096..8192);
}

fn load(name: &str) -> Option<Vec<u64>> {
    let path = Path::new("/work/shared/data").join(name);
    if !path.exists() {
        eprintln!("{} missing, skipped", path.display());
        return None;
    }
    Some(
        lidx_core::keyset::open_sosd_u64(&path)
            .ok()?
            .as_slice()
            .to_vec(),
    )
}

/// CPU time of the calling thread in nanoseconds (Linux), to measure
/// sequential builds on a shared machine; `None` elsewhere.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Throughput of each builder at lambda 4096 over a real key set (a
/// measurement, not an assertion). Run with
/// `cargo test --release -p lidx-air --test layers -- --ignored --nocapture`.
#[test]
#[ignore]
fn builder_throughput_geolite2() {
    let Some(keys) = load("geolite2_city_ipv4_3M_uint64") else {
        return;
    };
    let d = KeyPositions::from_sorted_keys(&keys, 8, 512).unwrap();
    for spec in [
        BuilderSpec::GStep {
            pieces: 16,
            lambda: 4096,
        },
        BuilderSpec::GStep {
            pieces: 255,
            lambda: 4096,
        },
        BuilderSpec::GBand { lambda: 4096 },
        BuilderSpec::GBand { lambda: 256 },
        BuilderSpec::EBand { lambda: 4096 },
    ] {
        for (label, chunk) in [
            ("sequential", usize::MAX),
            ("parallel", greedy::DEFAULT_CHUNK),
        ] {
            let (t, cpu) = (Instant::now(), thread_cpu_ns());
            let layer = spec.build_chunked(&d, chunk).unwrap();
            let per_entry = |ns: f64| ns / d.len() as f64;
            let wall = per_entry(t.elapsed().as_nanos() as f64);
            // Only meaningful for the sequential run, which stays on this thread.
            let cpu = match (cpu, thread_cpu_ns()) {
                (Some(a), Some(b)) if chunk == usize::MAX => {
                    format!("{:6.1} ns/entry cpu", per_entry((b - a) as f64))
                }
                _ => String::new(),
            };
            eprintln!(
                "{spec:>16} {label:>10}: {wall:6.1} ns/entry wall {cpu}, {} nodes, {} bytes",
                layer.nodes(),
                layer.size_bytes()
            );
        }
    }
}
