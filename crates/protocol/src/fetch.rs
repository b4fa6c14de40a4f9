//! Upload-pack requests and the negotiation answers: protocol v0/v1
//! (gitprotocol-pack(5) "Packfile Negotiation", gitprotocol-http(5) "Smart
//! Service git-upload-pack") and v2 (gitprotocol-v2(5) "Command Request",
//! "fetch").
//!
//! Facts confirmed against git 2.47 upload-pack (stateless RPC):
//!
//! - v0 acks, multi_ack_detailed: `ACK <oid> common\n`, `ACK <oid> ready\n`,
//!   `NAK\n`, and after `done` a final `ACK <oid>\n` (no suffix); with
//!   multi_ack: `ACK <oid> continue\n`.
//! - v2 `acknowledgments` section: `NAK\n` when nothing is common, else
//!   `ACK <oid>\n` per common object, then `ready\n` and a delim when the
//!   pack follows, or a flush when the client must send more haves. When
//!   the client sent `done` there is no acknowledgments section at all: the
//!   response starts with `packfile\n`.
//! - `shallow <oid>` / `unshallow <oid>` lines carry **no** trailing LF, in
//!   v0 (then a flush) and in the v2 `shallow-info` section (then a delim).
//! - An unknown v2 argument makes git die with `unexpected line: '<arg>'`.

use std::io::{self, Write};

use gix_hash::ObjectId;

use crate::capabilities::Capabilities;
use crate::pktline::{Packet, PktBatch, PktError, PktReader};

/// Why an upload-pack request (v0 or v2, including `ls-refs` arguments)
/// could not be read (gitprotocol-pack(5), gitprotocol-v2(5)).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The pkt-line layer failed (I/O, bad length, truncation).
    #[error(transparent)]
    Packet(#[from] PktError),
    /// A line that is not valid at this point of the request; the words of
    /// git's v2 `process_args`.
    #[error("unexpected line: '{line}'")]
    UnexpectedLine {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// A `want`, `have` or `shallow` line without a valid 40-hex object id.
    #[error("protocol error: expected to get object ID, not '{line}'")]
    InvalidObjectId {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// `deepen` needs a positive integer.
    #[error("invalid deepen: '{line}'")]
    InvalidDeepen {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// `deepen-since` needs a positive Unix timestamp.
    #[error("invalid deepen-since: '{line}'")]
    InvalidDeepenSince {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// `deepen <n>` together with `deepen-since` or `deepen-not`.
    #[error("--depth and --shallow-since (or --shallow-exclude) cannot be used together")]
    DeepenConflict,
    /// A second `filter` line.
    #[error("multiple filter-specs cannot be combined: '{line}'")]
    DuplicateFilter {
        /// The second filter line (lossy UTF-8).
        line: String,
    },
    /// A line whose text argument (ref name, filter, capability) is not UTF-8.
    #[error("line is not valid UTF-8: '{line}'")]
    NotUtf8 {
        /// The line (lossy UTF-8).
        line: String,
    },
    /// A second `command=` in one v2 request.
    #[error("command '{second}' requested after already requesting command '{first}'")]
    DuplicateCommand {
        /// The first command.
        first: String,
        /// The second command.
        second: String,
    },
    /// A v2 request with capability lines but no `command=`.
    #[error("no command requested")]
    NoCommand,
    /// More packets than the caller's line limit.
    #[error("request too long: more than {max} lines")]
    TooManyLines {
        /// The limit passed to the reader.
        max: usize,
    },
    /// The input ended inside a request.
    #[error("the remote end hung up in the middle of the {section}")]
    UnexpectedEof {
        /// Which part of the request was being read.
        section: &'static str,
    },
    /// A delim or response-end packet where it is not allowed.
    #[error("protocol error: unexpected {packet} packet in the {section}")]
    UnexpectedPacket {
        /// `"flush"`, `"delim"` or `"response-end"`.
        packet: &'static str,
        /// Which part of the request was being read.
        section: &'static str,
    },
}

fn packet_kind(packet: &Packet) -> &'static str {
    match packet {
        Packet::Data(_) => "data",
        Packet::Flush => "flush",
        Packet::Delim => "delim",
        Packet::ResponseEnd => "response-end",
    }
}

/// Reads packets while counting them against a limit.
struct Limited<'a, R> {
    reader: &'a mut PktReader<R>,
    left: usize,
    max: usize,
}

impl<R: std::io::Read> Limited<'_, R> {
    fn next(&mut self) -> Result<Option<Packet>, FetchError> {
        let packet = self.reader.read_packet()?;
        if packet.is_some() {
            if self.left == 0 {
                return Err(FetchError::TooManyLines { max: self.max });
            }
            self.left -= 1;
        }
        Ok(packet)
    }
}

fn utf8(arg: &[u8], line: &[u8]) -> Result<String, FetchError> {
    std::str::from_utf8(arg)
        .map(str::to_owned)
        .map_err(|_| FetchError::NotUtf8 {
            line: crate::lossy(line),
        })
}

fn oid_arg(hex: &[u8], line: &[u8]) -> Result<ObjectId, FetchError> {
    crate::parse_oid(hex).ok_or_else(|| FetchError::InvalidObjectId {
        line: crate::lossy(line),
    })
}

/// `deepen <n>`: a positive decimal integer (git's `process_deepen`).
fn deepen_arg(arg: &[u8], line: &[u8]) -> Result<u32, FetchError> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| FetchError::InvalidDeepen {
            line: crate::lossy(line),
        })
}

