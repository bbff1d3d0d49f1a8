//! Bad input to the CLI gives one clear line and a non-zero exit, never a panic.

mod common;
use common::*;
use std::path::Path;

fn bench(dataset: &str) -> Vec<String> {
    [
        "bench",
        "--engines",
        "btreemap",
        "--dataset",
        dataset,
        "--ops",
        "100",
        "--repeat",
        "1",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn write(path: &Path, bytes: &[u8]) -> String {
    std::fs::write(path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

fn sosd(count: u64, keys: &[u64]) -> Vec<u8> {
    let mut b = count.to_le_bytes().to_vec();
    for k in keys {
        b.extend_from_slice(&k.to_le_bytes());
    }
    b
}

#[test]
fn bad_dataset_files() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing").to_str().unwrap().to_owned();
    let truncated = write(&dir.path().join("trunc"), &sosd(10, &[1, 2, 3]));
    let count = write(&dir.path().join("count"), &sosd(1, &[1, 2, 3]));
    let unsorted = write(&dir.path().join("unsorted"), &sosd(4, &[1, 2, 9, 4]));
    let mut nan = 2u64.to_le_bytes().to_vec();
    nan.extend_from_slice(&1.0f64.to_le_bytes());
    nan.extend_from_slice(&f64::NAN.to_le_bytes());
    let nan = write(&dir.path().join("keys_f64"), &nan);

    let run = |ds: &str, needles: &[&str]| {
        let args = bench(ds);
        fails_with(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            needles,
        );
    };
    run(&missing, &["missing"]);
    run(&truncated, &["truncated"]);
    run(&count, &["header says 1 keys"]);
    run(&unsorted, &["not sorted", "index 3"]);
    run(&nan, &["NaN", "index 1"]);
    run("no-such-dataset", &["no-such-dataset", "geolite2"]);
}

#[test]
fn unknown_names() {
    fails_with(
        &["bench", "--engines", "nope", "--dataset", "torgeoip"],
        &["engine 'nope'", "btreemap"],
    );
    fails_with(
        &[
            "bench",
            "--engines",
            "btreemap",
            "--dataset",
            "torgeoip",
            "--workload",
            "sideways",
        ],
        &["sideways"],
    );
    fails_with(
        &["gen", "zigzag", "--keys", "10", "-o", "/tmp/x"],
        &["zigzag"],
    );
    fails_with(&["frobnicate"], &["frobnicate"]);
    fails_with(
        &[
            "bench",
            "--engines",
            "btreemap",
            "--dataset",
            "torgeoip",
            "--threads",
            "0",
        ],
        &["threads"],
    );
    fails_with(
        &["report", "/nonexistent/results.json", "--md"],
        &["/nonexistent/results.json"],
    );
}

#[test]
fn gen_writes_deterministic_sosd() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    for p in [&a, &b] {
        let out = lidx(&[
            "gen",
            "lognormal",
            "--keys",
            "1000",
            "--seed",
            "7",
            "-o",
            p.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let ka = lidx_core::keyset::open_sosd_u64(&a).unwrap();
    assert_eq!(ka.len(), 1000);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn datasets_lists_committed_sets() {
    let out = lidx(&["datasets"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "geolite2",
        "torgeoip",
        "s2cells",
        "longitudes",
        "books",
        "osm",
        "words",
        "pypi",
    ] {
        assert!(text.contains(name), "{name} missing: {text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("torgeoip") && l.contains("385602")),
        "{text}"
    );
}

#[test]
fn bench_json_and_report_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    let out = lidx(&[
        "bench",
        "--engines",
        "btreemap,skipmap",
        "--dataset",
        "s2cells",
        "--keys",
        "5000",
        "--workload",
        "lookup,mixed:0.9",
        "--threads",
        "1,2",
        "--ops",
        "2000",
        "--repeat",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = lidx_bench::results::Results::read(&json).unwrap();
    assert_eq!(results.rows.len(), 2 * 2 * 2);
    assert!(
        results
            .rows
            .iter()
            .all(|r| r.wrong_answers == 0 && r.throughput_mops > 0.0)
    );
    assert!(
        results.rows.iter().all(|r| r.memory_bytes > 0),
        "counting allocator not active"
    );
    // Both workloads sample gets; engines without background work report
    // none (the field is left out of their rows, see the field list).
    assert!(
        results
            .rows
            .iter()
            .all(|r| r.get_p50_ns > 0 && r.get_p999_ns >= r.get_p50_ns && r.maintenance.is_none())
    );
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let row = raw["rows"][0].as_object().unwrap();
    let mut fields: Vec<&str> = row.keys().map(String::as_str).collect();
    fields.sort_unstable();
    let mut want = vec![
        "engine",
        "dataset",
        "keys",
        "workload",
        "threads",
        "ops",
        "throughput_mops",
        "p50_ns",
        "p99_ns",
        "p999_ns",
        "get_p50_ns",
        "get_p99_ns",
        "get_p999_ns",
        "build_s",
        "memory_bytes",
        "disk_bytes",
        "durability",
        "wrong_answers",
    ];
    want.sort_unstable();
    assert_eq!(fields, want);
    for h in ["cpu_model", "cores", "rustc", "git_commit"] {
        assert!(raw["header"].get(h).is_some(), "header lacks {h}");
    }
    let out = lidx(&[
        "report",
        json.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
        "--md",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("skipmap"));
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
}

#[test]
fn report_versus_best_peer() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let json = json.to_str().unwrap();
    ok(&[
        "bench",
        "--engines",
        "xindex,btreemap,skipmap",
        "--dataset",
        "torgeoip",
        "--workload",
        "lookup,lookup-batch:8",
        "--ops",
        "2000",
        "--repeat",
        "1",
        "--json",
        json,
    ]);
    // `report --versus xindex` against both peers, plus `extra` options.
    let versus = |extra: &[&str]| {
        let mut args = vec![
            "report",
            json,
            "--versus",
            "xindex",
            "--best-of",
            "btreemap,skipmap",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let table = versus(&["--memory-vs", "btreemap"]);
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[0].contains("| lookup | lookup-batch:8 | mem vs btreemap |"),
        "{table}"
    );
    assert!(lines[2].starts_with("| torgeoip ("), "{table}");
    assert_eq!(lines[2].matches('x').count(), 3, "three ratios: {table}");
    // The tail column: xindex's own get p99.9 / p50 under a workload.
    let table = versus(&["--tail-of", "lookup"]);
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
    assert!(lines[0].ends_with("| get p99.9/p50 (lookup) |"), "{table}");
    let tail = lines[2].trim_end_matches(" |").rsplit("| ").next().unwrap();
    assert!(tail.contains("x (") && tail.ends_with(')'), "{table}");
    fails_with(
        &["report", json, "--versus", "nope", "--best-of", "btreemap"],
        &["'nope'"],
    );
    fails_with(&["report", json], &["--versus"]);
    fails_with(
        &["report", json, json, "-o", "/tmp/x.html"],
        &["exactly one"],
    );
}
