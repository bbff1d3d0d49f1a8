//! The on-storage artifact: a `meta` object (header, layer descriptors, the
//! root layer, CRC), one object per non-root index layer (`layer-1`, ...)
//! and the `data` object. The byte-level specification is
//! `docs/air-format.md`; this module is its only implementation.
//!
//! Layer objects are records packed into checksummed blocks (see
//! [`RecordGeometry`]); the root layer is stored raw inside `meta`, which is
//! checksummed as a whole, so opening an index is exactly one read.

use bytes::{Buf, BufMut};
use lidx_core::checksum::{crc32c, crc32c_append};
use lidx_core::{Error, Result};

use crate::builders::BuilderSpec;
use crate::geometry::{BLOCK_CHECKSUM_BYTES, RecordGeometry};
use crate::node::NodeKind;

/// Magic bytes opening every meta object.
pub const MAGIC: [u8; 8] = *b"LIDXAIR\0";
/// Format version written by this crate.
pub const VERSION: u32 = 1;
/// Block target used for every layer (records part of a block, in bytes).
pub const BLOCK_TARGET: u64 = crate::geometry::DEFAULT_BLOCK_TARGET;
/// Bytes of the fixed meta header.
pub const HEADER_LEN: u64 = 112;
/// Bytes of one layer descriptor.
pub const DESCRIPTOR_LEN: u64 = 64;

/// Name of the meta object.
pub const META_OBJECT: &str = "meta";
/// Name of the optional human-readable design report.
pub const DESIGN_OBJECT: &str = "design.json";

/// Name of the data object of build `generation`.
///
/// Every build writes fresh object names and swaps `meta` last, so a reader
/// of the old `meta` never sees a new layer (and a crash mid-build leaves
/// the old index intact).
pub fn data_object(generation: u64) -> String {
    format!("data-{generation:016x}")
}

/// Name of the object holding index layer `level` (1 = just above data) of
/// build `generation`.
pub fn layer_object(generation: u64, level: usize) -> String {
    format!("layer-{generation:016x}-{level}")
}

/// Whether `name` is a data or layer object of a build other than
/// `generation` (left behind by an earlier build).
pub fn is_stale_object(name: &str, generation: u64) -> bool {
    let gen_of = |rest: &str| u64::from_str_radix(rest.get(..16)?, 16).ok();
    let g = if let Some(rest) = name.strip_prefix("data-") {
        gen_of(rest)
    } else if let Some(rest) = name.strip_prefix("layer-") {
        gen_of(rest)
    } else {
        None
    };
    g.is_some_and(|g| g != generation)
}

/// Size of the meta object of a design with `index_layers` index layers and
/// a root layer of `root_logical_len` bytes.
pub fn meta_len(index_layers: usize, root_logical_len: u64) -> u64 {
    HEADER_LEN + DESCRIPTOR_LEN * index_layers as u64 + root_logical_len + 4
}

/// How the data layer stores values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum DataLayout {
    /// `(u64 key, value_width bytes)` records.
    Records {
        /// Bytes of every value.
        value_width: u32,
    },
    /// A bare sorted u64 key array (SOSD); a key's value is its rank.
    SosdKeys,
}

impl DataLayout {
    /// Bytes of one data record.
    pub fn record_size(self) -> u64 {
        match self {
            DataLayout::Records { value_width } => 8 + value_width as u64,
            DataLayout::SosdKeys => 8,
        }
    }
}

/// One index layer as described in `meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerDescriptor {
    /// Node type of the layer.
    pub kind: NodeKind,
    /// Builder that produced it.
    pub builder: BuilderSpec,
    /// Records (nodes) and their packing.
    pub geometry: RecordGeometry,
    /// CRC-32C of the whole layer object (0 for the embedded root).
    pub object_crc: u32,
    /// Mean physical bytes a lookup reads below through this layer
    /// (the model's expectation, for inspection).
    pub expected_read_bytes: f64,
}

/// Everything `meta` holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// Build generation: names the data and layer objects.
    pub generation: u64,
    /// How values are stored.
    pub layout: DataLayout,
    /// Data records and their packing.
    pub data: RecordGeometry,
    /// Distinct keys in the data.
    pub distinct_keys: u64,
    /// CRC-32C of the whole data object.
    pub data_crc: u32,
    /// Modelled expected lookup latency, ns.
    pub modeled_cost_ns: f64,
    /// Index layers bottom-up; the last one is the root. Empty: the data
    /// layer is the root.
    pub layers: Vec<LayerDescriptor>,
    /// Logical bytes of the root layer (the top index layer, or the data
    /// layer when there is none).
    pub root: bytes::Bytes,
}

