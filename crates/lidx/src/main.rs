//! `lidx`: datasets, generators, benchmarks, reports and the replay protocol.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lidx_bench::datasets::{self, KeyKind};
use lidx_bench::keygen::Distribution;
use lidx_bench::results::Results;
use lidx_bench::runner::{self, BenchConfig, Outcome};
use lidx_bench::{report, summary};
use lidx_core::keyset::{open_sosd_f64, open_sosd_u64, read_text_keys, write_sosd};
use lidx_core::{Error, Result};

mod air;
mod replay;

#[global_allocator]
static ALLOC: lidx_core::counting_alloc::CountingAlloc = lidx_core::counting_alloc::CountingAlloc;

/// Learned indexes as storage engines: benchmarks, data and tools.
#[derive(Parser)]
#[command(name = "lidx", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build every available engine and peer on built-in data and print the comparison.
    Demo {
        /// Operations per run.
        #[arg(long, default_value_t = 200_000)]
        ops: usize,
        /// Repeats per engine (figures are medians).
        #[arg(long, default_value_t = 3)]
        repeat: usize,
    },
    /// List the named key sets and where they were found.
    Datasets {
        /// Extra directory to search first.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Generate a synthetic key set as a SOSD u64 file.
    Gen {
        /// Distribution: uniform-dense, uniform-sparse, normal, lognormal, mixture, linear-noise.
        dist: String,
        /// Number of keys.
        #[arg(long)]
        keys: usize,
        /// Seed (same seed, same keys).
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Run engines side by side on a dataset and workloads.
    Bench {
        /// Comma-separated engines; the first is the baseline for ratios.
        #[arg(long, value_delimiter = ',', required = true)]
        engines: Vec<String>,
        /// Dataset name, generator name, or SOSD file path.
        #[arg(long)]
        dataset: String,
        /// Limit the number of keys (real sets are thinned evenly).
        #[arg(long)]
        keys: Option<usize>,
        /// Comma-separated workloads (lookup, lookup:zipf, lookup-miss, lookup-batch:N, scan, insert, append, append:R, mixed:R, w1..w6, ycsb-a..ycsb-f, oscillate, shift).
        #[arg(long, value_delimiter = ',', default_value = "lookup")]
        workload: Vec<String>,
        /// Comma-separated thread counts.
        #[arg(long, value_delimiter = ',', default_value = "1")]
        threads: Vec<usize>,
        /// Operations per run (all threads together).
        #[arg(long, default_value_t = 1_000_000)]
        ops: usize,
        /// Repeats; every figure is the median.
        #[arg(long, default_value_t = 3)]
        repeat: usize,
        /// Gets of random loaded keys every engine answers after its bulk
        /// load, untimed, before its streams run (0: none).
        #[arg(long, default_value_t = 1_000_000)]
        warmup: usize,
        /// Seed for generated keys and workloads.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Write results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Pin worker threads to these CPUs (round robin).
        #[arg(long, value_delimiter = ',')]
        pin: Option<Vec<usize>>,
        /// Extra directory to search for real key sets.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Directory for persistent engines' temporary files.
        #[arg(long)]
        work_dir: Option<PathBuf>,
        /// Print a Markdown table instead of the text table.
        #[arg(long)]
        md: bool,
    },
    /// Render result files as an HTML page, Markdown tables, or one engine's
    /// ratios against the best of its peers.
    Report {
        /// Results JSON written by `lidx bench --json` (several with --versus).
        #[arg(required = true)]
        results: Vec<PathBuf>,
        /// HTML output file (one results file).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print a Markdown table to stdout.
        #[arg(long)]
        md: bool,
        /// Print a table of this engine's throughput over the best of
        /// --best-of, per dataset, threads and workload.
        #[arg(long, requires = "best_of")]
        versus: Option<String>,
        /// Comma-separated peers for --versus (peers with wrong answers never
        /// count as best).
        #[arg(long, value_delimiter = ',')]
        best_of: Vec<String>,
        /// With --versus: add a memory column against this peer.
        #[arg(long)]
        memory_vs: Option<String>,
        /// With --versus: add a column of the engine's get p99.9 over its
        /// get p50 under this workload (e.g. mixed:0.9).
        #[arg(long)]
        tail_of: Option<String>,
    },
    /// AirIndex: build, query, inspect and benchmark storage-tuned indexes.
    Air {
        #[command(subcommand)]
        cmd: air::AirCmd,
    },
    /// Calibrate a storage profile (latency, bandwidth) by timing cold reads.
    Profile {
        /// Storage location: a directory, file://, direct+file://, mmap://, objfs://, s3://bucket/prefix.
        url: String,
        /// Existing object to read; default: write a scratch object, read it, delete it.
        #[arg(long)]
        object: Option<String>,
        /// Size of the scratch object in MiB.
        #[arg(long, default_value_t = 64)]
        size_mib: u64,
        /// Save the profile to this file (accepted by `lidx air build --profile`).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Drive an engine with the line protocol on stdin (see `lidx replay --help`).
    #[command(long_about = REPLAY_HELP)]
    Replay {
        /// Engine name.
        #[arg(long)]
        engine: String,
        /// Directory of a persistent engine (opened and recovered if it exists).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// SOSD u64 file to bulk-load first (value = key + 1).
        #[arg(long)]
        bulk: Option<PathBuf>,
        /// Key type.
        #[arg(long, value_enum, default_value = "u64")]
        key_type: replay::KeyType,
    },
}

const REPLAY_HELP: &str = "Drive an engine with one operation per stdin line:
  put K V   -> (no output)
  get K     -> value, or -
  del K     -> 1 if K was present, else 0
  scan K N  -> up to N k:v pairs with k >= K, ascending, space-separated
  sync      -> synced (after making every earlier operation durable)
K and V are decimal u64 (--key-type bytes: K is lowercase hex). Blank lines and # comments
are ignored. Exit codes: 2 malformed line (line N: ... on stderr), 3 unsupported operation.";

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || matches!(
                    e.kind(),
                    ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                )
            {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // One line: clap's first line already says what was wrong.
            let text = e.to_string();
            eprintln!(
                "{}",
                text.lines().next().unwrap_or("error: invalid arguments")
            );
            return ExitCode::from(2);
        }
    };
    if let Cmd::Replay {
        engine,
        dir,
        bulk,
        key_type,
    } = &cli.command
    {
        return match replay::main(engine, dir.as_deref(), bulk.as_deref(), *key_type) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(e.exit_code())
            }
        };
    }
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e.to_string()));
            ExitCode::from(1)
        }
    }
}

