//! Collection of Git LFS data nothing needs any more (the keys are
//! [`gitstow_lfs::keys`]'s), store-wide, in one pass:
//!
//! 1. **Markers**: a repository's claim to an object is dropped when no
//!    pointer blob of its live containers names the object and the claim
//!    is older than the grace period (an upload comes before the push that
//!    brings its pointer: the grace period covers a push in flight); every
//!    claim of a repository that does not exist (deleted, or never pushed
//!    to) is dropped once older than the grace period.
//! 2. **Objects**: an object no claim names becomes a candidate
//!    (`.gitstow/lfs/collect`, the time it was first seen unclaimed); a
//!    candidate still unclaimed a grace period later, by a listing made
//!    just before the deletions, is deleted. (What remains open: an upload
//!    of that very object verified between that listing and the deletion,
//!    a window of one request, for an object nobody claimed for a grace
//!    period.)
//! 3. **Staging**: presigned uploads never verified are deleted once their
//!    grant expired a grace period ago.
//!
//! Which blobs are pointers: every blob of at most 1 KiB in the
//! repository's live containers is read and parsed
//! ([`gitstow_lfs::pointer`]); what GC has not dropped yet counts as
//! needed, which only keeps more.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use gitstow_lfs::{objects::Marker, pointer, Oid};
use gitstow_odb::{IndexCache, ObjectCache, Repository};
use gitstow_store::{ObjectStore, PutCondition};

use crate::Result;

/// The candidates document: an unclaimed object's oid → when it was first
/// seen unclaimed (seconds since the epoch).
const CANDIDATES: &str = ".gitstow/lfs/collect";

/// How a collection runs.
#[derive(Debug, Clone)]
pub struct LfsOptions {
    /// How long unneeded data is kept.
    pub grace: Duration,
    /// Say what would go, delete nothing.
    pub dry_run: bool,
    /// Now, in seconds since the epoch.
    pub now: u64,
}

/// What a collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LfsReport {
    /// Repositories' claims dropped.
    pub markers_dropped: usize,
    /// Objects deleted, and their bytes.
    pub objects_dropped: usize,
    /// Bytes of the objects deleted.
    pub bytes_dropped: u64,
    /// Objects unclaimed but within their grace period.
    pub objects_pending: usize,
    /// Abandoned staged uploads deleted.
    pub staging_dropped: usize,
}

/// The LFS oids the pointer blobs of `repo`'s live containers name (empty
/// for a repository that does not exist or is deleted).
///
/// # Errors
/// The store failed or an object cannot be read.
pub fn pointers(repo: &Repository) -> Result<BTreeSet<Oid>> {
    let Some(current) = repo.load_state()? else {
        return Ok(BTreeSet::new());
    };
    if current.state.deleted {
        return Ok(BTreeSet::new());
    }
    let db = repo.objects(&current.state)?;
    let mut cache = ObjectCache::new(8 << 20);
    let mut out = BTreeSet::new();
    let small: Vec<_> = db
        .entries()
        .filter(|e| e.kind == gitstow_odb::record::BLOB && e.size <= pointer::MAX_POINTER)
        .map(|e| e.oid)
        .collect();
    for oid in small {
        if let Some(obj) = db.read(&oid, &mut cache)? {
            if let Some((lfs, _)) = pointer::parse(&obj.data) {
                out.insert(lfs);
            }
        }
    }
    Ok(out)
}

/// A marker key split: the repository and the oid.
fn marker_of(key: &str) -> Option<(&str, Oid)> {
    let (repo, oid) = key.split_once(".git/lfs/objects/")?;
    Some((repo, Oid::parse(oid)?))
}

/// Every claim in the store: marker key → (repository, oid).
fn claims(keys: &[String]) -> Vec<(&str, &str, Oid)> {
    keys.iter()
        .filter_map(|k| marker_of(k).map(|(r, o)| (k.as_str(), r, o)))
        .collect()
}

