//! Test hooks: callbacks at the phase boundaries of Two-Phase Compaction,
//! so tests can pause maintenance between phases and drive the paper's
//! Fig. 2 interleaving deterministically. Compiled to nothing outside tests.

/// A point between phases of a rebuild (compaction, group split or merge).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `buf` is frozen; the barrier before the merge phase is next.
    Frozen,
    /// The merge phase built the new group; it is not installed yet.
    Merged,
    /// The new group is installed; the barrier and copy phase are next.
    Installed,
    /// The copy phase resolved every pointer.
    Copied,
}

#[cfg(test)]
type Callback = std::sync::Arc<dyn Fn(Phase) + Send + Sync>;

/// The installed callback, if any.
#[derive(Default)]
pub(crate) struct Hooks {
    #[cfg(test)]
    callback: parking_lot::Mutex<Option<Callback>>,
}

impl Hooks {
    /// Calls the callback for `phase` (no-op outside tests).
    #[inline]
    pub(crate) fn fire(&self, _phase: Phase) {
        #[cfg(test)]
        {
            let callback = self.callback.lock().clone();
            if let Some(callback) = callback {
                callback(_phase);
            }
        }
    }

    /// Installs (or with `None` removes) the callback.
    #[cfg(test)]
    #[cfg_attr(xindex_loom, allow(dead_code))]
    pub(crate) fn set(&self, callback: Option<Callback>) {
        *self.callback.lock() = callback;
    }
}
