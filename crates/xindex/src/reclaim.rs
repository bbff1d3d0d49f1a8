//! The index's own epoch collector: how operations pin, how maintenance
//! retires unlinked nodes, and the RCU-style barrier of two-phase
//! compaction.
//!
//! Each index has a `crossbeam_epoch::Collector` of its own rather than
//! crossbeam's process-wide default one. The barrier waits for every thread
//! pinned on the collector, and writers may wait for the barrier (an insert
//! into a frozen delta, an insert over the delta budget), so on the default
//! collector a thread that called the index while holding a guard for
//! something else (its own `crossbeam_epoch::pin()`, or a closure another
//! crossbeam-based structure runs while pinned) would wait for itself. On a
//! collector of its own, only threads inside one of this index's calls are
//! ever pinned on it, and none of them waits while pinned.
//!
//! The paper's `rcu_barrier` waits until every worker has finished one
//! request, which stalls when a worker thread is idle. Here the barrier
//! waits until every thread that was *pinned* when it started has unpinned:
//! a closure deferred now runs only after the collector's epoch has
//! advanced twice, which needs every thread pinned at deferral time to
//! unpin. Idle threads are not pinned and do not delay it.
//!
//! Retired nodes are not handed to crossbeam to destroy. crossbeam runs
//! expired destructors inside whichever thread pins next (every 128 pins
//! it collects up to 512 of them), so a `get` would now and then free a
//! batch of groups, or unmap a region of arrays: measured on lognormal
//! 10M under `mixed:0.9`, that put p99.9 at 9–17 µs against a p50 of
//! 350 ns in some runs. Instead retired nodes wait in a limbo list the
//! reclaimer owns, in batches sealed by a deferred closure that only sets
//! a flag; maintenance frees the batches whose flag is set. Operations
//! thus run nothing but flag stores for the reclaimer, and every node is
//! freed by the thread that retired it (maintenance), after the same
//! epoch argument as before.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_epoch::{Collector, Guard, LocalHandle, Shared};
use parking_lot::Mutex;

/// Collectors a thread keeps a registration with, most recently registered
/// first. A thread that alternates between more indexes than this
/// registers anew on each switch (a small allocation), which stays correct.
const CACHED_HANDLES: usize = 4;

thread_local! {
    /// This thread's registrations, one per collector it used lately.
    static HANDLES: Handles = const { Handles(RefCell::new(Vec::new())) };
    /// The front of [`HANDLES`] for [`Reclaimer::pin`]'s fast path: the
    /// [`Reclaimer::id`] it registers with, and the boxed handle itself;
    /// `(0, null)` when there is none. No destructor, so it stays readable
    /// while the thread's other locals are torn down.
    static FRONT: Cell<(u64, *const LocalHandle)> = const { Cell::new((0, std::ptr::null())) };
    /// Set while this thread is inside crossbeam's `pin` through a cached
    /// handle. That pin may run expired destructors, and one that pins
    /// another collector must not reorder the cache: it could evict the
    /// very handle the outer pin is running on.
    static PINNING: Cell<bool> = const { Cell::new(false) };
}

/// The registrations of one thread, boxed so that [`FRONT`] can point at
/// one while the vector moves them.
struct Handles(Cache);

/// Registrations, most recent first. Boxed: `FRONT` points at one.
#[allow(clippy::vec_box, reason = "stable addresses for FRONT")]
type Cache = RefCell<Vec<Box<LocalHandle>>>;

impl Drop for Handles {
    fn drop(&mut self) {
        // Before the handles go: a pin from a later thread-local destructor
        // must not find a dangling front.
        FRONT.with(|front| front.set((0, std::ptr::null())));
    }
}

/// Source of [`Reclaimer::id`]s; 0 names no reclaimer.
static NEXT_RECLAIMER_ID: AtomicU64 = AtomicU64::new(1);

/// Pins through a cached handle, with [`PINNING`] set meanwhile.
///
/// # Safety
///
/// `handle` points at a live handle in this thread's cache.
#[inline(always)]
unsafe fn pin_cached(handle: *const LocalHandle) -> Guard {
    let outer = PINNING.with(|p| p.replace(true));
    // SAFETY: forwarded; and with `PINNING` set nothing evicts it.
    let guard = unsafe { (*handle).pin() };
    PINNING.with(|p| p.set(outer));
    guard
}

/// A retired node, type-erased: dropping it frees the node.
type Garbage = Box<dyn Send>;

