//! `pgm-lidx`: a read-only PGM-index built from lidx-core's optimal PLA.
//!
//! This is the reference PGM structure of Ferragina & Vinciguerra, written
//! against lidx-core's models so that it can be compared with the
//! `pgm-extra` crate on equal terms:
//!
//! * level 0 is the optimal PLA of the keys with error bound 64;
//! * every level above is the optimal PLA of the first keys (origins) of the
//!   level below with error bound 4, until a level has one segment;
//! * a lookup walks down from the top: at each level the chosen segment
//!   predicts a position in the level below, and the segment (or, at the
//!   bottom, the key) is found by [`lidx_core::search`] inside the measured
//!   error window.
//!
//! The windows use each level's *measured* maximum error
//! ([`Fitted::max_error`](lidx_core::model::Fitted)), and the search routines
//! verify that the answer lies in the window and otherwise fall back to an
//! exponential search, so lookups of absent keys are exact as well.
//!
//! Keys and values are kept in parallel arrays. The engine is read-only:
//! inserts and removes return [`Error::Unsupported`].

use std::path::Path;

use lidx_core::model::{LinearModel, PositionModel, optimal_pla};
use lidx_core::{Error, Result, search};

use super::check_sorted_unique;
use super::sorted_columns::SortedColumns;
use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

/// Error bound of the bottom level (over the keys).
const EPSILON: usize = 64;
/// Error bound of the levels over segment origins.
const EPSILON_RECURSIVE: usize = 4;

/// Factory for the `pgm-lidx` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct PgmLidxFactory;

impl EngineFactory for PgmLidxFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "pgm-lidx",
            description: "read-only recursive PGM-index (eps 64/4) over lidx-core's optimal PLA",
            durability: "in-memory",
            writable: false,
            persistent: false,
            floor: true,
        }
    }

    fn build(
        &self,
        pairs: &[(u64, u64)],
        _dir: &Path,
        _writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        check_sorted_unique(pairs)?;
        let columns = SortedColumns::from_pairs(pairs);
        let levels = build_levels(&columns.keys)?;
        Ok(Box::new(PgmLidx { levels, columns }))
    }
}

/// One level of the index: its segments and their exact error on the
/// positions they predict (in the level below, or in the keys for level 0).
struct Level {
    /// First key of every segment, ascending.
    origins: Vec<u64>,
    models: Vec<LinearModel<u64>>,
    max_error: usize,
}

impl Level {
    fn fit(keys: &[u64], eps: usize) -> Result<Level> {
        let fitted = optimal_pla::build(keys, eps)?;
        let models = fitted.model.into_segments();
        Ok(Level {
            origins: models.iter().map(|m| m.origin).collect(),
            models,
            max_error: fitted.max_error,
        })
    }
}

/// Levels bottom-up; empty for an empty key set.
fn build_levels(keys: &[u64]) -> Result<Vec<Level>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut levels = vec![Level::fit(keys, EPSILON)?];
    loop {
        let below = &levels[levels.len() - 1];
        if below.origins.len() <= 1 {
            break;
        }
        let above = Level::fit(&below.origins, EPSILON_RECURSIVE)?;
        // Every segment covers at least two distinct points, so levels
        // shrink; should one ever not, the top is searched in full instead
        // of looping.
        if above.origins.len() >= below.origins.len() {
            break;
        }
        levels.push(above);
    }
    Ok(levels)
}

struct PgmLidx {
    levels: Vec<Level>,
    columns: SortedColumns,
}

impl PgmLidx {
    /// Index of the first key `>= key`.
    fn lower_bound(&self, key: u64) -> usize {
        let Some(top) = self.levels.last() else {
            return 0;
        };
        // The segment responsible for `key` is the last one whose origin is
        // <= key (the first one for keys below every origin).
        let mut seg = search::upper_bound(&top.origins, &key).saturating_sub(1);
        for l in (1..self.levels.len()).rev() {
            let below = &self.levels[l - 1].origins;
            let level = &self.levels[l];
            let pos = level.models[seg].predict_pos(&key, below.len());
            seg = search::upper_bound_within(below, &key, pos, level.max_error).saturating_sub(1);
        }
        let bottom = &self.levels[0];
        let keys = &self.columns.keys;
        let pos = bottom.models[seg].predict_pos(&key, keys.len());
        search::lower_bound_within(keys, &key, pos, bottom.max_error)
    }
}

fn read_only() -> Error {
    Error::Unsupported("pgm-lidx is a read-only index".to_string())
}

impl BenchEngine for PgmLidx {
    fn get(&self, key: u64) -> Result<Option<u64>> {
        Ok(self.columns.value_at(self.lower_bound(key), key))
    }

    fn insert(&self, _key: u64, _value: u64) -> Result<()> {
        Err(read_only())
    }

    fn remove(&self, _key: u64) -> Result<bool> {
        Err(read_only())
    }

    fn scan(&self, start: u64, n: usize, out: &mut Vec<(u64, u64)>) -> Result<()> {
        self.columns.scan_from(self.lower_bound(start), n, out);
        Ok(())
    }

    fn floor(&self, key: u64) -> Result<Option<(u64, u64)>> {
        // Records up to and including `key`: those below `key + 1`.
        let at_or_below = match key.checked_add(1) {
            Some(next) => self.lower_bound(next),
            None => self.columns.keys.len(),
        };
        Ok(at_or_below
            .checked_sub(1)
            .map(|i| (self.columns.keys[i], self.columns.values[i])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The structure is a real multi-level PGM: a large skewed key set gets
    /// several levels ending in a single segment, and every level's measured
    /// error stays within its bound (+1 for rounding, see optimal_pla docs).
    #[test]
    fn levels_shrink_to_one_segment_within_bounds() {
        let keys: Vec<u64> = (0..200_000u64)
            .map(|i| i * i * 1024 + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54))
            .collect();
        let levels = build_levels(&keys).unwrap();
        assert!(levels.len() >= 2, "expected a recursive structure");
        assert_eq!(levels.last().unwrap().origins.len(), 1);
        assert!(levels[0].max_error <= EPSILON + 1);
        for w in levels.windows(2) {
            assert!(w[1].origins.len() < w[0].origins.len());
            assert!(w[1].max_error <= EPSILON_RECURSIVE + 1);
        }
        let index = PgmLidx {
            levels,
            columns: SortedColumns {
                values: keys.clone(),
                keys: keys.clone(),
            },
        };
        for (i, &k) in keys.iter().enumerate().step_by(97) {
            assert_eq!(index.lower_bound(k), i);
            assert_eq!(index.lower_bound(k + 1), i + 1);
        }
        assert_eq!(index.lower_bound(u64::MAX), keys.len());
    }
}
