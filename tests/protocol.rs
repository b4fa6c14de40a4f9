//! The wire: ref advertisements as bytes, clones over protocol v0, v1 and
//! v2 giving the same result, shallow clones and deepening.

mod common;

use std::path::Path;

use common::*;

/// A generated history with branches, merges and both kinds of tag, pushed
/// to `url`; returns the source repository.
fn pushed_history(tmp: &Path, url: &str, commits: usize) -> std::path::PathBuf {
    let src = tmp.join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 3,
            commits,
            ..Default::default()
        },
    );
    git(&src, &["push", "--quiet", "--mirror", url]);
    src
}

/// `git clone` with `protocol.version` 0, 1 and 2: identical refs and
/// objects, identical to the source; the trace shows which was spoken.
#[test]
fn clones_over_v0_v1_v2_are_identical() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("proto");
    let src = pushed_history(tmp.path(), &url, 300);
    let expected = refs_and_objects(&src);

    for v in ["0", "1", "2"] {
        let name = format!("v{v}.git");
        let trace = tmp.path().join(format!("packet-{v}.log"));
        git_env(
            tmp.path(),
            &[
                "-c",
                &format!("protocol.version={v}"),
                "clone",
                "--quiet",
                "--mirror",
                &url,
                &name,
            ],
            &[("GIT_TRACE_PACKET", trace.to_str().unwrap())],
        );
        let log = std::fs::read_to_string(&trace).unwrap();
        let spoke_v2 = log.contains("< version 2");
        assert_eq!(
            spoke_v2,
            v == "2",
            "protocol.version={v} but the trace says otherwise"
        );
        let dir = tmp.path().join(&name);
        assert_eq!(
            refs_and_objects(&dir),
            expected,
            "protocol v{v} clone differs"
        );
        assert_eq!(git_out(&dir, &["symbolic-ref", "HEAD"]), "refs/heads/main");
        fsck(&dir);
    }

    // a plain (non-mirror) clone checks out the same worktree either way
    for v in ["0", "2"] {
        let name = format!("work{v}");
        git(
            tmp.path(),
            &[
                "-c",
                &format!("protocol.version={v}"),
                "clone",
                "--quiet",
                &url,
                &name,
            ],
        );
    }
    assert_eq!(
        git_out(&tmp.path().join("work0"), &["ls-files", "-s"]),
        git_out(&tmp.path().join("work2"), &["ls-files", "-s"])
    );
    // v2 ls-remote with a ref prefix
    let tags = git_out(
        tmp.path(),
        &[
            "-c",
            "protocol.version=2",
            "ls-remote",
            "--tags",
            &url,
            "refs/tags/v1.*",
        ],
    );
    assert!(tags.lines().count() >= 2, "{tags}");
    assert!(
        tags.lines().all(|l| l.contains("\trefs/tags/v1.")),
        "{tags}"
    );
    assert!(
        tags.lines().any(|l| l.ends_with("^{}")),
        "peeled tags missing: {tags}"
    );
}

