//! Multi-threaded stress on overlapping keys while maintenance runs
//! continuously, checked at the end against every thread's log.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use lidx_core::Key;

use super::{TestKey, soak};
use crate::{Config, XIndex};

const THREADS: u64 = 3;
const OPS: u64 = 15_000;
const SHARED_KEYS: u64 = 768;
const PRIVATE_BASE: u64 = 100_000;
const PRIVATE_KEYS: u64 = 512;
/// Passes the workers wait for (at most [`MAX_RUN`]): on an idle machine
/// a pass takes a few milliseconds, on two cores shared with the rest of
/// the suite it can take hundreds.
const MIN_PASSES: u64 = 12;
const MAX_RUN: Duration = Duration::from_secs(4);

/// Values name their writer, sequence number and key, so any value read
/// can be traced back to the one put that wrote it.
fn encode(thread: u64, seq: u64, key: u64) -> u64 {
    (thread << 56) | (seq << 20) | key
}

fn decode(value: u64) -> (u64, u64, u64) {
    (
        value >> 56,
        (value >> 20) & ((1 << 36) - 1),
        value & ((1 << 20) - 1),
    )
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Put(u64),
    Remove,
    Get,
}

#[derive(Clone, Copy, Debug)]
struct Logged {
    seq: u64,
    key: u64,
    kind: Kind,
    result: Option<u64>,
}

fn worker<K: TestKey>(index: &XIndex<K, u64>, thread: u64, round: u64) -> Vec<Logged> {
    let mut rng = ChaCha8Rng::seed_from_u64(soak::seed(thread * 7919 + 1, round));
    let mut private: BTreeMap<u64, u64> = BTreeMap::new();
    let own_base = PRIVATE_BASE + thread * PRIVATE_KEYS * 4;
    let mut log = Vec::new();
    // Run at least OPS operations and until maintenance has made several
    // passes under this load (bounded, in case the machine is starved).
    let passes = |i: &XIndex<K, u64>| i.inner().counters.passes.load(Ordering::Relaxed);
    let started = std::time::Instant::now();
    let enough = |seq: u64| {
        seq >= OPS
            && (passes(index) >= MIN_PASSES || seq >= OPS * 10 || started.elapsed() > MAX_RUN)
    };
    for seq in 0.. {
        if enough(seq) {
            break;
        }
        let roll = rng.random_range(0..10);
        if rng.random_bool(0.3) {
            // Keys only this thread touches behave exactly like a map.
            let key = own_base + rng.random_range(0..PRIVATE_KEYS) * 3;
            let value = encode(thread, seq, key & 0xfffff);
            let k = K::of(key);
            match roll {
                0..=4 => assert_eq!(index.insert(k, value), private.insert(key, value)),
                5..=6 => assert_eq!(index.remove(&k), private.remove(&key)),
                _ => assert_eq!(
                    index.get(&k),
                    private.get(&key).copied(),
                    "private key {key}"
                ),
            }
            continue;
        }
        let key = rng.random_range(0..SHARED_KEYS);
        let k = K::of(key);
        let (kind, result) = match roll {
            0..=4 => {
                let value = encode(thread, seq, key);
                (Kind::Put(value), index.insert(k, value))
            }
            5..=6 => (Kind::Remove, index.remove(&k)),
            _ => (Kind::Get, index.get(&k)),
        };
        log.push(Logged {
            seq,
            key,
            kind,
            result,
        });
    }
    // Leave the private keys in place for the final check.
    for (key, value) in private {
        assert_eq!(index.get(&K::of(key)), Some(value), "private key {key}");
    }
    log
}

/// Small thresholds, a 1 ms background thread, tails in every group and a
/// delta budget small enough that writers often run passes themselves.
/// Soak rounds after the first vary the thresholds and the tails.
fn stress_config(round: u64) -> Config {
    let mut rng = soak::config_rng(round);
    let (sequential_capacity, sequential_groups) = soak::pick(
        &mut rng,
        round,
        &[
            // Tails in every group: the most inserts through the tail lock.
            (8, crate::SequentialGroups::All),
            (3, crate::SequentialGroups::All),
            (0, crate::SequentialGroups::Detected),
            (64, crate::SequentialGroups::Detected),
        ],
    );
    let config = Config {
        error_bound: soak::pick(&mut rng, round, &[4, 1, 2, 8]),
        delta_threshold: soak::pick(&mut rng, round, &[16, 8, 32]),
        tolerance: soak::pick(&mut rng, round, &[0.25, 0.5]),
        max_models: soak::pick(&mut rng, round, &[2, 1, 4]),
        initial_group_size: soak::pick(&mut rng, round, &[64, 16]),
        max_root_models: 64,
        sequential_capacity,
        sequential_groups,
        maintenance_interval: Some(Duration::from_millis(1)),
        small_delta_delay: Duration::from_millis(2),
        // Small enough that writers often run passes alongside the thread.
        delta_budget_bytes: 4096,
        // The default: maintenance yields to the busy writers, and the
        // budget makes them help.
        maintenance_nice: Config::default().maintenance_nice,
        build_threads: Config::default().build_threads,
    };
    if round != 0 {
        eprintln!("round {round}: {config:?}");
    }
    config
}

