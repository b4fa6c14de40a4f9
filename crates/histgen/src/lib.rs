//! Deterministic, realistic git histories for gitstow's tests and benches.
//!
//! A git server is only as good as the histories it has seen. This crate
//! writes one on demand: [`generate`] creates a bare repository and fills it
//! by piping a `git fast-import` stream into it, so the objects are made by
//! git itself and the whole run takes a few seconds even for thousands of
//! commits.
//!
//! The data flow is: [`Options`] (with a seed) → a model of each branch's
//! worktree (path → mode + content), evolved commit by commit by a seeded
//! PRNG → the changes between consecutive snapshots, written as a fast-import
//! stream → `git fast-import` in the new repository → a [`Summary`] of what
//! was made.
//!
//! The history contains what real repositories contain and what a server's
//! pack handling has to get right:
//!
//! - text files in nested directories that grow and change a few lines at a
//!   time (good deltas), including names with spaces and non-ASCII letters;
//! - renames (sometimes with an edit) and a few exact copies;
//! - binary files of pseudo-random bytes, some changed in a few places
//!   (binary deltas), one of exactly [`Options::large_blob_bytes`];
//! - executable files (mode `100755`), mode flips, symlinks (`120000`);
//! - several branches (`main`, `dev`, `feature/parser`, …) with real
//!   two-parent merges both ways, some resolving conflicts by choosing content;
//! - annotated tags (`v1.N`) and lightweight tags (`snapshot/N`).
//!
//! Identities and timestamps are fixed and increasing, so one seed gives one
//! history, byte for byte: the same object ids on every machine and run.
//!
//! ```no_run
//! let dir = std::path::Path::new("/tmp/history.git");
//! let summary = gitstow_histgen::generate(dir, &gitstow_histgen::Options {
//!     commits: 2_000,
//!     ..Default::default()
//! })?;
//! assert_eq!(summary.commits, 2_000);
//! # Ok::<(), std::io::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::io::{self, BufWriter, Read};
use std::path::Path;
use std::process::{Command, Stdio};

mod content;
mod fast_import;
mod history;
mod rng;
mod tree;

/// What to generate. Every `*_every` option counts commits: the event
/// happens on each commit whose index is a multiple of it; `0` means never.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Seeds the PRNG: the same options give the same history, byte for byte.
    pub seed: u64,
    /// Total number of commits, the root commit and merges included
    /// (`0` leaves the repository empty). Cost is about linear: a few
    /// seconds for 2,000.
    pub commits: usize,
    /// Number of branches, `main` included (`1`: only `main`, no merges).
    pub branches: usize,
    /// Number of tracked files the tree grows to (symlinks included); each
    /// text file stays below about 160 lines.
    pub files: usize,
    /// Every this many commits a binary file is added or slightly changed.
    pub binary_every: usize,
    /// Every this many commits a tag is made, annotated and lightweight in
    /// turn, on the commit just made.
    pub tag_every: usize,
    /// Every this many commits, a merge commit instead of an ordinary one
    /// (when some branch has something to merge).
    pub merge_every: usize,
    /// Every this many commits a file is renamed (and sometimes one copied).
    pub rename_every: usize,
    /// Size of the largest binary blob (the root commit has one of exactly
    /// this size); `0` means no binary files at all.
    pub large_blob_bytes: usize,
}

impl Default for Options {
    /// A small history: 200 commits over 4 branches and 40 files, a binary
    /// change every 10 commits, a tag every 20, a merge every 15, a rename
    /// every 12, binaries up to 32 KiB.
    fn default() -> Self {
        Options {
            seed: 1,
            commits: 200,
            branches: 4,
            files: 40,
            binary_every: 10,
            tag_every: 20,
            merge_every: 15,
            rename_every: 12,
            large_blob_bytes: 32 * 1024,
        }
    }
}

/// What [`generate`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Commits made, merges included; equals [`Options::commits`].
    pub commits: usize,
    /// Tags made (annotated and lightweight).
    pub tags: usize,
    /// Short names of the branches that exist (`main` first).
    pub branches: Vec<String>,
    /// Merge commits (two parents) among [`Summary::commits`].
    pub merges: usize,
    /// Renames made (a rename with a small edit counts).
    pub renames: usize,
}

/// Creates a bare repository at `dir` (`git init --bare -b main`) and fills
/// it by feeding a `git fast-import` stream; `HEAD` is `refs/heads/main`.
///
/// `dir` should not exist or be empty. Needs `git` (2.28 or later) on `PATH`.
///
/// # Errors
///
/// An I/O error when `git` cannot be run, or when `git init` or
/// `git fast-import` fails (its stderr is in the message).
pub fn generate(dir: &Path, opts: &Options) -> io::Result<Summary> {
    let init = Command::new("git")
        .args(["init", "--quiet", "--bare", "--initial-branch=main"])
        .arg(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::null())
        .output()?;
    if !init.status.success() {
        return Err(io::Error::other(format!(
            "git init --bare {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&init.stderr)
        )));
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let drain = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let stdin = child.stdin.take().expect("stdin is piped");
    let written =
        history::History::new(opts, BufWriter::with_capacity(1 << 20, stdin)).and_then(|h| h.run());
    // closing stdin (dropping the writer) lets fast-import finish
    let summary = written.map(|(w, summary)| {
        drop(w);
        summary
    });
    let status = child.wait()?;
    let err = drain.join().unwrap_or_default();
    if !status.success() {
        return Err(io::Error::other(format!(
            "git fast-import failed ({status}): {}",
            String::from_utf8_lossy(&err)
        )));
    }
    summary
}
