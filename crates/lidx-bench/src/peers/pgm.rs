//! `pgm`: the `pgm-extra` crate's PGM-index, used as published.
//!
//! * Read-only runs (`writes_expected == false`) get its multi-level
//!   `Static` index (eps = 64, recursive eps = 4, the published PGM
//!   defaults) over the key array; the index only stores segments, so values
//!   live in a parallel array addressed by the position `Static::lower_bound`
//!   answers. Writes on this variant return [`Error::Unsupported`].
//! * Write runs get its `Dynamic` index behind a `parking_lot::RwLock` (its
//!   writes take `&mut self`). `Dynamic` is a *set*; the map stores
//!   `Entry` values ordered and indexed by key only, and a lookup is
//!   `Dynamic::lower_bound` followed by a key comparison.
//!
//! Known defects of the crate are *not* worked around, so the runner's
//! wrong-answer counts show them: its `Static` search misses a fraction of
//! present keys on some key sets (the predicted window does not always
//! contain the key).
//!
//! Two API gaps of `Dynamic` are bridged the way a user would have to:
//! * `Dynamic::insert` keeps the old element when an equal one is buffered
//!   (it is a `BTreeSet` insert), so an upsert removes the key first.
//! * `Dynamic::remove` reports `true` for a base key that was already
//!   removed (it consults the base index without its delete buffer), so a
//!   remove first asks `Dynamic::contains`.
//!
//! Scans on `Dynamic` step with `lower_bound(last + 1)`: its `range` method
//! filters the whole base array from the start, which makes one short scan
//! cost O(n).

use std::cmp::Ordering;
use std::path::Path;

use lidx_core::{Error, Result};
use parking_lot::RwLock;
use pgm_extra::index::key::Indexable;
use pgm_extra::{Dynamic, Static};

use super::sorted_columns::SortedColumns;
use super::{backend, check_sorted_unique};
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

/// Error bound of the bottom (data) level.
const EPSILON: usize = 64;
/// Error bound of the upper (recursive) levels.
const EPSILON_RECURSIVE: usize = 4;

/// Factory for the `pgm` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct PgmFactory;

impl EngineFactory for PgmFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo::in_memory(
            "pgm",
            "pgm-extra 1.3 PGM-index: Static (read-only runs) or Dynamic behind a RwLock (write runs), eps 64/4",
        )
    }

    fn build(
        &self,
        pairs: &[(u64, u64)],
        _dir: &Path,
        writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        check_sorted_unique(pairs)?;
        if writes_expected {
            let entries: Vec<Entry> = pairs
                .iter()
                .map(|&(key, value)| Entry { key, value })
                .collect();
            let index = Dynamic::from_sorted(entries, EPSILON, EPSILON_RECURSIVE)
                .map_err(|e| backend("pgm-extra", e))?;
            Ok(Box::new(PgmDynamic {
                index: RwLock::new(index),
            }))
        } else {
            let columns = SortedColumns::from_pairs(pairs);
            // `Static::new` rejects empty input; an empty map needs no index.
            let index = if columns.keys.is_empty() {
                None
            } else {
                Some(
                    Static::new(&columns.keys, EPSILON, EPSILON_RECURSIVE)
                        .map_err(|e| backend("pgm-extra", e))?,
                )
            };
            Ok(Box::new(PgmStatic { index, columns }))
        }
    }
}

/// A map entry stored in the `Dynamic` set: ordered, compared and indexed by
/// key only, so a probe with any value finds the stored entry.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    value: u64,
}

impl Entry {
    fn probe(key: u64) -> Self {
        Entry { key, value: 0 }
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

impl Indexable for Entry {
    type Key = u64;

    fn index_key(&self) -> u64 {
        self.key
    }
}

/// Read-only variant: `Static` index over `keys`, values in a parallel array.
struct PgmStatic {
    index: Option<Static<u64>>,
    columns: SortedColumns,
}

impl PgmStatic {
    /// First position whose key is `>= key`, as the index answers it.
    fn position(&self, key: u64) -> usize {
        self.index
            .as_ref()
            .map_or(0, |index| index.lower_bound(&self.columns.keys, &key))
    }
}

fn read_only() -> Error {
    Error::Unsupported(
        "pgm was built as a read-only Static index (writes_expected = false)".to_string(),
    )
}

impl BenchEngine for PgmStatic {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        Ok(self.columns.value_at(self.position(key), key))
    }

    fn insert(&self, _key: u64, _value: u64) -> Result<()> {
        Err(read_only())
    }

    fn remove(&self, _key: u64) -> Result<bool> {
        Err(read_only())
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        self.columns.scan_from(self.position(start), n, out);
        Ok(())
    }
}

/// Write variant: `Dynamic` index of [`Entry`]s behind a lock.
struct PgmDynamic {
    index: RwLock<Dynamic<Entry>>,
}

impl BenchEngine for PgmDynamic {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        let index = self.index.read();
        Ok(index
            .lower_bound(&Entry::probe(key))
            .filter(|e| e.key == key)
            .map(|e| e.value))
    }

    fn insert(&self, key: u64, value: u64) -> Result<()> {
        let mut index = self.index.write();
        index.remove(&Entry::probe(key));
        index.insert(Entry { key, value });
        Ok(())
    }

    fn remove(&self, key: u64) -> Result<bool> {
        let probe = Entry::probe(key);
        let mut index = self.index.write();
        Ok(index.contains(&probe) && index.remove(&probe))
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        out.clear();
        let index = self.index.read();
        let mut next = Some(start);
        while out.len() < n {
            let Some(from) = next else { break };
            let Some(e) = index.lower_bound(&Entry::probe(from)) else {
                break;
            };
            out.push((e.key, e.value));
            next = e.key.checked_add(1);
        }
        Ok(())
    }
}