/// `deepen-since <timestamp>`: a positive decimal integer (git's
/// `process_deepen_since` refuses 0).
fn deepen_since_arg(arg: &[u8], line: &[u8]) -> Result<i64, FetchError> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| FetchError::InvalidDeepenSince {
            line: crate::lossy(line),
        })
}

/// The shallow-related lines shared by v0 and v2 requests.
#[derive(Default)]
struct DeepenState {
    shallows: Vec<ObjectId>,
    deepen: Option<u32>,
    deepen_since: Option<i64>,
    deepen_not: Vec<String>,
    filter: Option<String>,
}

impl DeepenState {
    /// Consumes `line` if it is a shallow/deepen/filter line.
    fn accept(&mut self, line: &[u8]) -> Result<bool, FetchError> {
        if let Some(hex) = line.strip_prefix(b"shallow ") {
            self.shallows.push(oid_arg(hex, line)?);
        } else if let Some(n) = line.strip_prefix(b"deepen ") {
            self.deepen = Some(deepen_arg(n, line)?);
        } else if let Some(ts) = line.strip_prefix(b"deepen-since ") {
            self.deepen_since = Some(deepen_since_arg(ts, line)?);
        } else if let Some(name) = line.strip_prefix(b"deepen-not ") {
            self.deepen_not.push(utf8(name, line)?);
        } else if let Some(spec) = line.strip_prefix(b"filter ") {
            if self.filter.is_some() {
                return Err(FetchError::DuplicateFilter {
                    line: crate::lossy(line),
                });
            }
            self.filter = Some(utf8(spec, line)?);
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn check(&self) -> Result<(), FetchError> {
        if self.deepen.is_some() && (self.deepen_since.is_some() || !self.deepen_not.is_empty()) {
            return Err(FetchError::DeepenConflict);
        }
        Ok(())
    }
}

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
    const WANTS: &str = "want list";
    const HAVES: &str = "have list";
    let mut input = Limited {
        reader,
        left: max_lines,
        max: max_lines,
    };
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
    if req.wants.is_empty() {
        return Ok(req);
    }
    while let Some(packet) = input.next()? {
        match &packet {
            Packet::Flush => {
                req.have_rounds += 1;
                continue;
            }
            Packet::Data(_) => {
                let line = packet.as_text().unwrap_or_default();
                if line == b"done" {
                    req.done = true;
                    break;
                }
                match line.strip_prefix(b"have ") {
                    Some(hex) => req.haves.push(oid_arg(hex, line)?),
                    None => {
                        return Err(FetchError::UnexpectedLine {
                            line: crate::lossy(line),
                        })
                    }
                }
            }
            other => {
                return Err(FetchError::UnexpectedPacket {
                    packet: packet_kind(other),
                    section: HAVES,
                })
            }
        }
    }
    Ok(req)
}

/// A v2 command request (gitprotocol-v2(5) "Command Request").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRequestV2 {
    /// The `command=<name>` value, e.g. `ls-refs` or `fetch`.
    pub command: String,
    /// Capability lines (`agent=…`, `object-format=sha1`,
    /// `server-option=…`), as `(key, value)` in order.
    pub capabilities: Vec<(String, Option<String>)>,
    /// The argument lines after the delim, trailing LF removed.
    pub args: Vec<Vec<u8>>,
}

