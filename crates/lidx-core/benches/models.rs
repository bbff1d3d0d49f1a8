//! Model construction throughput on the GeoLite2 IPv4 key set (3.07M keys).
//!
//! The data directory is `LIDX_DATA_DIR`, else `/work/shared/data`, else
//! `../shared/data` next to the workspace; without the file a seeded
//! lognormal set of 3M keys stands in, so the bench always runs.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lidx_core::model::{greedy_pla, linear, optimal_pla};
use rand::{Rng, SeedableRng};

const FILE: &str = "geolite2_city_ipv4_3M_uint64";

fn data_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("LIDX_DATA_DIR") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(PathBuf::from("/work/shared/data"));
    dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    dirs
}

fn read_sosd_u64(path: &std::path::Path) -> Option<Vec<u64>> {
    let bytes = std::fs::read(path).ok()?;
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
    if bytes.len() != 8 + 8 * n {
        return None;
    }
    Some(
        bytes[8..]
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    )
}

fn lognormal_keys(n: usize) -> Vec<u64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let mut keys: Vec<u64> = (0..n)
        .map(|_| {
            // Box-Muller for a standard normal, then exp(mu + sigma z).
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(f64::MIN_POSITIVE), rng.random());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            (1e9 * (2.0 * z).exp()) as u64
        })
        .collect();
    keys.sort_unstable();
    keys
}

fn load() -> (String, Vec<u64>) {
    for dir in data_dirs() {
        if let Some(keys) = read_sosd_u64(&dir.join(FILE)) {
            return (FILE.to_string(), keys);
        }
    }
    eprintln!(
        "{FILE} not found in {:?}; using 3M lognormal keys",
        data_dirs()
    );
    ("lognormal_3M".to_string(), lognormal_keys(3_000_000))
}

fn models(c: &mut Criterion) {
    let (name, keys) = load();
    for eps in [32, 64] {
        let f = optimal_pla::build(&keys, eps).unwrap();
        let g = greedy_pla::build(&keys, eps).unwrap();
        eprintln!(
            "{name}: eps={eps}: optimal {} segments (max_error {}), greedy {} segments (max_error {})",
            f.model.len(),
            f.max_error,
            g.model.len(),
            g.max_error
        );
    }
    let mut group = c.benchmark_group(format!("models/{name}"));
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.sample_size(10);
    for eps in [32usize, 64] {
        group.bench_function(format!("optimal_pla_eps{eps}"), |b| {
            b.iter(|| optimal_pla::build(black_box(&keys), eps).unwrap())
        });
    }
    group.bench_function("greedy_pla_eps64", |b| {
        b.iter(|| greedy_pla::build(black_box(&keys), 64).unwrap())
    });
    group.bench_function("least_squares", |b| {
        b.iter(|| linear::fit_least_squares(black_box(&keys)).unwrap())
    });
    group.finish();
}

criterion_group!(benches, models);
criterion_main!(benches);
