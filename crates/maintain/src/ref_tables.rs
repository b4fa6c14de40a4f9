//! Merging ref tables (plan 0010 step 4): the stack of a repository's ref
//! tables kept geometric, as reftable's auto-compaction keeps its stack
//! (`suggest_compaction_segment` in git's `reftable/stack.c`) and as
//! [`crate::policy`] keeps containers.
//!
//! A stack is ordered (a newer table's record wins), so a merge takes a run
//! of adjacent tables: from the oldest table whose successor is not
//! `factor` times lighter up to the newest, widened downwards while the
//! table below is lighter than `factor` times the merged records. A repository
//! then holds about log2(refs) tables, and a ref is rewritten O(log n) times.
//! A merge that reaches the bottom of the stack drops deletion records (no
//! older table is left for them to hide a name in), which ends reftable's
//! tombstone trap: deleting then recreating every ref costs until the next
//! merge, not forever.
//!
//! The merged table is written first, then published by compare-and-swap of
//! the state (the sources replaced in place, tables pushes added on top
//! meanwhile kept); the sources are retired and deleted after the grace
//! period like containers, so a reader on an older state keeps its tables.
//! The same pass writes out an inline part that outgrew its bound (a
//! repository in state format 1 that takes no push is converted here).

use gitstow_odb::state::{RefSet, RefTableRef};
use gitstow_odb::{RepoState, Repository};

use crate::{retire, update_state, update_state_naming, Options, Result, Step};

/// The run of tables to merge, as a range of positions in the stack
/// (oldest first), or `None` when the stack is geometric already. Never a
/// single table.
pub fn plan(tables: &[RefTableRef], factor: u64) -> Option<std::ops::Range<usize>> {
    let factor = factor.max(2);
    let weight = |t: &RefTableRef| t.records.max(1);
    // The oldest table whose newer neighbour is not `factor` times lighter.
    let break_at = (1..tables.len())
        .find(|&j| weight(&tables[j - 1]) < weight(&tables[j]).saturating_mul(factor))?;
    let mut start = break_at - 1;
    let mut total: u64 = tables[start..].iter().map(weight).sum();
    while start > 0 && weight(&tables[start - 1]) < total.saturating_mul(factor) {
        start -= 1;
        total += weight(&tables[start]);
    }
    (tables.len() - start >= 2).then_some(start..tables.len())
}

/// True when [`maintain`] has work on `refs`: an outgrown inline part, or a
/// stack that is not geometric.
pub fn due(refs: &RefSet, factor: u64) -> bool {
    refs.outgrown() || plan(&refs.tables, factor).is_some()
}

/// What a pass did to the refs.
#[derive(Debug, Default, Clone, Copy)]
pub struct RefsReport {
    /// Tables merged (sources).
    pub merged: usize,
    /// Records written into the merged table.
    pub records: u64,
    /// True when an outgrown inline part was written out as a table.
    pub spilled: bool,
}

/// Writes the inline refs of the current state out as a table when they
/// outgrew their bound (see [`Repository::spill_refs`]), then
/// merges the tables [`plan`] picks. Pushes are never blocked: each commit
/// is a compare-and-swap re-applied on what they committed.
///
/// # Errors
/// The store failed, or a table could not be read.
pub fn maintain(repo: &Repository, opts: &Options) -> Result<RefsReport> {
    let mut report = RefsReport::default();
    if opts.dry_run {
        return Ok(report);
    }
    // The state as this step left it (written, or read and left alone):
    // what the merge plans on, without reading it again.
    let state = update_state(repo, opts, "writing out inline refs", |state| {
        if state.deleted || !state.refs.outgrown() {
            return Step::Done(Ok((false, state.clone())));
        }
        let mut next = state.clone();
        match repo.spill_refs(&mut next.refs, next.object_format) {
            Ok(_) => Step::Write(next.clone(), Ok((true, next))),
            Err(e) => Step::Done(Err(e)),
        }
    })?
    .transpose()?;
    let Some((spilled, state)) = state else {
        return Ok(report);
    };
    report.spilled = spilled;
    let Some(range) = plan(&state.refs.tables, opts.factor) else {
        return Ok(report);
    };
    let merged = merge(repo, &state, range.clone())?;
    if commit(repo, &state, range.clone(), &merged, opts)? {
        report.merged = range.len();
        report.records = merged.records;
    }
    Ok(report)
}

