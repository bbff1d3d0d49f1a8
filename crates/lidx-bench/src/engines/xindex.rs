//! `xindex`: lidx's XIndex-R (`lidx-xindex`), a concurrent learned ordered
//! map, with its paper defaults (e = 32, s = 256, f = 1/4, m = 4) and its
//! background maintenance thread running.

use std::path::Path;

use lidx_core::Result;
use lidx_xindex::{Config, XIndex};

use crate::engine::{BenchEngine, EngineFactory, EngineInfo};
use crate::peers::check_sorted_unique;

/// Factory for the `xindex` engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct XIndexFactory;

impl EngineFactory for XIndexFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo::in_memory(
            "xindex",
            "lidx XIndex-R (learned groups, B-tree deltas, background compaction)",
        )
    }

    fn build(
        &self,
        pairs: &[(u64, u64)],
        _dir: &Path,
        _writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        check_sorted_unique(pairs)?;
        let index = XIndex::bulk_load(pairs.iter().copied(), Config::default())?;
        Ok(Box::new(XIndexEngine { index }))
    }
}

struct XIndexEngine {
    index: XIndex<u64, u64>,
}

impl BenchEngine for XIndexEngine {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        Ok(self.index.get(&key))
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        self.index.insert(key, value);
        Ok(())
    }

    fn remove(&self, key: u64) -> Result<bool> {
        Ok(self.index.remove(&key).is_some())
    }

    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        out.clear();
        self.index.get_many(keys, out);
        Ok(())
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        self.index.scan(&start, n, out);
        Ok(())
    }
}
