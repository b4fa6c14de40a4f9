//! git over SSH (`serve --ssh-listen`) with the real `git` and OpenSSH's
//! `ssh` client (installed by `.ci/run`): a push and a clone over ssh://
//! that match what HTTP serves from the same store, keys mapped to their
//! token's grants, and everything else refused in git's and forges' words
//! (`GITSTOW_TEST_STORE=s3` runs it on S3).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

/// An ed25519 key in `dir/name`; returns the private key's path.
fn keygen(dir: &Path, name: &str) -> PathBuf {
    ssh_keygen(dir, name, "ed25519", None)
}

struct Ssh {
    server: Server,
    port: u16,
    dev: PathBuf,
    reader: PathBuf,
    stranger: PathBuf,
    secret: String,
    _tmp: tempfile::TempDir,
}

impl Ssh {
    /// A server with SSH on, tokens `dev` (`org/*:write`) and `reader`
    /// (`*:read`) with a key each, and a key attached to nothing.
    fn start() -> Ssh {
        Ssh::start_with(&[], |_| {})
    }

    /// As [`Ssh::start`], with `extra` arguments to `serve` and `setup`
    /// run on the store before the server starts.
    fn start_with(extra: &[&str], setup: impl FnOnce(&TestStore)) -> Ssh {
        let tmp = tempfile::tempdir().unwrap();
        let store = TestStore::from_env(tmp.path());
        setup(&store);
        let secret = store.create_token("dev", &["org/*:write"], &[]);
        store.create_token("reader", &["*:read"], &[]);
        let dev = keygen(tmp.path(), "dev");
        let reader = keygen(tmp.path(), "reader");
        let stranger = keygen(tmp.path(), "stranger");
        for (token, key) in [("dev", &dev), ("reader", &reader)] {
            let public = key.with_extension("pub");
            let out = store.admin(&["key", "add", "--token", token, public.to_str().unwrap()]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut args = vec!["--access-refresh", "2"];
        args.extend(extra);
        let (server, port) = start_ssh(&store, &args, &[]);
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
    fn mirror(&self, dir: &Path, commits: usize) -> PathBuf {
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

    fn url(&self, name: &str) -> String {
        format!("ssh://git@127.0.0.1:{}/{name}.git", self.port)
    }

    fn http_url(&self, name: &str) -> String {
        format!(
            "http://dev:{}@127.0.0.1:{}/{name}.git",
            self.secret,
            self.server.port()
        )
    }

    /// git in `dir` with `key`, whatever its outcome.
    fn git(&self, dir: &Path, key: &Path, args: &[&str]) -> Output {
        git_cmd(dir)
            .env("GIT_SSH_COMMAND", ssh_command(key))
            .args(args)
            .output()
            .expect("git runs")
    }

    /// `ssh … git@127.0.0.1 COMMAND` with `key`: (exit code, stdout, stderr).
    fn ssh(&self, key: &Path, command: &str) -> (Option<i32>, String, String) {
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

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_push_and_a_clone_over_ssh_match_what_http_serves() {
    let s = Ssh::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = s.mirror(tmp.path(), 60);

    // A clone over SSH (protocol v2, git's default) has every ref and object.
    let out = s.git(
        tmp.path(),
        &s.reader,
        &["clone", "--mirror", &s.url("org/app"), "ssh.git"],
    );
    ok(&out, "clone over ssh");
    let ssh_clone = tmp.path().join("ssh.git");
    fsck(&ssh_clone);
    assert_eq!(refs_and_objects(&ssh_clone), refs_and_objects(&src));
    // ... and lists what HTTP lists from the same store.
    let http = git_out(tmp.path(), &["ls-remote", &s.http_url("org/app")]);
    let out = s.git(tmp.path(), &s.reader, &["ls-remote", &s.url("org/app")]);
    ok(&out, "ls-remote over ssh");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), http);

    // An update and a deletion (no pack) over SSH, seen over HTTP.
    let out = s.git(tmp.path(), &s.dev, &["clone", &s.url("org/app"), "work"]);
    ok(&out, "clone of a work tree over ssh");
    let work = tmp.path().join("work");
    let head = commit_files(&work, &[("new.txt", "over ssh\n")], "over ssh");
    git(&work, &["branch", "gone"]);
    let out = s.git(
        &work,
        &s.dev,
        &["push", "origin", "HEAD:refs/heads/main", "gone"],
    );
    ok(&out, "push of an update");
    let out = s.git(&work, &s.dev, &["push", "origin", ":gone"]);
    ok(&out, "push of a deletion");
    let listed = git_out(
        tmp.path(),
        &["ls-remote", &s.http_url("org/app"), "refs/heads/*"],
    );
    assert!(
        listed.contains(&format!("{head}\trefs/heads/main")),
        "{listed}"
    );
    assert!(!listed.contains("refs/heads/gone"), "{listed}");
    // An incremental fetch over SSH (haves sent, a thin pack back).
    let out = s.git(&ssh_clone, &s.reader, &["fetch", "origin"]);
    ok(&out, "fetch over ssh");
    assert_eq!(
        git_out(&ssh_clone, &["rev-parse", "refs/heads/main"]).trim(),
        head
    );
    fsck(&ssh_clone);

    // The access log names the key's token.
    let logs = s.server.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("ssh command") && l.contains("dev") && l.contains("receive-pack")),
        "{logs}"
    );
}

#[test]
fn keys_get_their_tokens_grants_and_nothing_else() {
    let s = Ssh::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    init_repo(&src);
    commit_files(&src, &[("a", "a\n")], "one");

    // A key attached to no token cannot log in.
    let out = s.git(
        &src,
        &s.stranger,
        &["push", &s.url("org/app"), "HEAD:refs/heads/main"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Permission denied (publickey)"),
        "{}",
        stderr(&out)
    );

    // A read grant cannot push; the repository is then untouched.
    let out = s.git(
        &src,
        &s.dev,
        &["push", &s.url("org/app"), "HEAD:refs/heads/main"],
    );
    ok(&out, "push by dev");
    commit_files(&src, &[("b", "b\n")], "two");
    let out = s.git(
        &src,
        &s.reader,
        &["push", &s.url("org/app"), "HEAD:refs/heads/main"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("ERROR: ") && err.contains("reader"), "{err}");
    assert!(!err.contains("/tmp"), "no server path: {err}");

    // Outside its grants a repository is not found, as one that does not
    // exist is (no probing of names).
    let out = s.git(
        &src,
        &s.dev,
        &["push", &s.url("other/app"), "HEAD:refs/heads/main"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("ERROR: Repository not found."),
        "{}",
        stderr(&out)
    );
    let out = s.git(
        tmp.path(),
        &s.reader,
        &["clone", &s.url("org/missing"), "m"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("ERROR: Repository not found."),
        "{}",
        stderr(&out)
    );

    // No shell, no other command, no pty.
    let (code, _, err) = s.ssh(&s.dev, "");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "Hi dev! You've successfully authenticated, but gitstow does not provide shell access."
        ),
        "{err}"
    );
    let (code, _, err) = s.ssh(&s.dev, "ls -la");
    assert_eq!(code, Some(128), "{err}");
    assert!(
        err.contains("ERROR: gitstow runs only git-upload-pack and git-receive-pack over SSH"),
        "{err}"
    );
    let (code, _, err) = s.ssh(&s.dev, "\"git-upload-pack '../etc/passwd'\"");
    assert_eq!(code, Some(128), "{err}");
    assert!(err.contains("ERROR: invalid repository name"), "{err}");
    let (code, _, err) = s.ssh(&s.stranger, "\"git-upload-pack 'org/app.git'\"");
    assert_eq!(code, Some(255), "{err}");
    assert!(err.contains("Permission denied (publickey)"), "{err}");
}

#[test]
fn protocol_v0_negotiates_over_one_stream() {
    let s = Ssh::start();
    let tmp = tempfile::tempdir().unwrap();
    let src = s.mirror(tmp.path(), 80);
    let v0 = ["-c", "protocol.version=0"];

    // A v0 clone (one want list, `done`, the pack), then `ls-remote` (a
    // flush and nothing wanted).
    let url = s.url("org/app");
    let mut args = v0.to_vec();
    args.extend(["clone", "--mirror", &url, "v0.git"]);
    let out = s.git(tmp.path(), &s.reader, &args);
    ok(&out, "v0 clone over ssh");
    let clone = tmp.path().join("v0.git");
    fsck(&clone);
    assert_eq!(refs_and_objects(&clone), refs_and_objects(&src));
    let out = s.git(
        tmp.path(),
        &s.reader,
        &["-c", "protocol.version=0", "ls-remote", &url],
    );
    ok(&out, "v0 ls-remote");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        git_out(tmp.path(), &["ls-remote", &s.http_url("org/app")])
    );

    // A client with 70 commits of its own fetches 3 new ones: its haves go
    // in several rounds, NAKed until the common ones are met, each round
    // answered before the next is sent.
    let out = s.git(tmp.path(), &s.dev, &["clone", &url, "work"]);
    ok(&out, "clone of a work tree");
    let work = tmp.path().join("work");
    let out = s.git(tmp.path(), &s.dev, &["clone", &url, "other"]);
    ok(&out, "second clone");
    let other = tmp.path().join("other");
    for i in 0..70 {
        commit_files(
            &other,
            &[("local.txt", &format!("{i}\n"))],
            &format!("local {i}"),
        );
    }
    let mut head = String::new();
    for i in 0..3 {
        head = commit_files(
            &work,
            &[("upstream.txt", &format!("{i}\n"))],
            &format!("up {i}"),
        );
    }
    let out = s.git(&work, &s.dev, &["push", "origin", "HEAD:refs/heads/main"]);
    ok(&out, "push of 3 commits");
    let out = s.git(
        &other,
        &s.reader,
        &["-c", "protocol.version=0", "fetch", "origin"],
    );
    ok(&out, "v0 fetch with many haves");
    assert_eq!(git_out(&other, &["rev-parse", "origin/main"]), head);
    fsck(&other);
    let logs = s.server.logs();
    let line = logs
        .lines()
        .rfind(|l| l.contains("upload-pack") && l.contains("v2=false") && l.contains("haves="))
        .expect("a v0 upload-pack line");
    assert!(
        log_field(line, "haves") > 32,
        "several rounds of haves: {line}"
    );
    assert!(log_field(line, "objects") < 40, "a small pack: {line}");

    // Shallow over v0: a depth-5 clone deepened by 10, as HTTP serves it.
    let http = s.http_url("org/app");
    for (remote, dir, key) in [
        (&url, "shallow-ssh.git", &s.reader),
        (&http, "shallow-http.git", &s.reader),
    ] {
        let out = s.git(
            tmp.path(),
            key,
            &[
                "-c",
                "protocol.version=0",
                "clone",
                "--depth",
                "5",
                "--bare",
                remote,
                dir,
            ],
        );
        ok(&out, "v0 shallow clone");
        let repo = tmp.path().join(dir);
        let out = s.git(
            &repo,
            key,
            &[
                "-c",
                "protocol.version=0",
                "fetch",
                "--deepen",
                "10",
                "origin",
                "main",
            ],
        );
        ok(&out, "v0 deepen");
        fsck(&repo);
    }
    let (ssh_side, http_side) = (
        tmp.path().join("shallow-ssh.git"),
        tmp.path().join("shallow-http.git"),
    );
    assert_eq!(
        refs_and_objects(&ssh_side).1,
        refs_and_objects(&http_side).1
    );
    assert_eq!(
        std::fs::read_to_string(ssh_side.join("shallow")).unwrap(),
        std::fs::read_to_string(http_side.join("shallow")).unwrap()
    );
}

/// Reads what the server sends first on a raw connection: its SSH
/// version line, or nothing (closed) within `wait`.
fn banner(stream: &mut std::net::TcpStream, wait: std::time::Duration) -> String {
    use std::io::Read;
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 256];
    match stream.read(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn connections_that_do_not_log_in_are_capped_and_dropped() {
    use std::net::TcpStream;
    use std::time::Duration;
    let tmp = tempfile::tempdir().unwrap();
    let (store, key) = store_with_ssh_key(tmp.path());
    let (server, port) = start_ssh(
        &store,
        &["--ssh-max-startups", "2", "--ssh-login-grace", "3"],
        &[],
    );
    // Two silent clients get the server's version line and hold their slots.
    let mut a = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut b = TcpStream::connect(("127.0.0.1", port)).unwrap();
    for s in [&mut a, &mut b] {
        let line = banner(s, Duration::from_secs(5));
        assert!(line.starts_with("SSH-2.0-gitstow_"), "{line:?}");
    }
    // A third is closed at once.
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(banner(&mut c, Duration::from_secs(5)), "");
    // After the login grace time the silent ones are disconnected ...
    std::thread::sleep(Duration::from_secs(4));
    for s in [&mut a, &mut b] {
        use std::io::Read;
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        // (a disconnect message may come first; then the socket closes)
    }
    // ... and a client that logs in is served again.
    let cmd = format!("{} -p {port} git@127.0.0.1", ssh_command(&key));
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Hi dev!"), "{err}");
    let logs = server.logs();
    assert!(logs.contains("too many not authenticated yet"), "{logs}");
    assert!(
        logs.contains("no authentication within the login grace time"),
        "{logs}"
    );
}

#[test]
fn a_push_running_at_shutdown_finishes_and_lands() {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;
    let tmp = tempfile::tempdir().unwrap();
    let (store, key) = store_with_ssh_key(tmp.path());
    // A pre-receive check that takes 3 s: the push is in flight when the
    // server is told to stop.
    let hook = tmp.path().join("slow-hook");
    std::fs::write(&hook, "#!/bin/sh\ncat >/dev/null\nsleep 3\nexit 0\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (mut server, port) = start_ssh(
        &store,
        &[
            "--pre-receive-hook",
            hook.to_str().unwrap(),
            "--drain-delay",
            "0",
        ],
        &[],
    );
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    init_repo(&work);
    let head = commit_files(&work, &[("a", "a\n")], "one");
    let url = format!("ssh://git@127.0.0.1:{port}/r.git");
    let push = git_cmd(&work)
        .env("GIT_SSH_COMMAND", ssh_command(&key))
        .args(["push", &url, "HEAD:refs/heads/main"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let status = server.terminate(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "the server stops once the push is done"
    );
    let out = push.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // It landed: a new server on the store lists it, over SSH.
    let (_again, port) = start_ssh(&store, &[], &[]);
    let out = git_cmd(&work)
        .env("GIT_SSH_COMMAND", ssh_command(&key))
        .args([
            "ls-remote",
            &format!("ssh://git@127.0.0.1:{port}/r.git"),
            "refs/heads/main",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        format!("{head}\trefs/heads/main"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn protocols_key_types_url_forms_and_refusals() {
    let s = Ssh::start();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    init_repo(&work);
    let head = commit_files(&work, &[("a", "a\n")], "one");
    // The scp-like form (a relative path), the port given to ssh.
    let scp_ssh = format!("{} -p {}", ssh_command(&s.dev), s.port);
    let out = git_cmd(&work)
        .env("GIT_SSH_COMMAND", &scp_ssh)
        .args(["push", "git@127.0.0.1:org/app.git", "HEAD:refs/heads/main"])
        .output()
        .unwrap();
    ok(&out, "push to git@host:org/app.git");

    // v0, v1 and v2 as the client asks (GIT_PROTOCOL), seen in the trace.
    for (version, expect) in [
        ("0", None),
        ("1", Some("version 1")),
        ("2", Some("version 2")),
    ] {
        let out = git_cmd(&work)
            .env("GIT_SSH_COMMAND", ssh_command(&s.reader))
            .env("GIT_TRACE_PACKET", "1")
            .args([
                "-c",
                &format!("protocol.version={version}"),
                "ls-remote",
                &s.url("org/app"),
            ])
            .output()
            .unwrap();
        ok(&out, "ls-remote");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("{head}\trefs/heads/main")),
            "v{version}"
        );
        let trace = stderr(&out);
        match expect {
            Some(line) => assert!(trace.contains(&format!("< {line}")), "v{version}: {trace}"),
            None => assert!(!trace.contains("< version "), "v0: {trace}"),
        }
    }

    // ECDSA and RSA keys work (RSA with rsa-sha2 signatures), once the
    // instance read the access document again (--access-refresh 2).
    let mut keys = Vec::new();
    for (name, kind, bits) in [("ec", "ecdsa", "256"), ("rsa", "rsa", "3072")] {
        let key = ssh_keygen(tmp.path(), name, kind, Some(bits));
        let public = key.with_extension("pub");
        let out =
            s.server
                .store()
                .admin(&["key", "add", "--token", "reader", public.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        keys.push((kind, key));
    }
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for (kind, key) in &keys {
        let out = s.git(&work, key, &["ls-remote", &s.url("org/app")]);
        ok(&out, kind);
    }

    // Another user name is refused as an unknown key is.
    let out = git_cmd(&work)
        .env("GIT_SSH_COMMAND", ssh_command(&s.dev))
        .args([
            "ls-remote",
            &format!("ssh://root@127.0.0.1:{}/org/app.git", s.port),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Permission denied (publickey)"),
        "{}",
        stderr(&out)
    );

    // A pty and port forwarding are refused.
    let (_, _, err) = s.ssh(&s.dev, "-tt \"git-upload-pack 'org/app.git'\" </dev/null");
    assert!(err.contains("PTY allocation request failed"), "{err}");
    // (-W opens a direct-tcpip channel at once, as a -L connection would.)
    let (code, _, err) = s.ssh(&s.dev, "-W 127.0.0.1:22");
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("stdio forwarding failed"), "{err}");

    // A removed key stops working within --access-refresh (2 s here).
    let fp = openssh_fingerprint(&s.reader.with_extension("pub"));
    let out = s.server.store().admin(&["key", "remove", &fp]);
    assert!(out.status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = s.git(&work, &s.reader, &["ls-remote", &s.url("org/app")]);
        if !out.status.success() {
            assert!(
                stderr(&out).contains("Permission denied (publickey)"),
                "{}",
                stderr(&out)
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the removed key still logs in"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }

    // A second instance on the store presents the same host keys.
    let (_second, port) = start_ssh(s.server.store(), &[], &[]);
    for kind in ["ed25519", "rsa"] {
        assert_eq!(keyscan(port, kind), keyscan(s.port, kind), "{kind}");
    }
    let out = git_cmd(&work)
        .env("GIT_SSH_COMMAND", ssh_command(&s.dev))
        .args([
            "ls-remote",
            &format!("ssh://git@127.0.0.1:{port}/org/app.git"),
            "refs/heads/main",
        ])
        .output()
        .unwrap();
    ok(&out, "ls-remote on the second instance");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&head));
}

/// Every kind of push over SSH, refused in git's words where git refuses
/// it: create with push options, fast-forward, tags, a refused
/// non-fast-forward, a protected branch, deletion, `--atomic` all or
/// nothing, a pre-receive refusal shown as `remote: …`, and a webhook
/// for the push; then a `--filter=blob:none` clone that fetches its blobs
/// over SSH when it checks out, and path tricks refused.
#[test]
fn push_variants_hooks_webhooks_and_filters_over_ssh() {
    use std::os::unix::fs::PermissionsExt;
    let receiver = Receiver::start(Answer::Status(200, "thanks".into()));
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    let hook = tmp.path().join("pre-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncat > {r}/stdin\necho \"opts=$GIT_PUSH_OPTION_COUNT:$GIT_PUSH_OPTION_0\" > {r}/env\nif grep -q refs/heads/forbidden {r}/stdin; then echo \"policy: forbidden is reserved\"; exit 1; fi\nexit 0\n",
            r = rec.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret_file = tmp.path().join("secret");
    std::fs::write(&secret_file, "a-webhook-secret-of-some-length\n").unwrap();
    let hook_url = receiver.url("/hook");
    let s = Ssh::start_with(&["--pre-receive-hook", hook.to_str().unwrap()], |store| {
        let out = store.admin(&[
            "webhook",
            "add",
            "--name",
            "ci",
            "--repo",
            "org/*",
            "--url",
            &hook_url,
            "--secret-file",
            secret_file.to_str().unwrap(),
            "--allow-internal",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    });
    let url = s.url("org/app");
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    init_repo(&work);
    let push = |args: &[&str]| {
        let mut all = vec!["push"];
        all.extend(args);
        s.git(&work, &s.dev, &all)
    };
    let remote = |name: &str| {
        let out = s.git(&work, &s.reader, &["ls-remote", &url, name]);
        ok(&out, "ls-remote");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // Create, with a push option the hook and the webhook see.
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    ok(&push(&["-o", "ci.skip", &url, "main"]), "create");
    let env = std::fs::read_to_string(rec.join("env")).unwrap();
    assert_eq!(env.trim(), "opts=1:ci.skip");
    // Fast-forward, a tag, a branch created then deleted.
    let c2 = commit_files(&work, &[("a.txt", "two\n")], "two");
    git(&work, &["tag", "-a", "-m", "v1", "v1"]);
    ok(
        &push(&[&url, "main", "v1", "main:refs/heads/topic"]),
        "ff, tag",
    );
    assert!(remote("refs/heads/main").starts_with(&c2));
    assert!(remote("refs/tags/v1^{}").starts_with(&c2));
    ok(&push(&[&url, ":refs/heads/topic"]), "delete");
    assert_eq!(remote("refs/heads/topic"), "");

    // A non-fast-forward: git refuses it before sending; forced, the
    // server refuses it on the protected main, in git's words.
    git(&work, &["reset", "--quiet", "--hard", &c1]);
    commit_files(&work, &[("a.txt", "three\n")], "three");
    let out = push(&[&url, "main"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("main -> main (non-fast-forward)"),
        "{}",
        stderr(&out)
    );
    let out = push(&["--force", &url, "main"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(
            "remote: error: denying non-fast-forward refs/heads/main (you should pull first)"
        ),
        "{err}"
    );
    assert!(remote("refs/heads/main").starts_with(&c2));
    git(&work, &["reset", "--quiet", "--hard", &c2]);

    // --atomic: a refused ref refuses them all; the hook says why.
    let c4 = commit_files(&work, &[("a.txt", "four\n")], "four");
    let out = push(&["--atomic", &url, "main", "main:refs/heads/forbidden"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("remote: policy: forbidden is reserved"),
        "{err}"
    );
    assert!(err.contains("(pre-receive hook declined)"), "{err}");
    assert!(remote("refs/heads/main").starts_with(&c2), "main unchanged");
    assert_eq!(remote("refs/heads/forbidden"), "");
    ok(
        &push(&["--atomic", &url, "main", "main:refs/heads/b2"]),
        "atomic",
    );
    assert!(remote("refs/heads/main").starts_with(&c4));
    assert!(remote("refs/heads/b2").starts_with(&c4));

    // The webhook saw the first push, by the key's token, with its option.
    let got = receiver.wait_until(
        std::time::Duration::from_secs(20),
        "the webhook of the first push",
        |r| {
            r.iter()
                .any(|e| e.json()["push_options"] == serde_json::json!(["ci.skip"]))
        },
    );
    let event = got
        .iter()
        .map(|e| e.json())
        .find(|e| e["push_options"] == serde_json::json!(["ci.skip"]))
        .unwrap();
    assert_eq!(event["repository"], "org/app");
    assert_eq!(event["pusher"], "dev");
    assert_eq!(event["ref_updates"][0]["new"], c1.as_str());

    // A blobless clone over SSH, its blobs fetched on checkout.
    let out = s.git(
        tmp.path(),
        &s.reader,
        &[
            "clone",
            "--filter=blob:none",
            "--no-checkout",
            &url,
            "partial",
        ],
    );
    ok(&out, "blobless clone");
    let partial = tmp.path().join("partial");
    let missing = git_out(
        &partial,
        &["rev-list", "--objects", "--missing=print", "--all"],
    );
    assert!(
        missing.lines().any(|l| l.starts_with('?')),
        "blobs left out: {missing}"
    );
    let out = git_cmd(&partial)
        .env("GIT_SSH_COMMAND", ssh_command(&s.reader))
        .args(["checkout", "--quiet", "main"])
        .output()
        .unwrap();
    ok(&out, "checkout fetches the blobs");
    assert_eq!(
        std::fs::read_to_string(partial.join("a.txt")).unwrap(),
        "four\n"
    );

    // Path tricks name no repository: refused, never served.
    for trick in [
        "git-upload-pack '../org/app.git'",
        "git-upload-pack '/org/../org/app.git'",
        "git-upload-pack '/org/%2e%2e/org/app.git'",
        "git-upload-pack 'org/%2e%2e%2fapp.git'",
        "git-upload-pack '/etc/passwd'",
        "git-upload-pack '/tmp/../../org/app.git'",
        "git-upload-pack 'org/app.git'\\''; ls'",
        "git-upload-pack \"org/app.git\"",
    ] {
        let out = Command::new("ssh")
            .args(ssh_command(&s.reader).split_whitespace().skip(1))
            .args(["-p", &s.port.to_string(), "git@127.0.0.1", trick])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(128), "{trick}: {err}");
        assert!(out.stdout.is_empty(), "{trick} served: {:?}", out.stdout);
        assert!(
            err.contains("ERROR: invalid repository name")
                || err.contains("ERROR: Repository not found.")
                || err.contains("ERROR: the repository path is not quoted as git quotes it"),
            "{trick}: {err}"
        );
    }
}
