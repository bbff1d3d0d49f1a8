//! Random operation sequences checked step by step against `BTreeMap`,
//! with maintenance interleaved often enough (tiny thresholds, explicit
//! passes) that compactions, splits and merges happen between operations.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use proptest::prelude::*;

use super::{settle, tiny_budget_config, tiny_config, tiny_sequential_config};
use crate::maintenance::Pass;
use crate::{Config, XIndex};

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Remove(u64),
    Get(u64),
    TryInsert(u64, u64),
    /// `compare_exchange(key, current, new)`, where a `current` of `None`
    /// stands for the key's actual value at that step (so that exchanges
    /// succeed as often as they fail).
    CompareExchange(u64, Option<Option<u64>>, Option<u64>),
    /// `fetch_update` adding one (wrapping; absent counts as 0), or
    /// declining if the value is odd.
    FetchUpdate(u64),
    GetMany(Vec<u64>),
    Scan(u64, usize),
    Range(u64, u64),
    /// `range(lower..upper)` (each bound's kind chosen by a number: 0
    /// included, 1 excluded, 2 unbounded) consumed from both ends, `true`
    /// taking from the back, until the pattern ends; then the rest, as
    /// [`two_ended_take`] numbers `finish`.
    TwoEnded((u64, u8), (u64, u8), Vec<bool>, u8),
    /// The last record at or below, and below, a key, and the first at or
    /// above, and above, it.
    Predecessor(u64),
    /// `retain` keeping the records [`kept`] accepts with this salt.
    Retain(u64),
    /// `remove_range(lower..upper)`, bounds numbered as in `TwoEnded`.
    RemoveRange((u64, u8), (u64, u8)),
    Clear,
    Maintain,
    /// A pass as the background thread runs it: small deltas may stay.
    BackgroundPass,
    /// A single-key operation through the baseline build of the
    /// operation, where the public call takes its x86-64-v3 twin on a
    /// CPU with AVX2: both builds must agree on one index.
    Portable(Box<Op>),
}

/// Inserts, removes, gets and batched gets: the operations that have an
/// x86-64-v3 build besides the portable one.
fn point_op(key_space: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..key_space, any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => (0..key_space).prop_map(Op::Remove),
        3 => (0..key_space).prop_map(Op::Get),
        1 => proptest::collection::vec(0..key_space, 0..40).prop_map(Op::GetMany),
    ]
}

/// The conditional writes: insert if absent, compare-exchange, fetch-update.
fn conditional_op(key_space: u64) -> impl Strategy<Value = Op> {
    let guess = prop_oneof![
        2 => Just(None),
        1 => Just(Some(None)),
        1 => (0u64..4).prop_map(|v| Some(Some(v))),
    ];
    let new = prop_oneof![3 => (0u64..4).prop_map(Some), 1 => Just(None)];
    prop_oneof![
        1 => (0..key_space, 0u64..4).prop_map(|(k, v)| Op::TryInsert(k, v)),
        2 => (0..key_space, guess, new).prop_map(|(k, c, n)| Op::CompareExchange(k, c, n)),
        1 => (0..key_space).prop_map(Op::FetchUpdate),
    ]
}

fn op(key_space: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => point_op(key_space),
        3 => conditional_op(key_space),
        1 => (0..key_space, 0usize..20).prop_map(|(k, n)| Op::Scan(k, n)),
        1 => (0..key_space, 0..key_space).prop_map(|(a, b)| Op::Range(a.min(b), a.max(b))),
        1 => two_ended(key_space),
        1 => (0..key_space + 2).prop_map(Op::Predecessor),
        1 => removals(key_space),
        2 => Just(Op::Maintain),
        1 => Just(Op::BackgroundPass),
        2 => point_op(key_space).prop_map(|o| Op::Portable(Box::new(o))),
        1 => conditional_op(key_space).prop_map(|o| Op::Portable(Box::new(o))),
    ]
}

