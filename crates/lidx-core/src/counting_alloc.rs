//! A counting global allocator, so the benchmark runner can report how many
//! heap bytes an engine holds and tests can check that memory stays
//! bounded.
//!
//! Install it in a binary with
//! `#[global_allocator] static A: lidx_core::counting_alloc::CountingAlloc = lidx_core::counting_alloc::CountingAlloc;`.
//! When it is not installed, [`live_bytes`] stays at zero and [`is_active`]
//! is false (the runner then reports memory as 0).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

static LIVE: AtomicI64 = AtomicI64::new(0);
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Wraps the system allocator and keeps a running total of live heap bytes.
///
/// The counter is one relaxed atomic add per allocation and free; that cost
/// is paid by every engine alike.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the counter updates have no
// effect on the memory handed out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::alloc`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
            ACTIVE.store(true, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::alloc_zeroed`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
            ACTIVE.store(true, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract of `GlobalAlloc::dealloc`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded contract of `GlobalAlloc::realloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        }
        p
    }
}

/// Heap bytes currently allocated through [`CountingAlloc`].
pub fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// Whether [`CountingAlloc`] is the global allocator of this process.
pub fn is_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}
