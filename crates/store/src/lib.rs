//! The object-storage layer of gitstow: bytes in and out of a bucket.
//!
//! A *store* is a flat bucket of immutable-per-version objects addressed by
//! `/`-separated keys (see [`validate_key`]), the shape of an S3 bucket. This
//! crate owns the [`ObjectStore`] trait and its backends; it knows nothing of
//! git. The `odb` crate above it decides what the keys and bytes mean.
//!
//! # Data flow
//!
//! [`open`] turns a store URL (`file:///srv/git`, a plain path,
//! `s3://bucket/prefix`) into an `Arc<dyn ObjectStore>`; [`open_with`]
//! takes explicit [`S3Options`] too. Writers hand it bytes
//! ([`ObjectStore::put`]) or a finished local file
//! ([`ObjectStore::put_file`], streamed) and get back the new object's
//! [`ETag`]. Readers fetch whole objects ([`ObjectStore::get`]) or byte
//! ranges of them ([`ObjectStore::get_range`]), or only their
//! [`ObjectMeta`] ([`ObjectStore::head`]).
//!
//! The one coordination primitive is the conditional put: a
//! [`PutCondition`] of [`IfAbsent`](PutCondition::IfAbsent) or
//! [`IfMatch`](PutCondition::IfMatch) makes `put` a compare-and-swap that
//! either installs the new bytes or fails with
//! [`Error::PreconditionFailed`] and changes nothing. gitstow commits a push
//! with exactly one such put of the repository's state object; many servers,
//! threads or processes may race on it and exactly one wins each round.
//!
//! # Backends
//!
//! - [`FsStore`]: the embedded default, one local directory with one file
//!   per key; atomic writes (temp file + `rename`), SHA-256 etags, and
//!   conditional puts serialised by a per-key `flock` so they are safe across
//!   processes sharing the directory. Unix only.
//! - [`S3Store`]: a bucket and key prefix on AWS S3 or an S3-compatible
//!   server (Ceph RGW, MinIO, …) through `aws-sdk-s3`: conditional puts with
//!   `If-None-Match`/`If-Match` (and the servers' ETag quirks handled),
//!   multipart uploads of large files, retries with backoff, request
//!   counters ([`S3Stats`]).
//!
//! [`CachedStore`] wraps any store with a size-bounded local disk cache of
//! immutable objects (gitstow's content-addressed containers), so repeated
//! ranged reads of them cost a `pread` instead of a request.
//! [`ObjectStore::metrics`] reports what a store counted
//! ([`StoreMetrics`]).
//!
//! # Example
//!
//! ```
//! use gitstow_store::{open, Error, PutCondition};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = open(dir.path().to_str().unwrap()).unwrap();
//! let v1 = store.put("repo/state", b"one", PutCondition::IfAbsent).unwrap();
//! let v2 = store.put("repo/state", b"two", PutCondition::IfMatch(v1.clone())).unwrap();
//! // A writer still holding v1 loses the race.
//! let stale = store.put("repo/state", b"three", PutCondition::IfMatch(v1));
//! assert!(matches!(stale, Err(Error::PreconditionFailed { .. })));
//! assert_eq!(store.get("repo/state").unwrap(), Some((b"two".to_vec(), v2)));
//! assert_eq!(store.get_range("repo/state", 1..3).unwrap(), b"wo");
//! assert_eq!(store.list("repo/").unwrap(), vec!["repo/state".to_string()]);
//! ```
#![deny(missing_docs)]

use std::fmt;
use std::fs::File;
use std::io::{Seek, Write};
use std::ops::Range;
use std::path::Path;

mod cache;
mod error;
pub mod fault;
mod fs;
mod key;
mod open;
mod retry;
mod s3;
pub mod scratch;
mod stats;

pub use cache::{default_cache_dir, CachedStore};
pub use error::{is_out_of_space, is_unavailable, Error, Result, ServerFault};
pub use fs::{FsStore, STALE_AFTER as FS_STALE_AFTER};
pub use key::{validate_key, MAX_KEY_LEN, RESERVED_PREFIX, SERVER_PREFIX};
pub use open::{local_root, open, open_with};
pub use s3::{is_s3_url, S3Config, S3Options, S3Stats, S3Store};
pub use stats::{CacheStats, RequestStats, StoreMetrics};

/// An entity tag: an opaque version string of one stored object.
///
/// Two etags of the same key are equal exactly when the content is (for
/// [`FsStore`] it is the lowercase hex SHA-256 of the content; for
/// [`S3Store`] it is S3's `ETag` without the surrounding quotes — there a
/// multipart upload's ETag differs from a single PUT's of the same bytes).
/// Compare them, hand them back in [`PutCondition::IfMatch`]; do not parse
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ETag(pub String);

impl fmt::Display for ETag {
    /// Writes the tag's string verbatim.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Metadata of a stored object, as returned by [`ObjectStore::head`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Size of the object in bytes.
    pub size: u64,
    /// The object's current version.
    pub etag: ETag,
}

