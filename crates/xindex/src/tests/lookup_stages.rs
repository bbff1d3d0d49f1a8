//! Where a lookup's time goes: cumulative timings of its stages over
//! uniformly random existing keys, next to `BTreeMap` behind an `RwLock`
//! (the bench's peer) in the same run. A measuring tool, not a test of
//! speed: it asserts only that every stage found what it should.
//!
//! The stages call the portable functions; `get` and `get_many` take the
//! x86-64-v3 build on a CPU with AVX2 (`lidx_core::cpu`), so the gap
//! between `+value` and `get` is the pin plus that build's difference.
//!
//! `cargo test --release -p lidx-xindex --lib lookup_stages -- --ignored --nocapture`
//! (`LIDX_STAGES_DATA=<SOSD u64 file>` picks the key set; default geolite2
//! from `../shared/data`, or 3M generated lognormal-gap keys without it;
//! `LIDX_STAGES_ROOT=pla` or `rmi` forces the root's model).
//!
//! Besides the stages, each round times `get` inside an outer epoch pin
//! (so `get`'s own pin nests, without its locked instruction) and the
//! group's part alone, with every probe's group routed beforehand: what a
//! free route would leave.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Instant;

use crossbeam_epoch::Owned;

use crate::root::{Root, RootModel};
use crate::{Config, XIndex};

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key_set() -> (String, Vec<u64>) {
    let path = std::env::var_os("LIDX_STAGES_DATA").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/geolite2_city_ipv4_3M_uint64")
        },
        PathBuf::from,
    );
    if let Ok(keys) = lidx_core::keyset::open_sosd_u64(&path) {
        let mut keys = keys.as_slice().to_vec();
        keys.dedup();
        let name = path.canonicalize().unwrap_or(path).display().to_string();
        return (name, keys);
    }
    // Heavy-tailed gaps (exp of a uniform), so models have real errors.
    let mut state = 7;
    let mut key = 0u64;
    let keys = (0..3_000_000)
        .map(|_| {
            let u = (splitmix(&mut state) >> 11) as f64 / (1u64 << 53) as f64;
            key += 1 + (u * 6.0).exp() as u64;
            key
        })
        .collect();
    ("generated (3M keys, log-uniform gaps)".into(), keys)
}

/// `count` keys drawn uniformly from `keys` (with repeats), from `seed`.
fn random_probes(keys: &[u64], count: usize, seed: u64) -> Vec<u64> {
    let mut state = seed;
    (0..count)
        .map(|_| keys[(splitmix(&mut state) % keys.len() as u64) as usize])
        .collect()
}

/// An index over `keys` (each its own value), without background
/// maintenance: the shape a bulk load gives, held still while measured
/// (with the root model `LIDX_STAGES_ROOT` asks for, see [`force_root`]).
fn loaded(keys: &[u64]) -> XIndex<u64, u64> {
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), config).expect("bulk load");
    force_root(&index);
    index
}

/// The key set, the index bulk-loaded from it and `count` random probes
/// of its keys (seeded by `seed`): what every timing tool starts from.
fn probed(count: usize, seed: u64) -> (String, Vec<u64>, XIndex<u64, u64>, Vec<u64>) {
    let (name, keys) = key_set();
    let index = loaded(&keys);
    let probes = random_probes(&keys, count, seed);
    (name, keys, index, probes)
}

