//! The operator's repository commands with the real `git`, on the local
//! store and on S3: the default branch a first push sets (main, else
//! master, else the first branch), `gitstow repo set-head` changing what a
//! clone checks out, `repo create` for a server without auto-create, `repo
//! list`, `repo delete` (not found at once, containers retired for the
//! grace period, a push re-creates it), `repo rename` refused with the way
//! round; and `gitstow fsck` finding each kind of damage planted in a copy.

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn head_of(url: &str) -> String {
    let refs = ls_remote_symref(url);
    refs.lines()
        .find_map(|l| l.strip_prefix("ref: "))
        .and_then(|l| l.split('\t').next())
        .unwrap_or_else(|| panic!("no HEAD symref in {refs}"))
        .to_owned()
}

fn ls_remote_symref(url: &str) -> String {
    let tmp = std::env::temp_dir();
    let o = git(&tmp, &["ls-remote", "--symref", url, "HEAD"]);
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A work tree with `branches` (the first made from the root commit).
fn work_with(dir: &Path, branches: &[&str]) {
    init_repo(dir);
    commit_files(dir, &[("a.txt", "one\n")], "one");
    for b in branches.iter().filter(|b| **b != "main") {
        git(dir, &["branch", "-f", b]);
    }
    if !branches.contains(&"main") {
        git(dir, &["checkout", "-q", branches[0]]);
        git(dir, &["branch", "-D", "main"]);
    }
}

#[test]
fn the_default_branch_and_the_repo_commands() {
    let server = Server::start_with(&["--no-maintenance"]);
    let store = server.store().clone();
    let tmp = tempfile::tempdir().unwrap();
    for (repo, branches, want) in [
        (
            "with-main",
            &["ag/x", "main", "master"][..],
            "refs/heads/main",
        ),
        (
            "with-master",
            &["ag/bstr-migration", "master", "zz"][..],
            "refs/heads/master",
        ),
        ("neither", &["dev", "ag/first"][..], "refs/heads/ag/first"),
    ] {
        let w = tmp.path().join(repo);
        work_with(&w, branches);
        git(&w, &["push", "-q", "--mirror", &server.url(repo)]);
        assert_eq!(head_of(&server.url(repo)), want, "{repo}");
    }

    // set-head: what a clone checks out.
    let o = store.admin(&["repo", "set-head", "with-master", "zz"]);
    assert!(o.status.success(), "{}", out(&o));
    let clone = tmp.path().join("clone");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            &server.url("with-master"),
            clone.to_str().unwrap(),
        ],
    );
    assert_eq!(git_out(&clone, &["symbolic-ref", "HEAD"]), "refs/heads/zz");
    let o = store.admin(&["repo", "set-head", "with-master", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).contains("has no branch 'nope'"), "{}", out(&o));

    // list.
    let o = store.admin(&["repo", "list"]);
    let listed = out(&o);
    for name in ["with-main", "with-master", "neither"] {
        assert!(listed.contains(name), "{listed}");
    }
    assert!(listed.contains("refs/heads/zz"), "{listed}");
    let o = store.admin(&["repo", "list", "--prefix", "with-"]);
    assert!(!out(&o).contains("neither"), "{}", out(&o));
    // as JSON, sizes in bytes; the table's sizes for people, or exact
    let o = store.admin(&["repo", "list", "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).expect("JSON");
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["neither", "with-main", "with-master"]);
    let row = &rows[2];
    assert_eq!(row["head"], "refs/heads/zz", "{row}");
    assert_eq!(row["refs"], 3, "{row}");
    assert_eq!(row["lfs_objects"], 0, "{row}");
    let bytes = row["bytes"].as_u64().unwrap();
    let stored: u64 = store
        .repo_state("with-master")
        .unwrap()
        .containers
        .iter()
        .map(|c| c.bytes)
        .sum();
    assert_eq!(bytes, stored, "{row}");
    let table = out(&store.admin(&["repo", "list", "--bytes", "--prefix", "with-master"]));
    assert!(table.starts_with("NAME "), "{table}");
    assert!(table.contains(&format!(" {bytes} ")), "{table}");
    let human = out(&store.admin(&["repo", "list", "--prefix", "with-master"]));
    assert!(
        human.contains(" bytes ") || human.contains(" KiB "),
        "{human}"
    );

    // delete: not found at once, containers retired, a push re-creates it.
    let ids: Vec<String> = store
        .repo_state("neither")
        .unwrap()
        .containers
        .iter()
        .map(|c| c.id.clone())
        .collect();
    let o = store.admin(&["repo", "delete", "neither"]);
    assert!(o.status.success(), "{}", out(&o));
    let gone = git_cmd(tmp.path())
        .args(["ls-remote", &server.url("neither")])
        .output()
        .unwrap();
    assert!(!gone.status.success());
    assert!(out(&gone).contains("not found"), "{}", out(&gone));
    let retired: Vec<String> = store.retired("neither").into_iter().map(|r| r.id).collect();
    for id in &ids {
        assert!(retired.contains(id), "{id} not retired: {retired:?}");
    }
    assert!(!out(&store.admin(&["repo", "list"])).contains("neither"));
    let o = store.admin(&["repo", "delete", "neither"]);
    assert!(out(&o).contains("not found"), "{}", out(&o));
    let w = tmp.path().join("neither");
    git(&w, &["push", "-q", &server.url("neither"), "dev"]);
    assert!(ls_remote(&server.url("neither")).contains("refs/heads/dev"));

    // rename: refused, saying what to do instead.
    let o = store.admin(&["repo", "rename", "with-main", "renamed"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).contains("push --mirror"), "{}", out(&o));
}

