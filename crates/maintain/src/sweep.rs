//! Deleting containers: those on the retired list ([`gitstow_odb::retired`])
//! whose grace period is over, retiring garbage whose grace period is over,
//! and finding orphans (containers in the store that no state names).
//!
//! Deletion is crash-safe and never races a commit ([`delete_due`]): the
//! ids are listed in the state as being deleted by compare-and-swap before
//! any file goes, so a push that uploaded a container an orphan scan took
//! for a failed push's either committed first (and the container is kept)
//! or finds it listed, or gone, and refuses to name it
//! ([`gitstow_odb::Repository::uploads_intact`]). This holds whatever grace
//! period each instance applies; the grace period only decides how long
//! fetches on older states and slow pushes have.
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

/// Ids the state names as live or garbage containers, or as ref tables
/// (never to be deleted).
fn in_use(state: &gitstow_odb::RepoState) -> BTreeSet<&str> {
    state
        .containers
        .iter()
        .map(|c| c.id.as_str())
        .chain(state.garbage.iter().map(|g| g.id.as_str()))
        .chain(state.refs.tables.iter().map(|t| t.id.as_str()))
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

/// Deletes every retired container whose grace period is over and that the
/// current state does not name, in four steps, each crash-safe:
///
/// 1. the ids are added to the state's `deleting` list and its deletion
///    count raised, by compare-and-swap (with ids a crashed run left there):
///    from then on no commit names them ([`Repository::uploads_intact`]),
///    and one that named them first keeps them;
/// 2. they are dropped from the retired list, with the entries whose
///    container the state names again (revived);
/// 3. their files are deleted;
/// 4. they are dropped from `deleting`.
///
/// A crash after 1 leaves ids in `deleting`, which the next run deletes.
pub fn delete_due(repo: &Repository, opts: &Options) -> Result<Deleted> {
    let now = now_secs();
    let (list, _) = repo.load_retired()?;
    let candidates: Vec<String> = list
        .iter()
        .filter(|r| r.since.saturating_add(opts.grace.as_secs()) <= now)
        .map(|r| r.id.clone())
        .collect();
    let marked = update_state(repo, opts, "starting deletions", |state| {
        let named = in_use(state);
        let new: Vec<String> = candidates
            .iter()
            .filter(|id| !named.contains(id.as_str()) && !state.deleting.contains(id))
            .cloned()
            .collect();
        let named: BTreeSet<String> = named.into_iter().map(str::to_owned).collect();
        if new.is_empty() {
            return Step::Done((state.deleting.clone(), named));
        }
        let mut next = state.clone();
        next.deleting.extend(new);
        next.deletions += 1;
        let deleting = next.deleting.clone();
        Step::Write(next, (deleting, named))
    })?;
    let Some((ids, named)) = marked else {
        return Ok(Deleted::default());
    };
    let revived = update_retired(repo, opts, |list| {
        let revived = list.iter().filter(|r| named.contains(&r.id)).count();
        let next: Vec<RetiredContainer> = list
            .iter()
            .filter(|r| !named.contains(&r.id) && !ids.contains(&r.id))
            .cloned()
            .collect();
        if next.len() == list.len() {
            return Step::Done(revived);
        }
        Step::Write(next, revived)
    })?;
    if ids.is_empty() {
        return Ok(Deleted { ids, revived });
    }
    tracing::info!(repo = repo.name(), ids = ?ids, "deleting containers");
    for id in &ids {
        // The side files and the index first: none names bytes that are gone.
        repo.store().delete(&repo.bitmap_key(id))?;
        repo.store().delete(&repo.graph_key(id))?;
        repo.store().delete(&repo.idx_key(id))?;
        repo.store().delete(&repo.bin_key(id))?;
        // A ref table's id names no container (and the reverse): one of
        // the two deletions finds nothing.
        repo.store().delete(&repo.ref_table_key(id))?;
    }
    update_state(repo, opts, "ending deletions", |state| {
        if !state.deleting.iter().any(|d| ids.contains(d)) {
            return Step::Done(());
        }
        let mut next = state.clone();
        next.deleting.retain(|d| !ids.contains(d));
        Step::Write(next, ())
    })?;
    Ok(Deleted { ids, revived })
}

/// Lists the repository's containers and ref tables and retires, as of
/// now, every one that the state names neither as live nor as garbage nor
/// as a ref table and that is not retired already (the uploads of pushes
/// that never committed). Returns how many.
pub fn scan_orphans(repo: &Repository, opts: &Options) -> Result<usize> {
    let prefix = repo.containers_prefix();
    let mut found: BTreeSet<String> = repo
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
    let tables = repo.ref_tables_prefix();
    found.extend(
        repo.store()
            .list(&tables)?
            .iter()
            .filter_map(|k| k.strip_prefix(&tables)?.strip_suffix(".ref"))
            .filter(|id| !id.is_empty() && !id.contains('/'))
            .map(str::to_owned),
    );
    let Some(current) = repo.load_kept_state()? else {
        return Ok(0);
    };
    let mut named = in_use(&current.state);
    // Being deleted now: not orphans.
    named.extend(current.state.deleting.iter().map(String::as_str));
    update_retired(repo, opts, |list| {
        let listed: BTreeSet<&str> = list.iter().map(|r| r.id.as_str()).collect();
        let orphans: Vec<&String> = found
            .iter()
            .filter(|id| !named.contains(id.as_str()) && !listed.contains(id.as_str()))
            .collect();
        if orphans.is_empty() || opts.dry_run {
            return Step::Done(orphans.len());
        }
        tracing::info!(repo = repo.name(), ids = ?orphans, "containers no state names retired");
        let since = now_secs();
        let mut next = list.to_vec();
        next.extend(orphans.iter().map(|id| RetiredContainer {
            id: (*id).clone(),
            since,
        }));
        Step::Write(next, orphans.len())
    })
}
