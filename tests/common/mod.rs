//! Harness for the integration tests: a `gitstow serve` on a free port with a
//! store in a temp dir ([`Server`]), the real `git` in a clean environment
//! ([`git`], [`git_fail`]), a raw HTTP/1.1 client for requests git itself
//! never sends ([`http`]), and pkt-line / pack builders to make them.
//!
//! `GITSTOW_TEST_STORE=s3` runs every server on a fresh prefix of the S3
//! bucket named by `S3_ENDPOINT`, `S3_REGION`, `S3_ACCESS_KEY`,
//! `S3_SECRET_KEY` and `S3_BUCKET` (see `scripts/s3-radosgw.sh`); without
//! those variables such a run fails at once, it never falls back to disk.
//!
//! Setting `GITSTOW_TEST_CANONICAL=1` (or to the path of
//! `git-http-backend-server.py`) runs the same tests against canonical
//! `git http-backend` instead of gitstow: that is how the expected answers in
//! the assertions were learned, and how to check a test's own logic.
#![allow(dead_code)] // each test file uses its own subset

pub mod raw_target;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use flate2::write::ZlibEncoder;
use flate2::Compression;

/// How long a server gets to say it is listening.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// The line (prefix) `gitstow serve` prints on stdout once it accepts
/// connections; the port follows.
const LISTENING: &str = "gitstow listening on http://127.0.0.1:";

// ---------------------------------------------------------------------------
// server

/// Where a test server keeps its repositories.
#[derive(Clone, Debug)]
pub enum TestStore {
    /// `--store file://<dir>`.
    Fs(PathBuf),
    /// `--store s3://<bucket>/<prefix>` plus the endpoint and credentials flags.
    S3 {
        /// The store URL.
        url: String,
        /// `--s3-*` flags.
        flags: Vec<String>,
    },
}

/// Reads a required S3 variable; a missing one fails the test with the fix.
fn s3_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "the S3 tests need a running S3 server and ${name}: run \
             `bash scripts/s3-radosgw.sh start` and `eval \"$(bash scripts/s3-radosgw.sh env)\"` \
             (./scripts/test and .ci/run do this)"
        )
    })
}

impl TestStore {
    /// A fresh store of the kind `GITSTOW_TEST_STORE` selects (`fs`, the
    /// default, in `dir`; or `s3`).
    pub fn from_env(dir: &Path) -> TestStore {
        match std::env::var("GITSTOW_TEST_STORE").as_deref() {
            Ok("s3") => TestStore::s3(),
            Ok("fs") | Err(_) => {
                let store = dir.join("store");
                fs::create_dir_all(&store).unwrap();
                TestStore::Fs(store)
            }
            Ok(other) => panic!("GITSTOW_TEST_STORE={other:?}: want fs or s3"),
        }
    }

    /// A fresh prefix of the S3 test bucket (fails the test without the S3 variables).
    pub fn s3() -> TestStore {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let endpoint = s3_env("S3_ENDPOINT");
        let bucket = s3_env("S3_BUCKET");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        TestStore::S3 {
            url: format!("s3://{bucket}/it-{}-{nanos}-{n}", std::process::id()),
            flags: vec![
                "--s3-endpoint".into(),
                endpoint,
                "--s3-region".into(),
                std::env::var("S3_REGION").unwrap_or_else(|_| "us-east-1".into()),
                "--s3-access-key".into(),
                s3_env("S3_ACCESS_KEY"),
                "--s3-secret-key".into(),
                s3_env("S3_SECRET_KEY"),
                "--s3-path-style".into(),
            ],
        }
    }

    /// The store URL.
    pub fn url(&self) -> String {
        match self {
            TestStore::Fs(dir) => format!("file://{}", dir.display()),
            TestStore::S3 { url, .. } => url.clone(),
        }
    }

