//! Reading objects back: lookups across container indexes and delta-chain
//! resolution with a bounded cache of resolved bases.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use gitstow_store::ObjectStore;
use gix_hash::ObjectId;

use crate::container::{ContainerIndex, IndexEntry};
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
}

/// Where an object is: the container's position in the state's list and its index entry.
#[derive(Debug, Clone, Copy)]
pub struct Location<'a> {
    /// Position of the container in [`ObjectDb`] (oldest first).
    pub container: usize,
    /// The index entry.
    pub entry: &'a IndexEntry,
}

/// A bounded cache of resolved objects (delta bases), by oid.
#[derive(Debug)]
pub struct ObjectCache {
    map: gix_hashtable::HashMap<ObjectId, Object>,
    bytes: usize,
    limit: usize,
}

impl ObjectCache {
    /// A cache holding at most `limit` bytes of object data; when full it is emptied.
    pub fn new(limit: usize) -> Self {
        ObjectCache {
            map: Default::default(),
            bytes: 0,
            limit,
        }
    }

    fn get(&self, oid: &ObjectId) -> Option<Object> {
        self.map.get(oid).cloned()
    }

    fn insert(&mut self, oid: ObjectId, obj: Object) {
        let n = obj.data.len();
        if n > self.limit / 4 {
            return;
        }
        if self.bytes + n > self.limit {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += n;
        self.map.insert(oid, obj);
    }
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
        ObjectDb {
            store,
            containers,
            garbage_ids,
            garbage_hits,
            last_hit: AtomicUsize::new(usize::MAX),
            lookups: AtomicU64::new(0),
            probes: AtomicU64::new(0),
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
    pub fn lookup(&self, oid: &gix_hash::oid) -> Option<Location<'_>> {
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
            self.containers[i].1.lookup(oid).map(|entry| Location {
                container: i,
                entry,
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
    pub fn entries(&self) -> impl Iterator<Item = &IndexEntry> {
        self.containers[self.garbage_ids.len()..]
            .iter()
            .flat_map(|(_, idx)| idx.entries())
    }

    /// True when the repository has `oid`.
    pub fn contains(&self, oid: &gix_hash::oid) -> bool {
        self.lookup(oid).is_some()
    }

    /// The raw record bytes (pack entry header + zlib stream) of an entry.
    pub fn read_record(&self, container: usize, entry: &IndexEntry) -> Result<Vec<u8>> {
        self.read_span(container, entry.offset..entry.offset + entry.length)
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
        let mut chain: Vec<(ObjectId, Location<'_>)> = vec![(*oid, loc)];
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
        let mut buf = Vec::new();
        let mut delta_buf = Vec::new();
        for (i, (cur, loc)) in chain.iter().enumerate().rev() {
            let raw = self.read_record(loc.container, loc.entry)?;
            let corrupt = |reason: String| Error::CorruptObject { oid: *cur, reason };
            let header = record::decode_header(&raw).map_err(|e| corrupt(e.to_string()))?;
            let body = &raw[header.len..];
            let kind = record::kind_from_type_id(loc.entry.kind)
                .ok_or_else(|| corrupt("bad kind".into()))?;
            let data = match &base_obj {
                None => {
                    zlib::inflate_exact(body, header.size, &mut buf)
                        .map_err(|e| corrupt(e.to_string()))?;
                    std::mem::take(&mut buf)
                }
                Some(base) => {
                    zlib::inflate_exact(body, header.size, &mut delta_buf)
                        .map_err(|e| corrupt(e.to_string()))?;
                    let mut out = Vec::new();
                    delta::apply(&base.data, &delta_buf, MAX_OBJECT_BYTES, &mut out)
                        .map_err(|e| corrupt(e.to_string()))?;
                    out
                }
            };
            let obj = Object {
                kind,
                data: Arc::new(data),
            };
            if i > 0 || loc.entry.kind != record::BLOB {
                cache.insert(*cur, obj.clone());
            }
            base_obj = Some(obj);
        }
        Ok(base_obj)
    }
}
