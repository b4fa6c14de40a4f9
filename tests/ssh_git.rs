//! git over SSH (`serve --ssh-listen`) with the real `git` and OpenSSH's
//! `ssh` client (installed by `.ci/run`): a push and a clone over ssh://
//! that match what HTTP serves from the same store, keys mapped to their
//! token's grants, and everything else refused in git's and forges' words
//! (`GITSTOW_TEST_STORE=s3` runs it on S3).

mod common;

use std::process::Stdio;

use common::*;

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

/// A failure of the server's during a clone is said in its one line
/// (`internal server error, try again later`), naming nothing of the
/// server (paths, store keys, the error chain: those are in its log), over
/// SSH as over HTTP.
#[test]
fn a_server_failure_names_nothing_of_the_server_over_either_transport() {
    // Every read of a container's data fails: the push lands (it reads
    // none), every clone fails.
    let s = Ssh::start_with_env(
        &["--no-maintenance"],
        &[(
            "GITSTOW_FAULTS",
            "get_range:.bin:fail;get:.graph:fail;get_range:.graph:fail",
        )],
        |_| {},
    );
    let tmp = tempfile::tempdir().unwrap();
    s.mirror(tmp.path(), 20);
    let over_ssh = s.git(
        tmp.path(),
        &s.reader,
        &["clone", "--mirror", &s.url("org/app"), "ssh.git"],
    );
    let over_http = git_cmd(tmp.path())
        .args(["clone", "--mirror", &s.http_url("org/app"), "http.git"])
        .output()
        .expect("git runs");
    // A shallow clone fails in the walk (it reads commits), before the
    // pack: an engine error the old SSH path said whole.
    let shallow_ssh = s.git(
        tmp.path(),
        &s.reader,
        &["clone", "--depth", "1", &s.url("org/app"), "shallow-ssh"],
    );
    let shallow_http = git_cmd(tmp.path())
        .args([
            "clone",
            "--depth",
            "1",
            &s.http_url("org/app"),
            "shallow-http",
        ])
        .output()
        .expect("git runs");
    // SSH says the fault on stderr (git shows `fatal: …`), and so does
    // HTTP on side-band 3 once the pack has begun (the mirror clone); a
    // failure before the response began is an HTTP 500, whose body git
    // does not show (`RPC failed; HTTP 500`: the shallow clone).
    for out in [&over_ssh, &shallow_ssh, &over_http] {
        assert!(
            stderr(out).contains("internal server error, try again later"),
            "{}",
            stderr(out)
        );
    }
    for (transport, out) in [
        ("ssh", &over_ssh),
        ("http", &over_http),
        ("ssh, shallow", &shallow_ssh),
        ("http, shallow", &shallow_http),
    ] {
        assert!(!out.status.success(), "{transport}: the clone succeeded");
        let err = stderr(out);
        for inside in ["injected", ".bin", "containers/", "org/app.git/"] {
            assert!(!err.contains(inside), "{transport} names {inside:?}: {err}");
        }
    }
    // The log has what the clients were not told.
    assert!(s.server.logs().contains("injected fault"));
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
        err.contains(
            "ERROR: gitstow runs only git-upload-pack, git-receive-pack, git-lfs-transfer and git-lfs-authenticate over SSH"
        ),
        "{err}"
    );
    let (code, _, err) = s.ssh(&s.dev, "\"git-upload-pack '../etc/passwd'\"");
    assert_eq!(code, Some(128), "{err}");
    assert!(err.contains("ERROR: invalid repository name"), "{err}");
    let (code, _, err) = s.ssh(&s.stranger, "\"git-upload-pack 'org/app.git'\"");
    assert_eq!(code, Some(255), "{err}");
    assert!(err.contains("Permission denied (publickey)"), "{err}");
    // The operator's log says why, with the key's fingerprint.
    assert!(
        s.server
            .logs()
            .contains("ssh: key offered is attached to no token"),
        "{}",
        s.server.logs()
    );
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
        add_key(s.server.store(), "reader", &key);
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
    assert!(
        s.server.logs().contains("user=\"root\"")
            && s.server.logs().contains("key offered for an unknown user"),
        "{}",
        s.server.logs()
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
