//! What an operator watches: the access log (text and JSON), responses by
//! status in `/metrics` with families in a stable order, build info, and
//! the health endpoints `/healthz` and `/readyz` (no credentials needed,
//! not ready with the store gone).

mod common;

use common::*;

/// The access-log lines (target `gitstow::access`) of `logs`.
fn access_lines(logs: &str) -> Vec<String> {
    logs.lines()
        .filter(|l| l.contains("gitstow::access"))
        .map(str::to_owned)
        .collect()
}

fn push_clone_404_413(server: &Server, tmp: &std::path::Path, url: &str) {
    let work = tmp.join("work");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "one\n")], "one");
    git(&work, &["push", url, "main"]);
    git(
        tmp,
        &["clone", "-q", url, tmp.join("clone").to_str().unwrap()],
    );
    let resp = http(server.port(), "GET", "/nothing-here", &[], b"");
    assert_eq!(resp.status, 404);
    let resp = http(
        server.port(),
        "POST",
        "/app.git/git-receive-pack",
        &[("Content-Type", "application/x-git-receive-pack-request")],
        &vec![b'0'; 5000],
    );
    assert_eq!(resp.status, 413, "{}", resp.text());
}

#[test]
fn the_access_log_has_a_line_per_request_in_text() {
    let server = Server::start_with(&["--max-pack-size", "1000", "--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("app");
    push_clone_404_413(&server, tmp.path(), &url);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let lines = access_lines(&server.logs());
    let find = |what: &[&str]| {
        lines
            .iter()
            .find(|l| what.iter().all(|w| l.contains(w)))
            .unwrap_or_else(|| panic!("no access line with {what:?} in:\n{}", lines.join("\n")))
            .clone()
    };
    let push = find(&[
        "method=POST",
        "git-receive-pack",
        "status=200",
        "service=\"receive-pack\"",
    ]);
    assert!(push.contains("repo=\"app\""), "{push}");
    assert!(!push.contains("bytes_in=0 "), "{push}");
    let clone = find(&["method=POST", "git-upload-pack", "status=200"]);
    assert!(!clone.contains("bytes_out=0 "), "{clone}");
    find(&[
        "method=GET",
        "info/refs?service=git-upload-pack",
        "status=200",
    ]);
    find(&["path=/nothing-here", "status=404"]);
    find(&["status=413", "repo=\"app\""]);
    for l in &lines {
        assert!(l.contains("client=\"127.0.0.1\""), "{l}");
        assert!(l.contains(" ms="), "{l}");
    }

    // Responses by status, build info, start time; families in name order.
    let metrics = http(server.port(), "GET", "/metrics", &[], b"").text();
    for want in [
        "gitstow_http_responses_total{status=\"404\"} 1",
        "gitstow_http_responses_total{status=\"413\"} 1",
        "gitstow_build_info{version=\"",
        "gitstow_process_start_time_seconds ",
        "gitstow_http_requests_in_flight 1",
    ] {
        assert!(metrics.contains(want), "{want} not in {metrics}");
    }
    let families: Vec<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let mut sorted = families.clone();
    sorted.sort();
    assert_eq!(families, sorted, "families in name order");
    let again = http(server.port(), "GET", "/metrics", &[], b"").text();
    let families_again: Vec<&str> = again
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(families, families_again);
}

#[test]
fn the_access_log_in_json_names_the_token_never_the_secret() {
    let mut server = Server::start_with(&[
        "--log-format",
        "json",
        "--max-pack-size",
        "1000",
        "--no-maintenance",
    ]);
    let secret = server.store().create_token("deployer", &["*:write"], &[]);
    server.restart();
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("http://any:{secret}@127.0.0.1:{}/app.git", server.port());
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "one\n")], "one");
    git(&work, &["push", &url, "main"]);
    let resp = http(server.port(), "GET", "/nothing-here", &[], b"");
    assert_eq!(resp.status, 404);
    // A secret in the query string is not logged either (only `service=`).
    let path = format!("/app.git/info/refs?access_token={secret}&service=git-upload-pack");
    http(server.port(), "GET", &path, &[], b"");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let logs = server.logs();
    assert!(!logs.contains(&secret[8..]), "a secret is in the log");
    assert!(
        logs.contains("/app.git/info/refs?service=git-upload-pack"),
        "{logs}"
    );
    let lines: Vec<serde_json::Value> = access_lines(&logs)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let push = lines
        .iter()
        .find(|v| v["fields"]["service"] == "receive-pack")
        .unwrap_or_else(|| panic!("no push line in {lines:?}"));
    assert_eq!(push["fields"]["token"], "deployer");
    assert_eq!(push["fields"]["status"], 200);
    assert_eq!(push["fields"]["repo"], "app");
    assert!(push["fields"]["bytes_in"].as_u64().unwrap() > 0);
    // The first request of git's credential dance: 401, no token yet.
    assert!(lines.iter().any(|v| v["fields"]["status"] == 401));
    assert!(lines
        .iter()
        .any(|v| v["fields"]["status"] == 404 && v["fields"]["path"] == "/nothing-here"));
}

