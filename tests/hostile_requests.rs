//! Hostile HTTP requests: gzip bombs, and repository names that try to leave
//! the store (`..`, absolute paths, percent-encoded separators, NUL). Each
//! gets a clear 4xx, nothing is created, and the server keeps serving. And
//! the open-files limit the server gives itself against connection floods.

mod common;

use std::io::Write;

use common::*;

fn gzip_of_zeros(n: usize) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        enc.write_all(&chunk[..k]).unwrap();
        left -= k;
    }
    enc.finish().unwrap()
}

/// A small gzip body that inflates past the limit: upload-pack requests are
/// bounded at 64 MiB decoded (HTTP 413); a push past `--max-pack-size` gets
/// git's `pack exceeds maximum allowed size` — or 413 when it inflates past
/// twice the limit — and nothing is written.
#[test]
fn gzip_bombs() {
    let server = Server::start_with(&["--max-pack-size", "1000000"]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "a\n")], "one");
    let url = server.url("bomb");
    git(&work, &["push", "--quiet", &url, "main"]);
    let before = ls_remote(&url);

    let bomb = gzip_of_zeros(100 << 20);
    assert!(bomb.len() < 200_000, "the bomb is small: {}", bomb.len());
    let resp = http(
        server.port(),
        "POST",
        "/bomb.git/git-upload-pack",
        &[
            ("Content-Type", "application/x-git-upload-pack-request"),
            ("Content-Encoding", "gzip"),
        ],
        &bomb,
    );
    assert_eq!(resp.status, 413, "{}", resp.text());

    let resp = http(
        server.port(),
        "POST",
        "/bomb.git/git-receive-pack",
        &[
            ("Content-Type", "application/x-git-receive-pack-request"),
            ("Content-Encoding", "gzip"),
        ],
        &gzip_of_zeros(10 << 20),
    );
    assert_eq!(resp.status, 413, "{}", resp.text());
    assert_eq!(ls_remote(&url), before);
}

/// Names that would escape the store or smuggle separators are refused with
/// 400 before the store is touched; nothing outside the repositories appears.
#[test]
fn repository_names_that_escape() {
    let server = Server::start();
    for path in [
        "/a/../b.git/info/refs?service=git-upload-pack",
        "/../b.git/info/refs?service=git-upload-pack",
        "//etc/passwd.git/info/refs?service=git-upload-pack",
        "/a%2fb.git/info/refs?service=git-upload-pack",
        "/a%2Fb.git/git-receive-pack",
        "/a%00b.git/info/refs?service=git-receive-pack",
        "/.hidden.git/info/refs?service=git-receive-pack",
        "/a/.git/info/refs?service=git-receive-pack",
        "/x.git/y.git/info/refs?service=git-receive-pack",
    ] {
        let method = if path.ends_with("git-receive-pack") {
            "POST"
        } else {
            "GET"
        };
        let resp = http(
            server.port(),
            method,
            path,
            &[("Content-Type", "application/x-git-receive-pack-request")],
            b"0000",
        );
        assert!(
            resp.status == 400 || resp.status == 404,
            "{path}: HTTP {} {}",
            resp.status,
            resp.text()
        );
    }
    assert!(server.store_keys().is_empty(), "{:?}", server.store_keys());
    // Still serving.
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a", "a\n")], "one");
    git(&work, &["push", "--quiet", &server.url("org/fine"), "main"]);
}

/// At start the server raises its open-files soft limit to the hard limit
/// (a thousand idle connections must not starve `accept`) and says so.
#[test]
fn the_open_files_limit_is_raised_at_start() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start();
    let logs = server.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("open files limit"))
        .unwrap_or_else(|| panic!("no open files line in:\n{logs}"));
    assert_eq!(log_field(line, "soft"), log_field(line, "hard"), "{line}");
}

/// A store that fails: the client is told that the server failed, never a
/// store key, a path or an error chain (those are in the log), and the
/// server keeps serving.
/// A server whose store fails as the fault rule `faults` says, and what
/// git says of a push of one commit to `repo` there (the push must fail).
fn push_with_store_faults(faults: &str, repo: &str) -> (Server, String) {
    let server = Server::start_on(None, &["--no-maintenance"], &[("GITSTOW_FAULTS", faults)]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "c1");
    let said = git_fail(&work, &["push", &server.url(repo), "main"]);
    (server, said)
}

#[test]
fn a_failing_store_is_reported_without_internals() {
    if Server::is_canonical() {
        return;
    }
    let (server, said) = push_with_store_faults("put_file:.bin:fail", "failing");
    assert!(
        said.contains("remote unpack failed: internal server error, try again later")
            && said.contains("main -> main (unpacker error)"),
        "{said}"
    );
    for internal in ["containers/", ".bin", "injected", "/tmp", "Backend", "I/O"] {
        assert!(
            !said.contains(internal),
            "the client was told {internal:?}: {said}"
        );
    }
    assert!(
        server.logs().contains("storing a container"),
        "{}",
        server.logs()
    );
    // Still serving: the refused push changed nothing visible.
    let resp = http(
        server.port(),
        "GET",
        "/failing.git/info/refs?service=git-upload-pack",
        &[],
        b"",
    );
    assert!(
        matches!(resp.status, 200 | 404),
        "{} {}",
        resp.status,
        resp.text()
    );
}

