//! Workloads: deterministic operation streams generated before timing starts.
//!
//! [`prepare`] turns a [`WorkloadSpec`], a sorted key set, a thread count,
//! an operation budget and a seed into a bulk load plus one stream of
//! [`Step`]s per thread. Generation simulates the whole workload, so every
//! read carries the answer it must produce ([`Expect`]) and the runner can
//! count wrong answers.
//!
//! # Workloads
//!
//! | name | load | operations |
//! |---|---|---|
//! | `lookup`, `w1` | all keys | gets of existing keys, uniform |
//! | `lookup:zipf` | all keys | gets, Zipf(0.99) over the keys, hot keys scattered |
//! | `lookup-miss` | all keys | gets of absent keys drawn from the gaps between (and around) existing keys |
//! | `lookup-batch:N` | all keys | the gets of `lookup`, issued N at a time through the engine's multi-get (a loop of gets for engines without one); latency columns are per batch |
//! | `scan`, `w2` | all keys | scan of 100 records from a uniformly chosen existing key |
//! | `insert`, `w3` | a random half | inserts of the other half, random order |
//! | `append`, `append:R` | all but the largest keys | reads with probability R (0 for `append`), else inserts of the held-back largest keys in ascending order (XIndex §3.5.2's sequential insertion on the dataset's own gaps) |
//! | `mixed:R` | all but a held-back sample | reads with probability R, else insert : remove : update = 1 : 1 : 2 |
//! | `w4`, `w5`, `w6` | all but a held-back sample | reads 90 %, 50 %, 10 %; the rest inserts |
//! | `ycsb-a` / `-b` / `-c` | all keys | read/update 50/50, 95/5, 100/0, Zipf(0.99) |
//! | `ycsb-d` | all but a held-back sample | read 95 % (`latest`), insert 5 % |
//! | `ycsb-e` | all but a held-back sample | scan 95 % (Zipf start, length uniform in 1..=100), insert 5 % |
//! | `ycsb-f` | all keys | read 50 %, read-modify-write 50 % (Zipf) |
//! | `oscillate` | all but a held-back sample | hotspot scans, then writes, then hotspot scans |
//! | `shift` | a sample A of the keys | 90:10 reads/updates on A; remove all of A and insert B while reads go on; 90:10 on B |
//!
//! Details and the choices made where the papers leave room:
//!
//! * **Held-back keys.** Workloads that insert take the inserted keys from
//!   the dataset itself, so inserts follow the real distribution: a random
//!   sample of the keys (as many as the workload is expected to insert,
//!   plus a little slack, but at most half of the keys; at most 90 % for
//!   W4-W6, which like the AULID paper start from a sample) is left out of
//!   the bulk load and forms the pool inserts draw from, in random order.
//!   Keys removed by `mixed:R` go back to the pool. When a thread's pool
//!   runs dry (operation budgets much larger than the key set), an insert
//!   becomes an overwriting [`Op::Insert`] of one of its existing keys.
//! * **AULID W1-W6** (Section 5.1.3 of the AULID paper): W1 is `lookup`, W2
//!   `scan`, W3 `insert` (bulk-load a random sample, insert more keys of
//!   the same dataset). The paper calls the writes of W4-W6 "write
//!   operations" and its only write workload, W3, inserts, so W4-W6 mix
//!   uniform lookups of existing keys with inserts of held-back keys.
//! * **YCSB**: request distribution Zipf with theta 0.99 over the loaded
//!   keys, rank-to-key mapping scrambled by a seeded hash (YCSB's
//!   "scrambled zipfian") so hot keys are spread over the key space. D's
//!   `latest` draws a Zipf rank over the keys in insertion order, newest
//!   first; the bulk-loaded keys count as inserted in a random order before
//!   the run. F's read-modify-write is a get followed by an update of the
//!   same key (two steps).
//! * **oscillate** (AHA-tree paper, Section 10.1): the hotspot is the
//!   leftmost 10 % of the keys (by rank, so its size does not depend on the
//!   distribution's shape); the first and last thirds of each stream are
//!   scans of 100 records starting at a uniformly chosen key of the
//!   hotspot; the middle third is 100 % writes spread over the whole key
//!   space, half inserts of held-back keys and half updates (the paper
//!   speaks of both).
//! * **shift** (XIndex, Section 6.2.3): A is a random sample of
//!   `min(n, max(threads, ops / 8))` dataset keys, so that removing all of A
//!   and inserting B fits in about half the operation budget. B is A
//!   pushed through the convex map `u -> u^2` on A's normalised key range
//!   (same range, mass moved towards the low end, a different CDF for every
//!   input distribution); images that collide with A or with each other
//!   move up to the next free integer. Stage 1 is 90 % uniform gets and
//!   10 % updates on A; stage 2 removes every key of A and inserts every key
//!   of B, interleaved in random order, with uniform gets of whatever
//!   exists in between (about half the steps; the paper's stage 2 has no
//!   reads, we keep them so that read latency during the shift is
//!   measured); stage 3 is 90:10 again, on B.
//!
//! # Threads and expectations
//!
//! Key number `i` of the workload's sorted key universe belongs to thread
//! `i % threads`, and only its owner ever writes it. Streams are generated
//! round-robin against one simulated state. A get of a key the reading
//! thread owns, or of a key nobody writes, has an exact expectation
//! ([`Expect::Value`]); a get of a key another thread writes at some point
//! gets [`Expect::Consistent`]. A scan is exact unless one of the keys that
//! determine its answer is written by another thread. With one thread
//! everything is exact.

use std::fmt;
use std::str::FromStr;

use lidx_core::{Error, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::keygen::Zipf;

/// Records per scan of `scan`, `w2` and `oscillate`, and the maximum scan
/// length of `ycsb-e`.
pub const SCAN_LEN: u32 = 100;

/// Largest batch of `lookup-batch:N`.
pub const MAX_BATCH: u32 = 4096;

/// One operation of a workload stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Point lookup.
    Get(u64),
    /// Insert a new key or overwrite an existing one.
    Insert(u64, u64),
    /// Overwrite a key that is expected to exist.
    Update(u64, u64),
    /// Remove a key.
    Remove(u64),
    /// Read up to `n` records with key >= start.
    Scan(u64, u32),
    /// Read the record with the largest key <= the key (a predecessor
    /// query), if any.
    Floor(u64),
}

/// What a read operation must return, computed when the workload is generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Not a read, or nothing to check.
    Nothing,
    /// A `Get` must return exactly this.
    Value(Option<u64>),
    /// Another thread may write the key concurrently: any answer is accepted
    /// if it is absent or a value that [`value_matches_key`] accepts.
    Consistent,
    /// A `Scan` must return this many records, the first having this key.
    ScanFirst {
        /// Expected number of records returned.
        len: u32,
        /// Expected first key (ignored when `len == 0`).
        first: u64,
    },
    /// A `Floor` must return the record of this key (`None`: no record),
    /// with a value [`value_matches_key`] accepts.
    Floor(Option<u64>),
}

/// Value stored for `key` at write `version` (version 0 is the bulk load).
///
/// The low 48 bits always equal those of `key + 1`, so any value read back
/// can be checked against the key it was read under even when concurrent
/// writers make the exact version unpredictable.
pub fn value_for(key: u64, version: u16) -> u64 {
    key.wrapping_add(1) ^ ((version as u64) << 48)
}

/// Whether `value` could have been written for `key` by [`value_for`].
pub fn value_matches_key(key: u64, value: u64) -> bool {
    (value ^ key.wrapping_add(1)) & ((1u64 << 48) - 1) == 0
}

