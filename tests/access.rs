//! Access control with the real `git` client, credentials given through a
//! credential helper (`credential.helper store`): clone, fetch and push
//! allowed and refused by level and pattern (patterns that must not match,
//! names that try to escape), anonymous read on and off, expired and
//! revoked tokens refused by a second instance on the same store, and raw
//! requests with malformed `Authorization` headers, a brute-force loop that
//! is answered 429, and no secret in the logs.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// A client configured to take its credentials for `server` from a
/// credential-store file holding `secret` (user name `any`).
struct Client {
    dir: PathBuf,
    creds: PathBuf,
}

impl Client {
    fn new(tmp: &Path, label: &str) -> Client {
        let dir = tmp.join(label);
        std::fs::create_dir_all(&dir).unwrap();
        let creds = tmp.join(format!("{label}.credentials"));
        Client { dir, creds }
    }

    /// Uses `secret` for `server` from now on (`None`: no credentials).
    fn login(&self, server: &Server, secret: Option<&str>) {
        let line = secret
            .map(|s| format!("http://any:{s}@127.0.0.1:{}\n", server.port()))
            .unwrap_or_default();
        std::fs::write(&self.creds, line).unwrap();
    }

    fn args<'a>(&'a self, rest: &[&'a str]) -> Vec<String> {
        let mut all = vec![
            "-c".to_owned(),
            format!("credential.helper=store --file={}", self.creds.display()),
        ];
        all.extend(rest.iter().map(|s| s.to_string()));
        all
    }

    fn ok(&self, rest: &[&str]) -> String {
        let args = self.args(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = git(&self.dir, &args);
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn fails(&self, rest: &[&str]) -> String {
        let args = self.args(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        git_fail(&self.dir, &args)
    }
}

/// A server whose store has an admin token (so access control is on) and a
/// repository `org/app` with one commit pushed by it; returns the server,
/// the admin secret and a work tree.
fn setup(tmp: &Path) -> (Server, String, PathBuf) {
    let server = Server::start_with(&["--no-maintenance", "--access-refresh", "1"]);
    let admin = server.store().create_token("root", &["*:admin"], &[]);
    let work = tmp.join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "c1");
    let url = server.url("org/app");
    let authed = url.replace("http://", &format!("http://root:{admin}@"));
    git(&work, &["push", "--quiet", &authed, "main"]);
    (server, admin, work)
}

#[test]
fn levels_and_patterns_decide_through_the_credential_helper() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _admin, work) = setup(tmp.path());
    let store = server.store();
    let reader = store.create_token("reader", &["org/*:read"], &[]);
    let writer = store.create_token("writer", &["org/*:write"], &[]);
    let other = store.create_token("other", &["org2/*:write", "orgx:write"], &[]);
    // The server reads the access document again after --access-refresh (1 s).
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let url = server.url("org/app");
    let c = Client::new(tmp.path(), "client");

    // No credentials: git is asked for them (401), has none, and fails.
    c.login(&server, None);
    let err = c.fails(&["clone", "--quiet", &url, "anon"]);
    assert!(
        err.contains("Authentication failed") || err.contains("could not read Username"),
        "{err}"
    );

    // read: clone and fetch, not push.
    c.login(&server, Some(&reader));
    c.ok(&["clone", "--quiet", &url, "r"]);
    let r = c.dir.join("r");
    fsck(&r);
    commit_files(&r, &[("b", "2")], "c2");
    let err = c.fails(&["-C", "r", "push", "origin", "main"]);
    assert!(
        err.contains("token 'reader' has read access to org/app, write is needed"),
        "{err}"
    );
    assert!(err.contains("403"), "{err}");

    // write: push, and create a repository under the pattern.
    c.login(&server, Some(&writer));
    c.ok(&["-C", "r", "push", "--quiet", "origin", "main"]);
    c.ok(&["-C", "r", "push", "--quiet", &server.url("org/new"), "main"]);
    c.ok(&["-C", "r", "fetch", "--quiet", "origin"]);

