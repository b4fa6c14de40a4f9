//! Git LFS with the real `git-lfs` client (installed by `.ci/run`) against
//! `gitstow serve`: a push uploads the tracked files through the batch API,
//! a clone downloads them (smudge), the bytes are kept once per store and
//! owned per repository; and raw requests for what the client never sends:
//! no credentials, a read-only token, another repository's object, forged
//! or misused grants, bytes that are not the oid's, malformed batches.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;

/// Installs git-lfs's filters in the test `HOME` once (`git lfs install`).
fn lfs_installed(dir: &Path) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        git(dir, &["lfs", "install", "--skip-repo"]);
    });
}

/// Deterministic bytes that do not compress: `n` of them from `seed`.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// git with a credential-store file that holds `secret` for `server`.
fn git_as(server: &Server, tmp: &Path, secret: &str) -> Vec<String> {
    let creds = tmp.join(format!("creds-{}", &secret[..12]));
    std::fs::write(
        &creds,
        format!("http://any:{secret}@127.0.0.1:{}\n", server.port()),
    )
    .unwrap();
    vec![
        "-c".into(),
        format!("credential.helper=store --file={}", creds.display()),
    ]
}

fn run(dir: &Path, pre: &[String], args: &[&str]) -> std::process::Output {
    let mut all: Vec<&str> = pre.iter().map(String::as_str).collect();
    all.extend(args);
    git_cmd(dir).args(&all).output().expect("run git")
}

fn ok(dir: &Path, pre: &[String], args: &[&str]) -> String {
    let out = run(dir, pre, args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "git {args:?} failed:\n{err}");
    err
}

/// A work tree tracking `*.bin` with LFS: two binaries (3 MB and 1 KiB) and
/// a text file, committed; returns the work tree and the two files' bytes.
fn lfs_work(tmp: &Path, name: &str) -> (PathBuf, Vec<u8>, Vec<u8>) {
    let work = tmp.join(name);
    init_repo(&work);
    lfs_installed(&work);
    git(&work, &["lfs", "track", "*.bin"]);
    let big = noise(1, 3 << 20);
    let small = noise(2, 1024);
    std::fs::write(work.join("big.bin"), &big).unwrap();
    std::fs::create_dir_all(work.join("assets")).unwrap();
    std::fs::write(work.join("assets/small.bin"), &small).unwrap();
    commit_files(&work, &[("README", "text stays in git\n")], "add files");
    (work, big, small)
}

/// The LFS object keys of the store and the markers of `repo`.
fn lfs_keys(server: &Server, repo: &str) -> (Vec<String>, Vec<String>) {
    let keys = server.store_keys();
    let objects = keys
        .iter()
        .filter(|k| k.starts_with(".gitstow/lfs/objects/"))
        .cloned()
        .collect();
    let marker = format!("{repo}.git/lfs/objects/");
    let owned = keys
        .iter()
        .filter(|k| k.starts_with(&marker))
        .cloned()
        .collect();
    (objects, owned)
}

/// Uploads the server accepted so far (its log lines).
fn stored(server: &Server) -> usize {
    server.logs().matches("LFS object stored").count()
}

fn start() -> (Server, String, String) {
    let server = Server::start_with(&["--no-maintenance", "--access-refresh", "1"]);
    let writer = server.store().create_token("dev", &["org/*:write"], &[]);
    let reader = server.store().create_token("ro", &["org/*:read"], &[]);
    (server, writer, reader)
}