/// A v2 request: `command=<name>`, capability lines, delim, argument
/// lines, flush (gitprotocol-v2(5) "Command Request"). Ok(None) at a clean
/// EOF or a lone flush.
///
/// As git's serve.c: a flush instead of the delim ends the request with no
/// arguments; a second `command=` is an error, so is a request without
/// one; capabilities are returned unchecked. Every packet counts against
/// `max_lines`.
pub fn read_command_v2<R: std::io::Read>(
    reader: &mut PktReader<R>,
    max_lines: usize,
) -> Result<Option<CommandRequestV2>, FetchError> {
    const CAPS: &str = "command and capability list";
    const ARGS: &str = "argument list";
    let mut input = Limited {
        reader,
        left: max_lines,
        max: max_lines,
    };
    let mut command: Option<String> = None;
    let mut capabilities = Vec::new();
    let mut seen_any = false;
    let has_args = loop {
        let packet = match input.next()? {
            None if !seen_any => return Ok(None),
            None => return Err(FetchError::UnexpectedEof { section: CAPS }),
            Some(p) => p,
        };
        let line = match &packet {
            Packet::Flush if !seen_any => return Ok(None),
            Packet::Flush => break false,
            Packet::Delim => break true,
            Packet::ResponseEnd => {
                return Err(FetchError::UnexpectedPacket {
                    packet: "response-end",
                    section: CAPS,
                })
            }
            Packet::Data(_) => packet.as_text().unwrap_or_default(),
        };
        seen_any = true;
        let text = utf8(line, line)?;
        if let Some(name) = text.strip_prefix("command=") {
            if let Some(first) = command {
                return Err(FetchError::DuplicateCommand {
                    first,
                    second: name.to_owned(),
                });
            }
            command = Some(name.to_owned());
        } else {
            capabilities.push(match text.split_once('=') {
                Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                None => (text, None),
            });
        }
    };
    let command = command.ok_or(FetchError::NoCommand)?;
    let mut args = Vec::new();
    if has_args {
        loop {
            let packet = input
                .next()?
                .ok_or(FetchError::UnexpectedEof { section: ARGS })?;
            match &packet {
                Packet::Flush => break,
                Packet::Data(_) => args.push(packet.as_text().unwrap_or_default().to_vec()),
                other => {
                    return Err(FetchError::UnexpectedPacket {
                        packet: packet_kind(other),
                        section: ARGS,
                    })
                }
            }
        }
    }
    Ok(Some(CommandRequestV2 {
        command,
        capabilities,
        args,
    }))
}

