//! Retired groups are freed once no thread can reach them, also when the
//! index goes idle right after the writes that retired them.

use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use lidx_core::Key;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::maintenance::Pass;
use crate::{Config, XIndex};

/// Live `CountedKey`s in the whole test process.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// A `u64` key that counts its live copies, so a test can see whether the
/// arrays of retired groups were freed.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct CountedKey(u64);

impl CountedKey {
    fn new(k: u64) -> Self {
        LIVE.fetch_add(1, Ordering::Relaxed);
        CountedKey(k)
    }
}

impl Clone for CountedKey {
    fn clone(&self) -> Self {
        CountedKey::new(self.0)
    }
}

impl Drop for CountedKey {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Key for CountedKey {
    const ENCODED_WIDTH: Option<usize> = Some(8);

    fn encode_le(&self, out: &mut Vec<u8>) {
        self.0.encode_le(out);
    }

    fn decode_le(bytes: &[u8]) -> lidx_core::Result<(Self, usize)> {
        let (k, width) = u64::decode_le(bytes)?;
        Ok((CountedKey::new(k), width))
    }

    fn to_f64(&self) -> f64 {
        self.0.to_f64()
    }

    fn offset_from(&self, origin: &Self) -> f64 {
        self.0.offset_from(&origin.0)
    }
}

#[test]
fn retired_groups_are_freed_when_the_index_goes_idle() {
    const KEYS: u64 = 40_000;
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    // Irregular keys: models too rough for groups to merge, so the pass
    // below retires groups and then ends without another root update
    // (whose barrier would have handed the retired nodes on anyway).
    let mut rng = ChaCha8Rng::seed_from_u64(0x2545_f491_4f6c_dd1d);
    let mut keys: Vec<u64> = (0..KEYS).map(|_| rng.random::<u64>() >> 8).collect();
    keys.sort_unstable();
    keys.dedup();
    let pairs = keys.iter().map(|&k| (CountedKey::new(k), k));
    let index = XIndex::bulk_load(pairs, config).unwrap();
    index.maintain_now();
    // A few new keys and one pass: it compacts their groups, retiring
    // nodes whose arrays hold thousands of keys, and the index goes idle.
    let before = index.stats();
    for &k in [keys[1], keys[keys.len() / 2], keys[keys.len() - 2]].iter() {
        index.insert(CountedKey::new(k + 1), k + 1);
    }
    index.maintain_now();
    let stats = index.stats();
    assert!(
        stats.compactions > before.compactions,
        "nothing was retired: {stats:?}"
    );
    let len = index.len() as isize;
    // What the live index holds besides one copy of each key: per group a
    // pivot, its copy in the root, router first keys and model first keys.
    let bound = len + stats.group_count() as isize * 40;
    // Crossbeam frees a retired node two epochs later; other tests pin the
    // same collector briefly, so allow for a few rounds.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let live = LIVE.load(Ordering::Relaxed);
        if live <= bound {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{live} keys still allocated, the index holds {len} in {} groups",
            stats.group_count()
        );
        // Passes with nothing to do still hand retired nodes on.
        index.maintain_now();
        std::thread::sleep(Duration::from_millis(5));
    }
    for &k in keys.iter().step_by(97) {
        assert_eq!(index.get(&CountedKey::new(k)), Some(k));
    }
}

#[test]
fn a_region_mostly_replaced_is_emptied_and_freed() {
    let config = Config {
        maintenance_interval: None,
        ..Config::default()
    };
    // Irregular keys, so that groups do not merge: the groups without new
    // keys below leave the bulk load's region only by being relocated.
    let mut rng = ChaCha8Rng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
    let mut keys: Vec<u64> = (0..100_000)
        .map(|_| rng.random::<u64>() >> 8 << 1)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), config).unwrap();
    let loaded = index.stats();
    assert!(loaded.array_live_bytes > 0);
    // Bulk load sizes its region to fit: at most a cache line of
    // alignment per array (two per group) goes unused.
    assert!(loaded.array_live_bytes <= loaded.array_region_bytes);
    assert!(loaded.array_region_bytes - loaded.array_live_bytes <= 128 * loaded.group_count());
    let bulk_region = {
        let guard = index.inner().reclaimer.pin();
        let root = index.inner().root(&guard);
        let last = root.slots[root.slots.len() - 1].load(Ordering::Acquire, &guard);
        // SAFETY: reachable from the root while `guard` is pinned.
        unsafe { last.deref() }.records.keys.region()
    };
    // New (odd) keys among the lowest seven tenths: compacting those
    // groups moves their arrays to new regions, and the bulk load's region
    // drops to 30% in use.
    let moved = keys.len() * 7 / 10;
    for &k in &keys[..moved] {
        index.insert(k + 1, k + 1);
    }
    // The passes move the other groups' arrays out too, and the region
    // goes with its last array once the retired groups are reclaimed.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !bulk_region.is_freed() {
        assert!(Instant::now() < deadline, "{:?}", index.stats());
        index.maintain_now();
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = index.stats();
    assert!(
        stats.array_region_bytes < 2 * stats.array_live_bytes + (8 << 20),
        "{stats:?}"
    );
    for (i, &k) in keys.iter().enumerate().step_by(7) {
        assert_eq!(index.get(&k), Some(k));
        assert_eq!(index.get(&(k + 1)), (i < moved).then_some(k + 1));
    }
}

#[test]
fn an_idle_index_still_empties_a_region_that_goes_sparse_after_its_last_writes() {
    let config = Config {
        maintenance_interval: None,
        small_delta_delay: Duration::ZERO,
        initial_group_size: 1_000,
        ..Config::default()
    };
    // Two groups whose slopes differ, so they never merge: the lower one
    // holds a little more than half of the bulk load's region.
    let keys: Vec<u64> = (0..1_000u64)
        .map(|i| i * 3)
        .chain((0..900).map(|i| 10_000 + i * 7))
        .collect();
    let index = XIndex::bulk_load(keys.iter().map(|&k| (k, k)), config).unwrap();
    assert_eq!(index.stats().group_count(), 2);
    let bulk_region = {
        let guard = index.inner().reclaimer.pin();
        let root = index.inner().root(&guard);
        let first = root.slots[0].load(Ordering::Acquire, &guard);
        // SAFETY: reachable from the root while `guard` is pinned.
        unsafe { first.deref() }.records.keys.region()
    };
    // The first background pass moves the lower group's arrays to a new
    // region; the bulk region drops below half in use only when the old
    // ones are freed, after that pass's walk, and nothing is written
    // after it. Background passes that skipped their walks from then on
    // would keep the region, and the upper group in it, for good.
    assert_eq!(index.insert(1, 1), None);
    let inner = index.inner();
    let mut passes = 0;
    while !bulk_region.is_freed() {
        assert!(passes < 1_000, "{:?}", index.stats());
        inner.maintain(Pass::Background);
        passes += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(index.get(&1), Some(1));
    for &k in &keys {
        assert_eq!(index.get(&k), Some(k));
    }
}
