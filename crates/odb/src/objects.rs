//! Reading objects back: lookups across container indexes and delta-chain
//! resolution with a bounded cache of resolved bases.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use gitstow_store::ObjectStore;
use gix_hash::ObjectId;

use crate::bitmap::{BitmapFile, LoadedBitmaps};
use crate::container::{ContainerIndex, IndexEntry};
use crate::graph::{CommitGraph, CommitRow, GraphCommit};
use crate::repository::IndexCache;
use crate::{delta, record, zlib, Error, Result};

/// Largest object a read will materialize, in bytes.
pub const MAX_OBJECT_BYTES: u64 = 4 << 30;

/// A resolved object.
#[derive(Debug, Clone)]
pub struct Object {
    /// Its kind.
    pub kind: gix_object::Kind,
    /// Its bytes (shared with the cache).
    pub data: Arc<Vec<u8>>,
    /// The object format of its id, and so of the ids a tree, a commit or
    /// a tag names.
    pub hash: gix_hash::Kind,
}

impl Object {
    /// The entries of this tree other than gitlinks (submodule commits,
    /// which no walk follows), in stored order: (name, oid, is a tree),
    /// the name borrowed from the tree's bytes (gitformat-tree: a mode, a
    /// name, a binary oid per entry). A malformed entry yields why, as text.
    pub fn tree_entries(
        &self,
    ) -> impl Iterator<Item = std::result::Result<(&[u8], ObjectId, bool), String>> + '_ {
        gix_object::TreeRefIter::from_bytes(&self.data, self.hash).filter_map(|entry| match entry {
            Ok(e) if e.mode.is_commit() => None,
            Ok(e) => {
                let name: &[u8] = e.filename;
                Some(Ok((name, e.oid.to_owned(), e.mode.is_tree())))
            }
            Err(e) => Some(Err(e.to_string())),
        })
    }
}

/// Where an object is: the container's position in the state's list and its index entry.
#[derive(Debug, Clone, Copy)]
pub struct Location {
    /// Position of the container in [`ObjectDb`] (oldest first).
    pub container: usize,
    /// Its row in that container's index ([`ContainerIndex::entry`]).
    pub row: usize,
    /// The index entry.
    pub entry: IndexEntry,
}

/// A bounded cache of resolved objects (delta bases), by oid, and the
/// buffers of objects it no longer holds, which later reads fill again
/// instead of allocating (a walk that reads every tree of a history reads
/// gigabytes through a cache of a few MiB).
#[derive(Debug)]
pub struct ObjectCache {
    map: gix_hashtable::HashMap<ObjectId, Object>,
    /// Capacity of the buffers `map` holds, bytes.
    bytes: usize,
    spare: Spare,
    scratch: Scratch,
    /// Buffers [`ObjectCache::take`] gave out of the spares so far.
    reused: u64,
    limit: usize,
}

/// A read's record buffer, delta buffer and delta chain, kept from one
/// read to the next while the buffers hold at most a sixteenth of the
/// cache's limit each and the chain at most 256 links (about 30 KiB).
#[derive(Debug, Default)]
struct Scratch {
    raw: Vec<u8>,
    delta: Vec<u8>,
    chain: Vec<(ObjectId, Location)>,
}

/// Buffers no object uses, by capacity.
#[derive(Debug, Default)]
struct Spare {
    bufs: std::collections::BTreeMap<usize, Vec<Vec<u8>>>,
    /// Their capacity, bytes.
    bytes: usize,
}

impl Spare {
    /// Keeps `buf` when `room` bytes allow it.
    fn give(&mut self, mut buf: Vec<u8>, room: usize) {
        let cap = buf.capacity();
        if cap > 0 && self.bytes + cap <= room {
            buf.clear();
            self.bytes += cap;
            self.bufs.entry(cap).or_default().push(buf);
        }
    }

