use super::*;
use std::process::{Command, Stdio};
use std::sync::Arc;

/// Env var that turns [`cross_process_worker`] into a worker on that dir.
const CHILD_ENV: &str = "GITSTOW_STORE_CHILD";
const COUNTER: &str = "counters/c";

fn store() -> (tempfile::TempDir, FsStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::new(dir.path().join("store")).unwrap();
    (dir, store)
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn lock_dir_entries(store: &FsStore) -> usize {
    fs::read_dir(store.root().join(LOCK_DIR)).unwrap().count()
}

#[test]
fn new_creates_root_and_internal_dirs() {
    let (_dir, store) = store();
    assert!(store.root().join(TMP_DIR).is_dir());
    assert!(store.root().join(LOCK_DIR).is_dir());
    // Reopening an existing root is fine.
    FsStore::new(store.root()).unwrap();
}

#[test]
fn a_root_that_vanished_or_was_replaced_fails_and_is_not_recreated() {
    let (dir, store) = store();
    store.put("r.git/state", b"s", PutCondition::None).unwrap();
    let away = dir.path().join("away");
    fs::rename(store.root(), &away).unwrap();
    let unavailable = |r: Result<()>| {
        let e = r.unwrap_err();
        assert!(crate::is_unavailable(&e), "{e}");
        assert!(e.to_string().contains("is gone"), "{e}");
    };
    unavailable(store.get("r.git/state").map(drop));
    unavailable(store.head("x").map(drop));
    unavailable(store.list("").map(drop));
    unavailable(store.put("r.git/state", b"t", PutCondition::None).map(drop));
    unavailable(store.delete("r.git/state"));
    assert!(!store.root().exists(), "the root was created again");
    // An empty directory mounted in its place is not the store either.
    fs::create_dir(store.root()).unwrap();
    let e = store.get("r.git/state").unwrap_err();
    assert!(e.to_string().contains("was replaced"), "{e}");
    assert!(store.put("a", b"a", PutCondition::None).is_err());
    assert_eq!(fs::read_dir(store.root()).unwrap().count(), 0);
    // Back in place: served again.
    fs::remove_dir(store.root()).unwrap();
    fs::rename(&away, store.root()).unwrap();
    assert_eq!(store.get("r.git/state").unwrap().unwrap().0, b"s");
}

#[test]
fn put_get_head_list_delete_roundtrip() {
    let (_dir, store) = store();
    let etag = store
        .put("repo/state", b"hello", PutCondition::None)
        .unwrap();
    assert_eq!(etag.0, sha256_hex(b"hello"));
    assert_eq!(
        store.get("repo/state").unwrap(),
        Some((b"hello".to_vec(), etag.clone()))
    );
    assert_eq!(
        store.head("repo/state").unwrap(),
        Some(ObjectMeta {
            size: 5,
            etag: etag.clone()
        })
    );
    assert_eq!(fs::read(store.root().join("repo/state")).unwrap(), b"hello");

    // Overwrite, empty object.
    let empty = store.put("repo/state", b"", PutCondition::None).unwrap();
    assert_eq!(empty.0, sha256_hex(b""));
    assert_eq!(
        store.get("repo/state").unwrap(),
        Some((Vec::new(), empty.clone()))
    );
    assert_eq!(store.head("repo/state").unwrap().unwrap().size, 0);

    store.delete("repo/state").unwrap();
    assert_eq!(store.get("repo/state").unwrap(), None);
    assert_eq!(store.head("repo/state").unwrap(), None);
    assert!(store.list("").unwrap().is_empty());
    // Empty parent dirs are pruned; the root stays.
    assert!(!store.root().join("repo").exists());
    assert!(store.root().is_dir());
    // Deleting again is not an error; neither is a never-written key.
    store.delete("repo/state").unwrap();
    store.delete("never/written").unwrap();
    // No writes in flight: temp and lock dirs are empty.
    assert_eq!(in_flight(&store), 0);
    assert_eq!(lock_dir_entries(&store), 0);
}

#[test]
fn absent_objects() {
    let (_dir, store) = store();
    assert_eq!(store.get("nope").unwrap(), None);
    assert_eq!(store.head("a/b/c").unwrap(), None);
    assert!(matches!(
        store.get_range("nope", 0..0),
        Err(Error::NotFound { key }) if key == "nope"
    ));
    // A directory is not an object, nor is a path through a file.
    store.put("dir/obj", b"x", PutCondition::None).unwrap();
    assert_eq!(store.get("dir").unwrap(), None);
    assert_eq!(store.head("dir").unwrap(), None);
    assert!(matches!(
        store.get_range("dir", 0..0),
        Err(Error::NotFound { .. })
    ));
    assert_eq!(store.get("dir/obj/below").unwrap(), None);
    store.delete("dir").unwrap();
    store.delete("dir/obj/below").unwrap();
    assert_eq!(store.list("").unwrap(), vec!["dir/obj"]);
}

#[test]
fn put_file_streams_a_local_file() {
    let (dir, store) = store();
    let src = dir.path().join("upload.bin");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(&src, &data).unwrap();
    let etag = store.put_file("repo/containers/a.bin", &src).unwrap();
    assert_eq!(etag.0, sha256_hex(&data));
    assert_eq!(
        store.get("repo/containers/a.bin").unwrap(),
        Some((data, etag))
    );
    // The source file is left alone.
    assert!(src.exists());
    let missing = store.put_file("k", &dir.path().join("missing"));
    assert!(matches!(missing, Err(Error::Io { key, .. }) if key == "k"));
    assert_eq!(store.get("k").unwrap(), None);
}

#[test]
fn put_file_links_a_regular_file_and_copies_what_a_symlink_names() {
    use std::os::unix::fs::MetadataExt;
    let (dir, store) = store();
    let src = dir.path().join("sealed.bin");
    let data: Vec<u8> = (0..70_000u32).map(|i| (i % 241) as u8).collect();
    fs::write(&src, &data).unwrap();
    let etag = store.put_file("repo/containers/b.bin", &src).unwrap();
    assert_eq!(etag.0, sha256_hex(&data));
    // Linked, not copied: one inode, two names, until the source goes.
    let stored = store.root().join("repo/containers/b.bin");
    assert_eq!(
        fs::metadata(&stored).unwrap().ino(),
        fs::metadata(&src).unwrap().ino()
    );
    fs::remove_file(&src).unwrap();
    assert_eq!(fs::metadata(&stored).unwrap().nlink(), 1);
    assert_eq!(
        store.get("repo/containers/b.bin").unwrap(),
        Some((data.clone(), etag))
    );
    // Nothing is left in the scratch directory.
    assert_eq!(fs::read_dir(store.scratch.path()).unwrap().count(), 0);

    // A symbolic link is never put into the store: what it names is copied.
    let target = dir.path().join("target.bin");
    fs::write(&target, &data).unwrap();
    let link = dir.path().join("link.bin");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    store.put_file("repo/containers/c.bin", &link).unwrap();
    let stored = store.root().join("repo/containers/c.bin");
    assert!(fs::symlink_metadata(&stored).unwrap().file_type().is_file());
    assert_ne!(
        fs::metadata(&stored).unwrap().ino(),
        fs::metadata(&target).unwrap().ino()
    );
    assert_eq!(store.get("repo/containers/c.bin").unwrap().unwrap().0, data);
}

#[test]
fn get_range_into_fills_the_buffer_it_is_given() {
    let (_dir, store) = store();
    store.put("obj", b"0123456789", PutCondition::None).unwrap();
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(b"old");
    let ptr = buf.as_ptr();
    store.get_range_into("obj", 3..7, &mut buf).unwrap();
    assert_eq!((buf.as_slice(), buf.as_ptr()), (&b"3456"[..], ptr));
    store.get_range_into("obj", 5..5, &mut buf).unwrap();
    assert!(buf.is_empty());
    buf.extend_from_slice(b"old");
    assert!(matches!(
        store.get_range_into("obj", 8..11, &mut buf),
        Err(Error::InvalidRange { .. })
    ));
    assert!(buf.is_empty());
    assert!(matches!(
        store.get_range_into("absent", 0..1, &mut buf),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn get_range_bounds() {
    let (_dir, store) = store();
    store.put("obj", b"0123456789", PutCondition::None).unwrap();
    assert_eq!(store.get_range("obj", 0..10).unwrap(), b"0123456789");
    assert_eq!(store.get_range("obj", 3..7).unwrap(), b"3456");
    assert_eq!(store.get_range("obj", 9..10).unwrap(), b"9");
    assert_eq!(store.get_range("obj", 4..4).unwrap(), b"");
    assert_eq!(store.get_range("obj", 10..10).unwrap(), b"");

    let invalid = |range: Range<u64>| match store.get_range("obj", range.clone()) {
        Err(Error::InvalidRange {
            key,
            start,
            end,
            size,
        }) => {
            assert_eq!(
                (key.as_str(), start, end, size),
                ("obj", range.start, range.end, 10)
            );
        }
        other => panic!("{range:?}: expected InvalidRange, got {other:?}"),
    };
    invalid(0..11);
    invalid(10..11);
    invalid(11..11);
    invalid(5..u64::MAX);
    #[allow(clippy::reversed_empty_ranges)]
    invalid(7..3);
    #[allow(clippy::reversed_empty_ranges)]
    invalid(u64::MAX..0);
}

#[test]
fn list_is_sorted_recursive_and_by_plain_prefix() {
    let (_dir, store) = store();
    for key in [
        "repo/state",
        "repo/containers/b.bin",
        "repo/containers/a.idx",
        "repo/containers/a.bin",
        "repo/config",
        "repo2/state",
        "other",
        "a",
    ] {
        store.put(key, key.as_bytes(), PutCondition::None).unwrap();
    }
    assert_eq!(
        store.list("").unwrap(),
        [
            "a",
            "other",
            "repo/config",
            "repo/containers/a.bin",
            "repo/containers/a.idx",
            "repo/containers/b.bin",
            "repo/state",
            "repo2/state"
        ]
    );
    assert_eq!(
        store.list("repo/").unwrap(),
        [
            "repo/config",
            "repo/containers/a.bin",
            "repo/containers/a.idx",
            "repo/containers/b.bin",
            "repo/state"
        ]
    );
    assert_eq!(store.list("repo").unwrap().len(), 6);
    assert_eq!(store.list("repo/con").unwrap().len(), 4);
    assert_eq!(
        store.list("repo/containers/a").unwrap(),
        ["repo/containers/a.bin", "repo/containers/a.idx"]
    );
    assert_eq!(store.list("repo/state").unwrap(), ["repo/state"]);
    assert_eq!(store.list("a").unwrap(), ["a"]);
    assert!(store.list("repo/nothing/").unwrap().is_empty());
    assert!(store.list("zzz").unwrap().is_empty());
    // A path through an object, and prefixes no valid key can have.
    assert!(store.list("a/").unwrap().is_empty());
    assert!(store.list("../").unwrap().is_empty());
    assert!(store.list("repo//").unwrap().is_empty());
    assert!(store.list("/repo").unwrap().is_empty());
    assert!(store.list(".gitstow").unwrap().is_empty());
    assert!(store.list(".gitstow-locks/").unwrap().is_empty());
}

#[test]
fn list_skips_internal_files_and_writes_in_flight() {
    let (_dir, store) = store();
    store.put("k", b"v", PutCondition::None).unwrap();
    // A temp file left by a crashed writer and a held lock are invisible.
    fs::write(store.root().join(TMP_DIR).join("put-crashed"), b"partial").unwrap();
    let _lock = KeyLock::acquire(&store.root().join(LOCK_DIR), "k2").unwrap();
    assert_eq!(lock_dir_entries(&store), 1);
    assert_eq!(store.list("").unwrap(), ["k"]);
    assert_eq!(store.list(".").unwrap(), Vec::<String>::new());
}

#[test]
fn every_operation_rejects_invalid_keys() {
    let (dir, store) = store();
    let src = dir.path().join("src");
    fs::write(&src, b"x").unwrap();
    for key in [
        "",
        "/abs",
        "trailing/",
        "a//b",
        "./a",
        "a/..",
        "../escape",
        "nul\0",
        "ctl\x1b",
        "back\\slash",
        ".gitstow-tmp/x",
        ".gitstow-locks/x",
        &"k".repeat(crate::MAX_KEY_LEN + 1),
    ] {
        let invalid = |r: Result<()>| {
            assert!(
                matches!(&r, Err(Error::InvalidKey { key: k, .. }) if k == key),
                "{key:?}: {r:?}"
            )
        };
        invalid(store.put(key, b"x", PutCondition::None).map(drop));
        invalid(store.put(key, b"x", PutCondition::IfAbsent).map(drop));
        invalid(store.put_file(key, &src).map(drop));
        invalid(store.get(key).map(drop));
        invalid(store.get_range(key, 0..0).map(drop));
        invalid(store.head(key).map(drop));
        invalid(store.delete(key));
    }
    assert!(store.list("").unwrap().is_empty());
    assert!(!dir.path().join("escape").exists());
}

#[test]
fn key_that_is_also_a_directory_is_an_io_error() {
    let (_dir, store) = store();
    store.put("a/b", b"1", PutCondition::None).unwrap();
    assert!(matches!(
        store.put("a", b"2", PutCondition::None),
        Err(Error::Io { .. })
    ));
    store.put("c", b"1", PutCondition::None).unwrap();
    assert!(matches!(
        store.put("c/d", b"2", PutCondition::None),
        Err(Error::Io { .. })
    ));
    assert_eq!(store.list("").unwrap(), ["a/b", "c"]);
    assert_eq!(in_flight(&store), 0);
}

#[test]
fn if_absent() {
    let (_dir, store) = store();
    let etag = store.put("k", b"first", PutCondition::IfAbsent).unwrap();
    let again = store.put("k", b"second", PutCondition::IfAbsent);
    assert!(matches!(again, Err(Error::PreconditionFailed { key }) if key == "k"));
    assert_eq!(store.get("k").unwrap(), Some((b"first".to_vec(), etag)));
    // Nothing of the failed write is left behind.
    assert_eq!(in_flight(&store), 0);
    // After a delete the key is absent again.
    store.delete("k").unwrap();
    store.put("k", b"third", PutCondition::IfAbsent).unwrap();
}

#[test]
fn if_match() {
    let (_dir, store) = store();
    let v1 = store.put("k", b"one", PutCondition::None).unwrap();
    let v2 = store
        .put("k", b"two", PutCondition::IfMatch(v1.clone()))
        .unwrap();
    assert_ne!(v1, v2);
    assert_eq!(store.head("k").unwrap().unwrap().etag, v2);

    let stale = store.put("k", b"three", PutCondition::IfMatch(v1));
    assert!(matches!(stale, Err(Error::PreconditionFailed { key }) if key == "k"));
    assert_eq!(store.get("k").unwrap(), Some((b"two".to_vec(), v2.clone())));

    // IfMatch on an absent key fails.
    let absent = store.put("absent", b"x", PutCondition::IfMatch(v2.clone()));
    assert!(matches!(absent, Err(Error::PreconditionFailed { .. })));
    assert_eq!(store.get("absent").unwrap(), None);

    // Writing the same bytes keeps the etag (content hash).
    let v2_again = store
        .put("k", b"two", PutCondition::IfMatch(v2.clone()))
        .unwrap();
    assert_eq!(v2_again, v2);
    assert_eq!(in_flight(&store), 0);
    assert_eq!(lock_dir_entries(&store), 0);
}

/// One read-modify-write increment of the decimal counter at `key`,
/// retried on lost races. Returns how many attempts it took.
fn increment(store: &dyn ObjectStore, key: &str) -> usize {
    for attempt in 1.. {
        let (value, condition) = match store.get(key).unwrap() {
            Some((data, etag)) => {
                let value: u64 = std::str::from_utf8(&data).unwrap().parse().unwrap();
                (value, PutCondition::IfMatch(etag))
            }
            None => (0, PutCondition::IfAbsent),
        };
        let next = (value + 1).to_string();
        match store.put(key, next.as_bytes(), condition) {
            Ok(_) => return attempt,
            Err(Error::PreconditionFailed { .. }) => continue,
            Err(e) => panic!("increment failed: {e}"),
        }
    }
    unreachable!()
}

fn counter_value(store: &dyn ObjectStore) -> u64 {
    let (data, _) = store.get(COUNTER).unwrap().unwrap();
    std::str::from_utf8(&data).unwrap().parse().unwrap()
}

#[test]
fn thread_race_on_if_match_loses_no_update() {
    const THREADS: usize = 16;
    const INCREMENTS: usize = 50;
    let (_dir, store) = store();
    let store = Arc::new(store);
    let attempts: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let store = Arc::clone(&store);
                s.spawn(move || {
                    (0..INCREMENTS)
                        .map(|_| increment(&*store, COUNTER))
                        .sum::<usize>()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(counter_value(&*store), (THREADS * INCREMENTS) as u64);
    assert!(attempts >= THREADS * INCREMENTS);
    assert_eq!(in_flight(&store), 0);
    assert_eq!(lock_dir_entries(&store), 0);
}

#[test]
fn process_race_on_if_match_loses_no_update() {
    const PROCESSES: usize = 4;
    const INCREMENTS: u64 = 50;
    let (_dir, store) = store();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "fs::tests::cross_process_worker",
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, store.root())
                .env("GITSTOW_STORE_CHILD_INCREMENTS", INCREMENTS.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "worker failed: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Guard against the filter matching nothing (a renamed test).
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("1 passed"), "worker did not run:\n{stdout}");
    }
    assert_eq!(counter_value(&store), PROCESSES as u64 * INCREMENTS);
    assert_eq!(lock_dir_entries(&store), 0);
}

/// Worker half of [`process_race_on_if_match_loses_no_update`]: a no-op
/// unless `GITSTOW_STORE_CHILD=<store root>` is set, then increments the
/// counter there `GITSTOW_STORE_CHILD_INCREMENTS` times.
#[test]
fn cross_process_worker() {
    let Some(root) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let increments: usize = std::env::var("GITSTOW_STORE_CHILD_INCREMENTS")
        .unwrap()
        .parse()
        .unwrap();
    let store = FsStore::new(root).unwrap();
    for _ in 0..increments {
        increment(&store, COUNTER);
    }
}

#[test]
fn ranged_reads_of_containers_keep_files_open_and_follow_writes() {
    let (_dir, store) = store();
    let key = "r.git/containers/ab.bin";
    store.put(key, b"0123456789", PutCondition::None).unwrap();
    assert_eq!(store.get_range(key, 2..5).unwrap(), b"234");
    // Served from the open-file table: the same bytes, and the bound checks still hold.
    assert_eq!(store.get_range(key, 0..10).unwrap(), b"0123456789");
    assert!(matches!(
        store.get_range(key, 5..11),
        Err(Error::InvalidRange { size: 10, .. })
    ));
    // A write or delete through this store drops the open file.
    store.put(key, b"abcdef", PutCondition::None).unwrap();
    assert_eq!(store.get_range(key, 0..6).unwrap(), b"abcdef");
    store.delete(key).unwrap();
    assert!(matches!(
        store.get_range(key, 0..1),
        Err(Error::NotFound { .. })
    ));
    // More containers than the table holds: every read still answers.
    for i in 0..(OPEN_FILES + 8) {
        let k = format!("r.git/containers/{i}.bin");
        store
            .put(&k, format!("{i:04}").as_bytes(), PutCondition::None)
            .unwrap();
        assert_eq!(
            store.get_range(&k, 0..4).unwrap(),
            format!("{i:04}").as_bytes()
        );
    }
    assert_eq!(
        store.get_range("r.git/containers/0.bin", 0..4).unwrap(),
        b"0000"
    );
}

#[test]
fn if_none_match_reads_only_a_new_version() {
    let (_dir, store) = store();
    let v1 = store.put("r/state", b"v1", PutCondition::IfAbsent).unwrap();
    assert_eq!(
        store.get_if_none_match("r/state", &v1).unwrap(),
        crate::IfNoneMatch::Unchanged
    );
    let v2 = store
        .put("r/state", b"v2", PutCondition::IfMatch(v1.clone()))
        .unwrap();
    assert_eq!(
        store.get_if_none_match("r/state", &v1).unwrap(),
        crate::IfNoneMatch::Changed(b"v2".to_vec(), v2.clone())
    );
    assert_eq!(
        store.get_if_none_match("r/absent", &v2).unwrap(),
        crate::IfNoneMatch::Absent
    );
}

/// Temp files of writes in flight: the entries of the store's own scratch
/// directory under `.gitstow-tmp/`.
fn in_flight(store: &FsStore) -> usize {
    fs::read_dir(store.scratch.path()).unwrap().count()
}