    /// `--store URL` and any backend flags.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["--store".to_owned(), self.url()];
        if let TestStore::S3 { flags, .. } = self {
            args.extend(flags.iter().cloned());
        }
        args
    }

    /// Every key in the store (sorted), read through the store crate.
    pub fn keys(&self) -> Vec<String> {
        let store = match self {
            TestStore::Fs(dir) => gitstow_store::open(&self.url())
                .unwrap_or_else(|e| panic!("opening {}: {e}", dir.display())),
            TestStore::S3 { url, .. } => gitstow_store::open_with(
                url,
                &gitstow_store::S3Options {
                    endpoint: Some(s3_env("S3_ENDPOINT")),
                    region: Some(std::env::var("S3_REGION").unwrap_or_else(|_| "us-east-1".into())),
                    access_key: Some(s3_env("S3_ACCESS_KEY")),
                    secret_key: Some(s3_env("S3_SECRET_KEY")),
                    path_style: Some(true),
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("opening {url}: {e}")),
        };
        store.list("").expect("listing the store")
    }
}

/// A running server with its own store, killed on drop. If the test panics,
/// the server's stderr (its logs) is printed.
pub struct Server {
    child: Option<Child>,
    port: u16,
    store: TestStore,
    log: PathBuf,
    extra: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// `gitstow serve --listen 127.0.0.1:0` on a fresh store ([`TestStore::from_env`]).
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Like [`Server::start`], with extra arguments after the standard ones.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::start_on(None, extra, &[])
    }

    /// A server on `store` (a fresh one from the environment when `None`:
    /// several servers can share one store), with extra arguments and
    /// environment variables.
    pub fn start_on(store: Option<&TestStore>, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("gitstow-it")
            .tempdir()
            .expect("temp dir");
        let store = store
            .cloned()
            .unwrap_or_else(|| TestStore::from_env(dir.path()));
        let mut extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for (k, v) in env {
            extra.push(format!("\0env\0{k}={v}"));
        }
        let mut server = Server {
            child: None,
            port: 0,
            log: dir.path().join("server.stderr.log"),
            store,
            extra,
            _dir: dir,
        };
        server.spawn();
        server
    }

    /// The server's store.
    pub fn store(&self) -> &TestStore {
        &self.store
    }

    /// Kills the server with SIGKILL (no chance to clean up), as a crash would.
    pub fn kill(&mut self) {
        self.stop();
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Sends SIGTERM and waits (up to `timeout`) for the process to exit;
    /// returns its exit status, or `None` if it was still running.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again after [`Server::kill`] (same store and arguments, new port).
    pub fn start_again(&mut self) {
        self.spawn();
    }

    /// Stops the server and starts a new one on the same store (and
    /// arguments); it listens on a new port, so take URLs again.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn spawn(&mut self) {
        // append: a restarted server's log follows the first one's
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        if let Some(script) = canonical_script() {
            return self.spawn_canonical(&script, log);
        }
        let Some(bin) = option_env!("CARGO_BIN_EXE_gitstow") else {
            panic!("no `gitstow` binary: these tests belong to the root package")
        };
        let (envs, args): (Vec<&String>, Vec<&String>) =
            self.extra.iter().partition(|a| a.starts_with("\0env\0"));
        let mut cmd = Command::new(bin);
        for kv in envs {
            let (k, v) = kv["\0env\0".len()..].split_once('=').expect("k=v");
            cmd.env(k, v);
        }
        let mut child = cmd
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(self.store.args())
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut seen = String::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Some(sender) = tx.as_ref() else {
                    continue; // keep draining stdout so the server never blocks on it
                };
                if let Some(rest) = line.trim().strip_prefix(LISTENING) {
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    let port = digits
                        .parse::<u16>()
                        .map_err(|_| format!("no port in the line {line:?}"));
                    let _ = sender.send(port);
                    tx = None;
                } else {
                    seen.push_str(&line);
                    seen.push('\n');
                }
            }
            if let Some(tx) = tx {
                let _ = tx.send(Err(format!("stdout closed first; it said:\n{seen}")));
            }
        });
        let why = match rx.recv_timeout(STARTUP_TIMEOUT) {
            Ok(Ok(port)) => {
                self.port = port;
                self.child = Some(child);
                return;
            }
            Ok(Err(why)) => why,
            Err(_) => format!("nothing within {STARTUP_TIMEOUT:?}"),
        };
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "gitstow serve did not print `{LISTENING}PORT` on stdout: {why}\n\
             ---- server stderr ----\n{}",
            read_lossy(&self.log)
        );
    }

    fn spawn_canonical(&mut self, script: &Path, log: fs::File) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new("python3")
            .arg(script)
            .arg(match &self.store {
                TestStore::Fs(dir) => dir.clone(),
                TestStore::S3 { .. } => panic!("the canonical server has no S3 store"),
            })
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("python3 for the canonical server");
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "canonical server did not come up:\n{}",
                    read_lossy(&self.log)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.port = port;
        self.child = Some(child);
    }

    /// `http://127.0.0.1:PORT/<name>.git`
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}.git", self.port)
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every key in the server's store.
    pub fn store_keys(&self) -> Vec<String> {
        if Server::is_canonical() {
            if let TestStore::Fs(dir) = &self.store {
                return fs::read_dir(dir)
                    .map(|rd| {
                        rd.filter_map(|e| e.ok())
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
            }
        }
        self.store.keys()
    }

    /// What the server wrote to stderr so far.
    pub fn logs(&self) -> String {
        read_lossy(&self.log)
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().ok().flatten().is_none(),
            None => false,
        }
    }

    /// Whether these tests run against canonical git instead of gitstow.
    pub fn is_canonical() -> bool {
        canonical_script().is_some()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "---- server stderr ({}) ----\n{}\n---- end of server stderr ----",
                self.log.display(),
                self.logs()
            );
        }
    }
}