/// Condition attached to a [`ObjectStore::put`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PutCondition {
    /// Unconditional overwrite.
    None,
    /// Only if no object exists at the key (S3 `If-None-Match: *`).
    IfAbsent,
    /// Only if the current object's etag equals this one (S3 `If-Match`).
    /// Fails when the object is absent.
    IfMatch(ETag),
}

/// What [`ObjectStore::get_if_none_match`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfNoneMatch {
    /// The object is still at the given version.
    Unchanged,
    /// The object changed: its bytes and new [`ETag`].
    Changed(Vec<u8>, ETag),
    /// There is no object at the key.
    Absent,
}

impl IfNoneMatch {
    /// The answer for what a plain read `got`, asked unless at `etag`.
    pub fn of(got: Option<(Vec<u8>, ETag)>, etag: &ETag) -> IfNoneMatch {
        match got {
            None => IfNoneMatch::Absent,
            Some((_, current)) if same_etag(&current, etag) => IfNoneMatch::Unchanged,
            Some((data, current)) => IfNoneMatch::Changed(data, current),
        }
    }
}

/// Whether two etags name the same version, ignoring HTTP quoting.
pub fn same_etag(a: &ETag, b: &ETag) -> bool {
    s3::etag::same(a, b)
}

/// A request a client may make to the store on its own, without
/// credentials: [`ObjectStore::presign`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presigned {
    /// `GET` or `PUT`.
    pub method: &'static str,
    /// The URL, its signature in the query.
    pub url: String,
    /// Headers the client must send with it (signed: another value fails).
    pub headers: Vec<(String, String)>,
    /// How long it stays valid (at most what was asked, and never past
    /// the expiry of the credentials that signed it).
    pub expires_in: std::time::Duration,
}

/// What [`ObjectStore::presign`] signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PresignRequest<'a> {
    /// A download of the object at `key`.
    Get {
        /// The key.
        key: &'a str,
    },
    /// An upload of exactly `size` bytes whose SHA-256 is `sha256` to
    /// `key` (the checksum signed as `x-amz-checksum-sha256`: a server that
    /// checks checksums refuses other bytes; one that does not stores them,
    /// and [`ObjectStore::sha256`] then answers `None`).
    Put {
        /// The key.
        key: &'a str,
        /// Bytes the upload carries.
        size: u64,
        /// Their SHA-256.
        sha256: [u8; 32],
    },
}

impl PresignRequest<'_> {
    /// The key the request is for.
    pub fn key(&self) -> &str {
        match self {
            PresignRequest::Get { key } | PresignRequest::Put { key, .. } => key,
        }
    }
}

/// A bucket of objects addressed by `/`-separated keys.
///
/// Synchronous: callers on an async runtime run it on blocking threads.
/// Implementations are `Send + Sync` and may be shared behind an `Arc`.
///
/// Every method that takes a key first checks it with [`validate_key`] and
/// returns [`Error::InvalidKey`] if it breaks a rule. Every write is atomic:
/// a reader sees the old object or the new one, never a mixture or a prefix.
/// Backend failures surface as [`Error::Io`] (local I/O) or
/// [`Error::Backend`] (a remote store, after its retries). No method panics
/// on bad input.
pub trait ObjectStore: Send + Sync + fmt::Debug {
    /// Store `data` at `key` under `condition` and return the new [`ETag`].
    ///
    /// # Errors
    /// [`Error::PreconditionFailed`] when `condition` does not hold at the
    /// moment of the write (checked and applied atomically); nothing is
    /// written then.
    fn put(&self, key: &str, data: &[u8], condition: PutCondition) -> Result<ETag>;

    /// Upload the finished local file at `path` to `key`, unconditionally,
    /// and return its [`ETag`]. The file is streamed, never held whole in
    /// memory. It must not change in place after the call (the local store
    /// may hard-link it); deleting or replacing it is fine.
    ///
    /// # Errors
    /// [`Error::Io`] (carrying `key`) also when `path` cannot be read.
    fn put_file(&self, key: &str, path: &Path) -> Result<ETag>;

    /// The whole object at `key` with its [`ETag`]; `Ok(None)` when absent.
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>>;

    /// Bytes `range` (half-open, in bytes from the start of the object) of
    /// the object at `key`. An empty range (`n..n` with `n <= size`) returns
    /// no bytes.
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no object at `key`;
    /// [`Error::InvalidRange`] if `range.start > range.end` or
    /// `range.end > size`.
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>>;

    /// [`ObjectStore::get_range`] into `buf` (cleared first), so that a
    /// caller reading many ranges fills one buffer instead of allocating
    /// one per range. The default calls `get_range` and replaces `buf`
    /// with what it returns (an allocation per call); a store that reads
    /// from a local file, and a wrapper of one, override it.
    ///
    /// # Errors
    /// As [`ObjectStore::get_range`]; `buf` is left empty.
    fn get_range_into(&self, key: &str, range: Range<u64>, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        *buf = self.get_range(key, range)?;
        Ok(())
    }

