//! Reachability: which objects a fetch must send.
//!
//! As git's `rev-list --objects wants --not haves` does: commits reachable from
//! the wants but not from the haves, their trees and blobs minus those reachable
//! from the trees of the boundary commits (the haves' side of the edge), plus
//! tags named by the wants.

use std::collections::VecDeque;

use gix_hashtable::HashSet;

use gitstow_odb::{ObjectCache, ObjectDb};
use gix_hash::ObjectId;
use gix_object::Kind;

use crate::filter::Filter;
use crate::shallow::ShallowPlan;

/// Why the walk failed.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// A want the repository does not have.
    #[error("not our ref {0}")]
    NotOurRef(ObjectId),
    /// An object that a reachable object names is missing or unreadable.
    #[error("missing object {oid} ({context})")]
    Missing {
        /// The object.
        oid: ObjectId,
        /// Who names it.
        context: &'static str,
    },
    /// An object does not parse.
    #[error("object {oid} does not parse: {reason}")]
    Corrupt {
        /// The object.
        oid: ObjectId,
        /// The parser's message.
        reason: String,
    },
    /// Reading failed.
    #[error(transparent)]
    Odb(#[from] gitstow_odb::Error),
}

/// The objects to send and what the walk saw.
#[derive(Debug, Default)]
pub struct Walk {
    /// Every object to send (unordered, no duplicates).
    pub objects: Vec<ObjectId>,
    /// Commits among them.
    pub commits: usize,
}

struct Walker<'a> {
    db: &'a ObjectDb,
    cache: ObjectCache,
}

impl Walker<'_> {
    fn read(
        &mut self,
        oid: &ObjectId,
        context: &'static str,
    ) -> Result<gitstow_odb::Object, WalkError> {
        self.db
            .read(oid, &mut self.cache)?
            .ok_or(WalkError::Missing { oid: *oid, context })
    }

    fn commit_links(&mut self, oid: &ObjectId) -> Result<(ObjectId, Vec<ObjectId>), WalkError> {
        let obj = self.read(oid, "commit")?;
        let commit =
            gix_object::CommitRef::from_bytes(&obj.data, gix_hash::Kind::Sha1).map_err(|e| {
                WalkError::Corrupt {
                    oid: *oid,
                    reason: e.to_string(),
                }
            })?;
        Ok((commit.tree(), commit.parents().collect()))
    }

    /// Peels tags: returns the tags passed through and the final object with its kind.
    fn peel(&mut self, oid: ObjectId) -> Result<(Vec<ObjectId>, ObjectId, Kind), WalkError> {
        let mut tags = Vec::new();
        let mut cur = oid;
        loop {
            let obj = self.read(&cur, "want")?;
            if obj.kind != Kind::Tag || tags.len() > 64 {
                return Ok((tags, cur, obj.kind));
            }
            let tag =
                gix_object::TagRef::from_bytes(&obj.data, gix_hash::Kind::Sha1).map_err(|e| {
                    WalkError::Corrupt {
                        oid: cur,
                        reason: e.to_string(),
                    }
                })?;
            tags.push(cur);
            cur = tag.target();
        }
    }

    /// Adds `tree` and everything below it to `seen`, calling `emit` for each
    /// new object that `filter` keeps.
    fn walk_tree(
        &mut self,
        tree: ObjectId,
        seen: &mut HashSet,
        exclude: &HashSet,
        filter: Option<Filter>,
        emit: &mut dyn FnMut(ObjectId),
    ) -> Result<(), WalkError> {
        if filter.is_some_and(|f| !f.keeps_depth(0)) {
            return Ok(());
        }
        if exclude.contains(&tree) || !seen.insert(tree) {
            return Ok(());
        }
        emit(tree);
        let mut stack = vec![(tree, 0u64)];
        while let Some((t, depth)) = stack.pop() {
            let obj = self.read(&t, "tree")?;
            let child_depth = depth + 1;
            if filter.is_some_and(|f| !f.keeps_depth(child_depth)) {
                continue;
            }
            for entry in gix_object::TreeRefIter::from_bytes(&obj.data, gix_hash::Kind::Sha1) {
                let entry = entry.map_err(|e| WalkError::Corrupt {
                    oid: t,
                    reason: e.to_string(),
                })?;
                if entry.mode.is_commit() {
                    continue;
                }
                let id = entry.oid.to_owned();
                if let Some(f) = filter {
                    if !entry.mode.is_tree() {
                        let size = self.db.lookup(&id).map_or(0, |l| l.entry.size);
                        if !f.keeps_blob(size) {
                            continue;
                        }
                    }
                }
                if exclude.contains(&id) || !seen.insert(id) {
                    continue;
                }
                emit(id);
                if entry.mode.is_tree() {
                    stack.push((id, child_depth));
                }
            }
        }
        Ok(())
    }
}

