//! `lidx air ...` and `lidx profile`: building, querying, inspecting and
//! benchmarking AirIndex, and calibrating storage profiles.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Subcommand;
use lidx_air::baseline;
use lidx_air::{AirIndex, DataInput, DesignChoice, TuneConfig, Tuned};
use lidx_core::storage::{self, PageCache, Simulated, Storage, StorageProfile};
use lidx_core::{Error, Result};
use rand::{Rng, SeedableRng};

/// `lidx air` subcommands.
#[derive(Subcommand)]
pub enum AirCmd {
    /// Tune and build an index of a sorted key set (value = rank).
    Build {
        /// Dataset name or SOSD file (u64; `f64:` prefix for doubles).
        #[arg(long)]
        data: String,
        /// Storage profile: nfs, ssd, LAT_US,MBPS or a profile file.
        #[arg(long)]
        profile: String,
        /// Where to write: a directory, file://, mmap://, objfs://, s3://bucket/prefix.
        #[arg(long)]
        out: String,
        /// Store (key, 8-byte value = rank) records instead of a bare key array.
        #[arg(long)]
        records: bool,
        /// Candidates explored at every layer.
        #[arg(long, default_value_t = 5)]
        top_k: usize,
        /// Smallest granularity in bytes.
        #[arg(long, default_value_t = 256)]
        lambda_low: u64,
        /// Largest granularity in bytes.
        #[arg(long, default_value_t = 1 << 20)]
        lambda_high: u64,
        /// Granularity exponentiation base.
        #[arg(long, default_value_t = 2.0)]
        base: f64,
        /// Limit the number of keys (evenly thinned).
        #[arg(long)]
        keys: Option<usize>,
        /// Extra directory to search for named datasets.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Look keys up in a built index.
    Get {
        /// Index location.
        url: String,
        /// Keys (decimal u64).
        #[arg(required = true)]
        keys: Vec<u64>,
    },
    /// Print an index's design and layout.
    Inspect {
        /// Index location.
        url: String,
        /// Also read every object and check every checksum and key.
        #[arg(long)]
        verify: bool,
    },
    /// First-query latency and the latency curve over 1..N queries.
    Bench {
        /// Index location.
        url: String,
        /// Queries in the latency curve.
        #[arg(long, default_value_t = 1000)]
        queries: usize,
        /// Simulate this profile on top of the storage (omit for real timings).
        #[arg(long)]
        profile: Option<String>,
        /// No cache: every query is cold.
        #[arg(long)]
        cold: bool,
        /// Page cache budget in MiB for warm runs.
        #[arg(long, default_value_t = 256)]
        cache_mib: u64,
        /// Cold first-query runs to average.
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Seed for query keys.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// AirIndex against the B-tree and PGM baselines on the same storage:
    /// modelled and measured cold first-query latency.
    Compare {
        /// Dataset name or SOSD file.
        #[arg(long)]
        data: String,
        /// Comma-separated profiles (nfs, ssd, LAT_US,MBPS, files).
        #[arg(long, value_delimiter = ';', default_value = "nfs;ssd")]
        profile: Vec<String>,
        /// Cold first-query runs per design.
        #[arg(long, default_value_t = 30)]
        runs: usize,
        /// Also compare with LMDB on the local disk, in this directory.
        #[arg(long)]
        local_dir: Option<PathBuf>,
        /// Limit the number of keys.
        #[arg(long)]
        keys: Option<usize>,
        /// Extra directory to search for named datasets.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Seed for query keys.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

fn load_keys(data: &str, keys: Option<usize>, data_dir: Option<&Path>) -> Result<Vec<u64>> {
    let set = lidx_bench::datasets::load_u64(data, keys, 42, data_dir)?;
    Ok(set.keys)
}

/// Runs an `lidx air` subcommand.
pub fn run(cmd: AirCmd) -> Result<()> {
    match cmd {
        AirCmd::Build {
            data,
            profile,
            out,
            records,
            top_k,
            lambda_low,
            lambda_high,
            base,
            keys,
            data_dir,
        } => {
            let profile = StorageProfile::parse(&profile)?;
            let config = TuneConfig {
                top_k,
                lambda_low,
                lambda_high,
                base,
                ..TuneConfig::default()
            };
            config.validate()?;
            let storage = storage::open_url(&out)?;
            let keys = load_keys(&data, keys, data_dir.as_deref())?;
            let ranks: Vec<u64>;
            let input = if records {
                ranks = (0..keys.len() as u64).collect();
                DataInput::KeyValues {
                    keys: &keys,
                    values: &ranks,
                }
            } else {
                DataInput::SosdKeys(&keys)
            };
            let report = lidx_air::build(&*storage, input, &profile, DesignChoice::Tune(config))?;
            print!("{}", report.summary());
            println!("design written to {}", join_url(&out, "design.json"));
            Ok(())
        }
        AirCmd::Get { url, keys } => {
            let index = AirIndex::open(storage::open_url(&url)?)?;
            for k in keys {
                match index.get_entry(k)? {
                    Some(e) => match e.value_u64(index.meta().layout) {
                        Some(v) => println!("{k}\t{v}"),
                        None => println!("{k}\t{}", hex(&e.value)),
                    },
                    None => println!("{k}\tnot found"),
                }
            }
            Ok(())
        }
        AirCmd::Inspect { url, verify } => inspect(&url, verify),
        AirCmd::Bench {
            url,
            queries,
            profile,
            cold,
            cache_mib,
            runs,
            seed,
        } => bench(
            &url,
            queries,
            profile.as_deref(),
            cold,
            cache_mib,
            runs,
            seed,
        ),
        AirCmd::Compare {
            data,
            profile,
            runs,
            local_dir,
            keys,
            data_dir,
            seed,
        } => compare(
            &data,
            &profile,
            runs,
            local_dir.as_deref(),
            keys,
            data_dir.as_deref(),
            seed,
        ),
    }
}

fn join_url(base: &str, name: &str) -> String {
    format!("{}/{name}", base.trim_end_matches('/'))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn inspect(url: &str, verify: bool) -> Result<()> {
    let storage = storage::open_url(url)?;
    let index = AirIndex::open(storage.clone())?;
    let m = index.meta();
    println!("AirIndex at {}", storage.describe());
    println!(
        "  data: {} records of {} bytes ({:?}), {} distinct keys, {} bytes on storage",
        m.data.records,
        m.data.record_size,
        m.layout,
        m.distinct_keys,
        m.data.physical_len()
    );
    println!("  modelled lookup: {:.1} us", m.modeled_cost_ns / 1e3);
    println!(
        "  root: {} bytes in meta ({} index layers)",
        m.root.len(),
        m.layers.len()
    );
    for (i, l) in m.layers.iter().enumerate().rev() {
        println!(
            "  layer {}: {} by {}, {} nodes, {} bytes, expected read below {:.0} B",
            i + 1,
            l.kind,
            l.builder,
            l.geometry.records,
            l.geometry.physical_len(),
            l.expected_read_bytes
        );
    }
    if let Ok(design) = storage.read_all(lidx_air::format::DESIGN_OBJECT)
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&design)
    {
        for field in ["build_s", "tune_s", "write_s", "profile"] {
            if let Some(x) = v.get(field) {
                println!("  {field}: {x}");
            }
        }
    }
    if verify {
        let started = Instant::now();
        index.verify()?;
        println!(
            "  verified: every checksum and every key ({:.2} s)",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

fn bench(
    url: &str,
    queries: usize,
    profile: Option<&str>,
    cold: bool,
    cache_mib: u64,
    runs: usize,
    seed: u64,
) -> Result<()> {
    if queries == 0 || runs == 0 {
        return Err(Error::invalid("--queries and --runs must be at least 1"));
    }
    let base = storage::open_url(url)?;
    let keys = {
        let index = AirIndex::open(base.clone())?;
        sample_keys_fast(&index, queries.max(runs), seed)?
    };
    let timed: Arc<dyn Storage> = match profile {
        Some(p) => Arc::new(Simulated::new(base.clone(), StorageProfile::parse(p)?)),
        None => base.clone(),
    };
    // Cold first query: open + one lookup, nothing cached.
    let mut firsts = Vec::with_capacity(runs);
    for key in keys.iter().take(runs) {
        evict_all(&*base)?;
        let started = Instant::now();
        let index = AirIndex::open(timed.clone())?;
        let found = index.get_entry(*key)?;
        firsts.push(started.elapsed().as_secs_f64());
        if found.is_none() {
            return Err(Error::corrupt(format!(
                "key {key} of the index was not found"
            )));
        }
    }
    println!(
        "first query (cold, open + lookup): mean {} over {runs} runs, median {}",
        fmt_s(mean(&firsts)),
        fmt_s(median(&mut firsts.clone()))
    );
    // The latency curve (paper Fig. 10): mean latency of the first i queries.
    evict_all(&*base)?;
    let storage: Arc<dyn Storage> = if cold {
        timed
    } else {
        Arc::new(PageCache::new(timed, 4096, cache_mib << 20)?)
    };
    let started = Instant::now();
    let index = AirIndex::open(storage)?;
    let mut marks: Vec<usize> = Vec::new();
    let mut m = 1usize;
    while m < queries {
        for step in [1, 2, 5] {
            if m * step < queries {
                marks.push(m * step);
            }
        }
        m *= 10;
    }
    marks.push(queries);
    marks.dedup();
    println!(
        "queries  mean latency (open included, {})",
        if cold { "cold" } else { "page cache" }
    );
    let mut next = 0;
    for (i, key) in keys.iter().take(queries).enumerate() {
        if index.get_entry(*key)?.is_none() {
            return Err(Error::corrupt(format!(
                "key {key} of the index was not found"
            )));
        }
        if marks.get(next) == Some(&(i + 1)) {
            let avg = started.elapsed().as_secs_f64() / (i + 1) as f64;
            println!("{:>7}  {}", i + 1, fmt_s(avg));
            next += 1;
        }
    }
    Ok(())
}

/// Query keys drawn uniformly from the data's records, read with one scan.
fn sample_keys_fast(index: &AirIndex, n: usize, seed: u64) -> Result<Vec<u64>> {
    let len = index.len();
    if len == 0 {
        return Err(Error::invalid("the index is empty: nothing to query"));
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut ranks: Vec<(u64, usize)> = (0..n).map(|i| (rng.random_range(0..len), i)).collect();
    ranks.sort_unstable();
    let mut keys = vec![0u64; n];
    let mut it = index.range(..)?.enumerate();
    let mut current: Option<(usize, u64)> = None;
    for (rank, slot) in ranks {
        while current.is_none_or(|(r, _)| (r as u64) < rank) {
            let (r, e) = it
                .next()
                .ok_or_else(|| Error::corrupt("data layer shorter than its meta"))?;
            current = Some((r, e?.key));
        }
        keys[slot] = current.expect("set above").1;
    }
    Ok(keys)
}

fn evict_all(storage: &dyn Storage) -> Result<()> {
    for name in storage.list("")? {
        storage.evict(&name)?;
    }
    Ok(())
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn fmt_s(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// One design of the comparison, built on in-memory storage.
struct Contender {
    name: String,
    design: Tuned,
    storage: Arc<dyn Storage>,
    build_s: f64,
    tune_s: f64,
}

#[allow(clippy::too_many_arguments)]
fn compare(
    data: &str,
    profiles: &[String],
    runs: usize,
    local_dir: Option<&Path>,
    keys: Option<usize>,
    data_dir: Option<&Path>,
    seed: u64,
) -> Result<()> {
    if runs == 0 {
        return Err(Error::invalid("--runs must be at least 1"));
    }
    let keys = load_keys(data, keys, data_dir)?;
    let data_kp =
        lidx_air::keypos::KeyPositions::from_sorted_keys(&keys, 8, lidx_air::format::BLOCK_TARGET)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let queries: Vec<u64> = (0..runs)
        .map(|_| keys[rng.random_range(0..keys.len())])
        .collect();
    println!(
        "dataset {data}: {} keys, SOSD layout (value = rank)",
        keys.len()
    );
    for spec in profiles {
        let profile = StorageProfile::parse(spec)?;
        println!("\nprofile {spec}: {profile}");
        let mut contenders = Vec::new();
        let started = Instant::now();
        let air = lidx_air::tune::tune(&data_kp, &profile, &TuneConfig::default())?;
        let tune_s = started.elapsed().as_secs_f64();
        contenders.push(("airindex".to_owned(), air, tune_s));
        let paper = baseline::btree(&data_kp, &profile, baseline::PAPER_BTREE_PAGE)?;
        contenders.push(("btree-4k (paper)".to_owned(), paper, 0.0));
        if let Some((page, t)) = baseline::best_of(baseline::btree_pages(), |p| {
            baseline::btree(&data_kp, &profile, p)
        })? {
            contenders.push((format!("btree best (page {})", page_name(page)), t, 0.0));
        }
        if let Some((eps, t)) = baseline::best_of(baseline::pgm_epsilons(), |e| {
            baseline::pgm(&data_kp, &profile, e)
        })? {
            contenders.push((format!("pgm best (eps {eps})"), t, 0.0));
        }
        let mut built = Vec::new();
        for (name, design, tune_s) in contenders {
            let storage: Arc<dyn Storage> = Arc::new(storage::Memory::new());
            let started = Instant::now();
            let report = lidx_air::build(
                &*storage,
                DataInput::SosdKeys(&keys),
                &profile,
                DesignChoice::Fixed(design.clone()),
            )?;
            built.push(Contender {
                name,
                design,
                storage,
                build_s: started.elapsed().as_secs_f64() + tune_s,
                tune_s,
            });
            let _ = report;
        }
        println!(
            "{:<24} {:>7} {:>12} {:>12} {:>9} {:>9} {:>8}",
            "design", "layers", "modelled", "measured", "meas/mod", "vs air", "build s"
        );
        let air_cost = built[0].design.modeled_cost_ns;
        for c in &built {
            let sim: Arc<dyn Storage> =
                Arc::new(Simulated::new(c.storage.clone(), profile.clone()));
            let mut times = Vec::with_capacity(runs);
            for &q in &queries {
                let started = Instant::now();
                let index = AirIndex::open(sim.clone())?;
                let got = index.get(q)?;
                times.push(started.elapsed().as_secs_f64() * 1e9);
                if got.is_none() {
                    return Err(Error::corrupt(format!("{}: key {q} not found", c.name)));
                }
            }
            let measured = mean(&times);
            println!(
                "{:<24} {:>7} {:>12} {:>12} {:>8.2}x {:>8.2}x {:>8.2}",
                c.name,
                c.design.layers.len(),
                fmt_s(c.design.modeled_cost_ns / 1e9),
                fmt_s(measured / 1e9),
                measured / c.design.modeled_cost_ns,
                c.design.modeled_cost_ns / air_cost,
                c.build_s
            );
            let _ = c.tune_s;
        }
        if let Some(dir) = local_dir {
            local_vs_lmdb(dir, &keys, &queries, &profile)?;
        }
    }
    Ok(())
}

fn page_name(page: u64) -> String {
    if page >= 1 << 20 {
        format!("{} MiB", page >> 20)
    } else {
        format!("{} KiB", page >> 10)
    }
}

/// Cold first-query latency on the local disk: AirIndex on a local
/// directory and LMDB, both evicted from the OS page cache before each run.
fn local_vs_lmdb(
    dir: &Path,
    keys: &[u64],
    queries: &[u64],
    profile: &StorageProfile,
) -> Result<()> {
    let air_dir = dir.join("airindex");
    let lmdb_dir = dir.join("lmdb");
    let local: Arc<dyn Storage> = Arc::new(storage::LocalDir::open(&air_dir, Default::default())?);
    lidx_air::build(
        &*local,
        DataInput::SosdKeys(keys),
        profile,
        DesignChoice::Tune(TuneConfig::default()),
    )?;
    let lmdb = lidx_bench::peers::lmdb::LmdbCold::create(&lmdb_dir, keys)?;
    let mut air_times = Vec::new();
    let mut lmdb_times = Vec::new();
    for &q in queries {
        evict_all(&*local)?;
        // A fresh handle, so opening files is timed as LMDB's opening is.
        let started = Instant::now();
        let fresh: Arc<dyn Storage> =
            Arc::new(storage::LocalDir::open(&air_dir, Default::default())?);
        let index = AirIndex::open(fresh)?;
        let got = index.get(q)?;
        air_times.push(started.elapsed().as_secs_f64());
        lmdb.evict()?;
        let (lm, elapsed) = lmdb.cold_get(q)?;
        lmdb_times.push(elapsed.as_secs_f64());
        if got.is_none() || lm.is_none() {
            return Err(Error::corrupt(format!(
                "key {q} not found on the local disk"
            )));
        }
    }
    let (a, l) = (median(&mut air_times), median(&mut lmdb_times));
    println!(
        "local disk, cold (page cache evicted), median of {}: airindex {} vs lmdb {} (airindex/lmdb = {:.2}x)",
        queries.len(),
        fmt_s(a),
        fmt_s(l),
        a / l
    );
    Ok(())
}

/// `lidx profile URL`: calibrate a storage profile.
pub fn profile(url: &str, object: Option<&str>, size_mib: u64, out: Option<&Path>) -> Result<()> {
    let storage = storage::open_url(url)?;
    let scratch = "lidx-profile.tmp";
    let name = match object {
        Some(o) => o.to_owned(),
        None => {
            if size_mib == 0 {
                return Err(Error::invalid("--size-mib must be at least 1"));
            }
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
            let data: Vec<u8> = (0..size_mib << 20).map(|_| rng.random()).collect();
            storage.write(scratch, &data)?;
            scratch.to_owned()
        }
    };
    let result = storage::calibrate(&*storage, &name, &Default::default());
    if object.is_none() {
        storage.delete(scratch)?;
    }
    let cal = result?;
    println!("{}", cal.profile);
    println!(
        "fit r^2 = {:.4} over {} reads",
        cal.r_squared,
        cal.samples.len()
    );
    if let Some(path) = out {
        cal.profile.save(path)?;
        println!("profile written to {}", path.display());
    }
    Ok(())
}