    /// Size and [`ETag`] of the object at `key`; `Ok(None)` when absent.
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>>;

    /// Like [`ObjectStore::head`], but asked of the store itself, never of
    /// a local copy: whether the object is there now. A writer checks with
    /// it that an upload of its own was not deleted meanwhile (a cache in
    /// front of the store still holds what this process uploaded).
    fn head_in_store(&self, key: &str) -> Result<Option<ObjectMeta>> {
        self.head(key)
    }

    /// Every key that starts with `prefix`, sorted ascending (byte order).
    ///
    /// `prefix` is a plain string prefix, not a directory: `"repo/con"`
    /// matches `"repo/containers/x.bin"` and `"repo/config"`, and the listing
    /// is recursive. `""` lists the whole store. A prefix no valid key can
    /// start with yields an empty list, not an error.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Remove the object at `key`. Removing an absent object is not an
    /// error.
    fn delete(&self, key: &str) -> Result<()>;

    /// Write the whole object at `key` into `file` and return its size and
    /// [`ETag`]; `Ok(None)` when absent. `file` is truncated first, and
    /// again before any retry, so on success it holds exactly the object.
    ///
    /// The default reads the object into memory with [`ObjectStore::get`];
    /// backends that can stream ([`S3Store`]) override it, so a download
    /// into a local cache never holds a large object in memory.
    ///
    /// # Errors
    /// As [`ObjectStore::get`]; [`Error::Io`] when `file` cannot be written.
    fn get_to_file(&self, key: &str, file: &mut File) -> Result<Option<ObjectMeta>> {
        let Some((data, etag)) = self.get(key)? else {
            return Ok(None);
        };
        file.set_len(0).map_err(|e| Error::io(key, e))?;
        file.rewind().map_err(|e| Error::io(key, e))?;
        file.write_all(&data).map_err(|e| Error::io(key, e))?;
        Ok(Some(ObjectMeta {
            size: data.len() as u64,
            etag,
        }))
    }

    /// The object at `key` unless its version is still `etag`
    /// (HTTP's `If-None-Match`): a reader that keeps what it decoded from
    /// a version asks only for newer bytes. The default reads the object
    /// and compares; [`S3Store`] sends the condition, so an unchanged
    /// object costs a `304 Not Modified` instead of its transfer.
    ///
    /// # Errors
    /// As [`ObjectStore::get`].
    fn get_if_none_match(&self, key: &str, etag: &ETag) -> Result<IfNoneMatch> {
        Ok(IfNoneMatch::of(self.get(key)?, etag))
    }

    /// Drops a local copy of `key` that a reader found damaged (an index
    /// whose checksum fails), so that the next read asks the store itself.
    /// The default (a store without local copies) does nothing.
    fn discard_local_copy(&self, key: &str) {
        let _ = key;
    }

    /// A request on `request`'s key that a client can make itself, valid
    /// for at most `ttl`; `None` when this store cannot sign one (the
    /// default: [`FsStore`] has no URL of its own) or the credentials that
    /// would sign it expire too soon.
    ///
    /// # Errors
    /// The key is invalid, or signing failed.
    fn presign(
        &self,
        request: PresignRequest<'_>,
        ttl: std::time::Duration,
    ) -> Result<Option<Presigned>> {
        validate_key(request.key())?;
        let _ = ttl;
        Ok(None)
    }

    /// Copies the object at `from` to `to` (unconditionally) and returns the
    /// copy's [`ETag`]. The default streams it through a temp file;
    /// [`S3Store`] asks the server to copy (CopyObject), so no byte passes
    /// through the caller.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `from` is absent; as the reads and writes.
    fn copy(&self, from: &str, to: &str) -> Result<ETag> {
        validate_key(to)?;
        let mut tmp = tempfile::NamedTempFile::new().map_err(|e| Error::io(from, e))?;
        if self.get_to_file(from, tmp.as_file_mut())?.is_none() {
            return Err(Error::NotFound {
                key: from.to_owned(),
            });
        }
        self.put_file(to, tmp.path())
    }

    /// The SHA-256 of the object at `key` as the store itself checked it
    /// when it was written (S3's `x-amz-checksum-sha256`), or `None` when
    /// the store keeps none for it (the default; a server without checksum
    /// support) or it is absent.
    ///
    /// # Errors
    /// As [`ObjectStore::head`].
    fn sha256(&self, key: &str) -> Result<Option<[u8; 32]>> {
        validate_key(key)?;
        Ok(None)
    }

    /// What the store counted about its own work, for `/metrics`. The
    /// default (and [`FsStore`]) counts nothing.
    fn metrics(&self) -> StoreMetrics {
        StoreMetrics::default()
    }
}
