//! Opening a built index and answering lookups (paper Alg. 1).
//!
//! A lookup reads `meta` once at open (the root layer is inside it), then
//! one window per layer below: the root predicts a window of the layer
//! under it, the predecessor record found there predicts the next window,
//! and the data window yields the first record whose key is at least the
//! query (lower-bound semantics, so duplicate keys resolve to their first
//! occurrence). Every window is read as whole checksummed blocks and
//! verified before use.

use std::ops::{Bound, Range, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;
use lidx_core::storage::Storage;
use lidx_core::{Error, Result};

use crate::format::{self, DataLayout, Meta};
use crate::geometry::RecordGeometry;
use crate::node::{self, NodeKind};

/// A data record found by a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its key.
    pub key: u64,
    /// Its rank: the record's index in the data layer.
    pub rank: u64,
    /// Its value bytes (empty for SOSD key arrays, whose value is the rank).
    pub value: Bytes,
}

impl Entry {
    /// The value as a number: the 8-byte little-endian value, or the rank
    /// for SOSD key arrays. `None` for other value widths.
    pub fn value_u64(&self, layout: DataLayout) -> Option<u64> {
        match layout {
            DataLayout::SosdKeys => Some(self.rank),
            DataLayout::Records { value_width: 8 } => {
                Some(u64::from_le_bytes(self.value[..8].try_into().ok()?))
            }
            DataLayout::Records { .. } => None,
        }
    }
}

/// A read-only AirIndex over a [`Storage`].
///
/// All lookups take `&self` and may run from many threads at once; the
/// index holds no mutable state (wrap the storage in a
/// [`PageCache`](lidx_core::storage::PageCache) to keep hot blocks).
#[derive(Debug, Clone)]
pub struct AirIndex {
    storage: Arc<dyn Storage>,
    meta: Arc<Meta>,
}

/// Records `[first, first + n)` of one layer, read and verified.
struct Records {
    first: u64,
    bytes: Vec<u8>,
    record_size: usize,
}

impl Records {
    fn len(&self) -> usize {
        self.bytes.len() / self.record_size
    }

    fn record(&self, i: usize) -> &[u8] {
        &self.bytes[i * self.record_size..(i + 1) * self.record_size]
    }

    fn key(&self, i: usize) -> u64 {
        node::record_key(self.record(i))
    }
}

