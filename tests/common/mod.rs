//! Harness for the integration tests: a `gitstow serve` on a free port with a
//! store in a temp dir ([`Server`]), the real `git` in a clean environment
//! ([`git`], [`git_fail`]), a raw HTTP/1.1 client for requests git itself
//! never sends ([`http`]), and pkt-line / pack builders to make them.
//!
//! `GITSTOW_TEST_STORE=s3` runs every server on a fresh prefix of the S3
//! bucket named by `S3_ENDPOINT`, `S3_REGION`, `S3_ACCESS_KEY`,
//! `S3_SECRET_KEY` and `S3_BUCKET` (see `scripts/s3-radosgw.sh`); without
//! those variables such a run fails at once, it never falls back to disk.
//!
//! Setting `GITSTOW_TEST_CANONICAL=1` (or to the path of
//! `git-http-backend-server.py`) runs the same tests against canonical
//! `git http-backend` instead of gitstow: that is how the expected answers in
//! the assertions were learned, and how to check a test's own logic.
#![allow(dead_code, unused_imports)] // each test file uses its own subset

mod git;
mod http;
mod lfs;
mod maintain;
pub mod mirror;
mod pack;
mod pkt;
pub mod raw_pack;
pub mod raw_target;
mod receiver;
mod remote;
mod server;
mod ssh;

pub use git::*;
pub use http::*;
pub use lfs::*;
pub use maintain::*;
pub use pack::*;
pub use pkt::*;
pub use receiver::*;
pub use remote::*;
pub use server::*;
pub use ssh::*;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use flate2::write::ZlibEncoder;
use flate2::Compression;

/// The longest a wait bounded by a configured timeout may take in a test:
/// three times `configured`, plus 10 s for process start and scheduling on a
/// loaded 2-core machine. Tests check deadlines of configured values with
/// it and nothing else: how fast gitstow is belongs in `benches/`, with its
/// figures in `docs/benchmarks/` (issue 43).
pub fn deadline_for(configured: Duration) -> Duration {
    configured * 3 + Duration::from_secs(10)
}

/// How long a server gets to say it is listening.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// The line (prefix) `gitstow serve` prints on stdout once it accepts
/// connections; the port follows.
const LISTENING: &str = "gitstow listening on http://127.0.0.1:";
/// The same line when the server serves TLS (`--tls-cert`).
const LISTENING_TLS: &str = "gitstow listening on https://127.0.0.1:";
