//! Ref updates through `git push`: force, non-fast-forward, deletion, new
//! refs without new objects, atomic pushes, ref-name rules, push options;
//! each body runs over smart HTTP and over SSH (`over_http::…`,
//! `over_ssh::…`): the transports answer alike.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// A work repository with main = A - B - C pushed to `url`; returns the
/// work dir and [A, B, C].
fn pushed_repo(r: &Remote, tmp: &Path, url: &str) -> (PathBuf, Vec<String>) {
    let work = tmp.join("work");
    init_repo(&work);
    let a = commit_files(&work, &[("f.txt", "a\n")], "A");
    let b = commit_files(&work, &[("f.txt", "a\nb\n")], "B");
    let c = commit_files(&work, &[("f.txt", "a\nb\nc\n")], "C");
    r.git(&work, &["push", "--quiet", url, "main"]);
    (work, vec![a, b, c])
}

/// Without `+` the client refuses a non-fast-forward, and nothing changes;
/// with `+` it lands. `:branch` deletes, and the ref is gone from ls-remote.
fn force_push_non_fast_forward_and_delete(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("refs");
    let (work, ids) = pushed_repo(r, tmp.path(), &url);
    r.git(
        &work,
        &[
            "push",
            "--quiet",
            &url,
            "main:refs/heads/topic",
            "main:refs/tags/t1",
        ],
    );
    let before = r.ls_remote(&url);

    // rewrite history: main = A - B - D
    r.git(&work, &["reset", "--quiet", "--hard", &ids[1]]);
    let d = commit_files(&work, &[("f.txt", "a\nb\nd\n")], "D");

    let err = r.git_fail(&work, &["push", &url, "main"]);
    // canonical: " ! [rejected]        main -> main (non-fast-forward)"
    assert!(
        err.contains("[rejected]") && err.contains("main -> main (non-fast-forward)"),
        "{err}"
    );
    assert_eq!(r.ls_remote(&url), before);

    r.git(&work, &["push", "--quiet", &url, "+main"]);
    assert_eq!(r.remote_ref(&url, "refs/heads/main"), Some(d.clone()));
    assert_eq!(r.remote_ref(&url, "HEAD"), Some(d.clone()));
    // the old tip is still reachable through topic
    assert_eq!(r.remote_ref(&url, "refs/heads/topic"), Some(ids[2].clone()));

    r.git(&work, &["push", "--quiet", &url, ":topic", ":refs/tags/t1"]);
    let after = r.ls_remote(&url);
    assert!(!after.contains("refs/heads/topic"), "{after}");
    assert!(!after.contains("refs/tags/t1"), "{after}");
    assert_eq!(after, format!("{d}\tHEAD\n{d}\trefs/heads/main"));

    // the branch HEAD names cannot be deleted (receive.denyDeleteCurrent).
    // canonical:
    //   remote: error: refusing to delete the current branch: refs/heads/main
    //    ! [remote rejected] main (deletion of the current branch prohibited)
    let err = r.git_fail(&work, &["push", &url, ":main"]);
    assert!(
        err.contains("[remote rejected] main (deletion of the current branch prohibited)"),
        "{err}"
    );
    assert_eq!(r.ls_remote(&url), after);

    // a clone sees exactly the forced history
    r.git(
        tmp.path(),
        &["clone", "--quiet", "--bare", &url, "clone.git"],
    );
    let clone = tmp.path().join("clone.git");
    assert_eq!(
        git_out(&clone, &["rev-list", "main"]),
        format!("{d}\n{}\n{}", ids[1], ids[0])
    );
    fsck(&clone);
}

/// A branch and a tag created at commits the server already has (the client
/// sends an empty pack) land and are advertised.
fn new_refs_at_existing_commits(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("existing");
    let (work, ids) = pushed_repo(r, tmp.path(), &url);

    r.git(
        &work,
        &[
            "push",
            "--quiet",
            &url,
            &format!("{}:refs/heads/old", ids[0]),
            "main:refs/tags/light",
        ],
    );
    assert_eq!(r.remote_ref(&url, "refs/heads/old"), Some(ids[0].clone()));
    assert_eq!(r.remote_ref(&url, "refs/tags/light"), Some(ids[2].clone()));
    // an annotated tag: one new object, the tag itself; ls-remote peels it
    r.git(&work, &["tag", "-a", "-m", "release", "v1", &ids[1]]);
    r.git(&work, &["push", "--quiet", &url, "v1"]);
    let tag = git_out(&work, &["rev-parse", "v1"]);
    assert_eq!(r.remote_ref(&url, "refs/tags/v1"), Some(tag));
    assert_eq!(r.remote_ref(&url, "refs/tags/v1^{}"), Some(ids[1].clone()));

    r.git(tmp.path(), &["clone", "--quiet", "--mirror", &url, "m.git"]);
    let m = tmp.path().join("m.git");
    assert_eq!(git_out(&m, &["rev-parse", "old"]), ids[0]);
    fsck(&m);
}

