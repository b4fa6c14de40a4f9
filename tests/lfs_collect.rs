//! Git LFS collection (`gitstow maintain --all`) and fsck: what nothing
//! reaches goes after the grace period and only then, a push in flight keeps
//! what it uploaded, a pointer whose object never came is reported.

mod common;

use common::*;

#[test]
fn collection_drops_only_what_nothing_reaches_after_the_grace_period() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, reader) = start();
    let work = tmp.path().join("work");
    init_repo(&work);
    lfs_installed(&work);
    git(&work, &["lfs", "track", "*.bin"]);
    let (a, b, c) = (noise(5000, 21), noise(6000, 22), noise(7000, 23));
    std::fs::write(work.join("a.bin"), &a).unwrap();
    commit_files(&work, &[("README", "one\n")], "a");
    let url = server.url("org/app");
    let as_writer = git_as(&server, tmp.path(), &writer);
    git_ok(&work, &as_writer, &["push", "--quiet", &url, "main"]);
    git(&work, &["checkout", "--quiet", "-b", "topic"]);
    std::fs::write(work.join("b.bin"), &b).unwrap();
    commit_files(&work, &[("README", "two\n")], "b");
    git_ok(&work, &as_writer, &["push", "--quiet", &url, "topic"]);
    // b.bin's pointer leaves the history: the branch is deleted
    git_ok(&work, &as_writer, &["push", "--quiet", &url, ":topic"]);
    git(&work, &["checkout", "--quiet", "main"]);
    // objects uploaded to a repository nobody pushed to
    git_ok(
        &work,
        &as_writer,
        &["lfs", "push", &server.url("org/ghost"), "main"],
    );
    // a presigned upload never verified, its grant long expired
    let store = server.store().open();
    let c_oid = sha256_hex(&c);
    let abandoned = format!(".gitstow/lfs/staging/{c_oid}/1000-{}", "ab".repeat(16));
    store
        .put(&abandoned, &c, gitstow_store::PutCondition::None)
        .unwrap();
    let (a_oid, b_oid) = (sha256_hex(&a), sha256_hex(&b));
    let has_object = |oid: &str| {
        server
            .store_keys()
            .iter()
            .any(|k| k.starts_with(".gitstow/lfs/objects/") && k.ends_with(oid))
    };

    // a grace period of an hour: only the abandoned upload goes
    let out = server.store().maintain(&["--all", "--grace", "3600"], &[]);
    let said = assert_maintained(&out);
    assert!(said.contains("dropped 0 claims no pointer needs, 0 objects (0 bytes) no repository claims, 1 abandoned uploads"), "{said}");
    assert!(has_object(&b_oid));
    assert!(!server.store_keys().contains(&abandoned));

    // no grace: GC drops b.bin's pointer, then the claims to b.bin (org/app)
    // and to a.bin (org/ghost, which does not exist) go; the unclaimed
    // object waits for the next run
    let out = server
        .store()
        .maintain(&["--all", "--grace", "0", "--gc"], &[]);
    let said = assert_maintained(&out);
    assert!(said.contains("dropped 2 claims no pointer needs"), "{said}");
    assert!(said.contains("1 unclaimed objects held"), "{said}");
    assert_eq!(
        lfs_keys(&server, "org/app").1,
        vec![format!("org/app.git/lfs/objects/{a_oid}")]
    );
    assert!(lfs_keys(&server, "org/ghost").1.is_empty());
    assert!(has_object(&b_oid));
    let out = server.store().maintain(&["--all", "--grace", "0"], &[]);
    let said = assert_maintained(&out);
    assert!(
        said.contains("1 objects (6000 bytes) no repository claims"),
        "{said}"
    );
    assert!(!has_object(&b_oid) && has_object(&a_oid));
    // what the history reaches still clones
    let clone = tmp.path().join("clone");
    let as_reader = git_as(&server, tmp.path(), &reader);
    git_ok(
        tmp.path(),
        &as_reader,
        &["clone", "--quiet", &url, clone.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(clone.join("a.bin")).unwrap(), a);
}