    /// The smallest buffer whose capacity is in `caps`.
    fn take(&mut self, caps: std::ops::RangeInclusive<usize>) -> Option<Vec<u8>> {
        let (&cap, bufs) = self.bufs.range_mut(caps).next()?;
        let buf = bufs.pop()?;
        if bufs.is_empty() {
            self.bufs.remove(&cap);
        }
        self.bytes -= cap;
        Some(buf)
    }

    /// Drops spare buffers, smallest first (the cheapest to allocate
    /// again), until they hold at most `room` bytes.
    fn trim(&mut self, room: usize) {
        while self.bytes > room {
            let Some(mut smallest) = self.bufs.first_entry() else {
                break;
            };
            let cap = *smallest.key();
            smallest.get_mut().pop();
            if smallest.get().is_empty() {
                smallest.remove();
            }
            self.bytes -= cap;
        }
    }
}

impl ObjectCache {
    /// A cache holding at most `limit` bytes of buffers (cached objects and
    /// spare buffers, by capacity), plus a read's [`Scratch`]; when full it
    /// is emptied, its buffers kept as spares.
    pub fn new(limit: usize) -> Self {
        ObjectCache {
            map: Default::default(),
            bytes: 0,
            spare: Spare::default(),
            scratch: Scratch::default(),
            reused: 0,
            limit,
        }
    }

    /// Keeps a read's scratch for the next one, dropping what grew past
    /// the bounds of [`Scratch`].
    fn keep_scratch(&mut self, mut scratch: Scratch) {
        for buf in [&mut scratch.raw, &mut scratch.delta] {
            if buf.capacity() > self.limit / 16 {
                *buf = Vec::new();
            }
        }
        if scratch.chain.capacity() > 256 {
            scratch.chain = Vec::new();
        }
        self.scratch = scratch;
    }

    fn get(&self, oid: &ObjectId) -> Option<Object> {
        self.map.get(oid).cloned()
    }

    fn insert(&mut self, oid: ObjectId, obj: Object) {
        let n = obj.data.capacity();
        if n > self.limit / 4 {
            return;
        }
        if self.bytes + n > self.limit {
            self.bytes = 0;
            for (_, old) in self.map.drain() {
                if let Ok(buf) = Arc::try_unwrap(old.data) {
                    self.spare.give(buf, self.limit);
                }
            }
        }
        self.spare.trim(self.limit - self.bytes - n);
        self.bytes += n;
        self.map.insert(oid, obj);
    }

    /// An empty buffer for an object of `len` bytes: the smallest spare
    /// one that holds it with a capacity of at most four times `len` (or
    /// 4 KiB for a smaller object: a cached object counts its buffer's
    /// capacity); else a new one of [`size_class`]`(len)` bytes.
    pub fn take(&mut self, len: usize) -> Vec<u8> {
        match self.spare.take(len..=len.max(1024).saturating_mul(4)) {
            Some(buf) => {
                self.reused += 1;
                buf
            }
            None => Vec::with_capacity(size_class(len)),
        }
    }

    /// How many buffers [`ObjectCache::take`] has given out of the spares
    /// (rather than new) since the cache was made.
    pub fn reused(&self) -> u64 {
        self.reused
    }

    /// Takes back a buffer, for a later read.
    fn give(&mut self, buf: Vec<u8>) {
        let room = self.limit.saturating_sub(self.bytes);
        self.spare.give(buf, room);
    }

    /// Takes back an object the caller is done with: its buffer is kept
    /// for a later read when neither the cache nor anyone else holds it.
    pub fn recycle(&mut self, obj: Object) {
        if let Ok(buf) = Arc::try_unwrap(obj.data) {
            self.give(buf);
        }
    }
}

/// `len` rounded up to the allocator's size class (jemalloc's: four
/// classes per doubling above 64 bytes), which the allocation takes
/// whatever its requested length: a buffer asked this large costs no
/// more memory, and a later, slightly larger object fits it (a walk
/// forwards through history reads each tree a little larger than the
/// last version of it).
pub fn size_class(len: usize) -> usize {
    if len <= 64 {
        return len;
    }
    let shift = (usize::BITS - 1 - (len - 1).leading_zeros()) - 2;
    (((len - 1) >> shift) + 1) << shift
}

