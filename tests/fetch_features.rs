//! Fetch features beyond a plain clone: partial-clone filters with lazy
//! fetches afterwards, tag auto-following (include-tag), and ls-refs prefixes.

mod common;

use common::*;

fn pushed(tmp: &std::path::Path, url: &str) -> std::path::PathBuf {
    let src = tmp.join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 11,
            commits: 80,
            ..Default::default()
        },
    );
    git(&src, &["push", "--quiet", "--mirror", url]);
    src
}

/// (objects present, objects known to be missing) reachable from all refs.
fn object_counts(dir: &std::path::Path) -> (usize, usize) {
    let out = git_out(dir, &["rev-list", "--objects", "--all", "--missing=print"]);
    let missing = out.lines().filter(|l| l.starts_with('?')).count();
    (out.lines().count() - missing, missing)
}

/// `--filter=blob:none`, `blob:limit=<n>` and `tree:0` clones leave objects
/// out, and a later checkout fetches what it needs (wants of single objects).
#[test]
fn partial_clones_and_lazy_fetches() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("partial");
    let src = pushed(tmp.path(), &url);
    let full = git_out(&src, &["rev-list", "--objects", "--all"])
        .lines()
        .count();
    for spec in ["blob:none", "blob:limit=200", "tree:0"] {
        for v in ["0", "2"] {
            let name = format!("c-{}-{v}", spec.replace([':', '='], "_"));
            let pv = format!("protocol.version={v}");
            git(
                tmp.path(),
                &[
                    "-c",
                    &pv,
                    "clone",
                    "--quiet",
                    "--no-checkout",
                    "--filter",
                    spec,
                    &url,
                    &name,
                ],
            );
            let dir = tmp.path().join(&name);
            let (present, missing) = object_counts(&dir);
            assert!(missing > 0, "{spec} over v{v} sent every object");
            assert!(present < full, "{spec} over v{v} sent every object");
            // The commits are all there.
            assert_eq!(
                git_out(&dir, &["rev-list", "--count", "--all"]),
                git_out(&src, &["rev-list", "--count", "--all"])
            );
            // Lazy fetches: a checkout and reading an old blob work.
            git(&dir, &["-c", &pv, "checkout", "--quiet", "main"]);
            let first = git_out(&dir, &["rev-list", "--max-parents=0", "main"]);
            git(
                &dir,
                &["-c", &pv, "ls-tree", "-r", first.lines().next().unwrap()],
            );
            assert!(
                object_counts(&dir).0 > present,
                "{spec} over v{v}: checkout fetched nothing"
            );
            git(&dir, &["fsck", "--connectivity-only"]);
        }
    }
}

/// A plain `git fetch` brings a new annotated tag along with the commit it
/// points at (include-tag), over both protocol versions.
#[test]
fn tags_are_auto_followed() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("follow");
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "1\n")], "one");
    git(&work, &["push", "--quiet", &url, "main"]);
    for v in ["0", "2"] {
        let name = format!("c{v}");
        let pv = format!("protocol.version={v}");
        git(tmp.path(), &["-c", &pv, "clone", "--quiet", &url, &name]);
        commit_files(&work, &[("a", &format!("{v}\n"))], "next");
        let tag = format!("v-{v}");
        git(&work, &["tag", "-a", &tag, "-m", "release"]);
        git(&work, &["push", "--quiet", &url, "main", &tag]);
        let dir = tmp.path().join(&name);
        git(&dir, &["-c", &pv, "fetch", "--quiet", "origin"]);
        assert_eq!(
            git_out(&dir, &["rev-parse", &format!("{tag}^{{commit}}")]),
            git_out(&work, &["rev-parse", "main"]),
            "tag {tag} not followed over v{v}"
        );
    }
}

/// `ls-refs` with `ref-prefix` answers only the refs under the prefix
/// (checked on the raw v2 response: git's client filters again locally).
#[test]
fn ls_refs_with_a_prefix() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("prefix");
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "1\n")], "one");
    git(&work, &["tag", "-a", "v1", "-m", "v1"]);
    git(
        &work,
        &[
            "push",
            "--quiet",
            &url,
            "main",
            "v1",
            "main:refs/heads/other",
        ],
    );
    let mut body = pkt(b"command=ls-refs\n");
    body.extend_from_slice(b"0001");
    body.extend(pkt(b"peel\n"));
    body.extend(pkt(b"ref-prefix refs/tags/\n"));
    body.extend_from_slice(FLUSH);
    let resp = http(
        server.port(),
        "POST",
        "/prefix.git/git-upload-pack",
        &[
            ("Content-Type", "application/x-git-upload-pack-request"),
            ("Git-Protocol", "version=2"),
        ],
        &body,
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let lines: Vec<String> = pkt_lines(&resp.body)
        .into_iter()
        .filter_map(|p| match p {
            Pkt::Data(d) => Some(String::from_utf8_lossy(&d).trim_end().to_string()),
            _ => None,
        })
        .collect();
    let tag = git_out(&work, &["rev-parse", "v1"]);
    let commit = git_out(&work, &["rev-parse", "main"]);
    assert_eq!(lines, [format!("{tag} refs/tags/v1 peeled:{commit}")]);
    // Through git itself, over v2.
    let heads = git_out(
        &work,
        &["-c", "protocol.version=2", "ls-remote", "--heads", &url],
    );
    assert_eq!(heads.lines().count(), 2, "{heads}");
}

/// A want the repository does not have gets git's ERR packet, which the client prints.
#[test]
fn want_of_an_absent_object() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("wants");
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "1\n")], "one");
    git(&work, &["push", "--quiet", &url, "main"]);
    for v in ["0", "2"] {
        let err = git_fail(
            &work,
            &[
                "-c",
                &format!("protocol.version={v}"),
                "fetch",
                &url,
                "1111111111111111111111111111111111111111",
            ],
        );
        // canonical: "fatal: remote error: upload-pack: not our ref 1111…"
        assert!(
            err.contains(
                "remote error: upload-pack: not our ref 1111111111111111111111111111111111111111"
            ),
            "v{v}: {err}"
        );
    }
}