/// A [`Op::TwoEnded`]: bounds of any kind, in either order (a start above
/// the end must give an empty range, not a panic).
fn two_ended(key_space: u64) -> impl Strategy<Value = Op> {
    let bound = (0..key_space + 2, 0u8..3);
    (
        bound.clone(),
        bound,
        proptest::collection::vec(any::<bool>(), 0..30),
        0u8..3,
    )
        .prop_map(|(a, b, pattern, finish)| Op::TwoEnded(a, b, pattern, finish))
}

/// The bulk removals: `retain`, `remove_range`, and (rarely) `clear`.
fn removals(key_space: u64) -> impl Strategy<Value = Op> {
    let bound = (0..key_space + 2, 0u8..3);
    prop_oneof![
        2 => any::<u64>().prop_map(Op::Retain),
        2 => (bound.clone(), bound).prop_map(|(a, b)| Op::RemoveRange(a, b)),
        1 => Just(Op::Clear),
    ]
}

/// Whether [`Op::Retain`] with `salt` keeps a record: about two in three.
fn kept(salt: u64, key: u64, value: u64) -> bool {
    !(key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ value ^ salt).is_multiple_of(3)
}

/// Whether `BTreeMap::range` would panic on these bounds (a start above
/// the end, or both excluding one key): such ranges are empty here.
fn inverted(lower: Bound<u64>, upper: Bound<u64>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u))
        | (Bound::Excluded(l), Bound::Included(u)) => l >= u,
        _ => false,
    }
}

/// A bound of the kind [`Op::TwoEnded`] numbers.
fn bound_of((key, kind): (u64, u8)) -> Bound<u64> {
    match kind {
        0 => Bound::Included(key),
        1 => Bound::Excluded(key),
        _ => Bound::Unbounded,
    }
}

/// What taking from the ends of `iter` in `pattern`'s order (`true`:
/// the back), then the rest as `finish` numbers it, returns: 0 from the
/// back a record at a time, 1 by `fold` (ascending), 2 by `rfold`
/// (descending). `fold` and `rfold` take a range's remaining records in
/// batches that grow past the ones `next` fetches; `BTreeMap`'s take them
/// one by one, so the two are compared.
fn two_ended_take(
    mut iter: impl DoubleEndedIterator<Item = (u64, u64)>,
    pattern: &[bool],
    finish: u8,
) -> Vec<Option<(u64, u64)>> {
    let taken: Vec<Option<(u64, u64)>> = pattern
        .iter()
        .map(|&back| if back { iter.next_back() } else { iter.next() })
        .collect();
    let keep = |mut taken: Vec<Option<(u64, u64)>>, record| {
        taken.push(Some(record));
        taken
    };
    match finish {
        0 => {
            let mut taken = taken;
            taken.extend(iter.rev().map(Some));
            taken
        }
        1 => iter.fold(taken, keep),
        _ => iter.rfold(taken, keep),
    }
}

fn initial(key_space: u64) -> impl Strategy<Value = BTreeMap<u64, u64>> {
    proptest::collection::btree_map(0..key_space, any::<u64>(), 0..60)
}

/// `try_insert` on the oracle: the value present (nothing written), or
/// `None` and `v` inserted.
fn try_insert_into(oracle: &mut BTreeMap<u64, u64>, k: u64, v: u64) -> Option<u64> {
    let present = oracle.get(&k).copied();
    if present.is_none() {
        oracle.insert(k, v);
    }
    present
}

/// `compare_exchange` on the oracle, with `guess` as in
/// [`Op::CompareExchange`]: the `current` value used and the result.
fn exchange_in(
    oracle: &mut BTreeMap<u64, u64>,
    k: u64,
    guess: Option<Option<u64>>,
    new: Option<u64>,
) -> (Option<u64>, Result<Option<u64>, Option<u64>>) {
    let actual = oracle.get(&k).copied();
    let current = guess.unwrap_or(actual);
    if actual != current {
        return (current, Err(actual));
    }
    match new {
        Some(v) => oracle.insert(k, v),
        None => oracle.remove(&k),
    };
    (current, Ok(actual))
}

