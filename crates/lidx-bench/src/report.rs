//! Human-readable views of a [`Results`] file: a Markdown table, an aligned
//! terminal table and one self-contained HTML page with hand-written SVG
//! charts.
//!
//! All three views list one line per [`Row`]. Rows are regrouped by
//! (dataset, workload, threads), in order of first appearance, so that the
//! engines being compared sit next to each other; within a group the input
//! order is kept, and the first row of each group is the baseline that the
//! throughput ratios refer to.
//!
//! Rows whose engine returned wrong answers are flagged everywhere they
//! appear, and their ratio is wrapped in a warning, so that a fast but wrong
//! engine is never silently ranked above a correct one.

use std::fmt::Write as _;
use std::path::Path;

use lidx_core::{Error, Result};

use crate::results::{Header, Results, Row};

/// Throughput ratio of every row against the baseline of its group.
///
/// A group is the set of rows sharing (dataset, workload, threads); its
/// baseline is the first row of the group in `results.rows`, i.e. the first
/// engine listed on the command line. The result is indexed like
/// `results.rows`. An entry is `None` when the baseline's throughput is zero
/// or not finite (a ratio against it would be meaningless) or when the row's
/// own throughput is not finite.
pub fn ratios(results: &Results) -> Vec<Option<f64>> {
    figure_ratios(results, |r| r.throughput_mops)
}

/// Ratio of one figure of every row against the same figure of its group's
/// baseline (see [`ratios`] for groups and baselines). `None` when the
/// baseline's figure is zero or not finite.
pub fn figure_ratios(results: &Results, figure: impl Fn(&Row) -> f64) -> Vec<Option<f64>> {
    let rows = &results.rows;
    baselines(results)
        .into_iter()
        .zip(rows)
        .map(|(base, row)| {
            let b = figure(&rows[base]);
            let t = figure(row);
            (b.is_finite() && b > 0.0 && t.is_finite()).then(|| t / b)
        })
        .collect()
}

/// Index of every row's baseline: the first row of its group.
fn baselines(results: &Results) -> Vec<usize> {
    let rows = &results.rows;
    // Quadratic in the worst case, but result files hold at most a few
    // hundred rows, and this keeps the grouping rule in one obvious place.
    (0..rows.len())
        .map(|i| {
            rows[..i]
                .iter()
                .position(|other| same_group(other, &rows[i]))
                .unwrap_or(i)
        })
        .collect()
}

/// Every figure's ratio against the baseline, for one row.
#[derive(Clone, Copy, Debug, Default)]
struct RowRatios {
    mops: Option<f64>,
    p50: Option<f64>,
    p99: Option<f64>,
    p999: Option<f64>,
    build: Option<f64>,
    memory: Option<f64>,
    disk: Option<f64>,
}

fn row_ratios(results: &Results) -> Vec<RowRatios> {
    let mops = ratios(results);
    let p50 = figure_ratios(results, |r| r.p50_ns as f64);
    let p99 = figure_ratios(results, |r| r.p99_ns as f64);
    let p999 = figure_ratios(results, |r| r.p999_ns as f64);
    let build = figure_ratios(results, |r| r.build_s);
    let memory = figure_ratios(results, |r| r.memory_bytes as f64);
    let disk = figure_ratios(results, |r| r.disk_bytes as f64);
    baselines(results)
        .into_iter()
        .enumerate()
        // The baseline's own figures need no "(1.00x)" beside them.
        .map(|(i, base)| {
            if base == i {
                RowRatios {
                    mops: mops[i],
                    ..RowRatios::default()
                }
            } else {
                RowRatios {
                    mops: mops[i],
                    p50: p50[i],
                    p99: p99[i],
                    p999: p999[i],
                    build: build[i],
                    memory: memory[i],
                    disk: disk[i],
                }
            }
        })
        .collect()
}

/// Short labels for the durability settings in a result file: `in-memory`
/// stays as it is, every other distinct setting becomes `d1`, `d2`, ...
/// (explained in the legend), so long settings do not widen the tables.
fn durability_labels(results: &Results) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = Vec::new();
    for row in &results.rows {
        let d = row.durability.trim();
        if d.is_empty() || d == "in-memory" || labels.iter().any(|(full, _)| full == d) {
            continue;
        }
        labels.push((d.to_owned(), format!("d{}", labels.len() + 1)));
    }
    labels
}

fn durability_cell(row: &Row, labels: &[(String, String)]) -> String {
    let d = row.durability.trim();
    if d.is_empty() {
        return "-".to_owned();
    }
    labels
        .iter()
        .find(|(full, _)| full == d)
        .map_or_else(|| d.to_owned(), |(_, short)| short.clone())
}

/// The comparison as a Markdown table, preceded by one line of run facts and
/// followed by a short legend.
///
/// The table has one line per row plus the column header and separator
/// lines. Rows with wrong answers show `⚠ N wrong` and a wrapped ratio.
pub fn markdown_table(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", md_escape(&header_line(&results.header)));
    out.push('\n');
    if results.rows.is_empty() {
        out.push_str("_No rows: the result file holds no measurements._\n");
        return out;
    }
    let ratios = row_ratios(results);
    let labels = durability_labels(results);
    let line = |cells: &[String]| {
        let mut s = String::from("|");
        for c in cells {
            let _ = write!(s, " {} |", md_escape(c));
        }
        s.push('\n');
        s
    };
    out.push_str(&line(&COLUMNS.map(|c| c.title.to_string())));
    out.push('|');
    for c in COLUMNS {
        out.push_str(if c.numeric { " ---: |" } else { " --- |" });
    }
    out.push('\n');
    for i in display_order(results) {
        let cells = cells(&results.rows[i], &ratios[i], &labels, WARN_MARK);
        out.push_str(&line(&cells));
    }
    out.push('\n');
    out.push_str(&legend(results));
    out
}

