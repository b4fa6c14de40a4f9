//! A size-bounded local disk cache of immutable objects in front of any
//! store.
//!
//! gitstow's containers (`<repo>/containers/<id>.bin` and `.idx`) are named
//! by their content hash, so once written they never change: a server can
//! keep a copy on local disk and serve ranged reads from it with `pread`
//! instead of one ranged GET per read. [`CachedStore`] does that for the keys
//! its `immutable` predicate accepts and passes every other key (the mutable
//! `state` objects) straight through.
//!
//! # Layout of the cache directory
//!
//! ```text
//! <dir>/<sha256(key) hex>.<etag hex>   one whole object per file
//! <dir>/.tmp-*                         downloads in flight (removed at start)
//! ```
//!
//! The ETag is part of the file name so a cache directory survives a
//! restart: [`CachedStore::new`] adopts the files it finds (oldest first in
//! the eviction order, by modification time). One directory belongs to one
//! store (bucket and prefix) and one process; the server derives a default
//! per store URL with [`default_cache_dir`].

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Seek};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

mod dir;

pub use dir::{claim_dir, default_cache_dir, private_dir};

use crate::stats::{CacheStats, StoreMetrics};
use crate::{validate_key, ETag, Error, ObjectMeta, ObjectStore, PutCondition, Result};

/// Prefix of temp files of downloads in flight.
const TMP_PREFIX: &str = ".tmp-";
/// The longest hex-encoded ETag kept in a file name (names stay < 255 bytes).
const MAX_ETAG_HEX: usize = 180;
/// How many "too large to cache" keys are remembered before the list is reset.
const MAX_OVERSIZED: usize = 4096;

/// An [`ObjectStore`] that keeps whole copies of immutable objects on local
/// disk, at most `max_bytes` of them.
///
/// For a key where `immutable(key)` is true:
///
/// - [`get`](ObjectStore::get) and [`get_range`](ObjectStore::get_range)
///   serve the object from its local file. On the first read the object is
///   downloaded whole (one HEAD for its size, one GET streamed to a temp file
///   that is then renamed into place); two threads reading the same
///   uncached key at once may both download it, harmlessly. An object larger
///   than `max_bytes` is never cached: reads go to the inner store.
/// - [`head`](ObjectStore::head) answers from the cache when the object is
///   there, else asks the inner store (a HEAD does not download).
/// - [`put`](ObjectStore::put) and [`put_file`](ObjectStore::put_file) write
///   to the inner store and then copy the data into the cache, since a
///   server that writes a container usually reads it soon.
/// - [`delete`](ObjectStore::delete) deletes in the inner store and drops
///   the local copy.
///
/// Every other key, and [`list`](ObjectStore::list), goes straight to the
/// inner store.
///
/// When the cached bytes exceed `max_bytes`, the least recently used objects
/// are deleted until they fit again. (Downloads in flight are not counted,
/// so the directory may briefly hold more.) A reader that has a file open
/// keeps reading it after its eviction.
///
/// Failures of the cache itself (full disk, unwritable directory) never
/// fail a read: they are logged and the read goes to the inner store.
/// Errors of the inner store are returned as they are.
pub struct CachedStore {
    inner: Arc<dyn ObjectStore>,
    dir: PathBuf,
    max_bytes: u64,
    immutable: fn(&str) -> bool,
    index: Mutex<Index>,
    hits: AtomicU64,
    misses: AtomicU64,
    read_through: AtomicU64,
    populated: AtomicU64,
    evictions: AtomicU64,
    bytes_downloaded: AtomicU64,
    /// Whether `dir` is private to this user ([`private_dir`]); if not,
    /// nothing is cached there nor read from it.
    private: bool,
    /// The `flock` that makes `dir` this process's (see [`claim_dir`]).
    _claim: Option<File>,
}

impl std::fmt::Debug for CachedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedStore")
            .field("inner", &self.inner)
            .field("dir", &self.dir)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

/// What is in the cache directory.
#[derive(Default)]
struct Index {
    /// By [`key_name`].
    entries: HashMap<String, Entry>,
    /// Sum of `entries[*].size`.
    total: u64,
    /// Ticks on every use; `Entry::last_used` is a tick.
    clock: u64,
    /// Keys known to be larger than the cache, with their size.
    oversized: HashMap<String, u64>,
}