/// One of the six YCSB core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ycsb {
    /// 50 % reads, 50 % updates.
    A,
    /// 95 % reads, 5 % updates.
    B,
    /// 100 % reads.
    C,
    /// 95 % reads of recently inserted keys, 5 % inserts.
    D,
    /// 95 % short scans, 5 % inserts.
    E,
    /// 50 % reads, 50 % read-modify-writes.
    F,
}

/// One of the six workloads of the AULID paper (Section 5.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Aulid {
    /// Lookup-only.
    W1,
    /// Scan-only, 100 records per scan.
    W2,
    /// Write-only: bulk-load a sample, insert more keys.
    W3,
    /// Read-heavy: 90 % lookups, 10 % inserts.
    W4,
    /// Balanced: 50 % lookups, 50 % inserts.
    W5,
    /// Write-heavy: 10 % lookups, 90 % inserts.
    W6,
}

/// A workload, as named on the command line. See the module documentation
/// for what each one does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WorkloadSpec {
    /// `lookup`: gets of existing keys, uniform.
    Lookup,
    /// `lookup:zipf`: gets of existing keys, scrambled Zipf(0.99).
    LookupZipf,
    /// `lookup-miss`: gets of keys absent from the set.
    LookupMiss,
    /// `lookup-batch:N`: the gets of `lookup`, N per multi-get call.
    LookupBatch {
        /// Keys per call, in `1..=MAX_BATCH`.
        size: u32,
    },
    /// `scan`: 100-record scans from uniformly chosen existing keys.
    Scan,
    /// `floor`: predecessor queries (the record with the largest key at or
    /// below a probe), probes drawn uniformly from the span between a
    /// uniformly chosen key and the next: an IP-range lookup on geolite2.
    Floor,
    /// `insert`: bulk-load a random half, insert the other half.
    Insert,
    /// `append` / `append:R`: reads with probability `read`, otherwise
    /// inserts of the held-back largest keys in ascending order.
    Append {
        /// Fraction of reads, in `[0, 1]`.
        read: f64,
    },
    /// `mixed:R`: reads with probability `read`, otherwise insert, remove
    /// and update in the ratio 1:1:2.
    Mixed {
        /// Fraction of reads, in `[0, 1]`.
        read: f64,
    },
    /// `w1`..`w6`: the AULID paper's workloads.
    Aulid(Aulid),
    /// `ycsb-a`..`ycsb-f`: the YCSB core workloads.
    Ycsb(Ycsb),
    /// `oscillate`: read phase, write phase, read phase over a hotspot.
    Oscillate,
    /// `shift`: data distribution shift under a running workload.
    Shift,
}

/// Every accepted workload name form, for error messages and help texts.
pub const VALID_FORMS: &str = "lookup, lookup:zipf, lookup-miss, lookup-batch:N (N keys per multi-get, 1..=4096), scan, floor, insert, \
    append, append:R (R = read fraction in [0,1]), \
    mixed:R (R = read fraction in [0,1], e.g. mixed:0.9), w1..w6, ycsb-a..ycsb-f, \
    oscillate, shift";

impl WorkloadSpec {
    /// Whether the workload modifies the data (read-only engines skip it).
    pub fn is_write(&self) -> bool {
        match *self {
            WorkloadSpec::Lookup
            | WorkloadSpec::LookupZipf
            | WorkloadSpec::LookupMiss
            | WorkloadSpec::LookupBatch { .. }
            | WorkloadSpec::Scan
            | WorkloadSpec::Floor
            | WorkloadSpec::Aulid(Aulid::W1 | Aulid::W2)
            | WorkloadSpec::Ycsb(Ycsb::C) => false,
            WorkloadSpec::Mixed { read } | WorkloadSpec::Append { read } => read < 1.0,
            _ => true,
        }
    }

    /// The command-line name; parsing it gives back the same spec.
    pub fn name(&self) -> String {
        match *self {
            WorkloadSpec::Lookup => "lookup".into(),
            WorkloadSpec::LookupZipf => "lookup:zipf".into(),
            WorkloadSpec::LookupMiss => "lookup-miss".into(),
            WorkloadSpec::LookupBatch { size } => format!("lookup-batch:{size}"),
            WorkloadSpec::Scan => "scan".into(),
            WorkloadSpec::Floor => "floor".into(),
            WorkloadSpec::Insert => "insert".into(),
            WorkloadSpec::Append { read: 0.0 } => "append".into(),
            WorkloadSpec::Append { read } => format!("append:{read}"),
            WorkloadSpec::Mixed { read } => format!("mixed:{read}"),
            WorkloadSpec::Aulid(w) => format!("w{}", w as u8 + 1),
            WorkloadSpec::Ycsb(y) => format!("ycsb-{}", (b'a' + y as u8) as char),
            WorkloadSpec::Oscillate => "oscillate".into(),
            WorkloadSpec::Shift => "shift".into(),
        }
    }

    /// Every workload with a fixed name, plus `mixed:0.9` as an example of
    /// the parameterised form (used by tests and help texts).
    pub fn examples() -> Vec<WorkloadSpec> {
        let mut v = vec![
            WorkloadSpec::Lookup,
            WorkloadSpec::LookupZipf,
            WorkloadSpec::LookupMiss,
            WorkloadSpec::LookupBatch { size: 16 },
            WorkloadSpec::Scan,
            WorkloadSpec::Floor,
            WorkloadSpec::Insert,
            WorkloadSpec::Append { read: 0.0 },
            WorkloadSpec::Append { read: 0.5 },
            WorkloadSpec::Mixed { read: 0.9 },
        ];
        v.extend(
            [
                Aulid::W1,
                Aulid::W2,
                Aulid::W3,
                Aulid::W4,
                Aulid::W5,
                Aulid::W6,
            ]
            .map(WorkloadSpec::Aulid),
        );
        v.extend([Ycsb::A, Ycsb::B, Ycsb::C, Ycsb::D, Ycsb::E, Ycsb::F].map(WorkloadSpec::Ycsb));
        v.extend([WorkloadSpec::Oscillate, WorkloadSpec::Shift]);
        v
    }

    /// Operations the runner hands the engine per call: the batch size of
    /// `lookup-batch:N`, 1 for every other workload.
    pub fn batch(&self) -> usize {
        match *self {
            WorkloadSpec::LookupBatch { size } => size as usize,
            _ => 1,
        }
    }

    fn validate(&self) -> Result<()> {
        if let WorkloadSpec::LookupBatch { size } = *self
            && !(1..=MAX_BATCH).contains(&size)
        {
            return Err(Error::invalid(format!(
                "lookup-batch: batch size must be in 1..={MAX_BATCH}, got {size}"
            )));
        }
        if let WorkloadSpec::Mixed { read } | WorkloadSpec::Append { read } = *self
            && !(0.0..=1.0).contains(&read)
        {
            let name = if matches!(self, WorkloadSpec::Mixed { .. }) {
                "mixed"
            } else {
                "append"
            };
            return Err(Error::invalid(format!(
                "{name}: read fraction must be in [0, 1], got {read}"
            )));
        }
        Ok(())
    }
}

