//! Key-position collections: the `D = {(x_i, y_i)}` a layer builder indexes.
//!
//! An entry is a distinct key and the run of consecutive records it owns in
//! a layer; its position is that run in logical bytes. At the data layer a
//! run of duplicate keys is one entry (lookups land on its first record);
//! at an index layer every node record is one entry.

use std::ops::Range;

use lidx_core::{Error, Result};

use crate::geometry::RecordGeometry;

/// Distinct keys with the records they own in one layer.
///
/// Invariants (checked by the constructors; the fields are public for
/// reading, and code that mutates them must keep the invariants): keys
/// strictly increase; entry `i` covers records `[first_record[i],
/// first_record[i + 1])`, the last one ending at `geometry.records`; the
/// first entry starts at record 0, every entry owns at least one record,
/// and `records * record_size` fits in a `u64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPositions {
    /// Entry keys, strictly increasing.
    pub keys: Vec<u64>,
    /// Record index at which each entry starts.
    pub first_record: Vec<u64>,
    /// Data-layer distinct keys routed through each entry (1 per entry at
    /// the data layer).
    pub weights: Vec<u64>,
    /// Record layout of the layer the entries live in.
    pub geometry: RecordGeometry,
}

impl KeyPositions {
    /// The data layer over `keys` in record order (one record per key, each
    /// `record_size` bytes, packed into blocks of about `block_target`
    /// bytes). Duplicate runs become one entry of weight 1.
    ///
    /// Unsorted input is [`Error::Unsorted`] naming the first out-of-order
    /// index; `record_size < 8` or a layer beyond `u64` bytes is
    /// [`Error::InvalidArgument`].
    pub fn from_sorted_keys(keys: &[u64], record_size: u64, block_target: u64) -> Result<Self> {
        if record_size < 8 {
            return Err(Error::invalid(format!(
                "record size {record_size} is below 8 bytes: every record starts with its u64 key"
            )));
        }
        let records = keys.len() as u64;
        check_layer_len(records, record_size)?;
        let mut distinct = Vec::new();
        let mut first_record = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            match distinct.last() {
                Some(&prev) if k < prev => return Err(Error::Unsorted { index: i }),
                Some(&prev) if k == prev => {}
                _ => {
                    distinct.push(k);
                    first_record.push(i as u64);
                }
            }
        }
        let weights = vec![1; distinct.len()];
        Ok(KeyPositions {
            keys: distinct,
            first_record,
            weights,
            geometry: RecordGeometry::new(record_size, records, block_target),
        })
    }

    /// A collection from its parts, validated against the invariants
    /// ([`Error::InvalidArgument`] naming the first violation).
    pub fn new(
        keys: Vec<u64>,
        first_record: Vec<u64>,
        weights: Vec<u64>,
        geometry: RecordGeometry,
    ) -> Result<Self> {
        if keys.len() != first_record.len() || keys.len() != weights.len() {
            return Err(Error::invalid(format!(
                "key-position parts differ in length: {} keys, {} first records, {} weights",
                keys.len(),
                first_record.len(),
                weights.len()
            )));
        }
        if geometry.record_size < 8 || geometry.block_records == 0 {
            return Err(Error::invalid(format!(
                "invalid geometry {geometry:?}: records need at least 8 bytes and blocks at least one record"
            )));
        }
        check_layer_len(geometry.records, geometry.record_size)?;
        if let Some(i) = keys.windows(2).position(|w| w[0] >= w[1]) {
            return Err(Error::invalid(format!(
                "entry keys must strictly increase: key {} is not above key {i}",
                i + 1
            )));
        }
        if first_record.first().is_some_and(|&f| f != 0) {
            return Err(Error::invalid("the first entry must start at record 0"));
        }
        if let Some(i) = first_record.windows(2).position(|w| w[0] >= w[1]) {
            return Err(Error::invalid(format!(
                "entry {i} owns no record: entry {} starts at or before it",
                i + 1
            )));
        }
        if let Some(&last) = first_record.last()
            && last >= geometry.records
        {
            return Err(Error::invalid(format!(
                "the last entry starts at record {last} but the layer has {} records",
                geometry.records
            )));
        }
        if keys.is_empty() && geometry.records != 0 {
            return Err(Error::invalid(format!(
                "no entries but {} records",
                geometry.records
            )));
        }
        Ok(KeyPositions {
            keys,
            first_record,
            weights,
            geometry,
        })
    }

    /// Number of entries (distinct keys).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The entry keys, strictly increasing.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Record index at which each entry starts.
    pub fn first_records(&self) -> &[u64] {
        &self.first_record
    }

    /// Data-layer distinct keys routed through each entry.
    pub fn weights(&self) -> &[u64] {
        &self.weights
    }

    /// Record layout of the layer the entries live in.
    pub fn geometry(&self) -> &RecordGeometry {
        &self.geometry
    }

    /// Records `[first, end)` owned by entry `i`. Panics if `i >= len()`.
    #[inline]
    pub fn records(&self, i: usize) -> Range<u64> {
        let end = match self.first_record.get(i + 1) {
            Some(&next) => next,
            None => self.geometry.records,
        };
        self.first_record[i]..end
    }

    /// Logical bytes `[first * record_size, end * record_size)` of entry
    /// `i`. Panics if `i >= len()`.
    #[inline]
    pub fn position(&self, i: usize) -> Range<u64> {
        let r = self.records(i);
        let rs = self.geometry.record_size;
        // Cannot overflow: the constructors bound records * record_size.
        r.start * rs..r.end * rs
    }

    /// Sum of the weights: the data layer's distinct keys.
    pub fn total_weight(&self) -> u64 {
        self.weights.iter().sum()
    }
}

