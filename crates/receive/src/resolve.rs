//! Pass 2: resolve every delta exactly once, on several threads.
//!
//! Roots are the whole objects of the pack and, for a thin pack, the bases that
//! REF_DELTAs name and the repository holds. From each root a depth-first walk
//! inflates each child delta once, applies it to its parent's bytes (held only
//! while its children are resolved), hashes and checks the result, and stages the
//! child's record through the [`EncodedObjectStore`]. The heaviest child of a
//! base is resolved last, after the base's bytes are released, so a chain of
//! any depth holds two objects per thread; what bases held for their other
//! children add up to is bounded (`max_held_bytes`). Nothing is inflated twice
//! but roots (once in pass 1 to find their end, as git's index-pack does).

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use gitstow_odb::oids::{OidMap, OidSet};
use gitstow_odb::staging::{EncodedObject, EncodedObjectStore, Encoding};
use gitstow_odb::{delta, record, zlib, ObjectCache, ObjectDb};
use gix_hash::ObjectId;
use gix_object::Kind;

use crate::big::{Turn, BIG_OBJECTS, BIG_OBJECT_BYTES};
use crate::check::{check_object, Collected};
use crate::rebase::{PathRebase, Placement};
use crate::scan::{EntryKind, ScannedPack};
use crate::window::ReadWindow;

/// Limits and knobs of the resolution.
#[derive(Debug, Clone, Copy)]
pub struct ResolveOptions {
    /// Resolver threads (at least 1).
    pub threads: usize,
    /// Largest object, in bytes.
    pub max_object_bytes: u64,
    /// Deepest delta chain stored; deeper objects are re-based on objects
    /// higher up their chain (see [`crate::rebase`]).
    pub max_stored_depth: u32,
    /// Deepest delta chain accepted in a pack.
    pub max_chain_depth: u32,
    /// Most bytes of delta bases held at once by one thread while their
    /// other children are resolved (beyond the first such base).
    pub max_held_bytes: u64,
}

/// Why resolution failed.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The pack is bad; the text follows `unpack ` in the report.
    #[error("{0}")]
    Invalid(String),
    /// Reading a thin-pack base from the repository failed.
    #[error(transparent)]
    Odb(#[from] gitstow_odb::Error),
    /// Local I/O (spool read or staging write).
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Live counters for progress.
#[derive(Debug, Default)]
pub struct Counters {
    /// Objects resolved so far.
    pub objects: AtomicU64,
    /// Deltas resolved so far.
    pub deltas: AtomicU64,
}

/// What pass 2 produced.
#[derive(Debug, Default)]
pub struct Resolved {
    /// What each resolver thread collected, put together by [`merge`]
    /// once the pass's own tables are gone.
    pub collected: Vec<Collected>,
    /// The objects named by pushed objects.
    pub references: OidSet,
    /// Thin-pack bases read from the repository.
    pub thin_bases: u64,
    /// Objects staged (not already in the repository).
    pub staged: u64,
}

struct Shared<'a> {
    file: &'a File,
    /// Where the last entry's stream ends in `file` (the trailer follows).
    pack_end: u64,
    pack: &'a ScannedPack,
    db: &'a ObjectDb,
    sink: &'a dyn EncodedObjectStore,
    opts: ResolveOptions,
    child_start: Vec<u32>,
    children: Vec<u32>,
    /// Entries in each entry's OFS subtree, itself included.
    subtree: Vec<u32>,
    /// How many OFS deltas deep each entry's subtree goes below it
    /// (saturating): a path keeps a re-basing anchor only where it can
    /// pass the stored depth cap.
    height: Vec<u16>,
    ref_children: Mutex<OidMap<Vec<u32>>>,
    /// What pushed objects name, from every thread ([`Collected::flush_references`]).
    references: Mutex<OidSet>,
    counters: &'a Counters,
    staged: AtomicU64,
    thin_bases: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<ResolveError>>,
}

struct Worker {
    collected: Collected,
    /// The zlib stream of the entry being resolved.
    compressed: Vec<u8>,
    /// Spool bytes read ahead (see [`ReadWindow`]).
    spool: ReadWindow,
    /// Kept inflated bytes read ahead.
    kept: ReadWindow,
    delta: Vec<u8>,
    pool: Vec<Vec<u8>>,
    /// Bytes of bases held by `descend` frames up the stack.
    held: u64,
    deflated: Vec<u8>,
    cache: ObjectCache,
    /// The process's turn for big objects, while this job holds it.
    turn: Option<Turn<'static>>,
}

