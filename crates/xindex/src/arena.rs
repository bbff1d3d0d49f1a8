//! An append-only arena with stable addresses: where a delta keeps its
//! records.
//!
//! A delta record must stay at its address until the whole delta is
//! dropped (the merge phase and concurrent readers point at it), and is
//! never freed alone. With one heap allocation per record, every insert of
//! a new key paid a `malloc`, and a delta's records lay scattered over the
//! heap, so each key comparison of a search in the delta's B-tree could
//! miss the cache. The arena allocates records in chunks that double in
//! size (4, 8, ... up to 256 records): a small delta wastes little, a large
//! one takes few allocations, and neighbouring inserts share cache lines.

use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Values in the first chunk of [`Arena::new`]; most deltas hold only a
/// few keys.
const FIRST_CHUNK: usize = 4;
/// Records in the largest chunks.
const MAX_CHUNK: usize = 256;

/// One allocation of `capacity` slots, of which a prefix is initialised.
struct Chunk<T> {
    start: NonNull<MaybeUninit<T>>,
    capacity: usize,
}

/// Append-only storage: values move in and are dropped only with the arena.
pub(crate) struct Arena<T> {
    chunks: Vec<Chunk<T>>,
    /// Capacity of the first chunk.
    first_chunk: usize,
    /// Initialised slots of the last chunk; every earlier chunk is full.
    used: usize,
}

// SAFETY: the arena owns its values like a `Vec<T>` does; sending it sends
// them.
unsafe impl<T: Send> Send for Arena<T> {}
// SAFETY: `&Arena` gives no access to the values (only through the
// pointers `alloc` returned, whose users uphold `Sync` for `T` themselves).
unsafe impl<T: Sync> Sync for Arena<T> {}

impl<T> Arena<T> {
    /// An empty arena (no allocation until the first value).
    pub(crate) const fn new() -> Self {
        Self::with_first_chunk(FIRST_CHUNK)
    }

    /// An empty arena whose first chunk holds `first_chunk` values (for
    /// large values of which most arenas hold one or two).
    pub(crate) const fn with_first_chunk(first_chunk: usize) -> Self {
        Arena {
            chunks: Vec::new(),
            first_chunk,
            used: 0,
        }
    }

    /// Values stored.
    #[cfg(all(test, not(xindex_loom)))]
    pub(crate) fn len(&self) -> usize {
        let full: usize = self.chunks.iter().map(|c| c.capacity).sum();
        full - self.chunks.last().map_or(0, |c| c.capacity - self.used)
    }

    /// Moves `value` into the arena. The pointer is valid, and the value
    /// stays at that address, until the arena is dropped; the arena never
    /// creates a reference to it, so shared references derived from the
    /// pointer stay valid while later values are added.
    pub(crate) fn alloc(&mut self, value: T) -> NonNull<T> {
        let capacity = match self.chunks.last() {
            Some(chunk) if self.used < chunk.capacity => None,
            Some(chunk) => Some((chunk.capacity * 2).min(MAX_CHUNK)),
            None => Some(self.first_chunk.max(1)),
        };
        if let Some(capacity) = capacity {
            let raw = Box::into_raw(Box::<[T]>::new_uninit_slice(capacity));
            // SAFETY: `Box::into_raw` never returns null.
            let start = unsafe { NonNull::new_unchecked(raw.cast::<MaybeUninit<T>>()) };
            self.chunks.push(Chunk { start, capacity });
            self.used = 0;
        }
        let chunk = self
            .chunks
            .last()
            .expect("a chunk with room was just ensured");
        // SAFETY: `used < capacity`, so the slot lies inside the chunk's
        // allocation and is not initialised yet. It is written through a raw
        // pointer: no reference to the chunk is created that could alias the
        // references handed out for earlier slots.
        let slot = unsafe { chunk.start.add(self.used) }.cast::<T>();
        // SAFETY: as above; the slot is valid for writes and aligned.
        unsafe { slot.write(value) };
        self.used += 1;
        slot
    }
}

impl<T> Drop for Arena<T> {
    fn drop(&mut self) {
        let last = self.chunks.len().saturating_sub(1);
        for (i, chunk) in self.chunks.drain(..).enumerate() {
            let initialised = if i == last { self.used } else { chunk.capacity };
            let values =
                std::ptr::slice_from_raw_parts_mut(chunk.start.as_ptr().cast::<T>(), initialised);
            let slots = std::ptr::slice_from_raw_parts_mut(chunk.start.as_ptr(), chunk.capacity);
            // SAFETY: the first `initialised` slots were written by `alloc`
            // and never dropped; `&mut self` means no reference to them is
            // left. The chunk came from `Box::into_raw` of a boxed slice of
            // exactly `capacity` slots, freed here once.
            unsafe {
                std::ptr::drop_in_place(values);
                drop(Box::from_raw(slots));
            }
        }
    }
}

#[cfg(all(test, not(xindex_loom)))]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn values_keep_their_address_and_are_dropped_once() {
        let dropped = Rc::new(());
        let mut arena = Arena::new();
        assert_eq!(arena.len(), 0);
        let first = arena.alloc((0usize, Rc::clone(&dropped)));
        // SAFETY: valid until the arena is dropped, below.
        let early = unsafe { first.as_ref() };
        let mut pointers = vec![first];
        // Spans chunks of 4, 8, ..., 256 and several full-size ones.
        for i in 1..1500 {
            pointers.push(arena.alloc((i, Rc::clone(&dropped))));
        }
        assert_eq!(arena.len(), 1500);
        assert_eq!(early.0, 0);
        for (i, p) in pointers.iter().enumerate() {
            // SAFETY: as above.
            assert_eq!(unsafe { p.as_ref() }.0, i);
        }
        assert_eq!(Rc::strong_count(&dropped), 1501);
        drop(arena);
        assert_eq!(Rc::strong_count(&dropped), 1);
    }

    #[test]
    fn a_partly_filled_chunk_drops_only_its_values() {
        let keys: Vec<String> = (0..7).map(|i| format!("key-{i}")).collect();
        let mut arena = Arena::new();
        for k in &keys {
            arena.alloc(k.clone());
        }
        // 4 + 3 of 8: dropping must skip the 5 uninitialised slots.
        assert_eq!(arena.len(), 7);
        drop(arena);
        drop(Arena::<String>::new());
    }
}
