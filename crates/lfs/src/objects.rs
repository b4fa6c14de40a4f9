//! LFS objects in the store: the bytes once per store by oid, a marker per
//! repository that owns them ([`crate::keys`]).
//!
//! A repository owns an object once it has uploaded the bytes itself and
//! they hashed to the oid ([`accept`]); only then may it read them. So an
//! upload of bytes the store already holds for another repository still
//! goes through: that is the proof the uploader has them. All calls block
//! (store I/O): run them off the async runtime.

use std::io::Write;
use std::ops::Range;
use std::path::Path;

use gitstow_store::{ObjectStore, PutCondition};
use sha2::{Digest, Sha256};

use crate::{keys, Oid};

/// Why an object cannot be accepted or read.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The bytes do not hash to the oid they were sent as.
    #[error("the uploaded bytes do not hash to the oid {0}")]
    WrongContent(Oid),
    /// More or fewer bytes than announced.
    #[error("expected {expected} bytes, received {got}")]
    WrongSize {
        /// Bytes announced (in the batch request, bound into the grant).
        expected: u64,
        /// Bytes received.
        got: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] gitstow_store::Error),
}

/// The size `repo`'s marker records for `oid`: `Some` when the repository
/// owns the object.
///
/// # Errors
/// The store failed.
pub fn owned_size(
    store: &dyn ObjectStore,
    repo: &str,
    oid: &Oid,
) -> Result<Option<u64>, gitstow_store::Error> {
    Ok(store
        .get(&keys::owned(repo, oid))?
        .and_then(|(data, _)| Marker::parse(&data))
        .map(|m| m.size))
}

/// What a repository's marker for an object holds: `<size> <created>`
/// (decimal; created in seconds since the epoch; a marker of an earlier
/// build has no time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// The object's size in bytes.
    pub size: u64,
    /// When the repository got the object, if known.
    pub created: Option<u64>,
}

impl Marker {
    /// A marker of `size` bytes made now.
    fn now(size: u64) -> Vec<u8> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{size} {now}").into_bytes()
    }

    /// Parses a marker's bytes.
    pub fn parse(data: &[u8]) -> Option<Marker> {
        let text = std::str::from_utf8(data).ok()?;
        let mut words = text.split_whitespace();
        let size = words.next()?.parse().ok()?;
        let created = words.next().and_then(|w| w.parse().ok());
        Some(Marker { size, created })
    }
}

/// The size of the stored bytes of `oid`, if stored.
///
/// # Errors
/// The store failed.
pub fn stored_size(
    store: &dyn ObjectStore,
    oid: &Oid,
) -> Result<Option<u64>, gitstow_store::Error> {
    Ok(store.head(&keys::object(oid))?.map(|m| m.size))
}

/// Bytes `range` of the stored bytes of `oid`.
///
/// # Errors
/// The store failed, or `oid` is not stored ([`gitstow_store::Error::NotFound`]).
pub fn read(
    store: &dyn ObjectStore,
    oid: &Oid,
    range: Range<u64>,
) -> Result<Vec<u8>, gitstow_store::Error> {
    store.get_range(&keys::object(oid), range)
}

/// Makes `repo` own `oid` from the file at `path`, whose content was hashed
/// and counted while it was written ([`Hashing`]: `hashed`, `len`): checked
/// against the oid and the `expected` size, uploaded unless the store holds
/// the object already, then the marker written.
///
/// # Errors
/// [`ObjectError::WrongContent`], [`ObjectError::WrongSize`] (nothing
/// written), or the store failed.
pub fn accept(
    store: &dyn ObjectStore,
    repo: &str,
    oid: &Oid,
    expected: u64,
    hashed: (Oid, u64),
    path: &Path,
) -> Result<(), ObjectError> {
    let (got_oid, got_len) = hashed;
    if got_len != expected {
        return Err(ObjectError::WrongSize {
            expected,
            got: got_len,
        });
    }
    if got_oid != *oid {
        return Err(ObjectError::WrongContent(*oid));
    }
    if stored_size(store, oid)? != Some(expected) {
        store.put_file(&keys::object(oid), path)?;
    }
    Ok(claim(store, repo, oid, expected)?)
}

