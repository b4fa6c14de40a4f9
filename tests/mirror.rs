//! Pull mirrors (issue 45, plan 0017): `gitstow mirror pull` takes a
//! repository in from another server, a second `gitstow serve` or
//! canonical `git http-backend`, with the real `git` on the other side;
//! stored mirrors are pulled by whichever running `serve` claims them.

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `git ls-remote` lines of branches and tags only (what a mirror takes).
fn heads_and_tags(url: &str) -> Vec<String> {
    ls_remote(url)
        .lines()
        .filter(|l| l.contains("\trefs/heads/") || l.contains("\trefs/tags/"))
        .map(str::to_owned)
        .collect()
}

/// Whether `here` lists the branches and tags `there` does (`false` while
/// `here` has no such repository yet).
fn in_step(here: &str, there: &str) -> bool {
    let out = git_cmd(Path::new("/"))
        .args(["ls-remote", here])
        .output()
        .expect("run git");
    out.status.success() && heads_and_tags(here) == heads_and_tags(there)
}

/// Every ref the store's repository holds (hidden ones too), name → oid.
fn stored_refs(store: &TestStore, repo: &str) -> std::collections::BTreeMap<String, String> {
    let r = gitstow_odb::Repository::new(store.open(), repo, gitstow_odb::IndexCache::new());
    let state = r
        .load_state()
        .unwrap()
        .expect("the repository exists")
        .state;
    r.refs(&state)
        .and_then(|v| v.to_map())
        .unwrap()
        .into_iter()
        .filter_map(|(n, v)| Some((n, v.oid()?.to_string())))
        .collect()
}

/// A work tree with main, dev and an annotated tag.
fn upstream_work(dir: &Path) {
    init_repo(dir);
    for i in 0..5 {
        commit_files(
            dir,
            &[("a.txt", &format!("line {i}\n")), (&format!("f{i}"), "x\n")],
            &format!("c{i}"),
        );
    }
    git(dir, &["tag", "-a", "-m", "release", "v1"]);
    git(dir, &["checkout", "-q", "-b", "dev"]);
    commit_files(dir, &[("dev.txt", "dev\n")], "dev");
    git(dir, &["checkout", "-q", "main"]);
}