#[test]
fn repo_create_serves_a_server_without_auto_create() {
    let server = Server::start_with(&["--no-auto-create", "--no-maintenance"]);
    let store = server.store().clone();
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    init_repo(&w);
    commit_files(&w, &[("a.txt", "one\n")], "one");
    let refused = git_cmd(&w)
        .args(["push", &server.url("org/new"), "main"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let o = store.admin(&["repo", "create", "org/new"]);
    assert!(o.status.success(), "{}", out(&o));
    let o = store.admin(&["repo", "create", "org/new"]);
    assert!(out(&o).contains("exists already"), "{}", out(&o));
    let o = store.admin(&["repo", "create", "../escape"]);
    assert!(!o.status.success());
    git(&w, &["push", "-q", &server.url("org/new"), "main"]);
    assert_eq!(head_of(&server.url("org/new")), "refs/heads/main");
}

#[test]
fn fsck_finds_each_kind_of_damage() {
    let server = Server::start_with(&["--no-maintenance"]);
    let store = server.store().clone();
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    init_repo(&w);
    for i in 0..20 {
        let text: String = (0..200).map(|l| format!("line {l} of {i}\n")).collect();
        commit_files(
            &w,
            &[("a.txt", &text), (&format!("f{i}"), &text)],
            &format!("c{i}"),
        );
    }
    for name in ["sound", "truncated", "no-index", "no-bin", "corrupt"] {
        git(&w, &["push", "-q", &server.url(name), "main"]);
    }
    let o = store.admin(&["fsck", "--repo", "sound"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(out(&o).contains(": ok"), "{}", out(&o));
    // No progress when stderr is not a terminal, unless asked for; then in
    // git's words, with the store's request count on S3.
    assert!(o.stderr.is_empty(), "{}", out(&o));
    let o = store.admin(&["fsck", "--repo", "sound", "--progress"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("Checking objects: 100% (") && err.contains("Checking connectivity: "),
        "{err}"
    );
    assert!(err.contains(", done.\n"), "{err}");
    assert_eq!(
        err.contains("Store requests: "),
        std::env::var("GITSTOW_TEST_STORE").as_deref() == Ok("s3"),
        "{err}"
    );
    let o = store.admin(&["fsck", "--repo", "sound", "--progress", "--no-progress"]);
    assert!(
        o.stderr.is_empty(),
        "the last of the pair wins: {}",
        out(&o)
    );

    let s = store.open();
    let bin = |name: &str| {
        let id = store.repo_state(name).unwrap().containers[0].id.clone();
        (
            format!("{name}.git/containers/{id}.bin"),
            format!("{name}.git/containers/{id}.idx"),
        )
    };
    use gitstow_store::PutCondition;
    let (b, _) = bin("truncated");
    let (bytes, _) = s.get(&b).unwrap().unwrap();
    s.put(&b, &bytes[..bytes.len() / 2], PutCondition::None)
        .unwrap();
    let (_, i) = bin("no-index");
    s.delete(&i).unwrap();
    let (b, i) = bin("no-bin");
    s.delete(&b).unwrap();
    s.delete(&i).unwrap();
    let (b, _) = bin("corrupt");
    let (mut bytes, _) = s.get(&b).unwrap().unwrap();
    let mid = bytes.len() / 2;
    for x in &mut bytes[mid..mid + 8] {
        *x ^= 0x5a;
    }
    s.put(&b, &bytes, PutCondition::None).unwrap();

    for (name, want) in [
        ("truncated", "(truncated)"),
        ("no-index", "index unreadable"),
        ("no-bin", "missing container"),
        ("corrupt", "error: "),
    ] {
        let o = store.admin(&["fsck", "--repo", name]);
        let text = out(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {text}");
        assert!(text.contains(want), "{name}: want {want:?} in {text}");
        assert!(text.contains(" problem"), "{name}: {text}");
    }
    // Missing containers leave objects the refs reach missing, in git's words.
    let o = store.admin(&["fsck", "--repo", "no-bin"]);
    assert!(out(&o).contains("invalid sha1 pointer"), "{}", out(&o));
    // --all checks every repository and fails when one is damaged.
    let o = store.admin(&["fsck", "--all"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).contains("sound: "), "{}", out(&o));
    let o = store.admin(&["fsck", "--repo", "absent"]);
    assert!(out(&o).contains("not found"), "{}", out(&o));
}

#[test]
fn fsck_all_skips_deleted_repositories_and_commands_refuse_a_missing_local_store() {
    let server = Server::start_with(&["--no-maintenance"]);
    let store = server.store().clone();
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    init_repo(&w);
    commit_files(&w, &[("a.txt", "one\n")], "one");
    for name in ["a/one", "b/two", "c/three"] {
        git(&w, &["push", "-q", &server.url(name), "main"]);
    }
    let o = store.admin(&["repo", "delete", "b/two"]);
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains("its 1 container is removed"),
        "{}",
        out(&o)
    );
    let o = store.admin(&["fsck", "--all"]);
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("a/one: ") && text.contains("c/three: "),
        "{text}"
    );
    assert!(!text.contains("b/two"), "{text}");
    // Neither --repo nor --all: refused by the parser.
    let o = store.admin(&["fsck"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));

    // A mistyped local store path: refused, and not created.
    if let TestStore::Fs(_) = store {
        let missing = tmp.path().join("no-such-store");
        let url = format!("file://{}", missing.display());
        for cmd in [
            &["fsck", "--all", "--store", &url][..],
            &["repo", "list", "--store", &url],
            &["token", "list", "--store", &url],
            &["access", "show", "--store", &url],
        ] {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
                .args(cmd)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", out(&o));
            assert!(out(&o).contains("does not exist"), "{cmd:?}: {}", out(&o));
        }
        assert!(!missing.exists(), "a read-only command created the store");
        // serve refuses it too, naming the flag, and exits at once with 2:
        // it would otherwise serve a new, empty store with access control off.
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
            .args(["serve", "--listen", "127.0.0.1:0", "--store", &url])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", out(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!(
                "store directory {} does not exist",
                missing.display()
            )) && err.contains("--create-store"),
            "{err}"
        );
        assert!(!missing.exists(), "serve created a mistyped store");
        // so do the commands that may start a store, unless asked to
        for cmd in [
            &["repo", "create", "first", "--store", &url][..],
            &[
                "token", "create", "--name", "a", "--grant", "*:read", "--store", &url,
            ],
            &[
                "mirror",
                "pull",
                "x",
                "--from",
                "http://127.0.0.1:9/x.git",
                "--store",
                &url,
            ],
        ] {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
                .args(cmd)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", out(&o));
            assert!(
                out(&o).contains("pass --create-store"),
                "{cmd:?}: {}",
                out(&o)
            );
        }
        assert!(!missing.exists(), "a command made the store unasked");
        // repo create --create-store starts a store, and says so.
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
            .args(["repo", "create", "first", "--create-store", "--store", &url])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", out(&o));
        assert!(missing.is_dir());
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("creating a new, empty local store at"),
            "{}",
            out(&o)
        );
        // serve --create-store makes one where told, and logs one line of it.
        let other = tmp.path().join("made-by-serve");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--create-store",
                "--no-maintenance",
            ])
            .args(["--store", &format!("file://{}", other.display())])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(line.starts_with("gitstow listening on "), "{line}");
        child.kill().unwrap();
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.matches("creating a new, empty local store").count(),
            1,
            "{err}"
        );
        assert!(other.is_dir());
    }
}

