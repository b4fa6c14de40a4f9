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

/// A work tree tracking `*.bin` with LFS: two binaries (10 MiB and 1 KiB) and
/// a text file, committed; returns the work tree and the two files' bytes.
fn lfs_work(tmp: &Path, name: &str) -> (PathBuf, Vec<u8>, Vec<u8>) {
    let work = tmp.join(name);
    init_repo(&work);
    lfs_installed(&work);
    git(&work, &["lfs", "track", "*.bin"]);
    let big = noise(1, 10 << 20);
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

/// On S3 the file bytes go between the client and the bucket: no upload
/// or download passed through gitstow (the access log says which
/// requests it served).
fn bytes_went_to_the_bucket(server: &Server) {
    if matches!(server.store(), TestStore::S3 { .. }) {
        let logs = server.logs();
        assert!(!logs.contains("service=\"lfs upload\""), "{logs}");
        assert!(!logs.contains("service=\"lfs download\""), "{logs}");
    }
}

/// Uploads the server accepted so far (its log lines: every upload ends
/// with verify, through gitstow or straight to the bucket).
fn stored(server: &Server) -> usize {
    server.logs().matches("LFS object verified").count()
}

fn start() -> (Server, String, String) {
    let server = Server::start_with(&["--no-maintenance", "--access-refresh", "1"]);
    let writer = server.store().create_token("dev", &["org/*:write"], &[]);
    let reader = server.store().create_token("ro", &["org/*:read"], &[]);
    await_token(&server, &reader);
    (server, writer, reader)
}

/// Waits until the server knows the token of `secret` (it reads its access
/// document again within `--access-refresh`, a second here).
fn await_token(server: &Server, secret: &str) {
    let bearer = format!("Bearer {secret}");
    for _ in 0..50 {
        let r = http(
            server.port(),
            "GET",
            "/org/app.git/info/refs?service=git-upload-pack",
            &[("Authorization", &bearer)],
            b"",
        );
        if r.status != 401 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the server never took the new token");
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
    bytes_went_to_the_bucket(&server);
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

/// An action of a batch answer: where it goes (gitstow, or the S3 server
/// for a presigned one) and the headers it carries.
struct Act {
    port: u16,
    path: String,
    headers: Vec<(String, String)>,
}

impl Act {
    /// The action `name` of the answer's `i`-th object.
    fn of(answer: &serde_json::Value, i: usize, name: &str) -> Act {
        let a = &answer["objects"][i]["actions"][name];
        let href = a["href"]
            .as_str()
            .unwrap_or_else(|| panic!("no {name}: {answer}"));
        let rest = href
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("not a loopback URL: {href}"));
        let at = rest.find('/').unwrap();
        let headers = a["header"]
            .as_object()
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Act {
            port: rest[..at].parse().unwrap(),
            path: rest[at..].to_owned(),
            headers,
        }
    }

    /// Whether it goes to the bucket rather than to `server`.
    fn presigned(&self, server: &Server) -> bool {
        self.port != server.port()
    }

    /// The request with its own headers (`with`: true) or without them.
    fn send(&self, method: &str, with: bool, body: &[u8]) -> Response {
        let headers: Vec<(&str, &str)> = if with {
            self.headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect()
        } else {
            Vec::new()
        };
        http(self.port, method, &self.path, &headers, body)
    }

    /// The grant in its `Authorization: RemoteAuth …` header.
    fn grant(&self) -> &str {
        &self
            .headers
            .iter()
            .find(|(k, _)| k == "Authorization")
            .expect("a grant")
            .1
    }
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
    // a read-only token may not ask to upload (403); a repository that
    // does not exist has nothing to download (404)
    for (op, status) in [("upload", 403), ("download", 404)] {
        let r = post_batch(
            &server,
            "org/app",
            Some(&reader),
            &batch(op, &[(&oid, size)]),
        );
        assert_eq!(r.status, status, "{op}: {}", r.text());
    }

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
    let put = Act::of(&answer, 0, "upload");
    let verify_act = Act::of(&answer, 0, "verify");
    let port = server.port();
    // on S3 the bytes go to the bucket itself, with the checksum signed;
    // on the local store through gitstow, with a grant
    let presigned = put.presigned(&server);
    assert_eq!(presigned, matches!(server.store(), TestStore::S3 { .. }));
    if presigned {
        assert!(
            put.headers
                .iter()
                .any(|(k, _)| k == "x-amz-checksum-sha256"),
            "{:?}",
            put.headers
        );
        // a tampered signature is refused by the bucket
        let mut forged = Act::of(&answer, 0, "upload");
        forged.path = forged.path.replace("X-Amz-Signature=", "X-Amz-Signature=0");
        assert_eq!(forged.send("PUT", true, &content).status, 403);
    } else {
        // a forged grant, and none at all, are refused
        let mut forged = Act::of(&answer, 0, "upload");
        let g = forged.grant().to_owned();
        forged.headers = vec![("Authorization".into(), format!("{}0", &g[..g.len() - 1]))];
        assert_eq!(forged.send("PUT", true, &content).status, 403);
        assert_eq!(put.send("PUT", false, &content).status, 401);
    }
    let verify = serde_json::to_vec(&serde_json::json!({"oid": oid, "size": size})).unwrap();
    // other bytes than the oid's: refused at the upload (gitstow hashes it;
    // S3 with checksums) or at verify (a server that keeps no checksum:
    // gitstow reads it once), and nothing is kept
    let mut wrong = content.clone();
    wrong[0] ^= 1;
    let r = put.send("PUT", true, &wrong);
    let refusal = if r.status == 200 {
        assert!(presigned, "gitstow took bytes that are not the oid's");
        Some(verify_act.send("POST", true, &verify))
    } else if !presigned {
        Some(r)
    } else {
        None // the bucket checked the checksum itself
    };
    if let Some(refusal) = refusal {
        assert_eq!(refusal.status, 422, "{}", refusal.text());
        let message = json(&refusal)["message"].as_str().unwrap().to_owned();
        assert!(message.contains("do not hash"), "{message}");
    }
    // more bytes than announced
    let mut longer = content.clone();
    longer.push(b'!');
    assert_ne!(put.send("PUT", true, &longer).status, 200);
    assert_eq!(lfs_keys(&server, "org/app"), (vec![], vec![]));
    assert!(!server
        .store_keys()
        .iter()
        .any(|k| k.contains("/lfs/staging/")));
    // before the upload, verify says the object is missing
    let r = verify_act.send("POST", true, &verify);
    assert_eq!(r.status, 404, "{}", r.text());
    // the right bytes: stored, owned, verified
    let r = put.send("PUT", true, &content);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = verify_act.send("POST", true, &verify);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(lfs_keys(&server, "org/app").1.len(), 1);
    assert!(!server
        .store_keys()
        .iter()
        .any(|k| k.contains("/lfs/staging/")));
    // an upload's authorization does not download
    assert_eq!(put.send("GET", true, b"").status, 403);

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
    let get = Act::of(&answer, 0, "download");
    let r = get.send("GET", true, b"");
    assert_eq!((r.status, &r.body), (200, &content));
    // org/other, which never uploaded it, cannot have it by its oid, and
    // (through gitstow) a grant of org/app does not open it there
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
    let other_path = format!("/org/other.git/info/lfs/objects/{oid}");
    assert_eq!(
        http(port, "GET", &other_path, &[("Authorization", &bearer)], b"").status,
        404
    );
    if !get.presigned(&server) {
        let grant = get.grant();
        assert_eq!(
            http(port, "GET", &other_path, &[("Authorization", grant)], b"").status,
            403
        );
    }
    // a repository that does not exist serves nothing, even to a token
    // that may read it
    let ghost = format!("/org/ghost.git/info/lfs/objects/{oid}");
    assert_eq!(
        http(port, "GET", &ghost, &[("Authorization", &bearer)], b"").status,
        404
    );
    // credentials are checked before a body is read
    let r = post_batch(&server, "org/app", None, b"{not json");
    assert_eq!(r.status, 401, "{}", r.text());

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
    await_token(&server, &bob_secret);
    await_token(&server, &root_secret);
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
        err.contains("remote: error: 'big.bin' is locked by dev (git lfs locks); commit "),
        "{err}"
    );
    assert!(
        err.contains("changes it, so refs/heads/main may not take it"),
        "{err}"
    );
    // nor can it reach the repository on another branch, new or deleted and
    // made again
    let out = run(
        &bob,
        &as_bob,
        &["push", "--no-verify", "origin", "HEAD:refs/heads/sneak"],
    );
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
    // bob's branch may take her change (a merge that keeps one parent's
    // version changes nothing), and a branch made at a commit the
    // repository has brings nothing to check
    ok(&bob, &as_bob, &["checkout", "--quiet", "-b", "feature"]);
    commit_files(&bob, &[("notes", "bob's notes\n")], "bob's work");
    ok(&bob, &as_bob, &["fetch", "--quiet", "origin"]);
    ok(
        &bob,
        &as_bob,
        &["merge", "--quiet", "--no-edit", "origin/main"],
    );
    ok(
        &bob,
        &as_bob,
        &["push", "--quiet", "--no-verify", "origin", "feature"],
    );
    ok(
        &bob,
        &as_bob,
        &[
            "push",
            "--quiet",
            "origin",
            "origin/main~1:refs/heads/old-based",
        ],
    );
    ok(&bob, &as_bob, &["checkout", "--quiet", "main"]);

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

#[test]
fn a_large_file_and_hundreds_of_objects_in_several_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let work = tmp.path().join("work");
    init_repo(&work);
    lfs_installed(&work);
    git(&work, &["lfs", "track", "*.bin"]);
    let large = noise(3, 150 << 20);
    std::fs::write(work.join("large.bin"), &large).unwrap();
    std::fs::create_dir_all(work.join("many")).unwrap();
    for i in 0..250u64 {
        std::fs::write(
            work.join(format!("many/{i}.bin")),
            noise(100 + i, 1000 + i as usize),
        )
        .unwrap();
    }
    commit_files(&work, &[("README", "many files\n")], "add");
    let url = server.url("org/big");
    let as_writer = git_as(&server, tmp.path(), &writer);
    ok(&work, &as_writer, &["push", &url, "main"]);
    assert_eq!(stored(&server), 251);
    bytes_went_to_the_bucket(&server);
    // everything again: nothing is uploaded
    ok(&work, &as_writer, &["lfs", "push", "--all", &url]);
    assert_eq!(stored(&server), 251);
    // a clone without smudge, then fetch --all: 251 objects, in batches of 100
    let clone = tmp.path().join("clone");
    let as_reader = git_as(&server, tmp.path(), &reader);
    let out = git_cmd(tmp.path())
        .args(as_reader.iter().map(String::as_str))
        .args(["clone", "--quiet", &url, clone.to_str().unwrap()])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok(&clone, &as_reader, &["lfs", "fetch", "--all"]);
    let batches = server
        .logs()
        .lines()
        .filter(|l| l.contains("service=\"lfs batch download\"") && l.contains("status=200"))
        .count();
    assert!(batches >= 3, "{batches} download batches for 251 objects");
    ok(&clone, &as_reader, &["lfs", "checkout"]);
    assert_eq!(std::fs::read(clone.join("large.bin")).unwrap(), large);
    assert_eq!(
        std::fs::read(clone.join("many/249.bin")).unwrap(),
        noise(349, 1249)
    );
    ok(&clone, &as_reader, &["lfs", "fsck"]);
    bytes_went_to_the_bucket(&server);
    // /metrics says where the bytes went (an admin token reads it)
    let root = server.store().create_token("root", &["*:admin"], &[]);
    await_token(&server, &root);
    let bearer = format!("Bearer {root}");
    let text = http(
        server.port(),
        "GET",
        "/metrics",
        &[("Authorization", &bearer)],
        b"",
    )
    .text();
    let value = |line_start: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    let total: u64 = (150 << 20) + (0..250u64).map(|i| 1000 + i).sum::<u64>();
    if matches!(server.store(), TestStore::S3 { .. }) {
        assert_eq!(
            value("gitstow_lfs_bytes_signed_total{operation=\"upload\"}"),
            total,
            "{text}"
        );
        assert!(
            value("gitstow_lfs_bytes_signed_total{operation=\"download\"}") >= total,
            "{text}"
        );
        assert_eq!(
            value("gitstow_lfs_bytes_served_total{direction=\"in\"}"),
            0,
            "{text}"
        );
        assert_eq!(
            value("gitstow_lfs_bytes_served_total{direction=\"out\"}"),
            0,
            "{text}"
        );
    } else {
        assert_eq!(
            value("gitstow_lfs_bytes_served_total{direction=\"in\"}"),
            total,
            "{text}"
        );
        assert!(
            value("gitstow_lfs_bytes_served_total{direction=\"out\"}") >= total,
            "{text}"
        );
    }
    assert!(
        value("gitstow_lfs_batches_total{operation=\"download\"}") >= 3,
        "{text}"
    );
}

#[test]
fn hostile_batches_and_a_storm_of_lock_requests() {
    let (server, writer, _reader) = start();
    let port = server.port();
    let pid = server.pid().unwrap();
    let oid = sha256_hex(b"x");
    // 100,000 objects: past the 1 MiB a batch may take
    let many: Vec<(&str, u64)> = vec![(oid.as_str(), 1); 100_000];
    let r = post_batch(&server, "org/app", Some(&writer), &batch("upload", &many));
    assert_eq!(r.status, 413, "{}", r.text());
    // 1,001 objects within 1 MiB: too many for one batch
    let r = post_batch(
        &server,
        "org/app",
        Some(&writer),
        &batch("upload", &many[..1001]),
    );
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(json(&r)["message"]
        .as_str()
        .unwrap()
        .contains("too many objects"));
    // sizes past the limit, and past any integer
    let r = post_batch(
        &server,
        "org/app",
        Some(&writer),
        &batch("upload", &[(&oid, u64::MAX >> 1)]),
    );
    assert_eq!(json(&r)["objects"][0]["error"]["code"], 422, "{}", r.text());
    let huge = format!(
        r#"{{"operation":"upload","objects":[{{"oid":"{oid}","size":184467440737095516150}}]}}"#
    );
    let r = post_batch(&server, "org/app", Some(&writer), huge.as_bytes());
    assert_eq!(r.status, 422, "{}", r.text());

    // locks belong to a repository that exists
    let bearer = format!("Bearer {writer}");
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks",
        &[("Authorization", bearer.as_str())],
        br#"{"path": "a.psd"}"#,
    );
    assert_eq!(r.status, 404, "{}", r.text());
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "c1");
    let authed = server
        .url("org/app")
        .replace("http://", &format!("http://dev:{writer}@"));
    git(&work, &["push", "--quiet", &authed, "main"]);
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = proc_status_kb(pid, "VmRSS");

    // 1,000 lock requests at once (50 clients, 20 each): each answered 201,
    // or 429 when the document kept changing under it; the document holds
    // exactly the 201s
    let created = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..50 {
            let (bearer, created) = (&bearer, &created);
            s.spawn(move || {
                for i in 0..20 {
                    let body = format!(r#"{{"path": "assets/{t}/{i}.psd"}}"#);
                    let r = http(
                        port,
                        "POST",
                        "/org/app.git/info/lfs/locks",
                        &[("Authorization", bearer.as_str())],
                        body.as_bytes(),
                    );
                    match r.status {
                        201 => {
                            created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        429 => assert!(r.header("retry-after").is_some()),
                        other => panic!("lock request answered {other}: {}", r.text()),
                    }
                }
            });
        }
    });
    let created = created.into_inner();
    assert!(created > 0);
    let listed = http(
        port,
        "GET",
        "/org/app.git/info/lfs/locks?limit=100",
        &[("Authorization", &bearer)],
        b"",
    );
    let mut count = 0;
    let mut page = json(&listed);
    loop {
        count += page["locks"].as_array().unwrap().len();
        let Some(cursor) = page["next_cursor"].as_str() else {
            break;
        };
        let r = http(
            port,
            "GET",
            &format!("/org/app.git/info/lfs/locks?limit=100&cursor={cursor}"),
            &[("Authorization", &bearer)],
            b"",
        );
        page = json(&r);
    }
    assert_eq!(count, created);
    let grew = proc_status_kb(pid, "VmHWM").saturating_sub(before);
    assert!(grew < 200 << 10, "the server grew by {grew} KiB");
}

