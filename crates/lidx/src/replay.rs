//! `lidx replay`: the engine-neutral text protocol used by differential and
//! crash tests.
//!
//! One operation per input line, one output line per `get`, `del`, `scan`
//! and `sync`, flushed immediately so a test that kills the process knows
//! exactly which operations were acknowledged:
//!
//! | input | output |
//! |---|---|
//! | `put K V` | nothing |
//! | `get K` | the value, or `-` |
//! | `del K` | `1` if K was present, else `0` |
//! | `scan K N` | up to N `k:v` pairs with k >= K, ascending, space-separated |
//! | `sync` | `synced`, after every earlier operation is durable |
//!
//! Keys are decimal `u64`, or lowercase hex bytes with `--key-type bytes`;
//! values are decimal `u64`. Blank lines and `#` comments are ignored.
//! Exit codes: 0 at end of input, 1 for an engine or I/O error, 2 for a
//! malformed line (`line N: ...` on stderr), 3 for an operation the engine
//! does not support.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::ops::Bound;
use std::path::Path;

use lidx_core::keyset::open_sosd_u64;
use lidx_core::{Error, Result};

/// Key type of a replay session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyType {
    /// Decimal unsigned 64-bit keys.
    U64,
    /// Byte-string keys written as lowercase hex.
    Bytes,
}

/// A key as the replay protocol carries it.
pub trait ReplayKey: lidx_core::Key {
    /// Parses the textual key.
    fn parse(text: &str) -> std::result::Result<Self, String>;
    /// Formats the key for output.
    fn format(&self) -> String;
    /// The key a bulk-loaded SOSD `u64` becomes.
    fn from_bulk(k: u64) -> Self;
    /// The key as a `u64`, for engines that only index integers.
    fn to_u64(&self) -> Option<u64>;
}

impl ReplayKey for u64 {
    fn parse(text: &str) -> std::result::Result<Self, String> {
        text.parse::<u64>()
            .map_err(|_| format!("key '{text}' is not a decimal u64"))
    }
    fn format(&self) -> String {
        self.to_string()
    }
    fn from_bulk(k: u64) -> Self {
        k
    }
    fn to_u64(&self) -> Option<u64> {
        Some(*self)
    }
}

impl ReplayKey for Vec<u8> {
    fn parse(text: &str) -> std::result::Result<Self, String> {
        if !text.len().is_multiple_of(2) {
            return Err(format!("key '{text}' has an odd number of hex digits"));
        }
        (0..text.len())
            .step_by(2)
            .map(|i| {
                let pair = &text[i..i + 2];
                if pair
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                {
                    u8::from_str_radix(pair, 16).map_err(|_| String::new())
                } else {
                    Err(String::new())
                }
            })
            .collect::<std::result::Result<Vec<u8>, String>>()
            .map_err(|_| format!("key '{text}' is not lowercase hex"))
    }
    fn format(&self) -> String {
        self.iter().map(|b| format!("{b:02x}")).collect()
    }
    fn from_bulk(k: u64) -> Self {
        // Big-endian so byte order equals numeric order.
        k.to_be_bytes().to_vec()
    }
    fn to_u64(&self) -> Option<u64> {
        None
    }
}

/// What an engine must offer to be driven by `lidx replay`.
///
/// Operations an engine does not support return [`Error::Unsupported`];
/// replay turns that into exit code 3.
pub trait ReplayEngine<K> {
    /// Inserts or overwrites.
    fn put(&mut self, key: K, value: u64) -> Result<()>;
    /// Reads.
    fn get(&mut self, key: &K) -> Result<Option<u64>>;
    /// Removes; `true` if the key was present.
    fn del(&mut self, key: &K) -> Result<bool>;
    /// Up to `n` pairs with key >= `start`, ascending.
    fn scan(&mut self, start: &K, n: usize) -> Result<Vec<(K, u64)>>;
    /// Makes every earlier operation durable.
    fn sync(&mut self) -> Result<()>;
}

/// The reference engine: `std::collections::BTreeMap`, in memory.
#[derive(Default)]
pub struct BTreeMapEngine<K> {
    map: BTreeMap<K, u64>,
}