    // Patterns that must not match: org2/* and orgx do not grant org/app,
    // org/* does not grant org2/x nor orgx.
    c.login(&server, Some(&other));
    let err = c.fails(&["clone", "--quiet", &url, "o"]);
    assert!(
        err.contains("token 'other' has no access to org/app"),
        "{err}"
    );
    c.login(&server, Some(&writer));
    for name in ["org2/x", "orgx", "Org/app"] {
        let err = c.fails(&["-C", "r", "push", &server.url(name), "main"]);
        assert!(
            err.contains(&format!("token 'writer' has no access to {name}")),
            "{name}: {err}"
        );
    }
    // Names that try to escape the pattern are refused before anything.
    for name in ["org/../x", "org/%2e%2e/x", "org//app", "org/.git/x"] {
        let resp = http(
            server.port(),
            "GET",
            &format!("/{name}.git/info/refs?service=git-upload-pack"),
            &[("Authorization", &basic(&writer))],
            b"",
        );
        assert!(
            resp.status == 400 || resp.status == 404,
            "{name}: {}",
            resp.status
        );
    }
    // A URL with a user name: git first sends `any:` (no password) before
    // asking its helper; that is no credentials, not a failed attempt, so
    // a dozen such commands in a row are never answered 429.
    c.login(&server, Some(&writer));
    let with_user = url.replace("http://", "http://any@");
    for _ in 0..12 {
        c.ok(&["ls-remote", &with_user]);
    }
    let _ = work;
}

#[test]
fn anonymous_read_can_be_allowed_and_taken_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _admin, _work) = setup(tmp.path());
    let url = server.url("org/app");
    let c = Client::new(tmp.path(), "anon");
    c.login(&server, None);
    c.fails(&["clone", "--quiet", &url, "before"]);
    let out = server
        .store()
        .admin(&["access", "allow-anonymous-read", "org/*"]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    c.ok(&["clone", "--quiet", &url, "during"]);
    let err = c.fails(&["-C", "during", "push", "origin", "main:refs/heads/x"]);
    assert!(
        err.contains("Authentication failed") || err.contains("could not read Username"),
        "{err}"
    );
    let shown =
        String::from_utf8_lossy(&server.store().admin(&["access", "show"]).stdout).into_owned();
    assert!(
        shown.contains("anonymous read: org/*") && shown.contains("root"),
        "{shown}"
    );
    assert!(server
        .store()
        .admin(&["access", "deny-anonymous-read", "org/*"])
        .status
        .success());
    std::thread::sleep(std::time::Duration::from_millis(1500));
    c.fails(&["clone", "--quiet", &url, "after"]);
}

#[test]
fn expired_and_revoked_tokens_are_refused_by_another_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, _admin, _work) = setup(tmp.path());
    let second = Server::start_on(
        Some(first.store()),
        &["--no-maintenance", "--access-refresh", "1"],
        &[],
    );
    let store = first.store();
    let brief = store.create_token("brief", &["org/*:read"], &["--expires", "2s"]);
    let kept = store.create_token("kept", &["org/*:read"], &[]);
    let url = second.url("org/app");
    let c = Client::new(tmp.path(), "c");
    c.login(&second, Some(&kept));
    c.ok(&["clone", "--quiet", &url, "kept1"]);
    let out = store.admin(&["token", "revoke", "kept"]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    c.login(&second, Some(&kept));
    let err = c.fails(&["clone", "--quiet", &url, "kept2"]);
    assert!(err.contains("Authentication failed"), "revoked: {err}");
    c.login(&second, Some(&brief));
    let err = c.fails(&["clone", "--quiet", &url, "brief"]);
    assert!(err.contains("Authentication failed"), "expired: {err}");
    let listed = String::from_utf8_lossy(&store.admin(&["token", "list"]).stdout).into_owned();
    assert!(
        listed.contains("brief") && listed.contains("(expired)") && !listed.contains("kept "),
        "{listed}"
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&store.admin(&["token", "list", "--json"]).stdout).expect("JSON");
    let brief_row = rows
        .iter()
        .find(|r| r["name"] == "brief")
        .expect("brief listed");
    assert_eq!(brief_row["expired"], true, "{brief_row}");
    assert!(
        brief_row["expires"]
            .as_str()
            .is_some_and(|d| d.ends_with('Z')),
        "{brief_row}"
    );
    assert!(!rows.iter().any(|r| r["name"] == "kept"), "{rows:?}");
    assert!(
        rows.iter().all(|r| r.get("hash").is_none()),
        "no secret's hash: {rows:?}"
    );
    for s in [&first, &second] {
        let logs = s.logs();
        for secret in [&brief, &kept] {
            assert!(!logs.contains(&secret[8..]), "a secret is in the log");
        }
    }
}

