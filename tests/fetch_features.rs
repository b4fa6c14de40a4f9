//! Fetch features beyond a plain clone: partial-clone filters with lazy
//! fetches afterwards, tag auto-following (include-tag), shallow clones
//! (each of these over smart HTTP and SSH from one body: `over_http::…`,
//! `over_ssh::…`), and ls-refs prefixes and wants the server refuses (on
//! raw HTTP requests).

mod common;

use common::*;

fn pushed(r: &Remote, tmp: &std::path::Path, url: &str) -> std::path::PathBuf {
    let src = tmp.join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 11,
            commits: 80,
            ..Default::default()
        },
    );
    r.git(&src, &["push", "--quiet", "--mirror", url]);
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
fn partial_clones_and_lazy_fetches(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("partial");
    let src = pushed(r, tmp.path(), &url);
    let full = git_out(&src, &["rev-list", "--objects", "--all"])
        .lines()
        .count();
    for spec in ["blob:none", "blob:limit=200", "tree:0"] {
        for v in ["0", "2"] {
            let name = format!("c-{}-{v}", spec.replace([':', '='], "_"));
            let pv = format!("protocol.version={v}");
            r.git(
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
            r.git(&dir, &["-c", &pv, "checkout", "--quiet", "main"]);
            let first = git_out(&dir, &["rev-list", "--max-parents=0", "main"]);
            r.git(
                &dir,
                &["-c", &pv, "ls-tree", "-r", first.lines().next().unwrap()],
            );
            assert!(
                object_counts(&dir).0 > present,
                "{spec} over v{v}: checkout fetched nothing"
            );
            r.git(&dir, &["fsck", "--connectivity-only"]);
        }
    }
}

/// A plain `git fetch` brings a new annotated tag along with the commit it
/// points at (include-tag), over both protocol versions.
fn tags_are_auto_followed(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("follow");
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "1\n")], "one");
    r.git(&work, &["push", "--quiet", &url, "main"]);
    for v in ["0", "2"] {
        let name = format!("c{v}");
        let pv = format!("protocol.version={v}");
        r.git(tmp.path(), &["-c", &pv, "clone", "--quiet", &url, &name]);
        commit_files(&work, &[("a", &format!("{v}\n"))], "next");
        let tag = format!("v-{v}");
        r.git(&work, &["tag", "-a", &tag, "-m", "release"]);
        r.git(&work, &["push", "--quiet", &url, "main", &tag]);
        let dir = tmp.path().join(&name);
        r.git(&dir, &["-c", &pv, "fetch", "--quiet", "origin"]);
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
    let resp = post_upload_pack_v2(&server, "prefix", &body);
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

/// A v2 command in the other object format gets serve.c's words (as an
/// ERR packet the client prints): ls-refs and fetch alike; the same
/// command naming SHA-1, or no format, is served.
#[test]
fn a_v2_command_in_the_other_object_format_is_refused() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("formats");
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "1\n")], "one");
    git(&work, &["push", "--quiet", &url, "main"]);
    let main = git_out(&work, &["rev-parse", "main"]);
    let request = |format: Option<&str>, command: &str, args: &[String]| {
        let mut body = pkt(format!("command={command}\n").as_bytes());
        if let Some(f) = format {
            body.extend(pkt(format!("object-format={f}\n").as_bytes()));
        }
        body.extend_from_slice(b"0001");
        for a in args {
            body.extend(pkt(format!("{a}\n").as_bytes()));
        }
        body.extend_from_slice(FLUSH);
        let resp = post_upload_pack_v2(&server, "formats", &body);
        assert_eq!(resp.status, 200, "{}", resp.text());
        resp.text()
    };
    let fetch_args = [format!("want {main}"), "done".to_owned()];
    for (command, args) in [("ls-refs", &[][..]), ("fetch", &fetch_args[..])] {
        let refused = request(Some("sha256"), command, args);
        assert!(
            refused.contains("ERR mismatched object format: server sha1; client sha256"),
            "{command}: {refused}"
        );
        for served in [
            request(Some("sha1"), command, args),
            request(None, command, args),
        ] {
            assert!(!served.contains("ERR"), "{command}: {served}");
        }
    }
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

/// `git fetch --negotiate-only` sends `wait-for-done` over v2: the server
/// acknowledges the common commits and sends no pack.
#[test]
fn negotiate_only_waits_for_done() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("negotiate");
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "1\n")], "one");
    let remote_tip = commit_files(&work, &[("a", "2\n")], "two");
    git(&work, &["push", "--quiet", &url, "main"]);
    commit_files(&work, &[("a", "3\n")], "local only");
    let out = git_out(
        &work,
        &[
            "-c",
            "protocol.version=2",
            "fetch",
            "--negotiate-only",
            "--negotiation-tip=main",
            &url,
        ],
    );
    // The acknowledged common commits: the remote tip among them, and
    // nothing the server does not have (the local-only commit).
    let acked: Vec<&str> = out.lines().collect();
    assert!(acked.contains(&remote_tip.as_str()), "{out}");
    let local_only = git_out(&work, &["rev-parse", "HEAD"]);
    assert!(!acked.contains(&local_only.as_str()), "{out}");
}

