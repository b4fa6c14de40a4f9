//! Deleting containers: those on the retired list ([`gitstow_odb::retired`])
//! whose grace period is over, retiring garbage whose grace period is over,
//! and finding orphans (containers in the store that no state names).
//!
//! Deletion is crash-safe: the entries are first dropped from the retired
//! list by compare-and-swap, then the `.idx` and `.bin` are deleted. A crash
//! between the two leaves unnamed files, which the next orphan scan retires
//! again. Before that, the current state is read (after the grace period has
//! passed for every entry deleted): an entry whose container is live or
//! garbage again (an in-flight push's upload that an orphan scan saw before
//! the push committed) is dropped from the list instead.
//!
//! The orphan scan is the only place a repository's containers are listed
//! (never a request path). A container found unnamed is retired as of the
//! scan, not deleted: a push that uploaded it and has not committed yet has
//! the grace period to do so (container ids are unique per writer, so no
//! other push can name the same id).

use std::collections::BTreeSet;

use gitstow_odb::retired::RetiredContainer;
use gitstow_odb::Repository;

use crate::{now_secs, retire, update_retired, update_state, Options, Result, Step};

/// What [`delete_due`] removed.
#[derive(Debug, Default)]
pub struct Deleted {
    /// Container ids deleted.
    pub ids: Vec<String>,
    /// Retired entries dropped because their container is named again.
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

/// The entries of `retired` whose grace period is over at `now` and whose
/// container `state` does not name.
pub fn due(
    state: &gitstow_odb::RepoState,
    retired: &[RetiredContainer],
    now: u64,
    opts: &Options,
) -> Vec<String> {
    let named = in_use(state);
    retired
        .iter()
        .filter(|r| !named.contains(r.id.as_str()))
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
    let expired = update_state(repo, opts, "retiring expired garbage", |state| {
        let expired = expired_garbage(state, now_secs(), opts);
        if expired.is_empty() {
            return Step::Done(expired);
        }
        let mut next = state.clone();
        next.garbage.retain(|g| !expired.contains(&g.id));
        Step::Write(next, expired)
    })?
    .unwrap_or_default();
    retire(repo, opts, &expired)?;
    Ok(expired.len())
}

/// Drops every retired container whose grace period is over from the
/// retired list (compare-and-swap, re-applied on conflict), then deletes its
/// files.
pub fn delete_due(repo: &Repository, opts: &Options) -> Result<Deleted> {
    let now = now_secs();
    // The state is read after `now`: every entry found due has been unnamed
    // for a grace period, longer than any push takes to commit its upload.
    let Some(current) = repo.load_state()? else {
        return Ok(Deleted::default());
    };
    let state = current.state;
    let deleted = update_retired(repo, opts, |list| {
        let ids = due(&state, list, now, opts);
        let named = in_use(&state);
        let revived = list
            .iter()
            .filter(|r| named.contains(r.id.as_str()))
            .count();
        if ids.is_empty() && revived == 0 {
            return Step::Done(Deleted::default());
        }
        let next: Vec<RetiredContainer> = list
            .iter()
            .filter(|r| !named.contains(r.id.as_str()) && !ids.contains(&r.id))
            .cloned()
            .collect();
        Step::Write(next, Deleted { ids, revived })
    })?;
    for id in &deleted.ids {
        // The side files and the index first: none names bytes that are gone.
        repo.store().delete(&repo.bitmap_key(id))?;
        repo.store().delete(&repo.graph_key(id))?;
        repo.store().delete(&repo.idx_key(id))?;
        repo.store().delete(&repo.bin_key(id))?;
    }
    Ok(deleted)
}

/// Lists the repository's containers and retires, as of now, every one that
/// the state names neither as live nor as garbage and that is not retired
/// already. Returns how many.
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
                .or_else(|| name.strip_suffix(".graph"))
                .or_else(|| name.strip_suffix(".bitmap"))
        })
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .map(str::to_owned)
        .collect();
    let Some(current) = repo.load_state()? else {
        return Ok(0);
    };
    let named = in_use(&current.state);
    update_retired(repo, opts, |list| {
        let listed: BTreeSet<&str> = list.iter().map(|r| r.id.as_str()).collect();
        let orphans: Vec<&String> = found
            .iter()
            .filter(|id| !named.contains(id.as_str()) && !listed.contains(id.as_str()))
            .collect();
        if orphans.is_empty() || opts.dry_run {
            return Step::Done(orphans.len());
        }
        let since = now_secs();
        let mut next = list.to_vec();
        next.extend(orphans.iter().map(|id| RetiredContainer {
            id: (*id).clone(),
            since,
        }));
        Step::Write(next, orphans.len())
    })
}
