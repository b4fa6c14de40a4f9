//! Compaction: merging containers into new ones with their records copied
//! verbatim (as JGit's `DfsPackCompactor`: deltas reused, never searched).
//!
//! - Each source `.bin` is downloaded once into a local temp file and read
//!   record by record; a record's zlib stream is copied in pieces of at most
//!   64 KiB, never inflated or recompressed. Memory holds the source indexes
//!   and one map of oid → chosen copy (about 40 bytes an object).
//! - Sources are read oldest first and each in `.bin` order, so a base mostly
//!   precedes its deltas; a delta whose base is already in the output becomes
//!   an OFS_DELTA (a REF_DELTA across containers turns into one), any other
//!   stays or becomes a REF_DELTA.
//! - An object stored more than once (racing pushes) is written once: the
//!   copy with the shallowest delta chain, so no chain grows and every chain
//!   stays within the depth cap the pushes kept. (Each kept copy's base has a
//!   strictly smaller recorded depth, so the kept records form no cycle.)
//! - The output rolls over into a new container at the configured size.
//!
//! The merged containers are published by [`commit`], through the state's
//! compare-and-swap: they replace their sources in the live list (at the
//! place of the oldest source); then the sources are added to the retired
//! list, to be deleted after the grace period.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use gitstow_odb::container::{ContainerIndex, ContainerWriter, IndexEntry};
use gitstow_odb::graph::CommitGraph;
use gitstow_odb::oids::OidMap;
use gitstow_odb::record;
use gitstow_odb::state::ContainerRef;
use gitstow_odb::{ObjectDb, RepoState, Repository};

use crate::graph::GraphRows;
use crate::{retire, update_state_naming, Error, Options, Result, Step};

/// What a merge wrote.
#[derive(Debug, Default)]
pub struct Merged {
    /// The new containers, uploaded, in the order written.
    pub containers: Vec<ContainerRef>,
    /// Duplicate records left out.
    pub duplicates_dropped: u64,
    /// REF_DELTA records whose base joined the output and became OFS_DELTA.
    pub ref_to_ofs: u64,
}

/// Source containers opened for copying: their indexes, the copy of each
/// oid to keep, and (once [`Sources::download`] ran) their `.bin` files.
pub struct Sources {
    indexes: Vec<Arc<ContainerIndex>>,
    ids: Vec<String>,
    chosen: OidMap<(u32, u32)>,
    files: Vec<Option<(std::fs::File, u64)>>,
    /// Records in the sources.
    pub objects_in: u64,
}

impl Sources {
    /// Loads the indexes of `sources` and picks, for each oid, the copy with
    /// the shallowest recorded chain (the oldest on a tie).
    pub fn open(repo: &Repository, sources: &[ContainerRef]) -> Result<Self> {
        let indexes: Vec<Arc<ContainerIndex>> = sources
            .iter()
            .map(|c| repo.container_index(&c.id))
            .collect::<gitstow_odb::Result<_>>()?;
        let mut chosen: OidMap<(u32, u32)> = OidMap::new();
        let mut objects_in = 0;
        for (s, idx) in indexes.iter().enumerate() {
            for e in idx.iter() {
                objects_in += 1;
                let c = chosen.entry_or_insert_with(&e.oid, || (s as u32, e.depth));
                if e.depth < c.1 {
                    *c = (s as u32, e.depth);
                }
            }
        }
        Ok(Sources {
            indexes,
            ids: sources.iter().map(|c| c.id.clone()).collect(),
            chosen,
            files: sources.iter().map(|_| None).collect(),
            objects_in,
        })
    }

    /// Distinct objects in the sources.
    pub fn distinct(&self) -> u64 {
        self.chosen.len() as u64
    }

