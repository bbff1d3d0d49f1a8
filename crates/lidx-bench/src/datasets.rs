//! Named key sets: the real ones in `../shared/data` (or committed under
//! `data/`) and the seeded generators of [`crate::keygen`].
//!
//! A dataset argument is a real set's name (`geolite2`, `books`...), a
//! generator name (`lognormal`, `uniform-sparse`...) or a path to a SOSD
//! file. Real sets are looked up, in order, in `--data-dir`, `$LIDX_DATA_DIR`,
//! `./data`, `../shared/data`, and finally the `data/` and `../shared/data`
//! directories next to the lidx workspace that built this binary.

use std::path::{Path, PathBuf};

use lidx_core::keyset::{open_sosd_f64, open_sosd_u64};
use lidx_core::{Error, Result};

use crate::keygen::{self, Distribution};

/// Storage type of a real key set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// SOSD file of little-endian `u64`.
    U64,
    /// SOSD file of little-endian `f64`.
    F64,
    /// Text file, one byte-string key per line.
    Text,
}

/// A named real key set.
#[derive(Clone, Copy, Debug)]
pub struct RealDataset {
    /// Name used on the command line.
    pub name: &'static str,
    /// File name inside a data directory.
    pub file: &'static str,
    /// Key type.
    pub kind: KeyKind,
    /// Number of keys the file holds.
    pub keys: u64,
    /// What the keys are.
    pub description: &'static str,
    /// Licence and attribution.
    pub licence: &'static str,
}

/// Every real key set lidx knows by name.
pub const REAL_DATASETS: &[RealDataset] = &[
    RealDataset {
        name: "geolite2",
        file: "geolite2_city_ipv4_3M_uint64",
        kind: KeyKind::U64,
        keys: 3_074_175,
        description: "IPv4 network starts of GeoLite2-City (2018-07); hard for linear models",
        licence: "MaxMind GeoLite2, CC BY-SA 3.0",
    },
    RealDataset {
        name: "torgeoip",
        file: "tor_geoip_ipv4_uint64",
        kind: KeyKind::U64,
        keys: 385_602,
        description: "IPv4 range starts of the IPFire geoip table shipped with Tor",
        licence: "IPFire location database, CC BY-SA 4.0",
    },
    RealDataset {
        name: "s2cells",
        file: "geopointdb_s2cellids_uint64",
        kind: KeyKind::U64,
        keys: 223_689,
        description: "S2 level-30 cell ids of ~224k world cities (osm_cellids analogue)",
        licence: "geopointdb 1.2.0 (MIT, GeoNames-derived)",
    },
    RealDataset {
        name: "longitudes",
        file: "geopointdb_longitudes_f64",
        kind: KeyKind::F64,
        keys: 209_406,
        description: "longitudes of ~209k world cities (f64)",
        licence: "geopointdb 1.2.0 (MIT, GeoNames-derived)",
    },
    RealDataset {
        name: "books",
        file: "sosdlike_books_1M_uint64",
        kind: KeyKind::U64,
        keys: 998_977,
        description: "SOSD books-shaped, rebuilt from published PGM segments; easy",
        licence: "derived from SOSD sample segment tables",
    },
    RealDataset {
        name: "osm",
        file: "sosdlike_osm_cellids_1M_uint64",
        kind: KeyKind::U64,
        keys: 872_120,
        description: "SOSD osm_cellids-shaped, rebuilt from published PGM segments; hard",
        licence: "derived from SOSD sample segment tables",
    },
    RealDataset {
        name: "words",
        file: "words_en_insane.txt",
        kind: KeyKind::Text,
        keys: 663_473,
        description: "SCOWL American English word list (strings)",
        licence: "SCOWL licence (permissive), Debian wamerican-insane",
    },
    RealDataset {
        name: "pypi",
        file: "pypi_names.txt",
        kind: KeyKind::Text,
        keys: 886_323,
        description: "PyPI package names, 2026 snapshot (strings)",
        licence: "PyPI package names (public listing)",
    },
];

/// Directories searched for real key sets, in order of preference.
pub fn search_dirs(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = explicit {
        dirs.push(d.to_owned());
    }
    if let Some(d) = std::env::var_os("LIDX_DATA_DIR") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(PathBuf::from("data"));
    dirs.push(PathBuf::from("../shared/data"));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    dirs.push(workspace.join("data"));
    dirs.push(workspace.join("../shared/data"));
    dirs
}

/// The real key set called `name`, if lidx knows it.
pub fn real(name: &str) -> Option<&'static RealDataset> {
    REAL_DATASETS.iter().find(|d| d.name == name)
}

/// Where `set` is found, if anywhere.
pub fn locate(set: &RealDataset, explicit: Option<&Path>) -> Option<PathBuf> {
    search_dirs(explicit)
        .into_iter()
        .map(|d| d.join(set.file))
        .find(|p| p.is_file())
}

/// A loaded `u64` key set: sorted and duplicate-free.
#[derive(Clone, Debug)]
pub struct KeySet {
    /// Name for reports (dataset name, generator name or path).
    pub name: String,
    /// The keys.
    pub keys: Vec<u64>,
}

