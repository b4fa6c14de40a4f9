//! Git LFS file locks with the real `git-lfs` client: lock, list, a second
//! user's push touching a locked file refused by the server, merges and
//! branches that bring no change to it accepted, unlock, force unlock by an
//! admin.

mod common;

use common::*;

/// A server with the tokens `dev` (alice: `org/*:write`), `ro` (`org/*:read`)
/// and `bob` (`org/*:write`); `org/app` pushed from alice's LFS work tree
/// (`work`, remote `origin`), and `big.bin` locked by alice.
struct Locked {
    tmp: tempfile::TempDir,
    server: Server,
    reader: String,
    bob_secret: String,
    work: std::path::PathBuf,
    url: String,
    as_alice: Vec<String>,
}

fn locked_repo() -> Locked {
    let tmp = tempfile::tempdir().unwrap();
    let (server, alice_secret, reader) = start();
    let bob_secret = server.store().create_token("bob", &["org/*:write"], &[]);
    await_token(&server, &bob_secret);
    let (work, _, _) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_alice = git_as(&server, tmp.path(), &alice_secret);
    git_ok(&work, &as_alice, &["remote", "add", "origin", &url]);
    git_ok(&work, &as_alice, &["push", "--quiet", "origin", "main"]);
    git_ok(&work, &as_alice, &["lfs", "lock", "big.bin"]);
    Locked {
        tmp,
        server,
        reader,
        bob_secret,
        work,
        url,
        as_alice,
    }
}

