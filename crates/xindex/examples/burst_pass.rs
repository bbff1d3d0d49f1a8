//! How fast maintenance absorbs a burst of inserts: half of a key set
//! bulk-loaded with the background thread off, a burst of the next keys
//! inserted in ascending order (all into the top group's delta), then one
//! timed pass (`maintain_now`), which splits that group into settled parts.
//! Prints the bulk load's time, the inserts' time per key (the put path of
//! an append into a group's delta) and the pass's time per burst key,
//! medians of five builds. Deterministic: no thread races the pass.
//!
//! `cargo run -p lidx-xindex --release --example burst_pass [SOSD u64 file]`
//! (default: osm from `../shared/data`).

mod common;

use std::time::Instant;

use lidx_xindex::{Config, XIndex};

const RUNS: usize = 5;

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let half = keys.len() / 2;
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    let load =
        || XIndex::<u64, u64>::bulk_load(keys[..half].iter().map(|&k| (k, k)), config.clone());

    let mut loads = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        drop(load()?);
        loads.push(t.elapsed().as_secs_f64());
    }
    let load_s = common::median(loads);
    println!(
        "{}: bulk load of {half} keys: {:.1} ms ({:.0} ns per key)",
        path.display(),
        load_s * 1e3,
        load_s * 1e9 / half as f64
    );

    for burst in [50_000usize, 200_000, 400_000] {
        let burst = burst.min(keys.len() - half);
        let mut inserts = Vec::new();
        let mut passes = Vec::new();
        let mut shape = String::new();
        for _ in 0..RUNS {
            let index = load()?;
            let t = Instant::now();
            for &k in &keys[half..half + burst] {
                index.insert(k, k);
            }
            inserts.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            index.maintain_now();
            passes.push(t.elapsed().as_secs_f64());
            let stats = index.stats();
            let worst = stats.worst_model_error();
            shape = format!(
                "{} groups, worst model error {worst}, {} keys left in deltas",
                stats.group_count(),
                stats.delta_total()
            );
        }
        let (insert_s, pass_s) = (common::median(inserts), common::median(passes));
        println!(
            "burst of {burst}: inserts {:.0} ns each; first pass {:.1} ms ({:.0} ns per burst key); after it {shape}",
            insert_s * 1e9 / burst as f64,
            pass_s * 1e3,
            pass_s * 1e9 / burst as f64
        );
    }
    Ok(())
}
