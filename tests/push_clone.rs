//! Pushing into a new repository and cloning it back: the first push, a
//! large generated history pushed with `--mirror`, and a chain of small
//! incremental pushes that send thin packs.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::*;

/// A small repository with an executable and a symlink survives a push and
/// a clone bit for bit: modes, link target, HEAD.
#[test]
fn first_push_then_clone() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    fs::create_dir_all(work.join("bin")).unwrap();
    fs::write(work.join("bin/run.sh"), "#!/bin/sh\necho hello\n").unwrap();
    fs::set_permissions(work.join("bin/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("bin/run.sh", work.join("run")).unwrap();
    let tip = commit_files(
        &work,
        &[
            ("README.md", "# hello\n"),
            ("src/deep/nested/lib.rs", "pub fn f() {}\n"),
        ],
        "first",
    );
    let url = server.url("first");

    git(&work, &["push", &url, "main"]);

    // canonical: "<tip>\tHEAD\n<tip>\trefs/heads/main"
    assert_eq!(
        ls_remote(&url),
        format!("{tip}\tHEAD\n{tip}\trefs/heads/main")
    );
    let symref = git_out(tmp.path(), &["ls-remote", "--symref", &url, "HEAD"]);
    assert!(symref.starts_with("ref: refs/heads/main\tHEAD"), "{symref}");

    git(tmp.path(), &["clone", "--quiet", &url, "clone"]);
    let clone = tmp.path().join("clone");
    assert_eq!(
        git_out(&clone, &["symbolic-ref", "HEAD"]),
        "refs/heads/main"
    );
    assert_eq!(git_out(&clone, &["rev-parse", "HEAD"]), tip);
    let staged = git_out(&clone, &["ls-files", "-s"]);
    assert!(
        staged
            .lines()
            .any(|l| l.starts_with("100755 ") && l.ends_with("\tbin/run.sh")),
        "{staged}"
    );
    assert!(
        staged
            .lines()
            .any(|l| l.starts_with("120000 ") && l.ends_with("\trun")),
        "{staged}"
    );
    let mode = fs::metadata(clone.join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "exec bits lost: {mode:o}");
    let meta = fs::symlink_metadata(clone.join("run")).unwrap();
    assert!(meta.file_type().is_symlink());
    assert_eq!(
        fs::read_link(clone.join("run")).unwrap().to_str(),
        Some("bin/run.sh")
    );
    assert_eq!(
        fs::read_to_string(clone.join("src/deep/nested/lib.rs")).unwrap(),
        "pub fn f() {}\n"
    );
    fsck(&clone);
}

/// The repository lives in the store, not in the server process: a new
/// server on the same store serves what the old one accepted.
#[test]
fn pushed_data_survives_a_restart() {
    let mut server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 5,
            commits: 80,
            ..Default::default()
        },
    );
    git(&src, &["push", "--quiet", "--mirror", &server.url("kept")]);
    assert!(
        !server.store_keys().is_empty(),
        "nothing was written to the store"
    );

    server.restart();
    let url = server.url("kept");
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "dst.git"],
    );
    let dst = tmp.path().join("dst.git");
    assert_eq!(refs_and_objects(&src), refs_and_objects(&dst));
    fsck(&dst);
    // and it takes pushes again
    let work = tmp.path().join("work");
    git(tmp.path(), &["clone", "--quiet", &url, "work"]);
    let tip = commit_files(&work, &[("after-restart.txt", "yes\n")], "after restart");
    git(&work, &["push", "--quiet", "origin", "main"]);
    assert!(ls_remote(&url).contains(&format!("{tip}\trefs/heads/main")));
}

