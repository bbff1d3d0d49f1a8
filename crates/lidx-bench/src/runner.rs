//! The benchmark runner behind `lidx bench` and `lidx demo`.
//!
//! For every (workload, thread count) the operation streams are generated
//! once, before any timing. Then, for each repeat, every engine is built
//! from the same bulk load and runs the same streams, engines interleaved
//! (A, B, C, A, B, C, ...) so that the machine's slow phases hit all engines
//! alike and ratios stay meaningful on a noisy machine. Each figure in a row
//! is the median over the repeats. Every answer is checked against the
//! expectation computed at generation time. Before its streams, every
//! engine answers the same warm-up gets (see [`BenchConfig::warmup`] for
//! why). Throughput is measured on the first half of each thread's stream,
//! untimed per operation, and latency on the second half, sampled (see
//! `throughput_half` for why).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use lidx_core::counting_alloc as alloc;
use lidx_core::{Error, Result};

use crate::datasets;
use crate::engine::{BenchEngine, EngineFactory};
use crate::results::{Header, Results, Row};
use crate::workload::{self, Expect, Op, Prepared, Step, WorkloadSpec, value_matches_key};
use crate::{build_info, registry};

/// In the latency half of a stream, one operation in this many is timed.
const LATENCY_SAMPLE_EVERY: usize = 8;

/// Where each thread's stream splits into its throughput half (untimed)
/// and its latency half (sampled).
///
/// Throughput comes only from operations that run with no clock reads
/// between them. A timed operation costs more than its two clock reads
/// (~45 ns here): reading the clock serialises the pipeline, so the
/// operation loses the overlap with its neighbours that untimed ones get.
/// Measured on geolite2 (3M keys, 1 thread), sampling one lookup in eight
/// cost `xindex` 9% of its throughput and `btreemap` 5%, and up to 15% on
/// other key sets: the faster an engine, the more the timing distorts it.
/// So the first half of every stream measures throughput and the second
/// half, continuing from the state the first left, measures latency.
fn throughput_half(len: usize) -> usize {
    len.div_ceil(2)
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Engine names; the first is the baseline for ratios.
    pub engines: Vec<String>,
    /// Dataset argument (name, generator or path).
    pub dataset: String,
    /// Limit on the number of keys.
    pub keys: Option<usize>,
    /// Workload names.
    pub workloads: Vec<String>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Operations per run (all threads together).
    pub ops: usize,
    /// Repeats per (engine, workload, threads); figures are medians.
    pub repeat: usize,
    /// Gets of loaded keys (random, the same for every engine, answers
    /// checked) that each freshly built engine answers before its streams
    /// run, split over the worker threads on their pinned CPUs. Untimed.
    ///
    /// Without them the throughput half starts on caches that still hold
    /// the bulk load's traffic, and for a structure larger than the
    /// last-level cache it measures that cache filling with the structure
    /// more than the structure itself. Measured on the 1M-key `books` set
    /// (this machine's last-level cache holds about 8-16 MB; the structures
    /// take 17 MB), in blocks of 20k random gets right after the load:
    /// `xindex` 170 ns per get in the first block, steady at about 80 ns
    /// from the eighth on; `btreemap` 250 ns, steady at about 190 ns from
    /// the third (`docs/results/xindex-session20.md`). The faster the
    /// engine, the larger the share of its measurement the cold start
    /// takes. 0 measures from the bulk load on (the protocol before
    /// session 20).
    pub warmup: usize,
    /// Seed for generated keys and workloads.
    pub seed: u64,
    /// CPUs to pin worker threads to (round robin), if any.
    pub pin: Option<Vec<usize>>,
    /// Extra directory to look for real key sets in.
    pub data_dir: Option<PathBuf>,
    /// Directory for persistent engines' files (default: system temp dir).
    pub work_dir: Option<PathBuf>,
    /// Show a progress bar (only drawn when stderr is a terminal).
    pub progress: bool,
    /// Command line recorded in the header.
    pub command: String,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            engines: Vec::new(),
            dataset: String::new(),
            keys: None,
            workloads: vec!["lookup".to_owned()],
            threads: vec![1],
            ops: 1_000_000,
            repeat: 3,
            warmup: 1_000_000,
            seed: 42,
            pin: None,
            data_dir: None,
            work_dir: None,
            progress: true,
            command: String::new(),
        }
    }
}

