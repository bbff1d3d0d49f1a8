//! Seeded synthetic key generators and the Zipf rank sampler.
//!
//! Every generator is deterministic: the same distribution, count and seed
//! always produce the same keys, on every platform, because all randomness
//! comes from a [`ChaCha8Rng`] seeded with the seed. Generated key sets are
//! sorted and duplicate-free, which is what bulk loads need.

use std::fmt;
use std::str::FromStr;

use lidx_core::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution as _, LogNormal, Normal};

/// Upper end of the key range of the `normal` and `mixture` distributions,
/// as in the XIndex paper's Table 3 (`[0, 1e12]`).
const SCALED_RANGE: f64 = 1e12;

/// Factor turning lognormal samples into integers. Samples have median 1;
/// this keeps about nine decimal digits of the sample, which is what the
/// learned-index literature (SOSD, XIndex) does when it turns lognormal
/// samples into integer keys.
const LOGNORMAL_SCALE: f64 = 1e9;

/// Number of Gaussian clusters of the `mixture` distribution.
const MIXTURE_CLUSTERS: usize = 100;

/// Rounds of redrawing before giving up on finding `n` distinct keys.
const MAX_REDRAW_ROUNDS: usize = 64;

/// A synthetic key distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// `n` consecutive integers starting at a random offset below 2^32: the
    /// easiest possible case for a learned index (one exact linear model).
    UniformDense,
    /// Uniform over the whole `u64` range: keys are far apart and their
    /// CDF is a straight line up to sampling noise.
    UniformSparse,
    /// Normal (mean 0, standard deviation 1) mapped linearly onto
    /// `[0, 1e12]` (mean at 5e11, six standard deviations to either end),
    /// as in XIndex Table 3. Samples falling outside are redrawn.
    Normal,
    /// Lognormal (mu 0, sigma 2) multiplied by 1e9 and truncated to an
    /// integer: a heavy right tail, hard for a single linear model.
    Lognormal,
    /// Mixture of 100 equally likely Gaussian clusters over `[0, 1e12]`.
    /// Centres are uniform; each cluster's standard deviation is drawn
    /// uniformly between 1e12/20000 and 1e12/2000, so clusters have very
    /// different densities and some overlap. Samples outside the range are
    /// redrawn.
    Mixture,
    /// XIndex's `linear` dataset (Table 3): key `i * A` plus a uniform
    /// random bias in `[-A/2, A/2)` for `i = 1..=n`, with
    /// `A = 1e14 / n` (at least 1). The half-open bias interval keeps the
    /// keys distinct and already sorted.
    LinearNoise,
}

impl Distribution {
    /// Every distribution, in the order they are listed in help texts.
    pub const ALL: [Distribution; 6] = [
        Distribution::UniformDense,
        Distribution::UniformSparse,
        Distribution::Normal,
        Distribution::Lognormal,
        Distribution::Mixture,
        Distribution::LinearNoise,
    ];

    /// The command-line name (`uniform-dense`, `normal`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Distribution::UniformDense => "uniform-dense",
            Distribution::UniformSparse => "uniform-sparse",
            Distribution::Normal => "normal",
            Distribution::Lognormal => "lognormal",
            Distribution::Mixture => "mixture",
            Distribution::LinearNoise => "linear-noise",
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Distribution {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Distribution::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Distribution::ALL.iter().map(|d| d.name()).collect();
                Error::invalid(format!(
                    "unknown key distribution '{s}' (known: {})",
                    known.join(", ")
                ))
            })
    }
}