#[test]
fn fsck_reports_a_pointer_whose_object_never_came() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, _reader) = start();
    let (work, big, small) = lfs_work(tmp.path(), "work");
    let url = server.url("org/app");
    let as_writer = git_as(&server, tmp.path(), &writer);
    git_ok(&work, &as_writer, &["push", "--quiet", &url, "main"]);
    let o = server.store().admin(&["fsck", "--repo", "org/app"]);
    assert!(o.status.success(), "{o:?}");
    // a push that skips git-lfs's hook: the pointer lands, its object not
    let extra = noise(2000, 31);
    std::fs::write(work.join("extra.bin"), &extra).unwrap();
    commit_files(&work, &[("README", "more\n")], "extra");
    git_ok(
        &work,
        &as_writer,
        &["push", "--quiet", "--no-verify", &url, "main"],
    );
    let o = server.store().admin(&["fsck", "--repo", "org/app"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains(&format!("missing LFS object {}", sha256_hex(&extra))),
        "{said}"
    );
    assert!(
        !said.contains(&sha256_hex(&big)) && !said.contains(&sha256_hex(&small)),
        "{said}"
    );
}

#[test]
fn a_retried_push_renews_the_claim_collection_would_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, _reader) = start();
    let (work, big, _) = lfs_work(tmp.path(), "work");
    let url = server.url("org/race");
    let as_writer = git_as(&server, tmp.path(), &writer);
    // the upload of a push whose ref update did not happen
    git_ok(&work, &as_writer, &["lfs", "push", &url, "main"]);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // the retry: its batch finds the objects there, uploads nothing, and
    // renews the claims; a collection now keeps them
    git_ok(&work, &as_writer, &["lfs", "push", &url, "main"]);
    let out = server.store().maintain(&["--all", "--grace", "2"], &[]);
    let said = assert_maintained(&out);
    assert!(said.contains("dropped 0 claims"), "{said}");
    git_ok(
        &work,
        &as_writer,
        &["push", "--quiet", "--no-verify", &url, "main"],
    );
    let o = server.store().admin(&["fsck", "--repo", "org/race"]);
    assert!(o.status.success(), "{o:?}");
    assert!(lfs_keys(&server, "org/race")
        .1
        .iter()
        .any(|k| k.ends_with(&sha256_hex(&big))));
}

/// Issue 42, finding 7: pointers git-lfs reads but the collector did not
/// (CRLF line ends, as a Windows checkout with `core.autocrlf` commits
/// them; the alpha `git-media` version line) lost their objects to
/// collection, and fresh clones got empty files. Now the collector reads
/// them as git-lfs does, and keeps their objects.
#[test]
fn collection_keeps_the_objects_of_pointers_git_lfs_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, writer, _reader) = start();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("README", "one\n")], "one");
    let url = server.url("org/app");
    let as_writer = git_as(&server, tmp.path(), &writer);
    git_ok(&work, &as_writer, &["push", "--quiet", &url, "main"]);
    let mut oids = Vec::new();
    let mut files = Vec::new();
    for (i, version) in [
        "https://git-lfs.github.com/spec/v1",
        "http://git-media.io/v/2",
    ]
    .iter()
    .enumerate()
    {
        let data = noise(3000 + i, 31 + i as u64);
        let oid = sha256_hex(&data);
        let up = json(&post_batch(
            &server,
            "org/app",
            Some(&writer),
            &batch("upload", &[(&oid, data.len() as u64)]),
        ));
        assert_eq!(
            Act::of(&up, 0, "upload").send("PUT", true, &data).status,
            200
        );
        if up["objects"][0]["actions"].get("verify").is_some() {
            let verify =
                serde_json::to_vec(&serde_json::json!({"oid": oid, "size": data.len()})).unwrap();
            assert_eq!(
                Act::of(&up, 0, "verify").send("POST", true, &verify).status,
                200
            );
        }
        // Committed as a plain blob, its lines ending in CRLF.
        let pointer = format!(
            "version {version}\r\noid sha256:{oid}\r\nsize {}\r\n",
            data.len()
        );
        files.push((format!("f{i}.bin"), pointer));
        oids.push(oid);
    }
    let named: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_str()))
        .collect();
    commit_files(&work, &named, "pointers with CRLF");
    git_ok(&work, &as_writer, &["push", "--quiet", &url, "main"]);
    for _ in 0..2 {
        let out = server
            .store()
            .maintain(&["--all", "--grace", "0", "--gc"], &[]);
        assert_maintained(&out);
    }
    let claimed = lfs_keys(&server, "org/app").1;
    for oid in &oids {
        assert!(
            claimed.contains(&format!("org/app.git/lfs/objects/{oid}")),
            "{oid}: {claimed:?}"
        );
        assert!(
            server
                .store_keys()
                .iter()
                .any(|k| k.starts_with(".gitstow/lfs/objects/") && k.ends_with(oid.as_str())),
            "{oid} was collected"
        );
    }
}
