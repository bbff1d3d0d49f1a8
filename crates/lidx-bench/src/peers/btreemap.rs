//! `btreemap`: the standard library's `BTreeMap` behind a `parking_lot::RwLock`.
//!
//! This is the baseline a Rust user reaches for first when a sorted map must
//! be shared between threads: readers share the lock, every write takes it
//! exclusively. Inserts overwrite existing keys (plain `BTreeMap::insert`).

use std::collections::BTreeMap;
use std::path::Path;

use lidx_core::Result;
use parking_lot::RwLock;

use super::check_sorted_unique;
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

/// Factory for the `btreemap` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct BTreeMapFactory;

impl EngineFactory for BTreeMapFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo::in_memory(
            "btreemap",
            "std::collections::BTreeMap behind a parking_lot::RwLock",
        )
        .with_floor()
    }

    fn build(
        &self,
        pairs: &[(u64, u64)],
        _dir: &Path,
        _writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        check_sorted_unique(pairs)?;
        // Collecting sorted input uses BTreeMap's bulk build, as `from_iter` does for users.
        let map: BTreeMap<u64, u64> = pairs.iter().copied().collect();
        Ok(Box::new(BTreeMapEngine {
            map: RwLock::new(map),
        }))
    }
}

struct BTreeMapEngine {
    map: RwLock<BTreeMap<u64, u64>>,
}

impl BenchEngine for BTreeMapEngine {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        Ok(self.map.read().get(&key).copied())
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        self.map.write().insert(key, value);
        Ok(())
    }

    fn remove(&self, key: u64) -> Result<bool> {
        Ok(self.map.write().remove(&key).is_some())
    }

    /// One read lock for the whole batch, as a user would write it.
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        out.clear();
        let map = self.map.read();
        out.extend(keys.iter().map(|k| map.get(k).copied()));
        Ok(())
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        let map = self.map.read();
        out.extend(map.range(start..).take(n).map(|(&k, &v)| (k, v)));
        Ok(())
    }

    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        Ok(self
            .map
            .read()
            .range(..=key)
            .next_back()
            .map(|(&k, &v)| (k, v)))
    }
}
