//! One engine against the best of a set of peers: the compact table the
//! engine READMEs and closing notes quote.
//!
//! For every (dataset, threads) line and every workload column, the cell is
//! the engine's throughput divided by the highest throughput among the
//! peers measured in the same result file for that dataset, workload and
//! thread count. A peer that returned wrong answers there is left out of
//! "best" (a fast wrong answer must not set the bar), and a cell whose
//! engine row returned wrong answers is marked. Memory is the engine's heap
//! against a reference peer's, on the first workload of the line. The tail
//! column is the engine's own get p99.9 over its get p50 under one
//! workload: how far its slowest reads stray while that workload writes.

use std::fmt::Write as _;

use lidx_core::{Error, Result};

use crate::results::{Results, Row};

/// What to compare.
#[derive(Clone, Debug)]
pub struct Versus<'a> {
    /// The engine under test.
    pub engine: &'a str,
    /// The peers whose best throughput is the bar.
    pub peers: &'a [&'a str],
    /// Peer for the memory column (`None`: no memory column).
    pub memory_peer: Option<&'a str>,
    /// Workload for the tail column, the engine's get p99.9 / get p50
    /// there (`None`: no tail column).
    pub tail_workload: Option<&'a str>,
}

/// The Markdown table of [`Versus`] over the rows of `files`, in the order
/// datasets, thread counts and workloads first appear.
pub fn versus_table(files: &[Results], versus: &Versus<'_>) -> Result<String> {
    let rows: Vec<&Row> = files.iter().flat_map(|f| &f.rows).collect();
    if !rows.iter().any(|r| r.engine == versus.engine) {
        return Err(Error::invalid(format!(
            "versus: no rows for engine '{}' in the result files",
            versus.engine
        )));
    }
    let mut lines: Vec<(&str, usize, u64)> = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.engine == versus.engine) {
        if !lines
            .iter()
            .any(|&(d, t, _)| d == r.dataset && t == r.threads)
        {
            lines.push((&r.dataset, r.threads, r.keys));
        }
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let find = |engine: &str, dataset: &str, workload: &str, threads: usize| {
        rows.iter().copied().find(|r| {
            r.engine == engine
                && r.dataset == dataset
                && r.workload == workload
                && r.threads == threads
        })
    };
    let mut out = String::new();
    let _ = write!(out, "| dataset (keys) | threads |");
    for w in &workloads {
        let _ = write!(out, " {w} |");
    }
    if let Some(peer) = versus.memory_peer {
        let _ = write!(out, " mem vs {peer} |");
    }
    if let Some(w) = versus.tail_workload {
        let _ = write!(out, " get p99.9/p50 ({w}) |");
    }
    out.push('\n');
    let _ = write!(out, "|---|---:|");
    for _ in &workloads {
        out.push_str("---:|");
    }
    if versus.memory_peer.is_some() {
        out.push_str("---:|");
    }
    if versus.tail_workload.is_some() {
        out.push_str("---:|");
    }
    out.push('\n');
    for &(dataset, threads, keys) in &lines {
        let _ = write!(out, "| {dataset} ({}) | {threads} |", fmt_keys(keys));
        let mut memory = None;
        for w in &workloads {
            let cell = find(versus.engine, dataset, w, threads).and_then(|own| {
                let best = versus
                    .peers
                    .iter()
                    .filter_map(|p| find(p, dataset, w, threads))
                    .filter(|r| r.wrong_answers == 0 && r.throughput_mops.is_finite())
                    .map(|r| r.throughput_mops)
                    .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))?;
                if memory.is_none()
                    && let Some(peer) = versus
                        .memory_peer
                        .and_then(|p| find(p, dataset, w, threads))
                    && peer.memory_bytes > 0
                {
                    memory = Some(own.memory_bytes as f64 / peer.memory_bytes as f64);
                }
                (best > 0.0).then(|| {
                    let flag = if own.wrong_answers > 0 {
                        " ⚠ wrong"
                    } else {
                        ""
                    };
                    format!("{:.2}x{flag}", own.throughput_mops / best)
                })
            });
            let _ = write!(out, " {} |", cell.as_deref().unwrap_or("-"));
        }
        if versus.memory_peer.is_some() {
            let m = memory.map_or_else(|| "-".to_owned(), |m| format!("{m:.2}x"));
            let _ = write!(out, " {m} |");
        }
        if let Some(w) = versus.tail_workload {
            let tail = find(versus.engine, dataset, w, threads)
                .filter(|r| r.get_p50_ns > 0)
                .map_or_else(
                    || "-".to_owned(),
                    |r| {
                        let ratio = r.get_p999_ns as f64 / r.get_p50_ns as f64;
                        format!("{ratio:.1}x ({})", crate::report::fmt_ns(r.get_p999_ns))
                    },
                );
            let _ = write!(out, " {tail} |");
        }
        out.push('\n');
    }
    Ok(out)
}