/// Issue 42, finding 5: `gitstow repo delete` while a push that creates a
/// branch on top of the repository's history runs (here from its
/// pre-receive hook, so the deletion lands between the push's start and
/// its commit). The push relies on the history's objects, which went with
/// the repository: it is refused in git's words (`! [remote rejected] …
/// (the repository was deleted during the push)`), and the repository
/// stays deleted. Before, the client was told `* [new branch]` and the
/// repository was re-created with only the push's container: a clone
/// failed on a missing commit.
#[test]
fn a_push_into_a_repository_deleted_meanwhile_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = TestStore::from_env(tmp.path());
    let bin = env!("CARGO_BIN_EXE_gitstow");
    let quoted: Vec<String> = store
        .args()
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect();
    let hook = tmp.path().join("pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nif grep -q refs/heads/topic; then '{bin}' repo delete doomed {} >&2; fi\nexit 0\n",
            quoted.join(" ")
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let server = Server::start_on(
        Some(&store),
        &["--pre-receive-hook", hook.to_str().unwrap()],
        &[],
    );
    let url = server.url("doomed");
    let work = tmp.path().join("work");
    init_repo(&work);
    for i in 0..5 {
        commit_files(&work, &[("file.txt", &format!("version {i}\n"))], "edit");
    }
    git(&work, &["push", "--quiet", &url, "HEAD:refs/heads/main"]);
    commit_files(&work, &[("file.txt", "on topic\n")], "topic");
    let o = git_cmd(&work)
        .args(["push", &url, "HEAD:refs/heads/topic"])
        .output()
        .unwrap();
    let said = out(&o);
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains(
            "[remote rejected] HEAD -> topic (the repository was deleted during the push)"
        ),
        "{said}"
    );
    assert!(!said.contains("[new branch]"), "{said}");
    // Deleted, not broken: not found.
    let o = git_cmd(tmp.path())
        .args(["ls-remote", &url])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not found"),
        "{}",
        out(&o)
    );
    let o = store.admin(&["repo", "list"]);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("doomed"),
        "{}",
        out(&o)
    );
}
