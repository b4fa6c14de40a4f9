//! v2 command requests and `fetch` arguments (gitprotocol-v2(5)).

use gix_hash::ObjectId;

use super::args::*;
use super::FetchError;
use crate::pktline::{Packet, PktReader};

/// A v2 command request (gitprotocol-v2(5) "Command Request").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRequestV2 {
    /// The `command=<name>` value, e.g. `ls-refs` or `fetch`.
    pub command: String,
    /// Capability lines (`agent=…`, `object-format=sha1`,
    /// `server-option=…`), as `(key, value)` in order.
    pub capabilities: Vec<(String, Option<String>)>,
    /// The argument lines after the delim, trailing LF removed.
    pub args: Args,
}

/// The argument lines of a v2 command, kept back to back in one buffer: a
/// mirror clone's request has a `want` line per ref, and a line each in a
/// `Vec` of its own cost three times its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    bytes: Vec<u8>,
    /// Where each line ends in `bytes`.
    ends: Vec<usize>,
}

impl Args {
    /// Appends a line.
    pub fn push(&mut self, line: &[u8]) {
        self.bytes.extend_from_slice(line);
        self.ends.push(self.bytes.len());
    }

    /// The lines, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(a, &b)| &self.bytes[a..b])
    }

    /// Number of lines.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No lines.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
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
    let mut args = Args::default();
    if has_args {
        loop {
            let packet = input
                .next()?
                .ok_or(FetchError::UnexpectedEof { section: ARGS })?;
            match &packet {
                Packet::Flush => break,
                Packet::Data(_) => args.push(packet.as_text().unwrap_or_default()),
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
    pub fn parse<A: AsRef<[u8]>>(args: impl IntoIterator<Item = A>) -> Result<Self, FetchError> {
        let mut out = FetchArgsV2::default();
        let mut deepen = DeepenState::default();
        for arg in args {
            let arg = arg.as_ref();
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
