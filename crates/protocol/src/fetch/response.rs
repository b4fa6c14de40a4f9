//! Negotiation answers: v0 ACK/NAK and shallow updates, v2 sections.

use std::io::{self, Write};

use gix_hash::ObjectId;

use crate::pktline::PktBatch;

/// The kind of a v0 `ACK` line (gitprotocol-pack(5) "Packfile
/// Negotiation", gitprotocol-capabilities(5) "multi_ack",
/// "multi_ack_detailed").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// `ACK <oid> continue` (multi_ack): common, keep sending haves.
    Continue,
    /// `ACK <oid> common` (multi_ack_detailed): a common object.
    Common,
    /// `ACK <oid> ready` (multi_ack_detailed): the server can make a pack.
    Ready,
    /// `ACK <oid>`: the final ack after `done`, or the only ack without
    /// multi_ack.
    Final,
}

/// Writes a v0 `ACK <oid>[ continue|common|ready]\n` line
/// (gitprotocol-pack(5) "Packfile Negotiation").
pub fn write_ack(w: &mut impl Write, oid: &ObjectId, kind: AckKind) -> io::Result<()> {
    let suffix = match kind {
        AckKind::Continue => " continue",
        AckKind::Common => " common",
        AckKind::Ready => " ready",
        AckKind::Final => "",
    };
    crate::pktline::write_text(w, &format!("ACK {oid}{suffix}"))
}

/// Writes a v0 `NAK\n` line (gitprotocol-pack(5) "Packfile Negotiation").
pub fn write_nak(w: &mut impl Write) -> io::Result<()> {
    crate::pktline::write_text(w, "NAK")
}

fn push_shallow_lines(
    batch: &mut PktBatch<'_, impl Write>,
    shallows: &[ObjectId],
    unshallows: &[ObjectId],
) -> io::Result<()> {
    for oid in shallows {
        batch.data(format!("shallow {oid}").as_bytes())?;
    }
    for oid in unshallows {
        batch.data(format!("unshallow {oid}").as_bytes())?;
    }
    Ok(())
}

/// The v0 shallow update after the want list of a deepening request:
/// `shallow <oid>` and `unshallow <oid>` lines, then a flush
/// (gitprotocol-pack(5) "Packfile Negotiation", "shallow-update"). Lines
/// have no trailing LF, byte-identical to git.
pub fn write_shallow_update_v0(
    w: &mut impl Write,
    shallows: &[ObjectId],
    unshallows: &[ObjectId],
) -> io::Result<()> {
    let mut batch = PktBatch::new(w);
    push_shallow_lines(&mut batch, shallows, unshallows)?;
    batch.special(b"0000")?;
    batch.finish()
}

/// The v2 `acknowledgments` section (gitprotocol-v2(5) "fetch" output):
/// `acknowledgments\n`, then `NAK\n` if `common` is empty, else `ACK
/// <oid>\n` per common object; then `ready\n` and a delim if `ready` (the
/// next sections and the packfile follow), else a flush (the response ends
/// and the client sends more haves). Not sent at all when the client sent
/// `done`.
pub fn write_acknowledgments(
    w: &mut impl Write,
    common: &[ObjectId],
    ready: bool,
) -> io::Result<()> {
    let mut batch = PktBatch::new(w);
    batch.text("acknowledgments")?;
    if common.is_empty() {
        batch.text("NAK")?;
    }
    for oid in common {
        batch.text(&format!("ACK {oid}"))?;
    }
    if ready {
        batch.text("ready")?;
        batch.special(b"0001")?;
    } else {
        batch.special(b"0000")?;
    }
    batch.finish()
}

/// The v2 `shallow-info` section (gitprotocol-v2(5) "fetch" output):
/// `shallow-info\n`, `shallow <oid>` / `unshallow <oid>` lines (no LF, as
/// git), then a delim (a packfile section always follows).
pub fn write_shallow_info(
    w: &mut impl Write,
    shallows: &[ObjectId],
    unshallows: &[ObjectId],
) -> io::Result<()> {
    let mut batch = PktBatch::new(w);
    batch.text("shallow-info")?;
    push_shallow_lines(&mut batch, shallows, unshallows)?;
    batch.special(b"0001")?;
    batch.finish()
}

/// The v2 `wanted-refs` section (gitprotocol-v2(5) "fetch" output):
/// `wanted-refs\n`, `<oid> <refname>\n` per `want-ref`, then a delim.
pub fn write_wanted_refs(w: &mut impl Write, refs: &[(ObjectId, String)]) -> io::Result<()> {
    let mut batch = PktBatch::new(w);
    batch.text("wanted-refs")?;
    for (oid, name) in refs {
        batch.text(&format!("{oid} {name}"))?;
    }
    batch.special(b"0001")?;
    batch.finish()
}

/// Starts the v2 `packfile` section: the `packfile\n` line
/// (gitprotocol-v2(5) "fetch" output). The pack follows in side-band-64k
/// packets (band 1 data, band 2 progress, band 3 error: use
/// [`crate::SideBandWriter`]), then a flush ends the response.
pub fn start_packfile_section(w: &mut impl Write) -> io::Result<()> {
    crate::pktline::write_text(w, "packfile")
}
