//! `/metrics`: the daemon's figures in the Prometheus text exposition format
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>), through the
//! `metrics` facade and `metrics-exporter-prometheus`.
//!
//! Request handlers record events with the `metrics` macros (the names are the
//! constants below, all prefixed `gitstow_`); figures that are states of the
//! process — resident memory, jemalloc's counters, bytes allocated since start,
//! the store's request counters — are read when `/metrics` is scraped.

use std::sync::Arc;

use gitstow_store::ObjectStore;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::alloc;

pub use gitstow_service::metrics::*;

/// Gauge: resident set size of the process in bytes (`VmRSS` of proc(5)).
pub const PROCESS_RESIDENT_BYTES: &str = "gitstow_process_resident_bytes";
/// Gauge: anonymous resident memory of the process in bytes (`RssAnon`).
pub const PROCESS_RESIDENT_ANON_BYTES: &str = "gitstow_process_resident_anon_bytes";
/// Gauge: jemalloc `stats.allocated` in bytes.
pub const JEMALLOC_ALLOCATED: &str = "gitstow_jemalloc_allocated_bytes";
/// Gauge: jemalloc `stats.active` in bytes.
pub const JEMALLOC_ACTIVE: &str = "gitstow_jemalloc_active_bytes";
/// Gauge: jemalloc `stats.resident` in bytes.
pub const JEMALLOC_RESIDENT: &str = "gitstow_jemalloc_resident_bytes";
/// Counter: bytes allocated since start (every allocation's size).
pub const ALLOCATED_TOTAL: &str = "gitstow_allocated_bytes_total";
/// Gauge: open HTTP connections.
pub const CONNECTIONS_OPEN: &str = "gitstow_connections_open";
/// Counter: connections answered 503 at once (`--max-connections`,
/// `--max-connections-per-address`).
pub const CONNECTIONS_REFUSED: &str = "gitstow_connections_refused_total";
/// Counter: TLS handshakes that failed or did not end within
/// `--header-timeout` (`--tls-cert`).
pub const TLS_HANDSHAKE_FAILURES: &str = "gitstow_tls_handshake_failures_total";
/// Counter: response body bytes sent by receive-pack and upload-pack, label `service`.
pub const SENT_BYTES: &str = "gitstow_sent_bytes_total";
/// Counter: store requests, labels `op` and `outcome` (remote stores only).
pub const STORE_REQUESTS: &str = "gitstow_store_requests_total";
/// Counter: store bytes moved, label `direction` (`read`, `written`).
pub const STORE_BYTES: &str = "gitstow_store_bytes_total";
/// Counter: container-cache lookups, label `outcome` (`hit`, `miss`, `read_through`).
pub const CACHE_LOOKUPS: &str = "gitstow_cache_lookups_total";

/// Counter: HTTP responses on the main listener by `status` code (each error
/// path included).
pub const HTTP_RESPONSES: &str = "gitstow_http_responses_total";
/// Gauge: requests on the main listener whose response has not ended
/// (advertisements, fetches, pushes, everything).
pub const HTTP_IN_FLIGHT: &str = "gitstow_http_requests_in_flight";
/// Gauge: 1, labelled with the build's `version`.
pub const BUILD_INFO: &str = "gitstow_build_info";
/// Counter: Git LFS batch requests answered, label `operation`
/// (`download`, `upload`).
pub const LFS_BATCHES: &str = "gitstow_lfs_batches_total";
/// Counter: objects of LFS batches, labels `operation` and `result`
/// (`presigned`: an action to the bucket; `proxied`: through gitstow;
/// `present`: an upload the repository has already; `error`).
pub const LFS_OBJECTS: &str = "gitstow_lfs_objects_total";
/// Counter: bytes of the LFS objects presigned actions were given for,
/// label `operation`: what went between clients and the bucket.
pub const LFS_BYTES_SIGNED: &str = "gitstow_lfs_bytes_signed_total";
/// Counter: LFS object bytes that went through gitstow, label
/// `direction` (`in`: uploads, `out`: downloads; verify's reads of a
/// staged upload are store traffic, in `gitstow_store_bytes_total`).
pub const LFS_BYTES_SERVED: &str = "gitstow_lfs_bytes_served_total";
/// Gauge: when the process started, seconds since the Unix epoch.
pub const START_TIME: &str = "gitstow_process_start_time_seconds";

