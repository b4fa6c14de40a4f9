//! Names of the figures the service layer records through the `metrics`
//! facade (all prefixed `gitstow_`; the daemon's exporter describes and
//! renders them, `gitstow_http::metrics`), and the small helpers that
//! record them.

/// Counter: requests refused for bad, unknown, revoked or expired credentials.
pub const AUTH_FAILURES: &str = "gitstow_auth_failures_total";
/// Gauge: receive-pack requests running (past the queue).
pub const PUSHES_IN_FLIGHT: &str = "gitstow_pushes_in_flight";
/// Gauge: receive-pack requests waiting for a push slot.
pub const PUSHES_QUEUED: &str = "gitstow_pushes_queued";
/// Gauge: upload-pack requests running (past the queue).
pub const FETCHES_IN_FLIGHT: &str = "gitstow_fetches_in_flight";
/// Gauge: upload-pack requests waiting for a fetch slot.
pub const FETCHES_QUEUED: &str = "gitstow_fetches_queued";
/// Histogram: seconds from a spooled push's start to its report-status.
pub const PUSH_DURATION: &str = "gitstow_push_duration_seconds";
/// Histogram: seconds an upload-pack request took.
pub const FETCH_DURATION: &str = "gitstow_fetch_duration_seconds";
/// Histogram: CPU time of an upload-pack request's worker thread (the walk
/// and the pack), in seconds.
pub const FETCH_CPU: &str = "gitstow_fetch_cpu_seconds";
/// Histogram: seconds a push waited for a slot (`--max-concurrent-pushes`).
pub const PUSH_QUEUE_WAIT: &str = "gitstow_push_queue_wait_seconds";
/// Counter: pushes refused because they waited longer than the queue timeout.
pub const PUSH_QUEUE_TIMEOUTS: &str = "gitstow_push_queue_timeouts_total";
/// Histogram: seconds a fetch waited for a slot (`--max-concurrent-fetches`).
pub const FETCH_QUEUE_WAIT: &str = "gitstow_fetch_queue_wait_seconds";
/// Counter: fetches refused because they waited longer than the queue timeout.
pub const FETCH_QUEUE_TIMEOUTS: &str = "gitstow_fetch_queue_timeouts_total";
/// Counter: request body bytes received (after gzip decoding), label `service`.
pub const RECEIVED_BYTES: &str = "gitstow_received_bytes_total";
/// Counter: pushes finished, label `result` (`ok`, `refused`, `error`).
pub const PUSHES: &str = "gitstow_pushes_total";
/// Counter: objects read from pushed packs (each delta resolved once).
pub const OBJECTS_RESOLVED: &str = "gitstow_objects_resolved_total";
/// Counter: deltas among them.
pub const DELTAS_RESOLVED: &str = "gitstow_deltas_resolved_total";
/// Counter: containers sealed and uploaded by pushes.
pub const CONTAINERS_UPLOADED: &str = "gitstow_containers_uploaded_total";
/// Counter: bytes of the containers uploaded.
pub const CONTAINER_BYTES_UPLOADED: &str = "gitstow_container_bytes_uploaded_total";
/// Counter: objects sent by upload-pack.
pub const OBJECTS_SENT: &str = "gitstow_objects_sent_total";
/// Counter: state compare-and-swap retries (another writer won the race).
pub const STATE_CAS_RETRIES: &str = "gitstow_state_cas_retries_total";
/// Counter: maintenance runs, label `result` (`collected`: a GC, `compacted`, `deleted`,
/// `nothing`, `lease_held`, `superseded`, `error`).
pub const MAINTENANCE_RUNS: &str = "gitstow_maintenance_runs_total";
/// Counter: GCs automatic maintenance ran, label `reason` (`interval`: the
/// last was older than `--gc-interval`; `work`: the objects outside the
/// closure passed `--gc-outside-objects` and `--gc-outside-percent`).
pub const MAINTENANCE_GC: &str = "gitstow_maintenance_gc_total";
/// Counter: syncs of stored mirrors this instance ran, labels `direction`
/// (`pull`, `push`) and `result` (`ok`, `failed`, `paused`: failed and
/// paused the mirror, `error`: the outcome could not be recorded).
pub const MIRROR_SYNCS: &str = "gitstow_mirror_syncs_total";
/// Histogram: seconds a mirror's sync took, label `direction`.
pub const MIRROR_SYNC_DURATION: &str = "gitstow_mirror_sync_duration_seconds";
/// Histogram: seconds a maintenance run took.
pub const MAINTENANCE_DURATION: &str = "gitstow_maintenance_duration_seconds";
/// Counter: bytes of containers written by compaction.
pub const MAINTENANCE_BYTES_REWRITTEN: &str = "gitstow_maintenance_bytes_rewritten_total";
/// Counter: containers merged away by compaction (its sources).
pub const MAINTENANCE_CONTAINERS_MERGED: &str = "gitstow_maintenance_containers_merged_total";
/// Counter: retired containers deleted after their grace period.
pub const MAINTENANCE_CONTAINERS_DELETED: &str = "gitstow_maintenance_containers_deleted_total";
/// Gauge: retired containers held for their grace period, over the
/// repositories this process maintained (as of each one's last run).
pub const MAINTENANCE_RETIRED_HELD: &str = "gitstow_maintenance_retired_containers";
/// Gauge: garbage containers (objects no ref reached at the last GC) held
/// for their grace period, over the repositories this process maintained.
pub const MAINTENANCE_GARBAGE_HELD: &str = "gitstow_maintenance_garbage_containers";

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID` of
/// clock_gettime(2), nanosecond resolution); zero if the clock fails.
pub fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A gauge raised while the guard lives (requests in flight, pushes queued).
#[derive(Debug)]
pub struct InFlight(&'static str);

impl InFlight {
    /// Raises `gauge` by one until the guard is dropped.
    pub fn new(gauge: &'static str) -> Self {
        metrics::gauge!(gauge).increment(1.0);
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics::gauge!(self.0).decrement(1.0);
    }
}

/// Gauge: open SSH connections (`serve --ssh-listen`).
pub const SSH_CONNECTIONS_OPEN: &str = "gitstow_ssh_connections_open";
/// Counter: SSH connections closed at once because too many were not
/// authenticated yet (sshd's `MaxStartups`).
pub const SSH_CONNECTIONS_REFUSED: &str = "gitstow_ssh_connections_refused_total";
/// Counter: SSH public-key authentications refused (unknown key, SHA-1
/// `ssh-rsa` signature) and connections that did not authenticate in time.
pub const SSH_AUTH_FAILURES: &str = "gitstow_ssh_auth_failures_total";
/// Counter: git commands run over SSH, labels `service`
/// (`git-upload-pack`, `git-receive-pack`) and `status` (the exit status
/// sent: `0`, `128`).
pub const SSH_COMMANDS: &str = "gitstow_ssh_commands_total";
