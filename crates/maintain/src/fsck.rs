//! `gitstow fsck`: checks a repository as stored, as `git fsck --full`
//! checks a repository on disk.
//!
//! 1. the state decodes, and every container it names (live and garbage)
//!    has its `.bin` and `.idx` in the store, the `.bin` of the size the
//!    state records;
//! 2. each `.idx` decodes, every record it lists lies within the `.bin`,
//!    and every object it lists reads back through its delta chain and
//!    hashes to its oid (the index matches the bytes; a container's id is
//!    salted by its writer, so it cannot be checked against the bytes);
//! 3. every object the refs reach is present and parses (commits, trees,
//!    tags), and every ref names an object;
//! 4. every Git LFS pointer blob the refs reach names an object the
//!    repository has (its claim, and the bytes in the store): `missing LFS
//!    object <oid> (pointer <blob>)` otherwise.
//!
//! Problems are reported in git's words where git has them (`missing blob
//! <oid>`, `error: refs/heads/main: invalid sha1 pointer <oid>`, `error:
//! sha1 mismatch for <oid>`); reading stops at nothing but a state that
//! does not decode.

use gitstow_odb::{ObjectCache, ObjectDb, RepoState, Repository};
use gix_hash::ObjectId;

use crate::Result;

/// What [`fsck`] found.
#[derive(Debug, Default, Clone)]
pub struct FsckReport {
    /// Containers checked.
    pub containers: usize,
    /// Objects read back and hashed.
    pub objects: u64,
    /// Objects the refs reach.
    pub reachable: u64,
    /// One line per problem (empty: the repository is sound).
    pub problems: Vec<String>,
}

/// How far [`fsck`] has got, for a progress meter (git's `Checking
/// objects` and `Checking connectivity`). Sent after every object: a meter
/// throttles what it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Objects read back and hashed so far, of `total` (every object the
    /// containers whose index reads list).
    Objects {
        /// Objects checked.
        done: u64,
        /// Objects to check.
        total: u64,
    },
    /// Objects the refs reach, walked so far.
    Connectivity {
        /// Objects walked.
        done: u64,
    },
}

/// Checks `repo` (see the module's documentation); `Ok(None)` when there is
/// no such repository. `progress` hears of each object checked (see
/// [`Progress`]).
pub fn fsck(repo: &Repository, progress: &mut dyn FnMut(Progress)) -> Result<Option<FsckReport>> {
    let state = match repo.load_state() {
        Ok(Some(v)) if !v.state.deleted => v.state,
        Ok(_) => return Ok(None),
        Err(gitstow_odb::Error::State(e)) => {
            return Ok(Some(FsckReport {
                problems: vec![format!("error: the state does not decode: {e}")],
                ..Default::default()
            }))
        }
        Err(e) => return Err(e.into()),
    };
    let mut report = FsckReport::default();
    let store = repo.store();
    let named: Vec<(String, u64)> = state
        .containers
        .iter()
        .map(|c| (c.id.clone(), c.bytes))
        .chain(state.garbage.iter().map(|g| (g.id.clone(), g.bytes)))
        .collect();
    let mut sound: Vec<(String, u64)> = Vec::new();
    for (id, bytes) in &named {
        report.containers += 1;
        let bin = repo.bin_key(id);
        let size = match store.head(&bin)? {
            None => {
                report
                    .problems
                    .push(format!("error: missing container {id}: no {bin}"));
                continue;
            }
            Some(meta) => meta.size,
        };
        if size != *bytes {
            report.problems.push(format!(
                "error: container {id}: {size} bytes stored, the state says {bytes}"
            ));
        }
        match repo.container_index(id) {
            Ok(_) => sound.push((id.clone(), size)),
            Err(e) => report
                .problems
                .push(format!("error: container {id}: index unreadable: {e}")),
        }
    }
    // Objects through the containers whose index reads.
    let readable = RepoState {
        containers: state
            .containers
            .iter()
            .filter(|c| sound.iter().any(|(id, _)| id == &c.id))
            .cloned()
            .collect(),
        garbage: state
            .garbage
            .iter()
            .filter(|g| sound.iter().any(|(id, _)| id == &g.id))
            .cloned()
            .collect(),
        ..state.clone()
    };
    let db = repo.objects(&readable)?;
    let mut cache = ObjectCache::new(32 << 20);
    // The db lists garbage containers first, then live ones: as `readable`.
    let order: Vec<&String> = readable
        .garbage
        .iter()
        .map(|g| &g.id)
        .chain(readable.containers.iter().map(|c| &c.id))
        .collect();
    let total: u64 = (0..db.container_count())
        .map(|i| db.container(i).len() as u64)
        .sum();
    for i in 0..db.container_count() {
        let (id, size) = order
            .get(i)
            .and_then(|id| sound.iter().find(|(s, _)| s == *id))
            .map(|(id, size)| (id.as_str(), *size))
            .unwrap_or(("?", u64::MAX));
        for entry in db.container(i).iter() {
            report.objects += 1;
            progress(Progress::Objects {
                done: report.objects,
                total,
            });
            if entry.offset.saturating_add(entry.length) > size {
                report.problems.push(format!(
                    "error: container {id}: object {} lies beyond its {size} bytes (truncated)",
                    entry.oid
                ));
                continue;
            }
            check_object(&db, &entry.oid, &mut cache, &mut report.problems);
        }
    }
    let refs = ref_tips(repo, &state, &mut report);
    let pointers = reach(&db, &refs, &mut cache, &mut report, progress);
    for (lfs, size, blob) in pointers {
        let claimed = gitstow_lfs::objects::owned_size(store.as_ref(), repo.name(), &lfs)?;
        let stored = gitstow_lfs::objects::stored_size(store.as_ref(), &lfs)?;
        if claimed.is_none() || stored != Some(size) {
            report
                .problems
                .push(format!("missing LFS object {lfs} (pointer {blob})"));
        }
    }
    Ok(Some(report))
}