fn canonical_script() -> Option<PathBuf> {
    let v = std::env::var("GITSTOW_TEST_CANONICAL").ok()?;
    if v.is_empty() || v == "0" {
        return None;
    }
    if v == "1" {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        return Some(root.join("../shared/tools/git-http-backend-server.py"));
    }
    Some(PathBuf::from(v))
}

fn read_lossy(path: &Path) -> String {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// git

/// A `HOME` shared by every git run of this test process, with a fixed
/// global config.
fn home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let base = option_env!("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let home = base.join(format!("gitstow-test-home-{}", std::process::id()));
        fs::create_dir_all(&home).unwrap();
        fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Gitstow Test\n\temail = test@gitstow.invalid\n\
             [init]\n\tdefaultBranch = main\n\
             [advice]\n\tdetachedHead = false\n\
             [core]\n\tautocrlf = false\n\
             [gc]\n\tauto = 0\n\
             [maintenance]\n\tauto = false\n\
             [fetch]\n\tfsckObjects = true\n",
        )
        .unwrap();
        home
    })
}

/// A `git` command in `dir` with a clean, deterministic environment: no
/// system config, a private `HOME`, no prompts, the C locale (English
/// messages), fixed author and committer.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .env("GIT_AUTHOR_NAME", "A U Thor")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_AUTHOR_DATE", "1700000000 +0000")
        .env("GIT_COMMITTER_NAME", "C O Mitter")
        .env("GIT_COMMITTER_EMAIL", "committer@example.com")
        .env("GIT_COMMITTER_DATE", "1700000000 +0000")
        .stdin(Stdio::null());
    cmd
}

fn describe(args: &[&str], dir: &Path, out: &Output) -> String {
    format!(
        "git {} (in {}) exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        args.join(" "),
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs git in `dir` and asserts it succeeds (output in the panic message).
pub fn git(dir: &Path, args: &[&str]) -> Output {
    git_env(dir, args, &[])
}

/// [`git`] with extra environment variables.
pub fn git_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = git_cmd(dir)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run git");
    assert!(out.status.success(), "{}", describe(args, dir, &out));
    out
}

/// The trimmed stdout of a successful git run.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(git(dir, args).stdout)
        .expect("utf-8 output")
        .trim_end()
        .to_owned()
}

/// Runs git in `dir`, asserts it fails, and returns its stderr.
pub fn git_fail(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("run git");
    assert!(
        !out.status.success(),
        "expected failure but {}",
        describe(args, dir, &out)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `git ls-remote URL` (sorted lines "oid\tref"); empty for an empty repository.
pub fn ls_remote(url: &str) -> String {
    git_out(home(), &["ls-remote", url])
}

/// A new non-bare repository at `dir` with `main` checked out.
pub fn init_repo(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "--quiet", "--initial-branch=main"]);
}

