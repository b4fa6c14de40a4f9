//! The process allocator: jemalloc (tikv-jemallocator) wrapped to count the
//! bytes allocated since start, for `gitstow_allocated_bytes_total` on
//! `/metrics` (membench divides its growth over a push by the pack's size).
//!
//! The binary installs it with `#[global_allocator]`; jemalloc's own figures
//! (allocated, active, resident) come from [`jemalloc_stats`].

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

use tikv_jemallocator::Jemalloc;

static ALLOCATED: AtomicU64 = AtomicU64::new(0);

/// jemalloc, counting every allocation's requested size (a `realloc` counts its
/// new size, as jemalloc's `thread.allocated` does: a grown buffer is a new
/// allocation).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingJemalloc;

// SAFETY: every call is forwarded to jemalloc unchanged; the counter has no
// effect on the memory handed out.
unsafe impl GlobalAlloc for CountingJemalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { Jemalloc.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { Jemalloc.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { Jemalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size as u64, Ordering::Relaxed);
        unsafe { Jemalloc.realloc(ptr, layout, new_size) }
    }
}

/// Bytes allocated through [`CountingJemalloc`] since the process started
/// (0 when another allocator is installed, e.g. in unit tests).
pub fn allocated_total() -> u64 {
    ALLOCATED.load(Ordering::Relaxed)
}

/// jemalloc's own figures, in bytes (`stats.allocated`, `stats.active`,
/// `stats.resident` of jemalloc(3), refreshed by advancing `epoch`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct JemallocStats {
    /// Bytes in live allocations.
    pub allocated: u64,
    /// Bytes in active pages (allocated plus page-level fragmentation).
    pub active: u64,
    /// Bytes in physically resident data pages mapped by the allocator.
    pub resident: u64,
}

/// Reads [`JemallocStats`]; `None` if jemalloc's control interface fails.
pub fn jemalloc_stats() -> Option<JemallocStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    Some(JemallocStats {
        allocated: stats::allocated::read().ok()? as u64,
        active: stats::active::read().ok()? as u64,
        resident: stats::resident::read().ok()? as u64,
    })
}

/// Keeps glibc's malloc — used by the C libraries (zstd) — from holding freed
/// memory: one arena, and fixed trim and mmap thresholds of 128 KiB (glibc
/// otherwise raises both after a large block is freed, and per-thread arenas
/// keep megabytes each after every push). Measured on git/git pushes: 10-17 MB
/// retained after a push before, 3-4 MB after. Call once at start-up.
pub fn tune_libc_malloc() {
    // SAFETY: mallopt only changes glibc's malloc parameters; it has no
    // memory-safety preconditions.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// jemalloc's start-up options for the binary (export this string as
/// `_rjem_malloc_conf`): the heap profiler is compiled in and initialised but
/// inactive (`prof_active:false`) until `--heap-profiling` turns it on, sampling
/// one allocation per 512 KiB on average (`lg_prof_sample:19`); a background
/// thread returns freed pages to the kernel after one second.
pub const MALLOC_CONF: &[u8] =
    b"prof:true,prof_active:false,lg_prof_sample:19,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

pub use gitstow_service::arena::{ArenaGuard, WorkArena};
