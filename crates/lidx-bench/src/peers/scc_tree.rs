//! `scc-tree`: `scc::TreeIndex`, a lock-free-read concurrent B+-tree.
//!
//! `TreeIndex::insert_sync` refuses existing keys, so inserts use
//! `upsert_sync`, which the crate documents as an atomic remove-then-insert of
//! the entry (not an in-place update): readers see either the old or the new
//! value, never a missing key. Scans use `TreeIndex::range`, which
//! guarantees to visit entries present when it started unless they are
//! removed meanwhile, and may momentarily show just-removed entries.
//!
//! `TreeIndex` has no bulk-load API; the bulk load inserts the sorted pairs
//! one by one.

use std::path::Path;

use lidx_core::Result;
use scc::{Guard, TreeIndex};

use super::check_sorted_unique;
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

/// Factory for the `scc-tree` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct SccTreeFactory;

impl EngineFactory for SccTreeFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo::in_memory(
            "scc-tree",
            "scc::TreeIndex (concurrent B+-tree, lock-free reads)",
        )
    }

    fn build(
        &self,
        pairs: &[(u64, u64)],
        _dir: &Path,
        _writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        check_sorted_unique(pairs)?;
        let tree = TreeIndex::new();
        for &(k, v) in pairs {
            // Keys are unique, so a failure here would mean a broken contract check.
            if tree.insert_sync(k, v).is_err() {
                return Err(lidx_core::Error::invalid(format!(
                    "duplicate key {k} in bulk load"
                )));
            }
        }
        Ok(Box::new(SccTreeEngine { tree }))
    }
}

struct SccTreeEngine {
    tree: TreeIndex<u64, u64>,
}

impl BenchEngine for SccTreeEngine {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        Ok(self.tree.peek_with(&key, |_, &v| v))
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        self.tree.upsert_sync(key, value);
        Ok(())
    }

    fn remove(&self, key: u64) -> Result<bool> {
        Ok(self.tree.remove_sync(&key))
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        let guard = Guard::new();
        out.extend(
            self.tree
                .range(start.., &guard)
                .take(n)
                .map(|(&k, &v)| (k, v)),
        );
        Ok(())
    }
}
