//! The cache directory itself: which one a process takes ([`claim_dir`],
//! [`default_cache_dir`]) and the check that it is private to this user
//! ([`private_dir`]), since the files found there are served as the
//! store's objects.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Most directories tried by [`claim_dir`].
const CLAIM_SLOTS: usize = 64;

/// Takes a cache directory for this process: `dir` if no other live
/// process holds it, else the first free of `dir-1`, `dir-2`, …: each
/// process has a directory of its own (its downloads, its size cap), and a
/// restarted process takes over a dead one's files. The claim is an
/// exclusive `flock` on `<dir>/.lock`, held as long as the returned file
/// is open. `None` (and `dir` as is) when no directory can be locked.
pub fn claim_dir(dir: &Path) -> (PathBuf, Option<File>) {
    for n in 0..CLAIM_SLOTS {
        let candidate = if n == 0 {
            dir.to_owned()
        } else {
            let mut name = dir.file_name().unwrap_or_default().to_owned();
            name.push(format!("-{n}"));
            dir.with_file_name(name)
        };
        if let Err(e) = private_dir(&candidate) {
            tracing::warn!(dir = %candidate.display(), error = %e, "the cache directory cannot be made private to this user; reading through");
            break;
        }
        let Ok(file) = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(candidate.join(".lock"))
        else {
            break;
        };
        if file.try_lock().is_ok() {
            if n > 0 {
                tracing::info!(dir = %candidate.display(), taken = %dir.display(), "the cache directory is another process's; using one of this process's own");
            }
            return (candidate, Some(file));
        }
    }
    (dir.to_owned(), None)
}

/// The cache directory `gitstow serve` uses for `store_url` when none is
/// configured: `<system temp dir>/gitstow-cache/<16 hex digits of
/// SHA-256(store_url)>`, so two stores never share one.
pub fn default_cache_dir(store_url: &str) -> PathBuf {
    let digest = hex::encode(Sha256::digest(store_url.as_bytes()));
    // Per user: another user of the machine cannot have created it first.
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir()
        .join(format!("gitstow-cache-{uid}"))
        .join(&digest[..16])
}

/// Creates `dir` (and its missing parents) private to this user, or checks
/// the one there: a real directory (not a symbolic link), owned by this
/// process's effective user, with no access for group or others. Files in
/// a cache directory are trusted as the store's objects, so one that
/// another user could write to, or swap for a link, is refused.
///
/// # Errors
/// Why `dir` cannot be used (created, or found not private).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let refuse = |d: &Path, why: &str| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: {why}", d.display()),
        ))
    };
    let meta = fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return refuse(dir, "not a directory (a link?)");
    }
    if meta.uid() != uid {
        return refuse(dir, "owned by another user");
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    // Whoever may write to the parent may put another directory in its
    // place: the parent is this user's or root's, and if others may write
    // to it, it is sticky (as /tmp).
    if let Some(parent) = dir.parent().filter(|p| *p != Path::new("")) {
        let meta = fs::metadata(parent)?;
        let mode = meta.permissions().mode();
        if meta.uid() != uid && meta.uid() != 0 {
            return refuse(parent, "owned by another user");
        }
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return refuse(parent, "writable by others and not sticky");
        }
    }
    Ok(())
}
