//! Workload generation checked by replaying the streams against a `BTreeMap`.

use std::collections::{BTreeMap, HashSet};

use lidx_bench::keygen::{Distribution, generate};
use lidx_bench::workload::{
    Expect, Op, Prepared, Step, WorkloadSpec, prepare, value_for, value_matches_key,
};
use lidx_core::Error;
use proptest::prelude::*;

fn spec(s: &str) -> WorkloadSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn all_specs() -> Vec<WorkloadSpec> {
    let mut v = WorkloadSpec::examples();
    v.extend([
        spec("mixed:0"),
        spec("mixed:0.5"),
        spec("mixed:1"),
        spec("append:1"),
    ]);
    v
}

fn keys(n: usize, seed: u64) -> Vec<u64> {
    generate(Distribution::Lognormal, n, seed).unwrap()
}

/// Runs `streams` in the order given by `schedule` (thread ids) against a
/// map holding the load, checking every expectation the way the runner
/// does. Returns the final map.
fn replay(p: &Prepared, schedule: &[usize]) -> BTreeMap<u64, u64> {
    let mut map: BTreeMap<u64, u64> = p.load.iter().copied().collect();
    assert_eq!(map.len(), p.load.len(), "load has duplicate keys");
    assert!(
        p.load.windows(2).all(|w| w[0].0 < w[1].0),
        "load not sorted"
    );
    assert!(p.load.iter().all(|&(k, v)| v == value_for(k, 0)));
    let mut next = vec![0usize; p.streams.len()];
    for &t in schedule {
        let step = p.streams[t][next[t]];
        next[t] += 1;
        let at = format!("thread {t} step {}: {step:?}", next[t] - 1);
        match step.op() {
            Op::Get(k) => {
                let got = map.get(&k).copied();
                match step.expect() {
                    Expect::Value(v) => assert_eq!(got, v, "{at}"),
                    Expect::Consistent => {
                        assert!(got.is_none_or(|v| value_matches_key(k, v)), "{at}")
                    }
                    e => panic!("{at}: get with expectation {e:?}"),
                }
            }
            Op::Scan(start, n) => {
                let got: Vec<(u64, u64)> = map
                    .range(start..)
                    .take(n as usize)
                    .map(|(&k, &v)| (k, v))
                    .collect();
                assert!(got.iter().all(|&(k, v)| value_matches_key(k, v)), "{at}");
                match step.expect() {
                    Expect::ScanFirst { len, first } => {
                        assert_eq!(got.len(), len as usize, "{at}");
                        if len > 0 {
                            assert_eq!(got[0].0, first, "{at}");
                        }
                    }
                    Expect::Consistent => {}
                    e => panic!("{at}: scan with expectation {e:?}"),
                }
            }
            Op::Floor(probe) => {
                let got = map.range(..=probe).next_back().map(|(&k, _)| k);
                match step.expect() {
                    Expect::Floor(want) => assert_eq!(got, want, "{at}"),
                    e => panic!("{at}: floor with expectation {e:?}"),
                }
            }
            Op::Insert(k, v) => {
                assert!(value_matches_key(k, v), "{at}");
                assert_eq!(step.expect(), Expect::Nothing);
                map.insert(k, v);
            }
            Op::Update(k, v) => {
                assert!(value_matches_key(k, v), "{at}");
                assert_eq!(step.expect(), Expect::Nothing);
                assert!(map.insert(k, v).is_some(), "{at}: update of an absent key");
            }
            Op::Remove(k) => {
                assert_eq!(step.expect(), Expect::Nothing);
                assert!(map.remove(&k).is_some(), "{at}: remove of an absent key");
            }
        }
    }
    map
}

fn sequential(p: &Prepared) -> Vec<usize> {
    (0..p.streams.len())
        .flat_map(|t| std::iter::repeat_n(t, p.streams[t].len()))
        .collect()
}

