//! The SSH transport (plan 0011): `git clone git@host:org/repo.git` and
//! `ssh://` URLs served by the same process, store, queues and access
//! control as smart HTTP.
//!
//! - [`host_key`]: the server's host keys, kept in the store so that every
//!   instance serving a bucket presents the same ones.
//! - [`listener`]: the russh listener: key authentication, `exec` requests,
//!   limits.
//! - [`command`]: the command of an `exec` request, as git sends it.
//! - [`git`]: git's commands over a channel, framed around the service
//!   layer (`gitstow_service`).
//! - [`request`]: the client's request read from a channel, bounded and
//!   spooled.
//! - [`io`]: from a channel to the blocking thread of a v0 negotiation.
//! - `lfs_transfer`: `git-lfs-transfer`, Git LFS over the channel itself.
//! - [`proxy`]: the PROXY protocol header a load balancer sends first.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod command;
pub mod git;
pub mod host_key;
pub mod io;
mod lfs_transfer;
pub mod listener;
pub mod proxy;
pub mod request;

pub use gitstow_service::Denied;
pub use host_key::{HostKeyError, HostKeys};
pub use listener::{serve, KeyAccess, SshConfig};
pub use proxy::ProxyFrom;
