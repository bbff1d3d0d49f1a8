//! The running core's cache sizes, for structures whose best layout
//! depends on what stays cached.
//!
//! A learned index's lookup reads a few small nodes before its leaf data.
//! Whether the nodes stay in a core's private L2 between lookups decides
//! whether prefetching them (or data they point to) ahead of time pays for
//! the instructions it costs: `lidx-xindex` keeps per-group array hints
//! only when its group nodes' lines outgrow the L2.
//!
//! Sizes come from `cpuid` on x86-64: the deterministic cache parameters
//! leaf (4) that Intel CPUs report, else the extended leaf `0x8000_0006`
//! that AMD CPUs report. Elsewhere, or when neither describes an L2, the
//! size is unknown (`None`) and callers choose a default.

use std::sync::OnceLock;

/// Bytes of the L2 cache (data or unified) of the core running the first
/// call, or `None` if the CPU does not say. Probed once per process.
pub fn l2_bytes() -> Option<usize> {
    static L2: OnceLock<Option<usize>> = OnceLock::new();
    *L2.get_or_init(probe_l2)
}

#[cfg(target_arch = "x86_64")]
fn probe_l2() -> Option<usize> {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // Leaves above the reported maximums are not queried: their answers
    // are undefined.
    let max_leaf = __cpuid(0).eax;
    if max_leaf >= 4 {
        for subleaf in 0..16 {
            let r = __cpuid_count(4, subleaf);
            let kind = r.eax & 0x1f;
            if kind == 0 {
                break;
            }
            let level = (r.eax >> 5) & 0x7;
            // 1: data cache, 3: unified cache.
            if level == 2 && (kind == 1 || kind == 3) {
                let ways = (r.ebx >> 22) as usize + 1;
                let partitions = ((r.ebx >> 12) & 0x3ff) as usize + 1;
                let line = (r.ebx & 0xfff) as usize + 1;
                let sets = r.ecx as usize + 1;
                return Some(ways * partitions * line * sets);
            }
        }
    }
    let max_extended = __cpuid(0x8000_0000).eax;
    if max_extended >= 0x8000_0006 {
        let kib = (__cpuid(0x8000_0006).ecx >> 16) as usize;
        if kib > 0 {
            return Some(kib << 10);
        }
    }
    None
}

#[cfg(not(target_arch = "x86_64"))]
fn probe_l2() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_l2_is_a_plausible_size() {
        match l2_bytes() {
            // Every L2 shipped so far lies between these, in whole KiB.
            Some(bytes) => {
                assert!((64 << 10..=64 << 20).contains(&bytes), "{bytes} bytes");
                assert_eq!(bytes % 1024, 0, "{bytes} bytes");
            }
            None => eprintln!("this CPU reports no L2 size"),
        }
        assert_eq!(l2_bytes(), l2_bytes());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn agrees_with_the_kernel_where_it_says() {
        // The kernel derives sysfs's figures from the same leaves.
        let Some(bytes) = l2_bytes() else { return };
        let Ok(dirs) = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache") else {
            return;
        };
        for dir in dirs.flatten() {
            let read = |name: &str| std::fs::read_to_string(dir.path().join(name));
            let (Ok(level), Ok(kind), Ok(size)) = (read("level"), read("type"), read("size"))
            else {
                continue;
            };
            if level.trim() == "2" && kind.trim() != "Instruction" {
                let kib: usize = size
                    .trim()
                    .trim_end_matches('K')
                    .parse()
                    .expect("size in K");
                assert_eq!(bytes, kib << 10);
            }
        }
    }
}