/// The v0 advertisements over smart HTTP, byte for byte where git is
/// strict about it: service header, flush, capabilities after NUL on the
/// first ref, HEAD symref, peeled tags, final flush.
#[test]
fn advertisements() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("adv");
    let src = pushed_history(tmp.path(), &url, 60);
    let main = git_out(&src, &["rev-parse", "main"]);

    let resp = http(
        server.port(),
        "GET",
        "/adv.git/info/refs?service=git-upload-pack",
        &[],
        b"",
    );
    assert_eq!(resp.status, 200);
    // canonical: application/x-git-upload-pack-advertisement
    assert_eq!(
        resp.header("content-type"),
        Some("application/x-git-upload-pack-advertisement")
    );
    let lines = pkt_lines(&resp.body);
    assert_eq!(lines[0], Pkt::Data(b"# service=git-upload-pack\n".to_vec()));
    assert_eq!(lines[1], Pkt::Flush);
    assert_eq!(lines.last(), Some(&Pkt::Flush));
    // canonical: "<main> HEAD\0multi_ack thin-pack side-band side-band-64k
    // ofs-delta shallow deepen-since deepen-not deepen-relative no-progress
    // include-tag multi_ack_detailed no-done symref=HEAD:refs/heads/main
    // object-format=sha1 agent=git/2.47.3\n"
    let Pkt::Data(first) = &lines[2] else {
        panic!("no ref line: {lines:?}")
    };
    let nul = first
        .iter()
        .position(|&b| b == 0)
        .expect("capabilities after NUL");
    assert_eq!(&first[..nul], format!("{main} HEAD").as_bytes());
    let caps = String::from_utf8_lossy(&first[nul + 1..]).into_owned();
    let caps: Vec<&str> = caps.split_whitespace().collect();
    for cap in [
        "symref=HEAD:refs/heads/main",
        "side-band-64k",
        "ofs-delta",
        "thin-pack",
        "shallow",
        "multi_ack_detailed",
        "include-tag",
    ] {
        assert!(caps.contains(&cap), "missing {cap} in {caps:?}");
    }
    let refs: Vec<String> = lines[3..]
        .iter()
        .filter_map(|p| match p {
            Pkt::Data(d) => Some(String::from_utf8_lossy(d).into_owned()),
            _ => None,
        })
        .collect();
    assert!(refs.iter().all(|l| l.ends_with('\n')), "{refs:?}");
    assert!(
        refs.contains(&format!("{main} refs/heads/main\n")),
        "{refs:?}"
    );
    let annotated = git_out(
        &src,
        &[
            "for-each-ref",
            "--format=%(refname) %(*objectname)",
            "refs/tags/v1.*",
        ],
    );
    for l in annotated.lines() {
        let (name, peeled) = l.split_once(' ').unwrap();
        let line = format!("{peeled} {name}^{{}}\n");
        assert!(refs.contains(&line), "missing peeled line {line:?}");
    }
    // refs are sorted by name, and the peeled line follows its tag
    let names: Vec<&str> = refs.iter().map(|l| l[41..].trim_end()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);

    // v2: canonical "version 2\n", "agent=git/2.47.3\n", "ls-refs=unborn\n",
    // "fetch=shallow wait-for-done\n", "server-option\n",
    // "object-format=sha1\n", flush -- and no "# service" header
    let resp = http(
        server.port(),
        "GET",
        "/adv.git/info/refs?service=git-upload-pack",
        &[("Git-Protocol", "version=2")],
        b"",
    );
    assert_eq!(resp.status, 200);
    let lines = pkt_lines(&resp.body);
    assert_eq!(lines[0], Pkt::Data(b"version 2\n".to_vec()), "{lines:?}");
    let text: Vec<String> = lines
        .iter()
        .filter_map(|p| match p {
            Pkt::Data(d) => Some(String::from_utf8_lossy(d).trim_end().to_owned()),
            _ => None,
        })
        .collect();
    assert!(
        text.iter()
            .any(|l| l == "ls-refs" || l.starts_with("ls-refs=")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|l| l == "fetch" || l.starts_with("fetch=")),
        "{text:?}"
    );
    assert!(text.iter().any(|l| l.contains("shallow")), "{text:?}");
    assert_eq!(lines.last(), Some(&Pkt::Flush));

    // receive-pack: canonical "<main> refs/heads/main\0report-status
    // report-status-v2 delete-refs side-band-64k quiet atomic ofs-delta
    // push-options object-format=sha1 agent=git/2.47.3\n"
    let resp = http(
        server.port(),
        "GET",
        "/adv.git/info/refs?service=git-receive-pack",
        &[],
        b"",
    );
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("content-type"),
        Some("application/x-git-receive-pack-advertisement")
    );
    let lines = pkt_lines(&resp.body);
    assert_eq!(
        lines[0],
        Pkt::Data(b"# service=git-receive-pack\n".to_vec())
    );
    assert_eq!(lines[1], Pkt::Flush);
    let Pkt::Data(first) = &lines[2] else {
        panic!("no ref line: {lines:?}")
    };
    let nul = first
        .iter()
        .position(|&b| b == 0)
        .expect("capabilities after NUL");
    let caps = String::from_utf8_lossy(&first[nul + 1..]).into_owned();
    let caps: Vec<&str> = caps.split_whitespace().collect();
    for cap in [
        "report-status",
        "delete-refs",
        "side-band-64k",
        "atomic",
        "ofs-delta",
        "push-options",
    ] {
        assert!(caps.contains(&cap), "missing {cap} in {caps:?}");
    }
    assert!(!caps.contains(&"no-thin"), "{caps:?}");
}