/// The update [`Op::FetchUpdate`] makes: add one (wrapping; absent
/// counts as 0), or decline if the value is odd.
fn step(v: Option<u64>) -> Option<Option<u64>> {
    match v {
        Some(v) if v % 2 == 1 => None,
        v => Some(Some(v.unwrap_or(0).wrapping_add(1))),
    }
}

/// `fetch_update(k, step)` on the oracle.
fn fetch_update_in(oracle: &mut BTreeMap<u64, u64>, k: u64) -> Result<Option<u64>, Option<u64>> {
    let actual = oracle.get(&k).copied();
    match step(actual) {
        Some(Some(v)) => {
            oracle.insert(k, v);
            Ok(actual)
        }
        _ => Err(actual),
    }
}

fn run(
    index: &XIndex<u64, u64>,
    oracle: &mut BTreeMap<u64, u64>,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    for op in ops {
        match *op {
            Op::Insert(k, v) => {
                prop_assert_eq!(index.insert(k, v), oracle.insert(k, v), "{:?}", op)
            }
            Op::Remove(k) => prop_assert_eq!(index.remove(&k), oracle.remove(&k), "{:?}", op),
            Op::Get(k) => {
                prop_assert_eq!(index.get(&k), oracle.get(&k).copied(), "{:?}", op);
                prop_assert_eq!(index.contains_key(&k), oracle.contains_key(&k), "{:?}", op);
            }
            Op::TryInsert(k, v) => {
                let want = try_insert_into(oracle, k, v).map_or(Ok(()), Err);
                prop_assert_eq!(index.try_insert(k, v), want, "{:?}", op);
            }
            Op::CompareExchange(k, guess, new) => {
                let (current, want) = exchange_in(oracle, k, guess, new);
                prop_assert_eq!(index.compare_exchange(&k, current, new), want, "{:?}", op);
            }
            Op::FetchUpdate(k) => {
                let want = fetch_update_in(oracle, k);
                prop_assert_eq!(index.fetch_update(&k, step), want, "{:?}", op);
            }
            Op::GetMany(ref keys) => {
                let mut got = vec![Some(7)]; // appended to, not cleared
                index.get_many(keys, &mut got);
                let want: Vec<Option<u64>> = std::iter::once(Some(7))
                    .chain(keys.iter().map(|k| oracle.get(k).copied()))
                    .collect();
                prop_assert_eq!(got, want, "{:?}", op);
            }
            Op::Scan(k, n) => {
                let mut got = vec![(u64::MAX, 7)]; // appended to, not cleared
                index.scan(&k, n, &mut got);
                let want: Vec<(u64, u64)> = std::iter::once((u64::MAX, 7))
                    .chain(oracle.range(k..).take(n).map(|(a, b)| (*a, *b)))
                    .collect();
                prop_assert_eq!(got, want, "{:?}", op);
            }
            Op::Range(a, b) => {
                let got: Vec<(u64, u64)> = index
                    .range((Bound::Excluded(a), Bound::Included(b)))
                    .collect();
                let want: Vec<(u64, u64)> = oracle
                    .range((Bound::Excluded(a), Bound::Included(b)))
                    .map(|(a, b)| (*a, *b))
                    .collect();
                prop_assert_eq!(got, want, "{:?}", op);
            }
            Op::TwoEnded(a, b, ref pattern, finish) => {
                let (lower, upper) = (bound_of(a), bound_of(b));
                let got = two_ended_take(index.range((lower, upper)), pattern, finish);
                let want = if inverted(lower, upper) {
                    two_ended_take(std::iter::empty(), pattern, finish)
                } else {
                    let records = oracle.range((lower, upper)).map(|(a, b)| (*a, *b));
                    two_ended_take(records, pattern, finish)
                };
                prop_assert_eq!(got, want, "{:?}", op);
            }
            Op::Predecessor(k) => {
                let want = oracle.range(..=k).next_back().map(|(a, b)| (*a, *b));
                prop_assert_eq!(index.range(..=k).next_back(), want, "{:?}", op);
                prop_assert_eq!(index.upper_bound(Bound::Included(&k)), want, "{:?}", op);
                let want = oracle.range(..k).next_back().map(|(a, b)| (*a, *b));
                prop_assert_eq!(index.range(..k).next_back(), want, "{:?}", op);
                prop_assert_eq!(index.upper_bound(Bound::Excluded(&k)), want, "{:?}", op);
                let want = oracle.range(k..).next().map(|(a, b)| (*a, *b));
                prop_assert_eq!(index.lower_bound(Bound::Included(&k)), want, "{:?}", op);
                let want = oracle
                    .range((Bound::Excluded(k), Bound::Unbounded))
                    .next()
                    .map(|(a, b)| (*a, *b));
                prop_assert_eq!(index.lower_bound(Bound::Excluded(&k)), want, "{:?}", op);
            }
            Op::Retain(salt) => {
                let mut seen = Vec::new();
                index.retain(|&k, v| {
                    seen.push((k, v));
                    kept(salt, k, v)
                });
                let want: Vec<(u64, u64)> = oracle.iter().map(|(a, b)| (*a, *b)).collect();
                prop_assert_eq!(seen, want, "{:?} visits every record once, in order", op);
                oracle.retain(|&k, v| kept(salt, k, *v));
            }
            Op::RemoveRange(a, b) => {
                let (lower, upper) = (bound_of(a), bound_of(b));
                let doomed: Vec<u64> = if inverted(lower, upper) {
                    Vec::new()
                } else {
                    oracle.range((lower, upper)).map(|(k, _)| *k).collect()
                };
                for k in &doomed {
                    oracle.remove(k);
                }
                prop_assert_eq!(index.remove_range((lower, upper)), doomed.len(), "{:?}", op);
            }
            Op::Clear => {
                index.clear();
                oracle.clear();
                prop_assert!(index.is_empty());
            }
            Op::Maintain => {
                index.maintain_now();
            }
            Op::BackgroundPass => {
                index.inner().maintain(Pass::Background);
            }
            Op::Portable(ref portable) => {
                let inner = index.inner();
                match **portable {
                    Op::Insert(k, v) => {
                        prop_assert_eq!(inner.put_portable(&k, v), oracle.insert(k, v), "{:?}", op)
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(inner.remove_portable(&k), oracle.remove(&k), "{:?}", op)
                    }
                    Op::Get(k) => {
                        prop_assert_eq!(inner.get_portable(&k), oracle.get(&k).copied(), "{:?}", op)
                    }
                    Op::GetMany(ref keys) => {
                        let mut got: Vec<Option<u64>> = Vec::new();
                        inner.get_many_portable(keys, &mut got);
                        let want: Vec<Option<u64>> =
                            keys.iter().map(|k| oracle.get(k).copied()).collect();
                        prop_assert_eq!(got, want, "{:?}", op);
                    }
                    Op::TryInsert(k, v) => {
                        let want = try_insert_into(oracle, k, v);
                        prop_assert_eq!(inner.put_if_absent_portable(&k, v), want, "{:?}", op);
                    }
                    Op::CompareExchange(k, guess, new) => {
                        let (current, want) = exchange_in(oracle, k, guess, new);
                        let got = inner.exchange_portable(&k, current, new);
                        prop_assert_eq!(got, want, "{:?}", op);
                    }
                    Op::FetchUpdate(k) => {
                        let want = fetch_update_in(oracle, k);
                        let got = inner.update_portable(&k, &mut step);
                        prop_assert_eq!(got, want, "{:?}", op);
                    }
                    _ => unreachable!("generated only for single-key operations"),
                }
            }
        }
        prop_assert_eq!(index.len(), oracle.len());
    }
    Ok(())
}

