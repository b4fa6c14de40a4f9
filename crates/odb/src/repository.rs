//! One repository in a store: its state object, its containers, and the
//! compare-and-swap that commits a new state.
//!
//! Keys (per repository `<name>`): `<name>.git/state`,
//! `<name>.git/containers/<id>.bin`, `<name>.git/containers/<id>.idx`,
//! `<name>.git/refs/<id>.ref` (ref tables, [`crate::reftable`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gitstow_store::{ETag, IfNoneMatch, ObjectStore, PutCondition};

use crate::bitmap::LoadedBitmaps;
use crate::container::{ContainerIndex, SealedContainer};
use crate::graph::CommitGraph;
use crate::mapped::MapDir;
use crate::objects::ObjectDb;
use crate::refs::Refs;
use crate::reftable::{Table, TableSource};
use crate::state::{ContainerRef, RefSet, RefTableRef, RepoState};
use crate::state_cache::StateCache;
use crate::{Error, Result};

/// Decoded container indexes and commit graphs shared by every repository
/// of a server. Both are immutable (named by a container's unique id), so
/// entries never go stale; but maintenance replaces containers, so the cache
/// is bounded: past `max_objects` objects in all (index entries and graph
/// commits), the files loaded longest ago are dropped (readers holding one
/// keep it until they finish).
#[derive(Debug)]
pub struct IndexCache {
    indexes: Lru<Arc<ContainerIndex>>,
    /// A graph file's key → its graph, or `None` when it is missing or
    /// unreadable (remembered, so the warning is logged once).
    graphs: Lru<Option<Arc<CommitGraph>>>,
    /// A bitmap file's key → the file bound to its containers, or `None`
    /// when missing or unusable.
    bitmaps: Lru<Option<Arc<LoadedBitmaps>>>,
    /// A ref table's key → the table opened (its footer and root block).
    tables: Lru<Arc<Table>>,
    /// `<table key>#<start>-<end>` → bytes read from a ref table (reads of
    /// up to [`MAX_CACHED_READ`] bytes: blocks, not scan windows).
    blocks: Lru<Arc<Vec<u8>>>,
    max_objects: usize,
    /// Where large indexes and graphs are mapped from (`None`: the heap).
    map_dir: Option<MapDir>,
}

/// Largest read of a ref table kept in the cache: a seeking cursor's reads
/// (one or two blocks), not a full walk's windows.
const MAX_CACHED_READ: u64 = 16 << 10;

/// What an opened ref table weighs in the cache, in index objects of 44
/// bytes (its root block, up to 8 KiB, and its key).
const TABLE_WEIGHT: usize = 200;

/// What a cached value costs beyond its objects, in index objects of 44
/// bytes: an index's 1 KiB fanout table, its key kept twice, the map slot
/// (about 1.3 KiB). Without it, a repository's many small containers (one per
/// push) would fill memory long before the object count reached the cap:
/// measured in the soak (`benches/soak.py`), 10 MB of indexes after 2,400
/// pushes were counted as 10,000 objects.
const ENTRY_OVERHEAD: usize = 30;

/// Values by key, dropped oldest first past a total weight.
#[derive(Debug)]
struct Lru<T> {
    inner: Mutex<LruInner<T>>,
}

#[derive(Debug)]
struct LruInner<T> {
    map: HashMap<String, (T, usize)>,
    order: std::collections::VecDeque<String>,
    objects: usize,
}

impl<T: Clone> Lru<T> {
    fn new() -> Self {
        Lru {
            inner: Mutex::new(LruInner {
                map: HashMap::new(),
                order: Default::default(),
                objects: 0,
            }),
        }
    }

    fn get(&self, key: &str) -> Option<T> {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.map.get(key).map(|(v, _)| v.clone())
    }

