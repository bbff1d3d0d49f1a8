//! `skipmap`: `crossbeam_skiplist::SkipMap`, a lock-free concurrent skip list.
//!
//! `SkipMap::insert` replaces the entry of an existing key, which is the
//! upsert the benchmark asks for. The bulk load inserts the sorted pairs one
//! by one, as the crate has no bulk-build API.

use std::path::Path;

use crossbeam_skiplist::SkipMap;
use lidx_core::Result;

use super::check_sorted_unique;
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

/// Factory for the `skipmap` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct SkipMapFactory;

impl EngineFactory for SkipMapFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo::in_memory(
            "skipmap",
            "crossbeam_skiplist::SkipMap (lock-free skip list)",
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
        let map = SkipMap::new();
        for &(k, v) in pairs {
            map.insert(k, v);
        }
        Ok(Box::new(SkipMapEngine { map }))
    }
}

struct SkipMapEngine {
    map: SkipMap<u64, u64>,
}

impl BenchEngine for SkipMapEngine {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        Ok(self.map.get(&key).map(|e| *e.value()))
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        self.map.insert(key, value);
        Ok(())
    }

    fn remove(&self, key: u64) -> Result<bool> {
        Ok(self.map.remove(&key).is_some())
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        out.extend(
            self.map
                .range(start..)
                .take(n)
                .map(|e| (*e.key(), *e.value())),
        );
        Ok(())
    }

    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        Ok(self
            .map
            .upper_bound(std::ops::Bound::Included(&key))
            .map(|e| (*e.key(), *e.value())))
    }
}