/// The comparison as an aligned plain-text table for a terminal, as printed
/// by `lidx bench` and `lidx demo`.
///
/// Groups are separated by a blank line. Wrong-answer rows are flagged with
/// an ASCII `!!` so that column alignment survives any terminal.
pub fn text_table(results: &Results) -> String {
    let mut out = header_line(&results.header);
    out.push('\n');
    if results.rows.is_empty() {
        out.push_str("no rows: the result file holds no measurements\n");
        return out;
    }
    let ratios = row_ratios(results);
    let labels = durability_labels(results);
    let order = display_order(results);
    let body: Vec<Vec<String>> = order
        .iter()
        .map(|&i| cells(&results.rows[i], &ratios[i], &labels, "!!").to_vec())
        .collect();
    let mut widths: Vec<usize> = COLUMNS.iter().map(|c| c.title.chars().count()).collect();
    for cells in &body {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(c.chars().count());
        }
    }
    let render = |cells: &[String], out: &mut String| {
        let mut line = String::new();
        for (k, ((c, w), col)) in cells.iter().zip(&widths).zip(COLUMNS).enumerate() {
            if k > 0 {
                line.push_str("  ");
            }
            let pad = w - c.chars().count();
            if col.numeric {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(c);
            } else {
                line.push_str(c);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    out.push('\n');
    render(&COLUMNS.map(|c| c.title.to_string()), &mut out);
    let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    out.extend(std::iter::repeat_n('-', total));
    out.push('\n');
    let mut prev: Option<usize> = None;
    for (&i, cells) in order.iter().zip(&body) {
        if let Some(p) = prev
            && !same_group(&results.rows[p], &results.rows[i])
        {
            out.push('\n');
        }
        render(cells, &mut out);
        prev = Some(i);
    }
    out.push('\n');
    out.push_str(&legend(results));
    out
}

/// One self-contained HTML page: run facts, a throughput and a latency chart
/// for every (dataset, threads) pair, and the full table.
///
/// The page uses inline CSS and inline SVG only: no scripts, fonts, images
/// or other external resources. Every string taken from the result file is
/// escaped.
pub fn html(results: &Results) -> String {
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>lidx benchmark report</title>\n<style>\n",
    );
    out.push_str(CSS);
    out.push_str("</style>\n</head>\n<body>\n<h1>lidx benchmark report</h1>\n");
    let h = &results.header;
    let _ = writeln!(
        out,
        "<p class=\"sub\">Every figure is the median of {} repeat{}.</p>",
        h.repeats,
        if h.repeats == 1 { "" } else { "s" }
    );
    facts_html(h, &mut out);

    if results.rows.is_empty() {
        out.push_str(
            "<p class=\"empty\">There are no rows in this result file: \
             nothing was measured.</p>\n</body>\n</html>\n",
        );
        return out;
    }

    let ratios = ratios(results);
    let wrong: Vec<&Row> = results
        .rows
        .iter()
        .filter(|r| r.wrong_answers > 0)
        .collect();
    if !wrong.is_empty() {
        out.push_str(
            "<div class=\"alert\"><strong>⚠ Wrong answers.</strong> \
             These engines returned results that differ from the expected \
             ones, so their throughput and latency are not comparable and \
             must not be ranked. They are drawn faded with a dashed red outline \
             in the charts and highlighted in red in the table.<ul>\n",
        );
        for r in &wrong {
            let _ = writeln!(
                out,
                "<li>{} on {} / {} / {} thread{}: {} wrong answer{}</li>",
                esc(&r.engine),
                esc(&r.dataset),
                esc(&r.workload),
                r.threads,
                plural(r.threads as u64),
                r.wrong_answers,
                plural(r.wrong_answers)
            );
        }
        out.push_str("</ul></div>\n");
    }

    let palette = EnginePalette::new(results);
    let sections = sections(results);
    if sections.len() > 1 {
        out.push_str("<nav><strong>Charts:</strong> ");
        for (k, s) in sections.iter().enumerate() {
            if k > 0 {
                out.push_str(" · ");
            }
            let _ = write!(
                out,
                "<a href=\"#chart-{k}\">{} · {} thread{}</a>",
                esc(s.dataset),
                s.threads,
                plural(s.threads as u64)
            );
        }
        out.push_str(" · <a href=\"#table\">table</a></nav>\n");
    }
    for (k, s) in sections.iter().enumerate() {
        let _ = writeln!(
            out,
            "<section id=\"chart-{k}\">\n<h2>{} · {} thread{}</h2>\n<p class=\"sub\">{} keys</p>",
            esc(s.dataset),
            s.threads,
            plural(s.threads as u64),
            esc(&s.keys_label(results))
        );
        out.push_str("<h3>Throughput</h3>\n");
        throughput_svg(results, s, &ratios, &palette, &mut out);
        out.push_str("<h3>Latency</h3>\n");
        latency_svg(results, s, &palette, &mut out);
        out.push_str("</section>\n");
    }

    out.push_str("<h2 id=\"table\">All results</h2>\n<div class=\"scroll\"><table class=\"results\">\n<thead><tr>");
    for c in COLUMNS {
        let class = if c.numeric { " class=\"num\"" } else { "" };
        let _ = write!(out, "<th{class}>{}</th>", esc(c.title));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let all_ratios = row_ratios(results);
    let labels = durability_labels(results);
    let mut prev: Option<usize> = None;
    for i in display_order(results) {
        let row = &results.rows[i];
        let mut classes = Vec::new();
        if row.wrong_answers > 0 {
            classes.push("wrong");
        }
        if prev.is_some_and(|p| !same_group(&results.rows[p], row)) {
            classes.push("first");
        }
        prev = Some(i);
        if classes.is_empty() {
            out.push_str("<tr>");
        } else {
            let _ = write!(out, "<tr class=\"{}\">", classes.join(" "));
        }
        for (c, col) in cells(row, &all_ratios[i], &labels, WARN_MARK)
            .iter()
            .zip(COLUMNS)
        {
            let class = if col.numeric { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", html_cell(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n<p class=\"notes\">");
    out.push_str(&esc(&legend(results)).replace('\n', "<br>\n"));
    out.push_str("</p>\n");
    let _ = writeln!(
        out,
        "<footer>Generated by lidx {} from <code>{}</code></footer>\n</body>\n</html>",
        esc(or_unknown(&h.lidx_version)),
        esc(or_unknown(&h.command))
    );
    out
}

/// Writes [`html`] to `path` atomically: the page goes to a temporary file
/// in the same directory, which is then renamed over `path`, so a reader
/// never sees half a report.
///
/// I/O failures are reported as [`Error::Io`] naming `path`.
pub fn write_html(results: &Results, path: &Path) -> Result<()> {
    let page = html(results);
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{}: not a file path", path.display())))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, page).map_err(|e| Error::io(path, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        // Best effort: the rename error is the one worth reporting.
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

// ---------------------------------------------------------------------------
// Table cells, shared by the three views.

/// Flag put in front of the wrong-answer count in Markdown and HTML.
const WARN_MARK: &str = "⚠";

struct Column {
    title: &'static str,
    numeric: bool,
}

const fn col(title: &'static str, numeric: bool) -> Column {
    Column { title, numeric }
}

const COLUMNS: [Column; 15] = [
    col("engine", false),
    col("dataset", false),
    col("keys", true),
    col("workload", false),
    col("threads", true),
    col("Mops/s", true),
    col("vs base", true),
    col("p50", true),
    col("p99", true),
    col("p99.9", true),
    col("build s", true),
    col("mem MiB", true),
    col("disk MiB", true),
    col("durability", false),
    col("wrong", true),
];

/// The formatted, unescaped cells of one row, in [`COLUMNS`] order.
fn cells(row: &Row, ratios: &RowRatios, labels: &[(String, String)], mark: &str) -> [String; 15] {
    let wrong = row.wrong_answers > 0;
    let with = |value: String, ratio: Option<f64>| match ratio {
        Some(r) if r.is_finite() && value != "-" => format!("{value} ({r:.2}x)"),
        _ => value,
    };
    [
        row.engine.clone(),
        row.dataset.clone(),
        fmt_count(row.keys),
        row.workload.clone(),
        row.threads.to_string(),
        fmt_mops(row.throughput_mops),
        ratio_cell(ratios.mops, wrong),
        with(fmt_ns(row.p50_ns), ratios.p50),
        with(fmt_ns(row.p99_ns), ratios.p99),
        with(fmt_ns(row.p999_ns), ratios.p999),
        with(fmt_sig(row.build_s), ratios.build),
        with(fmt_mib(row.memory_bytes), ratios.memory),
        with(fmt_mib(row.disk_bytes), ratios.disk),
        durability_cell(row, labels),
        if wrong {
            format!("{mark} {} wrong", row.wrong_answers)
        } else {
            "0".to_string()
        },
    ]
}

fn ratio_cell(ratio: Option<f64>, wrong: bool) -> String {
    let r = match ratio {
        Some(r) if r.is_finite() => format!("{r:.2}x"),
        _ => "-".to_string(),
    };
    if wrong {
        format!("({r}, wrong answers)")
    } else {
        r
    }
}

fn header_line(h: &Header) -> String {
    format!(
        "lidx bench — CPU: {}, {} core{}, {}, commit {}; medians of {} repeat{}, {}",
        or_unknown(&h.cpu_model),
        h.cores,
        plural(h.cores as u64),
        or_unknown(&h.rustc),
        or_unknown(&h.git_commit),
        h.repeats,
        plural(h.repeats as u64),
        warmup_phrase(h.warmup)
    )
}

/// How each engine was warmed up before its streams.
fn warmup_phrase(warmup: usize) -> String {
    match warmup {
        0 => "no warm-up".to_owned(),
        n => format!("{n} warm-up get{} per engine", plural(n as u64)),
    }
}

fn legend(results: &Results) -> String {
    let mut s = String::from(
        "vs base and (N.NNx): the figure relative to the first engine listed for the \
         same dataset, workload and threads. Throughput is timed over the first half \
         of each thread's operations, untimed one by one; latencies are sampled (one \
         operation in 8) in the second half; mem is heap held after the run, disk is bytes on disk (- for in-memory).\n",
    );
    for (full, short) in durability_labels(results) {
        let _ = writeln!(s, "{short}: {full}");
    }
    let wrong = results.rows.iter().filter(|r| r.wrong_answers > 0).count();
    if wrong > 0 {
        let _ = writeln!(
            s,
            "WARNING: {wrong} row{} returned wrong answers; their figures are not \
             comparable and must not be ranked.",
            plural(wrong as u64)
        );
    }
    s
}

fn or_unknown(s: &str) -> &str {
    if s.trim().is_empty() { "unknown" } else { s }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Three significant digits, at most two decimals (`1.23`, `12.3`, `123`).
fn fmt_sig(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let a = v.abs();
    if a < 10.0 {
        format!("{v:.2}")
    } else if a < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn fmt_mops(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.is_finite() && v.abs() < 1.0 {
        // Slow peers (disk engines under sync writes) live below 1 Mops/s.
        format!("{v:.3}")
    } else {
        fmt_sig(v)
    }
}

/// Latency in the largest unit that keeps the number at least 1; `-` for 0,
/// which only happens when nothing was sampled.
pub(crate) fn fmt_ns(ns: u64) -> String {
    if ns == 0 {
        return "-".to_string();
    }
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if v < 1e6 {
        format!("{} µs", fmt_sig(v / 1e3))
    } else if v < 1e9 {
        format!("{} ms", fmt_sig(v / 1e6))
    } else {
        format!("{} s", fmt_sig(v / 1e9))
    }
}

fn fmt_mib(bytes: u64) -> String {
    if bytes == 0 {
        return "-".to_string();
    }
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib < 1.0 {
        format!("{mib:.2}")
    } else if mib < 1000.0 {
        format!("{mib:.1}")
    } else {
        format!("{mib:.0}")
    }
}

/// Key counts as `950`, `12.3K`, `200M`, `1.5G`.
fn fmt_count(n: u64) -> String {
    if n < 10_000 {
        return n.to_string();
    }
    let (v, unit) = if n < 1_000_000 {
        (n as f64 / 1e3, "K")
    } else if n < 1_000_000_000 {
        (n as f64 / 1e6, "M")
    } else {
        (n as f64 / 1e9, "G")
    };
    let s = fmt_sig(v);
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    format!("{s}{unit}")
}

// ---------------------------------------------------------------------------
// Grouping.

fn same_group(a: &Row, b: &Row) -> bool {
    a.dataset == b.dataset && a.workload == b.workload && a.threads == b.threads
}

/// Row indices regrouped by (dataset, workload, threads) in order of first
/// appearance, input order kept within a group.
fn display_order(results: &Results) -> Vec<usize> {
    let rows = &results.rows;
    let mut done = vec![false; rows.len()];
    let mut order = Vec::with_capacity(rows.len());
    for i in 0..rows.len() {
        if done[i] {
            continue;
        }
        for j in i..rows.len() {
            if !done[j] && same_group(&rows[i], &rows[j]) {
                done[j] = true;
                order.push(j);
            }
        }
    }
    order
}

/// One chart position: an engine in a workload, with the rows measuring it
/// (none when that combination is missing from the file).
struct Slot<'a> {
    engine: &'a str,
    row: Option<usize>,
}

struct WorkloadGroup<'a> {
    workload: &'a str,
    slots: Vec<Slot<'a>>,
}

/// Everything drawn for one (dataset, threads) pair.
struct Section<'a> {
    dataset: &'a str,
    threads: usize,
    rows: Vec<usize>,
    groups: Vec<WorkloadGroup<'a>>,
}

impl Section<'_> {
    fn keys_label(&self, results: &Results) -> String {
        let mut keys: Vec<u64> = self.rows.iter().map(|&i| results.rows[i].keys).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.iter()
            .map(|&k| fmt_count(k))
            .collect::<Vec<_>>()
            .join(" / ")
    }

    fn slot_count(&self) -> usize {
        self.groups.iter().map(|g| g.slots.len()).sum()
    }
}

fn first_seen<'a>(list: &mut Vec<&'a str>, s: &'a str) {
    if !list.contains(&s) {
        list.push(s);
    }
}

fn sections(results: &Results) -> Vec<Section<'_>> {
    let rows = &results.rows;
    let mut keys: Vec<(&str, usize)> = Vec::new();
    for r in rows {
        let k = (r.dataset.as_str(), r.threads);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(dataset, threads)| {
            let members: Vec<usize> = (0..rows.len())
                .filter(|&i| rows[i].dataset == dataset && rows[i].threads == threads)
                .collect();
            let mut engines = Vec::new();
            let mut workloads = Vec::new();
            for &i in &members {
                first_seen(&mut engines, &rows[i].engine);
                first_seen(&mut workloads, &rows[i].workload);
            }
            let groups = workloads
                .iter()
                .map(|&workload| {
                    let mut slots = Vec::new();
                    for &engine in &engines {
                        let matching: Vec<usize> = members
                            .iter()
                            .copied()
                            .filter(|&i| rows[i].engine == engine && rows[i].workload == workload)
                            .collect();
                        if matching.is_empty() {
                            slots.push(Slot { engine, row: None });
                        }
                        // An engine listed twice gets one bar per run.
                        slots.extend(matching.into_iter().map(|i| Slot {
                            engine,
                            row: Some(i),
                        }));
                    }
                    WorkloadGroup { workload, slots }
                })
                .collect();
            Section {
                dataset,
                threads,
                rows: members,
                groups,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// HTML and SVG.

const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;\
margin:2em auto;max-width:1240px;padding:0 1em;color:#222;line-height:1.4}
h1{margin-bottom:.2em}
h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin:1em 0 .3em;font-size:1.05em;color:#444}
.sub{color:#666;margin-top:0}
table.facts{border-collapse:collapse;font-size:.92em}
table.facts th{text-align:left;padding:.15em 1.2em .15em 0;color:#555;font-weight:600;vertical-align:top}
table.facts td{padding:.15em 0;word-break:break-word}
.alert{border:2px solid #c62828;background:#fdecea;color:#7f1d1d;padding:.7em 1em;border-radius:6px;margin:1.2em 0}
.alert ul{margin:.4em 0 0}
.empty{font-size:1.2em;padding:1em;border:1px dashed #aaa;border-radius:6px;color:#555}
nav{margin:1em 0;font-size:.92em}
nav a{color:#1f5fa8}
svg{display:block;max-width:100%;height:auto;margin:.3em 0 1em}
svg text{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;font-size:12px;fill:#222}
svg .wl{font-weight:600;font-size:13px}
svg .tick{fill:#555;font-size:11px}
svg .axis-title{fill:#444;font-size:12px;font-style:italic}
svg .grid{stroke:#e4e4e4;stroke-width:1}
svg .grid.minor{stroke:#f2f2f2}
svg .axis{stroke:#888;stroke-width:1}
svg .sep{stroke:#ccc;stroke-width:1}
svg .nodata{fill:#999;font-style:italic}
svg .bad{fill:#c62828;font-weight:600}
.scroll{overflow-x:auto}
table.results{border-collapse:collapse;font-size:.8em;white-space:nowrap}
table.results th,table.results td{padding:.22em .5em;vertical-align:top;border-bottom:1px solid #eee;text-align:left}
table.results th{background:#f4f4f4;position:sticky;top:0;white-space:normal;vertical-align:bottom}
table.results .num{text-align:right;font-variant-numeric:tabular-nums}
table.results td:not(.num){white-space:normal;overflow-wrap:anywhere;max-width:12em}
table.results tr.first td{border-top:2px solid #bbb}
table.results tr.wrong td{background:#fdecea;color:#b71c1c;font-weight:600}
table.results tr.wrong td.num{white-space:normal;min-width:4.5em}
table.results .x{display:block;color:#777;font-size:.85em}
.notes{color:#555;font-size:.9em}
footer{margin-top:2em;color:#777;font-size:.85em;border-top:1px solid #eee;padding-top:.5em}
";

fn facts_html(h: &Header, out: &mut String) {
    let started = if h.started_unix == 0 {
        "unknown".to_string()
    } else {
        utc_string(h.started_unix)
    };
    let facts = [
        ("CPU", or_unknown(&h.cpu_model).to_string()),
        ("Cores", h.cores.to_string()),
        ("Compiler", or_unknown(&h.rustc).to_string()),
        ("Commit", or_unknown(&h.git_commit).to_string()),
        ("lidx", or_unknown(&h.lidx_version).to_string()),
        ("Started", started),
        ("Repeats", h.repeats.to_string()),
        ("Warm-up", warmup_phrase(h.warmup)),
        ("Command", or_unknown(&h.command).to_string()),
    ];
    out.push_str("<table class=\"facts\">\n");
    for (k, v) in facts {
        let _ = writeln!(out, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    out.push_str("</table>\n");
}

/// `YYYY-MM-DD HH:MM UTC` from Unix seconds (proleptic Gregorian calendar).
fn utc_string(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Civil-from-days: shift the epoch to 0000-03-01 so leap days fall at the
    // end of each 400-year era.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        secs / 3_600,
        (secs % 3_600) / 60
    )
}

/// A table cell for HTML: a trailing ` (N.NNx)` ratio goes on its own small
/// line so that the many-column table still fits a laptop screen.
fn html_cell(c: &str) -> String {
    match c.rsplit_once(" (") {
        Some((value, ratio)) if ratio.ends_with("x)") => {
            // `ratio` still carries its closing parenthesis.
            format!("{}<span class=\"x\">({}</span>", esc(value), esc(ratio))
        }
        _ => esc(c),
    }
}

/// Escapes text for HTML element content, attribute values and SVG text.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Escapes text for a Markdown table cell: pipes would split the cell,
/// angle brackets would become raw HTML, and a few characters would start
/// emphasis, code or links.
fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '|' | '*' | '`' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// Shortens a label for the fixed-width chart margin; the full text stays in
/// the table and in the SVG `<title>` tooltip.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Stable colour per engine across every chart of the page.
struct EnginePalette<'a> {
    engines: Vec<&'a str>,
}

const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#86bcb6", "#8cd17d",
];

impl<'a> EnginePalette<'a> {
    fn new(results: &'a Results) -> Self {
        let mut engines = Vec::new();
        for r in &results.rows {
            first_seen(&mut engines, &r.engine);
        }
        EnginePalette { engines }
    }

    fn color(&self, engine: &str) -> String {
        let i = self.engines.iter().position(|&e| e == engine).unwrap_or(0);
        match PALETTE.get(i) {
            Some(c) => (*c).to_string(),
            // Past the fixed palette, walk the hue circle by the golden angle
            // so neighbours stay distinguishable.
            None => format!("hsl({:.0},55%,55%)", (i as f64 * 137.508) % 360.0),
        }
    }
}

// Chart geometry, in SVG user units (one unit = one CSS pixel at full width).
const CHART_W: f64 = 960.0;
const LABEL_W: f64 = 230.0;
const TOP: f64 = 34.0;
const HEAD_H: f64 = 22.0;
const ROW_H: f64 = 18.0;
const BAR_H: f64 = 13.0;
const GROUP_GAP: f64 = 8.0;
const BOTTOM: f64 = 36.0;
const NAME_CHARS: usize = 32;

/// Vertical layout shared by both charts of a section: where each workload
/// header and each slot row goes.
fn chart_height(s: &Section) -> f64 {
    TOP + s.groups.len() as f64 * (HEAD_H + GROUP_GAP) + s.slot_count() as f64 * ROW_H + BOTTOM
}

/// Walks the section's layout, drawing every workload header and engine
/// label into `out` and calling `slot` for the rest of each row (with the
/// row's top y). Returns the y just below the last group.
fn walk_layout<'s, 'a>(
    s: &'s Section<'a>,
    out: &mut String,
    mut slot: impl FnMut(&mut String, &'s Slot<'a>, f64),
) -> f64 {
    let mut y = TOP;
    for (k, g) in s.groups.iter().enumerate() {
        workload_header(out, g.workload, y, k == 0);
        y += HEAD_H;
        for sl in &g.slots {
            engine_label(out, sl.engine, y);
            slot(out, sl, y);
            y += ROW_H;
        }
        y += GROUP_GAP;
    }
    y
}

fn svg_open(out: &mut String, height: f64, label: &str) {
    let _ = writeln!(
        out,
        "<svg viewBox=\"0 0 {CHART_W} {height:.0}\" width=\"{CHART_W}\" height=\"{height:.0}\" \
         role=\"img\" aria-label=\"{}\">",
        esc(label)
    );
}

fn engine_label(out: &mut String, engine: &str, y: f64) {
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\"><title>{}</title>{}</text>",
        LABEL_W - 8.0,
        y + BAR_H - 2.0,
        esc(engine),
        esc(&clip(engine, NAME_CHARS))
    );
}

fn workload_header(out: &mut String, workload: &str, y: f64, first: bool) {
    if !first {
        let _ = writeln!(
            out,
            "<line class=\"sep\" x1=\"0\" x2=\"{CHART_W}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
            y - GROUP_GAP / 2.0,
            y - GROUP_GAP / 2.0
        );
    }
    let _ = writeln!(
        out,
        "<text class=\"wl\" x=\"4\" y=\"{:.1}\"><title>{}</title>{}</text>",
        y + 15.0,
        esc(workload),
        esc(&clip(workload, 80))
    );
}

/// Upper end and tick step of a linear axis covering `0..=max`, with steps
/// of 1, 2 or 5 times a power of ten and about five ticks.
fn nice_axis(max: f64) -> (f64, f64) {
    if !(max.is_finite() && max > 0.0) {
        return (1.0, 0.2);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * mag);
    let top = (max / step).ceil() * step;
    (top.max(step), step)
}

fn tick_label(v: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{v:.0}")
    } else {
        let decimals = (-step.log10().floor()) as usize;
        format!("{v:.decimals$}")
    }
}

fn throughput_svg(
    results: &Results,
    s: &Section,
    ratios: &[Option<f64>],
    palette: &EnginePalette,
    out: &mut String,
) {
    const VALUE_W: f64 = 190.0;
    let plot_w = CHART_W - LABEL_W - VALUE_W;
    let rows = &results.rows;
    let max = s
        .rows
        .iter()
        .map(|&i| rows[i].throughput_mops)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let (top, step) = nice_axis(max);
    let x_of = |v: f64| LABEL_W + (v.clamp(0.0, top) / top) * plot_w;
    let height = chart_height(s);
    svg_open(
        out,
        height,
        &format!(
            "Throughput per engine and workload on {}, {} threads",
            s.dataset, s.threads
        ),
    );
    let _ = writeln!(
        out,
        "<text class=\"axis-title\" x=\"{LABEL_W}\" y=\"14\">throughput, million operations per second (higher is better){}</text>",
        if max > 0.0 {
            ""
        } else {
            " — every throughput here is zero"
        }
    );

    let mut body = String::new();
    let plot_bottom = walk_layout(s, &mut body, |body, sl, y| {
        let Some(i) = sl.row else {
            let _ = writeln!(
                body,
                "<text class=\"nodata\" x=\"{:.1}\" y=\"{:.1}\">no data</text>",
                LABEL_W + 4.0,
                y + BAR_H - 2.0
            );
            return;
        };
        let row = &rows[i];
        let v = if row.throughput_mops.is_finite() {
            row.throughput_mops
        } else {
            0.0
        };
        let wrong = row.wrong_answers > 0;
        let w = x_of(v) - LABEL_W;
        let color = palette.color(sl.engine);
        let style = if wrong {
            format!(
                "fill=\"{color}\" fill-opacity=\"0.35\" stroke=\"#c62828\" stroke-width=\"2\" stroke-dasharray=\"4 2\""
            )
        } else {
            format!("fill=\"{color}\"")
        };
        let tip = format!(
            "{} · {}: {} Mops/s",
            row.engine,
            row.workload,
            fmt_mops(row.throughput_mops)
        );
        let _ = writeln!(
            body,
            "<rect x=\"{LABEL_W}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{BAR_H}\" {style}><title>{}</title></rect>",
            y + 1.0,
            w.max(if v > 0.0 { 1.0 } else { 0.0 }),
            esc(&tip)
        );
        let ratio = match ratios[i] {
            Some(_) if is_baseline(rows, i) => " (base)".to_string(),
            Some(r) => format!(" ({r:.2}x)"),
            None => String::new(),
        };
        let (class, label) = if wrong {
            (
                " class=\"bad\"",
                format!(
                    "⚠ {}{ratio} · {} wrong",
                    fmt_mops(row.throughput_mops),
                    row.wrong_answers
                ),
            )
        } else {
            ("", format!("{}{ratio}", fmt_mops(row.throughput_mops)))
        };
        let _ = writeln!(
            body,
            "<text{class} x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LABEL_W + w + 5.0,
            y + BAR_H - 2.0,
            esc(&label)
        );
    });

    // Grid first so the bars are drawn over it.
    // A tall chart repeats the tick labels on top, where the reader starts.
    let tall = s.slot_count() > 12;
    let ticks = (top / step).round() as usize;
    for k in 0..=ticks {
        // Multiplying instead of accumulating keeps labels like 0.3 exact.
        let t = k as f64 * step;
        let x = x_of(t);
        let label = tick_label(t, step);
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{plot_bottom:.1}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            TOP - 4.0,
            plot_bottom + 16.0,
        );
        if tall {
            let _ = writeln!(
                out,
                "<text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
                TOP - 8.0
            );
        }
    }
    let _ = writeln!(
        out,
        "<line class=\"axis\" x1=\"{LABEL_W}\" x2=\"{LABEL_W}\" y1=\"{:.1}\" y2=\"{plot_bottom:.1}\"/>",
        TOP - 4.0
    );
    out.push_str(&body);
    let _ = writeln!(
        out,
        "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">Mops/s</text>\n</svg>",
        LABEL_W + plot_w / 2.0,
        plot_bottom + 31.0
    );
}

/// Tick label for 10^`exp` nanoseconds: `100 ns`, `1 µs`, `10 ms`, `1 s`.
fn decade_label(exp: i32) -> String {
    let (unit, shift) = match exp {
        i32::MIN..=2 => ("ns", 0),
        3..=5 => ("µs", 3),
        6..=8 => ("ms", 6),
        _ => ("s", 9),
    };
    format!(
        "{} {unit}",
        10u64.pow(exp.max(0).saturating_sub(shift) as u32)
    )
}

/// Whether row `i` is the first of its (dataset, workload, threads) group.
fn is_baseline(rows: &[Row], i: usize) -> bool {
    !rows[..i].iter().any(|r| same_group(r, &rows[i]))
}

fn latency_svg(results: &Results, s: &Section, palette: &EnginePalette, out: &mut String) {
    const VALUE_W: f64 = 200.0;
    let plot_w = CHART_W - LABEL_W - VALUE_W;
    let rows = &results.rows;
    let lats = |r: &Row| [r.p50_ns, r.p99_ns, r.p999_ns];
    let positive: Vec<f64> = s
        .rows
        .iter()
        .flat_map(|&i| lats(&rows[i]))
        .filter(|&v| v > 0)
        .map(|v| v as f64)
        .collect();
    let height = chart_height(s);
    svg_open(
        out,
        height,
        &format!(
            "Latency per engine and workload on {}, {} threads",
            s.dataset, s.threads
        ),
    );
    // Decade bounds of the log axis; a single value still gets one decade.
    let lo = positive
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .log10()
        .floor();
    let hi = positive
        .iter()
        .copied()
        .fold(0.0f64, f64::max)
        .log10()
        .ceil();
    let (lo, hi) = if positive.is_empty() {
        (0.0, 3.0)
    } else if hi <= lo {
        (lo, lo + 1.0)
    } else {
        (lo, hi)
    };
    let x_of = |ns: f64| LABEL_W + ((ns.log10() - lo) / (hi - lo)).clamp(0.0, 1.0) * plot_w;

    // Legend: marker shapes, drawn once at the top.
    let lx = LABEL_W;
    let _ = writeln!(
        out,
        "<text class=\"axis-title\" x=\"4\" y=\"14\">latency, log scale (lower is better)</text>\
         <circle cx=\"{:.1}\" cy=\"10\" r=\"4\" fill=\"#fff\" stroke=\"#222\" stroke-width=\"1.5\"/>\
         <text x=\"{:.1}\" y=\"14\">p50</text>\
         <rect x=\"{:.1}\" y=\"6\" width=\"26\" height=\"8\" fill=\"#888\"/>\
         <text x=\"{:.1}\" y=\"14\">p50 – p99</text>\
         <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"4\" y2=\"16\" stroke=\"#222\" stroke-width=\"2\"/>\
         <text x=\"{:.1}\" y=\"14\">p99.9</text>\
         <text class=\"tick\" x=\"{:.1}\" y=\"14\">labels: p50 / p99 / p99.9</text>",
        lx + 60.0,
        lx + 68.0,
        lx + 110.0,
        lx + 140.0,
        lx + 215.0,
        lx + 215.0,
        lx + 222.0,
        CHART_W - VALUE_W + 8.0,
    );
    if positive.is_empty() {
        let _ = writeln!(
            out,
            "<text class=\"nodata\" x=\"{:.1}\" y=\"{:.1}\">no latency samples in this section</text>",
            LABEL_W + 4.0,
            TOP + 15.0
        );
    }

    let mut body = String::new();
    let plot_bottom = walk_layout(s, &mut body, |body, sl, y| {
        let nodata = |body: &mut String| {
            let _ = writeln!(
                body,
                "<text class=\"nodata\" x=\"{:.1}\" y=\"{:.1}\">no data</text>",
                LABEL_W + 4.0,
                y + BAR_H - 2.0
            );
        };
        let Some(i) = sl.row else {
            nodata(body);
            return;
        };
        let row = &rows[i];
        let vals: Vec<f64> = lats(row)
            .into_iter()
            .filter(|&v| v > 0)
            .map(|v| v as f64)
            .collect();
        if vals.is_empty() {
            nodata(body);
            return;
        }
        let color = palette.color(sl.engine);
        let mid = y + 1.0 + BAR_H / 2.0;
        let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let max = vals.iter().copied().fold(0.0f64, f64::max);
        let tip = format!(
            "{} · {}: p50 {}, p99 {}, p99.9 {}",
            row.engine,
            row.workload,
            fmt_ns(row.p50_ns),
            fmt_ns(row.p99_ns),
            fmt_ns(row.p999_ns)
        );
        let _ = write!(body, "<g><title>{}</title>", esc(&tip));
        let _ = write!(
            body,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{mid:.1}\" y2=\"{mid:.1}\" stroke=\"{color}\" stroke-width=\"1.5\"/>",
            x_of(min),
            x_of(max)
        );
        if row.p50_ns > 0 && row.p99_ns > 0 {
            let (a, b) = (x_of(row.p50_ns as f64), x_of(row.p99_ns as f64));
            let _ = write!(
                body,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"8\" fill=\"{color}\"/>",
                a.min(b),
                mid - 4.0,
                (b - a).abs().max(1.0)
            );
        }
        if row.p999_ns > 0 {
            let x = x_of(row.p999_ns as f64);
            let _ = write!(
                body,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#222\" stroke-width=\"2\"/>",
                mid - 6.0,
                mid + 6.0
            );
        }
        if row.p50_ns > 0 {
            let _ = write!(
                body,
                "<circle cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"4\" fill=\"#fff\" stroke=\"#222\" stroke-width=\"1.5\"/>",
                x_of(row.p50_ns as f64)
            );
        }
        body.push_str("</g>\n");
        let wrong = row.wrong_answers > 0;
        let label = format!(
            "{}{} / {} / {}",
            if wrong { "⚠ " } else { "" },
            fmt_ns(row.p50_ns),
            fmt_ns(row.p99_ns),
            fmt_ns(row.p999_ns)
        );
        let _ = writeln!(
            body,
            "<text{} x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            if wrong { " class=\"bad\"" } else { "" },
            CHART_W - VALUE_W + 8.0,
            y + BAR_H - 2.0,
            esc(&label)
        );
    });

    if !positive.is_empty() {
        let decades = (hi - lo) as i32;
        for d in 0..=decades {
            let base = 10f64.powi(lo as i32 + d);
            let x = x_of(base);
            let _ = writeln!(
                out,
                "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{plot_bottom:.1}\"/>\
                 <text class=\"tick\" x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                TOP - 4.0,
                plot_bottom + 16.0,
                esc(&decade_label(lo as i32 + d))
            );
            if d < decades {
                for m in [2.0, 5.0] {
                    let x = x_of(base * m);
                    let _ = writeln!(
                        out,
                        "<line class=\"grid minor\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{plot_bottom:.1}\"/>",
                        TOP - 4.0
                    );
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "<line class=\"axis\" x1=\"{LABEL_W}\" x2=\"{LABEL_W}\" y1=\"{:.1}\" y2=\"{plot_bottom:.1}\"/>",
        TOP - 4.0
    );
    out.push_str(&body);
    out.push_str("</svg>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(fmt_ns(0), "-");
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(1_234), "1.23 µs");
        assert_eq!(fmt_ns(45_600), "45.6 µs");
        assert_eq!(fmt_ns(7_000_000), "7.00 ms");
        assert_eq!(fmt_ns(2_500_000_000), "2.50 s");
        assert_eq!(fmt_count(950), "950");
        assert_eq!(fmt_count(200_000_000), "200M");
        assert_eq!(fmt_count(1_000_000), "1M");
        assert_eq!(fmt_count(12_345), "12.3K");
        assert_eq!(fmt_mib(0), "-");
        assert_eq!(fmt_mib(3 * 1024 * 1024 / 2), "1.5");
    }

    #[test]
    fn decade_labels() {
        let labels: Vec<String> = (0..=10).map(decade_label).collect();
        assert_eq!(
            labels,
            [
                "1 ns", "10 ns", "100 ns", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms",
                "1 s", "10 s"
            ]
        );
    }

    #[test]
    fn axis_is_nice() {
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        let (top, step) = nice_axis(47.0);
        assert_eq!((top, step), (50.0, 10.0));
        let (top, step) = nice_axis(0.37);
        assert!((top - 0.4).abs() < 1e-12 && (step - 0.1).abs() < 1e-12);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_string(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_string(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc_string(1_700_000_000), "2023-11-14 22:13 UTC");
    }
}