fn kind_code(kind: NodeKind) -> (u32, u32) {
    match kind {
        NodeKind::Step { pieces } => (0, pieces),
        NodeKind::Band => (1, 0),
    }
}

fn builder_code(spec: &BuilderSpec) -> (u32, u32, u64) {
    match *spec {
        BuilderSpec::GStep { pieces, lambda } => (0, pieces, lambda),
        BuilderSpec::GBand { lambda } => (1, 0, lambda),
        BuilderSpec::EBand { lambda } => (2, 0, lambda),
    }
}

impl Meta {
    /// Geometry of the root layer.
    pub fn root_geometry(&self) -> RecordGeometry {
        self.layers.last().map(|l| l.geometry).unwrap_or(self.data)
    }

    /// Serialises to the `meta` object bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(meta_len(self.layers.len(), self.root.len() as u64) as usize);
        out.put_slice(&MAGIC);
        out.put_u32_le(VERSION);
        out.put_u32_le(HEADER_LEN as u32);
        let (layout, width) = match self.layout {
            DataLayout::Records { value_width } => (0, value_width),
            DataLayout::SosdKeys => (1, 0),
        };
        out.put_u32_le(layout);
        out.put_u32_le(width);
        out.put_u64_le(self.data.record_size);
        out.put_u64_le(self.data.block_records);
        out.put_u64_le(self.data.records);
        out.put_u64_le(self.data.physical_len());
        out.put_u64_le(self.distinct_keys);
        out.put_u32_le(self.data_crc);
        out.put_u32_le(self.layers.len() as u32);
        out.put_f64_le(self.modeled_cost_ns);
        out.put_u64_le(self.root.len() as u64);
        out.put_u64_le(BLOCK_TARGET);
        out.put_u64_le(self.generation);
        // Reserved, zero.
        out.put_bytes(0, (HEADER_LEN as usize) - out.len() - 4);
        let header_crc = crc32c(&out);
        out.put_u32_le(header_crc);
        debug_assert_eq!(out.len() as u64, HEADER_LEN);
        for l in &self.layers {
            let (kind, pieces) = kind_code(l.kind);
            let (family, bpieces, lambda) = builder_code(&l.builder);
            out.put_u32_le(kind);
            out.put_u32_le(pieces);
            out.put_u32_le(family);
            out.put_u32_le(bpieces);
            out.put_u64_le(lambda);
            out.put_u64_le(l.geometry.record_size);
            out.put_u64_le(l.geometry.block_records);
            out.put_u64_le(l.geometry.records);
            out.put_u32_le(l.object_crc);
            out.put_u32_le(0);
            out.put_f64_le(l.expected_read_bytes);
        }
        out.put_slice(&self.root);
        let crc = crc32c(&out);
        out.put_u32_le(crc);
        out
    }

    /// Parses and validates a `meta` object. Any inconsistency — bad magic,
    /// version, checksum, lengths, geometry or root records — is
    /// [`Error::Corrupt`].
    pub fn decode(bytes: bytes::Bytes) -> Result<Meta> {
        let len = bytes.len() as u64;
        if len < HEADER_LEN + 4 {
            return Err(Error::corrupt(format!(
                "meta object is {len} bytes, shorter than its {HEADER_LEN}-byte header"
            )));
        }
        if bytes[..8] != MAGIC {
            return Err(Error::corrupt(
                "meta object does not start with the AirIndex magic",
            ));
        }
        let stored = u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().expect("4 bytes"));
        if crc32c(&bytes[..bytes.len() - 4]) != stored {
            return Err(Error::corrupt("meta object checksum mismatch"));
        }
        let mut h = &bytes[8..];
        let version = h.get_u32_le();
        if version != VERSION {
            return Err(Error::corrupt(format!(
                "meta format version {version}, this build reads version {VERSION}"
            )));
        }
        let header_len = h.get_u32_le() as u64;
        if header_len != HEADER_LEN {
            return Err(Error::corrupt(format!("meta header length {header_len}")));
        }
        let layout = match (h.get_u32_le(), h.get_u32_le()) {
            (0, width) if width <= 1 << 20 => DataLayout::Records { value_width: width },
            (1, 0) => DataLayout::SosdKeys,
            (code, width) => {
                return Err(Error::corrupt(format!(
                    "unknown data layout {code} (value width {width})"
                )));
            }
        };
        let record_size = h.get_u64_le();
        let block_records = h.get_u64_le();
        let records = h.get_u64_le();
        let data_physical = h.get_u64_le();
        let distinct_keys = h.get_u64_le();
        let data_crc = h.get_u32_le();
        let index_layers = h.get_u32_le() as u64;
        let modeled_cost_ns = h.get_f64_le();
        let root_len = h.get_u64_le();
        let _block_target = h.get_u64_le();
        let generation = h.get_u64_le();
        let data = checked_geometry("data", record_size, block_records, records)?;
        if record_size != layout.record_size() {
            return Err(Error::corrupt(format!(
                "data record size {record_size} does not match its layout"
            )));
        }
        if data.physical_len() != data_physical {
            return Err(Error::corrupt(
                "data object length does not match its geometry",
            ));
        }
        if distinct_keys > records {
            return Err(Error::corrupt("more distinct keys than records"));
        }
        if index_layers > 64 {
            return Err(Error::corrupt(format!("{index_layers} index layers")));
        }
        if meta_len(index_layers as usize, root_len) != len {
            return Err(Error::corrupt(format!(
                "meta object is {len} bytes, its header implies {}",
                meta_len(index_layers as usize, root_len)
            )));
        }
        let mut d = &bytes[HEADER_LEN as usize..];
        let mut layers = Vec::with_capacity(index_layers as usize);
        for level in 1..=index_layers {
            let kind = match (d.get_u32_le(), d.get_u32_le()) {
                (0, pieces) if (2..=1 << 24).contains(&pieces) => NodeKind::Step { pieces },
                (1, 0) => NodeKind::Band,
                (code, p) => {
                    return Err(Error::corrupt(format!(
                        "layer {level}: unknown node type {code}/{p}"
                    )));
                }
            };
            let builder = match (d.get_u32_le(), d.get_u32_le(), d.get_u64_le()) {
                (0, pieces, lambda) => BuilderSpec::GStep { pieces, lambda },
                (1, _, lambda) => BuilderSpec::GBand { lambda },
                (2, _, lambda) => BuilderSpec::EBand { lambda },
                (code, _, _) => {
                    return Err(Error::corrupt(format!(
                        "layer {level}: unknown builder {code}"
                    )));
                }
            };
            let geometry = checked_geometry(
                &format!("layer {level}"),
                d.get_u64_le(),
                d.get_u64_le(),
                d.get_u64_le(),
            )?;
            if geometry.record_size != kind.record_size() {
                return Err(Error::corrupt(format!(
                    "layer {level}: record size {} does not match {kind}",
                    geometry.record_size
                )));
            }
            let object_crc = d.get_u32_le();
            let _ = d.get_u32_le();
            let expected_read_bytes = d.get_f64_le();
            layers.push(LayerDescriptor {
                kind,
                builder,
                geometry,
                object_crc,
                expected_read_bytes,
            });
        }
        let root_start = (HEADER_LEN + DESCRIPTOR_LEN * index_layers) as usize;
        let root = bytes.slice(root_start..root_start + root_len as usize);
        let meta = Meta {
            generation,
            layout,
            data,
            distinct_keys,
            data_crc,
            modeled_cost_ns,
            layers,
            root,
        };
        let rg = meta.root_geometry();
        if rg.logical_len() != root_len {
            return Err(Error::corrupt(format!(
                "root layer is {root_len} bytes, its geometry needs {}",
                rg.logical_len()
            )));
        }
        Ok(meta)
    }
}

