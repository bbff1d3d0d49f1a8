//! Running a greedy left-to-right node builder in parallel without changing
//! its result.
//!
//! Each builder is a function `next(start) -> end`: the node that starts at
//! entry `start` covers entries `[start, end)`, and depends on nothing but
//! `start` (it is memoryless). The sequential builder is the chain
//! `0 -> next(0) -> next(next(0)) -> ... -> n`.
//!
//! In parallel, the entries are cut into chunks and every chunk runs the
//! chain speculatively from its own first entry. The true chain is then
//! stitched left to right: where the previous chunk's last node ends, the
//! chain continues sequentially until one of its boundaries coincides with
//! a speculative boundary of the chunk being entered. From that boundary on
//! both chains are the same function iterated from the same point, so the
//! speculative rest is adopted as is. Greedy chains synchronise after a few
//! nodes in practice; in the worst case stitching is the sequential run.

use rayon::prelude::*;

/// Entries per chunk when building in parallel (the paper's partitions hold
/// one million key-position pairs).
pub const DEFAULT_CHUNK: usize = 1 << 20;

/// Node boundaries of the chain over `n` entries: `[0, e_1, ..., n]`, one
/// more than the number of nodes (`[0]` when `n == 0`). Parallel over
/// chunks of `chunk` entries, sequential when `n <= chunk`; equal to the
/// sequential chain either way.
///
/// `next_end(start)` must return the end of the node starting at `start`,
/// in `start + 1..=n`; a value outside is clamped into it.
pub fn partition(n: usize, chunk: usize, next_end: impl Fn(usize) -> usize + Sync) -> Vec<usize> {
    partition_nodes(n, chunk, || (), |_, start| (next_end(start), ())).0
}

/// [`partition`] for builders that produce each node's content while
/// finding its end: `next(state, start) -> (end, node)`. `init` makes the
/// scratch state of one worker (buffers reused across its nodes). Returns
/// the boundaries and the nodes, `nodes.len() == boundaries.len() - 1`.
pub fn partition_nodes<S, T: Send>(
    n: usize,
    chunk: usize,
    init: impl Fn() -> S + Sync,
    next: impl Fn(&mut S, usize) -> (usize, T) + Sync,
) -> (Vec<usize>, Vec<T>) {
    let step = |state: &mut S, start: usize| {
        let (end, node) = next(state, start);
        (end.clamp(start + 1, n), node)
    };
    let chunk = chunk.max(1);
    if n <= chunk {
        return run_from(0, n, &mut init(), &step);
    }

    let starts: Vec<usize> = (0..n).step_by(chunk).collect();
    let mut runs: Vec<(Vec<usize>, Vec<T>)> = starts
        .par_iter()
        .map(|&start| run_from(start, (start + chunk).min(n), &mut init(), &step))
        .collect::<Vec<_>>();

    let mut state = init();
    let mut runs_iter = runs.drain(..);
    let (mut bounds, mut nodes) = runs_iter.next().unwrap_or_else(|| (vec![0], Vec::new()));
    for (spec_bounds, spec_nodes) in runs_iter {
        let mut at = *bounds.last().unwrap_or(&0);
        // Index of the first speculative boundary >= at.
        let mut j = spec_bounds.partition_point(|&b| b < at);
        while at < n {
            if j < spec_bounds.len() && spec_bounds[j] == at {
                bounds.extend_from_slice(&spec_bounds[j + 1..]);
                nodes.extend(spec_nodes.into_iter().skip(j));
                break;
            }
            if j == spec_bounds.len() {
                // This chunk was crossed without meeting its chain.
                break;
            }
            let (end, node) = step(&mut state, at);
            bounds.push(end);
            nodes.push(node);
            at = end;
            while j < spec_bounds.len() && spec_bounds[j] < at {
                j += 1;
            }
        }
    }
    (bounds, nodes)
}

/// The chain from `start` until it reaches or passes `until`.
fn run_from<S, T>(
    start: usize,
    until: usize,
    state: &mut S,
    step: &impl Fn(&mut S, usize) -> (usize, T),
) -> (Vec<usize>, Vec<T>) {
    let mut bounds = vec![start];
    let mut nodes = Vec::new();
    let mut at = start;
    while at < until {
        let (end, node) = step(state, at);
        bounds.push(end);
        nodes.push(node);
        at = end;
    }
    (bounds, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sequential(n: usize, next_end: impl Fn(usize) -> usize) -> Vec<usize> {
        let mut b = vec![0];
        while *b.last().unwrap() < n {
            b.push(next_end(*b.last().unwrap()));
        }
        b
    }

    #[test]
    fn empty_and_single() {
        assert_eq!(partition(0, 4, |s| s + 1), vec![0]);
        assert_eq!(partition(1, 4, |s| s + 1), vec![0, 1]);
        assert_eq!(partition(9, 1, |_| 100), vec![0, 9]);
        // A step that does not advance is clamped forward.
        assert_eq!(partition(3, 1, |s| s), vec![0, 1, 2, 3]);
    }

    #[test]
    fn nodes_follow_boundaries() {
        let (bounds, nodes) = partition_nodes(
            50,
            7,
            || 0u32,
            |calls, s| {
                *calls += 1;
                (s + 1 + s % 5, s)
            },
        );
        assert_eq!(bounds, sequential(50, |s| (s + 1 + s % 5).min(50)));
        assert_eq!(nodes, bounds[..bounds.len() - 1].to_vec());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn parallel_equals_sequential(
            lens in proptest::collection::vec(1usize..12, 1..200),
            chunk in 1usize..40,
        ) {
            // A memoryless chain with irregular node lengths.
            let n = lens.len();
            let next = |s: usize| (s + lens[s]).min(n);
            prop_assert_eq!(partition(n, chunk, next), sequential(n, next));
        }
    }
}