/// A repository that exists but has no refs advertises `capabilities^{}`
/// for receive-pack (what `git push` to a new repository reads).
#[test]
fn empty_repository_advertisement() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("empty");
    // create it with a tag only, then delete the tag. (A first branch push
    // would become HEAD, and deleting the current branch is refused, see
    // push_refs.rs; canonical git keeps HEAD at `main` instead.)
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("x", "x\n")], "x");
    git(&work, &["push", "--quiet", &url, "main:refs/tags/t"]);
    git(&work, &["push", "--quiet", &url, ":refs/tags/t"]);
    assert_eq!(ls_remote(&url), "");

    let resp = http(
        server.port(),
        "GET",
        "/empty.git/info/refs?service=git-receive-pack",
        &[],
        b"",
    );
    assert_eq!(resp.status, 200);
    let lines = pkt_lines(&resp.body);
    // canonical: "0000000000000000000000000000000000000000 capabilities^{}\0report-status ..."
    let Pkt::Data(first) = &lines[2] else {
        panic!("no capabilities line: {lines:?}")
    };
    assert!(
        first.starts_with(format!("{ZERO_OID} capabilities^{{}}\0").as_bytes()),
        "{:?}",
        String::from_utf8_lossy(first)
    );
    // and it can be pushed to again and cloned
    git(&work, &["push", "--quiet", &url, "main"]);
    git(tmp.path(), &["clone", "--quiet", &url, "again"]);
}

/// `--depth 1` gives one commit; `--deepen` and `--unshallow` fetch the
/// rest, over v2 and v0.
#[test]
fn shallow_clone_and_deepen() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("shallow");
    let src = pushed_history(tmp.path(), &url, 120);
    let total = git_out(&src, &["rev-list", "--count", "main"]);

    for v in ["2", "0"] {
        let name = format!("s{v}");
        let pv = format!("protocol.version={v}");
        git(
            tmp.path(),
            &["-c", &pv, "clone", "--quiet", "--depth", "1", &url, &name],
        );
        let dir = tmp.path().join(&name);
        assert_eq!(git_out(&dir, &["rev-list", "--count", "HEAD"]), "1");
        assert!(dir.join(".git/shallow").exists());
        git(&dir, &["-c", &pv, "fetch", "--quiet", "--deepen", "3"]);
        assert_eq!(
            git_out(&dir, &["rev-list", "--count", "--first-parent", "HEAD"]),
            "4"
        );
        // A plain fetch into the shallow clone after a new push (the client
        // sends its shallow lines without deepening).
        let extra = tmp.path().join(format!("extra{v}"));
        git(
            tmp.path(),
            &["clone", "--quiet", &url, extra.to_str().unwrap()],
        );
        commit_files(&extra, &[("late", &format!("late {v}\n"))], "late");
        git(&extra, &["push", "--quiet", &url, "HEAD:main"]);
        git(&dir, &["-c", &pv, "pull", "--quiet", "--ff-only"]);
        assert_eq!(
            git_out(&dir, &["rev-parse", "HEAD"]),
            git_out(&extra, &["rev-parse", "HEAD"])
        );
        git(&dir, &["-c", &pv, "fetch", "--quiet", "--unshallow"]);
        assert!(!dir.join(".git/shallow").exists());
        let total: usize = total.parse().unwrap();
        let v_index = if v == "2" { 1 } else { 2 };
        assert_eq!(
            git_out(&dir, &["rev-list", "--count", "HEAD"]),
            (total + v_index).to_string()
        );
        fsck(&dir);
    }
}

/// One stateless v2 `fetch` round without `done`: the acknowledgments
/// section's lines (a packfile follows only after `ready`).
fn v2_round(server: &Server, repo: &str, want: &str, haves: &[&str]) -> Vec<String> {
    let body = v2_fetch(
        std::iter::once(format!("want {want}")).chain(haves.iter().map(|h| format!("have {h}"))),
    );
    let resp = post_upload_pack_v2(server, repo, &body);
    assert_eq!(resp.status, 200, "{}", resp.text());
    let mut lines = Vec::new();
    for p in pkt_lines(&resp.body) {
        match p {
            Pkt::Data(d) => {
                let line = String::from_utf8_lossy(&d).trim_end().to_owned();
                let end = line == "packfile";
                lines.push(line);
                if end {
                    break;
                }
            }
            Pkt::Flush => break,
            _ => {}
        }
    }
    lines
}