/// `/<name>` and `/<name>.git` are one repository, as forges take them: the
/// first push through the URL without `.git` creates it, and pushes and
/// clones through either reach the same refs.
fn a_url_without_git_names_the_same_repository(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let with = r.url("bare-name");
    let without = with
        .strip_suffix(".git")
        .expect("test URLs end in .git")
        .to_owned();
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "one\n")], "one");
    r.git(&work, &["push", "--quiet", &without, "main"]);
    let first = git_out(&work, &["rev-parse", "main"]);
    assert_eq!(r.remote_ref(&with, "refs/heads/main"), Some(first));
    commit_files(&work, &[("a.txt", "two\n")], "two");
    r.git(&work, &["push", "--quiet", &with, "main"]);
    let second = git_out(&work, &["rev-parse", "main"]);
    assert_eq!(
        r.remote_ref(&without, "refs/heads/main"),
        Some(second.clone())
    );
    r.git(tmp.path(), &["clone", "--quiet", &without, "c"]);
    assert_eq!(
        git_out(&tmp.path().join("c"), &["rev-parse", "HEAD"]),
        second
    );
}

/// `--atomic` with one command the server refuses changes nothing; without
/// `--atomic` the valid command lands and only the bad one is refused.
fn atomic_push_is_all_or_nothing(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("atomic");
    let (work, _) = pushed_repo(r, tmp.path(), &url);
    let next = commit_files(&work, &[("g.txt", "g\n")], "next");
    let before = r.ls_remote(&url);

    // `refs/foo` is a valid name for the client but not for receive-pack
    // (one level under refs/). canonical:
    //   remote: error: refusing to update funny ref 'refs/foo' remotely
    //    ! [remote rejected] main -> main (atomic push failure)
    //    ! [remote rejected] main -> refs/foo (funny refname)
    let err = r.git_fail(
        &work,
        &["push", "--atomic", &url, "main:main", "main:refs/foo"],
    );
    assert!(err.contains("main -> main (atomic push failure)"), "{err}");
    assert!(err.contains("main -> refs/foo (funny refname)"), "{err}");
    assert_eq!(r.ls_remote(&url), before);

    // a directory/file conflict only the ref store sees. canonical:
    //   remote: error: cannot lock ref 'refs/heads/main/sub': 'refs/heads/main' exists; cannot create 'refs/heads/main/sub'
    //    ! [remote rejected] main -> main (atomic transaction failed)
    //    ! [remote rejected] main -> main/sub (atomic transaction failed)
    let err = r.git_fail(
        &work,
        &[
            "push",
            "--atomic",
            &url,
            "main:main",
            "main:refs/heads/main/sub",
        ],
    );
    assert!(err.contains("main -> main (atomic"), "{err}");
    assert!(
        err.contains("[remote rejected] main -> main/sub ("),
        "{err}"
    );
    assert_eq!(r.ls_remote(&url), before);

    // non-atomic: canonical:
    //      <old>..<new>  main -> main
    //    ! [remote rejected] main -> refs/foo (funny refname)
    let err = r.git_fail(&work, &["push", &url, "main:main", "main:refs/foo"]);
    assert!(err.contains("main -> refs/foo (funny refname)"), "{err}");
    assert_eq!(r.remote_ref(&url, "refs/heads/main"), Some(next.clone()));
    assert_eq!(r.remote_ref(&url, "refs/foo"), None);

    // canonical: " ! [remote rejected] main -> main/sub (failed to update ref)"
    let err = r.git_fail(&work, &["push", &url, "main:refs/heads/main/sub"]);
    assert!(
        err.contains("[remote rejected] main -> main/sub ("),
        "{err}"
    );
    assert_eq!(r.remote_ref(&url, "refs/heads/main/sub"), None);

    // two new refs in conflict with each other. canonical:
    //   remote: error: cannot lock ref 'refs/heads/x/y': cannot process 'refs/heads/x/y' and 'refs/heads/x' at the same time
    //    ! [remote rejected] main -> x/y (atomic transaction failed)
    //    ! [remote rejected] main -> x (atomic transaction failed)
    let err = r.git_fail(
        &work,
        &[
            "push",
            "--atomic",
            &url,
            "main:refs/heads/x/y",
            "main:refs/heads/x",
        ],
    );
    assert!(err.contains("(atomic"), "{err}");
    assert_eq!(r.remote_ref(&url, "refs/heads/x/y"), None);
    assert_eq!(r.remote_ref(&url, "refs/heads/x"), None);

    // and atomic pushes that are fine land together
    r.git(
        &work,
        &[
            "push",
            "--quiet",
            "--atomic",
            &url,
            "main:refs/heads/p",
            "main:refs/heads/q",
        ],
    );
    assert_eq!(r.remote_ref(&url, "refs/heads/p"), Some(next.clone()));
    assert_eq!(r.remote_ref(&url, "refs/heads/q"), Some(next));
}

