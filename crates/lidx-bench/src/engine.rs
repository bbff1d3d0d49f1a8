//! The adapter trait every benchmarked engine and peer implements.
//!
//! The benchmark speaks `u64 -> u64` so that learned indexes, in-memory maps
//! and disk key-value stores can run the same operation streams in the same
//! process. Operations take `&self`: engines that are not internally
//! concurrent wrap themselves in a lock, as a user would.

use std::path::Path;

use lidx_core::{Error, Result};

/// One running instance of an engine under test.
pub trait BenchEngine: Send + Sync {
    /// Value stored under `key`, if any.
    fn get(&self, key: u64) -> Result<Option<u64>>;
    /// Inserts or overwrites `key`.
    fn insert(&self, key: u64, value: u64) -> Result<()>;
    /// Removes `key`; `true` if it was present.
    fn remove(&self, key: u64) -> Result<bool>;
    /// Clears `out` and fills it with up to `n` pairs with key >= `start`, ascending.
    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()>;
    /// Clears `out` and fills it with the value of each of `keys`, in
    /// order. Engines with a batched lookup override this; the default is
    /// what a user of a map without one writes: a loop of [`get`](Self::get).
    fn get_many(&self, keys: &[u64], out: &mut Vec<Option<u64>>) -> Result<()> {
        out.clear();
        for &key in keys {
            out.push(self.get(key)?);
        }
        Ok(())
    }
    /// The record with the largest key `<= key` (a predecessor query), if
    /// any. Engines without one keep this default, and
    /// [`EngineInfo::floor`] says so, so the runner skips them on `floor`.
    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        let _ = key;
        Err(Error::Unsupported(
            "this engine has no predecessor query".to_owned(),
        ))
    }
    /// Makes every earlier write durable (no-op for in-memory engines).
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    /// Bytes the engine occupies on disk, for persistent engines.
    fn disk_bytes(&self) -> Option<u64> {
        None
    }
    /// Structural changes the engine's own background work has made so
    /// far (compactions, splits, merges), for engines that run any. The
    /// runner reads it before and after the streams, so a row shows
    /// whether its latencies were measured while that work ran.
    fn maintenance_count(&self) -> Option<u64> {
        None
    }
}

/// What the runner needs to know about an engine before building it.
#[derive(Clone, Copy, Debug)]
pub struct EngineInfo {
    /// Name used on the command line and in reports.
    pub name: &'static str,
    /// One-line description (crate and structure).
    pub description: &'static str,
    /// Durability setting, written into every result row; `"in-memory"` for
    /// engines without persistence.
    pub durability: &'static str,
    /// Whether the engine accepts inserts and removes.
    pub writable: bool,
    /// Whether the engine keeps its data in files (then a temp dir is provided).
    pub persistent: bool,
    /// Whether the engine answers [`BenchEngine::floor`].
    pub floor: bool,
}

impl EngineInfo {
    /// Facts of a writable in-memory engine.
    pub const fn in_memory(name: &'static str, description: &'static str) -> Self {
        EngineInfo {
            name,
            description,
            durability: "in-memory",
            writable: true,
            persistent: false,
            floor: false,
        }
    }

    /// These facts, for an engine that answers [`BenchEngine::floor`].
    pub const fn with_floor(self) -> Self {
        EngineInfo {
            floor: true,
            ..self
        }
    }
}

/// Builds an engine from a sorted, duplicate-free bulk load.
pub trait EngineFactory: Send + Sync {
    /// Static facts about the engine.
    fn info(&self) -> EngineInfo;
    /// Bulk-loads `pairs` (sorted by key, unique keys). `dir` is an empty
    /// directory the engine may use for its files. `writes_expected` tells
    /// engines that have separate static and dynamic variants which to build.
    fn build(
        &self,
        pairs: &[(u64, u64)],
        dir: &Path,
        writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>>;
}
