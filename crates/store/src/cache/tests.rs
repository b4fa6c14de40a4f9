use super::*;
use crate::FsStore;
use std::sync::atomic::AtomicUsize;

/// Counts reads that reach the inner store.
#[derive(Debug)]
struct Counting {
    inner: FsStore,
    reads: AtomicUsize,
    heads: AtomicUsize,
}

impl ObjectStore for Counting {
    fn put(&self, key: &str, data: &[u8], c: PutCondition) -> Result<ETag> {
        self.inner.put(key, data, c)
    }
    fn put_file(&self, key: &str, path: &Path) -> Result<ETag> {
        self.inner.put_file(key, path)
    }
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.get_range(key, range)
    }
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        self.heads.fetch_add(1, Ordering::SeqCst);
        self.inner.head(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)
    }
}

fn immutable(key: &str) -> bool {
    key.ends_with(".bin") || key.ends_with(".idx")
}

fn setup(max: u64) -> (tempfile::TempDir, Arc<Counting>, CachedStore) {
    let dir = tempfile::tempdir().unwrap();
    let inner = Arc::new(Counting {
        inner: FsStore::new(dir.path().join("store")).unwrap(),
        reads: AtomicUsize::new(0),
        heads: AtomicUsize::new(0),
    });
    let cached = CachedStore::new(inner.clone(), dir.path().join("cache"), max, immutable);
    (dir, inner, cached)
}

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn immutable_reads_are_served_locally_after_the_first() {
    let (_d, inner, cached) = setup(1 << 20);
    let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    inner
        .put("r/containers/a.bin", &data, PutCondition::None)
        .unwrap();
    assert_eq!(
        cached.get_range("r/containers/a.bin", 10..20).unwrap(),
        &data[10..20]
    );
    let reads = inner.reads.load(Ordering::SeqCst);
    assert_eq!(reads, 1, "one whole download");
    for _ in 0..5 {
        assert_eq!(
            cached.get_range("r/containers/a.bin", 100..9000).unwrap(),
            &data[100..9000]
        );
    }
    let (all, etag) = cached.get("r/containers/a.bin").unwrap().unwrap();
    assert_eq!(all, data);
    assert_eq!(
        cached.head("r/containers/a.bin").unwrap().unwrap().etag,
        etag
    );
    assert_eq!(
        inner.reads.load(Ordering::SeqCst),
        reads,
        "no more inner reads"
    );
    let s = cached.cache_stats();
    assert_eq!((s.misses, s.hits, s.objects, s.bytes), (1, 7, 1, 10_000));
    assert!(matches!(
        cached.get_range("r/containers/a.bin", 9000..10_001),
        Err(Error::InvalidRange { size: 10_000, .. })
    ));
    assert!(cached
        .get_range("r/containers/a.bin", 10_000..10_000)
        .unwrap()
        .is_empty());
}

#[test]
fn get_range_into_fills_the_callers_buffer_from_the_local_copy() {
    let (_d, inner, cached) = setup(1 << 20);
    let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
    inner
        .put("r/containers/b.bin", &data, PutCondition::None)
        .unwrap();
    let mut buf = Vec::with_capacity(4096);
    let ptr = buf.as_ptr();
    for range in [10..20u64, 500..4000, 0..1] {
        buf.extend_from_slice(b"stale");
        cached
            .get_range_into("r/containers/b.bin", range.clone(), &mut buf)
            .unwrap();
        assert_eq!(buf, &data[range.start as usize..range.end as usize]);
    }
    assert_eq!(buf.as_ptr(), ptr, "the caller's buffer, not a new one");
    assert_eq!(inner.reads.load(Ordering::SeqCst), 1, "one whole download");
    buf.extend_from_slice(b"stale");
    assert!(matches!(
        cached.get_range_into("r/containers/b.bin", 9000..10_001, &mut buf),
        Err(Error::InvalidRange { size: 10_000, .. })
    ));
    assert!(buf.is_empty());
}

#[test]
fn mutable_keys_pass_through() {
    let (_d, inner, cached) = setup(1 << 20);
    cached
        .put("r/state", b"v1", PutCondition::IfAbsent)
        .unwrap();
    for _ in 0..3 {
        assert_eq!(cached.get("r/state").unwrap().unwrap().0, b"v1");
    }
    assert_eq!(inner.reads.load(Ordering::SeqCst), 3);
    assert_eq!(cached.cache_stats().objects, 0);
}

#[test]
fn absent_immutable_keys() {
    let (_d, _inner, cached) = setup(1 << 20);
    assert_eq!(cached.get("r/containers/x.bin").unwrap(), None);
    assert!(matches!(
        cached.get_range("r/containers/x.bin", 0..1),
        Err(Error::NotFound { .. })
    ));
    assert_eq!(cached.head("r/containers/x.bin").unwrap(), None);
}

