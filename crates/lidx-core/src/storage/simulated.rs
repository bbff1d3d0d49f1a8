//! A wrapper that makes every request take at least the time a
//! [`StorageProfile`] charges for it, so fast local storage can stand in for
//! a slow device in tests and benchmarks.

use std::ops::Range;
use std::time::{Duration, Instant};

use super::{Bytes, Storage, StorageProfile};
use crate::Result;

/// How long before a deadline [`wait_until`] stops sleeping and starts
/// spinning: `thread::sleep` routinely oversleeps by 50–100 µs, which would
/// swamp sub-millisecond profiles.
const SPIN_WINDOW: Duration = Duration::from_micros(150);

/// Storage that charges `profile` for every request on top of `inner`.
///
/// A read of `Δ` bytes returns no earlier than `profile.cost(Δ)` after it
/// started; the inner read's own time counts towards that, so the charge is
/// a floor rather than an addition. [`read_many`](Storage::read_many) models
/// requests issued concurrently: it waits for the most expensive range, not
/// the sum. Metadata requests (`len`, `list`, `delete`) cost one latency and
/// writes cost `profile.cost(data.len())`. Failed requests cost one latency.
/// [`evict`](Storage::evict) is free: it controls the experiment rather
/// than modelling a request.
#[derive(Debug)]
pub struct Simulated<S: Storage> {
    inner: S,
    profile: StorageProfile,
}

impl<S: Storage> Simulated<S> {
    /// Wraps `inner`, charging `profile` for each request.
    pub fn new(inner: S, profile: StorageProfile) -> Self {
        Simulated { inner, profile }
    }

    /// The profile charged for requests.
    pub fn profile(&self) -> &StorageProfile {
        &self.profile
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner storage.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Runs `request`, then waits until `charge(result)` has elapsed since
    /// it started.
    fn charged<T>(
        &self,
        request: impl FnOnce() -> Result<T>,
        charge: impl Fn(&T) -> u64,
    ) -> Result<T> {
        let start = Instant::now();
        let result = request();
        let cost = match &result {
            Ok(value) => self.profile.cost(charge(value)),
            Err(_) => self.profile.latency(),
        };
        wait_until(start + cost);
        result
    }
}

/// Blocks the calling thread until `deadline`, sleeping for the bulk of the
/// wait and spinning for the last [`SPIN_WINDOW`] to stay precise.
pub(crate) fn wait_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let remaining = deadline - now;
        if remaining > SPIN_WINDOW {
            std::thread::sleep(remaining - SPIN_WINDOW);
        } else {
            std::hint::spin_loop();
        }
    }
}

impl<S: Storage> Storage for Simulated<S> {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        self.charged(|| self.inner.read(object, range), |b| b.len() as u64)
    }

    fn read_all(&self, object: &str) -> Result<Bytes> {
        self.charged(|| self.inner.read_all(object), |b| b.len() as u64)
    }

    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        // Concurrent requests overlap, so the batch costs as much as its
        // largest member; T is monotone, so that is the largest range.
        self.charged(
            || self.inner.read_many(object, ranges),
            |parts| parts.iter().map(|b| b.len() as u64).max().unwrap_or(0),
        )
    }

    fn len(&self, object: &str) -> Result<u64> {
        self.charged(|| self.inner.len(object), |_| 0)
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        self.charged(|| self.inner.write(object, data), |_| data.len() as u64)
    }

    fn delete(&self, object: &str) -> Result<()> {
        self.charged(|| self.inner.delete(object), |_| 0)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.charged(|| self.inner.list(prefix), |_| 0)
    }

    fn evict(&self, object: &str) -> Result<()> {
        self.inner.evict(object)
    }

    fn describe(&self) -> String {
        format!("simulated+{}", self.inner.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Memory;

    fn slow() -> StorageProfile {
        // 2 ms latency, 1 MB/s: 1000 bytes cost 1 ms more.
        StorageProfile::affine(Duration::from_millis(2), 1e6).unwrap()
    }

    fn store() -> Simulated<Memory> {
        let mem = Memory::new();
        mem.write("obj", &[7u8; 4000]).unwrap();
        Simulated::new(mem, slow())
    }

    fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
        let start = Instant::now();
        let out = f();
        (out, start.elapsed())
    }

    #[test]
    fn wait_until_never_returns_early() {
        for micros in [0, 30, 200, 1200] {
            let start = Instant::now();
            let deadline = start + Duration::from_micros(micros);
            wait_until(deadline);
            assert!(Instant::now() >= deadline);
        }
    }

    #[test]
    fn read_takes_at_least_its_cost_and_returns_the_data() {
        let s = store();
        let (data, took) = timed(|| s.read("obj", 0..1000).unwrap());
        assert_eq!(&data[..], &[7u8; 1000][..]);
        assert!(took >= Duration::from_millis(3), "{took:?}");
        let (data, took) = timed(|| s.read_all("obj").unwrap());
        assert_eq!(data.len(), 4000);
        assert!(took >= Duration::from_millis(6), "{took:?}");
    }

    #[test]
    fn read_many_charges_the_largest_range_only() {
        // A large latency leaves a wide gap between max and sum, so a busy
        // machine cannot blur the two.
        let profile = StorageProfile::affine(Duration::from_millis(10), 1e6).unwrap();
        let s = Simulated::new(store().into_inner(), profile);
        let ranges = [0..1000, 1000..1500, 2000..2100, 3000..3000];
        let (parts, took) = timed(|| s.read_many("obj", &ranges).unwrap());
        assert_eq!(
            parts.iter().map(|b| b.len()).collect::<Vec<_>>(),
            vec![1000, 500, 100, 0]
        );
        // Max is 11 ms; the sum would be 41.6 ms.
        assert!(took >= Duration::from_millis(11), "{took:?}");
        assert!(took < Duration::from_millis(30), "{took:?}");
    }

    #[test]
    fn metadata_and_writes_are_charged() {
        let s = store();
        let (len, took) = timed(|| s.len("obj").unwrap());
        assert_eq!(len, 4000);
        assert!(took >= Duration::from_millis(2));
        let (names, took) = timed(|| s.list("").unwrap());
        assert_eq!(names, vec!["obj".to_string()]);
        assert!(took >= Duration::from_millis(2));
        let (_, took) = timed(|| s.write("new", &[1u8; 2000]).unwrap());
        assert!(took >= Duration::from_millis(4));
        assert_eq!(&s.inner().read_all("new").unwrap()[..], &[1u8; 2000][..]);
    }

    #[test]
    fn errors_pass_through_and_cost_one_latency() {
        let s = store();
        let (result, took) = timed(|| s.read("missing", 0..10));
        assert!(
            matches!(result, Err(crate::Error::NotFound(_))),
            "{result:?}"
        );
        assert!(took >= Duration::from_millis(2));
        assert!(matches!(
            s.read("obj", 3990..4010),
            Err(crate::Error::Truncated { .. })
        ));
    }

    #[test]
    fn accessors_and_description() {
        let s = store();
        assert_eq!(s.profile(), &slow());
        assert_eq!(s.describe(), "simulated+mem://");
        assert_eq!(s.into_inner().len("obj").unwrap(), 4000);
    }
}
