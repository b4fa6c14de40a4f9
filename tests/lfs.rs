//! Git LFS with the real `git-lfs` client (installed by `.ci/run`) against
//! `gitstow serve`: a push uploads the tracked files through the batch API,
//! a clone downloads them (smudge), the bytes are kept once per store and
//! owned per repository, over HTTP and over SSH; and raw requests for what
//! the client never sends: no credentials, a read-only token, another
//! repository's object, forged or misused grants, bytes that are not the
//! oid's, malformed and hostile batches.

mod common;

use common::*;

#[test]
fn push_uploads_and_clone_downloads_the_tracked_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let (work, big, small) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_writer = git_as(&server, tmp.path(), &writer);
    git_ok(&work, &as_writer, &["push", &url, "main"]);
    assert_eq!(stored(&server), 2);
    bytes_went_to_the_bucket(&server);
    let (objects, owned) = lfs_keys(&server, "org/app");
    let big_oid = sha256_hex(&big);
    let small_oid = sha256_hex(&small);
    assert_eq!(objects.len(), 2, "{objects:?}");
    assert!(objects.iter().any(|k| k.ends_with(&big_oid)), "{objects:?}");
    assert_eq!(owned, {
        let mut v = vec![
            format!("org/app.git/lfs/objects/{big_oid}"),
            format!("org/app.git/lfs/objects/{small_oid}"),
        ];
        v.sort();
        v
    });
    // `repo list` counts the repository's LFS objects and their bytes
    let o = server.store().admin(&["repo", "list", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let app = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "org/app")
        .unwrap_or_else(|| panic!("org/app in {rows}"));
    assert_eq!(app["lfs_objects"], 2, "{app}");
    assert_eq!(app["lfs_bytes"], (big.len() + small.len()) as u64, "{app}");

    // a clone by a read-only token gets the files' bytes, not pointers
    let clone = tmp.path().join("clone");
    let as_reader = git_as(&server, tmp.path(), &reader);
    git_ok(
        tmp.path(),
        &as_reader,
        &["clone", "--quiet", &url, clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(clone.join("assets/small.bin")).unwrap(),
        small
    );
    let listed =
        String::from_utf8(git_run(&clone, &as_reader, &["lfs", "ls-files", "--long"]).stdout)
            .unwrap();
    assert!(listed.contains(&format!("{big_oid} * big.bin")), "{listed}");

    // a second push of the same commit uploads nothing: the repository has both
    let again = tmp.path().join("again");
    git_ok(
        tmp.path(),
        &as_writer,
        &["clone", "--quiet", &url, again.to_str().unwrap()],
    );
    commit_files(&again, &[("README", "more text\n")], "text only");
    git_ok(&again, &as_writer, &["push", &url, "main"]);
    assert_eq!(stored(&server), 2);

    // another repository gets the same files: uploaded again (proof of
    // possession), kept once in the store, owned by both
    let other = server.url("org/other");
    git_ok(&work, &as_writer, &["push", &other, "main"]);
    assert_eq!(stored(&server), 4);
    let (objects, owned) = lfs_keys(&server, "org/other");
    assert_eq!(objects.len(), 2, "{objects:?}");
    assert_eq!(owned.len(), 2, "{owned:?}");

    // deleting a repository drops its claims: one made later under its
    // name cannot read them; the other repository keeps its own
    let o = server.store().admin(&["repo", "delete", "org/other"]);
    assert!(o.status.success(), "{o:?}");
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("dropped its claim to 2 Git LFS object(s)"),
        "{said}"
    );
    assert!(lfs_keys(&server, "org/other").1.is_empty());
    assert_eq!(lfs_keys(&server, "org/app").1.len(), 2);
}

