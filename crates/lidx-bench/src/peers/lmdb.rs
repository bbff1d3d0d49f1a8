//! `lmdb`: LMDB through the `heed` crate, one unnamed database `u64 -> u64`.
//!
//! Keys are stored big-endian so LMDB's default byte-wise comparison is the
//! numeric order; values are native-endian. The bulk load appends the sorted
//! pairs (`MDB_APPEND`) in one write transaction and then syncs.
//!
//! Durability: the environment is opened with `MDB_NOSYNC`, so every insert or
//! remove is its own committed write transaction (visible to readers, written
//! to the OS page cache) but is not fsynced; [`BenchEngine::sync`] calls
//! `mdb_env_sync(force)`. This matches the `redb` and `fjall` peers.
//!
//! The memory map is sized from the bulk load with generous headroom for
//! inserts and copy-on-write pages; it is address space, not allocated disk.
//! Running out of it surfaces as an `MDB_MAP_FULL` backend error.

use std::path::{Path, PathBuf};

use heed::byteorder::{BigEndian, NativeEndian};
use heed::types::U64;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, PutFlags};
use lidx_core::Result;

use super::{backend, check_sorted_unique, dir_bytes};
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

const ENGINE: &str = "lmdb";

/// Map bytes reserved per bulk-loaded pair: a leaf entry takes about 26 bytes
/// on a full page, pages split by random inserts are half full, and
/// copy-on-write keeps freed pages around between transactions.
const MAP_BYTES_PER_PAIR: usize = 128;
/// Fixed headroom for writes beyond the bulk load.
const MAP_HEADROOM: usize = 1 << 30;
/// The map size must be a multiple of the OS page size; 64 KiB covers them all.
const MAP_ALIGN: usize = 1 << 16;

type Table = Database<U64<BigEndian>, U64<NativeEndian>>;

/// Factory for the `lmdb` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct LmdbFactory;

impl EngineFactory for LmdbFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: ENGINE,
            description: "LMDB via heed 0.22 (copy-on-write B+-tree, mmap)",
            durability: "commit per op, no fsync (MDB_NOSYNC); fsync on sync()",
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
        let map_size = pairs
            .len()
            .saturating_mul(MAP_BYTES_PER_PAIR)
            .saturating_add(MAP_HEADROOM)
            .next_multiple_of(MAP_ALIGN);
        let mut options = EnvOpenOptions::new();
        options.map_size(map_size).max_dbs(1);
        // SAFETY: NO_SYNC only weakens crash durability (the documented reason
        // `flags` is unsafe); the benchmark states it in the durability string
        // and `sync()` restores it on demand.
        unsafe {
            options.flags(EnvFlags::NO_SYNC);
        }
        // SAFETY: the directory is private to this engine and nothing else
        // in or out of the process opens or modifies its files.
        let env = unsafe { options.open(dir) }.map_err(|e| backend(ENGINE, e))?;

        let mut wtxn = env.write_txn().map_err(|e| backend(ENGINE, e))?;
        let db: Table = env
            .create_database(&mut wtxn, None)
            .map_err(|e| backend(ENGINE, e))?;
        for (k, v) in pairs {
            db.put_with_flags(&mut wtxn, PutFlags::APPEND, k, v)
                .map_err(|e| backend(ENGINE, e))?;
        }
        wtxn.commit().map_err(|e| backend(ENGINE, e))?;
        env.force_sync().map_err(|e| backend(ENGINE, e))?;

        Ok(Box::new(LmdbEngine {
            env,
            db,
            dir: dir.to_path_buf(),
        }))
    }
}

struct LmdbEngine {
    env: Env,
    db: Table,
    dir: PathBuf,
}

