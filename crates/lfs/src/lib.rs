//! Git LFS for gitstow: the batch API, the transfers that go through
//! gitstow, and who may read which LFS object.
//!
//! Sources: git-lfs `docs/api/batch.md` (the batch request and answer),
//! `docs/api/basic-transfers.md` (upload, download and verify actions) and
//! `docs/spec.md` (an object's id is the SHA-256 of its bytes).
//!
//! - [`oid`]: the object id as the spec writes it (64 lowercase hex digits).
//! - [`api`]: the JSON of the batch and verify requests and answers.
//! - [`keys`]: where objects and ownership markers live in the store.
//! - [`grant`]: the short-lived token a transfer action carries instead of
//!   the user's credentials, scoped to one operation on one object of one
//!   repository.
//! - [`objects`]: objects kept once per store by oid, owned per repository:
//!   a repository reads an object only after it uploaded the bytes itself.
//! - [`batch`]: the answer to a batch request.
//! - [`locks`]: file locks, one document per repository.
//! - [`pointer`]: the pointer files a repository's blobs hold.
//!
//! The HTTP routes are the server's (`/<repo>.git/info/lfs/…`); this crate
//! knows neither HTTP nor git.

#![forbid(unsafe_code)]

pub mod api;
pub mod batch;
pub mod grant;
pub mod keys;
pub mod locks;
pub mod objects;
pub mod oid;
pub mod pointer;

pub use oid::Oid;