/// Resolves every entry of `pack` (spooled in `file`), staging objects the
/// repository (`db`) does not already have into `sink`.
pub fn resolve(
    file: &File,
    pack: &ScannedPack,
    db: &ObjectDb,
    sink: &dyn EncodedObjectStore,
    opts: ResolveOptions,
    counters: &Counters,
) -> Result<Resolved, ResolveError> {
    let n = pack.entries.len();
    // OFS children in CSR form: children[child_start[i]..child_start[i+1]].
    let mut child_start = vec![0u32; n + 1];
    let mut ref_children: OidMap<Vec<u32>> = OidMap::new();
    for (i, e) in pack.entries.iter().enumerate() {
        match e.kind {
            EntryKind::OfsDelta(base) => child_start[base as usize + 1] += 1,
            EntryKind::RefDelta(base) => ref_children
                .entry_or_default(&pack.ref_bases[base as usize])
                .push(i as u32),
            EntryKind::Base(_) => {}
        }
    }
    for i in 0..n {
        child_start[i + 1] += child_start[i];
    }
    let mut fill = child_start.clone();
    let mut children = vec![0u32; child_start[n] as usize];
    for (i, e) in pack.entries.iter().enumerate() {
        if let EntryKind::OfsDelta(base) = e.kind {
            children[fill[base as usize] as usize] = i as u32;
            fill[base as usize] += 1;
        }
    }
    drop(fill);
    // OFS bases come before their deltas: one backward pass sums subtrees
    // and measures their heights.
    let mut subtree = vec![1u32; n];
    let mut height = vec![0u16; n];
    for i in (0..n).rev() {
        if let EntryKind::OfsDelta(base) = pack.entries[i].kind {
            let b = base as usize;
            subtree[b] = subtree[b].saturating_add(subtree[i]);
            height[b] = height[b].max(height[i].saturating_add(1));
        }
    }
    let roots: Vec<u32> = (0..n as u32)
        .filter(|&i| matches!(pack.entries[i as usize].kind, EntryKind::Base(_)))
        .collect();
    let shared = Shared {
        file,
        pack_end: pack
            .entries
            .last()
            .map_or(0, |e| e.data_offset + e.compressed_size),
        pack,
        db,
        sink,
        opts,
        child_start,
        children,
        subtree,
        height,
        ref_children: Mutex::new(ref_children),
        references: Mutex::default(),
        counters,
        staged: AtomicU64::new(0),
        thin_bases: AtomicU64::new(0),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
    };

    // Phase A: whole objects and everything below them.
    debug_assert_eq!(roots.len(), pack.base_oids.len());
    let mut workers = run_parallel(&shared, roots.len(), |s, w, k| {
        s.resolve_root(w, roots[k] as usize, pack.base_oids.oid(k).to_owned())
    })?;
    // Phase B: thin-pack bases from the repository (keys not resolved in phase A).
    let pending: Vec<ObjectId> = shared
        .ref_children
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(k, _)| k)
        .filter(|k| db.contains(k))
        .map(ToOwned::to_owned)
        .collect();
    if !pending.is_empty() {
        workers.extend(run_parallel(&shared, pending.len(), |s, w, k| {
            s.resolve_thin_base(w, pending[k])
        })?);
    }
    let leftover: usize = shared
        .ref_children
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(_, v)| v.len())
        .sum();
    let resolved = counters.objects.load(Ordering::Relaxed) as usize;
    if leftover > 0 || resolved != n {
        return Err(ResolveError::Invalid(format!(
            "pack has {} unresolved deltas",
            n.saturating_sub(resolved).max(leftover)
        )));
    }
    // The threads' buffers go here; their collections stay.
    let collected = workers.into_iter().map(|w| w.collected).collect();
    Ok(Resolved {
        collected,
        thin_bases: shared.thin_bases.load(Ordering::Relaxed),
        staged: shared.staged.load(Ordering::Relaxed),
        references: shared
            .references
            .into_inner()
            .unwrap_or_else(|p| p.into_inner()),
    })
}

