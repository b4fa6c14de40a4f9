//! What the admin commands (`token`, `access`, `key`, `webhook`, `repo`,
//! `fsck`) share: their failure type and the frame that opens the store,
//! runs the command and turns its outcome into an exit code.

use std::path::Path;
use std::sync::Arc;

use gitstow_store::scratch::ScratchDir;
use gitstow_store::ObjectStore;

pub use crate::store_open::IfMissing;
use crate::store_open::{ContainerCache, StoreArgs};

/// Bytes of the private container cache of a run that reads containers
/// from an S3 store (`maintain`, `fsck`).
const PRIVATE_CACHE_BYTES: u64 = 4 << 30;

/// A scratch directory of this run's own under `tmp_dir` (else the system's
/// temp dir; those of dead runs are swept first), and a private container
/// cache in it: with an S3 store, a run that reads a container many times
/// (an fsck hashes every object, a GC's bitmaps read every commit and tree)
/// then downloads it once, whole, instead of one ranged GET an object.
///
/// # Errors
/// The line to print after `gitstow: ` (the directory cannot be made).
pub fn private_cache(tmp_dir: Option<&Path>) -> Result<(ScratchDir, ContainerCache), String> {
    let scratch = crate::leftovers::own_scratch(tmp_dir, crate::leftovers::MAINTAIN_PREFIX)?;
    let cache = ContainerCache {
        dir: scratch.path().join("cache"),
        max_bytes: PRIVATE_CACHE_BYTES,
    };
    Ok((scratch, cache))
}

/// A command's failure, said on stderr.
pub type Failure = Box<dyn std::error::Error>;

/// Opens the store (see [`crate::store_open::open`]; no container cache)
/// and runs `f`. Exit code: 0 done, 1 `f` failed (its error on stderr), 2
/// the store cannot be opened or is a local directory that does not exist
/// while `if_missing` refuses that.
pub fn run(
    store: &StoreArgs,
    if_missing: IfMissing,
    f: impl FnOnce(&Arc<dyn ObjectStore>) -> Result<(), Failure>,
) -> i32 {
    run_cached(store, if_missing, None, f)
}

/// [`run`] with `cache` in front of an S3 store (see [`private_cache`]).
pub fn run_cached(
    store: &StoreArgs,
    if_missing: IfMissing,
    cache: Option<ContainerCache>,
    f: impl FnOnce(&Arc<dyn ObjectStore>) -> Result<(), Failure>,
) -> i32 {
    let opened = match crate::store_open::open(store, if_missing, cache) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("gitstow: {why}");
            return 2;
        }
    };
    match f(&opened) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gitstow: {e}");
            1
        }
    }
}

/// Requests an admin command keeps in flight at once when it reads one
/// small object per repository (a state, an LFS marker): enough to hide a
/// store's round trip, few enough for any S3 server's rate limits.
pub const PARALLEL_READS: usize = 16;

/// `f` of every item, on up to `workers` threads, in the items' order.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every index is taken once"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parallel_map;

    #[test]
    fn maps_every_item_in_order_on_a_bounded_pool() {
        let items: Vec<u32> = (0..100).collect();
        let live = std::sync::atomic::AtomicUsize::new(0);
        let peak = std::sync::atomic::AtomicUsize::new(0);
        let out = parallel_map(&items, 4, |x| {
            use std::sync::atomic::Ordering::SeqCst;
            let now = live.fetch_add(1, SeqCst) + 1;
            peak.fetch_max(now, SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(1));
            live.fetch_sub(1, SeqCst);
            x * 2
        });
        assert_eq!(out, (0..100).map(|x| x * 2).collect::<Vec<_>>());
        assert!(peak.into_inner() <= 4);
        assert!(parallel_map(&[] as &[u32], 4, |x| *x).is_empty());
    }
}
