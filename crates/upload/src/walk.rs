//! Reachability: which objects a fetch must send.
//!
//! As git's `rev-list --objects wants --not haves` does: commits reachable from
//! the wants but not from the haves (walked by date and stopped early, see
//! [`gitstow_odb::limit`]), their trees and blobs minus those reachable from the trees
//! of the boundary commits (the haves' side of the edge), plus tags named by
//! the wants.

use gitstow_odb::limit::LimitError;
use gitstow_odb::oids::{OidSet, OidVec};

use gitstow_odb::graph::CommitRow;
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
    /// An object the walk reaches is missing, does not parse, or reading
    /// failed (the commit walk's errors, [`LimitError`], for trees and
    /// blobs too).
    #[error(transparent)]
    Object(#[from] LimitError),
}

impl From<gitstow_odb::Error> for WalkError {
    fn from(e: gitstow_odb::Error) -> Self {
        WalkError::Object(LimitError::Odb(e))
    }
}

/// The error of an object `oid` that does not parse.
fn corrupt(oid: ObjectId, reason: String) -> WalkError {
    WalkError::Object(LimitError::Corrupt { oid, reason })
}

/// The objects to send and what the walk saw.
#[derive(Debug, Default)]
pub struct Walk {
    /// Every object to send (unordered, no duplicates).
    pub objects: OidVec<()>,
    /// Commits among them.
    pub commits: usize,
    /// Objects the client has, as far as the walk saw: the commits its haves
    /// reach that the walk visited, and the trees and blobs of the boundary
    /// commits. Bases a thin pack may name.
    pub client_has: OidSet,
    /// Commits the walk read.
    pub commits_read: usize,
    /// Commits the client has that the wants reach without passing through
    /// another commit it has: parents of commits sent, and wanted commits
    /// it has (the boundary of the commit walk).
    pub edges: Vec<ObjectId>,
    /// How the objects were found.
    pub via: Via,
}

/// How [`objects_to_send`] found a fetch's objects (the upload-pack log
/// line's `via`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Via {
    /// A walk of the history from the wants.
    #[default]
    Walk,
    /// Every stored object: the repository is closed and every tip is
    /// wanted ([`WalkOptions::closed_tips`]).
    Closed,
    /// The closure's containers whole, and a walk of what lies outside
    /// ([`WalkOptions::closure`]).
    Closure,
    /// The closure's reachability bitmaps, for what the client has and
    /// what the wants reach (`bitmaps::fetch_over`).
    Bitmaps,
}

impl Via {
    /// The word the log line uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Walk => "walk",
            Via::Closed => "closed",
            Via::Closure => "closure",
            Via::Bitmaps => "bitmaps",
        }
    }
}

/// Commit `oid`'s row, as [`gitstow_odb::limit::read_commit`] reads it.
pub(crate) fn read_commit(
    db: &ObjectDb,
    cache: &mut ObjectCache,
    oid: &ObjectId,
    context: &'static str,
) -> Result<CommitRow, WalkError> {
    Ok(gitstow_odb::limit::read_commit(db, cache, oid, context)?)
}

pub(crate) struct Walker<'a> {
    db: &'a ObjectDb,
    cache: ObjectCache,
}

impl<'a> Walker<'a> {
    pub(crate) fn new(db: &'a ObjectDb, cache_bytes: usize) -> Self {
        Walker {
            db,
            cache: ObjectCache::new(cache_bytes),
        }
    }

    fn read(
        &mut self,
        oid: &ObjectId,
        context: &'static str,
    ) -> Result<gitstow_odb::Object, WalkError> {
        self.db
            .read(oid, &mut self.cache)?
            .ok_or(WalkError::Object(LimitError::Missing {
                oid: *oid,
                context,
            }))
    }

    fn commit_links(&mut self, oid: &ObjectId) -> Result<(ObjectId, Vec<ObjectId>), WalkError> {
        let c = read_commit(self.db, &mut self.cache, oid, "commit")?;
        Ok((c.tree, c.parents))
    }