#[test]
fn a_read_only_token_cannot_upload_and_nothing_is_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, _writer, reader) = start();
    let (work, _, _) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_reader = git_as(&server, tmp.path(), &reader);
    // `git lfs push` alone: the refusal comes from the LFS batch, not from git
    let out = git_run(&work, &as_reader, &["lfs", "push", &url, "main"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("batch response: token 'ro' has read access to org/app, write is needed"),
        "{err}"
    );
    let (objects, owned) = lfs_keys(&server, "org/app");
    assert!(
        objects.is_empty() && owned.is_empty(),
        "{objects:?} {owned:?}"
    );
}

#[test]
fn raw_requests_are_answered_in_the_spec_s_words() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let content = b"the bytes of an LFS object".to_vec();
    let oid = sha256_hex(&content);
    let size = content.len() as u64;

    // no credentials: 401 with LFS-Authenticate
    let r = post_batch(
        &server,
        "org/app",
        None,
        &batch("download", &[(&oid, size)]),
    );
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(
        r.header("lfs-authenticate"),
        Some("Basic realm=\"gitstow\"")
    );
    assert!(json(&r)["message"].is_string());
    // a read-only token may not ask to upload (403); a repository that
    // does not exist has nothing to download (404)
    for (op, status) in [("upload", 403), ("download", 404)] {
        let r = post_batch(
            &server,
            "org/app",
            Some(&reader),
            &batch(op, &[(&oid, size)]),
        );
        assert_eq!(r.status, status, "{op}: {}", r.text());
    }

    // upload through the actions the batch gives
    let r = post_batch(
        &server,
        "org/app",
        Some(&writer),
        &batch("upload", &[(&oid, size)]),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = json(&r);
    assert_eq!(answer["transfer"], "basic");
    assert_eq!(answer["objects"][0]["authenticated"], true);
    let put = Act::of(&answer, 0, "upload");
    let verify_act = Act::of(&answer, 0, "verify");
    let port = server.port();
    // on S3 the bytes go to the bucket itself, with the checksum signed;
    // on the local store through gitstow, with a grant
    let presigned = put.presigned(&server);
    assert_eq!(presigned, matches!(server.store(), TestStore::S3 { .. }));
    if presigned {
        assert!(
            put.headers
                .iter()
                .any(|(k, _)| k == "x-amz-checksum-sha256"),
            "{:?}",
            put.headers
        );
        // a tampered signature is refused by the bucket
        let mut forged = Act::of(&answer, 0, "upload");
        forged.path = forged.path.replace("X-Amz-Signature=", "X-Amz-Signature=0");
        assert_eq!(forged.send("PUT", true, &content).status, 403);
    } else {
        // a forged grant, and none at all, are refused
        let mut forged = Act::of(&answer, 0, "upload");
        let g = forged.grant().to_owned();
        // Its last character changed (to another one: a grant may end in '0').
        let last = if g.ends_with('0') { '1' } else { '0' };
        forged.headers = vec![(
            "Authorization".into(),
            format!("{}{last}", &g[..g.len() - 1]),
        )];
        assert_eq!(forged.send("PUT", true, &content).status, 403);
        assert_eq!(put.send("PUT", false, &content).status, 401);
    }
    let verify = serde_json::to_vec(&serde_json::json!({"oid": oid, "size": size})).unwrap();
    // other bytes than the oid's: refused at the upload (gitstow hashes it;
    // S3 with checksums) or at verify (a server that keeps no checksum:
    // gitstow reads it once), and nothing is kept
    let mut wrong = content.clone();
    wrong[0] ^= 1;
    let r = put.send("PUT", true, &wrong);
    let refusal = if r.status == 200 {
        assert!(presigned, "gitstow took bytes that are not the oid's");
        Some(verify_act.send("POST", true, &verify))
    } else if !presigned {
        Some(r)
    } else {
        None // the bucket checked the checksum itself
    };
    if let Some(refusal) = refusal {
        assert_eq!(refusal.status, 422, "{}", refusal.text());
        let message = json(&refusal)["message"].as_str().unwrap().to_owned();
        assert!(message.contains("do not hash"), "{message}");
    }
    // more bytes than announced
    let mut longer = content.clone();
    longer.push(b'!');
    assert_ne!(put.send("PUT", true, &longer).status, 200);
    assert_eq!(lfs_keys(&server, "org/app"), (vec![], vec![]));
    assert!(!server
        .store_keys()
        .iter()
        .any(|k| k.contains("/lfs/staging/")));
    // before the upload, verify says the object is missing
    let r = verify_act.send("POST", true, &verify);
    assert_eq!(r.status, 404, "{}", r.text());
    // the right bytes: stored, owned, verified
    let r = put.send("PUT", true, &content);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = verify_act.send("POST", true, &verify);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(lfs_keys(&server, "org/app").1.len(), 1);
    assert!(!server
        .store_keys()
        .iter()
        .any(|k| k.contains("/lfs/staging/")));
    // an upload's authorization does not download
    assert_eq!(put.send("GET", true, b"").status, 403);

    // download: the batch's action gives the bytes
    let r = post_batch(
        &server,
        "org/app",
        Some(&reader),
        &batch("download", &[(&oid, size)]),
    );
    // the repository holds LFS objects but no git data yet: not found
    assert_eq!(r.status, 404, "{}", r.text());
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "c1");
    let authed = server
        .url("org/app")
        .replace("http://", &format!("http://dev:{writer}@"));
    git(&work, &["push", "--quiet", &authed, "main"]);
    let missing = sha256_hex(b"nobody uploaded this");
    let r = post_batch(
        &server,
        "org/app",
        Some(&reader),
        &batch(
            "download",
            &[(&oid, size), (&missing, 3), ("NOT-AN-OID", 1)],
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = json(&r);
    assert_eq!(answer["objects"][1]["error"]["code"], 404);
    assert_eq!(answer["objects"][2]["error"]["code"], 422);
    let get = Act::of(&answer, 0, "download");
    let r = get.send("GET", true, b"");
    assert_eq!((r.status, &r.body), (200, &content));
    // org/other, which never uploaded it, cannot have it by its oid, and
    // (through gitstow) a grant of org/app does not open it there
    let other = tmp.path().join("other");
    init_repo(&other);
    commit_files(&other, &[("b", "2")], "c1");
    let authed = server
        .url("org/other")
        .replace("http://", &format!("http://dev:{writer}@"));
    git(&other, &["push", "--quiet", &authed, "main"]);
    let r = post_batch(
        &server,
        "org/other",
        Some(&reader),
        &batch("download", &[(&oid, size)]),
    );
    assert_eq!(json(&r)["objects"][0]["error"]["code"], 404, "{}", r.text());
    let bearer = format!("Bearer {reader}");
    let other_path = format!("/org/other.git/info/lfs/objects/{oid}");
    assert_eq!(
        http(port, "GET", &other_path, &[("Authorization", &bearer)], b"").status,
        404
    );
    if !get.presigned(&server) {
        let grant = get.grant();
        assert_eq!(
            http(port, "GET", &other_path, &[("Authorization", grant)], b"").status,
            403
        );
    }
    // a repository that does not exist serves nothing, even to a token
    // that may read it
    let ghost = format!("/org/ghost.git/info/lfs/objects/{oid}");
    assert_eq!(
        http(port, "GET", &ghost, &[("Authorization", &bearer)], b"").status,
        404
    );
    // credentials are checked before a body is read
    let r = post_batch(&server, "org/app", None, b"{not json");
    assert_eq!(r.status, 401, "{}", r.text());

    // malformed and unsupported batches
    let r = post_batch(&server, "org/app", Some(&writer), b"{not json");
    assert_eq!(r.status, 422, "{}", r.text());
    let sha512 = serde_json::to_vec(&serde_json::json!({
        "operation": "download", "objects": [], "hash_algo": "sha512"
    }))
    .unwrap();
    assert_eq!(
        post_batch(&server, "org/app", Some(&writer), &sha512).status,
        409
    );
    let r = post_batch(&server, "org/app", Some(&writer), &batch("delete", &[]));
    assert_eq!(r.status, 422);
    // locks: a reader may not verify (that is for pushers), a lock path of
    // 1 MiB and a malformed one are refused, nothing stored
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks/verify",
        &[("Authorization", &bearer)],
        b"{}",
    );
    assert_eq!(r.status, 403, "{}", r.text());
    // Without credentials (or with a read grant), the lock endpoints answer
    // before they read a body: one that is not JSON gets 401 or 403, not
    // the 422 a parsed body would (issue 42, low item; 60 KiB, so that the
    // client has written it all when the server answers).
    let junk = vec![b'x'; 60 << 10];
    for path in [
        "/org/app.git/info/lfs/locks",
        "/org/app.git/info/lfs/locks/verify",
        "/org/app.git/info/lfs/locks/1/unlock",
    ] {
        let r = http(port, "POST", path, &[], &junk);
        assert_eq!(r.status, 401, "{path}: {}", r.text());
        let r = http(port, "POST", path, &[("Authorization", &bearer)], &junk);
        assert_eq!(r.status, 403, "{path}: {}", r.text());
    }
    let writer_bearer = format!("Bearer {writer}");
    let long = serde_json::to_vec(&serde_json::json!({"path": "a".repeat(1 << 20)})).unwrap();
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks",
        &[("Authorization", &writer_bearer)],
        &long,
    );
    assert!(
        r.status == 413 || r.status == 422,
        "{} {}",
        r.status,
        r.text()
    );
    let dotdot = br#"{"path": "../etc/passwd"}"#;
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks",
        &[("Authorization", &writer_bearer)],
        dotdot,
    );
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(!server
        .store_keys()
        .iter()
        .any(|k| k.ends_with("/lfs/locks")));
}

