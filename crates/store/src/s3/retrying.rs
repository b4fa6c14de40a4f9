//! How an [`S3Store`] request is repeated (see the store's docs, *Retries*):
//! the backoff loop every request goes through, and the errors it ends with.

use std::future::Future;

use crate::stats::Op;
use crate::{Error, Result};

use super::{Failure, S3Store};

impl S3Store {
    pub(super) fn backend_error(&self, op: Op, key: &str, message: String) -> Error {
        self.counters.error();
        Error::Backend {
            op: op.name(),
            key: key.to_owned(),
            message,
            unavailable: false,
        }
    }

    /// A backend error after transient failures used up the retries.
    pub(crate) fn unavailable_error(&self, op: Op, key: &str, message: String) -> Error {
        self.counters.error();
        Error::Backend {
            op: op.name(),
            key: key.to_owned(),
            message,
            unavailable: true,
        }
    }

    pub(super) fn lost(&self, key: &str) -> Error {
        self.counters.precondition_failed();
        Error::PreconditionFailed {
            key: key.to_owned(),
        }
    }

    /// Count a retry, log it and wait out the backoff before retry `retry`.
    pub(super) async fn pause(&self, op: Op, key: &str, retry: u32, message: &str) {
        self.counters.retry();
        let delay = self.backoff.delay(retry);
        tracing::warn!(
            op = op.name(),
            key,
            attempt = retry,
            ?delay,
            error = message,
            "S3 request failed; retrying"
        );
        tokio::time::sleep(delay).await;
    }

    /// Run `attempt` until it succeeds, fails for good, or the retry budget
    /// is spent. Each call of `attempt` is one request counted under `op`.
    pub(super) async fn retrying<T, F, Fut>(&self, op: Op, key: &str, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let mut n = 1;
        let started = std::time::Instant::now();
        loop {
            self.counters.request(op);
            match attempt().await {
                Ok(v) => return Ok(v),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Fatal(message)) => return Err(self.backend_error(op, key, message)),
                Err(Failure::Transient { message, .. }) => {
                    if n >= self.backoff.max_attempts {
                        let message = format!("{message} (gave up after {n} attempts)");
                        return Err(self.unavailable_error(op, key, message));
                    }
                    if started.elapsed() >= self.config.retry_deadline {
                        let message = format!(
                            "{message} (gave up after {n} attempts in {:.1} s, the retry deadline)",
                            started.elapsed().as_secs_f64()
                        );
                        return Err(self.unavailable_error(op, key, message));
                    }
                    self.pause(op, key, n, &message).await;
                    n += 1;
                }
            }
        }
    }
}