#[test]
fn a_pull_mirror_takes_a_repository_in_and_keeps_what_the_upstream_rewrites() {
    let tmp = tempfile::tempdir().unwrap();
    let upstream = Server::start();
    let work = tmp.path().join("work");
    upstream_work(&work);
    let up = upstream.url("org/app");
    git(&work, &["push", "-q", "--mirror", &up]);
    // a forge's pull-request ref, which a mirror does not take by default
    git(&work, &["push", "-q", &up, "dev:refs/pull/1/head"]);

    let store = TestStore::from_env(&tmp.path().join("here"));
    let o = store.admin(&["mirror", "pull", "org/app", "--from", &up]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("3 created, 0 updated, 0 deleted"),
        "{}",
        text(&o)
    );
    let here = Server::start_on(Some(&store), &[], &[]);
    let mine = here.url("org/app");
    assert_eq!(heads_and_tags(&mine), heads_and_tags(&up));
    assert!(
        !ls_remote(&mine).contains("refs/pull/"),
        "{}",
        ls_remote(&mine)
    );
    let clone = tmp.path().join("clone");
    git(
        tmp.path(),
        &["clone", "-q", "--mirror", &mine, clone.to_str().unwrap()],
    );
    fsck(&clone);
    let o = store.admin(&["fsck", "--repo", "org/app"]);
    assert!(o.status.success(), "{}", text(&o));
    // nothing new: up to date, nothing fetched
    let o = store.admin(&["mirror", "pull", "org/app", "--from", &up]);
    assert!(text(&o).contains("up to date"), "{}", text(&o));

    // upstream: a new commit on main, a force-push of dev, a deleted tag
    let old_dev = git_out(&work, &["rev-parse", "dev"]);
    let old_tag = git_out(&work, &["rev-parse", "v1"]);
    commit_files(&work, &[("b.txt", "more\n")], "more");
    git(&work, &["push", "-q", &up, "main"]);
    git(&work, &["checkout", "-q", "-B", "dev", "main~3"]);
    commit_files(&work, &[("other.txt", "rewritten\n")], "rewritten dev");
    git(&work, &["push", "-q", "--force", &up, "dev"]);
    git(&work, &["push", "-q", &up, ":refs/tags/v1"]);
    let o = store.admin(&["mirror", "pull", "org/app", "--from", &up]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("0 created, 2 updated, 1 deleted"),
        "{}",
        text(&o)
    );
    assert_eq!(heads_and_tags(&mine), heads_and_tags(&up));
    // the old tips are kept (hidden: no fetch sees them); main moved
    // forward, so it keeps none
    let kept: Vec<(String, String)> = stored_refs(&store, "org/app")
        .into_iter()
        .filter(|(n, _)| n.starts_with("refs/mirror-backup/"))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(
        kept.iter()
            .any(|(n, v)| n.ends_with("/refs/heads/dev") && *v == old_dev),
        "{kept:?}"
    );
    assert!(
        kept.iter()
            .any(|(n, v)| n.ends_with("/refs/tags/v1") && *v == old_tag),
        "{kept:?}"
    );
    assert!(!ls_remote(&mine).contains("mirror-backup"));
    let o = store.admin(&["fsck", "--repo", "org/app"]);
    assert!(o.status.success(), "{}", text(&o));
    // a push to the backup namespace is refused (hidden)
    let err = git_fail(&work, &["push", &mine, "main:refs/mirror-backup/x"]);
    assert!(err.contains("hidden"), "{err}");

    // --exact keeps nothing
    git(&work, &["checkout", "-q", "-B", "dev", "main~1"]);
    git(&work, &["push", "-q", "--force", &up, "dev"]);
    let o = store.admin(&["mirror", "pull", "org/app", "--from", &up, "--exact"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("kept"), "{}", text(&o));
    assert_eq!(
        stored_refs(&store, "org/app")
            .keys()
            .filter(|n| n.starts_with("refs/mirror-backup/"))
            .count(),
        2
    );
    assert_eq!(heads_and_tags(&mine), heads_and_tags(&up));

    // a ref filter: only main, into another repository
    let o = store.admin(&[
        "mirror",
        "pull",
        "org/main-only",
        "--from",
        &up,
        "--refs",
        "refs/heads/main",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let only: Vec<String> = heads_and_tags(&here.url("org/main-only"));
    assert_eq!(only.len(), 1, "{only:?}");
    assert!(only[0].ends_with("\trefs/heads/main"));
}

#[test]
fn a_pull_mirror_from_canonical_git_http_backend() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let work = tmp.path().join("work");
    upstream_work(&work);
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            root.join("app.git").to_str().unwrap(),
        ],
    );
    let backend = backend(&root, None);
    let port = backend.port;
    let up = format!("http://127.0.0.1:{port}/app.git");
    let store = TestStore::from_env(&tmp.path().join("here"));
    let o = store.admin(&["mirror", "pull", "app", "--from", &up]);
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("3 created"), "{said}");
    let here = Server::start_on(Some(&store), &[], &[]);
    assert_eq!(
        heads_and_tags(&here.url("app")),
        bare_heads_and_tags(&root.join("app.git"))
    );
    let head = |url: &str| {
        let out = git_out(Path::new("/"), &["ls-remote", "--symref", url, "HEAD"]);
        out.lines().next().unwrap_or("").to_owned()
    };
    assert_eq!(head(&here.url("app")), "ref: refs/heads/main\tHEAD");
    // The upstream's HEAD moves to another branch: the mirror's follows.
    git(
        &root.join("app.git"),
        &["symbolic-ref", "HEAD", "refs/heads/dev"],
    );
    let o = store.admin(&["mirror", "pull", "app", "--from", &up]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(head(&here.url("app")), "ref: refs/heads/dev\tHEAD");
    drop(backend);
}

/// What `git ls-remote` shows of a bare repository's branches and tags
/// (peeled tags too), in `heads_and_tags`' order.
fn bare_heads_and_tags(bare: &Path) -> Vec<String> {
    let mut lines: Vec<String> = git_out(bare, &["show-ref", "--heads", "--tags", "-d"])
        .lines()
        .map(|l| {
            let (oid, name) = l.split_once(' ').unwrap();
            format!("{oid}\t{name}")
        })
        .collect();
    lines.sort_by(|a, b| a.split('\t').nth(1).cmp(&b.split('\t').nth(1)));
    lines
}