#[test]
fn push_uploads_and_clone_downloads_the_tracked_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let (work, big, small) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_writer = git_as(&server, tmp.path(), &writer);
    ok(&work, &as_writer, &["push", &url, "main"]);
    assert_eq!(stored(&server), 2);
    let (objects, owned) = lfs_keys(&server, "org/app");
    let big_oid = sha256_hex(&big);
    let small_oid = sha256_hex(&small);
    assert_eq!(objects.len(), 2, "{objects:?}");
    assert!(objects.iter().any(|k| k.ends_with(&big_oid)), "{objects:?}");
    assert_eq!(owned, {
        let mut v = vec![
            format!("org/app.git/lfs/objects/{big_oid}"),
            format!("org/app.git/lfs/objects/{small_oid}"),
        ];
        v.sort();
        v
    });

    // a clone by a read-only token gets the files' bytes, not pointers
    let clone = tmp.path().join("clone");
    let as_reader = git_as(&server, tmp.path(), &reader);
    ok(
        tmp.path(),
        &as_reader,
        &["clone", "--quiet", &url, clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(clone.join("assets/small.bin")).unwrap(),
        small
    );
    let listed =
        String::from_utf8(run(&clone, &as_reader, &["lfs", "ls-files", "--long"]).stdout).unwrap();
    assert!(listed.contains(&format!("{big_oid} * big.bin")), "{listed}");

    // a second push of the same commit uploads nothing: the repository has both
    let again = tmp.path().join("again");
    ok(
        tmp.path(),
        &as_writer,
        &["clone", "--quiet", &url, again.to_str().unwrap()],
    );
    commit_files(&again, &[("README", "more text\n")], "text only");
    ok(&again, &as_writer, &["push", &url, "main"]);
    assert_eq!(stored(&server), 2);

    // another repository gets the same files: uploaded again (proof of
    // possession), kept once in the store, owned by both
    let other = server.url("org/other");
    ok(&work, &as_writer, &["push", &other, "main"]);
    assert_eq!(stored(&server), 4);
    let (objects, owned) = lfs_keys(&server, "org/other");
    assert_eq!(objects.len(), 2, "{objects:?}");
    assert_eq!(owned.len(), 2, "{owned:?}");

    // deleting a repository drops its claims: one made later under its
    // name cannot read them; the other repository keeps its own
    let o = server.store().admin(&["repo", "delete", "org/other"]);
    assert!(o.status.success(), "{o:?}");
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("dropped its claim to 2 Git LFS object(s)"),
        "{said}"
    );
    assert!(lfs_keys(&server, "org/other").1.is_empty());
    assert_eq!(lfs_keys(&server, "org/app").1.len(), 2);
}

#[test]
fn a_read_only_token_cannot_upload_and_nothing_is_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _writer, reader) = start();
    let (work, _, _) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_reader = git_as(&server, tmp.path(), &reader);
    // `git lfs push` alone: the refusal comes from the LFS batch, not from git
    let out = run(&work, &as_reader, &["lfs", "push", &url, "main"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("batch response: token 'ro' has read access to org/app, write is needed"),
        "{err}"
    );
    let (objects, owned) = lfs_keys(&server, "org/app");
    assert!(
        objects.is_empty() && owned.is_empty(),
        "{objects:?} {owned:?}"
    );
}

/// A batch request body.
fn batch(op: &str, objects: &[(&str, u64)]) -> Vec<u8> {
    let objects: Vec<serde_json::Value> = objects
        .iter()
        .map(|(oid, size)| serde_json::json!({"oid": oid, "size": size}))
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "operation": op, "transfers": ["basic"], "objects": objects, "hash_algo": "sha256"
    }))
    .unwrap()
}

fn post_batch(server: &Server, repo: &str, token: Option<&str>, body: &[u8]) -> Response {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("Accept", "application/vnd.git-lfs+json"),
        ("Content-Type", "application/vnd.git-lfs+json"),
    ];
    if let Some(b) = bearer.as_deref() {
        headers.push(("Authorization", b));
    }
    http(
        server.port(),
        "POST",
        &format!("/{repo}.git/info/lfs/objects/batch"),
        &headers,
        body,
    )
}

fn json(r: &Response) -> serde_json::Value {
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.git-lfs+json"),
        "{} {}",
        r.status,
        r.text()
    );
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