#[test]
fn eviction_keeps_the_directory_under_the_bound() {
    let (d, inner, cached) = setup(25_000);
    for i in 0..10 {
        let key = format!("r/containers/{i}.bin");
        inner
            .put(&key, &vec![i as u8; 10_000], PutCondition::None)
            .unwrap();
        assert_eq!(cached.get_range(&key, 0..1).unwrap(), [i as u8]);
        assert!(dir_bytes(&d.path().join("cache")) <= 25_000);
    }
    let s = cached.cache_stats();
    assert_eq!((s.objects, s.bytes, s.evictions), (2, 20_000, 8));
    // The most recently used survive.
    let before = inner.reads.load(Ordering::SeqCst);
    cached.get_range("r/containers/9.bin", 0..1).unwrap();
    cached.get_range("r/containers/8.bin", 0..1).unwrap();
    assert_eq!(inner.reads.load(Ordering::SeqCst), before);
}

#[test]
fn objects_larger_than_the_cache_are_read_through() {
    let (d, inner, cached) = setup(1000);
    inner
        .put("r/containers/big.bin", &[7; 5000], PutCondition::None)
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            cached.get_range("r/containers/big.bin", 10..12).unwrap(),
            [7, 7]
        );
    }
    assert_eq!(inner.reads.load(Ordering::SeqCst), 3);
    assert_eq!(
        inner.heads.load(Ordering::SeqCst),
        1,
        "the size is remembered"
    );
    assert_eq!(dir_bytes(&d.path().join("cache")), 0);
    assert_eq!(cached.cache_stats().read_through, 3);
}

#[test]
fn writes_populate_and_deletes_drop() {
    let (d, inner, cached) = setup(1 << 20);
    let etag = cached
        .put("r/containers/p.idx", b"index", PutCondition::None)
        .unwrap();
    let file = d.path().join("upload");
    fs::write(&file, b"container bytes").unwrap();
    cached.put_file("r/containers/p.bin", &file).unwrap();
    assert_eq!(cached.cache_stats().populated, 2);
    assert_eq!(
        cached.get("r/containers/p.idx").unwrap().unwrap(),
        (b"index".to_vec(), etag)
    );
    assert_eq!(
        cached.get_range("r/containers/p.bin", 0..9).unwrap(),
        b"container"
    );
    assert_eq!(inner.reads.load(Ordering::SeqCst), 0);
    cached.delete("r/containers/p.bin").unwrap();
    assert_eq!(cached.get("r/containers/p.bin").unwrap(), None);
    assert_eq!(cached.cache_stats().objects, 1);
}

#[test]
fn a_restart_adopts_the_files() {
    let (d, inner, cached) = setup(1 << 20);
    inner
        .put("r/containers/a.bin", b"abc", PutCondition::None)
        .unwrap();
    cached.get("r/containers/a.bin").unwrap();
    fs::write(d.path().join("cache").join(".tmp-leftover"), b"x").unwrap();
    drop(cached);
    let again = CachedStore::new(inner.clone(), d.path().join("cache"), 1 << 20, immutable);
    assert_eq!(again.cache_stats().objects, 1);
    assert!(!d.path().join("cache/.tmp-leftover").exists());
    let reads = inner.reads.load(Ordering::SeqCst);
    assert_eq!(again.get("r/containers/a.bin").unwrap().unwrap().0, b"abc");
    assert_eq!(inner.reads.load(Ordering::SeqCst), reads);
}

/// Files found at start are checked against the store (size and ETag, one
/// HEAD) on their first read: a copy cut short or replaced while no process
/// held the directory is dropped and the object read again; a sound copy
/// is served without a second HEAD.
#[test]
fn adopted_files_are_checked_on_their_first_read() {
    let (d, inner, cached) = setup(1 << 20);
    for key in ["r/containers/a.bin", "r/containers/b.bin"] {
        inner.put(key, b"abcdef", PutCondition::None).unwrap();
        cached.get(key).unwrap();
    }
    drop(cached);
    // Cut one copy short.
    let cache = d.path().join("cache");
    let cut = fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(&key_name("r/containers/a.bin"))
        })
        .unwrap();
    fs::write(&cut, b"abc").unwrap();
    let again = CachedStore::new(inner.clone(), cache, 1 << 20, immutable);
    let (reads, heads) = (
        inner.reads.load(Ordering::SeqCst),
        inner.heads.load(Ordering::SeqCst),
    );
    assert_eq!(
        again.get("r/containers/a.bin").unwrap().unwrap().0,
        b"abcdef"
    );
    assert_eq!(again.get_range("r/containers/a.bin", 3..6).unwrap(), b"def");
    assert_eq!(
        inner.reads.load(Ordering::SeqCst),
        reads + 1,
        "read again once"
    );
    for _ in 0..3 {
        assert_eq!(
            again.get("r/containers/b.bin").unwrap().unwrap().0,
            b"abcdef"
        );
    }
    assert_eq!(
        inner.reads.load(Ordering::SeqCst),
        reads + 1,
        "b is served locally"
    );
    // a: a HEAD to check, one to size the download; b: one to check.
    assert_eq!(inner.heads.load(Ordering::SeqCst), heads + 3);
    // A copy a reader found damaged is dropped and read again.
    again.discard_local_copy("r/containers/b.bin");
    again.get("r/containers/b.bin").unwrap();
    assert_eq!(inner.reads.load(Ordering::SeqCst), reads + 2);
}

