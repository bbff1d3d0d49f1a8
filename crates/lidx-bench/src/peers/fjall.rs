//! `fjall`: the `fjall` LSM-tree, one keyspace `u64 -> u64`.
//!
//! Keys are 8 bytes big-endian so that byte order is numeric order and range
//! scans come out sorted; values are 8 bytes big-endian too. The bulk load
//! uses fjall's ingestion API (sorted input written straight into tables),
//! then persists. Background flushing and compaction run on fjall's own
//! worker threads with its default settings.
//!
//! Durability: each insert or remove is written to the journal and flushed
//! to the OS (`PersistMode::Buffer`, fjall's default per-write behaviour) but
//! not fsynced; [`BenchEngine::sync`] calls `Database::persist(SyncAll)`.
//! This matches the `lmdb` and `redb` peers.
//!
//! fjall's `remove` writes a tombstone without reporting whether the key
//! existed, so a remove first checks `contains_key` (and skips the tombstone
//! for absent keys). The check and the tombstone are not one atomic step:
//! two threads removing the same key may both report `true`.

use std::path::{Path, PathBuf};

use ::fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use lidx_core::{Error, Result};

use super::{backend, check_sorted_unique, dir_bytes};
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

const ENGINE: &str = "fjall";
const KEYSPACE: &str = "kv";

/// Factory for the `fjall` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct FjallFactory;

impl EngineFactory for FjallFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: ENGINE,
            description: "fjall 3.1 (LSM-tree, one keyspace, big-endian keys)",
            durability: "write per op, journal flushed to OS, no fsync (PersistMode::Buffer); fsync on sync() (SyncAll)",
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
        let db = Database::builder(dir)
            .cache_size(CACHE_BYTES)
            .open()
            .map_err(|e| backend(ENGINE, e))?;
        let keyspace = db
            .keyspace(KEYSPACE, KeyspaceCreateOptions::default)
            .map_err(|e| backend(ENGINE, e))?;
        if !pairs.is_empty() {
            let mut ingestion = keyspace.start_ingestion().map_err(|e| backend(ENGINE, e))?;
            for &(k, v) in pairs {
                ingestion
                    .write(k.to_be_bytes(), v.to_be_bytes())
                    .map_err(|e| backend(ENGINE, e))?;
            }
            ingestion.finish().map_err(|e| backend(ENGINE, e))?;
        }
        db.persist(PersistMode::SyncAll)
            .map_err(|e| backend(ENGINE, e))?;
        Ok(Box::new(FjallEngine {
            db,
            keyspace,
            dir: dir.to_path_buf(),
        }))
    }
}

/// Block cache, sized like the other engines' working sets (a user running
/// a 3M-key set would not keep fjall's small default).
const CACHE_BYTES: u64 = 256 * 1024 * 1024;

struct FjallEngine {
    db: Database,
    keyspace: Keyspace,
    dir: PathBuf,
}

/// Decodes an 8-byte big-endian key or value written by this adapter.
fn decode(bytes: &[u8]) -> Result<u64> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| {
        Error::corrupt(format!(
            "fjall: expected an 8-byte key or value, found {} bytes",
            bytes.len()
        ))
    })?;
    Ok(u64::from_be_bytes(arr))
}

impl BenchEngine for FjallEngine {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        let value = self
            .keyspace
            .get(key.to_be_bytes())
            .map_err(|e| backend(ENGINE, e))?;
        value.map(|v| decode(&v)).transpose()
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        self.keyspace
            .insert(key.to_be_bytes(), value.to_be_bytes())
            .map_err(|e| backend(ENGINE, e))
    }

    fn remove(&self, key: u64) -> Result<bool> {
        let k = key.to_be_bytes();
        if !self
            .keyspace
            .contains_key(k)
            .map_err(|e| backend(ENGINE, e))?
        {
            return Ok(false);
        }
        self.keyspace.remove(k).map_err(|e| backend(ENGINE, e))?;
        Ok(true)
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        for guard in self.keyspace.range(start.to_be_bytes()..).take(n) {
            let (k, v) = guard.into_inner().map_err(|e| backend(ENGINE, e))?;
            out.push((decode(&k)?, decode(&v)?));
        }
        Ok(())
    }

    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        match self.keyspace.range(..=key.to_be_bytes()).next_back() {
            Some(guard) => {
                let (k, v) = guard.into_inner().map_err(|e| backend(ENGINE, e))?;
                Ok(Some((decode(&k)?, decode(&v)?)))
            }
            None => Ok(None),
        }
    }

    fn sync(&self) -> Result<()> {
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| backend(ENGINE, e))
    }

    fn disk_bytes(&self) -> Option<u64> {
        dir_bytes(&self.dir).ok()
    }
}