/// Generates exactly `n` sorted, distinct keys of `dist`, deterministically
/// from `seed`.
///
/// Duplicates produced by sampling are replaced by fresh samples from the
/// same distribution (deterministically, since the generator state carries
/// on), so the key set keeps its shape instead of growing artificial runs.
/// Fails with [`Error::InvalidArgument`] only if `n` is larger than the
/// distribution can supply distinct keys for.
pub fn generate(dist: Distribution, n: usize, seed: u64) -> Result<Vec<u64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    match dist {
        Distribution::UniformDense => {
            let start: u64 = rng.random_range(0..1u64 << 32);
            Ok((0..n as u64).map(|i| start + i).collect())
        }
        Distribution::LinearNoise => linear_noise(n, &mut rng),
        Distribution::UniformSparse => redraw_unique(n, &mut rng, dist, |rng| rng.random::<u64>()),
        Distribution::Normal => {
            let normal = Normal::new(0.0f64, 1.0).map_err(|e| Error::invalid(e.to_string()))?;
            redraw_unique(n, &mut rng, dist, |rng| {
                loop {
                    let x = normal.sample(rng);
                    let k = SCALED_RANGE / 2.0 + x * (SCALED_RANGE / 12.0);
                    if (0.0..=SCALED_RANGE).contains(&k) {
                        break k as u64;
                    }
                }
            })
        }
        Distribution::Lognormal => {
            let lognormal =
                LogNormal::new(0.0f64, 2.0).map_err(|e| Error::invalid(e.to_string()))?;
            // `as u64` saturates, so an absurd tail sample becomes u64::MAX
            // rather than wrapping.
            redraw_unique(n, &mut rng, dist, |rng| {
                (lognormal.sample(rng) * LOGNORMAL_SCALE) as u64
            })
        }
        Distribution::Mixture => {
            let clusters: Vec<Normal<f64>> = (0..MIXTURE_CLUSTERS)
                .map(|_| {
                    let centre = rng.random_range(0.0..SCALED_RANGE);
                    let sd = rng.random_range(SCALED_RANGE / 20_000.0..SCALED_RANGE / 2_000.0);
                    Normal::new(centre, sd).map_err(|e| Error::invalid(e.to_string()))
                })
                .collect::<Result<_>>()?;
            redraw_unique(n, &mut rng, dist, |rng| {
                let c = &clusters[rng.random_range(0..MIXTURE_CLUSTERS)];
                loop {
                    let k = c.sample(rng);
                    if (0.0..=SCALED_RANGE).contains(&k) {
                        break k as u64;
                    }
                }
            })
        }
    }
}

/// XIndex's linear-with-noise keys; see [`Distribution::LinearNoise`].
fn linear_noise(n: usize, rng: &mut ChaCha8Rng) -> Result<Vec<u64>> {
    let a = (1e14 / n.max(1) as f64).max(1.0) as u64;
    let half = a / 2;
    // The largest key is n*A + (A - A/2 - 1); it must fit in a u64.
    (n as u64)
        .checked_mul(a)
        .and_then(|top| top.checked_add(a))
        .ok_or_else(|| Error::invalid(format!("linear-noise: {n} keys do not fit in u64")))?;
    Ok((1..=n as u64)
        .map(|i| {
            // Bias in [-half, a - half): consecutive intervals are disjoint.
            let bias = rng.random_range(0..a);
            i * a + bias - half
        })
        .collect())
}

/// Samples until `n` distinct values are collected, then sorts them.
fn redraw_unique(
    n: usize,
    rng: &mut ChaCha8Rng,
    dist: Distribution,
    mut sample: impl FnMut(&mut ChaCha8Rng) -> u64,
) -> Result<Vec<u64>> {
    let mut keys: Vec<u64> = (0..n).map(|_| sample(rng)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut rounds = 0;
    while keys.len() < n {
        rounds += 1;
        if rounds > MAX_REDRAW_ROUNDS {
            return Err(Error::invalid(format!(
                "{dist}: could not draw {n} distinct keys (got {}); use fewer keys",
                keys.len()
            )));
        }
        let missing = n - keys.len();
        keys.extend((0..missing).map(|_| sample(rng)));
        keys.sort_unstable();
        keys.dedup();
    }
    Ok(keys)
}

/// Zipfian rank sampler (Gray et al., "Quickly generating billion-record
/// synthetic databases", the method YCSB uses): rank 0 is the most popular.
///
/// The number of items can grow (YCSB's `latest` distribution needs that
/// when records are inserted) at O(1) cost per new item.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
}