impl BenchEngine for LmdbEngine {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        let rtxn = self.env.read_txn().map_err(|e| backend(ENGINE, e))?;
        self.db.get(&rtxn, &key).map_err(|e| backend(ENGINE, e))
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        let mut wtxn = self.env.write_txn().map_err(|e| backend(ENGINE, e))?;
        self.db
            .put(&mut wtxn, &key, &value)
            .map_err(|e| backend(ENGINE, e))?;
        wtxn.commit().map_err(|e| backend(ENGINE, e))
    }

    fn remove(&self, key: u64) -> Result<bool> {
        let mut wtxn = self.env.write_txn().map_err(|e| backend(ENGINE, e))?;
        let removed = self
            .db
            .delete(&mut wtxn, &key)
            .map_err(|e| backend(ENGINE, e))?;
        wtxn.commit().map_err(|e| backend(ENGINE, e))?;
        Ok(removed)
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        let rtxn = self.env.read_txn().map_err(|e| backend(ENGINE, e))?;
        let range = self
            .db
            .range(&rtxn, &(start..))
            .map_err(|e| backend(ENGINE, e))?;
        for item in range.take(n) {
            out.push(item.map_err(|e| backend(ENGINE, e))?);
        }
        Ok(())
    }

    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        let rtxn = self.env.read_txn().map_err(|e| backend(ENGINE, e))?;
        let mut range = self
            .db
            .rev_range(&rtxn, &(..=key))
            .map_err(|e| backend(ENGINE, e))?;
        range.next().transpose().map_err(|e| backend(ENGINE, e))
    }

    fn sync(&self) -> Result<()> {
        self.env.force_sync().map_err(|e| backend(ENGINE, e))
    }

    fn disk_bytes(&self) -> Option<u64> {
        dir_bytes(&self.dir).ok()
    }
}

/// LMDB opened afresh for every lookup, for cold first-query measurements
/// (`lidx air compare --local-dir`): AirIndex's first query includes
/// reading its root, so LMDB's must include opening its environment.
pub struct LmdbCold {
    dir: PathBuf,
}

impl LmdbCold {
    /// Writes `keys` (sorted; duplicates keep their first rank) with their
    /// ranks as values into a fresh environment in `dir` (anything already
    /// there is removed), synced.
    pub fn create(dir: &Path, keys: &[u64]) -> Result<Self> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| lidx_core::Error::io(dir, e))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| lidx_core::Error::io(dir, e))?;
        let mut pairs: Vec<(u64, u64)> = keys
            .iter()
            .enumerate()
            .map(|(i, &k)| (k, i as u64))
            .collect();
        pairs.dedup_by(|a, b| a.0 == b.0);
        let engine = LmdbFactory.build(&pairs, dir, false)?;
        engine.sync()?;
        drop(engine);
        Ok(LmdbCold {
            dir: dir.to_path_buf(),
        })
    }

    /// Drops the environment's file from the OS page cache.
    pub fn evict(&self) -> Result<()> {
        use lidx_core::storage::Storage;
        let local = lidx_core::storage::LocalDir::open(&self.dir, Default::default())?;
        local.evict("data.mdb")
    }

    /// Opens the environment, looks `key` up and closes it again; returns
    /// the value and the time from opening to the answer (closing is not
    /// counted).
    pub fn cold_get(&self, key: u64) -> Result<(Option<u64>, std::time::Duration)> {
        let started = std::time::Instant::now();
        let mut options = EnvOpenOptions::new();
        options.max_dbs(1);
        // SAFETY: the directory was written by `create` and nothing else in
        // or out of the process modifies its files while it is open.
        let env = unsafe { options.open(&self.dir) }.map_err(|e| backend(ENGINE, e))?;
        let found = {
            let rtxn = env.read_txn().map_err(|e| backend(ENGINE, e))?;
            let db: Option<Table> = env
                .open_database(&rtxn, None)
                .map_err(|e| backend(ENGINE, e))?;
            let db = db.ok_or_else(|| backend(ENGINE, "database missing"))?;
            db.get(&rtxn, &key).map_err(|e| backend(ENGINE, e))?
        };
        let elapsed = started.elapsed();
        env.prepare_for_closing().wait();
        Ok((found, elapsed))
    }
}
