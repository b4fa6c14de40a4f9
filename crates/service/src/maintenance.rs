//! Automatic maintenance inside `gitstow serve`: after each push that
//! committed, the repository is queued for a maintenance pass
//! ([`gitstow_maintain::run`]: geometric compaction, deletion of retired
//! containers whose grace period is over, the periodic orphan scan).
//!
//! One worker thread runs the passes one at a time, so maintenance takes at
//! most one core and the memory of one merge, whatever the push load; a
//! repository queued twice is run once. A push never waits for it: the
//! queue is a channel and maintenance commits by compare-and-swap on top of
//! whatever pushes committed. Repositories left with retired or garbage
//! containers are visited again every `revisit` interval until their grace
//! periods end and they are deleted. A pass is a GC instead of a compaction
//! when the repository's last GC is older than the GC interval, or when
//! the objects pushed outside its closure passed the work rule's
//! thresholds (`gitstow_maintain::policy::gc_due_by_work`; counted in
//! `gitstow_maintenance_gc_total{reason}`). Several instances on one bucket share the work through
//! the per-repository lease.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gitstow_odb::{IndexCache, Repository};
use gitstow_store::ObjectStore;

use crate::metrics as m;

/// The shortest grace period `serve --maintenance-grace` and `maintain
/// --grace` accept, in seconds: a fetch that loaded an older state, and a
/// push from its first upload to its commit, must fit in it.
pub const MIN_GRACE_SECS: u64 = 3600;

/// Environment variable that lets tests set a shorter grace period.
pub const TEST_SHORT_GRACE_ENV: &str = "GITSTOW_TEST_SHORT_GRACE";

/// Refuses a grace period shorter than [`MIN_GRACE_SECS`] (unless
/// [`TEST_SHORT_GRACE_ENV`] is `1`); `flag` names it in the message.
///
/// # Errors
/// The message to print, in the command's words.
pub fn check_grace(flag: &str, secs: u64) -> Result<(), String> {
    if secs >= MIN_GRACE_SECS || std::env::var(TEST_SHORT_GRACE_ENV).is_ok_and(|v| v == "1") {
        return Ok(());
    }
    Err(format!(
        "{flag} {secs} is shorter than {MIN_GRACE_SECS} seconds: the grace period must outlast the longest fetch and the longest push (from its first upload to its commit)"
    ))
}

/// Settings of automatic maintenance.
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    /// What a pass does (grace period, factor, sizes).
    pub options: gitstow_maintain::Options,
    /// How often repositories holding retired containers are visited again.
    pub revisit: Duration,
}

/// The queue of repositories to maintain and its worker thread.
#[derive(Debug)]
pub struct Maintenance {
    tx: Mutex<mpsc::Sender<String>>,
    pending: Arc<Mutex<HashSet<String>>>,
}

impl Maintenance {
    /// Starts the worker thread.
    pub fn start(
        store: Arc<dyn ObjectStore>,
        indexes: Arc<IndexCache>,
        config: MaintenanceConfig,
    ) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = mpsc::channel::<String>();
        let pending: Arc<Mutex<HashSet<String>>> = Arc::default();
        let worker_pending = pending.clone();
        std::thread::Builder::new()
            .name("gitstow-maintenance".into())
            .spawn(move || worker(rx, worker_pending, store, indexes, config))?;
        Ok(Arc::new(Maintenance {
            tx: Mutex::new(tx),
            pending,
        }))
    }

    /// Queues `repo` for a pass, unless it is queued already.
    pub fn after_push(&self, repo: &str) {
        let fresh = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(repo.to_owned());
        if fresh {
            let _ = self
                .tx
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(repo.to_owned());
        }
    }
}