/// Retired nodes not yet freed.
#[derive(Default)]
struct Limbo {
    /// Retired since the last seal; no barrier covers them yet.
    open: Vec<Garbage>,
    /// Sealed batches, each freed once its flag is set: the flag's closure
    /// was deferred after every node of the batch was unlinked, so when it
    /// has run no thread can still reach them.
    sealed: Vec<(Arc<AtomicBool>, Vec<Garbage>)>,
}

/// An index's epoch collector, and the nodes it retired.
pub(crate) struct Reclaimer {
    collector: Collector,
    /// Unique in the process (never reused, unlike an address), so that a
    /// thread's [`FRONT`] can only match the reclaimer it was set for.
    id: u64,
    limbo: Mutex<Limbo>,
}

impl Reclaimer {
    /// A collector of its own.
    pub(crate) fn new() -> Self {
        Reclaimer {
            collector: Collector::new(),
            id: NEXT_RECLAIMER_ID.fetch_add(1, Ordering::Relaxed),
            limbo: Mutex::new(Limbo::default()),
        }
    }

    /// Pins the calling thread on this index's collector.
    ///
    /// The fast path is one thread-local load and a compare: the thread's
    /// most recent registration, when it is this collector's. Through
    /// `HANDLES.try_with` and the handle's collector it took about 40
    /// instructions, a tenth of a `get` (callgrind, osm).
    #[inline(always)]
    pub(crate) fn pin(&self) -> Guard {
        let (id, handle) = FRONT.with(Cell::get);
        if id == self.id {
            // SAFETY: `FRONT` is only set to the box at the front of this
            // thread's `HANDLES`, together with the id of the reclaimer
            // whose collector registered it, and is cleared before that
            // box can be dropped (eviction in `pin_from`, `Handles::drop`).
            // Nothing evicts while it runs: a pin nested in it (from a
            // destructor crossbeam runs) sees `PINNING` and leaves the
            // cache alone. The handle is this thread's own: no other
            // thread uses it.
            return unsafe { pin_cached(handle) };
        }
        self.pin_slow()
    }

    /// [`pin`](Self::pin) when this collector is not the thread's most
    /// recent one: moves its registration to the front, registering the
    /// thread first if it has none (in place of the oldest).
    ///
    /// The cache is not borrowed while pinning: a pin may run expired
    /// destructors, and a destructor that pinned again must find the cache
    /// free (or, on a miss, falls back to a registration of its own
    /// instead of reordering a borrowed cache).
    #[cold]
    #[inline(never)]
    fn pin_slow(&self) -> Guard {
        HANDLES
            .try_with(|handles| self.pin_from(&handles.0))
            // The thread is exiting and its cache is gone: a one-off
            // registration (its `Local` lives until the guard drops).
            .unwrap_or_else(|_| self.collector.register().pin())
    }

    /// [`pin_slow`](Self::pin_slow) with the thread's cache at hand.
    fn pin_from(&self, handles: &Cache) -> Guard {
        let Ok(mut cached) = handles.try_borrow_mut() else {
            return self.collector.register().pin();
        };
        if PINNING.with(Cell::get) {
            return self.collector.register().pin();
        }
        // Cleared first: the front may be the box evicted below.
        FRONT.with(|front| front.set((0, std::ptr::null())));
        match cached.iter().position(|h| h.collector() == &self.collector) {
            Some(i) => {
                let handle = cached.remove(i);
                cached.insert(0, handle);
            }
            None => {
                if cached.len() >= CACHED_HANDLES {
                    // A dropped handle's `Local` is finalised once its last
                    // guard drops; the evicted one may still have some.
                    cached.pop();
                }
                cached.insert(0, Box::new(self.collector.register()));
            }
        }
        let front: *const LocalHandle = &*cached[0];
        FRONT.with(|f| f.set((self.id, front)));
        drop(cached);
        // SAFETY: as in `pin`: `front` is the box `FRONT` now names.
        unsafe { pin_cached(front) }
    }