#[test]
fn collection_drops_only_what_nothing_reaches_after_the_grace_period() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let work = tmp.path().join("work");
    init_repo(&work);
    lfs_installed(&work);
    git(&work, &["lfs", "track", "*.bin"]);
    let (a, b, c) = (noise(21, 5000), noise(22, 6000), noise(23, 7000));
    std::fs::write(work.join("a.bin"), &a).unwrap();
    commit_files(&work, &[("README", "one\n")], "a");
    let url = server.url("org/app");
    let as_writer = git_as(&server, tmp.path(), &writer);
    ok(&work, &as_writer, &["push", "--quiet", &url, "main"]);
    git(&work, &["checkout", "--quiet", "-b", "topic"]);
    std::fs::write(work.join("b.bin"), &b).unwrap();
    commit_files(&work, &[("README", "two\n")], "b");
    ok(&work, &as_writer, &["push", "--quiet", &url, "topic"]);
    // b.bin's pointer leaves the history: the branch is deleted
    ok(&work, &as_writer, &["push", "--quiet", &url, ":topic"]);
    git(&work, &["checkout", "--quiet", "main"]);
    // objects uploaded to a repository nobody pushed to
    ok(
        &work,
        &as_writer,
        &["lfs", "push", &server.url("org/ghost"), "main"],
    );
    // a presigned upload never verified, its grant long expired
    let store = server.store().open();
    let c_oid = sha256_hex(&c);
    let abandoned = format!(".gitstow/lfs/staging/{c_oid}/1000-{}", "ab".repeat(16));
    store
        .put(&abandoned, &c, gitstow_store::PutCondition::None)
        .unwrap();
    let (a_oid, b_oid) = (sha256_hex(&a), sha256_hex(&b));
    let has_object = |oid: &str| {
        server
            .store_keys()
            .iter()
            .any(|k| k.starts_with(".gitstow/lfs/objects/") && k.ends_with(oid))
    };

    // a grace period of an hour: only the abandoned upload goes
    let out = server.store().maintain(&["--all", "--grace", "3600"], &[]);
    let said = assert_maintained(&out);
    assert!(said.contains("dropped 0 claims no pointer needs, 0 objects (0 bytes) no repository claims, 1 abandoned uploads"), "{said}");
    assert!(has_object(&b_oid));
    assert!(!server.store_keys().contains(&abandoned));

    // no grace: GC drops b.bin's pointer, then the claims to b.bin (org/app)
    // and to a.bin (org/ghost, which does not exist) go; the unclaimed
    // object waits for the next run
    let out = server
        .store()
        .maintain(&["--all", "--grace", "0", "--gc"], &[]);
    let said = assert_maintained(&out);
    assert!(said.contains("dropped 2 claims no pointer needs"), "{said}");
    assert!(said.contains("1 unclaimed objects held"), "{said}");
    assert_eq!(
        lfs_keys(&server, "org/app").1,
        vec![format!("org/app.git/lfs/objects/{a_oid}")]
    );
    assert!(lfs_keys(&server, "org/ghost").1.is_empty());
    assert!(has_object(&b_oid));
    let out = server.store().maintain(&["--all", "--grace", "0"], &[]);
    let said = assert_maintained(&out);
    assert!(
        said.contains("1 objects (6000 bytes) no repository claims"),
        "{said}"
    );
    assert!(!has_object(&b_oid) && has_object(&a_oid));
    // what the history reaches still clones
    let clone = tmp.path().join("clone");
    let as_reader = git_as(&server, tmp.path(), &reader);
    ok(
        tmp.path(),
        &as_reader,
        &["clone", "--quiet", &url, clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("a.bin")).unwrap(), a);
}

