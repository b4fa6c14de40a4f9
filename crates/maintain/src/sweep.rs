//! Deleting containers: those the state retired more than a grace period
//! ago, and finding orphans (containers in the store that no state names).
//!
//! Deletion is two-step and crash-safe: the retired entries are first
//! removed from the state by compare-and-swap (so no later state names them),
//! then their `.idx` and `.bin` are deleted. A crash between the two leaves
//! unnamed files, which the next orphan scan retires again.
//!
//! The orphan scan is the only place a repository's containers are listed
//! (never a request path). A container found unnamed is retired as of the
//! scan, not deleted: a push that uploaded it and has not committed yet has
//! the grace period to do so (container ids are unique per writer, so no
//! other push can name the same id).

use std::collections::BTreeSet;

use gitstow_odb::state::RetiredContainer;
use gitstow_odb::Repository;

use crate::{now_secs, update_state, Options, Result, Step};

/// What [`delete_due`] removed.
#[derive(Debug, Default)]
pub struct Deleted {
    /// Container ids deleted.
    pub ids: Vec<String>,
    /// Retired entries dropped because their container is live again.
    pub revived: usize,
}

/// Ids the state names as live or garbage (never to be deleted).
fn in_use(state: &gitstow_odb::RepoState) -> BTreeSet<&str> {
    state
        .containers
        .iter()
        .map(|c| c.id.as_str())
        .chain(state.garbage.iter().map(|g| g.id.as_str()))
        .collect()
}

/// The retired containers of `state` whose grace period is over at `now`.
pub fn due(state: &gitstow_odb::RepoState, now: u64, opts: &Options) -> Vec<String> {
    let live = in_use(state);
    state
        .retired
        .iter()
        .filter(|r| !live.contains(r.id.as_str()))
        .filter(|r| r.since.saturating_add(opts.grace.as_secs()) <= now)
        .map(|r| r.id.clone())
        .collect()
}

/// The garbage containers of `state` whose grace period is over at `now`.
pub fn expired_garbage(state: &gitstow_odb::RepoState, now: u64, opts: &Options) -> Vec<String> {
    state
        .garbage
        .iter()
        .filter(|g| g.since.saturating_add(opts.grace.as_secs()) <= now)
        .map(|g| g.id.clone())
        .collect()
}

/// Retires every garbage container whose grace period is over (it is
/// deleted a grace period later). No ref reaches its objects — refs reach
/// only live containers, and a push that relies on garbage brings it back —
/// so this needs no walk. Returns how many.
pub fn retire_expired_garbage(repo: &Repository, opts: &Options) -> Result<usize> {
    let retired = update_state(repo, opts, "retiring expired garbage", |state| {
        let now = now_secs();
        let expired = expired_garbage(state, now, opts);
        if expired.is_empty() {
            return Step::Done(0);
        }
        let mut next = state.clone();
        next.garbage.retain(|g| !expired.contains(&g.id));
        next.retired.retain(|r| !expired.contains(&r.id));
        let n = expired.len();
        next.retired.extend(
            expired
                .into_iter()
                .map(|id| RetiredContainer { id, since: now }),
        );
        Step::Write(next, n)
    })?;
    Ok(retired.unwrap_or(0))
}

/// Drops every retired container whose grace period is over from the state
/// (compare-and-swap, re-applied on conflict), then deletes its files.
pub fn delete_due(repo: &Repository, opts: &Options) -> Result<Deleted> {
    let decided = update_state(repo, opts, "deleting retired containers", |state| {
        let ids = due(state, now_secs(), opts);
        let live = in_use(state);
        let revived = state
            .retired
            .iter()
            .filter(|r| live.contains(r.id.as_str()))
            .count();
        if ids.is_empty() && revived == 0 {
            return Step::Done(Deleted::default());
        }
        let mut next = state.clone();
        next.retired
            .retain(|r| !live.contains(r.id.as_str()) && !ids.contains(&r.id));
        Step::Write(next, Deleted { ids, revived })
    })?;
    let deleted = decided.unwrap_or_default();
    for id in &deleted.ids {
        // The index first: an index never names bytes that are gone.
        repo.store().delete(&repo.idx_key(id))?;
        repo.store().delete(&repo.bin_key(id))?;
    }
    Ok(deleted)
}

/// Lists the repository's containers and retires, as of now, every one that
/// the state neither lists as live nor as retired. Returns how many.
pub fn scan_orphans(repo: &Repository, opts: &Options) -> Result<usize> {
    let prefix = repo.containers_prefix();
    let found: BTreeSet<String> = repo
        .store()
        .list(&prefix)?
        .iter()
        .filter_map(|k| k.strip_prefix(&prefix))
        .filter_map(|name| {
            name.strip_suffix(".bin")
                .or_else(|| name.strip_suffix(".idx"))
        })
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .map(str::to_owned)
        .collect();
    let found = update_state(repo, opts, "scanning for orphans", |state| {
        let named: BTreeSet<&str> = state
            .containers
            .iter()
            .map(|c| c.id.as_str())
            .chain(state.garbage.iter().map(|g| g.id.as_str()))
            .chain(state.retired.iter().map(|r| r.id.as_str()))
            .collect();
        let orphans: Vec<&String> = found
            .iter()
            .filter(|id| !named.contains(id.as_str()))
            .collect();
        if orphans.is_empty() || opts.dry_run {
            return Step::Done(orphans.len());
        }
        let since = now_secs();
        let mut next = state.clone();
        next.retired
            .extend(orphans.iter().map(|id| RetiredContainer {
                id: (*id).clone(),
                since,
            }));
        Step::Write(next, orphans.len())
    })?;
    Ok(found.unwrap_or(0))
}
