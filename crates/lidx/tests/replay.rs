//! `lidx replay` against an independent oracle, and its error contract.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;

fn replay(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lidx"))
        .arg("replay")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lidx");
    // Ignore EPIPE: the process may exit early on a malformed line.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Put(u64, u64),
    Get(u64),
    Del(u64),
    Scan(u64, usize),
    Sync,
}

fn key() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, Just(0), Just(u64::MAX), any::<u64>()]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Put(k, v)),
        3 => key().prop_map(Op::Get),
        2 => key().prop_map(Op::Del),
        1 => (key(), 0usize..12).prop_map(|(k, n)| Op::Scan(k, n)),
        1 => Just(Op::Sync),
    ]
}

/// Text of the trace and the output an independent model predicts.
fn script(ops: &[Op], hex: bool) -> (String, String) {
    let fmt = |k: u64| {
        if hex {
            k.to_be_bytes().iter().map(|b| format!("{b:02x}")).collect()
        } else {
            k.to_string()
        }
    };
    let mut model = BTreeMap::new();
    let (mut input, mut out) = (String::from("# generated trace\n\n"), String::new());
    for op in ops {
        match *op {
            Op::Put(k, v) => {
                input += &format!("put {} {v}\n", fmt(k));
                model.insert(k, v);
            }
            Op::Get(k) => {
                input += &format!("get {}\n", fmt(k));
                out += &model.get(&k).map_or("-".to_owned(), |v| v.to_string());
                out += "\n";
            }
            Op::Del(k) => {
                input += &format!("del {}\n", fmt(k));
                out += if model.remove(&k).is_some() {
                    "1\n"
                } else {
                    "0\n"
                };
            }
            Op::Scan(k, n) => {
                input += &format!("scan {} {n}\n", fmt(k));
                let pairs: Vec<String> = model
                    .range(k..)
                    .take(n)
                    .map(|(k, v)| format!("{}:{v}", fmt(*k)))
                    .collect();
                out += &pairs.join(" ");
                out += "\n";
            }
            Op::Sync => {
                input += "sync\n";
                out += "synced\n";
            }
        }
    }
    (input, out)
}

/// Replays `ops` on `engine` and compares with the oracle's output.
fn matches_oracle(engine: &str, ops: &[Op], hex: bool) -> Result<(), TestCaseError> {
    let (input, expected) = script(ops, hex);
    let mut args = vec!["--engine", engine];
    if hex {
        args.extend(["--key-type", "bytes"]);
    }
    let out = replay(&args, &input);
    prop_assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    prop_assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn btreemap_matches_oracle(ops in proptest::collection::vec(op(), 0..300), hex: bool) {
        matches_oracle("btreemap", &ops, hex)?;
    }

    #[test]
    fn xindex_matches_oracle(ops in proptest::collection::vec(op(), 0..300), hex: bool) {
        matches_oracle("xindex", &ops, hex)?;
    }
}

#[test]
fn bulk_load_sets_value_key_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys");
    lidx_core::keyset::write_sosd(&path, &[1u64, 5, 9, u64::MAX]).unwrap();
    let p = path.to_str().unwrap();
    for engine in ["btreemap", "sorted-array"] {
        let out = replay(
            &["--engine", engine, "--bulk", p],
            "get 5\nget 6\nget 18446744073709551615\nscan 2 2\nscan 10 5\n",
        );
        assert!(
            out.status.success(),
            "{engine}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            "6\n-\n0\n5:6 9:10\n18446744073709551615:0\n",
            "{engine}"
        );
    }
}

#[test]
fn malformed_lines_exit_2_with_line_number() {
    let cases = [
        ("bogus 1\n", 1, "unknown operation"),
        ("get\n", 1, "takes 1 argument"),
        ("put 1\n", 1, "takes 2 arguments"),
        ("put 1 2 3\n", 1, "takes 2 arguments"),
        ("get 1\n\n# c\nget x\n", 4, "not a decimal u64"),
        ("put 1 -5\n", 1, "value '-5'"),
        ("get 18446744073709551616\n", 1, "not a decimal u64"),
        ("scan 1 many\n", 1, "count 'many'"),
        ("sync now\n", 1, "takes 0 arguments"),
        ("del -1\n", 1, "not a decimal u64"),
    ];
    for (input, line, what) in cases {
        let out = replay(&["--engine", "btreemap"], input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input:?}: {err}");
        assert!(
            err.starts_with(&format!("line {line}: ")),
            "{input:?}: {err}"
        );
        assert!(err.contains(what), "{input:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{input:?}: {err}");
    }
    let hex_cases = [
        ("get 0A\n", "lowercase hex"),
        ("get abc\n", "odd number"),
        ("get zz\n", "lowercase hex"),
    ];
    for (input, what) in hex_cases {
        let out = replay(&["--engine", "btreemap", "--key-type", "bytes"], input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input:?}: {err}");
        assert!(
            err.starts_with("line 1: ") && err.contains(what),
            "{input:?}: {err}"
        );
    }
    // Output before the bad line was flushed.
    let out = replay(&["--engine", "btreemap"], "put 1 2\nget 1\nfrobnicate\n");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n");
    // Invalid UTF-8.
    let out = replay(&["--engine", "btreemap"], "get 1\n\u{0}\n");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unsupported_operations_exit_3() {
    for (input, line) in [("get 1\nput 1 2\n", 2), ("del 7\n", 1)] {
        let out = replay(&["--engine", "sorted-array"], input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(
            err.starts_with(&format!("line {line}: ")) && err.contains("read-only"),
            "{err}"
        );
    }
}

#[test]
fn bad_engine_and_bulk_file_fail_with_one_line() {
    let out = replay(&["--engine", "nope"], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nope") && err.contains("btreemap"), "{err}");
    assert_eq!(err.lines().count(), 1);

    let out = replay(&["--engine", "btreemap", "--bulk", "/nonexistent/keys"], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("/nonexistent/keys"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unsorted");
    lidx_core::keyset::write_sosd(&path, &[3u64, 1]).unwrap();
    let out = replay(
        &["--engine", "btreemap", "--bulk", path.to_str().unwrap()],
        "",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("index 1"), "{err}");
}
