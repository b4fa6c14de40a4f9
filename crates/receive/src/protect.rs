//! Protected refs: non-fast-forward updates and deletions refused, as git's
//! `receive.denyNonFastForwards` and `receive.denyDeletes` refuse them, and
//! in their words, for a pusher who may not rewrite them (access control
//! decides who; see `gitstow_access`).

use gix_hash::ObjectId;
use gix_hashtable::HashSet;

use gitstow_odb::graph::GENERATION_UNKNOWN;
use gitstow_odb::{ObjectCache, ObjectDb};

use gitstow_odb::Repository;
use gitstow_protocol::push::PushRequest;

use crate::reason::Reason;
use crate::{objects_with_push, Outcome, UnpackFailure};

/// Which refs a push may not rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protect {
    /// Ref patterns: a full ref name (`refs/heads/main`), a prefix ending in
    /// `/*` (`refs/tags/*`, any depth), or `HEAD` (the branch the
    /// repository's HEAD names).
    pub refs: Vec<String>,
}

impl Protect {
    /// Whether `name` is protected, `head` being the ref HEAD names.
    pub fn covers(&self, name: &str, head: Option<&str>) -> bool {
        self.refs.iter().any(|p| {
            if p == "HEAD" {
                head == Some(name)
            } else if let Some(prefix) = p.strip_suffix('*') {
                prefix.ends_with('/') && name.starts_with(prefix)
            } else {
                p == name
            }
        })
    }
}

/// Whether `old` is `new` or one of its ancestors: a walk of `new`'s
/// parents that does not go below `old`'s generation (when both are known)
/// and stops at `old`. `false` when `new` is not a commit or a commit on
/// the way cannot be read (not a fast-forward as far as can be told).
pub fn is_ancestor(db: &ObjectDb, old: &ObjectId, new: &ObjectId) -> bool {
    if old == new {
        return true;
    }
    let mut cache = ObjectCache::new(16 << 20);
    let floor = match db.commit_row(old, &mut cache) {
        Ok(Some(row)) if row.generation != GENERATION_UNKNOWN => row.generation,
        Ok(Some(_)) => 0,
        _ => return false,
    };
    let mut seen: HashSet = HashSet::default();
    let mut stack = vec![*new];
    while let Some(c) = stack.pop() {
        if !seen.insert(c) {
            continue;
        }
        let Ok(Some(row)) = db.commit_row(&c, &mut cache) else {
            return false;
        };
        if row.generation != GENERATION_UNKNOWN && floor > 0 && row.generation < floor {
            continue;
        }
        for p in row.parents {
            if p == *old {
                return true;
            }
            stack.push(p);
        }
    }
    false
}

/// Refuses, for each command not refused yet, a deletion or a
/// non-fast-forward update of a ref `protect` covers, in git's words
/// (`receive.denyDeletes`, `receive.denyNonFastForwards`): `ng <ref>
/// deletion prohibited` with `error: denying ref deletion for <ref>`, and
/// `ng <ref> non-fast-forward` with `error: denying non-fast-forward <ref>
/// (you should pull first)`. Any change of an existing tag counts as a
/// non-fast-forward. The push's own commits are read from its containers.
pub(crate) fn refuse_rewrites(
    repo: &Repository,
    state: &gitstow_odb::RepoState,
    containers: &[gitstow_odb::state::ContainerRef],
    push: &PushRequest,
    rejected: &mut [Option<Reason>],
    protect: &Protect,
    outcome: &mut Outcome,
) -> Result<(), UnpackFailure> {
    let head = state.head.as_deref();
    let mut with_push: Option<ObjectDb> = None;
    for (cmd, refused) in push.commands.iter().zip(rejected.iter_mut()) {
        if refused.is_some() || cmd.old.is_null() || !protect.covers(&cmd.name, head) {
            continue;
        }
        if cmd.new.is_null() {
            outcome
                .remote_errors
                .push(format!("denying ref deletion for {}", cmd.name));
            *refused = Some(Reason::DeletionProhibited);
            continue;
        }
        let fast_forward = !cmd.name.starts_with("refs/tags/") && {
            if with_push.is_none() {
                with_push = Some(objects_with_push(repo, state, containers)?);
            }
            let db = with_push.as_ref().expect("just made");
            is_ancestor(db, &cmd.old, &cmd.new)
        };
        if !fast_forward {
            outcome.remote_errors.push(format!(
                "denying non-fast-forward {} (you should pull first)",
                cmd.name
            ));
            *refused = Some(Reason::NonFastForward);
        }
    }
    Ok(())
}

/// The creations that keep what a push rewrites (a pull mirror's safe
/// mode): for each command not refused that deletes a ref, or moves it to
/// a value that does not descend from its old one (any change of a tag), a
/// command creating `<prefix><ref>` at the old value, so that the old tip
/// stays in the repository, reachable under `prefix` (a hidden namespace).
/// The push's own commits are read from its containers.
pub(crate) fn kept_rewrites(
    repo: &Repository,
    state: &gitstow_odb::RepoState,
    containers: &[gitstow_odb::state::ContainerRef],
    push: &PushRequest,
    rejected: &[Option<Reason>],
    prefix: &str,
) -> Result<Vec<gitstow_protocol::push::RefCommand>, UnpackFailure> {
    let mut with_push: Option<ObjectDb> = None;
    let mut kept = Vec::new();
    for (cmd, refused) in push.commands.iter().zip(rejected) {
        if refused.is_some() || cmd.old.is_null() {
            continue;
        }
        let rewritten = cmd.new.is_null() || cmd.name.starts_with("refs/tags/") || {
            if with_push.is_none() {
                with_push = Some(objects_with_push(repo, state, containers)?);
            }
            let db = with_push.as_ref().expect("just made");
            !is_ancestor(db, &cmd.old, &cmd.new)
        };
        if rewritten {
            kept.push(gitstow_protocol::push::RefCommand {
                old: ObjectId::null(cmd.old.kind()),
                new: cmd.old,
                name: format!("{prefix}{}", cmd.name),
            });
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_covered() {
        let p = Protect {
            refs: vec!["HEAD".into(), "refs/tags/*".into()],
        };
        assert!(p.covers("refs/heads/main", Some("refs/heads/main")));
        assert!(!p.covers("refs/heads/dev", Some("refs/heads/main")));
        assert!(p.covers("refs/tags/v1", None) && p.covers("refs/tags/a/b", None));
        let q = Protect {
            refs: vec!["refs/heads/release/*".into(), "refs/heads/dev".into()],
        };
        assert!(q.covers("refs/heads/release/1.0", None) && q.covers("refs/heads/dev", None));
        assert!(!q.covers("refs/heads/release", None) && !q.covers("refs/heads/devel", None));
    }
}
