//! Repository maintenance: keeps a repository's cost proportional to its
//! size, not to its number of pushes.
//!
//! - [`policy`]: which containers merge (git's geometric rule).
//! - [`compact`]: merging containers with records copied verbatim, and
//!   publishing the result through the state's compare-and-swap.
//! - [`ref_tables`]: merging ref tables geometrically, writing out an
//!   outgrown inline part of the refs.
//! - [`gc`]: rewriting what the refs reach, unreachable objects into garbage
//!   containers held for the grace period.
//! - [`bitmaps`]: reachability bitmaps over the closure, for a GC's and
//!   for the one an import's push recorded.
//! - [`graph`]: the commit graphs of the containers maintenance writes.
//! - [`sweep`]: deleting retired containers after the grace period, and the
//!   orphan scan that finds containers no state names.
//! - [`lfs`]: collection of Git LFS claims, objects and staged uploads
//!   nothing needs.
//! - [`lease`]: the per-repository lease that keeps two instances off one
//!   repository's maintenance.
//!
//! [`run`] does one maintenance pass over one repository: plan, take the
//! lease, compact, delete what is due, scan for orphans when the scan
//! interval has passed, release. It never blocks or refuses a push: every
//! commit is a compare-and-swap re-applied on top of whatever a push
//! committed meanwhile. Design and safety argument:
//! `docs/plans/0004-maintenance.md`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admin;
pub mod bitmaps;
pub mod compact;
pub mod fsck;
pub mod gc;
pub mod graph;
pub mod lease;
pub mod lfs;
pub mod policy;
pub mod ref_tables;
pub mod sweep;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gitstow_odb::retired::RetiredContainer;
use gitstow_odb::Repository;

/// Knobs of maintenance.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a container stays in the store after the state stopped naming
    /// it (or after an orphan scan first found it unnamed). A fetch that
    /// loaded an older state can read that long; a push has that long from
    /// its first upload to its commit. Default one day.
    pub grace: Duration,
    /// The geometric factor (at least 2): a kept container holds at least
    /// this many times the objects of the next smaller one.
    pub factor: u64,
    /// Largest container written, in bytes (default 128 MiB, as pushes).
    pub max_container_bytes: u64,
    /// Where merged containers are staged and sources downloaded (default:
    /// the system temp dir).
    pub staging_dir: Option<PathBuf>,
    /// How long a lease lasts without renewal.
    pub lease_ttl: Duration,
    /// The orphan scan (a LIST of the repository's containers) runs when the
    /// last one is older than this.
    pub scan_interval: Duration,
    /// Merge every container that is not full (as if all failed the
    /// geometric rule).
    pub full: bool,
    /// Scan for orphans in this run whatever the scan interval says (what
    /// `gitstow maintain` does). Otherwise the first run on a repository
    /// starts its scan clock and a scan runs once per `scan_interval`.
    pub scan_now: bool,
    /// Run a GC in this run (instead of compaction).
    pub gc: bool,
    /// A GC runs when the last one is older than this (`None`: only when
    /// asked for with `gc`). The first run on a repository starts the clock.
    pub gc_interval: Option<Duration>,
    /// A GC also runs when the work pushes left is due by this rule
    /// ([`policy::gc_due_by_work`]; `None`: only by the clock or when asked).
    pub gc_work: Option<policy::GcWork>,
    /// Plan and report only: take no lease, write and delete nothing.
    pub dry_run: bool,
    /// Compare-and-swap attempts of one commit before giving up.
    pub max_state_attempts: u32,
    /// Tests only: sleep this long between reading the state and committing a
    /// merge, so a push can commit in between.
    pub test_commit_delay: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            grace: Duration::from_secs(24 * 3600),
            factor: 2,
            max_container_bytes: 128 << 20,
            staging_dir: None,
            lease_ttl: Duration::from_secs(600),
            scan_interval: Duration::from_secs(24 * 3600),
            full: false,
            scan_now: false,
            gc: false,
            gc_interval: None,
            gc_work: None,
            dry_run: false,
            max_state_attempts: 50,
            test_commit_delay: None,
        }
    }
}