/// Writes `repo`'s claim to `oid` (`size` bytes), dated now: after an
/// upload, or again when an upload the repository has already is about to
/// be named by a push (collection keeps a claim a grace period from its
/// date).
///
/// # Errors
/// The store failed.
pub fn claim(
    store: &dyn ObjectStore,
    repo: &str,
    oid: &Oid,
    size: u64,
) -> Result<(), gitstow_store::Error> {
    store.put(
        &keys::owned(repo, oid),
        &Marker::now(size),
        PutCondition::None,
    )?;
    Ok(())
}

/// Bytes read per step when verify hashes a staged upload itself.
const HASH_CHUNK: u64 = 8 << 20;

/// What [`verify`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    /// The repository owns the object at that size (a staged upload was
    /// checked and kept, or it was uploaded through gitstow before).
    Owned,
    /// Neither a staged upload nor the object owned.
    Missing,
}

/// Verify of `oid` (`size` bytes) for `repo`: a presigned upload staged at
/// `staging` (when the grant names one) is checked — its size, and its
/// SHA-256 as the store checked it or, from a store that keeps none (Ceph
/// RGW 16), by reading it once — then copied to the object's key inside
/// the store (unless there already), the marker written and the staging
/// key deleted; refused bytes are deleted. Without a staged upload, whether
/// the repository owns the object.
///
/// # Errors
/// [`ObjectError::WrongSize`], [`ObjectError::WrongContent`] (the staged
/// upload deleted), or the store failed.
pub fn verify(
    store: &dyn ObjectStore,
    repo: &str,
    oid: &Oid,
    size: u64,
    staging: Option<&str>,
) -> Result<Verified, ObjectError> {
    let staged = match staging {
        Some(key) => store.head(key)?.map(|m| (key, m.size)),
        None => None,
    };
    let Some((key, staged_size)) = staged else {
        let owned =
            owned_size(store, repo, oid)? == Some(size) && stored_size(store, oid)? == Some(size);
        return Ok(if owned {
            Verified::Owned
        } else {
            Verified::Missing
        });
    };
    let refuse = |e: ObjectError| -> Result<Verified, ObjectError> {
        store.delete(key)?;
        Err(e)
    };
    if staged_size != size {
        return refuse(ObjectError::WrongSize {
            expected: size,
            got: staged_size,
        });
    }
    let hashed = match store.sha256(key)? {
        Some(sum) => Oid::from_digest(sum),
        None => {
            let mut hasher = Sha256::new();
            let mut at = 0;
            while at < size {
                let end = size.min(at + HASH_CHUNK);
                hasher.update(store.get_range(key, at..end)?);
                at = end;
            }
            tracing::info!(%oid, size, "LFS: the store keeps no checksum; the upload was read to hash it");
            Oid::from_digest(hasher.finalize().into())
        }
    };
    if hashed != *oid {
        return refuse(ObjectError::WrongContent(*oid));
    }
    if stored_size(store, oid)? != Some(size) {
        store.copy(key, &keys::object(oid))?;
    }
    claim(store, repo, oid, size)?;
    store.delete(key)?;
    Ok(Verified::Owned)
}

/// Drops every marker and the lock document of `repo` (the repository is
/// deleted: a repository made later under its name must not read what it
/// uploaded, nor inherit its locks); returns how many markers. The bytes
/// stay until collection finds no owner.
///
/// # Errors
/// The store failed.
pub fn forget(store: &dyn ObjectStore, repo: &str) -> Result<usize, gitstow_store::Error> {
    let markers = store.list(&keys::owned_prefix(repo))?;
    for k in &markers {
        store.delete(k)?;
    }
    store.delete(&keys::locks(repo))?;
    Ok(markers.len())
}

