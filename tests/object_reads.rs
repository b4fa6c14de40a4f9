//! Reads through a small object cache: the cache empties many times over
//! and later reads fill the buffers of the objects it dropped
//! (`ObjectCache`'s spares), so a reused buffer that kept stale bytes, or a
//! length left over from an earlier object, would show as an object whose
//! bytes no longer hash to its id.

mod common;

use common::*;

/// The id git gives an object of `kind` with `data`
/// (`gitformat-object`: the SHA-1 of "<kind> <size>\0" and the bytes).
fn object_id(kind: &str, data: &[u8]) -> gix_hash::ObjectId {
    let mut h = gix_hash::hasher(gix_hash::Kind::Sha1);
    h.update(format!("{kind} {}\0", data.len()).as_bytes());
    h.update(data);
    h.try_finalize().unwrap()
}

#[test]
fn every_object_read_through_a_small_cache_hashes_to_its_id() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 31,
            commits: 150,
            ..Default::default()
        },
    );
    let url = server.url("reads");
    git(&src, &["push", "--quiet", "--mirror", &url]);
    let state = server.store().repo_state("reads").unwrap();
    let repo = gitstow_odb::Repository::new(
        server.store().open(),
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
    let mut read = 0;
    for e in entries.iter().chain(entries.iter().rev()) {
        let obj = db.read(&e.oid, &mut cache).unwrap().expect("stored");
        assert_eq!(
            object_id(&obj.kind.to_string(), &obj.data),
            e.oid,
            "{} read back as other bytes",
            e.oid
        );
        cache.recycle(obj);
        read += 1;
    }
    assert_eq!(read, 2 * entries.len());
}