/// Errors of maintenance. None of them leaves the repository inconsistent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing the repository failed.
    #[error(transparent)]
    Odb(#[from] gitstow_odb::Error),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] gitstow_store::Error),
    /// Local staging files.
    #[error("local I/O: {0}")]
    Io(#[from] std::io::Error),
    /// Another holder took the lease while this run worked.
    #[error("the maintenance lease was lost to another instance")]
    LeaseLost,
    /// A container this run uploaded was deleted (another instance's orphan
    /// scan took it for a failed push's) before the run could name it: the
    /// run fails, nothing is committed.
    #[error(
        "a container this run uploaded was deleted by another maintenance run before its commit"
    )]
    UploadDeleted,
    /// Pushes kept winning the state's compare-and-swap.
    #[error("the repository state changed {0} times during maintenance; giving up")]
    TooManyConflicts(u32),
}

/// `Result` with maintenance's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a step of a compare-and-swap update decided on the current value `S`
/// (the state, or the retired list).
pub(crate) enum Step<S, T> {
    /// Write this value; on success the update yields `T`.
    Write(S, T),
    /// Write nothing; the update yields `T`.
    Done(T),
}

/// After a lost compare-and-swap: counts the attempt, gives up past
/// `opts.max_state_attempts`, else backs off (5 ms doubling, at most 320 ms).
fn back_off(attempts: &mut u32, opts: &Options) -> Result<()> {
    *attempts += 1;
    if *attempts >= opts.max_state_attempts {
        return Err(Error::TooManyConflicts(*attempts));
    }
    std::thread::sleep(Duration::from_millis(5 << (*attempts).min(6)));
    Ok(())
}

/// Reads the state, lets `decide` compute the next one and writes it by
/// compare-and-swap; when someone (a push) wrote first, re-reads and decides
/// again. `Ok(None)` when the repository does not exist. `doing` names the
/// work in the log line of a conflict ("merging", "collecting garbage"…).
pub(crate) fn update_state<T>(
    repo: &Repository,
    opts: &Options,
    doing: &str,
    decide: impl FnMut(&gitstow_odb::RepoState) -> Step<gitstow_odb::RepoState, T>,
) -> Result<Option<T>> {
    update_state_naming(repo, opts, doing, None, decide)
}

/// [`update_state`] for a write that names containers this run uploaded:
/// `uploads` gives the deletion count of the state read before the upload
/// and their ids. A write happens only while they are intact
/// ([`Repository::uploads_intact`]), else [`Error::UploadDeleted`].
pub(crate) fn update_state_naming<T>(
    repo: &Repository,
    opts: &Options,
    doing: &str,
    uploads: Option<(u64, &[String])>,
    mut decide: impl FnMut(&gitstow_odb::RepoState) -> Step<gitstow_odb::RepoState, T>,
) -> Result<Option<T>> {
    let mut attempts = 0;
    loop {
        let Some(current) = repo.load_kept_state()? else {
            return Ok(None);
        };
        let (next, value) = match decide(&current.state) {
            Step::Done(value) => return Ok(Some(value)),
            Step::Write(next, value) => (next, value),
        };
        if let Some((since, ids)) = uploads {
            if !repo.uploads_intact(&current.state, since, ids)? {
                return Err(Error::UploadDeleted);
            }
        }
        if let Some(delay) = opts.test_commit_delay {
            std::thread::sleep(delay);
        }
        match repo.commit_kept_state(next, Some(&current.etag))? {
            gitstow_odb::CommitOutcome::Committed(_) => return Ok(Some(value)),
            gitstow_odb::CommitOutcome::Conflict => {
                tracing::info!(
                    repo = repo.name(),
                    "the state changed while {doing} (a push committed); re-applying"
                );
                back_off(&mut attempts, opts)?;
            }
        }
    }
}

/// Reads the retired list, lets `decide` compute the next one and writes it
/// by compare-and-swap, re-reading on conflict.
pub(crate) fn update_retired<T>(
    repo: &Repository,
    opts: &Options,
    mut decide: impl FnMut(&[RetiredContainer]) -> Step<Vec<RetiredContainer>, T>,
) -> Result<T> {
    let mut attempts = 0;
    loop {
        let (list, etag) = repo.load_retired()?;
        let (next, value) = match decide(&list) {
            Step::Done(value) => return Ok(value),
            Step::Write(next, value) => (next, value),
        };
        match repo.commit_retired(&next, etag.as_ref())? {
            gitstow_odb::CommitOutcome::Committed(_) => return Ok(value),
            gitstow_odb::CommitOutcome::Conflict => back_off(&mut attempts, opts)?,
        }
    }
}

