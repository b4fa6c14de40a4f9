//! Git LFS file locks enforced on push: a ref update that newly reaches a
//! commit changing a path another user has locked is refused, as GitLab
//! refuses it (`git lfs lock`, git-lfs `docs/api/locking.md`). The server
//! gives the paths locked by others than the pusher
//! ([`crate::Options::locked`]); this module only walks commits and compares
//! trees.
//!
//! What counts:
//! - **Which commits**: those an update newly reaches, whatever the ref
//!   (branch, tag, note, any name): `rev-list <new> --not <every ref>` as the
//!   repository stood when the push began ([`gitstow_odb::limit`]). A commit
//!   the repository already had but no ref reached (the pack of a refused
//!   push, a deleted branch) counts as new, so an edit cannot be parked
//!   under a tag or a refused ref first and fast-forwarded onto a branch
//!   later. A branch created or moved onto commits some ref already reaches
//!   brings nothing to check.
//! - **What changes a path**: a commit whose entry at the path (mode and oid,
//!   or absence) differs from that in every one of its parents (a root
//!   commit: when the path exists). So a merge that takes the lock holder's
//!   version from one parent changes nothing.
//!
//! Cost: each new commit is compared once with each parent, against all
//! locks at once ([`LockSet`]): the two trees are read only where they
//! differ on the way to a locked path, so a commit costs a few tree reads
//! however many locks there are.

use std::collections::BTreeMap;

use gix_hash::ObjectId;
use gix_hashtable::{HashMap, HashSet};

use gitstow_odb::limit::LimitError;
use gitstow_odb::{ObjectCache, ObjectDb};

/// A path locked by someone other than the pusher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedPath {
    /// The path, relative to the repository's root, `/`-separated.
    pub path: String,
    /// Who holds the lock (a token's name).
    pub owner: String,
}

/// One level of the locked paths, by name: a path's last component holds
/// its lock's index in [`LockSet::paths`]; a component on the way to a
/// deeper lock has children.
#[derive(Debug, Default)]
struct Node {
    lock: Option<usize>,
    children: BTreeMap<Vec<u8>, Node>,
}

/// The locked paths as one tree of names, walked beside a commit's tree.
#[derive(Debug)]
pub struct LockSet<'a> {
    paths: &'a [LockedPath],
    root: Node,
}

/// An entry of a tree: (mode, oid).
type Entry = (u32, ObjectId);

/// The entries of `tree` (none when `tree` is `None` or unreadable).
fn read_tree(
    db: &ObjectDb,
    tree: Option<ObjectId>,
    cache: &mut ObjectCache,
) -> Option<std::sync::Arc<Vec<u8>>> {
    tree.and_then(|t| db.read(&t, cache).ok().flatten())
        .map(|obj| obj.data)
}

/// The entries of tree bytes `data`, by name (borrowed from `data`).
fn entries(data: Option<&[u8]>) -> std::collections::HashMap<&[u8], Entry> {
    let Some(data) = data else {
        return Default::default();
    };
    gix_object::TreeRefIter::from_bytes(data, gix_hash::Kind::Sha1)
        .flatten()
        .map(|e| {
            let name: &[u8] = e.filename;
            (name, (e.mode.value() as u32, e.oid.to_owned()))
        })
        .collect()
}

/// The names whose entry differs between two trees' entries, with each
/// side's entry.
fn changed<'t>(
    a: &std::collections::HashMap<&'t [u8], Entry>,
    b: &std::collections::HashMap<&'t [u8], Entry>,
) -> Vec<(&'t [u8], Option<Entry>, Option<Entry>)> {
    let mut out = Vec::new();
    for (name, x) in a {
        let y = b.get(name);
        if y != Some(x) {
            out.push((*name, Some(*x), y.copied()));
        }
    }
    for (name, y) in b {
        if !a.contains_key(name) {
            out.push((*name, None, Some(*y)));
        }
    }
    out
}

/// The oid of `entry` when it is a tree.
fn subtree(entry: Option<Entry>) -> Option<ObjectId> {
    entry.and_then(|(mode, oid)| (mode == 0o40000).then_some(oid))
}

impl<'a> LockSet<'a> {
    /// The set of `paths` (empty components, as in `a//b`, are ignored).
    pub fn new(paths: &'a [LockedPath]) -> Self {
        let mut root = Node::default();
        for (i, l) in paths.iter().enumerate() {
            let mut node = &mut root;
            for part in l.path.split('/').filter(|p| !p.is_empty()) {
                node = node.children.entry(part.as_bytes().to_vec()).or_default();
            }
            node.lock.get_or_insert(i);
        }
        LockSet { paths, root }
    }

