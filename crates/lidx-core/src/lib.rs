//! # lidx-core
//!
//! What every lidx engine shares: the [`Key`] trait, learned
//! [`model`]s with exact error bounds, [`search`] routines over sorted
//! slices, key-set I/O ([`keyset`]), [`checksum`]s for on-disk formats and
//! the one [`Error`] type, and the priority of engines' [`background`]
//! threads.
//!
//! Engines depend on this crate and never on each other.
#![warn(missing_docs)]

pub mod background;
pub mod checksum;
pub mod counting_alloc;
pub mod cpu;
pub mod cpu_cache;
pub mod error;
pub mod huge_pages;
pub mod key;
pub mod keyset;
pub mod model;
pub mod prefetch;
pub mod search;
pub mod storage;

pub use error::{Error, Result};
pub use key::{F64Key, Key};
