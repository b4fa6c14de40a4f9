//! What crashed processes leave behind outside the store's key space, and
//! its removal: every `gitstow serve` and `gitstow maintain` works in a
//! scratch directory of its own under the temp directory (`--tmp-dir`, else
//! the system's), `gitstow-serve-<pid>-<r>/` or `gitstow-maintain-<pid>-<r>/`,
//! locked while the process lives (`gitstow_store::scratch`). At start and
//! every [`SWEEP_INTERVAL`], the directories of dead processes older than
//! [`STALE_AFTER`] are removed, there and in a local store's
//! `.gitstow-tmp/`; another live instance's are left alone. What versions
//! before these locks left (unlocked `gitstow-maintain*` directories,
//! `.gitstow-tmp/put-*` files) goes once a day old: no write of theirs
//! lasts that long.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gitstow_store::scratch::{self, ScratchDir};

pub use gitstow_store::FS_STALE_AFTER as STALE_AFTER;

/// How often a running server sweeps.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// Prefix of `gitstow serve`'s scratch directories.
pub const SERVE_PREFIX: &str = "gitstow-serve-";

/// Prefix of `gitstow maintain`'s scratch directories.
pub const MAINTAIN_PREFIX: &str = "gitstow-maintain-";

/// Age after which what versions before scratch locks left is removed.
pub const LEGACY_STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What a sweep looks at, and after how long: the two prefixes above, and
/// the unlocked `gitstow-maintain*` directories of earlier versions.
const SWEPT: [(&str, Duration); 3] = [
    (SERVE_PREFIX, STALE_AFTER),
    (MAINTAIN_PREFIX, STALE_AFTER),
    ("gitstow-maintain", LEGACY_STALE_AFTER),
];

/// Sweeps `tmp` (and the local store at `store_root`, if any) of dead
/// processes' leftovers, then creates this process's scratch directory in
/// `tmp` with `prefix`.
pub fn own_scratch(
    tmp: &Path,
    prefix: &str,
    store_root: Option<&Path>,
) -> std::io::Result<ScratchDir> {
    sweep(tmp, store_root);
    ScratchDir::create(tmp, prefix)
}

/// One sweep of `tmp` and of the local store at `store_root`; failures are
/// logged, never fatal.
pub fn sweep(tmp: &Path, store_root: Option<&Path>) {
    for (prefix, min_age) in SWEPT {
        match scratch::sweep(tmp, prefix, min_age) {
            Ok(s) if s.removed > 0 => tracing::info!(
                dir = %tmp.display(),
                prefix,
                removed = s.removed,
                bytes = s.bytes,
                live = s.live,
                "removed the scratch directories of processes that died"
            ),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(dir = %tmp.display(), error = %e, "sweeping scratch directories failed")
            }
        }
    }
    if let Some(root) = store_root {
        if let Err(e) = gitstow_store::FsStore::sweep_leftovers(root) {
            tracing::warn!(error = %e, "sweeping the store's .gitstow-tmp failed");
        }
    }
}

/// Sweeps every [`SWEEP_INTERVAL`] on the blocking pool, for as long as the
/// runtime runs.
pub fn spawn_periodic(tmp: PathBuf, store_root: Option<PathBuf>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_INTERVAL);
        tick.tick().await; // the first tick is now: start swept already
        loop {
            tick.tick().await;
            let (tmp, root) = (tmp.clone(), store_root.clone());
            let _ = tokio::task::spawn_blocking(move || sweep(&tmp, root.as_deref())).await;
        }
    });
}
