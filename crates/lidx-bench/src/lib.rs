//! # lidx-bench
//!
//! Datasets, workloads, peer adapters, the benchmark runner and the report
//! generator used by `lidx bench`, `lidx demo` and `lidx report`.
#![warn(missing_docs)]

pub mod build_info;
pub mod datasets;
pub mod engine;
pub mod engines;
pub mod keygen;
pub mod peers;
pub mod registry;
pub mod report;
pub mod results;
pub mod runner;
pub mod summary;
pub mod workload;
