//! [`PageCache`]: a read-through cache of fixed-size object pages held in a
//! byte budget with CLOCK eviction.
//!
//! The cache never asks the inner storage for an object's length (on object
//! storage that is a round trip of its own). Without a known length the end
//! of a page may lie past the end of the object, so the last page a read
//! touches is fetched only up to the end of the read and cached as a partial
//! page; a later read that needs more of it fetches it again. Lengths the
//! cache learns for free (`read_all`, `len`, `write`) let it fetch such pages
//! whole, up to the end of the object.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use bytes::{Bytes, BytesMut};
use parking_lot::RwLock;

use super::{Storage, check_object_name, check_range};
use crate::{Error, Result};

/// Independent locks over the pages, so concurrent readers rarely contend.
const SHARDS: usize = 16;

/// Object lengths remembered at most; the map is emptied when full (a
/// forgotten length only costs partial tail pages, never correctness).
const MAX_KNOWN_LENGTHS: usize = 4096;

/// Reads retried when a concurrent write, delete or eviction might have
/// mixed old and new pages into one answer, before bypassing the cache.
const CONSISTENT_READ_ATTEMPTS: usize = 3;

/// Multiplier that spreads consecutive page numbers over the shards.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// Counters of a [`PageCache`], in pages (hits, misses, evictions) and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Pages served from memory.
    pub hits: u64,
    /// Pages fetched from the inner storage.
    pub misses: u64,
    /// Pages dropped to make room for others.
    pub evictions: u64,
    /// Bytes of page data currently held (never above `budget_bytes`).
    pub resident_bytes: u64,
    /// The byte budget the cache was created with.
    pub budget_bytes: u64,
}

/// A read-through page cache in front of another [`Storage`], itself a
/// [`Storage`].
///
/// Reads are split into pages of `page_size` bytes (page `k` holds bytes
/// `k * page_size .. (k + 1) * page_size` of an object); cached pages are
/// served from memory, and each contiguous run of missing pages is fetched
/// with one request (several runs with one `read_many`). Page data never
/// exceeds the byte budget; a page larger than the budget is not cached and
/// a read longer than the budget bypasses the cache.
///
/// Writes, deletes and evictions go to the inner storage and drop the
/// object's pages. Changes made to the inner storage other than through the
/// cache are not seen until the pages are evicted or [`clear`](Self::clear)ed.
pub struct PageCache<S: Storage> {
    inner: S,
    page_size: u64,
    budget: u64,
    shards: Box<[RwLock<Shard>]>,
    hasher: RandomState,
    /// Bytes reserved by cached (or about-to-be-cached) pages; reserved
    /// before a page is inserted and released after it is removed, so it
    /// never undercounts and never exceeds `budget`.
    resident: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    /// Changes (write, delete, evict, clear) begun and ended. A read uses
    /// the cache only from a snapshot taken while no change is in flight
    /// (`begun == ended`), inserts pages only while no change has begun
    /// since, and is retried if one began during it: a change drops its
    /// object's pages after changing the inner object, so every page held
    /// belongs to the current version.
    changes_begun: AtomicU64,
    changes_ended: AtomicU64,
    /// Next shard to take an eviction victim from.
    victim_shard: AtomicUsize,
    lengths: RwLock<HashMap<String, u64>>,
}

/// One cached page.
struct Page {
    object: Arc<str>,
    number: u64,
    /// The page's bytes; shorter than the page size for a partial page.
    data: Bytes,
    /// CLOCK reference bit: set by hits, cleared by the sweeping hand.
    referenced: AtomicBool,
}

/// The pages of one shard, in CLOCK slots.
#[derive(Default)]
struct Shard {
    index: HashMap<Arc<str>, HashMap<u64, usize>>,
    slots: Vec<Option<Page>>,
    free: Vec<usize>,
    hand: usize,
    live: usize,
}

