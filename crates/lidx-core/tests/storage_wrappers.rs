//! The storage wrappers through the public API: Simulated timing, Counting
//! totals, every Fault kind, and profile parsing and persistence.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lidx_core::Error;
use lidx_core::storage::{
    Calibration, CalibrationOptions, Counting, Fault, Faulty, Memory, ObjectCounts, Simulated,
    Storage, StorageProfile, calibrate,
};

const OBJECT_BYTES: usize = 1 << 20;

/// An in-memory store holding `"data"`: `OBJECT_BYTES` bytes where byte `i`
/// is `i % 251`, so any slice can be checked against its offset.
fn memory_with_data() -> Memory {
    let mem = Memory::new();
    let data: Vec<u8> = (0..OBJECT_BYTES).map(|i| (i % 251) as u8).collect();
    mem.write("data", &data).unwrap();
    mem
}

fn expected_slice(start: u64, end: u64) -> Vec<u8> {
    (start..end).map(|i| (i % 251) as u8).collect()
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn injected<T: std::fmt::Debug>(result: lidx_core::Result<T>) -> bool {
    matches!(&result, Err(e @ Error::Io { .. }) if e.to_string().contains("injected fault"))
}

#[test]
fn simulated_read_time_is_within_a_millisecond_of_its_cost() {
    let profile = StorageProfile::ssd();
    let sim = Simulated::new(memory_with_data(), profile.clone());
    for size in [4096u64, 65_536] {
        let cost = profile.cost(size);
        let times: Vec<Duration> = (0..20)
            .map(|i| {
                let start = i * 7919 % (OBJECT_BYTES as u64 - size);
                let t = Instant::now();
                let data = sim.read("data", start..start + size).unwrap();
                let took = t.elapsed();
                assert_eq!(data.len() as u64, size);
                // Every read, not just the median, honours the floor.
                assert!(took >= cost, "{size} bytes took {took:?} < cost {cost:?}");
                took
            })
            .collect();
        let med = median(times);
        eprintln!("simulated ssd read of {size} bytes: cost {cost:?}, median {med:?}");
        assert!(
            med <= cost + Duration::from_millis(1),
            "median {med:?} vs cost {cost:?}"
        );
    }
}

#[test]
fn simulated_read_many_costs_the_max_not_the_sum() {
    let profile = StorageProfile::ssd();
    let sim = Simulated::new(memory_with_data(), profile.clone());
    let ranges = [0..4096, 10_000..26_384, 100_000..165_536, 500_000..762_144];
    let max_cost = ranges
        .iter()
        .map(|r| profile.cost(r.end - r.start))
        .max()
        .unwrap();
    let sum_cost: Duration = ranges.iter().map(|r| profile.cost(r.end - r.start)).sum();
    let times: Vec<Duration> = (0..15)
        .map(|_| {
            let t = Instant::now();
            let parts = sim.read_many("data", &ranges).unwrap();
            let took = t.elapsed();
            for (part, r) in parts.iter().zip(&ranges) {
                assert_eq!(&part[..], &expected_slice(r.start, r.end)[..]);
            }
            took
        })
        .collect();
    let med = median(times);
    eprintln!("simulated read_many: max cost {max_cost:?}, sum {sum_cost:?}, median {med:?}");
    assert!(med >= max_cost, "median {med:?} < max cost {max_cost:?}");
    assert!(
        med < max_cost * 2,
        "median {med:?} >= 2 x max cost {max_cost:?}"
    );
}

#[test]
fn calibration_recovers_a_simulated_profile() {
    // Least squares estimates the mean time per size, and on a busy machine
    // late wake-ups inflate some samples (never deflate them). A 2 ms
    // latency keeps that bias small, and the best of three runs is judged:
    // one clean run shows the measurement and fit are right.
    let profile = StorageProfile::affine(Duration::from_millis(2), 50e6).unwrap();
    let sim = Simulated::new(memory_with_data(), profile.clone());
    let mut seen = Vec::new();
    for seed in 0..3 {
        let options = CalibrationOptions {
            min_bytes: 4096,
            max_bytes: 8 << 20,
            reps: 3,
            seed,
        };
        let cal: Calibration = calibrate(&sim, "data", &options).unwrap();
        eprintln!(
            "calibrated {} (r2 {:.5}) against {profile}",
            cal.profile, cal.r_squared
        );
        // 4 KiB..1 MiB, capped at the object: 9 sizes.
        assert_eq!(cal.samples.len(), 9 * 3);
        assert_eq!(cal.medians.len(), 9);
        assert!(cal.medians.windows(2).all(|w| w[0].0 * 2 == w[1].0));
        let latency_ns = cal.profile.latency().as_nanos() as f64;
        let latency_ok = (latency_ns - 2e6).abs() < 0.2 * 2e6;
        let bandwidth_ok = (cal.profile.bandwidth() - 50e6).abs() < 0.15 * 50e6;
        if latency_ok && bandwidth_ok && cal.r_squared > 0.9 {
            return;
        }
        seen.push(format!("{} (r2 {})", cal.profile, cal.r_squared));
    }
    panic!("no calibration recovered {profile}: {seen:?}");
}

#[test]
fn counting_counts_exactly_through_a_stack() {
    let counting = Counting::new(Simulated::new(
        memory_with_data(),
        StorageProfile::affine(Duration::ZERO, 1e12).unwrap(),
    ));
    counting.write("meta", b"hello").unwrap();
    counting.read("data", 0..100).unwrap();
    counting.read_all("meta").unwrap();
    counting
        .read_many("data", &[0..10, 20..30, 40..40])
        .unwrap();
    counting.len("data").unwrap();
    counting.list("").unwrap();
    let counts = counting.counts();
    assert_eq!(counts.len(), 2);
    assert_eq!(
        counts["data"],
        ObjectCounts {
            requests: 4,
            bytes: 120,
            metadata_requests: 1,
            ..ObjectCounts::default()
        }
    );
    assert_eq!(
        counts["meta"],
        ObjectCounts {
            requests: 1,
            bytes: 5,
            writes: 1,
            bytes_written: 5,
            ..ObjectCounts::default()
        }
    );
    let totals = counting.totals();
    assert_eq!((totals.requests, totals.bytes), (5, 125));
    assert_eq!(totals.metadata_requests, 2);
    counting.reset();
    assert_eq!(counting.totals(), ObjectCounts::default());
}

#[test]
fn every_fault_kind_behaves_as_documented() {
    let faulty: Faulty<Arc<dyn Storage>> = Faulty::new(Arc::new(memory_with_data()));

    faulty.set_fault(Fault::FailReadsAfter(2));
    assert!(faulty.read("data", 0..1).is_ok());
    assert!(faulty.read("data", 1..2).is_ok());
    assert!(injected(faulty.read("data", 2..3)));
    assert!(injected(faulty.read_all("data")));
    assert_eq!(faulty.read_count(), 4);

    faulty.write("other", b"xyz").unwrap();
    faulty.set_fault(Fault::FailObject("data".into()));
    assert!(injected(faulty.read("data", 0..1)));
    assert_eq!(&faulty.read_all("other").unwrap()[..], b"xyz");

    faulty.set_fault(Fault::ShortReads);
    let short = faulty.read("data", 100..200).unwrap();
    assert_eq!(&short[..], &expected_slice(100, 150)[..]);

    faulty.set_fault(Fault::FailWrites);
    assert!(injected(faulty.write("other", b"new")));
    assert!(injected(faulty.delete("other")));
    assert_eq!(&faulty.inner().read_all("other").unwrap()[..], b"xyz");

    let draws = |seed| {
        faulty.set_fault(Fault::Random {
            probability: 0.5,
            seed,
        });
        (0..64)
            .map(|i| faulty.read("data", i..i + 1).is_err())
            .collect::<Vec<_>>()
    };
    let first = draws(3);
    assert_eq!(first, draws(3), "same seed, same failures");
    assert!(first.iter().any(|&f| f) && first.iter().any(|&f| !f));

    faulty.set_fault(Fault::None);
    assert_eq!(faulty.read("data", 0..3).unwrap().len(), 3);
}

#[test]
fn profile_parse_save_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ssd.json");
    let parsed = StorageProfile::parse("250,175").unwrap();
    assert_eq!(parsed, StorageProfile::ssd());
    assert_eq!(
        parsed.to_string(),
        "affine(latency 250 us, bandwidth 175 MB/s)"
    );
    parsed.save(&path).unwrap();
    let loaded = StorageProfile::parse(path.to_str().unwrap()).unwrap();
    assert_eq!(loaded, parsed);
    assert_eq!(StorageProfile::load(&path).unwrap(), parsed);

    let cal = Calibration::from_samples(
        vec![(1000, 2000.0), (2000, 3000.0), (4000, 5000.0)],
        Some("file:///tmp/x".into()),
    )
    .unwrap();
    cal.profile.save(&path).unwrap();
    let reloaded = StorageProfile::load(&path).unwrap();
    assert_eq!(reloaded, cal.profile);
    assert_eq!(
        reloaded.fit().unwrap().source.as_deref(),
        Some("file:///tmp/x")
    );
    assert_eq!(reloaded.latency(), Duration::from_micros(1));
    assert_eq!(reloaded.bandwidth(), 1e9);
}

#[test]
fn profile_parse_errors_are_invalid_argument() {
    for spec in [
        "",
        "tape",
        "1,2,3",
        "fast,slow",
        "250,-5",
        "/no/such/profile.json",
    ] {
        let err = StorageProfile::parse(spec).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("nfs") && m.contains("ssd")),
            "{spec:?}: {err}"
        );
    }
}
