//! Searches over sorted slices.
//!
//! Every function returns a *partition point*: the first index whose element
//! is not "before" the target. `lower_bound` is the first element `>= key`,
//! `upper_bound` the first `> key`. The `_by` variants take the predicate
//! directly (`before(x)` is true exactly for the elements left of the answer),
//! so engines can search record arrays without copying keys out.
//!
//! The model-guided variants take a predicted position and never trust it
//! blindly: [`lower_bound_within`] checks that the answer really lies in the
//! error window and otherwise falls back to an exponential search, so a model
//! used on keys it was not trained on (absent keys, later inserts) can cost
//! time but never give a wrong answer.

/// Binary search for the partition point of `before` over the whole slice.
///
/// Branch-light (the loop body compiles to a conditional move) and equal to
/// `slice.partition_point(before)` on every input.
#[inline(always)]
pub fn partition_by<T>(slice: &[T], before: impl Fn(&T) -> bool) -> usize {
    let mut size = slice.len();
    if size == 0 {
        return 0;
    }
    let mut base = 0usize;
    // Invariant: the answer lies in [base, base + size].
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = if before(&slice[mid]) { mid } else { base };
        size -= half;
    }
    base + usize::from(before(&slice[base]))
}

/// First index whose element is `>= key`.
#[inline]
pub fn lower_bound<K: Ord>(slice: &[K], key: &K) -> usize {
    partition_by(slice, |x| x < key)
}

/// First index whose element is `> key`.
#[inline]
pub fn upper_bound<K: Ord>(slice: &[K], key: &K) -> usize {
    partition_by(slice, |x| x <= key)
}

/// Partition point of `before`, searched only inside the window
/// `[pos - err, pos + err]` when the answer is known to lie there (the
/// window is verified with at most two probes), else found by
/// [`exponential_by`] from `pos`. Always equal to `slice.partition_point(before)`.
#[inline(always)]
pub fn within_by<T>(slice: &[T], pos: usize, err: usize, before: impl Fn(&T) -> bool) -> usize {
    let n = slice.len();
    let pos = pos.min(n);
    let lo = pos.saturating_sub(err);
    let hi = pos.saturating_add(err).saturating_add(1).min(n);
    let left_ok = lo == 0 || before(&slice[lo - 1]);
    let right_ok = hi == n || !before(&slice[hi]);
    if left_ok && right_ok {
        lo + partition_by(&slice[lo..hi], before)
    } else {
        exponential_by(slice, pos, before)
    }
}

/// `lower_bound` guided by a model's predicted position `pos` and its error bound `err`.
#[inline]
pub fn lower_bound_within<K: Ord>(slice: &[K], key: &K, pos: usize, err: usize) -> usize {
    within_by(slice, pos, err, |x| x < key)
}

/// `upper_bound` guided by a model's predicted position `pos` and its error bound `err`.
#[inline(always)]
pub fn upper_bound_within<K: Ord>(slice: &[K], key: &K, pos: usize, err: usize) -> usize {
    within_by(slice, pos, err, |x| x <= key)
}

/// Exponential (galloping) search for the partition point of `before`,
/// starting at `pos` (clamped to the slice): O(log d) probes where d is the
/// distance between `pos` and the answer. Forced inline: it is small, and
/// lookup paths compiled for x86-64-v3 otherwise called it.
#[inline(always)]
pub fn exponential_by<T>(slice: &[T], pos: usize, before: impl Fn(&T) -> bool) -> usize {
    let n = slice.len();
    let pos = pos.min(n);
    if pos < n && before(&slice[pos]) {
        // Answer is right of pos: grow [pos + 1, pos + step] until its end is not before.
        // Indices below `prev` are known to be before.
        let mut prev = pos + 1;
        let mut step = 1usize;
        loop {
            let probe = pos.saturating_add(step);
            if probe >= n {
                return prev + partition_by(&slice[prev..n], &before);
            }
            if !before(&slice[probe]) {
                return prev + partition_by(&slice[prev..probe], &before);
            }
            prev = probe + 1;
            step = step.saturating_mul(2);
        }
    } else {
        // Answer is at or left of pos: everything from `end` on is not before.
        let mut end = pos;
        let mut step = 1usize;
        loop {
            if step > end {
                return partition_by(&slice[..end], &before);
            }
            let probe = end - step;
            if before(&slice[probe]) {
                return probe + 1 + partition_by(&slice[probe + 1..end], &before);
            }
            end = probe;
            step = step.saturating_mul(2);
        }
    }
}