#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn lookup_stages() {
    let (name, keys, index, probes) = probed(4_000_000, 1);
    let map = RwLock::new(keys.iter().map(|&k| (k, k)).collect::<BTreeMap<u64, u64>>());
    let per_probe = |t: Instant| t.elapsed().as_nanos() as f64 / probes.len() as f64;
    let stats = index.stats();
    println!(
        "{name}: {} keys, {} groups, root: {} models ({}), worst error {}",
        keys.len(),
        stats.groups.len(),
        stats.root_models,
        if stats.root_piecewise {
            "piecewise-linear"
        } else {
            "RMI"
        },
        stats.root_max_error
    );
    for round in 0..3 {
        let guard = index.inner().reclaimer.pin();
        let root = index.inner().root(&guard);
        let t = Instant::now();
        for k in &probes {
            black_box(root.route(k, &guard));
        }
        let route = per_probe(t);
        let t = Instant::now();
        for k in &probes {
            black_box(root.route(k, &guard).predict(k));
        }
        let predict = per_probe(t);
        let t = Instant::now();
        for k in &probes {
            black_box(root.route(k, &guard).lower_bound(k));
        }
        let search = per_probe(t);
        let t = Instant::now();
        for k in &probes {
            let cell = root.route(k, &guard).record(k).expect("present");
            assert_eq!(cell.read(), Some(*k));
        }
        let record = per_probe(t);
        drop(guard);
        let (get, btree) = time_gets(&index, &map, &probes);
        let mut values = Vec::with_capacity(probes.len());
        let t = Instant::now();
        for batch in probes.chunks(64) {
            values.clear();
            index.get_many(batch, &mut values);
            assert!(values.iter().zip(batch).all(|(v, k)| *v == Some(*k)));
        }
        let many = per_probe(t);
        let outer = index.inner().reclaimer.pin();
        let t = Instant::now();
        for k in &probes {
            assert_eq!(index.get(k), Some(*k));
        }
        let nested = per_probe(t);
        let root = index.inner().root(&outer);
        let routed: Vec<_> = probes.iter().map(|k| root.route(k, &outer)).collect();
        let t = Instant::now();
        for (k, g) in probes.iter().zip(&routed) {
            let _g = index.inner().reclaimer.pin();
            assert_eq!(crate::inner::read_in_group(g, k), Some(*k));
        }
        let oracle = per_probe(t);
        drop(outer);
        println!(
            "round {round}: get nested in an outer pin {nested:.0} ns | with the group given {oracle:.0} ns"
        );
        println!(
            "round {round}: route {route:.0} ns | +group model {predict:.0} | +key search {search:.0} \
             | +value {record:.0} | get (with epoch pin) {get:.0} | BTreeMap+RwLock {btree:.0} ({:.2}x) \
             | get_many {many:.0} ({:.2}x)",
            btree / get,
            btree / many
        );
    }
    // Dependent chains: each probe's key carries a false data dependency on
    // the previous answer, so consecutive lookups cannot overlap in the
    // out-of-order window. What each stage adds here is its cost on a
    // lookup's critical path (the throughput loops above overlap).
    for round in 0..2 {
        let zero = black_box(0u64);
        let guard = index.inner().reclaimer.pin();
        let root = index.inner().root(&guard);
        let chained = |f: &dyn Fn(u64) -> u64| {
            let t = Instant::now();
            let mut last = 0u64;
            for &k in &probes {
                last = f(k | (last & zero));
            }
            black_box(last);
            per_probe(t)
        };
        let route = chained(&|k| root.route(&k, &guard) as *const _ as u64);
        let predict = chained(&|k| root.route(&k, &guard).predict(&k) as u64);
        let search = chained(&|k| root.route(&k, &guard).lower_bound(&k) as u64);
        let record = chained(&|k| {
            root.route(&k, &guard)
                .record(&k)
                .and_then(|c| c.read())
                .unwrap_or(1)
        });
        drop(guard);
        let get = chained(&|k| index.get(&k).unwrap_or(1));
        let btree = chained(&|k| {
            map.read()
                .expect("not poisoned")
                .get(&k)
                .copied()
                .unwrap_or(1)
        });
        println!(
            "chained {round}: route {route:.0} ns | +group model {predict:.0} | +key search {search:.0} \
             | +value {record:.0} | get {get:.0} | BTreeMap+RwLock {btree:.0} ({:.2}x)",
            btree / get
        );
    }
    // Sorted probes hit the caches: what is left is instruction cost.
    let mut sorted = probes.clone();
    sorted.sort_unstable();
    let (get, btree) = time_gets(&index, &map, &sorted);
    println!("sorted probes (cached): get {get:.0} ns | BTreeMap+RwLock {btree:.0} ns");
}