/// The server advertises push-options; a push with `-o` succeeds.
fn push_options_are_accepted(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("opts");
    let (work, _) = pushed_repo(r, tmp.path(), &url);
    let next = commit_files(&work, &[("h.txt", "h\n")], "with options");
    // a server without the capability fails this on the client:
    // "fatal: the receiving end does not support push options"
    r.git(
        &work,
        &[
            "push",
            "--quiet",
            "-o",
            "foo",
            "-o",
            "bar=baz qux",
            &url,
            "main",
        ],
    );
    assert_eq!(r.remote_ref(&url, "refs/heads/main"), Some(next));
}

/// Pushes to different branches at the same moment all land: each ref
/// update is checked against its own old value only.
fn concurrent_pushes_to_different_branches_all_land(r: &Remote) {
    const N: usize = 4;
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("busy");
    let (work, _) = pushed_repo(r, tmp.path(), &url);
    let mut clones = Vec::new();
    for i in 0..N {
        let dir = tmp.path().join(format!("c{i}"));
        r.git(
            tmp.path(),
            &["clone", "--quiet", &url, dir.to_str().unwrap()],
        );
        let tip = commit_files(
            &dir,
            &[(&format!("file{i}.txt"), &format!("from clone {i}\n"))],
            "c",
        );
        clones.push((dir, tip));
    }
    // and one more commit on main, racing the branch pushes
    let main_tip = commit_files(&work, &[("f.txt", "a\nb\nc\nmain\n")], "main moves");
    let barrier = std::sync::Barrier::new(N + 1);
    std::thread::scope(|s| {
        for (i, (dir, _)) in clones.iter().enumerate() {
            let (barrier, url) = (&barrier, &url);
            s.spawn(move || {
                barrier.wait();
                r.git(
                    dir,
                    &["push", "--quiet", url, &format!("HEAD:refs/heads/b{i}")],
                );
            });
        }
        barrier.wait();
        r.git(&work, &["push", "--quiet", &url, "main"]);
    });
    for (i, (_, tip)) in clones.iter().enumerate() {
        assert_eq!(
            r.remote_ref(&url, &format!("refs/heads/b{i}")),
            Some(tip.clone())
        );
    }
    assert_eq!(r.remote_ref(&url, "refs/heads/main"), Some(main_tip));
    r.git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "all.git"],
    );
    fsck(&tmp.path().join("all.git"));
}

/// `--force-with-lease` with a stale expectation is refused with git's
/// message and changes nothing; with a fresh one it forces.
fn force_with_lease(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("lease");
    let a = tmp.path().join("a");
    init_repo(&a);
    let base = commit_files(&a, &[("f", "1\n")], "base");
    r.git(&a, &["push", "--quiet", &url, "main"]);
    let b = tmp.path().join("b");
    r.git(tmp.path(), &["clone", "--quiet", &url, b.to_str().unwrap()]);
    r.git(&b, &["config", "user.name", "b"]);
    r.git(&b, &["config", "user.email", "b@example.com"]);
    let theirs = commit_files(&b, &[("f", "b\n")], "b");
    r.git(&b, &["push", "--quiet", "origin", "main"]);
    r.git(&a, &["reset", "--quiet", "--hard", &base]);
    commit_files(&a, &[("f", "a\n")], "a");
    // a's lease: main is still at base; it is not.
    let err = r.git_fail(
        &a,
        &[
            "push",
            &format!("--force-with-lease=main:{base}"),
            &url,
            "main",
        ],
    );
    assert!(err.contains("stale info"), "{err}");
    assert!(r.ls_remote(&url).contains(&theirs));
    let ours = git_out(&a, &["rev-parse", "HEAD"]);
    r.git(
        &a,
        &[
            "push",
            "--quiet",
            &format!("--force-with-lease=main:{theirs}"),
            &url,
            "main",
        ],
    );
    assert!(r.ls_remote(&url).contains(&ours));
}

crate::over_both_transports!(
    a_url_without_git_names_the_same_repository,
    force_push_non_fast_forward_and_delete,
    new_refs_at_existing_commits,
    atomic_push_is_all_or_nothing,
    push_options_are_accepted,
    concurrent_pushes_to_different_branches_all_land,
    force_with_lease,
);
