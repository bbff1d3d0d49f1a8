//! A wrapper that injects failures on demand, so tests can check how readers
//! and writers cope with a misbehaving storage.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Bytes, Storage};
use crate::{Error, Result};

/// Which failures a [`Faulty`] storage injects.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Pass everything through unchanged.
    None,
    /// The first `n` read requests succeed; every later one fails. Requests
    /// are counted from the [`Faulty::set_fault`] call that set this fault,
    /// one per `read`/`read_all` and one per range of a `read_many`; a
    /// `read_many` that reaches past the limit fails as a whole.
    FailReadsAfter(u64),
    /// Every read of this object fails; other objects read normally.
    FailObject(String),
    /// Reads succeed but return only the first half of the requested bytes
    /// (rounded down), breaking the exact-length contract of [`Storage`] on
    /// purpose. `read_all` returns the first half of the object.
    ShortReads,
    /// `write` and `delete` fail without touching the stored object, so the
    /// old contents remain.
    FailWrites,
    /// Each read request, write and delete fails independently with
    /// `probability`, drawn from a generator seeded with `seed` when the
    /// fault is set. Probabilities above 1 always fail; below 0 or NaN never.
    Random {
        /// Chance that one request fails.
        probability: f64,
        /// Seed for the failure draws, so a failing run can be replayed.
        seed: u64,
    },
}

#[derive(Debug)]
struct State {
    fault: Fault,
    rng: StdRng,
}

/// Storage that passes requests to `inner` except where the current
/// [`Fault`] says to fail them.
///
/// Injected failures are [`Error::Io`] values whose message contains
/// `injected fault`, so tests can tell them from real ones.
#[derive(Debug)]
pub struct Faulty<S: Storage> {
    inner: S,
    state: Mutex<State>,
    reads: AtomicU64,
}

impl<S: Storage> Faulty<S> {
    /// Wraps `inner` with [`Fault::None`].
    pub fn new(inner: S) -> Self {
        Self::with_fault(inner, Fault::None)
    }

    /// Wraps `inner` with `fault` already set.
    pub fn with_fault(inner: S, fault: Fault) -> Self {
        let faulty = Faulty {
            inner,
            state: Mutex::new(State {
                fault: Fault::None,
                rng: StdRng::seed_from_u64(0),
            }),
            reads: AtomicU64::new(0),
        };
        faulty.set_fault(fault);
        faulty
    }

    /// Replaces the current fault, restarting the read count (and reseeding
    /// the generator of [`Fault::Random`]).
    pub fn set_fault(&self, fault: Fault) {
        let mut state = self.state.lock();
        let seed = match fault {
            Fault::Random { seed, .. } => seed,
            _ => 0,
        };
        state.rng = StdRng::seed_from_u64(seed);
        state.fault = fault;
        self.reads.store(0, Ordering::SeqCst);
    }

    /// The current fault.
    pub fn fault(&self) -> Fault {
        self.state.lock().fault.clone()
    }