fn worker(
    rx: mpsc::Receiver<String>,
    pending: Arc<Mutex<HashSet<String>>>,
    store: Arc<dyn ObjectStore>,
    indexes: Arc<IndexCache>,
    config: MaintenanceConfig,
) {
    // Repositories holding retired or garbage containers → how many of
    // each, as of their last pass.
    let mut holding: HashMap<String, (usize, usize)> = HashMap::new();
    let mut last_revisit = Instant::now();
    loop {
        let wait = config.revisit.saturating_sub(last_revisit.elapsed());
        let names: Vec<String> = match rx.recv_timeout(wait) {
            Ok(name) => {
                pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&name);
                vec![name]
            }
            Err(RecvTimeoutError::Timeout) => {
                last_revisit = Instant::now();
                holding.keys().cloned().collect()
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        for name in names {
            let repo = Repository::new(store.clone(), &name, indexes.clone());
            let held = run_one(&repo, &config.options);
            match held {
                Some((0, 0)) => {
                    holding.remove(&name);
                }
                Some(n) => {
                    holding.insert(name, n);
                }
                None => {}
            }
            let (retired, garbage) = holding
                .values()
                .fold((0, 0), |(r, g), (dr, dg)| (r + dr, g + dg));
            metrics::gauge!(m::MAINTENANCE_RETIRED_HELD).set(retired as f64);
            metrics::gauge!(m::MAINTENANCE_GARBAGE_HELD).set(garbage as f64);
        }
        // A pass reads indexes and graphs as a request does (a GC all of
        // them): their pages leave the resident set once it ends, as after a
        // request (a request running meanwhile faults back what it reads).
        indexes.release_pages();
    }
}

/// One pass, logged and counted; returns the retired and garbage containers left held.
fn run_one(repo: &Repository, options: &gitstow_maintain::Options) -> Option<(usize, usize)> {
    use gitstow_maintain::Skipped;
    let started = Instant::now();
    // The pass runs on this thread alone: its CPU is this thread's.
    let cpu_started = m::thread_cpu();
    let result = gitstow_maintain::run(repo, options, &mut |line| {
        tracing::debug!(repo = repo.name(), "{line}");
    });
    let cpu = m::thread_cpu().saturating_sub(cpu_started);
    metrics::histogram!(m::MAINTENANCE_DURATION).record(started.elapsed().as_secs_f64());
    match result {
        Ok(r) => {
            let label = match r.skipped {
                Some(Skipped::NothingToDo) | Some(Skipped::NoRepository) => "nothing",
                Some(Skipped::LeaseHeld) => "lease_held",
                Some(Skipped::Superseded) => "superseded",
                None if r.gc => "collected",
                None if r.merged > 0 => "compacted",
                None => "deleted",
            };
            metrics::counter!(m::MAINTENANCE_RUNS, "result" => label).increment(1);
            metrics::counter!(m::MAINTENANCE_BYTES_REWRITTEN).increment(r.bytes_rewritten);
            if let (Some(reason), None) = (r.gc_reason, r.skipped) {
                metrics::counter!(m::MAINTENANCE_GC, "reason" => reason.as_str()).increment(1);
            }
            metrics::counter!(m::MAINTENANCE_CONTAINERS_MERGED).increment(r.merged as u64);
            metrics::counter!(m::MAINTENANCE_CONTAINERS_DELETED).increment(r.deleted as u64);
            if r.skipped.is_none() {
                tracing::info!(
                    repo = repo.name(),
                    containers_before = r.containers_before,
                    containers_after = r.containers_after,
                    bytes_before = r.bytes_before,
                    bytes_after = r.bytes_after,
                    merged = r.merged,
                    written = r.written,
                    bytes_rewritten = r.bytes_rewritten,
                    objects_dropped = r.objects_dropped,
                    deleted = r.deleted,
                    orphans = r.orphans,
                    retired_held = r.retired_held,
                    gc = r.gc,
                    closure_bitmaps = r.closure_bitmaps,
                    gc_reason = r.gc_reason.map_or("", |g| g.as_str()),
                    outside_objects = r.outside.objects,
                    closure_objects = r.outside.closure_objects,
                    unreachable = r.unreachable,
                    garbage_held = r.garbage_held,
                    ms = r.duration.as_millis() as u64,
                    cpu_ms = cpu.as_millis() as u64,
                    "maintenance"
                );
            }
            (r.skipped != Some(Skipped::LeaseHeld)).then_some((r.retired_held, r.garbage_held))
        }
        Err(e) => {
            metrics::counter!(m::MAINTENANCE_RUNS, "result" => "error").increment(1);
            tracing::warn!(repo = repo.name(), error = %e, "maintenance failed");
            None
        }
    }
}
