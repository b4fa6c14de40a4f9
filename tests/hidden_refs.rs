//! `serve --hide-refs PREFIX`, git's `transfer.hideRefs`, with the real
//! git. The expected answers are git http-backend's with
//! `transfer.hideRefs=refs/changes` (git 2.47.3, checked by hand with
//! `../shared/tools/git-http-backend-server.py`): hidden refs are in no
//! advertisement (upload-pack v0 and v2 `ls-refs`, receive-pack), a push
//! to one is `! [remote rejected] … (deny updating a hidden ref)`, a
//! deletion `(deny deleting a hidden ref)`, and a hidden tip is still
//! fetched by its id (in v0 over HTTP and in v2 alike).

mod common;

use common::*;

#[test]
fn hidden_namespaces_are_not_advertised_nor_pushed_to() {
    if Server::is_canonical() {
        return;
    }
    let open = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    let c2 = commit_files(&work, &[("a.txt", "two\n")], "two");
    git(
        &work,
        &[
            "push",
            "--quiet",
            &open.url("app"),
            "main",
            &format!("{c1}:refs/changes/01/1/1"),
            &format!("{c1}:refs/changes-x/1"),
        ],
    );
    assert!(ls_remote(&open.url("app")).contains("refs/changes/01/1/1"));
    let server = Server::start_on(
        Some(open.store()),
        &[
            "--no-maintenance",
            "--hide-refs",
            "refs/changes/",
            "--hide-refs",
            "refs/pull",
        ],
        &[],
    );
    let url = server.url("app");
    for version in ["0", "2"] {
        let listed = git_out(
            &work,
            &[
                "-c",
                &format!("protocol.version={version}"),
                "ls-remote",
                &url,
            ],
        );
        assert!(!listed.contains("refs/changes/"), "v{version}: {listed}");
        assert!(listed.contains("refs/changes-x/1"), "v{version}: {listed}");
        assert!(
            listed.contains(&format!("{c2}\trefs/heads/main")),
            "{listed}"
        );
        // A ref-prefix request for the hidden namespace lists nothing.
        let prefixed = git_out(
            &work,
            &[
                "-c",
                &format!("protocol.version={version}"),
                "ls-remote",
                &url,
                "refs/changes/*",
            ],
        );
        assert_eq!(prefixed, "", "v{version}");
    }
    // The push advertisement leaves them out too.
    let adv = http(
        server.port(),
        "GET",
        "/app.git/info/refs?service=git-receive-pack",
        &[],
        b"",
    );
    assert_eq!(adv.status, 200);
    assert!(!adv.text().contains("refs/changes/"), "{}", adv.text());
    // Pushes to hidden refs are refused in git's words.
    let said = git_fail(&work, &["push", &url, "main:refs/changes/02/2/1"]);
    assert!(
        said.contains(
            "! [remote rejected] main -> refs/changes/02/2/1 (deny updating a hidden ref)"
        ),
        "{said}"
    );
    let said = git_fail(&work, &["push", &url, ":refs/changes/01/1/1"]);
    assert!(
        said.contains("! [remote rejected] refs/changes/01/1/1 (deny deleting a hidden ref)"),
        "{said}"
    );
    let said = git_fail(&work, &["push", &url, "main:refs/pull/1/head"]);
    assert!(said.contains("(deny updating a hidden ref)"), "{said}");
    assert!(ls_remote(&open.url("app")).contains(&format!("{c1}\trefs/changes/01/1/1")));
    // A hidden tip is still fetched by its id, as git serves it.
    for version in ["0", "2"] {
        let f = tmp.path().join(format!("fetch-v{version}"));
        init_repo(&f);
        git(
            &f,
            &[
                "-c",
                &format!("protocol.version={version}"),
                "fetch",
                "--quiet",
                &url,
                &c1,
            ],
        );
        assert_eq!(git_out(&f, &["cat-file", "-t", &c1]), "commit");
    }
}

