//! `CountingAlloc` installed as this binary's allocator: its count follows
//! allocations, reallocations and frees exactly.
//!
//! One test only: every thread of the binary allocates through the same
//! counter, so a second test running beside it would move the count.

use lidx_core::counting_alloc::{CountingAlloc, is_active, live_bytes};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn the_count_follows_every_allocation_and_free() {
    let before = live_bytes();
    let mut bytes: Vec<u8> = Vec::with_capacity(1000);
    assert!(is_active());
    assert_eq!(live_bytes() - before, 1000);

    // Grows through `realloc`.
    bytes.reserve_exact(5000);
    let grown = bytes.capacity() as i64;
    assert!(grown >= 5000);
    assert_eq!(live_bytes() - before, grown);

    let zeroed = vec![0u64; 512]; // `alloc_zeroed`
    assert_eq!(zeroed.iter().sum::<u64>(), 0);
    assert_eq!(live_bytes() - before, grown + 4096);

    bytes.shrink_to(10);
    let shrunk = bytes.capacity() as i64;
    assert_eq!(live_bytes() - before, shrunk + 4096);

    drop(zeroed);
    drop(bytes);
    assert_eq!(live_bytes(), before);
}