/// `lower_bound` by exponential search from a predicted position.
#[inline]
pub fn exponential_lower_bound<K: Ord>(slice: &[K], key: &K, pos: usize) -> usize {
    exponential_by(slice, pos, |x| x < key)
}

/// `upper_bound` by exponential search from a predicted position.
#[inline]
pub fn exponential_upper_bound<K: Ord>(slice: &[K], key: &K, pos: usize) -> usize {
    exponential_by(slice, pos, |x| x <= key)
}

/// The `window` items around a predicted position `pos` in a slice of
/// `len` items, as bounds `lo..hi`: centred on `pos`, shifted to stay
/// inside the slice (shorter only when the slice is).
#[inline]
pub fn window_around(pos: usize, len: usize, window: usize) -> (usize, usize) {
    let lo = pos
        .saturating_sub(window / 2)
        .min(len.saturating_sub(window));
    (lo, lo.saturating_add(window).min(len))
}

/// Partition point of `before` from a predicted position `pos`: first a
/// branch-free count of the items `before` holds for among the `window`
/// items around `pos` ([`window_around`]); only when the answer lies
/// outside them, [`exponential_by`] outward from the window's edge on the
/// answer's side (the window's items are already known to be on the
/// other side, so galloping from `pos` would compare them again). Always
/// equal to `slice.partition_point(before)`.
///
/// For cheap comparisons (integer keys) this beats a binary or galloping
/// search when the prediction is usually close: the window's cache lines
/// load in parallel, and no branch depends on a loaded item, so the CPU
/// neither mispredicts on the answer nor stops running ahead.
#[inline]
pub fn counted_by<T>(slice: &[T], pos: usize, window: usize, before: impl Fn(&T) -> bool) -> usize {
    match count_window(slice, pos, window, &before) {
        Counted::Inside(i) => i,
        Counted::EmptyWindow => exponential_by(slice, pos, before),
        Counted::RightOf(hi) => hi + exponential_by(&slice[hi..], 0, before),
        Counted::LeftOf(lo) => exponential_by(&slice[..lo], lo, before),
    }
}

/// What counting the window around a prediction found.
enum Counted {
    /// The answer.
    Inside(usize),
    /// The window holds no items (the slice is empty, or `window` is 0).
    EmptyWindow,
    /// Every item of the window, which ends before `hi`, is before: the
    /// answer is right of it.
    RightOf(usize),
    /// No item of the window, which starts at `lo`, is before: the answer
    /// is at or left of it.
    LeftOf(usize),
}

/// The branch-free count shared by [`counted_by`] and [`counted_within`].
#[inline(always)]
fn count_window<T>(
    slice: &[T],
    pos: usize,
    window: usize,
    before: &impl Fn(&T) -> bool,
) -> Counted {
    let (lo, hi) = window_around(pos, slice.len(), window);
    let items = &slice[lo..hi];
    let below = count_before(items, before);
    // The answer is inside when some item is before and some is not, or
    // when the window reaches the slice's end on the side in question.
    if (below > 0 || lo == 0) && (below < items.len() || hi == slice.len()) {
        Counted::Inside(lo + below)
    } else if items.is_empty() {
        Counted::EmptyWindow
    } else if below > 0 {
        Counted::RightOf(hi)
    } else {
        Counted::LeftOf(lo)
    }
}