#[test]
fn overlapping_writers_with_continuous_maintenance() {
    for round in soak::rounds("overlapping_writers_with_continuous_maintenance") {
        overlapping_writers::<u64>(round);
    }
}

/// The same with byte-string keys: their arrays hold pointers to heap
/// keys that retired groups keep until reclaimed, and their delta trees
/// compare through records once the stored prefixes tie.
#[test]
fn overlapping_writers_with_byte_string_keys() {
    for round in soak::rounds("overlapping_writers_with_byte_string_keys") {
        overlapping_writers::<Vec<u8>>(round);
    }
}

fn overlapping_writers<K: TestKey>(round: u64) {
    let config = stress_config(round);
    // Even shared keys start present with a recognisable initial value.
    let initial = |key: u64| encode(0xff, 0, key);
    let index = XIndex::bulk_load(
        (0..SHARED_KEYS).step_by(2).map(|k| (K::of(k), initial(k))),
        config,
    )
    .unwrap();
    let logs: Vec<Vec<Logged>> = with_back_to_back_passes(&index, |t| worker(&index, t, round));

    // Every value ever returned was written to that key by a logged put
    // (or is the key's initial value): nothing invented, nothing torn.
    let mut written: HashMap<u64, (u64, u64)> = HashMap::new();
    for (t, log) in logs.iter().enumerate() {
        for entry in log {
            if let Kind::Put(v) = entry.kind {
                written.insert(v, (t as u64, entry.key));
            }
        }
    }
    for log in &logs {
        for entry in log {
            if let Some(v) = entry.result {
                let (_, _, key) = decode(v);
                assert_eq!(key, entry.key, "value of another key returned: {entry:?}");
                assert!(
                    v == initial(entry.key) || written.contains_key(&v),
                    "unknown value {entry:?}"
                );
            }
        }
    }

    // Per key: initial presence + creations - removals = final presence,
    // which is 0 or 1 (no lost put, no duplicate record).
    let mut balance: BTreeMap<u64, i64> = (0..SHARED_KEYS)
        .map(|k| (k, i64::from(k % 2 == 0)))
        .collect();
    for log in &logs {
        for entry in log {
            match (entry.kind, entry.result) {
                (Kind::Put(_), None) => *balance.get_mut(&entry.key).unwrap() += 1,
                (Kind::Remove, Some(_)) => *balance.get_mut(&entry.key).unwrap() -= 1,
                _ => {}
            }
        }
    }
    // Each thread's last put or remove per key.
    let mut last_write_seq: HashMap<(u64, u64), u64> = HashMap::new();
    for (t, log) in logs.iter().enumerate() {
        for entry in log.iter().filter(|e| !matches!(e.kind, Kind::Get)) {
            last_write_seq.insert((t as u64, entry.key), entry.seq);
        }
    }
    let mut live = 0usize;
    for (&key, &count) in &balance {
        let final_value = index.get(&K::of(key));
        assert_eq!(
            count,
            i64::from(final_value.is_some()),
            "key {key}: balance {count}, final {final_value:?}"
        );
        if let Some(v) = final_value {
            live += 1;
            if v != initial(key) {
                // The final value's writer did nothing to the key afterwards
                // except read it.
                let (t, seq, _) = decode(v);
                let last_write = last_write_seq.get(&(t, key)).copied().unwrap_or(0);
                assert_eq!(
                    last_write, seq,
                    "key {key}: final value {v:#x} was overwritten by its own writer"
                );
            }
        }
    }
    let private_live: usize = index.range(K::of(PRIVATE_BASE)..).count();
    assert_eq!(index.len(), live + private_live);
    let all: Vec<K> = index.range(..).map(|(k, _)| k).collect();
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "range repeated or reordered keys"
    );
    assert_eq!(all.len(), index.len());
    let stats = index.stats();
    assert!(
        stats.group_splits > 0 && stats.maintenance_passes >= 3,
        "{stats:?}"
    );
    // Writers went over the small delta budget and helped; once every
    // delta is compacted, every charge has been refunded exactly.
    assert!(stats.budget_waits > 0, "{stats:?}");
    super::settle(&index);
    let stats = index.stats();
    assert_eq!(
        (stats.delta_bytes, stats.delta_total()),
        (0, 0),
        "{stats:?}"
    );
}

/// What a [`claimer`] did: increments per counter, claims won, claims
/// released.
type ClaimLog = (Vec<u64>, Vec<u64>, Vec<u64>);