/// `serve --config FILE`: the file's flags apply, the command line's win.
#[test]
fn a_config_file_sets_flags_and_the_command_line_overrides_it() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("gitstow.toml");
    std::fs::write(
        &config,
        // listen: overridden by the harness's --listen 127.0.0.1:0.
        "listen = \"127.0.0.1:1\"\nmax-pack-size = \"1000\"\nno_maintenance = true\nlog-format = \"json\"\n",
    )
    .unwrap();
    let server = Server::start_with(&["--config", config.to_str().unwrap()]);
    assert_ne!(server.port(), 1);
    let resp = http(
        server.port(),
        "POST",
        "/app.git/git-receive-pack",
        &[("Content-Type", "application/x-git-receive-pack-request")],
        &vec![b'0'; 5000],
    );
    assert_eq!(
        resp.status,
        413,
        "max-pack-size from the file: {}",
        resp.text()
    );
    assert!(
        server.logs().lines().any(|l| l.starts_with('{')),
        "JSON logs from the file"
    );

    // A key that is not a flag is refused, naming it.
    std::fs::write(&config, "no-such-flag = 1\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
        .args(["serve", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));
}

/// SIGTERM with `--drain-delay`: `/readyz` says 503 at once while requests
/// are still served; then the process stops.
#[test]
fn draining_answers_not_ready_while_it_still_serves() {
    let drain = std::time::Duration::from_secs(6);
    let mut server = Server::start_with(&[
        "--drain-delay",
        &drain.as_secs().to_string(),
        "--no-maintenance",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "a\n")], "one");
    let url = server.url("app");
    git(&work, &["push", "-q", &url, "main"]);
    assert_eq!(http(server.port(), "GET", "/readyz", &[], b"").status, 200);
    let pid = server.pid().unwrap().to_string();
    let started = std::time::Instant::now();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let resp = http(server.port(), "GET", "/readyz", &[], b"");
    assert_eq!(
        (resp.status, resp.text().as_str()),
        (503, "shutting down\n")
    );
    assert_eq!(http(server.port(), "GET", "/healthz", &[], b"").status, 200);
    assert!(ls_remote(&url).contains("refs/heads/main"), "still serving");
    // (The checks above ran inside the drain delay, or they prove nothing.)
    assert!(
        started.elapsed() < drain,
        "the checks outlasted the drain delay"
    );
    let status = server.terminate(deadline_for(drain));
    assert!(status.is_some(), "still running after the drain");
    assert!(server.logs().contains("draining"), "{}", server.logs());
}

#[test]
fn health_endpoints_need_no_credentials_and_follow_the_store() {
    let mut server = Server::start_with(&["--no-maintenance"]);
    server.store().create_token("admin", &["*:admin"], &[]);
    server.restart();
    let port = server.port();
    let resp = http(port, "GET", "/healthz", &[], b"");
    assert_eq!((resp.status, resp.text().as_str()), (200, "ok\n"));
    let resp = http(port, "GET", "/readyz", &[], b"");
    assert_eq!((resp.status, resp.text().as_str()), (200, "ready\n"));
    // Repositories still need credentials.
    let resp = http(
        port,
        "GET",
        "/app.git/info/refs?service=git-upload-pack",
        &[],
        b"",
    );
    assert_eq!(resp.status, 401);

    // The store's directory replaced by a symlink loop (every read fails
    // with ELOOP, as a store gone bad would): not ready, still alive.
    let TestStore::Fs(dir) = server.store() else {
        panic!("this test replaces the local store's directory: run it on the fs store")
    };
    {
        let moved = dir.with_extension("moved");
        std::fs::rename(dir, &moved).unwrap();
        std::os::unix::fs::symlink(dir, dir).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let resp = http(port, "GET", "/readyz", &[], b"");
        assert_eq!(resp.status, 503, "{}", resp.text());
        let resp = http(port, "GET", "/healthz", &[], b"");
        assert_eq!(resp.status, 200);
        std::fs::remove_file(dir).unwrap();
        std::fs::rename(&moved, dir).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let resp = http(port, "GET", "/readyz", &[], b"");
        assert_eq!(resp.status, 200, "ready again");
    }
}

/// A local store's directory that vanishes under a running server (a volume
/// unmounted): not ready, git told the store does not answer, nothing
/// written into a new directory in its place; served again once it is back.
#[test]
fn a_local_store_that_vanishes_is_not_created_again() {
    let server = Server::start_with(&["--no-maintenance"]);
    let TestStore::Fs(dir) = server.store().clone() else {
        panic!("this test moves the local store's directory: run it on the fs store")
    };
    let port = server.port();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "one\n")], "one");
    let url = server.url("app");
    git(&work, &["push", "-q", &url, "main"]);

    let moved = dir.with_extension("moved");
    std::fs::rename(&dir, &moved).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let resp = http(port, "GET", "/readyz", &[], b"");
    assert_eq!(resp.status, 503, "{}", resp.text());
    let err = git_fail(&work, &["push", &url, "main:other"]);
    assert!(err.contains("the store does not answer"), "{err}");
    let err = git_fail(&work, &["ls-remote", &url]);
    assert!(err.contains("the store does not answer"), "{err}");
    assert!(
        !dir.exists(),
        "the server created the store directory again"
    );

    std::fs::rename(&moved, &dir).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(http(port, "GET", "/readyz", &[], b"").status, 200);
    git(&work, &["push", "-q", &url, "main:other"]);
    assert!(ls_remote(&url).contains("refs/heads/other"));
}
