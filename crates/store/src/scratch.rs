//! Scratch directories a process can prove are its own, and the sweep of
//! those a dead process left behind.
//!
//! A [`ScratchDir`] is `<parent>/<prefix><pid>-<random>/` holding a file
//! [`OWNER_LOCK`] on which the owning process holds an exclusive `flock(2)`
//! for as long as the value lives: the kernel drops the lock when the
//! process dies, however it dies (SIGKILL included). [`sweep`] removes the
//! directories under `parent` with that prefix whose lock it can take (their
//! owner is gone) and that were last modified more than `min_age` ago, and
//! never one whose lock is held (a live process, this host's other
//! instances included). Dropping a `ScratchDir` removes it.
//!
//! The lock is advisory and local: directories on a network filesystem
//! shared by several hosts need one prefix per host.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The name of the lock file in a scratch directory.
pub const OWNER_LOCK: &str = "owner.lock";

/// A directory this process owns while the value lives.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    _lock: File,
}

impl ScratchDir {
    /// Creates `<parent>/<prefix><pid>-<random>/` (and `parent` if needed)
    /// and takes its owner lock. Errors are those of creating the
    /// directory or the lock file, or of `flock`.
    pub fn create(parent: &Path, prefix: &str) -> io::Result<ScratchDir> {
        fs::create_dir_all(parent)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}{}-", std::process::id()))
            .tempdir_in(parent)?
            .keep();
        let lock = File::create(dir.join(OWNER_LOCK))?;
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

/// Removes the directories `<parent>/<prefix>*` whose owner is gone (their
/// [`OWNER_LOCK`] can be locked, or is missing) and whose modification time
/// is more than `min_age` ago; leaves those whose lock is held. A missing
/// `parent` sweeps nothing. Entries that vanish meanwhile are skipped;
/// other I/O errors end the sweep.
pub fn sweep(parent: &Path, prefix: &str, min_age: Duration) -> io::Result<Swept> {
    let mut swept = Swept::default();
    let entries = match fs::read_dir(parent) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => return Err(e),
    };
    let now = SystemTime::now();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        // Held while we look, so that the owner cannot be mistaken for dead
        // between the test and the removal.
        let lock = match File::open(path.join(OWNER_LOCK)) {
            Ok(f) => match f.try_lock() {
                Ok(()) => Some(f),
                Err(fs::TryLockError::WouldBlock) => {
                    swept.live += 1;
                    continue;
                }
                Err(fs::TryLockError::Error(e)) => return Err(e),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
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
            Err(e) => return Err(e),
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

    /// A directory as a dead process leaves it: a lock file nobody holds,
    /// a file, and an old modification time.
    fn dead(parent: &Path, name: &str, age: Duration) -> PathBuf {
        let dir = parent.join(name);
        fs::create_dir_all(&dir).unwrap();
        File::create(dir.join(OWNER_LOCK)).unwrap();
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
