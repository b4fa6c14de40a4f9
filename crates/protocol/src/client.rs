//! The client side of protocol v2 (gitprotocol-v2(5)), as git's
//! `fetch-pack` speaks it to a smart-HTTP server, for pull mirrors: the
//! capability advertisement, `ls-refs` and `fetch` requests, and their
//! answers. No transport: requests are bytes, answers are any `Read`.
//!
//! Every reader bounds what it keeps (refs, line lengths through
//! [`PktReader`], pack bytes through the caller's cap) and fails with a
//! [`ClientError`] that names the part of the exchange.

use std::io::{self, Read, Write};

use gix_hash::ObjectId;

use crate::pktline::{self, Packet, PktReader};

/// The agent string sent with each request.
pub const AGENT: &str = concat!("gitstow/", env!("CARGO_PKG_VERSION"));

/// Why an exchange with an upstream failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The answer does not follow the protocol (what was expected).
    #[error("the upstream's answer is not git protocol v2: {0}")]
    Protocol(String),
    /// The upstream speaks only protocol v0/v1.
    #[error("the upstream does not speak git protocol v2")]
    NotV2,
    /// The upstream said `ERR …` or sent an error on side-band 3.
    #[error("the upstream says: {0}")]
    Remote(String),
    /// More refs, or pack bytes, than the caller allows.
    #[error("the upstream's answer is too large: {0}")]
    TooLarge(String),
    /// Reading the answer or writing the pack failed.
    #[error("reading the upstream's answer: {0}")]
    Io(#[from] io::Error),
}

impl From<pktline::PktError> for ClientError {
    fn from(e: pktline::PktError) -> Self {
        match e {
            pktline::PktError::Io(e) => ClientError::Io(e),
            other => ClientError::Protocol(other.to_string()),
        }
    }
}

/// A ref as `ls-refs` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRef {
    /// `refs/heads/main`, or `HEAD`.
    pub name: String,
    /// What it points at (for a symref, what its target points at).
    pub oid: ObjectId,
    /// For an annotated tag, the object it peels to.
    pub peeled: Option<ObjectId>,
    /// For a symbolic ref (`HEAD`), the ref it names.
    pub symref_target: Option<String>,
}

/// Reads the capability advertisement of a `GET …/info/refs?service=
/// git-upload-pack` answer sent with `Git-Protocol: version=2`: the
/// optional `# service=` header and its flush-pkt, then `version 2` and
/// the capabilities (`fetch=shallow filter`, `object-format=sha1`, …) up
/// to a flush-pkt. Returns the capability lines.
///
/// # Errors
/// [`ClientError::NotV2`] when the upstream answers with a v0 ref
/// advertisement; [`ClientError::Protocol`] for anything else unexpected.
pub fn read_capabilities(input: impl Read) -> Result<Vec<String>, ClientError> {
    let mut r = PktReader::new(input);
    let mut first = text(&mut r, "the capability advertisement")?;
    if first.starts_with("# service=") {
        match r.read_packet()? {
            Some(Packet::Flush) => {}
            _ => {
                return Err(ClientError::Protocol(
                    "no flush-pkt after the service header".into(),
                ))
            }
        }
        first = text(&mut r, "the capability advertisement")?;
    }
    if first != "version 2" {
        return Err(match first.strip_prefix("ERR ") {
            Some(msg) => ClientError::Remote(msg.to_owned()),
            None => ClientError::NotV2,
        });
    }
    let mut caps = Vec::new();
    loop {
        match r.read_packet()? {
            Some(Packet::Flush) => return Ok(caps),
            Some(p @ Packet::Data(_)) => {
                if caps.len() >= 1000 {
                    return Err(ClientError::TooLarge("capabilities".into()));
                }
                caps.push(line_of(&p)?);
            }
            _ => {
                return Err(ClientError::Protocol(
                    "the capability advertisement does not end in a flush-pkt".into(),
                ))
            }
        }
    }
}

/// The `ls-refs` request listing the refs under `prefixes` (all refs when
/// empty), with peeled tags and symrefs (`HEAD`'s target).
pub fn ls_refs_request(prefixes: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    command(&mut out, "ls-refs");
    // Writing to a Vec cannot fail.
    let _ = pktline::write_text(&mut out, "peel");
    let _ = pktline::write_text(&mut out, "symrefs");
    for p in prefixes {
        let _ = pktline::write_text(&mut out, &format!("ref-prefix {p}"));
    }
    let _ = pktline::write_flush(&mut out);
    out
}

