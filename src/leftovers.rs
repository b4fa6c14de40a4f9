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

use gitstow_store::scratch::{self, ScratchDir, LEGACY_STALE_AFTER};

pub use gitstow_store::FS_STALE_AFTER as STALE_AFTER;

/// How often a running server sweeps.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(3600);

/// Prefix of `gitstow serve`'s scratch directories.
pub const SERVE_PREFIX: &str = "gitstow-serve-";

/// Prefix of `gitstow maintain`'s scratch directories.
pub const MAINTAIN_PREFIX: &str = "gitstow-maintain-";

/// What a sweep looks at, and after how long: the two prefixes above, and
/// the unlocked `gitstow-maintain*` directories of earlier versions.
const SWEPT: [(&str, Duration); 3] = [
    (SERVE_PREFIX, STALE_AFTER),
    (MAINTAIN_PREFIX, STALE_AFTER),
    ("gitstow-maintain", LEGACY_STALE_AFTER),
];

/// Sweeps the temp directory (`tmp_dir`, else the system's) of dead
/// processes' leftovers, then creates this process's scratch directory
/// there with `prefix`. (A local store swept its own `.gitstow-tmp/` when
/// it was opened.) The error says what could not be created, and why.
pub fn own_scratch(tmp_dir: Option<&Path>, prefix: &str) -> Result<ScratchDir, String> {
    let tmp = tmp_dir.map_or_else(std::env::temp_dir, Path::to_owned);
    sweep_tmp(&tmp);
    ScratchDir::create(&tmp, prefix).map_err(|e| {
        format!(
            "cannot create a scratch directory in {}: {e}",
            tmp.display()
        )
    })
}

/// One sweep of `tmp`; failures are logged, never fatal.
fn sweep_tmp(tmp: &Path) {
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
}

/// One sweep of `tmp` and of the local store at `store_root`; failures are
/// logged, never fatal.
fn sweep(tmp: &Path, store_root: Option<&Path>) {
    sweep_tmp(tmp);
    if let Some(root) = store_root {
        if let Err(e) = gitstow_store::FsStore::sweep_leftovers(root) {
            tracing::warn!(error = %e, "sweeping the store's .gitstow-tmp failed");
        }
    }
}

/// Sweeps the temp directory (`tmp_dir`, else the system's) and the local
/// store at `store_root` every [`SWEEP_INTERVAL`] on the blocking pool, for
/// as long as the runtime runs.
pub fn spawn_periodic(tmp_dir: Option<&Path>, store_root: Option<PathBuf>) {
    let tmp = tmp_dir.map_or_else(std::env::temp_dir, Path::to_owned);
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