/// Nanoseconds per `get` of `probes` on the index, then on the `BTreeMap`
/// behind its lock (every answer checked).
fn time_gets(
    index: &XIndex<u64, u64>,
    map: &RwLock<BTreeMap<u64, u64>>,
    probes: &[u64],
) -> (f64, f64) {
    let per_probe = |t: Instant| t.elapsed().as_nanos() as f64 / probes.len() as f64;
    let t = Instant::now();
    for k in probes {
        assert_eq!(index.get(k), Some(*k));
    }
    let get = per_probe(t);
    let t = Instant::now();
    for k in probes {
        let value = map.read().expect("not poisoned").get(k).copied();
        assert_eq!(value, Some(*k));
    }
    (get, per_probe(t))
}

/// How far the group models' predictions land from the records they
/// predict, as a cumulative distribution: what decides how often a search
/// leaves its counted window (`|err| > 8`) for the second count.
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn prediction_errors() {
    let (name, keys) = key_set();
    let index = loaded(&keys);
    let guard = index.inner().reclaimer.pin();
    let root = index.inner().root(&guard);
    // Upper ends of the buckets of |error| (the last one is open).
    const UPPER: [usize; 10] = [0, 1, 2, 4, 6, 8, 12, 16, 32, usize::MAX];
    let mut hist = [0usize; UPPER.len()];
    let mut root_hist = [0usize; UPPER.len()];
    for k in keys.iter().step_by(3) {
        let (predicted, slot) = root.slot_error(k, &guard);
        root_hist[UPPER.partition_point(|&u| u < slot.abs_diff(predicted))] += 1;
        let g = root.route(k, &guard);
        let (predicted, found) = (g.predict(k), g.lower_bound(k));
        assert_eq!(g.arrays().0.get(found), Some(k), "search missed {k}");
        hist[UPPER.partition_point(|&u| u < found.abs_diff(predicted))] += 1;
    }
    let total: usize = hist.iter().sum();
    let (mut acc, mut root_acc) = (0, 0);
    println!("{name}");
    for (b, label) in [
        "0", "1", "2", "3-4", "5-6", "7-8", "9-12", "13-16", "17-32", ">32",
    ]
    .iter()
    .enumerate()
    {
        acc += hist[b];
        root_acc += root_hist[b];
        println!(
            "|err| {label}: {:.1}% (cum {:.1}%) | root slot: {:.1}% (cum {:.1}%)",
            100.0 * hist[b] as f64 / total as f64,
            100.0 * acc as f64 / total as f64,
            100.0 * root_hist[b] as f64 / total as f64,
            100.0 * root_acc as f64 / total as f64
        );
    }
}

/// With `LIDX_STAGES_ROOT=pla` (or `rmi`), replaces the index's root by
/// one that routes through that model whatever the automatic choice.
fn force_root(index: &XIndex<u64, u64>) {
    let model = match std::env::var("LIDX_STAGES_ROOT").as_deref() {
        Ok("pla") => RootModel::Pla,
        Ok("rmi") => RootModel::Rmi,
        _ => RootModel::Auto,
    };
    let hints = std::env::var("LIDX_STAGES_HINTS").as_deref() != Ok("off");
    if model == RootModel::Auto && hints {
        return;
    }
    install_root(index, rebuilt_root(index, model, hints));
}

/// A new root over the index's current groups, routing through `model`,
/// with or without array hints.
fn rebuilt_root(index: &XIndex<u64, u64>, model: RootModel, hints: bool) -> Root<u64> {
    use std::sync::atomic::Ordering;
    let inner = index.inner();
    let guard = inner.reclaimer.pin();
    let old = inner.root(&guard);
    let groups: Vec<_> = old
        .slots
        .iter()
        .map(|s| s.load(Ordering::Acquire, &guard))
        .collect();
    let config = Config::default();
    let root = Root::with_model(
        groups,
        old.leaf_count(),
        config.max_root_models,
        config.error_bound,
        config.merge_error(),
        model,
    );
    if hints { root } else { root.without_hints() }
}

/// [`rebuilt_root`] with hints kept whatever the host's L2.
fn rebuilt_root_hinted(index: &XIndex<u64, u64>) -> Root<u64> {
    crate::root::HINT_L2_OVERRIDE.with(|o| o.set(Some(0)));
    let root = rebuilt_root(index, RootModel::Auto, true);
    crate::root::HINT_L2_OVERRIDE.with(|o| o.set(None));
    root
}