fn round_robin(p: &Prepared) -> Vec<usize> {
    let len = p.streams.first().map_or(0, Vec::len);
    (0..len).flat_map(|_| 0..p.streams.len()).collect()
}

/// A pseudo-random interleaving that keeps each thread's program order.
fn shuffled(p: &Prepared, seed: u64) -> Vec<usize> {
    let mut left: Vec<usize> = p.streams.iter().map(Vec::len).collect();
    let mut out = Vec::new();
    let mut x = seed | 1;
    while left.iter().any(|&l| l > 0) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let live: Vec<usize> = (0..left.len()).filter(|&t| left[t] > 0).collect();
        let t = live[(x % live.len() as u64) as usize];
        // Bursts make long runs of one thread, like real scheduling.
        for _ in 0..(x >> 40) % 50 + 1 {
            if left[t] == 0 {
                break;
            }
            left[t] -= 1;
            out.push(t);
        }
    }
    out
}

fn write_key(op: Op) -> Option<u64> {
    match op {
        Op::Insert(k, _) | Op::Update(k, _) | Op::Remove(k) => Some(k),
        Op::Get(_) | Op::Scan(..) | Op::Floor(_) => None,
    }
}

fn count(stream: &[Step], pred: impl Fn(&Op) -> bool) -> usize {
    stream.iter().filter(|s| pred(&s.op())).count()
}

#[test]
fn every_spec_prepares_with_equal_streams() {
    let k = keys(2000, 1);
    for s in all_specs() {
        for threads in [1, 2, 3] {
            let p = prepare(&s, &k, threads, 3000, 9).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(p.streams.len(), threads, "{s}");
            let len = p.streams[0].len();
            assert!(
                p.streams.iter().all(|st| st.len() == len),
                "{s}: unequal streams"
            );
            assert!(len > 0, "{s}: empty streams");
            let total = len * threads;
            // `insert` is bounded by the held-back half (1000 keys).
            let want = if matches!(s.name().as_str(), "insert" | "w3") {
                900
            } else {
                3000
            };
            assert!(
                total >= want && total <= 3000 + threads,
                "{s} T={threads}: {total} ops"
            );
            assert_eq!(p.writes, s.is_write(), "{s}");
            let writes = p
                .streams
                .iter()
                .flatten()
                .filter(|st| write_key(st.op()).is_some())
                .count();
            assert_eq!(writes > 0, s.is_write(), "{s}: writes {writes}");
        }
    }
}

#[test]
fn generation_is_deterministic_and_seed_dependent() {
    let k = keys(3000, 2);
    for s in all_specs() {
        for threads in [1, 2] {
            let a = prepare(&s, &k, threads, 2000, 5).unwrap();
            let b = prepare(&s, &k, threads, 2000, 5).unwrap();
            assert_eq!(a, b, "{s}");
            let c = prepare(&s, &k, threads, 2000, 6).unwrap();
            assert_ne!(a.streams, c.streams, "{s}: seed ignored");
        }
    }
}

#[test]
fn single_thread_expectations_are_exact_and_hold() {
    for dist in [Distribution::Lognormal, Distribution::UniformDense] {
        let k = generate(dist, 3000, 3).unwrap();
        for s in all_specs() {
            let p = prepare(&s, &k, 1, 6000, 11).unwrap();
            assert!(
                p.streams[0]
                    .iter()
                    .all(|st| st.expect() != Expect::Consistent),
                "{s}: Consistent with one thread"
            );
            replay(&p, &sequential(&p));
        }
    }
}

