//! `redb`: the `redb` crate's copy-on-write B-tree, one table `u64 -> u64`.
//!
//! The bulk load inserts the sorted pairs in one write transaction committed
//! with the default `Durability::Immediate` (fsynced).
//!
//! Durability: every insert or remove is its own write transaction committed
//! with `Durability::None`: visible to later readers at once but not
//! persisted; [`BenchEngine::sync`] commits an empty transaction with
//! `Durability::Immediate`, which makes all earlier commits durable. This
//! matches the `lmdb` and `fjall` peers (commit per op, no fsync per op).
//!
//! redb can only reclaim pages freed by non-durable commits after a durable
//! one, so long write runs without `sync()` grow the file; that is the
//! crate's documented trade-off and is left visible in `disk_bytes`.

use std::path::{Path, PathBuf};

use ::redb::{Database, Durability, ReadableDatabase, TableDefinition};
use lidx_core::Result;

use super::{backend, check_sorted_unique, dir_bytes};
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

const ENGINE: &str = "redb";
const TABLE: TableDefinition<'static, u64, u64> = TableDefinition::new("kv");
const FILE: &str = "bench.redb";

/// Factory for the `redb` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedbFactory;

impl EngineFactory for RedbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: ENGINE,
            description: "redb 3.1 (copy-on-write B-tree, one table)",
            durability: "commit per op, no fsync (Durability::None); fsync on sync() (Durability::Immediate)",
            writable: true,
            persistent: true,
            floor: true,
        }
    }

    fn build(
        &self,
        pairs: &[(u64, u64)],
        dir: &Path,
        _writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        check_sorted_unique(pairs)?;
        let db = Database::create(dir.join(FILE)).map_err(|e| backend(ENGINE, e))?;
        let txn = db.begin_write().map_err(|e| backend(ENGINE, e))?;
        {
            let mut table = txn.open_table(TABLE).map_err(|e| backend(ENGINE, e))?;
            for &(k, v) in pairs {
                table.insert(k, v).map_err(|e| backend(ENGINE, e))?;
            }
        }
        txn.commit().map_err(|e| backend(ENGINE, e))?;
        Ok(Box::new(RedbEngine {
            db,
            dir: dir.to_path_buf(),
        }))
    }
}

struct RedbEngine {
    db: Database,
    dir: PathBuf,
}

impl RedbEngine {
    /// Runs `f` on the table inside one write transaction committed with `durability`.
    fn write<T>(
        &self,
        durability: Durability,
        f: impl FnOnce(&mut ::redb::Table<'_, u64, u64>) -> Result<T>,
    ) -> Result<T> {
        let mut txn = self.db.begin_write().map_err(|e| backend(ENGINE, e))?;
        txn.set_durability(durability)
            .map_err(|e| backend(ENGINE, e))?;
        let out = {
            let mut table = txn.open_table(TABLE).map_err(|e| backend(ENGINE, e))?;
            f(&mut table)?
        };
        txn.commit().map_err(|e| backend(ENGINE, e))?;
        Ok(out)
    }
}

impl BenchEngine for RedbEngine {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        let txn = self.db.begin_read().map_err(|e| backend(ENGINE, e))?;
        let table = txn.open_table(TABLE).map_err(|e| backend(ENGINE, e))?;
        let value = table.get(key).map_err(|e| backend(ENGINE, e))?;
        Ok(value.map(|g| g.value()))
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        self.write(Durability::None, |table| {
            table
                .insert(key, value)
                .map(drop)
                .map_err(|e| backend(ENGINE, e))
        })
    }

    fn remove(&self, key: u64) -> Result<bool> {
        self.write(Durability::None, |table| {
            table
                .remove(key)
                .map(|old| old.is_some())
                .map_err(|e| backend(ENGINE, e))
        })
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        let txn = self.db.begin_read().map_err(|e| backend(ENGINE, e))?;
        let table = txn.open_table(TABLE).map_err(|e| backend(ENGINE, e))?;
        let range = table.range(start..).map_err(|e| backend(ENGINE, e))?;
        for item in range.take(n) {
            let (k, v) = item.map_err(|e| backend(ENGINE, e))?;
            out.push((k.value(), v.value()));
        }
        Ok(())
    }

    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        let txn = self.db.begin_read().map_err(|e| backend(ENGINE, e))?;
        let table = txn.open_table(TABLE).map_err(|e| backend(ENGINE, e))?;
        let mut range = table.range(..=key).map_err(|e| backend(ENGINE, e))?;
        match range.next_back() {
            Some(item) => {
                let (k, v) = item.map_err(|e| backend(ENGINE, e))?;
                Ok(Some((k.value(), v.value())))
            }
            None => Ok(None),
        }
    }

    fn sync(&self) -> Result<()> {
        self.write(Durability::Immediate, |_| Ok(()))
    }

    fn disk_bytes(&self) -> Option<u64> {
        dir_bytes(&self.dir).ok()
    }
}
