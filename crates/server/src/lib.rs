//! The `gitstow` server: command line, HTTP routes, request bodies and the
//! bridge from async HTTP to the blocking receive-pack / upload-pack engines.
//!
//! - [`cli`]: `gitstow serve` flags and start-up.
//! - [`app`]: the smart-HTTP routes (gitprotocol-http(5)).
//! - [`body`]: request bodies (plain, chunked, gzip) with size bounds.
//! - [`response`]: streaming a blocking producer as the response body.
//! - [`repo_name`]: repository names in URLs.
#![deny(missing_docs)]

pub mod app;
pub mod body;
pub mod cli;
pub mod repo_name;
pub mod response;