/// What the client has and asked for, besides its wants.
#[derive(Debug, Clone, Copy)]
pub struct WalkOptions<'a> {
    /// `have` lines the repository has.
    pub haves: &'a [ObjectId],
    /// The shallow boundary.
    pub shallow: &'a ShallowPlan,
    /// The partial-clone filter, if any.
    pub filter: Option<Filter>,
    /// Bytes of the delta-base cache.
    pub cache_bytes: usize,
    /// The ref tips, when every object of the repository is reachable from
    /// them (the state's `closed` flag): a fetch with no haves, no shallow
    /// and no filter whose wants include every tip then gets every object,
    /// read from the container indexes without a walk (the role of git's
    /// reachability bitmaps for a full clone).
    pub closed_tips: Option<&'a [ObjectId]>,
}

/// Computes the objects to send for `wants` given the client's haves (haves
/// the repository lacks are ignored), its shallow state and filter: commits in
/// `shallow.boundary` are sent without their parents, the client's shallow
/// commits count as haves whose parents it lacks, the parents of
/// `shallow.unshallows` are sent, and the filter drops trees and blobs reached
/// through trees (never objects named by a want).
pub fn objects_to_send(
    db: &ObjectDb,
    wants: &[ObjectId],
    opts: &WalkOptions<'_>,
) -> Result<Walk, WalkError> {
    let (haves, shallow, cache_bytes) = (opts.haves, opts.shallow, opts.cache_bytes);
    if let Some(walk) = every_object(db, wants, opts) {
        return Ok(walk);
    }
    let mut w = Walker {
        db,
        cache: ObjectCache::new(cache_bytes),
    };
    for want in wants {
        if !db.contains(want) {
            return Err(WalkError::NotOurRef(*want));
        }
    }
    // 1. Commits the client has: everything reachable from its haves.
    let mut have_commits: HashSet = HashSet::default();
    let mut queue: VecDeque<ObjectId> = VecDeque::new();
    for have in haves
        .iter()
        .chain(&shallow.client_shallows)
        .filter(|h| db.contains(h))
    {
        let (_, target, kind) = w.peel(*have)?;
        if kind == Kind::Commit && have_commits.insert(target) {
            queue.push_back(target);
        }
    }
    while let Some(c) = queue.pop_front() {
        if shallow.client_shallows.contains(&c) {
            continue;
        }
        let (_, parents) = w.commit_links(&c)?;
        for p in parents {
            if db.contains(&p) && have_commits.insert(p) {
                queue.push_back(p);
            }
        }
    }
    // 2. Commits to send, and the boundary commits on the client's side.
    let mut seen: HashSet = HashSet::default();
    let mut out = Walk::default();
    let mut commits: Vec<(ObjectId, ObjectId)> = Vec::new();
    let mut other_roots: Vec<(ObjectId, Kind)> = Vec::new();
    let mut edges: HashSet = HashSet::default();
    for want in wants {
        let (tags, target, kind) = w.peel(*want)?;
        for t in tags {
            if seen.insert(t) {
                out.objects.push(t);
            }
        }
        match kind {
            Kind::Commit => {
                if !have_commits.contains(&target) && seen.insert(target) {
                    queue.push_back(target);
                }
            }
            _ => other_roots.push((target, kind)),
        }
    }
    for u in &shallow.unshallows {
        let (_, parents) = w.commit_links(u)?;
        for p in parents {
            if !have_commits.contains(&p) && seen.insert(p) {
                queue.push_back(p);
            }
        }
    }
    while let Some(c) = queue.pop_front() {
        out.objects.push(c);
        out.commits += 1;
        let (tree, parents) = w.commit_links(&c)?;
        commits.push((c, tree));
        if shallow.boundary.contains(&c) {
            continue;
        }
        for p in parents {
            if have_commits.contains(&p) {
                edges.insert(p);
            } else if seen.insert(p) {
                queue.push_back(p);
            }
        }
    }
    // 3. Trees and blobs the client has through the boundary commits.
    let mut excluded: HashSet = HashSet::default();
    let none = HashSet::default();
    for e in &edges {
        let (tree, _) = w.commit_links(e)?;
        let mut scratch = HashSet::default();
        std::mem::swap(&mut scratch, &mut excluded);
        w.walk_tree(tree, &mut scratch, &none, None, &mut |_| {})?;
        excluded = scratch;
    }
    // 4. Trees and blobs to send.
    let mut emit_list = Vec::new();
    for (_, tree) in &commits {
        w.walk_tree(*tree, &mut seen, &excluded, opts.filter, &mut |id| {
            emit_list.push(id)
        })?;
    }
    for (root, kind) in other_roots {
        match kind {
            Kind::Tree => {
                // A wanted tree is sent whatever the filter; its contents are filtered.
                if seen.insert(root) {
                    emit_list.push(root);
                }
                seen.remove(&root);
                w.walk_tree(root, &mut seen, &excluded, opts.filter, &mut |id| {
                    if id != root {
                        emit_list.push(id)
                    }
                })?
            }
            _ => {
                if seen.insert(root) {
                    emit_list.push(root);
                }
            }
        }
    }
    out.objects.extend(emit_list);
    Ok(out)
}