/// One engine's measurements in one repeat.
#[derive(Clone, Debug)]
struct Sample {
    mops: f64,
    p50: u64,
    p99: u64,
    p999: u64,
    /// The same quantiles over the sampled gets alone.
    get_p50: u64,
    get_p99: u64,
    get_p999: u64,
    /// Background structural changes during the streams.
    maintenance: Option<u64>,
    build_s: f64,
    memory: u64,
    disk: u64,
    wrong: u64,
}

/// A note about something the runner skipped (e.g. a read-only engine on a
/// write workload), printed next to the table.
#[derive(Clone, Debug)]
pub struct Skipped {
    /// Engine name.
    pub engine: String,
    /// Workload name.
    pub workload: String,
    /// Why.
    pub reason: String,
}

/// Everything a run produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Rows and header, ready for JSON.
    pub results: Results,
    /// Combinations that were not run.
    pub skipped: Vec<Skipped>,
}

/// Validates the configuration, loads data and runs everything.
pub fn run(cfg: &BenchConfig) -> Result<Outcome> {
    if cfg.engines.is_empty() {
        return Err(Error::invalid("no engines given"));
    }
    if cfg.repeat == 0 {
        return Err(Error::invalid("--repeat must be at least 1"));
    }
    if cfg.ops == 0 {
        return Err(Error::invalid("--ops must be at least 1"));
    }
    if cfg.threads.contains(&0) || cfg.threads.is_empty() {
        return Err(Error::invalid("--threads must be at least 1"));
    }
    // Resolve every name before doing any work, so typos fail fast.
    let factories: Vec<Box<dyn EngineFactory>> = cfg
        .engines
        .iter()
        .map(|n| registry::by_name(n))
        .collect::<Result<_>>()?;
    let specs: Vec<WorkloadSpec> = cfg
        .workloads
        .iter()
        .map(|w| w.parse::<WorkloadSpec>())
        .collect::<Result<_>>()?;
    if let Some(pins) = &cfg.pin {
        let available = core_affinity::get_core_ids().unwrap_or_default();
        if let Some(bad) = pins.iter().find(|p| !available.iter().any(|c| c.id == **p)) {
            return Err(Error::invalid(format!(
                "--pin: CPU {bad} is not available (have {})",
                available
                    .iter()
                    .map(|c| c.id.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )));
        }
    }
    let keyset = datasets::load_u64(&cfg.dataset, cfg.keys, cfg.seed, cfg.data_dir.as_deref())?;
    if keyset.keys.is_empty() {
        return Err(Error::invalid(format!(
            "dataset '{}' has no keys",
            keyset.name
        )));
    }

    let header = Header {
        cpu_model: build_info::cpu_model(),
        cores: build_info::cores(),
        rustc: build_info::rustc_version(),
        git_commit: build_info::git_commit(),
        lidx_version: env!("CARGO_PKG_VERSION").to_owned(),
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        command: cfg.command.clone(),
        repeats: cfg.repeat,
        warmup: cfg.warmup,
    };

    let total_runs = (specs.len() * cfg.threads.len() * factories.len() * cfg.repeat) as u64;
    let bar = if cfg.progress && std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(total_runs);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };

    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (spec, wname) in specs.iter().zip(&cfg.workloads) {
        for &threads in &cfg.threads {
            bar.set_message(format!("{wname}, {threads} thread(s): generating"));
            let prepared = workload::prepare(spec, &keyset.keys, threads, cfg.ops, cfg.seed)?;
            let warmup = workload::warmup_gets(&prepared.load, cfg.warmup, cfg.seed);
            let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); factories.len()];
            for rep in 0..cfg.repeat {
                for (i, f) in factories.iter().enumerate() {
                    let info = f.info();
                    bar.set_message(format!(
                        "{wname}, {threads}T, {} (repeat {})",
                        info.name,
                        rep + 1
                    ));
                    let unfit = if prepared.writes && !info.writable {
                        Some("read-only engine, workload writes")
                    } else if *spec == WorkloadSpec::Floor && !info.floor {
                        Some("no predecessor query")
                    } else {
                        None
                    };
                    if let Some(reason) = unfit {
                        if rep == 0 {
                            skipped.push(Skipped {
                                engine: info.name.to_owned(),
                                workload: wname.clone(),
                                reason: reason.to_owned(),
                            });
                        }
                        bar.inc(1);
                        continue;
                    }
                    samples[i].push(run_one(f.as_ref(), &prepared, &warmup, spec.batch(), cfg)?);
                    bar.inc(1);
                }
            }
            for (f, s) in factories.iter().zip(samples) {
                if s.is_empty() {
                    continue;
                }
                let info = f.info();
                rows.push(Row {
                    engine: info.name.to_owned(),
                    dataset: keyset.name.clone(),
                    keys: keyset.keys.len() as u64,
                    workload: wname.clone(),
                    threads,
                    ops: prepared.streams.iter().map(|s| s.len() as u64).sum(),
                    throughput_mops: median_f64(s.iter().map(|x| x.mops)),
                    p50_ns: median_u64(s.iter().map(|x| x.p50)),
                    p99_ns: median_u64(s.iter().map(|x| x.p99)),
                    p999_ns: median_u64(s.iter().map(|x| x.p999)),
                    get_p50_ns: median_u64(s.iter().map(|x| x.get_p50)),
                    get_p99_ns: median_u64(s.iter().map(|x| x.get_p99)),
                    get_p999_ns: median_u64(s.iter().map(|x| x.get_p999)),
                    maintenance: s
                        .iter()
                        .all(|x| x.maintenance.is_some())
                        .then(|| median_u64(s.iter().filter_map(|x| x.maintenance))),
                    build_s: median_f64(s.iter().map(|x| x.build_s)),
                    memory_bytes: median_u64(s.iter().map(|x| x.memory)),
                    disk_bytes: median_u64(s.iter().map(|x| x.disk)),
                    durability: info.durability.to_owned(),
                    wrong_answers: s.iter().map(|x| x.wrong).sum(),
                });
            }
        }
    }
    bar.finish_and_clear();
    Ok(Outcome {
        results: Results { header, rows },
        skipped,
    })
}

