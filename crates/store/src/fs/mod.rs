//! The embedded local backend: one directory, one file per key.
//!
//! Layout under the root:
//!
//! ```text
//! <root>/<key>                 one regular file per object (key '/' = directory separator)
//! <root>/.gitstow-tmp/instance-<pid>-<r>/  temp files of one open store's writes in flight
//!                              (same filesystem as the objects; see crate::scratch)
//! <root>/.gitstow-locks/<h>    per-key lock files, h = hex SHA-256 of the key; exist only while held
//! ```
//!
//! A write streams into a temp file while hashing it, `fsync`s it, then takes
//! the key's lock, checks the [`PutCondition`], `rename`s the temp file onto
//! the object's path, `fsync`s the directory and releases the lock. Readers
//! take no lock: `rename` is atomic and an open file keeps the version it
//! opened, so a reader never sees a partial object.
//!
//! Ranged reads of immutable keys (`.bin`, `.idx`: named by an id unique to
//! their writer, so never rewritten with other content) keep their file open
//! in a small per-store table ([`OPEN_FILES`] handles, least recently used
//! evicted): a clone reads hundreds of thousands of records, and an
//! open/stat/close per record cost more CPU than the reads.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::ops::Range;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use crate::scratch::ScratchDir;
use crate::{validate_key, ETag, Error, ObjectMeta, ObjectStore, PutCondition, Result};

/// Directory below the root holding temp files of writes in flight.
const TMP_DIR: &str = ".gitstow-tmp";
/// Directory below the root holding the per-key lock files.
const LOCK_DIR: &str = ".gitstow-locks";
/// Buffer size for streaming copies and hashing, in bytes.
const COPY_BUF_LEN: usize = 64 * 1024;
/// How often a write retries a `rename` whose target directory was removed
/// underneath it by a concurrent [`FsStore::delete`] pruning empty dirs.
const RENAME_ATTEMPTS: usize = 16;

/// Open files kept for ranged reads of content-addressed keys.
pub const OPEN_FILES: usize = 64;

/// Whether `key` names content-addressed bytes (see the module docs).
fn is_content_addressed(key: &str) -> bool {
    key.ends_with(".bin") || key.ends_with(".idx")
}

/// Open files of content-addressed keys, most recently used last.
#[derive(Debug, Default)]
struct OpenFiles {
    files: Vec<(String, Arc<File>, u64)>,
}

impl OpenFiles {
    fn get(&mut self, key: &str) -> Option<(Arc<File>, u64)> {
        let i = self.files.iter().position(|(k, _, _)| k == key)?;
        let entry = self.files.remove(i);
        let found = (entry.1.clone(), entry.2);
        self.files.push(entry);
        Some(found)
    }

    fn insert(&mut self, key: &str, file: Arc<File>, size: u64) {
        if self.files.len() >= OPEN_FILES {
            self.files.remove(0);
        }
        self.files.push((key.to_owned(), file, size));
    }

    fn forget(&mut self, key: &str) {
        self.files.retain(|(k, _, _)| k != key);
    }
}

/// The embedded local backend: one directory, one file per key.
///
/// Objects live at `<root>/<key>`. ETags are the lowercase hex SHA-256 of the
/// content, computed while writing and while reading (no sidecar files), so
/// [`ObjectStore::head`] reads the whole object.
///
/// Any number of `FsStore`s, in any number of threads and processes, may
/// share one root: writes are atomic and every put and delete of a key is
/// serialised by an exclusive [`File::lock`] on that key's lock file, so a
/// conditional put is a true compare-and-swap. The root must be on a local
/// filesystem with working `flock` and atomic `rename`.
///
/// Limits of a directory tree compared with a bucket: a key cannot be both an
/// object and the directory of another (`a` and `a/b`); the second put fails
/// with [`Error::Io`]. A path segment longer than the filesystem's name limit
/// (255 bytes on most) also fails with [`Error::Io`]. Each open store
/// writes its temp files in its own [`ScratchDir`] under `.gitstow-tmp/`;
/// those of a process that died (SIGKILL, crash) are removed by the next
/// [`FsStore::new`] on the same root once [`STALE_AFTER`] old.
#[derive(Debug)]
pub struct FsStore {
    root: PathBuf,
    /// The root directory's device and inode when the store was opened:
    /// a root that vanished or was replaced (a volume unmounted under a
    /// running server) makes operations fail instead of writing a new
    /// store into the mount point.
    root_id: (u64, u64),
    scratch: ScratchDir,
    open_files: Mutex<OpenFiles>,
}

