//! Ref updates through `git push`: force, non-fast-forward, deletion, new
//! refs without new objects, atomic pushes, ref-name rules, push options.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// A work repository with main = A - B - C pushed to `url`; returns the
/// work dir and [A, B, C].
fn pushed_repo(tmp: &Path, url: &str) -> (PathBuf, Vec<String>) {
    let work = tmp.join("work");
    init_repo(&work);
    let a = commit_files(&work, &[("f.txt", "a\n")], "A");
    let b = commit_files(&work, &[("f.txt", "a\nb\n")], "B");
    let c = commit_files(&work, &[("f.txt", "a\nb\nc\n")], "C");
    git(&work, &["push", "--quiet", url, "main"]);
    (work, vec![a, b, c])
}

fn remote_ref(url: &str, name: &str) -> Option<String> {
    ls_remote(url)
        .lines()
        .find(|l| l.split('\t').nth(1) == Some(name))
        .map(|l| l.split('\t').next().unwrap().to_owned())
}

/// Without `+` the client refuses a non-fast-forward, and nothing changes;
/// with `+` it lands. `:branch` deletes, and the ref is gone from ls-remote.
#[test]
fn force_push_non_fast_forward_and_delete() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("refs");
    let (work, ids) = pushed_repo(tmp.path(), &url);
    git(
        &work,
        &[
            "push",
            "--quiet",
            &url,
            "main:refs/heads/topic",
            "main:refs/tags/t1",
        ],
    );
    let before = ls_remote(&url);

    // rewrite history: main = A - B - D
    git(&work, &["reset", "--quiet", "--hard", &ids[1]]);
    let d = commit_files(&work, &[("f.txt", "a\nb\nd\n")], "D");

    let err = git_fail(&work, &["push", &url, "main"]);
    // canonical: " ! [rejected]        main -> main (non-fast-forward)"
    assert!(
        err.contains("[rejected]") && err.contains("main -> main (non-fast-forward)"),
        "{err}"
    );
    assert_eq!(ls_remote(&url), before);

    git(&work, &["push", "--quiet", &url, "+main"]);
    assert_eq!(remote_ref(&url, "refs/heads/main"), Some(d.clone()));
    assert_eq!(remote_ref(&url, "HEAD"), Some(d.clone()));
    // the old tip is still reachable through topic
    assert_eq!(remote_ref(&url, "refs/heads/topic"), Some(ids[2].clone()));

    git(&work, &["push", "--quiet", &url, ":topic", ":refs/tags/t1"]);
    let after = ls_remote(&url);
    assert!(!after.contains("refs/heads/topic"), "{after}");
    assert!(!after.contains("refs/tags/t1"), "{after}");
    assert_eq!(after, format!("{d}\tHEAD\n{d}\trefs/heads/main"));

    // the branch HEAD names cannot be deleted (receive.denyDeleteCurrent).
    // canonical:
    //   remote: error: refusing to delete the current branch: refs/heads/main
    //    ! [remote rejected] main (deletion of the current branch prohibited)
    let err = git_fail(&work, &["push", &url, ":main"]);
    assert!(
        err.contains("[remote rejected] main (deletion of the current branch prohibited)"),
        "{err}"
    );
    assert_eq!(ls_remote(&url), after);

    // a clone sees exactly the forced history
    git(
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
#[test]
fn new_refs_at_existing_commits() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("existing");
    let (work, ids) = pushed_repo(tmp.path(), &url);

    git(
        &work,
        &[
            "push",
            "--quiet",
            &url,
            &format!("{}:refs/heads/old", ids[0]),
            "main:refs/tags/light",
        ],
    );
    assert_eq!(remote_ref(&url, "refs/heads/old"), Some(ids[0].clone()));
    assert_eq!(remote_ref(&url, "refs/tags/light"), Some(ids[2].clone()));
    // an annotated tag: one new object, the tag itself; ls-remote peels it
    git(&work, &["tag", "-a", "-m", "release", "v1", &ids[1]]);
    git(&work, &["push", "--quiet", &url, "v1"]);
    let tag = git_out(&work, &["rev-parse", "v1"]);
    assert_eq!(remote_ref(&url, "refs/tags/v1"), Some(tag));
    assert_eq!(remote_ref(&url, "refs/tags/v1^{}"), Some(ids[1].clone()));

    git(tmp.path(), &["clone", "--quiet", "--mirror", &url, "m.git"]);
    let m = tmp.path().join("m.git");
    assert_eq!(git_out(&m, &["rev-parse", "old"]), ids[0]);
    fsck(&m);
}