fn median_f64(it: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = it.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn median_u64(it: impl Iterator<Item = u64>) -> u64 {
    let mut v: Vec<u64> = it.collect();
    v.sort_unstable();
    match v.len() {
        0 => 0,
        n if n % 2 == 1 => v[n / 2],
        n => v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2,
    }
}

/// Builds one engine, runs the prepared streams on it and measures.
fn run_one(
    factory: &dyn EngineFactory,
    prepared: &Prepared,
    warmup: &[(u64, u64)],
    batch: usize,
    cfg: &BenchConfig,
) -> Result<Sample> {
    let info = factory.info();
    let tmp = match &cfg.work_dir {
        Some(d) => tempfile::Builder::new().prefix("lidx-bench-").tempdir_in(d),
        None => tempfile::Builder::new().prefix("lidx-bench-").tempdir(),
    }
    .map_err(|e| Error::io(cfg.work_dir.clone().unwrap_or_else(std::env::temp_dir), e))?;

    let heap_before = alloc::live_bytes();
    let t0 = Instant::now();
    let engine = factory.build(&prepared.load, tmp.path(), prepared.writes)?;
    let build_s = t0.elapsed().as_secs_f64();

    let maintenance_before = engine.maintenance_count();
    let outcome = execute(
        engine.as_ref(),
        &prepared.streams,
        warmup,
        batch,
        cfg.pin.as_deref(),
    )
    .map_err(|e| Error::invalid(format!("{}: {e}", info.name)))?;
    let memory = if alloc::is_active() {
        (alloc::live_bytes() - heap_before).max(0) as u64
    } else {
        0
    };
    let disk = engine.disk_bytes().unwrap_or(0);
    let maintenance = maintenance_before
        .zip(engine.maintenance_count())
        .map(|(before, after)| after.saturating_sub(before));
    drop(engine);
    drop(tmp);

    let quantiles = |hist: &Histogram<u64>| {
        let q = |p: f64| {
            if hist.is_empty() {
                0
            } else {
                hist.value_at_quantile(p)
            }
        };
        (q(0.5), q(0.99), q(0.999))
    };
    let (p50, p99, p999) = quantiles(&outcome.latencies.all);
    let (get_p50, get_p99, get_p999) = quantiles(&outcome.latencies.gets);
    let secs = outcome.elapsed.as_secs_f64().max(1e-9);
    Ok(Sample {
        mops: outcome.ops as f64 / secs / 1e6,
        p50,
        p99,
        p999,
        get_p50,
        get_p99,
        get_p999,
        maintenance,
        build_s,
        memory,
        disk,
        wrong: outcome.wrong,
    })
}

/// Result of running the streams once.
pub struct Execution {
    /// Wall time from the common start until the last thread finished the
    /// throughput half of its stream (`throughput_half`).
    pub elapsed: Duration,
    /// Operations in the throughput halves.
    pub ops: u64,
    /// Per-operation latencies in nanoseconds, sampled in the latency
    /// halves.
    pub latencies: Latencies,
    /// Answers that did not match their expectation, in the warm-up and
    /// the whole streams.
    pub wrong: u64,
}

/// Sampled latencies in nanoseconds: of every sampled operation (a batch
/// of gets counts as one), and of the sampled single gets alone. The
/// second exists because a read's latency is what a mixed workload's tail
/// target is about, and its writes, a tenth of the operations under
/// `mixed:0.9`, would otherwise set the all-operations p99.9 on their own.
pub struct Latencies {
    /// Every sampled operation.
    pub all: Histogram<u64>,
    /// Sampled single gets (not batches).
    pub gets: Histogram<u64>,
}

impl Latencies {
    fn new() -> Result<Self> {
        let hist = || {
            Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3)
                .map_err(|e| Error::invalid(format!("histogram: {e}")))
        };
        Ok(Latencies {
            all: hist()?,
            gets: hist()?,
        })
    }

    /// Records one sampled operation that started at `t0`. Saturates
    /// instead of failing: a value beyond the range is still "very slow".
    fn record(&mut self, t0: Instant, get: bool) {
        let ns = t0.elapsed().as_nanos().clamp(1, 600_000_000_000) as u64;
        let _ = self.all.record(ns);
        if get {
            let _ = self.gets.record(ns);
        }
    }

    fn add(&mut self, other: &Latencies) -> Result<()> {
        let err = |e| Error::invalid(format!("histogram: {e}"));
        self.all.add(&other.all).map_err(err)?;
        self.gets.add(&other.gets).map_err(err)
    }
}

