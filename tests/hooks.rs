//! Pre-receive checks and webhooks with the real `git` client.
//!
//! - a pre-receive executable (git's hook protocol: stdin lines, push
//!   options in the environment) that accepts, refuses with a message the
//!   client shows, and hangs past the timeout (killed, push refused);
//! - a pre-receive HTTP callout that accepts, refuses, hangs and is down;
//!   a refused push stores nothing;
//! - webhooks received by a test receiver with valid signatures, once per
//!   push, only for matching repositories, a dead receiver not slowing
//!   pushes, and an event still delivered after the server is killed right
//!   after the push lands and started again.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

const ZERO: &str = "0000000000000000000000000000000000000000";

fn write_hook(dir: &Path, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("pre-receive");
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Runs git, whatever its exit status.
fn run_git(dir: &Path, args: &[&str]) -> std::process::Output {
    git_cmd(dir).args(args).output().expect("running git")
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_pre_receive_hook_accepts_refuses_and_times_out() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    let r = rec.display();
    let hook = write_hook(
        tmp.path(),
        &format!(
            r#"cat > {r}/stdin
echo "repo=$GITSTOW_REPOSITORY opts=$GIT_PUSH_OPTION_COUNT:$GIT_PUSH_OPTION_0 secret=${{AWS_SECRET_ACCESS_KEY:-none}}" > {r}/env
if grep -q refs/heads/hang {r}/stdin; then echo $$ > {r}/pid; echo "thinking..."; sleep 60; fi
if grep -q refs/heads/bg {r}/stdin; then (sleep 100; echo late) & echo $! > {r}/bgpid; fi
if grep -q refs/heads/forbidden {r}/stdin; then echo "policy: forbidden is reserved for releases" >&2; exit 1; fi
echo "checked by policy"
"#
        ),
    );
    let server = Server::start_on(
        None,
        &[
            "--pre-receive-hook",
            hook.to_str().unwrap(),
            "--pre-receive-timeout",
            "3",
            "--no-maintenance",
        ],
        &[("AWS_SECRET_ACCESS_KEY", "do-not-leak")],
    );
    let url = server.url("org/app");
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");

    // Accepted: the hook's output reaches the pusher; it saw git's stdin
    // lines and the push options, and none of the server's environment.
    let out = git(&work, &["push", "-o", "ci.skip", &url, "main"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("remote: checked by policy"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(rec.join("stdin")).unwrap(),
        format!("{ZERO} {c1} refs/heads/main\n")
    );
    assert_eq!(
        std::fs::read_to_string(rec.join("env")).unwrap(),
        "repo=org/app opts=1:ci.skip secret=none\n"
    );

    // Refused: every ref of the push, the hook's stderr shown, nothing stored.
    let keys_before = server.store_keys();
    git(&work, &["checkout", "-q", "-b", "forbidden"]);
    let c2 = commit_files(&work, &[("b.txt", "two\n")], "two");
    let out = run_git(&work, &["push", &url, "forbidden", "main:refs/heads/other"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("remote: policy: forbidden is reserved for releases"),
        "{err}"
    );
    assert!(
        err.contains("[remote rejected] forbidden -> forbidden (pre-receive hook declined)"),
        "{err}"
    );
    assert!(
        err.contains("[remote rejected] main -> other (pre-receive hook declined)"),
        "{err}"
    );
    assert_eq!(
        server.store_keys(),
        keys_before,
        "a refused push stores nothing"
    );
    let refs = ls_remote(&url);
    assert!(!refs.contains("forbidden") && !refs.contains(&c2), "{refs}");

    // A hook that hangs is killed at the timeout and the push refused.
    git(&work, &["checkout", "-q", "-b", "hang"]);
    commit_files(&work, &[("c.txt", "three\n")], "three");
    let started = Instant::now();
    let out = run_git(&work, &["push", &url, "hang"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        started.elapsed() < deadline_for(Duration::from_secs(3)),
        "{:?}",
        started.elapsed()
    );
    assert!(err.contains("remote: thinking..."), "{err}");
    assert!(
        err.contains("remote: error: pre-receive hook timed out after 3s"),
        "{err}"
    );
    assert!(err.contains("(pre-receive hook declined)"), "{err}");
    assert!(!ls_remote(&url).contains("refs/heads/hang"));
    let pid = std::fs::read_to_string(rec.join("pid")).unwrap();
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the hook's process is gone"
    );
    // What an accepting hook leaves running in its group is killed.
    git(&work, &["push", &url, "main:refs/heads/bg"]);
    let bg = std::fs::read_to_string(rec.join("bgpid")).unwrap();
    let gone = Instant::now() + Duration::from_secs(20);
    while Path::new(&format!("/proc/{}", bg.trim())).exists() {
        assert!(
            Instant::now() < gone,
            "the hook's background job still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The server still takes pushes the hook accepts.
    git(&work, &["checkout", "-q", "main"]);
    let c4 = commit_files(&work, &[("d.txt", "four\n")], "four");
    git(&work, &["push", &url, "main"]);
    assert!(ls_remote(&url).contains(&c4));
    assert!(!server.logs().contains("do-not-leak"));
}

#[test]
fn a_pre_receive_callout_accepts_refuses_hangs_and_is_down() {
    let receiver = Receiver::start(Answer::Status(200, "ok from the policy service".into()));
    let mut down = Some(Receiver::start(Answer::Status(200, String::new())));
    let down_url = down.as_ref().unwrap().url("/check");
    let server = Server::start_with(&[
        "--pre-receive-url",
        &receiver.url("/check"),
        "--pre-receive-timeout",
        "2",
        "--no-maintenance",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    let url = server.url("org/app");

    let out = git(&work, &["push", "-o", "reviewed-by=ana", &url, "main"]);
    assert!(
        stderr(&out).contains("remote: ok from the policy service"),
        "{}",
        stderr(&out)
    );
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    let req = got[0].json();
    assert_eq!(req["repository"], "org/app");
    assert_eq!(req["pusher"], serde_json::Value::Null);
    assert_eq!(
        req["ref_updates"],
        serde_json::json!([{"ref": "refs/heads/main", "old": ZERO, "new": c1}])
    );
    assert_eq!(req["push_options"], serde_json::json!(["reviewed-by=ana"]));
    assert_eq!(got[0].header("content-type"), Some("application/json"));

    let c2 = commit_files(&work, &[("b.txt", "two\n")], "two");
    let refused = |answer: Answer, expect: &str| {
        receiver.answer(answer);
        let keys = server.store_keys();
        let started = Instant::now();
        let out = run_git(&work, &["push", &url, "main"]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{err}");
        assert!(
            started.elapsed() < deadline_for(Duration::from_secs(2)),
            "{:?}",
            started.elapsed()
        );
        assert!(err.contains(expect), "want {expect:?} in {err}");
        assert!(
            err.contains("[remote rejected] main -> main (pre-receive hook declined)"),
            "{err}"
        );
        let check = receiver.url("");
        assert!(!err.contains(&check), "no URL of the check: {err}");
        assert_eq!(server.store_keys(), keys, "a refused push stores nothing");
        assert!(ls_remote(&url).contains(&c1));
    };
    refused(
        Answer::Status(403, "policy: main is frozen until Monday".into()),
        "remote: policy: main is frozen until Monday",
    );
    refused(
        Answer::Hang,
        "remote: error: pre-receive check timed out after 2s",
    );
    // A redirect (to a login page that would say 200) is not followed.
    refused(
        Answer::Redirect("/login".into()),
        "pre-receive hook declined",
    );
    // (The first server keeps the store's directory alive.)
    let store = server.store().clone();

    // Down: nothing listens at the callout's address.
    down.take();
    let second = Server::start_on(
        Some(&store),
        &["--pre-receive-url", &down_url, "--pre-receive-timeout", "2"],
        &[],
    );
    let url = second.url("org/app");
    let out = run_git(&work, &["push", &url, "main"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("remote: error: pre-receive check unavailable"),
        "{err}"
    );
    assert!(err.contains("(pre-receive hook declined)"), "{err}");
    assert!(!ls_remote(&url).contains(&c2));
}

fn add_webhook(store: &TestStore, name: &str, repos: &str, url: &str, secret_file: &Path) {
    let out = store.admin(&[
        "webhook",
        "add",
        "--name",
        name,
        "--repo",
        repos,
        "--url",
        url,
        "--secret-file",
        secret_file.to_str().unwrap(),
        // The test receiver listens on 127.0.0.1.
        "--allow-internal",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Checks `r` as a webhook receiver would: its signature under `secret`.
fn signed(r: &Received, secret: &str) -> serde_json::Value {
    let sig = r.header("x-gitstow-signature-256").expect("signed");
    assert!(
        gitstow_hooks::webhook::verify(secret.as_bytes(), &r.body, sig),
        "bad signature {sig}"
    );
    assert_eq!(r.header("x-gitstow-event"), Some("push"));
    let event = r.json();
    assert_eq!(r.header("x-gitstow-delivery"), event["id"].as_str());
    event
}

#[test]
fn webhooks_are_signed_and_sent_once_per_push() {
    let receiver = Receiver::start(Answer::Status(200, "thanks".into()));
    let tmp = tempfile::tempdir().unwrap();
    let secret = "a-shared-secret-of-some-length";
    let secret_file = tmp.path().join("secret");
    std::fs::write(&secret_file, format!("{secret}\n")).unwrap();
    let mut server = Server::start_with(&["--access-refresh", "1"]);
    let store = server.store().clone();
    add_webhook(&store, "ci", "org/*", &receiver.url("/hook"), &secret_file);
    let token = store.create_token("pusher-1", &["*:write"], &[]);
    server.restart();
    let url = |repo: &str| format!("http://any:{token}@127.0.0.1:{}/{repo}.git", server.port());
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    git(
        &work,
        &["push", "-o", "deploy=staging", &url("org/app"), "main"],
    );
    let c2 = commit_files(&work, &[("a.txt", "two\n")], "two");
    git(
        &work,
        &["push", &url("org/app"), "main", "main:refs/heads/topic"],
    );
    git(&work, &["push", &url("org/app"), ":refs/heads/topic"]);
    // Not matched by org/*: no event.
    git(&work, &["push", &url("org2/app"), "main"]);
    git(&work, &["push", &url("orgx"), "main"]);

    let got = receiver.wait_until(Duration::from_secs(20), "three deliveries", |r| {
        r.len() >= 3
    });
    std::thread::sleep(Duration::from_secs(3));
    let got_later = receiver.received();
    assert_eq!(got_later.len(), 3, "once per push: {got:?}");
    let events: Vec<serde_json::Value> = got_later.iter().map(|r| signed(r, secret)).collect();
    let find = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        events
            .iter()
            .find(|e| pred(e))
            .unwrap_or_else(|| panic!("no such event in {events:?}"))
            .clone()
    };
    let first = find(&|e| e["push_options"] == serde_json::json!(["deploy=staging"]));
    assert_eq!(first["repository"], "org/app");
    assert_eq!(first["pusher"], "pusher-1");
    assert_eq!(first["event"], "push");
    assert_eq!(
        first["ref_updates"],
        serde_json::json!([{"ref": "refs/heads/main", "old": ZERO, "new": c1}])
    );
    let second = find(&|e| e["ref_updates"].as_array().unwrap().len() == 2);
    assert_eq!(
        second["ref_updates"],
        serde_json::json!([
            {"ref": "refs/heads/main", "old": c1, "new": c2},
            {"ref": "refs/heads/topic", "old": ZERO, "new": c2},
        ])
    );
    let third = find(&|e| e["ref_updates"][0]["new"] == ZERO);
    assert_eq!(
        third["ref_updates"],
        serde_json::json!([{"ref": "refs/heads/topic", "old": c2, "new": ZERO}])
    );
    let ids: std::collections::BTreeSet<&str> =
        events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3);

    // A receiver that never answers does not hold pushes: one is answered
    // before a delivery could time out (--webhook-timeout, 10 s).
    receiver.answer(Answer::Hang);
    let c3 = commit_files(&work, &[("a.txt", "three\n")], "three");
    let started = Instant::now();
    git(&work, &["push", &url("org/app"), "main"]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "push took {:?} with a hanging receiver",
        started.elapsed()
    );
    assert!(ls_remote(&url("org/app")).contains(&c3));
    // The outbox is in the store, the secret nowhere in the logs.
    assert!(!server.logs().contains(secret));
    assert!(!server.logs().contains(&token));
    let list = store.admin(&["webhook", "list"]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed.contains("ci") && listed.contains("org/*"),
        "{listed}"
    );
    assert!(!listed.contains(secret), "{listed}");
    let shown = store.admin(&["access", "show"]);
    assert!(!String::from_utf8_lossy(&shown.stdout).contains(secret));
}

#[test]
fn a_webhook_event_survives_a_killed_server() {
    let receiver = Receiver::start(Answer::Status(503, "down for maintenance".into()));
    let tmp = tempfile::tempdir().unwrap();
    let secret = "another-shared-secret-0123456789";
    let secret_file = tmp.path().join("secret");
    std::fs::write(&secret_file, secret).unwrap();
    let mut server = Server::start_with(&["--webhook-timeout", "2"]);
    add_webhook(
        server.store(),
        "deploy",
        "*",
        &receiver.url("/hook"),
        &secret_file,
    );
    server.restart();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    git(&work, &["push", &server.url("app"), "main"]);
    // The push landed; the receiver refused the first attempt.
    receiver.wait_until(Duration::from_secs(10), "a first attempt", |r| {
        r.iter().any(|x| x.answered == Some(503))
    });
    std::thread::sleep(Duration::from_millis(500));
    server.kill();
    assert!(
        server
            .store_keys()
            .iter()
            .any(|k| k.starts_with(".gitstow/outbox/")),
        "the undelivered event is in the store's outbox: {:?}",
        server.store_keys()
    );
    receiver.answer(Answer::Status(204, String::new()));
    server.start_again();
    let got = receiver.wait_until(
        Duration::from_secs(30),
        "a delivery after the restart",
        |r| r.iter().any(|x| x.answered == Some(204)),
    );
    let delivered: Vec<&Received> = got.iter().filter(|r| r.answered == Some(204)).collect();
    assert_eq!(delivered.len(), 1);
    let event = signed(delivered[0], secret);
    let first = signed(&got[0], secret);
    assert_eq!(event["id"], first["id"], "the same event, retried");
    assert_eq!(
        event["ref_updates"],
        serde_json::json!([{"ref": "refs/heads/main", "old": ZERO, "new": c1}])
    );
    let metrics = http(server.port(), "GET", "/metrics", &[], b"").text();
    assert!(
        metrics.contains("gitstow_webhook_deliveries_total{result=\"delivered\"} 1"),
        "{metrics}"
    );
    // Delivered: the outbox is empty.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server
        .store_keys()
        .iter()
        .any(|k| k.starts_with(".gitstow/outbox/"))
    {
        assert!(
            Instant::now() < deadline,
            "the outbox entry stays after delivery"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Hardening, finding 2: push options are bounded in count (1,000) and in
/// bytes (64 KiB in all), refused in git's words beyond (`unpack …`, every
/// ref `unpacker error`, nothing stored); an event carries bounded data (the
/// first ref updates within 256 KiB of names, the rest counted), so an
/// outbox entry and a delivery stay small.
#[test]
fn push_options_and_events_are_bounded() {
    let receiver = Receiver::start(Answer::Status(200, "thanks".into()));
    let tmp = tempfile::tempdir().unwrap();
    let secret_file = tmp.path().join("secret");
    std::fs::write(&secret_file, "a-shared-secret-of-some-length\n").unwrap();
    let mut server = Server::start_with(&["--access-refresh", "1"]);
    let store = server.store().clone();
    add_webhook(&store, "ci", "*", &receiver.url("/hook"), &secret_file);
    server.restart();
    let url = server.url("bounded");
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "zero\n")], "zero");
    git(&work, &["push", "--quiet", &url, "main"]);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");

    let push_with = |options: &[String]| {
        let mut args: Vec<&str> = vec!["push"];
        for o in options {
            args.extend(["-o", o.as_str()]);
        }
        args.extend([url.as_str(), "main"]);
        run_git(&work, &args)
    };
    let many: Vec<String> = (0..1_001).map(|i| format!("k{i}=v")).collect();
    let out = push_with(&many);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("remote unpack failed: too many push options: more than 1000")
            && err.contains("main -> main (unpacker error)"),
        "{err}"
    );
    let large: Vec<String> = (0..2)
        .map(|i| format!("{i}={}", "x".repeat(40_000)))
        .collect();
    let out = push_with(&large);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("remote unpack failed: push options too large: more than 65536 bytes in all"),
        "{err}"
    );
    assert!(
        !ls_remote(&url).contains(&c1),
        "a refused push stored nothing"
    );

    // Within the limits: 1,000 options of 60 bytes land, and reach the webhook.
    let within: Vec<String> = (0..1_000)
        .map(|i| format!("{i:04}={}", "v".repeat(55)))
        .collect();
    let out = push_with(&within);
    assert!(out.status.success(), "{}", stderr(&out));
    // 300 refs of ~1,000-byte names: more than one event lists.
    let long = |i: usize| {
        format!(
            "refs/heads/{}{i}",
            format!("{}/", "d".repeat(200)).repeat(4)
        )
    };
    let specs: Vec<String> = (0..300).map(|i| format!("main:{}", long(i))).collect();
    let mut args: Vec<&str> = vec!["push", url.as_str()];
    args.extend(specs.iter().map(String::as_str));
    let out = run_git(&work, &args);
    assert!(out.status.success(), "{}", stderr(&out));

    let got = receiver.wait_until(Duration::from_secs(20), "three deliveries", |r| {
        r.len() >= 3
    });
    let events: Vec<serde_json::Value> = got.iter().map(|r| r.json()).collect();
    let with_options = events
        .iter()
        .find(|e| e["push_options"].as_array().is_some_and(|o| !o.is_empty()))
        .expect("the push with options");
    assert_eq!(
        with_options["push_options"].as_array().unwrap().len(),
        1_000
    );
    let refs = events
        .iter()
        .find(|e| e["ref_updates_omitted"].is_u64())
        .unwrap_or_else(|| panic!("no event counts omitted updates: {events:?}"));
    let listed = refs["ref_updates"].as_array().unwrap().len() as u64;
    assert_eq!(listed + refs["ref_updates_omitted"].as_u64().unwrap(), 300);
    assert!(listed > 0 && listed < 300, "{listed}");
    for r in &got {
        assert!(
            r.body.len() < 1 << 20,
            "a delivery of {} bytes",
            r.body.len()
        );
    }
}

/// Hardening, finding 10: `webhook add` refuses malformed URLs, and
/// targets on the server's machine or link-local (cloud metadata) unless
/// `--allow-internal`; a private address is added with a warning.
#[test]
fn webhook_targets_are_checked() {
    let server = Server::start_with(&["--no-maintenance"]);
    let store = server.store();
    let tmp = tempfile::tempdir().unwrap();
    let secret_file = tmp.path().join("secret");
    std::fs::write(&secret_file, "a-shared-secret-of-some-length\n").unwrap();
    let add = |name: &str, url: &str, extra: &[&str]| {
        let mut args = vec![
            "webhook",
            "add",
            "--name",
            name,
            "--url",
            url,
            "--secret-file",
            secret_file.to_str().unwrap(),
        ];
        args.extend(extra);
        store.admin(&args)
    };
    for (i, url) in [
        "http://169.254.169.254/latest/meta-data",
        "http://127.0.0.1:6379/",
        "http://localhost:9200/",
    ]
    .iter()
    .enumerate()
    {
        let out = add(&format!("internal{i}"), url, &[]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{url}: {err}");
        assert!(err.contains("--allow-internal"), "{err}");
    }
    let out = add("badport", "http://ci.example:99999999/", &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("invalid webhook URL"),
        "{}",
        stderr(&out)
    );
    let out = add("meant", "http://127.0.0.1:6379/", &["--allow-internal"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = add("private", "http://10.0.0.7/hook", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning"), "{}", stderr(&out));
    let listed = String::from_utf8_lossy(&store.admin(&["webhook", "list"]).stdout).into_owned();
    assert!(
        listed.contains("meant") && listed.contains("private"),
        "{listed}"
    );
    assert!(
        !listed.contains("internal0") && !listed.contains("badport"),
        "{listed}"
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&store.admin(&["webhook", "list", "--json"]).stdout).expect("JSON");
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["meant", "private"], "{rows:?}");
    assert_eq!(rows[1]["url"], "http://10.0.0.7/hook");
    assert!(rows.iter().all(|r| r.get("secret").is_none()), "{rows:?}");
}