/// `--atomic` with one command the server refuses changes nothing; without
/// `--atomic` the valid command lands and only the bad one is refused.
#[test]
fn atomic_push_is_all_or_nothing() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("atomic");
    let (work, _) = pushed_repo(tmp.path(), &url);
    let next = commit_files(&work, &[("g.txt", "g\n")], "next");
    let before = ls_remote(&url);

    // `refs/foo` is a valid name for the client but not for receive-pack
    // (one level under refs/). canonical:
    //   remote: error: refusing to update funny ref 'refs/foo' remotely
    //    ! [remote rejected] main -> main (atomic push failure)
    //    ! [remote rejected] main -> refs/foo (funny refname)
    let err = git_fail(
        &work,
        &["push", "--atomic", &url, "main:main", "main:refs/foo"],
    );
    assert!(err.contains("main -> main (atomic push failure)"), "{err}");
    assert!(err.contains("main -> refs/foo (funny refname)"), "{err}");
    assert_eq!(ls_remote(&url), before);

    // a directory/file conflict only the ref store sees. canonical:
    //   remote: error: cannot lock ref 'refs/heads/main/sub': 'refs/heads/main' exists; cannot create 'refs/heads/main/sub'
    //    ! [remote rejected] main -> main (atomic transaction failed)
    //    ! [remote rejected] main -> main/sub (atomic transaction failed)
    let err = git_fail(
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
    assert_eq!(ls_remote(&url), before);

    // non-atomic: canonical:
    //      <old>..<new>  main -> main
    //    ! [remote rejected] main -> refs/foo (funny refname)
    let err = git_fail(&work, &["push", &url, "main:main", "main:refs/foo"]);
    assert!(err.contains("main -> refs/foo (funny refname)"), "{err}");
    assert_eq!(remote_ref(&url, "refs/heads/main"), Some(next.clone()));
    assert_eq!(remote_ref(&url, "refs/foo"), None);

    // canonical: " ! [remote rejected] main -> main/sub (failed to update ref)"
    let err = git_fail(&work, &["push", &url, "main:refs/heads/main/sub"]);
    assert!(
        err.contains("[remote rejected] main -> main/sub ("),
        "{err}"
    );
    assert_eq!(remote_ref(&url, "refs/heads/main/sub"), None);

    // two new refs in conflict with each other. canonical:
    //   remote: error: cannot lock ref 'refs/heads/x/y': cannot process 'refs/heads/x/y' and 'refs/heads/x' at the same time
    //    ! [remote rejected] main -> x/y (atomic transaction failed)
    //    ! [remote rejected] main -> x (atomic transaction failed)
    let err = git_fail(
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
    assert_eq!(remote_ref(&url, "refs/heads/x/y"), None);
    assert_eq!(remote_ref(&url, "refs/heads/x"), None);

    // and atomic pushes that are fine land together
    git(
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
    assert_eq!(remote_ref(&url, "refs/heads/p"), Some(next.clone()));
    assert_eq!(remote_ref(&url, "refs/heads/q"), Some(next));
}

/// The server advertises push-options; a push with `-o` succeeds.
#[test]
fn push_options_are_accepted() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("opts");
    let (work, _) = pushed_repo(tmp.path(), &url);
    let next = commit_files(&work, &[("h.txt", "h\n")], "with options");
    // a server without the capability fails this on the client:
    // "fatal: the receiving end does not support push options"
    git(
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
    assert_eq!(remote_ref(&url, "refs/heads/main"), Some(next));
}

/// Pushes to different branches at the same moment all land: each ref
/// update is checked against its own old value only.
#[test]
fn concurrent_pushes_to_different_branches_all_land() {
    const N: usize = 4;
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("busy");
    let (work, _) = pushed_repo(tmp.path(), &url);
    let mut clones = Vec::new();
    for i in 0..N {
        let dir = tmp.path().join(format!("c{i}"));
        git(
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
                git(
                    dir,
                    &["push", "--quiet", url, &format!("HEAD:refs/heads/b{i}")],
                );
            });
        }
        barrier.wait();
        git(&work, &["push", "--quiet", &url, "main"]);
    });
    for (i, (_, tip)) in clones.iter().enumerate() {
        assert_eq!(
            remote_ref(&url, &format!("refs/heads/b{i}")),
            Some(tip.clone())
        );
    }
    assert_eq!(remote_ref(&url, "refs/heads/main"), Some(main_tip));
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "all.git"],
    );
    fsck(&tmp.path().join("all.git"));
}

/// `--force-with-lease` with a stale expectation is refused with git's
/// message and changes nothing; with a fresh one it forces.
#[test]
fn force_with_lease() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("lease");
    let a = tmp.path().join("a");
    init_repo(&a);
    let base = commit_files(&a, &[("f", "1\n")], "base");
    git(&a, &["push", "--quiet", &url, "main"]);
    let b = tmp.path().join("b");
    git(tmp.path(), &["clone", "--quiet", &url, b.to_str().unwrap()]);
    git(&b, &["config", "user.name", "b"]);
    git(&b, &["config", "user.email", "b@example.com"]);
    let theirs = commit_files(&b, &[("f", "b\n")], "b");
    git(&b, &["push", "--quiet", "origin", "main"]);
    git(&a, &["reset", "--quiet", "--hard", &base]);
    commit_files(&a, &[("f", "a\n")], "a");
    // a's lease: main is still at base; it is not.
    let err = git_fail(
        &a,
        &[
            "push",
            &format!("--force-with-lease=main:{base}"),
            &url,
            "main",
        ],
    );
    assert!(err.contains("stale info"), "{err}");
    assert!(ls_remote(&url).contains(&theirs));
    let ours = git_out(&a, &["rev-parse", "HEAD"]);
    git(
        &a,
        &[
            "push",
            "--quiet",
            &format!("--force-with-lease=main:{theirs}"),
            &url,
            "main",
        ],
    );
    assert!(ls_remote(&url).contains(&ours));
}
