//! Tests for the Markdown, text and HTML views of a result file.

use lidx_bench::report::{html, markdown_table, ratios, text_table, write_html};
use lidx_bench::results::{Header, Results, Row};
use lidx_core::Error;

const EVIL: &str = "<script>alert(1)</script>";

fn row(engine: &str, workload: &str, threads: usize, mops: f64, wrong: u64) -> Row {
    Row {
        engine: engine.to_string(),
        dataset: "books_200M_uint64".to_string(),
        keys: 200_000_000,
        workload: workload.to_string(),
        threads,
        ops: 10_000_000,
        throughput_mops: mops,
        p50_ns: 180,
        p99_ns: 2_400,
        p999_ns: 31_000,
        get_p50_ns: 0,
        get_p99_ns: 0,
        get_p999_ns: 0,
        maintenance: None,
        build_s: 1.25,
        memory_bytes: 5 * 1024 * 1024,
        disk_bytes: 0,
        durability: "none".to_string(),
        wrong_answers: wrong,
    }
}

fn header() -> Header {
    Header {
        cpu_model: "AMD EPYC 7B13".to_string(),
        cores: 2,
        rustc: "rustc 1.95.0".to_string(),
        git_commit: "abc1234-dirty".to_string(),
        lidx_version: "0.1.0".to_string(),
        started_unix: 1_700_000_000,
        command: "lidx bench --engines lidx,btree".to_string(),
        repeats: 5,
        warmup: 100_000,
    }
}

/// Three engines × two workloads × two thread counts, in engine-major order
/// (as a runner looping over engines outermost would write them), with a
/// wrong-answer row and a hostile engine name.
fn sample() -> Results {
    let mut rows = Vec::new();
    let engines = [("lidx", 10.0), ("btree", 4.0), (EVIL, 25.0)];
    for (e, base) in engines {
        for (w, wf) in [("read-only", 1.0), ("balanced", 0.5)] {
            for t in [1usize, 2] {
                let wrong = if e == EVIL && w == "balanced" && t == 2 {
                    1234
                } else {
                    0
                };
                rows.push(row(e, w, t, base * wf * t as f64, wrong));
            }
        }
    }
    Results {
        header: header(),
        rows,
    }
}

fn table_lines(md: &str) -> Vec<&str> {
    md.lines().filter(|l| l.starts_with('|')).collect()
}

#[test]
fn ratios_are_relative_to_the_first_engine_of_each_group() {
    let r = sample();
    let ratios = ratios(&r);
    assert_eq!(ratios.len(), r.rows.len());
    for (row, ratio) in r.rows.iter().zip(&ratios) {
        let expected = match row.engine.as_str() {
            "lidx" => 1.0,
            "btree" => 0.4,
            _ => 2.5,
        };
        let got = ratio.expect("baseline throughput is positive");
        assert!((got - expected).abs() < 1e-12, "{}: {got}", row.engine);
    }
}

#[test]
fn ratio_is_none_when_baseline_is_zero() {
    let mut r = sample();
    r.rows[0].throughput_mops = 0.0; // lidx, read-only, 1 thread
    let ratios = ratios(&r);
    let same_group: Vec<usize> = (0..r.rows.len())
        .filter(|&i| r.rows[i].workload == "read-only" && r.rows[i].threads == 1)
        .collect();
    assert_eq!(same_group.len(), 3);
    for i in same_group {
        assert_eq!(ratios[i], None, "row {i}");
    }
    assert_eq!(ratios[1], Some(1.0));
}

#[test]
fn markdown_has_one_line_per_row_and_flags_wrong_answers() {
    let r = sample();
    let md = markdown_table(&r);
    let lines = table_lines(&md);
    assert_eq!(lines.len(), r.rows.len() + 2, "{md}");
    assert!(lines[0].contains("engine") && lines[0].contains("Mops/s"));
    assert!(lines[1].contains("---"));
    // Every line has the same number of unescaped cell separators.
    let cells = |l: &str| l.replace("\\|", "").matches('|').count();
    assert!(lines.iter().all(|l| cells(l) == cells(lines[0])));

    let first = md.lines().next().unwrap();
    for fact in ["AMD EPYC 7B13", "2 cores", "rustc 1.95.0", "abc1234-dirty"] {
        assert!(first.contains(fact), "{first}");
    }
    assert!(first.contains("medians of 5 repeats"), "{first}");

    let baselines = lines.iter().filter(|l| l.contains("| lidx |")).count();
    assert_eq!(baselines, 4);
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("| lidx |"))
            .all(|l| l.contains("| 1.00x |"))
    );
    assert_eq!(lines.iter().filter(|l| l.contains("| 0.40x |")).count(), 4);
    assert_eq!(lines.iter().filter(|l| l.contains("| 2.50x |")).count(), 3);

    let flagged: Vec<&&str> = lines.iter().filter(|l| l.contains("wrong")).collect();
    // The header line mentions the column "wrong" too.
    assert_eq!(flagged.len(), 2, "{md}");
    let bad = flagged[1];
    assert!(bad.contains("⚠ 1234 wrong"), "{bad}");
    assert!(bad.contains("(2.50x, wrong answers)"), "{bad}");
    assert!(md.contains("WARNING: 1 row returned wrong answers"));

    // Raw HTML from an engine name must not reach a Markdown renderer.
    assert!(!md.contains("<script>"));
    assert!(md.contains("&lt;script&gt;"));
}