/// Writes the tables of `state` at positions `range` as one table: each
/// name once with its newest record; deletion records kept only when
/// older tables stay below (`range` does not start at the bottom).
///
/// # Errors
/// The store failed, or a source table could not be read.
pub fn merge(
    repo: &Repository,
    state: &RepoState,
    range: std::ops::Range<usize>,
) -> Result<RefTableRef> {
    let at_bottom = range.start == 0;
    // A view of just the tables merged: no inline part.
    let sources = RefSet {
        tables: state.refs.tables[range].to_vec(),
        ..Default::default()
    };
    let view = repo.ref_view(&sources)?;
    let mut walk = view.merged_walk(!at_bottom)?;
    let (bytes, records) = gitstow_odb::refs::encode_cursor(&mut walk, state.object_format)
        .map_err(gitstow_odb::Error::from)?;
    Ok(repo.put_ref_table(&bytes, records)?)
}

/// Publishes `merged` in place of the tables of `read` at `range`, if the
/// current state still has them there (tables pushes added on top stay on
/// top); retires the sources. False when another run merged them first.
///
/// # Errors
/// The store failed, or `merged` was deleted before the commit.
pub fn commit(
    repo: &Repository,
    read: &RepoState,
    range: std::ops::Range<usize>,
    merged: &RefTableRef,
    opts: &Options,
) -> Result<bool> {
    let sources = &read.refs.tables[range.clone()];
    let below = &read.refs.tables[..range.start];
    let ids = [merged.id.clone()];
    let uploads = Some((read.deletions, &ids[..]));
    let done = update_state_naming(repo, opts, "merging ref tables", uploads, |state| {
        let tables = &state.refs.tables;
        let unchanged = tables.len() >= range.end
            && tables[..range.start] == *below
            && tables[range.clone()] == *sources;
        if !unchanged {
            return Step::Done(false);
        }
        let mut next = state.clone();
        next.refs
            .tables
            .splice(range.clone(), std::iter::once(merged.clone()));
        Step::Write(next, true)
    })?
    .unwrap_or(false);
    if done {
        let ids: Vec<String> = sources.iter().map(|t| t.id.clone()).collect();
        retire(repo, opts, &ids)?;
    } else {
        // Named by no state: the orphan scan retires it.
        tracing::info!(
            repo = repo.name(),
            table = merged.id.as_str(),
            "ref tables merged by another run first"
        );
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(records: u64) -> RefTableRef {
        RefTableRef {
            id: format!("t{records}"),
            records,
            bytes: records * 30,
        }
    }

    #[test]
    fn a_geometric_stack_is_left_alone() {
        assert_eq!(plan(&[t(1000), t(400), t(100), t(10)], 2), None);
        assert_eq!(plan(&[t(1000)], 2), None);
        assert_eq!(plan(&[], 2), None);
    }

    #[test]
    fn the_run_above_the_oldest_break_merges() {
        // 1000 and 400 are geometric; 90 is not half of 100: the two merge
        // (400 is more than twice their 190, so it stays).
        assert_eq!(plan(&[t(1000), t(400), t(100), t(90)], 2), Some(2..4));
        // Equal tables pushed one after the other merge all the way down.
        assert_eq!(plan(&[t(900), t(900), t(900)], 2), Some(0..3));
        // A merged run heavier than half the table below takes it too.
        assert_eq!(plan(&[t(1000), t(300), t(200), t(200)], 2), Some(0..4));
        // A heavy bottom stays out of a light run.
        assert_eq!(plan(&[t(10_000), t(50), t(40)], 2), Some(1..3));
    }
}
