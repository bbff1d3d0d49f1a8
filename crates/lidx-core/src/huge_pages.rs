//! Memory for large arrays read at random, backed by huge pages where the
//! system grants them.
//!
//! A lookup in a learned index lands at a random position of an array of
//! tens of megabytes. With 4 KiB pages nearly every such load also misses
//! the TLB, and inside a virtual machine the page walk that follows costs
//! about as much as the load itself. A 2 MiB page covers 512 times the
//! memory per TLB entry. Measured with `lidx bench` (geolite2, 3M keys,
//! `lookup`, 1 thread, three alternated runs) with every heap page huge:
//! `xindex` 4.15-4.93 -> 5.07-5.51 Mops/s, `btreemap` 2.57-2.67 ->
//! 2.66-2.75.
//!
//! [`HugeBlock`] allocates through the global allocator, so heap
//! accounting sees it, aligns blocks of a huge page or more to one, and on
//! Linux advises the kernel (`madvise(MADV_HUGEPAGE)`) to back the whole
//! huge pages it covers with transparent huge pages. That advice takes
//! effect where transparent huge pages are enabled as `always` or
//! `madvise` and for pages first touched after it; elsewhere the block is
//! ordinary memory.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;

/// Size of a huge page on x86-64 and most aarch64 systems.
pub const HUGE_PAGE: usize = 2 << 20;

/// Alignment of blocks smaller than a huge page: a cache line, so that
/// arrays of cache-line-aligned items can start anywhere in a block.
const SMALL_ALIGN: usize = 64;

/// An uninitialised block of memory, freed on drop.
#[derive(Debug)]
pub struct HugeBlock {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the block is plain memory owned by this value; whoever writes
// and reads it through `as_ptr` synchronises those accesses themselves.
unsafe impl Send for HugeBlock {}
// SAFETY: as for `Send`; `&HugeBlock` only exposes the address.
unsafe impl Sync for HugeBlock {}

impl HugeBlock {
    /// A block of `len` bytes (at least 1), aligned to [`HUGE_PAGE`] when
    /// it is at least that long (then its whole huge pages are advised)
    /// and to 64 bytes otherwise. Aborts like `Vec` when memory is
    /// exhausted.
    ///
    /// # Panics
    ///
    /// If `len` rounded up to its alignment overflows `isize`.
    pub fn new(len: usize) -> Self {
        let huge = len >= HUGE_PAGE;
        let align = if huge { HUGE_PAGE } else { SMALL_ALIGN };
        // The size is not rounded up to the alignment: the allocator
        // reserves the padding as address space only, and a huge page the
        // block only partly covers is not advised.
        let layout =
            Layout::from_size_align(len.max(1), align).expect("block size overflows isize");
        // SAFETY: `layout` has a non-zero size.
        let Some(ptr) = NonNull::new(unsafe { alloc(layout) }) else {
            handle_alloc_error(layout)
        };
        if huge {
            advise_huge(ptr, layout.size() / HUGE_PAGE * HUGE_PAGE);
        }
        HugeBlock { ptr, layout }
    }

    /// Address of the first byte.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Usable bytes (the requested length, at least 1).
    #[inline]
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether the block is empty (never: blocks hold at least a byte).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether the block asked for huge pages (it covers at least one).
    #[inline]
    pub fn advised(&self) -> bool {
        self.layout.align() == HUGE_PAGE
    }
}

impl Drop for HugeBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Advises huge pages for `len` bytes (a multiple of [`HUGE_PAGE`]) at
/// `ptr` (aligned to one). Only advice: a refusal changes nothing else.
#[cfg(target_os = "linux")]
fn advise_huge(ptr: NonNull<u8>, len: usize) {
    // SAFETY: the range lies inside an allocation this process owns;
    // MADV_HUGEPAGE changes how it is backed, never its contents.
    let _ = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_ptr: NonNull<u8>, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_blocks_are_line_aligned_and_writable() {
        for len in [0, 1, 63, 64, 65, 4096, HUGE_PAGE - 1] {
            let block = HugeBlock::new(len);
            assert_eq!(block.len(), len.max(1));
            assert_eq!(block.as_ptr() as usize % SMALL_ALIGN, 0);
            assert!(!block.advised());
            // SAFETY: the block holds `block.len()` writable bytes.
            unsafe { block.as_ptr().write_bytes(0xA5, block.len()) };
            // SAFETY: just written.
            assert_eq!(unsafe { *block.as_ptr().add(block.len() - 1) }, 0xA5);
        }
    }

    #[test]
    fn large_blocks_are_huge_page_aligned_and_writable() {
        let block = HugeBlock::new(HUGE_PAGE + 1);
        assert_eq!(block.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(block.len(), HUGE_PAGE + 1);
        assert!(block.advised());
        // SAFETY: the block holds `block.len()` writable bytes.
        unsafe { block.as_ptr().write_bytes(7, block.len()) };
        // SAFETY: just written.
        assert_eq!(unsafe { *block.as_ptr().add(HUGE_PAGE) }, 7);
    }
}
