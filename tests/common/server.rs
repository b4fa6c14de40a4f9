//! Test harness: a `gitstow serve` (or canonical) server on a store of its own or a shared one.

use super::*;

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
        self.open().list("").expect("listing the store")
    }

    /// The store, opened through the store crate.
    pub fn open(&self) -> std::sync::Arc<dyn gitstow_store::ObjectStore> {
        match self {
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
        }
    }

    /// The state of repository `name`, read through the odb crate.
    pub fn repo_state(&self, name: &str) -> Option<gitstow_odb::RepoState> {
        gitstow_odb::Repository::new(self.open(), name, gitstow_odb::IndexCache::new())
            .load_state()
            .expect("reading the state")
            .map(|v| v.state)
    }

    /// The retired list of repository `name` (containers held for their grace period).
    pub fn retired(&self, name: &str) -> Vec<gitstow_odb::retired::RetiredContainer> {
        gitstow_odb::Repository::new(self.open(), name, gitstow_odb::IndexCache::new())
            .load_retired()
            .expect("reading the retired list")
            .0
    }

    /// Runs the admin command `gitstow <command…> --store URL [S3 flags]`
    /// (e.g. `["token", "create", "--name", "ci", "--grant", "*:read"]`) on
    /// this store; returns its output whatever its exit status.
    pub fn admin(&self, command: &[&str]) -> Output {
        self.admin_env(command, &[])
    }

    /// [`TestStore::admin`] with environment variables `env` set (and no
    /// `GITSTOW_SECRETS_KEY` but one `env` gives).
    pub fn admin_env(&self, command: &[&str], env: &[(&str, &str)]) -> Output {
        let Some(bin) = option_env!("CARGO_BIN_EXE_gitstow") else {
            panic!("no `gitstow` binary: these tests belong to the root package")
        };
        Command::new(bin)
            .args(command)
            .args(self.args())
            .env_remove("GITSTOW_SECRETS_KEY")
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {bin} {command:?}: {e}"))
    }

    /// `gitstow token create --name NAME --grant G…` on this store; returns
    /// the secret (the last word of its output).
    pub fn create_token(&self, name: &str, grants: &[&str], extra: &[&str]) -> String {
        let mut args = vec!["token", "create", "--name", name];
        for g in grants {
            args.extend(["--grant", g]);
        }
        args.extend(extra);
        let out = self.admin(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "token create failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .split_whitespace()
            .last()
            .expect("a secret")
            .to_owned()
    }

    /// Runs `gitstow maintain` on this store with `args` (and environment
    /// `env`); returns its output whatever its exit status.
    pub fn maintain(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let Some(bin) = option_env!("CARGO_BIN_EXE_gitstow") else {
            panic!("no `gitstow` binary: these tests belong to the root package")
        };
        Command::new(bin)
            .arg("maintain")
            .args(self.args())
            .args(args)
            // Tests shorten the grace period to see deletions happen.
            .env("GITSTOW_TEST_SHORT_GRACE", "1")
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {bin} maintain: {e}"))
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
    _cache: Option<tempfile::TempDir>,
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
            _cache: None,
        };
        server.spawn();
        server
    }

    /// A server on `store` with a cache directory of its own (S3 stores
    /// keep immutable objects in a local cache shared by the servers of one
    /// store: a new process then sees nothing another one cached, as after
    /// a damaged side file was replaced in the store).
    pub fn start_uncached_on(store: &TestStore, extra: &[&str]) -> Server {
        let cache = tempfile::Builder::new()
            .prefix("gitstow-it-cache")
            .tempdir()
            .expect("temp dir");
        let mut all = extra.to_vec();
        let path = cache.path().to_str().expect("UTF-8 temp dir").to_owned();
        all.extend(["--cache-dir", path.as_str()]);
        let mut server = Server::start_on(Some(store), &all, &[]);
        server._cache = Some(cache);
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
            .env("GITSTOW_TEST_SHORT_GRACE", "1")
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
                if let Some(rest) = line
                    .trim()
                    .strip_prefix(LISTENING)
                    .or_else(|| line.trim().strip_prefix(LISTENING_TLS))
                {
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

/// The number `name=` (or `name=Some(`) gives in a server log line.
pub fn log_field(line: &str, name: &str) -> u64 {
    let at = line
        .find(&format!(" {name}="))
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    let rest = &line[at + name.len() + 2..];
    let rest = rest.strip_prefix("Some(").unwrap_or(rest);
    rest.chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{name} in {line}"))
}

/// The text `name="…"` gives in a server log line (`""` when absent).
pub fn log_text(line: &str, name: &str) -> String {
    line.split(&format!(" {name}=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("")
        .to_owned()
}

/// The last `upload-pack` log line that sent a pack.
pub fn last_pack_line(logs: &str) -> String {
    logs.lines()
        .rev()
        .find(|l| l.contains("upload-pack") && l.contains(" objects="))
        .unwrap_or_else(|| panic!("no upload-pack line with a pack in:\n{logs}"))
        .to_owned()
}

/// A process's `/proc` status field, in kB.
pub fn proc_status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The server's peak RSS (VmHWM) above its resident size when `run` began,
/// in kB: the peak is reset first (`/proc/PID/clear_refs`, 5).
pub fn peak_above(pid: u32, run: impl FnOnce()) -> u64 {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = proc_status_kb(pid, "VmRSS");
    run();
    proc_status_kb(pid, "VmHWM").saturating_sub(before)
}
