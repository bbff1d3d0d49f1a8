//! Tuning parameters, with the paper's defaults (§3.3, Table 2).

use std::time::Duration;

use lidx_core::background::LOWEST_NICE;
use lidx_core::{Error, Result};

use crate::tail::TailSpec;

/// Parameters of an [`XIndex`](crate::XIndex).
///
/// The four structural thresholds are the paper's `e`, `s`, `f` and `m`.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `e`: a group whose worst model error exceeds this gets another model
    /// (model split) or, at `max_models`, is split in two. Default 32.
    pub error_bound: usize,
    /// `s`: a group whose delta index holds more records is split. Default 256.
    pub delta_threshold: usize,
    /// `f` in (0, 1): models merge when their error is at most `e * f`;
    /// neighbouring groups merge when both errors are at most `e * f` and
    /// both deltas at most `s * f`. Default 0.25.
    pub tolerance: f64,
    /// `m`: most linear models per group, at most [`MAX_MODELS`]. Default 4.
    pub max_models: usize,
    /// Most records per group at bulk load; a chunk is halved until its
    /// `max_models` models meet `error_bound`, so a fresh index needs no
    /// splits. Default 2048 (smaller groups keep lognormal-like key sets
    /// within the lookup router's window; `docs/results/xindex-session28.md`).
    pub initial_group_size: usize,
    /// Most second-stage models in the root's two-stage RMI. Default 65536.
    pub max_root_models: usize,
    /// The sequential-insert hint (§3.5.2): records a group can append in
    /// place after its array when keys arrive above it, instead of
    /// inserting them into the delta index. 0 (the default) disables it.
    /// Each group given a tail (see [`sequential_groups`](Self::sequential_groups))
    /// pre-allocates its slots: about `16 + size_of::<OnceLock<K>>()` bytes
    /// each (32 for `u64` keys). At most [`MAX_SEQUENTIAL_CAPACITY`].
    pub sequential_capacity: usize,
    /// Which groups get an append tail of `sequential_capacity` slots.
    /// Default [`SequentialGroups::Detected`], the paper's detection.
    pub sequential_groups: SequentialGroups,
    /// Pause between background maintenance passes; `None` starts no
    /// background thread (maintenance then runs only through
    /// [`XIndex::maintain_now`](crate::XIndex::maintain_now)). A pass
    /// walks every group, so an index left alone stops walking: once a
    /// pass finds nothing to do, the next ones only check whether a key
    /// was added or removed since. Default 20 ms.
    pub maintenance_interval: Option<Duration>,
    /// How long a small delta may wait for compaction: one of at most
    /// `s * f` keys (Table 2's measure of small) and under 1/64 of its
    /// group's records. A larger one is compacted at the next pass. A
    /// compaction rewrites the whole group, however few keys its delta
    /// holds. The paper compacts every non-empty delta once per pass, its
    /// passes one second apart. Passes here run every
    /// `maintenance_interval`, so that splits and large deltas are handled
    /// within milliseconds, and this delay keeps the rewriting of groups
    /// for a few new keys at the paper's rate. `Duration::ZERO` compacts
    /// every non-empty delta at every pass.
    /// [`XIndex::maintain_now`](crate::XIndex::maintain_now) ignores it.
    /// Default 1 s.
    pub small_delta_delay: Duration,
    /// Most bytes the delta indexes may hold before compaction has merged
    /// them (an estimate per entry: key, record cell, B+-tree leaf entry). A
    /// writer whose insert goes over it runs maintenance itself before
    /// returning, so a burst of inserts slows down to what compaction
    /// absorbs instead of growing memory. Not in the paper. Default 64 MiB.
    pub delta_budget_bytes: usize,
    /// Nice value (0 to 19) the background maintenance thread lowers
    /// itself to, on Linux (elsewhere ignored). With every core busy with
    /// application threads, a maintenance thread at their priority takes
    /// turns with them and slows every operation on its core; at a lower
    /// one it compacts in their idle time, and `delta_budget_bytes` bounds
    /// how far it can fall behind (writers over it run maintenance
    /// themselves, at their own priority, once the pass it is running
    /// ends). While it waits for other threads (an epoch barrier, a node
    /// lock) it sleeps instead of yielding, so that other work on a busy
    /// machine cannot starve it for seconds while writers wait for it
    /// (`lidx_core::background::yield_while_waiting`). 0 keeps the
    /// priority of the thread that built the index. Not in the paper,
    /// whose background threads had cores of their own. Default 10.
    pub maintenance_nice: u8,
    /// Threads a bulk load, and a maintenance pass splitting a group into
    /// many parts, may use to fit and build groups (each thread gets at
    /// least 64K keys' worth; smaller jobs run on the calling thread). The
    /// index built is the same for any count. A pass's helper threads
    /// take [`maintenance_nice`](Self::maintenance_nice) like the
    /// maintenance thread. 0 (the default): the machine's available
    /// parallelism. 1: never more than the calling thread. Not in the
    /// paper.
    pub build_threads: usize,
}

