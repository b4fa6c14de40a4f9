//! The S3 backend against a real S3 server.
//!
//! These tests need a running server and fail without one (they never skip):
//!
//! ```text
//! bash scripts/s3-radosgw.sh start          # Ceph RGW on 127.0.0.1:7480
//! eval "$(bash scripts/s3-radosgw.sh env)"  # S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY, S3_BUCKET
//! cargo test -p gitstow-store --test s3
//! ```
//!
//! Every test works under its own key prefix (time + pid + counter), so runs
//! and tests never see each other's objects. Objects are not cleaned up: the
//! CI server keeps its data in memory and loses it on stop.

mod common;

use std::io::Write;

use gitstow_store::{
    open_with, CachedStore, ETag, Error, IfNoneMatch, ObjectStore, PutCondition, S3Options, S3Store,
};

use common::*;

#[test]
fn put_get_head_list_delete_roundtrip() {
    let s = store("roundtrip");
    assert_eq!(s.get("r/state").unwrap(), None);
    assert_eq!(s.head("r/state").unwrap(), None);
    assert!(s.list("").unwrap().is_empty());

    let e1 = s.put("r/state", b"one", PutCondition::None).unwrap();
    assert!(
        !e1.0.is_empty() && !e1.0.contains('"'),
        "unquoted ETag: {e1:?}"
    );
    assert_eq!(
        s.get("r/state").unwrap(),
        Some((b"one".to_vec(), e1.clone()))
    );
    let head = s.head("r/state").unwrap().unwrap();
    assert_eq!((head.size, &head.etag), (3, &e1));

    let e2 = s.put("r/state", b"two!", PutCondition::None).unwrap();
    assert_ne!(e1, e2);
    assert_eq!(s.get("r/state").unwrap(), Some((b"two!".to_vec(), e2)));

    s.put("r/containers/b.bin", b"b", PutCondition::None)
        .unwrap();
    s.put("r/containers/a.idx", b"a", PutCondition::None)
        .unwrap();
    s.put("other/x", b"", PutCondition::None).unwrap();
    assert_eq!(
        s.list("").unwrap(),
        [
            "other/x",
            "r/containers/a.idx",
            "r/containers/b.bin",
            "r/state"
        ]
    );
    assert_eq!(
        s.list("r/con").unwrap(),
        ["r/containers/a.idx", "r/containers/b.bin"]
    );
    assert!(s.list("nothing/").unwrap().is_empty());
    assert_eq!(s.get("other/x").unwrap().unwrap().0, b"");
    assert_eq!(s.head("other/x").unwrap().unwrap().size, 0);

    s.delete("r/state").unwrap();
    s.delete("r/state").unwrap(); // idempotent
    s.delete("never/was").unwrap();
    assert_eq!(s.get("r/state").unwrap(), None);
    assert_eq!(
        s.list("r/").unwrap(),
        ["r/containers/a.idx", "r/containers/b.bin"]
    );

    assert!(matches!(
        s.put("../x", b"", PutCondition::None),
        Err(Error::InvalidKey { .. })
    ));
    let stats = s.stats();
    assert_eq!(stats.errors, 0);
    assert!(stats.put >= 5 && stats.get >= 4 && stats.list >= 4 && stats.delete == 3);
}

#[test]
fn get_range_reads_bytes_and_reports_bad_ranges() {
    let s = store("range");
    let data = pattern(100_000, 1);
    s.put("obj", &data, PutCondition::None).unwrap();
    assert_eq!(s.get_range("obj", 0..10).unwrap(), &data[..10]);
    assert_eq!(
        s.get_range("obj", 12_345..67_890).unwrap(),
        &data[12_345..67_890]
    );
    assert_eq!(
        s.get_range("obj", 99_999..100_000).unwrap(),
        &data[99_999..]
    );
    assert_eq!(s.get_range("obj", 0..100_000).unwrap(), data);

    let before = s.stats();
    assert!(s.get_range("obj", 500..500).unwrap().is_empty());
    assert_eq!(s.stats(), before, "an empty range sends no request");

    for range in [
        99_000..100_001,
        100_000..100_010,
        200_000..200_001,
        std::ops::Range { start: 10, end: 5 },
    ] {
        match s.get_range("obj", range.clone()) {
            Err(Error::InvalidRange {
                start, end, size, ..
            }) => assert_eq!((start, end, size), (range.start, range.end, 100_000)),
            other => panic!("{range:?}: expected InvalidRange, got {other:?}"),
        }
    }
    assert!(matches!(
        s.get_range("missing", 0..1),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        s.get_range("missing", std::ops::Range { start: 5, end: 1 }),
        Err(Error::NotFound { .. })
    ));
    assert_eq!(s.stats().errors, 0);
}

