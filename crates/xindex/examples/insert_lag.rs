//! Scratch: delta sizes during an insert burst (not committed).
use lidx_xindex::{Config, XIndex};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).unwrap();
    let keys = lidx_core::keyset::open_sosd_u64(std::path::Path::new(&path)).unwrap();
    let mut keys: Vec<u64> = keys.as_slice().to_vec();
    keys.dedup();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    keys.shuffle(&mut rng);
    let (load, ins) = keys.split_at(keys.len() / 2);
    let mut load = load.to_vec();
    load.sort_unstable();
    let cfg = if std::env::var("NOMAINT").is_ok() {
        Config {
            maintenance_interval: None,
            delta_budget_bytes: usize::MAX,
            ..Config::default()
        }
    } else {
        Config::default()
    };
    let index = XIndex::bulk_load(load.iter().map(|&k| (k, k)), cfg).unwrap();
    let s = index.stats();
    println!("groups {} ", s.group_count());
    let t = Instant::now();
    for (i, &k) in ins.iter().enumerate() {
        index.insert(k, k);
        if i % 50_000 == 0 {
            let s = index.stats();
            println!(
                "{:>7} {:>6.1} ms groups {} delta {} passes {} compactions {} splits {}",
                i,
                t.elapsed().as_secs_f64() * 1e3,
                s.group_count(),
                s.delta_total(),
                s.maintenance_passes,
                s.compactions,
                s.group_splits
            );
        }
    }
    println!(
        "total {:.1} ms, {:.0} ns/insert",
        t.elapsed().as_secs_f64() * 1e3,
        t.elapsed().as_nanos() as f64 / ins.len() as f64
    );
}