/// Writes `files` (path → content), then `git add -A` and commits; returns
/// the new commit id.
pub fn commit_files(dir: &Path, files: &[(&str, &str)], message: &str) -> String {
    for (path, content) in files {
        let p = dir.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "--quiet", "-m", message]);
    git_out(dir, &["rev-parse", "HEAD"])
}

/// Asserts `git fsck --full --strict` is clean in `dir`.
pub fn fsck(dir: &Path) {
    git(dir, &["fsck", "--full", "--strict", "--no-dangling"]);
}

/// Refs and objects of a repository, for comparing two of them: the
/// `for-each-ref` listing and the sorted `rev-list --all --objects`.
pub fn refs_and_objects(dir: &Path) -> (String, String) {
    let refs = git_out(
        dir,
        &[
            "for-each-ref",
            "--format=%(objectname) %(objecttype) %(refname)",
        ],
    );
    let objects = git_out(dir, &["rev-list", "--all", "--objects"]);
    let mut lines: Vec<&str> = objects.lines().collect();
    lines.sort_unstable();
    (refs, lines.join("\n"))
}

/// A generated history (see `gitstow-histgen`) in a bare repository.
pub fn histgen(dir: &Path, opts: &gitstow_histgen::Options) -> gitstow_histgen::Summary {
    gitstow_histgen::generate(dir, opts).expect("generate history")
}

// ---------------------------------------------------------------------------
// raw HTTP

/// A parsed HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request over a fresh connection (`Connection: close`,
/// `Content-Length` body) to 127.0.0.1:`port`.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nUser-Agent: git/gitstow-tests\r\n"
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method != "GET" || !body.is_empty() {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    // the server may answer (and close) before reading all of a bad body
    let _ = s.write_all(body);
    let _ = s.flush();
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        if raw.is_empty() {
            panic!("reading the response to {method} {path}: {e}");
        }
    }
    parse_response(&raw).unwrap_or_else(|| {
        panic!(
            "malformed HTTP response to {method} {path}: {:?}",
            String::from_utf8_lossy(&raw)
        )
    })
}

fn parse_response(mut raw: &[u8]) -> Option<Response> {
    // Skip interim answers (`100 Continue` after `Expect: 100-continue`).
    while raw.starts_with(b"HTTP/1.1 1") {
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
        raw = &raw[end + 4..];
    }
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_str = std::str::from_utf8(&rest[..nl]).ok()?;
            let size = usize::from_str_radix(size_str.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[nl + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        body = out;
    } else if let Some(len) = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.truncate(len);
    }
    Some(Response {
        status,
        headers,
        body,
    })
}

/// POSTs a receive-pack request body to `/<repo>.git/git-receive-pack`.
pub fn post_receive_pack(server: &Server, repo: &str, body: &[u8]) -> Response {
    http(
        server.port(),
        "POST",
        &format!("/{repo}.git/git-receive-pack"),
        &[
            ("Content-Type", "application/x-git-receive-pack-request"),
            ("Accept", "application/x-git-receive-pack-result"),
        ],
        body,
    )
}

// ---------------------------------------------------------------------------
// pkt-lines

/// The all-zero object id (create / delete in a receive-pack command).
pub const ZERO_OID: &str = "0000000000000000000000000000000000000000";
/// The flush packet.
pub const FLUSH: &[u8] = b"0000";

/// One pkt-line carrying `data`.
pub fn pkt(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:04x}", data.len() + 4).into_bytes();
    out.extend_from_slice(data);
    out
}

/// A pkt-line read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pkt {
    /// `0000`
    Flush,
    /// `0001`
    Delim,
    /// `0002`
    ResponseEnd,
    /// A data line (payload without the length).
    Data(Vec<u8>),
}