/// Rejects layers whose logical length does not fit in `u64`.
fn check_layer_len(records: u64, record_size: u64) -> Result<()> {
    records.checked_mul(record_size).map(|_| ()).ok_or_else(|| {
        Error::invalid(format!(
            "{records} records of {record_size} bytes overflow a u64 byte position"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn duplicate_runs_become_one_entry() {
        let d = KeyPositions::from_sorted_keys(&[0, 0, 3, 7, 7, 7, u64::MAX], 16, 512).unwrap();
        assert_eq!(d.keys(), &[0, 3, 7, u64::MAX]);
        assert_eq!(d.first_records(), &[0, 2, 3, 6]);
        assert_eq!(d.records(2), 3..6);
        assert_eq!(d.position(0), 0..32);
        assert_eq!(d.position(2), 48..96);
        assert_eq!(d.position(3), 96..112);
        assert_eq!(d.total_weight(), 4);
        assert_eq!(d.geometry().records, 7);
    }

    #[test]
    fn small_inputs() {
        let empty = KeyPositions::from_sorted_keys(&[], 8, 512).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.total_weight(), 0);
        let one = KeyPositions::from_sorted_keys(&[u64::MAX], 8, 512).unwrap();
        assert_eq!(one.position(0), 0..8);
        let two = KeyPositions::from_sorted_keys(&[0, u64::MAX], 4104, 512).unwrap();
        assert_eq!(two.position(1), 4104..8208);
        assert_eq!(two.geometry().block_records, 1);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            KeyPositions::from_sorted_keys(&[1, 2, 2, 1], 8, 512),
            Err(Error::Unsorted { index: 3 })
        ));
        assert!(matches!(
            KeyPositions::from_sorted_keys(&[1], 7, 512),
            Err(Error::InvalidArgument(_))
        ));
        let g = |records| RecordGeometry::new(8, records, 512);
        assert!(KeyPositions::new(vec![1, 2], vec![0, 1], vec![1, 1], g(2)).is_ok());
        for (keys, first, weights, geom) in [
            (vec![1, 2], vec![0], vec![1, 1], g(2)),
            (vec![2, 2], vec![0, 1], vec![1, 1], g(2)),
            (vec![1, 2], vec![1, 2], vec![1, 1], g(3)),
            (vec![1, 2], vec![0, 0], vec![1, 1], g(2)),
            (vec![1, 2], vec![0, 2], vec![1, 1], g(2)),
            (vec![], vec![], vec![], g(1)),
            (
                vec![1],
                vec![0],
                vec![1],
                RecordGeometry::new(u64::MAX, 2, 512),
            ),
        ] {
            assert!(matches!(
                KeyPositions::new(keys, first, weights, geom),
                Err(Error::InvalidArgument(_))
            ));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn positions_tile_the_layer(
            mut keys in proptest::collection::vec(0u64..50, 0..60),
            rs in prop_oneof![Just(8u64), Just(24), Just(4104)],
        ) {
            keys.sort_unstable();
            let d = KeyPositions::from_sorted_keys(&keys, rs, 512).unwrap();
            let mut next = 0;
            for i in 0..d.len() {
                let p = d.position(i);
                prop_assert_eq!(p.start, next);
                prop_assert!(p.end > p.start);
                let first = (p.start / rs) as usize;
                prop_assert_eq!(keys[first], d.keys()[i]);
                prop_assert!(first == 0 || keys[first - 1] < keys[first]);
                next = p.end;
            }
            prop_assert_eq!(next, keys.len() as u64 * rs);
        }
    }
}
