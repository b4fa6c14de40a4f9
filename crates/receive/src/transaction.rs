//! The ref transaction: check every command against the current refs and
//! publish the new state with one compare-and-swap, retrying on conflicts.

use std::collections::{BTreeMap, HashMap, HashSet};

use gitstow_odb::reftable::RefValue;
use gitstow_odb::state::{Closure, ContainerRef};
use gitstow_odb::{CommitOutcome, ObjectCache, ObjectDb, Refs, RepoState, Repository};

use crate::conflict::{ConflictCheck, Overlay};
use gitstow_protocol::push::RefCommand;

use crate::reason::Reason;
use gix_hash::ObjectId;

/// What [`Transaction::plan`] decides: per command a status, the new state
/// if anything changes, and git's messages for the refused commands.
type Plan = (Vec<Option<Reason>>, Option<RepoState>, Vec<String>);

/// Inputs of one transaction.
pub struct Transaction<'a> {
    /// The push's commands, in order.
    pub commands: &'a [RefCommand],
    /// Per command, a reason decided before the transaction (bad name, missing objects…).
    pub rejected: Vec<Option<Reason>>,
    /// Per command, true when it would point a branch (`refs/heads/*`) at a
    /// non-commit: git's ref layer refuses that inside the transaction
    /// ("trying to write non-commit object … to branch").
    pub non_commit_branch: Vec<bool>,
    /// Containers the push uploaded, to list in the state.
    pub containers: Vec<ContainerRef>,
    /// [`RepoState::deletions`] of the state the push read before it
    /// uploaded anything (0 when the repository did not exist): a commit
    /// checks its uploads are intact when maintenance started a deletion
    /// since ([`Repository::uploads_intact`]).
    pub deletions_at_start: u64,
    /// [`RepoState::incarnation`] of the state the push read at its start,
    /// when that state had objects the push may rely on (`None`: it had
    /// none, or the push creates the repository). A commit into a deleted
    /// repository, or into another incarnation of it, is then refused
    /// ([`Reason::RepositoryDeleted`]): the objects it relied on are gone.
    pub incarnation_at_start: Option<u64>,
    /// Annotated tags of the push: tag → target.
    pub tag_targets: &'a HashMap<ObjectId, ObjectId>,
    /// The repository's objects as of the push's start (to peel tags it already had).
    pub db: &'a ObjectDb,
    /// All-or-nothing.
    pub atomic: bool,
    /// Most refs the repository may hold: creations beyond are refused.
    pub max_refs: usize,
    /// Compare-and-swap attempts before giving up.
    pub max_attempts: u32,
    /// HEAD names this branch once the transaction lands
    /// ([`crate::Options::new_head`]).
    pub new_head: Option<&'a str>,
    /// The object format of the push (the repository's, or the client's
    /// for a repository it creates): a state created here records it.
    pub object_format: gix_hash::Kind,
}

/// What the transaction did.
#[derive(Debug)]
pub struct TransactionOutcome {
    /// Per command, in order: why it was refused (`None`: updated).
    pub statuses: Vec<Option<Reason>>,
    /// Compare-and-swap retries after conflicts.
    pub retries: u32,
    /// True when a new state was written.
    pub committed: bool,
    /// Why commands failed, in git's words (`cannot lock ref …`), for side-band 2.
    pub messages: Vec<String>,
}

