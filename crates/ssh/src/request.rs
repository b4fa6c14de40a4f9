//! The client's request over an SSH channel, read as it comes: a push's
//! sections (command list, push options) and pack spooled to a file, an
//! upload-pack request (a v2 command, a v0 want list) spooled in memory
//! and past 64 KiB to a file, every section through [`read_section`], which
//! holds one pkt-line and bounds what it reads (gitprotocol-pack(5),
//! gitprotocol-v2(5)).

use std::io::Write;
use std::time::Duration;

use gitstow_protocol::pktline::{decode_length, MAX_PKT_LEN};
use gitstow_service::Refusal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::git::{Failure, Limits};

/// Reads one upload-pack request (`what`, for the error: a v2 command, a
/// v0 want list) up to its flush-pkt into a file spooled in memory up to
/// 64 KiB and in the staging directory beyond, rewound; `None` when the
/// client sent only a flush-pkt, or nothing, and hung up.
///
/// # Errors
/// [`Failure::Protocol`] for a request that ends before its flush-pkt or
/// breaks a limit; [`Failure::Gone`] when the spool fails.
pub(crate) async fn read_request(
    input: &mut (impl AsyncRead + Unpin + Send),
    limits: &Limits,
    what: &str,
) -> Result<Option<tempfile::SpooledTempFile>, Failure> {
    use std::io::Seek;
    let mut request = match &limits.staging_dir {
        Some(dir) => tempfile::spooled_tempfile_in(64 << 10, dir),
        None => tempfile::spooled_tempfile(64 << 10),
    };
    let read = read_section(
        input,
        &mut request,
        limits.max_fetch_request_bytes,
        SectionCap::NONE,
        limits.idle,
        |_| {},
    )
    .await?;
    if read.bytes <= 4 {
        return Ok(None);
    }
    if !read.flushed {
        return Err(Failure::Protocol(format!(
            "{what} ended before its flush-pkt"
        )));
    }
    request.rewind().map_err(|_| Failure::Gone)?;
    Ok(Some(request))
}

/// What [`spool_push`] read.
pub(crate) struct Spooled {
    /// Nothing but a flush-pkt: the client had nothing to push.
    pub(crate) probe: bool,
    /// The request passed the size limit and was cut.
    pub(crate) truncated: bool,
}

/// Copies a receive-pack request to `file`: the command list (shallow lines
/// and commands) up to its flush-pkt, the push options up to theirs when
/// the first command asks for `push-options`, then, unless every command
/// is a deletion, the pack up to the client's EOF. Nothing of it is held
/// in memory but one pkt-line: each section goes to the file as it is
/// read, its lines scanned on the way, and a section that passes the
/// bounds `gitstow_protocol::push` refuses it by ([`SectionCap`]) is cut
/// after the line that passed them, so that the service's parser refuses
/// the push in its own words (as over HTTP) having read no more.
pub(crate) async fn spool_push(
    input: &mut (impl AsyncRead + Unpin + Send),
    file: &std::fs::File,
    limits: &Limits,
) -> Result<Spooled, Failure> {
    let std_file = file.try_clone().map_err(|_| Failure::Gone)?;
    let limit = limits.max_push_bytes;
    let mut sections = std::io::BufWriter::with_capacity(64 << 10, std_file);
    let mut scan = CommandScan::default();
    let first = read_section(
        input,
        &mut sections,
        limit,
        SectionCap::COMMANDS,
        limits.idle,
        |line| scan.line(line),
    )
    .await?;
    let done = |sections: std::io::BufWriter<std::fs::File>, truncated| {
        sections
            .into_inner()
            .map_err(|e| spool_error(e.into_error()))?;
        Ok(Spooled {
            probe: false,
            truncated,
        })
    };
    if first.bytes <= 4 {
        done(sections, false)?;
        return Ok(Spooled {
            probe: true,
            truncated: false,
        });
    }
    // A cut section is refused by the parser, before any pack is read.
    if first.cut {
        return done(sections, false);
    }
    if !first.flushed {
        return Err(Failure::Protocol(
            "the command list ended before its flush-pkt".into(),
        ));
    }
    let mut total = first.bytes;
    if scan.push_options {
        let read = read_section(
            input,
            &mut sections,
            limit.saturating_sub(total),
            SectionCap::PUSH_OPTIONS,
            limits.idle,
            |_| {},
        )
        .await?;
        if read.cut {
            return done(sections, false);
        }
        if !read.flushed {
            return Err(Failure::Protocol(
                "the push options ended before their flush-pkt".into(),
            ));
        }
        total += read.bytes;
    }
    let std_file = sections
        .into_inner()
        .map_err(|e| spool_error(e.into_error()))?;
    let mut sink = tokio::fs::File::from_std(std_file);
    let mut truncated = false;
    if scan.needs_pack {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = read_idle(input, &mut buf, limits.idle).await?;
            if n == 0 {
                break;
            }
            if total + n as u64 > limit {
                truncated = true;
                break;
            }
            sink.write_all(&buf[..n]).await.map_err(spool_error)?;
            total += n as u64;
        }
    }
    sink.flush().await.map_err(spool_error)?;
    Ok(Spooled {
        probe: false,
        truncated,
    })
}