/// A writer that hashes (SHA-256) and counts what goes through it.
pub struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W> Hashing<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            len: 0,
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The writer, and the oid and length of what was written.
    pub fn finish(self) -> (W, (Oid, u64)) {
        let digest: [u8; 32] = self.hasher.finalize().into();
        (self.inner, (Oid::from_digest(digest), self.len))
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spooled(dir: &Path, bytes: &[u8]) -> (std::path::PathBuf, (Oid, u64)) {
        let path = dir.join("spool");
        let mut w = Hashing::new(std::fs::File::create(&path).unwrap());
        w.write_all(bytes).unwrap();
        let (_, hashed) = w.finish();
        (path, hashed)
    }

    fn oid_of(bytes: &[u8]) -> Oid {
        Oid::from_digest(Sha256::digest(bytes).into())
    }

    #[test]
    fn an_object_is_stored_once_and_owned_per_repository() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path().join("store")).unwrap();
        let bytes = b"large file content".repeat(100);
        let oid = oid_of(&bytes);
        let (path, hashed) = spooled(dir.path(), &bytes);
        accept(&store, "org/a", &oid, bytes.len() as u64, hashed, &path).unwrap();
        assert_eq!(owned_size(&store, "org/a", &oid).unwrap(), Some(1800));
        assert_eq!(owned_size(&store, "org/b", &oid).unwrap(), None);
        assert_eq!(read(&store, &oid, 0..18).unwrap(), b"large file content");
        accept(&store, "org/b", &oid, bytes.len() as u64, hashed, &path).unwrap();
        assert_eq!(owned_size(&store, "org/b", &oid).unwrap(), Some(1800));
        let objects: Vec<String> = store
            .list(".gitstow/lfs/objects/")
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(objects, vec![keys::object(&oid)]);
        assert_eq!(forget(&store, "org/a").unwrap(), 1);
        assert_eq!(owned_size(&store, "org/a", &oid).unwrap(), None);
        assert_eq!(owned_size(&store, "org/b", &oid).unwrap(), Some(1800));
    }

    #[test]
    fn a_staged_upload_is_checked_kept_or_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path().join("store")).unwrap();
        let bytes = b"uploaded straight to the bucket".to_vec();
        let oid = oid_of(&bytes);
        let n = bytes.len() as u64;
        let staged = keys::staging(&oid, "u1");
        // nothing staged, nothing owned
        assert_eq!(
            verify(&store, "r", &oid, n, Some(&staged)).unwrap(),
            Verified::Missing
        );
        // wrong size, then wrong bytes: refused, the staged upload deleted
        store.put(&staged, &bytes[1..], PutCondition::None).unwrap();
        assert!(matches!(
            verify(&store, "r", &oid, n, Some(&staged)),
            Err(ObjectError::WrongSize { .. })
        ));
        let mut wrong = bytes.clone();
        wrong[0] ^= 1;
        store.put(&staged, &wrong, PutCondition::None).unwrap();
        assert!(matches!(
            verify(&store, "r", &oid, n, Some(&staged)),
            Err(ObjectError::WrongContent(_))
        ));
        assert!(store.list("").unwrap().is_empty());
        // the right bytes: kept under the oid, owned, staging gone; verify
        // again (the client retries) still says owned
        store.put(&staged, &bytes, PutCondition::None).unwrap();
        assert_eq!(
            verify(&store, "r", &oid, n, Some(&staged)).unwrap(),
            Verified::Owned
        );
        assert_eq!(read(&store, &oid, 0..n).unwrap(), bytes);
        assert_eq!(owned_size(&store, "r", &oid).unwrap(), Some(n));
        assert_eq!(store.head(&staged).unwrap(), None);
        assert_eq!(
            verify(&store, "r", &oid, n, Some(&staged)).unwrap(),
            Verified::Owned
        );
        assert_eq!(
            verify(&store, "other", &oid, n, None).unwrap(),
            Verified::Missing
        );
    }

    #[test]
    fn wrong_bytes_or_size_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path().join("store")).unwrap();
        let claimed = oid_of(b"what the client announced");
        let (path, hashed) = spooled(dir.path(), b"other bytes");
        assert!(matches!(
            accept(&store, "r", &claimed, 11, hashed, &path),
            Err(ObjectError::WrongContent(_))
        ));
        assert!(matches!(
            accept(&store, "r", &claimed, 12, hashed, &path),
            Err(ObjectError::WrongSize {
                expected: 12,
                got: 11
            })
        ));
        assert!(store.list("").unwrap().is_empty());
    }
}
