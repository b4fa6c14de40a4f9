//! Mirrors (plan 0017): take a repository in from another git server.
//!
//! A **pull** ([`pull::pull`]) is a client fetch whose haves come from the
//! stored repository, so that only new objects move: the upstream's refs
//! (`ls-refs`, filtered by [`RefFilter`]), then one `fetch` of what changed
//! ([`upstream::Upstream`]), its pack spooled and handed with the ref
//! changes to receive-pack's ingest (`gitstow_receive::receive_pack`:
//! resolve once, thin bases from the store, object checks, containers),
//! so that every change lands in one compare-and-swap of the state or none
//! does. By default it is **safe**: a ref the upstream rewrote or deleted
//! keeps its old tip under [`BACKUP_PREFIX`] in the same transaction
//! (`exact` mode opts out).
//!
//! - [`upstream`]: the upstream over smart HTTP(S) or SSH (`ssh`),
//!   protocol v2.
//! - [`pull`]: one pull, and what it changed.
//! - [`push`]: one push to another server (a push mirror): the refs that
//!   differ from its advertisement, with explicit old values.
//! - [`lfs`]: the Git LFS objects a pull brings and a push hands on,
//!   through the other server's batch API.
//! - [`settings`]: a repository's stored pull and push mirrors
//!   (`<repo>.git/mirror`): their settings and run state (lease, failures,
//!   pause), changed by compare-and-swap.
//! - [`due`]: the store-wide list of mirrors and when each is next due
//!   (one GET per scheduler tick, no listing of repositories).
//! - [`schedule`]: a stored mirror's sync under its lease, from any
//!   instance or `gitstow mirror sync`.
//! - [`secret`]: credentials sealed with the operator's key (AES-256-GCM).
//! - [`trigger`]: an upstream's webhook (GitHub/Gitea signature, GitLab
//!   token) makes a mirror due at once.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod due;
pub mod lfs;
pub mod pull;
pub mod push;
pub mod schedule;
pub mod secret;
pub mod settings;
mod ssh;
pub mod trigger;
pub mod upstream;

pub use pull::{pull, Mode, PullOptions, Pulled, RefFilter};
pub use push::{push, PushError, PushOptions, Pushed};
pub use upstream::{Upstream, UpstreamError};

/// Where a safe pull keeps what the upstream rewrote or deleted:
/// `refs/mirror-backup/<UTC time>/<ref>`, hidden from fetches as
/// `--hide-refs` hides.
pub const BACKUP_PREFIX: &str = "refs/mirror-backup/";
