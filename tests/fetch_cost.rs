//! What a fetch costs the server: an incremental fetch reads the new commits
//! and a short boundary, not the history behind the client's haves, and
//! sends the objects `git rev-list --objects new --not old` names, with
//! stored deltas against objects the client has sent as they are (a thin
//! pack), in protocol v2 and v0.

mod common;

use std::path::Path;

use common::*;

/// The last `upload-pack` log line that sent a pack.
fn last_fetch_line(logs: &str) -> &str {
    logs.lines()
        .rev()
        .find(|l| {
            l.contains("upload-pack") && l.contains("commits_read=") && l.contains(" objects=")
        })
        .unwrap_or_else(|| panic!("no upload-pack line with a pack in:\n{logs}"))
}

/// The number `name=` (or `name=Some(`) gives in a log line.
fn field(line: &str, name: &str) -> u64 {
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
}

/// commits_read, objects, thin_deltas and bytes of the last fetch.
fn last_fetch(logs: &str) -> (u64, u64, u64, u64) {
    let line = last_fetch_line(logs);
    (
        field(line, "commits_read"),
        field(line, "objects"),
        field(line, "thin_deltas"),
        field(line, "bytes"),
    )
}

/// Index searches per object lookup of the last fetch.
fn probes_per_lookup(logs: &str) -> f64 {
    let line = last_fetch_line(logs);
    let lookups = field(line, "lookups");
    assert!(lookups > 0, "{line}");
    field(line, "index_probes") as f64 / lookups as f64
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

/// After maintenance an object lookup costs about one index search, for a
/// clone that walks (the refs moved since the GC) and for an incremental
/// fetch, whereas before it the lookups of the same clone search many of the
/// 20 containers 20 pushes left.
#[test]
fn after_maintenance_a_lookup_is_about_one_index_search() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 13,
            commits: 220,
            branches: 1,
            tag_every: 0,
            ..Default::default()
        },
    );
    let url = server.url("lookups");
    for behind in (20..=210).rev().step_by(10) {
        git(
            &src,
            &[
                "push",
                "--quiet",
                &url,
                &format!("main~{behind}:refs/heads/main"),
            ],
        );
    }
    let clone = |dir: &str| {
        git(tmp.path(), &["clone", "--quiet", "--mirror", &url, dir]);
        fsck(&tmp.path().join(dir));
        probes_per_lookup(&server.logs())
    };
    let before = clone("before.git");
    let out = server.store().maintain(&["--repo", "lookups", "--gc"], &[]);
    assert_maintained(&out);
    // The refs move after the GC: the clone walks instead of copying.
    git(&src, &["push", "--quiet", &url, "main~10:refs/heads/main"]);
    let after = clone("after.git");
    let client = tmp.path().join("after.git");
    git(&src, &["push", "--quiet", &url, "main:refs/heads/main"]);
    git(&client, &["fetch", "--quiet", "origin"]);
    assert_eq!(
        git_out(&client, &["rev-parse", "main"]),
        git_out(&src, &["rev-parse", "main"])
    );
    let fetch = probes_per_lookup(&server.logs());
    eprintln!("index searches a lookup: clone over 20 containers {before:.2}, after GC: clone {after:.2}, fetch {fetch:.2}");
    assert!(after <= 1.2, "clone after GC: {after:.2} searches a lookup");
    assert!(fetch <= 1.5, "fetch after GC: {fetch:.2} searches a lookup");
}
