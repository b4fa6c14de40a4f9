//! SIGKILL the daemon at different points of a push, restart it on the same
//! S3 bucket, and check the repository: every ref resolves, the refs are the
//! old ones or the new ones (never a mix), and `git clone` + `git fsck --full`
//! pass. Runs against the S3 server of the `S3_*` variables.

mod common;

use std::io::Write;
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
        git(&base, &["push", "--quiet", "--mirror", &server.url(&repo)]);
        let work = tmp.path().join(format!("w{run}"));
        git(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                &server.url(&repo),
                work.to_str().unwrap(),
            ],
        );
        let old_main = git_out(&work, &["rev-parse", "HEAD"]);
        for k in 0..3 {
            big_commit(&work, &format!("blob{k}.bin"), 2 << 20, run * 10 + k);
        }
        git(&work, &["tag", "-a", &format!("t{run}"), "-m", "tag"]);
        let new_main = git_out(&work, &["rev-parse", "HEAD"]);

        // Start the push, kill the daemon after a delay that moves through the push.
        let mut push = git_cmd(&work)
            .args([
                "push",
                "--quiet",
                &server.url(&repo),
                "HEAD:refs/heads/main",
                "HEAD:refs/heads/extra",
                &format!("t{run}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(run * 50));
        server.kill();
        let pushed = push.wait().unwrap().success();
        server.start_again();

        let url = server.url(&repo);
        let refs = ls_remote(&url);
        let main = refs
            .lines()
            .find(|l| l.ends_with("\trefs/heads/main"))
            .unwrap_or_else(|| panic!("run {run}: main is gone:\n{refs}"));
        let has_extra = refs.contains("\trefs/heads/extra");
        let has_tag = refs.contains(&format!("\trefs/tags/t{run}"));
        if main.starts_with(&new_main) {
            assert!(
                has_extra && has_tag,
                "run {run}: main moved but the other refs did not:\n{refs}"
            );
            outcomes.1 += 1;
        } else {
            assert!(
                main.starts_with(&old_main),
                "run {run}: main is neither old nor new:\n{refs}"
            );
            assert!(
                !has_extra && !has_tag,
                "run {run}: half-applied push:\n{refs}"
            );
            assert!(
                !pushed,
                "run {run}: git reported success but nothing landed"
            );
            outcomes.0 += 1;
        }
        let mirror = tmp.path().join(format!("m{run}.git"));
        git(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                "--mirror",
                &url,
                mirror.to_str().unwrap(),
            ],
        );
        fsck(&mirror);
        let clone = tmp.path().join(format!("c{run}"));
        git(
            tmp.path(),
            &["clone", "--quiet", &url, clone.to_str().unwrap()],
        );
        git(&clone, &["fsck", "--full"]);
    }
    println!(
        "{RUNS} killed pushes: {} left the old state, {} landed whole, 0 half-applied",
        outcomes.0, outcomes.1
    );
}
