//! Memory stays bounded while an index churns.
//!
//! Two writers keep the number of live keys constant (each step removes
//! one key and inserts a new one) while a reader runs and maintenance
//! compacts, splits and merges behind them; a sampler records the heap
//! (this binary counts every allocation, `CountingAlloc`). Nothing may
//! grow with the number of steps: not the arrays' regions (rebuilt when
//! half empty), the group nodes' blocks (slots reused), the deltas (a
//! byte budget) nor the retired groups and roots waiting for their epoch.
//!
//! Two ways keys arrive: a sliding window (each writer removes its oldest
//! key and inserts one at random in a window that moves up, so the key
//! range moves on for good: groups empty at the bottom and fill at the
//! top, a distribution shift that never stops) and uniform churn in a
//! fixed range (a random key out, a random key in); `u64` keys at the
//! paper's thresholds and at tiny ones, and byte-string keys (each its
//! own allocation, so a key dropped twice or never shows in the count).
//!
//! `LIDX_SOAK_SECS=N` runs each scenario for about N seconds instead of a
//! fixed number of steps:
//!
//! ```sh
//! LIDX_SOAK_SECS=300 cargo test --release -p lidx-xindex --test memory_churn -- --nocapture
//! ```

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lidx_core::Key;
use lidx_core::counting_alloc::{CountingAlloc, live_bytes};
use lidx_core::huge_pages::HUGE_PAGE;
use lidx_xindex::{Config, XIndex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const WRITERS: u64 = 2;
/// Live keys per writer.
const LIVE_PER_WRITER: usize = 50_000;
/// Steps per writer without `LIDX_SOAK_SECS`: the sliding window moves
/// past its whole live set three times.
const STEPS: usize = 3 * LIVE_PER_WRITER;
/// Spacing of a writer's keys (before the writer's bit is added): the
/// window holds `LIVE_PER_WRITER * SPACING` candidates, one in 16 live.
const SPACING: u64 = 16;
/// Heap bytes the lock library may keep after an index is dropped.
const LOCK_TABLE_SLACK: i64 = 4 << 10;
/// The heap's peaks are kept per tenth of a run.
const TENTHS: usize = 10;

#[derive(Clone, Copy, Debug)]
enum Arrivals {
    /// Remove the oldest key; insert one at random in a window moving up.
    SlidingWindow,
    /// Remove a random key; insert one at random in a fixed range.
    Uniform,
}

/// Keys the churn runs on, made from the writers' integer ids, in the
/// same order.
trait ChurnKey: Key + Send + Sync + 'static {
    fn of(id: u64) -> Self;
}

impl ChurnKey for u64 {
    fn of(id: u64) -> Self {
        id
    }
}

/// Byte strings sharing a long prefix, each its own allocation: a key the
/// index failed to drop, or dropped twice, shows in the count.
impl ChurnKey for Vec<u8> {
    fn of(id: u64) -> Self {
        let mut key = b"tenant/0042/item/".to_vec();
        key.extend_from_slice(&id.to_be_bytes());
        key
    }
}

/// One writer's keys: its own residue class (`x * WRITERS + id`), so the
/// writers never touch each other's keys and each knows exactly which of
/// its keys are live.
struct Writer {
    id: u64,
    /// Live keys, oldest first.
    live: VecDeque<u64>,
    present: HashSet<u64>,
    rng: ChaCha8Rng,
}

impl Writer {
    fn new(id: u64, seed: u64) -> Self {
        // Reserved up front, so that the test's own memory does not grow
        // during the run.
        let mut live = VecDeque::with_capacity(LIVE_PER_WRITER + 1);
        let mut present = HashSet::with_capacity(2 * LIVE_PER_WRITER);
        for i in 0..LIVE_PER_WRITER as u64 {
            let key = i * SPACING * WRITERS + id;
            live.push_back(key);
            present.insert(key);
        }
        Writer {
            id,
            live,
            present,
            rng: ChaCha8Rng::seed_from_u64(seed ^ id),
        }
    }

    /// A key of this writer's not live now, for step `step`.
    fn fresh_key(&mut self, arrivals: Arrivals, step: u64) -> u64 {
        let span = LIVE_PER_WRITER as u64 * SPACING;
        let low = match arrivals {
            Arrivals::SlidingWindow => step * SPACING,
            Arrivals::Uniform => 0,
        };
        loop {
            let key = self.rng.random_range(low..low + span) * WRITERS + self.id;
            if !self.present.contains(&key) {
                return key;
            }
        }
    }

