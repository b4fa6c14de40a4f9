//! Helpers of the mirror tests (`tests/mirror.rs`, `tests/mirror_sync.rs`):
//! upstreams (a generated history, canonical `git http-backend` behind the
//! front ends in `scripts/`), what a repository lists, and waiting for a
//! sync.

use std::path::Path;
use std::process::Output;

use super::*;

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `git ls-remote` lines of branches and tags only (what a mirror takes).
pub fn heads_and_tags(url: &str) -> Vec<String> {
    ls_remote(url)
        .lines()
        .filter(|l| l.contains("\trefs/heads/") || l.contains("\trefs/tags/"))
        .map(str::to_owned)
        .collect()
}

/// Whether `here` lists the branches and tags `there` does (`false` while
/// `here` has no such repository yet).
pub fn in_step(here: &str, there: &str) -> bool {
    let out = git_cmd(Path::new("/"))
        .args(["ls-remote", here])
        .output()
        .expect("run git");
    out.status.success() && heads_and_tags(here) == heads_and_tags(there)
}

/// Every ref the store's repository holds (hidden ones too), name → oid.
pub fn stored_refs(store: &TestStore, repo: &str) -> std::collections::BTreeMap<String, String> {
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

/// An upstream `gitstow serve` holding `org/app`: [`upstream_work`]'s
/// history made in `tmp/work` and pushed there with `--mirror`. Returns the
/// server, the work tree and the repository's URL.
pub fn upstream_app(tmp: &Path) -> (Server, std::path::PathBuf, String) {
    let upstream = Server::start();
    let work = tmp.join("work");
    upstream_work(&work);
    let up = upstream.url("org/app");
    git(&work, &["push", "-q", "--mirror", &up]);
    (upstream, work, up)
}

/// A work tree with main, dev and an annotated tag.
pub fn upstream_work(dir: &Path) {
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

/// What `git ls-remote` shows of a bare repository's branches and tags
/// (peeled tags too), in `heads_and_tags`' order.
pub fn bare_heads_and_tags(bare: &Path) -> Vec<String> {
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

/// `gitstow <args> --store …` with intervals down to 1 s allowed.
pub fn admin_short(store: &TestStore, args: &[&str]) -> Output {
    store.admin_env(args, &[("GITSTOW_TEST_SHORT_MIRROR_INTERVAL", "1")])
}

/// Polls `done` every 200 ms until it holds, for at most `secs` seconds.
pub fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
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
pub fn mirror_rows(store: &TestStore) -> Vec<serde_json::Value> {
    let o = store.admin(&["mirror", "list", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).expect("mirror list --json is JSON")
}

/// The "mirror sync" log lines of `servers` (successful pulls).
pub fn syncs_logged(servers: &[&Server]) -> usize {
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

/// Canonical `git http-backend` on a port of its own, serving `root`,
/// behind HTTP Basic (`scripts/basic-auth-backend.py`) when `users` is
/// given (`name:password:level,…`); killed when dropped.
pub struct Backend {
    child: std::process::Child,
    /// The port it listens on.
    pub port: u16,
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn backend(root: &Path, users: Option<&str>) -> Backend {
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
pub fn backend_script(script: &str, root: &Path, env: &[(&str, &str)]) -> Backend {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    backend_script_on(script, root, env, port)
}

/// Canonical `git http-backend` serving `root` on `port` (an upstream
/// that comes back where it was).
pub fn backend_on(root: &Path, port: u16) -> Backend {
    backend_script_on(
        "../shared/tools/git-http-backend-server.py",
        root,
        &[],
        port,
    )
}

fn backend_script_on(script: &str, root: &Path, env: &[(&str, &str)], port: u16) -> Backend {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = manifest.join("../shared/tools/git-http-backend-server.py");
    assert!(
        shared.exists(),
        "the canonical server script {} is missing",
        shared.display()
    );
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

/// A bare repository `root/app.git` made from a generated work tree, and
/// the work tree.
pub fn bare_upstream(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
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