    /// Read requests seen since the fault was last set (one per `read` or
    /// `read_all`, one per range of a `read_many`), failed ones included.
    pub fn read_count(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Decides the fate of `requests` read requests on `object`: `Err` when
    /// any of them is to fail, else whether to shorten the results.
    fn admit_reads(&self, object: &str, requests: u64) -> Result<bool> {
        let mut state = self.state.lock();
        let State { fault, rng } = &mut *state;
        let before = self.reads.fetch_add(requests, Ordering::SeqCst);
        match fault {
            Fault::None | Fault::FailWrites => Ok(false),
            Fault::ShortReads => Ok(true),
            Fault::FailReadsAfter(limit) => {
                if before + requests > *limit {
                    Err(injected(
                        object,
                        format!(
                            "read request {} is past the limit of {limit}",
                            before + requests
                        ),
                    ))
                } else {
                    Ok(false)
                }
            }
            Fault::FailObject(name) => {
                if name == object {
                    Err(injected(object, "reads of this object fail".into()))
                } else {
                    Ok(false)
                }
            }
            Fault::Random { probability, .. } => {
                let p = *probability;
                let fails = (0..requests).fold(false, |any, _| {
                    // Draw for every request so the sequence does not depend
                    // on how requests are batched.
                    rng.random::<f64>() < p || any
                });
                if fails {
                    Err(injected(object, format!("random read failure (p = {p})")))
                } else {
                    Ok(false)
                }
            }
        }
    }

    fn admit_write(&self, object: &str) -> Result<()> {
        let mut state = self.state.lock();
        let State { fault, rng } = &mut *state;
        match fault {
            Fault::FailWrites => Err(injected(object, "writes fail".into())),
            Fault::Random { probability, .. } => {
                let p = *probability;
                if rng.random::<f64>() < p {
                    Err(injected(object, format!("random write failure (p = {p})")))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

fn injected(object: &str, detail: String) -> Error {
    Error::io(
        object,
        std::io::Error::other(format!("injected fault: {detail}")),
    )
}

fn shorten(data: Bytes) -> Bytes {
    data.slice(..data.len() / 2)
}

impl<S: Storage> Storage for Faulty<S> {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        let short = self.admit_reads(object, 1)?;
        let data = self.inner.read(object, range)?;
        Ok(if short { shorten(data) } else { data })
    }

    fn read_all(&self, object: &str) -> Result<Bytes> {
        let short = self.admit_reads(object, 1)?;
        let data = self.inner.read_all(object)?;
        Ok(if short { shorten(data) } else { data })
    }

    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let short = self.admit_reads(object, ranges.len() as u64)?;
        let parts = self.inner.read_many(object, ranges)?;
        Ok(if short {
            parts.into_iter().map(shorten).collect()
        } else {
            parts
        })
    }

    fn len(&self, object: &str) -> Result<u64> {
        self.inner.len(object)
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        self.admit_write(object)?;
        self.inner.write(object, data)
    }

    fn delete(&self, object: &str) -> Result<()> {
        self.admit_write(object)?;
        self.inner.delete(object)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }

    fn evict(&self, object: &str) -> Result<()> {
        self.inner.evict(object)
    }

    fn describe(&self) -> String {
        format!("faulty+{}", self.inner.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Memory;

    fn store() -> Faulty<Memory> {
        let mem = Memory::new();
        mem.write("a", b"0123456789").unwrap();
        mem.write("b", b"abcdef").unwrap();
        Faulty::new(mem)
    }

    fn is_injected(result: Result<impl std::fmt::Debug>) -> bool {
        match result {
            Err(e @ Error::Io { .. }) => e.to_string().contains("injected fault"),
            _ => false,
        }
    }

    #[test]
    fn no_fault_passes_through() {
        let f = store();
        assert_eq!(&f.read("a", 2..5).unwrap()[..], b"234");
        assert_eq!(&f.read_all("b").unwrap()[..], b"abcdef");
        assert_eq!(f.len("a").unwrap(), 10);
        assert_eq!(f.read_count(), 2);
        assert!(matches!(f.read("a", 5..20), Err(Error::Truncated { .. })));
    }

    #[test]
    fn fail_reads_after_n() {
        let f = store();
        f.read("a", 0..1).unwrap();
        f.set_fault(Fault::FailReadsAfter(3));
        assert_eq!(f.read_count(), 0);
        f.read("a", 0..1).unwrap();
        f.read_many("b", &[0..1, 1..2]).unwrap();
        assert!(is_injected(f.read("a", 0..1)));
        assert!(is_injected(f.read_all("b")));
        assert_eq!(f.read_count(), 5);
        // A batch that crosses the limit fails as a whole.
        f.set_fault(Fault::FailReadsAfter(1));
        assert!(is_injected(f.read_many("a", &[0..1, 1..2])));
        f.set_fault(Fault::None);
        f.read("a", 0..1).unwrap();
    }

    #[test]
    fn fail_object_only_hits_that_object() {
        let f = Faulty::with_fault(store().inner, Fault::FailObject("a".into()));
        assert!(is_injected(f.read("a", 0..1)));
        assert!(is_injected(f.read_all("a")));
        assert!(is_injected(f.read_many("a", &[0..1, 2..4])));
        assert_eq!(&f.read("b", 0..2).unwrap()[..], b"ab");
        assert_eq!(f.fault(), Fault::FailObject("a".into()));
    }

    #[test]
    fn short_reads_return_half() {
        let f = store();
        f.set_fault(Fault::ShortReads);
        assert_eq!(&f.read("a", 0..10).unwrap()[..], b"01234");
        assert_eq!(&f.read("a", 3..6).unwrap()[..], b"3");
        assert_eq!(&f.read_all("b").unwrap()[..], b"abc");
        let parts = f.read_many("a", &[0..4, 4..4]).unwrap();
        assert_eq!(&parts[0][..], b"01");
        assert!(parts[1].is_empty());
    }

    #[test]
    fn fail_writes_keeps_old_contents() {
        let f = store();
        f.set_fault(Fault::FailWrites);
        assert!(is_injected(f.write("a", b"new")));
        assert!(is_injected(f.delete("b")));
        assert_eq!(&f.read_all("a").unwrap()[..], b"0123456789");
        assert_eq!(&f.read_all("b").unwrap()[..], b"abcdef");
        f.set_fault(Fault::None);
        f.write("a", b"new").unwrap();
        assert_eq!(&f.read_all("a").unwrap()[..], b"new");
    }

    fn random_outcomes(f: &Faulty<Memory>, probability: f64, seed: u64) -> Vec<bool> {
        f.set_fault(Fault::Random { probability, seed });
        (0..400).map(|_| f.read("a", 0..1).is_err()).collect()
    }

    #[test]
    fn random_is_seeded_and_roughly_calibrated() {
        let f = store();
        let first = random_outcomes(&f, 0.25, 42);
        assert_eq!(first, random_outcomes(&f, 0.25, 42));
        assert_ne!(first, random_outcomes(&f, 0.25, 43));
        let failures = first.iter().filter(|&&x| x).count();
        // Binomial(400, 0.25) has mean 100 and sd ~8.7.
        assert!((50..150).contains(&failures), "{failures}");
        assert!(random_outcomes(&f, 0.0, 1).iter().all(|&x| !x));
        assert!(random_outcomes(&f, 1.0, 1).iter().all(|&x| x));
        assert!(random_outcomes(&f, f64::NAN, 1).iter().all(|&x| !x));
    }

    #[test]
    fn random_also_fails_writes() {
        let f = store();
        f.set_fault(Fault::Random {
            probability: 1.0,
            seed: 0,
        });
        assert!(is_injected(f.write("a", b"x")));
        assert_eq!(&f.inner().read_all("a").unwrap()[..], b"0123456789");
    }
}