/// Every ref of `state` with its oid, read through its ref tables (each
/// block's checksum checked); a table that cannot be read, or a ref count
/// that disagrees with the refs found, is a problem.
fn ref_tips(
    repo: &Repository,
    state: &RepoState,
    report: &mut FsckReport,
) -> Vec<(String, ObjectId)> {
    let refs = repo.refs(state).and_then(|view| view.to_map());
    match refs {
        Ok(map) => {
            if map.len() as u64 != state.refs.count {
                report.problems.push(format!(
                    "error: the state counts {} refs, its ref tables and inline refs hold {}",
                    state.refs.count,
                    map.len()
                ));
            }
            map.into_iter()
                .filter_map(|(name, value)| Some((name, value.oid()?)))
                .collect()
        }
        Err(e) => {
            report
                .problems
                .push(format!("error: the refs cannot be read: {e}"));
            Vec::new()
        }
    }
}

/// Reads `oid` and checks its hash.
fn check_object(
    db: &ObjectDb,
    oid: &ObjectId,
    cache: &mut ObjectCache,
    problems: &mut Vec<String>,
) -> Option<gitstow_odb::Object> {
    match db.read(oid, cache) {
        Ok(Some(obj)) => match gix_object::compute_hash(oid.kind(), obj.kind, &obj.data) {
            Ok(h) if &h == oid => Some(obj),
            _ => {
                problems.push(format!("error: sha1 mismatch for {oid}"));
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            problems.push(format!("error: {oid}: object corrupt or missing: {e}"));
            None
        }
    }
}

/// Walks what the refs reach; returns the LFS pointers among the blobs
/// (the LFS oid, its size, the blob).
fn reach(
    db: &ObjectDb,
    refs: &[(String, ObjectId)],
    cache: &mut ObjectCache,
    report: &mut FsckReport,
    progress: &mut dyn FnMut(Progress),
) -> Vec<(gitstow_lfs::Oid, u64, ObjectId)> {
    let mut pointers = Vec::new();
    use gix_object::Kind;
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<(ObjectId, Option<Kind>)> = Vec::new();
    for (name, oid) in refs {
        if db.contains(oid) {
            stack.push((*oid, None));
        } else {
            report
                .problems
                .push(format!("error: {name}: invalid sha1 pointer {oid}"));
        }
    }
    while let Some((oid, expected)) = stack.pop() {
        if !seen.insert(oid) {
            continue;
        }
        if !db.contains(&oid) {
            let what = expected.map_or("object", |k| match k {
                Kind::Blob => "blob",
                Kind::Tree => "tree",
                Kind::Commit => "commit",
                Kind::Tag => "tag",
            });
            report.problems.push(format!("missing {what} {oid}"));
            continue;
        }
        report.reachable += 1;
        progress(Progress::Connectivity {
            done: report.reachable,
        });
        let Some(loc) = db.lookup(&oid) else { continue };
        if loc.entry.kind == gitstow_odb::record::BLOB {
            if loc.entry.size <= gitstow_lfs::pointer::MAX_POINTER {
                if let Ok(Some(obj)) = db.read(&oid, cache) {
                    if let Some((lfs, size)) = gitstow_lfs::pointer::parse(&obj.data) {
                        pointers.push((lfs, size, oid));
                    }
                }
            }
            continue;
        }
        let Ok(Some(obj)) = db.read(&oid, cache) else {
            continue; // reported by the object pass
        };
        let broken = |e: String| format!("error: object {oid}: does not parse: {e}");
        match obj.kind {
            Kind::Commit => match gix_object::CommitRef::from_bytes(&obj.data, obj.hash) {
                Ok(c) => {
                    stack.push((c.tree(), Some(Kind::Tree)));
                    stack.extend(c.parents().map(|p| (p, Some(Kind::Commit))));
                }
                Err(e) => report.problems.push(broken(e.to_string())),
            },
            Kind::Tree => {
                for entry in obj.tree_entries() {
                    match entry {
                        Ok((_, id, is_tree)) => {
                            let kind = if is_tree { Kind::Tree } else { Kind::Blob };
                            stack.push((id, Some(kind)));
                        }
                        Err(e) => {
                            report.problems.push(broken(e));
                            break;
                        }
                    }
                }
            }
            Kind::Tag => match gix_object::TagRef::from_bytes(&obj.data, obj.hash) {
                Ok(t) => stack.push((t.target(), None)),
                Err(e) => report.problems.push(broken(e.to_string())),
            },
            Kind::Blob => {}
        }
    }
    pointers
}