/// Maps an `f64` to a `u64` with the same order (total order; NaN excluded
/// by the caller), so float key sets can run through the `u64` benchmark.
pub fn f64_to_ordered_u64(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Loads a dataset argument as sorted unique `u64` keys.
///
/// `keys` limits the count: real sets are thinned by taking evenly spaced
/// keys (the distribution's shape is kept), generators produce exactly that
/// many (default 1,000,000). A SOSD path must be sorted; duplicates are
/// dropped because every benchmarked engine is a map. A path whose name ends
/// in `f64`/`float64`, or that is prefixed with `f64:`, holds `f64` keys
/// (mapped to `u64` preserving order; NaN is an error).
pub fn load_u64(
    spec: &str,
    keys: Option<usize>,
    seed: u64,
    data_dir: Option<&Path>,
) -> Result<KeySet> {
    if let Some(set) = real(spec) {
        let path = locate(set, data_dir).ok_or_else(|| {
            Error::NotFound(format!(
                "dataset '{}' ({}) not found in {}; set --data-dir or LIDX_DATA_DIR",
                set.name,
                set.file,
                search_dirs(data_dir)
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let all = match set.kind {
            KeyKind::U64 => open_sosd_u64(&path)?.require_sorted()?.as_slice().to_vec(),
            KeyKind::F64 => open_sosd_f64(&path)?
                .require_sorted()?
                .as_slice()
                .iter()
                .map(|&v| f64_to_ordered_u64(v))
                .collect(),
            KeyKind::Text => {
                return Err(Error::invalid(format!(
                    "dataset '{}' holds string keys; the u64 benchmark needs an integer or float set",
                    set.name
                )));
            }
        };
        return Ok(KeySet {
            name: set.name.to_owned(),
            keys: thin(dedup_sorted(all), keys),
        });
    }
    if let Ok(dist) = spec.parse::<Distribution>() {
        let n = keys.unwrap_or(1_000_000);
        return Ok(KeySet {
            name: spec.to_owned(),
            keys: keygen::generate(dist, n, seed)?,
        });
    }
    let (path, float) = match spec.strip_prefix("f64:") {
        Some(p) => (Path::new(p), true),
        None => (
            Path::new(spec),
            spec.ends_with("f64") || spec.ends_with("float64"),
        ),
    };
    if path.exists() {
        let all = if float {
            open_sosd_f64(path)?
                .require_sorted()?
                .as_slice()
                .iter()
                .map(|&v| f64_to_ordered_u64(v))
                .collect()
        } else {
            open_sosd_u64(path)?.require_sorted()?.as_slice().to_vec()
        };
        return Ok(KeySet {
            name: spec.to_owned(),
            keys: thin(dedup_sorted(all), keys),
        });
    }
    Err(Error::NotFound(format!(
        "dataset '{spec}': not a known key set ({}), not a generator ({}), and no such file",
        REAL_DATASETS
            .iter()
            .map(|d| d.name)
            .collect::<Vec<_>>()
            .join(", "),
        Distribution::ALL
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

fn dedup_sorted(mut keys: Vec<u64>) -> Vec<u64> {
    keys.dedup();
    keys
}

/// Evenly spaced subset of `limit` keys (all keys when `limit` is `None` or larger).
fn thin(keys: Vec<u64>, limit: Option<usize>) -> Vec<u64> {
    match limit {
        Some(n) if n < keys.len() => {
            if n == 0 {
                return Vec::new();
            }
            let len = keys.len();
            (0..n)
                .map(|i| keys[(i as u128 * len as u128 / n as u128) as usize])
                .collect()
        }
        _ => keys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_f64_mapping_preserves_order() {
        let vals = [
            f64::NEG_INFINITY,
            -180.0,
            -1.5,
            -0.0,
            0.0,
            1e-300,
            2.0,
            179.9,
            f64::INFINITY,
        ];
        let mapped: Vec<u64> = vals.iter().map(|&v| f64_to_ordered_u64(v)).collect();
        assert!(mapped.windows(2).all(|w| w[0] <= w[1]), "{mapped:?}");
    }

    #[test]
    fn thinning_keeps_count_and_order() {
        let keys: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        let t = thin(keys.clone(), Some(10));
        assert_eq!(t.len(), 10);
        assert_eq!(t[0], 0);
        assert!(t.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(thin(keys.clone(), Some(5000)).len(), 1000);
        assert!(thin(keys, Some(0)).is_empty());
    }

    #[test]
    fn committed_sets_are_found() {
        for name in ["torgeoip", "s2cells", "longitudes"] {
            let set = load_u64(name, None, 1, None).unwrap();
            assert_eq!(set.keys.len() as u64, real(name).unwrap().keys, "{name}");
            assert!(set.keys.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn unknown_dataset_is_a_clear_error() {
        let err = load_u64("no-such-set", None, 1, None).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("no-such-set") && msg.contains("geolite2"),
            "{msg}"
        );
    }

    #[test]
    fn string_sets_are_rejected_for_u64() {
        // Only meaningful when the words file is present.
        if let Some(path) = locate(real("words").unwrap(), None) {
            let err = load_u64("words", None, 1, None).unwrap_err();
            assert!(err.to_string().contains("string keys"), "{path:?}: {err}");
        } else {
            eprintln!("skipping: words_en_insane.txt not found (needs ../shared/data)");
        }
    }
}