impl<K: Ord + Clone> ReplayEngine<K> for BTreeMapEngine<K> {
    fn put(&mut self, key: K, value: u64) -> Result<()> {
        self.map.insert(key, value);
        Ok(())
    }
    fn get(&mut self, key: &K) -> Result<Option<u64>> {
        Ok(self.map.get(key).copied())
    }
    fn del(&mut self, key: &K) -> Result<bool> {
        Ok(self.map.remove(key).is_some())
    }
    fn scan(&mut self, start: &K, n: usize) -> Result<Vec<(K, u64)>> {
        Ok(self
            .map
            .range((Bound::Included(start), Bound::Unbounded))
            .take(n)
            .map(|(k, v)| (k.clone(), *v))
            .collect())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A read-only reference: the bulk-loaded keys in a sorted array, searched
/// with `lidx_core::search`. `put` and `del` are unsupported (exit code 3),
/// as they will be for read-only engines such as `air`.
pub struct SortedArrayEngine<K> {
    keys: Vec<K>,
    values: Vec<u64>,
}

impl<K: Ord + Clone> ReplayEngine<K> for SortedArrayEngine<K> {
    fn put(&mut self, _key: K, _value: u64) -> Result<()> {
        Err(Error::Unsupported(
            "engine 'sorted-array' is read-only: put is not supported".to_owned(),
        ))
    }
    fn get(&mut self, key: &K) -> Result<Option<u64>> {
        let i = lidx_core::search::lower_bound(&self.keys, key);
        Ok((self.keys.get(i) == Some(key)).then(|| self.values[i]))
    }
    fn del(&mut self, _key: &K) -> Result<bool> {
        Err(Error::Unsupported(
            "engine 'sorted-array' is read-only: del is not supported".to_owned(),
        ))
    }
    fn scan(&mut self, start: &K, n: usize) -> Result<Vec<(K, u64)>> {
        let i = lidx_core::search::lower_bound(&self.keys, start);
        Ok(self.keys[i..]
            .iter()
            .zip(&self.values[i..])
            .take(n)
            .map(|(k, v)| (k.clone(), *v))
            .collect())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

/// AirIndex, read-only: built from the bulk file (values `key + 1`) with
/// the `ssd` profile, in `--dir` if given (an index already there is opened
/// when no bulk file is given) or in memory.
pub struct AirEngine {
    index: lidx_air::AirIndex,
}

impl AirEngine {
    fn open<K: ReplayKey>(dir: Option<&Path>, bulk: Vec<(K, u64)>, has_bulk: bool) -> Result<Self> {
        use lidx_core::storage::{LocalDir, Memory, Storage};
        let storage: std::sync::Arc<dyn Storage> = match dir {
            Some(d) => std::sync::Arc::new(LocalDir::open(d, Default::default())?),
            None => std::sync::Arc::new(Memory::new()),
        };
        if dir.is_some() && !has_bulk {
            return Ok(AirEngine {
                index: lidx_air::AirIndex::open(storage)?,
            });
        }
        let mut keys = Vec::with_capacity(bulk.len());
        let mut values = Vec::with_capacity(bulk.len());
        for (k, v) in bulk {
            keys.push(k.to_u64().ok_or_else(|| {
                Error::Unsupported("engine 'air' indexes u64 keys; use --key-type u64".to_owned())
            })?);
            values.push(v);
        }
        lidx_air::build(
            &*storage,
            lidx_air::DataInput::KeyValues {
                keys: &keys,
                values: &values,
            },
            &lidx_core::storage::StorageProfile::ssd(),
            lidx_air::DesignChoice::Tune(lidx_air::TuneConfig::default()),
        )?;
        Ok(AirEngine {
            index: lidx_air::AirIndex::open(storage)?,
        })
    }

    fn key<K: ReplayKey>(key: &K) -> Result<u64> {
        key.to_u64().ok_or_else(|| {
            Error::Unsupported("engine 'air' indexes u64 keys; use --key-type u64".to_owned())
        })
    }
}

impl<K: ReplayKey> ReplayEngine<K> for AirEngine {
    fn put(&mut self, _key: K, _value: u64) -> Result<()> {
        Err(Error::Unsupported(
            "engine 'air' is read-only: put is not supported".to_owned(),
        ))
    }
    fn get(&mut self, key: &K) -> Result<Option<u64>> {
        self.index.get(Self::key(key)?)
    }
    fn del(&mut self, _key: &K) -> Result<bool> {
        Err(Error::Unsupported(
            "engine 'air' is read-only: del is not supported".to_owned(),
        ))
    }
    fn scan(&mut self, start: &K, n: usize) -> Result<Vec<(K, u64)>> {
        let layout = self.index.meta().layout;
        self.index
            .range(Self::key(start)?..)?
            .take(n)
            .map(|e| {
                let e = e?;
                let v = e
                    .value_u64(layout)
                    .ok_or_else(|| Error::Unsupported("values are not 8 bytes".to_owned()))?;
                Ok((K::from_bulk(e.key), v))
            })
            .collect()
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

/// XIndex-R, in memory, with its background maintenance running (paper
/// defaults).
pub struct XIndexEngine<K: ReplayKey> {
    index: lidx_xindex::XIndex<K, u64>,
}

impl<K: ReplayKey> ReplayEngine<K> for XIndexEngine<K> {
    fn put(&mut self, key: K, value: u64) -> Result<()> {
        self.index.insert(key, value);
        Ok(())
    }
    fn get(&mut self, key: &K) -> Result<Option<u64>> {
        Ok(self.index.get(key))
    }
    fn del(&mut self, key: &K) -> Result<bool> {
        Ok(self.index.remove(key).is_some())
    }
    fn scan(&mut self, start: &K, n: usize) -> Result<Vec<(K, u64)>> {
        let mut out = Vec::with_capacity(n.min(1 << 16));
        self.index.scan(start, n, &mut out);
        Ok(out)
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Names of the engines `lidx replay` knows.
pub const ENGINES: &[&str] = &["btreemap", "sorted-array", "air", "xindex"];

/// Why a replay session stopped early.
#[derive(Debug)]
pub enum ReplayError {
    /// A malformed input line (exit 2).
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// The engine does not support an operation (exit 3).
    Unsupported {
        /// 1-based line number.
        line: usize,
        /// The engine's message.
        message: String,
    },
    /// Any other failure (exit 1).
    Failed(Error),
}

impl ReplayError {
    /// Process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            ReplayError::Malformed { .. } => 2,
            ReplayError::Unsupported { .. } => 3,
            ReplayError::Failed(_) => 1,
        }
    }
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Malformed { line, message } => write!(f, "line {line}: {message}"),
            ReplayError::Unsupported { line, message } => write!(f, "line {line}: {message}"),
            ReplayError::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// One parsed protocol line.
enum Command<K> {
    Put(K, u64),
    Get(K),
    Del(K),
    Scan(K, usize),
    Sync,
}

fn parse_line<K: ReplayKey>(text: &str) -> std::result::Result<Option<Command<K>>, String> {
    let text = text.trim();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let mut words = text.split_ascii_whitespace();
    let verb = words.next().unwrap_or_default();
    let args: Vec<&str> = words.collect();
    let want = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!(
                "'{verb}' takes {n} argument{}, got {}",
                if n == 1 { "" } else { "s" },
                args.len()
            ))
        }
    };
    let value = |t: &str| {
        t.parse::<u64>()
            .map_err(|_| format!("value '{t}' is not a decimal u64"))
    };
    let cmd = match verb {
        "put" => {
            want(2)?;
            Command::Put(K::parse(args[0])?, value(args[1])?)
        }
        "get" => {
            want(1)?;
            Command::Get(K::parse(args[0])?)
        }
        "del" => {
            want(1)?;
            Command::Del(K::parse(args[0])?)
        }
        "scan" => {
            want(2)?;
            let n = args[1]
                .parse::<usize>()
                .map_err(|_| format!("count '{}' is not a decimal integer", args[1]))?;
            Command::Scan(K::parse(args[0])?, n)
        }
        "sync" => {
            want(0)?;
            Command::Sync
        }
        other => {
            return Err(format!(
                "unknown operation '{other}' (expected put, get, del, scan or sync)"
            ));
        }
    };
    Ok(Some(cmd))
}

/// Reads a bulk-load file: SOSD `u64` keys, sorted, each paired with the
/// value `key.wrapping_add(1)`; duplicate keys keep one entry.
pub fn read_bulk<K: ReplayKey>(path: &Path) -> Result<Vec<(K, u64)>> {
    let keys = open_sosd_u64(path)?.require_sorted()?;
    let mut pairs: Vec<(K, u64)> = keys
        .as_slice()
        .iter()
        .map(|&k| (K::from_bulk(k), k.wrapping_add(1)))
        .collect();
    pairs.dedup_by(|a, b| a.0 == b.0);
    Ok(pairs)
}

/// Runs the protocol from `input` to `output` until end of input.
pub fn run<K: ReplayKey>(
    engine: &mut dyn ReplayEngine<K>,
    input: impl BufRead,
    mut output: impl Write,
) -> std::result::Result<(), ReplayError> {
    let io_err = |e: std::io::Error| ReplayError::Failed(Error::io("<stdout>", e));
    for (i, line) in input.split(b'\n').enumerate() {
        let lineno = i + 1;
        let line = line.map_err(|e| ReplayError::Failed(Error::io("<stdin>", e)))?;
        let text = std::str::from_utf8(&line).map_err(|_| ReplayError::Malformed {
            line: lineno,
            message: "not valid UTF-8".to_owned(),
        })?;
        let cmd = parse_line::<K>(text).map_err(|message| ReplayError::Malformed {
            line: lineno,
            message,
        })?;
        let engine_err = |e: Error| match e {
            Error::Unsupported(message) => ReplayError::Unsupported {
                line: lineno,
                message,
            },
            other => ReplayError::Failed(other),
        };
        let out = match cmd {
            None => continue,
            Some(Command::Put(k, v)) => {
                engine.put(k, v).map_err(engine_err)?;
                continue;
            }
            Some(Command::Get(k)) => match engine.get(&k).map_err(engine_err)? {
                Some(v) => v.to_string(),
                None => "-".to_owned(),
            },
            Some(Command::Del(k)) => if engine.del(&k).map_err(engine_err)? {
                "1"
            } else {
                "0"
            }
            .to_owned(),
            Some(Command::Scan(k, n)) => engine
                .scan(&k, n)
                .map_err(engine_err)?
                .iter()
                .map(|(k, v)| format!("{}:{v}", k.format()))
                .collect::<Vec<_>>()
                .join(" "),
            Some(Command::Sync) => {
                engine.sync().map_err(engine_err)?;
                "synced".to_owned()
            }
        };
        writeln!(output, "{out}").map_err(io_err)?;
        output.flush().map_err(io_err)?;
    }
    Ok(())
}

/// Opens the engine called `name` for replay with key type `K`, bulk-loaded
/// with `bulk` (sorted pairs).
pub fn open_engine<K: ReplayKey + 'static>(
    name: &str,
    dir: Option<&Path>,
    bulk: Vec<(K, u64)>,
    has_bulk: bool,
) -> Result<Box<dyn ReplayEngine<K>>> {
    match name {
        "air" => Ok(Box::new(AirEngine::open(dir, bulk, has_bulk)?)),
        "xindex" => Ok(Box::new(XIndexEngine {
            index: lidx_xindex::XIndex::bulk_load(bulk, lidx_xindex::Config::default())?,
        })),
        "btreemap" => Ok(Box::new(BTreeMapEngine::<K> {
            map: bulk.into_iter().collect(),
        })),
        "sorted-array" => {
            let (keys, values) = bulk.into_iter().unzip();
            Ok(Box::new(SortedArrayEngine { keys, values }))
        }
        other => Err(Error::NotFound(format!(
            "replay engine '{other}' (known: {})",
            ENGINES.join(", ")
        ))),
    }
}

/// Entry point of `lidx replay`.
pub fn main(
    engine: &str,
    dir: Option<&Path>,
    bulk: Option<&Path>,
    key_type: KeyType,
) -> std::result::Result<(), ReplayError> {
    fn go<K: ReplayKey + 'static>(
        engine: &str,
        dir: Option<&Path>,
        bulk: Option<&Path>,
    ) -> std::result::Result<(), ReplayError> {
        if !ENGINES.contains(&engine) {
            // Name errors come before reading a possibly large bulk file.
            return Err(ReplayError::Failed(Error::NotFound(format!(
                "replay engine '{engine}' (known: {})",
                ENGINES.join(", ")
            ))));
        }
        let pairs = match bulk {
            Some(path) => read_bulk::<K>(path).map_err(ReplayError::Failed)?,
            None => Vec::new(),
        };
        let mut e = open_engine::<K>(engine, dir, pairs, bulk.is_some()).map_err(|e| match e {
            Error::Unsupported(message) => ReplayError::Unsupported { line: 0, message },
            e => ReplayError::Failed(e),
        })?;
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        run(e.as_mut(), stdin.lock(), stdout.lock())
    }
    match key_type {
        KeyType::U64 => go::<u64>(engine, dir, bulk),
        KeyType::Bytes => go::<Vec<u8>>(engine, dir, bulk),
    }
}