/// Reads an `ls-refs` answer: `<oid> <name>[ symref-target:<t>][
/// peeled:<oid>]` lines up to a flush-pkt, at most `max_refs`.
///
/// # Errors
/// [`ClientError::TooLarge`] past `max_refs`; [`ClientError::Protocol`] for
/// a line that does not parse.
pub fn read_ls_refs(input: impl Read, max_refs: usize) -> Result<Vec<RemoteRef>, ClientError> {
    let mut r = PktReader::new(input);
    let mut refs = Vec::new();
    loop {
        let line = match r.read_packet()? {
            Some(Packet::Flush) => return Ok(refs),
            Some(p @ Packet::Data(_)) => line_of(&p)?,
            None => return Err(ClientError::Protocol("the ref list ends early".into())),
            Some(_) => {
                return Err(ClientError::Protocol(
                    "a special packet in the ref list".into(),
                ))
            }
        };
        if let Some(msg) = line.strip_prefix("ERR ") {
            return Err(ClientError::Remote(msg.to_owned()));
        }
        if refs.len() >= max_refs {
            return Err(ClientError::TooLarge(format!("more than {max_refs} refs")));
        }
        let mut words = line.split(' ');
        let bad = || ClientError::Protocol(format!("not a ref line: {line:?}"));
        let oid = words
            .next()
            .and_then(|w| ObjectId::from_hex(w.as_bytes()).ok())
            .ok_or_else(bad)?;
        let name = words
            .next()
            .filter(|n| !n.is_empty())
            .ok_or_else(bad)?
            .to_owned();
        let mut remote = RemoteRef {
            name,
            oid,
            peeled: None,
            symref_target: None,
        };
        for attr in words {
            if let Some(t) = attr.strip_prefix("symref-target:") {
                remote.symref_target = Some(t.to_owned());
            } else if let Some(p) = attr.strip_prefix("peeled:") {
                remote.peeled = Some(ObjectId::from_hex(p.as_bytes()).map_err(|_| bad())?);
            }
        }
        refs.push(remote);
    }
}

/// The `fetch` request for `wants` given `haves`, ending with `done` (no
/// negotiation rounds: the upstream sends the pack at once): a thin pack
/// with offset deltas and no progress.
pub fn fetch_request(wants: &[ObjectId], haves: &[ObjectId]) -> Vec<u8> {
    let mut out = Vec::new();
    command(&mut out, "fetch");
    let _ = pktline::write_text(&mut out, "thin-pack");
    let _ = pktline::write_text(&mut out, "ofs-delta");
    let _ = pktline::write_text(&mut out, "no-progress");
    for w in wants {
        let _ = pktline::write_text(&mut out, &format!("want {w}"));
    }
    for h in haves {
        let _ = pktline::write_text(&mut out, &format!("have {h}"));
    }
    let _ = pktline::write_text(&mut out, "done");
    let _ = pktline::write_flush(&mut out);
    out
}

/// Reads a `fetch` answer to a request that said `done`: sections before
/// `packfile` (`acknowledgments`, `shallow-info`, `wanted-refs`,
/// `packfile-uris`) skipped, then the pack's side-band-64k packets up to
/// the flush-pkt: band 1 written to `pack`, band 2 (progress) dropped,
/// band 3 an error. Returns the pack's bytes; more than `max_bytes` fails.
///
/// # Errors
/// [`ClientError::Remote`] for an `ERR` line or band 3,
/// [`ClientError::TooLarge`] past `max_bytes`, [`ClientError::Protocol`]
/// otherwise.
pub fn read_fetch_response(
    input: impl Read,
    pack: &mut impl Write,
    max_bytes: u64,
) -> Result<u64, ClientError> {
    let mut r = PktReader::new(input);
    // Up to the `packfile` section header.
    loop {
        match r.read_packet()? {
            Some(p @ Packet::Data(_)) => {
                let line = line_of(&p)?;
                if line == "packfile" {
                    break;
                }
                if let Some(msg) = line.strip_prefix("ERR ") {
                    return Err(ClientError::Remote(msg.to_owned()));
                }
                // A section's header or one of its lines: skipped.
            }
            Some(Packet::Delim) => {}
            Some(Packet::Flush) | Some(Packet::ResponseEnd) | None => {
                return Err(ClientError::Protocol(
                    "the answer has no packfile section".into(),
                ))
            }
        }
    }
    let mut written = 0u64;
    loop {
        match r.read_packet()? {
            Some(Packet::Flush) | Some(Packet::ResponseEnd) => return Ok(written),
            None => return Err(ClientError::Protocol("the pack ends early".into())),
            Some(Packet::Delim) => {
                return Err(ClientError::Protocol("a delim-pkt inside the pack".into()))
            }
            Some(Packet::Data(data)) => match data.split_first() {
                Some((1, bytes)) => {
                    written += bytes.len() as u64;
                    if written > max_bytes {
                        return Err(ClientError::TooLarge(format!(
                            "a pack of more than {max_bytes} bytes"
                        )));
                    }
                    pack.write_all(bytes)?;
                }
                Some((2, _)) => {}
                Some((3, msg)) => {
                    return Err(ClientError::Remote(
                        String::from_utf8_lossy(msg).trim_end().to_owned(),
                    ))
                }
                _ => return Err(ClientError::Protocol("a packet on no known band".into())),
            },
        }
    }
}

/// `command=<name>`, the agent and the object format, then the delim-pkt.
fn command(out: &mut Vec<u8>, name: &str) {
    let _ = pktline::write_text(out, &format!("command={name}"));
    let _ = pktline::write_text(out, &format!("agent={AGENT}"));
    let _ = pktline::write_text(out, "object-format=sha1");
    let _ = pktline::write_delim(out);
}