    /// The locks whose entry differs between trees `a` and `b` (`None`: no
    /// tree, every path absent), as indexes into the paths, ascending.
    fn differing(
        &self,
        db: &ObjectDb,
        a: Option<ObjectId>,
        b: Option<ObjectId>,
        cache: &mut ObjectCache,
    ) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![(&self.root, a, b)];
        while let Some((node, a, b)) = stack.pop() {
            if a == b {
                continue;
            }
            let (ta, tb) = (read_tree(db, a, cache), read_tree(db, b, cache));
            let (ea, eb) = (
                entries(ta.as_deref().map(Vec::as_slice)),
                entries(tb.as_deref().map(Vec::as_slice)),
            );
            // Only the names that differ are looked up among the locks: a
            // commit of a directory of thousands of locked files reads its
            // two listings once, not once a lock.
            for (name, x, y) in changed(&ea, &eb) {
                let Some(child) = node.children.get(name) else {
                    continue;
                };
                if let Some(i) = child.lock {
                    out.push(i);
                }
                if !child.children.is_empty() {
                    stack.push((child, subtree(x), subtree(y)));
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// The first lock (by index) that commit `c` changes: its entry differs
    /// from that of every parent (a root commit: the path exists).
    fn changed_by(
        &self,
        db: &ObjectDb,
        tree: ObjectId,
        parent_trees: &[ObjectId],
        cache: &mut ObjectCache,
    ) -> Option<usize> {
        let Some((first, rest)) = parent_trees.split_first() else {
            return self.differing(db, Some(tree), None, cache).first().copied();
        };
        let mut changed = self.differing(db, Some(tree), Some(*first), cache);
        for p in rest {
            if changed.is_empty() {
                break;
            }
            let other = self.differing(db, Some(tree), Some(*p), cache);
            changed.retain(|i| other.binary_search(i).is_ok());
        }
        changed.first().copied()
    }
}

/// What [`changed_locks`] found for one update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach<'a> {
    /// The lock the update would pass.
    pub lock: &'a LockedPath,
    /// A commit the update newly reaches that changes the locked path.
    pub commit: ObjectId,
}

/// Follows `oid` through annotated tags to the first non-tag object.
fn peel(db: &ObjectDb, oid: ObjectId, cache: &mut ObjectCache) -> ObjectId {
    let mut cur = oid;
    for _ in 0..64 {
        match db.read(&cur, cache) {
            Ok(Some(obj)) if obj.kind == gix_object::Kind::Tag => {
                match gix_object::TagRef::from_bytes(&obj.data, gix_hash::Kind::Sha1) {
                    Ok(tag) => cur = tag.target(),
                    Err(_) => break,
                }
            }
            _ => break,
        }
    }
    cur
}

/// Whether `oid` is a commit `db` holds.
fn is_commit(db: &ObjectDb, oid: &ObjectId) -> bool {
    db.lookup(oid)
        .is_some_and(|l| l.entry.kind == gitstow_odb::record::COMMIT)
}

/// For each of `updates` (the new values of the ref updates to check, tags
/// included), the first lock of `locked` that a commit it newly reaches
/// changes, or `None`. `tips` are the values (peeled) of every ref of the
/// repository as the push found it; `db` holds the repository's objects and
/// the push's.
///
/// # Errors
/// A commit on the way is missing or does not parse ([`LimitError`]): the
/// caller refuses the push rather than let it past locks it could not check.
pub fn changed_locks<'a>(
    db: &ObjectDb,
    tips: &[ObjectId],
    updates: &[ObjectId],
    locked: &'a [LockedPath],
) -> Result<Vec<Option<Breach<'a>>>, LimitError> {
    let mut cache = ObjectCache::new(8 << 20);
    let haves: Vec<ObjectId> = tips.iter().filter(|t| is_commit(db, t)).copied().collect();
    let wants: Vec<Option<ObjectId>> = updates
        .iter()
        .map(|u| Some(peel(db, *u, &mut cache)).filter(|c| is_commit(db, c)))
        .collect();
    let want_list: Vec<ObjectId> = wants.iter().flatten().copied().collect();
    if want_list.is_empty() {
        return Ok(vec![None; updates.len()]);
    }
    let empty = HashSet::default();
    let limited =
        gitstow_odb::limit::limit(db, &want_list, &haves, &[], &empty, &empty, &[], 8 << 20)?;
    // Every newly reached commit is compared once against every lock.
    let set = LockSet::new(locked);
    let mut parents: HashMap<ObjectId, Vec<ObjectId>> = HashMap::default();
    let mut breached: HashMap<ObjectId, usize> = HashMap::default();
    for (c, tree) in &limited.commits {
        let row = gitstow_odb::limit::read_commit(db, &mut cache, c, "commit")?;
        let mut parent_trees = Vec::with_capacity(row.parents.len());
        for p in &row.parents {
            parent_trees.push(gitstow_odb::limit::read_commit(db, &mut cache, p, "parent")?.tree);
        }
        if let Some(i) = set.changed_by(db, *tree, &parent_trees, &mut cache) {
            breached.insert(*c, i);
        }
        parents.insert(*c, row.parents);
    }
    if breached.is_empty() {
        return Ok(vec![None; updates.len()]);
    }
    // Which update reaches which breach: a walk through the new commits.
    Ok(wants
        .iter()
        .map(|want| {
            let mut seen: HashSet = HashSet::default();
            let mut stack: Vec<ObjectId> = want.iter().copied().collect();
            while let Some(c) = stack.pop() {
                if !seen.insert(c) {
                    continue;
                }
                let Some(ps) = parents.get(&c) else {
                    continue;
                };
                if let Some(&i) = breached.get(&c) {
                    return Some(Breach {
                        lock: &set.paths[i],
                        commit: c,
                    });
                }
                stack.extend(ps.iter().copied());
            }
            None
        })
        .collect())
}
