//! SIGTERM lets in-flight pushes finish (or fail cleanly) and then exits.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;

#[test]
fn sigterm_during_a_push_finishes_it_and_exits() {
    let mut server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 41,
            commits: 600,
            ..Default::default()
        },
    );
    let url = server.url("graceful");
    let push = git_cmd(&src)
        .args(["push", "--quiet", "--mirror", &url])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the request reach the server, then ask it to stop.
    std::thread::sleep(Duration::from_millis(300));
    let status = server.terminate(Duration::from_secs(60));
    let out = push.wait_with_output().unwrap();
    let status = status.expect("the server did not exit within 60 s of SIGTERM");
    assert!(status.success(), "exit status after SIGTERM: {status:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Restart on the same store: the push landed whole, or not at all.
    server.start_again();
    let refs = ls_remote(&server.url("graceful"));
    if out.status.success() {
        let expected = git_out(
            &src,
            &["for-each-ref", "--format=%(objectname)\t%(refname)"],
        );
        for line in expected.lines() {
            assert!(
                refs.contains(line),
                "push reported success but {line} is missing"
            );
        }
        let mirror = tmp.path().join("m.git");
        git(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                "--mirror",
                &server.url("graceful"),
                mirror.to_str().unwrap(),
            ],
        );
        fsck(&mirror);
    } else {
        assert_eq!(refs, "", "a failed push left refs behind: {stderr}");
    }
    assert!(
        server.logs().contains("shutdown requested"),
        "{}",
        server.logs()
    );
}
