//! # lidx-air
//!
//! AirIndex (Chockchowwat, Liu, Park, SIGMOD 2024): a read-only index over a
//! sorted key set stored on any [`lidx_core::storage::Storage`], whose stack of
//! layers is searched for (AirTune) to minimise the expected first-lookup
//! latency under a measured [`lidx_core::storage::StorageProfile`].
#![warn(missing_docs)]

pub mod baseline;
pub mod build;
pub mod builders;
pub mod design;
pub mod format;
pub mod geometry;
pub mod greedy;
pub mod index;
pub mod keypos;
pub mod node;
pub mod tune;

pub use build::{DataInput, DesignChoice, build};
pub use design::{DesignReport, LayerReport};
pub use index::{AirIndex, Entry, RangeIter};
pub use tune::{TuneConfig, Tuned};
