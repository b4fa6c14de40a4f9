//! File locks (git-lfs `docs/api/locking.md`): one JSON document per
//! repository, `<repo>.git/lfs/locks` ([`crate::keys::locks`]), changed
//! only by a compare-and-swap on its ETag, as the access document is. A
//! lock names a path of the repository's tree and its owner (the token's
//! name); listing pages by lock id with a cursor.
//!
//! Bounds: a path of at most [`MAX_PATH`] bytes, at most [`MAX_LOCKS`]
//! locks in a repository, [`MAX_TRIES`] attempts of a change against
//! concurrent ones (then [`LockError::Busy`], answered 429).

use std::time::{Duration, UNIX_EPOCH};

use gitstow_store::{ETag, ObjectStore, PutCondition};
use serde::{Deserialize, Serialize};

use crate::keys;

/// Longest lock path, in bytes.
pub const MAX_PATH: usize = 1024;

/// Most locks a repository holds (the document every push reads stays
/// under ~6 MB).
pub const MAX_LOCKS: usize = 5_000;

/// Most locks a listing returns at once (and its default).
pub const MAX_PAGE: usize = 100;

/// The owner name of a lock taken while access control is off (no token).
pub const ANONYMOUS: &str = "anonymous";

/// Attempts of a change that meets concurrent ones before giving up.
pub const MAX_TRIES: usize = 16;

/// The owner of a lock, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The token's name ([`ANONYMOUS`] while access control is off).
    pub name: String,
}

/// A lock, as the API shows it and as the document keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// Its id: 16 hex digits, random.
    pub id: String,
    /// The locked path, relative to the repository's root, `/`-separated.
    pub path: String,
    /// When it was made (RFC 3339, UTC).
    pub locked_at: String,
    /// Who holds it.
    pub owner: Owner,
}

/// The stored document.
#[derive(Debug, Default, Serialize, Deserialize)]
struct LockDoc {
    /// Sorted by id.
    locks: Vec<Lock>,
}

/// Why a lock operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Not a path a lock can name.
    #[error("invalid lock path: {0}")]
    BadPath(&'static str),
    /// The repository has [`MAX_LOCKS`] locks.
    #[error("the repository has {MAX_LOCKS} locks, the most it may hold")]
    TooMany,
    /// Concurrent changes kept winning.
    #[error("too many lock changes at once, try again")]
    Busy,
    /// The stored document does not parse.
    #[error("the lock document is corrupt: {0}")]
    Corrupt(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] gitstow_store::Error),
}

/// What [`create`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// The new lock.
    New(Lock),
    /// The path was locked already, by this lock.
    Exists(Lock),
}

/// What [`unlock`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unlocked {
    /// The lock, now gone.
    Removed(Lock),
    /// No lock has that id.
    NotFound,
    /// Another owner holds it and `force` was not given.
    NotOwner(Lock),
}

/// One page of a listing and the cursor of the next (`None`: the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The locks, by id.
    pub locks: Vec<Lock>,
    /// Where the next page starts.
    pub next_cursor: Option<String>,
}

/// Checks a lock path: not empty, at most [`MAX_PATH`] bytes, relative,
/// no NUL, no `.`/`..` or empty component.
///
/// # Errors
/// [`LockError::BadPath`].
pub fn check_path(path: &str) -> Result<(), LockError> {
    if path.is_empty() {
        return Err(LockError::BadPath("empty"));
    }
    if path.len() > MAX_PATH {
        return Err(LockError::BadPath("longer than 1024 bytes"));
    }
    if path.contains('\0') {
        return Err(LockError::BadPath("a NUL byte"));
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(LockError::BadPath(
            "an empty, '.' or '..' component (paths are relative to the repository's root)",
        ));
    }
    Ok(())
}

fn load(store: &dyn ObjectStore, repo: &str) -> Result<(LockDoc, Option<ETag>), LockError> {
    match store.get(&keys::locks(repo))? {
        None => Ok((LockDoc::default(), None)),
        Some((data, etag)) => {
            let doc =
                serde_json::from_slice(&data).map_err(|e| LockError::Corrupt(e.to_string()))?;
            Ok((doc, Some(etag)))
        }
    }
}