impl Shard {
    fn get(&self, object: &str, number: u64) -> Option<&Page> {
        let slot = *self.index.get(object)?.get(&number)?;
        self.slots[slot].as_ref()
    }

    /// Inserts a page, returning the data of the page it replaced.
    fn insert(&mut self, object: &str, number: u64, data: Bytes) -> Option<Bytes> {
        if let Some(&slot) = self.index.get(object).and_then(|pages| pages.get(&number))
            && let Some(page) = self.slots[slot].as_mut()
        {
            page.referenced.store(true, Ordering::Relaxed);
            return Some(std::mem::replace(&mut page.data, data));
        }
        let name: Arc<str> = match self.index.get_key_value(object) {
            Some((name, _)) => Arc::clone(name),
            None => Arc::from(object),
        };
        let page = Page {
            object: Arc::clone(&name),
            number,
            data,
            // A fresh page survives one sweep of the hand, so a page just
            // fetched is not the very next victim.
            referenced: AtomicBool::new(true),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(page);
                slot
            }
            None => {
                self.slots.push(Some(page));
                self.slots.len() - 1
            }
        };
        self.index.entry(name).or_default().insert(number, slot);
        self.live += 1;
        None
    }

    fn remove_slot(&mut self, slot: usize) -> Option<Page> {
        let page = self.slots[slot].take()?;
        if let Some(pages) = self.index.get_mut(&*page.object) {
            pages.remove(&page.number);
            if pages.is_empty() {
                self.index.remove(&*page.object);
            }
        }
        self.free.push(slot);
        self.live -= 1;
        Some(page)
    }

    /// Evicts one page by CLOCK, returning its size.
    fn evict_one(&mut self) -> Option<u64> {
        if self.live == 0 {
            return None;
        }
        let slots = self.slots.len();
        // Two sweeps suffice: the first clears every reference bit.
        for _ in 0..=2 * slots {
            let slot = self.hand;
            self.hand = (self.hand + 1) % slots;
            let Some(page) = &self.slots[slot] else {
                continue;
            };
            if page.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            return self.remove_slot(slot).map(|p| p.data.len() as u64);
        }
        None
    }

    /// Removes every page of `object`, returning their total size.
    fn remove_object(&mut self, object: &str) -> u64 {
        let Some(pages) = self.index.remove(object) else {
            return 0;
        };
        let mut freed = 0;
        for slot in pages.into_values() {
            if let Some(page) = self.slots[slot].take() {
                freed += page.data.len() as u64;
                self.free.push(slot);
                self.live -= 1;
            }
        }
        freed
    }

    /// Removes every page, returning their total size.
    fn clear(&mut self) -> u64 {
        let freed = self
            .slots
            .iter()
            .flatten()
            .map(|p| p.data.len() as u64)
            .sum();
        *self = Shard::default();
        freed
    }

    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.slots
            .iter()
            .flatten()
            .map(|p| p.data.len() as u64)
            .sum()
    }
}

/// A page a read needs that is not cached (or not far enough), and where
/// its fetch ends.
struct Miss {
    number: u64,
    fetch_end: u64,
}

impl<S: Storage> PageCache<S> {
    /// Wraps `inner` with a cache of `page_size`-byte pages holding at most
    /// `budget_bytes` bytes of page data.
    ///
    /// A zero page size is an [`Error::InvalidArgument`]; a zero budget is
    /// allowed and caches nothing.
    pub fn new(inner: S, page_size: u64, budget_bytes: u64) -> Result<Self> {
        if page_size == 0 {
            return Err(Error::invalid(
                "page cache: page size must be at least 1 byte",
            ));
        }
        Ok(Self {
            inner,
            page_size,
            budget: budget_bytes,
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            hasher: RandomState::new(),
            resident: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            changes_begun: AtomicU64::new(0),
            changes_ended: AtomicU64::new(0),
            victim_shard: AtomicUsize::new(0),
            lengths: RwLock::new(HashMap::new()),
        })
    }

