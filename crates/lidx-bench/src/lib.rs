//! # lidx-bench
//!
//! Datasets, workloads, peer adapters, the benchmark runner and the report
//! generator used by `lidx bench`, `lidx demo` and `lidx report`.
#![warn(missing_docs)]

pub mod engine;
pub mod workload;
pub mod r#gen;
pub mod results;
pub mod peers;
pub mod report;
pub mod datasets;
pub mod alloc;
pub mod build_info;
pub mod registry;
pub mod runner;