pub(crate) fn spool_error(e: std::io::Error) -> Failure {
    Failure::Refused(Refusal::from_error("spooling the push", &e))
}

/// What a command list asks for, gathered line by line.
#[derive(Debug, Default)]
struct CommandScan {
    /// Some command creates or updates a ref (a pack follows).
    needs_pack: bool,
    /// The first command's capabilities hold `push-options`.
    push_options: bool,
    /// A command line was seen (the first one carries the capabilities).
    seen_command: bool,
}

impl CommandScan {
    /// Takes one pkt-line's payload of the command list.
    fn line(&mut self, line: &[u8]) {
        if line.starts_with(b"shallow ") {
            return;
        }
        let (command, caps) = match line.iter().position(|&b| b == 0) {
            Some(nul) => (&line[..nul], &line[nul + 1..]),
            None => (line, &[][..]),
        };
        if !self.seen_command {
            self.push_options = caps
                .split(|&b| b == b' ' || b == b'\n')
                .any(|c| c == b"push-options");
            self.seen_command = true;
        }
        // `<old> <new> <ref>`: a new value of all zeros is a deletion.
        let new = command.split(|&b| b == b' ').nth(1).unwrap_or(b"");
        if !new.iter().all(|&b| b == b'0') {
            self.needs_pack = true;
        }
    }
}

/// Bounds on what one section of a request may hold, counted as
/// `gitstow_protocol::push` counts them (a line's text without its
/// trailing LF): past one, [`read_section`] stops after the line that
/// passed it.
#[derive(Debug, Clone, Copy)]
struct SectionCap {
    /// Bytes of text of all lines.
    text_bytes: usize,
    /// Data lines.
    lines: usize,
}

impl SectionCap {
    /// No bound but the request's size limit.
    const NONE: SectionCap = SectionCap {
        text_bytes: usize::MAX,
        lines: usize::MAX,
    };
    /// A push's command list ([`gitstow_protocol::push::MAX_COMMAND_LIST_BYTES`]).
    const COMMANDS: SectionCap = SectionCap {
        text_bytes: gitstow_protocol::push::MAX_COMMAND_LIST_BYTES,
        lines: usize::MAX,
    };
    /// A push's options ([`gitstow_protocol::push::MAX_PUSH_OPTION_BYTES`],
    /// [`gitstow_protocol::push::MAX_PUSH_OPTIONS`]).
    const PUSH_OPTIONS: SectionCap = SectionCap {
        text_bytes: gitstow_protocol::push::MAX_PUSH_OPTION_BYTES,
        lines: gitstow_protocol::push::MAX_PUSH_OPTIONS,
    };
}

/// What [`read_section`] read.
struct Section {
    /// Bytes copied (the pkt-lines as sent, their flush-pkt included).
    bytes: u64,
    /// It ended with a flush-pkt (else: EOF or `cut`).
    flushed: bool,
    /// It passed its [`SectionCap`] and was cut after that line.
    cut: bool,
}