    /// Every value kept, for a visit.
    fn each(&self, mut visit: impl FnMut(&T)) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.map.values().for_each(|(v, _)| visit(v));
    }

    /// Drops `key`'s value, if kept.
    fn remove(&self, key: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, w)) = inner.map.remove(key) {
            inner.objects -= w;
            if let Some(at) = inner.order.iter().position(|k| k == key) {
                inner.order.remove(at);
            }
        }
    }

    /// Keeps `value` of `weight` (unless `key` is kept already), dropping the
    /// oldest values past `max` in all (the newest is kept even alone larger).
    /// Each value weighs [`ENTRY_OVERHEAD`] more than its objects.
    fn insert(&self, key: String, value: T, weight: usize, max: usize) {
        let weight = weight + ENTRY_OVERHEAD;
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.map.contains_key(&key) {
            return;
        }
        inner.objects += weight;
        inner.order.push_back(key.clone());
        inner.map.insert(key, (value, weight));
        while inner.objects > max && inner.order.len() > 1 {
            if let Some((_, w)) = inner
                .order
                .pop_front()
                .and_then(|old| inner.map.remove(&old))
            {
                inner.objects -= w;
            }
        }
    }

    /// The value kept for `key`, or the one `load` gives (kept; `None`
    /// from `load` is returned and not kept, so the next call tries again).
    fn get_or_load(
        &self,
        key: &str,
        max: usize,
        weight: impl FnOnce(&T) -> usize,
        load: impl FnOnce() -> Option<T>,
    ) -> Option<T> {
        if let Some(kept) = self.get(key) {
            return Some(kept);
        }
        let value = load()?;
        self.insert(key.to_owned(), value.clone(), weight(&value), max);
        Some(value)
    }
}

/// Objects the default [`IndexCache`] holds (44 bytes an index object, 64
/// a commit-graph commit).
pub const DEFAULT_INDEX_CACHE_OBJECTS: usize = 4 << 20;

impl IndexCache {
    /// An empty cache of at most [`DEFAULT_INDEX_CACHE_OBJECTS`] objects.
    pub fn new() -> Arc<Self> {
        Self::with_limit(DEFAULT_INDEX_CACHE_OBJECTS)
    }

    /// An empty cache of at most `max_objects` index entries and as many
    /// graph commits (the newest file is kept even when it alone is larger).
    pub fn with_limit(max_objects: usize) -> Arc<Self> {
        Self::build(max_objects, None)
    }

    /// [`IndexCache::with_limit`] whose large container indexes and commit
    /// graphs are written to files in `dir` and mapped ([`crate::mapped`]):
    /// the server's, where resident memory should hold what requests touch.
    pub fn mapped_in(max_objects: usize, dir: MapDir) -> Arc<Self> {
        Self::build(max_objects, Some(dir))
    }

    fn build(max_objects: usize, map_dir: Option<MapDir>) -> Arc<Self> {
        Arc::new(IndexCache {
            indexes: Lru::new(),
            graphs: Lru::new(),
            bitmaps: Lru::new(),
            tables: Lru::new(),
            blocks: Lru::new(),
            max_objects,
            map_dir,
        })
    }

    /// Drops the pages of every mapped index and graph from the resident
    /// set (`madvise(MADV_DONTNEED)`; they stay in the page cache, and the
    /// next lookup maps what it reads again): called when no request is
    /// running, so resident memory holds what requests touch, not what
    /// earlier ones did. Nothing when the cache maps nothing.
    pub fn release_pages(&self) {
        if self.map_dir.is_none() {
            return;
        }
        self.indexes.each(|i| i.release_pages());
        self.graphs.each(|g| {
            if let Some(g) = g {
                g.release_pages();
            }
        });
    }

    /// `idx` as this cache keeps it (mapped when it has a directory).
    fn keep_index(&self, idx: ContainerIndex) -> ContainerIndex {
        match &self.map_dir {
            Some(dir) => idx.mapped(dir),
            None => idx,
        }
    }

    /// `graph` as this cache keeps it (mapped when it has a directory).
    pub(crate) fn keep_graph(&self, graph: CommitGraph) -> CommitGraph {
        match &self.map_dir {
            Some(dir) => graph.mapped(dir),
            None => graph,
        }
    }

