//! The client's request over an SSH channel, read as it comes: a push's
//! sections (command list, push options) and pack spooled to a file, an
//! upload-pack request (a v2 command, a v0 want list) spooled in memory
//! and past 64 KiB to a file, every section through [`read_section`], which
//! holds one pkt-line and bounds what it reads (gitprotocol-pack(5),
//! gitprotocol-v2(5)).

use std::io::Write;

use gitstow_protocol::pktline::{decode_length, MAX_PKT_LEN};
use gitstow_protocol::push::{CommandScan, SectionCap};
use gitstow_service::input::Paced;
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
    let mut paced = Paced::new(limits.input.pace);
    let read = read_section(
        input,
        &mut request,
        limits.input.max_fetch_request_bytes,
        SectionCap::NONE,
        &mut paced,
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
    /// Bytes spooled (a lone flush-pkt: the client had nothing to push).
    pub(crate) bytes: u64,
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
    let limit = limits.input.max_push_bytes;
    // One pace over the whole push, as HTTP reads its body: a client that
    // trickles its pack is cut off once below the minimum rate.
    let mut paced = Paced::new(limits.input.pace);
    let mut sections = std::io::BufWriter::with_capacity(64 << 10, std_file);
    let mut scan = CommandScan::default();
    let first = read_section(
        input,
        &mut sections,
        limit,
        SectionCap::COMMANDS,
        &mut paced,
        |line| scan.line(line),
    )
    .await?;
    let done = |sections: std::io::BufWriter<std::fs::File>, bytes| {
        sections
            .into_inner()
            .map_err(|e| spool_error(e.into_error()))?;
        Ok(Spooled {
            bytes,
            truncated: false,
        })
    };
    // git's probe (a lone flush-pkt), or nothing: no more follows.
    if gitstow_service::push::is_probe(first.bytes) {
        return done(sections, first.bytes);
    }
    // A cut section is refused by the parser, before any pack is read.
    if first.cut {
        return done(sections, first.bytes);
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
            &mut paced,
            |_| {},
        )
        .await?;
        if read.cut {
            return done(sections, total + read.bytes);
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
            let n = read_paced(input, &mut buf, &mut paced).await?;
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
        bytes: total,
        truncated,
    })
}

pub(crate) fn spool_error(e: std::io::Error) -> Failure {
    Failure::Refused(Refusal::from_error("spooling the push", &e))
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
    paced: &mut Paced,
    mut inspect: impl FnMut(&[u8]),
) -> Result<Section, Failure> {
    let mut bytes = 0u64;
    let (mut text_bytes, mut lines) = (0usize, 0usize);
    let mut buf = vec![0u8; MAX_PKT_LEN];
    loop {
        let mut head = [0u8; 4];
        match read_exact_paced(input, &mut head, paced).await? {
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
        if read_exact_paced(input, payload, paced).await? != payload.len() {
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
        if cap.passed(lines, text_bytes) {
            return Ok(Section {
                bytes,
                flushed: false,
                cut: true,
            });
        }
    }
}

/// Fills `buf`, each read within `paced`'s bounds; returns the bytes read
/// (less than `buf.len()` only at EOF).
async fn read_exact_paced(
    input: &mut (impl AsyncRead + Unpin + Send),
    buf: &mut [u8],
    paced: &mut Paced,
) -> Result<usize, Failure> {
    let mut at = 0;
    while at < buf.len() {
        let n = read_paced(input, &mut buf[at..], paced).await?;
        if n == 0 {
            break;
        }
        at += n;
    }
    Ok(at)
}

/// One read of `input` within `paced`'s bounds (the silence, the average
/// rate), counted.
async fn read_paced(
    input: &mut (impl AsyncRead + Unpin + Send),
    buf: &mut [u8],
    paced: &mut Paced,
) -> Result<usize, Failure> {
    match paced.wait(input.read(buf)).await {
        Ok(Ok(n)) => {
            paced.received(n as u64);
            Ok(n)
        }
        Ok(Err(_)) => Err(Failure::Gone),
        Err(slow) => Err(Failure::Protocol(slow.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gitstow_service::input::Pace;
    use std::time::Duration;

    /// 5 s of silence at most, no minimum rate.
    fn paced() -> Paced {
        Paced::new(Pace {
            idle: Duration::from_secs(5),
            min_rate: 0,
        })
    }

    /// A push whose client sends a byte every 9 s never passes a 10 s
    /// silence, but falls below 100 bytes/s: it is cut off, as over HTTP.
    #[tokio::test(start_paused = true)]
    async fn a_push_that_trickles_is_cut_off_below_the_minimum_rate() {
        let zero = "0".repeat(40);
        let one = "1".repeat(40);
        let mut request = pkt(format!("{zero} {one} refs/heads/a\0report-status").as_bytes());
        request.extend(b"0000PACK");
        let (mut client, mut server) = tokio::io::duplex(64);
        tokio::spawn(async move {
            for b in request {
                tokio::time::sleep(Duration::from_secs(9)).await;
                if client.write_all(&[b]).await.is_err() {
                    return;
                }
            }
        });
        let limits = crate::git::Limits {
            input: gitstow_service::input::Limits {
                max_push_bytes: 1 << 20,
                max_fetch_request_bytes: 1 << 20,
                pace: Pace {
                    idle: Duration::from_secs(10),
                    min_rate: 100,
                },
            },
            staging_dir: None,
        };
        let file = tempfile::tempfile().unwrap();
        let started = tokio::time::Instant::now();
        match spool_push(&mut server, &file, &limits).await {
            Err(Failure::Protocol(why)) => {
                assert!(why.contains("slower than 100 bytes/s"), "{why}")
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("a trickling push was spooled"),
        }
        // Cut within the idle time plus a read, not after the whole request.
        assert!(
            started.elapsed() <= Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }

    fn pkt(s: &[u8]) -> Vec<u8> {
        let mut v = format!("{:04x}", s.len() + 4).into_bytes();
        v.extend_from_slice(s);
        v
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
            &mut paced(),
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
            &mut paced(),
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
                &mut paced(),
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
        let s = read_section(&mut reader, &mut out, 1 << 20, cap, &mut paced(), |_| {
            seen += 1
        })
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
            &mut paced(),
            |_| {},
        )
        .await
        .ok()
        .unwrap();
        assert!(s.cut);
        assert_eq!(reader.len(), input.len() - 5 * 15);
    }
}
