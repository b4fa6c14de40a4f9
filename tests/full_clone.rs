//! A full clone of a repository whose every object is reachable from its refs
//! is answered from the container indexes without a walk (the state's
//! `closed` flag); once a ref is deleted or moved, objects only the old refs
//! reached must not be served any more.

mod common;

use common::*;

fn has_object(repo: &std::path::Path, oid: &str) -> bool {
    git_cmd(repo)
        .args(["cat-file", "-e", oid])
        .status()
        .expect("git cat-file")
        .success()
}

#[test]
fn full_clone_sends_everything_and_nothing_a_deleted_or_moved_ref_left_behind() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "a\n")], "first");
    git(&work, &["branch", "-M", "main"]);
    git(&work, &["checkout", "-q", "-b", "secret"]);
    let secret = commit_files(&work, &[("key.txt", "hunter2\n")], "oops");
    let secret_blob = git_out(&work, &["rev-parse", "secret:key.txt"])
        .trim()
        .to_owned();
    git(&work, &["checkout", "-q", "main"]);
    git(&work, &["checkout", "-q", "-b", "moved"]);
    let dropped = commit_files(&work, &[("wip.txt", "wip\n")], "wip");
    git(&work, &["checkout", "-q", "main"]);
    let url = server.url("r");
    git(&work, &["push", "--quiet", &url, "main", "secret", "moved"]);

    // Created refs only: the fast path; the clone has everything and is sound.
    let first = dir.path().join("first.git");
    git(
        dir.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            &url,
            first.to_str().unwrap(),
        ],
    );
    fsck(&first);
    assert!(has_object(&first, &secret) && has_object(&first, &secret_blob));
    assert_eq!(
        refs_and_objects(&first),
        refs_and_objects(&work.join(".git"))
    );

    // Delete one branch and move another back: their commits stay stored but
    // must not be sent to a new clone.
    git(&work, &["push", "--quiet", &url, ":secret"]);
    git(&work, &["push", "--quiet", "--force", &url, "main:moved"]);
    let second = dir.path().join("second.git");
    git(
        dir.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            &url,
            second.to_str().unwrap(),
        ],
    );
    fsck(&second);
    assert!(
        !has_object(&second, &secret),
        "deleted branch's commit was served"
    );
    assert!(
        !has_object(&second, &secret_blob),
        "deleted branch's blob was served"
    );
    assert!(
        !has_object(&second, &dropped),
        "force-moved branch's old commit was served"
    );
    let heads = git_out(&second, &["for-each-ref", "--format=%(refname)"]);
    assert_eq!(
        heads.lines().collect::<Vec<_>>(),
        ["refs/heads/main", "refs/heads/moved"]
    );
}
