//! The ref transaction: check every command against the current refs and
//! publish the new state with one compare-and-swap, retrying on conflicts.

use std::collections::{BTreeMap, HashMap, HashSet};

use gitstow_odb::state::ContainerRef;
use gitstow_odb::{CommitOutcome, ObjectCache, ObjectDb, RepoState, Repository};
use gitstow_protocol::push::{RefCommand, RefStatus};
use gix_hash::ObjectId;

/// Reason git gives when a ref's old value does not match (or the update cannot apply).
pub const FAILED_TO_UPDATE: &str = "failed to update ref";
/// Reason given to the other commands of an `--atomic` push when one failed a check.
pub const ATOMIC_FAILED: &str = "atomic push failure";
/// Reason given to every command of an `--atomic` push whose ref transaction failed.
pub const ATOMIC_TRANSACTION_FAILED: &str = "atomic transaction failed";
/// Reason given when objects the push relies on were pruned by maintenance meanwhile.
pub const PRUNED: &str = "objects this push relies on were pruned by maintenance; push again";
/// Reason git gives for deleting the branch HEAD points at.
pub const DELETE_CURRENT: &str = "deletion of the current branch prohibited";

/// Inputs of one transaction.
pub struct Transaction<'a> {
    /// The push's commands, in order.
    pub commands: &'a [RefCommand],
    /// Per command, a reason decided before the transaction (bad name, missing objects…).
    pub rejected: Vec<Option<String>>,
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
}

/// What the transaction did.
#[derive(Debug)]
pub struct TransactionOutcome {
    /// Per command, in order.
    pub statuses: Vec<RefStatus>,
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

/// Leading directories of a ref name looked up in the map one by one up to
/// this many; a deeper name is checked through a [`PrefixIndex`].
const DIRECT_LOOKUPS: usize = 16;

/// The names of a ref map, hashed so that the leading directories of a
/// name that are refs (`refs/heads/a` of `refs/heads/a/b`) are found in
/// one pass over the name, whatever its depth: each leading part's hash
/// extends the previous one (a polynomial hash modulo 2^61 − 1 with a
/// random base, so inputs cannot be made to collide on purpose), and a
/// hit is confirmed in the map. Built only for a name deeper than
/// [`DIRECT_LOOKUPS`], at the cost of one pass over the refs' names.
struct PrefixIndex {
    base: u64,
    hashes: HashSet<u64>,
}

const MERSENNE_61: u64 = (1 << 61) - 1;

impl PrefixIndex {
    fn new<'a>(names: impl Iterator<Item = &'a String>) -> Self {
        use std::hash::BuildHasher;
        let random = std::collections::hash_map::RandomState::new().hash_one(0u8);
        let mut index = PrefixIndex {
            base: 256 + random % (MERSENNE_61 - 512),
            hashes: HashSet::new(),
        };
        for name in names {
            index.insert(name);
        }
        index
    }

    fn step(&self, h: u64, byte: u8) -> u64 {
        ((u128::from(h) * u128::from(self.base) + u128::from(byte) + 1) % u128::from(MERSENNE_61))
            as u64
    }

    fn insert(&mut self, name: &str) {
        let h = name.bytes().fold(0, |h, b| self.step(h, b));
        self.hashes.insert(h);
    }

    /// The leading directories of `name` whose hash is a ref's.
    fn candidates<'n>(&self, name: &'n str) -> Vec<&'n str> {
        let mut h = 0;
        let mut out = Vec::new();
        for (i, b) in name.bytes().enumerate() {
            if b == b'/' && i > 0 && self.hashes.contains(&h) {
                out.push(&name[..i]);
            }
            h = self.step(h, b);
        }
        out
    }
}

/// A ref map with its [`PrefixIndex`], built the first time a deep name
/// is checked and kept up to date as refs are added (a removed ref's hash
/// stays: hits are confirmed in the map).
struct ConflictCheck {
    index: Option<PrefixIndex>,
}