/// 2,000 generated commits (merges, renames, binaries, annotated and
/// lightweight tags) pushed with `--mirror` come back identical.
#[test]
fn mirror_roundtrip_of_a_large_history() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    let summary = histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 42,
            commits: 2_000,
            ..Default::default()
        },
    );
    assert!(
        summary.merges > 50 && summary.renames > 50 && summary.tags > 50,
        "{summary:?}"
    );
    let url = server.url("big");

    git(&src, &["push", "--quiet", "--mirror", &url]);
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "dst.git"],
    );

    let dst = tmp.path().join("dst.git");
    let (src_refs, src_objects) = refs_and_objects(&src);
    let (dst_refs, dst_objects) = refs_and_objects(&dst);
    assert_eq!(src_refs, dst_refs, "refs differ after the round trip");
    assert!(
        src_objects == dst_objects,
        "objects differ after the round trip"
    );
    assert_eq!(git_out(&dst, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    fsck(&dst);
}

/// Several pushes of delta-friendly edits to existing files: each sends a
/// thin pack (deltas against objects only the server has), and the server
/// completes it. A clone and an incremental fetch see every push.
#[test]
fn incremental_pushes_send_thin_packs() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("seed.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 7,
            commits: 60,
            branches: 2,
            ..Default::default()
        },
    );
    let url = server.url("incr");
    git(&src, &["push", "--quiet", &url, "main"]);

    git(tmp.path(), &["clone", "--quiet", &url, "work"]);
    git(tmp.path(), &["clone", "--quiet", &url, "follower"]);
    let work = tmp.path().join("work");
    let follower = tmp.path().join("follower");
    let trace = tmp.path().join("trace.log");
    let trace_s = trace.to_str().unwrap();

    let big_text = |n: usize, tweak: usize| -> String {
        (0..n)
            .map(|i| {
                if i % 97 == tweak % 97 {
                    format!("line {i} changed in round {tweak}\n")
                } else {
                    format!("line {i}: the quick brown fox jumps over the lazy dog\n")
                }
            })
            .collect()
    };
    // a file the server has, large enough that a delta is much smaller
    commit_files(&work, &[("docs/big.txt", &big_text(2000, 0))], "big file");
    git(&work, &["push", "--quiet", "origin", "main"]);

    for round in 1..=4 {
        let before = git_out(&work, &["rev-parse", "HEAD"]);
        let tip = commit_files(
            &work,
            &[
                ("docs/big.txt", &big_text(2000, round)),
                ("README.md", &format!("# readme, round {round}\n")),
            ],
            &format!("round {round}"),
        );
        fs::remove_file(&trace).ok();
        git_env(
            &work,
            &["push", "--quiet", "origin", "main"],
            &[("GIT_TRACE", trace_s)],
        );

        // git push ran `pack-objects --thin` (a server advertising no-thin
        // would turn it off) ...
        let log = fs::read_to_string(&trace).unwrap();
        let pack_objects = log
            .lines()
            .find(|l| l.contains("pack-objects"))
            .unwrap_or_else(|| panic!("no pack-objects in the trace:\n{log}"));
        assert!(pack_objects.contains("--thin"), "{pack_objects}");
        // ... and the same pack, made again, really is thin: a REF_DELTA whose
        // base is not in the pack
        let mut po = git_cmd(&work)
            .args([
                "pack-objects",
                "--revs",
                "--thin",
                "--stdout",
                "--delta-base-offset",
                "-q",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        write!(po.stdin.take().unwrap(), "{tip}\n^{before}\n").unwrap();
        let pack = po.wait_with_output().unwrap().stdout;
        let entries = parse_pack(&pack);
        assert!(
            entries.iter().any(|e| e.kind == 7),
            "round {round}: the pushed pack had no REF_DELTA: {entries:?}"
        );

        assert_eq!(
            ls_remote(&url)
                .lines()
                .find(|l| l.ends_with("\trefs/heads/main")),
            Some(format!("{tip}\trefs/heads/main").as_str())
        );
        git(&follower, &["pull", "--quiet", "--ff-only"]);
        assert_eq!(git_out(&follower, &["rev-parse", "HEAD"]), tip);
    }
    fsck(&follower);
    assert_eq!(
        fs::read_to_string(follower.join("docs/big.txt")).unwrap(),
        big_text(2000, 4)
    );
    git(
        tmp.path(),
        &["clone", "--quiet", "--bare", &url, "fresh.git"],
    );
    let fresh = tmp.path().join("fresh.git");
    assert_eq!(
        git_out(&fresh, &["rev-parse", "main"]),
        git_out(&work, &["rev-parse", "HEAD"])
    );
    fsck(&fresh);
}

/// A blob no delta is based on is copied from the spool into its container in
/// 64 KiB pieces: a multi-piece record must come back byte for byte.
#[test]
fn large_blobs_round_trip() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    init_repo(&work);
    // 3 MiB of incompressible bytes (a deterministic xorshift stream).
    let data = noise(3 << 20, 0x9e37_79b9_7f4a_7c15);
    fs::write(work.join("big.bin"), &data).unwrap();
    git(&work, &["add", "big.bin"]);
    git(&work, &["commit", "-q", "-m", "big"]);
    git(
        &work,
        &[
            "push",
            "--quiet",
            &server.url("big"),
            "HEAD:refs/heads/main",
        ],
    );
    let clone = dir.path().join("c");
    git(
        dir.path(),
        &[
            "clone",
            "--quiet",
            &server.url("big"),
            clone.to_str().unwrap(),
        ],
    );
    fsck(&clone);
    assert_eq!(fs::read(clone.join("big.bin")).unwrap(), data);
}