/// The next packet as a text line (what `what` is waiting for).
fn text<R: Read>(r: &mut PktReader<R>, what: &str) -> Result<String, ClientError> {
    match r.read_packet()? {
        Some(p @ Packet::Data(_)) => line_of(&p),
        _ => Err(ClientError::Protocol(format!("{what} ends early"))),
    }
}

fn line_of(p: &Packet) -> Result<String, ClientError> {
    let bytes = p.as_text().unwrap_or_default();
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ClientError::Protocol("a line is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkts(lines: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for l in lines {
            match *l {
                "0000" => pktline::write_flush(&mut out).unwrap(),
                "0001" => pktline::write_delim(&mut out).unwrap(),
                l => pktline::write_text(&mut out, l).unwrap(),
            }
        }
        out
    }

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn capabilities_with_and_without_the_service_header() {
        let caps = read_capabilities(
            &pkts(&[
                "# service=git-upload-pack",
                "0000",
                "version 2",
                "agent=git/2.43.0",
                "ls-refs=unborn",
                "fetch=shallow wait-for-done filter",
                "object-format=sha1",
                "0000",
            ])[..],
        )
        .unwrap();
        assert_eq!(caps[2], "fetch=shallow wait-for-done filter");
        assert_eq!(
            read_capabilities(&pkts(&["version 2", "0000"])[..])
                .unwrap()
                .len(),
            0
        );
        let v0 = format!("{A} HEAD\0multi_ack");
        assert!(matches!(
            read_capabilities(&pkts(&["# service=git-upload-pack", "0000", &v0])[..]),
            Err(ClientError::NotV2)
        ));
    }

    #[test]
    fn ls_refs_as_git_writes_and_reads_it() {
        let req = ls_refs_request(&["refs/heads/", "refs/tags/"]);
        assert_eq!(
            req,
            pkts(&[
                "command=ls-refs",
                &format!("agent={AGENT}"),
                "object-format=sha1",
                "0001",
                "peel",
                "symrefs",
                "ref-prefix refs/heads/",
                "ref-prefix refs/tags/",
                "0000"
            ])
        );
        let answer = pkts(&[
            &format!("{A} HEAD symref-target:refs/heads/main"),
            &format!("{A} refs/heads/main"),
            &format!("{B} refs/tags/v1 peeled:{A}"),
            "0000",
        ]);
        let refs = read_ls_refs(&answer[..], 10).unwrap();
        assert_eq!(refs.len(), 3);
        assert_eq!(refs[0].symref_target.as_deref(), Some("refs/heads/main"));
        assert_eq!(refs[2].peeled.unwrap().to_string(), A);
        assert!(matches!(
            read_ls_refs(&answer[..], 2),
            Err(ClientError::TooLarge(_))
        ));
        for bad in [
            "nothex refs/heads/x",
            A,
            &format!("{B} refs/tags/v1 peeled:zz"),
        ] {
            let answer = pkts(&[bad, "0000"]);
            assert!(
                matches!(read_ls_refs(&answer[..], 10), Err(ClientError::Protocol(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            read_ls_refs(&pkts(&["ERR access denied", "0000"])[..], 10),
            Err(ClientError::Remote(m)) if m == "access denied"
        ));
    }

    fn band(n: u8, data: &[u8]) -> Vec<u8> {
        let mut payload = vec![n];
        payload.extend_from_slice(data);
        let mut out = Vec::new();
        pktline::write_data(&mut out, &payload).unwrap();
        out
    }

    #[test]
    fn a_fetch_answer_gives_its_pack_and_its_errors() {
        let a = ObjectId::from_hex(A.as_bytes()).unwrap();
        let b = ObjectId::from_hex(B.as_bytes()).unwrap();
        let req = fetch_request(&[a], &[b]);
        let text = String::from_utf8_lossy(&req);
        assert!(text.contains(&format!("want {A}\n")) && text.contains(&format!("have {B}\n")));
        assert!(text.ends_with("done\n0000"), "{text}");

        let mut answer = pkts(&["shallow-info", &format!("shallow {A}"), "0001", "packfile"]);
        answer.extend(band(2, b"Counting objects\r"));
        answer.extend(band(1, b"PACK"));
        answer.extend(band(1, b"rest"));
        answer.extend(pkts(&["0000"]));
        let mut pack = Vec::new();
        assert_eq!(read_fetch_response(&answer[..], &mut pack, 100).unwrap(), 8);
        assert_eq!(pack, b"PACKrest");
        assert!(matches!(
            read_fetch_response(&answer[..], &mut Vec::new(), 7),
            Err(ClientError::TooLarge(_))
        ));
        let mut failing = pkts(&["packfile"]);
        failing.extend(band(3, b"upload-pack: not our ref\n"));
        assert!(matches!(
            read_fetch_response(&failing[..], &mut Vec::new(), 100),
            Err(ClientError::Remote(m)) if m == "upload-pack: not our ref"
        ));
        let cut = pkts(&["packfile"]);
        assert!(matches!(
            read_fetch_response(&cut[..], &mut Vec::new(), 100),
            Err(ClientError::Protocol(_))
        ));
    }
}
