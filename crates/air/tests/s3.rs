//! AirIndex on an S3-compatible object store: a moto server on 127.0.0.1,
//! installed and started by the test itself.

use std::sync::Arc;

use lidx_air::{AirIndex, DataInput, DesignChoice, TuneConfig};
use lidx_core::storage::moto::MotoServer;
use lidx_core::storage::{Storage, StorageProfile};

#[test]
fn build_into_and_query_from_s3() {
    let server = match MotoServer::start() {
        Ok(s) => s,
        Err(reason) => {
            eprintln!("SKIPPED: S3-compatible server unavailable: {reason}");
            return;
        }
    };
    server.create_bucket("lidx-air").unwrap();
    let storage: Arc<dyn Storage> = Arc::new(server.storage("lidx-air", "indexes/tor").unwrap());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let keys = lidx_core::keyset::open_sosd_u64(&root.join("tor_geoip_ipv4_uint64"))
        .unwrap()
        .as_slice()
        .to_vec();
    let report = lidx_air::build(
        &*storage,
        DataInput::SosdKeys(&keys),
        &StorageProfile::nfs(),
        DesignChoice::Tune(TuneConfig::default()),
    )
    .unwrap();
    assert!(!report.layers.is_empty());
    let index = AirIndex::open(storage.clone()).unwrap();
    for (i, &k) in keys.iter().enumerate().step_by(997) {
        let first = keys.partition_point(|&x| x < k);
        assert_eq!(
            index.get(k).unwrap(),
            Some(first as u64),
            "key {k} (index {i})"
        );
    }
    // Batched lookups overlap their requests.
    let probes: Vec<u64> = keys
        .iter()
        .step_by(5003)
        .copied()
        .chain([1, u64::MAX])
        .collect();
    let batch = index.get_many(&probes).unwrap();
    for (k, got) in probes.iter().zip(batch) {
        assert_eq!(got, index.get(*k).unwrap());
    }
    let scanned: Vec<u64> = index
        .range(keys[100]..=keys[200])
        .unwrap()
        .map(|e| e.unwrap().key)
        .collect();
    assert_eq!(scanned, keys[100..=200]);
    index.verify().unwrap();
    // A second index under another prefix of the same bucket is separate.
    let other: Arc<dyn Storage> = Arc::new(server.storage("lidx-air", "indexes/other").unwrap());
    assert!(AirIndex::open(other).is_err());
}