    /// Downloads source `s`'s `.bin` into a temp file in `dir` (once).
    pub fn download(&mut self, repo: &Repository, s: usize, dir: &std::path::Path) -> Result<()> {
        if self.files[s].is_some() {
            return Ok(());
        }
        let mut file = tempfile::tempfile_in(dir)?;
        let key = repo.bin_key(&self.ids[s]);
        let meta = repo
            .store()
            .get_to_file(&key, &mut file)?
            .ok_or_else(|| gitstow_store::Error::NotFound { key: key.clone() })?;
        self.files[s] = Some((file, meta.size));
        Ok(())
    }

    /// Forgets source `s`'s downloaded file.
    pub fn drop_file(&mut self, s: usize) {
        self.files[s] = None;
    }

    /// The kept records of source `s` that `keep` accepts, in `.bin` order.
    pub fn records(&self, s: usize, keep: &dyn Fn(&IndexEntry) -> bool) -> Vec<IndexEntry> {
        let mut order: Vec<IndexEntry> = self.indexes[s]
            .iter()
            .filter(|e| self.chosen.get(&e.oid).is_some_and(|c| c.0 == s as u32) && keep(e))
            .collect();
        order.sort_unstable_by_key(|e| e.offset);
        order
    }

    /// Copies record `e` of source `s` (downloaded) into `out`.
    pub fn copy(&self, s: usize, e: &IndexEntry, out: &mut Output<'_>) -> Result<()> {
        let (file, size) = self.files[s]
            .as_ref()
            .expect("source downloaded before copying");
        let corrupt =
            |reason: String| Error::Odb(gitstow_odb::Error::CorruptObject { oid: e.oid, reason });
        if e.offset + e.length > *size {
            return Err(corrupt(format!(
                "container {} is shorter than its index says",
                self.ids[s]
            )));
        }
        // Type and size (at most 10 bytes), then a base of at most 32.
        let mut head = [0u8; 48];
        let n = (e.length as usize).min(head.len());
        file.read_exact_at(&mut head[..n], e.offset)?;
        let h = record::decode_header(&head[..n], e.oid.as_slice().len())
            .map_err(|err| corrupt(err.to_string()))?;
        if h.type_id != e.record_type {
            return Err(corrupt("record type differs from the index".into()));
        }
        out.append(
            e,
            h.size,
            file,
            e.offset + h.len as u64,
            e.length - h.len as u64,
        )
    }
}

/// Containers being written from copied records: rolls over at the maximum
/// size, uploads each as it is sealed.
pub struct Output<'a> {
    repo: &'a Repository,
    graphs: GraphRows<'a>,
    dir: std::path::PathBuf,
    max_bytes: u64,
    writer: Option<ContainerWriter>,
    containers: Vec<ContainerRef>,
    ref_to_ofs: u64,
}

impl<'a> Output<'a> {
    /// An output staging in `dir`; each container gets a commit graph whose
    /// rows come from `db` (the objects the records are copied from).
    pub fn new(
        repo: &'a Repository,
        db: &'a ObjectDb,
        dir: &std::path::Path,
        max_bytes: u64,
    ) -> Self {
        Output {
            repo,
            graphs: GraphRows::new(db),
            dir: dir.to_owned(),
            max_bytes,
            writer: None,
            containers: Vec::new(),
            ref_to_ofs: 0,
        }
    }

    fn append(
        &mut self,
        e: &IndexEntry,
        payload_size: u64,
        file: &std::fs::File,
        offset: u64,
        len: u64,
    ) -> Result<()> {
        let full = self
            .writer
            .as_ref()
            .is_some_and(|w| !w.is_empty() && w.len() + e.length > self.max_bytes);
        if full {
            self.seal()?;
        }
        if self.writer.is_none() {
            self.writer = Some(ContainerWriter::new(&self.dir)?);
        }
        let w = self.writer.as_mut().expect("set above");
        if e.record_type == record::REF_DELTA && e.base.is_some_and(|b| w.contains(&b)) {
            self.ref_to_ofs += 1;
        }
        w.append_record_from_file(e, payload_size, file, offset, len)?;
        Ok(())
    }