impl AirIndex {
    /// Opens the index stored in `storage`: one read of `meta`, fully
    /// validated ([`Error::Corrupt`] on any inconsistency).
    pub fn open(storage: Arc<dyn Storage>) -> Result<Self> {
        let bytes = storage.read_all(format::META_OBJECT).map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(format!(
                "no AirIndex at {} (missing {})",
                storage.describe(),
                format::META_OBJECT
            )),
            e => e,
        })?;
        let meta = Meta::decode(bytes)?;
        let index = AirIndex {
            storage,
            meta: Arc::new(meta),
        };
        index.check_root()?;
        Ok(index)
    }

    /// The decoded `meta` (design, geometries, root).
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// The storage the index reads from.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Records in the data layer.
    pub fn len(&self) -> u64 {
        self.meta.data.records
    }

    /// Whether the data layer is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn index_layers(&self) -> usize {
        self.meta.layers.len()
    }

    fn geometry(&self, level: usize) -> RecordGeometry {
        if level == 0 {
            self.meta.data
        } else {
            self.meta.layers[level - 1].geometry
        }
    }

    fn kind(&self, level: usize) -> NodeKind {
        self.meta.layers[level - 1].kind
    }

    fn object(&self, level: usize) -> String {
        if level == 0 {
            format::data_object(self.meta.generation)
        } else {
            format::layer_object(self.meta.generation, level)
        }
    }

    /// Root records must be sorted and decodable: checked once at open so
    /// lookups can trust the in-memory root.
    fn check_root(&self) -> Result<()> {
        let root = self.root_records();
        let strict = self.index_layers() > 0;
        for i in 1..root.len() {
            let (a, b) = (root.key(i - 1), root.key(i));
            if a > b || (strict && a == b) {
                return Err(Error::corrupt(format!(
                    "root layer keys out of order at record {i}"
                )));
            }
        }
        if strict {
            let level = self.index_layers();
            let below = self.geometry(level - 1).logical_len();
            for i in 0..root.len() {
                let w = node::predict(self.kind(level), root.record(i), root.key(i))?;
                if w.start > below {
                    return Err(Error::corrupt(format!(
                        "root record {i} points outside the layer below"
                    )));
                }
            }
        }
        Ok(())
    }

    fn root_records(&self) -> Records {
        let g = self.meta.root_geometry();
        Records {
            first: 0,
            bytes: self.meta.root.to_vec(),
            record_size: g.record_size as usize,
        }
    }

    /// The window the root predicts for `key` in the layer below it.
    fn root_window(&self, key: u64) -> Result<Range<u64>> {
        let level = self.index_layers();
        let g = self.meta.root_geometry();
        let rs = g.record_size as usize;
        let root = &self.meta.root;
        let n = root.len() / rs;
        let key_at = |i: usize| node::record_key(&root[i * rs..(i + 1) * rs]);
        // Predecessor: the last record whose key is <= key (record 0 below
        // the first key).
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if key_at(mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let j = lo.saturating_sub(1);
        node::predict(self.kind(level), &root[j * rs..(j + 1) * rs], key)
    }

    /// Reads the records of `level` covering the logical `window`.
    fn read_window(&self, level: usize, window: &Range<u64>) -> Result<Records> {
        let g = self.geometry(level);
        let records = g.record_range(window);
        let blocks = g.block_range(&records);
        let phys = g.physical_blocks(&blocks);
        let first = (blocks.start * g.block_records).min(g.records);
        if phys.is_empty() {
            return Ok(Records {
                first,
                bytes: Vec::new(),
                record_size: g.record_size as usize,
            });
        }
        let object = self.object(level);
        let bytes = self
            .storage
            .read(&object, phys.clone())
            .map_err(|e| storage_error(e, &object))?;
        self.unpack(level, &object, &bytes, phys, blocks.start)
    }

    fn unpack(
        &self,
        level: usize,
        object: &str,
        bytes: &[u8],
        phys: Range<u64>,
        first_block: u64,
    ) -> Result<Records> {
        let g = self.geometry(level);
        if bytes.len() as u64 != phys.end - phys.start {
            return Err(Error::corrupt(format!(
                "{object}: short read: asked for {} bytes at {}, got {}",
                phys.end - phys.start,
                phys.start,
                bytes.len()
            )));
        }
        let logical = format::unpack_blocks(bytes, &g, first_block, object)?;
        Ok(Records {
            first: first_block * g.block_records,
            bytes: logical,
            record_size: g.record_size as usize,
        })
    }

    /// At index layer `level`, the predecessor record of `key` among
    /// `records` predicts the window of the layer below.
    fn descend(&self, level: usize, records: &Records, key: u64) -> Result<Range<u64>> {
        let n = records.len();
        let mut pred = None;
        for i in 0..n {
            let k = records.key(i);
            if i > 0 && k <= records.key(i - 1) {
                return Err(Error::corrupt(format!(
                    "{}: keys out of order at record {}",
                    self.object(level),
                    records.first + i as u64
                )));
            }
            if k <= key {
                pred = Some(i);
            } else {
                break;
            }
        }
        let i = match pred {
            Some(i) => i,
            // Only the very first record may lie above the key.
            None if records.first == 0 && n > 0 => 0,
            None => {
                return Err(Error::corrupt(format!(
                    "{}: the window predicted for key {key} misses its node",
                    self.object(level)
                )));
            }
        };
        node::predict(self.kind(level), records.record(i), key)
    }

    /// The first record with key >= `key` among data `records`, or the
    /// record right after them.
    fn finish(&self, records: &Records, key: u64) -> Result<Option<Entry>> {
        let n = records.len();
        let mut lo = 0;
        let mut hi = n;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if records.key(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo < n {
            return Ok(Some(self.entry(records, lo)));
        }
        // Every key in the window is smaller: the answer starts the next
        // window (a key between two nodes, or past the end).
        let next = records.first + n as u64;
        if next >= self.meta.data.records {
            return Ok(None);
        }
        let rs = self.meta.data.record_size;
        let more = self.read_window(0, &(next * rs..(next + 1) * rs))?;
        let i = (next - more.first) as usize;
        if i >= more.len() || more.key(i) < key {
            return Err(Error::corrupt(format!(
                "{}: lower bound of {key} is not where the index says",
                self.object(0)
            )));
        }
        Ok(Some(self.entry(&more, i)))
    }

    fn entry(&self, records: &Records, i: usize) -> Entry {
        let r = records.record(i);
        Entry {
            key: node::record_key(r),
            rank: records.first + i as u64,
            value: Bytes::copy_from_slice(&r[8..]),
        }
    }

    /// The first record whose key is >= `key` (the first occurrence for
    /// duplicate keys), or `None` past the last key.
    pub fn lower_bound(&self, key: u64) -> Result<Option<Entry>> {
        if self.index_layers() == 0 {
            return self.finish(&self.root_records(), key);
        }
        let mut window = self.root_window(key)?;
        for level in (1..self.index_layers()).rev() {
            let records = self.read_window(level, &window)?;
            window = self.descend(level, &records, key)?;
        }
        let records = self.read_window(0, &window)?;
        self.finish(&records, key)
    }

    /// The record of `key` (its first occurrence), if present.
    pub fn get_entry(&self, key: u64) -> Result<Option<Entry>> {
        Ok(self.lower_bound(key)?.filter(|e| e.key == key))
    }

    /// The value of `key`: its 8-byte value, or its rank for SOSD key
    /// arrays. Other value widths are [`Error::Unsupported`] (use
    /// [`get_entry`](Self::get_entry)).
    pub fn get(&self, key: u64) -> Result<Option<u64>> {
        match self.get_entry(key)? {
            None => Ok(None),
            Some(e) => e.value_u64(self.meta.layout).map(Some).ok_or_else(|| {
                Error::Unsupported(format!(
                    "values are {} bytes wide; use get_entry",
                    e.value.len()
                ))
            }),
        }
    }

    /// Looks up many keys, overlapping their reads: one concurrent batch of
    /// requests per layer instead of one request per key per layer, which
    /// is what high-latency storage needs.
    pub fn get_many(&self, keys: &[u64]) -> Result<Vec<Option<u64>>> {
        let entries = self.lower_bound_many(keys)?;
        entries
            .into_iter()
            .zip(keys)
            .map(|(e, &k)| match e.filter(|e| e.key == k) {
                None => Ok(None),
                Some(e) => e.value_u64(self.meta.layout).map(Some).ok_or_else(|| {
                    Error::Unsupported(format!("values are {} bytes wide", e.value.len()))
                }),
            })
            .collect()
    }

    /// [`lower_bound`](Self::lower_bound) for many keys, level by level.
    pub fn lower_bound_many(&self, keys: &[u64]) -> Result<Vec<Option<Entry>>> {
        if self.index_layers() == 0 {
            let root = self.root_records();
            return keys.iter().map(|&k| self.finish(&root, k)).collect();
        }
        let mut windows: Vec<Range<u64>> = keys
            .iter()
            .map(|&k| self.root_window(k))
            .collect::<Result<_>>()?;
        for level in (1..self.index_layers()).rev() {
            let records = self.read_windows(level, &windows)?;
            windows = records
                .iter()
                .zip(keys)
                .map(|(r, &k)| self.descend(level, r, k))
                .collect::<Result<_>>()?;
        }
        let records = self.read_windows(0, &windows)?;
        records
            .iter()
            .zip(keys)
            .map(|(r, &k)| self.finish(r, k))
            .collect()
    }

    /// Reads many windows of one level with one `read_many`, merging
    /// overlapping block ranges so shared blocks are fetched once.
    fn read_windows(&self, level: usize, windows: &[Range<u64>]) -> Result<Vec<Records>> {
        let g = self.geometry(level);
        let blocks: Vec<Range<u64>> = windows
            .iter()
            .map(|w| g.block_range(&g.record_range(w)))
            .collect();
        let mut merged: Vec<Range<u64>> =
            blocks.iter().filter(|b| !b.is_empty()).cloned().collect();
        merged.sort_by_key(|b| b.start);
        let mut runs: Vec<Range<u64>> = Vec::new();
        for b in merged {
            match runs.last_mut() {
                Some(last) if b.start <= last.end => last.end = last.end.max(b.end),
                _ => runs.push(b),
            }
        }
        let object = self.object(level);
        let phys: Vec<Range<u64>> = runs.iter().map(|r| g.physical_blocks(r)).collect();
        let fetched = self
            .storage
            .read_many(&object, &phys)
            .map_err(|e| storage_error(e, &object))?;
        if fetched.len() != phys.len() {
            return Err(Error::corrupt(format!(
                "{object}: read_many returned too few ranges"
            )));
        }
        let unpacked: Vec<Records> = runs
            .iter()
            .zip(phys.iter().zip(&fetched))
            .map(|(run, (p, bytes))| self.unpack(level, &object, bytes, p.clone(), run.start))
            .collect::<Result<_>>()?;
        blocks
            .iter()
            .map(|b| {
                if b.is_empty() {
                    return Ok(Records {
                        first: (b.start * g.block_records).min(g.records),
                        bytes: Vec::new(),
                        record_size: g.record_size as usize,
                    });
                }
                let k = runs.partition_point(|r| r.end <= b.start);
                let run = &runs[k];
                let all = &unpacked[k];
                let rs = g.record_size as usize;
                let from = ((b.start - run.start) * g.block_records) as usize * rs;
                let to =
                    (((b.end - run.start) * g.block_records) as usize * rs).min(all.bytes.len());
                Ok(Records {
                    first: b.start * g.block_records,
                    bytes: all.bytes[from..to].to_vec(),
                    record_size: rs,
                })
            })
            .collect()
    }

    /// Iterates the records whose keys lie in `range`, in key order.
    pub fn range(&self, range: impl RangeBounds<u64>) -> Result<RangeIter<'_>> {
        let start = match range.start_bound() {
            Bound::Unbounded => Some(0),
            Bound::Included(&k) => self.lower_bound(k)?.map(|e| e.rank),
            Bound::Excluded(&k) => match k.checked_add(1) {
                None => None,
                Some(k) => self.lower_bound(k)?.map(|e| e.rank),
            },
        };
        Ok(RangeIter {
            index: self,
            next: start.unwrap_or(self.meta.data.records),
            end: range.end_bound().cloned(),
            buffer: None,
            done: false,
        })
    }

    /// Reads every object in full and checks its checksum, then walks the
    /// index in memory for every distinct key: the thorough check behind
    /// `lidx air inspect --verify`.
    pub fn verify(&self) -> Result<()> {
        let mut layers: Vec<Records> = Vec::with_capacity(self.index_layers() + 1);
        // Every layer stored as an object: the data, and index layers below
        // the (embedded) root.
        for level in 0..self.index_layers().max(1) {
            let object = self.object(level);
            let g = self.geometry(level);
            let bytes = self
                .storage
                .read_all(&object)
                .map_err(|e| storage_error(e, &object))?;
            let crc = if level == 0 {
                self.meta.data_crc
            } else {
                self.meta.layers[level - 1].object_crc
            };
            if bytes.len() as u64 != g.physical_len() {
                return Err(Error::corrupt(format!(
                    "{object} is {} bytes, meta says {}",
                    bytes.len(),
                    g.physical_len()
                )));
            }
            if lidx_core::checksum::crc32c(&bytes) != crc {
                return Err(Error::corrupt(format!(
                    "{object}: object checksum mismatch"
                )));
            }
            layers.push(self.unpack(level, &object, &bytes, 0..g.physical_len(), 0)?);
        }
        let data = &layers[0];
        for i in 1..data.len() {
            if data.key(i) < data.key(i - 1) {
                return Err(Error::corrupt(format!(
                    "data keys out of order at record {i}"
                )));
            }
        }
        // Every distinct key must be found where it is.
        for i in 0..data.len() {
            if i > 0 && data.key(i) == data.key(i - 1) {
                continue;
            }
            let key = data.key(i);
            let found = self.lower_bound_in_memory(&layers, key)?;
            if found != i as u64 {
                return Err(Error::corrupt(format!(
                    "key {key} at record {i} is found at record {found}"
                )));
            }
        }
        Ok(())
    }

    fn lower_bound_in_memory(&self, layers: &[Records], key: u64) -> Result<u64> {
        let slice = |level: usize, w: &Range<u64>| -> Records {
            let g = self.geometry(level);
            let r = g.record_range(w);
            let rs = g.record_size as usize;
            Records {
                first: r.start,
                bytes: layers[level].bytes[r.start as usize * rs..r.end as usize * rs].to_vec(),
                record_size: rs,
            }
        };
        let data_records = if self.index_layers() == 0 {
            self.root_records()
        } else {
            let mut window = self.root_window(key)?;
            for level in (1..self.index_layers()).rev() {
                window = self.descend(level, &slice(level, &window), key)?;
            }
            slice(0, &window)
        };
        let n = data_records.len();
        let i = (0..n).find(|&i| data_records.key(i) >= key).unwrap_or(n);
        Ok(data_records.first + i as u64)
    }
}