#[test]
fn a_large_file_and_hundreds_of_objects_in_several_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let work = tmp.path().join("work");
    init_repo(&work);
    lfs_installed(&work);
    git(&work, &["lfs", "track", "*.bin"]);
    let large = noise(150 << 20, 3);
    std::fs::write(work.join("large.bin"), &large).unwrap();
    std::fs::create_dir_all(work.join("many")).unwrap();
    for i in 0..250u64 {
        std::fs::write(
            work.join(format!("many/{i}.bin")),
            noise(1000 + i as usize, 100 + i),
        )
        .unwrap();
    }
    commit_files(&work, &[("README", "many files\n")], "add");
    let url = server.url("org/big");
    let as_writer = git_as(&server, tmp.path(), &writer);
    git_ok(&work, &as_writer, &["push", &url, "main"]);
    assert_eq!(stored(&server), 251);
    bytes_went_to_the_bucket(&server);
    // everything again: nothing is uploaded
    git_ok(&work, &as_writer, &["lfs", "push", "--all", &url]);
    assert_eq!(stored(&server), 251);
    // a clone without smudge, then fetch --all: 251 objects, in batches of 100
    let clone = tmp.path().join("clone");
    let as_reader = git_as(&server, tmp.path(), &reader);
    let out = git_cmd(tmp.path())
        .args(as_reader.iter().map(String::as_str))
        .args(["clone", "--quiet", &url, clone.to_str().unwrap()])
        .env("GIT_LFS_SKIP_SMUDGE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    git_ok(&clone, &as_reader, &["lfs", "fetch", "--all"]);
    let batches = server
        .logs()
        .lines()
        .filter(|l| l.contains("service=\"lfs batch download\"") && l.contains("status=200"))
        .count();
    assert!(batches >= 3, "{batches} download batches for 251 objects");
    git_ok(&clone, &as_reader, &["lfs", "checkout"]);
    assert_eq!(std::fs::read(clone.join("large.bin")).unwrap(), large);
    assert_eq!(
        std::fs::read(clone.join("many/249.bin")).unwrap(),
        noise(1249, 349)
    );
    git_ok(&clone, &as_reader, &["lfs", "fsck"]);
    bytes_went_to_the_bucket(&server);
    // /metrics says where the bytes went (an admin token reads it)
    let root = server.store().create_token("root", &["*:admin"], &[]);
    await_token(&server, &root);
    let bearer = format!("Bearer {root}");
    let text = http(
        server.port(),
        "GET",
        "/metrics",
        &[("Authorization", &bearer)],
        b"",
    )
    .text();
    let value = |line_start: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    let total: u64 = (150 << 20) + (0..250u64).map(|i| 1000 + i).sum::<u64>();
    if matches!(server.store(), TestStore::S3 { .. }) {
        assert_eq!(
            value("gitstow_lfs_bytes_signed_total{operation=\"upload\"}"),
            total,
            "{text}"
        );
        assert!(
            value("gitstow_lfs_bytes_signed_total{operation=\"download\"}") >= total,
            "{text}"
        );
        assert_eq!(
            value("gitstow_lfs_bytes_served_total{direction=\"in\"}"),
            0,
            "{text}"
        );
        assert_eq!(
            value("gitstow_lfs_bytes_served_total{direction=\"out\"}"),
            0,
            "{text}"
        );
    } else {
        assert_eq!(
            value("gitstow_lfs_bytes_served_total{direction=\"in\"}"),
            total,
            "{text}"
        );
        assert!(
            value("gitstow_lfs_bytes_served_total{direction=\"out\"}") >= total,
            "{text}"
        );
    }
    assert!(
        value("gitstow_lfs_batches_total{operation=\"download\"}") >= 3,
        "{text}"
    );
}

