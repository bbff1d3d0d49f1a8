//! Keys and values of a static index in two parallel sorted arrays, with the
//! point-read and scan logic every read-only peer shares once it has
//! located a position.

/// Sorted keys with their values in a parallel array.
pub(crate) struct SortedColumns {
    pub(crate) keys: Vec<u64>,
    pub(crate) values: Vec<u64>,
}

impl SortedColumns {
    /// Splits sorted pairs into columns.
    pub(crate) fn from_pairs(pairs: &[(u64, u64)]) -> Self {
        SortedColumns {
            keys: pairs.iter().map(|p| p.0).collect(),
            values: pairs.iter().map(|p| p.1).collect(),
        }
    }

    /// The value of `key` if the key at `pos` (its lower bound) is `key`.
    pub(crate) fn value_at(&self, pos: usize, key: u64) -> Option<u64> {
        match self.keys.get(pos) {
            Some(&k) if k == key => Some(self.values[pos]),
            _ => None,
        }
    }

    /// Clears `out` and fills it with up to `n` pairs starting at `pos`.
    pub(crate) fn scan_from(&self, pos: usize, n: usize, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let pos = pos.min(self.keys.len());
        let end = pos.saturating_add(n).min(self.keys.len());
        out.extend(
            self.keys[pos..end]
                .iter()
                .copied()
                .zip(self.values[pos..end].iter().copied()),
        );
    }
}