fn fmt_keys(keys: u64) -> String {
    if keys >= 1_000_000 {
        format!("{:.2}M", keys as f64 / 1e6)
    } else if keys >= 1_000 {
        format!("{:.0}K", keys as f64 / 1e3)
    } else {
        keys.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Header;

    fn row(engine: &str, dataset: &str, workload: &str, threads: usize, mops: f64) -> Row {
        Row {
            engine: engine.into(),
            dataset: dataset.into(),
            keys: 3_074_175,
            workload: workload.into(),
            threads,
            ops: 1000,
            throughput_mops: mops,
            p50_ns: 1,
            p99_ns: 1,
            p999_ns: 1,
            get_p50_ns: 0,
            get_p99_ns: 0,
            get_p999_ns: 0,
            maintenance: None,
            build_s: 0.0,
            memory_bytes: 100,
            disk_bytes: 0,
            durability: "in-memory".into(),
            wrong_answers: 0,
        }
    }

    fn header() -> Header {
        Header {
            cpu_model: "x".into(),
            cores: 2,
            rustc: "r".into(),
            git_commit: "c".into(),
            lidx_version: "0".into(),
            started_unix: 0,
            command: "lidx bench".into(),
            repeats: 1,
            warmup: 0,
        }
    }

    #[test]
    fn best_correct_peer_sets_the_bar() {
        let mut wrong_fast = row("pgm", "g", "lookup", 1, 100.0);
        wrong_fast.wrong_answers = 5;
        let mut scc = row("scc", "g", "lookup", 1, 2.0);
        scc.memory_bytes = 80;
        let a = Results {
            header: header(),
            rows: vec![
                row("xi", "g", "lookup", 1, 3.0),
                row("bt", "g", "lookup", 1, 1.5),
                scc,
                wrong_fast,
                row("xi", "g", "scan", 1, 1.0),
                row("bt", "g", "scan", 1, 2.0),
            ],
        };
        // A second file: another dataset, and a workload with no peer.
        let b = Results {
            header: header(),
            rows: vec![
                row("xi", "b", "lookup", 2, 8.0),
                row("bt", "b", "lookup", 2, 4.0),
                row("xi", "b", "insert", 2, 1.0),
            ],
        };
        let table = versus_table(
            &[a, b],
            &Versus {
                engine: "xi",
                peers: &["bt", "scc", "pgm"],
                memory_peer: Some("scc"),
                tail_workload: None,
            },
        )
        .unwrap();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| dataset (keys) | threads | lookup | scan | insert | mem vs scc |"
        );
        assert_eq!(lines[2], "| g (3.07M) | 1 | 1.50x | 0.50x | - | 1.25x |");
        assert_eq!(lines[3], "| b (3.07M) | 2 | 2.00x | - | - | - |");
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn tail_column_is_the_engines_get_p999_over_its_get_p50() {
        let mut mixed = row("xi", "g", "mixed:0.9", 1, 3.0);
        (mixed.get_p50_ns, mixed.get_p999_ns) = (400, 2_000);
        // All-operation quantiles (writes included) do not count.
        (mixed.p50_ns, mixed.p999_ns) = (500, 90_000);
        let mut peer = row("bt", "g", "mixed:0.9", 1, 1.5);
        (peer.get_p50_ns, peer.get_p999_ns) = (100, 100_000);
        let a = Results {
            header: header(),
            rows: vec![
                mixed,
                peer,
                row("xi", "g", "lookup", 1, 3.0),
                row("bt", "g", "lookup", 1, 1.0),
                // A line without the tail workload, or without get samples.
                row("xi", "g", "lookup", 2, 3.0),
                row("xi", "g", "mixed:0.9", 4, 3.0),
            ],
        };
        let table = versus_table(
            &[a],
            &Versus {
                engine: "xi",
                peers: &["bt"],
                memory_peer: None,
                tail_workload: Some("mixed:0.9"),
            },
        )
        .unwrap();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| dataset (keys) | threads | mixed:0.9 | lookup | get p99.9/p50 (mixed:0.9) |"
        );
        assert_eq!(
            lines[2],
            "| g (3.07M) | 1 | 2.00x | 3.00x | 5.0x (2.00 µs) |"
        );
        assert_eq!(lines[3], "| g (3.07M) | 2 | - | - | - |");
        assert_eq!(lines[4], "| g (3.07M) | 4 | - | - | - |");
    }

    #[test]
    fn unknown_engine_is_an_error() {
        let a = Results {
            header: header(),
            rows: vec![row("bt", "g", "lookup", 1, 1.0)],
        };
        let v = Versus {
            engine: "xi",
            peers: &["bt"],
            memory_peer: None,
            tail_workload: None,
        };
        let err = versus_table(&[a], &v).unwrap_err();
        assert!(err.to_string().contains("'xi'"), "{err}");
    }
}
