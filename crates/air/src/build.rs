//! Building an index: validate the data, tune (or take a fixed design),
//! then write the data object, the layer objects and finally `meta`.
//!
//! `meta` is written last, so a crash mid-build leaves no openable index
//! (every object write is itself an atomic replace).

use std::time::Instant;

use lidx_core::storage::{Storage, StorageProfile};
use lidx_core::{Error, Result};

use crate::design::DesignReport;
use crate::format::{self, DataLayout, LayerDescriptor, Meta};
use crate::geometry::RecordGeometry;
use crate::keypos::KeyPositions;
use crate::tune::{self, TuneConfig, Tuned};

/// What the data layer holds.
#[derive(Debug, Clone, Copy)]
pub enum DataInput<'a> {
    /// Sorted keys with one 8-byte value each.
    KeyValues {
        /// Sorted keys (duplicates allowed).
        keys: &'a [u64],
        /// `values[i]` belongs to `keys[i]`.
        values: &'a [u64],
    },
    /// Sorted keys with `width`-byte values packed in `values`.
    KeyBytes {
        /// Sorted keys (duplicates allowed).
        keys: &'a [u64],
        /// `width * keys.len()` bytes.
        values: &'a [u8],
        /// Bytes per value.
        width: u32,
    },
    /// A sorted SOSD key array; a key's value is its rank.
    SosdKeys(&'a [u64]),
}

impl DataInput<'_> {
    fn keys(&self) -> &[u64] {
        match self {
            DataInput::KeyValues { keys, .. } | DataInput::KeyBytes { keys, .. } => keys,
            DataInput::SosdKeys(keys) => keys,
        }
    }

    fn layout(&self) -> DataLayout {
        match self {
            DataInput::KeyValues { .. } => DataLayout::Records { value_width: 8 },
            DataInput::KeyBytes { width, .. } => DataLayout::Records {
                value_width: *width,
            },
            DataInput::SosdKeys(_) => DataLayout::SosdKeys,
        }
    }

    fn validate(&self) -> Result<()> {
        match self {
            DataInput::KeyValues { keys, values } if keys.len() != values.len() => Err(
                Error::invalid(format!("{} keys but {} values", keys.len(), values.len())),
            ),
            DataInput::KeyBytes {
                keys,
                values,
                width,
            } if keys.len() as u64 * *width as u64 != values.len() as u64 => {
                Err(Error::invalid(format!(
                    "{} keys of {width}-byte values need {} value bytes, got {}",
                    keys.len(),
                    keys.len() as u64 * *width as u64,
                    values.len()
                )))
            }
            DataInput::KeyBytes { width, .. } if *width > 1 << 20 => {
                Err(Error::invalid(format!("value width {width} exceeds 1 MiB")))
            }
            _ => Ok(()),
        }
    }

    /// The data layer's logical records.
    fn records(&self) -> Vec<u8> {
        match self {
            DataInput::KeyValues { keys, values } => {
                let mut out = Vec::with_capacity(keys.len() * 16);
                for (k, v) in keys.iter().zip(values.iter()) {
                    out.extend_from_slice(&k.to_le_bytes());
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out
            }
            DataInput::KeyBytes {
                keys,
                values,
                width,
            } => {
                let w = *width as usize;
                let mut out = Vec::with_capacity(keys.len() * (8 + w));
                for (i, k) in keys.iter().enumerate() {
                    out.extend_from_slice(&k.to_le_bytes());
                    out.extend_from_slice(&values[i * w..(i + 1) * w]);
                }
                out
            }
            DataInput::SosdKeys(keys) => keys.iter().flat_map(|k| k.to_le_bytes()).collect(),
        }
    }
}

/// Which design to build.
#[derive(Debug, Clone)]
pub enum DesignChoice {
    /// Search with AirTune (the point of AirIndex).
    Tune(TuneConfig),
    /// A design found earlier (for baselines: B-tree, PGM).
    Fixed(Tuned),
}

