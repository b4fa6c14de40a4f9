//! The concurrency caps of pushes (`--max-concurrent-pushes`) and fetches
//! (`--max-concurrent-fetches`): at most `limit` requests of a kind run at
//! once; later ones wait in a FIFO queue (tokio's fair semaphore) for up to
//! `timeout`, then are refused with "server busy", so the daemon's memory
//! stays within what the caps allow however many clients come at once. A
//! push spools its body before it queues (to a temp file, not memory); a
//! fetch reads its body before it queues, at most 64 KiB of it in memory
//! (the rest in a temp file), so a trickling client holds no slot and a
//! waiting fetch little memory.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::{self as m, InFlight};

/// Memory one running push is budgeted, for the default limit (bytes).
pub const MEMORY_PER_PUSH: u64 = 512 << 20;

/// Memory one running fetch is budgeted, for the default limit (bytes): its
/// request (at most 64 MiB), the walk and the delta-base cache.
pub const MEMORY_PER_FETCH: u64 = 256 << 20;

/// What a queue admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// receive-pack requests.
    Push,
    /// upload-pack requests (v2 `ls-refs` and `fetch`, v0 negotiation).
    Fetch,
}

impl Work {
    /// The plural noun of the refusal message.
    fn noun(self) -> &'static str {
        match self {
            Work::Push => "pushes",
            Work::Fetch => "fetches",
        }
    }

    /// (queued gauge, running gauge, wait histogram, timeout counter).
    fn metrics(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Work::Push => (
                m::PUSHES_QUEUED,
                m::PUSHES_IN_FLIGHT,
                m::PUSH_QUEUE_WAIT,
                m::PUSH_QUEUE_TIMEOUTS,
            ),
            Work::Fetch => (
                m::FETCHES_QUEUED,
                m::FETCHES_IN_FLIGHT,
                m::FETCH_QUEUE_WAIT,
                m::FETCH_QUEUE_TIMEOUTS,
            ),
        }
    }
}

/// The queue of one kind of work.
#[derive(Debug)]
pub struct WorkQueue {
    work: Work,
    slots: Arc<Semaphore>,
    limit: usize,
    timeout: Duration,
    idle: Option<Arc<WhenIdle>>,
}

/// A running request's slot; the next queued one starts when it is dropped.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    _running: InFlight,
    idle: Option<Arc<WhenIdle>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(idle) = &self.idle {
            idle.leave();
        }
    }
}

/// An action run each time the last running request of the queues that
/// share it ends (the server's: releasing the index cache's mapped pages,
/// [`gitstow_odb::IndexCache::release_pages`]).
pub struct WhenIdle {
    running: AtomicUsize,
    action: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for WhenIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WhenIdle")
            .field("running", &self.running.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl WhenIdle {
    /// `action`, run when the running count returns to zero.
    pub fn new(action: impl Fn() + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(WhenIdle {
            running: AtomicUsize::new(0),
            action: Box::new(action),
        })
    }

    fn enter(&self) {
        self.running.fetch_add(1, Ordering::AcqRel);
    }

    fn leave(&self) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            (self.action)();
        }
    }
}

/// A request waited longer than the queue timeout.
#[derive(Debug, thiserror::Error)]
#[error("server busy: the limit of {limit} concurrent {noun} is reached, waited {waited_secs} s for a slot; try again later")]
pub struct QueueTimeout {
    /// The cap.
    pub limit: usize,
    /// "pushes" or "fetches".
    pub noun: &'static str,
    /// Seconds waited.
    pub waited_secs: u64,
}

impl WorkQueue {
    /// A queue letting `limit` requests of `work` run at once (at least 1),
    /// each later one waiting at most `timeout`.
    pub fn new(work: Work, limit: usize, timeout: Duration) -> Self {
        let limit = limit.max(1);
        WorkQueue {
            work,
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            timeout,
            idle: None,
        }
    }