/// Writes `doc` if the document is still at `etag`; `false` when another
/// change came first.
fn store_if(
    store: &dyn ObjectStore,
    repo: &str,
    doc: &LockDoc,
    etag: Option<ETag>,
) -> Result<bool, LockError> {
    let data = serde_json::to_vec(doc).map_err(|e| LockError::Corrupt(e.to_string()))?;
    let condition = match etag {
        Some(e) => PutCondition::IfMatch(e),
        None => PutCondition::IfAbsent,
    };
    match store.put(&keys::locks(repo), &data, condition) {
        Ok(_) => Ok(true),
        Err(gitstow_store::Error::PreconditionFailed { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Every lock of `repo`, by id.
///
/// # Errors
/// The store failed or the document is corrupt.
pub fn all(store: &dyn ObjectStore, repo: &str) -> Result<Vec<Lock>, LockError> {
    Ok(load(store, repo)?.0.locks)
}

/// Locks `path` for `owner` at `now` (seconds since the epoch).
///
/// # Errors
/// [`LockError`].
pub fn create(
    store: &dyn ObjectStore,
    repo: &str,
    path: &str,
    owner: &str,
    now: u64,
) -> Result<Created, LockError> {
    check_path(path)?;
    for _ in 0..MAX_TRIES {
        let (mut doc, etag) = load(store, repo)?;
        if let Some(l) = doc.locks.iter().find(|l| l.path == path) {
            return Ok(Created::Exists(l.clone()));
        }
        if doc.locks.len() >= MAX_LOCKS {
            return Err(LockError::TooMany);
        }
        let mut raw = [0u8; 8];
        getrandom::fill(&mut raw).map_err(|e| {
            LockError::Store(gitstow_store::Error::Io {
                key: keys::locks(repo),
                source: std::io::Error::other(e.to_string()),
            })
        })?;
        let lock = Lock {
            id: hex::encode(raw),
            path: path.to_owned(),
            locked_at: humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(now))
                .to_string(),
            owner: Owner {
                name: owner.to_owned(),
            },
        };
        let at = doc.locks.partition_point(|l| l.id < lock.id);
        doc.locks.insert(at, lock.clone());
        if store_if(store, repo, &doc, etag)? {
            return Ok(Created::New(lock));
        }
    }
    Err(LockError::Busy)
}

/// Removes lock `id` for `by`; another owner's only with `force`.
///
/// # Errors
/// [`LockError`].
pub fn unlock(
    store: &dyn ObjectStore,
    repo: &str,
    id: &str,
    by: &str,
    force: bool,
) -> Result<Unlocked, LockError> {
    for _ in 0..MAX_TRIES {
        let (mut doc, etag) = load(store, repo)?;
        let Some(at) = doc.locks.iter().position(|l| l.id == id) else {
            return Ok(Unlocked::NotFound);
        };
        if doc.locks[at].owner.name != by && !force {
            return Ok(Unlocked::NotOwner(doc.locks[at].clone()));
        }
        let lock = doc.locks.remove(at);
        if store_if(store, repo, &doc, etag)? {
            return Ok(Unlocked::Removed(lock));
        }
    }
    Err(LockError::Busy)
}

/// The locks of `locks` (by id) that `keep` accepts, from `cursor` (an id;
/// `None`: the first), at most `limit` ([`MAX_PAGE`] when 0 or above).
pub fn page(
    locks: &[Lock],
    keep: impl Fn(&Lock) -> bool,
    cursor: Option<&str>,
    limit: usize,
) -> Page {
    let limit = if limit == 0 {
        MAX_PAGE
    } else {
        limit.min(MAX_PAGE)
    };
    let start = cursor.map_or(0, |c| locks.partition_point(|l| l.id.as_str() < c));
    let mut out = Vec::new();
    let mut next_cursor = None;
    for l in locks[start..].iter().filter(|l| keep(l)) {
        if out.len() == limit {
            next_cursor = Some(l.id.clone());
            break;
        }
        out.push(l.clone());
    }
    Page {
        locks: out,
        next_cursor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, gitstow_store::FsStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = gitstow_store::FsStore::new(dir.path()).unwrap();
        (dir, s)
    }

    #[test]
    fn lock_once_unlock_by_owner_or_by_force() {
        let (_d, s) = store();
        let Created::New(a) = create(&s, "r", "art/a.psd", "alice", 0).unwrap() else {
            panic!("not created")
        };
        assert_eq!(a.locked_at, "1970-01-01T00:00:00Z");
        assert_eq!(
            create(&s, "r", "art/a.psd", "bob", 5).unwrap(),
            Created::Exists(a.clone())
        );
        assert_eq!(
            unlock(&s, "r", &a.id, "bob", false).unwrap(),
            Unlocked::NotOwner(a.clone())
        );
        assert_eq!(
            unlock(&s, "r", "0000", "alice", false).unwrap(),
            Unlocked::NotFound
        );
        assert_eq!(
            unlock(&s, "r", &a.id, "bob", true).unwrap(),
            Unlocked::Removed(a.clone())
        );
        assert!(all(&s, "r").unwrap().is_empty());
        assert!(all(&s, "other").unwrap().is_empty());
    }

    #[test]
    fn bad_paths_are_refused() {
        let (_d, s) = store();
        for p in ["", "/abs", "a//b", "a/../b", "./a", "a/", "x\0y"] {
            assert!(
                matches!(create(&s, "r", p, "a", 0), Err(LockError::BadPath(_))),
                "{p:?}"
            );
        }
        let long = "a".repeat(MAX_PATH + 1);
        assert!(matches!(
            create(&s, "r", &long, "a", 0),
            Err(LockError::BadPath(_))
        ));
        assert!(s.list("").unwrap().is_empty());
    }

    #[test]
    fn pages_follow_the_cursor() {
        let (_d, s) = store();
        for i in 0..7 {
            create(
                &s,
                "r",
                &format!("f{i}"),
                if i % 2 == 0 { "a" } else { "b" },
                0,
            )
            .unwrap();
        }
        let locks = all(&s, "r").unwrap();
        assert!(locks.windows(2).all(|w| w[0].id < w[1].id));
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let p = page(&locks, |_| true, cursor.as_deref(), 3);
            assert!(p.locks.len() <= 3);
            seen.extend(p.locks.iter().map(|l| l.path.clone()));
            match p.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        seen.sort();
        assert_eq!(seen, (0..7).map(|i| format!("f{i}")).collect::<Vec<_>>());
        let ours = page(&locks, |l| l.owner.name == "a", None, 0);
        assert_eq!(ours.locks.len(), 4);
    }
}