/// One thread of [`conditional_writes_with_continuous_maintenance`].
fn claimer(index: &XIndex<u64, u64>, t: u64, start: std::time::Instant, round: u64) -> ClaimLog {
    let mut rng = ChaCha8Rng::seed_from_u64(soak::seed(t * 104_729 + 5, round));
    let mut increments = vec![0u64; COUNTERS as usize];
    let (mut won, mut released) = (Vec::new(), Vec::new());
    let mut holding = std::collections::HashSet::new();
    // Every thread tries every claim, in its own order.
    let mut claims: Vec<u64> = (0..CLAIMS).collect();
    for i in (1..claims.len()).rev() {
        claims.swap(i, rng.random_range(0..=i));
    }
    for (i, &claim) in claims.iter().enumerate() {
        let key = CLAIM_BASE + claim;
        match index.try_insert(key, t) {
            Ok(()) => {
                won.push(claim);
                holding.insert(claim);
            }
            Err(owner) => assert!(owner < THREADS && owner != t, "{owner}"),
        }
        let c = rng.random_range(0..COUNTERS);
        let add = |v: Option<u64>| Some(Some(v.unwrap_or(0) + 1));
        index.fetch_update(&(COUNTER_BASE + c), add).unwrap();
        increments[c as usize] += 1;
        // Noise among the bulk-loaded keys: splits, merges.
        let noise = rng.random_range(0..SHARED_KEYS * 3);
        if rng.random_bool(0.5) {
            index.insert(noise, noise);
        } else {
            index.remove(&noise);
        }
        if i % 3 == 2 && start.elapsed() < MAX_RUN {
            // Release a claim tried earlier: only its
            // holder's exchange matches.
            let claim = claims[i - 2];
            let mine = holding.remove(&claim);
            let done = index
                .compare_exchange(&(CLAIM_BASE + claim), Some(t), None)
                .is_ok();
            assert_eq!(done, mine, "claim {claim} by thread {t}");
            if done {
                released.push(claim);
            }
        }
    }
    (increments, won, released)
}

/// Runs `work(t)` for `t` in `0..THREADS` on their own threads while
/// another thread runs maintenance passes back to back (racing the
/// background thread's), and returns the results once all are done.
fn with_back_to_back_passes<K: Key, T: Send>(
    index: &XIndex<K, u64>,
    work: impl Fn(u64) -> T + Sync,
) -> Vec<T> {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                index.maintain_now();
            }
        });
        let work = &work;
        let handles: Vec<_> = (0..THREADS).map(|t| s.spawn(move || work(t))).collect();
        super::join_then_stop(handles, || done.store(true, Ordering::Relaxed))
    })
}

const COUNTERS: u64 = 48;
const CLAIMS: u64 = 20_000;
const COUNTER_BASE: u64 = 1 << 30;
const CLAIM_BASE: u64 = 2 << 30;

/// Threads increment shared counters with `fetch_update`, race to claim
/// keys with `try_insert`, release a third of the claims they tried with
/// `compare_exchange` (which only the holder's can do; a released key may
/// be claimed again) and insert and remove other keys around them, while
/// maintenance runs back to back. At the end every counter holds exactly
/// its increments, and per claim key the wins minus the releases are 1 if
/// it is held (by the last thread to win it) and 0 if not.
#[test]
fn conditional_writes_with_continuous_maintenance() {
    for round in soak::rounds("conditional_writes_with_continuous_maintenance") {
        conditional_writes(round);
    }
}

fn conditional_writes(round: u64) {
    let config = stress_config(round);
    let index = XIndex::bulk_load((0..SHARED_KEYS).map(|k| (k * 3, k)), config).unwrap();
    let start = std::time::Instant::now();
    let results: Vec<ClaimLog> =
        with_back_to_back_passes(&index, |t| claimer(&index, t, start, round));
    for c in 0..COUNTERS {
        let total: u64 = results.iter().map(|(inc, _, _)| inc[c as usize]).sum();
        assert_eq!(
            index.get(&(COUNTER_BASE + c)).unwrap_or(0),
            total,
            "counter {c}"
        );
    }
    // Per claim: wins - releases, and the thread of each win.
    let mut balance: HashMap<u64, (i64, Vec<u64>)> = HashMap::new();
    for (t, (_, won, released)) in results.iter().enumerate() {
        for &claim in won {
            let entry = balance.entry(claim).or_default();
            entry.0 += 1;
            entry.1.push(t as u64);
        }
        for &claim in released {
            balance.entry(claim).or_default().0 -= 1;
        }
    }
    assert_eq!(balance.len() as u64, CLAIMS, "every claim was won");
    let mut held = 0;
    for (claim, (count, winners)) in &balance {
        match index.get(&(CLAIM_BASE + claim)) {
            Some(owner) => {
                held += 1;
                assert_eq!(
                    *count, 1,
                    "claim {claim} held by {owner}, won by {winners:?}"
                );
                assert!(
                    winners.contains(&owner),
                    "claim {claim}: {owner} not among {winners:?}"
                );
            }
            None => assert_eq!(*count, 0, "claim {claim} absent, won by {winners:?}"),
        }
    }
    assert_eq!(index.range(CLAIM_BASE..).count(), held);
    let released: usize = results.iter().map(|(_, _, r)| r.len()).sum();
    assert!(released > 0 && held > 0, "{released} released, {held} held");
    let stats = index.stats();
    assert!(
        stats.group_splits > 0 && stats.group_merges > 0 && stats.compactions > 0,
        "{stats:?}"
    );
}

