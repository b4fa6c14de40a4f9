//! Full disks: a small tmpfs under the local store, and one under the temp
//! directory (`--tmp-dir`, where pushes are spooled and staged). A push the
//! disk cannot hold is refused with git's `unpack` line and a reason that
//! names no server path; nothing of it is left behind; the repository stays
//! clonable and fsck-clean; and the server goes on serving, including
//! pushes once there is room again. A fetch whose request the temp
//! directory cannot hold gets an `ERR` line git shows.
//!
//! Mounting a tmpfs needs root (as CI runs): without it these tests fail,
//! saying so. The store is always the local one: an S3 bucket's space is
//! the S3 server's.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A tmpfs of `size` mounted at `dir` (created), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: PathBuf, size: &str) -> Tmpfs {
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(&dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "the full-disk tests mount a tmpfs and need root: mount said {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir)
    }

    /// Bytes free.
    fn free(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.0)
            .output()
            .expect("run df");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .expect("df's answer")
    }

    /// Fills the file system but for about `leave` bytes.
    fn fill(&self, leave: u64) -> PathBuf {
        let filler = self.0.join("filler");
        let len = self.free().saturating_sub(leave);
        std::fs::write(&filler, vec![0u8; len as usize]).expect("writing the filler");
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A client repository with a small history pushed to `url`; returns its
/// work tree.
fn pushed(tmp: &Path, url: &str) -> PathBuf {
    let work = tmp.join("work");
    init_repo(&work);
    for i in 0..3 {
        commit_files(
            &work,
            &[("a.txt", &format!("line {i}\n"))],
            &format!("c{i}"),
        );
    }
    git(&work, &["push", "--quiet", url, "main"]);
    work
}

/// Commits `bytes` of incompressible data as `big.bin`.
fn commit_big(work: &Path, bytes: usize, seed: u64) -> String {
    std::fs::write(work.join("big.bin"), noise(bytes, seed)).unwrap();
    git(work, &["add", "big.bin"]);
    git(work, &["commit", "--quiet", "-m", "big"]);
    git_out(work, &["rev-parse", "HEAD"])
}

/// The push of `work`'s main to `url` fails with git's report of an
/// unpack failure for the reason "server out of space"; returns stderr.
fn push_refused_for_space(work: &Path, url: &str, secrets: &[&Path]) -> String {
    let err = git_fail(work, &["push", url, "main"]);
    assert!(
        err.contains("remote unpack failed: server out of space, try again later"),
        "{err}"
    );
    assert!(err.contains("main -> main (unpacker error)"), "{err}");
    for path in secrets {
        assert!(
            !err.contains(path.to_str().unwrap()),
            "the client was told a server path: {err}"
        );
    }
    assert!(
        !err.contains("os error"),
        "an internal error reached the client: {err}"
    );
    err
}

/// Clones `url` afresh, checks it with fsck and returns `main`'s oid.
fn clone_main(tmp: &Path, url: &str, label: &str) -> String {
    let dir = tmp.join(label);
    git(
        tmp,
        &["clone", "--quiet", "--bare", url, dir.to_str().unwrap()],
    );
    fsck(&dir);
    git_out(&dir, &["rev-parse", "main"])
}

#[test]
fn a_full_store_refuses_the_push_in_gits_words_and_keeps_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(tmp.path().join("store"), "6m");
    let store = TestStore::Fs(disk.0.clone());
    let server = Server::start_on(Some(&store), &["--no-maintenance"], &[]);
    let url = server.url("full");
    let work = pushed(tmp.path(), &url);
    let before = ls_remote(&url);
    let free = disk.free();

    // 8 MiB that cannot be compressed into a 6 MiB disk.
    commit_big(&work, 8 << 20, 1);
    push_refused_for_space(&work, &url, &[&disk.0, tmp.path()]);
    assert_eq!(ls_remote(&url), before, "a ref moved");
    assert!(
        server.logs().contains("No space left on device"),
        "the log has the details"
    );

    // Nothing of the failed push stays: the space is back.
    let now = disk.free();
    assert!(
        now + (64 << 10) >= free,
        "the failed push left {} bytes in the store",
        free - now
    );
    let tip = git_out(&work, &["rev-parse", "main~1"]);
    assert_eq!(clone_main(tmp.path(), &url, "after-full"), tip);

    // Still serving: a small push lands.
    git(&work, &["reset", "--quiet", "--hard", "main~1"]);
    let small = commit_files(&work, &[("b.txt", "small\n")], "small");
    git(&work, &["push", "--quiet", &url, "main"]);
    assert_eq!(clone_main(tmp.path(), &url, "after-small"), small);
}

#[test]
fn a_full_temp_directory_refuses_pushes_and_fetches_in_gits_words() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(tmp.path().join("spool"), "4m");
    let server = Server::start_with(&["--no-maintenance", "--tmp-dir", disk.0.to_str().unwrap()]);
    let url = server.url("spool");
    let work = pushed(tmp.path(), &url);
    let before = ls_remote(&url);

    // A push larger than the temp directory fails while it is spooled.
    commit_big(&work, 6 << 20, 2);
    push_refused_for_space(&work, &url, &[&disk.0, tmp.path()]);
    assert_eq!(ls_remote(&url), before, "a ref moved");
    let tip = git_out(&work, &["rev-parse", "main~1"]);
    assert_eq!(clone_main(tmp.path(), &url, "after-push"), tip);

    // A fetch request longer than what is kept in memory (64 KiB) needs
    // the temp directory: with it full, git is told why.
    let filler = disk.fill(4 << 10);
    let want = format!("want {tip}");
    let body = v2_fetch(std::iter::repeat_n(want.as_str(), 2_000).chain(["done"]));
    let resp = post_upload_pack_v2(&server, "spool", &body);
    assert_eq!(resp.status, 200);
    let text = resp.text();
    assert!(
        text.get(4..)
            .is_some_and(|t| t.starts_with("ERR server out of space, try again later")),
        "{text}"
    );
    // A clone's small request still goes through.
    assert_eq!(clone_main(tmp.path(), &url, "while-full"), tip);
    std::fs::remove_file(filler).unwrap();

    // With room again, a push of what fits lands.
    git(&work, &["reset", "--quiet", "--hard", "main~1"]);
    let fits = commit_big(&work, 1 << 20, 3);
    git(&work, &["push", "--quiet", &url, "main"]);
    assert_eq!(clone_main(tmp.path(), &url, "after-room"), fits);
}