/// The arguments of a v2 `fetch` command (gitprotocol-v2(5) "fetch").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchArgsV2 {
    /// `want <oid>`.
    pub wants: Vec<ObjectId>,
    /// `want-ref <ref>` (only valid when `ref-in-want` is advertised).
    pub want_refs: Vec<String>,
    /// `have <oid>`.
    pub haves: Vec<ObjectId>,
    /// `done`: no more negotiation, send the pack.
    pub done: bool,
    /// `thin-pack`.
    pub thin_pack: bool,
    /// `no-progress`.
    pub no_progress: bool,
    /// `include-tag`.
    pub include_tag: bool,
    /// `ofs-delta`.
    pub ofs_delta: bool,
    /// `shallow <oid>`.
    pub shallows: Vec<ObjectId>,
    /// `deepen <n>`.
    pub deepen: Option<u32>,
    /// `deepen-relative`.
    pub deepen_relative: bool,
    /// `deepen-since <timestamp>`.
    pub deepen_since: Option<i64>,
    /// `deepen-not <ref>`.
    pub deepen_not: Vec<String>,
    /// `filter <spec>`.
    pub filter: Option<String>,
    /// `wait-for-done`: never answer `ready`, wait for `done`.
    pub wait_for_done: bool,
    /// `sideband-all`.
    pub sideband_all: bool,
}

impl FetchArgsV2 {
    /// Parses the argument lines of a v2 `fetch` (gitprotocol-v2(5)
    /// "fetch"). An unknown argument is an error naming it, like git
    /// ("unexpected line: '…'"); so are malformed ids, `deepen 0`, a second
    /// `filter`, and `deepen` combined with `deepen-since`/`deepen-not`.
    /// Whether optional features (`filter`, `want-ref`, `sideband-all`,
    /// `wait-for-done`) were advertised is for the caller to check.
    pub fn parse(args: &[Vec<u8>]) -> Result<Self, FetchError> {
        let mut out = FetchArgsV2::default();
        let mut deepen = DeepenState::default();
        for arg in args {
            let line = arg.strip_suffix(b"\n").unwrap_or(arg);
            match line {
                b"done" => out.done = true,
                b"thin-pack" => out.thin_pack = true,
                b"no-progress" => out.no_progress = true,
                b"include-tag" => out.include_tag = true,
                b"ofs-delta" => out.ofs_delta = true,
                b"deepen-relative" => out.deepen_relative = true,
                b"wait-for-done" => out.wait_for_done = true,
                b"sideband-all" => out.sideband_all = true,
                _ => {
                    if let Some(hex) = line.strip_prefix(b"want ") {
                        out.wants.push(oid_arg(hex, line)?);
                    } else if let Some(name) = line.strip_prefix(b"want-ref ") {
                        out.want_refs.push(utf8(name, line)?);
                    } else if let Some(hex) = line.strip_prefix(b"have ") {
                        out.haves.push(oid_arg(hex, line)?);
                    } else if !deepen.accept(line)? {
                        return Err(FetchError::UnexpectedLine {
                            line: crate::lossy(line),
                        });
                    }
                }
            }
        }
        deepen.check()?;
        out.shallows = deepen.shallows;
        out.deepen = deepen.deepen;
        out.deepen_since = deepen.deepen_since;
        out.deepen_not = deepen.deepen_not;
        out.filter = deepen.filter;
        Ok(out)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pktline::{write_data, write_delim, write_flush, write_response_end};

    const A: &str = "a8865dad5bf23af83184dd124133bdab7c6646eb";
    const B: &str = "026a191405ac2b3ef86990d0ef907000cd1df7a5";
    const C: &str = "cd2c4c5c6240a5bf7c20d6d4bf0e20abb37d8a49";

    fn oid(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.as_bytes()).unwrap()
    }

    fn body(lines: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for line in lines {
            match *line {
                "F" => write_flush(&mut out).unwrap(),
                "D" => write_delim(&mut out).unwrap(),
                "R" => write_response_end(&mut out).unwrap(),
                l => write_data(&mut out, format!("{l}\n").as_bytes()).unwrap(),
            }
        }
        out
    }

    fn v0(lines: &[&str], max: usize) -> Result<UploadRequestV0, FetchError> {
        read_upload_request_v0(&mut PktReader::new(&body(lines)[..]), max)
    }

    fn v2(lines: &[&str], max: usize) -> Result<Option<CommandRequestV2>, FetchError> {
        read_command_v2(&mut PktReader::new(&body(lines)[..]), max)
    }