/// Runs one collection over the whole store (see the module docs).
///
/// # Errors
/// The store failed, or a repository's objects cannot be read (nothing of
/// that repository's is dropped then: the error ends the run).
pub fn collect(
    store: &Arc<dyn ObjectStore>,
    indexes: &Arc<IndexCache>,
    opts: &LfsOptions,
) -> Result<LfsReport> {
    let grace = opts.grace.as_secs();
    let old = |t: Option<u64>| t.unwrap_or(0).saturating_add(grace) <= opts.now;
    let mut report = LfsReport::default();
    let listing = store.list("")?;

    // 1. claims
    let mut needed: BTreeMap<&str, BTreeSet<Oid>> = BTreeMap::new();
    let mut kept: BTreeSet<Oid> = BTreeSet::new();
    for (key, repo, oid) in claims(&listing) {
        if !needed.contains_key(repo) {
            let r = Repository::new(store.clone(), repo, indexes.clone());
            needed.insert(repo, pointers(&r)?);
        }
        if needed[repo].contains(&oid) {
            kept.insert(oid);
            continue;
        }
        let created = store
            .get(key)?
            .and_then(|(data, _)| Marker::parse(&data))
            .and_then(|m| m.created);
        if !old(created) {
            kept.insert(oid);
            continue;
        }
        tracing::info!(repo, %oid, dry_run = opts.dry_run, "LFS: a claim no pointer needs is dropped");
        if !opts.dry_run {
            store.delete(key)?;
        }
        report.markers_dropped += 1;
    }

    // 2. objects: candidates first seen unclaimed a grace period ago go
    let stored: BTreeMap<Oid, &str> = listing
        .iter()
        .filter_map(|k| {
            let hex = k
                .strip_prefix(".gitstow/lfs/objects/")?
                .rsplit('/')
                .next()?;
            Some((Oid::parse(hex)?, k.as_str()))
        })
        .collect();
    let mut candidates: BTreeMap<String, u64> = match store.get(CANDIDATES)? {
        Some((data, _)) => serde_json::from_slice(&data).unwrap_or_default(),
        None => BTreeMap::new(),
    };
    candidates.retain(|hex, _| {
        Oid::parse(hex).is_some_and(|o| stored.contains_key(&o) && !kept.contains(&o))
    });
    let mut due = Vec::new();
    for oid in stored.keys().filter(|o| !kept.contains(o)) {
        match candidates.get(&oid.to_string()) {
            Some(&first) if old(Some(first)) => due.push(*oid),
            Some(_) => report.objects_pending += 1,
            None => {
                candidates.insert(oid.to_string(), opts.now);
                report.objects_pending += 1;
            }
        }
    }
    if !due.is_empty() {
        // claimed since the listing above? then not now
        let again = store.list("")?;
        let claimed: BTreeSet<Oid> = claims(&again).into_iter().map(|(_, _, o)| o).collect();
        for oid in due {
            if claimed.contains(&oid) {
                candidates.remove(&oid.to_string());
                continue;
            }
            let key = stored[&oid];
            let size = store.head(key)?.map_or(0, |m| m.size);
            tracing::info!(%oid, size, dry_run = opts.dry_run, "LFS: an object no repository claims is deleted");
            if !opts.dry_run {
                store.delete(key)?;
                candidates.remove(&oid.to_string());
            }
            report.objects_dropped += 1;
            report.bytes_dropped += size;
        }
    }
    if !opts.dry_run {
        let data = serde_json::to_vec(&candidates).unwrap_or_default();
        store.put(CANDIDATES, &data, PutCondition::None)?;
    }

    // 3. staged uploads whose grant expired a grace period ago
    for key in listing
        .iter()
        .filter(|k| k.starts_with(".gitstow/lfs/staging/"))
    {
        let expired = key
            .rsplit('/')
            .next()
            .and_then(gitstow_lfs::grant::upload_expiry);
        if expired.is_some() && old(expired) {
            if !opts.dry_run {
                store.delete(key)?;
            }
            report.staging_dropped += 1;
        }
    }
    Ok(report)
}
