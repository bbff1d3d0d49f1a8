//! Scheduling priority of an engine's background threads.
//!
//! Compaction and restructuring threads compete with the application's
//! threads for the cores. When the application keeps every core busy, a
//! background thread at the same priority takes its turn as often as they
//! do and slows every foreground operation on that core; at a lower
//! priority it runs in their idle time instead. An engine that lowers its
//! background priority must bound how far background work may fall behind
//! (lidx's XIndex-R has writers run maintenance themselves once the deltas
//! exceed their byte budget), since idle time may never come.
//!
//! Linux gives every thread its own nice value (`setpriority(2)` on a
//! thread id); elsewhere these functions do nothing.

use std::cell::Cell;
use std::io;
use std::time::Duration;

/// Most a nice value can be: the lowest scheduling priority.
pub const LOWEST_NICE: u8 = 19;

/// How long [`yield_while_waiting`] sleeps on a lowered thread.
const LOWERED_WAIT: Duration = Duration::from_micros(20);

thread_local! {
    /// Whether [`lower_current_thread`] left this thread below the default
    /// priority (nice above 0).
    static LOWERED: Cell<bool> = const { Cell::new(false) };
}

/// Lowers the calling thread's scheduling priority to at least nice
/// `nice` (0 to [`LOWEST_NICE`]); a thread already at that nice value or
/// lower priority is left as it is, so this never needs privileges.
/// Returns the thread's nice value afterwards (`None` where threads have
/// no nice value of their own).
pub fn lower_current_thread(nice: u8) -> io::Result<Option<i32>> {
    if nice > LOWEST_NICE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("nice value {nice} is above {LOWEST_NICE}"),
        ));
    }
    let now = imp::lower(i32::from(nice))?;
    LOWERED.with(|lowered| lowered.set(now.is_some_and(|n| n > 0)));
    Ok(now)
}

/// Whether [`lower_current_thread`] left the calling thread below the
/// default priority.
pub fn is_current_thread_lowered() -> bool {
    LOWERED.with(Cell::get)
}

/// Gives up the CPU while waiting for another thread (a lock holder, an
/// epoch barrier): [`std::thread::yield_now`] on a thread at the default
/// priority, a short sleep on one [`lower_current_thread`] lowered.
///
/// A lowered thread must not yield in a wait loop. Under Linux's EEVDF
/// scheduler (6.6 on) a yield moves the thread's virtual deadline one time
/// slice later, scaled by the inverse of its weight: at nice 10 about ten
/// slices. On a machine whose cores are busy with other work at the
/// default priority, a background thread that yielded a few dozen times
/// waited seconds for the CPU, holding up every thread waiting for it
/// (measured with XIndex-R's maintenance thread, session 50). A sleeping
/// thread keeps its place and runs soon after it wakes.
pub fn yield_while_waiting() {
    if is_current_thread_lowered() {
        std::thread::sleep(LOWERED_WAIT);
    } else {
        std::thread::yield_now();
    }
}

/// The calling thread's nice value (`None` where threads have none).
pub fn current_thread_nice() -> io::Result<Option<i32>> {
    imp::current()
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;

    fn thread_id() -> libc::id_t {
        // SAFETY: `gettid` has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        tid as libc::id_t
    }

    pub(super) fn current() -> io::Result<Option<i32>> {
        // -1 is a valid nice value, so failure shows only in errno, which
        // must be cleared first.
        // SAFETY: `__errno_location` returns this thread's errno slot,
        // valid for the thread's lifetime; `getpriority` with PRIO_PROCESS
        // and a thread id of this process reads no caller memory.
        let nice = unsafe {
            *libc::__errno_location() = 0;
            libc::getpriority(libc::PRIO_PROCESS, thread_id())
        };
        let err = io::Error::last_os_error();
        if nice == -1 && err.raw_os_error().is_some_and(|e| e != 0) {
            return Err(err);
        }
        Ok(Some(nice))
    }

    pub(super) fn lower(nice: i32) -> io::Result<Option<i32>> {
        let now = current()?.unwrap_or(0);
        if now >= nice {
            return Ok(Some(now));
        }
        // SAFETY: FFI call with plain integer arguments; it changes only
        // this thread's scheduling priority and reads no caller memory.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, thread_id(), nice) } != 0 {
            return Err(io::Error::last_os_error());
        }
        current()
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;

    pub(super) fn current() -> io::Result<Option<i32>> {
        Ok(None)
    }

    pub(super) fn lower(_nice: i32) -> io::Result<Option<i32>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowers_only_the_calling_thread_and_never_raises() {
        let before = current_thread_nice().unwrap();
        let (inside, after_raise_attempt) = std::thread::spawn(|| {
            let lowered = lower_current_thread(7).unwrap();
            // Asking for a higher priority (a lower nice value) keeps 7.
            let kept = lower_current_thread(3).unwrap();
            (lowered, kept)
        })
        .join()
        .unwrap();
        if cfg!(target_os = "linux") {
            let start = before.unwrap();
            assert_eq!(inside, Some(start.max(7)));
            assert_eq!(after_raise_attempt, Some(start.max(7)));
        } else {
            assert_eq!(inside, None);
        }
        // The spawning thread is untouched.
        assert_eq!(current_thread_nice().unwrap(), before);
    }

    #[test]
    fn a_thread_knows_it_was_lowered_and_waits_by_sleeping() {
        assert!(!is_current_thread_lowered());
        let (lowered, waited) = std::thread::spawn(|| {
            let nice = lower_current_thread(5).unwrap();
            let started = std::time::Instant::now();
            yield_while_waiting();
            ((nice, is_current_thread_lowered()), started.elapsed())
        })
        .join()
        .unwrap();
        if cfg!(target_os = "linux") {
            assert!(lowered.1, "nice {:?}", lowered.0);
            // It slept: a sleep lasts at least as long as asked.
            assert!(waited >= LOWERED_WAIT, "{waited:?}");
        } else {
            assert!(!lowered.1);
        }
        // Asking for nice 0 lowers nothing.
        let at_zero = std::thread::spawn(|| {
            lower_current_thread(0).unwrap();
            is_current_thread_lowered()
        })
        .join()
        .unwrap();
        assert_eq!(
            at_zero,
            current_thread_nice().unwrap().is_some_and(|n| n > 0)
        );
        assert!(
            !is_current_thread_lowered(),
            "the spawning thread is untouched"
        );
    }

    #[test]
    fn out_of_range_nice_is_an_error() {
        let err = lower_current_thread(LOWEST_NICE + 1).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("20"));
    }
}