/// Two writers append interleaved ascending keys at the top of the index
/// (each also re-inserting the other's latest key, so appends race with
/// inserts of the same key), a reader checks every key it knows was
/// inserted, and maintenance runs back to back: tails fill, go full, are
/// compacted and split under the writers. Run with 3-slot tails in every
/// group, and with 64-slot tails where detected (the two streams drift
/// apart, so the lagging one's keys land below the array's top and
/// detection comes and goes). At the end every key is present exactly
/// once with its last value.
#[test]
fn racing_ascending_writers_on_tails() {
    for round in soak::rounds("racing_ascending_writers_on_tails") {
        racing_ascending_writers(round);
    }
}

fn racing_ascending_writers(round: u64) {
    let mut rng = soak::config_rng(round);
    for (capacity, groups) in [
        (64, crate::SequentialGroups::Detected),
        (3, crate::SequentialGroups::All),
    ] {
        let config = Config {
            error_bound: soak::pick(&mut rng, round, &[4, 1, 16]),
            delta_threshold: soak::pick(&mut rng, round, &[32, 8, 128]),
            initial_group_size: 64,
            sequential_capacity: capacity,
            sequential_groups: groups,
            maintenance_interval: Some(Duration::from_millis(1)),
            small_delta_delay: Duration::from_millis(2),
            ..Config::default()
        };
        const BASE: u64 = 1 << 20;
        const PER_WRITER: u64 = 10_000;
        let index = XIndex::bulk_load((0..BASE).step_by(1024).map(|k| (k, 0)), config).unwrap();
        // Highest `i` whose key each writer has inserted.
        let progress = [
            std::sync::atomic::AtomicU64::new(0),
            std::sync::atomic::AtomicU64::new(0),
        ];
        let done = AtomicBool::new(false);
        let key = |writer: u64, i: u64| BASE + 2 * i + writer;
        std::thread::scope(|s| {
            let mut writers = Vec::new();
            for writer in 0..2u64 {
                let (index, progress) = (&index, &progress);
                writers.push(s.spawn(move || {
                    for i in 1..=PER_WRITER {
                        if i % 8 == 0 {
                            // Let maintenance in: rebuilds must overlap appends.
                            std::thread::yield_now();
                        }
                        assert_eq!(index.insert(key(writer, i), i), None);
                        progress[writer as usize].store(i, Ordering::Release);
                        // Re-insert the other writer's latest key with its
                        // own value: an update, never a second copy.
                        let other = 1 - writer;
                        let j = progress[other as usize].load(Ordering::Acquire);
                        if j > 0 {
                            assert_eq!(index.insert(key(other, j), j), Some(j));
                        }
                    }
                }));
            }
            let (index, progress, done) = (&index, &progress, &done);
            // Passes back to back, besides the background thread's.
            s.spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    index.maintain_now();
                }
            });
            s.spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(soak::seed(capacity as u64, round));
                while !done.load(Ordering::Relaxed) {
                    let writer = rng.random_range(0..2u64);
                    let j = progress[writer as usize].load(Ordering::Acquire);
                    if j > 0 {
                        let i = rng.random_range(1..=j);
                        assert_eq!(index.get(&key(writer, i)), Some(i));
                    }
                }
            });
            // Until both writers are through, or one failed a check: the
            // scope then reports its panic instead of waiting forever.
            while !writers.iter().all(|w| w.is_finished()) {
                std::thread::sleep(Duration::from_millis(1));
            }
            done.store(true, Ordering::Relaxed);
        });
        index.maintain_now();
        let top: Vec<(u64, u64)> = index.range(BASE..).collect();
        let expected: Vec<(u64, u64)> = (1..=PER_WRITER)
            .flat_map(|i| [(key(0, i), i), (key(1, i), i)])
            .collect();
        assert_eq!(top, expected, "capacity {capacity}, {groups:?}");
        assert_eq!(index.len() as u64, BASE / 1024 + 2 * PER_WRITER);
    }
}
