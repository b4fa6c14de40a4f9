//! Events (a push that landed, a mirror that paused) and their signatures.
//!
//! A receiver gets `POST` with `Content-Type: application/json`, the body a
//! [`PushEvent`], and these headers:
//! - `X-Gitstow-Event: push` (or `mirror_paused`, the event's `event`);
//! - `X-Gitstow-Delivery: <event id>` (the same on every retry: a receiver
//!   that has seen an id may drop the repeat, as delivery is at least once);
//! - `X-Gitstow-Signature-256: sha256=<hex>`: HMAC-SHA256 of the body's
//!   bytes keyed with the webhook's secret, as GitHub signs
//!   (`X-Hub-Signature-256`). Compare it in constant time.
//!
//! A `2xx` answer within the timeout is a delivery; anything else is
//! retried (see [`crate::deliver`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "X-Gitstow-Signature-256";

/// One ref update as events and callouts give it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RefUpdateJson {
    /// Full ref name.
    #[serde(rename = "ref")]
    pub name: String,
    /// Its value before the push (40 zeros: created).
    pub old: String,
    /// Its value after the push (40 zeros: deleted).
    pub new: String,
}

impl RefUpdateJson {
    /// The JSON form of `u`.
    pub fn of(u: &gitstow_receive::hooks::RefUpdate) -> Self {
        RefUpdateJson {
            name: u.name.clone(),
            old: u.old.to_string(),
            new: u.new.to_string(),
        }
    }
}

/// Most bytes of ref names an event lists (with 100 bytes counted for each
/// update's two ids and framing): a push of more updates lists the first
/// ones within this and counts the rest in
/// [`PushEvent::ref_updates_omitted`], as hosted services cap what one
/// event carries (GitHub lists 20 commits; GitLab sends no per-branch
/// detail beyond 3 branches). Bounds every outbox entry and every delivery.
pub const MAX_EVENT_UPDATE_BYTES: usize = 256 << 10;

/// Most bytes of push options an event carries (what a push may send:
/// [`gitstow_protocol::MAX_PUSH_OPTION_BYTES`]); options beyond are left out.
pub const MAX_EVENT_OPTION_BYTES: usize = gitstow_protocol::MAX_PUSH_OPTION_BYTES;

/// The largest outbox entry a deliverer reads: an entry holds one event of
/// at most [`MAX_EVENT_UPDATE_BYTES`] of updates and
/// [`MAX_EVENT_OPTION_BYTES`] of options, plus its deliveries. A larger one
/// (written by an older version) is dropped unread.
pub const MAX_ENTRY_BYTES: u64 = 1 << 20;

/// The updates an event lists for `updates`, within
/// [`MAX_EVENT_UPDATE_BYTES`], and how many it leaves out.
pub fn bounded_updates(
    updates: &[gitstow_receive::hooks::RefUpdate],
) -> (Vec<RefUpdateJson>, usize) {
    let mut bytes = 0usize;
    let mut listed = Vec::new();
    for u in updates {
        bytes += u.name.len() + 100;
        if bytes > MAX_EVENT_UPDATE_BYTES {
            break;
        }
        listed.push(RefUpdateJson::of(u));
    }
    let omitted = updates.len() - listed.len();
    (listed, omitted)
}

/// The push options an event carries: those within
/// [`MAX_EVENT_OPTION_BYTES`], in order.
pub fn bounded_options(options: &[String]) -> Vec<String> {
    let mut bytes = 0usize;
    options
        .iter()
        .take_while(|o| {
            bytes += o.len();
            bytes <= MAX_EVENT_OPTION_BYTES
        })
        .cloned()
        .collect()
}

/// The mirror an event is about (`mirror_paused`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MirrorJson {
    /// `pull` or `push`.
    pub direction: String,
    /// The upstream's or the remote's URL (it holds no credentials).
    pub url: String,
    /// Why it paused: the failures in a row and the last one's message.
    pub paused: String,
    /// Failed syncs in a row.
    pub failures: u32,
}

/// The event kinds: a push that landed.
pub const EVENT_PUSH: &str = "push";

/// The event kinds: a mirror paused after permanent failures, until
/// `gitstow mirror resume` (the event's `mirror` says which and why; it has
/// no ref updates).
pub const EVENT_MIRROR_PAUSED: &str = "mirror_paused";

