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
//!   or absence) differs from that in every one of its parents. So a merge
//!   that takes the lock holder's version from one parent changes nothing;
//!   a parent that is an ancestor of another does not count (no `git
//!   merge` makes one, and it would bring back an older version as if
//!   nothing changed). A commit without parents, and a tree a ref names
//!   (`refs/replace/*` makes clients see one), change the path when they
//!   hold it with an entry no ref reaches there yet.
//! - **Tags**: a ref's value is followed through at most
//!   [`MAX_TAG_CHAIN`] annotated tags; a longer chain is refused, not let
//!   past unchecked.
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

use gitstow_odb::Repository;
use gitstow_protocol::push::PushRequest;

use crate::reason::Reason;
use crate::{objects_with_push, Outcome, UnpackFailure};

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

/// The entries of tree bytes `data` whose ids are of object format
/// `hash`, by name (borrowed from `data`).
fn entries(data: Option<&[u8]>, hash: gix_hash::Kind) -> std::collections::HashMap<&[u8], Entry> {
    let Some(data) = data else {
        return Default::default();
    };
    gix_object::TreeRefIter::from_bytes(data, hash)
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
            let hash = a.or(b).map_or(gix_hash::Kind::Sha1, |t| t.kind());
            let (ea, eb) = (
                entries(ta.as_deref().map(Vec::as_slice), hash),
                entries(tb.as_deref().map(Vec::as_slice), hash),
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

    /// The entries (mode and oid) of `tree` at the locked paths it holds,
    /// as (lock, entry), into `out`.
    fn entries_at(
        &self,
        db: &ObjectDb,
        tree: ObjectId,
        cache: &mut ObjectCache,
        out: &mut std::collections::HashSet<(usize, Entry)>,
    ) {
        let mut stack = vec![(&self.root, tree)];
        while let Some((node, tree)) = stack.pop() {
            let data = read_tree(db, Some(tree), cache);
            let listed = entries(data.as_deref().map(Vec::as_slice), tree.kind());
            for (name, child) in &node.children {
                let Some(&e) = listed.get(name.as_slice()) else {
                    continue;
                };
                if let Some(i) = child.lock {
                    out.insert((i, e));
                }
                if let Some(t) = subtree(Some(e)) {
                    if !child.children.is_empty() {
                        stack.push((child, t));
                    }
                }
            }
        }
    }

    /// The first lock (by index) that the tree `tree` of a commit without
    /// parents (or a ref's tree) changes: it holds the path with an entry
    /// that no ref of the repository reaches there (`known`; `None`: not
    /// known, so any entry there counts).
    fn new_at_root(
        &self,
        db: &ObjectDb,
        tree: ObjectId,
        known: Option<&std::collections::HashSet<(usize, Entry)>>,
        cache: &mut ObjectCache,
    ) -> Option<usize> {
        let mut here = std::collections::HashSet::new();
        self.entries_at(db, tree, cache, &mut here);
        here.into_iter()
            .filter(|e| known.is_none_or(|k| !k.contains(e)))
            .map(|(i, _)| i)
            .min()
    }

    /// The first lock (by index) that a commit of tree `tree` changes: its
    /// entry differs from that of every parent (of `parent_trees`).
    fn changed_by(
        &self,
        db: &ObjectDb,
        tree: ObjectId,
        parent_trees: &[ObjectId],
        cache: &mut ObjectCache,
    ) -> Option<usize> {
        let (first, rest) = parent_trees.split_first()?;
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

/// Most annotated tags followed from a ref to what they tag; an update
/// naming a longer chain is refused when locks are to be checked.
pub const MAX_TAG_CHAIN: usize = 64;

/// Most distinct trees of the repository's ref tips read to learn which
/// entries at the locked paths it already has (for commits without parents
/// and refs to trees); beyond, every entry there counts as new.
const MAX_KNOWN_TREES: usize = 10_000;

/// What [`changed_locks`] found for one update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Breach<'a> {
    /// An object the update newly reaches changes a locked path.
    Changes {
        /// The lock the update would pass.
        lock: &'a LockedPath,
        /// The commit (or the tree a ref names) that changes the path.
        object: ObjectId,
        /// `commit` or `tree`.
        kind: &'static str,
    },
    /// The update names a chain of more than [`MAX_TAG_CHAIN`] annotated
    /// tags, which is not followed: refused rather than let past unchecked.
    TagChainTooDeep {
        /// The tag the update names.
        tag: ObjectId,
    },
}

/// What a ref's value is, through its annotated tags.
enum Peeled {
    Commit(ObjectId),
    Tree(ObjectId),
    Other,
    TooDeep,
}

/// Follows `oid` through at most [`MAX_TAG_CHAIN`] annotated tags.
fn peel(db: &ObjectDb, oid: ObjectId, cache: &mut ObjectCache) -> Peeled {
    let mut cur = oid;
    for _ in 0..=MAX_TAG_CHAIN {
        let Ok(Some(obj)) = db.read(&cur, cache) else {
            return Peeled::Other;
        };
        match obj.kind {
            gix_object::Kind::Tag => match gix_object::TagRef::from_bytes(&obj.data, obj.hash) {
                Ok(tag) => cur = tag.target(),
                Err(_) => return Peeled::Other,
            },
            gix_object::Kind::Commit => return Peeled::Commit(cur),
            gix_object::Kind::Tree => return Peeled::Tree(cur),
            gix_object::Kind::Blob => return Peeled::Other,
        }
    }
    Peeled::TooDeep
}

/// Whether `oid` is a commit `db` holds.
fn is_commit(db: &ObjectDb, oid: &ObjectId) -> bool {
    db.lookup(oid)
        .is_some_and(|l| l.entry.kind == gitstow_odb::record::COMMIT)
}

/// The entries at the locked paths of the trees of `haves` (commits), as
/// (lock, entry); `None` past [`MAX_KNOWN_TREES`] trees.
fn known_entries(
    db: &ObjectDb,
    set: &LockSet<'_>,
    haves: &[ObjectId],
    cache: &mut ObjectCache,
) -> Result<Option<std::collections::HashSet<(usize, Entry)>>, LimitError> {
    let mut trees: HashSet = HashSet::default();
    for h in haves {
        trees.insert(gitstow_odb::limit::read_commit(db, cache, h, "have")?.tree);
        if trees.len() > MAX_KNOWN_TREES {
            return Ok(None);
        }
    }
    let mut out = std::collections::HashSet::new();
    for t in trees {
        set.entries_at(db, t, cache, &mut out);
    }
    Ok(Some(out))
}

/// The parents of a commit that count for the lock check: all but one that
/// is an ancestor of another (a merge `git merge` never makes, which would
/// bring back an older version of a locked file as if it changed nothing).
fn counted_parents(db: &ObjectDb, parents: &[ObjectId]) -> Vec<ObjectId> {
    if parents.len() < 2 {
        return parents.to_vec();
    }
    parents
        .iter()
        .enumerate()
        .filter(|&(i, p)| {
            !parents
                .iter()
                .enumerate()
                .any(|(j, q)| j != i && p != q && crate::protect::is_ancestor(db, p, q))
        })
        .map(|(_, p)| *p)
        .collect()
}

/// For each of `updates` (the new values of the ref updates to check, tags
/// included), whether it would pass a lock of `locked` ([`Breach`]): a
/// commit it newly reaches changes a locked path (see the module's doc), or
/// the tree it names holds a locked path with an entry no ref reaches.
/// `tips` are the values (peeled) of every ref of the repository as the
/// push found it; `db` holds the repository's objects and the push's.
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
    let set = LockSet::new(locked);
    let haves: Vec<ObjectId> = tips.iter().filter(|t| is_commit(db, t)).copied().collect();
    let peeled: Vec<Peeled> = updates.iter().map(|u| peel(db, *u, &mut cache)).collect();
    let mut out: Vec<Option<Breach<'a>>> = vec![None; updates.len()];
    // What the repository's refs already reach at the locked paths, read
    // once the first root commit or tree needs it.
    let mut known: Option<Option<std::collections::HashSet<(usize, Entry)>>> = None;
    for (k, p) in peeled.iter().enumerate() {
        match p {
            Peeled::TooDeep => out[k] = Some(Breach::TagChainTooDeep { tag: updates[k] }),
            Peeled::Tree(t) => {
                let known = match &known {
                    Some(k) => k,
                    None => known.insert(known_entries(db, &set, &haves, &mut cache)?),
                };
                if let Some(i) = set.new_at_root(db, *t, known.as_ref(), &mut cache) {
                    out[k] = Some(Breach::Changes {
                        lock: &set.paths[i],
                        object: *t,
                        kind: "tree",
                    });
                }
            }
            Peeled::Commit(_) | Peeled::Other => {}
        }
    }
    let wants: Vec<Option<ObjectId>> = peeled
        .iter()
        .map(|p| match p {
            Peeled::Commit(c) => Some(*c),
            _ => None,
        })
        .collect();
    let want_list: Vec<ObjectId> = wants.iter().flatten().copied().collect();
    if want_list.is_empty() {
        return Ok(out);
    }
    let empty = HashSet::default();
    let limited =
        gitstow_odb::limit::limit(db, &want_list, &haves, &[], &empty, &empty, &[], 8 << 20)?;
    // Every newly reached commit is compared once against every lock.
    let mut parents: HashMap<ObjectId, Vec<ObjectId>> = HashMap::default();
    let mut breached: HashMap<ObjectId, usize> = HashMap::default();
    for (c, tree) in &limited.commits {
        let row = gitstow_odb::limit::read_commit(db, &mut cache, c, "commit")?;
        let counted = counted_parents(db, &row.parents);
        let changed = if counted.is_empty() {
            let known = match &known {
                Some(k) => k,
                None => known.insert(known_entries(db, &set, &haves, &mut cache)?),
            };
            set.new_at_root(db, *tree, known.as_ref(), &mut cache)
        } else {
            let mut parent_trees = Vec::with_capacity(counted.len());
            for p in &counted {
                parent_trees
                    .push(gitstow_odb::limit::read_commit(db, &mut cache, p, "parent")?.tree);
            }
            set.changed_by(db, *tree, &parent_trees, &mut cache)
        };
        if let Some(i) = changed {
            breached.insert(*c, i);
        }
        parents.insert(*c, row.parents);
    }
    if breached.is_empty() {
        return Ok(out);
    }
    // Which update reaches which breach: a walk through the new commits.
    for (k, want) in wants.iter().enumerate() {
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
                out[k] = Some(Breach::Changes {
                    lock: &set.paths[i],
                    object: c,
                    kind: "commit",
                });
                break;
            }
            stack.extend(ps.iter().copied());
        }
    }
    Ok(out)
}