    /// The wrapped storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Size of one page in bytes.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            resident_bytes: self.resident.load(Ordering::SeqCst),
            budget_bytes: self.budget,
        }
    }

    /// Drops every cached page and remembered length (counters are kept).
    pub fn clear(&self) {
        let _change = self.begin_change();
        for shard in self.shards.iter() {
            let freed = shard.write().clear();
            self.resident.fetch_sub(freed, Ordering::SeqCst);
        }
        self.lengths.write().clear();
    }

    /// Marks a change in flight until the returned guard drops (also on
    /// unwinding, so a panicking inner write cannot wedge the cache).
    fn begin_change(&self) -> ChangeGuard<'_> {
        let ticket = self.changes_begun.fetch_add(1, Ordering::SeqCst) + 1;
        let alone = self.changes_ended.load(Ordering::SeqCst) == ticket - 1;
        ChangeGuard {
            ended: &self.changes_ended,
            ticket,
            alone,
        }
    }

    /// Applies a change to `object` in the inner storage and drops what the
    /// cache holds of it; `new_len` is the object's length afterwards when
    /// the change succeeds and sets it.
    fn change<T>(
        &self,
        object: &str,
        new_len: Option<u64>,
        apply: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let change = self.begin_change();
        // Drop pages even when `apply` fails: the inner object may have
        // changed anyway.
        let result = apply();
        for shard in self.shards.iter() {
            let freed = shard.write().remove_object(object);
            self.resident.fetch_sub(freed, Ordering::SeqCst);
        }
        let mut lengths = self.lengths.write();
        lengths.remove(object);
        // The new length is only certain if no other change overlapped this
        // one (another's inner write could land after ours).
        if let (Ok(_), Some(len)) = (&result, new_len)
            && change.alone
            && self.changes_begun.load(Ordering::SeqCst) == change.ticket
        {
            remember_len(&mut lengths, object, len);
        }
        result
    }

    /// A snapshot of the change counter when no change is in flight.
    fn quiet_snapshot(&self) -> Option<u64> {
        let begun = self.changes_begun.load(Ordering::SeqCst);
        (self.changes_ended.load(Ordering::SeqCst) == begun).then_some(begun)
    }

    fn unchanged_since(&self, snapshot: u64) -> bool {
        self.changes_begun.load(Ordering::SeqCst) == snapshot
    }

    fn shard_of(&self, object_hash: u64, number: u64) -> usize {
        let mixed = (object_hash ^ number.wrapping_mul(SPREAD)).wrapping_mul(SPREAD);
        (mixed >> 32) as usize % SHARDS
    }

    fn lookup(&self, shard: usize, object: &str, number: u64) -> Option<Bytes> {
        let shard = self.shards[shard].read();
        let page = shard.get(object, number)?;
        page.referenced.store(true, Ordering::Relaxed);
        Some(page.data.clone())
    }

    /// Reserves `size` bytes of the budget, evicting pages as needed; false
    /// when the page cannot be cached.
    fn reserve(&self, size: u64) -> bool {
        if size > self.budget {
            return false;
        }
        let mut current = self.resident.load(Ordering::SeqCst);
        loop {
            if current + size <= self.budget {
                match self.resident.compare_exchange_weak(
                    current,
                    current + size,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(_) => return true,
                    Err(actual) => {
                        current = actual;
                        continue;
                    }
                }
            }
            if !self.evict_one() {
                // Everything left is reserved by inserts in flight.
                return false;
            }
            current = self.resident.load(Ordering::SeqCst);
        }
    }

    fn evict_one(&self) -> bool {
        let start = self.victim_shard.fetch_add(1, Ordering::Relaxed);
        for i in 0..SHARDS {
            let freed = self.shards[(start + i) % SHARDS].write().evict_one();
            if let Some(freed) = freed {
                self.resident.fetch_sub(freed, Ordering::SeqCst);
                self.evictions.fetch_add(1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Caches a fetched page unless the budget refuses it or a change has
    /// begun since `snapshot`.
    fn insert(&self, shard: usize, object: &str, number: u64, data: &Bytes, snapshot: u64) {
        let size = data.len() as u64;
        if size == 0 || !self.reserve(size) {
            return;
        }
        // A private copy, so a cached page never pins a larger fetch buffer
        // that the byte accounting does not see.
        let data = Bytes::copy_from_slice(data);
        let mut shard = self.shards[shard].write();
        if !self.unchanged_since(snapshot) {
            drop(shard);
            self.resident.fetch_sub(size, Ordering::SeqCst);
            return;
        }
        let replaced = shard.insert(object, number, data);
        drop(shard);
        if let Some(old) = replaced {
            self.resident.fetch_sub(old.len() as u64, Ordering::SeqCst);
        }
    }

    fn known_len(&self, object: &str) -> Option<u64> {
        self.lengths.read().get(object).copied()
    }

    fn learn_len(&self, object: &str, len: u64, snapshot: u64) {
        let mut lengths = self.lengths.write();
        if self.unchanged_since(snapshot) {
            remember_len(&mut lengths, object, len);
        }
    }

    /// Reads `ranges` of `object` so that no answer mixes two versions of
    /// the object written through this cache.
    fn read_ranges(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        check_object_name(object)?;
        for range in ranges {
            check_range(object, range, u64::MAX)?;
        }
        for _ in 0..CONSISTENT_READ_ATTEMPTS {
            let Some(snapshot) = self.quiet_snapshot() else {
                std::thread::yield_now();
                continue;
            };
            let out = self.read_once(object, ranges, snapshot)?;
            if self.unchanged_since(snapshot) {
                return Ok(out);
            }
        }
        // Changes keep racing this read; one inner request is consistent.
        self.inner.read_many(object, ranges)
    }

    fn read_once(&self, object: &str, ranges: &[Range<u64>], snapshot: u64) -> Result<Vec<Bytes>> {
        let ps = self.page_size;
        let known_len = self.known_len(object);
        if let Some(len) = known_len {
            for range in ranges {
                check_range(object, range, len)?;
            }
        }
        // Empty ranges still need the object to exist, and ranges longer
        // than the budget would only churn it: both go straight to `inner`.
        let bypass = |r: &Range<u64>| r.start == r.end || r.end - r.start > self.budget;

        // The furthest byte each needed page must hold.
        let mut needed: BTreeMap<u64, u64> = BTreeMap::new();
        for range in ranges.iter().filter(|r| !bypass(r)) {
            for number in range.start / ps..=(range.end - 1) / ps {
                let end = range.end.min(page_end(number, ps));
                let need = needed.entry(number).or_insert(end);
                *need = (*need).max(end);
            }
        }

        let object_hash = self.hasher.hash_one(object);
        let mut pages: HashMap<u64, Bytes> = HashMap::with_capacity(needed.len());
        let mut misses = Vec::new();
        for (&number, &need_end) in &needed {
            let shard = self.shard_of(object_hash, number);
            match self.lookup(shard, object, number) {
                Some(data) if number * ps + data.len() as u64 >= need_end => {
                    pages.insert(number, data);
                }
                _ => {
                    let fetch_end = match known_len {
                        Some(len) => page_end(number, ps).min(len),
                        None => need_end,
                    };
                    misses.push(Miss { number, fetch_end });
                }
            }
        }
        self.hits
            .fetch_add((needed.len() - misses.len()) as u64, Ordering::Relaxed);
        self.misses
            .fetch_add(misses.len() as u64, Ordering::Relaxed);

        // Contiguous misses form one fetch, as long as every page but the
        // last of it is fetched whole.
        let mut runs: Vec<(u64, Range<u64>)> = Vec::new();
        for miss in &misses {
            match runs.last_mut() {
                // Ending exactly at this page's start means the previous
                // page was the one before and was fetched whole.
                Some((_, fetch)) if fetch.end == miss.number * ps => {
                    fetch.end = miss.fetch_end;
                }
                _ => runs.push((miss.number, miss.number * ps..miss.fetch_end)),
            }
        }
        let mut fetches: Vec<Range<u64>> = runs.iter().map(|(_, r)| r.clone()).collect();
        let bypassed: Vec<usize> = (0..ranges.len()).filter(|&i| bypass(&ranges[i])).collect();
        fetches.extend(bypassed.iter().map(|&i| ranges[i].clone()));
        let fetched = match fetches.len() {
            0 => Vec::new(),
            1 => vec![self.inner.read(object, fetches[0].clone())?],
            _ => self.inner.read_many(object, &fetches)?,
        };
        if fetched.len() != fetches.len() {
            return Err(Error::corrupt(format!(
                "{}: read_many of {object:?} returned {} results for {} ranges",
                self.inner.describe(),
                fetched.len(),
                fetches.len()
            )));
        }
        for (fetch, data) in fetches.iter().zip(&fetched) {
            let len = data.len() as u64;
            if len != fetch.end - fetch.start {
                // A short read from below must never be cached as a page.
                return Err(Error::Truncated {
                    path: object.into(),
                    expected: fetch.end,
                    found: fetch.start + len,
                });
            }
        }

        for ((first, fetch), data) in runs.iter().zip(&fetched) {
            let mut offset = fetch.start;
            let mut number = *first;
            while offset < fetch.end {
                let end = page_end(number, ps).min(fetch.end);
                let page =
                    data.slice((offset - fetch.start) as usize..(end - fetch.start) as usize);
                let shard = self.shard_of(object_hash, number);
                self.insert(shard, object, number, &page, snapshot);
                pages.insert(number, page);
                offset = end;
                number += 1;
            }
        }

        let mut bypassed_data = bypassed.iter().zip(&fetched[runs.len()..]).peekable();
        let mut out = Vec::with_capacity(ranges.len());
        for (i, range) in ranges.iter().enumerate() {
            if let Some((_, data)) = bypassed_data.next_if(|&(&b, _)| b == i) {
                out.push(data.clone());
                continue;
            }
            out.push(assemble(&pages, range, ps));
        }
        Ok(out)
    }

    /// Sum of the page bytes actually held, for checking the accounting.
    #[cfg(test)]
    fn held_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.read().bytes()).sum()
    }
}

/// Ends a change when dropped.
struct ChangeGuard<'a> {
    ended: &'a AtomicU64,
    /// This change's number (the `changes_begun` value it set).
    ticket: u64,
    /// No earlier change was in flight when this one began.
    alone: bool,
}

