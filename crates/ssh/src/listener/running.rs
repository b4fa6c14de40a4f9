//! What the listener counts: the commands running (drained at shutdown,
//! and at most [`super::MAX_SESSIONS`] a connection), and the connections
//! refused at a cap (a metric, and a warning at most every
//! [`REFUSED_WARN_EVERY_SECS`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gitstow_service::conn_caps::{self, ConnCaps};
use gitstow_service::metrics as m;

use super::SshConfig;

/// A command counted among the running ones (of the listener, or of its
/// connection), until dropped.
pub(super) struct Running(Arc<std::sync::atomic::AtomicUsize>);

impl Running {
    pub(super) fn new(count: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Running(count)
    }
}

/// Seconds between two warnings of refused connections: a flood of
/// thousands a second is one log line every this many seconds (with how
/// many since the last), and every one is counted in the metric.
const REFUSED_WARN_EVERY_SECS: u64 = 10;

/// When the last warning of refused connections was logged (seconds since
/// the Unix epoch), and how many were refused since.
static REFUSED_WARNED_AT: AtomicU64 = AtomicU64::new(0);
static REFUSED_SINCE: AtomicU64 = AtomicU64::new(0);

/// Which caps a refused connection met.
#[derive(Clone, Copy)]
pub(super) enum Caps<'a> {
    /// The server's open connections, HTTP's and SSH's together.
    Open(&'a ConnCaps),
    /// The connections not authenticated yet (`MaxStartups`).
    Startups(&'a SshConfig),
}

/// Says (metric, and a warning at most every
/// [`REFUSED_WARN_EVERY_SECS`]) that a connection from `peer` met one of
/// `caps`; the connection is then closed without a word (as sshd does).
pub(super) fn refused(peer: SocketAddr, cap: conn_caps::CapReached, caps: Caps<'_>) {
    metrics::counter!(m::SSH_CONNECTIONS_REFUSED).increment(1);
    let since = REFUSED_SINCE.fetch_add(1, Ordering::Relaxed) + 1;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = REFUSED_WARNED_AT.load(Ordering::Relaxed);
    if now < last + REFUSED_WARN_EVERY_SECS
        || REFUSED_WARNED_AT
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    REFUSED_SINCE.fetch_sub(since, Ordering::Relaxed);
    let ((total, per_source), what) = match caps {
        Caps::Open(c) => (c.limits(), "open connections (HTTP and SSH)"),
        Caps::Startups(config) => (
            (
                config.max_unauthenticated,
                config.max_unauthenticated_per_source,
            ),
            "not authenticated yet",
        ),
    };
    let (limit, whence) = match cap {
        conn_caps::CapReached::Total => (total, ""),
        conn_caps::CapReached::Source => (per_source, " from this address"),
    };
    tracing::warn!(%peer, limit, refused = since, "ssh: connection refused: too many {what}{whence} ({since} refused since the last such warning, at most one every {REFUSED_WARN_EVERY_SECS} s; all counted in {})", m::SSH_CONNECTIONS_REFUSED);
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