#[test]
fn if_absent_twice_second_loses() {
    let s = store("if-absent");
    let e = s.put("r/state", b"first", PutCondition::IfAbsent).unwrap();
    match s.put("r/state", b"second", PutCondition::IfAbsent) {
        Err(Error::PreconditionFailed { key }) => assert_eq!(key, "r/state"),
        other => panic!("expected PreconditionFailed, got {other:?}"),
    }
    assert_eq!(s.get("r/state").unwrap(), Some((b"first".to_vec(), e)));
    assert_eq!(s.stats().precondition_failed, 1);
}

#[test]
fn if_match_stale_or_missing_loses() {
    let s = store("if-match-stale");
    let v1 = s.put("r/state", b"v1", PutCondition::IfAbsent).unwrap();
    let v2 = s
        .put("r/state", b"v2", PutCondition::IfMatch(v1.clone()))
        .unwrap();
    assert!(matches!(
        s.put("r/state", b"v3", PutCondition::IfMatch(v1)),
        Err(Error::PreconditionFailed { .. })
    ));
    assert_eq!(
        s.get("r/state").unwrap(),
        Some((b"v2".to_vec(), v2.clone()))
    );
    // A missing key under If-Match (AWS: 404, RGW: 412) is a lost race too.
    assert!(matches!(
        s.put("r/absent", b"x", PutCondition::IfMatch(v2)),
        Err(Error::PreconditionFailed { .. })
    ));
    assert_eq!(s.get("r/absent").unwrap(), None);
    assert_eq!(s.stats().errors, 0);
}

#[test]
fn if_match_current_succeeds_with_either_quoting() {
    let s = store("if-match-current");
    let v1 = s.put("r/state", b"v1", PutCondition::IfAbsent).unwrap();
    let v2 = s.put("r/state", b"v2", PutCondition::IfMatch(v1)).unwrap();
    let first = s.stats();
    // The server's If-Match spelling is known now: the next put goes right
    // the first time.
    let v3 = s
        .put("r/state", b"v3", PutCondition::IfMatch(v2.clone()))
        .unwrap();
    let second = s.stats();
    assert_eq!(
        second.put_conditional - first.put_conditional,
        1,
        "{first:?} -> {second:?}"
    );
    assert_eq!(second.precondition_failed, 0);
    // A quoted ETag from the caller is accepted as well.
    let quoted = ETag(format!("\"{}\"", v3.0));
    let v4 = s
        .put("r/state", b"v4", PutCondition::IfMatch(quoted))
        .unwrap();
    assert_eq!(s.get("r/state").unwrap(), Some((b"v4".to_vec(), v4)));
    eprintln!(
        "If-Match: first conditional put needed {} request(s), {} quoting retry",
        first.put_conditional - 1,
        first.retries
    );
}

