//! `/metrics`, `/debug/pprof/heap` and the push concurrency cap, against a
//! running `gitstow serve` driven by the real git client.

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// The value of the sample `name` (with its labels, as rendered) in a
/// Prometheus text exposition, if present.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (n, v) = l.rsplit_once(' ')?;
        (n == name).then(|| v.parse().ok())?
    })
}

fn scrape(port: u16) -> String {
    let r = http(port, "GET", "/metrics", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.header("content-type")
            .unwrap_or("")
            .starts_with("text/plain"),
        "{:?}",
        r.headers
    );
    r.text()
}

fn object_count(repo: &Path) -> f64 {
    git_out(repo, &["rev-list", "--all", "--objects"])
        .lines()
        .count() as f64
}

#[test]
fn metrics_count_a_push_and_a_clone() {
    let server = Server::start_with(&["--heap-profiling"]);
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 11,
            commits: 120,
            ..Default::default()
        },
    );
    let objects = object_count(&src);
    let before = scrape(server.port());
    assert_eq!(
        sample(&before, "gitstow_pushes_in_flight"),
        Some(0.0),
        "{before}"
    );
    assert!(sample(&before, "gitstow_process_resident_bytes").unwrap() > 1e6);
    assert!(sample(&before, "gitstow_jemalloc_allocated_bytes").unwrap() > 0.0);

    // A post buffer smaller than the pack makes git send its probe request
    // first (a lone flush-pkt): that is not a push and must not count as one.
    git(
        &src,
        &[
            "-c",
            "http.postBuffer=1024",
            "push",
            "--quiet",
            "--mirror",
            &server.url("m"),
        ],
    );
    let after = scrape(server.port());
    assert_eq!(
        sample(&after, r#"gitstow_pushes_total{result="ok"}"#),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        sample(&after, "gitstow_objects_resolved_total"),
        Some(objects)
    );
    assert_eq!(
        sample(&after, "gitstow_containers_uploaded_total"),
        Some(1.0)
    );
    let received = sample(
        &after,
        r#"gitstow_received_bytes_total{service="receive-pack"}"#,
    )
    .expect("received bytes");
    let uploaded = sample(&after, "gitstow_container_bytes_uploaded_total").unwrap();
    assert!(uploaded > 0.0 && received > 0.0, "{after}");
    let allocated = |t: &str| sample(t, "gitstow_allocated_bytes_total").unwrap();
    assert!(allocated(&after) > allocated(&before), "{after}");
    assert_eq!(
        sample(&after, "gitstow_push_duration_seconds_count"),
        Some(1.0)
    );
    assert_eq!(
        sample(&after, "gitstow_push_queue_wait_seconds_count"),
        Some(1.0)
    );
    assert_eq!(sample(&after, "gitstow_pushes_in_flight"), Some(0.0));

    let clone = dir.path().join("clone.git");
    git(
        dir.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            &server.url("m"),
            clone.to_str().unwrap(),
        ],
    );
    let fetched = scrape(server.port());
    assert_eq!(
        sample(&fetched, "gitstow_objects_sent_total"),
        Some(objects)
    );
    // ls-refs and fetch (protocol v2) are two requests.
    assert_eq!(
        sample(&fetched, "gitstow_fetch_duration_seconds_count"),
        Some(2.0)
    );
    assert_eq!(sample(&fetched, "gitstow_fetches_in_flight"), Some(0.0));
    assert!(
        sample(
            &fetched,
            r#"gitstow_sent_bytes_total{service="upload-pack"}"#
        )
        .unwrap()
            > uploaded / 2.0,
        "{fetched}"
    );

    // A heap profile: pprof's protobuf, gzipped.
    let heap = http(server.port(), "GET", "/debug/pprof/heap", &[], b"");
    assert_eq!(heap.status, 200, "{}", heap.text());
    assert_eq!(&heap.body[..2], &[0x1f, 0x8b], "not gzip");
    assert_eq!(
        http(server.port(), "POST", "/metrics", &[], b"").status,
        405
    );
}

#[test]
fn heap_profiles_are_off_by_default_and_metrics_have_their_own_listener() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_port = free.local_addr().unwrap().port();
    drop(free);
    let server = Server::start_with(&["--metrics-listen", &format!("127.0.0.1:{metrics_port}")]);
    let heap = http(server.port(), "GET", "/debug/pprof/heap", &[], b"");
    assert_eq!(heap.status, 404);
    assert!(heap.text().contains("--heap-profiling"), "{}", heap.text());
    let own = scrape(metrics_port);
    assert!(
        sample(&own, "gitstow_process_resident_bytes").is_some(),
        "{own}"
    );
    // The operator's listener serves nothing else.
    let info = http(
        metrics_port,
        "GET",
        "/x.git/info/refs?service=git-upload-pack",
        &[],
        b"",
    );
    assert_eq!(info.status, 404);
}

#[test]
fn pushes_past_the_cap_wait_and_time_out_with_a_clear_message() {
    // Every state commit takes 3 s, so the first push holds the only slot
    // while the second waits 1 s in the queue and is refused.
    let server = Server::start_on(
        None,
        &["--max-concurrent-pushes", "1", "--push-queue-timeout", "1"],
        &[("GITSTOW_FAULTS", "put:/state:delay=3000")],
    );
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("w");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "a\n")], "first");
    let url_a = server.url("a");
    let url_b = server.url("b");
    let first = {
        let work = work.clone();
        std::thread::spawn(move || git(&work, &["push", "--quiet", &url_a, "HEAD:refs/heads/main"]))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while sample(&scrape(server.port()), "gitstow_pushes_in_flight") != Some(1.0) {
        assert!(Instant::now() < deadline, "the first push never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = git_fail(&work, &["push", &url_b, "HEAD:refs/heads/main"]);
    assert!(
        err.contains("server busy: the limit of 1 concurrent pushes is reached"),
        "git said: {err}"
    );
    assert!(
        err.contains("[remote rejected]") || err.contains("unpack"),
        "{err}"
    );
    first.join().expect("first push");
    assert!(ls_remote(&server.url("a")).contains("refs/heads/main"));
    let m = scrape(server.port());
    assert_eq!(
        sample(&m, "gitstow_push_queue_timeouts_total"),
        Some(1.0),
        "{m}"
    );
    // Nothing of the refused push landed, and it goes through once the slot is free.
    let absent = git_fail(dir.path(), &["ls-remote", &server.url("b")]);
    assert!(absent.contains("not found"), "{absent}");
    git(
        &work,
        &["push", "--quiet", &server.url("b"), "HEAD:refs/heads/main"],
    );
    assert!(ls_remote(&server.url("b")).contains("refs/heads/main"));
}