#[test]
fn multi_thread_ownership_and_expectations() {
    let k = keys(1500, 4);
    for s in all_specs() {
        for threads in [2, 3] {
            let p = prepare(&s, &k, threads, 6000, 13).unwrap();
            let writes: Vec<HashSet<u64>> = p
                .streams
                .iter()
                .map(|st| st.iter().filter_map(|x| write_key(x.op())).collect())
                .collect();
            for a in 0..threads {
                for b in a + 1..threads {
                    assert!(
                        writes[a].is_disjoint(&writes[b]),
                        "{s}: threads {a} and {b} write the same key"
                    );
                }
            }
            let foreign =
                |t: usize, key: u64| (0..threads).any(|u| u != t && writes[u].contains(&key));
            let mut consistent = 0;
            for (t, st) in p.streams.iter().enumerate() {
                for x in st {
                    match (x.op(), x.expect()) {
                        (Op::Get(key), Expect::Consistent) => {
                            consistent += 1;
                            assert!(foreign(t, key), "{s}: needless Consistent for {key}");
                        }
                        (Op::Get(key), Expect::Value(_)) => {
                            assert!(!foreign(t, key), "{s}: exact read of a contested key {key}");
                        }
                        (Op::Scan(start, _), Expect::Consistent) => {
                            consistent += 1;
                            let contested = (0..threads)
                                .any(|u| u != t && writes[u].iter().any(|&w| w >= start));
                            assert!(contested, "{s}: needless Consistent scan");
                        }
                        _ => {}
                    }
                }
            }
            if !s.is_write() {
                assert_eq!(consistent, 0, "{s}");
            }
            // Exact expectations must hold whatever the interleaving.
            let mut finals = vec![replay(&p, &sequential(&p)), replay(&p, &round_robin(&p))];
            for seed in 1..4 {
                finals.push(replay(&p, &shuffled(&p, seed)));
            }
            // Threads write disjoint keys, so the end state never depends on
            // the interleaving.
            assert!(
                finals.windows(2).all(|w| w[0] == w[1]),
                "{s}: final state depends on order"
            );
        }
    }
}

#[test]
fn mixed_proportions() {
    let k = keys(20_000, 5);
    let p = prepare(&spec("mixed:0.9"), &k, 1, 100_000, 1).unwrap();
    let st = &p.streams[0];
    let reads = count(st, |o| matches!(o, Op::Get(_))) as f64 / st.len() as f64;
    assert!((reads - 0.9).abs() < 0.01, "{reads}");
    let ins = count(st, |o| matches!(o, Op::Insert(..))) as f64;
    let rem = count(st, |o| matches!(o, Op::Remove(_))) as f64;
    let upd = count(st, |o| matches!(o, Op::Update(..))) as f64;
    assert!((ins / rem - 1.0).abs() < 0.1, "insert:remove {ins}:{rem}");
    assert!(
        (upd / (ins + rem) - 1.0).abs() < 0.1,
        "update vs insert+remove {upd}:{}",
        ins + rem
    );
    // Inserted keys come from the dataset and were held back from the load.
    let loaded: HashSet<u64> = p.load.iter().map(|x| x.0).collect();
    let dataset: HashSet<u64> = k.iter().copied().collect();
    let fresh = st
        .iter()
        .filter_map(|x| match x.op() {
            Op::Insert(k, _) => Some(k),
            _ => None,
        })
        .filter(|k| !loaded.contains(k))
        .count();
    assert!(fresh > 0);
    assert!(
        st.iter()
            .filter_map(|x| write_key(x.op()))
            .all(|k| dataset.contains(&k))
    );
    assert!(p.load.len() < k.len() && p.load.len() > k.len() / 2);
}