/// Makes `root` the index's root, retiring the old one.
fn install_root(index: &XIndex<u64, u64>, root: Root<u64>) {
    use std::sync::atomic::Ordering;
    let inner = index.inner();
    let guard = inner.reclaimer.pin();
    let old = inner.root.swap(Owned::new(root), Ordering::AcqRel, &guard);
    // SAFETY: the swap unlinked the old root, and only this call retires it.
    unsafe { inner.reclaimer.retire(old) };
}

/// Alternates, in one process over one bulk load, a root with hints and
/// one without over the same groups, timing random `get`s (independent,
/// then chained) through each: the host's drift between rounds hits both
/// alike.
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn hint_ab() {
    let (name, _, index, probes) = probed(1_000_000, 3);
    let per_probe = |t: Instant| t.elapsed().as_nanos() as f64 / probes.len() as f64;
    let hinted = rebuilt_root_hinted(&index).hinted_slots();
    println!(
        "{name}: {} groups, {hinted} with hints",
        index.stats().groups.len()
    );
    const ROUNDS: usize = 8;
    let mut results = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        for (hints, result) in [false, true].into_iter().zip(results.iter_mut()) {
            let root = if hints {
                rebuilt_root_hinted(&index)
            } else {
                rebuilt_root(&index, RootModel::Auto, false)
            };
            install_root(&index, root);
            let t = Instant::now();
            for k in &probes {
                assert_eq!(index.get(k), Some(*k));
            }
            let independent = per_probe(t);
            let zero = black_box(0u64);
            let t = Instant::now();
            let mut last = 0u64;
            for &k in &probes {
                last = index.get(&(k | (last & zero))).unwrap_or(1);
            }
            black_box(last);
            result.push((independent, per_probe(t)));
        }
    }
    for (label, result) in ["no hints", "hints"].into_iter().zip(results) {
        let mut ind: Vec<f64> = result.iter().map(|r| r.0).collect();
        let mut ch: Vec<f64> = result.iter().map(|r| r.1).collect();
        ind.sort_by(f64::total_cmp);
        ch.sort_by(f64::total_cmp);
        let ((ind, ind_min), (ch, ch_min)) = (median_min(&ind), median_min(&ch));
        println!(
            "{label:>8}: get median {ind:.0} ns (min {ind_min:.0}) | chained median {ch:.0} ns (min {ch_min:.0})"
        );
    }
}

/// One route, kept out of line so that `callgrind --toggle-collect` can
/// count its instructions.
#[inline(never)]
fn route_only(root: &crate::root::Root<u64>, k: &u64, guard: &crossbeam_epoch::Guard) -> usize {
    root.route(k, guard) as *const _ as usize
}

/// Routes 100k random keys through [`route_only`]: instructions per route
/// are `callgrind --toggle-collect='*route_only*'`'s count over 100k.
#[test]
#[ignore = "measuring tool; run under callgrind"]
fn route_instructions() {
    let (_, keys) = key_set();
    let index = loaded(&keys);
    let guard = index.inner().reclaimer.pin();
    let root = index.inner().root(&guard);
    let mut state = 1;
    let mut acc = 0;
    for _ in 0..100_000 {
        let k = keys[(splitmix(&mut state) % keys.len() as u64) as usize];
        acc ^= route_only(root, &k, &guard);
    }
    black_box(acc);
}

/// One `get`, kept out of line so that `callgrind --toggle-collect` can
/// count its instructions.
#[inline(never)]
fn get_only(index: &XIndex<u64, u64>, k: &u64) -> Option<u64> {
    index.get(k)
}

/// 100k random `get`s through [`get_only`]: instructions per `get` are
/// `callgrind --toggle-collect='*get_only*'`'s count over 100k. valgrind's
/// emulated CPU reports 256 KiB of L2, so the root keeps array hints that
/// a host with a larger L2 leaves out; `LIDX_STAGES_HINTS=off` counts the
/// path without them.
#[test]
#[ignore = "measuring tool; run under callgrind"]
fn get_instructions() {
    let (_, keys) = key_set();
    let index = loaded(&keys);
    let mut state = 1;
    for _ in 0..100_000 {
        let k = keys[(splitmix(&mut state) % keys.len() as u64) as usize];
        assert_eq!(get_only(&index, &k), Some(k));
    }
}

