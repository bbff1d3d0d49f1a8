//! The result file written by `lidx bench --json` and read by `lidx report`.

use std::path::Path;

use lidx_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Facts about the machine and build that produced a result file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// CPU model name from `/proc/cpuinfo` (or `"unknown"`).
    pub cpu_model: String,
    /// Logical cores available to the process.
    pub cores: usize,
    /// `rustc --version` of the compiler that built lidx.
    pub rustc: String,
    /// `git rev-parse HEAD` of the source tree, with `-dirty` if modified.
    pub git_commit: String,
    /// lidx version.
    pub lidx_version: String,
    /// Unix time (seconds) when the run started.
    pub started_unix: u64,
    /// The command line that produced the file.
    pub command: String,
    /// Number of repeats each figure is the median of.
    pub repeats: usize,
    /// Warm-up gets each engine answered after its bulk load, before its
    /// streams ran (`BenchConfig::warmup`). Files written before session 20
    /// have none: 0.
    #[serde(default)]
    pub warmup: usize,
}

/// One measured (engine, dataset, workload, threads) combination.
///
/// Throughput and latencies are medians over the repeats.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Engine or peer name.
    pub engine: String,
    /// Dataset name or path.
    pub dataset: String,
    /// Number of keys in the dataset (before the workload splits it).
    pub keys: u64,
    /// Workload name as given on the command line.
    pub workload: String,
    /// Worker threads.
    pub threads: usize,
    /// Operations executed per repeat (all threads together).
    pub ops: u64,
    /// Median throughput, million operations per second.
    pub throughput_mops: f64,
    /// Median of the per-repeat sampled 50th-percentile latency, ns.
    pub p50_ns: u64,
    /// Same for the 99th percentile.
    pub p99_ns: u64,
    /// Same for the 99.9th percentile.
    pub p999_ns: u64,
    /// Median of the per-repeat 50th percentile over the sampled single
    /// gets alone, ns (0: no get was sampled, or a file from before this
    /// field). In a mixed workload this is the read latency while writes,
    /// and the maintenance they cause, run.
    #[serde(default)]
    pub get_p50_ns: u64,
    /// Same for the 99th percentile.
    #[serde(default)]
    pub get_p99_ns: u64,
    /// Same for the 99.9th percentile.
    #[serde(default)]
    pub get_p999_ns: u64,
    /// Median over the repeats of the structural changes the engine's
    /// background work made while the streams ran (compactions, splits,
    /// merges; see `BenchEngine::maintenance_count`); `None` for engines
    /// without background work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<u64>,
    /// Median build / bulk-load time, seconds.
    pub build_s: f64,
    /// Heap bytes held by the engine after the run (counting allocator).
    pub memory_bytes: u64,
    /// Bytes on disk after the run (0 for in-memory engines).
    pub disk_bytes: u64,
    /// Durability setting the engine ran with.
    pub durability: String,
    /// Answers that differed from the expected result, summed over repeats.
    pub wrong_answers: u64,
}

/// A whole result file.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// Run metadata.
    pub header: Header,
    /// Measured rows, in the order the engines were listed.
    pub rows: Vec<Row>,
}

impl Results {
    /// Reads a result file written by [`Results::write`].
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::invalid(format!("{}: not a lidx result file: {e}", path.display())))
    }

    /// Writes the file as pretty JSON (atomically: temp file, then rename).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::invalid(format!("cannot serialise results: {e}")))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }
}
