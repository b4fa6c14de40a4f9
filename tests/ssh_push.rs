//! Pushes over SSH (`serve --ssh-listen`) with the real `git` and
//! OpenSSH's `ssh` client: every kind of push, refused in git's words
//! where git refuses it, pre-receive refusals and webhooks as over HTTP,
//! a blobless clone that fetches its blobs over SSH, path tricks refused
//! (`GITSTOW_TEST_STORE=s3` runs it on S3).

mod common;

use std::process::{Command, Stdio};

use common::*;

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

/// Runs `git-receive-pack 'org/app.git'` over SSH as `dev`, sending
/// `head` and then `lines` pkt-lines of `line` (the server may hang up
/// before it has them all); returns the server's peak RSS above its start
/// (KiB) and what the client got (its stdout, the report-status, and its
/// stderr).
fn push_endless_section(s: &Ssh, head: &[u8], line: &[u8], lines: usize) -> (u64, String) {
    use std::io::{Read, Write};
    let pid = s.server.pid().expect("the server runs");
    let mut err = String::new();
    let peak = peak_above(pid, || {
        let mut child = Command::new("ssh")
            .args(ssh_command(&s.dev).split_whitespace().skip(1))
            .args(["-p", &s.port.to_string(), "git@127.0.0.1"])
            .arg("git-receive-pack 'org/app.git'")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ssh runs");
        let mut stdin = child.stdin.take().unwrap();
        let (head, packet) = (head.to_vec(), pkt(line));
        let feeder = std::thread::spawn(move || {
            // A write fails once the server has refused and hung up.
            if stdin.write_all(&head).is_err() {
                return;
            }
            for _ in 0..lines {
                if stdin.write_all(&packet).is_err() {
                    return;
                }
            }
            let _ = stdin.write_all(b"0000");
        });
        let mut out = Vec::new();
        child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        child.wait().unwrap();
        feeder.join().unwrap();
        err.insert_str(0, &String::from_utf8_lossy(&out));
    });
    (peak, err)
}

/// An SSH push's command list and push options go to the spool as they
/// are read and stop at the bounds the protocol refuses them by, as the
/// same push's body does over HTTP: a client that sends hundreds of
/// megabytes of either is refused in git's words and costs the server no
/// memory (issue 42, finding 1: 1,500 MB of options took the server from
/// 21 MB to 2,111 MB RSS, 1,000 MB of commands to 1,169 MB), and the
/// repository is unchanged.
#[test]
fn an_endless_command_list_or_push_option_list_holds_no_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Ssh::start();
    s.mirror(tmp.path(), 3);
    let before = git_out(tmp.path(), &["ls-remote", &s.http_url("org/app")]);
    let zero = "0".repeat(40);
    let one = "1".repeat(40);
    // 200 MiB of push options after one command that asks for them.
    let mut head = pkt(format!("{zero} {one} refs/heads/x\0report-status push-options").as_bytes());
    head.extend(b"0000");
    let option = vec![b'o'; 65_000];
    let (peak, err) = push_endless_section(&s, &head, &option, 3_200);
    assert!(
        err.contains("unpack push options too large")
            && err.contains("ng refs/heads/x unpacker error"),
        "{err}"
    );
    assert!(peak < 48 << 10, "options: the server grew by {peak} KiB");
    // 200 MiB of commands, each naming a long ref.
    let long = format!("{zero} {one} refs/heads/{}", "c".repeat(64_000));
    let mut head = pkt(format!("{zero} {one} refs/heads/y\0report-status").as_bytes());
    head.extend(pkt(long.as_bytes()));
    let (peak, err) = push_endless_section(&s, &head, long.as_bytes(), 3_200);
    assert!(err.contains("command list too large"), "{err}");
    assert!(!err.contains("unpack ok"), "{err}");
    assert!(peak < 48 << 10, "commands: the server grew by {peak} KiB");
    assert_eq!(
        git_out(tmp.path(), &["ls-remote", &s.http_url("org/app")]),
        before
    );
}
