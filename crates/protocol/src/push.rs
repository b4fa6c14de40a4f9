//! The receive-pack request: gitprotocol-pack(5) "Reference Update Request
//! and Packfile Transfer", with gitprotocol-capabilities(5) "push-options";
//! its answer, "Report Status", is [`crate::report_status`] (re-exported
//! here).
//!
//! A push request body is
//!
//! ```text
//! *shallow-line              "shallow <oid>"
//! command-line "\0" caps     "<old> <new> <ref>\0 report-status side-band-64k …"
//! *command-line              "<old> <new> <ref>"
//! flush
//! [*push-option flush]       only when the client sent "push-options"
//! [pack]                     raw, not pkt-framed; absent if every command deletes
//! ```
//!
//! Facts confirmed against git 2.47 receive-pack (stateless RPC over HTTP):
//! git's client puts a space after the NUL (`"\0 report-status-v2 …"`);
//! command lines carry no trailing LF.

use gix_hash::ObjectId;

use crate::capabilities::Capabilities;
use crate::pktline::{Packet, PktError, PktReader};
pub use crate::report_status::{write_report_status, write_report_status_sideband, RefStatus};

/// Most `shallow` lines [`read_push_request`] accepts before failing with
/// [`PushRequestError::TooManyShallowLines`]; a client sends one per shallow
/// boundary commit it has.
pub const MAX_PUSH_SHALLOW_LINES: usize = 100_000;

/// Most bytes the command lines of a request may hold together (shallow
/// lines included); more is [`PushRequestError::CommandListTooLarge`]. A
/// push of 100,000 refs of ordinary names sends about 10 MB; ref names
/// longer than [`crate::MAX_REF_NAME_BYTES`] are refused anyway, so this
/// only bounds what a request makes the server hold before it answers.
pub const MAX_COMMAND_LIST_BYTES: usize = 32 << 20;

/// Most push options a request may carry (`git push -o`); more is
/// [`PushRequestError::TooManyPushOptions`]. Options are short key=values
/// (GitLab's `ci.skip`, `merge_request.create`; Gerrit's `topic=…`,
/// `reviewer=…`): a push carries a handful.
pub const MAX_PUSH_OPTIONS: usize = 1_000;

/// Most bytes all push options of a request may hold together (their
/// text, without pkt-line framing); more is
/// [`PushRequestError::PushOptionsTooLarge`]. Options travel in memory to
/// the pre-receive check and in every webhook event: this bounds both.
pub const MAX_PUSH_OPTION_BYTES: usize = 64 << 10;

/// One ref update command (gitprotocol-pack(5) "command").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefCommand {
    /// The value the client believes the ref has; all zeros to create.
    pub old: ObjectId,
    /// The value to set; all zeros to delete.
    pub new: ObjectId,
    /// The full ref name, unvalidated (see [`crate::check_ref_format`]).
    pub name: String,
}

impl RefCommand {
    /// The command creates the ref (old id all zeros).
    pub fn is_create(&self) -> bool {
        self.old.is_null()
    }

    /// The command deletes the ref (new id all zeros).
    pub fn is_delete(&self) -> bool {
        self.new.is_null()
    }
}

/// A parsed receive-pack request, the pack not included
/// (gitprotocol-pack(5) "update-request").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushRequest {
    /// The commands in the order sent.
    pub commands: Vec<RefCommand>,
    /// The client's capabilities from the first command line (and any
    /// other line carrying a NUL, merged in order, as git accepts).
    pub capabilities: Capabilities,
    /// Push options (`git push -o …`), in order; invalid UTF-8 is replaced.
    pub push_options: Vec<String>,
    /// `shallow <oid>` lines: the client's shallow boundary commits.
    pub shallow: Vec<ObjectId>,
}

impl PushRequest {
    /// true when any command has a non-zero new id (a pack must follow)
    /// (git's receive-pack unpacks unless every command is a delete).
    pub fn expects_pack(&self) -> bool {
        self.commands.iter().any(|c| !c.is_delete())
    }
}