    /// Peels tags: returns the tags passed through and the final object with its kind.
    pub(crate) fn peel(
        &mut self,
        oid: ObjectId,
    ) -> Result<(Vec<ObjectId>, ObjectId, Kind), WalkError> {
        let mut tags = Vec::new();
        let mut cur = oid;
        loop {
            let obj = self.read(&cur, "want")?;
            if obj.kind != Kind::Tag || tags.len() > 64 {
                return Ok((tags, cur, obj.kind));
            }
            let tag = gix_object::TagRef::from_bytes(&obj.data, obj.hash)
                .map_err(|e| corrupt(cur, e.to_string()))?;
            tags.push(cur);
            cur = tag.target();
        }
    }

    /// Adds `tree` and everything below it that `exclude` lacks to `seen`,
    /// calling `emit` for each new one.
    fn walk_tree(
        &mut self,
        tree: ObjectId,
        seen: &mut OidSet,
        exclude: &OidSet,
        emit: &mut dyn FnMut(ObjectId),
    ) -> Result<(), WalkError> {
        if exclude.contains(&tree) || !seen.insert(&tree) {
            return Ok(());
        }
        emit(tree);
        let mut stack = vec![tree];
        while let Some(t) = stack.pop() {
            let obj = self.read(&t, "tree")?;
            for entry in tree_iter(&t, &obj) {
                let (_, id, is_tree) = entry?;
                if exclude.contains(&id) || !seen.insert(&id) {
                    continue;
                }
                emit(id);
                if is_tree {
                    stack.push(id);
                }
            }
        }
        Ok(())
    }

    /// Walks `tree` (at depth 0) and what is below it that `exclude` lacks,
    /// as git's filtered `rev-list --objects` does: each object `filter`
    /// keeps is added to `seen` and emitted once; a tree is entered when
    /// something below it can be kept, and entered again when met nearer
    /// the root than before under a `tree:<depth>` filter (`entered` holds
    /// the least depth each tree was met at, across the whole walk).
    fn walk_tree_filtered(
        &mut self,
        tree: ObjectId,
        seen: &mut OidSet,
        exclude: &OidSet,
        filter: &Filter,
        entered: &mut Entered,
        emit: &mut dyn FnMut(ObjectId),
    ) -> Result<(), WalkError> {
        let by_depth = filter.limits_depth();
        let mut stack = vec![(tree, 0u64)];
        while let Some((t, depth)) = stack.pop() {
            if exclude.contains(&t) {
                continue;
            }
            let key = if by_depth { depth } else { 0 };
            if entered.get(&t).is_some_and(|d| *d <= key) {
                continue;
            }
            entered.insert(&t, key);
            if filter.keeps_tree(depth) && seen.insert(&t) {
                emit(t);
            }
            if !filter.enters_tree(depth) {
                continue;
            }
            let obj = self.read(&t, "tree")?;
            for entry in tree_iter(&t, &obj) {
                let (_, id, is_tree) = entry?;
                if is_tree {
                    stack.push((id, depth + 1));
                    continue;
                }
                if exclude.contains(&id) || seen.contains(&id) {
                    continue;
                }
                let size = if filter.needs_sizes() {
                    self.db.lookup(&id).map_or(0, |l| l.entry.size)
                } else {
                    0
                };
                if filter.keeps_blob(size, depth + 1) {
                    seen.insert(&id);
                    emit(id);
                }
            }
        }
        Ok(())
    }
}

/// Trees a filtered walk entered, with the least depth each was met at.
type Entered = gitstow_odb::oids::OidMap<u64>;