#[test]
fn markdown_groups_rows_by_workload_and_threads() {
    let md = markdown_table(&sample());
    let lines = table_lines(&md);
    // Input is engine-major; output puts the three engines of a group together.
    let engines: Vec<&str> = lines[2..5]
        .iter()
        .map(|l| l.split('|').nth(1).unwrap().trim())
        .collect();
    assert_eq!(engines[0], "lidx");
    assert_eq!(engines[1], "btree");
    assert!(engines[2].contains("script"));
    assert!(lines[2..5].iter().all(|l| l.contains("read-only")));
}

#[test]
fn markdown_and_text_units() {
    let md = markdown_table(&sample());
    for unit in ["180 ns", "2.40 µs", "31.0 µs", "200M", "| 5.0 |", "| - |"] {
        assert!(md.contains(unit), "missing {unit}: {md}");
    }
}

#[test]
fn text_table_is_aligned_and_flags_wrong_answers() {
    let r = sample();
    let text = text_table(&r);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("medians of 5 repeats")
    );
    let data: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("books_200M_uint64"))
        .collect();
    assert_eq!(data.len(), r.rows.len());
    let header = text.lines().find(|l| l.starts_with("engine")).unwrap();
    // Right-aligned numeric columns end at the same position on every line.
    let end_of = |l: &str, col: &str| l.find(col).map(|p| p + col.len());
    let mops_end = end_of(header, "Mops/s").unwrap();
    for l in &data {
        let prefix: String = l.chars().take(mops_end).collect();
        assert!(
            prefix.ends_with(|c: char| c.is_ascii_digit()),
            "misaligned: {l}"
        );
    }
    let bad: Vec<&&str> = data.iter().filter(|l| l.contains("wrong")).collect();
    assert_eq!(bad.len(), 1);
    assert!(bad[0].contains("!! 1234 wrong"), "{}", bad[0]);
    assert!(bad[0].contains("(2.50x, wrong answers)"));
    assert!(text.contains("WARNING"));
    // The "vs base" cell of each of the 4 baselines (other rows carry
    // per-figure ratios in parentheses, which this pattern excludes).
    assert_eq!(data.iter().filter(|l| l.contains(" 1.00x ")).count(), 4);
}

