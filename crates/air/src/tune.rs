//! AirTune (paper §5, Alg. 2): a guided search over stacks of index layers
//! for the one with the lowest expected first-lookup latency under a
//! [`StorageProfile`].
//!
//! Starting from the data layer, every layer builder proposes a next layer;
//! the candidates are ranked by the step index complexity of what they
//! leave to index (Eq. 12) plus their own expected read cost (Eq. 9); the
//! top-k are explored recursively; the cheapest complete design by the
//! storage-model latency (Eq. 6) wins. A vertex stops growing when even an
//! ideal layer (1 byte, exact) could not beat reading it whole.
//!
//! Costs are exact for the layout the index is written in: a window costs
//! the physical bytes read (whole records, whole checksummed blocks), and
//! the root costs the whole meta object it is embedded in.

use std::sync::Arc;

use lidx_core::storage::StorageProfile;
use lidx_core::{Error, Result};
use rayon::prelude::*;

use crate::builders::{BuilderSpec, Layer};
use crate::format;
use crate::keypos::KeyPositions;

/// Knobs of the search. The defaults are the paper's: λ from 256 B to
/// 1 MiB with base 2, top-k = 5.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneConfig {
    /// Smallest granularity λ in bytes.
    pub lambda_low: u64,
    /// Largest granularity λ in bytes.
    pub lambda_high: u64,
    /// Exponentiation base `1 + ε` of the λ grid (> 1).
    pub base: f64,
    /// Candidates explored further at every vertex.
    pub top_k: usize,
    /// Pieces per node of the GStep family (the paper uses 16).
    pub step_pieces: u32,
    /// Also offer page-shaped step layers (a node of λ bytes whose pieces
    /// each point at λ bytes below, i.e. a B-tree level with λ-byte pages),
    /// so the design space contains every fixed-page B-tree.
    pub page_steps: bool,
    /// Index layers never exceed this many.
    pub max_layers: usize,
    /// Data keys (evenly strided) used to cost layers above the first; all
    /// keys when there are fewer.
    pub cost_sample_keys: usize,
}

impl Default for TuneConfig {
    fn default() -> Self {
        TuneConfig {
            lambda_low: 256,
            lambda_high: 1 << 20,
            base: 2.0,
            top_k: 5,
            step_pieces: 16,
            page_steps: true,
            max_layers: 8,
            cost_sample_keys: 1 << 16,
        }
    }
}

impl TuneConfig {
    /// Checks the knobs, returning [`Error::InvalidArgument`] for nonsense.
    pub fn validate(&self) -> Result<()> {
        if self.lambda_low == 0 || self.lambda_low > self.lambda_high {
            return Err(Error::invalid(format!(
                "lambda range {}..{} is empty: need 0 < low <= high",
                self.lambda_low, self.lambda_high
            )));
        }
        if !(self.base.is_finite() && self.base > 1.0) {
            return Err(Error::invalid(format!(
                "lambda base must be > 1, got {}",
                self.base
            )));
        }
        if self.top_k == 0 {
            return Err(Error::invalid("top-k must be at least 1"));
        }
        if self.step_pieces < 2 {
            return Err(Error::invalid("step nodes need at least 2 pieces"));
        }
        Ok(())
    }

    /// The granularity grid λ_low, λ_low·base, ..., up to λ_high.
    pub fn lambdas(&self) -> Result<Vec<u64>> {
        self.validate()?;
        let mut out = Vec::new();
        let mut l = self.lambda_low as f64;
        while l <= self.lambda_high as f64 * (1.0 + 1e-9) {
            let v = l.round() as u64;
            if out.last() != Some(&v) {
                out.push(v);
            }
            l *= self.base;
            if out.len() > 4096 {
                return Err(Error::invalid("lambda grid has more than 4096 points"));
            }
        }
        Ok(out)
    }

    /// The candidate layer builders 𝓕 (Eq. 8, plus page-shaped steps).
    pub fn builders(&self) -> Result<Vec<BuilderSpec>> {
        let mut out = Vec::new();
        for lambda in self.lambdas()? {
            out.push(BuilderSpec::GStep {
                pieces: self.step_pieces,
                lambda,
            });
            out.push(BuilderSpec::GBand { lambda });
            out.push(BuilderSpec::EBand { lambda });
            if self.page_steps {
                let pieces = page_pieces(lambda);
                if pieces != self.step_pieces {
                    out.push(BuilderSpec::GStep { pieces, lambda });
                }
            }
        }
        Ok(out)
    }
}