/// A container upload the store does not answer: git is told so (not
/// "internal server error"), and nothing changes.
#[test]
fn a_store_that_does_not_answer_an_upload_is_said_so() {
    if Server::is_canonical() {
        return;
    }
    let (_server, said) = push_with_store_faults("put_file:.bin:unavailable", "stalled");
    assert!(
        said.contains("remote unpack failed: the store does not answer, try again later")
            && said.contains("main -> main (unpacker error)"),
        "{said}"
    );
    assert!(!said.contains("injected"), "{said}");
}

/// `--max-concurrent-fetches 1`: a clone holding the one slot (its reads
/// of the store slowed to 3 s by fault injection) makes the next fetch
/// wait, and after `--fetch-queue-timeout` git is told why (an `ERR`
/// pkt-line, which git shows as `fatal: remote error: server busy: …`);
/// the advertisement (GET info/refs) and `ls-remote` (v2 `ls-refs`) are
/// not queued, the clone completes, and once the slot is free fetches are
/// served again.
#[test]
fn fetches_beyond_the_cap_wait_then_are_told_the_server_is_busy() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_on(
        None,
        &[
            "--max-concurrent-fetches",
            "1",
            "--fetch-queue-timeout",
            "1",
            // The first container read must be the held clone's (the first
            // maintenance pass after an import reads them for its bitmaps).
            "--no-maintenance",
        ],
        &[("GITSTOW_FAULTS", "get_range:.bin:delay=3000:1")],
    );
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "one");
    let url = server.url("busy");
    git(&work, &["push", "--quiet", &url, "HEAD:refs/heads/main"]);

    let holder = {
        let (url, dir) = (url.clone(), tmp.path().to_owned());
        std::thread::spawn(move || git(&dir, &["clone", "--quiet", "--bare", &url, "held.git"]))
    };
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let adv = http(
        server.port(),
        "GET",
        "/busy.git/info/refs?service=git-upload-pack",
        &[],
        &[],
    );
    assert_eq!(adv.status, 200, "the advertisement is not queued");
    let started = std::time::Instant::now();
    // Queued, ls-refs would be refused after the 1 s queue timeout: the
    // held clone keeps the slot for 3 s.
    assert!(
        ls_remote(&url).contains("refs/heads/main"),
        "ls-refs is not queued"
    );
    let err = git_fail(
        tmp.path(),
        &["clone", "--quiet", "--bare", &url, "second.git"],
    );
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
    assert!(
        err.contains("remote error: server busy: the limit of 1 concurrent fetches is reached"),
        "{err}"
    );
    assert!(
        server.logs().contains("fetch refused: queue timeout"),
        "{}",
        server.logs()
    );

    holder.join().unwrap();
    fsck(&tmp.path().join("held.git"));
    git(
        tmp.path(),
        &["clone", "--quiet", "--bare", &url, "third.git"],
    );
    let metrics = http(server.port(), "GET", "/metrics", &[], &[]).text();
    assert!(
        metrics.contains("gitstow_fetch_queue_timeouts_total 1"),
        "{metrics}"
    );
}

/// A client that asks for a pack and stops reading (a suspended `git
/// clone`) loses its response once it has taken nothing for the stall
/// deadline (shortened here by `GITSTOW_TEST_SEND_STALL_MS`), so it does
/// not hold the one fetch slot: the next clone is served. (With no room
/// to spill the answer, `--max-response-spill 0`: with room, the slot is
/// free at once, `slow_clients.rs`.)
#[test]
fn a_client_that_stops_reading_gives_its_fetch_slot_back() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_on(
        None,
        &[
            "--max-concurrent-fetches",
            "1",
            "--fetch-queue-timeout",
            "30",
            "--max-response-spill",
            "0",
        ],
        &[("GITSTOW_TEST_SEND_STALL_MS", "2000")],
    );
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    // 8 MiB that do not compress: more than the response queue and the
    // socket buffers hold.
    std::fs::write(
        work.join("noise.bin"),
        noise(8 << 20, 0x2545_f491_4f6c_dd1d),
    )
    .unwrap();
    git(&work, &["add", "noise.bin"]);
    git(&work, &["commit", "--quiet", "-m", "noise"]);
    let url = server.url("stalled");
    git(&work, &["push", "--quiet", &url, "HEAD:refs/heads/main"]);
    let tip = git_out(&work, &["rev-parse", "HEAD"]);

    // A fetch of everything whose answer is never read.
    let body = [
        pkt(b"command=fetch\n"),
        pkt(b"object-format=sha1\n"),
        b"0001".to_vec(),
        pkt(format!("want {tip}\n").as_bytes()),
        pkt(b"done\n"),
        b"0000".to_vec(),
    ]
    .concat();
    let mut stalled = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    write!(
        stalled,
        "POST /stalled.git/git-upload-pack HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-git-upload-pack-request\r\nGit-Protocol: version=2\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stalled.write_all(&body).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));

    let started = std::time::Instant::now();
    git(
        tmp.path(),
        &["clone", "--quiet", "--bare", &url, "next.git"],
    );
    let took = started.elapsed();
    assert!(
        took >= std::time::Duration::from_secs(1)
            && took < deadline_for(std::time::Duration::from_secs(2)),
        "the second clone took {took:?}"
    );
    fsck(&tmp.path().join("next.git"));
    let logs = server.logs();
    assert!(
        logs.contains("client stopped reading the response"),
        "{logs}"
    );
    drop(stalled);
}

