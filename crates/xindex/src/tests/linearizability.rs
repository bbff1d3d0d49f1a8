//! Linearizability of small random concurrent histories, checked per key
//! against a register model (get / put-returning-previous /
//! remove-returning-previous / insert-if-absent / compare-exchange /
//! increment, each returning the value it found). Linearizability is local, so checking each
//! key's sub-history separately checks the whole history.
//!
//! Each run: three threads issue five operations each on three keys while
//! a fourth thread inserts and removes other keys and runs maintenance
//! passes with tiny thresholds, so compactions, splits and merges overlap
//! the recorded operations. Half the runs use `u64` keys, half byte
//! strings whose delta-tree prefixes tie; half use sequential tails.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{TestKey, tiny_config, tiny_sequential_config};
use crate::XIndex;

const RUNS: u64 = 4000;
const THREADS: u64 = 3;
const OPS_PER_THREAD: u64 = 5;
const KEYS: [u64; 3] = [40, 41, 93];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Call {
    Get,
    Put(u64),
    Remove,
    /// `try_insert`; its result is the value found (`None`: inserted).
    TryInsert(u64),
    /// `compare_exchange(current, new)`; its result is the value found
    /// (`Ok` or `Err`, which is checked to agree with it when recorded).
    Exchange(Option<u64>, Option<u64>),
    /// `fetch_update` adding one (absent counts as 0); its result is the
    /// value it replaced.
    Increment,
}