/// A conditional GET of an unchanged object transfers nothing (`304`); a
/// changed one comes back with its new version; a missing one is absent.
#[test]
fn if_none_match_transfers_only_a_new_version() {
    let s = store("if-none-match");
    let body = pattern(64 << 10, 7);
    let v1 = s.put("r/state", &body, PutCondition::IfAbsent).unwrap();
    let before = s.stats();
    assert_eq!(
        s.get_if_none_match("r/state", &v1).unwrap(),
        IfNoneMatch::Unchanged
    );
    let after = s.stats();
    assert_eq!(
        after.bytes_read, before.bytes_read,
        "an unchanged object was transferred: {before:?} -> {after:?}"
    );
    let v2 = s
        .put("r/state", b"v2", PutCondition::IfMatch(v1.clone()))
        .unwrap();
    assert_eq!(
        s.get_if_none_match("r/state", &v1).unwrap(),
        IfNoneMatch::Changed(b"v2".to_vec(), v2.clone())
    );
    let quoted = ETag(format!("\"{}\"", v2.0));
    assert_eq!(
        s.get_if_none_match("r/state", &quoted).unwrap(),
        IfNoneMatch::Unchanged
    );
    assert_eq!(
        s.get_if_none_match("r/absent", &v2).unwrap(),
        IfNoneMatch::Absent
    );
    assert_eq!(s.stats().errors, 0);
}

#[test]
fn concurrent_increments_are_never_lost() {
    const THREADS: usize = 8;
    const INCREMENTS: usize = 25;
    let s = store("race");
    s.put("counter", b"0", PutCondition::IfAbsent).unwrap();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut lost = 0;
                for _ in 0..INCREMENTS {
                    loop {
                        let (data, etag) = s.get("counter").unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
                        let next = (n + 1).to_string();
                        match s.put("counter", next.as_bytes(), PutCondition::IfMatch(etag)) {
                            Ok(_) => break,
                            Err(Error::PreconditionFailed { .. }) => lost += 1,
                            Err(e) => panic!("increment failed: {e}"),
                        }
                    }
                }
                lost
            })
        })
        .collect();
    let lost: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let (data, _) = s.get("counter").unwrap().unwrap();
    assert_eq!(data, (THREADS * INCREMENTS).to_string().as_bytes());
    let stats = s.stats();
    assert_eq!(stats.errors, 0);
    eprintln!(
        "{} increments, {lost} lost races retried; {stats:?}",
        THREADS * INCREMENTS
    );
}

#[test]
fn put_file_small_is_one_put() {
    let s = store("put-file-small");
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(3 * MIB + 17, 2);
    let path = write_file(dir.path(), "small", &data);
    let etag = s.put_file("r/containers/small.bin", &path).unwrap();
    let stats = s.stats();
    assert_eq!((stats.put, stats.multipart_uploads), (1, 0));
    let head = s.head("r/containers/small.bin").unwrap().unwrap();
    assert_eq!((head.size, &head.etag), (data.len() as u64, &etag));
    let (got, got_etag) = s.get("r/containers/small.bin").unwrap().unwrap();
    assert_eq!(sha(&got), sha(&data));
    assert_eq!(got_etag, etag);
    // Empty file.
    let empty = write_file(dir.path(), "empty", b"");
    s.put_file("r/containers/empty.bin", &empty).unwrap();
    assert_eq!(s.head("r/containers/empty.bin").unwrap().unwrap().size, 0);
    // A missing file is an I/O error naming the key.
    match s.put_file("r/x.bin", &dir.path().join("nope")) {
        Err(Error::Io { key, .. }) => assert_eq!(key, "r/x.bin"),
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn put_file_large_is_a_multipart_upload() {
    let s = store("put-file-multipart");
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(40 * MIB, 3);
    let path = write_file(dir.path(), "large", &data);
    let started = std::time::Instant::now();
    let etag = s.put_file("r/containers/large.bin", &path).unwrap();
    let elapsed = started.elapsed();
    let stats = s.stats();
    assert_eq!(stats.multipart_uploads, 1);
    assert_eq!(stats.multipart_parts, 3, "40 MiB in 16 MiB parts");
    assert_eq!(stats.multipart_completed, 1);
    assert_eq!(stats.multipart_aborted, 0);
    assert!(etag.0.ends_with("-3"), "multipart ETag: {etag:?}");
    let head = s.head("r/containers/large.bin").unwrap().unwrap();
    assert_eq!((head.size, &head.etag), (data.len() as u64, &etag));
    let (got, got_etag) = s.get("r/containers/large.bin").unwrap().unwrap();
    assert_eq!(got.len(), data.len());
    assert_eq!(sha(&got), sha(&data));
    assert_eq!(got_etag, etag);
    // Across the first part boundary.
    let r = (16 * MIB - 10) as u64..(16 * MIB + 10) as u64;
    assert_eq!(
        s.get_range("r/containers/large.bin", r.clone()).unwrap(),
        &data[r.start as usize..r.end as usize]
    );
    eprintln!("40 MiB multipart upload took {elapsed:?}");
}

#[test]
fn list_paginates_past_1000_keys() {
    const KEYS: usize = 1100;
    const THREADS: usize = 16;
    let s = store("list-pages");
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let s = &s;
            scope.spawn(move || {
                for i in (t..KEYS).step_by(THREADS) {
                    s.put(
                        &format!("k/{i:05}"),
                        i.to_string().as_bytes(),
                        PutCondition::None,
                    )
                    .unwrap();
                }
            });
        }
    });
    let put_time = started.elapsed();
    s.put("other", b"x", PutCondition::None).unwrap();
    let before = s.stats().list;
    let keys = s.list("k/").unwrap();
    let pages = s.stats().list - before;
    assert_eq!(keys.len(), KEYS);
    let expected: Vec<String> = (0..KEYS).map(|i| format!("k/{i:05}")).collect();
    assert_eq!(keys, expected);
    assert!(pages >= 2, "{pages} page(s)");
    assert_eq!(s.list("").unwrap().len(), KEYS + 1);
    eprintln!("{KEYS} puts in {put_time:?} ({THREADS} threads), listed in {pages} pages");
}