/// Runs one stream per thread against `engine` and checks every answer;
/// with `batch > 1`, runs of gets go to the engine `batch` keys at a time
/// (`BenchEngine::get_many`). First each thread gets its share of the
/// `warmup` keys (untimed; each must answer its paired value). Each
/// stream's first half is timed as a whole (throughput), its second half
/// per sampled operation (latency).
pub fn execute(
    engine: &dyn BenchEngine,
    streams: &[Vec<Step>],
    warmup: &[(u64, u64)],
    batch: usize,
    pin: Option<&[usize]>,
) -> Result<Execution> {
    let barrier = Barrier::new(streams.len() + 1);
    let (start, per_thread) = std::thread::scope(|scope| {
        let share = warmup.len().div_ceil(streams.len().max(1)).max(1);
        let handles: Vec<_> = streams
            .iter()
            .enumerate()
            .map(|(t, stream)| {
                let barrier = &barrier;
                let warm = warmup.chunks(share).nth(t).unwrap_or(&[]);
                scope.spawn(move || -> Result<(Instant, Latencies, u64, u64)> {
                    if let Some(cpus) = pin.filter(|c| !c.is_empty()) {
                        core_affinity::set_for_current(core_affinity::CoreId {
                            id: cpus[t % cpus.len()],
                        });
                    }
                    let hist = Latencies::new();
                    let warm_wrong = warm_up(engine, warm);
                    // Wait even on error so the other threads are not left hanging.
                    barrier.wait();
                    let warm_wrong = warm_wrong?;
                    let mut hist = hist?;
                    let (untimed, timed) = stream.split_at(throughput_half(stream.len()));
                    let run = |part: &[Step], hist: Option<&mut Latencies>| {
                        if batch > 1 {
                            run_batched(engine, part, batch, hist)
                        } else {
                            run_stream(engine, part, hist)
                        }
                    };
                    let (wrong, ops) = run(untimed, None)?;
                    let half_done = Instant::now();
                    let (late_wrong, _) = run(timed, Some(&mut hist))?;
                    Ok((half_done, hist, warm_wrong + wrong + late_wrong, ops))
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let joined: Vec<_> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("worker thread panicked")))
            })
            .collect();
        (start, joined)
    });
    let mut latencies = Latencies::new()?;
    let (mut end, mut wrong, mut ops) = (start, 0, 0);
    for r in per_thread {
        let (t_end, h, w, o) = r?;
        end = end.max(t_end);
        latencies.add(&h)?;
        wrong += w;
        ops += o;
    }
    Ok(Execution {
        elapsed: end.duration_since(start),
        ops,
        latencies,
        wrong,
    })
}