impl Walker<'_> {
    /// The trees and blobs of `interesting` root trees that the client lacks,
    /// walked together with the `uninteresting` root trees (the edges') path
    /// by path, as git's sparse reachability (`pack.useSparse`): a subtree is
    /// entered only where an interesting tree differs from what the edges hold
    /// at that path, and the edges' trees are read only along those paths.
    /// Every entry of an edge tree read goes into `client_has`; an entry found
    /// there is neither sent nor entered. (An object the client has at another
    /// path may be sent again: never less than needed.) Entry names are
    /// borrowed from the trees read, never copied.
    fn sparse_trees(
        &mut self,
        interesting: Vec<ObjectId>,
        uninteresting: Vec<ObjectId>,
        seen: &mut OidSet,
        client_has: &mut OidSet,
        emit: &mut dyn FnMut(ObjectId),
    ) -> Result<(), WalkError> {
        let mut read_out: OidSet = OidSet::new();
        client_has.extend(uninteresting.iter().copied());
        let mut stack: Vec<(Vec<ObjectId>, Vec<ObjectId>)> = vec![(interesting, uninteresting)];
        while let Some((ins, outs)) = stack.pop() {
            let mut out_trees = Vec::with_capacity(outs.len());
            for t in outs {
                if read_out.insert(&t) {
                    out_trees.push((t, self.read(&t, "tree")?));
                }
            }
            let mut out_children: std::collections::HashMap<&[u8], Vec<ObjectId>> =
                Default::default();
            for (t, obj) in &out_trees {
                for entry in tree_iter(t, obj) {
                    let (name, id, is_tree) = entry?;
                    client_has.insert(&id);
                    if is_tree {
                        out_children.entry(name).or_default().push(id);
                    }
                }
            }
            let mut in_trees = Vec::with_capacity(ins.len());
            for t in ins {
                if client_has.contains(&t) || !seen.insert(&t) {
                    continue;
                }
                emit(t);
                in_trees.push((t, self.read(&t, "tree")?));
            }
            // Subtrees to enter, in the order first met (deterministic).
            let mut in_children: Vec<(&[u8], Vec<ObjectId>)> = Vec::new();
            let mut slot: std::collections::HashMap<&[u8], usize> = Default::default();
            for (t, obj) in &in_trees {
                for entry in tree_iter(t, obj) {
                    let (name, id, is_tree) = entry?;
                    if client_has.contains(&id) {
                        continue;
                    }
                    if is_tree {
                        let i = *slot.entry(name).or_insert_with(|| {
                            in_children.push((name, Vec::new()));
                            in_children.len() - 1
                        });
                        in_children[i].1.push(id);
                    } else if seen.insert(&id) {
                        emit(id);
                    }
                }
            }
            for (name, ins) in in_children.into_iter().rev() {
                let outs = out_children.remove(name).unwrap_or_default();
                stack.push((ins, outs));
            }
        }
        Ok(())
    }
}

/// [`gitstow_odb::Object::tree_entries`] of tree `t`, a malformed entry a
/// [`LimitError::Corrupt`] naming it.
fn tree_iter<'d>(
    t: &ObjectId,
    obj: &'d gitstow_odb::Object,
) -> impl Iterator<Item = Result<(&'d [u8], ObjectId, bool), WalkError>> + 'd {
    let t = *t;
    obj.tree_entries()
        .map(move |entry| entry.map_err(|reason| corrupt(t, reason)))
}

/// What the client has and asked for, besides its wants.
#[derive(Debug, Clone, Copy)]
pub struct WalkOptions<'a> {
    /// `have` lines the repository has.
    pub haves: &'a [ObjectId],
    /// The shallow boundary.
    pub shallow: &'a ShallowPlan,
    /// The partial-clone filter, if any.
    pub filter: Option<&'a Filter>,
    /// Bytes of the delta-base cache.
    pub cache_bytes: usize,
    /// The ref tips, when every object of the repository is reachable from
    /// them (the state's `closed` flag): a fetch with no haves, no shallow
    /// and no filter whose wants include every tip then gets every object,
    /// read from the container indexes without a walk (the role of git's
    /// reachability bitmaps for a full clone).
    pub closed_tips: Option<&'a [ObjectId]>,
    /// The state's closure (see [`crate::closure`]), when it holds.
    pub closure: Option<ClosureView<'a>>,
    /// Positions of containers whose every object the client has (or gets
    /// whole): their commits end the commit walk like haves.
    pub known_containers: &'a [usize],
}

