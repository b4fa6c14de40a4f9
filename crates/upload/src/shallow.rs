//! Shallow fetches: `deepen <n>`, `deepen-relative`, `deepen-since <time>`,
//! `deepen-not <ref>` and the client's own `shallow <oid>` boundary
//! (gitprotocol-pack(5) "Shallow", gitprotocol-v2(5) "fetch").
//!
//! [`plan`] walks commits breadth-first from the wants (or, with
//! `deepen-relative`, from the client's shallow commits) and stops at the new
//! boundary. It returns the `shallow`/`unshallow` lines to send and the
//! boundary the reachability walk must respect.

use std::collections::VecDeque;

use gix_hashtable::{HashMap, HashSet};

use gitstow_odb::{ObjectCache, ObjectDb, Refs};
use gix_hash::ObjectId;

use crate::walk::WalkError;

/// How far the client asked to deepen.
#[derive(Debug, Clone, Default)]
pub struct ShallowRequest {
    /// The client's current shallow commits (`shallow <oid>` lines).
    pub client_shallows: Vec<ObjectId>,
    /// `deepen <n>`.
    pub deepen: Option<u32>,
    /// `deepen-relative`: count `deepen` from the client's shallow commits.
    pub deepen_relative: bool,
    /// `deepen-since <unix seconds>`.
    pub deepen_since: Option<i64>,
    /// `deepen-not` refs, resolved to commits.
    pub deepen_not: Vec<ObjectId>,
}

impl ShallowRequest {
    /// True when the client asked to change its depth.
    pub fn deepens(&self) -> bool {
        self.deepen.is_some() || self.deepen_since.is_some() || !self.deepen_not.is_empty()
    }

    /// True when a shallow section belongs in the response (a deepen request or a shallow client).
    pub fn needs_shallow_section(&self) -> bool {
        self.deepens() || !self.client_shallows.is_empty()
    }
}

/// The outcome of a shallow request.
#[derive(Debug, Default, Clone)]
pub struct ShallowPlan {
    /// New shallow commits to announce (`shallow <oid>`).
    pub shallows: Vec<ObjectId>,
    /// Client shallow commits whose parents will now be sent (`unshallow <oid>`).
    pub unshallows: Vec<ObjectId>,
    /// Commits whose parents must not be sent: the new shallows and the
    /// client's shallows that stay shallow.
    pub boundary: HashSet,
    /// The client's shallow commits as it sent them (it lacks their parents).
    pub client_shallows: HashSet,
}

/// Resolves `deepen-not` names as git's `dwim_ref` does for the common cases:
/// a full ref name, or a short name under `refs/heads/` or `refs/tags/`.
///
/// # Errors
/// The outer error when the refs could not be read; the inner one, git's
/// message, when a name resolves to no ref.
pub fn resolve_deepen_not(
    refs: &Refs<'_>,
    names: &[String],
) -> gitstow_odb::Result<Result<Vec<ObjectId>, String>> {
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        let peel = |full: &str| -> gitstow_odb::Result<Option<ObjectId>> {
            Ok(refs.get(full)?.and_then(|v| v.peeled().or(v.oid())))
        };
        let found = match peel(n)? {
            Some(oid) => Some(oid),
            None => match peel(&format!("refs/heads/{n}"))? {
                Some(oid) => Some(oid),
                None => peel(&format!("refs/tags/{n}"))?,
            },
        };
        match found {
            Some(oid) => out.push(oid),
            None => return Ok(Err(format!("git upload-pack: ambiguous deepen-not: {n}"))),
        }
    }
    Ok(Ok(out))
}

struct Commits<'a> {
    db: &'a ObjectDb,
    cache: ObjectCache,
    memo: HashMap<ObjectId, (Vec<ObjectId>, i64)>,
}

impl Commits<'_> {
    /// Parents and committer time of a commit.
    fn get(&mut self, oid: &ObjectId) -> Result<(Vec<ObjectId>, i64), WalkError> {
        if let Some(v) = self.memo.get(oid) {
            return Ok(v.clone());
        }
        let c = crate::walk::read_commit(self.db, &mut self.cache, oid, "commit")?;
        let v = (c.parents, c.time);
        self.memo.insert(*oid, v.clone());
        Ok(v)
    }
}

/// Computes the new shallow boundary for `wants` (commits).
pub fn plan(
    db: &ObjectDb,
    wants: &[ObjectId],
    req: &ShallowRequest,
) -> Result<ShallowPlan, WalkError> {
    let client: HashSet = req.client_shallows.iter().copied().collect();
    let mut out = ShallowPlan {
        client_shallows: client.clone(),
        ..Default::default()
    };
    if !req.deepens() {
        out.boundary = client;
        return Ok(out);
    }
    let mut commits = Commits {
        db,
        cache: ObjectCache::new(8 << 20),
        memo: HashMap::default(),
    };
    let excluded: HashSet = if req.deepen_not.is_empty() {
        HashSet::default()
    } else {
        let mut set = HashSet::default();
        let mut queue: VecDeque<ObjectId> = req.deepen_not.iter().copied().collect();
        while let Some(c) = queue.pop_front() {
            if set.insert(c) {
                queue.extend(commits.get(&c)?.0);
            }
        }
        set
    };
    // Breadth-first from the seeds; `depth` counts the seeds as 1.
    let seeds: Vec<ObjectId> = if req.deepen_relative && req.deepen.is_some() {
        req.client_shallows.clone()
    } else {
        wants.to_vec()
    };
    let mut seeds_peeled = Vec::with_capacity(seeds.len());
    for s in seeds {
        let mut cur = s;
        for _ in 0..64 {
            match db.read(&cur, &mut commits.cache)? {
                Some(obj) if obj.kind == gix_object::Kind::Tag => {
                    match gix_object::TagRef::from_bytes(&obj.data, obj.hash) {
                        Ok(tag) => cur = tag.target(),
                        Err(_) => break,
                    }
                }
                Some(obj) if obj.kind == gix_object::Kind::Commit => {
                    seeds_peeled.push(cur);
                    break;
                }
                _ => break,
            }
        }
    }
    let seeds = seeds_peeled;
    let start_depth = if req.deepen_relative { 0 } else { 1 };
    let mut depth: HashMap<ObjectId, u32> = HashMap::default();
    let mut queue: VecDeque<ObjectId> = VecDeque::new();
    for s in seeds {
        if db.contains(&s) && !depth.contains_key(&s) {
            depth.insert(s, start_depth);
            queue.push_back(s);
        }
    }
    let mut expanded: HashSet = HashSet::default();
    while let Some(c) = queue.pop_front() {
        let d = depth[&c];
        let (parents, _) = commits.get(&c)?;
        let stop = if let Some(n) = req.deepen {
            d >= n
        } else if let Some(since) = req.deepen_since {
            let mut any_old = false;
            for p in &parents {
                if commits.get(p)?.1 < since {
                    any_old = true;
                }
            }
            any_old
        } else {
            parents.iter().any(|p| excluded.contains(p))
        };
        if stop {
            if !parents.is_empty() {
                out.boundary.insert(c);
                if !client.contains(&c) {
                    out.shallows.push(c);
                }
            }
            continue;
        }
        expanded.insert(c);
        for p in parents {
            if let gix_hashtable::hash_map::Entry::Vacant(e) = depth.entry(p) {
                e.insert(d.saturating_add(1));
                queue.push_back(p);
            }
        }
    }
    for s in &req.client_shallows {
        if expanded.contains(s) {
            out.unshallows.push(*s);
        } else {
            out.boundary.insert(*s);
        }
    }
    Ok(out)
}