    /// Defers the destruction of an unlinked node until every thread
    /// pinned now has unpinned. The node is freed by a later
    /// [`release_retired`](Self::release_retired) or
    /// [`synchronize`](Self::synchronize) call (maintenance), never inside
    /// an operation's pin.
    ///
    /// # Safety
    ///
    /// `node` must be unlinked (unreachable for threads pinning from now
    /// on), retired exactly once, and reachable only from nodes of this
    /// index (whose readers pin this collector).
    pub(crate) unsafe fn retire<T: Send + 'static>(&self, node: Shared<'_, T>) {
        // Room first: a panic in `reserve` (capacity overflow) leaves the
        // node unowned, so it leaks instead of being freed while readers
        // may hold it.
        let mut limbo = self.limbo.lock();
        limbo.open.reserve(1);
        // SAFETY: forwarded from the contract: this is the only owner from
        // now on. The node is dropped only after a barrier sealed later
        // (its flag set), so readers that may still hold it, having pinned
        // this collector before it was unlinked, have unpinned by then.
        let owned = unsafe { node.into_owned() };
        limbo.open.push(owned.into_box());
    }

    /// [`retire`](Self::retire) for a node that another owner type frees
    /// (a group node in the index's slab): `owner` is dropped after the
    /// same barrier.
    ///
    /// # Safety
    ///
    /// As for `retire`: what `owner` frees is unlinked, retired once, and
    /// reachable only from nodes of this index.
    pub(crate) unsafe fn retire_owned<T: Send + 'static>(&self, owner: T) {
        // A panic before the push (capacity overflow) must leak `owner`,
        // not drop it while readers may still use what it frees.
        let owner = std::mem::ManuallyDrop::new(owner);
        let mut limbo = self.limbo.lock();
        limbo.open.reserve(1);
        limbo
            .open
            .push(Box::new(std::mem::ManuallyDrop::into_inner(owner)));
    }

    /// Seals the nodes retired so far under a new barrier flag and starts
    /// the epoch moving towards it. Returns the flag.
    fn seal(&self) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        {
            let mut limbo = self.limbo.lock();
            let batch = std::mem::take(&mut limbo.open);
            limbo.sealed.push((Arc::clone(&done), batch));
        }
        // Deferred after the nodes above were unlinked (they were retired
        // before this call), so it runs after every thread that could
        // reach them has unpinned. All the deferred closure does is a
        // store, so the operation that happens to run it pays nothing.
        let guard = self.pin();
        let flag = Arc::clone(&done);
        guard.defer(move || flag.store(true, Ordering::Release));
        guard.flush();
        done
    }

    /// Frees the sealed batches whose barrier has passed, outside the
    /// limbo lock.
    fn free_expired(&self) {
        let expired: Vec<Vec<Garbage>> = {
            let mut limbo = self.limbo.lock();
            let (done, waiting) = std::mem::take(&mut limbo.sealed)
                .into_iter()
                .partition(|(flag, _)| flag.load(Ordering::Acquire));
            limbo.sealed = waiting;
            done.into_iter().map(|(_, batch)| batch).collect()
        };
        drop(expired);
    }

    /// One attempt to advance the epoch (and run the flag closures that
    /// expired).
    fn advance(&self) {
        self.pin().flush();
    }

    /// Seals what was retired since the last call and frees every batch
    /// whose barrier has passed. Background passes run every
    /// `maintenance_interval`, idle ones included, and each call advances
    /// the epoch once, so retired memory is returned within a few
    /// intervals even when the index is left idle.
    pub(crate) fn release_retired(&self) {
        if self.limbo.lock().open.is_empty() {
            self.advance();
        } else {
            self.seal();
        }
        self.free_expired();
    }

    /// Whether every node retired so far has been freed.
    pub(crate) fn all_freed(&self) -> bool {
        let limbo = self.limbo.lock();
        limbo.open.is_empty() && limbo.sealed.is_empty()
    }

    /// Blocks until every operation that was in flight (pinned) when this
    /// call started has finished, then frees what was retired before the
    /// call. The caller must not itself be pinned on this collector, or it
    /// never returns.
    pub(crate) fn synchronize(&self) {
        self.barrier();
        self.free_expired();
    }

    /// Blocks until every operation that was in flight (pinned) when this
    /// call started has finished, like [`synchronize`](Self::synchronize),
    /// but leaves what expired for the next call to free. For barriers
    /// that writers wait on (a frozen delta's, until its temporary delta
    /// exists): freeing a retired group's arrays took 0.5-1.2 ms there,
    /// with every insert into the frozen group spinning meanwhile.
    pub(crate) fn barrier(&self) {
        let done = self.seal();
        let started = std::time::Instant::now();
        while !done.load(Ordering::Acquire) {
            // Each pin/flush tries to advance the epoch and runs the
            // closures that expired.
            self.advance();
            if started.elapsed() < BARRIER_SPIN {
                std::hint::spin_loop();
            } else {
                // Sleeps, never `yield_now`: under EEVDF (Linux 6.6 on)
                // each yield pushes the thread's virtual deadline a slice
                // further, scaled by its low weight at `maintenance_nice`,
                // so a yielding maintenance thread on a machine busy with
                // other work went without the CPU for seconds, while the
                // writers over the delta budget waited for its lock.
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
    }

    /// Retired nodes not yet freed (tests).
    #[cfg(all(test, not(xindex_loom)))]
    fn in_limbo(&self) -> usize {
        let limbo = self.limbo.lock();
        limbo.open.len() + limbo.sealed.iter().map(|(_, b)| b.len()).sum::<usize>()
    }

    /// Frees everything retired, at once. Only for the index's drop, when
    /// no thread can be inside one of its operations any more: `&mut`
    /// proves it. The passes also run the flag closures left deferred, so
    /// the collector holds nothing once the last thread's cached handle
    /// lets it go; the calling thread's goes here.
    pub(crate) fn release_all(&mut self) {
        let limbo = std::mem::take(self.limbo.get_mut());
        drop(limbo);
        for _ in 0..RELEASE_ALL_PASSES {
            self.advance();
        }
        self.unregister_this_thread();
    }

    /// Drops the calling thread's cached registration with this collector,
    /// if it has one. A registration keeps its collector allocated (a few
    /// KiB): without this, a thread that builds, uses and drops indexes
    /// one after another would keep the last [`CACHED_HANDLES`] dropped
    /// ones' collectors until it exits. Other threads' registrations go
    /// when they are evicted or the thread exits.
    fn unregister_this_thread(&self) {
        // Inside a pin through a cached handle (an index dropped by a
        // destructor crossbeam runs), or with the cache borrowed or gone,
        // the registration is left to eviction or the thread's exit.
        if PINNING.with(Cell::get) {
            return;
        }
        let _ = HANDLES.try_with(|handles| {
            let Ok(mut cached) = handles.0.try_borrow_mut() else {
                return;
            };
            let Some(at) = cached.iter().position(|h| h.collector() == &self.collector) else {
                return;
            };
            if FRONT.with(Cell::get).0 == self.id {
                FRONT.with(|front| front.set((0, std::ptr::null())));
            }
            let handle = cached.remove(at);
            // Unborrowed first: dropping the handle pins one last time,
            // which may run destructors that pin.
            drop(cached);
            drop(handle);
        });
    }
}

/// How long a barrier tries epoch advances back to back before it starts
/// sleeping between tries. Most barriers pass within a few microseconds
/// (no operation in flight lasts long), but writers wait on the freeze
/// barriers: a sleep there (20 µs asked, 60-100 µs taken) stalled them.
const BARRIER_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Collections run when an index is dropped: three advance the epoch past
/// every deferred flag closure, and each runs up to eight bags of 64.
const RELEASE_ALL_PASSES: usize = 8;

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn waits_for_a_thread_pinned_on_its_collector_only() {
        waits_for_pinned_threads(Reclaimer::synchronize);
        waits_for_pinned_threads(Reclaimer::barrier);
    }

    fn waits_for_pinned_threads(wait: fn(&Reclaimer)) {
        let reclaimer = Arc::new(Reclaimer::new());
        let (pinned_tx, pinned_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let released = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&released);
        let holder_reclaimer = Arc::clone(&reclaimer);
        let holder = std::thread::spawn(move || {
            let guard = holder_reclaimer.pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            flag.store(true, Ordering::SeqCst);
            drop(guard);
        });
        pinned_rx.recv().unwrap();
        let waiter = std::thread::spawn({
            let released = Arc::clone(&released);
            let reclaimer = Arc::clone(&reclaimer);
            move || {
                wait(&reclaimer);
                // The barrier may only finish after the holder unpinned.
                assert!(released.load(Ordering::SeqCst));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished());
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        waiter.join().unwrap();
        // With nobody pinned it returns promptly, also for a caller that
        // holds a guard on another collector (crossbeam's default one).
        let foreign = crossbeam_epoch::pin();
        wait(&reclaimer);
        drop(foreign);
    }

    /// Records the thread that dropped it.
    struct Tracked(Arc<parking_lot::Mutex<Option<std::thread::ThreadId>>>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            *self.0.lock() = Some(std::thread::current().id());
        }
    }

    fn retire_tracked(
        reclaimer: &Reclaimer,
    ) -> Arc<parking_lot::Mutex<Option<std::thread::ThreadId>>> {
        let dropped_on = Arc::new(parking_lot::Mutex::new(None));
        let node = crossbeam_epoch::Owned::new(Tracked(Arc::clone(&dropped_on)));
        // SAFETY: never linked anywhere; retired once.
        unsafe {
            let shared = node.into_shared(crossbeam_epoch::unprotected());
            reclaimer.retire(shared);
        }
        dropped_on
    }

    #[test]
    fn retired_nodes_are_freed_by_maintenance_never_inside_an_operation() {
        let reclaimer = Arc::new(Reclaimer::new());
        let (pinned_tx, pinned_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let holder = std::thread::spawn({
            let reclaimer = Arc::clone(&reclaimer);
            move || {
                let guard = reclaimer.pin();
                pinned_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                drop(guard);
                // Far more pins than crossbeam needs to collect (every
                // 128): this thread runs the expired flag closures.
                for _ in 0..10_000 {
                    drop(reclaimer.pin());
                }
            }
        });
        pinned_rx.recv().unwrap();
        let dropped_on = retire_tracked(&reclaimer);
        // The holder pinned before the retirement: nothing may be freed.
        for _ in 0..10 {
            reclaimer.release_retired();
        }
        assert!(dropped_on.lock().is_none());
        assert_eq!(reclaimer.in_limbo(), 1);
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        // The holder's pins ran the barrier's closure, not the destructor.
        assert!(dropped_on.lock().is_none());
        let mut passes = 0;
        while reclaimer.in_limbo() > 0 {
            reclaimer.release_retired();
            passes += 1;
            assert!(passes < 1000, "the retired node was never freed");
        }
        assert_eq!(*dropped_on.lock(), Some(std::thread::current().id()));
    }

    #[test]
    fn synchronize_frees_what_was_retired_before_it() {
        let reclaimer = Reclaimer::new();
        let first = retire_tracked(&reclaimer);
        reclaimer.synchronize();
        assert!(first.lock().is_some());
        assert_eq!(reclaimer.in_limbo(), 0);
        // What is retired after a barrier waits for the next one.
        let second = retire_tracked(&reclaimer);
        assert!(second.lock().is_none());
        reclaimer.synchronize();
        assert!(second.lock().is_some());
    }

    #[test]
    fn a_barrier_leaves_freeing_to_the_next_call() {
        let reclaimer = Reclaimer::new();
        let retired = retire_tracked(&reclaimer);
        reclaimer.barrier();
        assert!(retired.lock().is_none(), "freed inside the barrier");
        assert_eq!(reclaimer.in_limbo(), 1);
        // Expired already: the next call frees it without another wait.
        reclaimer.free_expired();
        assert!(retired.lock().is_some());
        assert_eq!(reclaimer.in_limbo(), 0);
    }

    #[test]
    fn release_all_frees_everything_at_once() {
        let mut reclaimer = Reclaimer::new();
        let sealed = retire_tracked(&reclaimer);
        reclaimer.release_retired();
        let open = retire_tracked(&reclaimer);
        reclaimer.release_all();
        assert!(sealed.lock().is_some() && open.lock().is_some());
        assert_eq!(reclaimer.in_limbo(), 0);
    }

    #[test]
    fn a_destructor_run_while_pinning_may_pin_another_collector() {
        // A retired node's destructor runs inside some later `pin` of its
        // collector (crossbeam collects every 128 pins). If it pins another
        // index's collector (a key type whose drop touches another index,
        // say), the outer pin is still inside crossbeam on a cached
        // handle: the nested pin takes a one-off registration instead of
        // reordering the cache, which could evict that handle.
        let outer = Reclaimer::new();
        let fillers: Vec<Reclaimer> = (0..CACHED_HANDLES).map(|_| Reclaimer::new()).collect();
        for filler in &fillers {
            drop(filler.pin());
        }
        let other = Arc::new(Reclaimer::new());
        let ran = Arc::new(AtomicBool::new(false));
        {
            let guard = outer.pin();
            let (other, ran) = (Arc::clone(&other), Arc::clone(&ran));
            guard.defer(move || {
                let pinned = other.pin();
                // A working guard: what it defers runs later.
                let flag = Arc::clone(&ran);
                pinned.defer(move || flag.store(true, Ordering::Release));
                pinned.flush();
            });
            guard.flush();
        }
        // Only pins, no flush: the destructor must run inside a `pin`.
        let mut pins = 0;
        while Arc::strong_count(&other) > 1 {
            drop(outer.pin());
            pins += 1;
            assert!(pins < 1_000_000, "the deferred destructor never ran");
        }
        // The nested pin took a one-off registration: the cache is as it
        // was, and both collectors still pin.
        let cached = HANDLES.with(|h| {
            h.0.borrow()
                .iter()
                .any(|h| h.collector() == &other.collector)
        });
        assert!(!cached, "the nested pin must not have touched the cache");
        assert_eq!(HANDLES.with(|h| h.0.borrow().len()), CACHED_HANDLES);
        drop(outer.pin());
        outer.synchronize();
        // What the nested guard deferred still runs, on `other`'s schedule.
        other.synchronize();
        other.synchronize();
        assert!(ran.load(Ordering::Acquire));
    }

    #[test]
    fn a_pin_from_a_thread_local_destructor_after_the_cache_is_gone_works() {
        struct PinsOnDrop(Arc<Reclaimer>, Arc<AtomicBool>);
        impl Drop for PinsOnDrop {
            fn drop(&mut self) {
                let guard = self.0.pin();
                guard.flush();
                self.1.store(true, Ordering::Release);
            }
        }
        thread_local! {
            static LATE: RefCell<Option<PinsOnDrop>> = const { RefCell::new(None) };
        }
        let reclaimer = Arc::new(Reclaimer::new());
        let pinned = Arc::new(AtomicBool::new(false));
        std::thread::spawn({
            let (reclaimer, pinned) = (Arc::clone(&reclaimer), Arc::clone(&pinned));
            move || {
                // Registered before `HANDLES` (first touched by the pin
                // below), so destroyed after it: thread-local destructors
                // run in reverse order of registration.
                LATE.with(|late| {
                    *late.borrow_mut() = Some(PinsOnDrop(Arc::clone(&reclaimer), pinned))
                });
                drop(reclaimer.pin());
                assert_eq!(FRONT.with(Cell::get).0, reclaimer.id);
            }
        })
        .join()
        .unwrap();
        assert!(pinned.load(Ordering::Acquire));
        reclaimer.synchronize();
    }

    #[test]
    fn a_thread_using_many_collectors_keeps_a_few_registrations() {
        let reclaimers: Vec<Reclaimer> =
            (0..CACHED_HANDLES + 3).map(|_| Reclaimer::new()).collect();
        for _ in 0..3 {
            for r in &reclaimers {
                let guard = r.pin();
                // Nested pins on the same collector reuse the registration.
                let inner = r.pin();
                drop(inner);
                drop(guard);
                r.synchronize();
            }
        }
        assert_eq!(HANDLES.with(|h| h.0.borrow().len()), CACHED_HANDLES);
    }

    fn registered_here(reclaimer: &Reclaimer) -> bool {
        HANDLES.with(|h| {
            h.0.borrow()
                .iter()
                .any(|handle| handle.collector() == &reclaimer.collector)
        })
    }

    #[test]
    fn the_dropping_thread_lets_its_registration_go_and_keeps_the_others() {
        // On a thread of its own: the cache starts empty.
        std::thread::spawn(|| {
            let (mut older, mut front) = (Reclaimer::new(), Reclaimer::new());
            drop(older.pin());
            drop(front.pin());
            assert!(registered_here(&older) && registered_here(&front));
            assert_eq!(FRONT.with(Cell::get).0, front.id);

            // The other registration stays, and pins through it.
            older.release_all();
            assert!(!registered_here(&older) && registered_here(&front));
            drop(front.pin());
            assert_eq!(FRONT.with(Cell::get).0, front.id);
            assert_eq!(HANDLES.with(|h| h.0.borrow().len()), 1);

            // The front is cleared with it.
            front.release_all();
            assert!(!registered_here(&front));
            assert_eq!(FRONT.with(Cell::get), (0, std::ptr::null()));
            assert_eq!(HANDLES.with(|h| h.0.borrow().len()), 0);

            // A third collector registers as usual afterwards.
            let next = Reclaimer::new();
            next.synchronize();
            assert!(registered_here(&next));
        })
        .join()
        .unwrap();
    }
}