/// Errors that leave the state unchanged but are not the client's fault.
#[derive(Debug, thiserror::Error)]
pub enum TransactionError {
    /// The store failed.
    #[error(transparent)]
    Odb(#[from] gitstow_odb::Error),
    /// Too many concurrent updates.
    #[error("the repository state changed {0} times during the update; giving up")]
    TooManyConflicts(u32),
}

/// The command's old value is the ref's current value; deleting an absent
/// ref is fine only without an expected value (git's lease check).
/// The error git's ref layer gives for a failed update (its `rp_error` line).
fn lock_error(
    cmd: &RefCommand,
    current: Option<&ObjectId>,
    conflict: bool,
    non_commit: bool,
) -> String {
    let name = &cmd.name;
    if non_commit {
        return format!(
            "cannot update ref '{name}': trying to write non-commit object {} to branch '{name}'",
            cmd.new
        );
    }
    if conflict {
        return format!("cannot lock ref '{name}': a ref in the same directory hierarchy exists");
    }
    match current {
        Some(_) if cmd.old.is_null() => {
            format!("cannot lock ref '{name}': reference already exists")
        }
        Some(cur) => format!(
            "cannot lock ref '{name}': is at {cur} but expected {}",
            cmd.old
        ),
        None => format!("cannot lock ref '{name}': unable to resolve reference '{name}'"),
    }
}

fn old_matches(current: Option<&ObjectId>, cmd: &RefCommand) -> bool {
    match current {
        Some(cur) => *cur == cmd.old,
        None => cmd.old.is_null(),
    }
}

impl Transaction<'_> {
    /// Runs the transaction against `repo`.
    pub fn run(self, repo: &Repository) -> Result<TransactionOutcome, TransactionError> {
        let mut retries = 0;
        loop {
            let current = repo.load_state()?;
            let (state, etag) = match &current {
                Some(v) => (v.state.clone(), Some(v.etag.clone())),
                None => (
                    RepoState {
                        head: None,
                        object_format: self.object_format,
                        ..Default::default()
                    },
                    None,
                ),
            };
            if let Some(start) = self.incarnation_at_start {
                if state.deleted || current.is_none() || state.incarnation != start {
                    return Ok(TransactionOutcome {
                        statuses: vec![Some(Reason::RepositoryDeleted); self.commands.len()],
                        retries,
                        committed: false,
                        messages: vec![Reason::RepositoryDeleted.to_string()],
                    });
                }
            }
            // A repository created in the other format since the push read
            // it (another push made it first) cannot take these objects.
            if current.is_some() && state.object_format != self.object_format {
                let why = format!(
                    "the repository was created in object format {} during the push",
                    state.object_format
                );
                return Ok(TransactionOutcome {
                    statuses: vec![Some(Reason::ReadOnly(why.clone())); self.commands.len()],
                    retries,
                    committed: false,
                    messages: vec![why],
                });
            }
            let refs = repo.refs(&state)?;
            let (mut statuses, mut new_state, mut messages) = self.plan(&state, &refs)?;
            drop(refs);
            if let Some(next) = &mut new_state {
                // A push to a deleted repository, or to none, creates it.
                if current.is_none() || state.deleted {
                    next.incarnation = gitstow_odb::state::new_incarnation();
                }
                // Inline refs past their bound go to a ref table first (a
                // table written after `state` was read cannot be deleted
                // before a commit conditional on `state`: plan 0009).
                repo.spill_refs(&mut next.refs, next.object_format)?;
            }
            if new_state.is_some() && !self.containers.is_empty() {
                let ids: Vec<String> = self.containers.iter().map(|c| c.id.clone()).collect();
                if !repo.uploads_intact(&state, self.deletions_at_start, &ids)? {
                    // Never name a container that is not in the store: the
                    // client pushes again and the pack is uploaded anew.
                    statuses = vec![Some(Reason::Pruned); self.commands.len()];
                    messages = vec![Reason::Pruned.to_string()];
                    new_state = None;
                }
            }
            let Some(new_state) = new_state else {
                return Ok(TransactionOutcome {
                    statuses,
                    retries,
                    committed: false,
                    messages,
                });
            };
            match repo.commit_state(&new_state, etag.as_ref())? {
                CommitOutcome::Committed(_) => {
                    return Ok(TransactionOutcome {
                        statuses,
                        retries,
                        committed: true,
                        messages,
                    })
                }
                CommitOutcome::Conflict => {
                    retries += 1;
                    if retries >= self.max_attempts {
                        return Err(TransactionError::TooManyConflicts(retries));
                    }
                    let backoff = 5u64 << retries.min(6);
                    std::thread::sleep(std::time::Duration::from_millis(backoff));
                }
            }
        }
    }