/// Gets every key of `pairs` and counts the answers that are not its
/// paired value.
fn warm_up(engine: &dyn BenchEngine, pairs: &[(u64, u64)]) -> Result<u64> {
    let mut wrong = 0u64;
    for &(key, value) in pairs {
        wrong += u64::from(!check_get(
            key,
            engine.get(key)?,
            Expect::Value(Some(value)),
        ));
    }
    Ok(wrong)
}

/// Executes one thread's stream, sampling latencies into `hist` if given;
/// returns (wrong answers, operations).
fn run_stream(
    engine: &dyn BenchEngine,
    stream: &[Step],
    mut hist: Option<&mut Latencies>,
) -> Result<(u64, u64)> {
    let mut wrong = 0u64;
    let mut scan_buf = Vec::with_capacity(128);
    for (i, step) in stream.iter().enumerate() {
        let timed = hist.is_some() && i % LATENCY_SAMPLE_EVERY == 0;
        let t0 = timed.then(Instant::now);
        let op = step.op();
        let ok = match op {
            Op::Get(k) => check_get(k, engine.get(k)?, step.expect()),
            Op::Insert(k, v) | Op::Update(k, v) => {
                engine.insert(k, v)?;
                true
            }
            Op::Remove(k) => {
                engine.remove(k)?;
                true
            }
            Op::Scan(k, n) => {
                engine.scan(k, n as usize, &mut scan_buf)?;
                check_scan(k, n, &scan_buf, step.expect())
            }
            Op::Floor(k) => check_floor(k, engine.floor(k)?, step.expect()),
        };
        if let (Some(t0), Some(hist)) = (t0, hist.as_deref_mut()) {
            hist.record(t0, matches!(op, Op::Get(_)));
        }
        wrong += u64::from(!ok);
    }
    Ok((wrong, stream.len() as u64))
}

/// [`run_stream`] for a stream of gets issued `batch` keys per call; one
/// latency sample covers a whole batch. Any other operation runs alone.
fn run_batched(
    engine: &dyn BenchEngine,
    stream: &[Step],
    batch: usize,
    mut hist: Option<&mut Latencies>,
) -> Result<(u64, u64)> {
    let mut wrong = 0u64;
    let mut keys = Vec::with_capacity(batch);
    let mut values = Vec::with_capacity(batch);
    let every = (LATENCY_SAMPLE_EVERY / batch).max(1);
    for (i, chunk) in stream.chunks(batch).enumerate() {
        keys.clear();
        keys.extend(chunk.iter().map_while(|step| match step.op() {
            Op::Get(k) => Some(k),
            _ => None,
        }));
        if keys.len() < chunk.len() {
            let (w, _) = run_stream(engine, chunk, hist.as_deref_mut())?;
            wrong += w;
            continue;
        }
        let t0 = (hist.is_some() && i % every == 0).then(Instant::now);
        engine.get_many(&keys, &mut values)?;
        if let (Some(t0), Some(hist)) = (t0, hist.as_deref_mut()) {
            hist.record(t0, false);
        }
        if values.len() != keys.len() {
            wrong += keys.len() as u64;
            continue;
        }
        for ((step, &key), &got) in chunk.iter().zip(&keys).zip(&values) {
            wrong += u64::from(!check_get(key, got, step.expect()));
        }
    }
    Ok((wrong, stream.len() as u64))
}

/// Whether a `get` answer satisfies its expectation.
pub fn check_get(key: u64, got: Option<u64>, expect: Expect) -> bool {
    match expect {
        Expect::Value(v) => got == v,
        Expect::Consistent => got.is_none_or(|v| value_matches_key(key, v)),
        Expect::Nothing | Expect::ScanFirst { .. } | Expect::Floor(_) => true,
    }
}