#[test]
fn locks_are_listed_enforced_on_push_and_removed_by_their_owner_or_an_admin() {
    let Locked {
        tmp,
        server,
        reader,
        bob_secret,
        work,
        url,
        as_alice,
    } = locked_repo();
    let root_secret = server.store().create_token("root", &["*:admin"], &[]);
    await_token(&server, &root_secret);
    let listed = String::from_utf8(git_run(&work, &as_alice, &["lfs", "locks"]).stdout).unwrap();
    assert!(
        listed.contains("big.bin") && listed.contains("dev"),
        "{listed}"
    );
    // a second lock of the path is refused: it is held
    let (bob, as_bob) = clone_as(&server, tmp.path(), &bob_secret, &url, "bob");
    let out = git_run(&bob, &as_bob, &["lfs", "lock", "big.bin"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already created lock"),
        "{out:?}"
    );
    // a reader lists the locks but cannot take one
    let (ro, as_ro) = clone_as(&server, tmp.path(), &reader, &url, "ro");
    let listed = String::from_utf8(git_run(&ro, &as_ro, &["lfs", "locks"]).stdout).unwrap();
    assert!(listed.contains("big.bin"), "{listed}");
    assert!(!git_run(&ro, &as_ro, &["lfs", "lock", "README"])
        .status
        .success());

    // bob's change of the locked file is refused by the server itself
    // (--no-verify skips git-lfs's own check in the pre-push hook)
    std::fs::write(bob.join("big.bin"), noise(4096, 9)).unwrap();
    git_ok(
        &bob,
        &as_bob,
        &["commit", "--quiet", "-am", "bob edits big.bin"],
    );
    let out = git_run(&bob, &as_bob, &["push", "--no-verify", "origin", "main"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("remote: error: 'big.bin' is locked by dev (git lfs locks); commit "),
        "{err}"
    );
    assert!(
        err.contains("changes it, so refs/heads/main may not take it"),
        "{err}"
    );
    // nor can it reach the repository on another branch, new or deleted and
    // made again
    let out = git_run(
        &bob,
        &as_bob,
        &["push", "--no-verify", "origin", "HEAD:refs/heads/sneak"],
    );
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        err.contains("[remote rejected] main -> main (locked by dev: big.bin)"),
        "{err}"
    );
    // a change of another file passes; so does the owner's change of hers
    git_ok(
        &bob,
        &as_bob,
        &["reset", "--quiet", "--hard", "origin/main"],
    );
    commit_files(&bob, &[("README", "bob's text\n")], "bob edits README");
    git_ok(&bob, &as_bob, &["push", "--quiet", "origin", "main"]);
    git_ok(
        &work,
        &as_alice,
        &["pull", "--quiet", "--rebase", "origin", "main"],
    );
    std::fs::write(work.join("big.bin"), noise(4096, 10)).unwrap();
    git_ok(
        &work,
        &as_alice,
        &["commit", "--quiet", "-am", "alice edits big.bin"],
    );
    git_ok(&work, &as_alice, &["push", "--quiet", "origin", "main"]);
    // bob's branch may take her change (a merge that keeps one parent's
    // version changes nothing), and a branch made at a commit the
    // repository has brings nothing to check
    git_ok(&bob, &as_bob, &["checkout", "--quiet", "-b", "feature"]);
    commit_files(&bob, &[("notes", "bob's notes\n")], "bob's work");
    git_ok(&bob, &as_bob, &["fetch", "--quiet", "origin"]);
    git_ok(
        &bob,
        &as_bob,
        &["merge", "--quiet", "--no-edit", "origin/main"],
    );
    git_ok(
        &bob,
        &as_bob,
        &["push", "--quiet", "--no-verify", "origin", "feature"],
    );
    git_ok(
        &bob,
        &as_bob,
        &[
            "push",
            "--quiet",
            "origin",
            "origin/main~1:refs/heads/old-based",
        ],
    );
    git_ok(&bob, &as_bob, &["checkout", "--quiet", "main"]);

    // bob may not unlock alice's lock, not even with --force (admin only);
    // an admin may
    let out = git_run(&bob, &as_bob, &["lfs", "unlock", "big.bin"]);
    assert!(!out.status.success(), "{out:?}");
    let out = git_run(&bob, &as_bob, &["lfs", "unlock", "--force", "big.bin"]);
    assert!(!out.status.success(), "{out:?}");
    let (root, as_root) = clone_as(&server, tmp.path(), &root_secret, &url, "root");
    git_ok(&root, &as_root, &["lfs", "unlock", "--force", "big.bin"]);
    let listed = String::from_utf8(git_run(&ro, &as_ro, &["lfs", "locks"]).stdout).unwrap();
    assert!(!listed.contains("big.bin"), "{listed}");
    // and bob's change now lands
    git_ok(
        &bob,
        &as_bob,
        &["pull", "--quiet", "--rebase", "origin", "main"],
    );
    std::fs::write(bob.join("big.bin"), noise(4096, 11)).unwrap();
    git_ok(
        &bob,
        &as_bob,
        &["commit", "--quiet", "-am", "bob edits big.bin"],
    );
    git_ok(&bob, &as_bob, &["push", "--quiet", "origin", "main"]);
}

/// A locked change cannot be parked where no branch sees it and
/// fast-forwarded onto a branch later (issue 42, finding 6): not under a tag
/// (lightweight or annotated) or any other ref namespace, and not in the
/// pack of a push whose update of it was refused while another update of
/// the same push landed. A tag of commits the repository already reaches
/// passes.
#[test]
fn a_locked_change_cannot_be_parked_under_a_tag_or_a_refused_update() {
    let Locked {
        tmp,
        server,
        bob_secret,
        work,
        url,
        as_alice,
        ..
    } = locked_repo();

    let (bob, as_bob) = clone_as(&server, tmp.path(), &bob_secret, &url, "bob");
    // bob's push of `refspec`, which must be refused: its stderr
    let refused = |refspec: &str| -> String {
        let out = git_run(&bob, &as_bob, &["push", "--no-verify", "origin", refspec]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{refspec}: {err}");
        err
    };
    // what git prints for bob, trimmed
    let said = |args: &[&str]| -> String {
        let out = git_run(&bob, &as_bob, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    // a tag of what the repository has is fine
    git_ok(&bob, &as_bob, &["tag", "v1"]);
    git_ok(&bob, &as_bob, &["push", "--quiet", "origin", "v1"]);

    std::fs::write(bob.join("big.bin"), noise(4096, 21)).unwrap();
    git_ok(
        &bob,
        &as_bob,
        &["commit", "--quiet", "-am", "bob edits big.bin"],
    );
    git_ok(
        &bob,
        &as_bob,
        &["tag", "-a", "-m", "parked", "parked-annotated"],
    );
    for target in [
        "HEAD:refs/tags/parked",
        "parked-annotated",
        "HEAD:refs/notes/parked",
        "HEAD:refs/heads/sneak",
    ] {
        let err = refused(target);
        assert!(
            err.contains("remote: error: 'big.bin' is locked by dev (git lfs locks); commit "),
            "{target}: {err}"
        );
        assert!(err.contains("(locked by dev: big.bin)"), "{target}: {err}");
    }

    // one push: the locked change refused, another branch taken, so the
    // change's objects are stored although no ref reaches them ...
    git_ok(&bob, &as_bob, &["branch", "unrelated", "origin/main"]);
    git_ok(&bob, &as_bob, &["checkout", "--quiet", "unrelated"]);
    commit_files(&bob, &[("notes", "bob's notes\n")], "bob's notes");
    git_ok(&bob, &as_bob, &["checkout", "--quiet", "main"]);
    let out = git_run(
        &bob,
        &as_bob,
        &[
            "push",
            "--no-verify",
            "--porcelain",
            "origin",
            "main",
            "unrelated",
        ],
    );
    let porcelain = String::from_utf8_lossy(&out.stdout);
    assert!(
        porcelain.contains("*\trefs/heads/unrelated:refs/heads/unrelated\t[new branch]"),
        "{porcelain}"
    );
    assert!(
        porcelain.contains(
            "!\trefs/heads/main:refs/heads/main\t[remote rejected] (locked by dev: big.bin)"
        ),
        "{porcelain}"
    );
    // ... and a later push that brings no object still may not make a ref
    // reach it
    let err = refused("HEAD:refs/heads/later");
    assert!(err.contains("(locked by dev: big.bin)"), "{err}");

    // nothing of it reached a ref
    let listed = said(&["ls-remote", "origin"]);
    let edit = said(&["rev-parse", "HEAD"]);
    assert!(!listed.contains(&edit), "{listed}");
    for name in ["parked", "sneak", "later"] {
        assert!(!listed.contains(name), "{listed}");
    }
    // nor under a chain of 65 annotated tags (the check follows 64; git
    // any number), nor as a tree a ref names (refs/replace/* makes clients
    // see one in place of another)
    let mut tip = "parked-annotated".to_owned();
    for i in 0..65 {
        let name = format!("chain{i}");
        let args = [
            "-c",
            "advice.nestedTag=false",
            "tag",
            "-a",
            "-m",
            "chain",
            &name,
            &tip,
        ];
        git_ok(&bob, &as_bob, &args);
        tip = name;
    }
    let err = refused("refs/tags/chain64");
    assert!(
        err.contains("(tag chain too deep for the lock check)"),
        "{err}"
    );
    let main_tree = said(&["rev-parse", "origin/main^{tree}"]);
    let err = refused(&format!("HEAD^{{tree}}:refs/replace/{main_tree}"));
    assert!(
        err.contains("; tree ") && err.contains("(locked by dev: big.bin)"),
        "{err}"
    );

    // the lock holder may tag her own change of the file, and push it
    std::fs::write(work.join("big.bin"), noise(4096, 22)).unwrap();
    git_ok(
        &work,
        &as_alice,
        &["commit", "--quiet", "-am", "alice edits big.bin"],
    );
    git_ok(
        &work,
        &as_alice,
        &[
            "push",
            "--quiet",
            "origin",
            "HEAD:refs/tags/alice",
            "HEAD:main",
        ],
    );
    git_ok(&bob, &as_bob, &["fetch", "--quiet", "origin"]);
    // a merge whose other parent is an ancestor of the first (no git merge
    // makes one) would bring her old version back: refused
    let first = said(&["rev-list", "--max-parents=0", "origin/main"]);
    let old_tree = format!("{first}^{{tree}}");
    let merge = said(&[
        "commit-tree",
        &old_tree,
        "-p",
        "origin/main",
        "-p",
        &first,
        "-m",
        "merge",
    ]);
    let err = refused(&format!("{merge}:refs/heads/main"));
    assert!(err.contains("(locked by dev: big.bin)"), "{err}");
    // a new root commit of a tree the repository has changes nothing
    let root = said(&["commit-tree", "origin/main^{tree}", "-m", "a new root"]);
    let to = format!("{root}:refs/heads/rooted");
    git_ok(
        &bob,
        &as_bob,
        &["push", "--quiet", "--no-verify", "origin", &to],
    );
}