    fn step<K: ChurnKey>(&mut self, index: &XIndex<K, u64>, arrivals: Arrivals, step: u64) {
        let gone = match arrivals {
            Arrivals::SlidingWindow => self.live.pop_front(),
            Arrivals::Uniform => {
                let at = self.rng.random_range(0..self.live.len());
                self.live.swap_remove_back(at)
            }
        }
        .expect("a writer always holds live keys");
        self.present.remove(&gone);
        assert_eq!(
            index.remove(&K::of(gone)),
            Some(gone),
            "live key {gone} lost"
        );
        let key = self.fresh_key(arrivals, step);
        assert_eq!(
            index.insert(K::of(key), key),
            None,
            "key {key} was not live"
        );
        self.live.push_back(key);
        self.present.insert(key);
    }
}

/// How long a scenario runs: a number of steps, or a time when soaking.
#[derive(Clone, Copy)]
enum Length {
    Steps(usize),
    Until(Instant),
}

impl Length {
    fn from_env() -> Self {
        match std::env::var("LIDX_SOAK_SECS") {
            Ok(secs) => {
                let secs: u64 = secs.trim().parse().unwrap_or_else(|_| {
                    panic!("LIDX_SOAK_SECS must be a number of seconds, not {secs:?}")
                });
                Length::Until(Instant::now() + Duration::from_secs(secs))
            }
            Err(_) => Length::Steps(STEPS),
        }
    }

    fn goes_on(&self, step: usize) -> bool {
        match self {
            Length::Steps(steps) => step < *steps,
            Length::Until(deadline) => step == 0 || Instant::now() < *deadline,
        }
    }
}

/// Makes the one-time allocations the standard library keeps for a thread
/// (its list of thread-local destructors, registered at the first pin of
/// an index; the thread machinery's), so that they are not counted as the
/// index's.
fn warm_up_this_thread() {
    let index = XIndex::bulk_load([(1u64, 1u64)], Config::default()).expect("one key");
    let index = joined(move || {
        index.get(&1);
        index
    });
    assert_eq!(index.get(&1), Some(1));
}

/// Runs `work` on a thread of its own and returns its result once the
/// thread has ended, its thread-local destructors included.
///
/// Not `std::thread::scope`: a scope returns when its threads' closures
/// have returned, and their thread-locals (the index's epoch
/// registrations among them) may be torn down later still, freeing or
/// allocating in the middle of the next measurement (on a loaded machine
/// the warm-up thread released the last registration of the warm-up
/// index's collector, 9.5 KiB, during the churn that followed). `join`
/// waits for the whole thread.
fn joined<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(work).join().expect("thread panicked")
}

/// Heap bytes above `base`.
fn heap_above(base: i64) -> usize {
    (live_bytes() - base).max(0) as usize
}

/// Runs maintenance until it finds nothing to do (deltas compacted, sparse
/// regions rebuilt, retired memory freed).
fn settle<K: Key>(index: &XIndex<K, u64>) {
    let mut quiet_passes = 0;
    for _ in 0..200 {
        if index.maintain_now() {
            quiet_passes = 0;
        } else {
            quiet_passes += 1;
            // Retired memory is freed a pass or two after its epoch ends.
            if quiet_passes == 3 {
                return;
            }
        }
    }
    panic!("maintenance did not settle in 200 passes");
}

/// What a churn's threads share.
struct Run {
    done: AtomicBool,
    /// Steps done by each writer.
    progress: [AtomicUsize; WRITERS as usize],
    /// The writers' highest key so far, for the reader.
    top: AtomicU64,
    /// Highest heap sampled in each tenth of the run.
    peaks: [AtomicUsize; TENTHS],
}

struct Measured {
    /// The index's heap right after its bulk load.
    loaded: usize,
    /// Highest heap sampled in each tenth of the run.
    peaks: [usize; TENTHS],
    /// After the writers stopped and maintenance settled.
    settled: usize,
    /// A fresh bulk load of the final live keys.
    fresh: usize,
    /// The group nodes' blocks at the end: those of the most groups alive
    /// at once during the run (slots are reused, blocks kept).
    node_blocks: usize,
    steps: usize,
    soaked: bool,
}

