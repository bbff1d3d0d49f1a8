//! How much `get_many` saves on high-latency storage: 64 lookups one by one
//! versus one batch, on simulated storage (5 ms latency, 12 MB/s).
//!
//! `cargo run --release -p lidx-air --example get_many`

use std::sync::Arc;
use std::time::{Duration, Instant};

use lidx_air::{AirIndex, DataInput, DesignChoice, TuneConfig};
use lidx_core::storage::{Memory, Simulated, Storage, StorageProfile};

fn main() -> lidx_core::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let keys = lidx_core::keyset::open_sosd_u64(&root.join("tor_geoip_ipv4_uint64"))?
        .as_slice()
        .to_vec();
    let profile = StorageProfile::affine(Duration::from_millis(5), 12e6)?;
    let memory: Arc<dyn Storage> = Arc::new(Memory::new());
    lidx_air::build(
        &*memory,
        DataInput::SosdKeys(&keys),
        &profile,
        DesignChoice::Tune(TuneConfig::default()),
    )?;
    let storage: Arc<dyn Storage> = Arc::new(Simulated::new(memory, profile));
    let index = AirIndex::open(storage)?;
    let probes: Vec<u64> = keys
        .iter()
        .step_by(keys.len() / 64)
        .take(64)
        .copied()
        .collect();
    let started = Instant::now();
    let one_by_one: Vec<Option<u64>> = probes
        .iter()
        .map(|&k| index.get(k))
        .collect::<lidx_core::Result<_>>()?;
    let sequential = started.elapsed();
    let started = Instant::now();
    let batched = index.get_many(&probes)?;
    let batch = started.elapsed();
    assert_eq!(one_by_one, batched);
    println!(
        "{} lookups, {} index layer(s): one by one {:.1} ms, get_many {:.1} ms ({:.1}x faster)",
        probes.len(),
        index.meta().layers.len(),
        sequential.as_secs_f64() * 1e3,
        batch.as_secs_f64() * 1e3,
        sequential.as_secs_f64() / batch.as_secs_f64()
    );
    Ok(())
}
