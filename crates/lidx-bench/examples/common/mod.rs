//! Shared by the XIndex examples.

use std::time::Instant;

use lidx_xindex::XIndex;
use rand::{Rng, SeedableRng};

/// Gets per second of 2M random keys of `keys`, best of `rounds` passes.
/// Panics if a key is missing.
pub fn lookups_per_sec(index: &XIndex<u64, u64>, keys: &[u64], rounds: usize) -> f64 {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let probes: Vec<u64> = (0..2_000_000)
        .map(|_| keys[rng.random_range(0..keys.len())])
        .collect();
    let mut best = 0f64;
    for _ in 0..rounds {
        let started = Instant::now();
        let mut found = 0usize;
        for k in &probes {
            found += index.get(k).is_some() as usize;
        }
        let rate = probes.len() as f64 / started.elapsed().as_secs_f64();
        assert_eq!(found, probes.len(), "keys missing");
        best = best.max(rate);
    }
    best
}