/// How far the root's array hints and the groups' own models predict each
/// key from its position, as cumulative shares of the hinted keys: a hint
/// requests the lines within `HINT_REACH` (16) keys of its prediction, and
/// a group's first count covers 8 keys on each side of its own.
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn hint_errors() {
    use lidx_core::Key;
    use std::sync::atomic::Ordering;
    let (name, keys) = key_set();
    let index = loaded(&keys);
    let inner = index.inner();
    let guard = inner.reclaimer.pin();
    let root = inner.root(&guard);
    const UPPER: [usize; 8] = [2, 4, 8, 12, 16, 24, 32, usize::MAX];
    let (mut hint_hist, mut model_hist) = ([0usize; UPPER.len()], [0usize; UPPER.len()]);
    let (mut unhinted, mut total) = (0, 0);
    let bucket = |e: usize| {
        UPPER
            .iter()
            .position(|&u| e <= u)
            .expect("open last bucket")
    };
    for slot in root.slots.iter() {
        // SAFETY: maintenance is off, so every group the root names stays
        // alive while `guard` is pinned.
        let Some(group) = (unsafe { slot.load(Ordering::Acquire, &guard).as_ref() }) else {
            continue;
        };
        let (group_keys, _) = group.arrays();
        let hint = group.hint();
        let Some(pivot) = group.pivot.filter(|_| hint.is_some()) else {
            unhinted += group_keys.len();
            continue;
        };
        for (i, k) in group_keys.iter().enumerate() {
            hint_hist[bucket(hint.predict(k.offset_from(&pivot)).abs_diff(i))] += 1;
            model_hist[bucket(group.prediction(k).pos.abs_diff(i))] += 1;
            total += 1;
        }
    }
    println!("{name}: {total} keys in hinted groups, {unhinted} in others");
    let (mut hint_sum, mut model_sum) = (0, 0);
    for (u, (h, m)) in UPPER.iter().zip(hint_hist.iter().zip(&model_hist)) {
        hint_sum += h;
        model_sum += m;
        let share = |n: usize| n as f64 / total.max(1) as f64;
        let bound = if *u == usize::MAX {
            "any".to_string()
        } else {
            format!("<= {u}")
        };
        println!(
            "|error| {bound}: hint {:.3} | group model {:.3}",
            share(hint_sum),
            share(model_sum)
        );
    }
}

/// Whether where the group nodes land matters: one index bulk-loaded into
/// a fresh heap, one after the heap was fragmented the way other
/// structures in a bench process leave it, both alive, their random
/// `get`s timed alternately. Prints the 4 KiB pages each index's group
/// nodes cover (see `node_slab`).
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn node_placement() {
    use std::sync::atomic::Ordering;
    let (name, keys) = key_set();
    let fresh = loaded(&keys);
    let mut junk: Vec<Box<[u64]>> = Vec::new();
    {
        let map: BTreeMap<u64, u64> = keys.iter().map(|&k| (k, k)).collect();
        let mut state = 5u64;
        for i in 0..400_000usize {
            junk.push(vec![0u64; 4 + (splitmix(&mut state) % 200) as usize].into_boxed_slice());
            if i % 3 == 0 {
                let j = (splitmix(&mut state) % junk.len() as u64) as usize;
                junk.swap_remove(j);
            }
        }
        black_box(&map);
    }
    let mut state = 9u64;
    for _ in 0..junk.len() / 2 {
        let j = (splitmix(&mut state) % junk.len() as u64) as usize;
        junk.swap_remove(j);
    }
    let later = loaded(&keys);
    let pages = |index: &XIndex<u64, u64>| {
        let guard = index.inner().reclaimer.pin();
        let root = index.inner().root(&guard);
        let mut pages: Vec<usize> = root
            .slots
            .iter()
            .map(|s| s.load(Ordering::Acquire, &guard).as_raw() as usize >> 12)
            .collect();
        pages.sort_unstable();
        pages.dedup();
        pages.len()
    };
    println!(
        "{name}: group node pages: fresh heap {} | fragmented heap {}",
        pages(&fresh),
        pages(&later)
    );
    let probes = random_probes(&keys, 2_000_000, 1);
    let per_probe = |t: Instant| t.elapsed().as_nanos() as f64 / probes.len() as f64;
    for round in 0..6 {
        let mut times = Vec::new();
        for index in [&fresh, &later] {
            let t = Instant::now();
            for k in &probes {
                assert_eq!(index.get(k), Some(*k));
            }
            times.push(per_probe(t));
        }
        println!(
            "round {round}: get, fresh heap {:.1} ns | fragmented heap {:.1} ns",
            times[0], times[1]
        );
    }
    drop(junk);
}

