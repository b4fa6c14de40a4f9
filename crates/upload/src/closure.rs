//! Clones over a GC's closure: the role of git's reachability bitmaps for the
//! one set of commits a GC walked.
//!
//! A GC leaves containers that hold exactly what its tips reach (the state's
//! [`gitstow_odb::state::Closure`]). A clone whose wants reach every tip gets
//! those containers whole plus what lies outside them: `wants --not tips`,
//! walked as an incremental fetch from the tips would be (the limited commit
//! walk, then trees path by path against the boundary's), so its cost is
//! that of the pushes since the GC, not of the history.
//!
//! "The wants reach every tip" is decided from that same walk: a commit tip
//! is reached when it is one of the walk's edges (a wanted commit or the
//! parent of a commit to send). Tips are the refs no other tip reaches, so a tip reached only
//! through another tip's history cannot exist. A tip that is a tag (or a tree
//! or blob) must be wanted itself. When any tip is not reached (its branch
//! was deleted or rewound, or the client asked for some refs only), the
//! containers hold objects the client must not get, and the clone takes the
//! plain walk.

use gitstow_odb::oids::OidSet;
use gix_hash::ObjectId;
use gix_object::Kind;

use gitstow_odb::record::COMMIT;
use gitstow_odb::ObjectDb;

use crate::walk::{objects_to_send, ClosureView, Walk, WalkError, WalkOptions, Walker};

/// The objects of a plain clone (see [`WalkOptions::is_plain_clone`]) over
/// `closure`, or `Ok(None)` when the wants do not reach every tip.
pub(crate) fn clone_over(
    db: &ObjectDb,
    wants: &[ObjectId],
    opts: &WalkOptions<'_>,
    closure: ClosureView<'_>,
) -> Result<Option<Walk>, WalkError> {
    if !closure.tips.iter().all(|t| db.contains(t)) {
        tracing::debug!("closure not used: a tip is missing");
        return Ok(None);
    }
    let mut w = Walker::new(db, 1 << 20);
    let wanted: OidSet = wants.iter().copied().collect();
    // Commits the client will have through the tips, and the commit tips
    // that the walk must reach.
    let mut tip_commits: Vec<ObjectId> = Vec::new();
    let mut commit_tips: Vec<ObjectId> = Vec::new();
    for tip in closure.tips {
        let (tags, target, kind) = w.peel(*tip)?;
        if (!tags.is_empty() || kind != Kind::Commit) && !wanted.contains(tip) {
            tracing::debug!(%tip, "closure not used: a tag or non-commit tip is not wanted");
            return Ok(None);
        }
        if kind == Kind::Commit {
            tip_commits.push(target);
            if tags.is_empty() {
                commit_tips.push(target);
            }
        }
    }
    let outside = objects_to_send(
        db,
        wants,
        &WalkOptions {
            haves: &tip_commits,
            closed_tips: None,
            closure: None,
            known_containers: closure.containers,
            ..*opts
        },
    )?;
    let reached: OidSet = outside.edges.iter().copied().collect();
    if let Some(tip) = commit_tips.iter().find(|t| !reached.contains(t)) {
        tracing::debug!(%tip, "closure not used: the wants do not reach a tip");
        return Ok(None);
    }
    let inside = |oid: &gix_hash::oid| {
        closure
            .containers
            .iter()
            .any(|&i| db.container(i).lookup(oid).is_some())
    };
    // Commits of the closure containers end the walk as had: every commit
    // it sends lies outside them.
    let mut out = Walk {
        commits_read: outside.commits_read,
        commits: outside.commits,
        ..Walk::default()
    };
    for &i in closure.containers {
        for e in db.container(i).iter() {
            out.objects.push(&e.oid, ());
            out.commits += usize::from(e.kind == COMMIT);
        }
    }
    for oid in outside.objects.ids().filter(|oid| !inside(oid)) {
        out.objects.push(oid, ());
    }
    Ok(Some(out))
}