#[test]
fn concurrent_first_reads() {
    let (_d, inner, cached) = setup(1 << 20);
    inner
        .put("r/containers/c.bin", &[3; 50_000], PutCondition::None)
        .unwrap();
    let cached = Arc::new(cached);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let c = cached.clone();
            std::thread::spawn(move || c.get_range("r/containers/c.bin", 0..50_000).unwrap())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), vec![3; 50_000]);
    }
    let s = cached.cache_stats();
    assert_eq!((s.objects, s.bytes), (1, 50_000));
}

#[test]
fn unusable_dir_reads_through() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    fs::write(&blocker, b"").unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(FsStore::new(dir.path().join("s")).unwrap());
    inner.put("a.bin", b"data", PutCondition::None).unwrap();
    let cached = CachedStore::new(inner, blocker.join("cache"), 1 << 20, immutable);
    assert_eq!(cached.get("a.bin").unwrap().unwrap().0, b"data");
    assert_eq!(cached.cache_stats().read_through, 1);
}

#[test]
fn file_names_round_trip() {
    let name = key_name("r/containers/a.bin");
    let etag = ETag("9b2cf535f27731c974343645a3985328-3".into());
    let file = file_name(&name, &etag).unwrap();
    assert_eq!(parse_file_name(&file), Some((name.clone(), etag)));
    assert_eq!(parse_file_name(".tmp-x"), None);
    assert_eq!(file_name(&name, &ETag("x".repeat(200))), None);
    let dir = default_cache_dir("s3://a/p");
    let uid = unsafe { libc::geteuid() };
    assert!(dir.starts_with(std::env::temp_dir().join(format!("gitstow-cache-{uid}"))));
    assert_eq!(dir, default_cache_dir("s3://a/p"));
    assert_ne!(dir, default_cache_dir("s3://b/p"));
}

/// Two processes (here: two caches) on one default directory: the second
/// takes a directory of its own; once the first is gone, its directory is
/// taken again.
#[test]
fn each_cache_claims_a_directory_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(FsStore::new(tmp.path().join("store")).unwrap());
    let dir = tmp.path().join("cache");
    let first = CachedStore::new(inner.clone(), dir.clone(), 1 << 20, immutable);
    let second = CachedStore::new(inner.clone(), dir.clone(), 1 << 20, immutable);
    assert_eq!(first.dir(), dir.as_path());
    assert_eq!(second.dir(), tmp.path().join("cache-1").as_path());
    drop(first);
    let third = CachedStore::new(inner, dir.clone(), 1 << 20, immutable);
    assert_eq!(third.dir(), dir.as_path());
}

/// Hardening, finding 11: a cache directory is made private (0700) and a
/// link in its place is not used: files there would be trusted as the
/// store's objects, so the cache reads through instead.
#[test]
fn the_cache_directory_is_private_and_never_a_link() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(FsStore::new(tmp.path().join("store")).unwrap());
    inner
        .put("r/containers/a.bin", b"bytes", crate::PutCondition::None)
        .unwrap();
    let open = tmp.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let cached = CachedStore::new(inner.clone(), open.clone(), 1 << 20, immutable);
    let mode = fs::metadata(&open).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "made private");
    assert_eq!(
        cached.get("r/containers/a.bin").unwrap().unwrap().0,
        b"bytes"
    );
    assert_eq!(cached.cache_stats().objects, 1, "cached there");

    let real = tmp.path().join("elsewhere");
    fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let cached = CachedStore::new(inner, link, 1 << 20, immutable);
    assert_eq!(
        cached.get("r/containers/a.bin").unwrap().unwrap().0,
        b"bytes"
    );
    let stats = cached.cache_stats();
    assert_eq!(stats.objects, 0, "nothing cached through a link");
    assert_eq!(stats.read_through, 1);
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0);
}