fn immutable(key: &str) -> bool {
    key.ends_with(".bin") || key.ends_with(".idx")
}

#[test]
fn cached_store_reads_immutable_objects_once() {
    let s = store("cache-hit");
    let dir = tempfile::tempdir().unwrap();
    let cached = CachedStore::new(
        s.clone(),
        dir.path().join("cache"),
        64 * MIB as u64,
        immutable,
    );
    let data = pattern(300_000, 4);
    s.put("r/containers/c1.bin", &data, PutCondition::None)
        .unwrap();
    s.put("r/state", b"state", PutCondition::None).unwrap();

    let before = s.stats();
    assert_eq!(
        cached.get_range("r/containers/c1.bin", 10..20).unwrap(),
        &data[10..20]
    );
    let first = s.stats();
    assert_eq!(first.get - before.get, 1, "downloaded whole, once");
    assert_eq!(first.get_range - before.get_range, 0);

    assert_eq!(
        cached
            .get_range("r/containers/c1.bin", 1000..250_000)
            .unwrap(),
        &data[1000..250_000]
    );
    let (whole, etag) = cached.get("r/containers/c1.bin").unwrap().unwrap();
    assert_eq!(whole, data);
    assert_eq!(
        cached.head("r/containers/c1.bin").unwrap().unwrap().etag,
        etag
    );
    let second = s.stats();
    assert_eq!(second.get, first.get, "no backend GET after the first read");
    assert_eq!(second.get_range, first.get_range);
    assert_eq!(second.head, first.head);

    // Mutable keys go to S3 every time.
    cached.get("r/state").unwrap();
    cached.get("r/state").unwrap();
    assert_eq!(s.stats().get - second.get, 2);

    let cs = cached.cache_stats();
    assert_eq!(
        (cs.misses, cs.hits, cs.objects, cs.bytes),
        (1, 3, 1, 300_000)
    );
    let m = cached.metrics();
    assert_eq!(m.cache, Some(cached.cache_stats()));
    assert!(m.requests.is_some());
}

