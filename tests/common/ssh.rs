//! OpenSSH's client tools for the SSH tests (`ssh`, `ssh-keygen`,
//! `ssh-keyscan`; installed by `.ci/run`): keys, the `GIT_SSH_COMMAND`
//! git runs, the host keys a server presents.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::{git_cmd, histgen, Server, TestStore};

/// `ssh-keygen -t KIND [-b BITS]` into `dir/name`, no passphrase, comment
/// `name@test`; returns the private key's path (`.pub` beside it).
pub fn ssh_keygen(dir: &Path, name: &str, kind: &str, bits: Option<&str>) -> PathBuf {
    let path = dir.join(name);
    let mut cmd = Command::new("ssh-keygen");
    cmd.args([
        "-q",
        "-t",
        kind,
        "-N",
        "",
        "-C",
        &format!("{name}@test"),
        "-f",
    ])
    .arg(&path);
    if let Some(b) = bits {
        cmd.args(["-b", b]);
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("ssh-keygen is needed (OpenSSH's client; .ci/run installs it): {e}")
    });
    assert!(
        out.status.success(),
        "ssh-keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// The fingerprint `ssh-keygen -lf` prints for `public` (`SHA256:…`).
pub fn openssh_fingerprint(public: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(public)
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .expect("a fingerprint")
        .to_owned()
}

/// A free port on loopback (bound, then released for the server).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The ssh command git runs (`GIT_SSH_COMMAND`) with `key` only, no host
/// key checks (the server's keys are new), no prompts.
pub fn ssh_command(key: &Path) -> String {
    format!(
        "ssh -i {} -o IdentitiesOnly=yes -o IdentityAgent=none -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR",
        key.display()
    )
}

/// `ssh-keyscan -p PORT 127.0.0.1` for `kind`: the host key line's key part.
pub fn keyscan(port: u16, kind: &str) -> String {
    let out = Command::new("ssh-keyscan")
        .args(["-T", "10", "-t", kind, "-p", &port.to_string(), "127.0.0.1"])
        .output()
        .expect("ssh-keyscan (OpenSSH's client)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.is_empty())
        .unwrap_or_else(|| panic!("no {kind} host key from port {port}: {text}"));
    line.split_whitespace()
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A store in `dir` (or on S3, as [`TestStore::from_env`]) with token `dev`
/// (`*:write`) and an ed25519 key attached to it; returns the store and
/// the key's private path.
pub fn store_with_ssh_key(dir: &Path) -> (TestStore, PathBuf) {
    let store = TestStore::from_env(dir);
    store.create_token("dev", &["*:write"], &[]);
    let key = ssh_keygen(dir, "dev", "ed25519", None);
    add_key(&store, "dev", &key);
    (store, key)
}

/// `gitstow key add --token TOKEN` of the public half of `key` (a private
/// key's path); panics with its stderr when refused.
pub fn add_key(store: &TestStore, token: &str, key: &Path) {
    let public = key.with_extension("pub");
    let out = store.admin(&["key", "add", "--token", token, public.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "key add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `gitstow serve` on `store` with SSH on a free port of 127.0.0.1 and
/// `extra` arguments (and environment `env`); returns it and the SSH port.
pub fn start_ssh(store: &TestStore, extra: &[&str], env: &[(&str, &str)]) -> (Server, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["--ssh-listen", listen.as_str()];
    args.extend(extra);
    (Server::start_on(Some(store), &args, env), port)
}

/// An ed25519 key in `dir/name`; returns the private key's path.
pub fn keygen(dir: &Path, name: &str) -> PathBuf {
    ssh_keygen(dir, name, "ed25519", None)
}

pub struct Ssh {
    pub server: Server,
    pub port: u16,
    pub dev: PathBuf,
    pub reader: PathBuf,
    pub stranger: PathBuf,
    pub secret: String,
    _tmp: tempfile::TempDir,
}

impl Ssh {
    /// A server with SSH on, tokens `dev` (`org/*:write`) and `reader`
    /// (`*:read`) with a key each, and a key attached to nothing.
    pub fn start() -> Ssh {
        Ssh::start_with(&[], |_| {})
    }

    /// As [`Ssh::start`], with `extra` arguments to `serve` and `setup`
    /// run on the store before the server starts.
    pub fn start_with(extra: &[&str], setup: impl FnOnce(&TestStore)) -> Ssh {
        Ssh::start_with_env(extra, &[], setup)
    }

    /// As [`Ssh::start_with`], the server run with `env` set.
    pub fn start_with_env(
        extra: &[&str],
        env: &[(&str, &str)],
        setup: impl FnOnce(&TestStore),
    ) -> Ssh {
        Ssh::start_granting("org/*:write", extra, env, setup)
    }

    /// As [`Ssh::start`], with `dev` an admin of `org/*` (no protected
    /// ref holds it back: as over HTTP with access control off).
    pub fn start_admin() -> Ssh {
        Ssh::start_granting("org/*:admin", &[], &[], |_| {})
    }

    /// As [`Ssh::start_with_env`], `dev`'s token granted `dev_grant`.
    fn start_granting(
        dev_grant: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        setup: impl FnOnce(&TestStore),
    ) -> Ssh {
        let tmp = tempfile::tempdir().unwrap();
        let store = TestStore::from_env(tmp.path());
        setup(&store);
        let secret = store.create_token("dev", &[dev_grant], &[]);
        store.create_token("reader", &["*:read"], &[]);
        let dev = keygen(tmp.path(), "dev");
        let reader = keygen(tmp.path(), "reader");
        let stranger = keygen(tmp.path(), "stranger");
        add_key(&store, "dev", &dev);
        add_key(&store, "reader", &reader);
        let mut args = vec!["--access-refresh", "2"];
        args.extend(extra);
        let (server, port) = start_ssh(&store, &args, env);
        Ssh {
            server,
            port,
            dev,
            reader,
            stranger,
            secret,
            _tmp: tmp,
        }
    }

    /// A generated history of `commits` commits in `dir/src.git`, pushed
    /// with `--mirror` to `org/app` over SSH by `dev`.
    pub fn mirror(&self, dir: &Path, commits: usize) -> PathBuf {
        let src = dir.join("src.git");
        histgen(
            &src,
            &gitstow_histgen::Options {
                commits,
                ..Default::default()
            },
        );
        let out = self.git(
            dir,
            &self.dev,
            &["-C", "src.git", "push", "--mirror", &self.url("org/app")],
        );
        ok(&out, "push over ssh");
        src
    }

    pub fn url(&self, name: &str) -> String {
        format!("ssh://git@127.0.0.1:{}/{name}.git", self.port)
    }

    pub fn http_url(&self, name: &str) -> String {
        format!(
            "http://dev:{}@127.0.0.1:{}/{name}.git",
            self.secret,
            self.server.port()
        )
    }

    /// git in `dir` with `key`, whatever its outcome.
    pub fn git(&self, dir: &Path, key: &Path, args: &[&str]) -> Output {
        git_cmd(dir)
            .env("GIT_SSH_COMMAND", ssh_command(key))
            .args(args)
            .output()
            .expect("git runs")
    }

    /// `ssh … git@127.0.0.1 COMMAND` with `key`: (exit code, stdout, stderr).
    pub fn ssh(&self, key: &Path, command: &str) -> (Option<i32>, String, String) {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "{} -p {} git@127.0.0.1 {command}",
                ssh_command(key),
                self.port
            ))
            .stdin(Stdio::null());
        let out = cmd.output().expect("ssh runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

pub fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