    fn get(&self, key: &str) -> Option<Arc<ContainerIndex>> {
        self.indexes.get(key)
    }

    fn insert(&self, key: String, idx: Arc<ContainerIndex>) {
        let weight = idx.len();
        self.indexes.insert(key, idx, weight, self.max_objects);
    }

    /// The graph of `key`, kept or loaded by `load` (see
    /// [`ObjectDb::graph_commit`](crate::ObjectDb::graph_commit)): `load`
    /// gives `Some(None)` for a missing or unreadable file (remembered) and
    /// `None` when the store failed (tried again next time).
    pub(crate) fn graph(
        &self,
        key: &str,
        load: impl FnOnce() -> Option<Option<Arc<CommitGraph>>>,
    ) -> Option<Arc<CommitGraph>> {
        let weight = |g: &Option<Arc<CommitGraph>>| g.as_ref().map_or(1, |g| g.len().max(1));
        self.graphs
            .get_or_load(key, self.max_objects, weight, load)
            .flatten()
    }

    /// The bitmaps of `key`, kept or loaded by `load`, as [`IndexCache::graph`].
    pub(crate) fn bitmaps(
        &self,
        key: &str,
        load: impl FnOnce() -> Option<Option<Arc<LoadedBitmaps>>>,
    ) -> Option<Arc<LoadedBitmaps>> {
        let weight = |l: &Option<Arc<LoadedBitmaps>>| {
            l.as_ref().map_or(1, |l| (l.order.len() as usize).max(1))
        };
        self.bitmaps
            .get_or_load(key, self.max_objects, weight, load)
            .flatten()
    }
}

/// A ref table read by range from the store, small reads kept in the
/// [`IndexCache`].
struct StoreTableSource {
    store: Arc<dyn ObjectStore>,
    key: String,
    cache: Arc<IndexCache>,
}

impl TableSource for StoreTableSource {
    fn read(&self, range: std::ops::Range<u64>) -> crate::reftable::Result<Arc<Vec<u8>>> {
        // Only a seeking cursor's reads are kept (and named); a scan's
        // windows go straight to the store.
        let cache_key = (range.end.saturating_sub(range.start) <= MAX_CACHED_READ)
            .then(|| format!("{}#{}-{}", self.key, range.start, range.end));
        if let Some(bytes) = cache_key.as_ref().and_then(|k| self.cache.blocks.get(k)) {
            return Ok(bytes);
        }
        let bytes = Arc::new(
            self.store
                .get_range(&self.key, range)
                .map_err(|e| crate::reftable::ReftableError::Source(Box::new(e)))?,
        );
        if let Some(cache_key) = cache_key {
            let weight = bytes.len() / 80 + 1;
            self.cache
                .blocks
                .insert(cache_key, bytes.clone(), weight, self.cache.max_objects);
        }
        Ok(bytes)
    }
}

/// A state together with the store version it was read at.
#[derive(Debug, Clone)]
pub struct VersionedState {
    /// The decoded state.
    pub state: RepoState,
    /// The store's ETag of the state object; the next commit is conditional on it.
    pub etag: ETag,
}

/// A state shared through a [`StateCache`], with the ETag it was read at.
#[derive(Debug, Clone)]
pub struct SharedState {
    /// The decoded state (possibly shared with other requests).
    pub state: Arc<RepoState>,
    /// The store's ETag of the state object.
    pub etag: ETag,
}

/// The outcome of a compare-and-swap of the state.
#[derive(Debug)]
pub enum CommitOutcome {
    /// The new state is in place with this ETag.
    Committed(ETag),
    /// Someone else changed the state first (or created it): re-read and retry.
    Conflict,
}

/// A handle to one repository; cheap to create per request.
#[derive(Debug, Clone)]
pub struct Repository {
    store: Arc<dyn ObjectStore>,
    name: String,
    prefix: String,
    indexes: Arc<IndexCache>,
    /// The state last read or written through [`Repository::load_kept_state`]
    /// and [`Repository::commit_kept_state`], with its ETag (shared by
    /// clones; one key, so one entry).
    kept: Arc<StateCache>,
}

