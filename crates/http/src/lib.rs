//! The smart-HTTP transport (gitprotocol-http(5)): routes, request bodies,
//! the Git LFS endpoints, TLS, the operator endpoints, and the bridge from
//! async HTTP to the service's blocking receive-pack / upload-pack. The
//! binary (`src/` at the workspace's top) parses the flags and starts this
//! transport beside its sibling, SSH (`gitstow-ssh`).
//!
//! - [`listen`]: the accept loop: connection caps and header timeouts.
//! - [`app`]: the smart-HTTP routes (gitprotocol-http(5)).
//! - [`push`]: the receive-pack route.
//! - [`mirror_hook`]: an upstream's webhook makes a pull mirror due.
//!
//! The work of a request (queues, upload-pack, receive-pack, hooks, the
//! access-log line) is the service layer's (`gitstow_service::Host`); the
//! routes read bodies and frame answers.
//! - [`operator`]: `/metrics`, `/debug/pprof/heap`.
//! - [`auth`]: tokens in requests, checked against the access document.
//! - [`body`]: request bodies (plain, chunked, gzip) with size bounds.
//! - [`response`]: streaming a blocking producer as the response body.
//! - [`repo_name`]: repository names in URLs.
//! - [`metrics`]: `/metrics` (Prometheus text).
//! - [`request_log`]: the access log, response counters, `/healthz` and `/readyz`.
//! - [`alloc`]: the counting jemalloc allocator the binary installs.
#![deny(missing_docs)]

pub mod alloc;
pub mod app;
pub mod auth;
pub mod body;
pub mod lfs;
pub mod listen;
pub mod metrics;
pub mod mirror_hook;
pub mod operator;
pub mod push;
pub mod repo_name;
pub mod request_log;
pub mod response;
pub mod tls;
