//! Pull and push mirrors run from the command line (issue 45, plan 0017):
//! `gitstow mirror pull` takes a repository in from another server (a
//! second `gitstow serve` or canonical `git http-backend`), `mirror add …
//! sync … remove` keep one stored, `mirror push` hands one on; the real
//! `git` on the other side. `tests/mirror_sync.rs` has the mirrors that
//! running instances keep in step.

mod common;

use std::path::Path;

use common::mirror::*;
use common::*;

#[test]
fn a_pull_mirror_takes_a_repository_in_and_keeps_what_the_upstream_rewrites() {
    let tmp = tempfile::tempdir().unwrap();
    let (_upstream, work, up) = upstream_app(tmp.path());
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
    let (root, _work) = bare_upstream(tmp.path());
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
        (
            "ftp://127.0.0.1/x.git".to_owned(),
            "not an http(s) or ssh URL",
        ),
        (
            "ssh://git:hunter2@127.0.0.1/x.git".to_owned(),
            "holds a password",
        ),
        (
            "ssh://git@127.0.0.1/x.git".to_owned(),
            "needs --ssh-key-file",
        ),
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
    let (upstream, _work, up) = upstream_app(tmp.path());
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
    // Work pushed to the remote by someone else (a commit this repository
    // does not have) is not overwritten: that ref is refused, the rest go.
    let other = tmp.path().join("other");
    git(
        tmp.path(),
        &["clone", "-q", &theirs, other.to_str().unwrap()],
    );
    commit_files(&other, &[("theirs.txt", "theirs\n")], "theirs");
    git(&other, &["push", "-q", &theirs, "main"]);
    let their_main = git_out(&other, &["rev-parse", "main"]);
    commit_files(&work, &[("c.txt", "c\n")], "c");
    git(&work, &["tag", "v3"]);
    git(&work, &["push", "-q", &mine, "main", "v3"]);
    let o = push();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("refs/heads/main refused") && text(&o).contains("fetch first"),
        "{}",
        text(&o)
    );
    let listed = ls_remote(&theirs);
    assert!(
        listed.contains(&format!("{their_main}\trefs/heads/main")),
        "{listed}"
    );
    assert!(listed.contains("refs/tags/v3"), "{listed}");

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