#[test]
fn append_inserts_the_largest_keys_in_ascending_order() {
    let k = keys(20_000, 7);
    for threads in [1, 2, 3] {
        let p = prepare(&spec("append:0.5"), &k, threads, 12_000, 1).unwrap();
        // About half of the operations append; the load is everything below.
        let held = 6_000;
        assert_eq!(p.load.len(), k.len() - held);
        assert!(
            p.load
                .iter()
                .map(|x| x.0)
                .eq(k[..k.len() - held].iter().copied())
        );
        let first = k.len() - held;
        for (t, stream) in p.streams.iter().enumerate() {
            let mine: Vec<u64> = stream
                .iter()
                .filter_map(|x| match x.op() {
                    Op::Insert(key, _) => Some(key),
                    _ => None,
                })
                .collect();
            // A prefix of the thread's own share of the held-back keys,
            // in ascending order.
            let share: Vec<u64> = (first..k.len())
                .filter(|i| i % threads == t)
                .map(|i| k[i])
                .collect();
            assert!(!mine.is_empty() && mine.len() <= share.len());
            assert_eq!(mine, share[..mine.len()], "thread {t}");
            let reads = count(stream, |o| matches!(o, Op::Get(_))) as f64 / stream.len() as f64;
            assert!((reads - 0.5).abs() < 0.05, "thread {t}: {reads}");
        }
    }
    // `append` is all appends: every held-back key, then reads.
    let p = prepare(&spec("append"), &k, 1, 30_000, 1).unwrap();
    assert_eq!(p.load.len(), k.len() / 2);
    let inserts: Vec<u64> = p.streams[0]
        .iter()
        .filter_map(|x| match x.op() {
            Op::Insert(key, _) => Some(key),
            _ => None,
        })
        .collect();
    assert!(inserts.iter().eq(k[k.len() / 2..].iter()));
}

#[test]
fn aulid_proportions() {
    let k = keys(20_000, 6);
    for (name, read) in [("w4", 0.9), ("w5", 0.5), ("w6", 0.1)] {
        let p = prepare(&spec(name), &k, 1, 10_000, 2).unwrap();
        let st = &p.streams[0];
        let reads = count(st, |o| matches!(o, Op::Get(_))) as f64 / st.len() as f64;
        assert!((reads - read).abs() < 0.02, "{name}: {reads}");
        assert_eq!(
            count(st, |o| matches!(o, Op::Insert(..) | Op::Get(_))),
            st.len(),
            "{name}"
        );
        let final_map = replay(&p, &sequential(&p));
        // Every insert added a new key: the index grows by the write count.
        assert_eq!(
            final_map.len(),
            p.load.len() + st.len() - count(st, |o| matches!(o, Op::Get(_)))
        );
    }
    let w3 = prepare(&spec("w3"), &k, 1, 1_000_000, 2).unwrap();
    assert_eq!(w3.load.len(), 10_000);
    assert_eq!(w3.streams[0].len(), 10_000);
    let all = replay(&w3, &sequential(&w3));
    assert_eq!(
        all.keys().copied().collect::<Vec<_>>(),
        k,
        "insert must end with the whole dataset"
    );
    let w2 = prepare(&spec("w2"), &k, 1, 1000, 2).unwrap();
    assert!(
        w2.streams[0]
            .iter()
            .all(|x| matches!(x.op(), Op::Scan(_, 100)))
    );
}

#[test]
fn ycsb_proportions() {
    let k = keys(20_000, 7);
    let frac = |p: &Prepared, f: fn(&Op) -> bool| {
        let st = &p.streams[0];
        count(st, f) as f64 / st.len() as f64
    };
    let get = |o: &Op| matches!(o, Op::Get(_));
    for (name, reads) in [
        ("ycsb-a", 0.5),
        ("ycsb-b", 0.95),
        ("ycsb-c", 1.0),
        ("ycsb-d", 0.95),
    ] {
        let p = prepare(&spec(name), &k, 1, 50_000, 3).unwrap();
        let r = frac(&p, get);
        assert!((r - reads).abs() < 0.01, "{name}: reads {r}");
    }
    let a = prepare(&spec("ycsb-a"), &k, 1, 10_000, 3).unwrap();
    assert!((frac(&a, |o| matches!(o, Op::Update(..))) - 0.5).abs() < 0.02);
    let d = prepare(&spec("ycsb-d"), &k, 1, 50_000, 3).unwrap();
    assert!((frac(&d, |o| matches!(o, Op::Insert(..))) - 0.05).abs() < 0.01);

    let e = prepare(&spec("ycsb-e"), &k, 1, 50_000, 3).unwrap();
    assert!((frac(&e, |o| matches!(o, Op::Scan(..))) - 0.95).abs() < 0.01);
    let lens: Vec<u32> = e.streams[0]
        .iter()
        .filter_map(|x| match x.op() {
            Op::Scan(_, n) => Some(n),
            _ => None,
        })
        .collect();
    assert!(lens.iter().all(|&n| (1..=100).contains(&n)));
    let mean = lens.iter().map(|&n| n as f64).sum::<f64>() / lens.len() as f64;
    assert!((mean - 50.5).abs() < 1.5, "mean scan length {mean}");

    // F: half the operations are read-modify-writes, i.e. a get and an
    // update of the same key; in steps that is 2/3 gets, 1/3 updates.
    let f = prepare(&spec("ycsb-f"), &k, 1, 60_000, 3).unwrap();
    let st = &f.streams[0];
    let upd = frac(&f, |o| matches!(o, Op::Update(..)));
    assert!((upd - 1.0 / 3.0).abs() < 0.01, "{upd}");
    for w in st.windows(2) {
        if let Op::Update(k, _) = w[1].op() {
            assert_eq!(w[0].op(), Op::Get(k), "update not preceded by its read");
        }
    }
}