/// Adds `ids` to the retired list as of now (after the state stopped naming
/// them). An id already listed gets the new time.
pub(crate) fn retire(repo: &Repository, opts: &Options, ids: &[String]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    // No new reader will open them: their cached indexes and side files
    // only take room (readers in flight hold their own references).
    repo.forget_cached(ids);
    update_retired(repo, opts, |list| {
        let since = now_secs();
        let mut next: Vec<RetiredContainer> = list
            .iter()
            .filter(|r| !ids.contains(&r.id))
            .cloned()
            .collect();
        next.extend(ids.iter().map(|id| RetiredContainer {
            id: id.clone(),
            since,
        }));
        Step::Write(next, ())
    })
}

/// Seconds since the Unix epoch, by this machine's clock.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a run did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skipped {
    /// The repository does not exist.
    NoRepository,
    /// Nothing to merge, nothing due, no scan due.
    NothingToDo,
    /// Another instance holds the lease.
    LeaseHeld,
    /// A merge's sources were merged by someone else first.
    Superseded,
}

/// Why a run was a GC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcReason {
    /// Asked for ([`Options::gc`], `gitstow maintain --gc`).
    Asked,
    /// The last GC is older than [`Options::gc_interval`].
    Interval,
    /// What lies outside the closure passed [`Options::gc_work`]'s thresholds.
    Work,
}

impl GcReason {
    /// The reason as the log and the metrics name it: `asked`, `interval`, `work`.
    pub fn as_str(self) -> &'static str {
        match self {
            GcReason::Asked => "asked",
            GcReason::Interval => "interval",
            GcReason::Work => "work",
        }
    }
}

/// What one maintenance run did (or, with `dry_run`, would do).
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// The repository.
    pub repo: String,
    /// Live containers before and after.
    pub containers_before: usize,
    /// Live containers after.
    pub containers_after: usize,
    /// Bytes of the live containers before.
    pub bytes_before: u64,
    /// Bytes of the live containers after.
    pub bytes_after: u64,
    /// Containers merged (sources).
    pub merged: usize,
    /// Containers written by the merge.
    pub written: usize,
    /// Bytes written by the merge.
    pub bytes_rewritten: u64,
    /// Duplicate objects dropped by the merge.
    pub objects_dropped: u64,
    /// REF_DELTA records turned into OFS_DELTA.
    pub ref_to_ofs: u64,
    /// Ref tables merged (sources).
    pub ref_tables_merged: usize,
    /// Records written into the merged ref table.
    pub ref_records_written: u64,
    /// The inline refs were written out as a ref table.
    pub refs_spilled: bool,
    /// Retired containers (and ref tables) deleted.
    pub deleted: usize,
    /// Orphan containers found (and retired).
    pub orphans: usize,
    /// Retired containers still held for their grace period after the run.
    pub retired_held: usize,
    /// The run was a GC.
    pub gc: bool,
    /// Why the run was a GC.
    pub gc_reason: Option<GcReason>,
    /// Objects outside the closure (and in it) as the run found them.
    pub outside: policy::Outside,
    /// Reachability bitmaps written over a push's closure (not a GC's).
    pub closure_bitmaps: usize,
    /// GC: distinct objects the refs reach.
    pub reachable: u64,
    /// GC: distinct objects moved into garbage containers.
    pub unreachable: u64,
    /// Garbage containers held after the run.
    pub garbage_held: usize,
    /// Garbage containers retired by this run (their grace period was over).
    pub garbage_retired: usize,
    /// Set when the run did nothing, and why.
    pub skipped: Option<Skipped>,
    /// Wall time of the run.
    pub duration: Duration,
}