/// Age after which a dead process's scratch directory under `.gitstow-tmp/`
/// is removed (the age covers the instant between a directory's creation
/// and its owner lock).
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// Prefix of the scratch directories under `.gitstow-tmp/`.
const SCRATCH_PREFIX: &str = "instance-";

impl FsStore {
    /// Open the store rooted at directory `root`, creating it (and its
    /// internal directories) if missing. Relative roots are relative to the
    /// current directory at each later access; [`open`](crate::open) passes
    /// absolute ones.
    ///
    /// Removes the scratch directories of dead processes under
    /// `.gitstow-tmp/` (see [`STALE_AFTER`]) and makes this store's own.
    ///
    /// # Errors
    /// [`Error::Io`], with the root path as `key`, when a directory cannot
    /// be created (e.g. `root` is a file).
    pub fn new(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        let io = |e| Error::io(root.display().to_string(), e);
        for dir in [root.join(TMP_DIR), root.join(LOCK_DIR)] {
            fs::create_dir_all(&dir).map_err(io)?;
        }
        if let Err(e) = FsStore::sweep_leftovers(&root) {
            tracing::warn!(error = %e, "sweeping .gitstow-tmp failed");
        }
        let scratch = ScratchDir::create(&root.join(TMP_DIR), SCRATCH_PREFIX).map_err(io)?;
        let meta = fs::metadata(&root).map_err(io)?;
        Ok(FsStore {
            root_id: (meta.dev(), meta.ino()),
            root,
            scratch,
            open_files: Mutex::default(),
        })
    }

    /// Removes the scratch directories under `<root>/.gitstow-tmp/` that
    /// processes which died left (their owner lock is free) and that are
    /// older than [`STALE_AFTER`]; logs what it removed. Safe while other
    /// processes use the store: a live writer's directory is never touched.
    /// Temp files `put-*` directly in `.gitstow-tmp/` (where versions before
    /// scratch directories wrote) go once a day old.
    pub fn sweep_leftovers(root: &Path) -> io::Result<crate::scratch::Swept> {
        let mut swept = crate::scratch::sweep(&root.join(TMP_DIR), SCRATCH_PREFIX, STALE_AFTER)?;
        let stale = std::time::SystemTime::now() - crate::scratch::LEGACY_STALE_AFTER;
        let entries = fs::read_dir(root.join(TMP_DIR))
            .into_iter()
            .flatten()
            .flatten();
        for e in entries.filter(|e| e.file_name().to_string_lossy().starts_with("put-")) {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_file()
                && meta.modified().is_ok_and(|t| t < stale)
                && fs::remove_file(e.path()).is_ok()
            {
                swept.removed += 1;
                swept.bytes += meta.len();
            }
        }
        if swept.removed > 0 {
            tracing::info!(
                removed = swept.removed,
                bytes = swept.bytes,
                live = swept.live,
                "removed the temp files of store writes by processes that died"
            );
        }
        Ok(swept)
    }