/// The capacity a buffer needs to inflate an object of `size` bytes into
/// ([`zlib::inflate_exact`] asks one byte more). `size` is at most
/// [`MAX_OBJECT_BYTES`] (checked before).
fn spare_len(size: u64) -> usize {
    usize::try_from(size).map_or(usize::MAX, |n| n.saturating_add(1))
}

/// The objects of one repository state.
#[derive(Debug)]
pub struct ObjectDb {
    store: Arc<dyn ObjectStore>,
    containers: Vec<(String, Arc<ContainerIndex>)>,
    /// Ids of the first `garbage_ids.len()` containers, which are garbage.
    garbage_ids: Vec<String>,
    /// Per garbage container, whether a lookup found an object there.
    garbage_hits: Vec<AtomicBool>,
    /// The live container of the last hit, probed first (objects read
    /// together were mostly stored together: one push, or one GC output);
    /// `usize::MAX` before the first hit.
    last_hit: AtomicUsize,
    /// Lookups and index probes so far (see [`ObjectDb::lookup_stats`]).
    lookups: AtomicU64,
    probes: AtomicU64,
    /// Where commit graphs are cached (`None`: graphs are not read).
    graph_cache: Option<Arc<IndexCache>>,
    /// Per container, its graph once looked for.
    graphs: Vec<OnceLock<Option<Arc<CommitGraph>>>>,
    /// Commits answered from a graph, and commits no graph held (see
    /// [`ObjectDb::graph_commit`]).
    graph_hits: AtomicU64,
    graph_misses: AtomicU64,
}

/// How many lookups an [`ObjectDb`] answered and how many container indexes
/// they searched (one binary search each); `probes / lookups` near 1 means a
/// lookup costs about one index search whatever the container count.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LookupStats {
    /// Calls of [`ObjectDb::lookup`].
    pub lookups: u64,
    /// Index searches they made (a miss searches every container).
    pub probes: u64,
}

