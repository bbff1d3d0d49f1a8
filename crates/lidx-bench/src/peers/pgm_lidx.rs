//! `pgm-lidx`: placeholder until lidx-core's optimal PLA lands.
use std::path::Path;

use lidx_core::{Error, Result};

use crate::engine::{BenchEngine, EngineFactory, EngineInfo};

/// Factory for the `pgm-lidx` peer.
#[derive(Clone, Copy, Debug, Default)]
pub struct PgmLidxFactory;

impl EngineFactory for PgmLidxFactory {
    fn info(&self) -> EngineInfo {
        EngineInfo {
            name: "pgm-lidx",
            description: "PGM-index (eps 64/4) built from lidx-core's optimal PLA",
            durability: "in-memory",
            writable: false,
            persistent: false,
        }
    }

    fn build(
        &self,
        _pairs: &[(u64, u64)],
        _dir: &Path,
        _writes_expected: bool,
    ) -> Result<Box<dyn BenchEngine>> {
        Err(Error::Unsupported("pgm-lidx: not yet".into()))
    }
}