#[test]
fn bad_upstreams_are_refused_in_words_that_hold_no_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let store = TestStore::from_env(tmp.path());
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (url, says) in [
        (
            "http://me:hunter2@127.0.0.1:9/x.git".to_owned(),
            "holds credentials",
        ),
        ("ssh://git@127.0.0.1/x.git".to_owned(), "not an http(s) URL"),
        (
            format!("http://127.0.0.1:{closed}/x.git"),
            "cannot reach the upstream",
        ),
    ] {
        let o = store.admin(&["mirror", "pull", "org/x", "--from", &url]);
        assert_eq!(o.status.code(), Some(1), "{url}: {}", text(&o));
        assert!(text(&o).contains(says), "{url}: {}", text(&o));
        assert!(!text(&o).contains("hunter2"), "{}", text(&o));
    }
    // an upstream that has no such repository: its HTTP status, no change here
    let upstream = Server::start();
    let o = store.admin(&[
        "mirror",
        "pull",
        "org/x",
        "--from",
        &upstream.url("nothing"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("HTTP 404"), "{}", text(&o));
    let o = store.admin(&["repo", "list"]);
    assert!(text(&o).contains("no repositories"), "{}", text(&o));
}

#[test]
fn a_stored_mirror_is_added_synced_listed_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let upstream = Server::start();
    let work = tmp.path().join("work");
    upstream_work(&work);
    let up = upstream.url("org/app");
    git(&work, &["push", "-q", "--mirror", &up]);
    let store = TestStore::from_env(&tmp.path().join("here"));
    let listed = |store: &TestStore| -> Vec<serde_json::Value> {
        let o = store.admin(&["mirror", "list", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).expect("mirror list --json is JSON")
    };
    assert!(listed(&store).is_empty());

    let o = store.admin(&[
        "mirror",
        "add",
        "org/app",
        "--from",
        &up,
        "--interval",
        "600",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // a second add is refused without --replace; a bad interval, always
    let o = store.admin(&["mirror", "add", "org/app", "--from", &up]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--replace"), "{}", text(&o));
    let o = store.admin(&[
        "mirror",
        "add",
        "org/other",
        "--from",
        &up,
        "--interval",
        "5",
    ]);
    assert!(text(&o).contains("least allowed"), "{}", text(&o));
    let rows = listed(&store);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["repository"], "org/app");
    assert_eq!(rows[0]["from"], up.as_str());
    assert_eq!(rows[0]["interval_secs"], 600);
    assert!(rows[0]["last_success"].is_null());

    // sync pulls with the stored settings and records the success
    let o = store.admin(&["mirror", "sync", "org/app"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("3 created"), "{}", text(&o));
    // (this server runs no mirrors: only the commands below sync)
    let here = Server::start_on(Some(&store), &["--no-mirrors"], &[]);
    assert_eq!(heads_and_tags(&here.url("org/app")), heads_and_tags(&up));
    let rows = listed(&store);
    assert!(rows[0]["last_success"].as_u64().is_some(), "{rows:?}");
    assert_eq!(rows[0]["failures"], 0);

    // an upstream gone: the failure is recorded, counted, and said
    let o = store.admin(&[
        "mirror",
        "add",
        "org/app",
        "--replace",
        "--from",
        &upstream.url("org/gone"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    for n in 1..=2 {
        let o = store.admin(&["mirror", "sync", "org/app"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let rows = listed(&store);
        assert_eq!(rows[0]["failures"], n, "{rows:?}");
        assert!(
            rows[0]["last_error"].as_str().unwrap().contains("HTTP 404"),
            "{rows:?}"
        );
    }
    let human = text(&store.admin(&["mirror", "list"]));
    assert!(human.contains("last error (2 in a row)"), "{human}");

    // removed: the repository stays; deleting a repository drops its mirror
    let o = store.admin(&["mirror", "remove", "org/app"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(listed(&store).is_empty());
    assert_eq!(heads_and_tags(&here.url("org/app")), heads_and_tags(&up));
    let o = store.admin(&["mirror", "sync", "org/app"]);
    assert!(text(&o).contains("has no pull mirror"), "{}", text(&o));
    let o = store.admin(&["mirror", "add", "org/app", "--from", &up]);
    assert!(o.status.success(), "{}", text(&o));
    let o = store.admin(&["repo", "delete", "org/app"]);
    assert!(text(&o).contains("dropped its pull mirror"), "{}", text(&o));
    assert!(listed(&store).is_empty());
}

/// `gitstow <args> --store …` with intervals down to 1 s allowed.
fn admin_short(store: &TestStore, args: &[&str]) -> Output {
    admin_env(store, args, &[("GITSTOW_TEST_SHORT_MIRROR_INTERVAL", "1")])
}

/// Polls `done` every 200 ms until it holds, for at most `secs` seconds.
fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The stored mirror rows (`mirror list --json`).
fn mirror_rows(store: &TestStore) -> Vec<serde_json::Value> {
    let o = store.admin(&["mirror", "list", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).expect("mirror list --json is JSON")
}

/// The "mirror sync" log lines of `servers` (successful pulls).
fn syncs_logged(servers: &[&Server]) -> usize {
    servers
        .iter()
        .map(|s| {
            s.logs()
                .lines()
                .filter(|l| l.contains("mirror sync "))
                .count()
        })
        .sum()
}

#[test]
fn stored_mirrors_are_pulled_by_the_running_instances_and_refuse_pushes() {
    let tmp = tempfile::tempdir().unwrap();
    let upstream = Server::start();
    let work = tmp.path().join("work");
    upstream_work(&work);
    let up = upstream.url("org/app");
    git(&work, &["push", "-q", "--mirror", &up]);
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

    // An upstream that says 404: retried, then paused after three
    // permanent failures in a row; no more pulls until resumed.
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
                .filter(|l| l.starts_with("gitstow_mirror_syncs_total{result=\"paused\"}"))
                .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum::<f64>()
        })
        .sum();
    assert_eq!(scraped, 1.0, "one pull paused the mirror");
}

/// Canonical `git http-backend` on a port of its own, serving `root`,
/// behind HTTP Basic (`scripts/basic-auth-backend.py`) when `users` is
/// given (`name:password:level,…`); killed when dropped.
struct Backend {
    child: std::process::Child,
    port: u16,
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn backend(root: &Path, users: Option<&str>) -> Backend {
    match users {
        Some(u) => backend_script(
            "scripts/basic-auth-backend.py",
            root,
            &[("BASIC_AUTH_USERS", u)],
        ),
        None => backend_script("../shared/tools/git-http-backend-server.py", root, &[]),
    }
}

/// The Python front end `script` (relative to the package) of canonical
/// `git http-backend`, serving `root` with `env`.
fn backend_script(script: &str, root: &Path, env: &[(&str, &str)]) -> Backend {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = manifest.join("../shared/tools/git-http-backend-server.py");
    assert!(
        shared.exists(),
        "the canonical server script {} is missing",
        shared.display()
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new("python3")
        .arg(manifest.join(script))
        .arg(root)
        .arg(port.to_string())
        .envs(env.iter().copied())
        .spawn()
        .expect("python3 runs the canonical server");
    let backend = Backend { child, port };
    wait_until("git http-backend to come up", 20, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    backend
}

/// `gitstow <args> --store …` with `env` set.
fn admin_env(store: &TestStore, args: &[&str], env: &[(&str, &str)]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
        .args(args)
        .args(store.args())
        .env_remove("GITSTOW_SECRETS_KEY")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn credentials_are_sealed_sent_and_never_shown() {
    const PASSWORD: &str = "s3cret-pass-0123";
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let work = tmp.path().join("work");
    upstream_work(&work);
    let bare = root.join("app.git");
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
    let o = admin_env(&store, &["mirror", "pull", "app", "--from", &url], &[]);
    assert!(shows_no_secret(&o).contains("HTTP 401"), "{}", text(&o));
    let o = admin_env(
        &store,
        &[
            "mirror",
            "pull",
            "app",
            "--from",
            &url,
            "--username",
            "mirror",
            "--password-env",
            "PW",
        ],
        &[("PW", "wrong-one")],
    );
    assert!(shows_no_secret(&o).contains("HTTP 401"), "{}", text(&o));
    // The right one from the environment: one pull, nothing stored.
    let o = admin_env(
        &store,
        &[
            "mirror",
            "pull",
            "app",
            "--from",
            &url,
            "--username",
            "mirror",
            "--password-env",
            "PW",
        ],
        &[("PW", PASSWORD)],
    );
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
    let o = admin_env(&store, &add, &[]);
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
    let o = admin_env(&store, &with_key, &[]);
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
    let o = admin_env(&store, &["mirror", "sync", "app"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        shows_no_secret(&o).contains("GITSTOW_SECRETS_KEY"),
        "{}",
        text(&o)
    );
    let other = tmp.path().join("other");
    std::fs::write(&other, "cd".repeat(32)).unwrap();
    let o = admin_env(
        &store,
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
    let upstream = Server::start();
    let work = tmp.path().join("work");
    upstream_work(&work);
    let up = upstream.url("org/app");
    git(&work, &["push", "-q", "--mirror", &up]);
    let store = TestStore::from_env(&tmp.path().join("here"));
    let admin = store.create_token("root", &["*:admin"], &[]);
    let reader = store.create_token("reader", &["*:read"], &[]);
    let key = "ef".repeat(32);
    // An hour between scheduled pulls: only the triggers below bring
    // the upstream's pushes in.
    let o = admin_env(
        &store,
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

/// A bare repository `root/app.git` made from a generated work tree, and
/// the work tree.
fn bare_upstream(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = tmp.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let work = tmp.join("work");
    upstream_work(&work);
    let bare = root.join("app.git");
    git(
        tmp,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    (root, work)
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
fn a_push_mirror_makes_the_remote_equal_after_pushes_deletions_and_a_force_push() {
    let tmp = tempfile::tempdir().unwrap();
    let store = TestStore::from_env(&tmp.path().join("here"));
    let here = Server::start_on(Some(&store), &["--create-store"], &[]);
    let work = tmp.path().join("work");
    upstream_work(&work);
    let mine = here.url("org/app");
    git(&work, &["push", "-q", "--mirror", &mine]);
    // a forge's pull-request ref here is not pushed by default
    git(&work, &["push", "-q", &mine, "dev:refs/pull/1/head"]);
    let remote = Server::start();
    let theirs = remote.url("org/copy");
    let push = || store.admin(&["mirror", "push", "org/app", "--to", &theirs]);

    // The first push takes everything; a second finds nothing to do.
    let o = push();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("3 created"), "{}", text(&o));
    assert_eq!(heads_and_tags(&theirs), heads_and_tags(&mine));
    assert!(!ls_remote(&theirs).contains("refs/pull/"));
    let o = push();
    assert!(text(&o).contains("is up to date"), "{}", text(&o));

    // New commits, a deleted branch, a new tag and a force-push here: the
    // remote ends equal.
    commit_files(&work, &[("b.txt", "b\n")], "b");
    git(&work, &["tag", "v2"]);
    git(&work, &["push", "-q", &mine, "main", "v2"]);
    git(&work, &["push", "-q", &mine, ":dev"]);
    let o = push();
    assert!(
        text(&o).contains("1 created, 1 updated, 1 deleted"),
        "{}",
        text(&o)
    );
    assert_eq!(heads_and_tags(&theirs), heads_and_tags(&mine));
    git(&work, &["reset", "-q", "--hard", "HEAD~3"]);
    git(&work, &["push", "-q", "--force", &mine, "main"]);
    let o = push();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(heads_and_tags(&theirs), heads_and_tags(&mine));
    let o = store.admin(&["fsck", "--all"]);
    assert!(o.status.success(), "{}", text(&o));

    // Canonical git http-backend as the remote: the same refs, and git
    // fsck finds the objects whole.
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let canonical = backend(&root, None);
    let url = format!("http://127.0.0.1:{}/copy.git", canonical.port);
    let o = store.admin(&["mirror", "push", "org/app", "--to", &url]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        bare_heads_and_tags(&root.join("copy.git")),
        heads_and_tags(&mine)
    );
    git(&root.join("copy.git"), &["fsck", "--strict"]);

    // Other refs when asked.
    let o = store.admin(&[
        "mirror",
        "push",
        "org/app",
        "--to",
        &url,
        "--refs",
        "refs/pull/*",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(ls_remote(&url).contains("refs/pull/1/head"));
    // A remote that refuses a ref says so per ref; the others land, and
    // the command fails.
    git(
        &root.join("copy.git"),
        &["config", "receive.denyNonFastForwards", "true"],
    );
    git(&work, &["reset", "-q", "--hard", "HEAD~1"]);
    git(&work, &["push", "-q", "--force", &mine, "main"]);
    git(&work, &["push", "-q", &mine, "main:refs/heads/next"]);
    let o = store.admin(&["mirror", "push", "org/app", "--to", &url]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("refs/heads/main refused by the remote: non-fast-forward"),
        "{}",
        text(&o)
    );
    assert!(ls_remote(&url).contains("refs/heads/next"));
    let o = store.admin(&["mirror", "push", "org/none", "--to", &url]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not found"), "{}", text(&o));
}
