//! What crashed processes leave behind is removed, and only that: each
//! `gitstow serve` works in a scratch directory of its own under
//! `--tmp-dir` (and each open local store in one under `.gitstow-tmp/`),
//! `flock`ed while the process lives. A server starting sweeps the
//! directories of dead processes older than 10 minutes, in the temp
//! directory and in the store, and leaves a live instance's alone, however
//! old. A server killed with SIGKILL leaves its directories; the next start
//! removes them once they are old.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::*;

/// Sets `dir`'s modification time `age` in the past.
fn age(dir: &Path, age: Duration) {
    fs::File::open(dir)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

/// A directory as a dead process leaves it (nobody holds its lock) with a
/// spool of `bytes`, last modified `old` ago.
fn plant(dir: PathBuf, bytes: usize, old: Duration) -> PathBuf {
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("spool"), vec![1u8; bytes]).unwrap();
    age(&dir, old);
    dir
}

/// The entries of `dir` whose names start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    out.sort();
    out
}

#[test]
fn a_start_removes_dead_processes_leftovers_and_spares_a_live_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tmp.path().join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    let store = TestStore::Fs(tmp.path().join("store"));
    let root = tmp.path().join("store");
    fs::create_dir_all(&root).unwrap();
    let hours = Duration::from_secs(7200);
    let tmp_flag = scratch.to_str().unwrap().to_owned();
    let args = ["--tmp-dir", tmp_flag.as_str(), "--no-maintenance"];

    // A first server, then a crash: its directories stay.
    let mut crashed = Server::start_on(Some(&store), &args, &[]);
    let url = crashed.url("kept");
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "one");
    git(&work, &["push", "--quiet", &url, "HEAD:refs/heads/main"]);
    let crashed_dirs = named(&scratch, "gitstow-serve-");
    let crashed_store_dirs = named(&root.join(".gitstow-tmp"), "instance-");
    assert_eq!(crashed_dirs.len(), 1, "{crashed_dirs:?}");
    assert_eq!(crashed_store_dirs.len(), 1, "{crashed_store_dirs:?}");
    crashed.kill();
    assert!(crashed_dirs[0].exists() && crashed_store_dirs[0].exists());
    for d in crashed_dirs.iter().chain(&crashed_store_dirs) {
        age(d, hours);
    }

    // Planted: an old dead spool directory, a young one, an unlocked
    // directory of an older version, a store write's temp files, and
    // something that is not ours.
    let dead = plant(scratch.join("gitstow-serve-999999-dead"), 1 << 20, hours);
    let young = plant(
        scratch.join("gitstow-serve-999998-young"),
        10,
        Duration::ZERO,
    );
    let legacy = scratch.join("gitstow-maintain-cacheXYZ");
    fs::create_dir_all(&legacy).unwrap();
    fs::write(legacy.join("x.bin"), b"old").unwrap();
    age(&legacy, Duration::from_secs(2 * 86400));
    let legacy_put = root.join(".gitstow-tmp/put-OLD");
    fs::write(&legacy_put, b"partial").unwrap();
    fs::File::options()
        .write(true)
        .open(&legacy_put)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(2 * 86400))
        .unwrap();
    let dead_put = plant(root.join(".gitstow-tmp/instance-999999-dead"), 4096, hours);
    let foreign = plant(scratch.join("someone-else"), 10, hours);

    // A live instance whose directories are as old as the dead ones.
    let live = Server::start_on(Some(&store), &args, &[]);
    let live_dirs: Vec<PathBuf> = named(&scratch, "gitstow-serve-")
        .into_iter()
        .filter(|d| !crashed_dirs.contains(d) && *d != dead && *d != young)
        .collect();
    assert_eq!(live_dirs.len(), 1, "{live_dirs:?}");
    let live_store_dirs: Vec<PathBuf> = named(&root.join(".gitstow-tmp"), "instance-")
        .into_iter()
        .filter(|d| !crashed_store_dirs.contains(d) && *d != dead_put)
        .collect();
    assert_eq!(live_store_dirs.len(), 1, "{live_store_dirs:?}");
    assert!(
        !dead.exists() && !legacy.exists() && !dead_put.exists() && !legacy_put.exists(),
        "the live instance's start swept the dead ones"
    );
    for d in live_dirs.iter().chain(&live_store_dirs) {
        fs::write(d.join("in-flight"), b"mine").unwrap();
        age(d, hours);
    }

    // A third start sweeps again: the live instance's directories stay.
    let third = Server::start_on(Some(&store), &args, &[]);
    for d in live_dirs.iter().chain(&live_store_dirs) {
        assert!(d.join("in-flight").exists(), "{} was removed", d.display());
    }
    for d in crashed_dirs.iter().chain(&crashed_store_dirs) {
        assert!(!d.exists(), "{} was left", d.display());
    }
    assert!(
        young.exists(),
        "a young directory is left (its owner may be starting)"
    );
    assert!(foreign.exists(), "what is not gitstow's is left");
    let logs = third.logs() + &live.logs();
    assert!(
        logs.contains("removed the scratch directories of processes that died"),
        "{logs}"
    );
    assert!(
        logs.contains("removed the temp files of store writes by processes that died"),
        "{logs}"
    );

    // Both still serve, and nothing in the store was lost.
    let clone = tmp.path().join("clone");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            &live.url("kept"),
            clone.to_str().unwrap(),
        ],
    );
    fsck(&clone);
    git(
        &work,
        &[
            "push",
            "--quiet",
            &third.url("kept"),
            "HEAD:refs/heads/other",
        ],
    );
    assert!(ls_remote(&live.url("kept")).contains("refs/heads/other"));
}