/// How many of `items` `before` holds for, without branches.
///
/// A window of 16 items, the size the learned indexes count, goes through a
/// fixed-size array: the compiler unrolls it into four vector compares
/// instead of a loop with remainder handling (`callgrind`, XIndex-R on
/// geolite2 with AVX2: 427 -> 411 instructions per `get`).
#[inline(always)]
fn count_before<T>(items: &[T], before: &impl Fn(&T) -> bool) -> usize {
    let count = |count: usize, x: &T| count + usize::from(before(x));
    match <&[T; 16]>::try_from(items) {
        Ok(full) => full.iter().fold(0, count),
        Err(_) => items.iter().fold(0, count),
    }
}

/// [`counted_by`] for a prediction whose error is known to be at most
/// about `reach` items: when the answer lies outside the `window`, the
/// items between the window's edge and `pos ± reach` on the answer's side
/// are counted next, in a second branch-free pass, so that all their cache
/// lines load at once instead of one per galloping step. Before that pass,
/// `outer(start, end)` is told which items it covers, to request lines
/// that run parallel to them (a value array, say). Beyond `pos ± reach`
/// (a bound that was wrong, or a key the bound does not cover) it
/// gallops, so the result is always `slice.partition_point(before)`.
#[inline(always)]
pub fn counted_within<T>(
    slice: &[T],
    pos: usize,
    window: usize,
    reach: usize,
    before: impl Fn(&T) -> bool,
    outer: impl FnOnce(usize, usize),
) -> usize {
    match count_window(slice, pos, window, &before) {
        Counted::Inside(i) => i,
        outside => counted_outside(slice, pos, reach, outside, before, outer),
    }
}

/// [`counted_within`] once the window's count has put the answer outside
/// it. Out of line: the window's count, which most searches end with,
/// then stays small enough to inline into the caller's search.
#[inline(never)]
fn counted_outside<T>(
    slice: &[T],
    pos: usize,
    reach: usize,
    counted: Counted,
    before: impl Fn(&T) -> bool,
    outer: impl FnOnce(usize, usize),
) -> usize {
    match counted {
        Counted::Inside(i) => i,
        Counted::EmptyWindow => exponential_by(slice, pos, before),
        Counted::RightOf(hi) => {
            // Count up to `pos + reach` (then gallop).
            let end = pos.saturating_add(reach).clamp(hi, slice.len());
            outer(hi, end);
            hi + counted_by(&slice[hi..], 0, end - hi, before)
        }
        Counted::LeftOf(lo) => {
            // Count down to `pos - reach` (then gallop).
            let start = pos.saturating_sub(reach).min(lo);
            outer(start, lo);
            counted_by(&slice[..lo], lo, lo - start, before)
        }
    }
}

