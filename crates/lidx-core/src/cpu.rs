//! Which optional instruction sets the running CPU has, for engines that
//! compile their hottest paths twice: once for the build's baseline target
//! and once for a wider one, picked at run time.
//!
//! A learned index's lookup is mostly small integer and floating-point
//! arithmetic and a branch-free count over a window of keys. With AVX2 the
//! compiler counts four 64-bit keys per instruction and selects without
//! branches; the x86-64 baseline (SSE2, what distributions and `cargo
//! build` target by default) has no 64-bit compare to vectorise with. In
//! `lidx-xindex` the twin took lognormal 10M lookups from 1.7x to 2.0x
//! `BTreeMap`'s throughput (`docs/results/xindex-session19.md`).

#[cfg(target_arch = "x86_64")]
use std::sync::atomic::{AtomicU8, Ordering};

/// `X86_64_V3` not yet probed.
#[cfg(target_arch = "x86_64")]
const UNKNOWN: u8 = 0;
/// Probed: the CPU lacks a feature of the level.
#[cfg(target_arch = "x86_64")]
const ABSENT: u8 = 1;
/// Probed: the CPU has every feature of the level.
#[cfg(target_arch = "x86_64")]
const PRESENT: u8 = 2;

#[cfg(target_arch = "x86_64")]
static X86_64_V3: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether the CPU has every feature a function compiled inside
/// [`x86_64_v3!`](crate::x86_64_v3) may use, so that calling one is sound.
/// One relaxed load after the first call. Always `false` off x86-64.
#[inline]
pub fn has_x86_64_v3() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match X86_64_V3.load(Ordering::Relaxed) {
            PRESENT => true,
            ABSENT => false,
            _ => probe_x86_64_v3(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn probe_x86_64_v3() -> bool {
    let present = std::arch::is_x86_feature_detected!("avx")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("sse4.2");
    // Racing first calls store the same answer.
    X86_64_V3.store(if present { PRESENT } else { ABSENT }, Ordering::Relaxed);
    present
}

/// Compiles the function inside for the x86-64-v3 features that
/// [`has_x86_64_v3`] checks (AVX, AVX2, BMI1, BMI2, LZCNT, POPCNT and
/// SSE4.2). It exists only on x86-64 builds whose baseline lacks AVX2
/// (elsewhere the portable build is already the best one), and calling it
/// is sound only once [`has_x86_64_v3`] has returned `true`: the usual
/// way in is [`x86_64_v3_twin!`](crate::x86_64_v3_twin), which writes the
/// check and the call.
///
/// Floating-point results do not change: Rust never contracts a multiply
/// and an add into a fused one on its own.
#[macro_export]
macro_rules! x86_64_v3 {
    ($($function:tt)*) => {
        #[cfg(all(target_arch = "x86_64", not(target_feature = "avx2")))]
        #[target_feature(enable = "avx,avx2,bmi1,bmi2,lzcnt,popcnt,sse4.2")]
        $($function)*
    };
}

/// A method that runs `twin`, the portable method `portable` compiled
/// with [`x86_64_v3!`](crate::x86_64_v3), when the CPU has its features
/// and `portable` itself otherwise; it defines the method, the twin and
/// `baseline`, an out-of-line copy of `portable` for CPUs without them:
///
/// ```ignore
/// lidx_core::x86_64_v3_twin! {
///     /// The value stored under `key`.
///     pub fn get(&self, key: &K) -> Option<u64> => get_x86_64_v3, get_baseline, get_portable;
/// }
///
/// #[inline(always)]
/// fn get_portable(&self, key: &K) -> Option<u64> { /* ... */ }
/// ```
///
/// `portable` should be `#[inline(always)]`, so that the whole path is
/// compiled with the features. The method itself stays a check and a
/// jump: with `portable` inlined into it, the compiler saved and restored
/// the registers the inlined body uses around the check too, on every call
/// (22 of the 525 instructions of an `lidx-xindex` lookup). Arguments are
/// passed on by name, so only the twin's call sits in the `unsafe` block.
#[macro_export]
macro_rules! x86_64_v3_twin {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident $(<$($generic:ident : $bound:path),*>)?
            (&self $(, $arg:ident : $ty:ty)*) $(-> $ret:ty)?
            => $twin:ident, $baseline:ident, $portable:ident;
    ) => {
        $(#[$attr])*
        $vis fn $name $(<$($generic: $bound),*>)? (&self $(, $arg: $ty)*) $(-> $ret)? {
            #[cfg(all(target_arch = "x86_64", not(target_feature = "avx2")))]
            {
                if $crate::cpu::has_x86_64_v3() {
                    // SAFETY: the CPU has every feature the twin is compiled for.
                    return unsafe { self.$twin($($arg),*) };
                }
                self.$baseline($($arg),*)
            }
            #[cfg(not(all(target_arch = "x86_64", not(target_feature = "avx2"))))]
            {
                self.$portable($($arg),*)
            }
        }

        #[cfg(all(target_arch = "x86_64", not(target_feature = "avx2")))]
        #[inline(never)]
        fn $baseline $(<$($generic: $bound),*>)? (&self $(, $arg: $ty)*) $(-> $ret)? {
            self.$portable($($arg),*)
        }

        $crate::x86_64_v3! {
            fn $twin $(<$($generic: $bound),*>)? (&self $(, $arg: $ty)*) $(-> $ret)? {
                self.$portable($($arg),*)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(always)]
    fn count_below(keys: &[u64], key: u64) -> usize {
        keys.iter().map(|&k| usize::from(k < key)).sum()
    }

    /// Free functions have no receiver: a unit struct stands in for one.
    struct Counter;

    impl Counter {
        crate::x86_64_v3_twin! {
            fn count(&self, keys: &[u64], key: u64) -> usize
                => count_x86_64_v3, count_baseline, count_portable;
        }

        #[inline(always)]
        fn count_portable(&self, keys: &[u64], key: u64) -> usize {
            count_below(keys, key)
        }
    }

    #[test]
    fn the_answer_is_stable_and_implies_avx2() {
        let first = has_x86_64_v3();
        assert_eq!(first, has_x86_64_v3());
        #[cfg(target_arch = "x86_64")]
        if first {
            assert!(std::arch::is_x86_feature_detected!("avx2"));
            assert!(std::arch::is_x86_feature_detected!("bmi2"));
        }
    }

    #[test]
    fn a_twin_computes_what_its_portable_function_does() {
        let keys: Vec<u64> = (0..100u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .chain([0, u64::MAX])
            .collect();
        for key in [0, 1, u64::MAX / 3, 1 << 63, u64::MAX] {
            let portable = count_below(&keys, key);
            assert_eq!(portable, keys.iter().filter(|&&k| k < key).count());
            assert_eq!(Counter.count(&keys, key), portable);
            #[cfg(all(target_arch = "x86_64", not(target_feature = "avx2")))]
            assert_eq!(Counter.count_baseline(&keys, key), portable);
        }
    }
}
