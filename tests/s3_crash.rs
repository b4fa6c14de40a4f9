//! SIGKILL the daemon at different points of a push, restart it on the same
//! S3 bucket, and check the repository: every ref resolves, the refs are the
//! old ones or the new ones (never a mix), and `git clone` + `git fsck --full`
//! pass. Runs against the S3 server of the `S3_*` variables.
//!
//! Two tests: kills at the named points around the commit (the fault
//! injector's `kill` and `kill-after`: each must land, and each has one
//! right outcome), and kills after a delay that moves through the push (a
//! sweep: each run must end old or new, whichever it is).

mod common;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use common::*;

const RUNS: u64 = 20;

/// Appends a commit that adds `bytes` of incompressible data.
fn big_commit(dir: &std::path::Path, name: &str, bytes: usize, seed: u64) {
    let data = noise(bytes, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    std::fs::File::create(dir.join(name))
        .unwrap()
        .write_all(&data)
        .unwrap();
    git(dir, &["add", name]);
    git(dir, &["commit", "--quiet", "-m", name]);
}

/// A generated history of 150 commits pushed to `repo`, cloned to
/// `tmp/w-<repo>`, and three commits of 2 MiB of noise and an annotated
/// tag `t-<repo>` made on top: returns the clone and main's old and new ids.
fn prepared(
    tmp: &std::path::Path,
    base: &std::path::Path,
    server: &Server,
    repo: &str,
    seed: u64,
) -> (std::path::PathBuf, String, String) {
    git(base, &["push", "--quiet", "--mirror", &server.url(repo)]);
    let work = tmp.join(format!("w-{repo}"));
    git(
        tmp,
        &[
            "clone",
            "--quiet",
            &server.url(repo),
            work.to_str().unwrap(),
        ],
    );
    let old_main = git_out(&work, &["rev-parse", "HEAD"]);
    for k in 0..3 {
        big_commit(&work, &format!("blob{k}.bin"), 2 << 20, seed * 10 + k);
    }
    git(&work, &["tag", "-a", &format!("t-{repo}"), "-m", "tag"]);
    let new_main = git_out(&work, &["rev-parse", "HEAD"]);
    (work, old_main, new_main)
}

/// Starts `git push` of main, a new branch `extra` and the tag `t-<repo>`
/// to `url` (its stderr piped).
fn push_three_refs(work: &std::path::Path, url: &str, repo: &str) -> std::process::Child {
    git_cmd(work)
        .args([
            "push",
            "--quiet",
            url,
            "HEAD:refs/heads/main",
            "HEAD:refs/heads/extra",
            &format!("t-{repo}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether `repo` holds the new refs whole (main at `new_main`, `extra`
/// and the tag) or the old ones whole (main at `old_main`, no `extra`, no
/// tag); panics on anything else. True for the new ones.
fn landed_whole(url: &str, repo: &str, old_main: &str, new_main: &str, what: &str) -> bool {
    let refs = ls_remote(url);
    let main = refs
        .lines()
        .find(|l| l.ends_with("\trefs/heads/main"))
        .unwrap_or_else(|| panic!("{what}: main is gone:\n{refs}"));
    let has_extra = refs.contains("\trefs/heads/extra");
    let has_tag = refs.contains(&format!("\trefs/tags/t-{repo}"));
    if main.starts_with(new_main) {
        assert!(
            has_extra && has_tag,
            "{what}: main moved but the other refs did not:\n{refs}"
        );
        true
    } else {
        assert!(
            main.starts_with(old_main),
            "{what}: main is neither old nor new:\n{refs}"
        );
        assert!(!has_extra && !has_tag, "{what}: half-applied push:\n{refs}");
        false
    }
}

/// A mirror clone and a clone of `url` pass `git fsck --full`.
fn clones_sound(tmp: &std::path::Path, url: &str, name: &str) {
    mirror_checked(url, tmp, &format!("m-{name}.git"));
    let clone = tmp.join(format!("c-{name}"));
    git(tmp, &["clone", "--quiet", url, clone.to_str().unwrap()]);
    git(&clone, &["fsck", "--full"]);
}

/// The daemon kills itself at each point around the commit of a push:
/// before its first container upload, after it, just before the state's
/// compare-and-swap and just after it. Each kill must land there (the
/// daemon dies of SIGKILL; a point the push never reaches fails the test),
/// and each has one right outcome: the old refs before the swap, the new
/// ones after it; git is told `ok` in neither case.
#[test]
fn pushes_killed_around_the_commit_point() {
    let store = TestStore::s3();
    let server = Server::start_on(Some(&store), &["--no-maintenance"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.git");
    histgen(
        &base,
        &gitstow_histgen::Options {
            seed: 22,
            commits: 150,
            ..Default::default()
        },
    );
    let points = [
        ("put_file:{repo}.git/containers/:kill:1", false),
        ("put_file:{repo}.git/containers/:kill-after:1", false),
        ("put:{repo}.git/state:kill:1", false),
        ("put:{repo}.git/state:kill-after:1", true),
    ];
    for (n, (point, lands)) in points.into_iter().enumerate() {
        let repo = format!("point{n}");
        let point = point.replace("{repo}", &repo);
        let (work, old_main, new_main) = prepared(tmp.path(), &base, &server, &repo, n as u64);
        let mut faulty = Server::start_on(
            Some(&store),
            &["--no-maintenance"],
            &[("GITSTOW_FAULTS", point.as_str())],
        );
        let push = push_three_refs(&work, &faulty.url(&repo), &repo)
            .wait_with_output()
            .unwrap();
        let status = faulty.terminate(std::time::Duration::from_secs(30));
        assert_eq!(
            status.and_then(|s| s.signal()),
            Some(9),
            "{point}: the push never reached it (the daemon was not killed there)"
        );
        assert!(
            !push.status.success(),
            "{point}: git was told the push succeeded"
        );
        let url = server.url(&repo);
        assert_eq!(
            landed_whole(&url, &repo, &old_main, &new_main, &point),
            lands,
            "{point}: the refs are the {} ones",
            if lands { "old" } else { "new" }
        );
        clones_sound(tmp.path(), &url, &repo);
    }
}

#[test]
fn killed_pushes_leave_consistent_repositories() {
    let store = TestStore::s3();
    let mut server = Server::start_on(Some(&store), &[], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.git");
    histgen(
        &base,
        &gitstow_histgen::Options {
            seed: 21,
            commits: 150,
            ..Default::default()
        },
    );
    let mut outcomes = (0, 0); // (old state kept, new state landed)
    for run in 0..RUNS {
        let repo = format!("crash{run}");
        let (work, old_main, new_main) = prepared(tmp.path(), &base, &server, &repo, run);
        // Start the push, kill the daemon after a delay that moves through the push.
        let mut push = push_three_refs(&work, &server.url(&repo), &repo);
        std::thread::sleep(Duration::from_millis(run * 50));
        server.kill();
        let pushed = push.wait().unwrap().success();
        server.start_again();

        let url = server.url(&repo);
        if landed_whole(&url, &repo, &old_main, &new_main, &format!("run {run}")) {
            outcomes.1 += 1;
        } else {
            assert!(
                !pushed,
                "run {run}: git reported success but nothing landed"
            );
            outcomes.0 += 1;
        }
        clones_sound(tmp.path(), &url, &repo);
    }
    println!(
        "{RUNS} killed pushes: {} left the old state, {} landed whole, 0 half-applied",
        outcomes.0, outcomes.1
    );
}