fn check_final(index: &XIndex<u64, u64>, oracle: &BTreeMap<u64, u64>) -> Result<(), TestCaseError> {
    let all: Vec<(u64, u64)> = index.range(..).collect();
    let want: Vec<(u64, u64)> = oracle.iter().map(|(a, b)| (*a, *b)).collect();
    prop_assert_eq!(&all, &want);
    let mut down: Vec<(u64, u64)> = index.range(..).rev().collect();
    down.reverse();
    prop_assert_eq!(&down, &want);
    prop_assert_eq!(&index.iter().collect::<Vec<_>>(), &want);
    prop_assert_eq!(&index.into_iter().collect::<Vec<_>>(), &want);
    prop_assert_eq!(format!("{index:?}"), format!("{oracle:?}"));
    // Fused: once drained from either end, both ends stay empty.
    let mut drained = index.iter();
    drained.by_ref().for_each(drop);
    prop_assert_eq!((drained.next(), drained.next_back()), (None, None));
    let mut drained = index.iter();
    drained.by_ref().rev().for_each(drop);
    prop_assert_eq!((drained.next_back(), drained.next()), (None, None));
    prop_assert_eq!(
        (index.first_key_value(), index.last_key_value()),
        (want.first().copied(), want.last().copied())
    );
    settle(index);
    let all: Vec<(u64, u64)> = index.range(..).collect();
    prop_assert_eq!(all, want);
    prop_assert_eq!(index.stats().delta_total(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(super::soak::proptest_cases(160)))]

    #[test]
    fn matches_btreemap_with_explicit_maintenance(
        start in initial(300),
        ops in proptest::collection::vec(op(300), 1..250),
    ) {
        let index = XIndex::bulk_load(start.clone(), tiny_config()).unwrap();
        let mut oracle = start;
        run(&index, &mut oracle, &ops)?;
        check_final(&index, &oracle)?;
    }

    #[test]
    fn matches_btreemap_with_sequential_tails(
        start in initial(300),
        ops in proptest::collection::vec(
            prop_oneof![
                // Runs of ascending inserts (or inserts if absent) feed
                // the tails.
                3 => (0u64..300, 1usize..20, any::<bool>()).prop_map(|(k, n, if_absent)| {
                    (0..n as u64)
                        .map(|i| if if_absent { Op::TryInsert(k + i, i) } else { Op::Insert(k + i, i) })
                        .collect::<Vec<_>>()
                }),
                5 => op(300).prop_map(|o| vec![o]),
            ],
            1..120,
        ),
        detected in any::<bool>(),
    ) {
        let ops: Vec<Op> = ops.into_iter().flatten().collect();
        // Tails everywhere, or only where maintenance detects the runs.
        let config = if detected {
            Config {
                sequential_groups: crate::SequentialGroups::Detected,
                ..tiny_sequential_config()
            }
        } else {
            tiny_sequential_config()
        };
        let index = XIndex::bulk_load(start.clone(), config).unwrap();
        let mut oracle = start;
        run(&index, &mut oracle, &ops)?;
        check_final(&index, &oracle)?;
    }

    #[test]
    fn matches_btreemap_with_background_maintenance(
        start in initial(200),
        ops in proptest::collection::vec(op(200), 1..200),
    ) {
        // A 1 ms background thread races with the test thread's operations,
        // leaving a one-key delta alone for 2 ms.
        let config = Config {
            maintenance_interval: Some(Duration::from_millis(1)),
            small_delta_delay: Duration::from_millis(2),
            ..tiny_config()
        };
        let index = XIndex::bulk_load(start.clone(), config).unwrap();
        let mut oracle = start;
        run(&index, &mut oracle, &ops)?;
        check_final(&index, &oracle)?;
    }

    #[test]
    fn matches_btreemap_under_a_tiny_delta_budget(
        start in initial(400),
        ops in proptest::collection::vec(op(400), 1..300),
    ) {
        // Inserts past 16 pending entries run passes themselves; after
        // every operation the charged bytes are within the budget.
        let config = tiny_budget_config();
        let budget = config.delta_budget_bytes;
        let index = XIndex::bulk_load(start.clone(), config).unwrap();
        let mut oracle = start;
        for op in &ops {
            run(&index, &mut oracle, std::slice::from_ref(op))?;
            let used = index.stats().delta_bytes;
            prop_assert!(used <= budget, "{} bytes charged after {:?}", used, op);
        }
        check_final(&index, &oracle)?;
        settle(&index);
        prop_assert_eq!(index.stats().delta_bytes, 0);
    }

    #[test]
    fn byte_keys_match_btreemap(
        start in proptest::collection::btree_map(byte_key(), any::<u64>(), 0..40),
        ops in proptest::collection::vec((0u8..4, byte_key(), any::<u64>()), 1..150),
    ) {
        let index = XIndex::bulk_load(start.clone(), tiny_config()).unwrap();
        let mut oracle = start;
        for (i, (kind, key, value)) in ops.into_iter().enumerate() {
            match kind {
                0 => prop_assert_eq!(index.insert(key.clone(), value), oracle.insert(key, value)),
                1 => prop_assert_eq!(index.remove(&key), oracle.remove(&key)),
                2 => prop_assert_eq!(index.get(&key), oracle.get(&key).copied()),
                _ => prop_assert_eq!(
                    index.lower_bound(Bound::Included(&key)),
                    oracle.range(key..).next().map(|(k, v)| (k.clone(), *v))
                ),
            }
            if i % 5 == 4 {
                index.maintain_now();
            }
        }
        let all: Vec<(Vec<u8>, u64)> = index.range(..).collect();
        let want: Vec<(Vec<u8>, u64)> = oracle.into_iter().collect();
        prop_assert_eq!(all, want);
    }
}

