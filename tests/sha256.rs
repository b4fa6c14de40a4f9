//! SHA-256 repositories end to end with the real git client (plan 0019,
//! step 4): a push from a SHA-256 repository creates the repository in
//! SHA-256, and clones (v0 and v2) and a later push and fetch carry the
//! same ids as the client's; a SHA-1 client and a SHA-256 repository
//! refuse each other with git's own words, and nothing is stored.

mod common;

use std::path::Path;

use common::*;

/// A SHA-256 repository at `dir` with `main` checked out.
fn init_sha256(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(
        dir,
        &[
            "init",
            "--quiet",
            "--initial-branch=main",
            "--object-format=sha256",
        ],
    );
}

/// A history with edits (deltas), a rename, a binary and an annotated tag.
fn history(work: &Path) {
    let mut text: Vec<String> = (0..200).map(|i| format!("line {i}\n")).collect();
    for round in 0..6 {
        text[round * 20] = format!("edited in round {round}\n");
        let name = if round < 3 { "a.txt" } else { "moved/a.txt" };
        if round == 3 {
            git(work, &["mv", "a.txt", "x.txt"]);
            std::fs::create_dir_all(work.join("moved")).unwrap();
            git(work, &["mv", "x.txt", "moved/a.txt"]);
        }
        commit_files(
            work,
            &[
                (name, &text.concat()),
                ("b.bin", &format!("\0bin{round}\0")),
            ],
            &format!("round {round}"),
        );
    }
    git(work, &["tag", "-a", "v1", "-m", "v1"]);
}

#[test]
fn a_sha256_repository_is_pushed_cloned_fetched_and_pushed_again() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_sha256(&work);
    history(&work);
    let url = server.url("wide");
    // Push-to-create in the client's format.
    git(&work, &["push", "--quiet", &url, "main", "v1"]);
    let main = git_out(&work, &["rev-parse", "main"]);
    assert_eq!(main.len(), 64);
    let listed = ls_remote(&url);
    let tag = git_out(&work, &["rev-parse", "v1"]);
    assert_eq!(
        listed,
        format!(
            "{main}\tHEAD\n{main}\trefs/heads/main\n{tag}\trefs/tags/v1\n{main}\trefs/tags/v1^{{}}"
        )
    );
    for v in ["0", "2"] {
        let dir = tmp.path().join(format!("clone-v{v}"));
        git(
            tmp.path(),
            &[
                "-c",
                &format!("protocol.version={v}"),
                "clone",
                "--quiet",
                "--mirror",
                &url,
                dir.to_str().unwrap(),
            ],
        );
        assert_eq!(
            git_out(&dir, &["rev-parse", "--show-object-format"]),
            "sha256",
            "v{v}"
        );
        assert_eq!(git_out(&dir, &["rev-parse", "main"]), main);
        assert_eq!(refs_and_objects(&dir), refs_and_objects(&work));
        fsck(&dir);
    }
    // A second push (a thin pack against what the server has) and a fetch.
    commit_files(&work, &[("c.txt", "more\n")], "more");
    git(&work, &["push", "--quiet", &url, "main"]);
    let fetched = tmp.path().join("clone-v2");
    git(
        &fetched,
        &["fetch", "--quiet", &url, "+refs/heads/*:refs/heads/*"],
    );
    assert_eq!(
        git_out(&fetched, &["rev-parse", "main"]),
        git_out(&work, &["rev-parse", "main"])
    );
    fsck(&fetched);
    // A shallow clone.
    let shallow = tmp.path().join("shallow");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--depth=1",
            &url,
            shallow.to_str().unwrap(),
        ],
    );
    assert_eq!(git_out(&shallow, &["rev-list", "--count", "HEAD"]), "1");
}

#[test]
fn a_sha1_client_and_a_sha256_repository_refuse_each_other() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let wide = tmp.path().join("wide");
    init_sha256(&wide);
    commit_files(&wide, &[("a", "1\n")], "one");
    let url = server.url("wide");
    git(&wide, &["push", "--quiet", &url, "main"]);
    let before = ls_remote(&url);
    // A SHA-1 repository pushing to the SHA-256 one: git's client refuses.
    let narrow = tmp.path().join("narrow");
    init_repo(&narrow);
    commit_files(&narrow, &[("b", "2\n")], "two");
    let err = git_fail(&narrow, &["push", &url, "main:refs/heads/other"]);
    assert!(
        err.contains("the receiving end does not support this repository's hash algorithm"),
        "{err}"
    );
    // ... and a SHA-1 repository fetching from it.
    let err = git_fail(&narrow, &["fetch", &url, "main"]);
    assert!(err.contains("mismatched algorithms"), "{err}");
    assert_eq!(ls_remote(&url), before, "nothing stored");
    // The other way: a SHA-256 client and a SHA-1 repository.
    let url1 = server.url("narrow");
    git(&narrow, &["push", "--quiet", &url1, "main"]);
    let err = git_fail(&wide, &["push", &url1, "main:refs/heads/wide"]);
    assert!(
        err.contains("the receiving end does not support this repository's hash algorithm"),
        "{err}"
    );
    let listed = ls_remote(&url1);
    assert!(!listed.contains("refs/heads/wide"), "{listed}");
}
