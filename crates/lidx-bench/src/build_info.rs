//! Facts about the machine and the build, for result-file headers.

/// CPU model from `/proc/cpuinfo`, or `"unknown"`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Logical cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `rustc --version` of the compiler that built this crate.
pub fn rustc_version() -> String {
    env!("LIDX_RUSTC_VERSION").to_owned()
}

/// Commit the binary was built from (with `-dirty` when its sources or
/// manifests had local changes), or `"unknown"` when git or the tree was
/// not available to the build.
pub fn git_commit() -> String {
    env!("LIDX_GIT_COMMIT").to_owned()
}
