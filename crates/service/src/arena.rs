//! Where a kind of work allocates: a jemalloc arena of its own (see
//! [`WorkArena`]).

/// A jemalloc arena of its own for one kind of work (jemalloc(3)
/// `arenas.create`). jemalloc gives each thread one of 4 × cores arenas, and
/// what a thread frees stays in its arena (dirty, until decay returns it):
/// work that runs on many pool threads in turn, each taking tens of
/// megabytes, then holds that much in every arena it passed through, and the
/// peak follows the number of threads, not the number of requests running
/// at once. In one arena, what one request freed is what the next one
/// takes. Measured with 8 fetches of 200,000 wants at once, 2 at a time:
/// 4.0 × one fetch's peak across pool arenas, 2.3 × in one arena.
#[derive(Debug, Clone, Copy)]
pub struct WorkArena {
    index: Option<u32>,
}

impl WorkArena {
    /// Creates the arena; without jemalloc's control interface (another
    /// global allocator, as in unit tests), work runs where it would anyway.
    pub fn create() -> WorkArena {
        // SAFETY: `arenas.create` is read as jemalloc(3) documents it, an
        // unsigned arena index.
        let index = unsafe { tikv_jemalloc_ctl::raw::read::<u32>(b"arenas.create\0") }.ok();
        WorkArena { index }
    }

    /// Binds the calling thread's allocations to this arena until the guard
    /// drops, when the thread goes back to its previous arena (frees go to
    /// the arena a block came from, wherever they happen).
    pub fn enter(&self) -> ArenaGuard {
        // SAFETY: `thread.arena` is an unsigned arena index (jemalloc(3));
        // the index names an arena `arenas.create` made.
        let previous = self.index.and_then(|i| {
            unsafe { tikv_jemalloc_ctl::raw::update::<u32>(b"thread.arena\0", i) }.ok()
        });
        ArenaGuard { previous }
    }
}

/// The thread works in a [`WorkArena`] while this lives.
#[derive(Debug)]
pub struct ArenaGuard {
    previous: Option<u32>,
}

impl Drop for ArenaGuard {
    fn drop(&mut self) {
        if let Some(p) = self.previous {
            // SAFETY: as in `WorkArena::enter`, with the index jemalloc gave back.
            let _ = unsafe { tikv_jemalloc_ctl::raw::write::<u32>(b"thread.arena\0", p) };
        }
    }
}

/// Returns the pages freed memory holds in every arena to the kernel now
/// (jemalloc(3) `arena.<MALLCTL_ARENAS_ALL>.purge`) rather than after the
/// decay time: a push's resolver threads free their tables in their own
/// arenas, and the push's last steps, allocating elsewhere, would
/// otherwise add their memory to those pages still resident (a git/git
/// push rose 20-40 MiB above what it held at that moment). Every arena's
/// freed pages go, other requests' too (they fault fresh pages in when
/// they allocate again): for large pushes only. True when jemalloc took
/// the request; the pages of jemalloc's own heap only (the unit tests'
/// system allocator is left alone).
pub fn purge_freed() -> bool {
    // MALLCTL_ARENAS_ALL (4096): every arena. The control takes no value.
    // SAFETY: a NUL-terminated name, and null pointers for a control that
    // reads and writes nothing (jemalloc(3)).
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        tracing::debug!(rc, "jemalloc purge refused");
    }
    rc == 0
}

#[cfg(test)]
mod tests {
    use tikv_jemalloc_ctl::{epoch, stats};

    fn resident() -> usize {
        epoch::advance().unwrap();
        stats::resident::read().unwrap()
    }

    #[test]
    fn purged_pages_leave_jemalloc_resident_at_once() {
        // jemalloc is linked here without being the global allocator: its
        // own malloc, with the default decay (freed pages stay 10 s), in
        // blocks below the size it gives an arena of their own.
        const BLOCK: usize = 256 << 10;
        const LEN: usize = 64 << 20;
        let before = resident();
        // SAFETY: jemalloc's malloc and free, each block written in full
        // and freed once.
        unsafe {
            let blocks: Vec<*mut u8> = (0..LEN / BLOCK)
                .map(|_| tikv_jemalloc_sys::malloc(BLOCK).cast::<u8>())
                .collect();
            for &p in &blocks {
                assert!(!p.is_null());
                std::ptr::write_bytes(p, 1, BLOCK);
            }
            for p in blocks {
                tikv_jemalloc_sys::free(p.cast());
            }
        }
        let freed = resident();
        assert!(freed >= before + LEN / 2, "{before} → {freed}");
        assert!(super::purge_freed());
        let purged = resident();
        assert!(purged + LEN / 2 <= freed, "{freed} → {purged}");
    }
}