impl fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for WorkloadSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let name = s.trim().to_ascii_lowercase();
        let bad = || Error::invalid(format!("unknown workload '{s}' (valid: {VALID_FORMS})"));
        let spec = match name.as_str() {
            "lookup" => WorkloadSpec::Lookup,
            "lookup:zipf" => WorkloadSpec::LookupZipf,
            "lookup-miss" => WorkloadSpec::LookupMiss,
            "scan" => WorkloadSpec::Scan,
            "floor" => WorkloadSpec::Floor,
            "insert" => WorkloadSpec::Insert,
            "append" => WorkloadSpec::Append { read: 0.0 },
            "oscillate" => WorkloadSpec::Oscillate,
            "shift" => WorkloadSpec::Shift,
            "w1" => WorkloadSpec::Aulid(Aulid::W1),
            "w2" => WorkloadSpec::Aulid(Aulid::W2),
            "w3" => WorkloadSpec::Aulid(Aulid::W3),
            "w4" => WorkloadSpec::Aulid(Aulid::W4),
            "w5" => WorkloadSpec::Aulid(Aulid::W5),
            "w6" => WorkloadSpec::Aulid(Aulid::W6),
            "ycsb-a" => WorkloadSpec::Ycsb(Ycsb::A),
            "ycsb-b" => WorkloadSpec::Ycsb(Ycsb::B),
            "ycsb-c" => WorkloadSpec::Ycsb(Ycsb::C),
            "ycsb-d" => WorkloadSpec::Ycsb(Ycsb::D),
            "ycsb-e" => WorkloadSpec::Ycsb(Ycsb::E),
            "ycsb-f" => WorkloadSpec::Ycsb(Ycsb::F),
            other if other.starts_with("lookup-batch:") => {
                let n = &other["lookup-batch:".len()..];
                let size: u32 = n.parse().map_err(|_| {
                    Error::invalid(format!(
                        "workload '{s}': '{n}' is not a batch size (valid: {VALID_FORMS})"
                    ))
                })?;
                WorkloadSpec::LookupBatch { size }
            }
            other => {
                let (r, append) = match other.strip_prefix("append:") {
                    Some(r) => (r, true),
                    None => (other.strip_prefix("mixed:").ok_or_else(bad)?, false),
                };
                let read: f64 = r.parse().map_err(|_| {
                    Error::invalid(format!(
                        "workload '{s}': '{r}' is not a number (valid: {VALID_FORMS})"
                    ))
                })?;
                if append {
                    WorkloadSpec::Append { read }
                } else {
                    WorkloadSpec::Mixed { read }
                }
            }
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// One operation and the answer it must produce, packed into 24 bytes.
///
/// The runner reads a thread's stream while it measures, so the stream's
/// size per operation is cache traffic that competes with the engine's own
/// data. As a pair of enums a step took 48 bytes; with the index's data
/// just filling the last-level cache, streaming 48 bytes per lookup cost
/// `xindex` 12-15% of its lookup speed and `btreemap` about 5% against a
/// stream of bare 8-byte keys (`docs/results/xindex-session20.md`).
/// Packed, it carries the key, one 64-bit word (a write's value, a get's
/// expected value or a scan's expected first key) and, for scans, the two
/// lengths.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Step {
    key: u64,
    word: u64,
    /// A scan's `n`.
    n: u16,
    /// `Expect::ScanFirst::len`.
    len: u16,
    op: OpKind,
    expect: ExpectKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum OpKind {
    Get,
    Insert,
    Update,
    Remove,
    Scan,
    Floor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum ExpectKind {
    Nothing,
    Absent,
    Value,
    Consistent,
    ScanFirst,
    /// `Expect::Floor(Some(word))`.
    FloorOf,
    /// `Expect::Floor(None)`.
    FloorNone,
}

const _: () = assert!(SCAN_LEN <= u16::MAX as u32 && std::mem::size_of::<Step>() == 24);

impl Step {
    /// Packs `op` and its expectation.
    ///
    /// # Panics
    ///
    /// If a write comes with an expectation that carries a value (writes'
    /// answers are not checked: `Nothing` or `Consistent`), or a scan or
    /// its expectation is longer than `u16::MAX` records. The generators
    /// never make either (scans are at most [`SCAN_LEN`] long).
    pub fn new(op: Op, expect: Expect) -> Step {
        let (kind, key, op_word, n) = match op {
            Op::Get(k) => (OpKind::Get, k, None, 0),
            Op::Insert(k, v) => (OpKind::Insert, k, Some(v), 0),
            Op::Update(k, v) => (OpKind::Update, k, Some(v), 0),
            Op::Remove(k) => (OpKind::Remove, k, None, 0),
            Op::Scan(k, n) => (OpKind::Scan, k, None, n),
            Op::Floor(k) => (OpKind::Floor, k, None, 0),
        };
        let mut step = Step {
            key,
            word: op_word.unwrap_or(0),
            n: u16::try_from(n).expect("scans are at most SCAN_LEN long"),
            len: 0,
            op: kind,
            expect: ExpectKind::Nothing,
        };
        step.set_expect(expect);
        step
    }

    /// The operation.
    pub fn op(&self) -> Op {
        match self.op {
            OpKind::Get => Op::Get(self.key),
            OpKind::Insert => Op::Insert(self.key, self.word),
            OpKind::Update => Op::Update(self.key, self.word),
            OpKind::Remove => Op::Remove(self.key),
            OpKind::Scan => Op::Scan(self.key, u32::from(self.n)),
            OpKind::Floor => Op::Floor(self.key),
        }
    }

    /// What its answer must satisfy.
    pub fn expect(&self) -> Expect {
        match self.expect {
            ExpectKind::Nothing => Expect::Nothing,
            ExpectKind::Absent => Expect::Value(None),
            ExpectKind::Value => Expect::Value(Some(self.word)),
            ExpectKind::Consistent => Expect::Consistent,
            ExpectKind::ScanFirst => Expect::ScanFirst {
                len: u32::from(self.len),
                first: self.word,
            },
            ExpectKind::FloorOf => Expect::Floor(Some(self.word)),
            ExpectKind::FloorNone => Expect::Floor(None),
        }
    }

    /// Replaces the expectation (see [`new`](Self::new) for which fit).
    pub fn set_expect(&mut self, expect: Expect) {
        let writes = matches!(self.op, OpKind::Insert | OpKind::Update);
        let (kind, word, len) = match expect {
            Expect::Nothing => (ExpectKind::Nothing, None, 0),
            Expect::Value(None) => (ExpectKind::Absent, None, 0),
            Expect::Value(Some(v)) => (ExpectKind::Value, Some(v), 0),
            Expect::Consistent => (ExpectKind::Consistent, None, 0),
            Expect::ScanFirst { len, first } => (ExpectKind::ScanFirst, Some(first), len),
            Expect::Floor(Some(key)) => (ExpectKind::FloorOf, Some(key), 0),
            Expect::Floor(None) => (ExpectKind::FloorNone, None, 0),
        };
        if let Some(word) = word {
            assert!(!writes, "a write's expectation carries no value");
            self.word = word;
        }
        self.len = u16::try_from(len).expect("scans are at most SCAN_LEN long");
        self.expect = kind;
    }
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Step")
            .field("op", &self.op())
            .field("expect", &self.expect())
            .finish()
    }
}

/// A workload ready to run: what to bulk-load and what each thread does.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// Sorted, unique bulk load; values are `value_for(key, 0)`.
    pub load: Vec<(u64, u64)>,
    /// One stream per thread, all of the same length.
    pub streams: Vec<Vec<Step>>,
    /// Whether any stream writes.
    pub writes: bool,
}

/// `count` loaded pairs drawn uniformly at random (with repeats) from
/// `load`, deterministically from `seed`: the gets that warm an engine up
/// after its bulk load, before its streams run. Empty if `load` is.
pub fn warmup_gets(load: &[(u64, u64)], count: usize, seed: u64) -> Vec<(u64, u64)> {
    if load.is_empty() {
        return Vec::new();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7761_726d_7570);
    (0..count)
        .map(|_| load[rng.random_range(0..load.len())])
        .collect()
}