fn one_line(s: &str) -> String {
    s.split('\n').map(str::trim).collect::<Vec<_>>().join("; ")
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

fn run(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Demo { ops, repeat } => demo(ops, repeat),
        Cmd::Air { cmd } => air::run(cmd),
        Cmd::Profile {
            url,
            object,
            size_mib,
            output,
        } => air::profile(&url, object.as_deref(), size_mib, output.as_deref()),
        Cmd::Datasets { data_dir } => list_datasets(data_dir),
        Cmd::Gen {
            dist,
            keys,
            seed,
            output,
        } => {
            let dist: Distribution = dist.parse()?;
            let generated = lidx_bench::keygen::generate(dist, keys, seed)?;
            write_sosd(&output, &generated)?;
            println!(
                "wrote {} {} keys (seed {seed}) to {}",
                generated.len(),
                dist.name(),
                output.display()
            );
            Ok(())
        }
        Cmd::Bench {
            engines,
            dataset,
            keys,
            workload,
            threads,
            ops,
            repeat,
            warmup,
            seed,
            json,
            pin,
            data_dir,
            work_dir,
            md,
        } => {
            let cfg = BenchConfig {
                engines,
                dataset,
                keys,
                workloads: workload,
                threads,
                ops,
                repeat,
                warmup,
                seed,
                pin,
                data_dir,
                work_dir,
                progress: true,
                command: command_line(),
            };
            if let Some(path) = &json {
                check_writable(path)?;
            }
            let outcome = runner::run(&cfg)?;
            print_outcome(&outcome, md);
            if let Some(path) = json {
                outcome.results.write(&path)?;
                eprintln!("results written to {}", path.display());
            }
            Ok(())
        }
        Cmd::Report {
            results,
            output,
            md,
            versus,
            best_of,
            memory_vs,
            tail_of,
        } => {
            let files = results
                .iter()
                .map(|p| Results::read(p))
                .collect::<Result<Vec<_>>>()?;
            if let Some(engine) = &versus {
                let peers: Vec<&str> = best_of.iter().map(String::as_str).collect();
                let table = summary::versus_table(
                    &files,
                    &summary::Versus {
                        engine,
                        peers: &peers,
                        memory_peer: memory_vs.as_deref(),
                        tail_workload: tail_of.as_deref(),
                    },
                )?;
                print!("{table}");
                if !md && output.is_none() {
                    return Ok(());
                }
            } else if !md && output.is_none() {
                return Err(Error::invalid(
                    "report: give -o FILE.html, --md and/or --versus ENGINE --best-of PEERS",
                ));
            }
            if md {
                for f in &files {
                    print!("{}", report::markdown_table(f));
                }
            }
            if let Some(path) = output {
                let [one] = files.as_slice() else {
                    return Err(Error::invalid("report: -o takes exactly one results file"));
                };
                report::write_html(one, &path)?;
                eprintln!("report written to {}", path.display());
            }
            Ok(())
        }
        Cmd::Replay { .. } => unreachable!("handled in main"),
    }
}