#[test]
fn hostile_batches_and_a_storm_of_lock_requests() {
    let (server, writer, _reader) = start();
    let port = server.port();
    let pid = server.pid().unwrap();
    let oid = sha256_hex(b"x");
    // 100,000 objects: past the 1 MiB a batch may take
    let many: Vec<(&str, u64)> = vec![(oid.as_str(), 1); 100_000];
    let r = post_batch(&server, "org/app", Some(&writer), &batch("upload", &many));
    assert_eq!(r.status, 413, "{}", r.text());
    // 1,001 objects within 1 MiB: too many for one batch
    let r = post_batch(
        &server,
        "org/app",
        Some(&writer),
        &batch("upload", &many[..1001]),
    );
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(json(&r)["message"]
        .as_str()
        .unwrap()
        .contains("too many objects"));
    // sizes past the limit, and past any integer
    let r = post_batch(
        &server,
        "org/app",
        Some(&writer),
        &batch("upload", &[(&oid, u64::MAX >> 1)]),
    );
    assert_eq!(json(&r)["objects"][0]["error"]["code"], 422, "{}", r.text());
    let huge = format!(
        r#"{{"operation":"upload","objects":[{{"oid":"{oid}","size":184467440737095516150}}]}}"#
    );
    let r = post_batch(&server, "org/app", Some(&writer), huge.as_bytes());
    assert_eq!(r.status, 422, "{}", r.text());

    // locks belong to a repository that exists
    let bearer = format!("Bearer {writer}");
    let r = http(
        port,
        "POST",
        "/org/app.git/info/lfs/locks",
        &[("Authorization", bearer.as_str())],
        br#"{"path": "a.psd"}"#,
    );
    assert_eq!(r.status, 404, "{}", r.text());
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1")], "c1");
    let authed = server
        .url("org/app")
        .replace("http://", &format!("http://dev:{writer}@"));
    git(&work, &["push", "--quiet", &authed, "main"]);
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = proc_status_kb(pid, "VmRSS");

    // 1,000 lock requests at once (50 clients, 20 each): each answered 201,
    // or 429 when the document kept changing under it; the document holds
    // exactly the 201s
    let created = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..50 {
            let (bearer, created) = (&bearer, &created);
            s.spawn(move || {
                for i in 0..20 {
                    let body = format!(r#"{{"path": "assets/{t}/{i}.psd"}}"#);
                    let r = http(
                        port,
                        "POST",
                        "/org/app.git/info/lfs/locks",
                        &[("Authorization", bearer.as_str())],
                        body.as_bytes(),
                    );
                    match r.status {
                        201 => {
                            created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        429 => assert!(r.header("retry-after").is_some()),
                        other => panic!("lock request answered {other}: {}", r.text()),
                    }
                }
            });
        }
    });
    let created = created.into_inner();
    assert!(created > 0);
    let listed = http(
        port,
        "GET",
        "/org/app.git/info/lfs/locks?limit=100",
        &[("Authorization", &bearer)],
        b"",
    );
    let mut count = 0;
    let mut page = json(&listed);
    loop {
        count += page["locks"].as_array().unwrap().len();
        let Some(cursor) = page["next_cursor"].as_str() else {
            break;
        };
        let r = http(
            port,
            "GET",
            &format!("/org/app.git/info/lfs/locks?limit=100&cursor={cursor}"),
            &[("Authorization", &bearer)],
            b"",
        );
        page = json(&r);
    }
    assert_eq!(count, created);
    let grew = proc_status_kb(pid, "VmHWM").saturating_sub(before);
    assert!(grew < 200 << 10, "the server grew by {grew} KiB");
}

