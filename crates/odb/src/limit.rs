//! The commits of `wants --not haves`, walked as git's `limit_list`
//! (revision.c) does: both sides in one queue ordered by commit date, newest
//! first; the haves' side marks what it reaches *uninteresting*, and the walk
//! stops once every queued commit is uninteresting (after a few more steps,
//! git's `SLOP`, against clock skew). An incremental fetch therefore reads the
//! new commits and a short stretch of the boundary, never the whole history
//! behind the haves.
//!
//! Stopping early can only err on the safe side: a commit reachable from the
//! haves through a path that the walk did not follow (dates out of order) is
//! sent although the client has it, never the reverse.
//!
//! Shallow grafts as git applies them: the client's shallow commits pass no
//! mark to their parents (the client lacks them), and the commits of the
//! shallow boundary are sent without their parents.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use gix_hash::ObjectId;
use gix_hashtable::{HashMap, HashSet};

use crate::graph::CommitRow;
use crate::{ObjectCache, ObjectDb};

/// Why a limited walk stopped short.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// A commit the walk reaches is missing.
    #[error("missing object {oid} ({context})")]
    Missing {
        /// The commit.
        oid: ObjectId,
        /// Who names it (`want`, `have`, `parent`).
        context: &'static str,
    },
    /// A commit does not parse.
    #[error("object {oid} does not parse: {reason}")]
    Corrupt {
        /// The commit.
        oid: ObjectId,
        /// The parser's message.
        reason: String,
    },
    /// Reading failed.
    #[error(transparent)]
    Odb(#[from] crate::Error),
}

/// Commit `oid`'s row ([`ObjectDb::commit_row`]: from its container's
/// commit graph when there is one, otherwise read and parsed); `context`
/// names who asked, for the error when it is missing.
///
/// # Errors
/// [`LimitError`]: the commit is missing, does not parse, or reading failed.
pub fn read_commit(
    db: &ObjectDb,
    cache: &mut ObjectCache,
    oid: &ObjectId,
    context: &'static str,
) -> Result<CommitRow, LimitError> {
    match db.commit_row(oid, cache) {
        Ok(Some(row)) => Ok(row),
        Ok(None) => Err(LimitError::Missing { oid: *oid, context }),
        Err(crate::Error::CorruptObject { oid, reason }) => {
            Err(LimitError::Corrupt { oid, reason })
        }
        Err(e) => Err(e.into()),
    }
}

/// git's `SLOP`: steps taken after the queue holds only uninteresting commits.
const SLOP: u32 = 5;

const UNINTERESTING: u8 = 1;
const POPPED: u8 = 2;
const QUEUED: u8 = 4;

struct Node {
    tree: ObjectId,
    parents: Vec<ObjectId>,
    time: i64,
    flags: u8,
}

/// What the limited walk found.
#[derive(Debug, Default)]
pub struct Limited {
    /// Commits to send with their root trees, newest first.
    pub commits: Vec<(ObjectId, ObjectId)>,
    /// Uninteresting commits that are parents of commits to send, with their
    /// root trees: the client has them, and their trees bound the tree walk.
    pub edges: Vec<(ObjectId, ObjectId)>,
    /// Every commit the walk marked uninteresting (the client has them).
    pub uninteresting: HashSet,
    /// Commits read (inflated and parsed).
    pub commits_read: usize,
}

struct Limiter<'a> {
    db: &'a ObjectDb,
    cache: ObjectCache,
    nodes: HashMap<ObjectId, Node>,
    heap: BinaryHeap<(i64, Reverse<u64>, ObjectId)>,
    seq: u64,
    interesting_queued: usize,
    client_shallows: &'a HashSet,
    known: &'a [usize],
}