impl Drop for ChangeGuard<'_> {
    fn drop(&mut self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
    }
}

/// Records a length, forgetting all others when the map is full.
fn remember_len(lengths: &mut HashMap<String, u64>, object: &str, len: u64) {
    if lengths.len() >= MAX_KNOWN_LENGTHS && !lengths.contains_key(object) {
        lengths.clear();
    }
    lengths.insert(object.to_owned(), len);
}

/// First byte after page `number`, saturating for pages near `u64::MAX`.
fn page_end(number: u64, page_size: u64) -> u64 {
    number.saturating_add(1).saturating_mul(page_size)
}

/// Builds the bytes of `range` from the pages covering it: a zero-copy slice
/// when one page covers it, a copy otherwise.
fn assemble(pages: &HashMap<u64, Bytes>, range: &Range<u64>, ps: u64) -> Bytes {
    let first = range.start / ps;
    let last = (range.end - 1) / ps;
    let slice_of = |number: u64| {
        let base = number * ps;
        let start = range.start.max(base) - base;
        let end = range.end.min(page_end(number, ps)) - base;
        pages[&number].slice(start as usize..end as usize)
    };
    if first == last {
        return slice_of(first);
    }
    let mut out = BytesMut::with_capacity((range.end - range.start) as usize);
    for number in first..=last {
        out.extend_from_slice(&slice_of(number));
    }
    out.freeze()
}