#[test]
fn over_ssh_git_lfs_authenticate_hands_over_to_the_lfs_api() {
    let ssh = Ssh::start();
    let tmp = tempfile::tempdir().unwrap();
    let (work, big, _) = lfs_work(tmp.path(), "work");
    let url = ssh.url("org/app");
    let out = ssh.git(&work, &ssh.dev, &["push", "--quiet", &url, "main"]);
    ok(&out, "push over ssh with LFS files");
    // what git-lfs-authenticate answers, and what it refuses
    let (code, stdout, _) = ssh.ssh(&ssh.reader, "git-lfs-authenticate org/app.git download");
    assert_eq!(code, Some(0));
    let answer: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let href = answer["href"].as_str().unwrap();
    assert_eq!(
        href,
        format!(
            "http://127.0.0.1:{}/org/app.git/info/lfs",
            ssh.server.port()
        )
    );
    let auth = answer["header"]["Authorization"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(answer["expires_in"].as_u64().unwrap() >= 60);
    let (code, _, err) = ssh.ssh(&ssh.reader, "git-lfs-authenticate org/app.git upload");
    assert_eq!(code, Some(128));
    assert!(err.contains("ERROR:"), "{err}");
    let (code, _, err) = ssh.ssh(&ssh.stranger, "git-lfs-authenticate org/app.git download");
    assert_ne!(code, Some(0), "{err}");
    // the reader's download session lists and downloads, does not upload
    let oid = sha256_hex(&big);
    let port = ssh.server.port();
    let with_session = |body: Vec<u8>| {
        http(
            port,
            "POST",
            "/org/app.git/info/lfs/objects/batch",
            &[("Authorization", auth.as_str())],
            &body,
        )
    };
    let r = with_session(batch("download", &[(&oid, big.len() as u64)]));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(json(&r)["objects"][0]["actions"]["download"].is_object());
    let r = with_session(batch("upload", &[(&oid, big.len() as u64)]));
    assert_eq!(r.status, 403, "{}", r.text());
    // a session of one repository is nothing for another
    let r = http(
        port,
        "POST",
        "/org/other.git/info/lfs/objects/batch",
        &[("Authorization", auth.as_str())],
        &batch("download", &[(&oid, 1)]),
    );
    assert_eq!(r.status, 401, "{}", r.text());
}

/// Issue 48: git-lfs 3's pure-SSH protocol (`git-lfs-transfer`). The
/// server's HTTP side is made unreachable for LFS (its public URL is a
/// closed port): a push, a clone and locks over SSH work through the SSH
/// channel alone, and nothing is refused or logged as a fallback.
#[test]
fn over_ssh_git_lfs_needs_no_http_at_all() {
    let ssh = Ssh::start_with(&["--public-url", "http://127.0.0.1:9"], |_| {});
    let tmp = tempfile::tempdir().unwrap();
    let (work, big, small) = lfs_work(tmp.path(), "work");
    let url = ssh.url("org/app");
    let out = ssh.git(&work, &ssh.dev, &["push", "--quiet", &url, "main"]);
    ok(&out, "push over ssh with LFS files");
    let (objects, owned) = lfs_keys(&ssh.server, "org/app");
    assert_eq!(
        (objects.len(), owned.len()),
        (2, 2),
        "{objects:?} {owned:?}"
    );

    // a clone by the read-only key gets the files' bytes
    let clone = tmp.path().join("clone");
    let out = ssh.git(
        tmp.path(),
        &ssh.reader,
        &["clone", "--quiet", &url, clone.to_str().unwrap()],
    );
    ok(&out, "clone over ssh with LFS files");
    assert_eq!(std::fs::read(clone.join("big.bin")).unwrap(), big);
    assert_eq!(
        std::fs::read(clone.join("assets/small.bin")).unwrap(),
        small
    );

    // locks: taken and listed by the writer, refused to the reader
    git(&work, &["remote", "add", "origin", &url]);
    let out = ssh.git(&work, &ssh.dev, &["lfs", "lock", "assets/small.bin"]);
    ok(&out, "git lfs lock over ssh");
    let out = ssh.git(&work, &ssh.dev, &["lfs", "locks"]);
    ok(&out, "git lfs locks over ssh");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("assets/small.bin") && listed.contains("dev"),
        "{listed}"
    );
    let out = ssh.git(&work, &ssh.dev, &["lfs", "unlock", "assets/small.bin"]);
    ok(&out, "git lfs unlock over ssh");
    let logs = ssh.server.logs();
    for (op, what) in [("upload", "the push"), ("download", "the clone")] {
        assert!(
            logs.contains(&format!("service=\"git-lfs-transfer\" operation=\"{op}\"")),
            "{what} used git-lfs-transfer: {logs}"
        );
    }
    assert!(!logs.contains("command refused"), "{logs}");
    assert!(!logs.contains("git-lfs-authenticate"), "{logs}");
    assert!(
        !logs.contains("info/lfs"),
        "no LFS request over HTTP: {logs}"
    );

    // (a read-only key is refused the lock, then git-lfs tries
    // git-lfs-authenticate, refused too)
    let out = ssh.git(&clone, &ssh.reader, &["lfs", "lock", "big.bin"]);
    assert!(!out.status.success(), "a read-only key took a lock");

    // a key with no token, and a name that does not exist, are refused
    let (code, _, err) = ssh.ssh(&ssh.stranger, "git-lfs-transfer org/app.git download");
    assert_ne!(code, Some(0), "{err}");
    let (code, _, err) = ssh.ssh(&ssh.reader, "git-lfs-transfer org/none.git download");
    assert_eq!(code, Some(128), "{err}");
    assert!(
        err.contains("does not appear to be a git repository") || err.contains("not found"),
        "{err}"
    );

    // a pull mirror takes no LFS uploads (as it takes no pushes), in the
    // push's words; downloads go on
    let from = "http://127.0.0.1:9/upstream.git";
    let o = ssh
        .server
        .store()
        .admin(&["mirror", "add", "org/app", "--from", from]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (code, _, err) = ssh.ssh(&ssh.dev, "git-lfs-transfer org/app.git upload");
    assert_eq!(code, Some(128), "{err}");
    assert!(
        err.contains(&format!("this repository is a pull mirror of {from}")),
        "{err}"
    );
    let (code, _, err) = ssh.ssh(&ssh.reader, "git-lfs-transfer org/app.git download");
    assert_eq!(code, Some(0), "{err}");
}
