//! Where records live inside a layer object: fixed-size records packed into
//! checksummed blocks.
//!
//! Builders and models speak in *logical* byte positions (`record index *
//! record_size`), as the paper does. On storage every block of
//! `block_records` records is followed by a 4-byte CRC-32C of the block, so
//! a flipped byte anywhere on a lookup's path is detected. A logical window
//! is therefore widened to whole records and then to whole blocks before it
//! is read; [`RecordGeometry::physical_range`] is that mapping, and the cost
//! model charges exactly the bytes it returns.

use std::ops::Range;

/// Bytes of the checksum that trails every block.
pub const BLOCK_CHECKSUM_BYTES: u64 = 4;

/// Default target for the records part of a block, in bytes.
pub const DEFAULT_BLOCK_TARGET: u64 = 512;

/// Record size and block packing of one layer object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordGeometry {
    /// Bytes per record (at least 8: every record starts with its u64 key).
    pub record_size: u64,
    /// Records per checksummed block (at least 1).
    pub block_records: u64,
    /// Records in the layer.
    pub records: u64,
}

impl RecordGeometry {
    /// Geometry for `records` records of `record_size` bytes, packing as many
    /// whole records as fit in `block_target` bytes (at least one) per block.
    pub fn new(record_size: u64, records: u64, block_target: u64) -> Self {
        let record_size = record_size.max(1);
        let block_records = (block_target / record_size).max(1);
        RecordGeometry {
            record_size,
            block_records,
            records,
        }
    }

    /// Logical size of the layer: `records * record_size`.
    pub fn logical_len(&self) -> u64 {
        self.records * self.record_size
    }

    /// Bytes of one full block on storage, checksum included.
    pub fn block_bytes(&self) -> u64 {
        self.block_records * self.record_size + BLOCK_CHECKSUM_BYTES
    }

    /// Number of blocks (the last one may be partial).
    pub fn blocks(&self) -> u64 {
        self.records.div_ceil(self.block_records)
    }

    /// Size of the object on storage.
    pub fn physical_len(&self) -> u64 {
        self.records * self.record_size + self.blocks() * BLOCK_CHECKSUM_BYTES
    }

    /// Records `[first, end)` touched by the logical byte window `window`,
    /// clamped to the layer.
    pub fn record_range(&self, window: &Range<u64>) -> Range<u64> {
        let first = (window.start / self.record_size).min(self.records);
        let end = window.end.div_ceil(self.record_size).min(self.records);
        first..end.max(first)
    }

    /// Blocks `[first, end)` holding records `records`.
    pub fn block_range(&self, records: &Range<u64>) -> Range<u64> {
        if records.start >= records.end {
            return records.start / self.block_records..records.start / self.block_records;
        }
        records.start / self.block_records..records.end.div_ceil(self.block_records)
    }

    /// Physical byte range of blocks `blocks` (the last block of the layer
    /// may be shorter than [`block_bytes`](Self::block_bytes)).
    pub fn physical_blocks(&self, blocks: &Range<u64>) -> Range<u64> {
        let start = blocks.start * self.block_bytes();
        let end = if blocks.end >= self.blocks() {
            self.physical_len()
        } else {
            blocks.end * self.block_bytes()
        };
        start..end.max(start)
    }

    /// Physical bytes read for the logical window `window`: widened to whole
    /// records, then to whole blocks.
    pub fn physical_range(&self, window: &Range<u64>) -> Range<u64> {
        let records = self.record_range(window);
        self.physical_blocks(&self.block_range(&records))
    }

    /// Number of physical bytes read for the logical window `window`.
    pub fn read_size(&self, window: &Range<u64>) -> u64 {
        let r = self.physical_range(window);
        r.end - r.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_widen_to_whole_blocks() {
        let g = RecordGeometry::new(16, 100, 512);
        assert_eq!(g.block_records, 32);
        assert_eq!(g.block_bytes(), 516);
        assert_eq!(g.blocks(), 4);
        assert_eq!(g.physical_len(), 1600 + 16);
        // One record in the first block.
        assert_eq!(g.physical_range(&(16..32)), 0..516);
        // A window straddling blocks 0 and 1, not record aligned.
        assert_eq!(g.physical_range(&(500..530)), 0..1032);
        // The last, partial block.
        assert_eq!(g.physical_range(&(1590..1600)), 3 * 516..1616);
        // A window past the end is clamped.
        assert!(g.physical_range(&(1600..5000)).is_empty());
        assert_eq!(g.read_size(&(0..1600)), 1616);
    }

    #[test]
    fn oversized_records_get_one_block_each() {
        let g = RecordGeometry::new(4096, 3, 512);
        assert_eq!(g.block_records, 1);
        assert_eq!(g.block_bytes(), 4100);
        assert_eq!(g.physical_range(&(4096..4097)), 4100..8200);
    }
}