/// One maintenance pass over `repo` (see the crate docs). `progress` gets
/// one line per step.
pub fn run(repo: &Repository, opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Report> {
    let started = Instant::now();
    let mut report = Report {
        repo: repo.name().to_owned(),
        ..Default::default()
    };
    let finish = |mut r: Report, skipped: Option<Skipped>| {
        r.skipped = skipped;
        r.duration = started.elapsed();
        r
    };
    let Some(current) = repo.load_kept_state()? else {
        return Ok(finish(report, Some(Skipped::NoRepository)));
    };
    let state = current.state;
    report.containers_before = state.containers.len();
    report.bytes_before = state.containers.iter().map(|c| c.bytes).sum();
    report.containers_after = report.containers_before;
    report.bytes_after = report.bytes_before;
    let (retired, _) = repo.load_retired()?;
    report.retired_held = retired.len();
    report.garbage_held = state.garbage.len();
    let plan = plan(&state, opts);
    let due = sweep::due(&state, &retired, now_secs(), opts);
    let expired = sweep::expired_garbage(&state, now_secs(), opts);
    if opts.dry_run {
        report.merged = plan.len();
        report.deleted = due.len();
        report.orphans = sweep::scan_orphans(repo, opts)?;
        return Ok(finish(report, None));
    }
    let scan_is_due = |last_scan: u64| {
        opts.scan_now
            || (last_scan != 0
                && last_scan.saturating_add(opts.scan_interval.as_secs()) <= now_secs())
    };
    report.outside = policy::outside_closure(&state);
    let gc_is_due = |last_gc: u64| {
        if opts.gc {
            return Some(GcReason::Asked);
        }
        let by_clock = opts
            .gc_interval
            .is_some_and(|i| last_gc != 0 && last_gc.saturating_add(i.as_secs()) <= now_secs());
        if by_clock {
            return Some(GcReason::Interval);
        }
        opts.gc_work
            .and_then(|w| policy::gc_due_by_work(&state, &w, last_gc, now_secs()))
            .map(|_| GcReason::Work)
    };
    // Ids left in `deleting` by a run that stopped midway are finished too.
    let unfinished = !state.deleting.is_empty();
    let refs_due = ref_tables::due(&state.refs, opts.factor);
    if !opts.gc
        && plan.is_empty()
        && due.is_empty()
        && expired.is_empty()
        && !unfinished
        && !refs_due
        && !bitmaps::due(&state)
    {
        let (last_scan, last_gc) = lease::last_runs(repo)?;
        if !scan_is_due(last_scan) && gc_is_due(last_gc).is_none() {
            // Nothing to do: decided without writing anything.
            return Ok(finish(report, Some(Skipped::NothingToDo)));
        }
    }
    let Some(mut lease) = Lease::acquire(repo, opts.lease_ttl)? else {
        return Ok(finish(report, Some(Skipped::LeaseHeld)));
    };
    let scan_due = scan_is_due(lease.last_scan());
    let gc_reason = gc_is_due(lease.last_gc());
    let gc = gc_reason.is_some();
    let plan = if gc { Vec::new() } else { plan };
    report.gc = gc;
    report.gc_reason = gc_reason;
    let result = work(
        repo,
        opts,
        &state,
        &plan,
        gc,
        scan_due,
        &mut lease,
        &mut report,
        progress,
    );
    // Release even after a failure; a lost lease is someone else's now.
    match lease.release() {
        Ok(()) | Err(Error::LeaseLost) => {}
        Err(e) => tracing::warn!(repo = repo.name(), error = %e, "releasing the maintenance lease"),
    }
    let skipped = result?;
    if let Some(after) = repo.load_kept_state()? {
        report.containers_after = after.state.containers.len();
        report.bytes_after = after.state.containers.iter().map(|c| c.bytes).sum();
        report.retired_held = repo.load_retired()?.0.len();
        report.garbage_held = after.state.garbage.len();
    }
    Ok(finish(report, skipped))
}

use lease::Lease;

/// The merge the policy asks for on `state`: positions in its container list.
pub fn plan(state: &gitstow_odb::RepoState, opts: &Options) -> Vec<usize> {
    if opts.full {
        let not_full: Vec<usize> = state
            .containers
            .iter()
            .enumerate()
            .filter(|(_, c)| !policy::is_full(c, opts.max_container_bytes))
            .map(|(i, _)| i)
            .collect();
        return if not_full.len() >= 2 {
            not_full
        } else {
            Vec::new()
        };
    }
    policy::compaction(state, opts.factor, opts.max_container_bytes)
}

#[allow(clippy::too_many_arguments)]
fn work(
    repo: &Repository,
    opts: &Options,
    state: &gitstow_odb::RepoState,
    plan: &[usize],
    gc: bool,
    scan_due: bool,
    lease: &mut Lease,
    report: &mut Report,
    progress: &mut dyn FnMut(&str),
) -> Result<Option<Skipped>> {
    let mut skipped = None;
    if gc {
        progress(&format!(
            "{}: GC of {} containers ({} bytes)",
            repo.name(),
            state.containers.len(),
            state.containers.iter().map(|c| c.bytes).sum::<u64>()
        ));
        let collected = gc::collect(repo, state, opts, progress)?;
        lease.renew()?;
        if gc::commit(repo, state, &collected, opts)? {
            lease.collected();
            report.merged = state.containers.len();
            report.written = collected.live.len() + collected.garbage.len();
            report.bytes_rewritten = collected
                .live
                .iter()
                .chain(&collected.garbage)
                .map(|c| c.bytes)
                .sum();
            report.objects_dropped = collected.duplicates_dropped;
            report.reachable = collected.reachable;
            report.unreachable = collected.unreachable;
            progress(&format!(
                "{}: {} objects reachable, {} into garbage, {} absent",
                repo.name(),
                collected.reachable,
                collected.unreachable,
                collected.missing
            ));
        } else {
            skipped = Some(Skipped::Superseded);
        }
    }
    if !plan.is_empty() {
        let sources: Vec<_> = plan.iter().map(|&i| state.containers[i].clone()).collect();
        progress(&format!(
            "{}: merging {} containers ({} objects, {} bytes)",
            repo.name(),
            sources.len(),
            sources.iter().map(|c| c.objects).sum::<u64>(),
            sources.iter().map(|c| c.bytes).sum::<u64>()
        ));
        let mut renewed = Instant::now();
        let renew_every = opts.lease_ttl / 3;
        let mut lease_error = None;
        let merged = compact::merge(repo, state, &sources, opts, &mut |_done| {
            if lease_error.is_none() && renewed.elapsed() >= renew_every {
                renewed = Instant::now();
                if let Err(e) = lease.renew() {
                    lease_error = Some(e);
                }
            }
        })?;
        if let Some(e) = lease_error {
            return Err(e);
        }
        lease.renew()?;
        if compact::commit(repo, &sources, &merged.containers, state.deletions, opts)? {
            report.merged = sources.len();
            report.written = merged.containers.len();
            report.bytes_rewritten = merged.containers.iter().map(|c| c.bytes).sum();
            report.objects_dropped = merged.duplicates_dropped;
            report.ref_to_ofs = merged.ref_to_ofs;
            progress(&format!(
                "{}: wrote {} containers ({} bytes), {} duplicate objects dropped",
                repo.name(),
                report.written,
                report.bytes_rewritten,
                report.objects_dropped
            ));
        } else {
            skipped = Some(Skipped::Superseded);
            progress(&format!(
                "{}: another run merged these containers first",
                repo.name()
            ));
        }
    }
    if !gc && bitmaps::due(state) {
        lease.renew()?;
        report.closure_bitmaps = bitmaps::for_pushed_closure(repo, state, opts)?;
        lease.renew()?;
        if report.closure_bitmaps > 0 {
            progress(&format!(
                "{}: {} reachability bitmaps written over the closure a push recorded",
                repo.name(),
                report.closure_bitmaps
            ));
        }
    }
    let refs = ref_tables::maintain(repo, opts)?;
    report.ref_tables_merged = refs.merged;
    report.ref_records_written = refs.records;
    report.refs_spilled = refs.spilled;
    if refs.spilled {
        progress(&format!(
            "{}: inline refs written out as a ref table",
            repo.name()
        ));
    }
    if refs.merged > 0 {
        progress(&format!(
            "{}: merged {} ref tables into one of {} records",
            repo.name(),
            refs.merged,
            refs.records
        ));
    }
    report.garbage_retired = sweep::retire_expired_garbage(repo, opts)?;
    let deleted = sweep::delete_due(repo, opts)?;
    report.deleted = deleted.ids.len();
    if report.deleted > 0 {
        progress(&format!(
            "{}: deleted {} retired containers",
            repo.name(),
            report.deleted
        ));
    }
    if scan_due {
        report.orphans = sweep::scan_orphans(repo, opts)?;
        lease.scanned();
        if report.orphans > 0 {
            progress(&format!(
                "{}: found {} containers no state names (deleted after the grace period)",
                repo.name(),
                report.orphans
            ));
        }
    }
    Ok(skipped)
}