/// What a push's command list asks of the bytes after it, gathered line
/// by line while a transport copies the request (before
/// [`read_push_request`] parses it), by the parser's own rules: whether
/// push options follow ([`read_push_options`] reads them when a command
/// line's capabilities, any line's, hold `push-options`) and whether a pack
/// follows ([`PushRequest::expects_pack`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CommandScan {
    /// Some command creates or updates a ref: a pack follows.
    pub needs_pack: bool,
    /// Push options follow the command list.
    pub push_options: bool,
}

impl CommandScan {
    /// Takes one pkt-line's payload of the command list (a shallow line or
    /// a command, its LF included or not).
    pub fn line(&mut self, payload: &[u8]) {
        let line = payload.strip_suffix(b"\n").unwrap_or(payload);
        if line.starts_with(b"shallow ") {
            return;
        }
        let (command, caps) = match line.iter().position(|&b| b == 0) {
            Some(nul) => (&line[..nul], Some(&line[nul + 1..])),
            None => (line, None),
        };
        if caps.is_some_and(|c| Capabilities::parse(c).contains("push-options")) {
            self.push_options = true;
        }
        // `<old> <new> <ref>`: a new value of all zeros is a deletion.
        let new = command.split(|&b| b == b' ').nth(1).unwrap_or(b"");
        if !new.iter().all(|&b| b == b'0') {
            self.needs_pack = true;
        }
    }
}

/// Bounds on what one section of a push request may hold, counted as the
/// parser counts them (a line's text without its trailing LF): a transport
/// copying a section stops after the line that passes one, so that the
/// parser refuses the push in its own words having read no more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionCap {
    /// Bytes of text of all lines.
    pub text_bytes: usize,
    /// Data lines.
    pub lines: usize,
}

impl SectionCap {
    /// No bound but the request's size limit.
    pub const NONE: SectionCap = SectionCap {
        text_bytes: usize::MAX,
        lines: usize::MAX,
    };
    /// A push's command list ([`MAX_COMMAND_LIST_BYTES`]).
    pub const COMMANDS: SectionCap = SectionCap {
        text_bytes: MAX_COMMAND_LIST_BYTES,
        lines: usize::MAX,
    };
    /// A push's options ([`MAX_PUSH_OPTION_BYTES`], [`MAX_PUSH_OPTIONS`]).
    pub const PUSH_OPTIONS: SectionCap = SectionCap {
        text_bytes: MAX_PUSH_OPTION_BYTES,
        lines: MAX_PUSH_OPTIONS,
    };

    /// Whether `lines` lines of `text_bytes` bytes of text pass the cap.
    pub fn passed(&self, lines: usize, text_bytes: usize) -> bool {
        lines > self.lines || text_bytes > self.text_bytes
    }
}