/// Runs `job(k)` for k in 0..jobs on `threads` threads; returns the workers.
fn run_parallel<'a, F>(
    shared: &Shared<'a>,
    jobs: usize,
    job: F,
) -> Result<Vec<Worker>, ResolveError>
where
    F: Fn(&Shared<'a>, &mut Worker, usize) -> Result<(), ResolveError> + Sync,
{
    let next = AtomicUsize::new(0);
    let threads = shared.opts.threads.clamp(1, jobs.max(1));
    let workers = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::Builder::new()
                    .name("gitstow-resolve".into())
                    .stack_size(64 << 20)
                    .spawn_scoped(scope, || {
                        let mut w = Worker {
                            collected: Collected::default(),
                            compressed: Vec::new(),
                            spool: ReadWindow::default(),
                            kept: ReadWindow::default(),
                            delta: Vec::new(),
                            pool: Vec::new(),
                            held: 0,
                            deflated: Vec::new(),
                            cache: ObjectCache::new(16 << 20),
                            turn: None,
                        };
                        loop {
                            if shared.failed.load(Ordering::Relaxed) {
                                break;
                            }
                            let k = next.fetch_add(1, Ordering::Relaxed);
                            if k >= jobs {
                                break;
                            }
                            let result = job(shared, &mut w, k);
                            // A big object's turn lasts one job (a base's subtree).
                            w.turn = None;
                            if let Err(e) = result {
                                shared.fail(e);
                                break;
                            }
                        }
                        w.collected.flush_references(&shared.references);
                        w
                    })
                    .expect("spawning a resolver thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("resolver thread panicked"))
            .collect::<Vec<_>>()
    });
    if let Some(e) = shared
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        return Err(e);
    }
    Ok(workers)
}