#[test]
fn cached_store_eviction_keeps_the_dir_under_the_bound() {
    let s = store("cache-evict");
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    let max = 350_000u64;
    let cached = CachedStore::new(s.clone(), cache_dir.clone(), max, immutable);
    let dir_bytes = || -> u64 {
        std::fs::read_dir(&cache_dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    for i in 0..8u8 {
        let key = format!("r/containers/{i}.bin");
        s.put(&key, &pattern(100_000, i), PutCondition::None)
            .unwrap();
        assert_eq!(
            cached.get_range(&key, 0..100).unwrap(),
            &pattern(100_000, i)[..100]
        );
        assert!(dir_bytes() <= max, "cache dir holds {} bytes", dir_bytes());
    }
    let cs = cached.cache_stats();
    assert_eq!((cs.objects, cs.bytes, cs.evictions), (3, 300_000, 5));
    // A container written through the cache is cached at once.
    let file = write_file(dir.path(), "up", &pattern(50_000, 9));
    cached.put_file("r/containers/new.bin", &file).unwrap();
    let gets = s.stats().get;
    assert_eq!(
        cached.get_range("r/containers/new.bin", 0..5).unwrap(),
        &pattern(50_000, 9)[..5]
    );
    assert_eq!(s.stats().get, gets);
    assert!(dir_bytes() <= max);
    // Larger than the whole cache: read through, never stored.
    s.put(
        "r/containers/huge.idx",
        &pattern(400_000, 7),
        PutCondition::None,
    )
    .unwrap();
    let ranges = s.stats().get_range;
    assert_eq!(
        cached.get_range("r/containers/huge.idx", 5..8).unwrap(),
        &pattern(400_000, 7)[5..8]
    );
    assert_eq!(s.stats().get_range - ranges, 1);
    assert!(dir_bytes() <= max);
}

#[test]
fn get_to_file_streams_the_object() {
    let s = store("get-to-file");
    let data = pattern(5 * MIB + 3, 5);
    s.put("r/containers/d.bin", &data, PutCondition::None)
        .unwrap();
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(b"junk that must go").unwrap();
    let meta = s
        .get_to_file("r/containers/d.bin", &mut file)
        .unwrap()
        .unwrap();
    assert_eq!(meta.size, data.len() as u64);
    let mut got = Vec::new();
    std::io::Seek::rewind(&mut file).unwrap();
    std::io::Read::read_to_end(&mut file, &mut got).unwrap();
    assert_eq!(sha(&got), sha(&data));
    assert_eq!(
        s.get_to_file("r/containers/none.bin", &mut file).unwrap(),
        None
    );
}

#[test]
fn open_with_url_and_options() {
    let srv = server();
    let options = S3Options {
        endpoint: Some(srv.endpoint.clone()),
        region: Some(srv.region.clone()),
        path_style: Some(true),
        access_key: Some(srv.access_key.clone()),
        secret_key: Some(srv.secret_key.clone()),
        ..Default::default()
    };
    let prefix = unique_prefix("open");
    let url = format!("s3://{}/{prefix}/", srv.bucket);
    let store = open_with(&url, &options).unwrap();
    store
        .put("repo/state", b"s", PutCondition::IfAbsent)
        .unwrap();
    assert_eq!(store.list("").unwrap(), ["repo/state"]);
    // The prefix is really a prefix in the bucket.
    let whole_bucket = open_with(&format!("s3://{}", srv.bucket), &options).unwrap();
    assert_eq!(
        whole_bucket
            .get(&format!("{prefix}/repo/state"))
            .unwrap()
            .unwrap()
            .0,
        b"s"
    );
    assert!(store
        .metrics()
        .requests
        .is_some_and(|r| r.other == 1 && r.put_conditional == 1));

    match open_with("s3://no-such-bucket-gitstow/x", &options) {
        Err(Error::Config { reason }) => assert!(reason.contains("does not exist"), "{reason}"),
        other => panic!("expected Config, got {other:?}"),
    }
    let wrong_secret = S3Options {
        secret_key: Some("wrong".into()),
        ..options.clone()
    };
    // A refused secret is said as such, with the flags to check (and
    // never the secret).
    match open_with(&url, &wrong_secret) {
        Err(Error::Config { reason }) => {
            assert!(
                reason.contains("refused the credentials") && reason.contains("403"),
                "{reason}"
            );
            assert!(!reason.contains("wrong"), "{reason}");
        }
        other => panic!("expected Config, got {other:?}"),
    }
}

#[test]
fn unreachable_endpoint_fails_after_bounded_retries() {
    let mut c = config("unreachable");
    c.endpoint = Some("http://127.0.0.1:9".into()); // discard port: nothing listens
    c.max_attempts = 3;
    c.retry_base_delay = std::time::Duration::from_millis(10);
    let s = S3Store::new(c).unwrap();
    let started = std::time::Instant::now();
    match s.get("x") {
        Err(Error::Backend {
            op, key, message, ..
        }) => {
            assert_eq!((op, key.as_str()), ("get", "x"));
            assert!(message.contains("gave up after 3 attempts"), "{message}");
        }
        other => panic!("expected Backend, got {other:?}"),
    }
    let stats = s.stats();
    assert_eq!((stats.get, stats.retries, stats.errors), (3, 2, 1));
    // Two waits of the configured backoff (10 ms, 20 ms): nowhere near
    // 10 s, however loaded the machine, unless the backoff ran away.
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

/// `curl` of a presigned request with `body` (PUT) or none (GET): the
/// status and the body answered.
fn curl(p: &gitstow_store::Presigned, body: Option<&[u8]>) -> (u16, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out");
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-o"])
        .arg(&out_path)
        .args(["-w", "%{http_code}", "-X", p.method]);
    // as an HTTP client does: its own Content-Length, from the body
    for (k, v) in p
        .headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-length"))
    {
        cmd.args(["-H", &format!("{k}: {v}")]);
    }
    if let Some(b) = body {
        let in_path = dir.path().join("in");
        std::fs::write(&in_path, b).unwrap();
        cmd.arg("--data-binary")
            .arg(format!("@{}", in_path.display()));
    }
    let out = cmd.arg(&p.url).output().expect("run curl");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (code, std::fs::read(&out_path).unwrap_or_default())
}

#[test]
fn presigned_requests_copy_and_checksums() {
    use sha2::Digest;
    let s = store("presign");
    let ttl = std::time::Duration::from_secs(300);
    let body = b"bytes a client uploads on its own".to_vec();
    let sha: [u8; 32] = sha2::Sha256::digest(&body).into();
    let put = s
        .presign(
            gitstow_store::PresignRequest::Put {
                key: "lfs/staging/a",
                size: body.len() as u64,
                sha256: sha,
            },
            ttl,
        )
        .unwrap()
        .expect("S3 presigns");
    assert_eq!(put.method, "PUT");
    assert!(put.expires_in <= ttl && put.expires_in > ttl / 2);
    assert!(
        put.headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("x-amz-checksum-sha256")),
        "the checksum is signed: {:?}",
        put.headers
    );
    // another size than signed is refused; the signed one lands
    let (code, _) = curl(&put, Some(b"short"));
    assert_eq!(code, 403, "a body of another length than signed was taken");
    let (code, answer) = curl(&put, Some(&body));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(s.get("lfs/staging/a").unwrap().unwrap().0, body);
    // whether the server kept the checksum depends on it (RGW 16: no); when
    // kept, it is the one signed
    if let Some(kept) = s.sha256("lfs/staging/a").unwrap() {
        assert_eq!(kept, sha);
    }
    // a server-side copy, then a presigned GET of it
    s.copy("lfs/staging/a", "lfs/objects/a").unwrap();
    assert_eq!(s.get("lfs/objects/a").unwrap().unwrap().0, body);
    assert!(matches!(
        s.copy("lfs/absent", "lfs/x"),
        Err(Error::NotFound { .. })
    ));
    let get = s
        .presign(
            gitstow_store::PresignRequest::Get {
                key: "lfs/objects/a",
            },
            ttl,
        )
        .unwrap()
        .unwrap();
    assert_eq!(curl(&get, None), (200, body));
    // a tampered signature is refused
    let mut forged = get.clone();
    forged.url = forged.url.replace("X-Amz-Signature=", "X-Amz-Signature=0");
    assert_eq!(curl(&forged, None).0, 403);
}