/// Alternates random `get`s that pin the epoch themselves with `get`s
/// nested inside one outer pin (whose own pin then takes no fence), over
/// one bulk load: what the pin's locked instruction costs, or saves, when
/// consecutive gets may overlap.
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn pin_ab() {
    let (name, _, index, probes) = probed(1_000_000, 5);
    {
        let guard = index.inner().reclaimer.pin();
        println!(
            "{name}: {} of {} slots hinted (L2 {:?})",
            index.inner().root(&guard).hinted_slots(),
            index.stats().groups.len(),
            lidx_core::cpu_cache::l2_bytes()
        );
    }
    let timed_gets = || {
        let t = Instant::now();
        for k in &probes {
            assert_eq!(index.get(k), Some(*k));
        }
        t.elapsed().as_nanos() as f64 / probes.len() as f64
    };
    let [pinned, nested] = alternate(8, |nested| {
        let _outer = nested.then(|| index.inner().reclaimer.pin());
        timed_gets()
    });
    let ((pinned, pinned_min), (nested, nested_min)) = (median_min(&pinned), median_min(&nested));
    println!(
        "{name}: get median {pinned:.0} ns (min {pinned_min:.0}) | nested in an outer pin median {nested:.0} ns (min {nested_min:.0})"
    );
}

/// Runs `round(false)` and `round(true)` by turns, `rounds` times each, so
/// that the host's drift between rounds hits both settings alike; a round
/// returns its time per operation. Returns both series, sorted.
fn alternate(rounds: usize, mut round: impl FnMut(bool) -> f64) -> [Vec<f64>; 2] {
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (setting, series) in [false, true].into_iter().zip(times.iter_mut()) {
            series.push(round(setting));
        }
    }
    for series in &mut times {
        series.sort_by(f64::total_cmp);
    }
    times
}

/// The median and the minimum of a sorted, non-empty series.
fn median_min(sorted: &[f64]) -> (f64, f64) {
    (sorted[sorted.len() / 2], sorted[0])
}

/// Alternates, over one bulk load, 100-record scans from random keys with
/// and without the request of the run's lines with the start's search
/// (`Group::scan_prediction`; without it, nothing requests them: the copy
/// waits on each line in turn).
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn scan_ab() {
    use std::sync::atomic::Ordering;
    let (name, _, index, probes) = probed(300_000, 7);
    let mut out = Vec::with_capacity(128);
    let [late, early] = alternate(8, |early| {
        crate::group::SCAN_EARLY_PREFETCH.store(early, Ordering::Relaxed);
        let t = Instant::now();
        for k in &probes {
            out.clear();
            index.scan(k, 100, &mut out);
            assert_eq!(out.first().map(|p| p.0), Some(*k));
        }
        t.elapsed().as_nanos() as f64 / probes.len() as f64
    });
    crate::group::SCAN_EARLY_PREFETCH.store(true, Ordering::Relaxed);
    for (label, series) in [
        ("run not requested", late),
        ("run requested with the search", early),
    ] {
        let (median, min) = median_min(&series);
        println!("{name}, {label}: scan median {median:.0} ns (min {min:.0})");
    }
}

/// `N` no-ops: each takes a reorder-buffer entry and a dispatch slot, and
/// nothing else.
#[inline(always)]
fn pad<const N: usize>() {
    // SAFETY: no-ops only; touches no memory, register or flag.
    unsafe {
        std::arch::asm!(".rept {n}", "nop", ".endr", n = const N, options(nomem, nostack, preserves_flags));
    }
}

