//! TLS served directly (`serve --tls-cert --tls-key`): the real `git`
//! pushes and clones over HTTPS with a test certificate it trusts
//! (`GIT_SSL_CAINFO`), refuses the server without it, and a client that
//! speaks plain HTTP or stalls in the handshake does not hold a connection.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A self-signed certificate for 127.0.0.1 and localhost (openssl CLI,
/// which `.ci/run` installs).
fn test_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let cert = dir.join("server.crt");
    let key = dir.join("server.key");
    let out = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=gitstow test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("the openssl command (CI installs it)");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

#[test]
fn git_pushes_and_clones_over_https_and_bad_clients_do_not_hold_connections() {
    let tmp = tempfile::tempdir().unwrap();
    let (cert, key) = test_certificate(tmp.path());
    let server = Server::start_with(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--header-timeout",
        "2",
    ]);
    let url = format!("https://127.0.0.1:{}/app.git", server.port());
    let trusted = [("GIT_SSL_CAINFO", cert.to_str().unwrap())];

    // Without the certificate trusted, git refuses the server.
    let err = git_fail(tmp.path(), &["ls-remote", &url]);
    assert!(err.contains("certificate"), "{err}");

    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(
        &work,
        &[("a.txt", "one\n"), ("b.bin", "\u{0}\u{1}two")],
        "one",
    );
    let head = commit_files(&work, &[("a.txt", "one\ntwo\n")], "two");
    let out = git_env(&work, &["push", &url, "main"], &trusted);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let clone = tmp.path().join("clone");
    let out = git_env(
        tmp.path(),
        &["clone", "-q", &url, clone.to_str().unwrap()],
        &trusted,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(git_out(&clone, &["rev-parse", "HEAD"]).trim(), head);
    fsck(&clone);

    // Plain HTTP to the TLS port: told to use https, as git shows it.
    let plain_url = url.replacen("https://", "http://", 1);
    let err = git_fail(tmp.path(), &["ls-remote", &plain_url]);
    assert!(err.contains("400"), "{err}");
    let mut plain = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(
            b"GET /app.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: localhost\r\n\r\n",
        )
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("use an https:// URL"),
        "plain HTTP answered: {answer}"
    );

    // A client that connects and never starts the handshake is closed by
    // --header-timeout.
    let started = Instant::now();
    let mut silent = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = silent.read(&mut buf).unwrap_or(0);
    let waited = started.elapsed();
    assert_eq!(n, 0, "the server sent bytes to a silent client");
    assert!(
        waited >= Duration::from_millis(1500) && waited < deadline_for(Duration::from_secs(2)),
        "closed after {waited:?}, want about --header-timeout (2 s)"
    );

    // Both count as failed handshakes; the server still serves.
    let again = git_env(&work, &["ls-remote", &url], &trusted);
    assert!(again.status.success());
    let scrape = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import ssl,sys,urllib.request;\
             c=ssl.create_default_context(cafile=sys.argv[1]);\
             print(urllib.request.urlopen(sys.argv[2],context=c).read().decode())",
        )
        .arg(&cert)
        .arg(format!("https://127.0.0.1:{}/metrics", server.port()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&scrape.stdout);
    let failures = text
        .lines()
        .find_map(|l| l.strip_prefix("gitstow_tls_handshake_failures_total "))
        .unwrap_or_else(|| {
            panic!(
                "no handshake counter in:\n{text}\n{}",
                String::from_utf8_lossy(&scrape.stderr)
            )
        });
    assert!(failures.trim().parse::<f64>().unwrap() >= 2.0, "{failures}");
}

#[test]
fn a_key_that_does_not_fit_the_certificate_fails_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let (cert, _) = test_certificate(tmp.path());
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let (_, key) = test_certificate(&other);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(format!("file://{}", tmp.path().join("store").display()))
        .arg("--create-store")
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not fit --tls-cert"), "{err}");
    // --tls-cert alone is refused by the parser.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitstow"))
        .args(["serve", "--tls-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-key"));
}