impl ObjectDb {
    /// `containers`: (key of the `.bin`, its index), oldest first.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        containers: Vec<(String, Arc<ContainerIndex>)>,
    ) -> Self {
        Self::with_garbage(store, containers, Vec::new())
    }

    /// Like [`ObjectDb::new`], where the first `garbage_ids.len()` containers
    /// are garbage (named by these ids): looked up after every live one, left
    /// out of [`ObjectDb::entries`], and their hits recorded.
    pub fn with_garbage(
        store: Arc<dyn ObjectStore>,
        containers: Vec<(String, Arc<ContainerIndex>)>,
        garbage_ids: Vec<String>,
    ) -> Self {
        let garbage_hits = garbage_ids.iter().map(|_| AtomicBool::new(false)).collect();
        let graphs = containers.iter().map(|_| OnceLock::new()).collect();
        ObjectDb {
            store,
            graph_cache: None,
            graphs,
            graph_hits: AtomicU64::new(0),
            graph_misses: AtomicU64::new(0),
            containers,
            garbage_ids,
            garbage_hits,
            last_hit: AtomicUsize::new(usize::MAX),
            lookups: AtomicU64::new(0),
            probes: AtomicU64::new(0),
        }
    }

    /// Reads the containers' commit graphs ([`crate::graph`]) through
    /// `cache` when a walk asks for a commit ([`ObjectDb::graph_commit`]).
    pub fn with_graphs(mut self, cache: Arc<IndexCache>) -> Self {
        self.graph_cache = Some(cache);
        self
    }

    /// Commit `oid` from the graph of the container that stores it, without
    /// reading the commit; `None` when the repository does not have it, it
    /// is not a commit, or that container has no readable graph (the caller
    /// then reads the commit itself).
    pub fn graph_commit(&self, oid: &gix_hash::oid) -> Option<GraphCommit<'_>> {
        let loc = self.lookup(oid)?;
        if loc.entry.kind != record::COMMIT {
            return None;
        }
        let found = self.graph(loc.container).and_then(|g| g.find(oid));
        let counter = match found {
            Some(_) => &self.graph_hits,
            None => &self.graph_misses,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Commit `oid`'s row: from its container's graph when that has it,
    /// else read and parsed (generation unknown). `Ok(None)` when the
    /// repository does not have `oid`.
    ///
    /// # Errors
    /// Reading fails, or [`Error::CorruptObject`] (the parser's message as
    /// the reason) when the object does not parse as a commit.
    pub fn commit_row(&self, oid: &ObjectId, cache: &mut ObjectCache) -> Result<Option<CommitRow>> {
        if let Some(c) = self.graph_commit(oid) {
            return Ok(Some(CommitRow::from_graph(*oid, &c)));
        }
        let Some(obj) = self.read(oid, cache)? else {
            return Ok(None);
        };
        CommitRow::parse(*oid, &obj.data)
            .map(Some)
            .map_err(|reason| Error::CorruptObject { oid: *oid, reason })
    }

    /// Commits answered from graphs so far.
    pub fn graph_hits(&self) -> u64 {
        self.graph_hits.load(Ordering::Relaxed)
    }

    /// Commits asked of [`ObjectDb::graph_commit`] that no graph held (the
    /// caller read them) so far.
    pub fn graph_misses(&self) -> u64 {
        self.graph_misses.load(Ordering::Relaxed)
    }

    /// The graph of container `i`: loaded once per db, shared through the
    /// cache; missing or unreadable → `None`, with a warning logged once
    /// per process (the walks then read commits).
    fn graph(&self, i: usize) -> Option<&CommitGraph> {
        let cache = self.graph_cache.as_ref()?;
        self.graphs[i]
            .get_or_init(|| {
                let key = self.side_key(i, "graph");
                cache.graph(&key, || {
                    self.side_file(&key, "commit graph", "walks read commits instead", |b| {
                        CommitGraph::decode_owned(b).map(|g| Arc::new(cache.keep_graph(g)))
                    })
                })
            })
            .as_deref()
    }

    /// The reachability bitmaps of the closure whose containers sit at
    /// `containers` in this db (see [`crate::bitmap`]): loaded once per
    /// process through the cache; missing, unreadable or written for other
    /// containers → `None` with a warning logged once (fetches then walk).
    pub fn closure_bitmaps(&self, containers: &[usize]) -> Option<Arc<LoadedBitmaps>> {
        let cache = self.graph_cache.as_ref()?;
        let key = self.side_key(*containers.first()?, "bitmap");
        cache.bitmaps(&key, || {
            let ids: Vec<&str> = containers.iter().map(|&c| self.container_id(c)).collect();
            let indexes: Vec<&ContainerIndex> =
                containers.iter().map(|&c| self.container(c)).collect();
            self.side_file(&key, "reachability bitmaps", "fetches walk instead", |b| {
                BitmapFile::decode(&b)
                    .and_then(|f| LoadedBitmaps::bind(f, &ids, &indexes))
                    .map(Arc::new)
            })
        })
    }

    /// The id of container `i` (its `.bin` key is `…/containers/<id>.bin`).
    fn container_id(&self, i: usize) -> &str {
        let bin = &self.containers[i].0;
        let name = bin.rsplit('/').next().unwrap_or(bin);
        name.strip_suffix(".bin").unwrap_or(name)
    }

    /// The key of container `i`'s side file `<id>.<ext>` (next to its `.bin`,
    /// as [`Repository::graph_key`](crate::Repository::graph_key) names it).
    fn side_key(&self, i: usize, ext: &str) -> String {
        let bin = &self.containers[i].0;
        format!("{}.{ext}", bin.strip_suffix(".bin").unwrap_or(bin))
    }

    /// Reads side file `key` (a commit graph, a bitmap file) with `decode`:
    /// `None` when the store failed (not to be remembered: it may answer
    /// next time), `Some(None)` when the file is missing or `decode`
    /// refuses it, each logged as a warning naming `what` and what is done
    /// `instead`.
    fn side_file<T, E: std::fmt::Display>(
        &self,
        key: &str,
        what: &str,
        instead: &str,
        decode: impl FnOnce(Vec<u8>) -> std::result::Result<T, E>,
    ) -> Option<Option<T>> {
        match self.store.get(key) {
            Ok(Some((bytes, _))) => match decode(bytes) {
                Ok(v) => Some(Some(v)),
                Err(e) => {
                    tracing::warn!(key, error = %e, "{what} unusable; {instead}");
                    Some(None)
                }
            },
            Ok(None) => {
                tracing::warn!(key, "{what} missing; {instead}");
                Some(None)
            }
            Err(e) => {
                tracing::warn!(key, error = %e, "{what} not read; {instead}");
                None
            }
        }
    }

    /// Ids of the garbage containers in which a lookup found an object so far
    /// (a push that relied on them must bring them back to the live list).
    pub fn garbage_used(&self) -> Vec<String> {
        self.garbage_ids
            .iter()
            .zip(&self.garbage_hits)
            .filter(|(_, hit)| hit.load(Ordering::Relaxed))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Ids of the garbage containers this db was built with.
    pub fn garbage_ids(&self) -> &[String] {
        &self.garbage_ids
    }

    /// Number of containers.
    pub fn container_count(&self) -> usize {
        self.containers.len()
    }

    /// The position in this db of the state's `i`-th live container (garbage
    /// containers come first).
    pub fn live_position(&self, i: usize) -> usize {
        self.garbage_ids.len() + i
    }

    /// The index of container `i`.
    pub fn container(&self, i: usize) -> &ContainerIndex {
        &self.containers[i].1
    }

    /// Where `oid` is stored, if anywhere. The live container of the previous
    /// hit is searched first (as JGit's `DfsReader` does), then the other live
    /// ones newest first, then garbage. Any copy of an object stored twice is
    /// as good as the other; garbage is searched last so that a push relies
    /// on it only for what no live container holds.
    pub fn lookup(&self, oid: &gix_hash::oid) -> Option<Location> {
        let live = self.garbage_ids.len()..self.containers.len();
        let hint = self.last_hit.load(Ordering::Relaxed);
        let hinted = live.contains(&hint).then_some(hint);
        let mut order = hinted
            .into_iter()
            .chain(live.clone().rev().filter(|&i| Some(i) != hinted))
            .chain((0..live.start).rev());
        let mut probes = 0u64;
        let loc = order.find_map(|i| {
            probes += 1;
            let idx = &self.containers[i].1;
            idx.position(oid).map(|row| Location {
                container: i,
                row,
                entry: idx.entry(row),
            })
        });
        self.lookups.fetch_add(1, Ordering::Relaxed);
        self.probes.fetch_add(probes, Ordering::Relaxed);
        let loc = loc?;
        if let Some(hit) = self.garbage_hits.get(loc.container) {
            hit.store(true, Ordering::Relaxed);
        } else if hinted != Some(loc.container) {
            self.last_hit.store(loc.container, Ordering::Relaxed);
        }
        Some(loc)
    }

    /// Lookups answered and index searches made so far.
    pub fn lookup_stats(&self) -> LookupStats {
        LookupStats {
            lookups: self.lookups.load(Ordering::Relaxed),
            probes: self.probes.load(Ordering::Relaxed),
        }
    }

    /// Every index entry of every live container, oldest container first (an
    /// object stored twice, by racing pushes, appears twice); garbage
    /// containers are left out.
    pub fn entries(&self) -> impl Iterator<Item = IndexEntry> + '_ {
        self.containers[self.garbage_ids.len()..]
            .iter()
            .flat_map(|(_, idx)| idx.iter())
    }

    /// True when the repository has `oid`.
    pub fn contains(&self, oid: &gix_hash::oid) -> bool {
        self.lookup(oid).is_some()
    }

    /// The raw record bytes (pack entry header + zlib stream) of an entry,
    /// into `buf` (cleared first).
    pub fn read_record_into(
        &self,
        container: usize,
        entry: &IndexEntry,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let key = &self.containers[container].0;
        let range = entry.offset..entry.offset + entry.length;
        Ok(self.store.get_range_into(key, range, buf)?)
    }

    /// The bytes of container `container`'s `.bin` in `range` (several
    /// records read at once).
    pub fn read_span(&self, container: usize, range: std::ops::Range<u64>) -> Result<Vec<u8>> {
        let key = &self.containers[container].0;
        Ok(self.store.get_range(key, range)?)
    }

    /// Reads and resolves `oid`; `Ok(None)` when the repository does not have it.
    pub fn read(&self, oid: &ObjectId, cache: &mut ObjectCache) -> Result<Option<Object>> {
        if let Some(obj) = cache.get(oid) {
            return Ok(Some(obj));
        }
        let Some(loc) = self.lookup(oid) else {
            return Ok(None);
        };
        // Walk down to a whole object or a cached base, then apply deltas upwards.
        let mut scratch = std::mem::take(&mut cache.scratch);
        let chain = &mut scratch.chain;
        chain.clear();
        chain.push((*oid, loc));
        let mut base_obj: Option<Object> = None;
        loop {
            let (cur, loc) = *chain.last().expect("non-empty");
            let Some(base) = loc.entry.base else { break };
            if chain.len() > 10_000 {
                return Err(Error::CorruptObject {
                    oid: *oid,
                    reason: "delta chain does not end".into(),
                });
            }
            if let Some(obj) = cache.get(&base) {
                base_obj = Some(obj);
                break;
            }
            let base_loc = self
                .lookup(&base)
                .ok_or(Error::MissingBase { oid: cur, base })?;
            chain.push((base, base_loc));
        }
        let Scratch { raw, delta, chain } = &mut scratch;
        for (i, (cur, loc)) in chain.iter().enumerate().rev() {
            self.read_record_into(loc.container, &loc.entry, raw)?;
            let corrupt = |reason: String| Error::CorruptObject { oid: *cur, reason };
            let header = record::decode_header(raw, cur.as_slice().len())
                .map_err(|e| corrupt(e.to_string()))?;
            let body = &raw[header.len..];
            let kind = record::kind_from_type_id(loc.entry.kind)
                .ok_or_else(|| corrupt("bad kind".into()))?;
            // Sizes are checked against the index before any buffer is
            // sized by them: a whole record inflates to the object's size
            // (at most MAX_OBJECT_BYTES), a delta to no more than deflate's
            // largest ratio (1032 to 1) allows of its compressed bytes.
            let fits = match &base_obj {
                None => header.size == loc.entry.size && header.size <= MAX_OBJECT_BYTES,
                Some(_) => header.size <= (body.len() as u64).saturating_mul(1032) + 64,
            };
            if !fits {
                return Err(corrupt(format!(
                    "record declares {} inflated bytes, the index {}",
                    header.size, loc.entry.size
                )));
            }
            let data = match &base_obj {
                None => {
                    let mut buf = cache.take(spare_len(header.size));
                    zlib::inflate_exact(body, header.size, &mut buf)
                        .map_err(|e| corrupt(e.to_string()))?;
                    buf
                }
                Some(base) => {
                    zlib::inflate_exact(body, header.size, delta)
                        .map_err(|e| corrupt(e.to_string()))?;
                    let result = delta::sizes(delta).map_or(0, |(_, r)| r);
                    if result != loc.entry.size || result > MAX_OBJECT_BYTES {
                        return Err(corrupt(format!(
                            "delta gives {result} bytes, the index {}",
                            loc.entry.size
                        )));
                    }
                    let mut out = cache.take(usize::try_from(result).unwrap_or(0));
                    delta::apply(&base.data, delta, MAX_OBJECT_BYTES, &mut out)
                        .map_err(|e| corrupt(e.to_string()))?;
                    out
                }
            };
            let obj = Object {
                kind,
                data: Arc::new(data),
                hash: cur.kind(),
            };
            if i > 0 || loc.entry.kind != record::BLOB {
                cache.insert(*cur, obj.clone());
            }
            if let Some(done) = base_obj.replace(obj) {
                cache.recycle(done);
            }
        }
        cache.keep_scratch(scratch);
        Ok(base_obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(len: usize) -> Object {
        Object {
            kind: gix_object::Kind::Tree,
            data: Arc::new(vec![7; len]),
            hash: gix_hash::Kind::Sha1,
        }
    }

    #[test]
    fn size_classes_are_the_allocators() {
        let classes: Vec<usize> = [1, 64, 65, 80, 81, 16384, 16385, 20999, 24577]
            .iter()
            .map(|&n| size_class(n))
            .collect();
        assert_eq!(classes, [1, 64, 80, 80, 96, 16384, 20480, 24576, 28672]);
        for n in [100usize, 5000, 1 << 20, (1 << 20) + 1] {
            assert!(size_class(n) >= n && size_class(n) <= n + n / 4, "{n}");
        }
    }

    #[test]
    fn a_spare_buffer_that_fits_is_reused_and_one_far_too_large_is_not() {
        let mut cache = ObjectCache::new(1 << 20);
        let buf = Vec::with_capacity(8192);
        let ptr = buf.as_ptr();
        cache.give(buf);
        // Four times 1024 at most for a small object: 8192 is too large for 100.
        // A miss gives a new buffer of the allocator's size class.
        assert_eq!(cache.take(100).capacity(), 112);
        assert_eq!(cache.reused(), 0);
        let again = cache.take(3000);
        assert_eq!((again.as_ptr(), again.len()), (ptr, 0));
        assert_eq!(cache.reused(), 1);
        assert_eq!(cache.take(3000).capacity(), 3072, "taken once only");
        assert_eq!(cache.reused(), 1);
    }

    #[test]
    fn spare_buffers_and_cached_objects_stay_within_the_limit() {
        let mut cache = ObjectCache::new(10_000);
        for _ in 0..10 {
            cache.give(Vec::with_capacity(3000));
        }
        assert!(cache.spare.bytes <= 10_000, "{}", cache.spare.bytes);
        // Objects fill the cache; the spares make room for them.
        for seed in 0..3u8 {
            cache.insert(ObjectId::from_bytes_or_panic(&[seed; 20]), object(2000));
            assert!(cache.bytes + cache.spare.bytes <= 10_000);
        }
        // One the caller still holds, then one that does not fit: the cache
        // is emptied and keeps as spares the buffers no one else holds.
        let held = object(2000);
        cache.insert(ObjectId::from_bytes_or_panic(&[9; 20]), held.clone());
        cache.insert(ObjectId::from_bytes_or_panic(&[10; 20]), object(2400));
        assert_eq!(cache.map.len(), 1);
        assert_eq!(cache.bytes, 2400);
        assert_eq!(cache.spare.bytes, 3 * 2000, "the held buffer is not spare");
        assert!(cache.bytes + cache.spare.bytes <= 10_000);
        // A recycled object whose buffer someone else holds is not kept,
        // nor one that does not fit under the limit.
        cache.recycle(held.clone());
        assert_eq!(cache.spare.bytes, 3 * 2000);
        cache.recycle(held);
        assert_eq!(cache.spare.bytes, 3 * 2000, "2400 + 6000 + 2000 > 10000");
        let taken = cache.take(1500);
        assert_eq!(taken.capacity(), 2000);
        assert_eq!(cache.spare.bytes, 2 * 2000);
        cache.recycle(object(1900));
        assert_eq!(cache.spare.bytes, 2 * 2000 + 1900);
    }
}