/// Short byte strings over a four-letter alphabet that includes 0 (so
/// `[1]` and `[1, 0]` share their zero-padded ordered prefix), half of
/// them after a common 8-byte head (so all of those tie on the prefix
/// the delta tree's nodes keep, and its searches compare whole keys).
fn byte_key() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), proptest::collection::vec(0u8..4, 0..5)).prop_map(|(long, tail)| {
        let mut key = if long {
            b"user/000".to_vec()
        } else {
            Vec::new()
        };
        key.extend(tail);
        key
    })
}

/// The oracle's thresholds really do exercise every structural operation.
#[test]
fn tiny_thresholds_trigger_every_structural_operation() {
    let index =
        XIndex::<u64, u64>::bulk_load((0..64u64).map(|k| (k * k, k)), tiny_config()).unwrap();
    let mut oracle: BTreeMap<u64, u64> = (0..64u64).map(|k| (k * k, k)).collect();
    for round in 0..6u64 {
        for k in 0..64u64 {
            let key = k * k + round;
            index.insert(key, round);
            oracle.insert(key, round);
        }
        index.maintain_now();
        for k in 0..64u64 {
            let key = k * k + round;
            assert_eq!(index.remove(&key), oracle.remove(&key));
        }
        index.maintain_now();
    }
    // Splits give their parts models that fit, so a model split needs a
    // compaction (which keeps the model count) of keys that bend the line:
    // a few bunched into a group of evenly spaced keys.
    for k in 0..8u64 {
        index.insert(k * 1000, k);
        oracle.insert(k * 1000, k);
    }
    index.maintain_now();
    for k in 1..=3u64 {
        index.insert(3000 + k, k);
        oracle.insert(3000 + k, k);
    }
    index.maintain_now();
    settle(&index);
    let s = index.stats();
    assert!(s.compactions > 0, "{s:?}");
    assert!(s.group_splits > 0, "{s:?}");
    assert!(s.group_merges > 0, "{s:?}");
    assert!(s.model_splits > 0, "{s:?}");
    assert!(s.root_updates > 0, "{s:?}");
    let all: Vec<(u64, u64)> = index.range(..).collect();
    assert_eq!(all, oracle.into_iter().collect::<Vec<_>>());
}