/// Refuses each ref update that newly reaches a commit changing a path
/// another user has locked (see [`locked`]), with `remote: error: …` saying
/// whose lock and which commit.
#[allow(clippy::too_many_arguments)]
pub(crate) fn refuse_locked(
    repo: &Repository,
    state: &gitstow_odb::RepoState,
    containers: &[gitstow_odb::state::ContainerRef],
    push: &PushRequest,
    rejected: &mut [Option<Reason>],
    locked: &[LockedPath],
    outcome: &mut Outcome,
) -> Result<(), UnpackFailure> {
    let checked: Vec<usize> = (0..push.commands.len())
        .filter(|&i| rejected[i].is_none() && !push.commands[i].new.is_null())
        .collect();
    if checked.is_empty() {
        return Ok(());
    }
    let db = objects_with_push(repo, state, containers)?;
    let mut tips = Vec::new();
    let refs = repo
        .refs(state)
        .map_err(|e| UnpackFailure::server("reading the refs for the lock check", &e))?;
    refs.for_each("", |_, value| {
        tips.extend(value.peeled().or(value.oid()));
        Ok(())
    })
    .map_err(|e| UnpackFailure::server("reading the refs for the lock check", &e))?;
    let updates: Vec<gix_hash::ObjectId> = checked.iter().map(|&i| push.commands[i].new).collect();
    let breaches = changed_locks(&db, &tips, &updates, locked)
        .map_err(|e| UnpackFailure::server("walking the pushed commits for the lock check", &e))?;
    for (&i, breach) in checked.iter().zip(breaches) {
        let cmd = &push.commands[i];
        match breach {
            None => {}
            Some(Breach::Changes { lock, object, kind }) => {
                outcome.remote_errors.push(format!(
                    "'{}' is locked by {} (git lfs locks); {kind} {object} changes it, so {} may not take it",
                    lock.path, lock.owner, cmd.name
                ));
                rejected[i] = Some(Reason::Locked {
                    owner: lock.owner.clone(),
                    path: lock.path.clone(),
                });
            }
            Some(Breach::TagChainTooDeep { tag }) => {
                outcome.remote_errors.push(format!(
                    "{}: tag {tag} starts a chain of more than {} annotated tags, which the LFS lock check does not follow",
                    cmd.name,
                    MAX_TAG_CHAIN
                ));
                rejected[i] = Some(Reason::TagChainTooDeep);
            }
        }
    }
    Ok(())
}