/// The length field of a pkt-line, `None` when it is not four hex digits.
fn pkt_len(head: &[u8]) -> Option<usize> {
    decode_length(head.try_into().ok()?).ok()
}

/// Copies pkt-lines from `input` to `sink` up to and including a flush-pkt
/// (`0000`), or to EOF at a pkt-line boundary, or to the line that passes
/// `cap`; hands each data line's payload to `inspect` on the way. Holds
/// one pkt-line in memory.
///
/// # Errors
/// [`Failure::Protocol`] for a malformed pkt-line or more than `limit`
/// bytes, [`Failure::Gone`] when the client or the sink fails.
async fn read_section(
    input: &mut (impl AsyncRead + Unpin + Send),
    sink: &mut impl Write,
    limit: u64,
    cap: SectionCap,
    idle: Duration,
    mut inspect: impl FnMut(&[u8]),
) -> Result<Section, Failure> {
    let mut bytes = 0u64;
    let (mut text_bytes, mut lines) = (0usize, 0usize);
    let mut buf = vec![0u8; MAX_PKT_LEN];
    loop {
        let mut head = [0u8; 4];
        match read_exact_idle(input, &mut head, idle).await? {
            0 => {
                return Ok(Section {
                    bytes,
                    flushed: false,
                    cut: false,
                })
            }
            4 => {}
            _ => {
                return Err(Failure::Protocol(
                    "the request ended inside a pkt-line".into(),
                ))
            }
        }
        let len = pkt_len(&head).ok_or_else(|| Failure::Protocol("bad pkt-line length".into()))?;
        bytes += 4;
        if bytes > limit {
            return Err(Failure::Protocol(format!(
                "request exceeds the limit of {limit} bytes"
            )));
        }
        sink.write_all(&head).map_err(|_| Failure::Gone)?;
        match len {
            0 => {
                return Ok(Section {
                    bytes,
                    flushed: true,
                    cut: false,
                })
            }
            1 | 2 => continue,
            3 => return Err(Failure::Protocol("bad pkt-line length".into())),
            len if len > MAX_PKT_LEN => {
                return Err(Failure::Protocol(format!(
                    "pkt-line of {len} bytes exceeds {MAX_PKT_LEN}"
                )))
            }
            _ => {}
        }
        let payload = &mut buf[..len - 4];
        if read_exact_idle(input, payload, idle).await? != payload.len() {
            return Err(Failure::Protocol(
                "the request ended inside a pkt-line".into(),
            ));
        }
        bytes += payload.len() as u64;
        if bytes > limit {
            return Err(Failure::Protocol(format!(
                "request exceeds the limit of {limit} bytes"
            )));
        }
        sink.write_all(payload).map_err(|_| Failure::Gone)?;
        inspect(payload);
        lines += 1;
        text_bytes += payload.strip_suffix(b"\n").unwrap_or(payload).len();
        if lines > cap.lines || text_bytes > cap.text_bytes {
            return Ok(Section {
                bytes,
                flushed: false,
                cut: true,
            });
        }
    }
}

/// Fills `buf`, each read waiting at most `idle`; returns the bytes read
/// (less than `buf.len()` only at EOF).
async fn read_exact_idle(
    input: &mut (impl AsyncRead + Unpin + Send),
    buf: &mut [u8],
    idle: Duration,
) -> Result<usize, Failure> {
    let mut at = 0;
    while at < buf.len() {
        let n = read_idle(input, &mut buf[at..], idle).await?;
        if n == 0 {
            break;
        }
        at += n;
    }
    Ok(at)
}