/// `Authorization: Basic base64(user:secret)`.
fn basic(secret: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("u:{secret}").into_bytes();
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Basic {out}")
}

#[test]
fn raw_requests_without_or_with_bad_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin, _work) = setup(tmp.path());
    let port = server.port();
    let routes: [(&str, &str); 7] = [
        ("GET", "/org/app.git/info/refs?service=git-upload-pack"),
        ("GET", "/org/app.git/info/refs?service=git-receive-pack"),
        ("POST", "/org/app.git/git-upload-pack"),
        ("POST", "/org/app.git/git-receive-pack"),
        ("GET", "/metrics"),
        ("GET", "/debug/pprof/heap"),
        // A repository that does not exist is not revealed as missing.
        ("GET", "/nowhere/x.git/info/refs?service=git-upload-pack"),
    ];
    for (method, path) in routes {
        let resp = http(port, method, path, &[], b"");
        assert_eq!(resp.status, 401, "{method} {path}");
        assert_eq!(
            resp.header("www-authenticate"),
            Some("Basic realm=\"gitstow\""),
            "{method} {path}"
        );
    }
    // The admin token reads the operator endpoint; a reader may not.
    let resp = get_as(port, "/metrics", &basic(&admin));
    assert_eq!(resp.status, 200);
    let reader = server.store().create_token("reader", &["*:read"], &[]);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let resp = get_as(port, "/metrics", &format!("Bearer {reader}"));
    assert_eq!(resp.status, 403, "{}", resp.text());
    let resp = get_as(
        port,
        "/org/app.git/info/refs?service=git-upload-pack",
        &format!("Bearer {reader}"),
    );
    assert_eq!(resp.status, 200, "Bearer works");

    // Malformed headers: 401, never a 500; each counts as a failure.
    let huge = format!("Basic {}", "QUFB".repeat(2000));
    let malformed: Vec<String> = vec![
        "Basic !!!notbase64".into(),
        "Basic dXNlcg==".into(), // "user", no colon
        "Digest abc".into(),
        "Bearer".into(),
        huge,
    ];
    for (i, value) in malformed.iter().enumerate() {
        let resp = get_as(
            port,
            "/org/app.git/info/refs?service=git-upload-pack",
            value,
        );
        assert_eq!(resp.status, 401, "malformed header {i}");
    }
    let resp = raw_get_with_bytes(port, b"Authorization: Basic \xff\xfe\xfd\r\n");
    assert!(
        resp.starts_with("HTTP/1.1 401") || resp.starts_with("HTTP/1.1 400"),
        "{resp}"
    );

    // Brute force: wrong tokens from one address are answered 429 after a
    // few; a valid token from the same address is still served (behind a
    // proxy every client has the proxy's address).
    let mut statuses = Vec::new();
    for i in 0..15 {
        let resp = get_as(
            port,
            "/org/app.git/info/refs?service=git-upload-pack",
            &basic(&format!("gitstow_guess{i}")),
        );
        statuses.push(resp.status);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    let resp = get_as(
        port,
        "/org/app.git/info/refs?service=git-upload-pack",
        &basic(&admin),
    );
    assert_eq!(resp.status, 200, "a valid token is served");
    let resp = get_as(
        port,
        "/org/app.git/info/refs?service=git-upload-pack",
        &basic("gitstow_one-more-guess"),
    );
    assert_eq!(resp.status, 429);
    assert!(resp.header("retry-after").is_some());
    let logs = server.logs();
    assert!(
        !logs.contains(&admin[8..]) && !logs.contains(&reader[8..]),
        "a secret is in the log"
    );
    assert!(
        logs.contains("authentication failed"),
        "failures are logged"
    );
    // At a bounded rate: 16 wrong guesses, 10 lines of failures and one of
    // the block (the access log has its own line per request).
    let failed = logs.matches("authentication failed").count();
    assert!(failed <= 10 + 2, "{failed} failure lines");
    assert_eq!(logs.matches("refused with 429").count(), 1, "{logs}");
}