impl<S: Storage> fmt::Debug for PageCache<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCache")
            .field("inner", &self.inner)
            .field("page_size", &self.page_size)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<S: Storage> Storage for PageCache<S> {
    fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
        let mut out = self.read_ranges(object, std::slice::from_ref(&range))?;
        Ok(out.pop().unwrap_or_default())
    }

    /// Served from pages when the length is known; otherwise one inner
    /// `read_all`, whose result is cached when it fits in a quarter of the
    /// budget.
    fn read_all(&self, object: &str) -> Result<Bytes> {
        check_object_name(object)?;
        if let Some(len) = self.known_len(object) {
            return self.read(object, 0..len);
        }
        let snapshot = self.quiet_snapshot();
        let data = self.inner.read_all(object)?;
        let len = data.len() as u64;
        let Some(snapshot) = snapshot else {
            return Ok(data);
        };
        self.learn_len(object, len, snapshot);
        if len <= self.budget / 4 {
            let object_hash = self.hasher.hash_one(object);
            let mut number = 0;
            while number * self.page_size < len {
                let start = number * self.page_size;
                let end = page_end(number, self.page_size).min(len);
                let page = data.slice(start as usize..end as usize);
                let shard = self.shard_of(object_hash, number);
                self.insert(shard, object, number, &page, snapshot);
                number += 1;
            }
        }
        Ok(data)
    }

    fn read_many(&self, object: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.read_ranges(object, ranges)
    }

    fn len(&self, object: &str) -> Result<u64> {
        check_object_name(object)?;
        if let Some(len) = self.known_len(object) {
            return Ok(len);
        }
        let snapshot = self.quiet_snapshot();
        let len = self.inner.len(object)?;
        if let Some(snapshot) = snapshot {
            self.learn_len(object, len, snapshot);
        }
        Ok(len)
    }

    fn write(&self, object: &str, data: &[u8]) -> Result<()> {
        self.change(object, Some(data.len() as u64), || {
            self.inner.write(object, data)
        })
    }

    fn delete(&self, object: &str) -> Result<()> {
        self.change(object, None, || self.inner.delete(object))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }

    /// Drops the object's pages and remembered length here and whatever the
    /// inner storage caches, so the next read is cold.
    fn evict(&self, object: &str) -> Result<()> {
        check_object_name(object)?;
        self.change(object, None, || self.inner.evict(object))
    }

    fn describe(&self) -> String {
        format!(
            "{} (page cache: {} B pages, {} B budget)",
            self.inner.describe(),
            self.page_size,
            self.budget
        )
    }
}

