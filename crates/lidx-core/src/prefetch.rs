//! Software prefetch hints.
//!
//! A learned index knows where its next reads land before it makes them
//! (a model's predicted position, the records a scan will copy), so it can
//! ask the CPU to start those cache misses early and let them overlap.
//! These functions are hints only: they never fault, never change memory
//! and compile to nothing on targets without a prefetch instruction.

/// Cache-line size assumed when stepping through a slice.
pub const CACHE_LINE: usize = 64;

/// Hints the CPU to load the cache line holding `item`.
#[inline(always)]
pub fn prefetch<T>(item: &T) {
    prefetch_address(std::ptr::from_ref(item).cast::<u8>());
}

/// Hints the CPU to load `lines` cache lines from `address` on (the line
/// holding `address` first). Takes a raw pointer, since a hint never reads
/// the memory: the address may be stale or dangling.
#[inline]
pub fn prefetch_lines<T>(address: *const T, lines: usize) {
    let start = address.cast::<u8>();
    for line in 0..lines {
        prefetch_address(start.wrapping_add(line * CACHE_LINE));
    }
}

/// Hints the CPU to load the cache lines covering `items`, at most
/// `max_lines` of them (from the start), so a long slice cannot flood the
/// memory system with hints it will not use soon.
#[inline]
pub fn prefetch_slice<T>(items: &[T], max_lines: usize) {
    let bytes = std::mem::size_of_val(items);
    if bytes == 0 {
        return;
    }
    let start = items.as_ptr() as usize;
    let first_line = start & !(CACHE_LINE - 1);
    let last_line = (start + (bytes - 1)) & !(CACHE_LINE - 1);
    let lines = ((last_line - first_line) / CACHE_LINE + 1).min(max_lines);
    // The first line's address may lie before `items`; wrapping arithmetic
    // makes that a plain address, which a prefetch never dereferences.
    let base = items.as_ptr().cast::<u8>().wrapping_sub(start - first_line);
    for line in 0..lines {
        prefetch_address(base.wrapping_add(line * CACHE_LINE));
    }
}

#[inline(always)]
fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `prefetch` is a hint: it never faults, never writes and
        // has no effect the program can observe except timing, whatever the
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_accept_any_slice() {
        // Empty, tiny, unaligned and long slices; values are unchanged.
        let data: Vec<u64> = (0..10_000).collect();
        prefetch_slice::<u64>(&[], 8);
        prefetch_slice(&data[..1], 8);
        prefetch_slice(&data[3..17], 8);
        prefetch_slice(&data, 4);
        prefetch_slice(&data, usize::MAX);
        let bytes: Vec<u8> = (0..=255).collect();
        prefetch_slice(&bytes[1..200], 2);
        prefetch(&data[9_999]);
        prefetch_lines(data.as_ptr(), 3);
        prefetch_lines(std::ptr::null::<u64>(), 2);
        prefetch_lines(usize::MAX as *const u64, 2);
        prefetch(&());
        assert_eq!(data.iter().sum::<u64>(), 9_999 * 10_000 / 2);
        assert_eq!(bytes[199], 199);
    }
}