/// `GET path` on `port` with `Authorization: <authorization>`.
fn get_as(port: u16, path: &str, authorization: &str) -> Response {
    http(port, "GET", path, &[("Authorization", authorization)], b"")
}

/// A GET whose header block includes `extra` as raw bytes (not UTF-8).
fn raw_get_with_bytes(port: u16, extra: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = b"GET /org/app.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_vec();
    req.extend_from_slice(extra);
    req.extend_from_slice(b"\r\n");
    s.write_all(&req).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `gitstow serve` beyond loopback: refused while no token exists, unless
/// `--insecure-no-auth`; started once a token exists.
#[test]
fn serving_beyond_loopback_needs_a_token_or_the_insecure_flag() {
    use std::io::BufRead;
    let bin = env!("CARGO_BIN_EXE_gitstow");
    let tmp = tempfile::tempdir().unwrap();
    let store = TestStore::Fs(tmp.path().join("store"));
    std::fs::create_dir_all(tmp.path().join("store")).unwrap();
    let serve = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(bin);
        cmd.args(["serve", "--listen", "0.0.0.0:0", "--no-maintenance"])
            .args(store.args())
            .args(extra)
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    let out = serve(&[]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("refusing to serve on 0.0.0.0:0 without access control: no token exists")
            && err.contains("--insecure-no-auth"),
        "{err}"
    );
    let started = |extra: &[&str]| {
        let mut child = serve(extra).spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let _ = child.kill();
        let _ = child.wait();
        line
    };
    assert!(started(&["--insecure-no-auth"]).contains("listening on"));
    store.create_token("root", &["*:admin"], &[]);
    assert!(started(&[]).contains("listening on"));
}

/// Revoking the last token needs `--force`, and does not open a server that
/// enforced access control: it then refuses everything but anonymous read.
#[test]
fn revoking_the_last_token_closes_rather_than_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _admin, _work) = setup(tmp.path());
    let out = server.store().admin(&["token", "revoke", "root"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is the last token"),
        "{out:?}"
    );
    let out = server
        .store()
        .admin(&["token", "revoke", "root", "--force"]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for (method, path) in [
        ("GET", "/org/app.git/info/refs?service=git-upload-pack"),
        ("GET", "/org/app.git/info/refs?service=git-receive-pack"),
        ("GET", "/metrics"),
    ] {
        let resp = http(server.port(), method, path, &[], b"");
        assert_eq!(resp.status, 401, "{method} {path}");
    }
}

/// `http://u:<secret>@host/<name>.git`.
fn authed(server: &Server, name: &str, secret: &str) -> String {
    server
        .url(name)
        .replace("http://", &format!("http://u:{secret}@"))
}

/// Protected refs (by default HEAD's branch and every tag): a write token
/// may fast-forward them and create tags, but its force-pushes and
/// deletions are refused in git's words; an admin token may; other
/// branches are free; `access protect` changes what is protected.
#[test]
fn protected_refs_refuse_rewrites_without_admin() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin, work) = setup(tmp.path());
    let writer = server.store().create_token("writer", &["org/*:write"], &[]);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let w = authed(&server, "org/app", &writer);
    let a = authed(&server, "org/app", &admin);

    // Fast-forward and a new tag: allowed.
    commit_files(&work, &[("a", "2")], "c2");
    git(&work, &["push", "--quiet", &w, "main"]);
    git(&work, &["tag", "v1"]);
    git(&work, &["push", "--quiet", &w, "v1"]);

    // Force-push of main: refused as receive.denyNonFastForwards refuses it.
    git(&work, &["reset", "--quiet", "--hard", "HEAD~1"]);
    commit_files(&work, &[("a", "3")], "c3");
    let err = git_fail(&work, &["push", "--force", &w, "main"]);
    assert!(err.contains("main -> main (non-fast-forward)"), "{err}");
    assert!(
        err.contains("error: denying non-fast-forward refs/heads/main (you should pull first)"),
        "{err}"
    );
    // Deletion of main: refused as receive.denyDeletes refuses it.
    let err = git_fail(&work, &["push", &w, ":main"]);
    assert!(err.contains("main (deletion prohibited)"), "{err}");
    assert!(
        err.contains("error: denying ref deletion for refs/heads/main"),
        "{err}"
    );
    // A tag moved or deleted: refused.
    git(&work, &["tag", "-f", "v1"]);
    let err = git_fail(&work, &["push", "--force", &w, "v1"]);
    assert!(err.contains("v1 -> v1 (non-fast-forward)"), "{err}");
    let err = git_fail(&work, &["push", &w, ":refs/tags/v1"]);
    assert!(err.contains("v1 (deletion prohibited)"), "{err}");
    // Another branch: force-push and delete freely.
    git(&work, &["push", "--quiet", &w, "HEAD~1:refs/heads/feature"]);
    git(
        &work,
        &["push", "--quiet", "--force", &w, "HEAD:refs/heads/feature"],
    );
    git(&work, &["push", "--quiet", &w, ":refs/heads/feature"]);

    // An admin may rewrite and delete protected refs.
    git(&work, &["push", "--quiet", "--force", &a, "main"]);
    git(&work, &["push", "--quiet", &a, ":refs/tags/v1"]);
    let refs = ls_remote(&a);
    assert!(
        !refs.contains("refs/tags/v1") && !refs.contains("feature"),
        "{refs}"
    );

    // Protect release branches instead of HEAD's: main is free for writers.
    let out = server
        .store()
        .admin(&["access", "protect", "org/*", "refs/heads/release/*"]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(std::time::Duration::from_millis(1200));
    git(&work, &["reset", "--quiet", "--hard", "HEAD~1"]);
    git(&work, &["push", "--quiet", "--force", &w, "main"]);
    git(&work, &["push", "--quiet", &w, "main:refs/heads/release/1"]);
    let err = git_fail(&work, &["push", &w, ":refs/heads/release/1"]);
    assert!(err.contains("deletion prohibited"), "{err}");
    let shown =
        String::from_utf8_lossy(&server.store().admin(&["access", "show"]).stdout).into_owned();
    assert!(
        shown.contains("protected in org/*: refs/heads/release/*"),
        "{shown}"
    );
}

