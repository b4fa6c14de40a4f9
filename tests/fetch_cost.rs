//! What a fetch costs the server: an incremental fetch reads the new commits
//! and a short boundary, not the history behind the client's haves, and
//! sends the objects `git rev-list --objects new --not old` names, with
//! stored deltas against objects the client has sent as they are (a thin
//! pack), in protocol v2 and v0.

mod common;

use std::path::Path;

use common::*;

/// commits_read, objects, thin_deltas and bytes of the last fetch.
fn last_fetch(logs: &str) -> (u64, u64, u64, u64) {
    let line = &last_pack_line(logs);
    (
        log_field(line, "commits_read"),
        log_field(line, "objects"),
        log_field(line, "thin_deltas"),
        log_field(line, "bytes"),
    )
}

/// Index searches per object lookup of the last fetch.
fn probes_per_lookup(logs: &str) -> f64 {
    let line = &last_pack_line(logs);
    let lookups = log_field(line, "lookups");
    assert!(lookups > 0, "{line}");
    log_field(line, "index_probes") as f64 / lookups as f64
}

fn rev_list_count(src: &Path, new: &str, old: &str) -> u64 {
    git_out(
        src,
        &["rev-list", "--objects", "--count", new, "--not", old],
    )
    .parse()
    .unwrap()
}

/// A generated history (`seed`, `commits` commits, other options default)
/// at `parent/src.git`, pushed with `--mirror` to repository `name` of
/// `server`; returns its path and the repository's URL.
fn mirrored(
    server: &Server,
    parent: &Path,
    name: &str,
    seed: u64,
    commits: usize,
) -> (std::path::PathBuf, String) {
    let src = parent.join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed,
            commits,
            ..Default::default()
        },
    );
    let url = server.url(name);
    git(&src, &["push", "--quiet", "--mirror", &url]);
    (src, url)
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
    let (src, url) = mirrored(&server, tmp.path(), "complete", 12, 150);
    // An update makes the repository not "closed": the clone takes the walk.
    force_main(&src, &url, &git_out(&src, &["rev-parse", "main~1"]));
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

/// Objects in `dir` that none of its refs reach (a clone holds only what its
/// pack brought: anything listed was sent without being asked for).
fn unreachable_objects(dir: &Path) -> String {
    git_out(dir, &["fsck", "--unreachable", "--no-reflogs"])
}

/// A clone after pushes since a GC walks only what the pushes added (the
/// GC's closure is sent whole); once a branch the GC saw is deleted, or for a
/// clone of one branch, the closure holds objects the client must not get,
/// and the closure's bitmaps say what the wants reach (walking only what
/// came since): never an object its refs do not reach.
#[test]
fn a_clone_after_a_gc_walks_only_what_came_since() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let (src, url) = mirrored(&server, tmp.path(), "closure", 14, 300);
    force_main(&src, &url, &git_out(&src, &["rev-parse", "main~5"]));
    assert_maintained(&server.store().maintain(&["--repo", "closure", "--gc"], &[]));
    let state = server.store().repo_state("closure").unwrap();
    assert!(state.closure.is_some(), "{state:?}");
    git(&src, &["push", "--quiet", &url, "main:refs/heads/main"]);

    let clone = |dir: &str, args: &[&str]| {
        let mut all = vec!["clone", "--quiet"];
        all.extend_from_slice(args);
        all.extend_from_slice(&[url.as_str(), dir]);
        git(tmp.path(), &all);
        let dst = tmp.path().join(dir);
        fsck(&dst);
        assert_eq!(
            unreachable_objects(&dst),
            "",
            "{dir}: objects no ref reaches"
        );
        let (commits_read, _, thin, _) = last_fetch(&server.logs());
        assert_eq!(thin, 0, "{dir}: a clone got a thin pack");
        (dst, commits_read)
    };
    let (dst, commits_read) = clone("mirror.git", &["--mirror"]);
    assert_eq!(refs_and_objects(&dst), refs_and_objects(&src));
    assert!(
        commits_read <= 60,
        "the clone read {commits_read} commits; 5 came since the GC\n{}",
        server.logs()
    );

    // One branch: the other branches' tips are not reached.
    let (dst, commits_read) = clone(
        "one.git",
        &["--bare", "--single-branch", "--branch", "main"],
    );
    assert_eq!(
        git_out(&dst, &["rev-parse", "main"]),
        git_out(&src, &["rev-parse", "main"])
    );
    let via = || log_text(&last_pack_line(&server.logs()), "via");
    assert_eq!(via(), "bitmaps");
    assert!(commits_read <= 60, "{commits_read}");

    // A branch with commits of its own is deleted.
    let branch = git_out(
        &src,
        &["for-each-ref", "--format=%(refname)", "refs/heads/"],
    )
    .lines()
    .map(str::to_owned)
    .find(|b| {
        let exclude = format!("--exclude={b}");
        b != "refs/heads/main"
            && !git_out(&src, &["rev-list", b, "--not", &exclude, "--all"]).is_empty()
    })
    .expect("a branch no other ref reaches");
    let before = refs_and_objects(&src).1;
    git(&src, &["push", "--quiet", &url, &format!(":{branch}")]);
    git(&src, &["update-ref", "-d", &branch]);
    assert_ne!(
        refs_and_objects(&src).1,
        before,
        "{branch} has objects of its own"
    );
    let (dst, commits_read) = clone("after-delete.git", &["--mirror"]);
    assert_eq!(refs_and_objects(&dst), refs_and_objects(&src));
    assert_eq!(via(), "bitmaps");
    assert!(commits_read <= 60, "{commits_read}");
}

