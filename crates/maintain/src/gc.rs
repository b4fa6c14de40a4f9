//! Garbage collection, as JGit's `DfsGarbageCollector`: what the refs reach
//! is rewritten into new live containers laid out for serving (commits, then
//! tags, trees and blobs, each in the old containers' order), everything
//! else into *garbage* containers held for the grace period.
//!
//! The invariant that makes it safe: **refs reach only objects of live
//! containers.** GC keeps it by walking the refs of the state it commits on;
//! pushes keep it by bringing back to the live list any garbage container
//! they relied on (or that a GC made while they ran) in their own commit
//! (`receive::transaction`). Then:
//!
//! - garbage whose grace period is over holds nothing a ref reaches, and is
//!   retired (deleted a grace period later, so fetches on older states
//!   finish) without being read;
//! - if a push changed the refs while the GC walked, the GC re-applies with
//!   its garbage kept live (a new ref may reach it): nothing is lost, the
//!   next GC sorts it out;
//! - the replaced containers (and expired garbage) go to the retired list
//!   after the state commit, and are deleted a grace period later;
//! - after a GC on unchanged refs every live object is reachable, so the
//!   state is `closed` and a full clone needs no walk;
//! - the live output holds exactly what the walked refs reach (when none of
//!   it is missing): the state's `closure`, with which a clone after later
//!   pushes walks only what those pushes added.
//!
//! Memory: the set of reachable oids (about 40 bytes an object), the source
//! indexes, and a bounded cache of resolved delta bases for reading commits,
//! trees and tags. Records are copied verbatim, never inflated.

use gitstow_odb::oids::OidSet;
use gitstow_odb::record::{BLOB, COMMIT, TAG, TREE};
use gitstow_odb::state::{Closure, ContainerRef, GarbageContainer};
use gitstow_odb::{ObjectCache, ObjectDb, RepoState, Repository};
use gix_hash::ObjectId;
use gix_hashtable::HashSet;

use crate::compact::{staging_dir, Output, Sources};
use crate::{now_secs, retire, update_state_naming, Error, Options, Result, Step};

/// What a GC wrote.
#[derive(Debug, Default)]
pub struct Collected {
    /// New live containers (what the refs reach), in serving order.
    pub live: Vec<ContainerRef>,
    /// New garbage containers (what they do not reach).
    pub garbage: Vec<ContainerRef>,
    /// Distinct objects the refs reach.
    pub reachable: u64,
    /// Distinct objects they do not reach.
    pub unreachable: u64,
    /// Objects a reachable object names that the repository does not have
    /// (a shallow push's missing parents); not an error.
    pub missing: u64,
    /// Duplicate records left out.
    pub duplicates_dropped: u64,
    /// The tips of [`Reach`], when nothing was missing: the live output holds
    /// exactly what they reach (the state's [`Closure`]).
    pub closure_tips: Option<Vec<ObjectId>>,
    /// Reachability bitmaps written over the live output (0: none).
    pub bitmaps: usize,
}

/// What the refs of a state reach.
#[derive(Debug, Default)]
pub struct Reach {
    /// Every object they reach that the repository has.
    pub objects: OidSet,
    /// Objects a reached object names that the repository lacks.
    pub missing: u64,
    /// The ref tips that no other reached object names (a commit that is no
    /// tip's ancestor, a tag no tag points at), distinct, sorted.
    pub tips: Vec<ObjectId>,
}

/// Every object the refs of `state` reach among the objects of `db`
/// (the refs read through `repo`'s ref tables).
pub fn reachable(repo: &Repository, db: &ObjectDb, state: &RepoState) -> Result<Reach> {
    let mut seen = OidSet::new();
    let tips: HashSet = repo.refs(state)?.tips()?.into_iter().collect();
    let mut named_tips: HashSet = HashSet::default();
    let mut stack: Vec<ObjectId> = tips.iter().copied().collect();
    let mut cache = ObjectCache::new(16 << 20);
    let mut missing = 0;
    let corrupt = |oid: ObjectId, reason: String| {
        Error::Odb(gitstow_odb::Error::CorruptObject { oid, reason })
    };
    while let Some(oid) = stack.pop() {
        if !seen.insert(&oid) {
            continue;
        }
        let Some(loc) = db.lookup(&oid) else {
            seen.remove(&oid);
            missing += 1;
            continue;
        };
        let kind = loc.entry.kind;
        if kind == BLOB {
            continue;
        }
        let Some(obj) = db.read(&oid, &mut cache)? else {
            continue;
        };
        let named_from = stack.len();
        match kind {
            COMMIT => {
                let c = gix_object::CommitRef::from_bytes(&obj.data, obj.hash)
                    .map_err(|e| corrupt(oid, e.to_string()))?;
                stack.push(c.tree());
                stack.extend(c.parents());
            }
            TREE => {
                for entry in obj.tree_entries() {
                    let (_, id, _) = entry.map_err(|reason| corrupt(oid, reason))?;
                    stack.push(id);
                }
            }
            TAG => {
                let t = gix_object::TagRef::from_bytes(&obj.data, obj.hash)
                    .map_err(|e| corrupt(oid, e.to_string()))?;
                stack.push(t.target());
            }
            _ => {}
        }
        named_tips.extend(stack[named_from..].iter().filter(|o| tips.contains(*o)));
    }
    let mut minimal: Vec<ObjectId> = tips.difference(&named_tips).copied().collect();
    minimal.sort();
    Ok(Reach {
        objects: seen,
        missing,
        tips: minimal,
    })
}