/// Linear scan for the partition point starting at `pos`, for tiny error
/// windows where probing neighbours beats a binary search.
pub fn linear_by<T>(slice: &[T], pos: usize, before: impl Fn(&T) -> bool) -> usize {
    let n = slice.len();
    let mut i = pos.min(n);
    if i < n && before(&slice[i]) {
        while i < n && before(&slice[i]) {
            i += 1;
        }
    } else {
        while i > 0 && !before(&slice[i - 1]) {
            i -= 1;
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted_keys() -> impl Strategy<Value = Vec<u64>> {
        prop_oneof![
            proptest::collection::vec(any::<u64>(), 0..300),
            proptest::collection::vec(0u64..20, 0..300), // many duplicates
            proptest::collection::vec(prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()], 0..8),
        ]
        .prop_map(|mut v| {
            v.sort_unstable();
            v
        })
    }

    fn probe_key(keys: &[u64]) -> impl Strategy<Value = u64> + use<> {
        let from_set: Vec<u64> = keys.to_vec();
        prop_oneof![
            any::<u64>(),
            Just(0u64),
            Just(u64::MAX),
            (0usize..from_set.len().max(1))
                .prop_map(move |i| from_set.get(i).copied().unwrap_or(7)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn all_searches_equal_partition_point(
            (keys, key, pos, err) in sorted_keys().prop_flat_map(|k| {
                let n = k.len();
                (Just(k.clone()), probe_key(&k), 0..n + 3, 0usize..40)
            })
        ) {
            let lb = keys.partition_point(|x| *x < key);
            let ub = keys.partition_point(|x| *x <= key);
            prop_assert_eq!(lower_bound(&keys, &key), lb);
            prop_assert_eq!(upper_bound(&keys, &key), ub);
            prop_assert_eq!(lower_bound_within(&keys, &key, pos, err), lb);
            prop_assert_eq!(upper_bound_within(&keys, &key, pos, err), ub);
            prop_assert_eq!(exponential_lower_bound(&keys, &key, pos), lb);
            prop_assert_eq!(exponential_upper_bound(&keys, &key, pos), ub);
            prop_assert_eq!(linear_by(&keys, pos, |x| *x < key), lb);
            prop_assert_eq!(within_by(&keys, pos, usize::MAX, |x| *x < key), lb);
            for window in [0, 1, 2, 7, 16, 64] {
                prop_assert_eq!(counted_by(&keys, pos, window, |x| *x < key), lb);
                prop_assert_eq!(counted_by(&keys, pos, window, |x| *x <= key), ub);
            }
            prop_assert_eq!(counted_by(&keys, usize::MAX, 16, |x| *x < key), lb);
            for (window, reach) in [(0, 0), (1, 40), (2, 3), (16, 0), (16, 8), (16, 24), (16, usize::MAX)] {
                let mut outer = None;
                let got = counted_within(&keys, pos, window, reach, |x| *x < key, |a, b| outer = Some((a, b)));
                prop_assert_eq!(got, lb);
                if let Some((a, b)) = outer {
                    // The second pass covers items next to the window,
                    // on the answer's side, inside the slice.
                    let (lo, hi) = window_around(pos, keys.len(), window);
                    prop_assert!(a <= b && b <= keys.len());
                    prop_assert!(b == lo || a == hi, "{a}..{b} beside {lo}..{hi}");
                    prop_assert_eq!(b == lo, lb <= lo);
                }
                prop_assert_eq!(counted_within(&keys, pos, window, reach, |x| *x <= key, |_, _| ()), ub);
            }
        }
    }

    #[test]
    fn windows_stay_inside_the_slice() {
        assert_eq!(window_around(0, 0, 16), (0, 0));
        assert_eq!(window_around(5, 3, 16), (0, 3));
        assert_eq!(window_around(0, 100, 16), (0, 16));
        assert_eq!(window_around(50, 100, 16), (42, 58));
        assert_eq!(window_around(99, 100, 16), (84, 100));
        assert_eq!(window_around(usize::MAX, 100, 16), (84, 100));
        assert_eq!(window_around(7, 100, 0), (7, 7));
        assert_eq!(window_around(3, 10, usize::MAX), (0, 10));
    }

    #[test]
    fn edge_inputs() {
        let empty: [u64; 0] = [];
        assert_eq!(lower_bound(&empty, &5), 0);
        assert_eq!(lower_bound_within(&empty, &5, 10, 3), 0);
        assert_eq!(exponential_lower_bound(&empty, &5, 0), 0);
        let one = [5u64];
        for k in [0, 5, 6, u64::MAX] {
            for pos in 0..3 {
                assert_eq!(
                    lower_bound_within(&one, &k, pos, 0),
                    one.partition_point(|x| *x < k)
                );
            }
        }
        // Predictions far off in both directions: the answer lies beyond
        // the counted window on its right, then on its left.
        let line: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        for (key, pos) in [
            (2_700u64, 0usize),
            (2_701, 5),
            (15, 999),
            (0, 500),
            (2_997, 0),
        ] {
            let expect = line.partition_point(|x| *x < key);
            assert_eq!(counted_by(&line, pos, 16, |x| *x < key), expect);
            assert_eq!(
                counted_by(&line, pos, 16, |x| *x <= key),
                line.partition_point(|x| *x <= key)
            );
        }
        let dups = [3u64; 1000];
        assert_eq!(lower_bound_within(&dups, &3, 999, 0), 0);
        assert_eq!(upper_bound_within(&dups, &3, 0, 0), 1000);
    }
}