impl ConflictCheck {
    fn new() -> Self {
        ConflictCheck { index: None }
    }

    /// Records that `name` was added to the map checked.
    fn added(&mut self, name: &str) {
        if let Some(index) = &mut self.index {
            index.insert(name);
        }
    }

    /// Whether `name` would conflict with a ref of `refs` that `deleted`
    /// does not exclude: one that is a leading directory of `name`, or
    /// lives below `name/`. Costs the length of `name` (plus the refs
    /// below it), not its depth × the refs.
    fn df_conflict(
        &mut self,
        refs: &BTreeMap<String, ObjectId>,
        name: &str,
        deleted: &dyn Fn(&str) -> bool,
    ) -> bool {
        let is_ref = |p: &str| refs.contains_key(p) && !deleted(p);
        let depth = name.bytes().filter(|&b| b == b'/').count();
        let leading = if depth <= DIRECT_LOOKUPS {
            name.match_indices('/')
                .filter(|(i, _)| *i > 0)
                .any(|(i, _)| is_ref(&name[..i]))
        } else {
            let index = self
                .index
                .get_or_insert_with(|| PrefixIndex::new(refs.keys()));
            index.candidates(name).into_iter().any(is_ref)
        };
        if leading {
            return true;
        }
        let dir = format!("{name}/");
        refs.range(dir.clone()..)
            .take_while(|(k, _)| k.starts_with(&dir))
            .any(|(k, _)| !deleted(k))
    }
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
                        ..Default::default()
                    },
                    None,
                ),
            };
            let (mut statuses, mut new_state, mut messages) = self.plan(&state);
            if new_state.is_some() && !self.containers.is_empty() {
                let ids: Vec<String> = self.containers.iter().map(|c| c.id.clone()).collect();
                if !repo.uploads_intact(&state, self.deletions_at_start, &ids)? {
                    // Never name a container that is not in the store: the
                    // client pushes again and the pack is uploaded anew.
                    statuses = vec![RefStatus::Rejected(PRUNED.to_owned()); self.commands.len()];
                    messages = vec![PRUNED.to_owned()];
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

    /// Decides each command against `state`; returns the statuses and, if anything
    /// changes, the new state.
    fn plan(&self, state: &RepoState) -> (Vec<RefStatus>, Option<RepoState>, Vec<String>) {
        let Ok(brought_back) = self.bring_back(state) else {
            let statuses = self
                .commands
                .iter()
                .map(|_| RefStatus::Rejected(PRUNED.to_owned()))
                .collect();
            return (statuses, None, vec![PRUNED.to_owned()]);
        };
        let mut reasons = self.rejected.clone();
        let mut messages = Vec::new();
        // Checks git's receive-pack makes before its ref transaction.
        for (cmd, reason) in self.commands.iter().zip(reasons.iter_mut()) {
            if reason.is_none()
                && cmd.new.is_null()
                && state.head.as_deref() == Some(cmd.name.as_str())
            {
                *reason = Some(DELETE_CURRENT.to_owned());
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
            .filter(|(c, r)| r.is_none() && !c.new.is_null() && !state.refs.contains_key(&c.name))
            .count();
        let deletes = self
            .commands
            .iter()
            .zip(&reasons)
            .filter(|(c, r)| r.is_none() && c.new.is_null() && state.refs.contains_key(&c.name))
            .count();
        if creates > 0 && (state.refs.len() + creates).saturating_sub(deletes) > self.max_refs {
            let why = format!(
                "too many refs: this repository may hold at most {}",
                self.max_refs
            );
            messages.push(format!(
                "refusing to create refs: the repository holds {} refs, the limit is {}",
                state.refs.len(),
                self.max_refs
            ));
            for (cmd, reason) in self.commands.iter().zip(reasons.iter_mut()) {
                if reason.is_none() && !cmd.new.is_null() && !state.refs.contains_key(&cmd.name) {
                    *reason = Some(why.clone());
                }
            }
        }
        let prechecks_failed = reasons.iter().any(Option::is_some);
        if self.atomic && prechecks_failed {
            for r in reasons.iter_mut() {
                if r.is_none() {
                    *r = Some(ATOMIC_FAILED.to_owned());
                }
            }
        }
        // The ref transaction: old values and directory/file conflicts.
        let mut transaction_failed = false;
        if self.atomic {
            // One transaction, as git's: every check against the refs as they
            // were; a name updated twice fails the whole transaction.
            let deleted_names: HashSet<&str> = self
                .commands
                .iter()
                .zip(&reasons)
                .filter(|(c, r)| r.is_none() && c.new.is_null())
                .map(|(c, _)| c.name.as_str())
                .collect();
            let is_deleted = |n: &str| deleted_names.contains(n);
            let mut seen: HashSet<&str> = HashSet::new();
            let mut created: BTreeMap<String, ObjectId> = BTreeMap::new();
            let mut existing_check = ConflictCheck::new();
            let mut created_check = ConflictCheck::new();
            for (i, (cmd, reason)) in self.commands.iter().zip(reasons.iter_mut()).enumerate() {
                if reason.is_some() {
                    continue;
                }
                let current = state.refs.get(&cmd.name);
                let conflict = !cmd.new.is_null()
                    && current.is_none()
                    && (existing_check.df_conflict(&state.refs, &cmd.name, &is_deleted)
                        || created_check.df_conflict(&created, &cmd.name, &|_| false));
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
                    *reason = Some(FAILED_TO_UPDATE.to_owned());
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
            let mut running = state.refs.clone();
            let mut running_check = ConflictCheck::new();
            for (i, (cmd, reason)) in self.commands.iter().zip(reasons.iter_mut()).enumerate() {
                if reason.is_some() {
                    continue;
                }
                let current = running.get(&cmd.name);
                let conflict = !cmd.new.is_null()
                    && current.is_none()
                    && running_check.df_conflict(&running, &cmd.name, &|_| false);
                if !old_matches(current, cmd) || conflict || self.non_commit_branch[i] {
                    messages.push(lock_error(
                        cmd,
                        current,
                        conflict,
                        self.non_commit_branch[i],
                    ));
                    *reason = Some(FAILED_TO_UPDATE.to_owned());
                    continue;
                }
                if cmd.new.is_null() {
                    running.remove(&cmd.name);
                } else {
                    running.insert(cmd.name.clone(), cmd.new);
                    running_check.added(&cmd.name);
                }
            }
        }
        if self.atomic && transaction_failed {
            for (r, pre) in reasons.iter_mut().zip(&self.rejected) {
                if pre.is_none() {
                    *r = Some(ATOMIC_TRANSACTION_FAILED.to_owned());
                }
            }
        }
        let statuses: Vec<RefStatus> = reasons
            .iter()
            .map(|r| match r {
                None => RefStatus::Ok,
                Some(why) => RefStatus::Rejected(why.clone()),
            })
            .collect();
        if reasons.iter().all(Option::is_some) {
            return (statuses, None, messages);
        }
        let mut next = state.clone();
        // Still closed (every stored object reachable from the refs) only if
        // it was (or was empty) and every command created its ref: an update
        // or a deletion may leave objects unreachable, and a rejected
        // command leaves its objects in the pushed containers without a ref.
        let was_closed = state.closed || (state.refs.is_empty() && state.containers.is_empty());
        next.closed = was_closed
            && self
                .commands
                .iter()
                .zip(&reasons)
                .all(|(c, r)| r.is_none() && c.old.is_null() && !c.new.is_null());
        let had_branches = state.refs.keys().any(|k| k.starts_with("refs/heads/"));
        let mut cache = ObjectCache::new(1 << 20);
        for (cmd, r) in self.commands.iter().zip(&reasons) {
            if r.is_some() {
                continue;
            }
            next.peeled.remove(&cmd.name);
            if cmd.new.is_null() {
                next.refs.remove(&cmd.name);
                continue;
            }
            next.refs.insert(cmd.name.clone(), cmd.new);
            if let Some(peeled) = self.peel(cmd.new, &mut cache) {
                next.peeled.insert(cmd.name.clone(), peeled);
            }
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
            let head_exists = next
                .head
                .as_ref()
                .is_some_and(|h| next.refs.contains_key(h));
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
        // A push to a deleted repository re-creates it.
        next.deleted = false;
        next.containers.extend(self.containers.iter().cloned());
        if !brought_back.is_empty() {
            // Objects no ref reached when the GC ran are live again.
            next.closed = false;
            next.garbage
                .retain(|g| !brought_back.iter().any(|b| b.id == g.id));
            next.containers.extend(brought_back);
        }
        (statuses, Some(next), messages)
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
                    match gix_object::TagRef::from_bytes(&obj.data, gix_hash::Kind::Sha1) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(names: &[&str]) -> BTreeMap<String, ObjectId> {
        names
            .iter()
            .map(|n| (n.to_string(), ObjectId::null(gix_hash::Kind::Sha1)))
            .collect()
    }

    /// Shallow and deep names find the same conflicts (the deep ones
    /// through the hash index), leading directories and refs below alike.
    #[test]
    fn directory_file_conflicts_at_any_depth() {
        let deep = format!("refs/heads/{}", "d/".repeat(40));
        let deep_ref = format!("{deep}x");
        let map = refs(&[
            "refs/heads/a",
            "refs/heads/b/c",
            deep.trim_end_matches('/'),
            &deep_ref,
        ]);
        let mut check = ConflictCheck::new();
        let none = |_: &str| false;
        assert!(check.df_conflict(&map, "refs/heads/a/x", &none));
        assert!(check.df_conflict(&map, "refs/heads/b", &none));
        assert!(!check.df_conflict(&map, "refs/heads/bc", &none));
        assert!(!check.df_conflict(&map, "refs/heads/c/d", &none));
        // Deeper than DIRECT_LOOKUPS: through the index.
        assert!(check.df_conflict(&map, &format!("{deep}x/y"), &none));
        assert!(
            check.df_conflict(&map, &format!("{deep}z/y"), &none),
            "the directory itself is a ref"
        );
        let other = format!("refs/heads/{}", "e/".repeat(40)) + "x";
        assert!(!check.df_conflict(&map, &other, &none));
        assert!(check.index.is_some());
        // A ref excluded (deleted in the same transaction) does not conflict.
        let is_deleted = |n: &str| n == deep.trim_end_matches('/');
        assert!(!check.df_conflict(&map, &format!("{deep}z/y"), &is_deleted));
        // A ref added after the index was built is found.
        let mut map2 = map.clone();
        let added = format!("refs/heads/{}", "f/".repeat(30)) + "g";
        map2.insert(added.clone(), ObjectId::null(gix_hash::Kind::Sha1));
        check.added(&added);
        assert!(check.df_conflict(&map2, &format!("{added}/h/{}", "i/".repeat(20)), &none));
    }

    /// Names of 2,000 components against refs sharing their leading
    /// directories: the check walks each name once and looks up in the map
    /// only the leading directories that are refs (none here), where the
    /// walk of every prefix looked up 2,000 per name.
    #[test]
    fn deep_names_cost_their_length() {
        let stem = "a/".repeat(2_000);
        let map: BTreeMap<String, ObjectId> = (0..200)
            .map(|i| {
                (
                    format!("refs/{stem}r{i}"),
                    ObjectId::null(gix_hash::Kind::Sha1),
                )
            })
            .collect();
        let mut check = ConflictCheck::new();
        for i in 0..200 {
            let name = format!("refs/{stem}n{i}/x");
            assert!(!check.df_conflict(&map, &name, &|_| false));
            let index = check.index.as_ref().expect("a deep name builds the index");
            assert_eq!(index.candidates(&name), Vec::<&str>::new());
        }
    }
}
