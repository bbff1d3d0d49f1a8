//! A burst of inserts that outruns the maintenance thread: half of a key
//! set bulk-loaded, the other half inserted in ascending order (no §3.5.2
//! hint) from one thread, in batches of 50,000, each followed by 50,000
//! gets of random keys inserted so far. Prints, per batch, the insert and
//! get times and the shape maintenance has left: groups, the largest
//! group, the worst model error, and the keys waiting in deltas; then the
//! same every 100 ms after the burst, while maintenance catches up.
//!
//! `cargo run -p lidx-xindex --release --example insert_burst [SOSD u64 file]`
//! (default: osm from `../shared/data`).

mod common;

use std::time::{Duration, Instant};

use lidx_xindex::{Config, XIndex};

const BATCH: usize = 50_000;

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let half = keys.len() / 2;
    let index = XIndex::bulk_load(keys[..half].iter().map(|&k| (k, k)), Config::default())?;
    println!(
        "{}: {half} keys loaded, {} inserted",
        path.display(),
        keys.len() - half
    );
    println!("| batch | insert ns | get ns | groups | largest group | worst error | in deltas |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut timed_gets = |present: usize| {
        let started = Instant::now();
        for _ in 0..BATCH {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let k = keys[(state % present as u64) as usize];
            assert_eq!(index.get(&k), Some(k));
        }
        started.elapsed().as_nanos() as f64 / BATCH as f64
    };
    for (b, chunk) in keys[half..].chunks(BATCH).enumerate() {
        let started = Instant::now();
        for &k in chunk {
            index.insert(k, k);
        }
        let insert_ns = started.elapsed().as_nanos() as f64 / chunk.len() as f64;
        let get_ns = timed_gets(half + b * BATCH + chunk.len());
        println!("| {b} | {insert_ns:.0} | {get_ns:.0} | {} |", shape(&index));
    }
    // After the burst: how soon maintenance restores the shape.
    for step in 1..=5 {
        std::thread::sleep(Duration::from_millis(100));
        let get_ns = timed_gets(keys.len());
        println!("| +{} ms | | {get_ns:.0} | {} |", step * 100, shape(&index));
    }
    Ok(())
}

/// Groups, the largest group's records, the worst model error and the
/// keys waiting in deltas, as table cells.
fn shape(index: &XIndex<u64, u64>) -> String {
    let stats = index.stats();
    let largest = stats.groups.iter().map(|g| g.records).max().unwrap_or(0);
    let worst = stats.worst_model_error();
    format!(
        "{} | {largest} | {worst} | {}",
        stats.group_count(),
        stats.delta_total()
    )
}