/// Generates the bulk load and the per-thread streams of `spec` over
/// `keys` (sorted, unique), `ops` operations in total split evenly over
/// `threads` streams (rounded up to a multiple of `threads`; `insert` and
/// `w3` stop early when the held-back keys run out), deterministically
/// from `seed`.
pub fn prepare(
    spec: &WorkloadSpec,
    keys: &[u64],
    threads: usize,
    ops: usize,
    seed: u64,
) -> Result<Prepared> {
    spec.validate()?;
    if threads == 0 {
        return Err(Error::invalid("workload: threads must be at least 1"));
    }
    check_keys(keys)?;
    if keys.is_empty() && *spec != WorkloadSpec::LookupMiss {
        return Err(Error::invalid(format!(
            "workload {spec}: the key set is empty"
        )));
    }
    if spec.is_write() && keys.len() < threads {
        return Err(Error::invalid(format!(
            "workload {spec}: {threads} threads need at least {threads} keys (each thread writes keys it owns), the set has {}",
            keys.len()
        )));
    }
    // Salting with the workload keeps workloads sharing a seed independent.
    let salt = spec.name().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    let rng = ChaCha8Rng::seed_from_u64(seed ^ salt);
    let per = ops.div_ceil(threads);
    let n = keys.len();
    let mut prepared = match *spec {
        WorkloadSpec::Lookup
        | WorkloadSpec::LookupBatch { .. }
        | WorkloadSpec::Aulid(Aulid::W1) => read_only(keys, threads, per, rng, |rng| {
            let i = rng.random_range(0..n);
            get_exact(keys[i], Some(value_for(keys[i], 0)))
        }),
        WorkloadSpec::LookupZipf => zipf_lookups(keys, threads, per, rng),
        WorkloadSpec::Scan | WorkloadSpec::Aulid(Aulid::W2) => {
            read_only(keys, threads, per, rng, |rng| {
                let i = rng.random_range(0..n);
                Step::new(
                    Op::Scan(keys[i], SCAN_LEN),
                    Expect::ScanFirst {
                        len: SCAN_LEN.min((n - i) as u32),
                        first: keys[i],
                    },
                )
            })
        }
        WorkloadSpec::Floor => read_only(keys, threads, per, rng, |rng| {
            let i = rng.random_range(0..n);
            // Any probe from this key up to (not including) the next has
            // this key as its floor; the last key's span is itself.
            let span = keys.get(i + 1).map_or(1, |next| next - keys[i]);
            let probe = keys[i] + rng.random_range(0..span);
            Step::new(Op::Floor(probe), Expect::Floor(Some(keys[i])))
        }),
        WorkloadSpec::LookupMiss => {
            let gaps = Gaps::new(keys)?;
            read_only(keys, threads, per, rng, |rng| {
                get_exact(gaps.sample(rng), None)
            })
        }
        WorkloadSpec::Mixed { read } => {
            let inserts = expected(ops, (1.0 - read) / 4.0);
            let mut g = Gen::with_holdback(keys, threads, inserts, 0.5, false, rng);
            g.drive(per, |g, t, _, _| g.mixed(t, read, true));
            Ok(g.finish())
        }
        WorkloadSpec::Aulid(w @ (Aulid::W4 | Aulid::W5 | Aulid::W6)) => {
            let read = match w {
                Aulid::W4 => 0.9,
                Aulid::W5 => 0.5,
                _ => 0.1,
            };
            let mut g =
                Gen::with_holdback(keys, threads, expected(ops, 1.0 - read), 0.9, false, rng);
            g.drive(per, |g, t, _, _| g.mixed(t, read, false));
            Ok(g.finish())
        }
        WorkloadSpec::Insert | WorkloadSpec::Aulid(_) => insert_half(keys, threads, per, rng),
        WorkloadSpec::Append { read } => append(keys, threads, ops, per, read, rng),
        WorkloadSpec::Ycsb(y) => ycsb(y, keys, threads, ops, per, rng),
        WorkloadSpec::Oscillate => {
            let mut g = Gen::with_holdback(keys, threads, expected(ops, 1.0 / 6.0), 0.5, true, rng);
            let hotspot = (n / 10).max(1);
            g.drive(per, |g, t, pos, _| {
                if (pos * 3 / per).is_multiple_of(2) {
                    let start = g.rng.random_range(0..hotspot) as u32;
                    g.scan(t, start, SCAN_LEN);
                } else if g.rng.random_bool(0.5) {
                    g.insert_or_fallback(t);
                } else {
                    g.update_or_fallback(t);
                }
            });
            Ok(g.finish())
        }
        WorkloadSpec::Shift => shift(keys, threads, ops, per, rng),
    }?;
    prepared.writes = spec.is_write();
    Ok(prepared)
}

/// Rejects key sets that are not strictly ascending or too large to index
/// with `u32`.
fn check_keys(keys: &[u64]) -> Result<()> {
    if keys.len() >= u32::MAX as usize / 2 {
        return Err(Error::invalid(format!(
            "workload: {} keys is more than the workload generator supports ({})",
            keys.len(),
            u32::MAX / 2 - 1
        )));
    }
    if let Some(i) = keys.windows(2).position(|w| w[0] >= w[1]) {
        return Err(if keys[i] == keys[i + 1] {
            Error::invalid(format!(
                "workload: duplicate key {} at index {}",
                keys[i],
                i + 1
            ))
        } else {
            Error::Unsorted { index: i + 1 }
        });
    }
    Ok(())
}

/// `ops * fraction`, rounded.
fn expected(ops: usize, fraction: f64) -> usize {
    (ops as f64 * fraction).round() as usize
}

fn get_exact(key: u64, value: Option<u64>) -> Step {
    Step::new(Op::Get(key), Expect::Value(value))
}

/// Read-only workloads need no simulated state: every stream just draws.
fn read_only(
    keys: &[u64],
    threads: usize,
    per: usize,
    mut rng: ChaCha8Rng,
    mut draw: impl FnMut(&mut ChaCha8Rng) -> Step,
) -> Result<Prepared> {
    let streams = (0..threads)
        .map(|_| (0..per).map(|_| draw(&mut rng)).collect())
        .collect();
    Ok(Prepared {
        load: keys.iter().map(|&k| (k, value_for(k, 0))).collect(),
        streams,
        writes: false,
    })
}

/// Gets of existing keys drawn from a scrambled Zipf(0.99).
fn zipf_lookups(keys: &[u64], threads: usize, per: usize, mut rng: ChaCha8Rng) -> Result<Prepared> {
    let hot = Hot::new(keys.len(), &mut rng)?;
    read_only(keys, threads, per, rng, |rng| {
        let i = hot.sample(rng);
        get_exact(keys[i], Some(value_for(keys[i], 0)))
    })
}

/// SplitMix64's finaliser: a bijective, well-mixing hash of a `u64`.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Scrambled Zipf(0.99) over key indices `0..n`: popular ranks are hashed
/// to indices spread over the whole key space.
struct Hot {
    zipf: Zipf,
    salt: u64,
    n: u64,
}

