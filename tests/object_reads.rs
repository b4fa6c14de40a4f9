//! Reads through a small object cache: the cache empties many times over
//! and later reads fill the buffers of the objects it dropped
//! (`ObjectCache`'s spares), so a reused buffer that kept stale bytes, or a
//! length left over from an earlier object, would show as an object whose
//! bytes no longer hash to its id.

mod common;

use common::*;

/// The store the test reads through: as `gitstow serve` reads, an S3 store
/// through a local copy of its containers (a range read of S3 per record
/// would make a read of every object take minutes), the local store as it
/// is. `dir` holds the copy.
fn reading_store(
    server: &Server,
    dir: &std::path::Path,
) -> std::sync::Arc<dyn gitstow_store::ObjectStore> {
    let store = server.store().open();
    match server.store() {
        TestStore::S3 { .. } => std::sync::Arc::new(gitstow_store::CachedStore::new(
            store,
            dir.to_owned(),
            1 << 30,
            |key| key.ends_with(".bin") || key.ends_with(".idx"),
        )),
        TestStore::Fs(_) => store,
    }
}

/// The id git gives an object of `kind` with `data`
/// (`gitformat-object`: the SHA-1 of "<kind> <size>\0" and the bytes).
fn object_id(kind: &str, data: &[u8]) -> gix_hash::ObjectId {
    let mut h = gix_hash::hasher(gix_hash::Kind::Sha1);
    h.update(format!("{kind} {}\0", data.len()).as_bytes());
    h.update(data);
    h.try_finalize().unwrap()
}

/// A server without maintenance holding repository `name`: a histgen
/// history of `commits` commits from `seed`, pushed with `--mirror`; with
/// its state and a scratch directory.
fn pushed(
    name: &str,
    seed: u64,
    commits: usize,
) -> (Server, tempfile::TempDir, gitstow_odb::RepoState) {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed,
            commits,
            ..Default::default()
        },
    );
    git(&src, &["push", "--quiet", "--mirror", &server.url(name)]);
    let state = server.store().repo_state(name).unwrap();
    (server, tmp, state)
}

#[test]
fn every_object_read_through_a_small_cache_hashes_to_its_id() {
    let (server, tmp, state) = pushed("reads", 31, 150);
    let repo = gitstow_odb::Repository::new(
        reading_store(&server, &tmp.path().join("copy")),
        "reads",
        gitstow_odb::IndexCache::new(),
    );
    let db = repo.objects(&state).unwrap();
    let entries: Vec<_> = db.entries().collect();
    let deltas = entries.iter().filter(|e| e.base.is_some()).count();
    assert!(deltas > 100, "{deltas} deltas of {}", entries.len());
    // A cache of 32 KiB: histgen's trees and blobs fill it every few reads.
    // Read forwards, then backwards (other chains, other buffer sizes).
    let mut cache = gitstow_odb::ObjectCache::new(32 << 10);
    for e in entries.iter().chain(entries.iter().rev()) {
        let obj = db.read(&e.oid, &mut cache).unwrap().expect("stored");
        assert_eq!(
            object_id(&obj.kind.to_string(), &obj.data),
            e.oid,
            "{} read back as other bytes",
            e.oid
        );
        cache.recycle(obj);
    }
    // The reads above went through buffers other objects had used.
    assert!(cache.reused() > 100, "{} buffers reused", cache.reused());
}

/// A whole record whose header declares another size than the index is
/// refused before any buffer is sized by it, with a reason; the same cache
/// reads other objects on.
#[test]
fn a_record_whose_size_disagrees_with_the_index_is_refused_and_reads_go_on() {
    let (server, _tmp, state) = pushed("sizes", 32, 30);
    let store = server.store().open();
    let repo = gitstow_odb::Repository::new(store.clone(), "sizes", gitstow_odb::IndexCache::new());
    let db = repo.objects(&state).unwrap();
    let whole: Vec<_> = db.entries().filter(|e| e.base.is_none()).collect();
    let victim = whole[whole.len() / 2];
    let loc = db.lookup(&victim.oid).unwrap();
    let key = repo.bin_key(&state.containers[loc.container].id);
    let (mut bin, _) = store.get(&key).unwrap().unwrap();
    // The record header's first byte holds the low 4 bits of the size.
    bin[victim.offset as usize] ^= 1;
    store
        .put(&key, &bin, gitstow_store::PutCondition::None)
        .unwrap();

    let db = repo.objects(&state).unwrap();
    let mut cache = gitstow_odb::ObjectCache::new(1 << 20);
    let err = db.read(&victim.oid, &mut cache).unwrap_err().to_string();
    assert!(
        err.contains("inflated bytes, the index"),
        "{} read as: {err}",
        victim.oid
    );
    for e in whole.iter().filter(|e| e.oid != victim.oid) {
        let obj = db.read(&e.oid, &mut cache).unwrap().expect("stored");
        assert_eq!(object_id(&obj.kind.to_string(), &obj.data), e.oid);
    }
}
