//! `xindex`: lidx's XIndex-R (`lidx-xindex`), a concurrent learned ordered
//! map, with its paper defaults (e = 32, s = 256, f = 1/4, m = 4) and its
//! background maintenance thread running. `xindex-seq` is the same with the
//! §3.5.2 sequential-insert hint: append tails of [`SEQ_CAPACITY`] slots in
//! the groups where maintenance detects ascending inserts.

use std::path::Path;

use lidx_core::Result;
use lidx_xindex::{Config, XIndex};

use crate::engine::{BenchEngine, EngineFactory, EngineInfo};
use crate::peers::check_sorted_unique;

/// Tail slots per detected group in `xindex-seq` (512 KiB for `u64` keys):
/// at the bench's insert rates, about the keys that arrive between two
/// maintenance passes (20 ms).
pub const SEQ_CAPACITY: usize = 16_384;

/// Factory for the `xindex` engine, or with `sequential` for `xindex-seq`.
#[derive(Clone, Copy, Debug, Default)]
pub struct XIndexFactory {
    /// Whether to give the index the sequential-insert hint.
    pub sequential: bool,
}

/// The `xindex` engine.
pub const XINDEX: XIndexFactory = XIndexFactory { sequential: false };

/// The `xindex-seq` engine: `xindex` with the sequential hint.
pub const XINDEX_SEQ: XIndexFactory = XIndexFactory { sequential: true };

impl EngineFactory for XIndexFactory {
    fn info(&self) -> EngineInfo {
        if self.sequential {
            EngineInfo::in_memory(
                "xindex-seq",
                "lidx XIndex-R with the sequential-insert hint (append tails where ascending inserts are detected)",
            )
            .with_floor()
        } else {
            EngineInfo::in_memory(
                "xindex",
                "lidx XIndex-R (learned groups, B-tree deltas, background compaction)",
            )
            .with_floor()
        }
    }

    fn build(
        &self,
        pairs: &[(u64, u64)],
        _dir: &Path,
        _writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        let config = Config {
            sequential_capacity: if self.sequential { SEQ_CAPACITY } else { 0 },
            ..Config::default()
        };
        build(pairs, config)
    }
}

fn build(pairs: &[(u64, u64)], config: Config) -> Result<Box<dyn BenchEngine>> {
    check_sorted_unique(pairs)?;
    let index = XIndex::bulk_load(pairs.iter().copied(), config)?;
    Ok(Box::new(XIndexEngine { index }))
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

    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        Ok(self.index.upper_bound(std::ops::Bound::Included(&key)))
    }

    fn maintenance_count(&self) -> Option<u64> {
        let s = self.index.stats();
        Some(
            s.compactions
                + s.model_splits
                + s.model_merges
                + s.group_splits
                + s.group_merges
                + s.root_updates,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintenance_count_follows_the_background_work() {
        let pairs: Vec<(u64, u64)> = (0..10_000u64).map(|k| (k * 4, k)).collect();
        let dir = tempfile::tempdir().unwrap();
        let engine = XINDEX.build(&pairs, dir.path(), true).unwrap();
        let before = engine.maintenance_count().unwrap();
        // Far past the delta threshold of the groups they land in.
        for k in 0..5_000u64 {
            engine.insert(k * 4 + 1, k).unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while engine.maintenance_count().unwrap() == before {
            assert!(
                std::time::Instant::now() < deadline,
                "no background compaction within 20 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(engine.get(4 * 77 + 1).unwrap(), Some(77));
    }
}