/// Number of terms of the zeta sum computed exactly; the rest uses the
/// Euler-Maclaurin formula, whose error at this point is far below f64
/// precision.
const ZETA_EXACT_TERMS: u64 = 1 << 12;

impl Zipf {
    /// YCSB's default skew.
    pub const YCSB_THETA: f64 = 0.99;

    /// A sampler over ranks `0..n` with skew `theta` (in `(0, 1)`).
    pub fn new(n: u64, theta: f64) -> Result<Zipf> {
        if n == 0 {
            return Err(Error::invalid(
                "zipf: the number of items must be at least 1",
            ));
        }
        if !(theta > 0.0 && theta < 1.0) {
            return Err(Error::invalid(format!(
                "zipf: theta must be in (0, 1), got {theta}"
            )));
        }
        let mut z = Zipf {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2: zeta(2, theta),
            zetan: zeta(n, theta),
            eta: 0.0,
        };
        z.update_eta();
        Ok(z)
    }

    /// Number of items ranks are drawn from.
    pub fn items(&self) -> u64 {
        self.n
    }

    /// Grows the item count to `n` (no-op if `n` is not larger).
    pub fn grow_to(&mut self, n: u64) {
        if n <= self.n {
            return;
        }
        if n - self.n <= 64 {
            for i in self.n + 1..=n {
                self.zetan += (i as f64).powf(-self.theta);
            }
        } else {
            self.zetan = zeta(n, self.theta);
        }
        self.n = n;
        self.update_eta();
    }