/// Fails early, before a long benchmark, if the JSON file cannot be written.
fn check_writable(path: &std::path::Path) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "--json {}: directory {} does not exist",
            path.display(),
            dir.display()
        )))
    }
}

fn print_outcome(outcome: &Outcome, md: bool) {
    if md {
        print!("{}", report::markdown_table(&outcome.results));
    } else {
        print!("{}", report::text_table(&outcome.results));
    }
    for s in &outcome.skipped {
        println!("skipped {} on {}: {}", s.engine, s.workload, s.reason);
    }
}

fn demo(ops: usize, repeat: usize) -> Result<()> {
    let engines = lidx_bench::registry::names()
        .into_iter()
        // `xindex` with the sequential hint: for the `append` workload,
        // which the demo does not run.
        .filter(|name| *name != "xindex-seq")
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let cfg = BenchConfig {
        engines,
        dataset: "torgeoip".to_owned(),
        keys: None,
        workloads: ["lookup", "insert", "scan", "mixed:0.9"]
            .map(str::to_owned)
            .to_vec(),
        threads: vec![1],
        ops,
        repeat,
        // As many as the run has operations: enough to turn the caches
        // over for this small key set, and the demo stays short.
        warmup: ops,
        seed: 42,
        progress: true,
        command: command_line(),
        ..BenchConfig::default()
    };
    println!(
        "lidx demo: {} engines on the committed `torgeoip` key set (385,602 IPv4 range starts),",
        cfg.engines.len()
    );
    println!(
        "workloads {}, 1 thread, {ops} ops per run after {ops} warm-up gets, median of {repeat} repeats; ratios vs `{}`.\n",
        cfg.workloads.join(", "),
        cfg.engines[0]
    );
    let outcome = runner::run(&cfg)?;
    print_outcome(&outcome, false);
    println!(
        "\nAirIndex on the same keys, cold first query on simulated SSD storage (250 us, 175 MB/s),"
    );
    println!("against B-tree and PGM designs built and costed the same way:");
    air::run(air::AirCmd::Compare {
        data: "torgeoip".to_owned(),
        profile: vec!["ssd".to_owned()],
        runs: 20,
        local_dir: None,
        keys: None,
        data_dir: None,
        seed: 42,
    })
}

fn list_datasets(data_dir: Option<PathBuf>) -> Result<()> {
    println!("{:<11} {:>10} {:<6} location", "name", "keys", "type");
    for set in datasets::REAL_DATASETS {
        let kind = match set.kind {
            KeyKind::U64 => "u64",
            KeyKind::F64 => "f64",
            KeyKind::Text => "string",
        };
        match datasets::locate(set, data_dir.as_deref()) {
            Some(path) => {
                let count = match set.kind {
                    KeyKind::U64 => open_sosd_u64(&path).map(|k| k.len()),
                    KeyKind::F64 => open_sosd_f64(&path).map(|k| k.len()),
                    KeyKind::Text => read_text_keys(&path).map(|k| k.len()),
                };
                match count {
                    Ok(n) => println!("{:<11} {:>10} {:<6} {}", set.name, n, kind, path.display()),
                    Err(e) => println!("{:<11} {:>10} {:<6} unreadable: {e}", set.name, "-", kind),
                }
            }
            None => println!("{:<11} {:>10} {:<6} not found", set.name, set.keys, kind),
        }
    }
    println!(
        "generators (any size, `--dataset NAME --keys N`): {}",
        Distribution::ALL
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}