/// An event as webhooks receive it (JSON): a push that landed ([`EVENT_PUSH`]),
/// or a mirror that paused ([`EVENT_MIRROR_PAUSED`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PushEvent {
    /// Unique id of the event (32 hex digits), also in `X-Gitstow-Delivery`.
    pub id: String,
    /// [`EVENT_PUSH`] or [`EVENT_MIRROR_PAUSED`], also in `X-Gitstow-Event`.
    pub event: String,
    /// `org/project`.
    pub repository: String,
    /// The name of the token that pushed; `null` without access control.
    pub pusher: Option<String>,
    /// The updates that landed, in the client's order (the first ones, up
    /// to [`MAX_EVENT_UPDATE_BYTES`]).
    pub ref_updates: Vec<RefUpdateJson>,
    /// How many more updates landed than `ref_updates` lists (absent when
    /// none): a receiver that needs them reads the refs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ref_updates_omitted: usize,
    /// `git push -o` values, in order.
    pub push_options: Vec<String>,
    /// When the push was received, seconds since the Unix epoch.
    pub pushed_at: u64,
    /// True when the server that received the push stopped before it could
    /// record the outcome, and another worked out from the refs that these
    /// updates landed (see [`crate::deliver`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
    /// The mirror a [`EVENT_MIRROR_PAUSED`] event is about (absent from a
    /// push's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<MirrorJson>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `sha256=<hex>`: the HMAC-SHA256 of `body` under `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Whether `header` is the signature of `body` under `secret` (constant
/// time): what a receiver does.
pub fn verify(secret: &[u8], body: &[u8], header: &str) -> bool {
    let Some(hex_sig) = header.strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&sig).is_ok()
}

/// Why a delivery did not count.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The receiver answered with a status other than `2xx`.
    #[error("HTTP {0}")]
    Status(u16),
    /// No answer (refused, timed out, TLS, …).
    #[error("{0}")]
    Transport(String),
}

/// POSTs `body` (an encoded [`PushEvent`] with id `id` and kind `event`)
/// to `url`, signed with `secret`.
pub fn post(
    agent: &ureq::Agent,
    url: &str,
    secret: &str,
    (id, event): (&str, &str),
    body: &[u8],
) -> Result<(), DeliveryError> {
    let response = agent
        .post(url)
        .header("content-type", "application/json")
        .header("x-gitstow-event", event)
        .header("x-gitstow-delivery", id)
        .header(SIGNATURE_HEADER, signature(secret.as_bytes(), body))
        .send(body)
        .map_err(|e| DeliveryError::Transport(e.to_string()))?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(DeliveryError::Status(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_the_hmac_sha256_test_vector() {
        // RFC 4231, test case 2.
        let sig = signature(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(verify(b"Jefe", b"what do ya want for nothing?", &sig));
        assert!(!verify(b"Jefe", b"what do ya want for nothing!", &sig));
        assert!(!verify(b"jefe", b"what do ya want for nothing?", &sig));
        assert!(!verify(b"Jefe", b"x", "sha1=00"));
    }

    #[test]
    fn events_are_bounded() {
        let update = |i: usize| gitstow_receive::hooks::RefUpdate {
            name: format!("refs/heads/{}-{i}", "n".repeat(4000)),
            old: gix_hash::ObjectId::null(gix_hash::Kind::Sha1),
            new: gix_hash::ObjectId::null(gix_hash::Kind::Sha1),
        };
        let updates: Vec<_> = (0..1000).map(update).collect();
        let (listed, omitted) = bounded_updates(&updates);
        assert!(!listed.is_empty() && omitted > 0);
        assert_eq!(listed.len() + omitted, 1000);
        let bytes: usize = listed.iter().map(|u| u.name.len() + 100).sum();
        assert!(bytes <= MAX_EVENT_UPDATE_BYTES);
        let (all, none) = bounded_updates(&updates[..3]);
        assert_eq!((all.len(), none), (3, 0));
        let options: Vec<String> = (0..100).map(|_| "o".repeat(1000)).collect();
        assert_eq!(
            bounded_options(&options).len(),
            MAX_EVENT_OPTION_BYTES / 1000
        );
    }
}
