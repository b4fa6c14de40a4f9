//! Git LFS file locks enforced on push: a branch update that changes a
//! path another user has locked is refused, as GitLab refuses it (`git lfs
//! lock`, git-lfs `docs/api/locking.md`). The server gives the paths
//! locked by others than the pusher ([`crate::Options::locked`]); this
//! module only compares trees.
//!
//! What is compared: the entry at each locked path (its mode and oid, or
//! its absence) in the tree of the branch's old tip and of its new one; a
//! new branch is compared with the branch HEAD names (with nothing when
//! there is none). A path changed and changed back within the pushed
//! commits is not a change.

use gix_hash::ObjectId;

use gitstow_odb::{ObjectCache, ObjectDb};

/// A path locked by someone other than the pusher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedPath {
    /// The path, relative to the repository's root, `/`-separated.
    pub path: String,
    /// Who holds the lock (a token's name).
    pub owner: String,
}

/// The entry (mode and oid) at `path` in the tree of commit `commit`;
/// `None` when the path is absent, or anything on the way cannot be read.
fn entry_at(
    db: &ObjectDb,
    commit: &ObjectId,
    path: &str,
    cache: &mut ObjectCache,
) -> Option<(u32, ObjectId)> {
    let mut tree = db.commit_row(commit, cache).ok()??.tree;
    let mut parts = path.split('/').peekable();
    while let Some(name) = parts.next() {
        let obj = db.read(&tree, cache).ok()??;
        let parsed = gix_object::TreeRef::from_bytes(&obj.data, gix_hash::Kind::Sha1).ok()?;
        let e = parsed
            .entries
            .iter()
            .find(|e| e.filename.as_ref() as &[u8] == name.as_bytes())?;
        let found = (e.mode.value() as u32, e.oid.to_owned());
        if parts.peek().is_none() {
            return Some(found);
        }
        if !e.mode.is_tree() {
            return None;
        }
        tree = found.1;
    }
    None
}

/// The first of `locked` whose entry differs between commit `base` (`None`:
/// an empty tree) and commit `new`.
pub fn changed_lock<'a>(
    db: &ObjectDb,
    base: Option<&ObjectId>,
    new: &ObjectId,
    locked: &'a [LockedPath],
) -> Option<&'a LockedPath> {
    let mut cache = ObjectCache::new(8 << 20);
    locked.iter().find(|l| {
        let before = base.and_then(|b| entry_at(db, b, &l.path, &mut cache));
        let after = entry_at(db, new, &l.path, &mut cache);
        before != after
    })
}