#[test]
fn lfs_objects_come_with_a_pull_and_go_with_a_push() {
    let tmp = tempfile::tempdir().unwrap();
    // An upstream gitstow holding org/app with two LFS files (git-lfs's
    // pre-push uploads them through its batch API).
    let upstream = Server::start();
    let up = upstream.url("org/app");
    let (work, big, small) = lfs_work(tmp.path(), "work");
    git(&work, &["push", "-q", &up, "main"]);

    // Taken in: the objects the pulled pointers name come too.
    let store = TestStore::from_env(&tmp.path().join("here"));
    let here = Server::start_on(Some(&store), &["--create-store"], &[]);
    let o = store.admin(&["mirror", "pull", "org/app", "--from", &up]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("2 Git LFS object(s) brought"),
        "{}",
        text(&o)
    );
    let clone = tmp.path().join("clone");
    git(
        tmp.path(),
        &["clone", "-q", &here.url("org/app"), clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(clone.join("assets/small.bin")).unwrap(),
        small
    );
    // Nothing new: nothing asked for.
    let o = store.admin(&["mirror", "pull", "org/app", "--from", &up]);
    assert!(!text(&o).contains("Git LFS"), "{}", text(&o));

    // A pointer whose object the upstream lacks: the pull lands, the object
    // is listed, and a later sync brings it once the upstream has it.
    let late = noise(4096, 3);
    std::fs::write(work.join("late.bin"), &late).unwrap();
    git(&work, &["add", "late.bin"]);
    git(&work, &["commit", "-q", "-m", "late"]);
    let o = git_cmd(&work)
        .env("GIT_LFS_SKIP_PUSH", "1")
        .args(["push", "-q", &up, "main"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = store.admin(&["mirror", "add", "org/app", "--from", &up]);
    assert!(o.status.success(), "{}", text(&o));
    let o = store.admin(&["mirror", "sync", "org/app"]);
    assert!(o.status.success(), "{}", text(&o));
    let late_oid = sha256_hex(&late);
    assert!(
        text(&o).contains(&format!(
            "Git LFS object {late_oid} (4096 bytes) not brought"
        )),
        "{}",
        text(&o)
    );
    let rows = mirror_rows(&store);
    assert_eq!(
        rows[0]["lfs_missing"][0]["oid"],
        late_oid.as_str(),
        "{rows:?}"
    );
    git(&work, &["lfs", "push", "--all", &up]);
    let o = store.admin(&["mirror", "sync", "org/app"]);
    assert!(
        text(&o).contains("1 Git LFS object(s) brought"),
        "{}",
        text(&o)
    );
    assert_eq!(mirror_rows(&store)[0]["lfs_missing"], serde_json::json!([]));
    let o = store.admin(&["fsck", "--repo", "org/app"]);
    assert!(o.status.success(), "{}", text(&o));

    // Handed on: a push mirror to a third gitstow uploads what the
    // repository owns before the refs, and a clone of the remote has the
    // files.
    let remote = Server::start();
    let theirs = remote.url("org/copy");
    let o = store.admin(&["mirror", "push", "org/app", "--to", &theirs]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("3 Git LFS object(s) handed on"),
        "{}",
        text(&o)
    );
    let copy = tmp.path().join("copy");
    git(
        tmp.path(),
        &["clone", "-q", &theirs, copy.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(copy.join("big.bin")).unwrap(), big);
    assert_eq!(std::fs::read(copy.join("late.bin")).unwrap(), late);
    // Again: the remote has them all, nothing moves.
    let o = store.admin(&["mirror", "push", "org/app", "--to", &theirs]);
    assert!(!text(&o).contains("Git LFS"), "{}", text(&o));
}

#[test]
fn ssh_upstreams_and_remotes_take_a_key_and_hold_to_their_host_key() {
    let tmp = tempfile::tempdir().unwrap();
    // The other server over SSH: a gitstow with `serve --ssh-listen`, the
    // key `dev` granted org/* (and HTTP for checking what it holds).
    let up = Ssh::start();
    up.mirror(tmp.path(), 20);
    let url = up.url("org/app");
    let theirs_http = up.http_url("org/app");
    let store = TestStore::from_env(&tmp.path().join("here"));
    let here = Server::start_on(Some(&store), &["--create-store"], &[]);
    let dev = up.dev.to_str().unwrap();
    let pull = |extra: &[&str]| {
        let mut args = vec!["mirror", "pull", "org/app", "--from", &url];
        args.extend(extra);
        store.admin(&args)
    };

    // Without a key, with a key the upstream does not know, and with a
    // host key that is not the upstream's: refused, saying why.
    let o = pull(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("needs --ssh-key-file"), "{}", text(&o));
    let o = pull(&["--ssh-key-file", up.stranger.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("refused the SSH key for git"),
        "{}",
        text(&o)
    );
    let wrong = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let o = pull(&["--ssh-key-file", dev, "--ssh-host-key", wrong]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("host key changed: it shows SHA256:") && text(&o).contains(wrong),
        "{}",
        text(&o)
    );

    // With the key: the repository taken in, and the host key it showed
    // said, to be checked and pinned.
    let o = pull(&["--ssh-key-file", dev]);
    assert!(o.status.success(), "{}", text(&o));
    let shown = text(&o);
    let host_key = shown
        .split("the upstream's SSH host key is ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{shown}"))
        .to_owned();
    assert_eq!(
        heads_and_tags(&here.url("org/app")),
        heads_and_tags(&theirs_http)
    );

    // Stored, its key sealed: a sync keeps the host key it saw; an
    // upstream push then arrives by the next sync.
    let key = tmp.path().join("secrets.key");
    std::fs::write(&key, "cd".repeat(32)).unwrap();
    let key = key.to_str().unwrap();
    let o = store.admin(&[
        "mirror",
        "add",
        "org/app",
        "--from",
        &url,
        "--ssh-key-file",
        dev,
        "--secrets-key-file",
        key,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let pem = std::fs::read_to_string(&up.dev).unwrap();
    let doc = store.open().get("org/app.git/mirror").unwrap().unwrap().0;
    let pem_line = pem.lines().nth(1).unwrap();
    assert!(
        !String::from_utf8_lossy(&doc).contains(pem_line),
        "the key is sealed"
    );
    let work = tmp.path().join("work");
    let o = up.git(
        tmp.path(),
        &up.dev,
        &["clone", "-q", &url, work.to_str().unwrap()],
    );
    ok(&o, "clone over ssh");
    commit_files(&work, &[("ssh.txt", "over ssh\n")], "over ssh");
    ok(
        &up.git(&work, &up.dev, &["push", "-q", "origin", "HEAD"]),
        "push over ssh",
    );
    let o = store.admin(&["mirror", "sync", "org/app", "--secrets-key-file", key]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("1 updated"), "{}", text(&o));
    assert_eq!(
        heads_and_tags(&here.url("org/app")),
        heads_and_tags(&theirs_http)
    );
    assert_eq!(mirror_rows(&store)[0]["ssh_host_key"], host_key.as_str());

    // Handed on over SSH: a push to another repository there.
    let o = store.admin(&[
        "mirror",
        "push",
        "org/app",
        "--to",
        &up.url("org/copy"),
        "--ssh-key-file",
        dev,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        heads_and_tags(&up.http_url("org/copy")),
        heads_and_tags(&here.url("org/app"))
    );

    // Git LFS objects both ways over SSH: the LFS API the upstream's
    // git-lfs-authenticate names.
    let (lfs, big, _) = lfs_work(tmp.path(), "lfs-work");
    ok(
        &up.git(&lfs, &up.dev, &["push", "-q", &up.url("org/lfs"), "main"]),
        "git-lfs push over ssh",
    );
    let o = store.admin(&[
        "mirror",
        "pull",
        "org/lfs",
        "--from",
        &up.url("org/lfs"),
        "--ssh-key-file",
        dev,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("2 Git LFS object(s) brought"),
        "{}",
        text(&o)
    );
    let clone = tmp.path().join("lfs-clone");
    git(
        tmp.path(),
        &["clone", "-q", &here.url("org/lfs"), clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("big.bin")).unwrap(), big);
    let o = store.admin(&[
        "mirror",
        "push",
        "org/lfs",
        "--to",
        &up.url("org/lfs-copy"),
        "--ssh-key-file",
        dev,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("2 Git LFS object(s) handed on"),
        "{}",
        text(&o)
    );
    let copy = tmp.path().join("lfs-copy");
    ok(
        &up.git(
            tmp.path(),
            &up.dev,
            &[
                "clone",
                "-q",
                &up.url("org/lfs-copy"),
                copy.to_str().unwrap(),
            ],
        ),
        "git-lfs clone over ssh",
    );
    assert_eq!(std::fs::read(copy.join("big.bin")).unwrap(), big);
}

#[test]
fn an_upstream_that_renames_its_default_branch_is_followed_in_one_pull() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _work) = bare_upstream(tmp.path());
    let bare = root.join("app.git");
    let up = backend(&root, None);
    let url = format!("http://127.0.0.1:{}/app.git", up.port);
    let store = TestStore::from_env(&tmp.path().join("here"));
    let here = Server::start_on(Some(&store), &["--create-store"], &[]);
    let mine = here.url("org/app");
    let pull = || store.admin(&["mirror", "pull", "org/app", "--from", &url]);
    assert!(pull().status.success());
    let head = |u: &str| {
        git_out(Path::new("/"), &["ls-remote", "--symref", u, "HEAD"])
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(head(&mine).contains("refs/heads/main"), "{}", head(&mine));
    // main becomes trunk upstream, HEAD with it, in one go: the pull
    // deletes the branch HEAD named and moves HEAD in the same
    // transaction (git's receive-pack alone would refuse the deletion).
    git(&bare, &["branch", "-m", "main", "trunk"]);
    let o = pull();
    assert!(o.status.success(), "{}", text(&o));
    assert!(head(&mine).contains("refs/heads/trunk"), "{}", head(&mine));
    assert_eq!(heads_and_tags(&mine), heads_and_tags(&url));
}