/// As git's upload-pack (`ok_to_give_up`): a common commit that the wanted
/// commit does not reach is acknowledged but the server is not ready (more
/// haves can shrink the pack); once the want reaches a common commit it is.
#[test]
fn negotiation_is_ready_once_every_want_reaches_a_common_commit() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "c1");
    let fork = commit_files(&work, &[("a", "2")], "c2");
    commit_files(&work, &[("a", "3")], "c3");
    let main = commit_files(&work, &[("a", "4")], "c4");
    git(&work, &["checkout", "--quiet", "-b", "topic", &fork]);
    commit_files(&work, &[("t", "1")], "t1");
    let topic = commit_files(&work, &[("t", "2")], "t2");
    let url = server.url("ready");
    git(&work, &["push", "--quiet", &url, "main", "topic"]);

    let unrelated = v2_round(&server, "ready", &topic, &[&main]);
    assert_eq!(
        unrelated,
        ["acknowledgments".to_owned(), format!("ACK {main}")],
        "a common commit the want does not reach"
    );
    let reached = v2_round(&server, "ready", &topic, &[&main, &fork]);
    assert_eq!(
        reached,
        [
            "acknowledgments".to_owned(),
            format!("ACK {main}"),
            format!("ACK {fork}"),
            "ready".to_owned(),
            "packfile".to_owned()
        ],
        "the want reaches a common commit"
    );
    let none = v2_round(
        &server,
        "ready",
        &topic,
        &["0123456789012345678901234567890123456789"],
    );
    assert_eq!(none, ["acknowledgments", "NAK"]);
}

/// A depth beyond git's `int` is refused, as git's upload-pack refuses it
/// ("Invalid deepen"), instead of being taken as a very deep history.
#[test]
fn a_deepen_beyond_an_int_is_refused() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let tip = commit_files(&work, &[("a", "1")], "c1");
    git(&work, &["push", "--quiet", &server.url("deep"), "main"]);
    for (depth, accepted) in [("2147483647", true), ("2147483648", false)] {
        let body = v2_fetch([
            format!("want {tip}"),
            format!("deepen {depth}"),
            "done".into(),
        ]);
        let resp = post_upload_pack_v2(&server, "deep", &body);
        let text = resp.text();
        assert_eq!(
            text.contains("packfile"),
            accepted,
            "deepen {depth}: {} {text}",
            resp.status
        );
    }
}

/// A filter spec the client did not check (a raw request) is refused with
/// git's words in an `ERR` line before anything else, in v2 and v0; a
/// `combine:` of percent-encoded sub-specs is served.
#[test]
fn filter_specs_refused_in_gits_words() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let tip = commit_files(&work, &[("a", "1")], "c1");
    git(&work, &["push", "--quiet", &server.url("filters"), "main"]);
    for (spec, answer) in [
        ("bogus", "ERR invalid filter-spec 'bogus'"),
        ("sparse:oid=main:a", "ERR filter 'sparse:oid' not supported"),
        (
            "object:type=frob",
            "ERR 'frob' for 'object:type=<type>' is not a valid object type",
        ),
        ("combine:blob:none+tree%3A1", "packfile"),
    ] {
        let body = v2_fetch([
            format!("want {tip}"),
            format!("filter {spec}"),
            "done".into(),
        ]);
        let resp = post_upload_pack_v2(&server, "filters", &body);
        assert_eq!(resp.status, 200, "{spec}");
        let text = resp.text();
        assert_eq!(&text[4..4 + answer.len()], answer, "v2 {spec}: {text}");

        let mut v0 = pkt(format!("want {tip} filter\n").as_bytes());
        v0.extend(pkt(format!("filter {spec}\n").as_bytes()));
        v0.extend_from_slice(FLUSH);
        v0.extend(pkt(b"done\n"));
        let resp = http(
            server.port(),
            "POST",
            "/filters.git/git-upload-pack",
            &[("Content-Type", "application/x-git-upload-pack-request")],
            &v0,
        );
        let text = resp.text();
        let expected = if answer == "packfile" { "NAK" } else { answer };
        assert_eq!(&text[4..4 + expected.len()], expected, "v0 {spec}: {text}");
    }
}