    /// The directory this store keeps its objects in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of the file holding `key` (which must be valid).
    ///
    /// # Errors
    /// A symbolic link on the way (`org/alias.git -> ../secret/x.git`):
    /// links under the root are not followed, so that a key can only name
    /// what lies under its own path (a grant on `org/*` never reaches
    /// `secret/x`).
    fn object_path(&self, key: &str) -> Result<PathBuf> {
        let mut path = self.root.clone();
        for part in key.split('/') {
            path.push(part);
            match fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(Error::io(
                        key,
                        io::Error::new(
                            ErrorKind::PermissionDenied,
                            "a symbolic link under the store's root is not followed",
                        ),
                    ));
                }
                Ok(_) => {}
                // What does not exist yet holds no link.
                Err(_) => return Ok(self.root.join(key)),
            }
        }
        Ok(path)
    }

    /// Whether the root is still the directory the store opened; else an
    /// unavailable-store error (`op` on `key`), before anything below the
    /// root is created again or an absence is reported.
    fn check_root(&self, op: &'static str, key: &str) -> Result<()> {
        match fs::metadata(&self.root) {
            Ok(m) if m.is_dir() && (m.dev(), m.ino()) == self.root_id => Ok(()),
            found => Err(Error::Backend {
                op,
                key: key.to_owned(),
                message: format!(
                    "the store directory {} {} since the store was opened",
                    self.root.display(),
                    if found.is_ok() {
                        "was replaced"
                    } else {
                        "is gone"
                    }
                ),
                unavailable: true,
            }),
        }
    }

    /// Open the object at `key` for reading; `None` when there is no regular
    /// file there (absent, a directory, or below a file).
    fn forget_open(&self, key: &str) {
        if is_content_addressed(key) {
            self.open_files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .forget(key);
        }
    }

    /// An open file of `key` and its size, from the table of open files for
    /// content-addressed keys; `None` when absent.
    fn open_for_range(&self, key: &str) -> Result<Option<(Arc<File>, u64)>> {
        let cacheable = is_content_addressed(key);
        if cacheable {
            let mut table = self.open_files.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(found) = table.get(key) {
                return Ok(Some(found));
            }
        }
        let Some((file, meta)) = self.open_object(key)? else {
            return Ok(None);
        };
        let file = Arc::new(file);
        if cacheable {
            self.open_files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, file.clone(), meta.len());
        }
        Ok(Some((file, meta.len())))
    }

    fn open_object(&self, key: &str) -> Result<Option<(File, Metadata)>> {
        let file = match File::open(self.object_path(key)?) {
            Ok(file) => file,
            Err(e) if is_absent(&e) => {
                self.check_root("get", key)?;
                return Ok(None);
            }
            Err(e) => return Err(Error::io(key, e)),
        };
        let meta = file.metadata().map_err(|e| Error::io(key, e))?;
        Ok(meta.is_file().then_some((file, meta)))
    }

    /// The etag of the object currently at `key`, `None` when absent.
    fn current_etag(&self, key: &str) -> Result<Option<ETag>> {
        match self.open_object(key)? {
            None => Ok(None),
            Some((file, _)) => {
                let (etag, _) = hash_reader(file).map_err(|e| Error::io(key, e))?;
                Ok(Some(etag))
            }
        }
    }

    /// A fresh temp file in this store's scratch directory, recreating that
    /// directory if it vanished.
    fn temp_file(&self, key: &str) -> Result<NamedTempFile> {
        let dir = self.scratch.path();
        let builder = |dir: &Path| tempfile::Builder::new().prefix("put-").tempfile_in(dir);
        match builder(dir) {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                // Not below a root that vanished or was replaced.
                self.check_root("put", key)?;
                fs::create_dir_all(dir).map_err(|e| Error::io(key, e))?;
                builder(dir)
            }
            other => other,
        }
        .map_err(|e| Error::io(key, e))
    }

    /// Write `data` to a durable temp file; returns it with the content's etag.
    fn stage_bytes(&self, key: &str, data: &[u8]) -> Result<(NamedTempFile, ETag)> {
        let mut tmp = self.temp_file(key)?;
        tmp.write_all(data).map_err(|e| Error::io(key, e))?;
        tmp.as_file().sync_data().map_err(|e| Error::io(key, e))?;
        Ok((tmp, etag_of(Sha256::digest(data))))
    }

    /// Stream `src` to a durable temp file while hashing it.
    fn stage_reader(&self, key: &str, mut src: impl Read) -> Result<(NamedTempFile, ETag)> {
        let mut tmp = self.temp_file(key)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0; COPY_BUF_LEN];
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(key, e)),
            };
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n]).map_err(|e| Error::io(key, e))?;
        }
        tmp.as_file().sync_data().map_err(|e| Error::io(key, e))?;
        Ok((tmp, etag_of(hasher.finalize())))
    }

    /// Hard-links the regular file `path` into the scratch directory, makes
    /// its bytes durable and hashes them; `None` when it is not a regular
    /// file or cannot be linked there (another filesystem, say): the caller
    /// copies it instead.
    fn stage_link(&self, key: &str, path: &Path) -> Result<Option<(NamedTempFile, ETag)>> {
        let linked = tempfile::Builder::new()
            .prefix("put-")
            .make_in(self.scratch.path(), |name| {
                fs::hard_link(path, name)?;
                // What was linked must be a regular file (a symbolic link is
                // linked as itself, not followed); no link is left behind
                // when it is not, or cannot be opened.
                let opened = match fs::symlink_metadata(name) {
                    Ok(m) if m.file_type().is_file() => File::open(name),
                    Ok(_) => Err(io::Error::other("not a regular file")),
                    Err(e) => Err(e),
                };
                if opened.is_err() {
                    let _ = fs::remove_file(name);
                }
                opened
            });
        let linked = match linked {
            Ok(linked) => linked,
            Err(e) => {
                tracing::debug!(key, error = %e, "cannot link the file into the store; copying it");
                return Ok(None);
            }
        };
        linked
            .as_file()
            .sync_data()
            .map_err(|e| Error::io(key, e))?;
        let (etag, _) = hash_reader(linked.as_file()).map_err(|e| Error::io(key, e))?;
        Ok(Some((linked, etag)))
    }

    /// Under the key's lock: check `condition`, then install `tmp` as the
    /// object at `key`.
    fn commit(
        &self,
        key: &str,
        tmp: NamedTempFile,
        etag: ETag,
        condition: PutCondition,
    ) -> Result<ETag> {
        self.check_root("put", key)?;
        let _lock = KeyLock::acquire(&self.root.join(LOCK_DIR), key)?;
        let holds = match &condition {
            PutCondition::None => true,
            PutCondition::IfAbsent => self.current_etag(key)?.is_none(),
            PutCondition::IfMatch(expected) => self.current_etag(key)?.as_ref() == Some(expected),
        };
        if !holds {
            tracing::debug!(key, ?condition, "conditional put lost");
            return Err(Error::PreconditionFailed {
                key: key.to_owned(),
            });
        }
        self.install(key, tmp)?;
        Ok(etag)
    }

    /// Rename `tmp` onto the object's path, creating parent directories, and
    /// make the rename durable.
    fn install(&self, key: &str, mut tmp: NamedTempFile) -> Result<()> {
        let dest = self.object_path(key)?;
        let parent = dest.parent().unwrap_or(&self.root).to_path_buf();
        let mut attempt = 1;
        loop {
            fs::create_dir_all(&parent).map_err(|e| Error::io(key, e))?;
            match tmp.persist(&dest) {
                Ok(_) => break,
                // A concurrent delete pruned the (momentarily empty) parent.
                Err(e) if e.error.kind() == ErrorKind::NotFound && attempt < RENAME_ATTEMPTS => {
                    tracing::debug!(key, attempt, "parent directory vanished; retrying rename");
                    tmp = e.file;
                    attempt += 1;
                }
                Err(e) => return Err(Error::io(key, e.error)),
            }
        }
        // The object is visible now; failing here would make a caller retry a
        // compare-and-swap that already succeeded, so only warn.
        if let Err(e) = File::open(&parent).and_then(|dir| dir.sync_all()) {
            tracing::warn!(key, error = %e, "could not fsync directory after rename");
        }
        Ok(())
    }

    /// Remove directories from `dir` up to (not including) the root while
    /// they are empty.
    fn prune_empty_dirs(&self, mut dir: Option<&Path>) {
        while let Some(d) = dir {
            if d == self.root || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }
}