/// The full-clone answer of [`WalkOptions::closed_tips`], if it applies.
fn every_object(db: &ObjectDb, wants: &[ObjectId], opts: &WalkOptions<'_>) -> Option<Walk> {
    let tips = opts.closed_tips?;
    let s = opts.shallow;
    let plain = opts.haves.is_empty()
        && opts.filter.is_none()
        && s.boundary.is_empty()
        && s.client_shallows.is_empty()
        && s.unshallows.is_empty();
    if !plain || tips.is_empty() || !wants.iter().all(|w| db.contains(w)) {
        return None;
    }
    let wanted: HashSet = wants.iter().copied().collect();
    if !tips.iter().all(|t| wanted.contains(t)) {
        return None;
    }
    let mut seen: HashSet = HashSet::default();
    let mut out = Walk::default();
    for entry in db.entries() {
        if seen.insert(entry.oid) {
            out.objects.push(entry.oid);
            if entry.kind == gitstow_odb::record::COMMIT {
                out.commits += 1;
            }
        }
    }
    Some(out)
}

/// `include-tag`: adds the annotated tags (from `tags`: tag oid → peeled oid)
/// whose peeled object is sent, as git's upload-pack does for auto-following tags.
/// Tags pointing at tags are followed through `db`.
pub fn include_tags(
    db: &ObjectDb,
    walk: &mut Walk,
    tags: &[(ObjectId, ObjectId)],
) -> Result<(), WalkError> {
    let mut sent: HashSet = walk.objects.iter().copied().collect();
    let mut w = Walker {
        db,
        cache: ObjectCache::new(1 << 20),
    };
    for (tag, peeled) in tags {
        if sent.contains(tag) || !sent.contains(peeled) {
            continue;
        }
        let (chain, _, _) = w.peel(*tag)?;
        for t in chain {
            if sent.insert(t) {
                walk.objects.push(t);
            }
        }
    }
    Ok(())
}
