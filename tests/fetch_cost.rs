//! What a fetch costs the server: an incremental fetch reads the new commits
//! and a short boundary, not the history behind the client's haves, and
//! sends the objects `git rev-list --objects new --not old` names, with
//! stored deltas against objects the client has sent as they are (a thin
//! pack), in protocol v2 and v0.

mod common;

use std::path::Path;

use common::*;

/// The figures of the last `upload-pack` log line that sent a pack.
fn last_fetch(logs: &str) -> (u64, u64, u64, u64) {
    let line = logs
        .lines()
        .rev()
        .find(|l| {
            l.contains("upload-pack") && l.contains("commits_read=") && l.contains(" objects=")
        })
        .unwrap_or_else(|| panic!("no upload-pack line with a pack in:\n{logs}"));
    let field = |name: &str| -> u64 {
        let at = line
            .find(&format!(" {name}="))
            .unwrap_or_else(|| panic!("no {name} in {line}"));
        let rest = &line[at + name.len() + 2..];
        let rest = rest.strip_prefix("Some(").unwrap_or(rest);
        rest.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or_else(|_| panic!("{name} in {line}"))
    };
    (
        field("commits_read"),
        field("objects"),
        field("thin_deltas"),
        field("bytes"),
    )
}

fn rev_list_count(src: &Path, new: &str, old: &str) -> u64 {
    git_out(
        src,
        &["rev-list", "--objects", "--count", new, "--not", old],
    )
    .parse()
    .unwrap()
}

/// A linear history of 400 commits; the client is 20, then 300 commits behind.
fn scenario(version: &str) {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 11,
            commits: 400,
            branches: 1,
            files: 60,
            tag_every: 0,
            ..Default::default()
        },
    );
    let url = server.url("cost");
    let tip = git_out(&src, &["rev-parse", "main"]);
    for (behind, bound) in [(20usize, 40u64), (300, 340)] {
        let old = git_out(&src, &["rev-parse", &format!("main~{behind}")]);
        git(
            &src,
            &[
                "push",
                "--quiet",
                "--force",
                &url,
                &format!("{old}:refs/heads/main"),
            ],
        );
        let client = tmp.path().join(format!("client-{version}-{behind}"));
        git(
            tmp.path(),
            &[
                "-c",
                &format!("protocol.version={version}"),
                "clone",
                "--quiet",
                "--bare",
                &url,
                client.to_str().unwrap(),
            ],
        );
        git(&src, &["push", "--quiet", &url, "main:refs/heads/main"]);
        git(
            &client,
            &[
                "-c",
                &format!("protocol.version={version}"),
                "fetch",
                "--quiet",
                "origin",
                "+refs/heads/*:refs/heads/*",
            ],
        );
        let (commits_read, objects, thin, bytes) = last_fetch(&server.logs());
        eprintln!(
            "v{version}, {behind} behind: {commits_read} commits read, {objects} objects, {thin} thin deltas, {bytes} bytes"
        );
        assert!(
            commits_read <= bound,
            "v{version}, {behind} behind: the walk read {commits_read} commits (history: 400)"
        );
        // Trees are walked path by path against the client's (git's sparse
        // walk, its default): an object the client has only at another path
        // may be sent again, never one it lacks.
        let expected = rev_list_count(&src, &tip, &old);
        assert!(
            (expected..=expected + 2).contains(&objects),
            "v{version}, {behind} behind: {objects} objects sent, rev-list names {expected}"
        );
        assert!(
            thin > 0,
            "v{version}, {behind} behind: no thin deltas ({bytes} bytes)"
        );
        assert_eq!(git_out(&client, &["rev-parse", "main"]), tip);
        fsck(&client);
    }
}

#[test]
fn incremental_fetch_v2_reads_only_new_commits_and_is_thin() {
    scenario("2");
}

#[test]
fn incremental_fetch_v0_reads_only_new_commits_and_is_thin() {
    scenario("0");
}

/// A clone (no haves) never gets a thin pack: every delta's base is in it.
#[test]
fn a_clone_is_complete() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 12,
            commits: 150,
            ..Default::default()
        },
    );
    let url = server.url("complete");
    git(&src, &["push", "--quiet", "--mirror", &url]);
    // An update makes the repository not "closed": the clone takes the walk.
    let main = git_out(&src, &["rev-parse", "main~1"]);
    git(
        &src,
        &[
            "push",
            "--quiet",
            "--force",
            &url,
            &format!("{main}:refs/heads/main"),
        ],
    );
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "dst.git"],
    );
    let (_, _, thin, _) = last_fetch(&server.logs());
    assert_eq!(thin, 0);
    fsck(&tmp.path().join("dst.git"));
}