    fn args(lines: &[&str]) -> Result<FetchArgsV2, FetchError> {
        FetchArgsV2::parse(
            &lines
                .iter()
                .map(|l| l.as_bytes().to_vec())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn v0_request_with_rounds_and_done() {
        let first = format!("want {B} multi_ack_detailed no-done side-band-64k thin-pack ofs-delta deepen-relative agent=git/2.47.3");
        let req = v0(
            &[
                &first,
                &format!("want {C}"),
                &format!("shallow {A}"),
                "deepen 3",
                "filter blob:none",
                "F",
                &format!("have {A}"),
                "F",
                &format!("have {C}"),
                &format!("have {B}"),
                "F",
                "done",
                "this is not read",
            ],
            100,
        )
        .unwrap();
        assert_eq!(req.wants, vec![oid(B), oid(C)]);
        assert!(req.capabilities.contains("multi_ack_detailed"));
        assert!(req.capabilities.contains("side-band-64k"));
        assert_eq!(req.capabilities.value("agent"), Some("git/2.47.3"));
        assert_eq!(req.haves, vec![oid(A), oid(C), oid(B)]);
        assert_eq!(req.shallows, vec![oid(A)]);
        assert_eq!(req.deepen, Some(3));
        assert!(req.deepen_relative);
        assert_eq!(req.filter.as_deref(), Some("blob:none"));
        assert!(req.done);
    }

    #[test]
    fn v0_request_ending_without_done() {
        let want = format!("want {B} side-band-64k");
        let req = v0(&[&want, "F", &format!("have {A}"), "F"], 100).unwrap();
        assert!(!req.done);
        assert_eq!(req.haves, vec![oid(A)]);
        // want list only (shallow first request)
        let req = v0(
            &[
                &want,
                "deepen-since 1700000000",
                "deepen-not refs/heads/old",
                "F",
            ],
            100,
        )
        .unwrap();
        assert_eq!(req.deepen_since, Some(1_700_000_000));
        assert_eq!(req.deepen_not, vec!["refs/heads/old".to_owned()]);
        assert!(req.haves.is_empty() && !req.done && !req.deepen_relative);
        // done without haves (clone)
        let req = v0(&[&want, "F", "done"], 100).unwrap();
        assert!(req.done && req.haves.is_empty());
        // done without a flush after the haves
        let req = v0(&[&want, "F", &format!("have {A}"), "done"], 100).unwrap();
        assert!(req.done);
    }

    #[test]
    fn v0_empty_requests() {
        assert_eq!(v0(&[], 10).unwrap(), UploadRequestV0::default());
        assert_eq!(v0(&["F"], 10).unwrap(), UploadRequestV0::default());
        // no wants: the rest is not read
        let req = v0(&["F", "garbage"], 10).unwrap();
        assert!(req.wants.is_empty());
    }

    #[test]
    fn v0_errors() {
        let want = format!("want {B}");
        let e = v0(&["wants", "F"], 10).unwrap_err();
        assert!(
            matches!(e, FetchError::InvalidObjectId { ref line } if line == "wants"),
            "{e}"
        );
        let e = v0(&[&format!("want {}", &B[..39]), "F"], 10).unwrap_err();
        assert!(matches!(e, FetchError::InvalidObjectId { .. }), "{e}");
        let e = v0(&[&want, "F", "have xyz"], 10).unwrap_err();
        assert!(
            matches!(e, FetchError::InvalidObjectId { ref line } if line == "have xyz"),
            "{e}"
        );
        let e = v0(&[&want, "F", "what"], 10).unwrap_err();
        assert!(
            matches!(e, FetchError::UnexpectedLine { ref line } if line == "what"),
            "{e}"
        );
        let e = v0(&[&want], 10).unwrap_err();
        assert!(matches!(e, FetchError::UnexpectedEof { .. }), "{e}");
        let e = v0(&[&want, "D"], 10).unwrap_err();
        assert!(
            matches!(
                e,
                FetchError::UnexpectedPacket {
                    packet: "delim",
                    ..
                }
            ),
            "{e}"
        );
        let e = v0(&[&want, "F", "R"], 10).unwrap_err();
        assert!(
            matches!(
                e,
                FetchError::UnexpectedPacket {
                    packet: "response-end",
                    ..
                }
            ),
            "{e}"
        );
        for bad in [
            "deepen 0",
            "deepen -1",
            "deepen x",
            "deepen ",
            "deepen +3",
            "deepen 99999999999",
        ] {
            let e = v0(&[&want, bad, "F"], 10).unwrap_err();
            assert!(matches!(e, FetchError::InvalidDeepen { .. }), "{bad}: {e}");
        }
        for bad in ["deepen-since 0", "deepen-since -5", "deepen-since soon"] {
            let e = v0(&[&want, bad, "F"], 10).unwrap_err();
            assert!(
                matches!(e, FetchError::InvalidDeepenSince { .. }),
                "{bad}: {e}"
            );
        }
        let e = v0(&[&want, "deepen 1", "deepen-not refs/heads/x", "F"], 10).unwrap_err();
        assert!(matches!(e, FetchError::DeepenConflict), "{e}");
        let e = v0(&[&want, "filter blob:none", "filter tree:0", "F"], 10).unwrap_err();
        assert!(matches!(e, FetchError::DuplicateFilter { .. }), "{e}");
        let e = read_upload_request_v0(&mut PktReader::new(&b"0010want 12"[..]), 10).unwrap_err();
        assert!(
            matches!(e, FetchError::Packet(PktError::TruncatedData { .. })),
            "{e}"
        );
    }

    #[test]
    fn v0_line_limit_counts_every_packet() {
        let want = format!("want {B}");
        let have = format!("have {A}");
        let lines = [&want[..], "F", &have, &have, "F", "done"];
        assert!(v0(&lines, 6).is_ok());
        let e = v0(&lines, 5).unwrap_err();
        assert!(matches!(e, FetchError::TooManyLines { max: 5 }), "{e}");
        // endless flushes are bounded too
        let flushes = vec!["F"; 50];
        let mut lines = vec![&want[..], "F"];
        lines.extend(flushes);
        assert!(matches!(
            v0(&lines, 10),
            Err(FetchError::TooManyLines { max: 10 })
        ));
    }

    #[test]
    fn v2_command_parsing() {
        let req = v2(
            &[
                "command=ls-refs",
                "agent=git/2.47.3",
                "object-format=sha1",
                "server-option",
                "D",
                "peel",
                "symrefs",
                "ref-prefix refs/heads/",
                "F",
            ],
            100,
        )
        .unwrap()
        .unwrap();
        assert_eq!(req.command, "ls-refs");
        assert_eq!(
            req.capabilities,
            vec![
                ("agent".to_owned(), Some("git/2.47.3".to_owned())),
                ("object-format".to_owned(), Some("sha1".to_owned())),
                ("server-option".to_owned(), None),
            ]
        );
        assert_eq!(
            req.args,
            vec![
                b"peel".to_vec(),
                b"symrefs".to_vec(),
                b"ref-prefix refs/heads/".to_vec()
            ]
        );

        // flush instead of delim: no arguments
        let req = v2(&["command=ls-refs", "F"], 10).unwrap().unwrap();
        assert!(req.args.is_empty() && req.capabilities.is_empty());
        // delim with no arguments
        let req = v2(&["command=fetch", "D", "F"], 10).unwrap().unwrap();
        assert_eq!(req.command, "fetch");
        assert!(req.args.is_empty());
        // capability before the command
        let req = v2(&["agent=x", "command=fetch", "F"], 10).unwrap().unwrap();
        assert_eq!(req.command, "fetch");
    }

    #[test]
    fn v2_empty_and_sequential_requests() {
        assert_eq!(v2(&[], 10).unwrap(), None);
        assert_eq!(v2(&["F"], 10).unwrap(), None);
        let input = body(&["command=ls-refs", "F", "command=fetch", "D", "done", "F"]);
        let mut reader = PktReader::new(&input[..]);
        assert_eq!(
            read_command_v2(&mut reader, 10).unwrap().unwrap().command,
            "ls-refs"
        );
        assert_eq!(
            read_command_v2(&mut reader, 10).unwrap().unwrap().args,
            vec![b"done".to_vec()]
        );
        assert_eq!(read_command_v2(&mut reader, 10).unwrap(), None);
    }

    #[test]
    fn v2_command_errors() {
        let e = v2(&["command=ls-refs", "command=fetch", "F"], 10).unwrap_err();
        assert!(
            matches!(&e, FetchError::DuplicateCommand { first, second } if first == "ls-refs" && second == "fetch")
        );
        let e = v2(&["agent=x", "D", "peel", "F"], 10).unwrap_err();
        assert!(matches!(e, FetchError::NoCommand), "{e}");
        let e = v2(&["D", "F"], 10).unwrap_err();
        assert!(matches!(e, FetchError::NoCommand), "{e}");
        let e = v2(&["command=fetch"], 10).unwrap_err();
        assert!(matches!(e, FetchError::UnexpectedEof { .. }), "{e}");
        let e = v2(&["command=fetch", "D", "done"], 10).unwrap_err();
        assert!(
            matches!(
                e,
                FetchError::UnexpectedEof {
                    section: "argument list"
                }
            ),
            "{e}"
        );
        let e = v2(&["command=fetch", "D", "done", "D"], 10).unwrap_err();
        assert!(
            matches!(
                e,
                FetchError::UnexpectedPacket {
                    packet: "delim",
                    ..
                }
            ),
            "{e}"
        );
        let e = v2(&["command=fetch", "R"], 10).unwrap_err();
        assert!(
            matches!(
                e,
                FetchError::UnexpectedPacket {
                    packet: "response-end",
                    ..
                }
            ),
            "{e}"
        );
        let e = v2(&["command=fetch", "D", "a", "b", "c", "F"], 4).unwrap_err();
        assert!(matches!(e, FetchError::TooManyLines { max: 4 }), "{e}");
        assert!(v2(&["command=fetch", "D", "a", "b", "c", "F"], 6).is_ok());
        let mut bad = Vec::new();
        write_data(&mut bad, b"command=\xff").unwrap();
        write_flush(&mut bad).unwrap();
        let e = read_command_v2(&mut PktReader::new(&bad[..]), 10).unwrap_err();
        assert!(matches!(e, FetchError::NotUtf8 { .. }), "{e}");
    }

    #[test]
    fn fetch_args_parse() {
        let a = args(&[
            "thin-pack",
            "no-progress",
            "include-tag",
            "ofs-delta\n",
            &format!("want {B}"),
            &format!("want {C}"),
            "want-ref refs/heads/main",
            &format!("have {A}"),
            &format!("shallow {A}"),
            "deepen 2147483647",
            "deepen-relative",
            "filter blob:limit=1k",
            "wait-for-done",
            "sideband-all",
            "done",
        ])
        .unwrap();
        assert_eq!(
            a,
            FetchArgsV2 {
                wants: vec![oid(B), oid(C)],
                want_refs: vec!["refs/heads/main".into()],
                haves: vec![oid(A)],
                done: true,
                thin_pack: true,
                no_progress: true,
                include_tag: true,
                ofs_delta: true,
                shallows: vec![oid(A)],
                deepen: Some(2_147_483_647),
                deepen_relative: true,
                deepen_since: None,
                deepen_not: vec![],
                filter: Some("blob:limit=1k".into()),
                wait_for_done: true,
                sideband_all: true,
            }
        );
        let a = args(&[
            "deepen-since 1234",
            "deepen-not refs/tags/v1",
            "deepen-not refs/tags/v2",
        ])
        .unwrap();
        assert_eq!(a.deepen_since, Some(1234));
        assert_eq!(a.deepen_not.len(), 2);
        assert_eq!(args(&[]).unwrap(), FetchArgsV2::default());
    }

    #[test]
    fn fetch_args_errors() {
        let e = args(&["bogus-arg"]).unwrap_err();
        assert!(matches!(&e, FetchError::UnexpectedLine { line } if line == "bogus-arg"));
        assert_eq!(e.to_string(), "unexpected line: 'bogus-arg'");
        for bad in [
            "packfile-uris https",
            "done now",
            "want",
            "command=fetch",
            "have",
        ] {
            assert!(
                matches!(args(&[bad]), Err(FetchError::UnexpectedLine { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            args(&["want 1234"]),
            Err(FetchError::InvalidObjectId { .. })
        ));
        assert!(matches!(
            args(&[&format!("have {B}0")]),
            Err(FetchError::InvalidObjectId { .. })
        ));
        assert!(matches!(
            args(&["shallow zz"]),
            Err(FetchError::InvalidObjectId { .. })
        ));
        assert!(matches!(
            args(&["deepen 0"]),
            Err(FetchError::InvalidDeepen { .. })
        ));
        assert!(matches!(
            args(&["deepen 1", "deepen-since 5"]),
            Err(FetchError::DeepenConflict)
        ));
        assert!(matches!(
            args(&["filter a", "filter b"]),
            Err(FetchError::DuplicateFilter { .. })
        ));
    }

    #[test]
    fn v0_acks_match_git() {
        let mut out = Vec::new();
        write_ack(&mut out, &oid(A), AckKind::Common).unwrap();
        write_nak(&mut out).unwrap();
        assert_eq!(out, format!("0038ACK {A} common\n0008NAK\n").as_bytes());
        let mut out = Vec::new();
        write_ack(&mut out, &oid(A), AckKind::Continue).unwrap();
        write_ack(&mut out, &oid(A), AckKind::Ready).unwrap();
        write_ack(&mut out, &oid(A), AckKind::Final).unwrap();
        assert_eq!(
            out,
            format!("003aACK {A} continue\n0037ACK {A} ready\n0031ACK {A}\n").as_bytes()
        );
    }

    #[test]
    fn v0_shallow_update_matches_git() {
        let mut out = Vec::new();
        write_shallow_update_v0(&mut out, &[oid(B)], &[]).unwrap();
        assert_eq!(out, format!("0034shallow {B}0000").as_bytes());
        let mut out = Vec::new();
        write_shallow_update_v0(&mut out, &[], &[oid(A)]).unwrap();
        assert_eq!(out, format!("0036unshallow {A}0000").as_bytes());
    }

    #[test]
    fn v2_sections_match_git() {
        let mut out = Vec::new();
        write_acknowledgments(&mut out, &[oid(A)], true).unwrap();
        write_shallow_info(&mut out, &[oid(B)], &[]).unwrap();
        start_packfile_section(&mut out).unwrap();
        assert_eq!(
            out,
            format!("0014acknowledgments\n0031ACK {A}\n000aready\n00010011shallow-info\n0034shallow {B}0001000dpackfile\n").as_bytes()
        );
        let mut out = Vec::new();
        write_acknowledgments(&mut out, &[], false).unwrap();
        assert_eq!(out, b"0014acknowledgments\n0008NAK\n0000");
        let mut out = Vec::new();
        write_acknowledgments(&mut out, &[oid(A)], false).unwrap();
        assert_eq!(
            out,
            format!("0014acknowledgments\n0031ACK {A}\n0000").as_bytes()
        );
        let mut out = Vec::new();
        write_wanted_refs(&mut out, &[(oid(B), "refs/heads/main".into())]).unwrap();
        assert_eq!(
            out,
            format!("0010wanted-refs\n003d{B} refs/heads/main\n0001").as_bytes()
        );
    }
}