/// Splits bytes into pkt-lines; stops (returning what it has) at the first
/// malformed length, e.g. where a pack starts.
pub fn pkt_lines(mut bytes: &[u8]) -> Vec<Pkt> {
    let mut out = Vec::new();
    while bytes.len() >= 4 {
        let Some(len) = std::str::from_utf8(&bytes[..4])
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
        else {
            break;
        };
        match len {
            0 => out.push(Pkt::Flush),
            1 => out.push(Pkt::Delim),
            2 => out.push(Pkt::ResponseEnd),
            3 => break,
            n if n > bytes.len() => break,
            n => out.push(Pkt::Data(bytes[4..n].to_vec())),
        }
        bytes = &bytes[len.max(4)..];
    }
    out
}

/// The text lines of a report-status response, whether sent plainly or
/// inside side-band channel 1 (channel 2 and 3 text is appended to
/// `progress`).
#[derive(Debug, Default)]
pub struct Report {
    /// `unpack ok` / `unpack <reason>` (without the trailing newline).
    pub unpack: String,
    /// `ok <ref>` / `ng <ref> <reason>` lines.
    pub refs: Vec<String>,
    /// Side-band 2 and 3 text, if any.
    pub progress: String,
}

/// Parses a receive-pack response body.
pub fn report_status(body: &[u8]) -> Report {
    let mut report = Report::default();
    let mut status_bytes = Vec::new();
    let lines = pkt_lines(body);
    let sideband = matches!(lines.first(), Some(Pkt::Data(d)) if matches!(d.first(), Some(1..=3)));
    if sideband {
        for p in lines {
            if let Pkt::Data(d) = p {
                match d[0] {
                    1 => status_bytes.extend_from_slice(&d[1..]),
                    _ => report.progress.push_str(&String::from_utf8_lossy(&d[1..])),
                }
            }
        }
    } else {
        status_bytes = body.to_vec();
    }
    for p in pkt_lines(&status_bytes) {
        if let Pkt::Data(d) = p {
            let line = String::from_utf8_lossy(&d)
                .trim_end_matches('\n')
                .to_owned();
            if let Some(rest) = line.strip_prefix("unpack ") {
                report.unpack = rest.to_owned();
            } else {
                report.refs.push(line);
            }
        }
    }
    report
}

/// A receive-pack request: commands (old, new, ref), capabilities on the
/// first, a flush, then `pack` (if any) as is.
pub fn receive_pack_request(
    commands: &[(&str, &str, &str)],
    caps: &str,
    pack: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (old, new, name)) in commands.iter().enumerate() {
        let mut line = format!("{old} {new} {name}").into_bytes();
        if i == 0 {
            line.push(0);
            line.extend_from_slice(caps.as_bytes());
        }
        out.extend(pkt(&line));
    }
    out.extend_from_slice(FLUSH);
    if let Some(pack) = pack {
        out.extend_from_slice(pack);
    }
    out
}

// ---------------------------------------------------------------------------
// objects and packs

/// Git object types as a pack encodes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 1
    Commit = 1,
    /// 2
    Tree = 2,
    /// 3
    Blob = 3,
    /// 4
    Tag = 4,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Commit => "commit",
            Kind::Tree => "tree",
            Kind::Blob => "blob",
            Kind::Tag => "tag",
        }
    }
}