struct Entry {
    path: PathBuf,
    size: u64,
    etag: ETag,
    last_used: u64,
    /// Whether the store was asked that this copy's size and ETag are the
    /// object's: files adopted from the directory at start are not, until
    /// their first read (a file cut short or replaced while no process
    /// held the directory is dropped then, not served).
    verified: bool,
}

/// How an immutable key can be read.
enum Lookup {
    /// From this local file (a whole copy).
    Local { file: File, size: u64, etag: ETag },
    /// Only from the inner store.
    Remote,
    /// Nowhere: the inner store has no such object.
    Absent,
}

impl CachedStore {
    /// A cache of at most `max_bytes` in `dir` (created if missing) in front
    /// of `inner`, for the keys `immutable` accepts.
    ///
    /// Files left in `dir` by an earlier run are adopted (and evicted down to
    /// `max_bytes`); temp files of interrupted downloads are removed. If
    /// `dir` cannot be created, the store still works, reading through. If
    /// another live process uses `dir`, this one takes `dir-1` (or the next
    /// free one: see [`claim_dir`]); [`CachedStore::dir`] says which.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        dir: PathBuf,
        max_bytes: u64,
        immutable: fn(&str) -> bool,
    ) -> Self {
        let (dir, claim) = claim_dir(&dir);
        // Files there are trusted as the store's objects: only in a
        // directory no one else can write to.
        let private = match private_dir(&dir) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "the cache directory is not private to this user; reading through");
                false
            }
        };
        let store = CachedStore {
            private,
            _claim: claim,
            inner,
            dir,
            max_bytes,
            immutable,
            index: Mutex::new(Index::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            read_through: AtomicU64::new(0),
            populated: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            bytes_downloaded: AtomicU64::new(0),
        };
        if private {
            store.adopt_existing();
        }
        store
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The store behind the cache.
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// The cache's counters so far, and its current size.
    pub fn cache_stats(&self) -> CacheStats {
        let (objects, bytes) = {
            let index = self.lock();
            (index.entries.len() as u64, index.total)
        };
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheStats {
            hits: l(&self.hits),
            misses: l(&self.misses),
            read_through: l(&self.read_through),
            populated: l(&self.populated),
            evictions: l(&self.evictions),
            bytes_downloaded: l(&self.bytes_downloaded),
            objects,
            bytes,
            max_bytes: self.max_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Index> {
        // The index stays consistent even if a holder panicked mid-update
        // (worst case a count is off until the entry is evicted).
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Index the object files already in the directory.
    fn adopt_existing(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if name.starts_with(TMP_PREFIX) {
                let _ = fs::remove_file(&path);
                continue;
            }
            let Some((key_name, etag)) = parse_file_name(&name) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let mtime = meta.modified().ok();
            found.push((mtime, key_name, etag, meta.len(), path));
        }
        found.sort_by_key(|f| f.0);
        let victims = {
            let mut index = self.lock();
            for (_, key_name, etag, size, path) in found {
                index.clock += 1;
                let last_used = index.clock;
                if let Some(old) = index.entries.insert(
                    key_name,
                    Entry {
                        path,
                        size,
                        etag,
                        last_used,
                        verified: false,
                    },
                ) {
                    // Two files for one key (two ETags): keep the newer.
                    index.total -= old.size;
                    let _ = fs::remove_file(&old.path);
                }
                index.total += size;
            }
            self.evict(&mut index, None)
        };
        self.remove_files(victims);
    }

    /// Pick least recently used entries to delete until the total fits;
    /// `keep` is never picked. Returns the files to delete (outside the lock).
    fn evict(&self, index: &mut Index, keep: Option<&str>) -> Vec<PathBuf> {
        if index.total <= self.max_bytes {
            return Vec::new();
        }
        let mut by_age: Vec<(u64, String)> = index
            .entries
            .iter()
            .filter(|(name, _)| Some(name.as_str()) != keep)
            .map(|(name, e)| (e.last_used, name.clone()))
            .collect();
        by_age.sort_unstable();
        let mut victims = Vec::new();
        for (_, name) in by_age {
            if index.total <= self.max_bytes {
                break;
            }
            if let Some(e) = index.entries.remove(&name) {
                index.total -= e.size;
                victims.push(e.path);
            }
        }
        self.evictions
            .fetch_add(victims.len() as u64, Ordering::Relaxed);
        victims
    }

    fn remove_files(&self, files: Vec<PathBuf>) {
        for path in files {
            if let Err(e) = fs::remove_file(&path) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove an evicted cache file");
                }
            }
        }
    }

    /// Record `file` (already at its final `path`) as the copy of `key`.
    fn insert(&self, key_name: String, path: PathBuf, size: u64, etag: ETag) {
        let victims = {
            let mut index = self.lock();
            index.clock += 1;
            let last_used = index.clock;
            let entry = Entry {
                path: path.clone(),
                size,
                etag,
                last_used,
                verified: true,
            };
            if let Some(old) = index.entries.insert(key_name.clone(), entry) {
                index.total -= old.size;
                if old.path != path {
                    // A different version (ETag) of the same key.
                    let _ = fs::remove_file(&old.path);
                }
            }
            index.total += size;
            self.evict(&mut index, Some(&key_name))
        };
        self.remove_files(victims);
    }

    /// Drop the entry of `key_name` if it still points at `path`.
    fn forget(&self, key_name: &str, path: &Path) {
        let mut index = self.lock();
        if index.entries.get(key_name).is_some_and(|e| e.path == path) {
            if let Some(e) = index.entries.remove(key_name) {
                index.total -= e.size;
            }
        }
    }

    /// A temp file in the cache directory (recreating the directory if it
    /// was removed).
    fn temp_file(&self) -> io::Result<NamedTempFile> {
        if !self.private {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the cache directory is not private to this user",
            ));
        }
        let make = || {
            tempfile::Builder::new()
                .prefix(TMP_PREFIX)
                .tempfile_in(&self.dir)
        };
        match make() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                private_dir(&self.dir)?;
                make()
            }
            other => other,
        }
    }

    /// Where the copy of `key` with `etag` lives; `None` if the ETag is too
    /// long to be part of a file name.
    fn object_path(&self, key_name: &str, etag: &ETag) -> Option<PathBuf> {
        file_name(key_name, etag).map(|name| self.dir.join(name))
    }

    /// Find or fetch the local copy of immutable `key`.
    fn lookup(&self, key: &str) -> Result<Lookup> {
        let key_name = key_name(key);
        let cached = {
            let mut index = self.lock();
            index.clock += 1;
            let now = index.clock;
            index.entries.get_mut(&key_name).map(|e| {
                e.last_used = now;
                (e.path.clone(), e.size, e.etag.clone(), e.verified)
            })
        };
        if let Some((path, size, etag, verified)) = cached {
            if !verified && !self.adopted_copy_holds(key, &key_name, &path, size, &etag)? {
                return self.lookup_uncached(key, key_name);
            }
            match File::open(&path) {
                Ok(file) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(Lookup::Local { file, size, etag });
                }
                // Evicted (or removed by hand) since we looked: fetch again.
                Err(e) if e.kind() == io::ErrorKind::NotFound => self.forget(&key_name, &path),
                Err(e) => {
                    tracing::warn!(key, error = %e, "cannot open a cached object; reading through");
                    self.read_through.fetch_add(1, Ordering::Relaxed);
                    return Ok(Lookup::Remote);
                }
            }
        }
        self.lookup_uncached(key, key_name)
    }

    /// Whether the adopted file `path` is the object `key` (its size and
    /// ETag are the store's); if not, it is dropped. One HEAD, once per
    /// adopted file.
    fn adopted_copy_holds(
        &self,
        key: &str,
        key_name: &str,
        path: &Path,
        size: u64,
        etag: &ETag,
    ) -> Result<bool> {
        let on_disk = fs::symlink_metadata(path).ok();
        let meta = self.inner.head(key)?;
        let holds = meta
            .as_ref()
            .is_some_and(|m| m.size == size && &m.etag == etag)
            && on_disk.is_some_and(|d| d.is_file() && d.len() == size);
        if holds {
            if let Some(e) = self.lock().entries.get_mut(key_name) {
                if e.path == path {
                    e.verified = true;
                }
            }
        } else {
            tracing::warn!(key, file = %path.display(), "a cached copy found at start is not the stored object (size or version); dropped");
            self.forget(key_name, path);
            let _ = fs::remove_file(path);
        }
        Ok(holds)
    }

    /// Finds `key` (not cached) in the inner store and downloads it.
    fn lookup_uncached(&self, key: &str, key_name: String) -> Result<Lookup> {
        if self.lock().oversized.contains_key(key) {
            self.read_through.fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::Remote);
        }
        let Some(meta) = self.inner.head(key)? else {
            return Ok(Lookup::Absent);
        };
        if meta.size > self.max_bytes {
            let mut index = self.lock();
            if index.oversized.len() >= MAX_OVERSIZED {
                index.oversized.clear();
            }
            index.oversized.insert(key.to_owned(), meta.size);
            drop(index);
            self.read_through.fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::Remote);
        }
        self.download(key, key_name)
    }

    /// Download `key` whole into the cache.
    fn download(&self, key: &str, key_name: String) -> Result<Lookup> {
        let mut tmp = match self.temp_file() {
            Ok(tmp) => tmp,
            Err(e) => return Ok(self.cache_failed(key, "create a temp file", &e)),
        };
        let Some(meta) = self.inner.get_to_file(key, tmp.as_file_mut())? else {
            return Ok(Lookup::Absent);
        };
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.bytes_downloaded
            .fetch_add(meta.size, Ordering::Relaxed);
        let Some(path) = self.object_path(&key_name, &meta.etag) else {
            self.read_through.fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::Remote);
        };
        let file = match tmp.persist(&path) {
            Ok(file) => file,
            Err(e) => return Ok(self.cache_failed(key, "rename a download into place", &e.error)),
        };
        if meta.size > self.max_bytes {
            // Grew past the bound since the HEAD (it should not: immutable).
            let _ = fs::remove_file(&path);
        } else {
            self.insert(key_name, path, meta.size, meta.etag.clone());
        }
        Ok(Lookup::Local {
            file,
            size: meta.size,
            etag: meta.etag,
        })
    }

    fn cache_failed(&self, key: &str, what: &str, e: &io::Error) -> Lookup {
        tracing::warn!(key, dir = %self.dir.display(), error = %e, "cache cannot {what}; reading through");
        self.read_through.fetch_add(1, Ordering::Relaxed);
        Lookup::Remote
    }

    /// Copy written data into the cache; failures are only logged.
    fn populate(&self, key: &str, etag: &ETag, fill: impl FnOnce(&mut File) -> io::Result<u64>) {
        let key_name = key_name(key);
        let Some(path) = self.object_path(&key_name, etag) else {
            return;
        };
        let result = (|| {
            let mut tmp = self.temp_file()?;
            let size = fill(tmp.as_file_mut())?;
            tmp.persist(&path).map_err(|e| e.error)?;
            Ok::<_, io::Error>(size)
        })();
        match result {
            Ok(size) => {
                self.populated.fetch_add(1, Ordering::Relaxed);
                self.insert(key_name, path, size, etag.clone());
            }
            Err(e) => {
                tracing::warn!(key, error = %e, "cannot copy a written object into the cache");
            }
        }
    }

    /// Remove the local copy of `key`, if any.
    fn drop_local(&self, key: &str) {
        let key_name = key_name(key);
        let removed = {
            let mut index = self.lock();
            index.oversized.remove(key);
            index.entries.remove(&key_name).map(|e| {
                index.total -= e.size;
                e.path
            })
        };
        if let Some(path) = removed {
            let _ = fs::remove_file(path);
        }
    }
}

