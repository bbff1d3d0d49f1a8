//! The human- and machine-readable record of a chosen design
//! (`design.json`): layers, node types, sizes, expected read sizes and the
//! modelled cost.

use lidx_core::storage::StorageProfile;

use crate::format::Meta;
use crate::tune::{Tuned, TunedLayer};

/// One index layer of a design.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LayerReport {
    /// 1 = just above the data; the last layer is the root.
    pub level: usize,
    /// Builder that produced it, e.g. `gband(4096)`.
    pub builder: String,
    /// Node type, e.g. `step(16)` or `band`.
    pub node_type: String,
    /// Nodes in the layer.
    pub nodes: u64,
    /// Bytes of the layer on storage (blocks and checksums included).
    pub size_bytes: u64,
    /// Mean bytes a lookup reads from the layer below through this one.
    pub expected_read_bytes: f64,
    /// Mean modelled cost of that read, ns.
    pub expected_read_ns: f64,
}

impl LayerReport {
    /// Report of tuned layer `t` at `level`.
    pub fn new(level: usize, t: &TunedLayer) -> Self {
        LayerReport {
            level,
            builder: t.layer.spec.to_string(),
            node_type: t.layer.kind.to_string(),
            nodes: t.layer.nodes() as u64,
            size_bytes: t.outline.geometry.physical_len(),
            expected_read_bytes: t.expected_read_bytes,
            expected_read_ns: t.expected_cost_ns,
        }
    }
}

/// The design of a built index and how long building took.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DesignReport {
    /// Index layers bottom-up (empty: the data is read whole).
    pub layers: Vec<LayerReport>,
    /// Modelled expected first-lookup latency (Eq. 6), ns.
    pub modeled_cost_ns: f64,
    /// Bytes of the first read (the meta object holding the root).
    pub root_read_bytes: u64,
    /// Modelled cost of that read, ns.
    pub root_cost_ns: f64,
    /// Records in the data layer.
    pub data_records: u64,
    /// Distinct keys.
    pub distinct_keys: u64,
    /// Bytes of the data object.
    pub data_bytes: u64,
    /// The storage profile the design was tuned for.
    pub profile: String,
    /// Wall time of the whole build, s.
    pub build_s: f64,
    /// Wall time of the search (AirTune), s.
    pub tune_s: f64,
    /// Wall time spent writing objects, s.
    pub write_s: f64,
}

impl DesignReport {
    /// Report for a written index.
    pub fn new(meta: &Meta, tuned: &Tuned, profile: &StorageProfile) -> Self {
        Self::from_tuned(
            tuned,
            meta.data.records,
            meta.distinct_keys,
            meta.data.physical_len(),
            profile,
        )
    }

    /// Report for design `tuned` over a data layer of `data_records`
    /// records (`distinct_keys` distinct), `data_bytes` on storage.
    pub fn from_tuned(
        tuned: &Tuned,
        data_records: u64,
        distinct_keys: u64,
        data_bytes: u64,
        profile: &StorageProfile,
    ) -> Self {
        DesignReport {
            layers: tuned
                .layers
                .iter()
                .enumerate()
                .map(|(i, t)| LayerReport::new(i + 1, t))
                .collect(),
            modeled_cost_ns: tuned.modeled_cost_ns,
            root_read_bytes: tuned.root_read_bytes,
            root_cost_ns: tuned.root_cost_ns,
            data_records,
            distinct_keys,
            data_bytes,
            profile: profile.to_string(),
            build_s: 0.0,
            tune_s: 0.0,
            write_s: 0.0,
        }
    }

    /// A short multi-line summary for the CLI.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "modelled lookup {:.1} us under {}: root read {} B ({:.1} us)\n",
            self.modeled_cost_ns / 1e3,
            self.profile,
            self.root_read_bytes,
            self.root_cost_ns / 1e3
        );
        for l in self.layers.iter().rev() {
            s.push_str(&format!(
                "  layer {}: {} ({}), {} nodes, {} B; reads {:.0} B below ({:.1} us)\n",
                l.level,
                l.builder,
                l.node_type,
                l.nodes,
                l.size_bytes,
                l.expected_read_bytes,
                l.expected_read_ns / 1e3
            ));
        }
        s.push_str(&format!(
            "  data: {} records ({} distinct keys), {} B\n",
            self.data_records, self.distinct_keys, self.data_bytes
        ));
        if self.build_s > 0.0 {
            s.push_str(&format!(
                "  built in {:.2} s (tuning {:.2} s, writing {:.2} s)\n",
                self.build_s, self.tune_s, self.write_s
            ));
        }
        s
    }
}
