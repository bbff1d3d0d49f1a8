//! Adapters that run established crates through the [`BenchEngine`] interface.
//!
//! Each peer is used the way a user of that crate would use it for a
//! `u64 -> u64` map shared between threads; the module docs of every peer
//! state the structure, how upserts are expressed and, for the persistent
//! ones, the durability setting.
//!
//! The three persistent peers ([`lmdb`], [`redb`], [`fjall`]) are configured
//! for the same durability so that their write numbers are comparable: every
//! insert or remove is its own committed write, but nothing is fsynced per
//! operation; [`BenchEngine::sync`] forces everything written so far to stable
//! storage.
//!
//! [`BenchEngine`]: crate::engine::BenchEngine
//! [`BenchEngine::sync`]: crate::engine::BenchEngine::sync

use std::fmt::Display;
use std::path::Path;

use lidx_core::{Error, Result};

use crate::engine::EngineFactory;

pub mod btreemap;
pub mod fjall;
pub mod lmdb;
pub mod pgm;
pub mod pgm_lidx;
pub mod redb;
pub mod scc_tree;
pub mod skipmap;
mod sorted_columns;

/// Every peer factory, in report order.
pub fn all() -> Vec<Box<dyn EngineFactory>> {
    vec![
        Box::new(btreemap::BTreeMapFactory),
        Box::new(scc_tree::SccTreeFactory),
        Box::new(skipmap::SkipMapFactory),
        Box::new(pgm::PgmFactory),
        Box::new(pgm_lidx::PgmLidxFactory),
        Box::new(lmdb::LmdbFactory),
        Box::new(redb::RedbFactory),
        Box::new(fjall::FjallFactory),
    ]
}

/// The peer factory whose [`EngineInfo::name`](crate::engine::EngineInfo::name) is `name`.
pub fn by_name(name: &str) -> Result<Box<dyn EngineFactory>> {
    let peers = all();
    let known: Vec<&'static str> = peers.iter().map(|f| f.info().name).collect();
    peers
        .into_iter()
        .find(|f| f.info().name == name)
        .ok_or_else(|| Error::NotFound(format!("engine '{name}' (known: {})", known.join(", "))))
}

/// Rejects bulk loads that break the factory contract (sorted, unique keys),
/// because several peers would otherwise panic or silently misbehave.
pub(crate) fn check_sorted_unique(pairs: &[(u64, u64)]) -> Result<()> {
    for (i, w) in pairs.windows(2).enumerate() {
        if w[1].0 < w[0].0 {
            return Err(Error::Unsorted { index: i + 1 });
        }
        if w[1].0 == w[0].0 {
            return Err(Error::invalid(format!(
                "duplicate key {} at index {} in bulk load",
                w[1].0,
                i + 1
            )));
        }
    }
    Ok(())
}

/// Wraps a third-party error as [`Error::Backend`].
pub(crate) fn backend(engine: &'static str, err: impl Display) -> Error {
    Error::Backend {
        engine,
        message: err.to_string(),
    }
}

/// Total size of the regular files under `dir`, recursively.
pub(crate) fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            // Subdirectories can vanish while an LSM compacts in the background.
            Err(e) if d != dir && e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&d, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&d, e))?;
            let path = entry.path();
            // Files can vanish the same way; they no longer count.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