#[cfg(test)]
// Expected request lists of one range are meant as such, not as ranges.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::storage::Memory;
    use std::sync::Mutex;

    /// Records every range requested from the inner storage.
    #[derive(Debug, Default)]
    struct Recording {
        inner: Memory,
        reads: Mutex<Vec<Range<u64>>>,
        len_calls: AtomicU64,
    }

    impl Recording {
        fn take(&self) -> Vec<Range<u64>> {
            std::mem::take(&mut *self.reads.lock().unwrap())
        }
    }

    impl Storage for Recording {
        fn read(&self, object: &str, range: Range<u64>) -> Result<Bytes> {
            self.reads.lock().unwrap().push(range.clone());
            self.inner.read(object, range)
        }
        fn read_all(&self, object: &str) -> Result<Bytes> {
            self.inner.read_all(object)
        }
        fn len(&self, object: &str) -> Result<u64> {
            self.len_calls.fetch_add(1, Ordering::Relaxed);
            self.inner.len(object)
        }
        fn write(&self, object: &str, data: &[u8]) -> Result<()> {
            self.inner.write(object, data)
        }
        fn delete(&self, object: &str) -> Result<()> {
            self.inner.delete(object)
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>> {
            self.inner.list(prefix)
        }
        fn describe(&self) -> String {
            "recording".into()
        }
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 256) as u8).collect()
    }

    /// A cache over a recording store holding `len` bytes in object "o";
    /// written below the cache so the cache has no known length.
    fn setup(len: usize, ps: u64, budget: u64) -> (PageCache<Arc<Recording>>, Arc<Recording>) {
        let rec = Arc::new(Recording::default());
        rec.inner.write("o", &data(len)).unwrap();
        (PageCache::new(Arc::clone(&rec), ps, budget).unwrap(), rec)
    }

    #[test]
    fn contiguous_misses_are_one_request_and_hits_are_free() {
        let (cache, rec) = setup(1000, 100, 10_000);
        let got = cache.read("o", 150..420).unwrap();
        assert_eq!(&got[..], &data(1000)[150..420]);
        // Pages 1..=4, the last only up to the end of the read.
        assert_eq!(rec.take(), [100..420]);
        let got = cache.read("o", 160..400).unwrap();
        assert_eq!(&got[..], &data(1000)[160..400]);
        assert!(rec.take().is_empty());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (3, 4));
        assert_eq!(stats.resident_bytes, 320);
        assert_eq!(rec.len_calls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn partial_pages_are_refetched_when_more_is_needed() {
        let (cache, rec) = setup(250, 100, 10_000);
        cache.read("o", 200..220).unwrap();
        assert_eq!(rec.take(), [200..220]);
        cache.read("o", 205..215).unwrap();
        assert!(rec.take().is_empty(), "covered by the partial page");
        let got = cache.read("o", 210..250).unwrap();
        assert_eq!(&got[..], &data(250)[210..250]);
        assert_eq!(rec.take(), [200..250]);
        assert_eq!(
            cache.stats().resident_bytes,
            50,
            "refetch replaced the page"
        );
        assert!(matches!(
            cache.read("o", 240..251),
            Err(Error::Truncated { .. })
        ));
        assert_eq!(cache.held_bytes(), 50);
    }

    #[test]
    fn known_lengths_let_tail_pages_be_fetched_whole() {
        let (cache, rec) = setup(250, 100, 10_000);
        assert_eq!(cache.len("o").unwrap(), 250);
        assert_eq!(cache.len("o").unwrap(), 250);
        assert_eq!(rec.len_calls.load(Ordering::Relaxed), 1);
        cache.read("o", 120..130).unwrap();
        assert_eq!(rec.take(), [100..200]);
        cache.read("o", 210..211).unwrap();
        assert_eq!(rec.take(), [200..250]);
        // Past the known end: refused without a request.
        assert!(matches!(
            cache.read("o", 0..251),
            Err(Error::Truncated { .. })
        ));
        assert!(rec.take().is_empty());
    }

    #[test]
    fn separate_runs_use_one_read_many_and_single_pages_are_zero_copy() {
        let (cache, rec) = setup(1000, 100, 10_000);
        cache.read("o", 300..400).unwrap();
        rec.take();
        let got = cache.read_many("o", &[250..450, 0..10, 990..1000]).unwrap();
        let all = data(1000);
        assert_eq!(&got[0][..], &all[250..450]);
        assert_eq!(&got[1][..], &all[0..10]);
        assert_eq!(&got[2][..], &all[990..1000]);
        // In page order: page 0 (to 10), page 2, page 4 (to 450), page 9.
        assert_eq!(rec.take(), [0..10, 200..300, 400..450, 900..1000]);
        let a = cache.read("o", 310..320).unwrap();
        let b = cache.read("o", 330..340).unwrap();
        assert_eq!(
            a.as_ptr().wrapping_add(20),
            b.as_ptr(),
            "slices of one page"
        );
    }

    #[test]
    fn budget_is_respected_and_evictions_counted() {
        let (cache, _rec) = setup(10_000, 100, 350);
        for i in 0..50u64 {
            let start = (i * 37 % 90) * 100;
            cache.read("o", start..start + 100).unwrap();
            let stats = cache.stats();
            assert!(stats.resident_bytes <= 350);
            assert_eq!(stats.resident_bytes, cache.held_bytes());
        }
        let stats = cache.stats();
        assert!(stats.evictions > 0);
        assert_eq!(stats.resident_bytes, 300);
        assert_eq!(stats.budget_bytes, 350);
    }

    #[test]
    fn oversized_pages_and_reads_bypass_the_cache() {
        let (cache, rec) = setup(1000, 100, 50);
        let got = cache.read("o", 0..100).unwrap();
        assert_eq!(&got[..], &data(1000)[..100]);
        assert_eq!(cache.stats().resident_bytes, 0);
        let (cache, rec2) = setup(1000, 10, 100);
        drop(rec);
        cache.read("o", 0..500).unwrap();
        assert_eq!(rec2.take(), [0..500]);
        assert_eq!(cache.stats().resident_bytes, 0);
        assert_eq!(&cache.read("o", 5..5).unwrap()[..], b"");
        assert!(matches!(
            cache.read("o", 1001..1001),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            cache.read("missing", 0..0),
            Err(Error::NotFound(_))
        ));
    }

    #[test]
    fn writes_deletes_and_evictions_invalidate() {
        let cache = PageCache::new(Memory::new(), 64, 4096).unwrap();
        cache.write("o", &[1u8; 200]).unwrap();
        assert_eq!(&cache.read("o", 0..200).unwrap()[..], &[1u8; 200][..]);
        cache.write("o", &[2u8; 100]).unwrap();
        assert_eq!(&cache.read_all("o").unwrap()[..], &[2u8; 100][..]);
        assert_eq!(&cache.read("o", 0..100).unwrap()[..], &[2u8; 100][..]);
        cache.evict("o").unwrap();
        assert_eq!(cache.stats().resident_bytes, 0);
        cache.read("o", 0..10).unwrap();
        cache.delete("o").unwrap();
        assert!(matches!(cache.read("o", 0..10), Err(Error::NotFound(_))));
        assert_eq!(cache.stats().resident_bytes, 0);
        cache.write("p", &[3u8; 300]).unwrap();
        cache.read_all("p").unwrap();
        assert!(cache.stats().resident_bytes > 0);
        cache.clear();
        assert_eq!(cache.stats().resident_bytes, 0);
        assert_eq!(cache.held_bytes(), 0);
    }

    #[test]
    fn read_all_of_an_unknown_object_populates_pages() {
        let (cache, rec) = setup(250, 100, 10_000);
        assert_eq!(&cache.read_all("o").unwrap()[..], &data(250)[..]);
        assert_eq!(cache.stats().resident_bytes, 250);
        assert_eq!(&cache.read("o", 90..250).unwrap()[..], &data(250)[90..]);
        assert!(rec.take().is_empty());
    }

    #[test]
    fn zero_page_size_is_rejected() {
        assert!(matches!(
            PageCache::new(Memory::new(), 0, 10),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn clock_prefers_unreferenced_pages() {
        let mut shard = Shard::default();
        for n in 0..4 {
            shard.insert("o", n, Bytes::from(vec![0u8; 10]));
        }
        // First sweep clears every fresh bit; page 0 goes first.
        assert_eq!(shard.evict_one(), Some(10));
        assert!(shard.get("o", 0).is_none());
        shard
            .get("o", 1)
            .unwrap()
            .referenced
            .store(true, Ordering::Relaxed);
        assert_eq!(shard.evict_one(), Some(10));
        assert!(shard.get("o", 1).is_some() && shard.get("o", 2).is_none());
        assert_eq!(shard.remove_object("o"), 20);
        assert_eq!(shard.evict_one(), None);
    }
}
