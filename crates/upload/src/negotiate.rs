//! want/have negotiation for stateless (smart HTTP) upload-pack.
//!
//! Every HTTP round carries all the client's state, so the server only answers
//! which haves it has (`ACK <oid> common`), whether it is ready to send a pack,
//! and `NAK` (gitprotocol-pack(5), multi_ack_detailed; gitprotocol-v2(5),
//! "acknowledgments").

use std::io::Write;

use gitstow_odb::ObjectDb;
use gitstow_protocol::pktline::{write_delim, write_flush, write_text};
use gix_hash::ObjectId;

/// The haves the repository has, in the client's order.
pub fn common(db: &ObjectDb, haves: &[ObjectId]) -> Vec<ObjectId> {
    haves.iter().filter(|h| db.contains(h)).copied().collect()
}

/// Whether the server can stop negotiating: once any common commit is known,
/// the pack is correct (the walk excludes all the common side reaches); more
/// rounds could only make it smaller.
pub fn ready(common: &[ObjectId]) -> bool {
    !common.is_empty()
}

/// One v0/v1 negotiation round without `done`: `ACK <oid> common` per common
/// have (multi_ack_detailed) or `ACK <oid> continue` (multi_ack), `ACK <oid> ready`
/// when ready, then `NAK`.
pub fn write_v0_round(
    out: &mut impl Write,
    common: &[ObjectId],
    multi: bool,
    detailed: bool,
) -> std::io::Result<()> {
    if multi {
        for oid in common {
            let kind = if detailed { "common" } else { "continue" };
            write_text(out, &format!("ACK {oid} {kind}"))?;
        }
        if detailed && ready(common) {
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