/// Largest accepted [`Config::max_models`]. A group refits its models one
/// count at a time and a lookup walks them in order, so thousands would
/// make bulk loads quadratic and lookups linear; the paper uses 4.
pub const MAX_MODELS: usize = 256;

/// Largest accepted [`Config::sequential_capacity`]: 2 MiB of append slots
/// per group for `u64` keys, allocated with the group's array.
pub const MAX_SEQUENTIAL_CAPACITY: usize = 1 << 16;

impl Default for Config {
    fn default() -> Self {
        Config {
            error_bound: 32,
            delta_threshold: 256,
            tolerance: 0.25,
            max_models: 4,
            initial_group_size: 2048,
            max_root_models: 1 << 16,
            sequential_capacity: 0,
            sequential_groups: SequentialGroups::Detected,
            maintenance_interval: Some(Duration::from_millis(20)),
            small_delta_delay: Duration::from_secs(1),
            delta_budget_bytes: 64 << 20,
            maintenance_nice: 10,
            build_threads: 0,
        }
    }
}

/// Which groups pre-allocate a §3.5.2 append tail when
/// [`Config::sequential_capacity`] is not 0. Only a group with a tail takes
/// the tail lock, and only for keys above its array.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SequentialGroups {
    /// At bulk load, the last group (keys above every key, such as
    /// timestamps, arrive there); at every later rebuild of a group, only
    /// if at least three quarters of the keys inserted since its last
    /// build arrived above its array (and at least 16 of them, or the
    /// capacity if smaller). A rebuild after new keys that mostly landed
    /// elsewhere drops the tail; one after no new keys keeps it. A group
    /// whose tail is in use is not merged with the group after it, which
    /// would put the keys it receives inside the merged array's range.
    #[default]
    Detected,
    /// Every group, at every build: for keys that ascend within many groups
    /// at once (per-device timestamps, say), so that no group waits for
    /// detection; costs the slots in every group.
    All,
}

impl Config {
    /// The tail a group gets when it gets one.
    pub(crate) fn tail(&self) -> Option<TailSpec> {
        (self.sequential_capacity > 0).then_some(TailSpec {
            capacity: self.sequential_capacity,
            error_bound: self.error_bound,
        })
    }

    /// Checks every parameter, naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        if self.delta_threshold == 0 {
            return Err(Error::invalid("delta_threshold must be at least 1"));
        }
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(Error::invalid(format!(
                "tolerance must lie in (0, 1), got {}",
                self.tolerance
            )));
        }
        if !(1..=MAX_MODELS).contains(&self.max_models) {
            return Err(Error::invalid(format!(
                "max_models must lie in 1..={MAX_MODELS}, got {}",
                self.max_models
            )));
        }
        if self.sequential_capacity > MAX_SEQUENTIAL_CAPACITY {
            return Err(Error::invalid(format!(
                "sequential_capacity must be at most {MAX_SEQUENTIAL_CAPACITY} (slots per group), got {}",
                self.sequential_capacity
            )));
        }
        if self.initial_group_size == 0 {
            return Err(Error::invalid("initial_group_size must be at least 1"));
        }
        if self.max_root_models == 0 {
            return Err(Error::invalid("max_root_models must be at least 1"));
        }
        if self.delta_budget_bytes == 0 {
            return Err(Error::invalid("delta_budget_bytes must be at least 1"));
        }
        if self.maintenance_nice > LOWEST_NICE {
            return Err(Error::invalid(format!(
                "maintenance_nice must be at most {LOWEST_NICE}, got {}",
                self.maintenance_nice
            )));
        }
        if self.maintenance_interval == Some(Duration::ZERO) {
            return Err(Error::invalid(
                "maintenance_interval must be positive (use None for no background thread)",
            ));
        }
        Ok(())
    }

    /// `e * f`, the error at or below which models and groups merge.
    pub(crate) fn merge_error(&self) -> usize {
        (self.error_bound as f64 * self.tolerance) as usize
    }

    /// `s * f`, the delta size at or below which groups merge.
    pub(crate) fn merge_delta(&self) -> usize {
        (self.delta_threshold as f64 * self.tolerance) as usize
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers_and_bad_values_are_named() {
        let c = Config::default();
        assert_eq!(
            (c.error_bound, c.delta_threshold, c.max_models),
            (32, 256, 4)
        );
        assert_eq!(c.tolerance, 0.25);
        assert!(c.validate().is_ok());
        assert_eq!((c.merge_error(), c.merge_delta()), (8, 64));
        let d = Config::default;
        let bad = [
            (
                Config {
                    tolerance: 1.0,
                    ..d()
                },
                "tolerance",
            ),
            (
                Config {
                    max_models: 0,
                    ..d()
                },
                "max_models",
            ),
            (
                Config {
                    maintenance_nice: 20,
                    ..d()
                },
                "maintenance_nice",
            ),
            (
                Config {
                    maintenance_interval: Some(Duration::ZERO),
                    ..d()
                },
                "maintenance_interval",
            ),
        ];
        for (config, named) in bad {
            let message = config.validate().unwrap_err().to_string();
            assert!(message.contains(named), "{named}: {message}");
        }
    }
}