/// The object id (hex) of an object of `kind` with content `data`.
pub fn object_id(kind: Kind, data: &[u8]) -> String {
    let mut full = format!("{} {}\0", kind.name(), data.len()).into_bytes();
    full.extend_from_slice(data);
    hex(&sha1(&full))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A tree object's content; entries are (mode, name, oid hex), given in
/// git's order.
pub fn tree_data(entries: &[(&str, &str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (mode, name, oid) in entries {
        out.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        out.extend_from_slice(&unhex(oid));
    }
    out
}

/// A commit object's content.
pub fn commit_data(tree: &str, parents: &[&str], message: &str) -> Vec<u8> {
    let mut s = format!("tree {tree}\n");
    for p in parents {
        s.push_str(&format!("parent {p}\n"));
    }
    s.push_str("author A U Thor <author@example.com> 1700000000 +0000\n");
    s.push_str("committer C O Mitter <committer@example.com> 1700000000 +0000\n\n");
    s.push_str(message);
    s.into_bytes()
}

/// zlib (deflate) of `data`, as packs store object bodies.
pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A pack entry's type-and-size header.
pub fn entry_header(kind: u8, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut byte = (kind << 4) | (size as u8 & 0x0f);
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
    out
}

/// A pack under construction; [`PackBuilder::offsets`] tells where each
/// entry's zlib stream starts, for tests that damage one.
#[derive(Default)]
pub struct PackBuilder {
    entries: Vec<Vec<u8>>,
    zlib_at: Vec<(usize, usize)>,
}

impl PackBuilder {
    /// Adds a whole object.
    pub fn add(mut self, kind: Kind, data: &[u8]) -> Self {
        let mut e = entry_header(kind as u8, data.len());
        let header_len = e.len();
        let z = zlib(data);
        let z_len = z.len();
        e.extend(z);
        let at = 12 + self.entries.iter().map(Vec::len).sum::<usize>();
        self.zlib_at.push((at + header_len, z_len));
        self.entries.push(e);
        self
    }

    /// (offset in the pack, length) of each entry's zlib stream.
    pub fn offsets(&self) -> &[(usize, usize)] {
        &self.zlib_at
    }

    /// Header, entries, SHA-1 trailer.
    pub fn build(&self) -> Vec<u8> {
        let mut out = b"PACK".to_vec();
        out.extend_from_slice(&2u32.to_be_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for e in &self.entries {
            out.extend_from_slice(e);
        }
        let sum = sha1(&out);
        out.extend_from_slice(&sum);
        out
    }
}

/// Replaces the last 20 bytes of `pack` with the SHA-1 of the rest (after a
/// test changed the body and wants only that change to be wrong).
pub fn fix_trailer(pack: &mut [u8]) {
    let n = pack.len() - 20;
    let sum = sha1(&pack[..n]);
    pack[n..].copy_from_slice(&sum);
}

/// One entry of a parsed pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackEntry {
    /// 1..=4 whole objects, 6 OFS_DELTA, 7 REF_DELTA.
    pub kind: u8,
    /// Inflated size from the entry header.
    pub size: usize,
    /// For REF_DELTA, the base object id.
    pub base: Option<String>,
}

/// Walks a pack's entries (inflating each to find the next).
pub fn parse_pack(pack: &[u8]) -> Vec<PackEntry> {
    assert_eq!(&pack[..4], b"PACK", "not a pack");
    let count = u32::from_be_bytes(pack[8..12].try_into().unwrap()) as usize;
    let mut pos = 12;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let mut c = pack[pos];
        pos += 1;
        let kind = (c >> 4) & 7;
        let mut size = (c & 0x0f) as usize;
        let mut shift = 4;
        while c & 0x80 != 0 {
            c = pack[pos];
            pos += 1;
            size |= ((c & 0x7f) as usize) << shift;
            shift += 7;
        }
        let mut base = None;
        if kind == 6 {
            loop {
                let b = pack[pos];
                pos += 1;
                if b & 0x80 == 0 {
                    break;
                }
            }
        } else if kind == 7 {
            base = Some(hex(&pack[pos..pos + 20]));
            pos += 20;
        }
        let mut d = flate2::Decompress::new(true);
        let mut sink = vec![0u8; size.max(1)];
        loop {
            let before = d.total_in();
            let status = d
                .decompress(&pack[pos..], &mut sink, flate2::FlushDecompress::Finish)
                .expect("inflate pack entry");
            if status == flate2::Status::StreamEnd {
                break;
            }
            if d.total_in() == before {
                sink = vec![0u8; sink.len() * 2];
            }
        }
        pos += d.total_in() as usize;
        out.push(PackEntry { kind, size, base });
    }
    out
}

/// SHA-1 (FIPS 180-4), for object ids and pack trailers.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xefcd_ab89,
        0x98ba_dcfe,
        0x1032_5476,
        0xc3d2_e1f0,
    ];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes(word.try_into().unwrap());
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5a82_7999),
                20..=39 => (b ^ c ^ d, 0x6ed9_eba1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc),
                _ => (b ^ c ^ d, 0xca62_c1d6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}