/// A request with `Host: name` (raw bytes), its answer as text.
fn request_with_host(port: u16, method: &str, path: &str, host: &str, body: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Hardening, finding 6 (DNS rebinding): without access control a server
/// answers only to loopback names. A page that makes a browser send a push
/// through a name rebound to 127.0.0.1 (`Host: attacker.example.com`) gets
/// 421 and deletes nothing; `localhost`, `127.0.0.1` and `[::1]` are
/// served; `--insecure-no-auth` serves every name, as it says.
#[test]
fn without_tokens_only_loopback_names_are_served() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let tip = commit_files(&work, &[("a.txt", "one\n")], "one");
    git(
        &work,
        &["push", &server.url("app"), "main", "main:refs/heads/keep"],
    );
    let delete = receive_pack_request(
        &[(tip.as_str(), ZERO_OID, "refs/heads/keep")],
        "report-status",
        None,
    );
    let port = server.port();
    for host in [
        "attacker.example.com",
        "attacker.example.com:80",
        "127.0.0.1.nip.io",
    ] {
        let said = request_with_host(port, "POST", "/app.git/git-receive-pack", host, &delete);
        assert!(said.starts_with("HTTP/1.1 421"), "{host}: {said}");
        assert!(said.contains("answers only to localhost"), "{said}");
        let said = request_with_host(
            port,
            "GET",
            "/app.git/info/refs?service=git-upload-pack",
            host,
            b"",
        );
        assert!(said.starts_with("HTTP/1.1 421"), "{host}: {said}");
    }
    // An absolute-form target names the host (it wins over Host), and two
    // Host headers are refused.
    for (path, host) in [
        (
            "http://evil.example/app.git/info/refs?service=git-upload-pack",
            "localhost".to_owned(),
        ),
        (
            "http://localhost@evil.example/app.git/info/refs?service=git-upload-pack",
            "localhost".to_owned(),
        ),
        (
            "/app.git/info/refs?service=git-upload-pack",
            "localhost\r\nHost: evil.example".to_owned(),
        ),
    ] {
        let said = request_with_host(port, "GET", path, &host, b"");
        assert!(said.starts_with("HTTP/1.1 421"), "{path} {host:?}: {said}");
    }
    assert!(ls_remote(&server.url("app")).contains("refs/heads/keep"));
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".to_owned(),
    ] {
        let said = request_with_host(
            port,
            "GET",
            "/app.git/info/refs?service=git-upload-pack",
            &host,
            b"",
        );
        assert!(said.starts_with("HTTP/1.1 200"), "{host}: {said}");
    }
    // --insecure-no-auth: every name, on purpose.
    let open = Server::start_on(
        Some(server.store()),
        &["--no-maintenance", "--insecure-no-auth"],
        &[],
    );
    let said = request_with_host(
        open.port(),
        "GET",
        "/app.git/info/refs?service=git-upload-pack",
        "git.example.com",
        b"",
    );
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
}