/// Pieces of a step node that fills a `page`-byte page (16 bytes a piece
/// plus the closing position), at least 2.
pub fn page_pieces(page: u64) -> u32 {
    (page.saturating_sub(8) / 16).clamp(2, u32::MAX as u64) as u32
}

/// One index layer of a tuned design, with what the model expects of it.
#[derive(Debug, Clone)]
pub struct TunedLayer {
    /// The layer.
    pub layer: Arc<Layer>,
    /// The collection it forms for the layer above (its nodes as records).
    pub outline: Arc<KeyPositions>,
    /// Mean physical bytes a lookup reads from the layer below through it.
    pub expected_read_bytes: f64,
    /// Mean cost of that read, in nanoseconds.
    pub expected_cost_ns: f64,
}

/// A complete design: index layers bottom-up (index 0 sits on the data).
#[derive(Debug, Clone)]
pub struct Tuned {
    /// Index layers, bottom-up. Empty: the data layer itself is the root.
    pub layers: Vec<TunedLayer>,
    /// Bytes of the first read (the meta object holding the root).
    pub root_read_bytes: u64,
    /// Cost of that read, in nanoseconds.
    pub root_cost_ns: f64,
    /// Modelled expected lookup latency (Eq. 6), in nanoseconds.
    pub modeled_cost_ns: f64,
}

/// Expected cost of reading through `layer` into the collection `below`:
/// `(mean physical bytes, mean cost ns)` over query keys X uniform over the
/// data's distinct keys.
///
/// On the data layer the entries *are* the distinct keys, so the mean is
/// exact. Higher up, a query key `x` between two entries gets its own
/// window (a band's centre moves with `x`, and so may the blocks it
/// touches), so the mean is taken over `sample`, evenly strided data keys
/// (all of them for small data), routed to their nodes.
pub fn window_cost(
    layer: &Layer,
    below: &KeyPositions,
    sample: Option<&[u64]>,
    profile: &StorageProfile,
) -> (f64, f64) {
    match sample {
        Some(keys) => sampled_window_cost(layer, below, keys, profile),
        None => entry_window_cost(layer, below, profile),
    }
}