impl Hot {
    fn new(n: usize, rng: &mut ChaCha8Rng) -> Result<Hot> {
        Ok(Hot {
            zipf: Zipf::new(n as u64, Zipf::YCSB_THETA)?,
            salt: rng.random(),
            n: n as u64,
        })
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> usize {
        (mix64(self.zipf.sample(rng) ^ self.salt) % self.n) as usize
    }
}

/// The non-empty gaps between consecutive keys (and before the first and
/// after the last), for drawing absent keys that fall where the data is.
struct Gaps<'a> {
    keys: &'a [u64],
    /// Gap `g` lies between `keys[g-1]` and `keys[g]` (ends open).
    nonempty: Vec<u32>,
}

impl<'a> Gaps<'a> {
    fn new(keys: &'a [u64]) -> Result<Gaps<'a>> {
        let nonempty: Vec<u32> = (0..=keys.len())
            .filter(|&g| Self::bounds(keys, g).is_some())
            .map(|g| g as u32)
            .collect();
        if nonempty.is_empty() {
            return Err(Error::invalid(
                "lookup-miss: the key set leaves no absent key",
            ));
        }
        Ok(Gaps { keys, nonempty })
    }

    /// Inclusive range of absent keys in gap `g`, if any.
    fn bounds(keys: &[u64], g: usize) -> Option<(u64, u64)> {
        let lo = if g == 0 {
            Some(0)
        } else {
            keys[g - 1].checked_add(1)
        };
        let hi = if g == keys.len() {
            Some(u64::MAX)
        } else {
            keys[g].checked_sub(1)
        };
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo <= hi => Some((lo, hi)),
            _ => None,
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        let g = self.nonempty[rng.random_range(0..self.nonempty.len())] as usize;
        let (lo, hi) = Self::bounds(self.keys, g).unwrap_or((0, 0));
        rng.random_range(lo..=hi)
    }
}

/// Where a key of the universe is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the index.
    Present,
    /// Absent and available for inserts.
    Pool,
    /// Absent for good (keys of A removed by `shift`).
    Gone,
}

/// Fenwick tree counting present keys by index, for exact scan answers
/// when keys come and go.
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    fn new(present: impl Iterator<Item = bool>) -> Fenwick {
        let mut tree: Vec<u32> = present.map(u32::from).collect();
        for i in 1..=tree.len() {
            let parent = i + (i & i.wrapping_neg());
            if parent <= tree.len() {
                tree[parent - 1] += tree[i - 1];
            }
        }
        Fenwick { tree }
    }

    fn add(&mut self, i: usize, delta: i32) {
        let mut i = i + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] = self.tree[i - 1].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Number of present keys with index `< i`.
    fn prefix(&self, mut i: usize) -> usize {
        let mut s = 0usize;
        while i > 0 {
            s += self.tree[i - 1] as usize;
            i -= i & i.wrapping_neg();
        }
        s
    }

    /// Index of the `k`-th present key (1-based); `k` must not exceed the
    /// number of present keys.
    fn kth(&self, mut k: usize) -> usize {
        let mut pos = 0usize;
        let mut step = self.tree.len().next_power_of_two();
        while step > 0 {
            let next = pos + step;
            if next <= self.tree.len() && (self.tree[next - 1] as usize) < k {
                pos = next;
                k -= self.tree[next - 1] as usize;
            }
            step >>= 1;
        }
        pos
    }
}

/// No auxiliary record for a step.
const NO_AUX: (u32, u32) = (u32::MAX, u32::MAX);

/// Simulated state plus the streams being generated.
///
/// Each thread's present and pool keys are kept in vectors with a position
/// index, so drawing, inserting and removing are O(1).
struct Gen<'k> {
    keys: std::borrow::Cow<'k, [u64]>,
    threads: usize,
    state: Vec<State>,
    pos: Vec<u32>,
    /// Write count per key, wrapping within 1..=65535: 0 means never
    /// written, which the post-pass uses to find contested keys.
    version: Vec<u16>,
    present: Vec<Vec<u32>>,
    pool: Vec<Vec<u32>>,
    total_present: usize,
    fenwick: Option<Fenwick>,
    rng: ChaCha8Rng,
    streams: Vec<Vec<Step>>,
    /// Per step, the key-index range its answer depends on (reads only,
    /// and only with several threads).
    aux: Option<Vec<Vec<(u32, u32)>>>,
    load: Vec<(u64, u64)>,
    /// Insertion order of present keys, for YCSB's `latest`.
    recency: Option<Vec<u32>>,
}