/// Buckets of the duration histograms, in seconds.
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// How often histogram samples are drained into their buckets
/// (`PrometheusHandle::run_upkeep`) when nothing scrapes.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The installed recorder and what is read at scrape time.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    store: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Installs the process-wide recorder. Errors if a recorder is installed already.
    pub fn install(store: Arc<dyn ObjectStore>) -> Result<Self, String> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
            .map_err(|e| e.to_string())?
            .install_recorder()
            .map_err(|e| e.to_string())?;
        // Histogram samples wait in the recorder until a scrape or an
        // upkeep drains them into the buckets: without a scraper they would
        // pile up with every request.
        let upkeep = handle.clone();
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(UPKEEP_EVERY);
                upkeep.run_upkeep();
            })
            .map_err(|e| format!("starting the metrics upkeep thread: {e}"))?;
        describe();
        // Present from the first scrape, before any request.
        for gauge in [
            PUSHES_IN_FLIGHT,
            PUSHES_QUEUED,
            FETCHES_IN_FLIGHT,
            FETCHES_QUEUED,
            CONNECTIONS_OPEN,
            SSH_CONNECTIONS_OPEN,
            MAINTENANCE_RETIRED_HELD,
            MAINTENANCE_GARBAGE_HELD,
            HTTP_IN_FLIGHT,
        ] {
            metrics::gauge!(gauge).set(0.0);
        }
        metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        metrics::gauge!(START_TIME).set(started.floor());
        for counter in [
            OBJECTS_RESOLVED,
            DELTAS_RESOLVED,
            CONTAINERS_UPLOADED,
            CONTAINER_BYTES_UPLOADED,
            OBJECTS_SENT,
            STATE_CAS_RETRIES,
            PUSH_QUEUE_TIMEOUTS,
            FETCH_QUEUE_TIMEOUTS,
            CONNECTIONS_REFUSED,
            TLS_HANDSHAKE_FAILURES,
            AUTH_FAILURES,
            SSH_CONNECTIONS_REFUSED,
            SSH_AUTH_FAILURES,
            MAINTENANCE_BYTES_REWRITTEN,
            MAINTENANCE_CONTAINERS_MERGED,
            MAINTENANCE_CONTAINERS_DELETED,
        ] {
            metrics::counter!(counter).increment(0);
        }
        Ok(Metrics { handle, store })
    }

    /// The exposition text, with the process figures refreshed first, its
    /// families in name order (the exporter's order changes between scrapes).
    pub fn render(&self) -> String {
        self.refresh();
        sort_families(&self.handle.render())
    }

    fn refresh(&self) {
        if let Some(status) = read_proc_status() {
            metrics::gauge!(PROCESS_RESIDENT_BYTES).set(status.rss as f64);
            metrics::gauge!(PROCESS_RESIDENT_ANON_BYTES).set(status.rss_anon as f64);
        }
        if let Some(j) = alloc::jemalloc_stats() {
            metrics::gauge!(JEMALLOC_ALLOCATED).set(j.allocated as f64);
            metrics::gauge!(JEMALLOC_ACTIVE).set(j.active as f64);
            metrics::gauge!(JEMALLOC_RESIDENT).set(j.resident as f64);
        }
        metrics::counter!(ALLOCATED_TOTAL).absolute(alloc::allocated_total());
        let m = self.store.metrics();
        if let Some(r) = m.requests {
            for (op, n) in [
                ("get", r.get),
                ("get_range", r.get_range),
                ("head", r.head),
                ("put", r.put),
                ("put_conditional", r.put_conditional),
                ("multipart_upload", r.multipart_uploads),
                ("multipart_part", r.multipart_parts),
                ("multipart_complete", r.multipart_completed),
                ("multipart_abort", r.multipart_aborted),
                ("list", r.list),
                ("delete", r.delete),
                ("other", r.other),
            ] {
                metrics::counter!(STORE_REQUESTS, "op" => op, "outcome" => "sent").absolute(n);
            }
            metrics::counter!(STORE_REQUESTS, "op" => "put_conditional", "outcome" => "precondition_failed")
                .absolute(r.precondition_failed);
            metrics::counter!(STORE_REQUESTS, "op" => "any", "outcome" => "retried")
                .absolute(r.retries);
            metrics::counter!(STORE_REQUESTS, "op" => "any", "outcome" => "failed")
                .absolute(r.errors);
            metrics::counter!(STORE_BYTES, "direction" => "read").absolute(r.bytes_read);
            metrics::counter!(STORE_BYTES, "direction" => "written").absolute(r.bytes_written);
        }
        if let Some(c) = m.cache {
            metrics::counter!(CACHE_LOOKUPS, "outcome" => "hit").absolute(c.hits);
            metrics::counter!(CACHE_LOOKUPS, "outcome" => "miss").absolute(c.misses);
            metrics::counter!(CACHE_LOOKUPS, "outcome" => "read_through").absolute(c.read_through);
        }
    }
}