#[test]
fn zipf_reads_are_skewed_and_scattered() {
    let k = keys(100_000, 8);
    let p = prepare(&spec("lookup:zipf"), &k, 1, 200_000, 4).unwrap();
    let mut freq: BTreeMap<u64, usize> = BTreeMap::new();
    for x in &p.streams[0] {
        if let Op::Get(key) = x.op() {
            *freq.entry(key).or_default() += 1;
        }
    }
    let mut top: Vec<(usize, u64)> = freq.iter().map(|(&k, &c)| (c, k)).collect();
    top.sort_unstable_by(|a, b| b.cmp(a));
    // Zipf(0.99) over 1e5 items: the top item gets ~1/zeta ~ 8 % of draws,
    // the top 1 % of items about half.
    let share0 = top[0].0 as f64 / 200_000.0;
    assert!(share0 > 0.05 && share0 < 0.12, "{share0}");
    let top1pct: usize = top.iter().take(1000).map(|x| x.0).sum();
    assert!(top1pct as f64 / 200_000.0 > 0.4, "{top1pct}");
    // Hot keys are spread: the ten hottest sit in different tenths of the set.
    let ranks: HashSet<usize> = top[..10]
        .iter()
        .map(|&(_, key)| k.binary_search(&key).unwrap() * 10 / k.len())
        .collect();
    assert!(ranks.len() >= 4, "hot keys clustered: {ranks:?}");
    // Uniform lookups, by contrast, have no hot key.
    let u = prepare(&spec("lookup"), &k, 1, 200_000, 4).unwrap();
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for x in &u.streams[0] {
        if let Op::Get(key) = x.op() {
            *seen.entry(key).or_default() += 1;
        }
    }
    assert!(*seen.values().max().unwrap() < 20);
}

#[test]
fn latest_favours_recent_inserts() {
    let k = keys(20_000, 9);
    let p = prepare(&spec("ycsb-d"), &k, 1, 40_000, 5).unwrap();
    let loaded: HashSet<u64> = p.load.iter().map(|x| x.0).collect();
    let st = &p.streams[0];
    let inserted = count(st, |o| matches!(o, Op::Insert(..)));
    let fresh_reads = st
        .iter()
        .filter(|x| matches!(x.op(), Op::Get(k) if !loaded.contains(&k)))
        .count();
    let reads = count(st, |o| matches!(o, Op::Get(_)));
    // Fresh keys are ~10 % of the keys but draw far more of the reads.
    let share_keys = inserted as f64 / (loaded.len() + inserted) as f64;
    let share_reads = fresh_reads as f64 / reads as f64;
    assert!(
        share_reads > 3.0 * share_keys,
        "{share_reads} vs {share_keys}"
    );
}

