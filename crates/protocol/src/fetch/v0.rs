//! v0/v1 upload-pack requests (gitprotocol-pack(5) "Packfile Negotiation").

use gix_hash::ObjectId;

use super::args::*;
use super::FetchError;
use crate::capabilities::Capabilities;
use crate::pktline::{Packet, PktReader};

/// A v0/v1 upload-pack request (gitprotocol-pack(5) "Packfile Negotiation").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UploadRequestV0 {
    /// `want <oid>` lines, in order (duplicates kept).
    pub wants: Vec<ObjectId>,
    /// The capabilities after the first want's id (and any later want that
    /// carries some, merged in order).
    pub capabilities: Capabilities,
    /// `have <oid>` lines of all rounds, in order.
    pub haves: Vec<ObjectId>,
    /// `shallow <oid>`: the client's current shallow boundary.
    pub shallows: Vec<ObjectId>,
    /// `deepen <n>`.
    pub deepen: Option<u32>,
    /// `deepen-since <timestamp>`.
    pub deepen_since: Option<i64>,
    /// `deepen-not <ref>` lines.
    pub deepen_not: Vec<String>,
    /// The `deepen-relative` capability (v0 sends it as a capability).
    pub deepen_relative: bool,
    /// `filter <spec>`; whether the `filter` capability was negotiated is
    /// for the caller to check (git refuses it otherwise).
    pub filter: Option<String>,
    /// The request ended with `done`: send the pack now.
    pub done: bool,
    /// Flush-terminated `have` rounds after the want list. A stateless request
    /// that ends right after its want list (zero rounds, no `done`) only asks for
    /// the shallow update: git answers it without any ACK/NAK.
    pub have_rounds: usize,
}

/// Reads a stateless-RPC (smart HTTP) v0/v1 upload-pack request body:
/// `want <oid>[ caps]` lines (caps on the first), shallow/deepen/filter
/// lines, flush, then `have <oid>` lines (possibly several flush-separated
/// rounds), optionally ending in "done". EOF after a flush ends the request
/// (done=false). Bounded: `max_lines` total (gitprotocol-pack(5)
/// "Packfile Negotiation", gitprotocol-http(5)).
///
/// Edge cases, as git's upload-pack treats them: an empty body or a bare
/// flush gives a request without wants; with no wants nothing after the
/// first flush is read; nothing after `done` is read. Every packet, flushes
/// included, counts against `max_lines`. A trailing LF on a line is
/// ignored.
pub fn read_upload_request_v0<R: std::io::Read>(
    reader: &mut PktReader<R>,
    max_lines: usize,
) -> Result<UploadRequestV0, FetchError> {
    let mut input = Limited {
        reader,
        left: max_lines,
        max: max_lines,
    };
    let mut req = read_want_list(&mut input)?;
    if req.wants.is_empty() {
        return Ok(req);
    }
    while let Some(line) = next_have_line(&mut input)? {
        match line {
            HaveLine::Flush => req.have_rounds += 1,
            HaveLine::Have(oid) => req.haves.push(oid),
            HaveLine::Done => {
                req.done = true;
                break;
            }
        }
    }
    Ok(req)
}

/// Reads the want list of a v0/v1 upload-pack request up to its flush
/// (what the client sends first over one stream: SSH, git://); its `haves`
/// and `done` are left empty for [`HaveReader`]. At most `max_lines`
/// packets.
pub fn read_want_list_v0<R: std::io::Read>(
    reader: &mut PktReader<R>,
    max_lines: usize,
) -> Result<UploadRequestV0, FetchError> {
    read_want_list(&mut Limited {
        reader,
        left: max_lines,
        max: max_lines,
    })
}

fn read_want_list<R: std::io::Read>(
    input: &mut Limited<'_, R>,
) -> Result<UploadRequestV0, FetchError> {
    const WANTS: &str = "want list";
    let mut req = UploadRequestV0::default();
    let mut deepen = DeepenState::default();
    let mut seen_any = false;
    loop {
        let packet = match input.next()? {
            None if !seen_any => return Ok(req),
            None => return Err(FetchError::UnexpectedEof { section: WANTS }),
            Some(p) => p,
        };
        seen_any = true;
        let line = match &packet {
            Packet::Flush => break,
            Packet::Data(_) => packet.as_text().unwrap_or_default(),
            other => {
                return Err(FetchError::UnexpectedPacket {
                    packet: packet_kind(other),
                    section: WANTS,
                })
            }
        };
        if deepen.accept(line)? {
            continue;
        }
        let Some(rest) = line.strip_prefix(b"want ") else {
            return Err(FetchError::InvalidObjectId {
                line: crate::lossy(line),
            });
        };
        let (hex, caps) = match rest.iter().position(|&b| b == b' ') {
            Some(sp) => (&rest[..sp], Some(&rest[sp + 1..])),
            None => (rest, None),
        };
        req.wants.push(oid_arg(hex, line)?);
        if let Some(caps) = caps {
            req.capabilities.extend(Capabilities::parse(caps));
        }
    }
    deepen.check()?;
    req.shallows = deepen.shallows;
    req.deepen = deepen.deepen;
    req.deepen_since = deepen.deepen_since;
    req.deepen_not = deepen.deepen_not;
    req.filter = deepen.filter;
    req.deepen_relative = req.capabilities.contains("deepen-relative");
    Ok(req)
}

/// One packet of the negotiation after the want list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaveLine {
    /// `have <oid>`.
    Have(ObjectId),
    /// The flush that ends a round of haves.
    Flush,
    /// `done`: send the pack.
    Done,
}

/// Reads the negotiation after a want list one packet at a time, as a
/// stateful server answers each round when it ends (gitprotocol-pack(5)
/// "Packfile Negotiation"; git's `get_common_commits`). At most
/// `max_lines` packets.
pub struct HaveReader<'a, R> {
    input: Limited<'a, R>,
}

impl<'a, R: std::io::Read> HaveReader<'a, R> {
    /// Reads from `reader`, at most `max_lines` packets.
    pub fn new(reader: &'a mut PktReader<R>, max_lines: usize) -> Self {
        HaveReader {
            input: Limited {
                reader,
                left: max_lines,
                max: max_lines,
            },
        }
    }

    /// The next packet; `None` at EOF.
    ///
    /// # Errors
    /// A line other than `have <oid>` or `done`, a bad packet, too many lines.
    pub fn next_line(&mut self) -> Result<Option<HaveLine>, FetchError> {
        next_have_line(&mut self.input)
    }
}

fn next_have_line<R: std::io::Read>(
    input: &mut Limited<'_, R>,
) -> Result<Option<HaveLine>, FetchError> {
    const HAVES: &str = "have list";
    let Some(packet) = input.next()? else {
        return Ok(None);
    };
    match &packet {
        Packet::Flush => Ok(Some(HaveLine::Flush)),
        Packet::Data(_) => {
            let line = packet.as_text().unwrap_or_default();
            if line == b"done" {
                return Ok(Some(HaveLine::Done));
            }
            match line.strip_prefix(b"have ") {
                Some(hex) => Ok(Some(HaveLine::Have(oid_arg(hex, line)?))),
                None => Err(FetchError::UnexpectedLine {
                    line: crate::lossy(line),
                }),
            }
        }
        other => Err(FetchError::UnexpectedPacket {
            packet: packet_kind(other),
            section: HAVES,
        }),
    }
}