/// A state's [`gitstow_odb::state::Closure`] as the walk uses it.
#[derive(Debug, Clone, Copy)]
pub struct ClosureView<'a> {
    /// Its tips.
    pub tips: &'a [ObjectId],
    /// Positions of its containers in the [`ObjectDb`].
    pub containers: &'a [usize],
}

impl WalkOptions<'_> {
    /// A fetch with no haves, no shallow and no filter: a clone.
    pub(crate) fn is_plain_clone(&self) -> bool {
        let s = self.shallow;
        self.haves.is_empty()
            && self.filter.is_none()
            && s.boundary.is_empty()
            && s.client_shallows.is_empty()
            && s.unshallows.is_empty()
    }
}

/// The objects of a clone of every tip without a walk: every object of a
/// closed repository ([`Via::Closed`]), or the closure's containers and
/// what lies outside them ([`Via::Closure`]); `None` when neither applies
/// (a fetch with haves, a filter or a shallow boundary, wants that do not
/// reach every tip).
pub(crate) fn shortcut(
    db: &ObjectDb,
    wants: &[ObjectId],
    opts: &WalkOptions<'_>,
) -> Result<Option<Walk>, WalkError> {
    if let Some(walk) = every_object(db, wants, opts) {
        return Ok(Some(walk));
    }
    if let Some(closure) = opts.closure.filter(|_| opts.is_plain_clone()) {
        if let Some(walk) = crate::closure::clone_over(db, wants, opts, closure)? {
            return Ok(Some(Walk {
                via: Via::Closure,
                ..walk
            }));
        }
    }
    Ok(None)
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
    match shortcut(db, wants, opts)? {
        Some(walk) => Ok(walk),
        None => walk_objects(db, wants, opts),
    }
}