/// Hardening, finding 12: a symbolic link inside a local store
/// (`org/alias.git -> ../secret/x.git`) is not followed, so a writer on
/// `org/*` neither reads nor writes `secret/x` through it.
#[test]
fn links_inside_a_local_store_are_not_followed() {
    if Server::is_canonical() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin, work) = setup(tmp.path());
    let TestStore::Fs(root) = server.store().clone() else {
        return; // a local store's own concern
    };
    let secret_url = server
        .url("secret/x")
        .replace("http://", &format!("http://root:{admin}@"));
    git(&work, &["push", "--quiet", &secret_url, "main"]);
    let before = ls_remote(&secret_url);
    std::os::unix::fs::symlink("../secret/x.git", root.join("org/alias.git")).unwrap();
    let writer = server
        .store()
        .create_token("org-writer", &["org/*:write"], &[]);
    std::thread::sleep(std::time::Duration::from_millis(1_200)); // --access-refresh 1
    let alias = server
        .url("org/alias")
        .replace("http://", &format!("http://w:{writer}@"));
    let out = git_cmd(tmp.path())
        .args(["clone", "--quiet", &alias, "stolen"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "cloned through a link");
    assert!(!tmp.path().join("stolen/a").exists());
    commit_files(&work, &[("b", "2")], "c2");
    let out = git_cmd(&work)
        .args(["push", &alias, "main"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "pushed through a link");
    assert_eq!(ls_remote(&secret_url), before, "secret/x unchanged");
    assert!(
        server
            .logs()
            .contains("symbolic link under the store's root is not followed"),
        "{}",
        server.logs()
    );
}
