//! `lidx air` and `lidx profile` end to end, and their one-line errors.

mod common;
use common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn sosd(path: &Path, keys: &[u64]) -> String {
    let mut b = (keys.len() as u64).to_le_bytes().to_vec();
    for k in keys {
        b.extend_from_slice(&k.to_le_bytes());
    }
    std::fs::write(path, b).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn build_get_inspect_bench_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<u64> = (0..5_000u64).map(|i| i * 7 + (i % 3)).collect();
    let data = sosd(&dir.path().join("keys"), &keys);
    let out = dir.path().join("idx");
    let out = out.to_str().unwrap();
    let printed = ok(&[
        "air",
        "build",
        "--data",
        &data,
        "--profile",
        "ssd",
        "--out",
        out,
    ]);
    assert!(printed.contains("modelled lookup"), "{printed}");
    let design: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(out).join("design.json")).unwrap())
            .unwrap();
    for field in ["layers", "modeled_cost_ns", "build_s", "tune_s"] {
        assert!(design.get(field).is_some(), "design.json lacks {field}");
    }
    // Keys are i * 7 + i % 3: 0, 8, 16, 21, ...
    let got = ok(&["air", "get", out, "0", "8", "16", "7"]);
    assert_eq!(got, "0\t0\n8\t1\n16\t2\n7\tnot found\n");
    let inspected = ok(&["air", "inspect", out, "--verify"]);
    assert!(inspected.contains("verified"), "{inspected}");
    let bench = ok(&[
        "air",
        "bench",
        out,
        "--queries",
        "50",
        "--runs",
        "3",
        "--profile",
        "1,1000",
    ]);
    assert!(bench.contains("first query"), "{bench}");
    assert!(
        bench.lines().any(|l| l.trim_start().starts_with("50 ")),
        "{bench}"
    );
    // A records build with a custom grid.
    let out2 = dir.path().join("idx2");
    let out2 = out2.to_str().unwrap();
    ok(&[
        "air",
        "build",
        "--data",
        &data,
        "--profile",
        "100,50",
        "--out",
        out2,
        "--records",
        "--top-k",
        "2",
        "--lambda-low",
        "512",
        "--lambda-high",
        "65536",
        "--base",
        "4",
    ]);
    assert_eq!(ok(&["air", "get", out2, "21"]), "21\t3\n");
}

#[test]
fn air_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = sosd(&dir.path().join("unsorted"), &[5, 3, 9]);
    let out = dir.path().join("x");
    let out = out.to_str().unwrap();
    fails_with(
        &[
            "air",
            "build",
            "--data",
            &data,
            "--profile",
            "ssd",
            "--out",
            out,
        ],
        &["index 1"],
    );
    let good = sosd(&dir.path().join("good"), &[1, 2, 3]);
    fails_with(
        &[
            "air",
            "build",
            "--data",
            &good,
            "--profile",
            "fast",
            "--out",
            out,
        ],
        &["profile"],
    );
    fails_with(
        &[
            "air",
            "build",
            "--data",
            &good,
            "--profile",
            "ssd",
            "--out",
            out,
            "--base",
            "1",
        ],
        &["base"],
    );
    fails_with(&["air", "get", out, "1"], &["not found"]);
    // A corrupt meta.
    ok(&[
        "air",
        "build",
        "--data",
        &good,
        "--profile",
        "ssd",
        "--out",
        out,
    ]);
    let meta = Path::new(out).join("meta");
    let mut bytes = std::fs::read(&meta).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&meta, bytes).unwrap();
    fails_with(&["air", "get", out, "1"], &["corrupt"]);
    fails_with(&["air", "get", "ftp://x", "1"], &["scheme"]);
}

#[test]
fn replay_air_is_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let bulk = sosd(&dir.path().join("bulk"), &[1, 5, 9, 12]);
    let run = |input: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lidx"))
            .args(["replay", "--engine", "air", "--bulk", &bulk])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run("get 5\nget 6\nscan 4 2\nscan 100 3\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "6\n-\n5:6 9:10\n\n");
    let out = run("get 1\nput 3 4\n");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n");
    let out = run("del 1\n");
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn profile_calibrates_a_local_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.json");
    let printed = ok(&[
        "profile",
        dir.path().to_str().unwrap(),
        "--size-mib",
        "16",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(printed.contains("r^2"), "{printed}");
    // The saved profile is accepted by the builder.
    let keys = sosd(&dir.path().join("k"), &[1, 2, 3]);
    let out = dir.path().join("idx");
    ok(&[
        "air",
        "build",
        "--data",
        &keys,
        "--profile",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_with(&["profile", "ftp://nowhere"], &["scheme"]);
}