/// Reorders exposition text by family name. A family is its `# HELP` and
/// `# TYPE` lines and the samples after them (a histogram's `_bucket`,
/// `_sum` and `_count` included); a sample without them is its own family.
fn sort_families(text: &str) -> String {
    let mut families: std::collections::BTreeMap<String, String> = Default::default();
    let mut current = String::new();
    for line in text.lines() {
        let name = if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            rest.split(' ').next().unwrap_or("").to_owned()
        } else if line.starts_with('#') || line.is_empty() {
            current.clone()
        } else {
            let sample = line.split(['{', ' ']).next().unwrap_or("");
            if !current.is_empty() && sample.starts_with(current.as_str()) {
                current.clone()
            } else {
                sample.to_owned()
            }
        };
        current = name.clone();
        let family = families.entry(name).or_default();
        family.push_str(line);
        family.push('\n');
    }
    let mut out = String::with_capacity(text.len());
    for family in families.values() {
        out.push_str(family);
        if !family.ends_with("\n\n") {
            out.push('\n');
        }
    }
    out
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(
        PROCESS_RESIDENT_BYTES,
        Unit::Bytes,
        "Resident set size (VmRSS)."
    );
    describe_gauge!(
        PROCESS_RESIDENT_ANON_BYTES,
        Unit::Bytes,
        "Anonymous resident memory (RssAnon)."
    );
    describe_gauge!(JEMALLOC_ALLOCATED, Unit::Bytes, "jemalloc stats.allocated.");
    describe_counter!(
        HTTP_RESPONSES,
        "HTTP responses on the main listener, by status code."
    );
    describe_gauge!(
        HTTP_IN_FLIGHT,
        "Requests on the main listener whose response has not ended."
    );
    describe_gauge!(BUILD_INFO, "1, labelled with the build's version.");
    describe_gauge!(
        START_TIME,
        Unit::Seconds,
        "When the process started, seconds since the Unix epoch."
    );
    describe_gauge!(JEMALLOC_ACTIVE, Unit::Bytes, "jemalloc stats.active.");
    describe_gauge!(JEMALLOC_RESIDENT, Unit::Bytes, "jemalloc stats.resident.");
    describe_counter!(ALLOCATED_TOTAL, Unit::Bytes, "Bytes allocated since start.");
    describe_gauge!(PUSHES_IN_FLIGHT, "Receive-pack requests running.");
    describe_gauge!(
        PUSHES_QUEUED,
        "Receive-pack requests waiting for a push slot."
    );
    describe_gauge!(FETCHES_IN_FLIGHT, "Upload-pack requests running.");
    describe_gauge!(CONNECTIONS_OPEN, "Open HTTP connections.");
    describe_gauge!(SSH_CONNECTIONS_OPEN, "Open SSH connections.");
    describe_counter!(
        SSH_CONNECTIONS_REFUSED,
        "SSH connections closed at once: too many not authenticated yet."
    );
    describe_counter!(
        SSH_AUTH_FAILURES,
        "SSH authentications refused or timed out."
    );
    describe_counter!(
        SSH_COMMANDS,
        "Git commands run over SSH, by service and exit status."
    );
    describe_counter!(
        CONNECTIONS_REFUSED,
        "Connections answered 503 at once for being over a connection cap."
    );
    describe_counter!(
        TLS_HANDSHAKE_FAILURES,
        "TLS handshakes that failed or did not end within --header-timeout."
    );
    describe_counter!(
        AUTH_FAILURES,
        "Requests answered 401 for malformed, unknown, revoked or expired credentials."
    );
    describe_gauge!(
        FETCHES_QUEUED,
        "Upload-pack requests waiting for a fetch slot."
    );
    describe_counter!(MAINTENANCE_RUNS, "Maintenance runs by result.");
    describe_counter!(
        MIRROR_SYNCS,
        "Pulls of stored mirrors this instance ran, by result (ok, failed, paused, error)."
    );
    describe_histogram!(MIRROR_SYNC_DURATION, Unit::Seconds, "Mirror pull time.");
    describe_histogram!(MAINTENANCE_DURATION, Unit::Seconds, "Maintenance run time.");
    describe_counter!(
        MAINTENANCE_BYTES_REWRITTEN,
        Unit::Bytes,
        "Bytes of containers written by compaction."
    );
    describe_counter!(
        MAINTENANCE_CONTAINERS_MERGED,
        "Containers merged away by compaction."
    );
    describe_counter!(
        MAINTENANCE_CONTAINERS_DELETED,
        "Retired containers deleted after the grace period."
    );
    describe_gauge!(
        MAINTENANCE_GARBAGE_HELD,
        "Garbage containers held for their grace period."
    );
    describe_gauge!(
        MAINTENANCE_RETIRED_HELD,
        "Retired containers held for their grace period."
    );
    describe_histogram!(
        PUSH_DURATION,
        Unit::Seconds,
        "Push processing time after spooling."
    );
    describe_histogram!(FETCH_DURATION, Unit::Seconds, "Upload-pack request time.");
    describe_histogram!(
        FETCH_CPU,
        Unit::Seconds,
        "CPU time of the upload-pack worker thread (walk and pack)."
    );
    describe_histogram!(
        PUSH_QUEUE_WAIT,
        Unit::Seconds,
        "Time a push waited for a slot."
    );
    describe_counter!(
        PUSH_QUEUE_TIMEOUTS,
        "Pushes refused after waiting too long for a slot."
    );
    describe_histogram!(
        FETCH_QUEUE_WAIT,
        Unit::Seconds,
        "Time a fetch waited for a slot."
    );
    describe_counter!(
        FETCH_QUEUE_TIMEOUTS,
        "Fetches refused after waiting too long for a slot."
    );
    describe_counter!(RECEIVED_BYTES, Unit::Bytes, "Request body bytes received.");
    describe_counter!(SENT_BYTES, Unit::Bytes, "Response body bytes sent.");
    describe_counter!(PUSHES, "Pushes finished, by result.");
    describe_counter!(OBJECTS_RESOLVED, "Objects read from pushed packs.");
    describe_counter!(DELTAS_RESOLVED, "Deltas resolved from pushed packs.");
    describe_counter!(CONTAINERS_UPLOADED, "Containers sealed and uploaded.");
    describe_counter!(
        CONTAINER_BYTES_UPLOADED,
        Unit::Bytes,
        "Bytes of containers uploaded."
    );
    describe_counter!(OBJECTS_SENT, "Objects sent by upload-pack.");
    describe_counter!(STATE_CAS_RETRIES, "State compare-and-swap retries.");
    describe_counter!(STORE_REQUESTS, "Store requests by operation and outcome.");
    describe_counter!(STORE_BYTES, Unit::Bytes, "Store object bytes moved.");
    describe_counter!(CACHE_LOOKUPS, "Container cache lookups by outcome.");
    describe_counter!(
        LFS_BATCHES,
        "Git LFS batch requests answered, by operation."
    );
    describe_counter!(
        LFS_OBJECTS,
        "Objects of Git LFS batches, by operation and result (presigned, proxied, present, error)."
    );
    describe_counter!(
        LFS_BYTES_SIGNED,
        Unit::Bytes,
        "Bytes of LFS objects given presigned actions (moved between clients and the bucket)."
    );
    describe_counter!(
        LFS_BYTES_SERVED,
        Unit::Bytes,
        "LFS object bytes that went through gitstow, by direction."
    );
}

/// Resident memory of this process from `/proc/self/status` (proc(5)), in bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ProcStatus {
    /// `VmRSS`.
    pub rss: u64,
    /// `RssAnon`.
    pub rss_anon: u64,
}

/// Parses the `VmRSS` and `RssAnon` lines (kB) of a proc(5) status file.
pub fn parse_proc_status(text: &str) -> ProcStatus {
    let mut s = ProcStatus::default();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let kb = || {
            rest.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        match key {
            "VmRSS" => s.rss = kb(),
            "RssAnon" => s.rss_anon = kb(),
            _ => {}
        }
    }
    s
}

fn read_proc_status() -> Option<ProcStatus> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .map(|t| parse_proc_status(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_lines() {
        let text = "Name:\tgitstow\nVmHWM:\t  20000 kB\nVmRSS:\t   12345 kB\nRssAnon:\t    8000 kB\nRssFile:\t 4345 kB\n";
        assert_eq!(
            parse_proc_status(text),
            ProcStatus {
                rss: 12345 * 1024,
                rss_anon: 8000 * 1024
            }
        );
        assert_eq!(parse_proc_status("garbage"), ProcStatus::default());
    }
}