    fn seal(&mut self) -> Result<()> {
        if let Some(w) = self.writer.take() {
            if !w.is_empty() {
                let mut sealed = w.seal()?;
                let mut rows = self.graphs.rows(&sealed.commits)?;
                sealed.graph = Some(CommitGraph::encode(&mut rows));
                self.containers.push(self.repo.upload_container(sealed)?);
            }
        }
        Ok(())
    }

    /// Seals and uploads the last container; returns them all, in the order
    /// written, and how many REF_DELTA records became OFS_DELTA.
    pub fn finish(mut self) -> Result<(Vec<ContainerRef>, u64)> {
        self.seal()?;
        Ok((self.containers, self.ref_to_ofs))
    }
}

/// A staging directory for maintenance under `opts.staging_dir` (or the system temp dir).
pub fn staging_dir(opts: &Options) -> Result<tempfile::TempDir> {
    let dir = opts.staging_dir.clone().unwrap_or_else(std::env::temp_dir);
    Ok(tempfile::Builder::new()
        .prefix("gitstow-maintain")
        .tempdir_in(dir)?)
}

/// Merges `sources` (in the state's order, oldest first; taken from
/// `state`) into new containers and uploads them; `progress` is called
/// after each source. The outputs' commit graphs read `state`'s live
/// containers (a parent may be stored in one that does not take part).
pub fn merge(
    repo: &Repository,
    state: &RepoState,
    sources: &[ContainerRef],
    opts: &Options,
    progress: &mut dyn FnMut(usize),
) -> Result<Merged> {
    let staging = staging_dir(opts)?;
    let mut src = Sources::open(repo, sources)?;
    let db = repo.live_objects(state)?;
    let mut out = Output::new(repo, &db, staging.path(), opts.max_container_bytes);
    for s in 0..sources.len() {
        src.download(repo, s, staging.path())?;
        for e in src.records(s, &|_| true) {
            src.copy(s, &e, &mut out)?;
        }
        src.drop_file(s);
        progress(s + 1);
    }
    let (containers, ref_to_ofs) = out.finish()?;
    Ok(Merged {
        containers,
        duplicates_dropped: src.objects_in - src.distinct(),
        ref_to_ofs,
    })
}

/// Publishes a merge: in the current state, `sources` (still all live) are
/// replaced by `outputs` at the place of the oldest source and retired as of
/// now. Re-reads and re-applies when a push (or anything) committed first.
/// `Ok(false)` when a source is no longer live (another maintenance run
/// merged it): nothing is changed then and the outputs are left for the
/// orphan scan.
///
/// `deletions_at_start` is the deletion count of the state read before the
/// outputs were uploaded: they are named only while intact
/// ([`Repository::uploads_intact`]).
pub fn commit(
    repo: &Repository,
    sources: &[ContainerRef],
    outputs: &[ContainerRef],
    deletions_at_start: u64,
    opts: &Options,
) -> Result<bool> {
    let is_source = |id: &str| sources.iter().any(|s| s.id == id);
    let ids: Vec<String> = outputs.iter().map(|c| c.id.clone()).collect();
    let uploads = Some((deletions_at_start, ids.as_slice()));
    let done = update_state_naming(repo, opts, "merging", uploads, |state| {
        let mut first = usize::MAX;
        for s in sources {
            match state.containers.iter().position(|c| c.id == s.id) {
                Some(p) => first = first.min(p),
                None => return Step::Done(false),
            }
        }
        let mut next = state.clone();
        next.containers.retain(|c| !is_source(&c.id));
        let at = first.min(next.containers.len());
        next.containers.splice(at..at, outputs.iter().cloned());
        // A merged container no longer holds exactly what the GC's tips reach.
        if next
            .closure
            .as_ref()
            .is_some_and(|c| c.containers.iter().any(|id| is_source(id)))
        {
            next.closure = None;
        }
        Step::Write(next, true)
    })?
    .unwrap_or(false);
    if done {
        let ids: Vec<String> = sources.iter().map(|s| s.id.clone()).collect();
        retire(repo, opts, &ids)?;
    }
    Ok(done)
}