#[test]
fn html_is_self_contained_and_escaped() {
    let r = sample();
    let page = html(&r);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    assert!(!page.contains("http://") && !page.contains("https://"));
    assert!(!page.contains("<script"), "unescaped script tag");
    assert!(!page.contains("<link") && !page.contains("<img") && !page.contains("@import"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // One throughput and one latency chart per (dataset, threads).
    assert_eq!(page.matches("<svg").count(), 4);
    assert_eq!(page.matches("</svg>").count(), 4);
    assert!(page.contains("AMD EPYC 7B13"));
    assert!(page.contains("2023-11-14 22:13 UTC"));
    // Every row in the table, the wrong one highlighted and explained.
    assert_eq!(
        page.matches("<td>books_200M_uint64</td>").count(),
        r.rows.len()
    );
    assert_eq!(page.matches("<tr class=\"wrong").count(), 1);
    assert!(page.contains("⚠ 1234 wrong"));
    assert!(page.contains("(2.50x, wrong answers)"));
    assert!(page.contains("class=\"alert\""));
    assert!(page.contains("1234 wrong answers"));
    // Figure ratios sit on their own line in the HTML table, balanced.
    assert!(page.contains("180 ns<span class=\"x\">(1.00x)</span>"));
    assert!(!page.contains("x))"));
}

#[test]
fn html_handles_edge_cases() {
    // No rows: still a complete page that says so.
    let empty = Results {
        header: Header::default(),
        rows: Vec::new(),
    };
    let page = html(&empty);
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert!(page.contains("There are no rows"));
    assert!(!page.contains("<svg"));
    assert!(markdown_table(&empty).contains("No rows"));
    assert!(text_table(&empty).contains("no rows"));

    // One row with zero throughput and no latency samples.
    let mut one = row("solo", "read-only", 1, 0.0, 0);
    one.p50_ns = 0;
    one.p99_ns = 0;
    one.p999_ns = 0;
    let single = Results {
        header: header(),
        rows: vec![one],
    };
    let page = html(&single);
    assert_eq!(page.matches("<svg").count(), 2);
    assert!(page.contains("every throughput here is zero"));
    assert!(page.contains("no latency samples"));
    assert!(!page.contains("NaN") && !page.contains("inf"));
    assert_eq!(ratios(&single), vec![None]);
    assert!(table_lines(&markdown_table(&single)).len() == 3);

    // A missing (engine, workload) combination is shown as such.
    let mut r = sample();
    r.rows
        .retain(|x| !(x.engine == "btree" && x.workload == "balanced"));
    let page = html(&r);
    assert!(page.contains("no data"));
    assert!(!page.contains("NaN"));
}

/// 8 engines × 10 workloads × 2 thread counts.
fn many() -> Results {
    let mut rows = Vec::new();
    for e in 0..8 {
        for w in 0..10 {
            for t in [1, 16] {
                let mut x = row(
                    &format!("engine-{e}"),
                    &format!("wl-{w}"),
                    t,
                    1.0 + e as f64,
                    0,
                );
                x.p999_ns = 10u64.pow(3 + (w % 5) as u32);
                rows.push(x);
            }
        }
    }
    Results {
        header: header(),
        rows,
    }
}

#[test]
fn html_scales_to_many_rows() {
    let r = many();
    let page = html(&r);
    assert_eq!(page.matches("<svg").count(), 4);
    assert_eq!(table_lines(&markdown_table(&r)).len(), 160 + 2);
    assert!(!page.contains("NaN"));
    assert!(page.contains("fill=\"#4e79a7\""));
}

#[test]
fn write_html_is_atomic_and_reports_io_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    write_html(&sample(), &path).unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(written, html(&sample()));
    // Only the report itself is left behind, no temporary file.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    let missing = dir.path().join("no").join("such").join("report.html");
    match write_html(&sample(), &missing) {
        Err(Error::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("expected Error::Io, got {other:?}"),
    }
}

/// Renders sample pages for a visual check: `LIDX_REPORT_SAMPLE=path` and
/// `LIDX_REPORT_SAMPLE_MANY=path`.
#[test]
fn render_sample_when_asked() {
    if let Ok(path) = std::env::var("LIDX_REPORT_SAMPLE") {
        write_html(&sample(), std::path::Path::new(&path)).unwrap();
    }
    if let Ok(path) = std::env::var("LIDX_REPORT_SAMPLE_MANY") {
        write_html(&many(), std::path::Path::new(&path)).unwrap();
    }
}

#[test]
fn every_figure_has_a_ratio_and_long_durability_is_footnoted() {
    let mut base = row("lmdb", "lookup", 1, 2.0, 0);
    base.durability = "commit per op, no fsync (MDB_NOSYNC); fsync on sync()".to_string();
    base.disk_bytes = 10 * 1024 * 1024;
    let mut other = row("redb", "lookup", 1, 1.0, 0);
    other.p50_ns = 360;
    other.memory_bytes = 10 * 1024 * 1024;
    other.disk_bytes = 30 * 1024 * 1024;
    other.durability = "commit per op, Durability::None; fsync on sync()".to_string();
    let r = Results {
        header: header(),
        rows: vec![base, other],
    };
    let md = markdown_table(&r);
    let redb = md.lines().find(|l| l.starts_with("| redb")).unwrap();
    assert!(redb.contains("0.50x"), "{redb}");
    assert!(redb.contains("360 ns (2.00x)"), "{redb}");
    assert!(
        redb.contains("(2.00x)") && redb.contains("(3.00x)"),
        "{redb}"
    );
    assert!(redb.contains("| d2 |"), "{redb}");
    let lmdb = md.lines().find(|l| l.starts_with("| lmdb")).unwrap();
    assert!(
        !lmdb.contains("(1.00x)"),
        "baseline repeats its ratio: {lmdb}"
    );
    assert!(md.contains("d1: commit per op, no fsync (MDB_NOSYNC); fsync on sync()"));
    assert!(md.contains("d2: commit per op, Durability::None; fsync on sync()"));
}