    /// This queue, its slots counted in `idle` (shared with other queues).
    pub fn with_idle(mut self, idle: Arc<WhenIdle>) -> Self {
        self.idle = Some(idle);
        self
    }

    /// The cap.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Waits for a slot, recording the wait (`gitstow_push_queue_wait_seconds`,
    /// `gitstow_fetch_queue_wait_seconds`) and the requests waiting
    /// (`gitstow_pushes_queued`, `gitstow_fetches_queued`).
    pub async fn admit(&self) -> Result<Slot, QueueTimeout> {
        let (queued, running, wait, timeouts) = self.work.metrics();
        let started = Instant::now();
        let waiting = InFlight::new(queued);
        let acquired = tokio::time::timeout(self.timeout, self.slots.clone().acquire_owned()).await;
        drop(waiting);
        let waited = started.elapsed();
        metrics::histogram!(wait).record(waited.as_secs_f64());
        match acquired {
            Ok(Ok(permit)) => {
                if let Some(idle) = &self.idle {
                    idle.enter();
                }
                Ok(Slot {
                    _permit: permit,
                    _running: InFlight::new(running),
                    idle: self.idle.clone(),
                })
            }
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => {
                metrics::counter!(timeouts).increment(1);
                Err(QueueTimeout {
                    limit: self.limit,
                    noun: self.work.noun(),
                    waited_secs: waited.as_secs(),
                })
            }
        }
    }
}

/// The default push cap: one push per core, and no more than
/// [`MEMORY_PER_PUSH`] each of `mem_total_bytes`; at least 1.
pub fn default_limit(cores: usize, mem_total_bytes: Option<u64>) -> usize {
    capped(cores, MEMORY_PER_PUSH, mem_total_bytes)
}

/// The default fetch cap: two fetches per core (a fetch waits on the store
/// part of its time), and no more than [`MEMORY_PER_FETCH`] each of a
/// quarter of `mem_total_bytes` (the rest is for pushes and caches); at
/// least 1.
pub fn default_fetch_limit(cores: usize, mem_total_bytes: Option<u64>) -> usize {
    capped(2 * cores, MEMORY_PER_FETCH, mem_total_bytes.map(|m| m / 4))
}

fn capped(by_cores: usize, each: u64, mem_bytes: Option<u64>) -> usize {
    let by_memory = mem_bytes.map(|m| (m / each) as usize).unwrap_or(usize::MAX);
    by_cores.min(by_memory).max(1)
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
        assert_eq!(default_fetch_limit(2, Some(24 << 30)), 4);
        assert_eq!(default_fetch_limit(8, Some(2 << 30)), 2);
        assert_eq!(default_fetch_limit(8, Some(100 << 20)), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_idle_action_runs_when_the_last_request_of_all_queues_ends() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let idle = WhenIdle::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let t = Duration::from_secs(1);
        let pushes = WorkQueue::new(Work::Push, 2, t).with_idle(idle.clone());
        let fetches = WorkQueue::new(Work::Fetch, 2, t).with_idle(idle);
        let push = pushes.admit().await.unwrap();
        let fetch = fetches.admit().await.unwrap();
        drop(push);
        assert_eq!(runs.load(Ordering::SeqCst), 0, "a fetch still runs");
        drop(fetch);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        drop(fetches.admit().await.unwrap());
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn later_pushes_wait_and_time_out() {
        let q = WorkQueue::new(Work::Push, 1, Duration::from_millis(50));
        let first = q.admit().await.expect("first slot");
        let err = q.admit().await.expect_err("queue full");
        assert_eq!(err.limit, 1);
        assert!(err
            .to_string()
            .starts_with("server busy: the limit of 1 concurrent pushes is reached"));
        drop(first);
        q.admit().await.expect("slot freed");
        let f = WorkQueue::new(Work::Fetch, 1, Duration::from_millis(10));
        let _held = f.admit().await.expect("first slot");
        let err = f.admit().await.expect_err("queue full");
        assert!(err
            .to_string()
            .starts_with("server busy: the limit of 1 concurrent fetches is reached"));
    }
}
