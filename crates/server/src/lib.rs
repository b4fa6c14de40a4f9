//! The `gitstow` server: command line, HTTP routes, request bodies and the
//! bridge from async HTTP to the blocking receive-pack / upload-pack engines.
//!
//! - [`cli`]: `gitstow serve` flags and start-up.
//! - [`config_file`]: `serve --config FILE` (flags from TOML).
//! - [`listen`]: the accept loop: connection caps and header timeouts.
//! - [`app`]: the smart-HTTP routes (gitprotocol-http(5)).
//! - [`push`]: the receive-pack route.
//!
//! The work of a request (queues, upload-pack, receive-pack, hooks, the
//! access-log line) is the service layer's (`gitstow_service::Host`); the
//! routes read bodies and frame answers.
//! - [`operator`]: `/metrics`, `/debug/pprof/heap`.
//! - [`auth`]: tokens in requests, checked against the access document.
//! - [`ssh_access`]: SSH keys, mapped to tokens for `serve --ssh-listen`.
//! - [`body`]: request bodies (plain, chunked, gzip) with size bounds.
//! - [`response`]: streaming a blocking producer as the response body.
//! - [`repo_name`]: repository names in URLs.
//! - [`metrics`]: `/metrics` (Prometheus text).
//! - [`request_log`]: the access log, response counters, `/healthz` and `/readyz`.
//! - [`queue`], [`maintenance`]: the push and fetch concurrency caps and
//!   automatic maintenance, from the service layer (`gitstow-service`).
//! - [`maintain_cmd`]: `gitstow maintain`.
//! - [`token_cmd`]: `gitstow token` and `gitstow access`.
//! - [`webhook_cmd`]: `gitstow webhook`.
//! - [`repo_cmd`]: `gitstow repo` and `gitstow fsck`.
//! - [`alloc`]: the counting jemalloc allocator the binary installs.
//! - [`limits`]: process limits set at start (open files).
//! - [`leftovers`]: scratch directories and the sweep of crashed processes' leftovers.
#![deny(missing_docs)]

pub mod alloc;
pub mod app;
pub mod auth;
pub mod body;
pub mod cli;
pub mod config_file;
pub mod key_cmd;
pub mod leftovers;
pub mod lfs;
pub mod limits;
pub mod listen;
pub mod maintain_cmd;
pub mod metrics;
pub mod operator;
pub mod push;
pub mod repo_cmd;
pub mod repo_name;
pub mod request_log;
pub mod response;
pub mod serve_cmd;
pub mod serve_maintenance;
pub mod ssh_access;
pub mod tls;
pub mod token_cmd;
pub mod webhook_cmd;

pub use gitstow_service::{maintenance, queue};
