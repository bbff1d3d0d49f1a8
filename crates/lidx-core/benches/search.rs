//! Criterion micro-benchmarks of the searches in `lidx_core::search`.
//!
//! Keys: the committed `s2cells` set (223,689 real S2 cell ids) when found,
//! otherwise a seeded random set of the same size. Query positions come
//! from a perfect "model" perturbed by up to `err`, as a learned index
//! would produce them.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lidx_core::search;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn keys() -> Vec<u64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/geopointdb_s2cellids_uint64");
    match lidx_core::keyset::open_sosd_u64(&path) {
        Ok(k) => k.as_slice().to_vec(),
        Err(_) => {
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let mut v: Vec<u64> = (0..223_689).map(|_| rng.random()).collect();
            v.sort_unstable();
            v.dedup();
            v
        }
    }
}

fn bench(c: &mut Criterion) {
    let keys = keys();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    const Q: usize = 4096;
    let queries: Vec<(u64, usize)> = (0..Q)
        .map(|_| {
            let i = rng.random_range(0..keys.len());
            (keys[i], i)
        })
        .collect();
    let mut g = c.benchmark_group("search");
    g.throughput(Throughput::Elements(Q as u64));
    g.bench_function("partition_point(std)", |b| {
        b.iter(|| {
            for &(k, _) in &queries {
                black_box(keys.partition_point(|x| *x < k));
            }
        })
    });
    g.bench_function("lower_bound", |b| {
        b.iter(|| {
            for &(k, _) in &queries {
                black_box(search::lower_bound(&keys, &k));
            }
        })
    });
    for err in [8usize, 32, 128] {
        let hinted: Vec<(u64, usize)> = queries
            .iter()
            .map(|&(k, i)| (k, (i + err / 2).min(keys.len() - 1)))
            .collect();
        g.bench_function(format!("lower_bound_within(err={err})"), |b| {
            b.iter(|| {
                for &(k, pos) in &hinted {
                    black_box(search::lower_bound_within(&keys, &k, pos, err));
                }
            })
        });
        g.bench_function(format!("exponential(off={})", err / 2), |b| {
            b.iter(|| {
                for &(k, pos) in &hinted {
                    black_box(search::exponential_lower_bound(&keys, &k, pos));
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
