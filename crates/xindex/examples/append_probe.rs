use lidx_xindex::{Config, XIndex};
use std::time::Instant;
fn main() -> lidx_core::Result<()> {
    let path = std::env::args().nth(1).unwrap();
    let cap: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let mut keys = lidx_core::keyset::open_sosd_u64(std::path::Path::new(&path))?
        .as_slice()
        .to_vec();
    keys.dedup();
    let half = keys.len() / 2;
    let index = XIndex::bulk_load(
        keys[..half].iter().map(|&k| (k, k)),
        Config {
            sequential_capacity: cap,
            ..Config::default()
        },
    )?;
    let batch = 50_000;
    for (b, chunk) in keys[half..].chunks(batch).enumerate() {
        let t = Instant::now();
        for &k in chunk {
            index.insert(k, k);
        }
        let ins = t.elapsed().as_nanos() as f64 / chunk.len() as f64;
        let t = Instant::now();
        let mut state = b as u64 * 7 + 1;
        for _ in 0..50_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = keys[((state >> 33) as usize) % (half + (b + 1) * batch).min(keys.len())];
            assert_eq!(index.get(&k), Some(k));
        }
        let get = t.elapsed().as_nanos() as f64 / 50_000.0;
        let s = index.stats();
        let big = s.groups.iter().map(|g| g.records).max().unwrap();
        let top = s.groups.last().unwrap();
        let maxerr = s
            .groups
            .iter()
            .flat_map(|g| g.error_bounds.iter().copied())
            .max()
            .unwrap();
        println!(
            "batch {b}: insert {ins:.0} ns, get {get:.0} ns | groups {} biggest {big} top recs {} delta {} models {:?} | maxerr {maxerr} delta_total {} comp {} gsplit {} msplit {} passes {} waits {}",
            s.groups.len(),
            top.records,
            top.delta_len,
            top.error_bounds,
            s.delta_total(),
            s.compactions,
            s.group_splits,
            s.model_splits,
            s.maintenance_passes,
            s.budget_waits
        );
    }
    Ok(())
}