/// How much a `get`'s length decides its speed: times independent gets
/// with `N` no-ops before each, next to `BTreeMap` behind an `RwLock`
/// (medians of five rounds, settings alternated over one bulk load). If
/// consecutive gets overlapped their memory round trips only within the
/// CPU's reorder window, a few instructions more or less would move a
/// `get` a lot; the slope of time against `N` says what an instruction
/// of the path is worth.
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn padding_probe() {
    type Get<'a> = &'a dyn Fn(&u64) -> Option<u64>;
    type Round = fn(&[u64], Get<'_>) -> f64;
    fn timed<const N: usize>(probes: &[u64], get: Get<'_>) -> f64 {
        let t = Instant::now();
        for k in probes {
            pad::<N>();
            assert_eq!(get(k), Some(*k));
        }
        t.elapsed().as_nanos() as f64 / probes.len() as f64
    }
    let rounds: [(usize, Round); 5] = [
        (0, timed::<0>),
        (50, timed::<50>),
        (100, timed::<100>),
        (200, timed::<200>),
        (400, timed::<400>),
    ];
    let (name, keys, index, probes) = probed(1_000_000, 9);
    let map = RwLock::new(keys.iter().map(|&k| (k, k)).collect::<BTreeMap<u64, u64>>());
    let engines: [Get<'_>; 2] = [&|k| index.get(k), &|k| {
        map.read().expect("not poisoned").get(k).copied()
    }];
    let mut times = rounds.map(|_| [Vec::new(), Vec::new()]);
    for _ in 0..5 {
        for ((_, round), series) in rounds.iter().zip(times.iter_mut()) {
            for (get, s) in engines.iter().zip(series.iter_mut()) {
                s.push(round(&probes, *get));
            }
        }
    }
    println!("{name}");
    for ((pad, _), series) in rounds.iter().zip(times.iter_mut()) {
        let [get, btree] = series.each_mut().map(|s| {
            s.sort_by(f64::total_cmp);
            median_min(s).0
        });
        println!("{pad:>3} no-ops: get median {get:.0} ns | BTreeMap+RwLock median {btree:.0} ns");
    }
}

#[test]
fn padding_changes_nothing_it_surrounds() {
    let mut x = 41u64;
    x += 1;
    pad::<3>();
    pad::<0>();
    assert_eq!(std::hint::black_box(x), 42);
}

/// The least a learned lookup can do here: one optimal-PLA model (error
/// 8) over the whole key array, found through a radix table over its
/// segments, a 16-key window counted, the value read from a parallel
/// array whose line was requested with the window's. No groups, no
/// versions, no concurrency control: the bound any `get` of this design
/// is up against on this host, and how far from 2x `BTreeMap` it sits.
struct FlatLearned {
    keys: Vec<u64>,
    values: Vec<u64>,
    origins: Vec<u64>,
    lines: Vec<(f64, f64)>,
    radix: Vec<u32>,
    shift: u32,
}

impl FlatLearned {
    const RADIX_BITS: u32 = 16;

    fn new(keys: &[u64]) -> Self {
        let fit = lidx_core::model::optimal_pla::build(keys, 8).expect("fits");
        let segments = fit.model.into_segments();
        let origins: Vec<u64> = segments.iter().map(|s| s.origin).collect();
        let lines = segments.iter().map(|s| (s.slope, s.intercept)).collect();
        let span = keys[keys.len() - 1] - keys[0];
        let shift = (64 - span.leading_zeros()).saturating_sub(Self::RADIX_BITS);
        // radix[r] = first segment whose origin's bucket is >= r.
        let buckets = (span >> shift) as usize + 2;
        let mut radix = Vec::with_capacity(buckets);
        let mut s = 0;
        for r in 0..buckets {
            while s < origins.len() && ((origins[s] - keys[0]) >> shift) < r as u64 {
                s += 1;
            }
            radix.push(s as u32);
        }
        FlatLearned {
            keys: keys.to_vec(),
            values: keys.to_vec(),
            origins,
            lines,
            radix,
            shift,
        }
    }

