//! A stalled S3 endpoint (accepts connections, never answers), through a
//! proxy in front of the real S3 server that can be switched to stall:
//! startup reports it within its bound, a request fails within the
//! configured timeouts with a clear message, `/readyz` says not ready, and
//! SIGTERM ends the process by the `--shutdown-grace` deadline even while
//! a request waits on the store. Needs the S3 server of the other S3 tests
//! (`S3_ENDPOINT`…; `./scripts/test` starts one) and fails without it.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

/// A TCP proxy to `upstream` that, once stalled, forwards nothing more on
/// any connection (old or new) and never answers.
struct StallProxy {
    port: u16,
    stalled: Arc<AtomicBool>,
}

impl StallProxy {
    fn start(upstream: &str, stalled: bool) -> StallProxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let flag = Arc::new(AtomicBool::new(stalled));
        let stalled = flag.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                let (upstream, stalled) = (upstream.clone(), stalled.clone());
                std::thread::spawn(move || {
                    if stalled.load(Ordering::Relaxed) {
                        // Accept, never answer.
                        std::thread::sleep(Duration::from_secs(600));
                        drop(client);
                        return;
                    }
                    let Ok(server) = TcpStream::connect(&upstream) else {
                        return;
                    };
                    let (mut c_in, mut s_out) =
                        (client.try_clone().unwrap(), server.try_clone().unwrap());
                    let stalled_up = stalled.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 65536];
                        loop {
                            let n = match c_in.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            if stalled_up.load(Ordering::Relaxed) {
                                // Swallow this request and everything after.
                                std::thread::sleep(Duration::from_secs(600));
                                return;
                            }
                            if s_out.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = s_out.shutdown(std::net::Shutdown::Write);
                    });
                    let (mut s_in, mut c_out) = (server, client);
                    let mut buf = [0u8; 65536];
                    loop {
                        let n = match s_in.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        StallProxy {
            port,
            stalled: flag,
        }
    }

    fn stall(&self) {
        self.stalled.store(true, Ordering::Relaxed);
    }
}

/// A fresh S3 test store reached through `proxy`.
fn store_through(proxy: &StallProxy) -> TestStore {
    let TestStore::S3 { url, mut flags } = TestStore::s3() else {
        unreachable!()
    };
    let i = flags.iter().position(|f| f == "--s3-endpoint").unwrap();
    flags[i + 1] = format!("http://127.0.0.1:{}", proxy.port);
    TestStore::S3 { url, flags }
}

fn endpoint() -> String {
    std::env::var("S3_ENDPOINT").unwrap_or_else(|_| {
        panic!("the S3 tests need a running S3 server and $S3_ENDPOINT (./scripts/test starts one)")
    })
}

const FAST: [&str; 4] = ["--s3-read-timeout", "1", "--s3-retry-deadline", "2"];
/// FAST's `--s3-retry-deadline`: no store request outlasts it.
const RETRY_DEADLINE: Duration = Duration::from_secs(2);

#[test]
fn a_stalled_store_fails_startup_within_its_bound() {
    let proxy = StallProxy::start(&endpoint(), true);
    let store = store_through(&proxy);
    let bin = env!("CARGO_BIN_EXE_gitstow");
    let started = Instant::now();
    let out = std::process::Command::new(bin)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(store.args())
        .args(FAST)
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        elapsed < deadline_for(RETRY_DEADLINE),
        "startup took {elapsed:?}: {err}"
    );
    assert!(
        err.contains("checking the store"),
        "said before it waits: {err}"
    );
    assert!(err.contains("timed out"), "{err}");
    assert!(err.contains("gave up after"), "{err}");
}

#[test]
fn a_store_that_stalls_fails_requests_within_the_timeouts() {
    let proxy = StallProxy::start(&endpoint(), false);
    let store = store_through(&proxy);
    let server = Server::start_on(Some(&store), &FAST, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "a\n")], "one");
    let url = server.url("app");
    git(&work, &["push", "-q", &url, "main"]);
    let resp = http(server.port(), "GET", "/readyz", &[], b"");
    assert_eq!(resp.status, 200);

    proxy.stall();
    let started = Instant::now();
    let out = git_cmd(&work).args(["ls-remote", &url]).output().unwrap();
    let elapsed = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        elapsed < deadline_for(RETRY_DEADLINE),
        "ls-remote took {elapsed:?}"
    );
    assert!(err.contains("503"), "{err}");
    assert!(
        err.contains("the store does not answer, try again later"),
        "{err}"
    );
    assert!(
        !err.contains("127.0.0.1:") || !err.contains(&proxy.port.to_string()),
        "{err}"
    );
    let logs = server.logs();
    assert!(logs.contains("timed out (gave up after"), "{logs}");
    std::thread::sleep(Duration::from_millis(1100));
    let resp = http(server.port(), "GET", "/readyz", &[], b"");
    assert_eq!(resp.status, 503, "{}", resp.text());
}

#[test]
fn sigterm_ends_the_process_by_the_grace_deadline() {
    let proxy = StallProxy::start(&endpoint(), false);
    let store = store_through(&proxy);
    // Slow timeouts: the request would wait on the store for minutes.
    let mut server = Server::start_on(
        Some(&store),
        &[
            "--s3-read-timeout",
            "120",
            "--s3-retry-deadline",
            "600",
            "--shutdown-grace",
            "2",
        ],
        &[],
    );
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "a\n")], "one");
    let url = server.url("app");
    git(&work, &["push", "-q", &url, "main"]);
    proxy.stall();
    let mut waiting = git_cmd(&work)
        .args(["ls-remote", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let status = server.terminate(Duration::from_secs(30));
    let elapsed = started.elapsed();
    let _ = waiting.kill();
    let _ = waiting.wait();
    assert!(status.is_some(), "still running 30 s after SIGTERM");
    assert!(
        elapsed < deadline_for(RETRY_DEADLINE),
        "exited after {elapsed:?}"
    );
    assert!(
        server
            .logs()
            .contains("requests still open after the shutdown grace period"),
        "{}",
        server.logs()
    );
}
