//! Git LFS file locks enforced on push: a branch update that changes a
//! path another user has locked is refused, as GitLab refuses it (`git lfs
//! lock`, git-lfs `docs/api/locking.md`). The server gives the paths
//! locked by others than the pusher ([`crate::Options::locked`]); this
//! module only compares trees.
//!
//! What counts: each commit the push brings (in its pack) that the branch's
//! new tip reaches changes a locked path when the entry there (mode and
//! oid, or absence) differs from that in every one of its parents (a root
//! commit: when the path exists). So a merge that takes the lock holder's
//! version from one parent changes nothing, a branch created or moved to
//! commits the repository has brings no commit to check, and a commit that
//! touches the path is refused wherever it goes (a re-created branch too).

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

/// The first of `locked` that a commit of `pushed` (the commits the push
/// brings) reachable from `new` changes, with that commit.
pub fn changed_lock<'a>(
    db: &ObjectDb,
    new: &ObjectId,
    pushed: &gix_hashtable::HashSet<ObjectId>,
    locked: &'a [LockedPath],
) -> Option<(&'a LockedPath, ObjectId)> {
    let mut cache = ObjectCache::new(8 << 20);
    let mut seen: gix_hashtable::HashSet<ObjectId> = Default::default();
    let mut entries: std::collections::HashMap<(ObjectId, usize), Option<(u32, ObjectId)>> =
        Default::default();
    let mut stack = vec![*new];
    while let Some(c) = stack.pop() {
        if !pushed.contains(&c) || !seen.insert(c) {
            continue;
        }
        let Ok(Some(row)) = db.commit_row(&c, &mut cache) else {
            continue;
        };
        for (i, l) in locked.iter().enumerate() {
            // A commit's entry is read once, whether as a pushed commit or
            // as a parent of one.
            let mut at = |commit: &ObjectId| {
                *entries
                    .entry((*commit, i))
                    .or_insert_with(|| entry_at(db, commit, &l.path, &mut cache))
            };
            let here = at(&c);
            let changed = if row.parents.is_empty() {
                here.is_some()
            } else {
                row.parents.iter().all(|p| at(p) != here)
            };
            if changed {
                return Some((l, c));
            }
        }
        stack.extend(row.parents.iter().copied());
    }
    None
}