/// A fetch flood: 8 requests of 200,000 `want` lines each (10 MB of
/// request, the hostile case scaled down) sent at once to a server that
/// runs 2 fetches at a time. All are served (the others wait their turn,
/// holding their request in a temp file), and the server's peak memory
/// follows the cap, not the flood: under 3 times what one such request
/// costs alone (8 at once without the cap: about 7 times, measured).
#[test]
fn a_fetch_flood_is_held_to_the_fetch_cap() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&[
        "--no-maintenance",
        "--max-concurrent-fetches",
        "2",
        "--fetch-queue-timeout",
        "300",
    ]);
    let pid = server.pid().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let tip = commit_files(&work, &[("a", "1")], "one");
    git(&work, &["push", "--quiet", &server.url("flood"), "main"]);

    let want = format!("want {tip}");
    let args = std::iter::repeat_n(want.as_str(), 200_000).chain(["done"]);
    let body = std::sync::Arc::new(v2_fetch(args));
    let port = server.port();
    let fetch = {
        let body = body.clone();
        move || {
            let resp = http(
                port,
                "POST",
                "/flood.git/git-upload-pack",
                &[
                    ("Content-Type", "application/x-git-upload-pack-request"),
                    ("Git-Protocol", "version=2"),
                ],
                &body,
            );
            assert_eq!(resp.status, 200);
            let text = resp.text();
            assert!(
                text.contains("packfile"),
                "{}",
                &text[..text.len().min(200)]
            );
        }
    };
    let one = peak_above(pid, fetch.clone());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let flood = peak_above(pid, || {
        let threads: Vec<_> = (0..8).map(|_| std::thread::spawn(fetch.clone())).collect();
        for t in threads {
            t.join().unwrap();
        }
    });
    eprintln!("one fetch: {one} kB above idle; 8 at once, 2 at a time: {flood} kB");
    assert!(one > 5_000, "one fetch of 200,000 wants took only {one} kB");
    assert!(
        flood < 3 * one,
        "8 fetches at once, 2 at a time, peaked at {flood} kB: over 3 × {one} kB"
    );
    let metrics = http(port, "GET", "/metrics", &[], b"").text();
    let waited: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gitstow_fetch_queue_wait_seconds_sum "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no fetch queue wait in:\n{metrics}"));
    assert!(waited > 0.2, "the flood did not queue: {waited} s waited");
}

#[test]
fn a_request_over_the_line_limit_gets_an_err_line_git_shows() {
    if Server::is_canonical() {
        return; // git has no such limit
    }
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let tip = commit_files(&work, &[("a", "1")], "one");
    git(&work, &["push", "--quiet", &server.url("many"), "main"]);
    let want = format!("want {tip}");
    let body = v2_fetch(std::iter::repeat_n(want.as_str(), 1_000_001).chain(["done"]));
    let resp = http(
        server.port(),
        "POST",
        "/many.git/git-upload-pack",
        &[
            ("Content-Type", "application/x-git-upload-pack-request"),
            ("Git-Protocol", "version=2"),
        ],
        &body,
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
    let text = resp.text();
    assert!(
        text.contains("ERR upload-pack: request too large: more than 1000000 lines"),
        "{}",
        &text[..text.len().min(300)]
    );
    // The same in v0, and the server still serves.
    let mut v0 = Vec::new();
    for _ in 0..1_000_001 {
        v0.extend(pkt(format!("{want}\n").as_bytes()));
    }
    v0.extend_from_slice(FLUSH);
    let resp = http(
        server.port(),
        "POST",
        "/many.git/git-upload-pack",
        &[("Content-Type", "application/x-git-upload-pack-request")],
        &v0,
    );
    assert!(
        resp.text().contains("ERR upload-pack: request too large"),
        "{}",
        resp.status
    );
    assert!(ls_remote(&server.url("many")).contains(&tip));
}
