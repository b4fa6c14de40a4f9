//! A container index read through the local cache (`CachedStore`) that
//! fails its checksum there is dropped from the cache and read again from
//! the store: a damaged cache file costs one read, not every request.

use std::sync::Arc;

use gitstow_odb::container::ContainerWriter;
use gitstow_odb::{IndexCache, Repository};
use gitstow_store::{CachedStore, FsStore, ObjectStore};

#[test]
fn a_damaged_cached_index_is_read_again_from_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(FsStore::new(tmp.path().join("store")).unwrap());
    let cache_dir = tmp.path().join("cache");
    let store: Arc<dyn ObjectStore> =
        Arc::new(CachedStore::new(inner, cache_dir.clone(), 1 << 20, |k| {
            k.ends_with(".idx") || k.ends_with(".bin")
        }));
    let data = b"hello\n";
    let oid = gix_object::compute_hash(gix_hash::Kind::Sha1, gix_object::Kind::Blob, data).unwrap();
    let mut zlib = Vec::new();
    gitstow_odb::zlib::deflate(data, &mut zlib);
    let staging = tmp.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let mut w = ContainerWriter::new(&staging).unwrap();
    w.append_whole(oid, gix_object::Kind::Blob, data.len() as u64, &zlib)
        .unwrap();
    let sealed = w.seal().unwrap();
    let repo = Repository::new(store.clone(), "r", IndexCache::new());
    let id = repo.upload_container(sealed).unwrap().id;
    let first = repo.container_index(&id).unwrap();
    // Damage the cached copy of the index, keeping its size.
    let idx_file = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            std::fs::read(p).is_ok_and(|b| b == store.get(&repo.idx_key(&id)).unwrap().unwrap().0)
                && !p.file_name().unwrap().to_str().unwrap().starts_with('.')
        })
        .expect("the index is cached");
    let mut bytes = std::fs::read(&idx_file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&idx_file, &bytes).unwrap();
    // A fresh reader (no decoded index kept) reads it again from the store.
    let again = Repository::new(store.clone(), "r", IndexCache::new());
    let second = again.container_index(&id).unwrap();
    assert_eq!(first.len(), second.len());
    assert!(!idx_file.exists() || std::fs::read(&idx_file).unwrap() != bytes);
}
