//! Scale and client variety: 100,000 refs, pushes from shallow clones,
//! SHA-256 repositories, and clients that stall mid-request.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;

/// CPU seconds (user + system) a process has used so far, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// 100,000 refs created in one push are all advertised (v0 and v2), and a
/// v2 `ref-prefix` request gets only the refs it names. The server CPU of the
/// advertisements is printed, not asserted (performance is measured by the benches).
#[test]
fn hundred_thousand_refs() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("many");
    let work = tmp.path().join("w");
    init_repo(&work);
    let tip = commit_files(&work, &[("a", "a\n")], "one");
    git(&work, &["push", "--quiet", &url, "main"]);
    let names: Vec<String> = (0..99_999)
        .map(|i| format!("refs/heads/b/{i:06}"))
        .collect();
    let commands: Vec<(&str, &str, &str)> = names
        .iter()
        .map(|n| (ZERO_OID, tip.as_str(), n.as_str()))
        .collect();
    let body = receive_pack_request(
        &commands,
        "report-status",
        Some(&PackBuilder::default().build()),
    );
    let resp = post_receive_pack(&server, "many", &body);
    let report = report_status(&resp.body);
    assert_eq!(report.unpack, "ok");
    assert_eq!(report.refs.len(), 99_999);
    assert!(
        report.refs.iter().all(|r| r.starts_with("ok ")),
        "{:?}",
        report.refs.iter().find(|r| !r.starts_with("ok "))
    );

    let pid = server.pid().expect("gitstow runs");
    for v in ["0", "2"] {
        let before = cpu_seconds(pid);
        let started = Instant::now();
        let out = git_out(
            &work,
            &["-c", &format!("protocol.version={v}"), "ls-remote", &url],
        );
        println!(
            "ls-remote of 100,001 refs over v{v}: {:.2} s wall, {:.2} s server CPU",
            started.elapsed().as_secs_f64(),
            cpu_seconds(pid) - before
        );
        assert_eq!(out.lines().count(), 100_001, "HEAD, main and the branches");
    }
    let before = cpu_seconds(pid);
    let out = git_out(
        &work,
        &[
            "-c",
            "protocol.version=2",
            "ls-remote",
            &url,
            "refs/heads/main",
        ],
    );
    println!(
        "ls-remote with a prefix: {:.2} s server CPU",
        cpu_seconds(pid) - before
    );
    assert_eq!(out.lines().count(), 1, "{out}");
}

/// A commit made in a shallow clone pushes (the client sends its shallow
/// boundary) and a full clone afterwards is complete.
#[test]
fn push_from_a_shallow_clone() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("shallowpush");
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 51,
            commits: 60,
            ..Default::default()
        },
    );
    git(&src, &["push", "--quiet", "--mirror", &url]);
    let shallow = tmp.path().join("shallow");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--depth",
            "1",
            &url,
            shallow.to_str().unwrap(),
        ],
    );
    git(&shallow, &["config", "user.name", "s"]);
    git(&shallow, &["config", "user.email", "s@example.com"]);
    let tip = commit_files(
        &shallow,
        &[("from-shallow", "yes\n")],
        "from a shallow clone",
    );
    git(&shallow, &["push", "--quiet", "origin", "HEAD:main"]);
    let full = tmp.path().join("full");
    git(
        tmp.path(),
        &["clone", "--quiet", &url, full.to_str().unwrap()],
    );
    assert_eq!(git_out(&full, &["rev-parse", "HEAD"]), tip);
    fsck(&full);
}

/// A SHA-256 repository cannot be pushed into a SHA-1 one: the server
/// advertises the repository's `object-format=sha1`, and git refuses with
/// its own message; nothing is stored. (SHA-256 repositories themselves
/// are pushed, cloned and fetched in `tests/sha256.rs`.)
#[test]
fn a_sha256_push_into_a_sha1_repository_is_refused() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let narrow = tmp.path().join("n");
    init_repo(&narrow);
    commit_files(&narrow, &[("a", "a\n")], "one");
    let url = server.url("narrow");
    git(&narrow, &["push", "--quiet", &url, "main"]);
    let before = ls_remote(&url);
    let work = tmp.path().join("w");
    git(
        tmp.path(),
        &[
            "init",
            "--quiet",
            "--object-format=sha256",
            "-b",
            "main",
            work.to_str().unwrap(),
        ],
    );
    commit_files(&work, &[("a", "a\n")], "one");
    let err = git_fail(&work, &["push", &url, "main:refs/heads/wide"]);
    assert!(
        err.contains("does not support this repository's hash algorithm"),
        "{err}"
    );
    assert_eq!(ls_remote(&url), before, "nothing may be stored");
}

/// A client that stops sending in the middle of its request body is dropped
/// with HTTP 408 after the idle timeout, and the server keeps serving.
#[test]
fn a_stalled_request_body_times_out() {
    let server = Server::start_with(&["--idle-timeout", "1"]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "POST /stall.git/git-receive-pack HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: 100000\r\n\r\n0000"
    )
    .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        started.elapsed() < deadline_for(Duration::from_secs(1)),
        "took {:?}",
        started.elapsed()
    );
    let probe = http(
        server.port(),
        "GET",
        "/stall.git/info/refs?service=git-receive-pack",
        &[],
        b"",
    );
    assert_eq!(probe.status, 200);
}
