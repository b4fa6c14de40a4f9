//! Scratch directories a process can prove are its own, and the sweep of
//! those a dead process left behind.
//!
//! A [`ScratchDir`] is `<parent>/<prefix><pid>-<random>/` on whose own
//! file descriptor the owning process holds an exclusive `flock(2)` for as
//! long as the value lives: the kernel drops the lock when the process dies,
//! however it dies (SIGKILL included), and nothing inside the directory
//! (which a temp cleaner might delete) carries it. [`sweep`] removes the
//! directories under `parent` with that prefix, owned by this user, whose
//! lock it can take (their owner is gone) and that were last modified more
//! than `min_age` ago (the window between a directory's creation and its
//! lock), and never one whose lock is held (a live process, this host's
//! other instances included). It opens entries with `O_NOFOLLOW |
//! O_DIRECTORY` (a symlink or a FIFO planted in a shared `/tmp` is skipped,
//! never followed or blocked on) and skips an entry it cannot handle.
//! Dropping a `ScratchDir` removes it.
//!
//! The lock is advisory and local: directories on a network filesystem
//! shared by several hosts need one prefix per host.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Age after which what versions before scratch directories left (unlocked
/// directories, temp files) is removed: no write of theirs lasts that long.
pub const LEGACY_STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Opens directory `path` itself (not through a symlink, never a FIFO).
fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// A directory this process owns while the value lives.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    _lock: File,
}

impl ScratchDir {
    /// Creates `<parent>/<prefix><pid>-<random>/` (and `parent` if needed)
    /// and locks it. Errors are those of creating the
    /// directory, opening it or `flock`.
    pub fn create(parent: &Path, prefix: &str) -> io::Result<ScratchDir> {
        fs::create_dir_all(parent)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}{}-", std::process::id()))
            .tempdir_in(parent)?
            .keep();
        let lock = open_dir(&dir)?;
        lock.try_lock().map_err(|e| match e {
            fs::TryLockError::Error(e) => e,
            fs::TryLockError::WouldBlock => {
                io::Error::new(io::ErrorKind::WouldBlock, "a fresh scratch dir is locked")
            }
        })?;
        Ok(ScratchDir {
            path: dir,
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// What a [`sweep`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Directories of dead owners removed.
    pub removed: usize,
    /// Bytes of the files in them.
    pub bytes: u64,
    /// Directories left alone because their owner holds the lock.
    pub live: usize,
    /// Directories of dead owners left because they are younger than `min_age`.
    pub recent: usize,
}

/// Removes the directories `<parent>/<prefix>*` owned by this user whose
/// owner is gone (their lock can be taken) and whose modification time is
/// more than `min_age` ago; leaves those whose lock is held. A missing
/// `parent` sweeps nothing; an error reading `parent` is returned; an entry
/// that cannot be opened, locked or removed is logged and skipped.
pub fn sweep(parent: &Path, prefix: &str, min_age: Duration) -> io::Result<Swept> {
    let mut swept = Swept::default();
    let entries = match fs::read_dir(parent) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => return Err(e),
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        // Held while we look, so that the owner cannot be mistaken for dead
        // between the test and the removal.
        let lock = match open_dir(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(dir = %path.display(), error = %e, "scratch sweep: cannot open");
                continue;
            }
        };
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                swept.live += 1;
                continue;
            }
            Err(fs::TryLockError::Error(e)) => {
                tracing::debug!(dir = %path.display(), error = %e, "scratch sweep: cannot lock");
                continue;
            }
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or_default();
        if age < min_age {
            swept.recent += 1;
            continue;
        }
        let bytes = dir_bytes(&path);
        match fs::remove_dir_all(&path) {
            Ok(()) => {
                swept.removed += 1;
                swept.bytes += bytes;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %path.display(), error = %e, "scratch sweep: cannot remove")
            }
        }
        drop(lock);
    }
    Ok(swept)
}

/// Bytes of the files below `dir` (what can be read; 0 for the rest).
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => total += e.metadata().map_or(0, |m| m.len()),
                Err(_) => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory as a dead process leaves it: nobody holds its lock; a
    /// file, and an old modification time.
    fn dead(parent: &Path, name: &str, age: Duration) -> PathBuf {
        let dir = parent.join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("spool"), vec![7u8; 1000]).unwrap();
        let when = SystemTime::now() - age;
        File::open(&dir).unwrap().set_modified(when).unwrap();
        dir
    }

    #[test]
    fn only_old_directories_of_dead_owners_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let old = dead(parent.path(), "gitstow-1-a", 2 * hour);
        let young = dead(parent.path(), "gitstow-2-b", Duration::from_secs(5));
        let other = dead(parent.path(), "other-3-c", 2 * hour);
        let live = ScratchDir::create(parent.path(), "gitstow-").unwrap();
        fs::write(live.path().join("spool"), b"mine").unwrap();
        File::open(live.path())
            .unwrap()
            .set_modified(SystemTime::now() - 2 * hour)
            .unwrap();

        // Planted in a shared temp dir: a FIFO and a symlink to a dead one.
        let fifo = parent.path().join("gitstow-fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let target = dead(parent.path(), "elsewhere", 2 * hour);
        std::os::unix::fs::symlink(&target, parent.path().join("gitstow-link")).unwrap();

        let swept = sweep(parent.path(), "gitstow-", hour).unwrap();
        assert_eq!(
            swept,
            Swept {
                removed: 1,
                bytes: 1000,
                live: 1,
                recent: 1
            }
        );
        assert!(!old.exists());
        assert!(young.exists() && other.exists());
        assert!(
            fifo.exists() && target.join("spool").exists(),
            "not followed"
        );
        assert!(live.path().join("spool").exists());

        let path = live.path().to_owned();
        drop(live);
        assert!(!path.exists(), "a dropped scratch dir is removed");
        assert_eq!(
            sweep(&parent.path().join("missing"), "x", hour).unwrap(),
            Swept::default()
        );
    }
}