#[test]
fn a_hidden_prefix_outside_refs_is_refused_at_start() {
    let bin = env!("CARGO_BIN_EXE_gitstow");
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--hide-refs", "refs/"])
        .args(["--store", &format!("file://{}", tmp.path().display())])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("want a namespace under refs/"), "{err}");
}

/// `gitstow access hide-refs PATTERN PREFIX…`: a repository's own hidden
/// namespaces, added to the server's `--hide-refs`, seen by a running
/// server within `--access-refresh`, and taken back by an empty list.
#[test]
fn per_repository_hidden_namespaces() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&[
        "--no-maintenance",
        "--access-refresh",
        "1",
        "--hide-refs",
        "refs/pull",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    for repo in ["gerrit/app", "other"] {
        git(
            &work,
            &[
                "push",
                "--quiet",
                &server.url(repo),
                "main",
                &format!("{c1}:refs/changes/01/1/1"),
            ],
        );
    }
    let admin = |args: &[&str]| {
        let out = server.store().admin(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, said) = admin(&["access", "hide-refs", "gerrit/*", "refs/"]);
    assert!(!ok && said.contains("invalid hidden ref prefix"), "{said}");
    let (ok, said) = admin(&["access", "hide-refs", "gerrit/*", "refs/changes/"]);
    assert!(ok, "{said}");
    let (_, shown) = admin(&["access", "show"]);
    assert!(
        shown.contains("hidden in gerrit/*: refs/changes/"),
        "{shown}"
    );
    std::thread::sleep(std::time::Duration::from_millis(1_500)); // --access-refresh 1
    let listed = |repo: &str, version: &str| {
        git_out(
            &work,
            &[
                "-c",
                &format!("protocol.version={version}"),
                "ls-remote",
                &server.url(repo),
            ],
        )
    };
    for version in ["0", "2"] {
        let gerrit = listed("gerrit/app", version);
        assert!(!gerrit.contains("refs/changes/"), "v{version}: {gerrit}");
        assert!(gerrit.contains("refs/heads/main"), "v{version}: {gerrit}");
        let other = listed("other", version);
        assert!(other.contains("refs/changes/01/1/1"), "v{version}: {other}");
    }
    let adv = http(
        server.port(),
        "GET",
        "/gerrit/app.git/info/refs?service=git-receive-pack",
        &[],
        b"",
    );
    assert_eq!(adv.status, 200);
    assert!(!adv.text().contains("refs/changes/"), "{}", adv.text());
    let said = git_fail(
        &work,
        &[
            "push",
            &server.url("gerrit/app"),
            "main:refs/changes/02/2/1",
        ],
    );
    assert!(said.contains("(deny updating a hidden ref)"), "{said}");
    // The server's own prefix still holds in both.
    for repo in ["gerrit/app", "other"] {
        let said = git_fail(&work, &["push", &server.url(repo), "main:refs/pull/1/head"]);
        assert!(
            said.contains("(deny updating a hidden ref)"),
            "{repo}: {said}"
        );
    }
    git(
        &work,
        &[
            "push",
            "--quiet",
            &server.url("other"),
            "main:refs/changes/02/2/1",
        ],
    );
    // A hidden tip is still fetched by its id.
    let f = tmp.path().join("fetch");
    init_repo(&f);
    git(&f, &["fetch", "--quiet", &server.url("gerrit/app"), &c1]);
    // Taken back.
    let (ok, said) = admin(&["access", "hide-refs", "gerrit/*"]);
    assert!(ok, "{said}");
    let (ok, said) = admin(&["access", "hide-refs", "gerrit/*"]);
    assert!(!ok && said.contains("has no hide-refs entry"), "{said}");
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    assert!(listed("gerrit/app", "2").contains("refs/changes/01/1/1"));
    git(
        &work,
        &[
            "push",
            "--quiet",
            &server.url("gerrit/app"),
            "main:refs/changes/02/2/1",
        ],
    );
}