/// Errors reading a layer object: a missing or short object means the index
/// is damaged ([`Error::Corrupt`]); anything else (I/O, injected faults)
/// propagates unchanged.
fn storage_error(e: Error, object: &str) -> Error {
    match e {
        Error::Truncated {
            expected, found, ..
        } => Error::corrupt(format!(
            "{object} is truncated: {found} bytes, the index needs {expected}"
        )),
        Error::NotFound(_) => Error::corrupt(format!("{object} is missing")),
        e => e,
    }
}

/// Iterator over a key range of the data layer, reading blocks in batches.
pub struct RangeIter<'a> {
    index: &'a AirIndex,
    next: u64,
    end: Bound<u64>,
    buffer: Option<Records>,
    done: bool,
}

/// Records fetched per read while scanning.
const SCAN_BATCH_RECORDS: u64 = 4096;

impl Iterator for RangeIter<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.next >= self.index.meta.data.records {
            return None;
        }
        let have = self
            .buffer
            .as_ref()
            .is_some_and(|b| self.next >= b.first && self.next < b.first + b.len() as u64);
        if !have {
            let rs = self.index.meta.data.record_size;
            let window = self.next * rs..(self.next + SCAN_BATCH_RECORDS) * rs;
            let records = if self.index.index_layers() == 0 {
                let root = self.index.root_records();
                Ok(root)
            } else {
                self.index.read_window(0, &window)
            };
            match records {
                Ok(r) if r.len() > 0 => self.buffer = Some(r),
                Ok(_) => {
                    self.done = true;
                    return Some(Err(Error::corrupt("data layer ended early while scanning")));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        let b = self.buffer.as_ref()?;
        let i = (self.next - b.first) as usize;
        let entry = self.index.entry(b, i);
        let inside = match self.end {
            Bound::Unbounded => true,
            Bound::Included(hi) => entry.key <= hi,
            Bound::Excluded(hi) => entry.key < hi,
        };
        if !inside {
            self.done = true;
            return None;
        }
        self.next += 1;
        Some(Ok(entry))
    }
}
