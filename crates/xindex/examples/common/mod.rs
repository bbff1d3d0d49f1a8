//! What the burst examples share: the key set they run on, and medians.

use std::path::PathBuf;

/// The SOSD `u64` key set named by the first argument (default: osm from
/// `../shared/data`), sorted and without duplicates, and its path.
#[allow(dead_code)] // `string_gets` reads byte strings.
pub fn keys_from_args() -> lidx_core::Result<(PathBuf, Vec<u64>)> {
    let path = std::env::args().nth(1).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/sosdlike_osm_cellids_1M_uint64")
        },
        PathBuf::from,
    );
    let mut keys = lidx_core::keyset::open_sosd_u64(&path)?.as_slice().to_vec();
    keys.dedup();
    Ok((path, keys))
}

/// The median of `v` (the upper one of an even count).
#[allow(dead_code)] // `insert_burst` reads keys only.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `keys` in a seeded random order (Fisher-Yates over a 64-bit LCG): the
/// same order on every run.
#[allow(dead_code)] // Not every example shuffles.
pub fn shuffled(keys: &[u64]) -> Vec<u64> {
    let mut out = keys.to_vec();
    let mut state = 7u64;
    for i in (1..out.len()).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.swap(i, (state >> 33) as usize % (i + 1));
    }
    out
}