/// The action `name` of the answer's first object: (path, Authorization).
fn action(answer: &serde_json::Value, name: &str) -> (String, String) {
    let a = &answer["objects"][0]["actions"][name];
    let href = a["href"]
        .as_str()
        .unwrap_or_else(|| panic!("no {name}: {answer}"));
    let path = href.split_once("127.0.0.1:").unwrap().1;
    let path = &path[path.find('/').unwrap()..];
    (
        path.to_owned(),
        a["header"]["Authorization"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn raw_requests_are_answered_in_the_spec_s_words() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let content = b"the bytes of an LFS object".to_vec();
    let oid = sha256_hex(&content);
    let size = content.len() as u64;

    // no credentials: 401 with LFS-Authenticate
    let r = post_batch(
        &server,
        "org/app",
        None,
        &batch("download", &[(&oid, size)]),
    );
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(
        r.header("lfs-authenticate"),
        Some("Basic realm=\"gitstow\"")
    );
    assert!(json(&r)["message"].is_string());
    // a read-only token may not ask to upload: 403
    let r = post_batch(
        &server,
        "org/app",
        Some(&reader),
        &batch("upload", &[(&oid, size)]),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    // a repository that does not exist has nothing to download: 404
    let r = post_batch(
        &server,
        "org/app",
        Some(&reader),
        &batch("download", &[(&oid, size)]),
    );
    assert_eq!(r.status, 404, "{}", r.text());

    // upload through the actions the batch gives
    let r = post_batch(
        &server,
        "org/app",
        Some(&writer),
        &batch("upload", &[(&oid, size)]),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = json(&r);
    assert_eq!(answer["transfer"], "basic");
    assert_eq!(answer["objects"][0]["authenticated"], true);
    let (put_path, grant) = action(&answer, "upload");
    let (verify_path, verify_grant) = action(&answer, "verify");
    let port = server.port();
    let put = |headers: &[(&str, &str)], body: &[u8]| http(port, "PUT", &put_path, headers, body);
    // a forged grant, and none at all, are refused; nothing is stored
    let forged = format!("{}0", &grant[..grant.len() - 1]);
    assert_eq!(put(&[("Authorization", &forged)], &content).status, 403);
    assert_eq!(put(&[], &content).status, 401);
    // other bytes than the oid's: 422; more than announced: 400
    let mut wrong = content.clone();
    wrong[0] ^= 1;
    let r = put(&[("Authorization", &grant)], &wrong);
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(
        json(&r)["message"]
            .as_str()
            .unwrap()
            .contains("do not hash"),
        "{}",
        r.text()
    );
    let mut longer = content.clone();
    longer.push(b'!');
    assert_eq!(put(&[("Authorization", &grant)], &longer).status, 400);
    assert_eq!(lfs_keys(&server, "org/app"), (vec![], vec![]));
    // before the upload, verify says the object is missing
    let verify = serde_json::to_vec(&serde_json::json!({"oid": oid, "size": size})).unwrap();
    let r = http(
        port,
        "POST",
        &verify_path,
        &[("Authorization", &verify_grant)],
        &verify,
    );
    assert_eq!(r.status, 404, "{}", r.text());
    // the right bytes: stored, owned, verified
    let r = put(&[("Authorization", &grant)], &content);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = http(
        port,
        "POST",
        &verify_path,
        &[("Authorization", &verify_grant)],
        &verify,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // an upload grant does not download
    let get_path = put_path.clone();
    assert_eq!(
        http(port, "GET", &get_path, &[("Authorization", &grant)], b"").status,
        403
    );

    // download: the batch's action gives the bytes
    let r = post_batch(
        &server,
        "org/app",
        Some(&reader),
        &batch("download", &[(&oid, size)]),
    );
    // the repository holds LFS objects but no git data yet: not found
    assert_eq!(r.status, 404, "{}", r.text());
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "c1");
    let authed = server
        .url("org/app")
        .replace("http://", &format!("http://dev:{writer}@"));
    git(&work, &["push", "--quiet", &authed, "main"]);
    let missing = sha256_hex(b"nobody uploaded this");
    let r = post_batch(
        &server,
        "org/app",
        Some(&reader),
        &batch(
            "download",
            &[(&oid, size), (&missing, 3), ("NOT-AN-OID", 1)],
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = json(&r);
    assert_eq!(answer["objects"][1]["error"]["code"], 404);
    assert_eq!(answer["objects"][2]["error"]["code"], 422);
    let (get_path, get_grant) = action(&answer, "download");
    let r = http(
        port,
        "GET",
        &get_path,
        &[("Authorization", &get_grant)],
        b"",
    );
    assert_eq!((r.status, &r.body), (200, &content));
    // a download grant of org/app does not open the object in org/other,
    // and org/other, which never uploaded it, cannot have it by its oid
    let other_path = get_path.replace("/org/app.git/", "/org/other.git/");
    assert_eq!(
        http(
            port,
            "GET",
            &other_path,
            &[("Authorization", &get_grant)],
            b""
        )
        .status,
        403
    );
    let other = tmp.path().join("other");
    init_repo(&other);
    commit_files(&other, &[("b", "2")], "c1");
    let authed = server
        .url("org/other")
        .replace("http://", &format!("http://dev:{writer}@"));
    git(&other, &["push", "--quiet", &authed, "main"]);
    let r = post_batch(
        &server,
        "org/other",
        Some(&reader),
        &batch("download", &[(&oid, size)]),
    );
    assert_eq!(json(&r)["objects"][0]["error"]["code"], 404, "{}", r.text());
    let bearer = format!("Bearer {reader}");
    assert_eq!(
        http(port, "GET", &other_path, &[("Authorization", &bearer)], b"").status,
        404
    );

    // malformed and unsupported batches
    let r = post_batch(&server, "org/app", Some(&writer), b"{not json");
    assert_eq!(r.status, 422, "{}", r.text());
    let sha512 = serde_json::to_vec(&serde_json::json!({
        "operation": "download", "objects": [], "hash_algo": "sha512"
    }))
    .unwrap();
    assert_eq!(
        post_batch(&server, "org/app", Some(&writer), &sha512).status,
        409
    );
    let r = post_batch(&server, "org/app", Some(&writer), &batch("delete", &[]));
    assert_eq!(r.status, 422);
    // locks: a reader may not verify (that is for pushers), a lock path of
    // 1 MiB and a malformed one are refused, nothing stored
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks/verify",
        &[("Authorization", &bearer)],
        b"{}",
    );
    assert_eq!(r.status, 403, "{}", r.text());
    let writer_bearer = format!("Bearer {writer}");
    let long = serde_json::to_vec(&serde_json::json!({"path": "a".repeat(1 << 20)})).unwrap();
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks",
        &[("Authorization", &writer_bearer)],
        &long,
    );
    assert!(
        r.status == 413 || r.status == 422,
        "{} {}",
        r.status,
        r.text()
    );
    let dotdot = br#"{"path": "../etc/passwd"}"#;
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks",
        &[("Authorization", &writer_bearer)],
        dotdot,
    );
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(!server
        .store_keys()
        .iter()
        .any(|k| k.ends_with("/lfs/locks")));
}

/// A clone of `url` in `dir` whose git and git-lfs take `secret`.
fn clone_as(
    server: &Server,
    tmp: &Path,
    secret: &str,
    url: &str,
    dir: &str,
) -> (PathBuf, Vec<String>) {
    let who = git_as(server, tmp, secret);
    let path = tmp.join(dir);
    ok(
        tmp,
        &who,
        &["clone", "--quiet", url, path.to_str().unwrap()],
    );
    (path, who)
}

#[test]
fn locks_are_listed_enforced_on_push_and_removed_by_their_owner_or_an_admin() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, alice_secret, reader) = start();
    let bob_secret = server.store().create_token("bob", &["org/*:write"], &[]);
    let root_secret = server.store().create_token("root", &["*:admin"], &[]);
    let (work, _, _) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_alice = git_as(&server, tmp.path(), &alice_secret);
    ok(&work, &as_alice, &["remote", "add", "origin", &url]);
    ok(&work, &as_alice, &["push", "--quiet", "origin", "main"]);

    ok(&work, &as_alice, &["lfs", "lock", "big.bin"]);
    let listed = String::from_utf8(run(&work, &as_alice, &["lfs", "locks"]).stdout).unwrap();
    assert!(
        listed.contains("big.bin") && listed.contains("dev"),
        "{listed}"
    );
    // a second lock of the path is refused: it is held
    let (bob, as_bob) = clone_as(&server, tmp.path(), &bob_secret, &url, "bob");
    let out = run(&bob, &as_bob, &["lfs", "lock", "big.bin"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already created lock"),
        "{out:?}"
    );
    // a reader lists the locks but cannot take one
    let (ro, as_ro) = clone_as(&server, tmp.path(), &reader, &url, "ro");
    let listed = String::from_utf8(run(&ro, &as_ro, &["lfs", "locks"]).stdout).unwrap();
    assert!(listed.contains("big.bin"), "{listed}");
    assert!(!run(&ro, &as_ro, &["lfs", "lock", "README"])
        .status
        .success());

    // bob's change of the locked file is refused by the server itself
    // (--no-verify skips git-lfs's own check in the pre-push hook)
    std::fs::write(bob.join("big.bin"), noise(9, 4096)).unwrap();
    ok(
        &bob,
        &as_bob,
        &["commit", "--quiet", "-am", "bob edits big.bin"],
    );
    let out = run(&bob, &as_bob, &["push", "--no-verify", "origin", "main"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("remote: error: 'big.bin' is locked by dev (git lfs locks); it may not change on refs/heads/main"),
        "{err}"
    );
    assert!(
        err.contains("[remote rejected] main -> main (locked by dev: big.bin)"),
        "{err}"
    );
    // a change of another file passes; so does the owner's change of hers
    ok(
        &bob,
        &as_bob,
        &["reset", "--quiet", "--hard", "origin/main"],
    );
    commit_files(&bob, &[("README", "bob's text\n")], "bob edits README");
    ok(&bob, &as_bob, &["push", "--quiet", "origin", "main"]);
    ok(
        &work,
        &as_alice,
        &["pull", "--quiet", "--rebase", "origin", "main"],
    );
    std::fs::write(work.join("big.bin"), noise(10, 4096)).unwrap();
    ok(
        &work,
        &as_alice,
        &["commit", "--quiet", "-am", "alice edits big.bin"],
    );
    ok(&work, &as_alice, &["push", "--quiet", "origin", "main"]);

    // bob may not unlock alice's lock, not even with --force (admin only);
    // an admin may
    let out = run(&bob, &as_bob, &["lfs", "unlock", "big.bin"]);
    assert!(!out.status.success(), "{out:?}");
    let out = run(&bob, &as_bob, &["lfs", "unlock", "--force", "big.bin"]);
    assert!(!out.status.success(), "{out:?}");
    let (root, as_root) = clone_as(&server, tmp.path(), &root_secret, &url, "root");
    ok(&root, &as_root, &["lfs", "unlock", "--force", "big.bin"]);
    let listed = String::from_utf8(run(&ro, &as_ro, &["lfs", "locks"]).stdout).unwrap();
    assert!(!listed.contains("big.bin"), "{listed}");
    // and bob's change now lands
    ok(
        &bob,
        &as_bob,
        &["pull", "--quiet", "--rebase", "origin", "main"],
    );
    std::fs::write(bob.join("big.bin"), noise(11, 4096)).unwrap();
    ok(
        &bob,
        &as_bob,
        &["commit", "--quiet", "-am", "bob edits big.bin"],
    );
    ok(&bob, &as_bob, &["push", "--quiet", "origin", "main"]);
}
