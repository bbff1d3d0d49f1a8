//! A harness probe, not an index benchmark: nanoseconds per `get` in
//! successive blocks of random lookups right after each engine's bulk
//! load, the evidence behind the runner's warm-up phase and its packed
//! operation streams (`BenchConfig::warmup`, `workload::Step`).
//!
//! Each engine is built, then answers 600k random gets of loaded keys in
//! blocks of 20k, on CPU 0. The first blocks show the caches filling with
//! the structure after the load. With `STEP_BYTES=48` each probe key is
//! read from a 48-byte record, as the runner's streams were before they
//! were packed, instead of from a bare 8-byte key.
//!
//! `cargo run --release -p lidx-bench --example warmup_curve -- DATASET ENGINES`
//! (e.g. `books xindex,btreemap`).

use std::hint::black_box;
use std::time::Instant;

use lidx_bench::{datasets, registry};
use rand::{Rng, SeedableRng};

const GETS: usize = 600_000;
const BLOCK: usize = 20_000;

fn main() -> lidx_core::Result<()> {
    let mut args = std::env::args().skip(1);
    let dataset = args.next().unwrap_or_else(|| "books".to_owned());
    let engines = args.next().unwrap_or_else(|| "xindex,btreemap".to_owned());
    let words = match std::env::var("STEP_BYTES").ok().as_deref() {
        Some("48") => 6,
        _ => 1,
    };
    let keys = datasets::load_u64(&dataset, None, 1, None)?.keys;
    let pairs: Vec<(u64, u64)> = keys.iter().map(|&k| (k, k ^ 0x5555)).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    // Probe keys, each followed by `words - 1` words of padding.
    let mut probes = vec![0u64; GETS * words];
    for i in 0..GETS {
        probes[i * words] = keys[rng.random_range(0..keys.len())];
    }
    let dir = std::env::temp_dir();
    println!("{dataset}: ns per get, blocks of {BLOCK} random gets after the load");
    for round in 0..2 {
        for name in engines.split(',') {
            let engine = registry::by_name(name)?.build(&pairs, &dir, false)?;
            core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
            let mut line = format!("{round} {name:9}");
            for block in probes.chunks(BLOCK * words) {
                let started = Instant::now();
                let mut found = 0usize;
                for probe in block.chunks(words) {
                    found += usize::from(engine.get(probe[0])?.is_some());
                }
                assert_eq!(found, BLOCK, "{name} lost keys");
                let ns = started.elapsed().as_nanos() as f64 / BLOCK as f64;
                line += &format!(" {ns:4.0}");
            }
            println!("{line}");
            black_box(engine);
        }
    }
    Ok(())
}