/// Rewrites the live containers of `state`: what its refs reach into new
/// live containers, the rest into new garbage containers; uploads both.
pub fn collect(
    repo: &Repository,
    state: &RepoState,
    opts: &Options,
    progress: &mut dyn FnMut(&str),
) -> Result<Collected> {
    let db = repo.live_objects(state)?;
    let Reach {
        objects: reach,
        missing,
        tips,
    } = reachable(repo, &db, state)?;
    progress(&format!(
        "{}: {} objects reachable from {} refs",
        repo.name(),
        reach.len(),
        state.refs.len()
    ));
    let staging = staging_dir(opts)?;
    let mut src = Sources::open(repo, &state.containers)?;
    for s in 0..state.containers.len() {
        src.download(repo, s, staging.path())?;
    }
    let mut live = Output::new(repo, &db, staging.path(), opts.max_container_bytes);
    for kind in [COMMIT, TAG, TREE, BLOB] {
        for s in 0..state.containers.len() {
            for e in src.records(s, &|e| e.kind == kind && reach.contains(&e.oid)) {
                src.copy(s, &e, &mut live)?;
            }
        }
    }
    let (live, _) = live.finish()?;
    let mut garbage = Output::new(repo, &db, staging.path(), opts.max_container_bytes);
    let mut unreachable = 0;
    for s in 0..state.containers.len() {
        for e in src.records(s, &|e| !reach.contains(&e.oid)) {
            unreachable += 1;
            src.copy(s, &e, &mut garbage)?;
        }
    }
    let (garbage, _) = garbage.finish()?;
    let bitmaps = if missing == 0 && !live.is_empty() {
        crate::bitmaps::write(repo, &live, &tips, opts)?
    } else {
        0
    };
    Ok(Collected {
        bitmaps,
        live,
        garbage,
        reachable: src.distinct() - unreachable,
        unreachable,
        missing,
        duplicates_dropped: src.objects_in - src.distinct(),
        closure_tips: (missing == 0).then_some(tips),
    })
}

/// Publishes a GC made from `walked` (the state whose refs and live
/// containers it read). In the current state the sources (still all live)
/// are replaced by the new live containers, put first; the new garbage is
/// listed as garbage when the refs are still those walked, else kept live;
/// the sources and every garbage container whose grace period is over are
/// retired. Re-applied on conflict. `Ok(false)` when a source is gone
/// (another run rewrote it).
pub fn commit(
    repo: &Repository,
    walked: &RepoState,
    collected: &Collected,
    opts: &Options,
) -> Result<bool> {
    let sources = &walked.containers;
    let is_source = |id: &str| sources.iter().any(|s| s.id == id);
    let mut expired: Vec<String> = Vec::new();
    let ids: Vec<String> = collected
        .live
        .iter()
        .chain(&collected.garbage)
        .map(|c| c.id.clone())
        .collect();
    let uploads = Some((walked.deletions, ids.as_slice()));
    let done = update_state_naming(repo, opts, "collecting garbage", uploads, |state| {
        if sources
            .iter()
            .any(|s| !state.containers.iter().any(|c| c.id == s.id))
        {
            return Step::Done(false);
        }
        let refs_unchanged = state.refs == walked.refs;
        let now = now_secs();
        let mut next = state.clone();
        next.containers.retain(|c| !is_source(&c.id));
        let others = next.containers.len();
        let mut front = collected.live.clone();
        if refs_unchanged {
            next.garbage
                .extend(collected.garbage.iter().map(|g| GarbageContainer {
                    id: g.id.clone(),
                    objects: g.objects,
                    bytes: g.bytes,
                    since: now,
                }));
        } else {
            tracing::info!(
                repo = repo.name(),
                "refs changed during GC; its garbage stays live until the next GC"
            );
            front.extend(collected.garbage.iter().cloned());
        }
        next.containers.splice(0..0, front);
        expired = crate::sweep::expired_garbage(state, now, opts);
        next.garbage.retain(|g| !expired.contains(&g.id));
        next.closed = refs_unchanged && others == 0;
        next.closure = collected
            .closure_tips
            .clone()
            .filter(|tips| !tips.is_empty() && !collected.live.is_empty())
            .map(|tips| Closure {
                tips,
                containers: collected.live.iter().map(|c| c.id.clone()).collect(),
                bitmaps: true,
            });
        Step::Write(next, true)
    })?
    .unwrap_or(false);
    if done {
        let ids: Vec<String> = sources
            .iter()
            .map(|s| s.id.clone())
            .chain(expired)
            .collect();
        retire(repo, opts, &ids)?;
    }
    Ok(done)
}