fn sampled_window_cost(
    layer: &Layer,
    below: &KeyPositions,
    sample: &[u64],
    profile: &StorageProfile,
) -> (f64, f64) {
    if sample.is_empty() || layer.nodes() == 0 {
        return (0.0, 0.0);
    }
    let (bytes, cost) = sample
        .par_chunks(4096)
        .map(|chunk| {
            let mut bytes = 0f64;
            let mut cost = 0f64;
            // The node of x: the last whose key is <= x (node 0 below all).
            let mut node = layer.node_keys.partition_point(|&k| k <= chunk[0]).max(1) - 1;
            for &x in chunk {
                while node + 1 < layer.nodes() && layer.node_keys[node + 1] <= x {
                    node += 1;
                }
                let size = below.geometry.read_size(&layer.window(node, x));
                bytes += size as f64;
                cost += profile.cost_ns(size);
            }
            (bytes, cost)
        })
        .reduce(|| (0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    let n = sample.len() as f64;
    (bytes / n, cost / n)
}

/// Evenly strided distinct keys of the data, at most `max` of them.
pub fn cost_sample(data: &KeyPositions, max: usize) -> Vec<u64> {
    let n = data.len();
    if n <= max.max(1) {
        return data.keys.clone();
    }
    (0..max).map(|i| data.keys[i * n / max]).collect()
}

fn entry_window_cost(layer: &Layer, below: &KeyPositions, profile: &StorageProfile) -> (f64, f64) {
    let total = below.total_weight();
    if total == 0 {
        return (0.0, 0.0);
    }
    let (bytes, cost) = (0..layer.nodes())
        .into_par_iter()
        .map(|node| {
            let mut bytes = 0f64;
            let mut cost = 0f64;
            let entries = layer.node_entries[node]..layer.node_entries[node + 1];
            for i in entries {
                let w = below.weights[i] as f64;
                let window = layer.window(node, below.keys[i]);
                let size = below.geometry.read_size(&window);
                bytes += w * size as f64;
                cost += w * profile.cost_ns(size);
            }
            (bytes, cost)
        })
        .reduce(|| (0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    (bytes / total as f64, cost / total as f64)
}

/// Bytes of the meta object when `d` is the root of a design with
/// `index_layers` index layers.
fn root_read_bytes(d: &KeyPositions, index_layers: usize) -> u64 {
    format::meta_len(index_layers, d.geometry.logical_len())
}

/// Step index complexity τ̂ (Eq. 12): the best cost of an ideal step index
/// over `size` bytes, balancing root size and precisions.
pub fn step_index_complexity(size: u64, profile: &StorageProfile) -> f64 {
    const STEP_BYTES: f64 = 16.0;
    let s = size.max(1) as f64;
    let mut best = profile.cost_ns(size);
    let mut layers = 1u32;
    while layers < 64 {
        let l = layers as f64;
        let read = (s * STEP_BYTES.powf(l)).powf(1.0 / (l + 1.0));
        let cost = (l + 1.0) * profile.cost_ns(read.ceil() as u64);
        best = best.min(cost);
        if read <= STEP_BYTES * 2.0 {
            break;
        }
        layers += 1;
    }
    best
}

/// Runs AirTune over the data layer's collection `data`.
pub fn tune(data: &KeyPositions, profile: &StorageProfile, config: &TuneConfig) -> Result<Tuned> {
    let builders = config.builders()?;
    let sample = cost_sample(data, config.cost_sample_keys);
    let search = Search {
        profile,
        config,
        builders: &builders,
        sample: &sample,
    };
    let best = search.best(Arc::new(data.clone()), 0)?;
    let root_read_bytes = root_read_bytes(best.root(data), best.layers.len());
    let root_cost_ns = profile.cost_ns(root_read_bytes);
    Ok(Tuned {
        modeled_cost_ns: best.cost_ns,
        root_read_bytes,
        root_cost_ns,
        layers: best.layers,
    })
}

/// Evaluates a fixed design: `layer_for(level)` gives the builder of every
/// level (1 = on the data) and layers are stacked until one has at most
/// `max_root_nodes` nodes (a B-tree or PGM recursion), up to `max_layers`.
pub fn fixed_design(
    data: &KeyPositions,
    profile: &StorageProfile,
    layer_for: impl Fn(usize) -> BuilderSpec,
    max_root_nodes: usize,
    max_layers: usize,
) -> Result<Tuned> {
    let sample = cost_sample(data, TuneConfig::default().cost_sample_keys);
    let mut layers = Vec::new();
    let mut below = Arc::new(data.clone());
    let mut cost = 0.0;
    while below.len() > max_root_nodes && layers.len() < max_layers {
        let spec = layer_for(layers.len() + 1);
        let layer = Arc::new(spec.build(&below)?);
        let outline = Arc::new(layer.outline(&below, format::BLOCK_TARGET));
        let on_data = layers.is_empty();
        let (bytes, c) = window_cost(&layer, &below, (!on_data).then_some(&sample[..]), profile);
        cost += c;
        let shrank = outline.len() < below.len();
        layers.push(TunedLayer {
            layer,
            outline: outline.clone(),
            expected_read_bytes: bytes,
            expected_cost_ns: c,
        });
        below = outline;
        if !shrank {
            break;
        }
    }
    let root_read_bytes = root_read_bytes(&below, layers.len());
    let root_cost_ns = profile.cost_ns(root_read_bytes);
    Ok(Tuned {
        modeled_cost_ns: cost + root_cost_ns,
        root_read_bytes,
        root_cost_ns,
        layers,
    })
}

struct Search<'a> {
    profile: &'a StorageProfile,
    config: &'a TuneConfig,
    builders: &'a [BuilderSpec],
    sample: &'a [u64],
}

/// The best stack found above some collection, and its cost.
struct Sub {
    layers: Vec<TunedLayer>,
    cost_ns: f64,
}

impl Sub {
    fn root<'a>(&'a self, data: &'a KeyPositions) -> &'a KeyPositions {
        self.layers.last().map(|l| &*l.outline).unwrap_or(data)
    }
}

struct Candidate {
    tuned: TunedLayer,
    rank: f64,
}

impl Search<'_> {
    /// Alg. 2 on collection `d`, which sits `depth` index layers above the
    /// data.
    fn best(&self, d: Arc<KeyPositions>, depth: usize) -> Result<Sub> {
        let as_root = self.profile.cost_ns(root_read_bytes(&d, depth));
        let mut best = Sub {
            layers: Vec::new(),
            cost_ns: as_root,
        };
        // Lines 1-2: an ideal layer (1 byte, reading one block below) cannot
        // beat reading `d` whole, so `d` is the root.
        let ideal = self.profile.cost_ns(format::meta_len(depth + 1, 1))
            + self
                .profile
                .cost_ns(d.geometry.block_bytes().min(d.geometry.physical_len()));
        if as_root <= ideal || depth >= self.config.max_layers || d.len() <= 1 {
            return Ok(best);
        }
        // Lines 3-6: every builder proposes a layer.
        let candidates: Vec<Candidate> = self
            .builders
            .par_iter()
            .map(|spec| self.candidate(spec, &d, depth))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        // Line 7: keep the top-k by τ̂(D_next) + E[T(Δ)] (Eq. 9).
        let mut candidates = candidates;
        candidates.sort_by(|a, b| a.rank.total_cmp(&b.rank));
        candidates.truncate(self.config.top_k);
        // Lines 8-12: recurse, keep the cheapest complete design.
        let subs: Vec<(TunedLayer, Sub)> = candidates
            .into_par_iter()
            .map(|c| {
                let sub = self.best(c.tuned.outline.clone(), depth + 1)?;
                Ok((c.tuned, sub))
            })
            .collect::<Result<Vec<_>>>()?;
        for (layer, sub) in subs {
            let cost = layer.expected_cost_ns + sub.cost_ns;
            if cost < best.cost_ns {
                let mut layers = Vec::with_capacity(sub.layers.len() + 1);
                layers.push(layer);
                layers.extend(sub.layers);
                best = Sub {
                    layers,
                    cost_ns: cost,
                };
            }
        }
        Ok(best)
    }

    /// Builds one candidate layer over `d`; `None` when it does not shrink
    /// the collection (stacking it could never end).
    fn candidate(
        &self,
        spec: &BuilderSpec,
        d: &KeyPositions,
        depth: usize,
    ) -> Result<Option<Candidate>> {
        let layer = spec.build(d)?;
        if layer.nodes() >= d.len() {
            return Ok(None);
        }
        let outline = layer.outline(d, format::BLOCK_TARGET);
        let sample = (depth > 0).then_some(self.sample);
        let (bytes, cost) = window_cost(&layer, d, sample, self.profile);
        let rank = step_index_complexity(outline.geometry.physical_len(), self.profile) + cost;
        Ok(Some(Candidate {
            tuned: TunedLayer {
                layer: Arc::new(layer),
                outline: Arc::new(outline),
                expected_read_bytes: bytes,
                expected_cost_ns: cost,
            },
            rank,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ssd() -> StorageProfile {
        StorageProfile::affine(Duration::from_micros(250), 175e6).unwrap()
    }

    #[test]
    fn lambda_grid_follows_the_paper() {
        let c = TuneConfig::default();
        let l = c.lambdas().unwrap();
        assert_eq!(l.first(), Some(&256));
        assert_eq!(l.last(), Some(&(1 << 20)));
        assert_eq!(l.len(), 13);
        let c = TuneConfig {
            page_steps: false,
            ..TuneConfig::default()
        };
        // Eq. 8: 3 families x 13 granularities.
        assert_eq!(c.builders().unwrap().len(), 39);
    }

    #[test]
    fn bad_knobs_are_rejected() {
        for c in [
            TuneConfig {
                lambda_low: 0,
                ..TuneConfig::default()
            },
            TuneConfig {
                lambda_low: 4096,
                lambda_high: 256,
                ..TuneConfig::default()
            },
            TuneConfig {
                base: 1.0,
                ..TuneConfig::default()
            },
            TuneConfig {
                top_k: 0,
                ..TuneConfig::default()
            },
        ] {
            assert!(matches!(c.builders(), Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn step_index_complexity_is_an_upper_bound_shape() {
        let p = ssd();
        // Reading a small collection whole is the ideal step index.
        assert_eq!(step_index_complexity(100, &p), p.cost_ns(100));
        // Bigger collections never get cheaper.
        let mut last = 0.0;
        for shift in 8..34 {
            let c = step_index_complexity(1 << shift, &p);
            assert!(c >= last, "{shift}");
            last = c;
        }
    }
}