async fn read_idle(
    input: &mut (impl AsyncRead + Unpin + Send),
    buf: &mut [u8],
    idle: Duration,
) -> Result<usize, Failure> {
    match tokio::time::timeout(idle, input.read(buf)).await {
        Ok(Ok(n)) => Ok(n),
        Ok(Err(_)) => Err(Failure::Gone),
        Err(_) => Err(Failure::Protocol(format!(
            "no data from the client for {} s",
            idle.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(s: &[u8]) -> Vec<u8> {
        let mut v = format!("{:04x}", s.len() + 4).into_bytes();
        v.extend_from_slice(s);
        v
    }

    /// The scan of a command list given as pkt-lines (no flush).
    fn scan(mut section: &[u8]) -> CommandScan {
        let mut scan = CommandScan::default();
        while section.len() >= 4 {
            let len =
                usize::from_str_radix(std::str::from_utf8(&section[..4]).unwrap(), 16).unwrap();
            scan.line(&section[4..len]);
            section = &section[len..];
        }
        scan
    }

    #[test]
    fn a_command_list_says_whether_a_pack_follows() {
        let zero = "0".repeat(40);
        let one = "1".repeat(40);
        let mut deletes =
            pkt(format!("{one} {zero} refs/heads/a\0report-status push-options").as_bytes());
        deletes.extend(pkt(format!("{one} {zero} refs/heads/b").as_bytes()));
        let s = scan(&deletes);
        assert!(!s.needs_pack);
        assert!(s.push_options);
        let mut update = pkt(format!("shallow {one}").as_bytes());
        update.extend(pkt(
            format!("{zero} {one} refs/heads/a\0report-status").as_bytes()
        ));
        let s = scan(&update);
        assert!(s.needs_pack);
        assert!(!s.push_options);
    }

    #[tokio::test]
    async fn sections_end_at_a_flush_and_keep_their_bytes() {
        let mut input = Vec::new();
        input.extend(pkt(b"command=ls-refs\n"));
        input.extend(b"0001");
        input.extend(pkt(b"peel\n"));
        input.extend(b"0000");
        input.extend(pkt(b"next"));
        let mut reader = &input[..];
        let mut out = Vec::new();
        let s = read_section(
            &mut reader,
            &mut out,
            1 << 20,
            SectionCap::NONE,
            Duration::from_secs(5),
            |_| {},
        )
        .await
        .ok()
        .unwrap();
        assert!(s.flushed);
        assert_eq!(out, input[..input.len() - 8]);
        // Then EOF after a pkt-line: not flushed.
        let mut rest = Vec::new();
        let s = read_section(
            &mut reader,
            &mut rest,
            1 << 20,
            SectionCap::NONE,
            Duration::from_secs(5),
            |_| {},
        )
        .await
        .ok()
        .unwrap();
        assert!(!s.flushed);
        assert_eq!(rest, pkt(b"next"));
        // A limit is a protocol error, and so is a bad length; a length
        // above git's largest pkt-line is refused, not read.
        for (bytes, limit) in [
            (&input[..], 10),
            (&b"ffff"[..], 1 << 20),
            (&b"zzzz"[..], 100),
        ] {
            let mut reader = bytes;
            let read = read_section(
                &mut reader,
                &mut Vec::new(),
                limit,
                SectionCap::NONE,
                Duration::from_secs(5),
                |_| {},
            )
            .await;
            assert!(matches!(read, Err(Failure::Protocol(_))));
        }
    }

    #[tokio::test]
    async fn a_section_past_its_cap_stops_after_the_line_that_passed_it() {
        let mut input = Vec::new();
        for _ in 0..10 {
            input.extend(pkt(b"0123456789\n"));
        }
        input.extend(b"0000");
        let cap = SectionCap {
            text_bytes: 25,
            lines: usize::MAX,
        };
        let mut reader = &input[..];
        let mut out = Vec::new();
        let mut seen = 0;
        let s = read_section(
            &mut reader,
            &mut out,
            1 << 20,
            cap,
            Duration::from_secs(5),
            |_| seen += 1,
        )
        .await
        .ok()
        .unwrap();
        // Three lines of ten bytes of text pass 25: the third is the last read.
        assert!(s.cut && !s.flushed);
        assert_eq!((seen, out.len()), (3, 3 * 15));
        assert_eq!(reader.len(), input.len() - 3 * 15);
        let cap = SectionCap {
            text_bytes: usize::MAX,
            lines: 4,
        };
        let mut reader = &input[..];
        let s = read_section(
            &mut reader,
            &mut Vec::new(),
            1 << 20,
            cap,
            Duration::from_secs(5),
            |_| {},
        )
        .await
        .ok()
        .unwrap();
        assert!(s.cut);
        assert_eq!(reader.len(), input.len() - 5 * 15);
    }
}
