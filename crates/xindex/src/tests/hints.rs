//! The root's array hints (`root::ArrayHint`) are prefetch addresses
//! only: lookups through a root whose hints name arrays that maintenance
//! has since replaced and freed must still answer from the live groups.

use std::collections::BTreeMap;

use super::{settle, tiny_config};
use crate::root::{ALWAYS_HINTED_SLOTS as ALWAYS_HINTED, NEVER_HINTED_SLOTS as NEVER_HINTED};
use crate::{Config, XIndex};

#[test]
fn lookups_stay_exact_while_hints_go_stale() {
    let config = Config {
        initial_group_size: 2,
        max_root_models: 4096,
        ..tiny_config()
    };
    const N: u64 = 24_000;
    let keys = (0..N).map(|i| i * 7);
    let index = XIndex::bulk_load(keys.clone().map(|k| (k, k)), config).expect("bulk load");
    let mut oracle: BTreeMap<u64, u64> = keys.map(|k| (k, k)).collect();
    let has_hints = || {
        let guard = index.inner().reclaimer.pin();
        index.inner().root(&guard).has_hints()
    };
    let groups = index.stats().groups.len();
    assert!(groups > ALWAYS_HINTED && has_hints(), "{groups} groups");
    let check = |oracle: &BTreeMap<u64, u64>| {
        for probe in (0..N * 7 + 10).step_by(3) {
            assert_eq!(
                index.get(&probe),
                oracle.get(&probe).copied(),
                "key {probe}"
            );
        }
    };
    for round in 0..3u64 {
        // Writes that make maintenance rebuild most groups (new arrays at
        // new addresses), checked before and after the passes that
        // replace them and the root.
        for i in (round..N).step_by(5) {
            let k = i * 7;
            assert_eq!(index.remove(&k), oracle.remove(&k));
            let fresh = k + 1 + round;
            assert_eq!(
                index.insert(fresh, fresh ^ round),
                oracle.insert(fresh, fresh ^ round)
            );
        }
        check(&oracle);
        // One pass replaces groups under the root that hinted at their
        // old arrays; settling merges many of them away.
        index.maintain_now();
        check(&oracle);
        settle(&index);
        check(&oracle);
    }
}

#[test]
fn small_roots_and_string_keys_keep_no_hints() {
    let small = XIndex::bulk_load((0..1000u64).map(|k| (k, k)), tiny_config()).expect("bulk load");
    let guard = small.inner().reclaimer.pin();
    assert!(small.stats().groups.len() <= NEVER_HINTED && !small.inner().root(&guard).has_hints());
    drop(guard);
    let config = Config {
        initial_group_size: 2,
        max_root_models: 4096,
        ..tiny_config()
    };
    let strings = XIndex::bulk_load(
        (0..24_000u64).map(|k| (format!("{k:08}").into_bytes(), k)),
        config,
    )
    .expect("bulk load");
    let guard = strings.inner().reclaimer.pin();
    assert!(strings.stats().groups.len() > ALWAYS_HINTED);
    assert!(!strings.inner().root(&guard).has_hints());
    assert_eq!(strings.get(&b"00012345".to_vec()), Some(12345));
}

#[test]
fn real_key_sets_get_hints_and_exact_lookups() {
    use lidx_core::F64Key;
    // Small groups, so that both roots are above `ALWAYS_HINTED`.
    let config = Config {
        initial_group_size: 16,
        maintenance_interval: None,
        ..Config::default()
    };
    let ips = lidx_core::keyset::open_sosd_u64(&super::edges::committed("tor_geoip_ipv4_uint64"))
        .expect("committed key set")
        .as_slice()
        .to_vec();
    let index = XIndex::bulk_load(ips.iter().map(|&k| (k, !k)), config.clone()).expect("bulk load");
    {
        let guard = index.inner().reclaimer.pin();
        let root = index.inner().root(&guard);
        let groups = index.stats().groups.len();
        // Most groups of a real key set fit four segments within 64
        // positions (geolite2: 90%).
        assert!(
            groups > ALWAYS_HINTED && root.hinted_slots() * 2 > groups,
            "{groups} groups, {} hinted",
            root.hinted_slots()
        );
    }
    for (i, &k) in ips.iter().enumerate() {
        assert_eq!(index.get(&k), Some(!k));
        let between = k.wrapping_add(1);
        if ips.get(i + 1) != Some(&between) {
            assert_eq!(index.get(&between), None, "{between}");
        }
    }
    // Float keys: offsets are floats too.
    let longitudes: Vec<F64Key> =
        lidx_core::keyset::open_sosd_f64(&super::edges::committed("geopointdb_longitudes_f64"))
            .expect("committed key set")
            .as_slice()
            .iter()
            .map(|&x| F64Key::new(x).expect("not NaN"))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
    let index =
        XIndex::bulk_load(longitudes.iter().map(|k| (*k, 7u64)), config).expect("bulk load");
    {
        let guard = index.inner().reclaimer.pin();
        let groups = index.stats().groups.len();
        assert!(groups > ALWAYS_HINTED && index.inner().root(&guard).has_hints());
    }
    for k in &longitudes {
        assert_eq!(index.get(k), Some(7));
    }
}