    #[inline(always)]
    fn get(&self, k: u64) -> Option<u64> {
        let base = self.origins[0];
        let offset = k.checked_sub(base)?;
        let r = (offset >> self.shift) as usize;
        let (lo, hi) = (
            *self.radix.get(r)? as usize,
            *self.radix.get(r + 1)? as usize,
        );
        // The last segment starting at or below k is in [lo - 1, hi).
        // (Binary: skewed sets crowd thousands of segments into a bucket.)
        let s = lo + self.origins[lo..hi].partition_point(|&o| o <= k);
        let s = s.saturating_sub(1);
        let (slope, intercept) = self.lines[s];
        let predicted = intercept + slope * (k - self.origins[s]) as f64;
        let n = self.keys.len();
        let start = (predicted as i64 - 8).clamp(0, n.saturating_sub(16) as i64) as usize;
        lidx_core::prefetch::prefetch_lines(self.keys[start..].as_ptr(), 2);
        lidx_core::prefetch::prefetch(&self.values[(start + 8).min(n - 1)]);
        let window: &[u64; 16] = self.keys.get(start..start + 16)?.try_into().ok()?;
        let below = window.iter().filter(|&&w| w < k).count();
        let position = start + below;
        (self.keys.get(position) == Some(&k)).then(|| self.values[position])
    }
}

/// Alternates, over one key set, 1M independent random gets by:
/// `FlatLearned` bare; after one locked instruction each (what
/// crossbeam's pin adds on x86); inside an outer epoch pin (each get's own
/// pin nested, without the fence); with a pin of its own per get, as
/// `XIndex::get` has; `XIndex::get`; `BTreeMap` bare and behind an
/// `RwLock`. Medians of seven rounds.
#[test]
#[ignore = "measuring tool; run with --ignored --nocapture in release"]
fn ideal_bound() {
    use std::sync::atomic::{AtomicU64, Ordering};
    type Get<'a> = &'a dyn Fn(&u64) -> Option<u64>;
    let (name, keys, index, probes) = probed(1_000_000, 11);
    let flat = FlatLearned::new(&keys);
    for k in &keys {
        assert_eq!(flat.get(*k), Some(*k), "flat learned misses {k}");
    }
    let tree = keys.iter().map(|&k| (k, k)).collect::<BTreeMap<u64, u64>>();
    let locked = RwLock::new(tree.clone());
    let reclaimer = &index.inner().reclaimer;
    let word = AtomicU64::new(0);
    let pinned: Get<'_> = &|k| {
        let _guard = reclaimer.pin();
        flat.get(*k)
    };
    // (label, run inside an outer pin, get)
    let engines: [(&str, bool, Get<'_>); 7] = [
        ("flat learned", false, &|k| flat.get(*k)),
        ("flat + locked op", false, &|k| {
            let _ = word.compare_exchange(0, 0, Ordering::SeqCst, Ordering::SeqCst);
            flat.get(*k)
        }),
        ("flat + nested pin", true, pinned),
        ("flat + pin", false, pinned),
        ("XIndex::get", false, &|k| index.get(k)),
        ("BTreeMap", false, &|k| tree.get(k).copied()),
        ("BTreeMap+RwLock", false, &|k| {
            locked.read().expect("not poisoned").get(k).copied()
        }),
    ];
    let mut times = engines.map(|_| Vec::new());
    for _ in 0..7 {
        for ((_, nested, get), series) in engines.iter().zip(times.iter_mut()) {
            let _outer = nested.then(|| reclaimer.pin());
            let t = Instant::now();
            for k in &probes {
                assert_eq!(get(k), Some(*k));
            }
            series.push(t.elapsed().as_nanos() as f64 / probes.len() as f64);
        }
    }
    println!(
        "{name}: {} keys, {} segments, radix {} entries",
        keys.len(),
        flat.origins.len(),
        flat.radix.len()
    );
    for ((label, _, _), series) in engines.iter().zip(times.iter_mut()) {
        series.sort_by(f64::total_cmp);
        let (median, min) = median_min(series);
        println!("{label:>18}: median {median:.0} ns (min {min:.0})");
    }
}
