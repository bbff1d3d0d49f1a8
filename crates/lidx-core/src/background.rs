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

use std::io;

/// Most a nice value can be: the lowest scheduling priority.
pub const LOWEST_NICE: u8 = 19;

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
    imp::lower(i32::from(nice))
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
    fn out_of_range_nice_is_an_error() {
        let err = lower_current_thread(LOWEST_NICE + 1).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("20"));
    }
}