#[test]
fn fsck_reports_a_pointer_whose_object_never_came() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, _reader) = start();
    let (work, big, small) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_writer = git_as(&server, tmp.path(), &writer);
    ok(&work, &as_writer, &["push", "--quiet", &url, "main"]);
    let o = server.store().admin(&["fsck", "--repo", "org/app"]);
    assert!(o.status.success(), "{o:?}");
    // a push that skips git-lfs's hook: the pointer lands, its object not
    let extra = noise(31, 2000);
    std::fs::write(work.join("extra.bin"), &extra).unwrap();
    commit_files(&work, &[("README", "more\n")], "extra");
    ok(
        &work,
        &as_writer,
        &["push", "--quiet", "--no-verify", &url, "main"],
    );
    let o = server.store().admin(&["fsck", "--repo", "org/app"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains(&format!("missing LFS object {}", sha256_hex(&extra))),
        "{said}"
    );
    assert!(
        !said.contains(&sha256_hex(&big)) && !said.contains(&sha256_hex(&small)),
        "{said}"
    );
}

#[test]
fn over_ssh_git_lfs_authenticate_hands_over_to_the_lfs_api() {
    let ssh = Ssh::start();
    let tmp = tempfile::tempdir().unwrap();
    let (work, big, small) = lfs_work(tmp.path(), "work");
    let url = ssh.url("org/app");
    // the push's LFS upload goes through git-lfs-authenticate over SSH
    // (git-lfs tries git-lfs-transfer first, which is refused)
    let out = ssh.git(&work, &ssh.dev, &["push", "--quiet", &url, "main"]);
    common::ok(&out, "push over ssh with LFS files");
    let logs = ssh.server.logs();
    assert!(
        logs.contains("service=\"git-lfs-authenticate\" operation=\"upload\" status=0"),
        "{logs}"
    );
    assert!(logs.contains("service=\"lfs batch upload\""), "{logs}");
    assert_eq!(lfs_keys(&ssh.server, "org/app").1.len(), 2);
    // a clone over SSH downloads them; the reader's session is read-only
    let clone = tmp.path().join("clone");
    let out = ssh.git(
        tmp.path(),
        &ssh.reader,
        &["clone", "--quiet", &url, clone.to_str().unwrap()],
    );
    common::ok(&out, "clone over ssh with LFS files");
    assert_eq!(std::fs::read(clone.join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(clone.join("assets/small.bin")).unwrap(),
        small
    );
    // what git-lfs-authenticate answers, and what it refuses
    let (code, stdout, _) = ssh.ssh(&ssh.reader, "git-lfs-authenticate org/app.git download");
    assert_eq!(code, Some(0));
    let answer: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let href = answer["href"].as_str().unwrap();
    assert_eq!(
        href,
        format!(
            "http://127.0.0.1:{}/org/app.git/info/lfs",
            ssh.server.port()
        )
    );
    let auth = answer["header"]["Authorization"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(answer["expires_in"].as_u64().unwrap() >= 60);
    let (code, _, err) = ssh.ssh(&ssh.reader, "git-lfs-authenticate org/app.git upload");
    assert_eq!(code, Some(128));
    assert!(err.contains("ERROR:"), "{err}");
    let (code, _, err) = ssh.ssh(&ssh.stranger, "git-lfs-authenticate org/app.git download");
    assert_ne!(code, Some(0), "{err}");
    // the reader's download session lists and downloads, does not upload
    let oid = sha256_hex(&big);
    let port = ssh.server.port();
    let with_session = |body: Vec<u8>| {
        http(
            port,
            "POST",
            "/org/app.git/info/lfs/objects/batch",
            &[("Authorization", auth.as_str())],
            &body,
        )
    };
    let r = with_session(batch("download", &[(&oid, big.len() as u64)]));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(json(&r)["objects"][0]["actions"]["download"].is_object());
    let r = with_session(batch("upload", &[(&oid, big.len() as u64)]));
    assert_eq!(r.status, 403, "{}", r.text());
    // a session of one repository is nothing for another
    let r = http(
        port,
        "POST",
        "/org/other.git/info/lfs/objects/batch",
        &[("Authorization", auth.as_str())],
        &batch("download", &[(&oid, 1)]),
    );
    assert_eq!(r.status, 401, "{}", r.text());
}

#[test]
fn a_retried_push_renews_the_claim_collection_would_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, _reader) = start();
    let (work, big, _) = lfs_work(tmp.path(), "work");
    let url = server.url("org/race");
    let as_writer = git_as(&server, tmp.path(), &writer);
    // the upload of a push whose ref update did not happen
    ok(&work, &as_writer, &["lfs", "push", &url, "main"]);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // the retry: its batch finds the objects there, uploads nothing, and
    // renews the claims; a collection now keeps them
    ok(&work, &as_writer, &["lfs", "push", &url, "main"]);
    let out = server.store().maintain(&["--all", "--grace", "2"], &[]);
    let said = assert_maintained(&out);
    assert!(said.contains("dropped 0 claims"), "{said}");
    ok(
        &work,
        &as_writer,
        &["push", "--quiet", "--no-verify", &url, "main"],
    );
    let o = server.store().admin(&["fsck", "--repo", "org/race"]);
    assert!(o.status.success(), "{o:?}");
    assert!(lfs_keys(&server, "org/race")
        .1
        .iter()
        .any(|k| k.ends_with(&sha256_hex(&big))));
}