fn checked_geometry(
    what: &str,
    record_size: u64,
    block_records: u64,
    records: u64,
) -> Result<RecordGeometry> {
    let ok = (8..=1 << 26).contains(&record_size)
        && (1..=1 << 32).contains(&block_records)
        && records
            .checked_mul(record_size)
            .is_some_and(|b| b < 1 << 56);
    if !ok {
        return Err(Error::corrupt(format!(
            "{what}: impossible geometry ({records} records of {record_size} bytes, {block_records} a block)"
        )));
    }
    Ok(RecordGeometry {
        record_size,
        block_records,
        records,
    })
}

/// Packs logical `records` (whole records, `geometry.records` of them) into
/// checksummed blocks; returns the object bytes and their CRC-32C.
pub fn pack_blocks(records: &[u8], geometry: &RecordGeometry) -> (Vec<u8>, u32) {
    debug_assert_eq!(records.len() as u64, geometry.logical_len());
    let mut out = Vec::with_capacity(geometry.physical_len() as usize);
    let chunk = (geometry.block_records * geometry.record_size) as usize;
    for block in records.chunks(chunk.max(1)) {
        out.put_slice(block);
        out.put_u32_le(crc32c(block));
    }
    let crc = crc32c_append(0, &out);
    (out, crc)
}