#[test]
fn misses_are_absent_and_spread() {
    let k = keys(10_000, 10);
    let p = prepare(&spec("lookup-miss"), &k, 2, 20_000, 6).unwrap();
    let set: HashSet<u64> = k.iter().copied().collect();
    let (lo, hi) = (k[0], k[k.len() - 1]);
    let mut inside = 0;
    for x in p.streams.iter().flatten() {
        let Op::Get(key) = x.op() else {
            panic!("not a get")
        };
        assert!(!set.contains(&key));
        assert_eq!(x.expect(), Expect::Value(None));
        inside += usize::from(key > lo && key < hi);
    }
    assert!(inside > 19_000, "misses should fall between keys: {inside}");
    // Dense keys leave only the two ends.
    let dense: Vec<u64> = (1000..2000).collect();
    let p = prepare(&spec("lookup-miss"), &dense, 1, 100, 6).unwrap();
    assert!(
        p.streams[0]
            .iter()
            .all(|x| matches!(x.op(), Op::Get(k) if !(1000..2000).contains(&k)))
    );
}

#[test]
fn scans_are_100_records_from_existing_keys() {
    let k = keys(5000, 11);
    let p = prepare(&spec("scan"), &k, 1, 5000, 7).unwrap();
    let mut short = 0;
    for x in &p.streams[0] {
        let Op::Scan(start, 100) = x.op() else {
            panic!("{x:?}")
        };
        let i = k.binary_search(&start).expect("start is an existing key");
        let Expect::ScanFirst { len, first } = x.expect() else {
            panic!()
        };
        assert_eq!(first, start);
        assert_eq!(len as usize, 100.min(k.len() - i));
        short += usize::from(len < 100);
    }
    assert!(short > 0 && short < 500);
}

#[test]
fn oscillate_has_read_write_read_phases_over_the_hotspot() {
    let k = keys(30_000, 12);
    let p = prepare(&spec("oscillate"), &k, 1, 30_000, 8).unwrap();
    let st = &p.streams[0];
    let third = st.len() / 3;
    let hot_end = k[k.len() / 10];
    for (i, x) in st.iter().enumerate() {
        if i < third || i >= 2 * third {
            let Op::Scan(start, 100) = x.op() else {
                panic!("{i}: {x:?}")
            };
            assert!(start < hot_end, "scan outside the hotspot");
        } else {
            assert!(write_key(x.op()).is_some(), "{i}: {x:?}");
        }
    }
    let mid = &st[third..2 * third];
    let ins = count(mid, |o| matches!(o, Op::Insert(..))) as f64 / mid.len() as f64;
    assert!((ins - 0.5).abs() < 0.03, "{ins}");
    // Writes reach the whole key space, not just the hotspot.
    assert!(
        mid.iter()
            .any(|x| write_key(x.op()).unwrap() > k[k.len() / 2])
    );
}

#[test]
fn shift_replaces_every_key() {
    let k = keys(4000, 13);
    for threads in [1, 2] {
        let p = prepare(&spec("shift"), &k, threads, 40_000, 9).unwrap();
        let final_map = replay(&p, &round_robin(&p));
        let a: HashSet<u64> = p.load.iter().map(|x| x.0).collect();
        assert_eq!(a.len(), 4000, "ops/8 >= keys, so A is the whole dataset");
        assert!(
            final_map.keys().all(|k| !a.contains(k)),
            "a key of A survived"
        );
        assert_eq!(final_map.len(), a.len(), "B should have as many keys as A");
        // B has a different shape: its median sits well below A's.
        let b: Vec<u64> = final_map.keys().copied().collect();
        assert!(b[b.len() / 2] < k[k.len() / 2]);
        // Stages: reads at 90 % in the first and last quarters.
        let st = &p.streams[0];
        let q = st.len() / 4;
        for part in [&st[..q / 2], &st[st.len() - q / 2..]] {
            let reads = count(part, |o| matches!(o, Op::Get(_))) as f64 / part.len() as f64;
            assert!((reads - 0.9).abs() < 0.05, "{reads}");
            assert!(
                part.iter()
                    .all(|x| !matches!(x.op(), Op::Insert(..) | Op::Remove(_)))
            );
        }
    }
    // A large dataset is sampled down so the shift fits the budget.
    let big = keys(50_000, 14);
    let p = prepare(&spec("shift"), &big, 1, 40_000, 9).unwrap();
    assert_eq!(p.load.len(), 5000);
    let final_map = replay(&p, &sequential(&p));
    assert!(p.load.iter().all(|(k, _)| !final_map.contains_key(k)));
}