impl ObjectStore for FsStore {
    fn put(&self, key: &str, data: &[u8], condition: PutCondition) -> Result<ETag> {
        validate_key(key)?;
        self.forget_open(key);
        let (tmp, etag) = self.stage_bytes(key, data)?;
        self.commit(key, tmp, etag, condition)
    }

    /// A regular file on the store's filesystem is hard-linked, not
    /// copied (a push's containers are not written twice): the file must
    /// not change after the call, which deleting or replacing it does not.
    fn put_file(&self, key: &str, path: &Path) -> Result<ETag> {
        validate_key(key)?;
        self.forget_open(key);
        let (tmp, etag) = match self.stage_link(key, path)? {
            Some(staged) => staged,
            None => {
                let src = File::open(path).map_err(|e| Error::io(key, e))?;
                self.stage_reader(key, src)?
            }
        };
        self.commit(key, tmp, etag, PutCondition::None)
    }

    /// Streams `from` into a staged file of `to` (never whole in memory).
    fn copy(&self, from: &str, to: &str) -> Result<ETag> {
        validate_key(from)?;
        validate_key(to)?;
        let Some((src, _)) = self.open_object(from)? else {
            return Err(Error::NotFound {
                key: from.to_owned(),
            });
        };
        self.forget_open(to);
        let (tmp, etag) = self.stage_reader(to, src)?;
        self.commit(to, tmp, etag, PutCondition::None)
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        validate_key(key)?;
        let Some((mut file, meta)) = self.open_object(key)? else {
            return Ok(None);
        };
        let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut data).map_err(|e| Error::io(key, e))?;
        let etag = etag_of(Sha256::digest(&data));
        Ok(Some((data, etag)))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.get_range_into(key, range, &mut buf)?;
        Ok(buf)
    }

    fn get_range_into(&self, key: &str, range: Range<u64>, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        validate_key(key)?;
        let Some((file, size)) = self.open_for_range(key)? else {
            return Err(Error::NotFound {
                key: key.to_owned(),
            });
        };
        if range.start > range.end || range.end > size {
            return Err(Error::InvalidRange {
                key: key.to_owned(),
                start: range.start,
                end: range.end,
                size,
            });
        }
        let len = usize::try_from(range.end - range.start).map_err(|_| {
            Error::io(
                key,
                io::Error::new(ErrorKind::InvalidInput, "range does not fit in memory"),
            )
        })?;
        fill_zeroed(buf, len);
        if let Err(e) = file.read_exact_at(buf, range.start) {
            buf.clear();
            return Err(Error::io(key, e));
        }
        Ok(())
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        validate_key(key)?;
        let Some((file, _)) = self.open_object(key)? else {
            return Ok(None);
        };
        let (etag, size) = hash_reader(file).map_err(|e| Error::io(key, e))?;
        Ok(Some(ObjectMeta { size, etag }))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        // Start the walk at the deepest directory the prefix names, so
        // listing one repository does not walk the whole store.
        let (dir_key, name_prefix) = match prefix.rfind('/') {
            Some(i) => (&prefix[..i], &prefix[i + 1..]),
            None => ("", prefix),
        };
        if !dir_key.is_empty() && validate_key(dir_key).is_err() {
            // Every key below an invalid directory name would be invalid too
            // (and walking it might leave the root, e.g. "../").
            return Ok(Vec::new());
        }
        let start = if dir_key.is_empty() {
            self.root.clone()
        } else {
            self.object_path(dir_key)?
        };
        self.check_root("list", prefix)?;
        let mut keys = Vec::new();
        let mut pending = vec![(start, dir_key.to_owned(), true)];
        while let Some((dir, dir_key, top)) = pending.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if is_absent(&e) => continue,
                Err(e) => return Err(Error::io(prefix, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| Error::io(prefix, e))?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue; // not a key this store wrote
                };
                if top && !name.starts_with(name_prefix) {
                    continue;
                }
                let key = if dir_key.is_empty() {
                    name
                } else {
                    format!("{dir_key}/{name}")
                };
                let servers = key == crate::SERVER_PREFIX.trim_end_matches('/')
                    || key.starts_with(crate::SERVER_PREFIX);
                if key.starts_with(crate::RESERVED_PREFIX) && !servers {
                    continue; // .gitstow-tmp, .gitstow-locks
                }
                let file_type = match entry.file_type() {
                    Ok(t) => t,
                    Err(e) if is_absent(&e) => continue,
                    Err(e) => return Err(Error::io(prefix, e)),
                };
                if file_type.is_dir() {
                    pending.push((entry.path(), key, false));
                } else if file_type.is_file() && key.starts_with(prefix) {
                    keys.push(key);
                }
            }
        }
        keys.sort_unstable();
        Ok(keys)
    }

    fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        self.forget_open(key);
        self.check_root("delete", key)?;
        let _lock = KeyLock::acquire(&self.root.join(LOCK_DIR), key)?;
        let path = self.object_path(key)?;
        match fs::remove_file(&path) {
            Ok(()) => {
                self.prune_empty_dirs(path.parent());
                Ok(())
            }
            Err(e) if is_absent(&e) || e.kind() == ErrorKind::IsADirectory => Ok(()),
            Err(e) => Err(Error::io(key, e)),
        }
    }
}