    /// The garbage containers the push must bring back to the live list in
    /// `state`: those its lookups hit, and every one a GC made since the push
    /// started (it may rely on any object the GC found unreachable). `Err`
    /// when one is no longer garbage nor live (maintenance retired it): the
    /// push cannot commit, and the client pushes again.
    fn bring_back(&self, state: &RepoState) -> Result<Vec<ContainerRef>, ()> {
        let start: HashSet<&str> = self.db.garbage_ids().iter().map(String::as_str).collect();
        let mut wanted: Vec<String> = self.db.garbage_used();
        wanted.extend(
            state
                .garbage
                .iter()
                .filter(|g| !start.contains(g.id.as_str()))
                .map(|g| g.id.clone()),
        );
        let mut out = Vec::new();
        for id in wanted {
            if state.containers.iter().any(|c| c.id == id) {
                continue;
            }
            match state.garbage.iter().find(|g| g.id == id) {
                Some(g) => out.push(g.to_live()),
                // Retired (or deleted) meanwhile: never named again.
                None => return Err(()),
            }
        }
        Ok(out)
    }

    /// Decides each command against `state` (its refs read through
    /// `refs`); returns the statuses and, if anything changes, the new state.
    fn plan(&self, state: &RepoState, refs: &Refs<'_>) -> Result<Plan, TransactionError> {
        let Ok(brought_back) = self.bring_back(state) else {
            let statuses = self.commands.iter().map(|_| Some(Reason::Pruned)).collect();
            return Ok((statuses, None, vec![Reason::Pruned.to_string()]));
        };
        // Each command's ref as it is now: the one lookup of it.
        let before: Vec<Option<ObjectId>> = self
            .commands
            .iter()
            .map(|c| refs.oid(&c.name))
            .collect::<Result<_, _>>()?;
        let exists: Vec<bool> = before.iter().map(Option::is_some).collect();
        let mut reasons = self.rejected.clone();
        let mut messages = Vec::new();
        // Checks git's receive-pack makes before its ref transaction.
        for (cmd, reason) in self.commands.iter().zip(reasons.iter_mut()) {
            if reason.is_none()
                && cmd.new.is_null()
                && state.head.as_deref() == Some(cmd.name.as_str())
                && self.new_head.is_none_or(|h| h == cmd.name)
            {
                *reason = Some(Reason::DeleteCurrent);
                messages.push(format!(
                    "refusing to delete the current branch: {}",
                    cmd.name
                ));
            }
        }
        // The repository's ref limit: creations that would take it past
        // `max_refs` are refused (updates and deletions never are).
        let creates = self
            .commands
            .iter()
            .zip(&reasons)
            .zip(&exists)
            .filter(|((c, r), e)| r.is_none() && !c.new.is_null() && !**e)
            .count();
        let deletes = self
            .commands
            .iter()
            .zip(&reasons)
            .zip(&exists)
            .filter(|((c, r), e)| r.is_none() && c.new.is_null() && **e)
            .count();
        let held = usize::try_from(refs.len()).unwrap_or(usize::MAX);
        if creates > 0 && held.saturating_add(creates).saturating_sub(deletes) > self.max_refs {
            messages.push(format!(
                "refusing to create refs: the repository holds {} refs, the limit is {}",
                held, self.max_refs
            ));
            for ((cmd, reason), e) in self.commands.iter().zip(reasons.iter_mut()).zip(&exists) {
                if reason.is_none() && !cmd.new.is_null() && !*e {
                    *reason = Some(Reason::TooManyRefs { max: self.max_refs });
                }
            }
        }
        let prechecks_failed = reasons.iter().any(Option::is_some);
        if self.atomic && prechecks_failed {
            for r in reasons.iter_mut() {
                if r.is_none() {
                    *r = Some(Reason::AtomicFailed);
                }
            }
        }
        // The ref transaction: old values and directory/file conflicts.
        let mut transaction_failed = false;
        if self.atomic {
            // One transaction, as git's: every check against the refs as they
            // were; a name updated twice fails the whole transaction.
            let mut existing = Overlay::new(refs);
            existing.changes.extend(
                self.commands
                    .iter()
                    .zip(&reasons)
                    .filter(|(c, r)| r.is_none() && c.new.is_null())
                    .map(|(c, _)| (c.name.clone(), None)),
            );
            let mut seen: HashSet<&str> = HashSet::new();
            let mut created: BTreeMap<String, ObjectId> = BTreeMap::new();
            let mut existing_check = ConflictCheck::new();
            let mut created_check = ConflictCheck::new();
            for (i, (cmd, reason)) in self.commands.iter().zip(reasons.iter_mut()).enumerate() {
                if reason.is_some() {
                    continue;
                }
                let current = before[i].as_ref();
                let conflict = !cmd.new.is_null()
                    && current.is_none()
                    && (existing_check.df_conflict(&existing, &cmd.name)?
                        || created_check.df_conflict(&created, &cmd.name)?);
                if !seen.insert(cmd.name.as_str())
                    || !old_matches(current, cmd)
                    || conflict
                    || self.non_commit_branch[i]
                {
                    messages.push(lock_error(
                        cmd,
                        current,
                        conflict,
                        self.non_commit_branch[i],
                    ));
                    *reason = Some(Reason::FailedToUpdate);
                    transaction_failed = true;
                    continue;
                }
                if !cmd.new.is_null() {
                    created.insert(cmd.name.clone(), cmd.new);
                    created_check.added(&cmd.name);
                }
            }
        } else {
            // git applies the commands of a non-atomic push one after the
            // other, each in its own transaction: each sees what the earlier
            // ones did (a ref named twice, a delete that makes room for a
            // directory/file change).
            let mut running = Overlay::new(refs);
            let mut running_check = ConflictCheck::new();
            for (i, (cmd, reason)) in self.commands.iter().zip(reasons.iter_mut()).enumerate() {
                if reason.is_some() {
                    continue;
                }
                // Changed by an earlier command, else as it was.
                let current = match running.changes.get(&cmd.name) {
                    Some(changed) => changed.as_ref(),
                    None => before[i].as_ref(),
                };
                let conflict = !cmd.new.is_null()
                    && current.is_none()
                    && running_check.df_conflict(&running, &cmd.name)?;
                if !old_matches(current, cmd) || conflict || self.non_commit_branch[i] {
                    messages.push(lock_error(
                        cmd,
                        current,
                        conflict,
                        self.non_commit_branch[i],
                    ));
                    *reason = Some(Reason::FailedToUpdate);
                    continue;
                }
                if cmd.new.is_null() {
                    running.changes.insert(cmd.name.clone(), None);
                } else {
                    running.changes.insert(cmd.name.clone(), Some(cmd.new));
                    running_check.added(&cmd.name);
                }
            }
        }
        if self.atomic && transaction_failed {
            for (r, pre) in reasons.iter_mut().zip(&self.rejected) {
                if pre.is_none() {
                    *r = Some(Reason::AtomicTransactionFailed);
                }
            }
        }
        let statuses = reasons.clone();
        if reasons.iter().all(Option::is_some) {
            return Ok((statuses, None, messages));
        }
        let mut next = state.clone();
        // Still closed (every stored object reachable from the refs) only if
        // it was (or was empty) and every command created its ref: an update
        // or a deletion may leave objects unreachable, and a rejected
        // command leaves its objects in the pushed containers without a ref.
        let was_empty = refs.is_empty() && state.containers.is_empty();
        let was_closed = state.closed || was_empty;
        next.closed = was_closed
            && self
                .commands
                .iter()
                .zip(&reasons)
                .all(|(c, r)| r.is_none() && c.old.is_null() && !c.new.is_null());
        let had_branches = refs
            .walk("refs/heads/")
            .and_then(|mut w| Ok(w.next()?.is_some()))?;
        let mut cache = ObjectCache::new(1 << 20);
        // Whether each name updated so far exists after its update.
        let mut applied: HashMap<&str, bool> = HashMap::new();
        for ((cmd, r), e) in self.commands.iter().zip(&reasons).zip(&exists) {
            if r.is_some() {
                continue;
            }
            let existed = applied.get(cmd.name.as_str()).copied().unwrap_or(*e);
            applied.insert(cmd.name.as_str(), !cmd.new.is_null());
            let value = if cmd.new.is_null() {
                RefValue::Deleted
            } else {
                match self.peel(cmd.new, &mut cache) {
                    Some(peeled) => RefValue::Peeled {
                        oid: cmd.new,
                        peeled,
                    },
                    None => RefValue::Oid(cmd.new),
                }
            };
            next.refs.update(&cmd.name, value, existed);
        }
        if !had_branches {
            let pushed_branches: Vec<&String> = self
                .commands
                .iter()
                .zip(&reasons)
                .filter(|(c, r)| {
                    r.is_none() && !c.new.is_null() && c.name.starts_with("refs/heads/")
                })
                .map(|(c, _)| &c.name)
                .collect();
            // As the hosting services choose: main, else master, else the
            // first branch pushed (a mirror push lists refs in name order).
            let main = "refs/heads/main".to_owned();
            let master = "refs/heads/master".to_owned();
            let head_exists = match next.head.as_deref() {
                Some(h) => match applied.get(h) {
                    Some(exists) => *exists,
                    None => refs.contains(h)?,
                },
                None => false,
            };
            if !head_exists {
                if pushed_branches.contains(&&main) {
                    next.head = Some(main);
                } else if pushed_branches.contains(&&master) {
                    next.head = Some(master);
                } else if let Some(first) = pushed_branches.first() {
                    next.head = Some((*first).clone());
                } else if next.head.is_none() {
                    next.head = Some(main);
                }
            }
        }
        if let Some(head) = self.new_head {
            next.head = Some(head.to_owned());
        }
        // A push to a deleted repository re-creates it (a new incarnation:
        // `run`).
        next.deleted = false;
        next.containers.extend(self.containers.iter().cloned());
        if !brought_back.is_empty() {
            // Objects no ref reached when the GC ran are live again.
            next.closed = false;
            next.garbage
                .retain(|g| !brought_back.iter().any(|b| b.id == g.id));
            next.containers.extend(brought_back);
        }
        // A push into an empty repository that leaves it closed stored
        // exactly what its refs reach: that is a closure from the first
        // minute, so a clone after later pushes walks only what they brought
        // instead of the whole history until a GC (plan 0013). No bitmaps.
        if was_empty && next.closed && !next.containers.is_empty() {
            let mut tips: Vec<ObjectId> = self.commands.iter().map(|c| c.new).collect();
            tips.sort_unstable();
            tips.dedup();
            next.closure = Some(Closure {
                tips,
                containers: next.containers.iter().map(|c| c.id.clone()).collect(),
                bitmaps: false,
            });
        }
        Ok((statuses, Some(next), messages))
    }

    /// Follows a chain of annotated tags to the first non-tag object.
    fn peel(&self, oid: ObjectId, cache: &mut ObjectCache) -> Option<ObjectId> {
        let mut cur = oid;
        for _ in 0..64 {
            if let Some(t) = self.tag_targets.get(&cur) {
                cur = *t;
                continue;
            }
            match self.db.read(&cur, cache) {
                Ok(Some(obj)) if obj.kind == gix_object::Kind::Tag => {
                    match gix_object::TagRef::from_bytes(&obj.data, obj.hash) {
                        Ok(tag) => cur = tag.target(),
                        Err(_) => break,
                    }
                }
                _ => break,
            }
        }
        (cur != oid).then_some(cur)
    }
}
