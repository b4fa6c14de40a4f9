//! The push concurrency cap (`--max-concurrent-pushes`): at most `limit`
//! receive-packs resolve at once; later ones wait in a FIFO queue (tokio's
//! fair semaphore) for up to `timeout`, so the daemon's memory stays flat
//! however many clients push at once. Spooling the request body happens
//! before the queue (it goes to a temp file, not memory).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::{self as m, InFlight};

/// Memory one running push is budgeted, for the default limit (bytes).
pub const MEMORY_PER_PUSH: u64 = 512 << 20;

/// The queue of pushes.
#[derive(Debug)]
pub struct PushQueue {
    slots: Arc<Semaphore>,
    limit: usize,
    timeout: Duration,
}

/// A running push's slot; the next queued push starts when it is dropped.
#[derive(Debug)]
pub struct PushSlot {
    _permit: OwnedSemaphorePermit,
    _running: InFlight,
}

/// A push waited longer than the queue timeout.
#[derive(Debug, thiserror::Error)]
#[error("server busy: the limit of {limit} concurrent pushes is reached, waited {waited_secs} s for a slot; try again later")]
pub struct QueueTimeout {
    /// The cap.
    pub limit: usize,
    /// Seconds waited.
    pub waited_secs: u64,
}

impl PushQueue {
    /// A queue letting `limit` pushes run at once (at least 1), each later one
    /// waiting at most `timeout`.
    pub fn new(limit: usize, timeout: Duration) -> Self {
        let limit = limit.max(1);
        PushQueue {
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            timeout,
        }
    }

    /// The cap.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Waits for a slot, recording the wait in `gitstow_push_queue_wait_seconds`
    /// and the waiting pushes in `gitstow_pushes_queued`.
    pub async fn admit(&self) -> Result<PushSlot, QueueTimeout> {
        let started = Instant::now();
        let waiting = InFlight::new(m::PUSHES_QUEUED);
        let acquired = tokio::time::timeout(self.timeout, self.slots.clone().acquire_owned()).await;
        drop(waiting);
        let waited = started.elapsed();
        metrics::histogram!(m::PUSH_QUEUE_WAIT).record(waited.as_secs_f64());
        match acquired {
            Ok(Ok(permit)) => Ok(PushSlot {
                _permit: permit,
                _running: InFlight::new(m::PUSHES_IN_FLIGHT),
            }),
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => {
                metrics::counter!(m::PUSH_QUEUE_TIMEOUTS).increment(1);
                Err(QueueTimeout {
                    limit: self.limit,
                    waited_secs: waited.as_secs(),
                })
            }
        }
    }
}

/// The default cap: one push per core, and no more than
/// [`MEMORY_PER_PUSH`] each of `mem_total_bytes`; at least 1.
pub fn default_limit(cores: usize, mem_total_bytes: Option<u64>) -> usize {
    let by_memory = mem_total_bytes
        .map(|m| (m / MEMORY_PER_PUSH) as usize)
        .unwrap_or(usize::MAX);
    cores.min(by_memory).max(1)
}

/// `MemTotal` of `/proc/meminfo` (proc(5)) in bytes.
pub fn mem_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_limit_follows_cores_and_memory() {
        assert_eq!(default_limit(8, Some(64 << 30)), 8);
        assert_eq!(default_limit(8, Some(1 << 30)), 2);
        assert_eq!(default_limit(8, Some(100 << 20)), 1);
        assert_eq!(default_limit(0, None), 1);
        assert_eq!(default_limit(4, None), 4);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn later_pushes_wait_and_time_out() {
        let q = PushQueue::new(1, Duration::from_millis(50));
        let first = q.admit().await.expect("first slot");
        let err = q.admit().await.expect_err("queue full");
        assert_eq!(err.limit, 1);
        assert!(err
            .to_string()
            .starts_with("server busy: the limit of 1 concurrent pushes is reached"));
        drop(first);
        q.admit().await.expect("slot freed");
    }
}