    fn update_eta(&mut self) {
        self.eta = if self.n <= 2 {
            // Only the two explicit branches of `sample` can fire.
            0.0
        } else {
            (1.0 - (2.0 / self.n as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
        };
    }

    /// Draws a rank in `0..items()`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// Generalised harmonic number `sum_{i=1..n} i^-theta`.
fn zeta(n: u64, theta: f64) -> f64 {
    let exact = n.min(ZETA_EXACT_TERMS);
    let mut sum: f64 = (1..=exact).map(|i| (i as f64).powf(-theta)).sum();
    if n > exact {
        // Euler-Maclaurin for sum_{i=a+1..b} f(i), f(x) = x^-theta:
        // integral + (f(b) - f(a))/2 + (f'(b) - f'(a))/12.
        let (a, b) = (exact as f64, n as f64);
        let f = |x: f64| x.powf(-theta);
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        let integral = (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
        sum += integral + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_shape(keys: &[u64], n: usize) {
        assert_eq!(keys.len(), n);
        assert!(
            keys.windows(2).all(|w| w[0] < w[1]),
            "not strictly ascending"
        );
    }

    #[test]
    fn names_round_trip_and_unknown_lists_known() {
        for d in Distribution::ALL {
            assert_eq!(d.name().parse::<Distribution>().unwrap(), d);
            assert_eq!(d.to_string(), d.name());
        }
        let err = "zipfy".parse::<Distribution>().unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)));
        let msg = err.to_string();
        assert!(
            msg.contains("zipfy") && msg.contains("linear-noise") && msg.contains("uniform-dense")
        );
    }

    #[test]
    fn exact_count_sorted_unique_deterministic() {
        for d in Distribution::ALL {
            for n in [0usize, 1, 2, 3, 1000, 20_000] {
                let a = generate(d, n, 7).unwrap();
                check_shape(&a, n);
                assert_eq!(a, generate(d, n, 7).unwrap(), "{d} n={n} not deterministic");
            }
        }
    }

    #[test]
    fn different_seeds_differ() {
        for d in Distribution::ALL {
            assert_ne!(
                generate(d, 1000, 1).unwrap(),
                generate(d, 1000, 2).unwrap(),
                "{d}"
            );
        }
    }

    #[test]
    fn shapes_match_definitions() {
        let n = 50_000;
        let dense = generate(Distribution::UniformDense, n, 3).unwrap();
        assert_eq!(dense[n - 1] - dense[0], n as u64 - 1);

        let sparse = generate(Distribution::UniformSparse, n, 3).unwrap();
        // Uniform over u64: the median is near 2^63.
        let mid = sparse[n / 2] as f64 / u64::MAX as f64;
        assert!((mid - 0.5).abs() < 0.02, "median at {mid}");

        let normal = generate(Distribution::Normal, n, 3).unwrap();
        assert!(*normal.last().unwrap() <= 1e12 as u64);
        let med = normal[n / 2] as f64;
        assert!((med - 5e11).abs() < 2e9, "normal median {med}");
        // About 68% within one standard deviation (1e12/12) of the mean.
        let sd = 1e12 / 12.0;
        let within = normal
            .iter()
            .filter(|&&k| (k as f64 - 5e11).abs() < sd)
            .count();
        let frac = within as f64 / n as f64;
        assert!((frac - 0.6827).abs() < 0.02, "within 1 sd: {frac}");

        let logn = generate(Distribution::Lognormal, n, 3).unwrap();
        // Median of lognormal(0, 2) is e^0 = 1, i.e. 1e9 after scaling.
        let med = logn[n / 2] as f64 / LOGNORMAL_SCALE;
        assert!((med - 1.0).abs() < 0.1, "lognormal median {med}");

        let lin = generate(Distribution::LinearNoise, n, 3).unwrap();
        let a = (1e14 / n as f64) as u64;
        for (i, &k) in lin.iter().enumerate() {
            let ideal = (i as u64 + 1) * a;
            assert!(
                k + a / 2 >= ideal && k < ideal + a - a / 2,
                "key {i} off its slot"
            );
        }

        let mix = generate(Distribution::Mixture, n, 3).unwrap();
        assert!(*mix.last().unwrap() <= 1e12 as u64);
        // Clustered: a handful of 1%-wide buckets of the range hold far more
        // than 1% of the keys.
        let mut buckets = [0usize; 100];
        for &k in &mix {
            buckets[((k as f64 / 1e12 * 100.0) as usize).min(99)] += 1;
        }
        assert!(buckets.iter().any(|&c| c > 3 * n / 100), "{buckets:?}");
        assert!(
            buckets.iter().filter(|&&c| c < n / 400).count() > 10,
            "{buckets:?}"
        );
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let n = 1000;
        let z = Zipf::new(n, Zipf::YCSB_THETA).unwrap();
        let mut counts = vec![0u32; n as usize];
        let draws = 200_000;
        for _ in 0..draws {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        // P(rank 0) = 1/zeta(n) ~ 0.133 for n=1000, theta=0.99.
        let p0 = counts[0] as f64 / draws as f64;
        let want = 1.0 / zeta(n, 0.99);
        assert!((p0 - want).abs() < 0.01, "p0 {p0} want {want}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
        let tail: u32 = counts[500..].iter().sum();
        assert!(tail > 0);
    }

    #[test]
    fn zipf_edge_cases_and_growth() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let z1 = Zipf::new(1, 0.99).unwrap();
        assert!((0..100).all(|_| z1.sample(&mut rng) == 0));
        let z2 = Zipf::new(2, 0.99).unwrap();
        assert!((0..100).all(|_| z2.sample(&mut rng) < 2));
        assert!(Zipf::new(0, 0.99).is_err());
        assert!(Zipf::new(10, 1.0).is_err());
        assert!(Zipf::new(10, f64::NAN).is_err());

        let mut g = Zipf::new(3, 0.99).unwrap();
        g.grow_to(5000);
        g.grow_to(5010);
        let fresh = Zipf::new(5010, 0.99).unwrap();
        assert!((g.zetan - fresh.zetan).abs() < 1e-9);
        assert_eq!(g.items(), 5010);
    }

    #[test]
    fn zeta_approximation_is_accurate() {
        let n = 100_000u64;
        let exact: f64 = (1..=n).map(|i| (i as f64).powf(-0.99)).sum();
        assert!((zeta(n, 0.99) - exact).abs() / exact < 1e-10);
    }
}
