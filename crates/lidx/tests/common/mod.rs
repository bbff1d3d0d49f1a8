//! Helpers shared by the CLI integration tests.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs the `lidx` binary with `args` (real data sets hidden, so tests never
/// depend on `../shared`).
pub fn lidx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lidx"))
        .args(args)
        .env("LIDX_DATA_DIR", "/nonexistent-lidx-data")
        .output()
        .expect("spawn lidx")
}

/// Asserts success and returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = lidx(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Asserts failure with exactly one stderr line containing every `needle`.
pub fn fails_with(args: &[&str], needles: &[&str]) {
    let out = lidx(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {err}");
    assert_ne!(out.status.code(), Some(101), "{args:?} panicked: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: '{n}' missing in: {err}");
    }
}
