//! Fetches with the GC closure's reachability bitmaps
//! ([`gitstow_odb::bitmap`]), as git's `pack-bitmap.c` answers them.
//!
//! - The have side ([`HaveBitmap`], git's "have" bitmap): everything the
//!   client's haves reach within the closure, from the stored bitmaps and a
//!   short walk down to them. Any object can then be asked whether the
//!   client has it: an object a walk emitted although the client has it is
//!   dropped, and a stored delta whose base the client has is sent as it is
//!   stored (thin) instead of being resolved and deflated again.
//! - The want side ([`fetch_over`]): what the wants reach within the
//!   closure, minus the have side, without walking the history; only what
//!   was pushed since the GC is walked (`wants --not closure`, the walk of
//!   an incremental fetch).

use std::sync::Arc;

use gitstow_odb::bitmap::{Closure, LoadedBitmaps, Reacher};
use gitstow_odb::oids::OidSet;
use gitstow_odb::ObjectDb;
use gix_hash::ObjectId;
use gix_object::Kind;
use roaring::RoaringBitmap;

use crate::walk::{objects_to_send, Walk, WalkError, WalkOptions, Walker};

/// What the client has within the closure.
pub struct HaveBitmap {
    loaded: Arc<LoadedBitmaps>,
    containers: Vec<usize>,
    bits: RoaringBitmap,
    /// Commits walked to reach stored bitmaps.
    pub commits_walked: usize,
    cache_bytes: usize,
}

impl HaveBitmap {
    /// The objects `haves` (commits the repository has) reach within the
    /// closure stored in `containers` (positions in `db`); `None` when the
    /// closure has no usable bitmaps or a walked object is not where the
    /// bitmaps say (logged; the fetch then goes without).
    pub fn compute(
        db: &ObjectDb,
        containers: &[usize],
        haves: &[ObjectId],
        cache_bytes: usize,
    ) -> Option<HaveBitmap> {
        let loaded = db.closure_bitmaps(containers)?;
        let closure = Closure {
            db,
            containers,
            order: &loaded.order,
        };
        // Haves pushed after the GC are outside the closure: their closure
        // ancestors stand for them (what lies outside is the walk's business).
        let mut roots = Vec::new();
        let mut seen: OidSet = OidSet::new();
        let mut stack: Vec<ObjectId> = haves.to_vec();
        let mut cache = gitstow_odb::ObjectCache::new(0);
        while let Some(c) = stack.pop() {
            if !seen.insert(&c) {
                continue;
            }
            if closure.position(&c).is_some() {
                roots.push(c);
            } else if let Ok(Some(row)) = db.commit_row(&c, &mut cache) {
                stack.extend(row.parents);
            }
        }
        let mut reacher = Reacher::new(closure, cache_bytes);
        match reacher.reach(&roots, &loaded.file.bitmaps) {
            Ok(bits) => Some(HaveBitmap {
                commits_walked: reacher.commits_walked,
                loaded: loaded.clone(),
                containers: containers.to_vec(),
                bits,
                cache_bytes,
            }),
            Err(e) => {
                tracing::warn!(error = %e, "have bitmap not computed; the fetch goes without");
                None
            }
        }
    }

    /// True when the client has `oid` (it is in the closure and a have reaches it).
    pub fn contains(&self, db: &ObjectDb, oid: &gix_hash::oid) -> bool {
        self.closure(db)
            .position(oid)
            .is_some_and(|p| self.bits.contains(p))
    }

    /// Objects the client has within the closure.
    pub fn len(&self) -> u64 {
        self.bits.len()
    }

    /// True when the client has nothing of the closure.
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    fn closure<'a>(&'a self, db: &'a ObjectDb) -> Closure<'a> {
        Closure {
            db,
            containers: &self.containers,
            order: &self.loaded.order,
        }
    }
}

/// The objects of a fetch of `wants` by a client whose closure side is
/// `have`: `wants --not haves` walked outside the closure only (its commits
/// end the walk as had), and within it what the wants and the walk's edges
/// reach, by bitmaps, minus what the client has. A filter
/// ([`crate::filter::Filter::path_free`] only) drops what it omits by each object's kind
/// and size from its index entry, as git's `filter_bitmap` does with its
/// type bitmaps; the commits the wants name are sent whatever it says.
/// `Ok(None)` when a want is neither a commit nor a tag of one, or the
/// filter needs paths (the plain walk answers then).
pub fn fetch_over(
    db: &ObjectDb,
    wants: &[ObjectId],
    opts: &WalkOptions<'_>,
    have: &HaveBitmap,
) -> Result<Option<Walk>, WalkError> {
    if opts.filter.is_some_and(|f| !f.path_free()) {
        return Ok(None);
    }
    let closure = have.closure(db);
    let mut w = Walker::new(db, 1 << 20);
    let mut peeled = Vec::with_capacity(wants.len());
    for want in wants {
        let (tags, target, kind) = w.peel(*want)?;
        if kind != Kind::Commit {
            return Ok(None);
        }
        peeled.push((tags, target));
    }
    let outside = objects_to_send(
        db,
        wants,
        &WalkOptions {
            closed_tips: None,
            closure: None,
            known_containers: &have.containers,
            ..*opts
        },
    )?;
    // Within the closure: what the wanted commits in it and the edges of
    // the walk reach beyond the have side (the walk's own tags and commits
    // lie outside).
    let mut roots: Vec<ObjectId> = Vec::new();
    let mut want_tags = Vec::new();
    // The commits the wants name: sent whatever the filter says.
    let named: OidSet = match opts.filter {
        Some(_) => peeled.iter().map(|(_, target)| *target).collect(),
        None => OidSet::new(),
    };
    for (tags, target) in peeled {
        want_tags.extend(tags);
        if closure.position(&target).is_some() {
            roots.push(target);
        }
    }
    roots.extend(
        outside
            .edges
            .iter()
            .filter(|e| closure.position(e).is_some())
            .copied(),
    );
    let mut reacher = Reacher::new(closure, have.cache_bytes);
    // Seeded with the have side: the walk stops at what the client has.
    let wanted = match reacher.reach_beyond(&roots, &have.loaded.file.bitmaps, have.bits.clone()) {
        Ok(bits) => bits,
        Err(e) => {
            tracing::warn!(error = %e, "want bitmap not computed; the fetch walks");
            return Ok(None);
        }
    };
    let send = &wanted - &have.bits;
    let mut out = Walk {
        commits_read: outside.commits_read + reacher.commits_walked,
        commits: outside.commits,
        client_has: outside.client_has,
        edges: outside.edges,
        ..Walk::default()
    };
    let mut seen: OidSet = OidSet::new();
    for pos in send.iter() {
        let oid = match opts.filter {
            None => closure.oid(pos),
            Some(filter) => {
                let e = closure.entry(pos);
                let kind = gitstow_odb::record::kind_from_type_id(e.kind);
                if !kind.is_some_and(|k| filter.keeps_reached(k, e.size)) && !named.contains(&e.oid)
                {
                    continue;
                }
                e.oid
            }
        };
        if seen.insert(&oid) {
            out.objects.push(&oid, ());
        }
    }
    for oid in outside
        .objects
        .ids()
        .chain(want_tags.iter().map(AsRef::as_ref))
    {
        // `wanted` holds the have side too: had, or sent above.
        let had_or_sent = closure.position(oid).is_some_and(|p| wanted.contains(p));
        if !had_or_sent && seen.insert(oid) {
            out.objects.push(oid, ());
        }
    }
    Ok(Some(out))
}
