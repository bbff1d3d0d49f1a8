//! Long runs ("soaks") of the randomized concurrency tests.
//!
//! The suite runs each randomized concurrency test once, with fixed seeds,
//! in its time budget. A soak runs them round after round with fresh seeds
//! (and, where a test allows it, a varied configuration) for as long as
//! asked, to reach interleavings a few seconds do not:
//!
//! ```sh
//! LIDX_SOAK_SECS=600 cargo test --release -p lidx-xindex --lib -- \
//!     stress scan_stress linearizability shift parallel_build
//! ```
//!
//! Every test named runs for about that many seconds (two at a time on the
//! harness's default threads). Each round prints its seed first
//! (`soak <test>: round <seed>`; the harness shows it with a failure), and
//! `LIDX_SOAK_SEED=<seed>` runs that one round again. Without either
//! variable a test runs round 0 only, whose seeds and configuration are
//! the ones the suite has always used. `PROPTEST_CASES` sets how many
//! cases every proptest of the crate runs (`proptest_cases`).

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How long each soaked test runs, from `LIDX_SOAK_SECS`.
fn soak_duration() -> Option<Duration> {
    let secs = std::env::var("LIDX_SOAK_SECS").ok()?;
    let secs: u64 = secs
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("LIDX_SOAK_SECS must be a number of seconds, not {secs:?}"));
    Some(Duration::from_secs(secs))
}

/// The one round to replay, from `LIDX_SOAK_SEED`.
fn replay_seed() -> Option<u64> {
    let seed = std::env::var("LIDX_SOAK_SEED").ok()?;
    Some(
        seed.trim()
            .parse()
            .unwrap_or_else(|_| panic!("LIDX_SOAK_SEED must be a round number, not {seed:?}")),
    )
}

/// The rounds `test` runs: `[0]` normally, `[LIDX_SOAK_SEED]` when
/// replaying, and `0, 1, 2, …` until `LIDX_SOAK_SECS` have passed (at
/// least one) when soaking. Prints each round's seed before it runs, so a
/// failure names the round that reproduces it.
pub(crate) fn rounds(test: &'static str) -> impl Iterator<Item = u64> {
    let (replay, deadline) = (replay_seed(), soak_duration().map(|d| Instant::now() + d));
    let announce = replay.is_some() || deadline.is_some();
    rounds_until(replay, move || deadline.is_some_and(|d| Instant::now() < d)).inspect(
        move |round| {
            if announce {
                eprintln!("soak {test}: round {round}");
            }
        },
    )
}

/// The rounds for a `replay` seed, or else round 0 and then more while
/// `more()` holds.
fn rounds_until(replay: Option<u64>, more: impl Fn() -> bool) -> impl Iterator<Item = u64> {
    let first = replay.unwrap_or(0);
    (first..).take_while(move |&round| {
        if replay.is_some() {
            round == first
        } else {
            round == 0 || more()
        }
    })
}

/// A seed for one random stream of a round: `base` itself in round 0 (the
/// suite's fixed seeds), mixed with the round otherwise.
pub(crate) fn seed(base: u64, round: u64) -> u64 {
    if round == 0 {
        base
    } else {
        base ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(23)
    }
}

/// A generator for choices a round makes about its configuration.
pub(crate) fn config_rng(round: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed(0x51_7cc1_b727_220a, round))
}

/// One of `choices`: the first in round 0, a random one otherwise.
pub(crate) fn pick<T: Copy>(rng: &mut ChaCha8Rng, round: u64, choices: &[T]) -> T {
    if round == 0 {
        choices[0]
    } else {
        choices[rng.random_range(0..choices.len())]
    }
}

/// Proptest cases: `default`, or `PROPTEST_CASES` when set (proptest reads
/// it only for a default configuration, and this crate's proptests set
/// their own).
pub(crate) fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.trim().parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_one_a_replayed_one_or_as_many_as_time_allows() {
        assert_eq!(rounds_until(None, || false).collect::<Vec<_>>(), [0]);
        assert_eq!(rounds_until(None, || true).take(5).count(), 5);
        assert_eq!(rounds_until(Some(42), || true).collect::<Vec<_>>(), [42]);
        let left = std::cell::Cell::new(3);
        let counted = rounds_until(None, || {
            left.set(left.get() - 1);
            left.get() > 0
        });
        assert_eq!(counted.collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn round_zero_keeps_the_suites_seeds_and_others_differ() {
        assert_eq!(seed(7, 0), 7);
        let seeds: std::collections::HashSet<u64> = (0..1000).map(|r| seed(7, r)).collect();
        assert_eq!(seeds.len(), 1000);
        let mut rng = config_rng(0);
        assert_eq!(pick(&mut rng, 0, &[3, 4, 5]), 3);
        let mut rng = config_rng(1);
        let picked: std::collections::HashSet<u32> =
            (0..100).map(|_| pick(&mut rng, 1, &[3, 4, 5])).collect();
        assert_eq!(picked.len(), 3);
    }
}