/// Why a receive-pack request could not be read (gitprotocol-pack(5)).
#[derive(Debug, thiserror::Error)]
pub enum PushRequestError {
    /// The pkt-line layer failed (I/O, bad length, truncation).
    #[error(transparent)]
    Packet(#[from] PktError),
    /// A command line is not `<old-oid> <new-oid> <ref>`.
    #[error("protocol error: expected old/new/ref, got '{line}'")]
    MalformedCommand {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// A ref name in a command line is not UTF-8.
    #[error("ref name in command '{line}' is not valid UTF-8")]
    NonUtf8RefName {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// A `shallow` line does not carry a 40-hex object id.
    #[error("protocol error: expected shallow sha, got '{line}'")]
    MalformedShallow {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// The client sent a signed push; `push-cert` is never advertised.
    #[error("push certificates are not supported (push-cert was not advertised)")]
    PushCertUnsupported,
    /// A delim or response-end packet where pkt-lines or a flush belong.
    #[error("protocol error: unexpected {packet} packet in the {section}")]
    UnexpectedPacket {
        /// `"delim"` or `"response-end"`.
        packet: &'static str,
        /// `"command list"` or `"push options"`.
        section: &'static str,
    },
    /// The input ended before the flush that ends a section.
    #[error("the remote end hung up before the flush ending the {section}")]
    MissingFlush {
        /// `"command list"` or `"push options"`.
        section: &'static str,
    },
    /// More commands than the caller allows.
    #[error("too many ref update commands: more than {max}")]
    TooManyCommands {
        /// The limit passed to [`read_push_request`].
        max: usize,
    },
    /// Command lines of more than [`MAX_COMMAND_LIST_BYTES`] in all.
    #[error("command list too large: more than {max} bytes")]
    CommandListTooLarge {
        /// [`MAX_COMMAND_LIST_BYTES`].
        max: usize,
    },
    /// More shallow lines than [`MAX_PUSH_SHALLOW_LINES`].
    #[error("too many shallow lines: more than {max}")]
    TooManyShallowLines {
        /// [`MAX_PUSH_SHALLOW_LINES`].
        max: usize,
    },
    /// More push options than [`MAX_PUSH_OPTIONS`] (or the command limit,
    /// when lower).
    #[error("too many push options: more than {max}")]
    TooManyPushOptions {
        /// The limit applied.
        max: usize,
    },
    /// Push options of more than [`MAX_PUSH_OPTION_BYTES`] in all.
    #[error("push options too large: more than {max} bytes in all")]
    PushOptionsTooLarge {
        /// [`MAX_PUSH_OPTION_BYTES`].
        max: usize,
    },
}

impl PushRequestError {
    /// True for a request that is well-formed but over a limit on its push
    /// options: the commands were read, and the push can be refused in the
    /// protocol (`unpack …`, `ng` per command) rather than as a bad request.
    pub fn is_push_options_limit(&self) -> bool {
        matches!(
            self,
            PushRequestError::TooManyPushOptions { .. }
                | PushRequestError::PushOptionsTooLarge { .. }
        )
    }
}

fn unexpected(packet: &Packet, section: &'static str) -> PushRequestError {
    PushRequestError::UnexpectedPacket {
        packet: if *packet == Packet::Delim {
            "delim"
        } else {
            "response-end"
        },
        section,
    }
}

/// Parses `<old> <new> <name>` (git's `queue_command`): the name is the
/// rest of the line and may be anything; the caller validates it.
fn parse_command(line: &[u8]) -> Result<RefCommand, PushRequestError> {
    let malformed = || PushRequestError::MalformedCommand {
        line: crate::lossy(line),
    };
    // git's queue_command: the name is whatever follows, possibly nothing
    // (an empty name is then refused per ref as a "funny refname"). Both
    // ids have one width, 40 hex digits (SHA-1) or 64 (SHA-256); whether
    // it is the repository's is the caller's check.
    let w = match line.iter().position(|&b| b == b' ') {
        Some(w @ (40 | 64)) => w,
        _ => return Err(malformed()),
    };
    if line.len() < 2 * w + 2 || line[2 * w + 1] != b' ' {
        return Err(malformed());
    }
    let old = crate::parse_oid(&line[..w]).ok_or_else(malformed)?;
    let new = crate::parse_oid(&line[w + 1..2 * w + 1]).ok_or_else(malformed)?;
    let name =
        std::str::from_utf8(&line[2 * w + 2..]).map_err(|_| PushRequestError::NonUtf8RefName {
            line: crate::lossy(line),
        })?;
    Ok(RefCommand {
        old,
        new,
        name: name.to_owned(),
    })
}

/// Reads optional `shallow <oid>` lines, then command lines
/// `<old> <new> <name>` (the first with `\0<caps>`) up to the flush, then, if the
/// client's capabilities contain "push-options", the option lines up to
/// the next flush (gitprotocol-pack(5) "Reference Update Request",
/// gitprotocol-capabilities(5) "push-options"): [`read_commands`], then
/// [`read_push_options`]. `max_commands` bounds the count (error beyond
/// it). Does not validate ref names (the caller reports those per ref).
/// An empty request (flush only, or EOF immediately) yields zero commands.
/// On success the reader sits right after the last flush, at the pack.
pub fn read_push_request<R: std::io::Read>(
    reader: &mut PktReader<R>,
    max_commands: usize,
) -> Result<PushRequest, PushRequestError> {
    let mut request = read_commands(reader, max_commands)?;
    read_push_options(reader, &mut request, max_commands)?;
    Ok(request)
}

/// Reads the shallow and command lines of a push request up to their
/// flush (see [`read_push_request`]), not the push options.
///
/// Like git's receive-pack: a trailing LF on a line is ignored; shallow
/// lines are accepted anywhere in the command list; a NUL on a later
/// command line adds its capabilities too. Shallow lines are bounded by
/// [`MAX_PUSH_SHALLOW_LINES`].
pub fn read_commands<R: std::io::Read>(
    reader: &mut PktReader<R>,
    max_commands: usize,
) -> Result<PushRequest, PushRequestError> {
    const COMMANDS: &str = "command list";
    let mut request = PushRequest::default();
    let mut seen_any = false;
    let mut bytes = 0usize;
    loop {
        let packet = match reader.read_packet()? {
            None if !seen_any => return Ok(request),
            None => return Err(PushRequestError::MissingFlush { section: COMMANDS }),
            Some(p) => p,
        };
        seen_any = true;
        let line = match &packet {
            Packet::Flush => break,
            Packet::Delim | Packet::ResponseEnd => return Err(unexpected(&packet, COMMANDS)),
            Packet::Data(_) => packet.as_text().unwrap_or_default(),
        };
        bytes += line.len();
        if bytes > MAX_COMMAND_LIST_BYTES {
            return Err(PushRequestError::CommandListTooLarge {
                max: MAX_COMMAND_LIST_BYTES,
            });
        }
        if let Some(hex) = line.strip_prefix(b"shallow ") {
            let oid = crate::parse_oid(hex).ok_or_else(|| PushRequestError::MalformedShallow {
                line: crate::lossy(line),
            })?;
            if request.shallow.len() >= MAX_PUSH_SHALLOW_LINES {
                return Err(PushRequestError::TooManyShallowLines {
                    max: MAX_PUSH_SHALLOW_LINES,
                });
            }
            request.shallow.push(oid);
            continue;
        }
        let (line, caps) = match line.iter().position(|&b| b == 0) {
            Some(nul) => (&line[..nul], Some(&line[nul + 1..])),
            None => (line, None),
        };
        if line == b"push-cert" {
            return Err(PushRequestError::PushCertUnsupported);
        }
        if let Some(caps) = caps {
            request.capabilities.extend(Capabilities::parse(caps));
        }
        let command = parse_command(line)?;
        if request.commands.len() >= max_commands {
            return Err(PushRequestError::TooManyCommands { max: max_commands });
        }
        request.commands.push(command);
    }
    Ok(request)
}

/// Reads the push options that follow the command list into `request`
/// when it has commands and its capabilities contain "push-options"
/// (git reads them only then). At most [`MAX_PUSH_OPTIONS`] (or
/// `max_commands`, when lower) options of [`MAX_PUSH_OPTION_BYTES`] in all:
/// beyond either, reading stops at once with
/// [`PushRequestError::TooManyPushOptions`] or
/// [`PushRequestError::PushOptionsTooLarge`], having held no more than the
/// limit in memory.
pub fn read_push_options<R: std::io::Read>(
    reader: &mut PktReader<R>,
    request: &mut PushRequest,
    max_commands: usize,
) -> Result<(), PushRequestError> {
    const OPTIONS: &str = "push options";
    if request.commands.is_empty() || !request.capabilities.contains("push-options") {
        return Ok(());
    }
    let max_options = max_commands.min(MAX_PUSH_OPTIONS);
    let mut bytes = 0usize;
    loop {
        let packet = reader
            .read_packet()?
            .ok_or(PushRequestError::MissingFlush { section: OPTIONS })?;
        match &packet {
            Packet::Flush => break,
            Packet::Delim | Packet::ResponseEnd => return Err(unexpected(&packet, OPTIONS)),
            Packet::Data(_) => {
                if request.push_options.len() >= max_options {
                    return Err(PushRequestError::TooManyPushOptions { max: max_options });
                }
                let text = packet.as_text().unwrap_or_default();
                bytes += text.len();
                if bytes > MAX_PUSH_OPTION_BYTES {
                    return Err(PushRequestError::PushOptionsTooLarge {
                        max: MAX_PUSH_OPTION_BYTES,
                    });
                }
                request.push_options.push(crate::lossy(text));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pktline::{write_data, write_delim, write_flush, write_text};
    use std::io::Read;

    /// The scan a transport makes while copying a command list agrees with
    /// what the parser reads of it: whether a pack follows, whether push
    /// options do (a later command line's capabilities count too).
    #[test]
    fn the_scan_of_a_command_list_agrees_with_its_parser() {
        let zero = "0".repeat(40);
        let one = "1".repeat(40);
        let del = |r: &str, caps: &str| format!("{one} {zero} {r}{caps}");
        let upd = |r: &str, caps: &str| format!("{zero} {one} {r}{caps}");
        let lists: Vec<Vec<String>> = vec![
            vec![
                del("refs/heads/a", "\0report-status push-options\n"),
                del("refs/heads/b", "\n"),
            ],
            vec![
                format!("shallow {one}"),
                upd("refs/heads/a", "\0report-status"),
            ],
            vec![
                upd("refs/heads/a", "\0report-status"),
                del("refs/heads/b", "\0push-options"),
            ],
            vec![
                del("refs/heads/a", "\0report-status"),
                upd("refs/heads/b", ""),
            ],
            vec![del("refs/heads/a", "\0report-status push-optionsx")],
        ];
        for lines in lists {
            let mut wire = Vec::new();
            let mut scan = CommandScan::default();
            for line in &lines {
                write_data(&mut wire, line.as_bytes()).unwrap();
                scan.line(line.as_bytes());
            }
            write_flush(&mut wire).unwrap();
            let parsed = read_commands(&mut PktReader::new(&wire[..]), 100).unwrap();
            assert_eq!(scan.needs_pack, parsed.expects_pack(), "{lines:?}");
            assert_eq!(
                scan.push_options,
                !parsed.commands.is_empty() && parsed.capabilities.contains("push-options"),
                "{lines:?}"
            );
        }
    }

    #[test]
    fn a_section_cap_is_passed_by_lines_or_text() {
        assert!(!SectionCap::PUSH_OPTIONS.passed(MAX_PUSH_OPTIONS, MAX_PUSH_OPTION_BYTES));
        assert!(SectionCap::PUSH_OPTIONS.passed(MAX_PUSH_OPTIONS + 1, 0));
        assert!(SectionCap::COMMANDS.passed(1, MAX_COMMAND_LIST_BYTES + 1));
        assert!(!SectionCap::NONE.passed(usize::MAX, usize::MAX));
    }

    const A: &str = "a8865dad5bf23af83184dd124133bdab7c6646eb";
    const B: &str = "026a191405ac2b3ef86990d0ef907000cd1df7a5";
    const Z: &str = "0000000000000000000000000000000000000000";

    fn oid(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.as_bytes()).unwrap()
    }

    fn body(lines: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for line in lines {
            match *line {
                b"F" => write_flush(&mut out).unwrap(),
                b"D" => write_delim(&mut out).unwrap(),
                l => write_data(&mut out, l).unwrap(),
            }
        }
        out
    }

    fn read(bytes: &[u8], max: usize) -> Result<PushRequest, PushRequestError> {
        read_push_request(&mut PktReader::new(bytes), max)
    }

    #[test]
    fn commands_with_caps_options_shallow_and_pack() {
        let first = format!("{Z} {B} refs/heads/new\0 report-status-v2 side-band-64k quiet push-options object-format=sha1 agent=git/2.47.3");
        let second = format!("{A} {B} refs/heads/main\n");
        let third = format!("{A} {Z} refs/heads/gone");
        let shallow = format!("shallow {A}");
        let mut input = body(&[
            shallow.as_bytes(),
            first.as_bytes(),
            second.as_bytes(),
            third.as_bytes(),
            b"F",
            b"foo=bar\n",
            b"with space",
            b"F",
        ]);
        input.extend_from_slice(b"PACK\x00\x00\x00\x02");
        let mut reader = PktReader::new(&input[..]);
        let req = read_push_request(&mut reader, 10).unwrap();
        assert_eq!(
            req.commands,
            vec![
                RefCommand {
                    old: oid(Z),
                    new: oid(B),
                    name: "refs/heads/new".into()
                },
                RefCommand {
                    old: oid(A),
                    new: oid(B),
                    name: "refs/heads/main".into()
                },
                RefCommand {
                    old: oid(A),
                    new: oid(Z),
                    name: "refs/heads/gone".into()
                },
            ]
        );
        assert!(req.commands[0].is_create());
        assert!(req.commands[2].is_delete());
        assert!(req.capabilities.contains("report-status-v2"));
        assert!(req.capabilities.contains("side-band-64k"));
        assert_eq!(req.capabilities.value("agent"), Some("git/2.47.3"));
        assert_eq!(
            req.push_options,
            vec!["foo=bar".to_owned(), "with space".to_owned()]
        );
        assert_eq!(req.shallow, vec![oid(A)]);
        assert!(req.expects_pack());
        let mut rest = Vec::new();
        reader.into_inner().read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"PACK\x00\x00\x00\x02", "positioned at the pack");
    }

    #[test]
    fn options_only_read_when_negotiated() {
        let first = format!("{A} {B} refs/heads/main\0report-status");
        let mut input = body(&[first.as_bytes(), b"F"]);
        input.extend_from_slice(b"0008opt\n0000");
        let mut reader = PktReader::new(&input[..]);
        let req = read_push_request(&mut reader, 10).unwrap();
        assert!(req.push_options.is_empty());
        assert_eq!(
            reader.read_packet().unwrap(),
            Some(Packet::Data(b"opt\n".to_vec()))
        );
    }

    #[test]
    fn empty_requests() {
        assert_eq!(read(b"", 10).unwrap(), PushRequest::default());
        let req = read(b"0000", 10).unwrap();
        assert!(req.commands.is_empty());
        assert!(!req.expects_pack());
    }

    #[test]
    fn delete_only_expects_no_pack() {
        let line = format!("{A} {Z} refs/heads/x\0report-status push-options");
        let req = read(&body(&[line.as_bytes(), b"F", b"F"]), 1).unwrap();
        assert!(!req.expects_pack());
        assert_eq!(req.commands.len(), 1);
    }

    #[test]
    fn empty_ref_name_is_read_as_git_does() {
        // git's receive-pack reads it and answers "ng  funny refname"
        let line = format!("{Z} {B} \0report-status");
        let req = read(&body(&[line.as_bytes(), b"F"]), 10).unwrap();
        assert_eq!(req.commands[0].name, "");
    }

    #[test]
    fn later_nul_caps_are_merged_and_names_are_not_validated() {
        let first = format!("{A} {B} refs/heads/a..b");
        let second = format!("{A} {B} HEAD\0atomic");
        let req = read(&body(&[first.as_bytes(), second.as_bytes(), b"F"]), 10).unwrap();
        assert!(req.capabilities.contains("atomic"));
        assert_eq!(req.commands[0].name, "refs/heads/a..b");
        assert_eq!(req.commands[1].name, "HEAD");
    }

    #[test]
    fn sha256_command_lines_parse_at_their_width() {
        let (old, new) = ("0".repeat(64), "ab".repeat(32));
        let line = format!("{old} {new} refs/heads/main\0report-status object-format=sha256");
        let req = read(&body(&[line.as_bytes(), b"F"]), 10).unwrap();
        let cmd = &req.commands[0];
        assert_eq!(cmd.old, gix_hash::Kind::Sha256.null());
        assert_eq!(cmd.new.to_string(), new);
        assert_eq!(cmd.name, "refs/heads/main");
        assert_eq!(req.capabilities.value("object-format"), Some("sha256"));
    }

    #[test]
    fn malformed_lines() {
        let cases: Vec<Vec<u8>> = vec![
            b"garbage".to_vec(),
            format!("{A} {B}").into_bytes(),
            format!("{A}  {B} refs/heads/x").into_bytes(),
            format!("{A}x{B} refs/heads/x").into_bytes(),
            format!("{} {B} refs/heads/x", &A[..39]).into_bytes(),
            format!("g{} {B} refs/heads/x", &A[1..]).into_bytes(),
            format!("{A} {B}_refs/heads/x").into_bytes(),
            // Ids of two widths, or of neither.
            format!("{A} {} refs/heads/x", "b".repeat(64)).into_bytes(),
            format!("{} {B} refs/heads/x", "a".repeat(64)).into_bytes(),
            format!("{} {} refs/heads/x", "a".repeat(50), "b".repeat(50)).into_bytes(),
        ];
        for line in cases {
            let err = read(&body(&[&line, b"F"]), 10).unwrap_err();
            assert!(
                matches!(err, PushRequestError::MalformedCommand { .. }),
                "{:?}: {err}",
                crate::lossy(&line)
            );
            assert!(err.to_string().contains("expected old/new/ref"), "{err}");
        }
        let err = read(&body(&[b"shallow 1234", b"F"]), 10).unwrap_err();
        assert!(
            matches!(err, PushRequestError::MalformedShallow { ref line } if line == "shallow 1234")
        );
        let line = [format!("{A} {B} refs/heads/").as_bytes(), b"\xff"].concat();
        let err = read(&body(&[&line, b"F"]), 10).unwrap_err();
        assert!(
            matches!(err, PushRequestError::NonUtf8RefName { .. }),
            "{err}"
        );
        let err = read(&body(&[b"push-cert\0report-status", b"F"]), 10).unwrap_err();
        assert!(matches!(err, PushRequestError::PushCertUnsupported));
    }

    #[test]
    fn structural_errors() {
        let line = format!("{A} {B} refs/heads/x\0push-options");
        // EOF before the command flush
        let err = read(&body(&[line.as_bytes()]), 10).unwrap_err();
        assert!(
            matches!(
                err,
                PushRequestError::MissingFlush {
                    section: "command list"
                }
            ),
            "{err}"
        );
        // EOF before the options flush
        let err = read(&body(&[line.as_bytes(), b"F", b"opt"]), 10).unwrap_err();
        assert!(
            matches!(
                err,
                PushRequestError::MissingFlush {
                    section: "push options"
                }
            ),
            "{err}"
        );
        // delim in the command list
        let err = read(&body(&[line.as_bytes(), b"D"]), 10).unwrap_err();
        assert!(
            matches!(
                err,
                PushRequestError::UnexpectedPacket {
                    packet: "delim",
                    ..
                }
            ),
            "{err}"
        );
        // a truncated packet
        let err = read(b"00ff0000", 10).unwrap_err();
        assert!(
            matches!(
                err,
                PushRequestError::Packet(PktError::TruncatedData { .. })
            ),
            "{err}"
        );
    }

    #[test]
    fn oversized_counts() {
        let line = format!("{A} {B} refs/heads/x");
        let lines: Vec<&[u8]> = std::iter::repeat_n(line.as_bytes(), 4)
            .chain([&b"F"[..]])
            .collect();
        assert_eq!(read(&body(&lines), 4).unwrap().commands.len(), 4);
        let err = read(&body(&lines), 3).unwrap_err();
        assert!(
            matches!(err, PushRequestError::TooManyCommands { max: 3 }),
            "{err}"
        );
        assert_eq!(err.to_string(), "too many ref update commands: more than 3");
        let err = read(&body(&lines), 0).unwrap_err();
        assert!(matches!(err, PushRequestError::TooManyCommands { max: 0 }));

        let first = format!("{A} {B} refs/heads/x\0push-options");
        let err = read(&body(&[first.as_bytes(), b"F", b"o1", b"o2", b"F"]), 1).unwrap_err();
        assert!(
            matches!(err, PushRequestError::TooManyPushOptions { max: 1 }),
            "{err}"
        );

        let big = "o".repeat(60_000);
        let err = read(
            &body(&[first.as_bytes(), b"F", big.as_bytes(), big.as_bytes(), b"F"]),
            10,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                PushRequestError::PushOptionsTooLarge {
                    max: MAX_PUSH_OPTION_BYTES
                }
            ),
            "{err}"
        );
        assert!(err.is_push_options_limit());
        let many: Vec<&[u8]> = std::iter::once(first.as_bytes())
            .chain([&b"F"[..]])
            .chain(std::iter::repeat_n(&b"k=v"[..], MAX_PUSH_OPTIONS + 1))
            .chain([&b"F"[..]])
            .collect();
        let err = read(&body(&many), 100_000).unwrap_err();
        assert!(
            matches!(
                err,
                PushRequestError::TooManyPushOptions {
                    max: MAX_PUSH_OPTIONS
                }
            ),
            "{err}"
        );

        let shallow = format!("shallow {A}");
        let mut input = Vec::new();
        for _ in 0..=MAX_PUSH_SHALLOW_LINES {
            write_text(&mut input, &shallow).unwrap();
        }
        let err = read(&input, 1).unwrap_err();
        assert!(
            matches!(err, PushRequestError::TooManyShallowLines { .. }),
            "{err}"
        );
    }
}
