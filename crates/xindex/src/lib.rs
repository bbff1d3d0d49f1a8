//! # lidx-xindex: XIndex-R
//!
//! A concurrent learned ordered map after Wang et al., "The Concurrent
//! Learned Indexes for Multicore Data Storage" (ACM ToS 2022), §3.
//!
//! A root RMI routes a key to a *group*: a sorted record array of fixed
//! shape with up to `m` linear models, plus a concurrent delta index for
//! inserts. Updates and removes happen in place under per-record version
//! words, so they never block readers, and the delta index is a B+-tree
//! whose readers validate node versions instead of locking (§3.5.1); a
//! background thread compacts deltas into
//! new arrays with Two-Phase Compaction and adapts the structure (model
//! split/merge, group split/merge, root update) without blocking anyone.
//! Memory is reclaimed with `crossbeam-epoch`; see
//! `docs/xindex-concurrency.md` for the protocol and its correctness
//! argument.
//!
//! ```
//! use lidx_xindex::{Config, XIndex};
//!
//! let index = XIndex::bulk_load((0..1000u64).map(|k| (k * 2, k)), Config::default()).unwrap();
//! assert_eq!(index.get(&10), Some(5));
//! assert_eq!(index.insert(11, 7), None);
//! assert_eq!(index.try_insert(11, 8), Err(7)); // present: not written
//! assert_eq!(index.compare_exchange(&11, Some(7), Some(8)), Ok(Some(7)));
//! assert_eq!(index.remove(&10), Some(5));
//! let mut out = Vec::new();
//! index.scan(&9, 3, &mut out);
//! assert_eq!(out, vec![(11, 8), (12, 6), (14, 7)]);
//! ```
#![warn(missing_docs)]

mod arena;
mod budget;
mod config;
mod delta;
mod delta_tree;
mod group;
mod hint;
mod hooks;
mod index;
mod inner;
mod maintenance;
mod node_slab;
mod pages;
mod parallel;
mod pivot_pla;
mod reclaim;
mod record;
mod root;
mod shard;
mod stats;
mod submodels;
mod sync;
mod tail;
mod value;

#[cfg(all(test, not(xindex_loom)))]
mod tests;

pub use config::{Config, MAX_MODELS, MAX_SEQUENTIAL_CAPACITY, SequentialGroups};
pub use index::{Range, XIndex};
pub use stats::{GroupStats, Stats};
pub use value::Value;
