//! Appends from several threads at once: half of a key set bulk-loaded,
//! then `threads` threads insert the next keys in ascending order, thread
//! `t` taking every key `i` with `i % threads == t` (the bench's `append`
//! workload), so every insert lands in the top group's rightmost delta
//! leaf. Prints the time per append of the whole burst, medians of five
//! builds, with the background thread off (the put path alone) and on.
//!
//! `cargo run -p lidx-xindex --release --example append_threads [SOSD u64 file] [threads] [burst]`
//! (default: osm from `../shared/data`, 2 threads, 300,000 keys; a burst
//! past the 64 MiB delta budget, 932K keys, also times the waits for
//! maintenance that the budget imposes).

mod common;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use lidx_xindex::{Config, XIndex};

const RUNS: usize = 5;
const DEFAULT_BURST: usize = 300_000;

fn main() -> lidx_core::Result<()> {
    let (path, keys) = common::keys_from_args()?;
    let threads: usize = std::env::args()
        .nth(2)
        .map_or(Ok(2), |t| t.parse())
        .map_err(|e| lidx_core::Error::invalid(format!("threads: {e}")))?;
    let burst_len: usize = std::env::args()
        .nth(3)
        .map_or(Ok(DEFAULT_BURST), |b| b.parse())
        .map_err(|e| lidx_core::Error::invalid(format!("burst: {e}")))?;
    let half = keys.len() / 2;
    let burst = &keys[half..(half + burst_len).min(keys.len())];
    println!(
        "{}: {half} keys loaded, {} appended by {threads} threads",
        path.display(),
        burst.len()
    );
    for interval in [None, Some(Duration::from_millis(20))] {
        let config = Config {
            maintenance_interval: interval,
            ..Config::default()
        };
        let mut times = Vec::new();
        for _ in 0..RUNS {
            let index = XIndex::<u64, u64>::bulk_load(
                keys[..half].iter().map(|&k| (k, k)),
                config.clone(),
            )?;
            let start = Barrier::new(threads + 1);
            let elapsed = std::thread::scope(|s| {
                for t in 0..threads {
                    let (index, start) = (&index, &start);
                    s.spawn(move || {
                        start.wait();
                        for &k in burst.iter().skip(t).step_by(threads) {
                            index.insert(k, k);
                        }
                    });
                }
                start.wait();
                let t = Instant::now();
                // The scope joins the appenders before returning.
                t
            });
            times.push(elapsed.elapsed().as_secs_f64());
            for &k in burst {
                assert_eq!(index.get(&k), Some(k), "lost append {k}");
            }
        }
        println!(
            "maintenance {}: {:.0} ns per append",
            if interval.is_some() { "on " } else { "off" },
            common::median(times) * 1e9 / burst.len() as f64
        );
    }
    Ok(())
}