impl Repository {
    /// The repository `name` (e.g. `org/project`, without `.git`) in `store`.
    /// The caller validates `name`.
    pub fn new(store: Arc<dyn ObjectStore>, name: &str, indexes: Arc<IndexCache>) -> Self {
        Repository {
            store,
            name: name.to_owned(),
            prefix: format!("{name}.git/"),
            indexes,
            kept: StateCache::with_limit(usize::MAX),
        }
    }

    /// The repository's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store the repository lives in.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    fn state_key(&self) -> String {
        format!("{}state", self.prefix)
    }

    /// Drops what the shared cache keeps of containers `ids` (their
    /// indexes, commit graphs and bitmaps): for containers the state no
    /// longer names, so that the cache holds what readers use rather than
    /// every container a repository ever had.
    pub fn forget_cached(&self, ids: &[String]) {
        for id in ids {
            self.indexes.indexes.remove(&self.idx_key(id));
            self.indexes.graphs.remove(&self.graph_key(id));
            self.indexes.bitmaps.remove(&self.bitmap_key(id));
            self.indexes.tables.remove(&self.ref_table_key(id));
        }
    }

    /// Key of a ref table (`<name>.git/refs/<id>.ref`).
    pub fn ref_table_key(&self, id: &str) -> String {
        format!("{}refs/{id}.ref", self.prefix)
    }

    /// The key prefix under which the ref tables live (`<name>.git/refs/`).
    pub fn ref_tables_prefix(&self) -> String {
        format!("{}refs/", self.prefix)
    }

    /// The refs of `state`, its ref tables opened (from the cache, or one
    /// ranged read of each table's tail). No I/O for a state without tables.
    ///
    /// # Errors
    /// A table could not be read or is corrupt ([`Error::Refs`]).
    pub fn refs<'s>(&self, state: &'s RepoState) -> Result<Refs<'s>> {
        self.ref_view(&state.refs)
    }

    /// The view of `set` (a state's refs, or a run of its tables that a
    /// merge copies), as [`Repository::refs`].
    ///
    /// # Errors
    /// As [`Repository::refs`].
    pub fn ref_view<'s>(&self, set: &'s RefSet) -> Result<Refs<'s>> {
        let tables = set
            .tables
            .iter()
            .rev()
            .map(|t| self.ref_table(t))
            .collect::<Result<Vec<_>>>()?;
        Ok(Refs::new(set, tables))
    }

    fn ref_table(&self, t: &RefTableRef) -> Result<Arc<Table>> {
        let key = self.ref_table_key(&t.id);
        if let Some(table) = self.indexes.tables.get(&key) {
            return Ok(table);
        }
        let source = Arc::new(StoreTableSource {
            store: self.store.clone(),
            key: key.clone(),
            cache: self.indexes.clone(),
        });
        let table = Arc::new(Table::open(source, t.bytes).map_err(|source| Error::Refs {
            table: t.id.clone(),
            source,
        })?);
        self.indexes
            .tables
            .insert(key, table.clone(), TABLE_WEIGHT, self.indexes.max_objects);
        Ok(table)
    }

    /// Stores the bytes of a ref table of `records` records under a new id
    /// and returns its entry for the state. The id is salted
    /// ([`crate::unique_token`]), so no other writer's table shares it.
    ///
    /// # Errors
    /// The store failed.
    pub fn put_ref_table(&self, bytes: &[u8], records: u64) -> Result<RefTableRef> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(crate::unique_token());
        h.update(bytes);
        let id = hex::encode(h.finalize());
        self.store
            .put(&self.ref_table_key(&id), bytes, PutCondition::None)?;
        Ok(RefTableRef {
            id,
            records,
            bytes: bytes.len() as u64,
        })
    }

    /// When the inline refs of `set` have outgrown [`RefSet::outgrown`],
    /// writes them out as a new ref table on top of the stack and empties
    /// the inline part (a state of format 1 becomes one table: its
    /// conversion). Call it on a state about to be committed by
    /// compare-and-swap against the version it was built from: a table
    /// written after that version was read cannot be deleted by maintenance
    /// before the commit, which lists every deletion in the state first
    /// (plan 0009). Returns whether it wrote a table.
    ///
    /// # Errors
    /// The store failed, or a name is longer than a table holds.
    pub fn spill_refs(&self, set: &mut RefSet, format: gix_hash::Kind) -> Result<bool> {
        if !set.outgrown() {
            return Ok(false);
        }
        // Deletion records are inline only above tables: copied as they are.
        let (bytes, records) = crate::refs::encode_cursor(
            &mut crate::reftable::SliceCursor::new(&set.recent),
            format,
        )?;
        let table = self.put_ref_table(&bytes, records)?;
        tracing::debug!(
            repo = self.name,
            table = table.id.as_str(),
            records = table.records,
            bytes = table.bytes,
            "inline refs written out as a ref table"
        );
        set.tables.push(table);
        set.recent.clear();
        Ok(true)
    }

    /// Key of a container's `.bin`.
    pub fn bin_key(&self, id: &str) -> String {
        format!("{}containers/{id}.bin", self.prefix)
    }

    /// Key of a container's `.idx`.
    pub fn idx_key(&self, id: &str) -> String {
        format!("{}containers/{id}.idx", self.prefix)
    }

    /// Key of the reachability bitmaps ([`crate::bitmap`]) of a closure whose
    /// first container is `id`.
    pub fn bitmap_key(&self, id: &str) -> String {
        format!("{}containers/{id}.bitmap", self.prefix)
    }

    /// Key of a container's commit graph ([`crate::graph`]).
    pub fn graph_key(&self, id: &str) -> String {
        format!("{}containers/{id}.graph", self.prefix)
    }

    /// The key prefix under which the containers live (`<name>.git/containers/`).
    pub fn containers_prefix(&self) -> String {
        format!("{}containers/", self.prefix)
    }

    /// The key prefix of everything of this repository (`<name>.git/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Reads the current state; `Ok(None)` when the repository does not exist.
    pub fn load_state(&self) -> Result<Option<VersionedState>> {
        match self.store.get(&self.state_key())? {
            None => Ok(None),
            Some((bytes, etag)) => Ok(Some(VersionedState {
                state: RepoState::decode(&bytes)?,
                etag,
            })),
        }
    }

    /// Reads the current state like [`Repository::load_state`], but decodes
    /// it only when `cache` does not hold it at the ETag read (see
    /// [`crate::state_cache`]); the state is shared, not copied.
    pub fn load_shared_state(&self, cache: &StateCache) -> Result<Option<SharedState>> {
        let key = self.state_key();
        let (bytes, etag) = match cache.latest(&key) {
            Some((kept, state)) => match self.store.get_if_none_match(&key, &kept)? {
                IfNoneMatch::Unchanged => return Ok(Some(SharedState { state, etag: kept })),
                IfNoneMatch::Changed(bytes, etag) => (bytes, etag),
                IfNoneMatch::Absent => return Ok(None),
            },
            None => match self.store.get(&key)? {
                Some(found) => found,
                None => return Ok(None),
            },
        };
        let state = cache.decode_once(&key, &etag, || RepoState::decode(&bytes))?;
        Ok(Some(SharedState { state, etag }))
    }

    /// Reads the current state like [`Repository::load_state`], but keeps
    /// the decoded state with its ETag in this handle: while the state
    /// object is unchanged (a conditional GET says so), the kept one is
    /// returned, shared, not decoded again. For a caller that reads the
    /// state many times, as a maintenance pass does between its writes.
    pub fn load_kept_state(&self) -> Result<Option<SharedState>> {
        self.load_shared_state(&self.kept)
    }

    /// [`Repository::commit_state`], keeping `state` as the one
    /// [`Repository::load_kept_state`] returns while it is current.
    pub fn commit_kept_state(
        &self,
        state: RepoState,
        expected: Option<&ETag>,
    ) -> Result<CommitOutcome> {
        let outcome = self.commit_state(&state, expected)?;
        if let CommitOutcome::Committed(etag) = &outcome {
            self.kept
                .insert(&self.state_key(), etag.clone(), Arc::new(state));
        }
        Ok(outcome)
    }

    fn retired_key(&self) -> String {
        format!("{}retired", self.prefix)
    }

    /// Reads the retired list ([`crate::retired`]) with its version (`None`:
    /// no list yet, an empty one).
    pub fn load_retired(&self) -> Result<(Vec<crate::retired::RetiredContainer>, Option<ETag>)> {
        match self.store.get(&self.retired_key())? {
            None => Ok((Vec::new(), None)),
            Some((bytes, etag)) => Ok((crate::retired::decode(&bytes)?, Some(etag))),
        }
    }

    /// Writes the retired list if it is still at `expected` (`None`: if
    /// there is none yet); a lost race is [`CommitOutcome::Conflict`].
    pub fn commit_retired(
        &self,
        list: &[crate::retired::RetiredContainer],
        expected: Option<&ETag>,
    ) -> Result<CommitOutcome> {
        Ok(self.compare_and_swap(&self.retired_key(), &crate::retired::encode(list), expected)?)
    }

    /// Writes `bytes` at `key` if the object there is still at `expected`
    /// (`None`: if there is none): the store's conditional PUT, with a lost
    /// race (412, or the object gone) as [`CommitOutcome::Conflict`].
    pub fn compare_and_swap(
        &self,
        key: &str,
        bytes: &[u8],
        expected: Option<&ETag>,
    ) -> std::result::Result<CommitOutcome, gitstow_store::Error> {
        let condition = match expected {
            Some(etag) => PutCondition::IfMatch(etag.clone()),
            None => PutCondition::IfAbsent,
        };
        match self.store.put(key, bytes, condition) {
            Ok(etag) => Ok(CommitOutcome::Committed(etag)),
            Err(gitstow_store::Error::PreconditionFailed { .. })
            | Err(gitstow_store::Error::NotFound { .. }) => Ok(CommitOutcome::Conflict),
            Err(e) => Err(e),
        }
    }

    /// Writes `state` if the stored state is still at `expected` (or, with `None`,
    /// if no state exists yet). This single conditional PUT is the commit point.
    ///
    /// A failure other than a lost race is ambiguous (a timeout may come after
    /// the store applied the write), so the state is read back: if it is
    /// exactly what this call wrote, the commit happened.
    pub fn commit_state(
        &self,
        state: &RepoState,
        expected: Option<&ETag>,
    ) -> Result<CommitOutcome> {
        let encoded = state.encode();
        match self.compare_and_swap(&self.state_key(), &encoded, expected) {
            Ok(outcome) => Ok(outcome),
            Err(e) => match self.store.get(&self.state_key()) {
                Ok(Some((bytes, etag))) if bytes == encoded => {
                    tracing::warn!(repo = self.name, error = %e, "state write reported an error but landed");
                    Ok(CommitOutcome::Committed(etag))
                }
                _ => Err(e.into()),
            },
        }
    }

    /// Uploads a sealed container: the `.bin` first, then its `.idx`, so an index
    /// never names bytes that are not there, then its `.graph` if it has one.
    /// Returns the entry for the state. The index is not decoded here:
    /// readers load it when they need it.
    pub fn upload_container(&self, sealed: SealedContainer) -> Result<ContainerRef> {
        self.store
            .put_file(&self.bin_key(&sealed.id), &sealed.bin)?;
        self.store
            .put(&self.idx_key(&sealed.id), &sealed.index, PutCondition::None)?;
        if let Some(graph) = &sealed.graph {
            self.store
                .put(&self.graph_key(&sealed.id), graph, PutCondition::None)?;
        }
        Ok(ContainerRef {
            id: sealed.id,
            objects: sealed.objects as u64,
            bytes: sealed.bytes,
        })
    }

    /// Whether containers `ids`, uploaded after a read of the state that
    /// had started `since` deletions ([`RepoState::deletions`]; 0 when the
    /// repository did not exist), may be named by a commit on top of
    /// `state`, the version that commit is conditional on.
    ///
    /// False when maintenance is deleting one of them (listed in
    /// [`RepoState::deleting`]) or, once a deletion started since, when one
    /// of their files is gone (an orphan scan took an upload that had not
    /// committed yet for a failed push's, and its grace period ran out).
    /// True means the commit is safe: a deletion is listed in the state by
    /// compare-and-swap before its first file goes, so one that starts after
    /// this check makes the commit conditional on `state` fail, and one that
    /// sees the commit first finds the containers named and keeps them. See
    /// `docs/plans/0009-hardening.md`.
    ///
    /// # Errors
    /// The store failed (a HEAD of a `.bin`).
    pub fn uploads_intact(&self, state: &RepoState, since: u64, ids: &[String]) -> Result<bool> {
        if ids.iter().any(|id| state.deleting.contains(id)) {
            return Ok(false);
        }
        if state.deletions == since {
            return Ok(true);
        }
        // One HEAD a container: a deletion under way lists its id in
        // `deleting` (refused above), so a `.bin` still there means its
        // files were never deleted.
        for id in ids {
            // A container's `.bin`, or else a ref table of that id.
            if self.store.head_in_store(&self.bin_key(id))?.is_none()
                && self.store.head_in_store(&self.ref_table_key(id))?.is_none()
            {
                tracing::warn!(
                    repo = self.name,
                    container = id.as_str(),
                    "an upload was deleted by maintenance before its commit"
                );
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The index of container `id`, from the cache or the store.
    pub fn container_index(&self, id: &str) -> Result<Arc<ContainerIndex>> {
        let key = self.idx_key(id);
        if let Some(idx) = self.indexes.get(&key) {
            return Ok(idx);
        }
        let read = || -> Result<ContainerIndex> {
            let (bytes, _) = self
                .store
                .get(&key)?
                .ok_or_else(|| gitstow_store::Error::NotFound { key: key.clone() })?;
            ContainerIndex::decode(&bytes).map_err(|source| Error::Index {
                container: id.to_owned(),
                source,
            })
        };
        // A damaged local copy (the cache directory's) is dropped and the
        // index read again from the store; damage there is reported.
        let idx = Arc::new(self.indexes.keep_index(match read() {
            Err(Error::Index { .. }) => {
                self.store.discard_local_copy(&key);
                read()?
            }
            other => other?,
        }));
        self.indexes.insert(key, idx.clone());
        Ok(idx)
    }

    /// (key of the `.bin`, index) of each container `ids` names, in order.
    fn indexes<'a>(
        &self,
        ids: impl Iterator<Item = &'a String>,
    ) -> Result<Vec<(String, Arc<ContainerIndex>)>> {
        ids.map(|id| Ok((self.bin_key(id), self.container_index(id)?)))
            .collect()
    }

    /// The objects of `state`: every live and garbage container's index,
    /// ready for lookups and reads (garbage is looked up last, and
    /// [`ObjectDb::garbage_used`] says which garbage containers a lookup hit).
    pub fn objects(&self, state: &RepoState) -> Result<ObjectDb> {
        let garbage_ids: Vec<String> = state.garbage.iter().map(|g| g.id.clone()).collect();
        let containers = self.indexes(
            garbage_ids
                .iter()
                .chain(state.containers.iter().map(|c| &c.id)),
        )?;
        Ok(
            ObjectDb::with_garbage(self.store.clone(), containers, garbage_ids)
                .with_graphs(self.indexes.clone()),
        )
    }

    /// The objects of the live containers of `state` only (no garbage).
    pub fn live_objects(&self, state: &RepoState) -> Result<ObjectDb> {
        let containers = self.indexes(state.containers.iter().map(|c| &c.id))?;
        Ok(ObjectDb::new(self.store.clone(), containers).with_graphs(self.indexes.clone()))
    }
}