#[test]
fn bad_inputs_are_errors() {
    let k = keys(100, 15);
    let is_invalid = |r: lidx_core::Result<Prepared>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(is_invalid(prepare(&spec("lookup"), &k, 0, 10, 1)));
    assert!(is_invalid(prepare(&spec("lookup"), &[], 1, 10, 1)));
    assert!(is_invalid(prepare(&spec("mixed:0.5"), &[], 1, 10, 1)));
    assert!(is_invalid(prepare(&spec("ycsb-a"), &k[..3], 4, 10, 1)));
    assert!(is_invalid(prepare(
        &WorkloadSpec::Mixed { read: 2.0 },
        &k,
        1,
        10,
        1
    )));
    assert!(is_invalid(prepare(&spec("lookup"), &[1, 1, 2], 1, 10, 1)));
    assert!(matches!(
        prepare(&spec("lookup"), &[3, 2], 1, 10, 1),
        Err(Error::Unsorted { index: 1 })
    ));
    // An empty set has only misses, which is fine.
    let p = prepare(&spec("lookup-miss"), &[], 1, 10, 1).unwrap();
    assert_eq!(p.streams[0].len(), 10);
    // Zero operations give empty streams.
    let p = prepare(&spec("shift"), &k, 2, 0, 1).unwrap();
    assert!(p.streams.iter().all(Vec::is_empty));
}

#[test]
fn tiny_key_sets() {
    for n in [1usize, 2, 3] {
        let k: Vec<u64> = (0..n as u64).map(|i| i * 10).collect();
        for s in all_specs() {
            for threads in 1..=n.min(2) {
                let p =
                    prepare(&s, &k, threads, 50, 2).unwrap_or_else(|e| panic!("{s} n={n}: {e}"));
                replay(&p, &round_robin(&p));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_key_sets_replay_exactly(
        raw in proptest::collection::btree_set(any::<u64>(), 1..300),
        which in 0usize..24,
        threads in 1usize..4,
        ops in 0usize..600,
        seed in any::<u64>(),
    ) {
        let k: Vec<u64> = raw.into_iter().collect();
        let specs = all_specs();
        let s = specs[which % specs.len()];
        let threads = threads.min(k.len());
        let p = prepare(&s, &k, threads, ops, seed).unwrap();
        prop_assert_eq!(p.streams.len(), threads);
        replay(&p, &shuffled(&p, seed));
        if threads == 1 {
            prop_assert!(p.streams[0].iter().all(|x| x.expect() != Expect::Consistent));
        }
    }
}

/// Not run by default: measures generation time for 10M operations.
#[test]
#[ignore]
fn generation_speed_10m() {
    let k = generate(Distribution::UniformSparse, 2_000_000, 1).unwrap();
    for s in [
        "lookup",
        "lookup:zipf",
        "lookup-miss",
        "mixed:0.5",
        "ycsb-a",
        "ycsb-d",
        "ycsb-e",
        "oscillate",
        "shift",
    ] {
        for threads in [1, 4] {
            let t0 = std::time::Instant::now();
            let p = prepare(&spec(s), &k, threads, 10_000_000, 1).unwrap();
            let n: usize = p.streams.iter().map(Vec::len).sum();
            println!(
                "{s:12} T={threads}: {n} ops in {:.2}s",
                t0.elapsed().as_secs_f64()
            );
        }
    }
}
