//! What a push calls out to, and what it announces.
//!
//! - [`pre_receive`]: the operator's pre-receive check, an executable run as
//!   git runs its pre-receive hook (`githooks(5)`) or an HTTP callout, both
//!   bounded by a timeout; either implements
//!   [`gitstow_receive::hooks::PreReceive`].
//! - [`webhook`]: push events, JSON signed with HMAC-SHA256 in
//!   `X-Gitstow-Signature-256: sha256=…` (as GitHub signs its webhooks).
//! - [`outbox`]: the record of each event in the store
//!   (`.gitstow/outbox/`), written before the state's compare-and-swap
//!   ([`gitstow_receive::hooks::Notify`]), so a crash after a push lands does
//!   not lose its event.
//! - [`deliver`]: the background worker that POSTs recorded events to the
//!   webhooks of the access document, at least once, retried with backoff.
#![deny(missing_docs)]

pub mod deliver;
pub mod outbox;
pub mod pre_receive;
pub mod webhook;

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A `ureq` agent that returns every status as a response, bounded by
/// `timeout` for the whole exchange.
pub(crate) fn agent(timeout: std::time::Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        // A redirect is an answer, not an acceptance: following one turns
        // the POST into a GET of a page (a login page) that says 200.
        .max_redirects(0)
        .user_agent(concat!("gitstow/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}