/// Verifies and strips the checksums of physical `blocks` (whole blocks,
/// starting at block `first_block`), returning the logical records they hold.
pub fn unpack_blocks(
    bytes: &[u8],
    geometry: &RecordGeometry,
    first_block: u64,
    object: &str,
) -> Result<Vec<u8>> {
    let full = geometry.block_bytes() as usize;
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    let mut block = first_block;
    while !rest.is_empty() {
        let this = if block + 1 == geometry.blocks() {
            let last_records = geometry.records - block * geometry.block_records;
            (last_records * geometry.record_size + BLOCK_CHECKSUM_BYTES) as usize
        } else {
            full
        };
        if rest.len() < this {
            return Err(Error::corrupt(format!(
                "{object}: block {block} is truncated ({} of {this} bytes)",
                rest.len()
            )));
        }
        let (payload, crc) = rest[..this].split_at(this - 4);
        let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if crc32c(payload) != stored {
            return Err(Error::corrupt(format!(
                "{object}: block {block} checksum mismatch"
            )));
        }
        out.extend_from_slice(payload);
        rest = &rest[this..];
        block += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        let root_geom = RecordGeometry::new(48, 2, BLOCK_TARGET);
        Meta {
            generation: 42,
            layout: DataLayout::Records { value_width: 8 },
            data: RecordGeometry::new(16, 1000, BLOCK_TARGET),
            distinct_keys: 990,
            data_crc: 7,
            modeled_cost_ns: 1234.5,
            layers: vec![LayerDescriptor {
                kind: NodeKind::Band,
                builder: BuilderSpec::GBand { lambda: 4096 },
                geometry: root_geom,
                object_crc: 0,
                expected_read_bytes: 516.0,
            }],
            root: bytes::Bytes::from(vec![0u8; 96]),
        }
    }

    #[test]
    fn meta_round_trips() {
        let m = sample();
        let bytes = m.encode();
        assert_eq!(bytes.len() as u64, meta_len(1, 96));
        assert_eq!(Meta::decode(bytes.into()).unwrap(), m);
    }

    #[test]
    fn every_flipped_or_truncated_meta_byte_is_corrupt() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(
                matches!(Meta::decode(b.into()), Err(Error::Corrupt(_))),
                "flip {i}"
            );
        }
        for cut in 0..bytes.len() {
            let b = bytes[..cut].to_vec();
            assert!(
                matches!(Meta::decode(b.into()), Err(Error::Corrupt(_))),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn blocks_round_trip_and_catch_flips() {
        let g = RecordGeometry::new(16, 70, 512);
        let records: Vec<u8> = (0..g.logical_len()).map(|i| i as u8).collect();
        let (obj, _) = pack_blocks(&records, &g);
        assert_eq!(obj.len() as u64, g.physical_len());
        assert_eq!(unpack_blocks(&obj, &g, 0, "t").unwrap(), records);
        // The last (partial) block alone.
        let last = g.physical_blocks(&(2..3));
        let got = unpack_blocks(&obj[last.start as usize..], &g, 2, "t").unwrap();
        assert_eq!(got, &records[2 * 32 * 16..]);
        for i in (0..obj.len()).step_by(7) {
            let mut b = obj.clone();
            b[i] ^= 1;
            assert!(matches!(
                unpack_blocks(&b, &g, 0, "t"),
                Err(Error::Corrupt(_))
            ));
        }
        assert!(matches!(
            unpack_blocks(&obj[..obj.len() - 1], &g, 0, "t"),
            Err(Error::Corrupt(_))
        ));
    }
}
