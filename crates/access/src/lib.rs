//! Access control: who may read, push to or administer which repository.
//!
//! Everything lives in one store-wide object, the access document
//! ([`AccessDoc`], key [`ACCESS_KEY`]), so every instance serving a bucket
//! decides alike without a database: tokens (each stored only as the
//! SHA-256 of its secret, with a name, an expiry and grants), and the
//! repository patterns anonymous clients may read. The document is changed
//! only by a conditional PUT on its ETag ([`update`]), as a repository's
//! state is, so two admin commands at once never lose each other's change.
//!
//! A request's token is found by hashing the secret it presents and
//! comparing the hash with every stored one in constant time
//! ([`AccessDoc::authenticate`]); the decision is [`AccessDoc::decide`].
//! An SSH key presents a token ([`ssh_key`]): the SSH server finds the
//! token by the verified key's fingerprint.

#![forbid(unsafe_code)]

mod document;
mod level;
mod pattern;
pub mod ssh_key;
mod token;

pub use document::{
    check_hidden_prefix, check_ref_pattern, load, parse, update, AccessDoc, Decision, Grant,
    HiddenRefs, Protection, Rejected, StoredToken, Webhook, ACCESS_KEY, DEFAULT_PROTECTED,
};
pub use level::Level;
pub use pattern::RepoPattern;
pub use ssh_key::{parse_public_key, ParsedKey, StoredKey};
pub use token::{hash_secret, new_secret, SECRET_PREFIX};

/// Errors of the access crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed. Not `transparent`: the store's error stays in the
    /// chain, where `gitstow_store::is_unavailable` and `is_out_of_space`
    /// look for it.
    #[error("{0}")]
    Store(#[from] gitstow_store::Error),
    /// The access document does not parse.
    #[error("the access document is corrupt: {0}")]
    Corrupt(String),
    /// An argument is invalid (a pattern, a level, a grant, a name).
    #[error("{0}")]
    Invalid(String),
    /// The document kept changing under a conditional update.
    #[error("the access document changed {0} times during the update; try again")]
    Contended(u32),
}

/// Results of the access crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