impl<'k> Gen<'k> {
    fn new(
        keys: std::borrow::Cow<'k, [u64]>,
        threads: usize,
        in_pool: impl Fn(usize) -> bool,
        scans: bool,
        rng: ChaCha8Rng,
    ) -> Gen<'k> {
        let n = keys.len();
        let mut g = Gen {
            threads,
            state: Vec::with_capacity(n),
            pos: Vec::with_capacity(n),
            version: vec![0; n],
            present: vec![Vec::new(); threads],
            pool: vec![Vec::new(); threads],
            total_present: 0,
            fenwick: None,
            rng,
            streams: vec![Vec::new(); threads],
            aux: (threads > 1).then(|| vec![Vec::new(); threads]),
            load: Vec::new(),
            recency: None,
            keys,
        };
        for i in 0..n {
            let list = if in_pool(i) {
                g.state.push(State::Pool);
                &mut g.pool[i % threads]
            } else {
                g.state.push(State::Present);
                g.total_present += 1;
                &mut g.present[i % threads]
            };
            g.pos.push(list.len() as u32);
            list.push(i as u32);
        }
        if scans {
            g.fenwick = Some(Fenwick::new(g.state.iter().map(|s| *s == State::Present)));
        }
        g.load = (0..n)
            .filter(|&i| g.state[i] == State::Present)
            .map(|i| (g.keys[i], value_for(g.keys[i], 0)))
            .collect();
        g
    }

    /// State over `keys` with about `inserts` random keys (at most
    /// `max_fraction` of them) held back from the load for inserts.
    fn with_holdback(
        keys: &'k [u64],
        threads: usize,
        inserts: usize,
        max_fraction: f64,
        scans: bool,
        mut rng: ChaCha8Rng,
    ) -> Gen<'k> {
        // Slack of four standard deviations (plus a little) so that the
        // random op mix rarely exhausts the pool.
        let slack = if inserts == 0 {
            0
        } else {
            4 * (inserts as f64).sqrt() as usize + 8
        };
        let cap = (keys.len() as f64 * max_fraction) as usize;
        let held = random_subset(keys.len(), (inserts + slack).min(cap), &mut rng);
        Gen::new(keys.into(), threads, |i| held[i], scans, rng)
    }

    fn owner(&self, i: u32) -> usize {
        i as usize % self.threads
    }

    fn value(&self, i: u32) -> Option<u64> {
        (self.state[i as usize] == State::Present)
            .then(|| value_for(self.keys[i as usize], self.version[i as usize]))
    }

    fn bump(&mut self, i: u32) -> u16 {
        let v = &mut self.version[i as usize];
        *v = *v % u16::MAX + 1;
        *v
    }

    fn detach(list: &mut Vec<u32>, pos: &mut [u32], i: u32) {
        let p = pos[i as usize] as usize;
        list.swap_remove(p);
        if let Some(&moved) = list.get(p) {
            pos[moved as usize] = p as u32;
        }
    }

    fn set_present(&mut self, i: u32, present: bool, to_pool: bool) {
        let o = self.owner(i);
        let (from, to, state) = if present {
            (
                &mut self.pool[o],
                Some(&mut self.present[o]),
                State::Present,
            )
        } else if to_pool {
            (&mut self.present[o], Some(&mut self.pool[o]), State::Pool)
        } else {
            (&mut self.present[o], None, State::Gone)
        };
        Self::detach(from, &mut self.pos, i);
        if let Some(to) = to {
            self.pos[i as usize] = to.len() as u32;
            to.push(i);
        }
        self.state[i as usize] = state;
        if present {
            self.total_present += 1;
        } else {
            self.total_present -= 1;
        }
        if let Some(f) = &mut self.fenwick {
            f.add(i as usize, if present { 1 } else { -1 });
        }
    }

    fn pick(list: &[u32], rng: &mut ChaCha8Rng) -> Option<u32> {
        (!list.is_empty()).then(|| list[rng.random_range(0..list.len())])
    }

    /// A uniformly chosen present key, or any key if none is present.
    fn random_present(&mut self) -> u32 {
        if self.total_present == 0 {
            return self.rng.random_range(0..self.keys.len()) as u32;
        }
        let mut r = self.rng.random_range(0..self.total_present);
        for list in &self.present {
            if r < list.len() {
                return list[r];
            }
            r -= list.len();
        }
        unreachable!("total_present matches the per-thread lists")
    }

    fn push(&mut self, t: usize, op: Op, expect: Expect, aux: (u32, u32)) {
        self.streams[t].push(Step::new(op, expect));
        if let Some(a) = &mut self.aux {
            a[t].push(aux);
        }
    }

    fn get(&mut self, t: usize, i: u32) {
        let aux = if self.owner(i) == t { NO_AUX } else { (i, i) };
        self.push(
            t,
            Op::Get(self.keys[i as usize]),
            Expect::Value(self.value(i)),
            aux,
        );
    }

    /// Scan of up to `n` records from key index `start`.
    fn scan(&mut self, t: usize, start: u32, n: u32) {
        let last = self.keys.len() as u32 - 1;
        // Walking the state bytes is cheaper than three Fenwick descents
        // when present keys are not too sparse.
        let (mut i, mut len, mut first) = (start as usize, 0u32, None);
        while len < n && i <= last as usize && i < start as usize + 8 * n as usize {
            if self.state[i] == State::Present {
                first.get_or_insert(i);
                len += 1;
            }
            i += 1;
        }
        if len == n || i > last as usize {
            let expect = match first {
                Some(f) => Expect::ScanFirst {
                    len,
                    first: self.keys[f],
                },
                None => Expect::ScanFirst { len: 0, first: 0 },
            };
            let end = if len == n { i as u32 - 1 } else { last };
            self.push(
                t,
                Op::Scan(self.keys[start as usize], n),
                expect,
                (start, end),
            );
            return;
        }
        let f = self
            .fenwick
            .as_ref()
            .expect("scan workloads track presence");
        let before = f.prefix(start as usize);
        let after = self.total_present - before;
        let len = after.min(n as usize);
        let (expect, end) = if len == 0 {
            (Expect::ScanFirst { len: 0, first: 0 }, last)
        } else {
            let first = self.keys[f.kth(before + 1)];
            // A short answer depends on every key up to the end.
            let end = if len < n as usize {
                last
            } else {
                f.kth(before + len) as u32
            };
            (
                Expect::ScanFirst {
                    len: len as u32,
                    first,
                },
                end,
            )
        };
        self.push(
            t,
            Op::Scan(self.keys[start as usize], n),
            expect,
            (start, end),
        );
    }

    fn insert(&mut self, t: usize, i: u32) {
        self.set_present(i, true, false);
        let v = self.bump(i);
        let k = self.keys[i as usize];
        if let Some(r) = &mut self.recency {
            r.push(i);
        }
        self.push(t, Op::Insert(k, value_for(k, v)), Expect::Nothing, NO_AUX);
    }

    fn write_existing(&mut self, t: usize, i: u32, upsert: bool) {
        let v = self.bump(i);
        let k = self.keys[i as usize];
        let op = if upsert {
            Op::Insert(k, value_for(k, v))
        } else {
            Op::Update(k, value_for(k, v))
        };
        self.push(t, op, Expect::Nothing, NO_AUX);
    }

    fn remove(&mut self, t: usize, i: u32, to_pool: bool) {
        self.set_present(i, false, to_pool);
        self.bump(i);
        self.push(
            t,
            Op::Remove(self.keys[i as usize]),
            Expect::Nothing,
            NO_AUX,
        );
    }

    fn read_uniform(&mut self, t: usize) {
        let i = self.random_present();
        self.get(t, i);
    }

    /// Inserts a pool key of `t`; if none is left, overwrites one of its
    /// present keys; if it has none, reads.
    fn insert_or_fallback(&mut self, t: usize) {
        if let Some(i) = Self::pick(&self.pool[t], &mut self.rng) {
            self.insert(t, i);
        } else if let Some(i) = Self::pick(&self.present[t], &mut self.rng) {
            self.write_existing(t, i, true);
        } else {
            self.read_uniform(t);
        }
    }

    fn update_or_fallback(&mut self, t: usize) {
        match Self::pick(&self.present[t], &mut self.rng) {
            Some(i) => self.write_existing(t, i, false),
            None => self.insert_or_fallback(t),
        }
    }

    fn remove_or_fallback(&mut self, t: usize) {
        match Self::pick(&self.present[t], &mut self.rng) {
            Some(i) => self.remove(t, i, true),
            None => self.insert_or_fallback(t),
        }
    }

    /// One operation of `mixed:R` (`full_mix`) or AULID W4-W6 (inserts only).
    fn mixed(&mut self, t: usize, read: f64, full_mix: bool) {
        if self.rng.random::<f64>() < read {
            self.read_uniform(t);
        } else if !full_mix {
            self.insert_or_fallback(t);
        } else {
            match self.rng.random_range(0..4u8) {
                0 => self.insert_or_fallback(t),
                1 => self.remove_or_fallback(t),
                _ => self.update_or_fallback(t),
            }
        }
    }

    /// The key index owned by `t` next to index `i` (keeps hot keys hot).
    fn owned_near(&self, i: usize, t: usize) -> u32 {
        let c = i - i % self.threads + t;
        (if c < self.keys.len() {
            c
        } else {
            c - self.threads
        }) as u32
    }

    /// Generates round-robin over threads until every stream holds `len`
    /// steps. `op(gen, thread, position, room)` must push between 1 and
    /// `room` steps.
    fn drive(&mut self, len: usize, mut op: impl FnMut(&mut Self, usize, usize, usize)) {
        for s in &mut self.streams {
            s.reserve_exact(len);
        }
        if let Some(a) = &mut self.aux {
            for s in a {
                s.reserve_exact(len);
            }
        }
        loop {
            let mut busy = false;
            for t in 0..self.threads {
                let pos = self.streams[t].len();
                if pos < len {
                    op(self, t, pos, len - pos);
                    busy = true;
                }
            }
            if !busy {
                break;
            }
        }
    }

    /// Replaces the expectation of every read whose answer depends on a key
    /// another thread writes by [`Expect::Consistent`].
    fn finish(mut self) -> Prepared {
        if let Some(aux) = self.aux.take() {
            let mut written = Vec::with_capacity(self.keys.len() + 1);
            written.push(0u32);
            let mut acc = 0u32;
            for &v in &self.version {
                acc += u32::from(v != 0);
                written.push(acc);
            }
            for (t, (stream, aux)) in self.streams.iter_mut().zip(aux).enumerate() {
                for (step, (a, b)) in stream.iter_mut().zip(aux) {
                    if a == NO_AUX.0 || written[b as usize + 1] == written[a as usize] {
                        continue;
                    }
                    let contested = (a..=b)
                        .any(|i| i as usize % self.threads != t && self.version[i as usize] != 0);
                    if contested {
                        step.set_expect(Expect::Consistent);
                    }
                }
            }
        }
        Prepared {
            load: self.load,
            streams: self.streams,
            writes: true,
        }
    }
}

