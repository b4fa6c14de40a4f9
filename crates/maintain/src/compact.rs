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
//! place of the oldest source) and the sources are retired, to be deleted
//! after the grace period.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use gitstow_odb::container::{ContainerIndex, ContainerWriter, IndexEntry};
use gitstow_odb::record;
use gitstow_odb::state::{ContainerRef, RetiredContainer};
use gitstow_odb::{CommitOutcome, Repository};
use gix_hash::ObjectId;

use crate::{now_secs, Error, Options, Result};

/// What a merge wrote.
#[derive(Debug, Default)]
pub struct Merged {
    /// The new containers, uploaded, in the order written.
    pub containers: Vec<ContainerRef>,
    /// Records in the sources.
    pub objects_in: u64,
    /// Duplicate records left out.
    pub duplicates_dropped: u64,
    /// REF_DELTA records whose base joined the output and became OFS_DELTA.
    pub ref_to_ofs: u64,
}

/// Merges `sources` (in the state's order, oldest first) into new containers
/// and uploads them; `progress` is called after each source.
pub fn merge(
    repo: &Repository,
    sources: &[ContainerRef],
    opts: &Options,
    progress: &mut dyn FnMut(usize),
) -> Result<Merged> {
    let indexes: Vec<Arc<ContainerIndex>> = sources
        .iter()
        .map(|c| repo.container_index(&c.id))
        .collect::<gitstow_odb::Result<_>>()?;
    // The copy of each oid to keep: the shallowest chain, the oldest on a tie.
    let mut chosen: gix_hashtable::HashMap<ObjectId, (u32, u32)> = Default::default();
    let mut merged = Merged::default();
    for (s, idx) in indexes.iter().enumerate() {
        for e in idx.entries() {
            merged.objects_in += 1;
            chosen
                .entry(e.oid)
                .and_modify(|c| {
                    if e.depth < c.1 {
                        *c = (s as u32, e.depth);
                    }
                })
                .or_insert((s as u32, e.depth));
        }
    }
    merged.duplicates_dropped = merged.objects_in - chosen.len() as u64;
    let staging = match &opts.staging_dir {
        Some(dir) => tempfile::Builder::new()
            .prefix("gitstow-maintain")
            .tempdir_in(dir)?,
        None => tempfile::Builder::new()
            .prefix("gitstow-maintain")
            .tempdir()?,
    };
    let mut writer = ContainerWriter::new(staging.path())?;
    let mut head = [0u8; 32];
    for (s, (src, idx)) in sources.iter().zip(&indexes).enumerate() {
        let mut file = tempfile::tempfile_in(staging.path())?;
        let key = repo.bin_key(&src.id);
        let meta = repo
            .store()
            .get_to_file(&key, &mut file)?
            .ok_or_else(|| gitstow_store::Error::NotFound { key: key.clone() })?;
        let mut order: Vec<&IndexEntry> = idx
            .entries()
            .iter()
            .filter(|e| chosen.get(&e.oid).is_some_and(|c| c.0 == s as u32))
            .collect();
        order.sort_unstable_by_key(|e| e.offset);
        let corrupt = |oid: ObjectId, reason: String| {
            Error::Odb(gitstow_odb::Error::CorruptObject { oid, reason })
        };
        for e in order {
            if e.offset + e.length > meta.size {
                return Err(corrupt(
                    e.oid,
                    format!("container {} is shorter than its index says", src.id),
                ));
            }
            let n = (e.length as usize).min(head.len());
            file.read_exact_at(&mut head[..n], e.offset)?;
            let h =
                record::decode_header(&head[..n]).map_err(|err| corrupt(e.oid, err.to_string()))?;
            if h.type_id != e.record_type {
                return Err(corrupt(e.oid, "record type differs from the index".into()));
            }
            if !writer.is_empty() && writer.len() + e.length > opts.max_container_bytes {
                let full = std::mem::replace(&mut writer, ContainerWriter::new(staging.path())?);
                merged.containers.push(repo.upload_container(full.seal()?)?);
            }
            if e.record_type == record::REF_DELTA && e.base.is_some_and(|b| writer.contains(&b)) {
                merged.ref_to_ofs += 1;
            }
            writer.append_record_from_file(
                e,
                h.size,
                &file,
                e.offset + h.len as u64,
                e.length - h.len as u64,
            )?;
        }
        progress(s + 1);
    }
    if !writer.is_empty() {
        merged
            .containers
            .push(repo.upload_container(writer.seal()?)?);
    }
    Ok(merged)
}

/// Publishes a merge: in the current state, `sources` (still all live) are
/// replaced by `outputs` at the place of the oldest source and retired as of
/// now. Re-reads and re-applies when a push (or anything) committed first.
/// `Ok(false)` when a source is no longer live (another maintenance run
/// merged it): nothing is changed then and the outputs are left for the
/// orphan scan.
pub fn commit(
    repo: &Repository,
    sources: &[ContainerRef],
    outputs: &[ContainerRef],
    opts: &Options,
) -> Result<bool> {
    let mut attempts = 0;
    loop {
        let Some(current) = repo.load_state()? else {
            return Ok(false);
        };
        let state = &current.state;
        let mut first = usize::MAX;
        for s in sources {
            match state.containers.iter().position(|c| c.id == s.id) {
                Some(p) => first = first.min(p),
                None => return Ok(false),
            }
        }
        let is_source = |id: &str| sources.iter().any(|s| s.id == id);
        let mut next = state.clone();
        next.containers.retain(|c| !is_source(&c.id));
        let at = first.min(next.containers.len());
        next.containers.splice(at..at, outputs.iter().cloned());
        let since = now_secs();
        next.retired.retain(|r| !is_source(&r.id));
        next.retired
            .extend(sources.iter().map(|s| RetiredContainer {
                id: s.id.clone(),
                since,
            }));
        if let Some(delay) = opts.test_commit_delay {
            std::thread::sleep(delay);
        }
        match repo.commit_state(&next, Some(&current.etag))? {
            CommitOutcome::Committed(_) => return Ok(true),
            CommitOutcome::Conflict => {
                tracing::info!(
                    repo = repo.name(),
                    "the state changed while merging (a push committed); re-applying the merge"
                );
                attempts += 1;
                if attempts >= opts.max_state_attempts {
                    return Err(Error::TooManyConflicts(attempts));
                }
                std::thread::sleep(std::time::Duration::from_millis(5 << attempts.min(6)));
            }
        }
    }
}