/// [`objects_to_send`] without the clone shortcuts: the walk itself.
pub(crate) fn walk_objects(
    db: &ObjectDb,
    wants: &[ObjectId],
    opts: &WalkOptions<'_>,
) -> Result<Walk, WalkError> {
    let (haves, shallow, cache_bytes) = (opts.haves, opts.shallow, opts.cache_bytes);
    let mut w = Walker::new(db, cache_bytes);
    for want in wants {
        if !db.contains(want) {
            return Err(WalkError::NotOurRef(*want));
        }
    }
    // 1. Commits to send: wants --not haves, walked together by date and
    //    stopped once only the haves' side is left (see `limit`).
    let mut seen: OidSet = OidSet::new();
    let mut out = Walk::default();
    let mut have_commits: Vec<ObjectId> = Vec::new();
    for have in haves
        .iter()
        .chain(&shallow.client_shallows)
        .filter(|h| db.contains(h))
    {
        let (_, target, kind) = w.peel(*have)?;
        if kind == Kind::Commit {
            have_commits.push(target);
        }
    }
    let mut want_commits: Vec<ObjectId> = Vec::new();
    let mut other_roots: Vec<(ObjectId, Kind)> = Vec::new();
    for want in wants {
        let (tags, target, kind) = w.peel(*want)?;
        for t in tags {
            if seen.insert(&t) {
                out.objects.push(&t, ());
            }
        }
        match kind {
            Kind::Commit => want_commits.push(target),
            _ => other_roots.push((target, kind)),
        }
    }
    let mut deepened_parents: Vec<ObjectId> = Vec::new();
    for u in &shallow.unshallows {
        let (_, parents) = w.commit_links(u)?;
        deepened_parents.extend(parents);
    }
    let limited = gitstow_odb::limit::limit(
        db,
        &want_commits,
        &have_commits,
        &deepened_parents,
        &shallow.client_shallows,
        &shallow.boundary,
        opts.known_containers,
        cache_bytes,
    )?;
    out.commits_read = limited.commits_read;
    let mut commits: Vec<(ObjectId, ObjectId)> = Vec::with_capacity(limited.commits.len());
    // A commit the walk reached (not one a want names) is sent if the filter
    // keeps commits; its tree is walked either way.
    let keeps_commits = opts.filter.is_none_or(Filter::keeps_commit);
    let given: OidSet = if keeps_commits {
        OidSet::new()
    } else {
        want_commits.iter().copied().collect()
    };
    for (c, tree) in limited.commits {
        if seen.insert(&c) {
            if keeps_commits || given.contains(&c) {
                out.objects.push(&c, ());
                out.commits += 1;
            }
            commits.push((c, tree));
        }
    }
    // 2. Trees and blobs to send, minus what the client has through the
    //    boundary commits' trees. Without a filter, walked path by path
    //    against the edges' trees (reading only what changed); with one,
    //    the edges' trees are walked whole first (each shared subtree once)
    //    and the filter applies to the rest.
    let mut excluded: OidSet = OidSet::new();
    let mut emit_list = OidVec::new();
    let mut entered = Entered::default();
    match opts.filter {
        None => {
            let ins: Vec<ObjectId> = commits.iter().map(|(_, t)| *t).collect();
            let outs: Vec<ObjectId> = limited.edges.iter().map(|(_, t)| *t).collect();
            w.sparse_trees(ins, outs, &mut seen, &mut excluded, &mut |id| {
                emit_list.push(&id, ())
            })?;
        }
        Some(filter) => {
            let none = OidSet::new();
            for (_, tree) in &limited.edges {
                w.walk_tree(*tree, &mut excluded, &none, &mut |_| {})?;
            }
            for (_, tree) in &commits {
                w.walk_tree_filtered(
                    *tree,
                    &mut seen,
                    &excluded,
                    filter,
                    &mut entered,
                    &mut |id| emit_list.push(&id, ()),
                )?;
            }
        }
    }
    for (root, kind) in other_roots {
        match (kind, opts.filter) {
            (Kind::Tree, None) => w.walk_tree(root, &mut seen, &excluded, &mut |id| {
                emit_list.push(&id, ())
            })?,
            (Kind::Tree, Some(filter)) => {
                // A wanted tree is sent whatever the filter; its contents are filtered.
                if seen.insert(&root) {
                    emit_list.push(&root, ());
                }
                w.walk_tree_filtered(
                    root,
                    &mut seen,
                    &excluded,
                    filter,
                    &mut entered,
                    &mut |id| emit_list.push(&id, ()),
                )?
            }
            _ => {
                if seen.insert(&root) {
                    emit_list.push(&root, ());
                }
            }
        }
    }
    out.objects.append(emit_list);
    // What the client has: a stored delta against any of it may go out as is
    // in a thin pack.
    out.edges = limited.edges.iter().map(|(c, _)| *c).collect();
    out.edges.extend(
        want_commits
            .iter()
            .filter(|c| limited.uninteresting.contains(*c)),
    );
    excluded.extend(limited.uninteresting);
    out.client_has = excluded;
    Ok(out)
}

/// The full-clone answer of [`WalkOptions::closed_tips`], if it applies.
fn every_object(db: &ObjectDb, wants: &[ObjectId], opts: &WalkOptions<'_>) -> Option<Walk> {
    let tips = opts.closed_tips?;
    if !opts.is_plain_clone() || tips.is_empty() || !wants.iter().all(|w| db.contains(w)) {
        return None;
    }
    let wanted: OidSet = wants.iter().copied().collect();
    if !tips.iter().all(|t| wanted.contains(t)) {
        return None;
    }
    let mut seen: OidSet = OidSet::new();
    let mut out = Walk {
        via: Via::Closed,
        ..Walk::default()
    };
    for entry in db.entries() {
        if seen.insert(&entry.oid) {
            out.objects.push(&entry.oid, ());
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
    let mut sent: OidSet = walk.objects.ids().collect();
    let mut w = Walker::new(db, 1 << 20);
    for (tag, peeled) in tags {
        if sent.contains(tag) || !sent.contains(peeled) {
            continue;
        }
        let (chain, _, _) = w.peel(*tag)?;
        for t in chain {
            if sent.insert(&t) {
                walk.objects.push(&t, ());
            }
        }
    }
    Ok(())
}