/// `k` distinct random indices out of `0..n`, as a membership vector.
fn random_subset(n: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<bool> {
    let mut idx: Vec<u32> = (0..n as u32).collect();
    let (chosen, _) = idx.partial_shuffle(rng, k);
    let mut member = vec![false; n];
    for &i in chosen.iter() {
        member[i as usize] = true;
    }
    member
}

/// `insert` / `w3`: load a random half, insert the other half in random
/// order (as many as the budget allows).
fn insert_half(keys: &[u64], threads: usize, per: usize, mut rng: ChaCha8Rng) -> Result<Prepared> {
    let held = random_subset(keys.len(), keys.len() / 2, &mut rng);
    let mut g = Gen::new(keys.into(), threads, |i| held[i], false, rng);
    let len = g.pool.iter().map(Vec::len).min().unwrap_or(0).min(per);
    g.drive(len, |g, t, _, _| g.insert_or_fallback(t));
    Ok(g.finish())
}

/// `append:R`: loads all but the largest keys (as many as the appends
/// expected, at most half), then appends those in ascending order between
/// uniform reads with probability `read`. Thread `t` appends the held-back
/// keys `i` with `i % threads == t`, so each thread's keys ascend and the
/// threads' streams interleave near the top. Once a thread has appended
/// all of its keys it only reads.
fn append(
    keys: &[u64],
    threads: usize,
    ops: usize,
    per: usize,
    read: f64,
    rng: ChaCha8Rng,
) -> Result<Prepared> {
    let n = keys.len();
    let held = expected(ops, 1.0 - read).min(n / 2);
    let first = n - held;
    let mut g = Gen::new(keys.into(), threads, |i| i >= first, false, rng);
    // The smallest held-back index each thread owns.
    let mut next: Vec<usize> = (0..threads)
        .map(|t| first + (t + threads - first % threads) % threads)
        .collect();
    g.drive(per, |g, t, _, _| {
        if next[t] >= n || g.rng.random::<f64>() < read {
            g.read_uniform(t);
        } else {
            g.insert(t, next[t] as u32);
            next[t] += threads;
        }
    });
    Ok(g.finish())
}

/// The YCSB core workloads.
fn ycsb(
    y: Ycsb,
    keys: &[u64],
    threads: usize,
    ops: usize,
    per: usize,
    mut rng: ChaCha8Rng,
) -> Result<Prepared> {
    let n = keys.len();
    match y {
        Ycsb::A | Ycsb::B | Ycsb::F => {
            let hot = Hot::new(n, &mut rng)?;
            let mut g = Gen::new(keys.into(), threads, |_| false, false, rng);
            let read = match y {
                Ycsb::A => 0.5,
                Ycsb::B => 0.95,
                _ => 0.5,
            };
            g.drive(per, |g, t, _, room| {
                let i = hot.sample(&mut g.rng);
                if g.rng.random::<f64>() < read || (y == Ycsb::F && room < 2) {
                    g.get(t, i as u32);
                } else {
                    let own = g.owned_near(i, t);
                    if y == Ycsb::F {
                        g.get(t, own);
                    }
                    g.write_existing(t, own, false);
                }
            });
            Ok(g.finish())
        }
        Ycsb::C => zipf_lookups(keys, threads, per, rng),
        Ycsb::D => {
            let mut g = Gen::with_holdback(keys, threads, expected(ops, 0.05), 0.5, false, rng);
            let mut order: Vec<u32> = g.present.iter().flatten().copied().collect();
            order.sort_unstable();
            order.shuffle(&mut g.rng);
            let mut zipf = Zipf::new(order.len().max(1) as u64, Zipf::YCSB_THETA)?;
            g.recency = Some(order);
            g.drive(per, |g, t, _, _| {
                if g.rng.random::<f64>() < 0.95 {
                    let recency = g.recency.as_ref().expect("set above");
                    zipf.grow_to(recency.len() as u64);
                    let i = recency[recency.len() - 1 - zipf.sample(&mut g.rng) as usize];
                    g.get(t, i);
                } else {
                    g.insert_or_fallback(t);
                }
            });
            Ok(g.finish())
        }
        Ycsb::E => {
            let mut g = Gen::with_holdback(keys, threads, expected(ops, 0.05), 0.5, true, rng);
            let hot = Hot::new(n, &mut g.rng)?;
            g.drive(per, |g, t, _, _| {
                if g.rng.random::<f64>() < 0.95 {
                    let start = hot.sample(&mut g.rng) as u32;
                    let len = g.rng.random_range(1..=SCAN_LEN);
                    g.scan(t, start, len);
                } else {
                    g.insert_or_fallback(t);
                }
            });
            Ok(g.finish())
        }
    }
}

/// B for `shift`: `a` (sorted, unique) through `u -> u^2` on its normalised
/// range, collisions moved up to the next integer free in both A and B.
/// Keys that would pass `u64::MAX` are dropped.
fn shifted(a: &[u64]) -> Vec<u64> {
    let (Some(&lo), Some(&hi)) = (a.first(), a.last()) else {
        return Vec::new();
    };
    let span = (hi - lo) as f64;
    let mut b = Vec::with_capacity(a.len());
    let mut j = 0;
    let mut next_free = 0u64;
    for &k in a {
        let u = if span > 0.0 {
            (k - lo) as f64 / span
        } else {
            0.0
        };
        let mut c = (lo + ((u * u * span) as u64).min(hi - lo)).max(next_free);
        loop {
            while j < a.len() && a[j] < c {
                j += 1;
            }
            if j < a.len() && a[j] == c {
                match c.checked_add(1) {
                    Some(x) => c = x,
                    None => return b,
                }
            } else {
                break;
            }
        }
        b.push(c);
        match c.checked_add(1) {
            Some(x) => next_free = x,
            None => return b,
        }
    }
    b
}

/// `shift`: see the module documentation.
fn shift(
    keys: &[u64],
    threads: usize,
    ops: usize,
    per: usize,
    mut rng: ChaCha8Rng,
) -> Result<Prepared> {
    let m = keys.len().min((ops / 8).max(threads));
    let a: Vec<u64> = if m == keys.len() {
        keys.to_vec()
    } else {
        let member = random_subset(keys.len(), m, &mut rng);
        keys.iter()
            .zip(member)
            .filter(|(_, m)| *m)
            .map(|(&k, _)| k)
            .collect()
    };
    let b = shifted(&a);
    let mut universe = Vec::with_capacity(a.len() + b.len());
    let mut is_b = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if j == b.len() || (i < a.len() && a[i] < b[j]) {
            universe.push(a[i]);
            is_b.push(false);
            i += 1;
        } else {
            universe.push(b[j]);
            is_b.push(true);
            j += 1;
        }
    }
    check_keys(&universe)?;
    let mut g = Gen::new(universe.into(), threads, |i| is_b[i], false, rng);
    // Each thread removes its keys of A in a random order.
    let mut doomed: Vec<Vec<u32>> = g.present.clone();
    for d in &mut doomed {
        d.shuffle(&mut g.rng);
    }
    let s2 = (0..threads)
        .map(|t| 2 * (doomed[t].len() + g.pool[t].len()))
        .max()
        .unwrap_or(0);
    let rest = per.saturating_sub(s2);
    let s1 = rest / 2;
    let len = if per == 0 { 0 } else { s1 + s2 + (rest - s1) };
    g.drive(len, |g, t, pos, _| {
        if pos < s1 || pos >= s1 + s2 {
            if g.rng.random::<f64>() < 0.9 {
                g.read_uniform(t);
            } else {
                g.update_or_fallback(t);
            }
            return;
        }
        // Spread the thread's remaining writes evenly over its remaining
        // stage-2 steps.
        let (ra, rb) = (doomed[t].len(), g.pool[t].len());
        let left = s1 + s2 - pos;
        if g.rng.random_range(0..left) >= ra + rb {
            g.read_uniform(t);
        } else if g.rng.random_range(0..ra + rb) < ra {
            let i = doomed[t].pop().expect("ra > 0");
            g.remove(t, i, false);
        } else {
            g.insert_or_fallback(t);
        }
    });
    Ok(g.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_unpack_to_what_was_packed() {
        let reads = [
            Expect::Nothing,
            Expect::Value(None),
            Expect::Value(Some(0)),
            Expect::Value(Some(u64::MAX)),
            Expect::Consistent,
            Expect::ScanFirst { len: 0, first: 0 },
            Expect::ScanFirst {
                len: SCAN_LEN,
                first: u64::MAX,
            },
        ];
        for key in [0, 7, u64::MAX] {
            for op in [
                Op::Get(key),
                Op::Remove(key),
                Op::Scan(key, 0),
                Op::Scan(key, SCAN_LEN),
            ] {
                for expect in reads {
                    let step = Step::new(op, expect);
                    assert_eq!((step.op(), step.expect()), (op, expect));
                }
            }
            for op in [Op::Insert(key, u64::MAX), Op::Update(key, 3)] {
                for expect in [Expect::Nothing, Expect::Consistent] {
                    let mut step = Step::new(op, expect);
                    assert_eq!((step.op(), step.expect()), (op, expect));
                    step.set_expect(Expect::Consistent);
                    assert_eq!((step.op(), step.expect()), (op, Expect::Consistent));
                }
            }
        }
        // Replacing a get's expectation keeps its key.
        let mut step = Step::new(Op::Get(5), Expect::Value(Some(6)));
        step.set_expect(Expect::Consistent);
        assert_eq!((step.op(), step.expect()), (Op::Get(5), Expect::Consistent));
        assert!(format!("{step:?}").contains("Get(5)"));
    }

    #[test]
    #[should_panic(expected = "carries no value")]
    fn a_write_cannot_carry_an_expected_value() {
        let _ = Step::new(Op::Insert(1, 2), Expect::Value(Some(3)));
    }

    #[test]
    fn step_stays_small() {
        // Op and Expect are 24 bytes each as defined; 10M steps take 480 MB.
        // Shrinking them (e.g. Expect::Value(u64) plus Expect::Absent, and
        // Insert/Update carrying a u16 version) would get Step to 32 bytes.
        assert_eq!(std::mem::size_of::<Op>(), 24);
        assert!(
            std::mem::size_of::<Step>() <= 48,
            "{}",
            std::mem::size_of::<Step>()
        );
    }

    #[test]
    fn names_round_trip() {
        for spec in WorkloadSpec::examples() {
            assert_eq!(spec.name().parse::<WorkloadSpec>().unwrap(), spec, "{spec}");
        }
        assert_eq!(
            "mixed:0.25".parse::<WorkloadSpec>().unwrap().name(),
            "mixed:0.25"
        );
        assert_eq!(
            "mixed:1".parse::<WorkloadSpec>().unwrap(),
            WorkloadSpec::Mixed { read: 1.0 }
        );
        assert_eq!("append:0".parse::<WorkloadSpec>().unwrap().name(), "append");
        assert_eq!(
            " YCSB-A ".parse::<WorkloadSpec>().unwrap(),
            WorkloadSpec::Ycsb(Ycsb::A)
        );
    }

    #[test]
    fn bad_names_are_errors_listing_valid_forms() {
        for bad in [
            "",
            "lookups",
            "mixed",
            "mixed:",
            "mixed:x",
            "mixed:1.5",
            "mixed:-0.1",
            "mixed:nan",
            "w7",
            "w0",
            "ycsb-g",
            "ycsb",
            "lookup-batch:",
            "lookup-batch:0",
            "lookup-batch:x",
            "lookup-batch:5000",
            "append:",
            "append:2",
            "append:x",
        ] {
            let err = bad.parse::<WorkloadSpec>().unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad}");
            let msg = err.to_string();
            assert!(
                msg.contains("[0, 1]") || msg.contains("mixed:R") || msg.contains("1..=4096"),
                "{bad}: {msg}"
            );
        }
    }

    fn spec_batch(s: &str) -> usize {
        s.parse::<WorkloadSpec>().unwrap().batch()
    }

    #[test]
    fn write_flags() {
        let w = |s: &str| s.parse::<WorkloadSpec>().unwrap().is_write();
        assert!(!w("lookup") && !w("lookup:zipf") && !w("lookup-miss") && !w("scan"));
        assert!(!w("lookup-batch:16"));
        assert_eq!(spec_batch("lookup-batch:16"), 16);
        assert_eq!(spec_batch("lookup"), 1);
        assert!(!w("w1") && !w("w2") && !w("ycsb-c") && !w("mixed:1"));
        assert!(w("insert") && w("mixed:0.9") && w("w3") && w("w6") && w("ycsb-a"));
        assert!(w("ycsb-d") && w("ycsb-e") && w("ycsb-f") && w("oscillate") && w("shift"));
        assert!(w("append") && w("append:0.9") && !w("append:1"));
    }

    #[test]
    fn fenwick_counts_and_selects() {
        let bits = [true, false, true, true, false, false, true];
        let mut f = Fenwick::new(bits.iter().copied());
        assert_eq!(f.prefix(0), 0);
        assert_eq!(f.prefix(3), 2);
        assert_eq!(f.prefix(7), 4);
        assert_eq!([1, 2, 3, 4].map(|k| f.kth(k)), [0, 2, 3, 6]);
        f.add(4, 1);
        f.add(0, -1);
        assert_eq!([1, 2, 3, 4].map(|k| f.kth(k)), [2, 3, 4, 6]);
    }

    #[test]
    fn shifted_is_disjoint_sorted_and_moves_mass_down() {
        let a: Vec<u64> = (0..1000u64).map(|i| 1000 + i * 37).collect();
        let b = shifted(&a);
        assert_eq!(b.len(), a.len());
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        assert!(b.iter().all(|k| a.binary_search(k).is_err()));
        // Median of B is about a quarter of the way into A's range.
        let mid = (b[500] - 1000) as f64 / (a[999] - 1000) as f64;
        assert!((mid - 0.25).abs() < 0.05, "{mid}");
        // Dense input: every slot of A's range is taken, B moves above it.
        let dense: Vec<u64> = (10..20).collect();
        assert_eq!(shifted(&dense), (20..30).collect::<Vec<_>>());
        // Near the top of the range keys are dropped instead of wrapping.
        let top = [u64::MAX - 1, u64::MAX];
        assert!(shifted(&top).len() < 2);
    }

    #[test]
    fn gaps_cover_between_and_around() {
        let keys = [5u64, 6, 7, 100, u64::MAX];
        let g = Gaps::new(&keys).unwrap();
        // Gaps: [0,4], (7,100), (100,MAX); 5|6|7 are adjacent.
        assert_eq!(g.nonempty, vec![0, 3, 4]);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..1000 {
            let k = g.sample(&mut rng);
            assert!(keys.binary_search(&k).is_err());
        }
        assert!(Gaps::new(&[]).is_ok());
    }
}