/// Whether a `floor` answer satisfies its expectation: a key at or below
/// the probe with a value consistent with it, and the expected key.
pub fn check_floor(probe: u64, got: Option<(u64, u64)>, expect: Expect) -> bool {
    let shape_ok = got.is_none_or(|(k, v)| k <= probe && value_matches_key(k, v));
    shape_ok
        && match expect {
            Expect::Floor(key) => got.map(|(k, _)| k) == key,
            _ => true,
        }
}

/// Whether a `scan` answer satisfies its expectation: ascending keys, all
/// `>= start`, at most `n`, values consistent with their keys, and the
/// expected length and first key when known.
pub fn check_scan(start: u64, n: u32, got: &[(u64, u64)], expect: Expect) -> bool {
    let shape_ok = got.len() <= n as usize
        && got.first().is_none_or(|&(k, _)| k >= start)
        && got.windows(2).all(|w| w[0].0 < w[1].0)
        && got.iter().all(|&(k, v)| value_matches_key(k, v));
    shape_ok
        && match expect {
            Expect::ScanFirst { len, first } => {
                got.len() == len as usize && (len == 0 || got[0].0 == first)
            }
            _ => true,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineFactory;
    use crate::workload::{WorkloadSpec, prepare};

    #[test]
    fn streams_split_into_a_throughput_and_a_latency_half() {
        assert_eq!([0, 1, 2, 3, 1000].map(throughput_half), [0, 1, 1, 2, 500]);
        let keys: Vec<u64> = (0..2_000u64).collect();
        let prepared = prepare(&"lookup".parse().unwrap(), &keys, 1, 801, 3).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::peers::btreemap::BTreeMapFactory
            .build(&prepared.load, dir.path(), false)
            .unwrap();
        let run = execute(engine.as_ref(), &prepared.streams, &[], 1, None).unwrap();
        assert_eq!(run.ops, 401);
        // Every 8th of the 400 latency-half operations is timed.
        assert_eq!(run.latencies.all.len(), 50);
        assert_eq!(run.latencies.gets.len(), 50);
        // Wrong answers count in both halves.
        let mut streams = prepared.streams.clone();
        streams[0][0].set_expect(Expect::Value(Some(u64::MAX)));
        streams[0][800].set_expect(Expect::Value(Some(u64::MAX)));
        assert_eq!(
            execute(engine.as_ref(), &streams, &[], 1, None)
                .unwrap()
                .wrong,
            2
        );
    }

    #[test]
    fn the_get_latencies_hold_the_sampled_gets_alone() {
        let keys: Vec<u64> = (0..4_000u64).map(|i| i * 3).collect();
        let prepared = prepare(&"mixed:0.5".parse().unwrap(), &keys, 1, 4_000, 5).unwrap();
        let timed = &prepared.streams[0][throughput_half(prepared.streams[0].len())..];
        let sampled = timed.iter().step_by(LATENCY_SAMPLE_EVERY);
        let sampled_gets = sampled
            .clone()
            .filter(|s| matches!(s.op(), Op::Get(_)))
            .count();
        assert!(sampled_gets > 0 && sampled_gets < sampled.clone().count());
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::peers::btreemap::BTreeMapFactory
            .build(&prepared.load, dir.path(), true)
            .unwrap();
        let run = execute(engine.as_ref(), &prepared.streams, &[], 1, None).unwrap();
        assert_eq!(run.latencies.all.len(), sampled.count() as u64);
        assert_eq!(run.latencies.gets.len(), sampled_gets as u64);
    }

    #[test]
    fn warm_up_gets_are_checked_but_not_timed() {
        let keys: Vec<u64> = (0..3_000u64).map(|i| i * 5 + 1).collect();
        let prepared = prepare(&"mixed:0.5".parse().unwrap(), &keys, 2, 1_000, 4).unwrap();
        let warmup = crate::workload::warmup_gets(&prepared.load, 777, 4);
        assert_eq!(warmup.len(), 777);
        assert!(
            warmup
                .iter()
                .all(|pair| prepared.load.binary_search(pair).is_ok())
        );
        assert_eq!(warmup, crate::workload::warmup_gets(&prepared.load, 777, 4));
        assert!(crate::workload::warmup_gets(&[], 10, 4).is_empty());
        // The streams write, so every run starts from a fresh bulk load.
        let dir = tempfile::tempdir().unwrap();
        let fresh = || {
            crate::engines::xindex::XINDEX
                .build(&prepared.load, dir.path(), true)
                .unwrap()
        };
        let run = execute(fresh().as_ref(), &prepared.streams, &warmup, 1, None).unwrap();
        assert_eq!(run.wrong, 0);
        // Only the streams' throughput halves count as operations.
        assert_eq!(run.ops, 500);
        // A warm-up answer that differs from the loaded value is wrong, on
        // whichever thread's share it falls (the last one here).
        let mut bad = warmup.clone();
        bad[776].1 ^= 1;
        assert_eq!(
            execute(fresh().as_ref(), &prepared.streams, &bad, 1, None)
                .unwrap()
                .wrong,
            1
        );
    }

    #[test]
    fn batched_lookups_are_checked_like_single_ones() {
        let keys: Vec<u64> = (0..5_000u64).map(|i| i * 7 + 3).collect();
        let spec: WorkloadSpec = "lookup-batch:16".parse().unwrap();
        let prepared = prepare(&spec, &keys, 2, 1_000, 9).unwrap();
        let factories: [&dyn EngineFactory; 2] = [
            &crate::peers::btreemap::BTreeMapFactory,
            &crate::engines::xindex::XINDEX,
        ];
        for factory in factories {
            let dir = tempfile::tempdir().unwrap();
            let engine = factory.build(&prepared.load, dir.path(), false).unwrap();
            for batch in [spec.batch(), 1, 7] {
                let run = execute(engine.as_ref(), &prepared.streams, &[], batch, None).unwrap();
                // The throughput halves of two 500-op streams.
                assert_eq!(run.ops, 500);
                assert_eq!(run.wrong, 0, "{} batch {batch}", factory.info().name);
                assert!(!run.latencies.all.is_empty());
            }
        }
        // A wrong answer inside a batch is counted.
        let mut streams = prepared.streams.clone();
        streams[0][3].set_expect(crate::workload::Expect::Value(Some(1)));
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::peers::btreemap::BTreeMapFactory
            .build(&prepared.load, dir.path(), false)
            .unwrap();
        assert_eq!(
            execute(engine.as_ref(), &streams, &[], 16, None)
                .unwrap()
                .wrong,
            1
        );
    }

    #[test]
    fn floor_queries_are_checked_and_engines_without_one_skipped() {
        let cfg = BenchConfig {
            engines: ["btreemap", "scc-tree", "skipmap", "xindex", "pgm-lidx"]
                .map(String::from)
                .to_vec(),
            dataset: "lognormal".to_owned(),
            keys: Some(20_000),
            workloads: vec!["floor".to_owned()],
            threads: vec![1, 2],
            ops: 4_000,
            repeat: 1,
            warmup: 100,
            progress: false,
            ..BenchConfig::default()
        };
        let outcome = run(&cfg).unwrap();
        let ran: Vec<(&str, usize)> = outcome
            .results
            .rows
            .iter()
            .map(|r| (r.engine.as_str(), r.threads))
            .collect();
        for engine in ["btreemap", "skipmap", "xindex", "pgm-lidx"] {
            for threads in [1, 2] {
                assert!(ran.contains(&(engine, threads)), "{engine} {threads}T");
            }
        }
        assert!(outcome.results.rows.iter().all(|r| r.wrong_answers == 0));
        assert!(
            outcome
                .skipped
                .iter()
                .any(|s| s.engine == "scc-tree" && s.reason == "no predecessor query")
        );
        assert!(!ran.iter().any(|&(e, _)| e == "scc-tree"));
        // A wrong floor is counted.
        let keys: Vec<u64> = (0..1_000u64).map(|i| i * 10).collect();
        let prepared = prepare(&WorkloadSpec::Floor, &keys, 1, 400, 3).unwrap();
        let mut streams = prepared.streams.clone();
        let crate::workload::Op::Floor(probe) = streams[0][0].op() else {
            panic!("a floor workload of floors");
        };
        let wrong_key = if probe >= 10 {
            probe / 10 * 10 - 10
        } else {
            10
        };
        streams[0][0].set_expect(Expect::Floor(Some(wrong_key)));
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::engines::xindex::XINDEX
            .build(&prepared.load, dir.path(), false)
            .unwrap();
        assert_eq!(
            execute(engine.as_ref(), &streams, &[], 1, None)
                .unwrap()
                .wrong,
            1
        );
    }
}