/// An exclusive lock on one key, held from [`KeyLock::acquire`] until drop.
///
/// The lock file is `<locks>/<hex sha256(key)>`, locked with
/// [`File::lock`] (`flock`), which excludes other processes and other open
/// file descriptions in this process alike. The holder unlinks the file
/// before unlocking, so lock files do not pile up; a waiter that then gets
/// the lock on the unlinked inode notices (the path no longer names its
/// inode) and starts over on a fresh file. Hence whoever holds a lock on the
/// inode the path currently names holds the key.
struct KeyLock {
    file: File,
    path: PathBuf,
}

impl KeyLock {
    fn acquire(lock_dir: &Path, key: &str) -> Result<KeyLock> {
        let path = lock_dir.join(hex::encode(Sha256::digest(key.as_bytes())));
        loop {
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
            {
                Ok(file) => file,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    fs::create_dir_all(lock_dir).map_err(|e| Error::io(key, e))?;
                    continue;
                }
                Err(e) => return Err(Error::io(key, e)),
            };
            file.lock().map_err(|e| Error::io(key, e))?;
            let held = file.metadata().map_err(|e| Error::io(key, e))?;
            match fs::metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    return Ok(KeyLock { file, path });
                }
                // The previous holder unlinked it; try again on a fresh file.
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(key, e)),
            }
        }
    }
}

impl Drop for KeyLock {
    fn drop(&mut self) {
        // Unlink first, unlock second: see the type's docs.
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Whether `e` means "no object there": missing, or a path through a file.
fn is_absent(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// Makes `buf` (empty) `len` zero bytes long for a read to fill: a fresh
/// buffer is allocated zeroed (calloc, no pass over it), a reused one is
/// zeroed in place.
pub(crate) fn fill_zeroed(buf: &mut Vec<u8>, len: usize) {
    if buf.capacity() < len {
        *buf = vec![0; len];
    } else {
        buf.resize(len, 0);
    }
}

/// The etag of content with SHA-256 `digest`.
fn etag_of(digest: impl AsRef<[u8]>) -> ETag {
    ETag(hex::encode(digest))
}

/// Stream `r` to its end; returns its etag and length in bytes.
fn hash_reader(mut r: impl Read) -> io::Result<(ETag, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0; COPY_BUF_LEN];
    let mut len = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        len += n as u64;
    }
    Ok((etag_of(hasher.finalize()), len))
}

#[cfg(test)]
mod tests;