impl ObjectStore for CachedStore {
    fn put(&self, key: &str, data: &[u8], condition: PutCondition) -> Result<ETag> {
        let etag = self.inner.put(key, data, condition)?;
        if (self.immutable)(key) && data.len() as u64 <= self.max_bytes {
            self.populate(key, &etag, |f| {
                io::Write::write_all(f, data)?;
                Ok(data.len() as u64)
            });
        }
        Ok(etag)
    }

    fn put_file(&self, key: &str, path: &Path) -> Result<ETag> {
        let etag = self.inner.put_file(key, path)?;
        if (self.immutable)(key) {
            let fits = fs::metadata(path).is_ok_and(|m| m.len() <= self.max_bytes);
            if fits {
                self.populate(key, &etag, |f| io::copy(&mut File::open(path)?, f));
            }
        }
        Ok(etag)
    }

    fn get_if_none_match(&self, key: &str, etag: &ETag) -> Result<crate::IfNoneMatch> {
        // Mutable objects (the state) are never cached: the backend answers.
        if !(self.immutable)(key) {
            return self.inner.get_if_none_match(key, etag);
        }
        Ok(crate::IfNoneMatch::of(self.get(key)?, etag))
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        if !(self.immutable)(key) {
            return self.inner.get(key);
        }
        validate_key(key)?;
        match self.lookup(key)? {
            Lookup::Local { file, size, etag } => {
                let mut data = vec![0; size as usize];
                file.read_exact_at(&mut data, 0)
                    .map_err(|e| Error::io(key, e))?;
                Ok(Some((data, etag)))
            }
            Lookup::Remote => self.inner.get(key),
            Lookup::Absent => Ok(None),
        }
    }

