//! Records the compiler version and the source commit for benchmark
//! result headers, both as of the build: a binary run after the tree has
//! moved on must still say what it was built from.
use std::path::Path;
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LIDX_RUSTC_VERSION={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");

    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    let root = Path::new(&manifest).join("../..");
    println!("cargo:rustc-env=LIDX_GIT_COMMIT={}", commit(&root));
    // What the binary is built from: the sources and manifests, and the
    // git state that names them (a commit moves HEAD's branch and the
    // index). Documentation changes neither the binary nor its commit.
    for watched in [
        "crates",
        "Cargo.toml",
        "Cargo.lock",
        ".git/HEAD",
        ".git/index",
        ".git/refs",
    ] {
        let path = root.join(watched);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// `HEAD`'s commit, with `-dirty` when the sources or manifests differ
/// from it; `unknown` without git or outside a repository.
fn commit(root: &Path) -> String {
    let run = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match run(&["rev-parse", "HEAD"]) {
        Some(rev) if !rev.is_empty() => {
            let dirty = run(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "crates",
                "Cargo.toml",
                "Cargo.lock",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty { format!("{rev}-dirty") } else { rev }
        }
        _ => "unknown".to_owned(),
    }
}
