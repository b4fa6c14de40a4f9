//! Test harness: Git LFS with the real `git-lfs` client — a server with
//! tokens, work trees of tracked files, batch requests and their actions.

use std::sync::OnceLock;

use super::*;

/// Installs git-lfs's filters in the test `HOME` once (`git lfs install`).
pub fn lfs_installed(dir: &Path) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        git(dir, &["lfs", "install", "--skip-repo"]);
    });
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// git with a credential-store file that holds `secret` for `server`.
pub fn git_as(server: &Server, tmp: &Path, secret: &str) -> Vec<String> {
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

pub fn git_run(dir: &Path, pre: &[String], args: &[&str]) -> std::process::Output {
    let mut all: Vec<&str> = pre.iter().map(String::as_str).collect();
    all.extend(args);
    git_cmd(dir).args(&all).output().expect("run git")
}

pub fn git_ok(dir: &Path, pre: &[String], args: &[&str]) -> String {
    let out = git_run(dir, pre, args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "git {args:?} failed:\n{err}");
    err
}

/// A work tree tracking `*.bin` with LFS: two binaries (10 MiB and 1 KiB) and
/// a text file, committed; returns the work tree and the two files' bytes.
pub fn lfs_work(tmp: &Path, name: &str) -> (PathBuf, Vec<u8>, Vec<u8>) {
    let work = tmp.join(name);
    init_repo(&work);
    lfs_installed(&work);
    git(&work, &["lfs", "track", "*.bin"]);
    let big = noise(10 << 20, 1);
    let small = noise(1024, 2);
    std::fs::write(work.join("big.bin"), &big).unwrap();
    std::fs::create_dir_all(work.join("assets")).unwrap();
    std::fs::write(work.join("assets/small.bin"), &small).unwrap();
    commit_files(&work, &[("README", "text stays in git\n")], "add files");
    (work, big, small)
}

/// The LFS object keys of the store and the markers of `repo`.
pub fn lfs_keys(server: &Server, repo: &str) -> (Vec<String>, Vec<String>) {
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
pub fn bytes_went_to_the_bucket(server: &Server) {
    if matches!(server.store(), TestStore::S3 { .. }) {
        let logs = server.logs();
        assert!(!logs.contains("service=\"lfs upload\""), "{logs}");
        assert!(!logs.contains("service=\"lfs download\""), "{logs}");
    }
}

/// Uploads the server accepted so far (its log lines: every upload ends
/// with verify, through gitstow or straight to the bucket).
pub fn stored(server: &Server) -> usize {
    server.logs().matches("LFS object verified").count()
}

pub fn start() -> (Server, String, String) {
    let server = Server::start_with(&["--no-maintenance", "--access-refresh", "1"]);
    let writer = server.store().create_token("dev", &["org/*:write"], &[]);
    let reader = server.store().create_token("ro", &["org/*:read"], &[]);
    await_token(&server, &reader);
    (server, writer, reader)
}

/// Waits until the server knows the token of `secret` (it reads its access
/// document again within `--access-refresh`, a second here).
pub fn await_token(server: &Server, secret: &str) {
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

/// A batch request body.
pub fn batch(op: &str, objects: &[(&str, u64)]) -> Vec<u8> {
    let objects: Vec<serde_json::Value> = objects
        .iter()
        .map(|(oid, size)| serde_json::json!({"oid": oid, "size": size}))
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "operation": op, "transfers": ["basic"], "objects": objects, "hash_algo": "sha256"
    }))
    .unwrap()
}

pub fn post_batch(server: &Server, repo: &str, token: Option<&str>, body: &[u8]) -> Response {
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

pub fn json(r: &Response) -> serde_json::Value {
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
pub struct Act {
    pub port: u16,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Act {
    /// The action `name` of the answer's `i`-th object.
    pub fn of(answer: &serde_json::Value, i: usize, name: &str) -> Act {
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
    pub fn presigned(&self, server: &Server) -> bool {
        self.port != server.port()
    }

    /// The request with its own headers (`with`: true) or without them.
    pub fn send(&self, method: &str, with: bool, body: &[u8]) -> Response {
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
    pub fn grant(&self) -> &str {
        &self
            .headers
            .iter()
            .find(|(k, _)| k == "Authorization")
            .expect("a grant")
            .1
    }
}

/// A clone of `url` in `dir` whose git and git-lfs take `secret`.
pub fn clone_as(
    server: &Server,
    tmp: &Path,
    secret: &str,
    url: &str,
    dir: &str,
) -> (PathBuf, Vec<String>) {
    let who = git_as(server, tmp, secret);
    let path = tmp.join(dir);
    git_ok(
        tmp,
        &who,
        &["clone", "--quiet", url, path.to_str().unwrap()],
    );
    (path, who)
}
