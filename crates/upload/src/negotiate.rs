//! want/have negotiation for stateless (smart HTTP) upload-pack.
//!
//! Every HTTP round carries all the client's state, so the server only answers
//! which haves it has (`ACK <oid> common`), whether it is ready to send a pack,
//! and `NAK` (gitprotocol-pack(5), multi_ack_detailed; gitprotocol-v2(5),
//! "acknowledgments").

use std::io::Write;

use gitstow_odb::graph::GENERATION_UNKNOWN;
use gitstow_odb::{ObjectCache, ObjectDb};
use gitstow_protocol::pktline::{write_delim, write_flush, write_text};
use gix_hash::ObjectId;
use gix_hashtable::HashSet;

/// The haves the repository has, in the client's order.
pub fn common(db: &ObjectDb, haves: &[ObjectId]) -> Vec<ObjectId> {
    haves.iter().filter(|h| db.contains(h)).copied().collect()
}

/// Commits `ready` walks at most, per request, before it answers ready
/// anyway (the pack is correct either way; the bound keeps a hostile have
/// list from costing a walk of the history).
const READY_WALK_LIMIT: usize = 10_000;

/// Whether the server can stop negotiating (git's `ok_to_give_up` with
/// `can_all_from_reach_with_flag`, upload-pack.c and commit-reach.c): once
/// every wanted commit reaches a common commit, the client's side is
/// known well enough; until then more haves can still make the pack
/// smaller. The walk down from the wants stops at commits whose generation
/// (or, without one, commit time) is below the common commits' smallest.
/// Any common commit makes the pack correct, so past
/// [`READY_WALK_LIMIT`] commits, or on a read error, the answer is yes.
pub fn ready(db: &ObjectDb, wants: &[ObjectId], common: &[ObjectId]) -> bool {
    if common.is_empty() {
        return false;
    }
    let mut cache = ObjectCache::new(1 << 20);
    let mut links = |oid: &ObjectId| -> Option<(Vec<ObjectId>, u32, i64)> {
        let row = db.commit_row(oid, &mut cache).ok()??;
        Some((row.parents, row.generation, row.time))
    };
    let common_set: HashSet = common.iter().copied().collect();
    let mut min_generation = u32::MAX;
    let mut min_time = i64::MAX;
    for c in common {
        match links(c) {
            Some((_, generation, time)) => {
                min_generation = min_generation.min(generation);
                min_time = min_time.min(time);
            }
            // A common tag, tree or blob: no cutoff.
            None => (min_generation, min_time) = (0, i64::MIN),
        }
    }
    let mut seen: HashSet = HashSet::default();
    let mut walked = 0usize;
    let mut peeler = crate::walk::Walker::new(db, 1 << 20);
    for want in wants {
        // A tag is negotiated as the commit it names; a tree or blob, not at all.
        let start = match peeler.peel(*want) {
            Ok((_, target, gix_object::Kind::Commit)) => target,
            _ => continue,
        };
        let mut stack = vec![start];
        let mut reached = false;
        while let Some(c) = stack.pop() {
            if common_set.contains(&c) {
                reached = true;
                break;
            }
            if !seen.insert(c) {
                continue;
            }
            walked += 1;
            if walked > READY_WALK_LIMIT {
                return true;
            }
            let Some((parents, generation, time)) = links(&c) else {
                // Not there (a shallow history's missing parent): no path on.
                continue;
            };
            let below = if generation != GENERATION_UNKNOWN && min_generation != GENERATION_UNKNOWN
            {
                generation < min_generation
            } else {
                time < min_time
            };
            if !below {
                stack.extend(parents);
            }
        }
        if !reached {
            return false;
        }
    }
    true
}

/// One v0/v1 negotiation round without `done`: `ACK <oid> common` per common
/// have (multi_ack_detailed) or `ACK <oid> continue` (multi_ack), `ACK <oid> ready`
/// when `ready` (see [`ready`]), then `NAK`.
pub fn write_v0_round(
    out: &mut impl Write,
    common: &[ObjectId],
    ready: bool,
    multi: bool,
    detailed: bool,
) -> std::io::Result<()> {
    if multi {
        for oid in common {
            let kind = if detailed { "common" } else { "continue" };
            write_text(out, &format!("ACK {oid} {kind}"))?;
        }
        if detailed && ready {
            if let Some(last) = common.last() {
                write_text(out, &format!("ACK {last} ready"))?;
            }
        }
        write_text(out, "NAK")
    } else {
        match common.first() {
            Some(first) => write_text(out, &format!("ACK {first}")),
            None => write_text(out, "NAK"),
        }
    }
}

/// The v2 "acknowledgments" section: `NAK` or `ACK <oid>` lines, `ready` if
/// ready (then a delim: the packfile section follows), else a flush.
pub fn write_v2_acknowledgments(
    out: &mut impl Write,
    common: &[ObjectId],
    ready: bool,
) -> std::io::Result<()> {
    write_text(out, "acknowledgments")?;
    if common.is_empty() {
        write_text(out, "NAK")?;
    }
    for oid in common {
        write_text(out, &format!("ACK {oid}"))?;
    }
    if ready {
        write_text(out, "ready")?;
        write_delim(out)
    } else {
        write_flush(out)
    }
}