/// An incremental v0 fetch (with `no-done`: the pack follows the final ACK
/// without waiting for "done") brings exactly the new history.
#[test]
fn incremental_v0_fetch_with_no_done() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("nodone");
    let work = tmp.path().join("w");
    init_repo(&work);
    for i in 0..5 {
        commit_files(&work, &[("a", &format!("{i}\n"))], &format!("c{i}"));
    }
    git(&work, &["push", "--quiet", &url, "main"]);
    let clone = tmp.path().join("c");
    git(
        tmp.path(),
        &[
            "-c",
            "protocol.version=0",
            "clone",
            "--quiet",
            &url,
            clone.to_str().unwrap(),
        ],
    );
    for i in 5..9 {
        commit_files(&work, &[("a", &format!("{i}\n"))], &format!("c{i}"));
    }
    git(&work, &["push", "--quiet", &url, "main"]);
    let out = git_env(
        &clone,
        &["-c", "protocol.version=0", "fetch", "--quiet", "origin"],
        &[("GIT_TRACE_PACKET", "1")],
    );
    let trace = String::from_utf8_lossy(&out.stderr);
    assert!(trace.contains("no-done"), "the client did not use no-done");
    assert_eq!(
        git_out(&clone, &["rev-parse", "origin/main"]),
        git_out(&work, &["rev-parse", "main"])
    );
    fsck(&clone);
}

/// Request bodies gzip-encoded (as git sends large upload-pack requests) and
/// sent after `Expect: 100-continue` work for both services.
#[test]
fn gzip_bodies_and_expect_continue() {
    use std::io::Write;
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("gz");
    let work = tmp.path().join("w");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a", "1\n")], "one");
    git(&work, &["push", "--quiet", &url, "main"]);
    let gzip = |data: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    };
    // upload-pack v0: want main, done.
    let mut req = pkt(format!("want {c1} side-band-64k ofs-delta\n").as_bytes());
    req.extend_from_slice(FLUSH);
    req.extend(pkt(b"done\n"));
    let resp = http(
        server.port(),
        "POST",
        "/gz.git/git-upload-pack",
        &[
            ("Content-Type", "application/x-git-upload-pack-request"),
            ("Content-Encoding", "gzip"),
            ("Expect", "100-continue"),
        ],
        &gzip(&req),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(
        resp.body.windows(4).any(|w| w == b"PACK"),
        "no pack in the answer"
    );
    // receive-pack: a new branch at c1, empty pack.
    let body = receive_pack_request(
        &[(ZERO_OID, &c1, "refs/heads/gz")],
        "report-status",
        Some(&PackBuilder::default().build()),
    );
    let resp = http(
        server.port(),
        "POST",
        "/gz.git/git-receive-pack",
        &[
            ("Content-Type", "application/x-git-receive-pack-request"),
            ("Content-Encoding", "gzip"),
            ("Expect", "100-continue"),
        ],
        &gzip(&body),
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(report_status(&resp.body).refs, ["ok refs/heads/gz"]);
    // A body that claims gzip but is not: a clear 400, nothing changed.
    let resp = http(
        server.port(),
        "POST",
        "/gz.git/git-receive-pack",
        &[
            ("Content-Type", "application/x-git-receive-pack-request"),
            ("Content-Encoding", "gzip"),
        ],
        b"this is not gzip",
    );
    assert_eq!(resp.status, 400, "{}", resp.text());
    assert!(ls_remote(&url).contains("refs/heads/gz"));
}

/// Policy for wants no ref advertises: any object the repository has may be
/// fetched by id (as `uploadpack.allowAnySHA1InWant`), over v0 and v2.
#[test]
fn wants_of_unadvertised_objects() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("anysha");
    let work = tmp.path().join("w");
    init_repo(&work);
    let old = commit_files(&work, &[("a", "1\n")], "old");
    commit_files(&work, &[("a", "2\n")], "new");
    git(&work, &["push", "--quiet", &url, "main"]);
    // A commit that no ref points at any more, still in the repository.
    git(
        &work,
        &[
            "push",
            "--quiet",
            "--force",
            &url,
            &format!("{old}:refs/heads/tmp"),
        ],
    );
    git(&work, &["push", "--quiet", &url, ":refs/heads/tmp"]);
    for v in ["0", "2"] {
        let dir = tmp.path().join(format!("f{v}"));
        init_repo(&dir);
        git(
            &dir,
            &[
                "-c",
                &format!("protocol.version={v}"),
                "fetch",
                "--quiet",
                &url,
                &old,
            ],
        );
        assert_eq!(git_out(&dir, &["rev-parse", "FETCH_HEAD"]), old);
    }
}

/// A shallow clone of a repository of one commit (no parent to cut).
fn shallow_clone_of_a_single_commit(r: &Remote) {
    let tmp = tempfile::tempdir().unwrap();
    let url = r.url("single");
    let work = tmp.path().join("w");
    init_repo(&work);
    let only = commit_files(&work, &[("a", "1\n")], "only");
    r.git(&work, &["push", "--quiet", &url, "main"]);
    for v in ["0", "2"] {
        let dir = tmp.path().join(format!("s{v}"));
        r.git(
            tmp.path(),
            &[
                "-c",
                &format!("protocol.version={v}"),
                "clone",
                "--quiet",
                "--depth",
                "1",
                &url,
                dir.to_str().unwrap(),
            ],
        );
        assert_eq!(git_out(&dir, &["rev-parse", "HEAD"]), only);
        assert_eq!(git_out(&dir, &["rev-list", "--count", "HEAD"]), "1");
        fsck(&dir);
    }
}

crate::over_both_transports!(
    partial_clones_and_lazy_fetches,
    tags_are_auto_followed,
    shallow_clone_of_a_single_commit,
);