fn churn<K: ChurnKey>(arrivals: Arrivals, config: Config, seed: u64) -> Measured {
    let length = Length::from_env();
    let writers: Vec<Writer> = (0..WRITERS).map(|id| Writer::new(id, seed)).collect();
    warm_up_this_thread();
    let base = live_bytes();
    let mut initial: Vec<u64> = writers
        .iter()
        .flat_map(|w| w.live.iter().copied())
        .collect();
    initial.sort_unstable();
    let index = XIndex::bulk_load(initial.iter().map(|&k| (K::of(k), k)), config.clone())
        .expect("bulk load of sorted keys");
    drop(initial);
    let loaded = heap_above(base);

    let index = Arc::new(index);
    let run = Arc::new(Run {
        done: AtomicBool::new(false),
        progress: std::array::from_fn(|_| AtomicUsize::new(0)),
        top: AtomicU64::new(0),
        peaks: std::array::from_fn(|_| AtomicUsize::new(0)),
    });
    // Threads of their own, joined (see `joined`): each has ended, its
    // registrations with the index's collector released, before the heap
    // is measured again.
    let sampler = std::thread::spawn({
        let run = Arc::clone(&run);
        move || {
            let started = Instant::now();
            while !run.done.load(Ordering::Acquire) {
                let reached = run
                    .progress
                    .iter()
                    .map(|p| p.load(Ordering::Relaxed))
                    .min()
                    .unwrap_or(0);
                let part = match length {
                    Length::Steps(steps) => reached as f64 / steps as f64,
                    Length::Until(deadline) => {
                        let whole = deadline.saturating_duration_since(started);
                        started.elapsed().as_secs_f64() / whole.as_secs_f64().max(1e-9)
                    }
                };
                let tenth = ((part * TENTHS as f64) as usize).min(TENTHS - 1);
                run.peaks[tenth].fetch_max(heap_above(base), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let reader = std::thread::spawn({
        let (index, run) = (Arc::clone(&index), Arc::clone(&run));
        move || {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
            let mut hits = 0u64;
            while !run.done.load(Ordering::Acquire) {
                let high = run.top.load(Ordering::Relaxed).max(1);
                let key = rng.random_range(0..high);
                if let Some(value) = index.get(&K::of(key)) {
                    assert_eq!(value, key, "value of another key");
                    hits += 1;
                }
            }
            hits
        }
    });
    let handles: Vec<_> = writers
        .into_iter()
        .enumerate()
        .map(|(i, mut writer)| {
            let (index, run) = (Arc::clone(&index), Arc::clone(&run));
            std::thread::spawn(move || {
                let mut step = 0;
                while length.goes_on(step) {
                    writer.step(&index, arrivals, step as u64);
                    step += 1;
                    run.progress[i].store(step, Ordering::Relaxed);
                    let span = LIVE_PER_WRITER as u64 * SPACING;
                    let high = match arrivals {
                        Arrivals::SlidingWindow => step as u64 * SPACING + span,
                        Arrivals::Uniform => span,
                    };
                    run.top.fetch_max(high * WRITERS, Ordering::Relaxed);
                }
                (writer, step)
            })
        })
        .collect();
    let (writers, steps): (Vec<Writer>, Vec<usize>) = handles
        .into_iter()
        .map(|h| h.join().expect("a writer panicked"))
        .unzip();
    run.done.store(true, Ordering::Release);
    sampler.join().expect("the sampler panicked");
    assert!(
        reader.join().expect("the reader panicked") > 0,
        "the reader found no key"
    );
    let index = Arc::into_inner(index).expect("every thread has ended");

    // Every live key is there with its value, and nothing else.
    let mut live: Vec<u64> = writers
        .iter()
        .flat_map(|w| w.live.iter().copied())
        .collect();
    live.sort_unstable();
    assert_eq!(index.len(), live.len());
    for &key in &live {
        assert_eq!(index.get(&K::of(key)), Some(key), "live key {key} missing");
    }
    // Keys order as their ids do: values listed in key order are the ids.
    let listed: Vec<u64> = index
        .range(..)
        .map(|(k, v)| {
            assert!(k == K::of(v), "key and value of {v} do not match");
            v
        })
        .collect();
    assert!(listed == live, "a range over the index lists other keys");
    drop(listed);

    settle(&index);
    // Not the index's: the list of live keys this test checked against.
    let settled = heap_above(base) - live.capacity() * std::mem::size_of::<u64>();
    let before_fresh = live_bytes();
    let fresh_index = XIndex::bulk_load(live.iter().map(|&k| (K::of(k), k)), config)
        .expect("bulk load of sorted keys");
    let fresh = heap_above(before_fresh);
    drop(fresh_index);
    drop(live);
    let stats = index.stats();
    drop(index);
    let (nodes, deltas) = (stats.node_block_bytes, stats.delta_bytes);
    let measured = Measured {
        loaded,
        peaks: run.peaks.each_ref().map(|p| p.load(Ordering::Relaxed)),
        settled,
        fresh,
        node_blocks: nodes,
        steps: steps.iter().sum(),
        soaked: matches!(length, Length::Until(_)),
    };
    let (groups, splits, merges) = (stats.group_count(), stats.group_splits, stats.group_merges);
    let (regions, arrays) = (stats.array_region_bytes, stats.array_live_bytes);
    drop((stats, steps, run));
    // Before printing: captured output is heap too.
    let after_drop = live_bytes() - base;
    eprintln!(
        "{arrivals:?}, {} keys: {} steps; heap KiB: loaded {}, peaks by tenth of the run {:?}, \
         settled {}, fresh load of the same keys {}; {groups} groups, {splits} group splits, \
         {merges} merges, regions {} KiB for {} KiB of arrays, node blocks {} KiB, deltas {} KiB",
        std::any::type_name::<K>(),
        measured.steps,
        measured.loaded >> 10,
        measured.peaks.map(|p| p >> 10),
        measured.settled >> 10,
        measured.fresh >> 10,
        regions >> 10,
        arrays >> 10,
        nodes >> 10,
        deltas >> 10,
    );
    // Not quite zero: parking_lot (the index's locks) keeps a process-wide
    // table for the threads that park, sized for the most of them alive
    // at once, which grows and never shrinks (1 KiB for four or five).
    assert!(
        (0..=LOCK_TABLE_SLACK).contains(&after_drop),
        "dropping the index left {after_drop} heap bytes behind"
    );
    measured
}

/// The bounds every scenario must meet, from the crate's guarantees
/// (README, "Guarantees").
fn assert_bounded(m: &Measured, config: &Config) {
    // Array regions hold at most about twice the live arrays plus the
    // current region's unused end. Maintenance opens regions of at most a
    // quarter of the live arrays rounded up to a power of two (4 KiB to
    // two huge pages), and live arrays, retired ones not yet freed
    // included, stay below twice a fresh load's heap.
    let region = (m.fresh.max(m.loaded) / 2)
        .next_power_of_two()
        .clamp(4 << 10, 2 * HUGE_PAGE);
    // Settled: regions as above, group nodes in the blocks of the most
    // groups alive at once, and everything else as in a fresh load.
    let settled_bound = 2 * m.fresh + region + m.node_blocks;
    assert!(
        m.settled <= settled_bound,
        "a settled index holds {} KiB, bound {} KiB (a fresh load of its keys {} KiB)",
        m.settled >> 10,
        settled_bound >> 10,
        m.fresh >> 10
    );
    // Running: a pass retires the arrays and deltas of the groups it
    // rebuilds, freed only after the next epoch barrier, so until then
    // they come on top of their replacements: arrays (and the regions
    // they keep) up to twice, the deltas up to twice their budget. One
    // more region may have just gone sparse, its arrays waiting for the
    // next pass to move them.
    let running_bound =
        4 * m.fresh.max(m.loaded) + 2 * region + m.node_blocks + 2 * config.delta_budget_bytes;
    for (tenth, &peak) in m.peaks.iter().enumerate() {
        assert!(
            peak <= running_bound,
            "tenth {tenth} of the run: heap reached {} KiB, bound {} KiB",
            peak >> 10,
            running_bound >> 10
        );
    }
    // And nothing grows with time: over a soak's minutes, the second half
    // needs no more than the first. (A run of the suite's length is too
    // short for its first half to reach the steady state.)
    let (first, second) = m.peaks.split_at(TENTHS / 2);
    let (first, second) = (first.iter().max().unwrap(), second.iter().max().unwrap());
    if m.soaked {
        assert!(
            *second <= first + first / 8 + (1 << 20),
            "heap grew: peak {} KiB in the first half, {} KiB in the second",
            first >> 10,
            second >> 10
        );
    }
}

/// The paper's thresholds, with passes and small-delta compaction often
/// enough that a short run sees many of them, and a delta budget small
/// enough to matter.
fn busy_defaults() -> Config {
    Config {
        maintenance_interval: Some(Duration::from_millis(5)),
        small_delta_delay: Duration::from_millis(50),
        delta_budget_bytes: 4 << 20,
        ..Config::default()
    }
}

/// Tiny thresholds: many small groups, split and merged all the time.
fn tiny_thresholds() -> Config {
    Config {
        error_bound: 4,
        delta_threshold: 16,
        max_models: 2,
        initial_group_size: 64,
        ..busy_defaults()
    }
}

/// One test for all scenarios: every thread of this binary allocates
/// through one counter, so nothing else may run beside them, not even the
/// harness reporting another test's end.
#[test]
fn churn_runs_in_bounded_memory() {
    for (arrivals, seed) in [(Arrivals::SlidingWindow, 1), (Arrivals::Uniform, 2)] {
        for config in [busy_defaults(), tiny_thresholds()] {
            let m = churn::<u64>(arrivals, config.clone(), seed);
            assert_bounded(&m, &config);
        }
        let config = busy_defaults();
        let m = churn::<Vec<u8>>(arrivals, config.clone(), seed);
        assert_bounded(&m, &config);
    }
}
