//! When and how long to wait before repeating a failed request.
//!
//! [`Backoff`] is capped exponential backoff with "equal jitter": the wait
//! before retry `n` (1-based) is uniformly random in `[d/2, d]` with
//! `d = min(max_delay, base_delay * 2^(n-1))`. The random half spreads out
//! clients that failed together (a throttled burst); the fixed half keeps a
//! retry from firing immediately.

use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Retry budget and pacing of one backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Attempts per request, the first one included (at least 1).
    pub max_attempts: u32,
    /// Upper bound of the first wait.
    pub base_delay: Duration,
    /// Upper bound of any wait.
    pub max_delay: Duration,
}

impl Backoff {
    /// The wait before retry number `retry` (1 for the second attempt).
    pub(crate) fn delay(&self, retry: u32) -> Duration {
        let exp = retry.saturating_sub(1).min(20);
        let ceiling = self
            .base_delay
            .saturating_mul(1 << exp)
            .min(self.max_delay)
            .as_micros() as u64;
        let half = ceiling / 2;
        Duration::from_micros(half + random_below(ceiling - half + 1))
    }
}

/// A pseudo-random number in `0..n` (`n > 0`): xorshift64*, seeded per
/// thread from the clock and the thread. Good enough for jitter.
fn random_below(n: u64) -> u64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(seed());
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    })
}

/// A fresh 128-bit id as 32 hex digits (random per process, thread and
/// call), e.g. to recognise one's own write after an ambiguous failure.
pub(crate) fn unique_id() -> String {
    format!(
        "{:016x}{:016x}",
        random_below(u64::MAX),
        random_below(u64::MAX)
    )
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // RandomState is randomly keyed per process; hashing the thread id
    // separates threads started in the same nanosecond.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(nanos);
    std::hash::Hash::hash(&std::thread::current().id(), &mut h);
    h.finish() | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_then_cap_and_stay_within_jitter_bounds() {
        let b = Backoff {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        for _ in 0..200 {
            for (retry, ceiling_ms) in [
                (1, 100),
                (2, 200),
                (3, 400),
                (4, 800),
                (5, 1000),
                (40, 1000),
            ] {
                let d = b.delay(retry);
                let ceiling = Duration::from_millis(ceiling_ms);
                assert!(d >= ceiling / 2 && d <= ceiling, "retry {retry}: {d:?}");
            }
        }
    }

    #[test]
    fn unique_ids_differ() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| unique_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| id.len() == 32));
    }

    #[test]
    fn jitter_varies() {
        let b = Backoff {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        let distinct: std::collections::HashSet<_> = (0..50).map(|_| b.delay(3)).collect();
        assert!(distinct.len() > 10);
    }
}