impl Limiter<'_> {
    fn load(&mut self, oid: ObjectId, context: &'static str) -> Result<(), LimitError> {
        if self.nodes.contains_key(&oid) {
            return Ok(());
        }
        let c = read_commit(self.db, &mut self.cache, &oid, context)?;
        self.nodes.insert(
            oid,
            Node {
                tree: c.tree,
                parents: c.parents,
                time: c.time,
                flags: 0,
            },
        );
        Ok(())
    }

    /// Queues `oid` (loaded first) unless it was queued before.
    fn enqueue(
        &mut self,
        oid: ObjectId,
        uninteresting: bool,
        context: &'static str,
    ) -> Result<(), LimitError> {
        self.load(oid, context)?;
        let uninteresting = uninteresting
            || self
                .known
                .iter()
                .any(|&i| self.db.container(i).lookup(&oid).is_some());
        let node = self.nodes.get_mut(&oid).expect("loaded");
        if node.flags & QUEUED != 0 {
            if uninteresting {
                self.mark_uninteresting(oid);
            }
            return Ok(());
        }
        node.flags |= QUEUED;
        if uninteresting {
            node.flags |= UNINTERESTING;
        } else {
            self.interesting_queued += 1;
        }
        self.seq += 1;
        self.heap.push((node.time, Reverse(self.seq), oid));
        Ok(())
    }

    /// Marks `oid` uninteresting, and through commits already walked, their
    /// ancestors (git's `mark_parents_uninteresting`).
    fn mark_uninteresting(&mut self, oid: ObjectId) {
        let mut stack = vec![oid];
        while let Some(c) = stack.pop() {
            let Some(node) = self.nodes.get_mut(&c) else {
                continue;
            };
            if node.flags & UNINTERESTING != 0 {
                continue;
            }
            node.flags |= UNINTERESTING;
            if node.flags & QUEUED != 0 && node.flags & POPPED == 0 {
                self.interesting_queued -= 1;
            }
            if node.flags & POPPED != 0 && !self.client_shallows.contains(&c) {
                stack.extend(node.parents.iter().copied());
            }
        }
    }
}

/// Walks `wants` (commits, interesting) against `haves` (commits the
/// repository has, uninteresting). `also_wanted` are commits to send as well
/// (the parents of commits the client deepens). `boundary`: commits sent
/// without their parents. Commits stored in the containers at positions
/// `known` are uninteresting as soon as they are queued (the client has
/// everything these containers hold).
#[allow(clippy::too_many_arguments)]
pub fn limit(
    db: &ObjectDb,
    wants: &[ObjectId],
    haves: &[ObjectId],
    also_wanted: &[ObjectId],
    client_shallows: &HashSet,
    boundary: &HashSet,
    known: &[usize],
    cache_bytes: usize,
) -> Result<Limited, LimitError> {
    let mut l = Limiter {
        db,
        cache: ObjectCache::new(cache_bytes),
        nodes: HashMap::default(),
        heap: BinaryHeap::new(),
        seq: 0,
        interesting_queued: 0,
        client_shallows,
        known,
    };
    for h in haves {
        l.enqueue(*h, true, "have")?;
    }
    for w in wants.iter().chain(also_wanted) {
        l.enqueue(*w, false, "want")?;
    }
    let mut popped_interesting: Vec<ObjectId> = Vec::new();
    let mut slop = SLOP;
    let mut last_interesting_date = i64::MAX;
    while let Some((_, _, c)) = l.heap.pop() {
        let node = l.nodes.get_mut(&c).expect("queued commits are loaded");
        node.flags |= POPPED;
        let flags = node.flags;
        let parents = node.parents.clone();
        let time = node.time;
        if flags & UNINTERESTING == 0 {
            l.interesting_queued -= 1;
            popped_interesting.push(c);
            last_interesting_date = time;
            if !boundary.contains(&c) {
                for p in parents {
                    l.enqueue(p, false, "parent")?;
                }
            }
            continue;
        }
        if !client_shallows.contains(&c) {
            for p in parents {
                // A have's ancestors the repository lacks (a shallow
                // repository's own history) are simply not there to mark.
                if db.contains(&p) {
                    l.enqueue(p, true, "parent")?;
                }
            }
        }
        // git's still_interesting(): go on while an interesting commit could
        // still be reached; then SLOP more steps.
        let Some(&(next_date, _, _)) = l.heap.peek() else {
            break;
        };
        if last_interesting_date <= next_date || l.interesting_queued > 0 {
            slop = SLOP;
        } else {
            slop -= 1;
            if slop == 0 {
                break;
            }
        }
    }
    let mut out = Limited {
        commits_read: l.nodes.len(),
        ..Default::default()
    };
    let mut edges: HashSet = HashSet::default();
    for c in popped_interesting {
        let node = &l.nodes[&c];
        if node.flags & UNINTERESTING != 0 {
            continue;
        }
        out.commits.push((c, node.tree));
        if boundary.contains(&c) {
            continue;
        }
        for p in &node.parents {
            if let Some(pn) = l.nodes.get(p) {
                if pn.flags & UNINTERESTING != 0 && edges.insert(*p) {
                    out.edges.push((*p, pn.tree));
                }
            }
        }
    }
    out.uninteresting = l
        .nodes
        .iter()
        .filter(|(_, n)| n.flags & UNINTERESTING != 0)
        .map(|(oid, _)| *oid)
        .collect();
    Ok(out)
}