/// With an index cache of one object (every index dropped as soon as
/// another is loaded), pushes and clones still work: the bound costs
/// reloads, never answers.
#[test]
fn a_tiny_index_cache_still_serves() {
    let server = Server::start_with(&["--no-maintenance", "--index-cache-size", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 15,
            commits: 60,
            ..Default::default()
        },
    );
    let url = server.url("tiny");
    for behind in [8, 4, 0] {
        force_main(
            &src,
            &url,
            &git_out(&src, &["rev-parse", &format!("main~{behind}")]),
        );
    }
    git(&src, &["push", "--quiet", "--mirror", &url]);
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "dst.git"],
    );
    let dst = tmp.path().join("dst.git");
    fsck(&dst);
    assert_eq!(refs_and_objects(&dst), refs_and_objects(&src));
}

/// A repository imported by one push holds exactly what its refs reach, so
/// that push records its container as the closure: the first clone sends
/// every object without a walk (the repository is closed), and a clone
/// after later pushes walks only what they brought (`via="closure"`)
/// rather than the whole history, long before any GC. A clone of one
/// branch does not reach every tip and walks. Every clone is whole.
#[test]
fn an_imported_repository_clones_over_its_closure_from_the_first_push() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let (src, url) = mirrored(&server, tmp.path(), "imported", 21, 300);
    let state = server.store().repo_state("imported").unwrap();
    let closure = state
        .closure
        .clone()
        .expect("the import recorded a closure");
    assert!(!closure.bitmaps);
    assert_eq!(
        closure.containers,
        state
            .containers
            .iter()
            .map(|c| c.id.clone())
            .collect::<Vec<_>>()
    );
    let via = |logs: &str| log_text(&last_pack_line(logs), "via");
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "first.git"],
    );
    assert_eq!(via(&server.logs()), "closed");
    assert_eq!(
        refs_and_objects(&tmp.path().join("first.git")),
        refs_and_objects(&src)
    );

    // Three pushes on main: the repository is no longer closed.
    let work = tmp.path().join("work");
    git(
        tmp.path(),
        &["clone", "--quiet", src.to_str().unwrap(), "work"],
    );
    for i in 0..3 {
        commit_files(
            &work,
            &[(&format!("new-{i}.txt"), "new\n")],
            "after the import",
        );
        git(&work, &["push", "--quiet", &url, "HEAD:main"]);
    }
    let head = git_out(&work, &["rev-parse", "HEAD"]);
    git(
        &src,
        &["fetch", "--quiet", work.to_str().unwrap(), "HEAD:main"],
    );
    assert!(!server.store().repo_state("imported").unwrap().closed);
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "later.git"],
    );
    let logs = server.logs();
    assert_eq!(via(&logs), "closure", "{}", last_pack_line(&logs));
    // What it walked: the three new commits and the tips it peeled, not the
    // history (300 commits and their merges).
    assert!(log_field(&last_pack_line(&logs), "commits_read") < 150);
    let later = tmp.path().join("later.git");
    fsck(&later);
    assert_eq!(git_out(&later, &["rev-parse", "main"]), head);
    assert_eq!(refs_and_objects(&later), refs_and_objects(&src));

    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            "--single-branch",
            "--branch",
            "main",
            &url,
            "one.git",
        ],
    );
    assert_eq!(via(&server.logs()), "walk");
    fsck(&tmp.path().join("one.git"));
}