    fn get_to_file(&self, key: &str, out: &mut File) -> Result<Option<ObjectMeta>> {
        if !(self.immutable)(key) {
            return self.inner.get_to_file(key, out);
        }
        validate_key(key)?;
        match self.lookup(key)? {
            Lookup::Local {
                mut file,
                size,
                etag,
            } => {
                file.rewind().map_err(|e| Error::io(key, e))?;
                io::copy(&mut (&mut file).take(size), out).map_err(|e| Error::io(key, e))?;
                Ok(Some(ObjectMeta { size, etag }))
            }
            Lookup::Remote => self.inner.get_to_file(key, out),
            Lookup::Absent => Ok(None),
        }
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.get_range_into(key, range, &mut buf)?;
        Ok(buf)
    }

    fn get_range_into(&self, key: &str, range: Range<u64>, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        if !(self.immutable)(key) {
            return self.inner.get_range_into(key, range, buf);
        }
        validate_key(key)?;
        match self.lookup(key)? {
            Lookup::Local { file, size, .. } => {
                if range.start > range.end || range.end > size {
                    return Err(Error::InvalidRange {
                        key: key.to_owned(),
                        start: range.start,
                        end: range.end,
                        size,
                    });
                }
                crate::fs::fill_zeroed(buf, (range.end - range.start) as usize);
                if let Err(e) = file.read_exact_at(buf, range.start) {
                    buf.clear();
                    return Err(Error::io(key, e));
                }
                Ok(())
            }
            Lookup::Remote => self.inner.get_range_into(key, range, buf),
            Lookup::Absent => Err(Error::NotFound {
                key: key.to_owned(),
            }),
        }
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        if (self.immutable)(key) {
            validate_key(key)?;
            let index = self.lock();
            if let Some(e) = index.entries.get(&key_name(key)) {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(ObjectMeta {
                    size: e.size,
                    etag: e.etag.clone(),
                }));
            }
        }
        self.inner.head(key)
    }

    fn head_in_store(&self, key: &str) -> Result<Option<ObjectMeta>> {
        self.inner.head_in_store(key)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)?;
        if (self.immutable)(key) {
            self.drop_local(key);
        }
        Ok(())
    }

    fn presign(
        &self,
        request: crate::PresignRequest<'_>,
        ttl: std::time::Duration,
    ) -> Result<Option<crate::Presigned>> {
        self.inner.presign(request, ttl)
    }

    fn copy(&self, from: &str, to: &str) -> Result<ETag> {
        self.inner.copy(from, to)
    }

    fn sha256(&self, key: &str) -> Result<Option<[u8; 32]>> {
        self.inner.sha256(key)
    }

    fn discard_local_copy(&self, key: &str) {
        if (self.immutable)(key) {
            tracing::warn!(
                key,
                "a cached copy failed its check; dropped, read again from the store"
            );
            self.drop_local(key);
        }
    }

    fn metrics(&self) -> StoreMetrics {
        StoreMetrics {
            requests: self.inner.metrics().requests,
            cache: Some(self.cache_stats()),
        }
    }
}

/// The file-name stem of `key`'s copy: hex SHA-256 of the key.
fn key_name(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// `<key name>.<etag hex>`; `None` if the ETag is too long for a file name.
fn file_name(key_name: &str, etag: &ETag) -> Option<String> {
    let etag_hex = hex::encode(etag.0.as_bytes());
    (etag_hex.len() <= MAX_ETAG_HEX).then(|| format!("{key_name}.{etag_hex}"))
}

/// Split `<64 hex>.<etag hex>` into the key name and the ETag.
fn parse_file_name(name: &str) -> Option<(String, ETag)> {
    let (key_name, etag_hex) = name.split_once('.')?;
    if key_name.len() != 64 || !key_name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let etag = String::from_utf8(hex::decode(etag_hex).ok()?).ok()?;
    Some((key_name.to_owned(), ETag(etag)))
}

#[cfg(test)]
mod tests;
