//! What both transports ask of a client's request while they read it: how
//! fast it must arrive ([`Pace`], `--idle-timeout` and `--min-body-rate`)
//! and how large it may be ([`Limits`], `--max-pack-size` and the fetch
//! request's bound), one value for HTTP and SSH. A client that trickles
//! must not hold a connection, a spool and a file forever.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How fast a request must arrive: some bytes at least every `idle`, and,
/// once the request has taken `idle` too, at least `min_rate` bytes/s on
/// average since it began. Bytes are counted as received (before any
/// decoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// Longest silence between reads, and the time before the rate counts.
    pub idle: Duration,
    /// Bytes per second on average; 0: no minimum.
    pub min_rate: u64,
}

/// The bounds of a request, whatever the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest push (commands, options and pack), bytes (`--max-pack-size`).
    pub max_push_bytes: u64,
    /// Largest upload-pack request (a v2 command, a v0 want list), bytes.
    pub max_fetch_request_bytes: u64,
    /// How fast a request must arrive.
    pub pace: Pace,
}

/// Why a request was given up: its client was too slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Slow {
    /// Nothing arrived for [`Pace::idle`].
    #[error("no data from the client for {} s", .0.as_secs())]
    Idle(Duration),
    /// The average fell below [`Pace::min_rate`] bytes/s.
    #[error("the request arrives slower than {0} bytes/s")]
    BelowRate(u64),
}

/// A request's reading against its [`Pace`]: one per request, fed each
/// read's size.
#[derive(Debug)]
pub struct Paced {
    pace: Pace,
    started: Instant,
    received: u64,
}

impl Paced {
    /// A request that starts now.
    pub fn new(pace: Pace) -> Self {
        Paced {
            pace,
            started: Instant::now(),
            received: 0,
        }
    }

    /// The instant after which, with no more bytes, the average falls below
    /// the minimum rate (never before `idle` has passed).
    fn rate_deadline(&self) -> Option<Instant> {
        (self.pace.min_rate > 0).then(|| {
            let earned = Duration::from_secs_f64(self.received as f64 / self.pace.min_rate as f64);
            self.started + earned.max(self.pace.idle)
        })
    }

    /// Waits for `read` (the next read of the request) while the pace
    /// allows; then count what it read with [`Paced::received`].
    ///
    /// # Errors
    /// [`Slow`] when the silence or the average passes its bound first.
    pub async fn wait<F: Future>(&mut self, read: F) -> Result<F::Output, Slow> {
        let idle_deadline = Instant::now() + self.pace.idle;
        let rate_deadline = self.rate_deadline();
        let deadline = rate_deadline.map_or(idle_deadline, |r| r.min(idle_deadline));
        tokio::time::timeout_at(deadline, read).await.map_err(|_| {
            if rate_deadline.is_some_and(|r| r <= idle_deadline) {
                Slow::BelowRate(self.pace.min_rate)
            } else {
                Slow::Idle(self.pace.idle)
            }
        })
    }

    /// Counts `bytes` more received.
    pub fn received(&mut self, bytes: u64) {
        self.received += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pace(idle_secs: u64, min_rate: u64) -> Pace {
        Pace {
            idle: Duration::from_secs(idle_secs),
            min_rate,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn silence_is_bounded_by_idle() {
        let mut paced = Paced::new(pace(10, 0));
        let never = std::future::pending::<()>();
        assert_eq!(
            paced.wait(never).await,
            Err(Slow::Idle(Duration::from_secs(10)))
        );
        assert_eq!(paced.wait(async { 7 }).await, Ok(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_bounded_by_the_rate_once_idle_has_passed() {
        let mut paced = Paced::new(pace(10, 100));
        // 500 bytes at once earn 5 s: less than idle, so idle counts first.
        paced.received(500);
        let started = Instant::now();
        let slow = paced.wait(std::future::pending::<()>()).await;
        assert_eq!(slow, Err(Slow::BelowRate(100)));
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        // A byte every 9 s never trips idle, but the average does.
        let mut paced = Paced::new(pace(10, 100));
        let mut waited = Duration::ZERO;
        let outcome = loop {
            let step = tokio::time::sleep(Duration::from_secs(9));
            match paced.wait(step).await {
                Ok(()) => {
                    paced.received(1);
                    waited += Duration::from_secs(9);
                }
                Err(e) => break e,
            }
        };
        assert_eq!(outcome, Slow::BelowRate(100));
        assert!(waited <= Duration::from_secs(10), "{waited:?}");
        assert_eq!(
            outcome.to_string(),
            "the request arrives slower than 100 bytes/s"
        );
    }
}
