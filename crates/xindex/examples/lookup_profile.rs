//! Lookup-path driver for profiling on a real SOSD key set: bulk load,
//! shape right after loading and after maintenance settles, then a timed
//! random-lookup loop (`perf record` / `valgrind --tool=callgrind` target).
//!
//! `cargo run -p lidx-xindex --release --example lookup_profile -- <sosd-u64-file> [lookups] [settle]`
//! (`settle` = 0 measures right after the bulk load, as the bench does).
//! Instructions per lookup: `valgrind --tool=callgrind --toggle-collect='*probe_loop*'`
//! on the release binary, divided by `lookups`.

use std::path::PathBuf;
use std::time::Instant;

use lidx_core::keyset::open_sosd_u64;
use lidx_xindex::{Config, Stats, XIndex};

fn describe(label: &str, s: &Stats) {
    let mut errors: Vec<usize> = s
        .groups
        .iter()
        .flat_map(|g| g.error_bounds.iter().copied())
        .collect();
    errors.sort_unstable();
    let pct = |p: f64| {
        errors
            .get(((errors.len() as f64 - 1.0) * p) as usize)
            .copied()
    };
    let records: usize = s.groups.iter().map(|g| g.records).sum();
    println!(
        "{label}: {} groups ({:.0} records/group), {} models, model error p50 {:?} p90 {:?} max {:?}, \
         root models {} (max error {}), delta {}",
        s.group_count(),
        records as f64 / s.group_count().max(1) as f64,
        errors.len(),
        pct(0.5),
        pct(0.9),
        errors.last(),
        s.root_models,
        s.root_max_error,
        s.delta_total()
    );
}

fn main() -> lidx_core::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "/work/shared/data/geolite2_city_ipv4_3M_uint64".into()),
    );
    let lookups: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    let settle = args.next().is_none_or(|a| a != "0");
    let keys = open_sosd_u64(&path)?;
    let keys = keys.as_slice();

    let t = Instant::now();
    let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), Config::default())?;
    println!("bulk load {} keys: {:.2?}", keys.len(), t.elapsed());
    describe("loaded", &index.stats());
    if settle {
        let t = Instant::now();
        let mut passes = 0;
        while index.maintain_now() && passes < 100 {
            passes += 1;
        }
        println!("settled in {:.2?} ({passes} passes)", t.elapsed());
        describe("settled", &index.stats());
    }

    // Uniformly random existing keys (splitmix64 positions).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let probes: Vec<u64> = (0..lookups.min(1 << 22))
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            keys[((z ^ (z >> 31)) % keys.len() as u64) as usize]
        })
        .collect();
    let t = Instant::now();
    let hits = probe_loop(&index, &probes, lookups);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "get: {:.2} Mops/s, {:.0} ns/op ({hits} of {lookups} hits)",
        lookups as f64 / secs / 1e6,
        secs * 1e9 / lookups as f64
    );
    describe("after", &index.stats());
    Ok(())
}

/// The timed loop, kept out of line so `callgrind --toggle-collect=*probe_loop*`
/// can count the instructions of the lookups alone.
#[inline(never)]
fn probe_loop(index: &XIndex<u64, u64>, probes: &[u64], lookups: usize) -> usize {
    let mut hits = 0usize;
    let mut done = 0usize;
    while done < lookups {
        for k in &probes[..probes.len().min(lookups - done)] {
            hits += usize::from(index.get(k) == Some(*k));
        }
        done += probes.len().min(lookups - done);
    }
    hits
}