impl Shared<'_> {
    fn fail(&self, e: ResolveError) {
        self.failed.store(true, Ordering::Relaxed);
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    /// Copies entry `i`'s zlib stream into `w.compressed`.
    fn read_compressed(&self, w: &mut Worker, i: usize) -> Result<(), ResolveError> {
        let e = &self.pack.entries[i];
        w.spool.read(
            self.file,
            self.pack_end,
            e.data_offset,
            e.compressed_size as usize,
            &mut w.compressed,
        )?;
        Ok(())
    }

    /// Puts entry `i`'s inflated bytes in `out`: read back from what pass 1
    /// kept, else inflated from the spool's copy, which must be in
    /// `w.compressed`. `out` is `w.delta` when `None`.
    fn read_inflated(
        &self,
        w: &mut Worker,
        i: usize,
        out: Option<&mut Vec<u8>>,
    ) -> Result<(), ResolveError> {
        let e = &self.pack.entries[i];
        let out = match out {
            Some(out) => out,
            None => &mut w.delta,
        };
        if let Some(kept) = &self.pack.kept {
            if let Some(at) = kept.offset(&self.pack.entries, i) {
                let len = e.decompressed_size as usize;
                w.kept.read(&kept.file, kept.len, at, len, out)?;
                return Ok(());
            }
        }
        gitstow_odb::reserve_rounded(out, e.decompressed_size as usize + 1);
        zlib::inflate_exact(&w.compressed, e.decompressed_size, out)
            .map_err(|err| self.invalid(i, err))?;
        Ok(())
    }

    /// Takes the process's turn for big objects ([`crate::big`]) before
    /// an object of `bytes` is held whole, unless this job has it already.
    fn hold_big(&self, w: &mut Worker, bytes: u64) {
        if bytes >= BIG_OBJECT_BYTES && w.turn.is_none() {
            w.turn = Some(BIG_OBJECTS.take());
        }
    }

    fn invalid(&self, i: usize, what: impl std::fmt::Display) -> ResolveError {
        let off = self.pack.entries[i].data_offset;
        ResolveError::Invalid(format!("entry at spool offset {off}: {what}"))
    }

    /// Resolves the whole entry `i`, whose oid pass 1 computed, and everything below it.
    fn resolve_root(&self, w: &mut Worker, i: usize, oid: ObjectId) -> Result<(), ResolveError> {
        let e = self.pack.entries[i];
        let EntryKind::Base(type_id) = e.kind else {
            unreachable!("roots are whole objects")
        };
        let kind = record::kind_from_type_id(type_id).expect("scan admits only types 1-4");
        let has_children = self.child_start[i] != self.child_start[i + 1]
            || self
                .ref_children
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&oid);
        if kind == Kind::Blob && !has_children {
            // Pass 1 inflated it to its declared size and hashed it; a blob
            // needs no parsing, and nothing is based on it: its record is
            // copied from the spool in pieces, so a blob of any size costs
            // no memory here.
            w.collected.push_oid(&oid, kind);
            if !self.db.contains(&oid) {
                self.sink.stage(EncodedObject {
                    id: oid,
                    kind,
                    size: e.decompressed_size,
                    encoding: Encoding::WholeFromFile {
                        file: self.file,
                        offset: e.data_offset,
                        len: e.compressed_size,
                    },
                })?;
                self.staged.fetch_add(1, Ordering::Relaxed);
            }
            self.counters.objects.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.hold_big(w, e.decompressed_size);
        self.read_compressed(w, i)?;
        // Pass 1 held the declared size to the object limit.
        let need = e.decompressed_size as usize + 1;
        let mut data = take_buf(w, need);
        gitstow_odb::reserve_rounded(&mut data, need);
        self.read_inflated(w, i, Some(&mut data))?;
        check_object(&oid, kind, &data, &mut w.collected).map_err(ResolveError::Invalid)?;
        w.collected.flush_when_full(&self.references);
        if !self.db.contains(&oid) {
            self.sink.stage(EncodedObject {
                id: oid,
                kind,
                size: e.decompressed_size,
                encoding: Encoding::Whole {
                    zlib: &w.compressed,
                },
            })?;
            self.staged.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.objects.fetch_add(1, Ordering::Relaxed);
        self.descend(w, Some(i), oid, kind, data, 0, 0, PathRebase::default())
    }

    /// Resolves the REF_DELTA children of `base`, an object the repository
    /// holds (a thin pack's base), and everything below them.
    ///
    /// A base stored so deep that its children's paths would pass the
    /// depth cap with no room for an anchor (`crate::rebase`) is first
    /// stored again, whole, with the push, as git's `index-pack
    /// --fix-thin` appends every thin base to the pack: its children are
    /// then placed against a base at depth 0, and a fan of siblings off a
    /// base at the cap costs their deltas and one whole copy, not a whole
    /// object each. Maintenance keeps the shallower copy.
    fn resolve_thin_base(&self, w: &mut Worker, base: ObjectId) -> Result<(), ResolveError> {
        // How deep the children's subtrees go below the base.
        let below = match self
            .ref_children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&base)
        {
            Some(children) => children
                .iter()
                .map(|&c| u32::from(self.height[c as usize]) + 1)
                .max()
                .unwrap_or(1),
            None => return Ok(()),
        };
        let depth = self.db.lookup(&base).map_or(0, |l| {
            self.hold_big(w, l.entry.size);
            l.entry.depth
        });
        let Some(obj) = self.db.read(&base, &mut w.cache)? else {
            return Ok(());
        };
        self.thin_bases.fetch_add(1, Ordering::Relaxed);
        let kind = obj.kind;
        // An object the cache did not keep is this read's alone: taken, not
        // copied (a big base is held once).
        let data = std::sync::Arc::try_unwrap(obj.data).unwrap_or_else(|shared| {
            let mut data = take_buf(w, shared.len());
            data.extend_from_slice(&shared);
            data
        });
        let cap = self.opts.max_stored_depth;
        let depth = if depth > crate::rebase::anchor_depth(cap) && depth + below > cap {
            w.deflated.clear();
            zlib::deflate(&data, &mut w.deflated);
            self.sink.stage(EncodedObject {
                id: base,
                kind,
                size: data.len() as u64,
                encoding: Encoding::Whole { zlib: &w.deflated },
            })?;
            self.staged.fetch_add(1, Ordering::Relaxed);
            0
        } else {
            depth
        };
        self.descend(w, None, base, kind, data, depth, 0, PathRebase::default())
    }

    /// Resolves the children of the object `base_oid` (pack entry `base_index`,
    /// if in the pack), whose bytes are `data`, and everything below them.
    ///
    /// The child with the largest known subtree is resolved last, in this
    /// loop rather than by recursion, after its parent's bytes were released:
    /// a linear chain of any depth holds two objects and one stack frame, and
    /// only the other children hold their parent (at most log2(entries) levels
    /// for OFS deltas). What parents hold while their other children are
    /// resolved is bounded by `max_held_bytes`. `rebase`: the re-basing
    /// state of the path ([`PathRebase`]).
    #[allow(clippy::too_many_arguments)]
    fn descend(
        &self,
        w: &mut Worker,
        mut base_index: Option<usize>,
        mut base_oid: ObjectId,
        kind: Kind,
        mut data: Vec<u8>,
        mut stored_depth: u32,
        mut chain: u32,
        mut rebase: PathRebase,
    ) -> Result<(), ResolveError> {
        loop {
            let mut children: Vec<u32> = match base_index {
                Some(i) => self.children
                    [self.child_start[i] as usize..self.child_start[i + 1] as usize]
                    .to_vec(),
                None => Vec::new(),
            };
            if let Some(refs) = self
                .ref_children
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&base_oid)
            {
                children.extend(refs);
            }
            if children.is_empty() || self.failed.load(Ordering::Relaxed) {
                recycle(w, data);
                return Ok(());
            }
            if chain + 1 > self.opts.max_chain_depth {
                recycle(w, data);
                return Err(ResolveError::Invalid(format!(
                    "delta chain deeper than {} objects",
                    self.opts.max_chain_depth
                )));
            }
            // the heaviest child goes last; among equals the last one (REF
            // children, whose subtrees are not known ahead, come after OFS ones)
            let heaviest = (0..children.len())
                .max_by_key(|&k| (self.subtree[children[k] as usize], k))
                .expect("not empty");
            let last = children.remove(heaviest);
            if !children.is_empty() {
                // A base held for its other children, and the re-basing
                // state each of them starts from.
                let held = data.len() as u64 + rebase.held_bytes();
                if w.held > 0 && w.held + held > self.opts.max_held_bytes {
                    recycle(w, data);
                    return Err(ResolveError::Invalid(format!(
                        "delta bases of more than {} bytes would be held at once",
                        self.opts.max_held_bytes
                    )));
                }
                w.held += held;
                let result = children.iter().try_for_each(|&c| {
                    let mut branch = rebase.clone();
                    let (oid, child, depth) = self.resolve_child(
                        w,
                        c as usize,
                        base_oid,
                        kind,
                        &data,
                        stored_depth,
                        &mut branch,
                    )?;
                    self.descend(
                        w,
                        Some(c as usize),
                        oid,
                        kind,
                        child,
                        depth,
                        chain + 1,
                        branch,
                    )
                });
                w.held -= held;
                if let Err(e) = result {
                    recycle(w, data);
                    return Err(e);
                }
            }
            if self.failed.load(Ordering::Relaxed) {
                recycle(w, data);
                return Ok(());
            }
            let resolved = self.resolve_child(
                w,
                last as usize,
                base_oid,
                kind,
                &data,
                stored_depth,
                &mut rebase,
            );
            recycle(w, data);
            let (oid, child, depth) = resolved?;
            base_index = Some(last as usize);
            base_oid = oid;
            data = child;
            stored_depth = depth;
            chain += 1;
        }
    }

    /// Inflates the delta entry `c`, applies it to `base`, hashes, checks and
    /// stages the result; returns its id, bytes and stored depth. Within
    /// the depth cap the result is stored as the pack's delta against its
    /// parent; past it, where `rebase` places it: its scheme (updated, or
    /// started at an object stored whole), or, before one runs, the
    /// path's anchor (`crate::rebase`).
    #[allow(clippy::too_many_arguments)]
    fn resolve_child(
        &self,
        w: &mut Worker,
        c: usize,
        base_oid: ObjectId,
        kind: Kind,
        base: &[u8],
        stored_depth: u32,
        rebase: &mut PathRebase,
    ) -> Result<(ObjectId, Vec<u8>, u32), ResolveError> {
        let e = self.pack.entries[c];
        self.read_compressed(w, c)?;
        self.read_inflated(w, c, None)?;
        // Every instruction makes at most max(base, 127) bytes: a result size
        // beyond that is a lie, refused before anything is allocated for it.
        let (_, result_size) = delta::sizes(&w.delta).map_err(|err| self.invalid(c, err))?;
        let most = (w.delta.len() as u64).saturating_mul(base.len().max(127) as u64);
        if result_size > most {
            return Err(self.invalid(
                c,
                format!(
                    "delta declares a result of {result_size} bytes, \
                     more than its {} bytes of instructions can make",
                    w.delta.len()
                ),
            ));
        }
        self.hold_big(w, result_size.min(self.opts.max_object_bytes));
        let mut data = take_buf(w, result_size.min(self.opts.max_object_bytes) as usize);
        if result_size <= self.opts.max_object_bytes {
            gitstow_odb::reserve_rounded(&mut data, result_size as usize);
        }
        if let Err(err) = delta::apply(base, &w.delta, self.opts.max_object_bytes, &mut data) {
            recycle(w, data);
            return Err(self.invalid(c, err));
        }
        let oid = hash(self.pack.format, kind, &data).map_err(|err| self.invalid(c, err))?;
        check_object(&oid, kind, &data, &mut w.collected).map_err(ResolveError::Invalid)?;
        w.collected.flush_when_full(&self.references);
        let cap = self.opts.max_stored_depth;
        let existing = self.db.contains(&oid).then(|| {
            self.db
                .lookup(&oid)
                .map_or(stored_depth + 1, |l| l.entry.depth)
        });
        let size = data.len() as u64;
        let mut placement = rebase
            .place(&w.delta, oid, size, stored_depth, existing, cap)
            .map_err(|err| self.invalid(c, err))?;
        if existing.is_none() && crate::rebase::too_small_for_its_base(size, base.len()) {
            placement = Placement::Whole;
        }
        let starts_scheme = rebase.starts_scheme(&placement);
        let depth = match (placement, existing) {
            (Placement::Whole, held) => {
                let depth = held.unwrap_or(0);
                if held.is_none() {
                    w.deflated.clear();
                    zlib::deflate(&data, &mut w.deflated);
                    self.sink.stage(EncodedObject {
                        id: oid,
                        kind,
                        size,
                        encoding: Encoding::Whole { zlib: &w.deflated },
                    })?;
                    self.staged.fetch_add(1, Ordering::Relaxed);
                }
                depth
            }
            (Placement::Parent(depth), Some(_)) | (Placement::Rebased { depth, .. }, Some(_)) => {
                depth
            }
            (Placement::Parent(depth), None) => {
                self.sink.stage(EncodedObject {
                    id: oid,
                    kind,
                    size,
                    encoding: Encoding::Delta {
                        base: base_oid,
                        delta_size: e.decompressed_size,
                        zlib: &w.compressed,
                        depth,
                    },
                })?;
                self.staged.fetch_add(1, Ordering::Relaxed);
                depth
            }
            (
                Placement::Rebased {
                    base,
                    depth,
                    delta: composed,
                },
                None,
            ) => {
                w.deflated.clear();
                zlib::deflate(&composed, &mut w.deflated);
                self.sink.stage(EncodedObject {
                    id: oid,
                    kind,
                    size,
                    encoding: Encoding::Delta {
                        base,
                        delta_size: composed.len() as u64,
                        zlib: &w.deflated,
                        depth,
                    },
                })?;
                self.staged.fetch_add(1, Ordering::Relaxed);
                depth
            }
        };
        rebase
            .follow(
                starts_scheme,
                &w.delta,
                oid,
                size,
                depth,
                self.height[c],
                cap,
            )
            .map_err(|err| self.invalid(c, err))?;
        self.counters.objects.fetch_add(1, Ordering::Relaxed);
        self.counters.deltas.fetch_add(1, Ordering::Relaxed);
        Ok((oid, data, depth))
    }
}

/// A spare buffer for an object of `need` bytes (reused across objects so
/// steady-state allocation is near zero): the smallest one that holds
/// `need`, so the large ones stay free for large objects, else the largest,
/// so buffers stop growing once they fit the objects.
fn take_buf(w: &mut Worker, need: usize) -> Vec<u8> {
    let fits = (0..w.pool.len())
        .filter(|&i| w.pool[i].capacity() >= need)
        .min_by_key(|&i| w.pool[i].capacity());
    let pick = fits.or_else(|| (0..w.pool.len()).max_by_key(|&i| w.pool[i].capacity()));
    pick.map(|i| w.pool.swap_remove(i)).unwrap_or_default()
}

/// Gives a buffer back; only a few, and none over 16 MiB, are kept.
fn recycle(w: &mut Worker, mut buf: Vec<u8>) {
    if w.pool.len() < 8 && buf.capacity() <= 16 << 20 {
        buf.clear();
        w.pool.push(buf);
    }
}

fn hash(format: gix_hash::Kind, kind: Kind, data: &[u8]) -> Result<ObjectId, String> {
    gix_object::compute_hash(format, kind, data).map_err(|e| e.to_string())
}