impl Call {
    /// The register after this call found `state`.
    fn next(self, state: Option<u64>) -> Option<u64> {
        match self {
            Call::Get => state,
            Call::Put(v) => Some(v),
            Call::Remove => None,
            Call::TryInsert(v) => state.or(Some(v)),
            Call::Increment => Some(state.unwrap_or(0) + 1),
            Call::Exchange(current, new) => {
                if state == current {
                    new
                } else {
                    state
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Event {
    key: u64,
    call: Call,
    result: Option<u64>,
    invoked: u64,
    returned: u64,
}

/// Whether `events` (one key) have a linearization from `initial`:
/// Wing & Gong's search over minimal operations, memoised on
/// (done set, register value).
fn linearizable(initial: Option<u64>, events: &[Event]) -> bool {
    fn search(
        events: &[Event],
        done: u32,
        state: Option<u64>,
        seen: &mut HashSet<(u32, Option<u64>)>,
    ) -> bool {
        if done.count_ones() as usize == events.len() {
            return true;
        }
        if !seen.insert((done, state)) {
            return false;
        }
        let pending = || (0..events.len()).filter(move |i| done & (1 << i) == 0);
        let first_return = pending()
            .map(|i| events[i].returned)
            .min()
            .unwrap_or(u64::MAX);
        for i in pending() {
            let e = &events[i];
            // Only operations invoked before every pending one returned can
            // take effect next.
            if e.invoked > first_return || e.result != state {
                continue;
            }
            if search(events, done | (1 << i), e.call.next(state), seen) {
                return true;
            }
        }
        false
    }
    search(events, 0, initial, &mut HashSet::new())
}

#[test]
fn checker_rejects_a_stale_read() {
    let put = |v, result, invoked, returned| Event {
        key: 0,
        call: Call::Put(v),
        result,
        invoked,
        returned,
    };
    let get = |result, invoked, returned| Event {
        key: 0,
        call: Call::Get,
        result,
        invoked,
        returned,
    };
    // put(1) returns before get starts, yet get sees nothing.
    assert!(!linearizable(None, &[put(1, None, 0, 1), get(None, 2, 3)]));
    // Overlapping: either order is allowed.
    assert!(linearizable(None, &[put(1, None, 0, 3), get(None, 1, 2)]));
    assert!(linearizable(
        None,
        &[put(1, None, 0, 3), get(Some(1), 1, 2)]
    ));
    // Two puts both claiming the key was absent cannot both be right in
    // sequence.
    assert!(!linearizable(
        None,
        &[put(1, None, 0, 1), put(2, None, 2, 3)]
    ));
    let call = |call, result, invoked, returned| Event {
        key: 0,
        call,
        result,
        invoked,
        returned,
    };
    // Two inserts if absent that both inserted, one after the other.
    assert!(!linearizable(
        None,
        &[
            call(Call::TryInsert(1), None, 0, 1),
            call(Call::TryInsert(2), None, 2, 3)
        ]
    ));
    // Overlapping, one inserts and the other sees it.
    assert!(linearizable(
        None,
        &[
            call(Call::TryInsert(1), Some(2), 0, 3),
            call(Call::TryInsert(2), None, 1, 2)
        ]
    ));
    // Two increments from absent, one after the other, cannot both have
    // found the key absent.
    assert!(!linearizable(
        None,
        &[
            call(Call::Increment, None, 0, 1),
            call(Call::Increment, None, 2, 3)
        ]
    ));
    assert!(linearizable(
        None,
        &[
            call(Call::Increment, None, 0, 1),
            call(Call::Increment, Some(1), 2, 3),
            get(Some(2), 4, 5)
        ]
    ));
    // An exchange from 1 that found 1 wrote 5; a later get must see 5.
    let cas = Call::Exchange(Some(1), Some(5));
    assert!(linearizable(
        Some(1),
        &[call(cas, Some(1), 0, 1), get(Some(5), 2, 3)]
    ));
    assert!(!linearizable(
        Some(1),
        &[call(cas, Some(1), 0, 1), get(Some(1), 2, 3)]
    ));
    // A failed exchange writes nothing.
    assert!(!linearizable(
        Some(2),
        &[call(cas, Some(2), 0, 1), get(Some(5), 2, 3)]
    ));
}

/// Releases all threads at once without parking, so threads that are on
/// a core at the same time start their operations together.
struct SpinBarrier {
    waiting: AtomicUsize,
    parties: usize,
}

impl SpinBarrier {
    fn new(parties: usize) -> Self {
        SpinBarrier {
            waiting: AtomicUsize::new(0),
            parties,
        }
    }

    fn wait(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut spins = 0u32;
        while self.waiting.load(Ordering::SeqCst) < self.parties {
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            }
            std::hint::spin_loop();
        }
    }
}

fn one_run<K: TestKey>(run: u64, clock: &AtomicU64) -> Vec<Event> {
    let mut rng = ChaCha8Rng::seed_from_u64(run);
    // Background keys so groups exist around the checked ones; the checked
    // keys start present or absent at random.
    let mut initial: Vec<(u64, u64)> = (0..48u64).map(|k| (k * 4 + 2, k)).collect();
    for &k in &KEYS {
        if rng.random_bool(0.5) {
            initial.push((k, 1_000_000 + k));
        }
    }
    initial.sort_unstable();
    // Odd runs use the sequential fast path (checked keys above an array
    // go through the tail lock and may be appended).
    let config = if run % 2 == 1 {
        tiny_sequential_config()
    } else {
        tiny_config()
    };
    let index = XIndex::bulk_load(initial.iter().map(|&(k, v)| (K::of(k), v)), config).unwrap();
    let start = SpinBarrier::new(THREADS as usize + 1);
    let done = AtomicBool::new(false);
    let mut events: Vec<Event> = Vec::new();
    std::thread::scope(|s| {
        let index = &index;
        let start = &start;
        let done = &done;
        s.spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(run ^ 0xabcdef);
            start.wait();
            while !done.load(Ordering::Relaxed) {
                for _ in 0..4 {
                    let noise = rng.random_range(0..200u64) * 4 + 3;
                    if rng.random_bool(0.6) {
                        index.insert(K::of(noise), noise);
                    } else {
                        index.remove(&K::of(noise));
                    }
                }
                index.maintain_now();
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(run * 31 + t);
                    let mut mine: Vec<Event> = Vec::new();
                    start.wait();
                    for i in 0..OPS_PER_THREAD {
                        for _ in 0..rng.random_range(0..200) {
                            std::hint::spin_loop();
                        }
                        let key = KEYS[rng.random_range(0..KEYS.len())];
                        let value = (t + 1) * 100 + i;
                        // An exchange mostly expects what this thread last
                        // saw of the key, so that some succeed.
                        let seen = mine
                            .iter()
                            .rev()
                            .find(|e| e.key == key)
                            .and_then(|e| e.result);
                        let call = match rng.random_range(0..6) {
                            0 => Call::Get,
                            1 => Call::Put(value),
                            2 => Call::Remove,
                            3 => Call::TryInsert(value),
                            4 => Call::Increment,
                            _ => {
                                let current = if rng.random_bool(0.3) { None } else { seen };
                                let new = (!rng.random_bool(0.25)).then_some(value);
                                Call::Exchange(current, new)
                            }
                        };
                        let k = K::of(key);
                        let invoked = clock.fetch_add(1, Ordering::SeqCst);
                        let result = match call {
                            Call::Get => index.get(&k),
                            Call::Put(v) => index.insert(k, v),
                            Call::Remove => index.remove(&k),
                            Call::TryInsert(v) => index.try_insert(k, v).err(),
                            Call::Increment => {
                                let add = |v: Option<u64>| Some(Some(v.unwrap_or(0) + 1));
                                index.fetch_update(&k, add).expect("never declines")
                            }
                            Call::Exchange(current, new) => {
                                match index.compare_exchange(&k, current, new) {
                                    Ok(found) => {
                                        assert_eq!(found, current, "Ok must report `current`");
                                        found
                                    }
                                    Err(found) => {
                                        assert_ne!(found, current, "Err must report another value");
                                        found
                                    }
                                }
                            }
                        };
                        let returned = clock.fetch_add(1, Ordering::SeqCst);
                        mine.push(Event {
                            key,
                            call,
                            result,
                            invoked,
                            returned,
                        });
                    }
                    mine
                })
            })
            .collect();
        let logs = super::join_then_stop(workers, || done.store(true, Ordering::Relaxed));
        events.extend(logs.into_iter().flatten());
    });
    // Ops on the checked keys must have been the only changes to them.
    for &k in &KEYS {
        let last = events
            .iter()
            .filter(|e| e.key == k)
            .max_by_key(|e| e.returned);
        if last.is_none() {
            let expected = initial.iter().find(|p| p.0 == k).map(|p| p.1);
            assert_eq!(index.get(&K::of(k)), expected);
        }
    }
    let initial_of = |k: u64| initial.iter().find(|p| p.0 == k).map(|p| p.1);
    for &k in &KEYS {
        let mine: Vec<Event> = events.iter().filter(|e| e.key == k).copied().collect();
        // Append the final state as a get that starts after everything.
        let mut with_final = mine.clone();
        let after = clock.fetch_add(2, Ordering::SeqCst);
        with_final.push(Event {
            key: k,
            call: Call::Get,
            result: index.get(&K::of(k)),
            invoked: after,
            returned: after + 1,
        });
        assert!(
            linearizable(initial_of(k), &with_final),
            "run {run}, key {k}: not linearizable from {:?}: {with_final:#?}",
            initial_of(k)
        );
    }
    events
}

#[test]
fn random_small_histories_are_linearizable() {
    for round in super::soak::rounds("random_small_histories_are_linearizable") {
        small_histories(round);
    }
}

/// [`RUNS`] histories: runs `0..RUNS` in round 0, the next `RUNS` in each
/// later round.
fn small_histories(round: u64) {
    let clock = AtomicU64::new(0);
    let mut overlapping = 0u64;
    let (mut exchanged, mut inserted) = (0u64, 0u64);
    for run in round * RUNS..(round + 1) * RUNS {
        // Runs 2 and 3 of every four use byte-string keys (their own
        // delta-tree and array paths), the rest `u64`.
        let events = if run % 4 >= 2 {
            one_run::<Vec<u8>>(run, &clock)
        } else {
            one_run::<u64>(run, &clock)
        };
        for e in &events {
            match e.call {
                Call::Exchange(current, _) => exchanged += u64::from(e.result == current),
                Call::TryInsert(_) => inserted += u64::from(e.result.is_none()),
                _ => {}
            }
        }
        // Count runs where some operations really overlapped in time.
        if events.iter().any(|a| {
            events
                .iter()
                .any(|b| a.invoked < b.invoked && b.invoked < a.returned)
        }) {
            overlapping += 1;
        }
    }
    // Typically 10-40% of runs overlap on two loaded cores; demand a floor
    // that still means a hundred histories with real concurrency.
    assert!(
        overlapping >= RUNS / 20,
        "only {overlapping} of {RUNS} runs had concurrent operations"
    );
    // The conditional writes must not all fail (about 0.85 successful
    // exchanges and 0.75 inserts if absent per run).
    assert!(
        exchanged >= RUNS / 2 && inserted >= RUNS / 2,
        "{exchanged} exchanges and {inserted} inserts if absent succeeded in {RUNS} runs"
    );
}
