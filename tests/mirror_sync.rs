//! Stored mirrors kept in step by running `gitstow serve` instances
//! (issue 45, plan 0017): by interval and by an upstream's webhook, under a
//! lease that one instance holds at a time (taken over when it dies), with
//! sealed credentials; pushes into a pull mirror refused; an upstream that
//! goes down retried until it returns; push mirrors after each push.

mod common;

use std::process::Output;

use common::mirror::*;
use common::*;

#[test]
fn stored_mirrors_are_pulled_by_the_running_instances_and_refuse_pushes() {
    let tmp = tempfile::tempdir().unwrap();
    let (upstream, work, up) = upstream_app(tmp.path());
    let store = TestStore::from_env(&tmp.path().join("here"));
    let o = admin_short(
        &store,
        &["mirror", "add", "org/app", "--from", &up, "--interval", "2"],
    );
    assert!(o.status.success(), "{}", text(&o));
    // Two instances on the store, no leader: the mirror is due at once and
    // one of them pulls it.
    let a = Server::start_on(Some(&store), &[], &[]);
    let b = Server::start_on(Some(&store), &[], &[]);
    let here = a.url("org/app");
    wait_until("the first sync", 30, || in_step(&here, &up));

    // An upstream push arrives by the interval alone.
    commit_files(&work, &[("late.txt", "late\n")], "late");
    git(&work, &["push", "-q", &up, "main"]);
    wait_until("the push upstream to arrive", 30, || in_step(&here, &up));
    // A force-push upstream: applied, and the old tip kept (hidden).
    let old_main = git_out(&work, &["rev-parse", "main"]);
    git(&work, &["reset", "-q", "--hard", "HEAD~2"]);
    git(&work, &["push", "-q", "--force", &up, "main"]);
    wait_until("the force-push upstream to arrive", 30, || {
        in_step(&here, &up)
    });
    let kept: Vec<_> = stored_refs(&store, "org/app")
        .into_iter()
        .filter(|(n, oid)| n.starts_with("refs/mirror-backup/") && *oid == old_main)
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(!ls_remote(&here).contains("mirror-backup"));
    let synced = syncs_logged(&[&a, &b]);
    assert!(synced >= 3, "{synced} syncs logged");
    let rows = mirror_rows(&store);
    assert_eq!(rows[0]["failures"], 0, "{rows:?}");
    assert_eq!(rows[0]["state"], "scheduled", "{rows:?}");

    // A pull mirror takes no pushes: its refs come from the upstream.
    let clone = tmp.path().join("clone");
    git(tmp.path(), &["clone", "-q", &here, clone.to_str().unwrap()]);
    commit_files(&clone, &[("mine.txt", "mine\n")], "mine");
    let said = git_fail(&clone, &["push", &here, "main"]);
    assert!(said.contains("[remote rejected]"), "{said}");
    assert!(
        said.contains(&format!("this repository is a pull mirror of {up}")),
        "{said}"
    );
    assert_eq!(heads_and_tags(&here), heads_and_tags(&up));
    // Nor LFS uploads (git-lfs sends them before the push): refused with
    // the push's words; downloads are served.
    let oid = sha256_hex(b"mine\n");
    let r = post_batch(&a, "org/app", None, &batch("upload", &[(&oid, 5)]));
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(
        json(&r)["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("this repository is a pull mirror of {up}"))),
        "{}",
        r.text()
    );
    let r = post_batch(&a, "org/app", None, &batch("download", &[(&oid, 5)]));
    assert_eq!(r.status, 200, "{}", r.text());

    // An upstream that says 404: retried, then paused after three
    // permanent failures in a row (the repository's webhooks are told);
    // no more pulls until resumed.
    let receiver = Receiver::start(Answer::Status(200, String::new()));
    let secret_file = tmp.path().join("hook-secret");
    std::fs::write(&secret_file, "hook-secret-0123456789\n").unwrap();
    let o = store.admin(&[
        "webhook",
        "add",
        "--name",
        "ops",
        "--repo",
        "org/*",
        "--url",
        &receiver.url("/events"),
        "--secret-file",
        secret_file.to_str().unwrap(),
        "--allow-internal",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let late = upstream.url("org/late");
    let o = admin_short(
        &store,
        &[
            "mirror",
            "add",
            "org/app",
            "--replace",
            "--from",
            &late,
            "--interval",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    wait_until("the mirror to pause", 60, || {
        mirror_rows(&store)[0]["state"] == "paused"
    });
    let rows = mirror_rows(&store);
    assert_eq!(rows[0]["failures"], 3, "{rows:?}");
    assert!(
        rows[0]["paused"].as_str().unwrap().contains("HTTP 404"),
        "{rows:?}"
    );
    let human = text(&store.admin(&["mirror", "list"]));
    assert!(human.contains("gitstow mirror resume"), "{human}");
    let got = receiver.wait_until(
        std::time::Duration::from_secs(30),
        "the mirror_paused event",
        |got| {
            got.iter()
                .any(|r| r.header("x-gitstow-event") == Some("mirror_paused"))
        },
    );
    let paused: Vec<_> = got
        .iter()
        .filter(|r| r.header("x-gitstow-event") == Some("mirror_paused"))
        .collect();
    assert_eq!(paused.len(), 1, "one event per pause");
    let r = paused[0];
    let sig = r.header("x-gitstow-signature-256").expect("signed");
    assert!(gitstow_hooks::webhook::verify(
        b"hook-secret-0123456789",
        &r.body,
        sig
    ));
    let event = r.json();
    assert_eq!(
        (
            &event["event"],
            &event["repository"],
            &event["mirror"]["direction"]
        ),
        (
            &serde_json::json!("mirror_paused"),
            &serde_json::json!("org/app"),
            &serde_json::json!("pull")
        ),
        "{event}"
    );
    assert_eq!(event["mirror"]["url"], late.as_str(), "{event}");
    assert_eq!(event["mirror"]["failures"], 3, "{event}");
    assert!(
        event["mirror"]["paused"]
            .as_str()
            .unwrap()
            .contains("HTTP 404"),
        "{event}"
    );
    git(&work, &["push", "-q", "--mirror", &late]);
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert_eq!(
        mirror_rows(&store)[0]["failures"],
        3,
        "a paused mirror is not pulled"
    );
    let o = store.admin(&["mirror", "resume", "org/app"]);
    assert!(
        o.status.success() && text(&o).contains("resumed"),
        "{}",
        text(&o)
    );
    wait_until("the resumed mirror to sync", 30, || in_step(&here, &late));
    let rows = mirror_rows(&store);
    assert!(
        rows[0]["paused"].is_null() && rows[0]["failures"] == 0,
        "{rows:?}"
    );

    // Each instance counts its pulls by outcome.
    let scraped: f64 = [&a, &b]
        .iter()
        .map(|s| {
            let r = http(s.port(), "GET", "/metrics", &[], b"");
            r.text()
                .lines()
                .filter(|l| {
                    l.starts_with("gitstow_mirror_syncs_total{")
                        && l.contains("direction=\"pull\"")
                        && l.contains("result=\"paused\"")
                })
                .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum::<f64>()
        })
        .sum();
    assert_eq!(scraped, 1.0, "one pull paused the mirror");
}

#[test]
fn credentials_are_sealed_sent_and_never_shown() {
    const PASSWORD: &str = "s3cret-pass-0123";
    let tmp = tempfile::tempdir().unwrap();
    let (root, work) = bare_upstream(tmp.path());
    let bare = root.join("app.git");
    let up = backend(&root, Some(&format!("mirror:{PASSWORD}:read")));
    let url = format!("http://127.0.0.1:{}/app.git", up.port);
    let store = TestStore::from_env(&tmp.path().join("here"));
    let shows_no_secret = |o: &Output| {
        let t = text(o);
        assert!(!t.contains(PASSWORD) && !t.contains("wrong-one"), "{t}");
        t
    };

    // Without credentials, and with a wrong password (from the
    // environment): the upstream's 401, and no password said.
    let o = store.admin_env(&["mirror", "pull", "app", "--from", &url], &[]);
    assert!(shows_no_secret(&o).contains("HTTP 401"), "{}", text(&o));
    let pull_as = |password: &str| {
        let args = [
            "mirror",
            "pull",
            "app",
            "--from",
            &url,
            "--username",
            "mirror",
            "--password-env",
            "PW",
        ];
        store.admin_env(&args, &[("PW", password)])
    };
    let o = pull_as("wrong-one");
    assert!(shows_no_secret(&o).contains("HTTP 401"), "{}", text(&o));
    // The right one from the environment: one pull, nothing stored.
    let o = pull_as(PASSWORD);
    assert!(
        o.status.success() && shows_no_secret(&o).contains("3 created"),
        "{}",
        text(&o)
    );

    // Stored: refused without the key that seals it, saying what to set.
    let pw = tmp.path().join("pw");
    std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
    let add: Vec<&str> = vec![
        "mirror",
        "add",
        "app",
        "--from",
        &url,
        "--username",
        "mirror",
        "--password-file",
        pw.to_str().unwrap(),
    ];
    let o = store.admin_env(&add, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        shows_no_secret(&o).contains("GITSTOW_SECRETS_KEY"),
        "{}",
        text(&o)
    );
    assert!(mirror_rows(&store).is_empty());
    let key = tmp.path().join("key");
    std::fs::write(&key, "ab".repeat(32)).unwrap();
    let mut with_key = add.clone();
    with_key.extend(["--secrets-key-file", key.to_str().unwrap()]);
    let o = store.admin_env(&with_key, &[]);
    assert!(o.status.success(), "{}", shows_no_secret(&o));
    // Neither the stored document nor a listing holds the password.
    let (doc, _) = store.open().get("app.git/mirror").unwrap().unwrap();
    let doc = String::from_utf8(doc).unwrap();
    assert!(
        !doc.contains(PASSWORD) && doc.contains("sealed_password"),
        "{doc}"
    );
    let human = shows_no_secret(&store.admin(&["mirror", "list"]));
    assert!(human.contains("as mirror"), "{human}");
    let json = shows_no_secret(&store.admin(&["mirror", "list", "--json"]));
    assert_eq!(mirror_rows(&store)[0]["username"], "mirror", "{json}");

    // A sync without the key, or with another one: refused in words.
    let o = store.admin_env(&["mirror", "sync", "app"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        shows_no_secret(&o).contains("GITSTOW_SECRETS_KEY"),
        "{}",
        text(&o)
    );
    let other = tmp.path().join("other");
    std::fs::write(&other, "cd".repeat(32)).unwrap();
    let o = store.admin_env(
        &[
            "mirror",
            "sync",
            "app",
            "--secrets-key-file",
            other.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        shows_no_secret(&o).contains("sealed with the secrets key"),
        "{}",
        text(&o)
    );

    // serve with the key (from the environment) pulls it once resumed
    // (the two failures put its retry a minute off); its log never holds
    // the password.
    let o = store.admin(&["mirror", "resume", "app"]);
    assert!(o.status.success(), "{}", text(&o));
    git(&work, &["commit", "-q", "--allow-empty", "-m", "more"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let here = Server::start_on(
        Some(&store),
        &[],
        &[("GITSTOW_SECRETS_KEY", &"ab".repeat(32))],
    );
    wait_until("serve to pull with the sealed credentials", 30, || {
        heads_and_tags(&here.url("app")) == bare_heads_and_tags(&bare)
    });
    assert!(!here.logs().contains(PASSWORD));
    let rows = mirror_rows(&store);
    assert!(rows[0]["last_success"].as_u64().is_some(), "{rows:?}");
}

#[test]
fn an_upstream_webhook_or_an_admin_makes_a_mirror_due_at_once() {
    const SECRET: &str = "hook-secret-42";
    let tmp = tempfile::tempdir().unwrap();
    let (_upstream, work, up) = upstream_app(tmp.path());
    let store = TestStore::from_env(&tmp.path().join("here"));
    let admin = store.create_token("root", &["*:admin"], &[]);
    let reader = store.create_token("reader", &["*:read"], &[]);
    let key = "ef".repeat(32);
    // An hour between scheduled pulls: only the triggers below bring
    // the upstream's pushes in.
    let o = store.admin_env(
        &[
            "mirror",
            "add",
            "org/app",
            "--from",
            &up,
            "--interval",
            "3600",
            "--webhook-secret-env",
            "HOOK",
        ],
        &[("HOOK", SECRET), ("GITSTOW_SECRETS_KEY", &key)],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(mirror_rows(&store)[0]["webhook"], true);
    let here = Server::start_on(Some(&store), &[], &[("GITSTOW_SECRETS_KEY", &key)]);
    let main_here = || {
        store.repo_state("org/app")?;
        stored_refs(&store, "org/app")
            .get("refs/heads/main")
            .cloned()
    };
    wait_until("the first sync", 30, || main_here().is_some());

    let push_upstream = |n: usize| -> String {
        commit_files(
            &work,
            &[("hook.txt", &format!("{n}\n"))],
            &format!("hook {n}"),
        );
        git(&work, &["push", "-q", &up, "main"]);
        git_out(&work, &["rev-parse", "main"])
    };
    let hook = |headers: &[(&str, &str)], body: &[u8]| {
        http(here.port(), "POST", "/org/app/mirror/sync", headers, body)
    };
    let body = br#"{"ref":"refs/heads/main","after":"..."}"#;
    let signature = gitstow_hooks::webhook::signature(SECRET.as_bytes(), body);

    // Refused: no proof at all, a reader's token, a wrong signature, a
    // wrong GitLab token, a repository without a mirror. None makes the
    // mirror due.
    let tip = push_upstream(1);
    let bearer = |t: &str| format!("Bearer {t}");
    let wrong_sig = gitstow_hooks::webhook::signature(b"not-the-secret", body);
    for (headers, status) in [
        (vec![], 401),
        (vec![("Authorization", bearer(&reader))], 403),
        (vec![("X-Hub-Signature-256", wrong_sig.clone())], 403),
        (vec![("X-Gitlab-Token", "hook-secret-4".to_owned())], 403),
    ] {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = hook(&h, body);
        assert_eq!(r.status, status, "{headers:?}: {}", r.text());
        assert!(!r.text().contains(SECRET));
    }
    // A repository without a mirror answers a webhook as a wrong secret
    // does (nothing tells a caller which repositories are mirrors); an
    // admin learns it.
    let none =
        |headers: &[(&str, &str)]| http(here.port(), "POST", "/org/none/mirror/sync", headers, b"");
    let r = none(&[("X-Gitlab-Token", SECRET)]);
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.text(), hook(&[("X-Gitlab-Token", "x")], b"").text());
    let r = none(&[("Authorization", &bearer(&admin))]);
    assert_eq!(r.status, 404, "{}", r.text());
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_ne!(
        main_here().as_deref(),
        Some(tip.as_str()),
        "no refused trigger pulls"
    );
    let logs = here.logs();
    assert!(!logs.contains(SECRET), "the secret is never logged");

    // A GitHub/Gitea signature: due at once, pulled within seconds.
    let r = hook(&[("X-Hub-Signature-256", &signature)], body);
    assert_eq!(r.status, 202, "{}", r.text());
    wait_until("the signed webhook's sync", 10, || {
        main_here().as_deref() == Some(tip.as_str())
    });
    // GitLab's token.
    let tip = push_upstream(2);
    let r = hook(&[("X-Gitlab-Token", SECRET)], b"{}");
    assert_eq!(r.status, 202, "{}", r.text());
    wait_until("the GitLab webhook's sync", 10, || {
        main_here().as_deref() == Some(tip.as_str())
    });
    // An admin token, on the .git form of the name.
    let tip = push_upstream(3);
    let r = http(
        here.port(),
        "POST",
        "/org/app.git/mirror/sync",
        &[("Authorization", &bearer(&admin))],
        b"",
    );
    assert_eq!(r.status, 202, "{}", r.text());
    wait_until("the admin's sync", 10, || {
        main_here().as_deref() == Some(tip.as_str())
    });
    // A GET is not a trigger.
    let r = http(
        here.port(),
        "GET",
        "/org/app/mirror/sync",
        &[("X-Gitlab-Token", SECRET)],
        b"",
    );
    assert_eq!(r.status, 405, "{}", r.text());
}

#[test]
fn a_sync_whose_instance_dies_is_run_again_by_another_and_nothing_is_half_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _work) = bare_upstream(tmp.path());
    // Each POST waits 3 s: a pull stays in flight long enough to kill its
    // instance in the middle.
    let up = backend_script("scripts/upstream-backend.py", &root, &[("DELAY_SECS", "3")]);
    let url = format!("http://127.0.0.1:{}/app.git", up.port);
    let store = TestStore::from_env(&tmp.path().join("here"));
    let o = store.admin(&["mirror", "add", "app", "--from", &url]);
    assert!(o.status.success(), "{}", text(&o));
    let lease = [("GITSTOW_TEST_MIRROR_LEASE_SECS", "3")];
    let mut a = Server::start_on(Some(&store), &[], &lease);
    wait_until("the first instance to claim the mirror", 30, || {
        mirror_rows(&store)[0]["state"] == "syncing"
    });
    std::thread::sleep(std::time::Duration::from_secs(1));
    a.kill();
    assert!(
        store.repo_state("app").is_none(),
        "a killed pull applied nothing"
    );
    let rows = mirror_rows(&store);
    assert_eq!(
        rows[0]["state"], "syncing",
        "the dead instance's lease still holds: {rows:?}"
    );
    // Another instance takes the mirror once the lease lapses, and pulls.
    let b = Server::start_on(Some(&store), &[], &lease);
    wait_until("the second instance to finish the pull", 60, || {
        store.repo_state("app").is_some()
    });
    assert_eq!(
        heads_and_tags(&b.url("app")),
        bare_heads_and_tags(&root.join("app.git"))
    );
    wait_until("the outcome to be recorded", 10, || {
        mirror_rows(&store)[0]["state"] == "scheduled"
    });
    let rows = mirror_rows(&store);
    assert!(rows[0]["last_success"].as_u64().is_some(), "{rows:?}");
    assert_eq!(syncs_logged(&[&b]), 1, "{}", b.logs());
    let o = store.admin(&["fsck", "--all"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn three_instances_run_each_due_sync_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _work) = bare_upstream(tmp.path());
    let log = tmp.path().join("requests.log");
    let up = backend_script(
        "scripts/upstream-backend.py",
        &root,
        &[("REQUEST_LOG", log.to_str().unwrap())],
    );
    let url = format!("http://127.0.0.1:{}/app.git", up.port);
    let store = TestStore::from_env(&tmp.path().join("here"));
    let o = admin_short(
        &store,
        &["mirror", "add", "app", "--from", &url, "--interval", "3"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let servers: Vec<Server> = (0..3)
        .map(|_| Server::start_on(Some(&store), &[], &[]))
        .collect();
    let started = std::time::Instant::now();
    wait_until("the first sync", 30, || store.repo_state("app").is_some());
    std::thread::sleep(std::time::Duration::from_secs(15));
    let window = started.elapsed().as_secs();
    let refs: Vec<&Server> = servers.iter().collect();
    let syncs = syncs_logged(&refs);
    // Each sync asks the upstream's capabilities once.
    let discoveries = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("GET /app.git/info/refs"))
        .count();
    // Every 3 s by one instance: about window / 3 syncs, where three
    // instances each running every due sync would make three times that.
    let most = (window / 3 + 2) as usize;
    assert!(
        (2..=most).contains(&syncs),
        "{syncs} syncs in {window} s (at most {most})"
    );
    // Only those: no pull that no instance logged (one may be in flight).
    assert!(
        discoveries == syncs || discoveries == syncs + 1,
        "{discoveries} requests for {syncs} syncs"
    );
    let o = store.admin(&["fsck", "--all"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_stored_push_mirror_hands_each_push_on_within_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let remote = Server::start();
    let theirs = remote.url("org/copy");
    let store = TestStore::from_env(&tmp.path().join("here"));
    let here = Server::start_on(Some(&store), &["--create-store"], &[]);
    let mine = here.url("org/app");
    // Stored before the repository exists: nothing to hand on, and the
    // remote is left alone. An hour's interval: what follows arrives by
    // the pushes alone.
    let o = store.admin(&["mirror", "add", "org/app", "--to", &theirs]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("org/app: push mirror to {theirs}")),
        "{}",
        text(&o)
    );
    let work = tmp.path().join("work");
    upstream_work(&work);
    git(&work, &["push", "-q", "--mirror", &mine]);
    wait_until("the first push to reach the remote", 30, || {
        in_step(&theirs, &mine)
    });

    // New commits and a tag, a deleted branch, a force-push: each reaches
    // the remote within seconds, and the repository keeps taking pushes.
    commit_files(&work, &[("b.txt", "b\n")], "b");
    git(&work, &["tag", "v2"]);
    git(&work, &["push", "-q", &mine, "main", "v2"]);
    wait_until("a new commit and tag", 30, || in_step(&theirs, &mine));
    git(&work, &["push", "-q", &mine, ":dev"]);
    wait_until("a deletion", 30, || in_step(&theirs, &mine));
    assert!(!ls_remote(&theirs).contains("refs/heads/dev"));
    git(&work, &["reset", "-q", "--hard", "HEAD~3"]);
    git(&work, &["push", "-q", "--force", &mine, "main"]);
    wait_until("a force-push", 30, || in_step(&theirs, &mine));
    let copy = tmp.path().join("copy");
    git(
        tmp.path(),
        &["clone", "-q", &theirs, copy.to_str().unwrap()],
    );
    git(&copy, &["fsck", "--strict"]);

    // Listed with its direction and no failure; counted per outcome.
    let rows = mirror_rows(&store);
    let row = rows
        .iter()
        .find(|r| r["direction"] == "push")
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(
        (&row["to"], &row["from"], &row["failures"]),
        (
            &serde_json::json!(theirs),
            &serde_json::Value::Null,
            &serde_json::json!(0)
        ),
        "{rows:?}"
    );
    let o = store.admin(&["mirror", "list"]);
    assert!(
        text(&o).contains(&format!("org/app: push to {theirs}")),
        "{}",
        text(&o)
    );
    let pushes: f64 = http(here.port(), "GET", "/metrics", &[], b"")
        .text()
        .lines()
        .filter(|l| {
            l.starts_with("gitstow_mirror_syncs_total{")
                && l.contains("direction=\"push\"")
                && l.contains("result=\"ok\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum();
    assert!(pushes >= 4.0, "{pushes} push syncs counted");

    // Removed: later pushes stay here.
    let o = store.admin(&["mirror", "remove", "org/app"]);
    assert!(text(&o).contains("no longer pushed to"), "{}", text(&o));
    commit_files(&work, &[("c.txt", "c\n")], "c");
    git(&work, &["push", "-q", &mine, "main"]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(!in_step(&theirs, &mine));
}

#[test]
fn an_upstream_that_goes_down_is_retried_then_synced_when_it_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, work) = bare_upstream(tmp.path());
    let bare = root.join("app.git");
    let upstream = backend(&root, None);
    let port = upstream.port;
    let url = format!("http://127.0.0.1:{port}/app.git");
    let store = TestStore::from_env(&tmp.path().join("here"));
    let o = admin_short(
        &store,
        &[
            "mirror",
            "add",
            "org/app",
            "--from",
            &url,
            "--interval",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let a = Server::start_on(Some(&store), &[], &[]);
    let here = a.url("org/app");
    wait_until("the first sync", 30, || in_step(&here, &url));

    // Down: each sync fails as a transient failure, retried (no sooner
    // than the interval here, 30 s doubling otherwise), never paused.
    drop(upstream);
    commit_files(&work, &[("while-down.txt", "x\n")], "while down");
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    wait_until("three failed syncs", 60, || {
        mirror_rows(&store)[0]["failures"].as_u64() >= Some(3)
    });
    let rows = mirror_rows(&store);
    assert_eq!(rows[0]["state"], "scheduled", "{rows:?}");
    assert!(rows[0]["paused"].is_null(), "{rows:?}");
    assert!(
        rows[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot reach the upstream"),
        "{rows:?}"
    );

    // Back where it was: the next retry syncs, and the streak ends.
    let _upstream = backend_on(&root, port);
    wait_until("the sync after the upstream returns", 60, || {
        in_step(&here, &url)
    });
    wait_until("the run state to say so", 30, || {
        mirror_rows(&store)[0]["failures"] == 0
    });
    assert!(mirror_rows(&store)[0]["last_error"].is_null());
}

#[test]
fn an_upstream_pack_past_the_push_limits_is_refused_as_a_push_would_be() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    // Two upstreams: one with an object past --max-object-size, one whose
    // pack is past --max-pack-size (incompressible bytes).
    for (name, bytes) in [("big-object", 20_000usize), ("big-pack", 200_000)] {
        let work = tmp.path().join(name);
        init_repo(&work);
        std::fs::write(work.join("blob.bin"), noise(bytes, 7)).unwrap();
        commit_files(&work, &[("README", "x\n")], "bomb");
        let bare = root.join(format!("{name}.git"));
        git(
            tmp.path(),
            &[
                "clone",
                "-q",
                "--bare",
                work.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
    }
    let upstream = backend(&root, None);
    let store = TestStore::from_env(&tmp.path().join("here"));
    for name in ["big-object", "big-pack"] {
        let url = format!("http://127.0.0.1:{}/{name}.git", upstream.port);
        let o = admin_short(
            &store,
            &[
                "mirror",
                "add",
                &format!("org/{name}"),
                "--from",
                &url,
                "--interval",
                "2",
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
    }
    let _a = Server::start_on(
        Some(&store),
        &["--max-object-size", "10000", "--max-pack-size", "100000"],
        &[],
    );
    wait_until("both mirrors to pause", 60, || {
        mirror_rows(&store).iter().all(|r| r["state"] == "paused")
    });
    let rows = mirror_rows(&store);
    let error_of = |repo: &str| {
        rows.iter()
            .find(|r| r["repository"] == repo)
            .and_then(|r| r["last_error"].as_str())
            .unwrap_or_else(|| panic!("{rows:?}"))
            .to_owned()
    };
    let object = error_of("org/big-object");
    assert!(
        object.contains("the upstream's pack was refused"),
        "{object}"
    );
    assert!(object.contains("10000"), "{object}");
    let pack = error_of("org/big-pack");
    assert!(
        pack.contains("too large: a pack of more than 100000 bytes"),
        "{pack}"
    );
    // Nothing of either landed.
    let o = store.admin(&["repo", "list"]);
    assert!(text(&o).contains("no repositories"), "{}", text(&o));
}