/// Builds an index of `input` into `storage` under `profile`; returns the
/// design report (also written as `design.json` beside the index).
pub fn build(
    storage: &dyn Storage,
    input: DataInput<'_>,
    profile: &StorageProfile,
    design: DesignChoice,
) -> Result<DesignReport> {
    let started = Instant::now();
    input.validate()?;
    let layout = input.layout();
    let data =
        KeyPositions::from_sorted_keys(input.keys(), layout.record_size(), format::BLOCK_TARGET)?;
    let tune_started = Instant::now();
    let tuned = match design {
        DesignChoice::Tune(config) => tune::tune(&data, profile, &config)?,
        DesignChoice::Fixed(t) => t,
    };
    let tune_s = tune_started.elapsed().as_secs_f64();
    let write_started = Instant::now();
    let meta = write(storage, &input, &data, &tuned)?;
    let write_s = write_started.elapsed().as_secs_f64();
    let mut report = DesignReport::new(&meta, &tuned, profile);
    report.tune_s = tune_s;
    report.write_s = write_s;
    report.build_s = started.elapsed().as_secs_f64();
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| Error::invalid(format!("design report: {e}")))?;
    storage.write(format::DESIGN_OBJECT, &json)?;
    Ok(report)
}

/// Writes the objects of design `tuned` over `input`; returns the meta.
fn write(
    storage: &dyn Storage,
    input: &DataInput<'_>,
    data: &KeyPositions,
    tuned: &Tuned,
) -> Result<Meta> {
    let layout = input.layout();
    let records = input.records();
    let data_geometry = RecordGeometry::new(
        layout.record_size(),
        input.keys().len() as u64,
        format::BLOCK_TARGET,
    );
    let generation = new_generation();
    let (packed, data_crc) = format::pack_blocks(&records, &data_geometry);
    storage.write(&format::data_object(generation), &packed)?;
    drop(packed);
    let mut layers = Vec::with_capacity(tuned.layers.len());
    let top = tuned.layers.len();
    for (i, t) in tuned.layers.iter().enumerate() {
        let level = i + 1;
        let geometry = t.outline.geometry;
        let object_crc = if level == top {
            0
        } else {
            let (packed, crc) = format::pack_blocks(&t.layer.records, &geometry);
            storage.write(&format::layer_object(generation, level), &packed)?;
            crc
        };
        layers.push(LayerDescriptor {
            kind: t.layer.kind,
            builder: t.layer.spec,
            geometry,
            object_crc,
            expected_read_bytes: t.expected_read_bytes,
        });
    }
    let root = match tuned.layers.last() {
        Some(t) => bytes::Bytes::from(t.layer.records.clone()),
        None => bytes::Bytes::from(records),
    };
    let meta = Meta {
        generation,
        layout,
        data: data_geometry,
        distinct_keys: data.len() as u64,
        data_crc,
        modeled_cost_ns: tuned.modeled_cost_ns,
        layers,
        root,
    };
    storage.write(format::META_OBJECT, &meta.encode())?;
    // Only now is the previous build unreachable: drop its objects.
    for prefix in ["data-", "layer-"] {
        for name in storage.list(prefix)? {
            if format::is_stale_object(&name, generation) {
                storage.delete(&name)?;
            }
        }
    }
    Ok(meta)
}

/// A generation number unlikely to repeat: nanoseconds since the epoch
/// mixed with a process-wide counter.
fn new_generation() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(48)
}

/// The design report of `tuned` without writing anything (for what-if
/// comparisons such as the baselines' modelled costs).
pub fn describe(tuned: &Tuned, data: &KeyPositions, profile: &StorageProfile) -> DesignReport {
    DesignReport::from_tuned(
        tuned,
        data.geometry.records,
        data.len() as u64,
        data.geometry.physical_len(),
        profile,
    )
}
