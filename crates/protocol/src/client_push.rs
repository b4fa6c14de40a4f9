//! The client side of receive-pack (gitprotocol-pack(5), over smart HTTP
//! as gitprotocol-http(5) has it), as `git push` speaks it, for push
//! mirrors: the v0 ref advertisement of `info/refs?service=
//! git-receive-pack`, the request (commands and pack) and the
//! report-status answer. No transport: requests are bytes, answers are
//! any `Read`; every reader bounds what it keeps.

use std::io::Read;

use gix_hash::ObjectId;

use crate::client::ClientError;
use crate::pktline::{self, Packet, PktReader};

/// The remote's refs and receive-pack capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiveAdvertisement {
    /// Each ref and its value (an empty repository has none).
    pub refs: Vec<(String, ObjectId)>,
    /// `report-status`, `delete-refs`, `atomic`, `ofs-delta`, …
    pub capabilities: Vec<String>,
}

/// Reads a `GET …/info/refs?service=git-receive-pack` answer: the
/// `# service=` header and its flush-pkt, then `<oid> <ref>` lines (the
/// first with `\0` and the capabilities; an empty repository sends
/// `capabilities^{}` with the null id) up to a flush-pkt. At most
/// `max_refs` refs.
///
/// # Errors
/// [`ClientError::Remote`] for `ERR`, [`ClientError::TooLarge`] past
/// `max_refs`, [`ClientError::Protocol`] otherwise.
pub fn read_receive_advertisement(
    input: impl Read,
    max_refs: usize,
) -> Result<ReceiveAdvertisement, ClientError> {
    let mut r = PktReader::new(input);
    let mut adv = ReceiveAdvertisement::default();
    let mut first = true;
    loop {
        let line = match r.read_packet()? {
            Some(Packet::Flush) if first => continue,
            Some(Packet::Flush) => return Ok(adv),
            Some(p @ Packet::Data(_)) => {
                let bytes = p.as_text().unwrap_or_default().to_vec();
                String::from_utf8(bytes)
                    .map_err(|_| ClientError::Protocol("a line is not UTF-8".into()))?
            }
            _ => {
                return Err(ClientError::Protocol(
                    "the ref advertisement does not end in a flush-pkt".into(),
                ))
            }
        };
        if line.starts_with("# service=") {
            continue;
        }
        if let Some(msg) = line.strip_prefix("ERR ") {
            return Err(ClientError::Remote(msg.to_owned()));
        }
        let (head, caps) = match line.split_once('\0') {
            Some((h, c)) if first => (h, Some(c)),
            Some(_) => {
                return Err(ClientError::Protocol(
                    "capabilities after the first ref".into(),
                ))
            }
            None => (line.as_str(), None),
        };
        if let Some(caps) = caps {
            adv.capabilities = caps
                .split(' ')
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect();
        }
        first = false;
        let (oid, name) = head
            .split_once(' ')
            .ok_or_else(|| ClientError::Protocol(format!("not a ref line: {head:?}")))?;
        let oid = ObjectId::from_hex(oid.as_bytes())
            .map_err(|_| ClientError::Protocol(format!("not an object id: {oid:?}")))?;
        if name == "capabilities^{}" {
            continue;
        }
        if adv.refs.len() >= max_refs {
            return Err(ClientError::TooLarge(format!("more than {max_refs} refs")));
        }
        adv.refs.push((name.to_owned(), oid));
    }
}

/// The command list of a push: `<old> <new> <ref>` lines, the first with
/// `\0` and `capabilities`, then a flush-pkt (the pack follows, unless
/// every command is a deletion).
pub fn push_commands(commands: &[(ObjectId, ObjectId, String)], capabilities: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (old, new, name)) in commands.iter().enumerate() {
        let mut line = format!("{old} {new} {name}").into_bytes();
        if i == 0 {
            line.push(0);
            line.extend_from_slice(capabilities.join(" ").as_bytes());
        }
        line.push(b'\n');
        let _ = pktline::write_data(&mut out, &line);
    }
    let _ = pktline::write_flush(&mut out);
    out
}

/// A report-status answer (without side-band): the `unpack` result and
/// each ref's (`None`: `ok`; `Some(reason)`: `ng`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `None` for `unpack ok`, else the reason.
    pub unpack_error: Option<String>,
    /// Each ref named in the report, and why it was refused.
    pub refs: Vec<(String, Option<String>)>,
}

/// Reads a report-status answer (gitprotocol-pack(5) "Report Status"), at
/// most `max_refs` ref lines.
///
/// # Errors
/// [`ClientError::Protocol`] for anything but report-status lines,
/// [`ClientError::TooLarge`] past `max_refs`.
pub fn read_report(input: impl Read, max_refs: usize) -> Result<Report, ClientError> {
    let mut r = PktReader::new(input);
    let mut report = Report {
        unpack_error: None,
        refs: Vec::new(),
    };
    let mut unpack_seen = false;
    loop {
        match r.read_packet()? {
            Some(Packet::Flush) | None if unpack_seen => return Ok(report),
            Some(p @ Packet::Data(_)) => {
                let bytes = p.as_text().unwrap_or_default().to_vec();
                let line = String::from_utf8_lossy(&bytes).into_owned();
                if let Some(status) = line.strip_prefix("unpack ") {
                    unpack_seen = true;
                    report.unpack_error = (status != "ok").then(|| status.to_owned());
                } else if let Some(name) = line.strip_prefix("ok ") {
                    report.refs.push((name.to_owned(), None));
                } else if let Some(rest) = line.strip_prefix("ng ") {
                    let (name, why) = rest.split_once(' ').unwrap_or((rest, ""));
                    report.refs.push((name.to_owned(), Some(why.to_owned())));
                } else if let Some(msg) = line.strip_prefix("ERR ") {
                    return Err(ClientError::Remote(msg.to_owned()));
                } else {
                    return Err(ClientError::Protocol(format!(
                        "not a report-status line: {line:?}"
                    )));
                }
                if report.refs.len() > max_refs {
                    return Err(ClientError::TooLarge(format!("more than {max_refs} refs")));
                }
            }
            _ => return Err(ClientError::Protocol("the report-status ends early".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkts(lines: &[&[u8]], flush_after: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            pktline::write_data(&mut out, l).unwrap();
            if flush_after.contains(&i) {
                pktline::write_flush(&mut out).unwrap();
            }
        }
        out
    }

    #[test]
    fn advertisements_of_full_and_empty_repositories() {
        let a = "1".repeat(40);
        let b = "2".repeat(40);
        let first = format!("{a} refs/heads/main\0report-status delete-refs atomic\n");
        let second = format!("{b} refs/tags/v1\n");
        let input = pkts(
            &[
                b"# service=git-receive-pack\n",
                first.as_bytes(),
                second.as_bytes(),
            ],
            &[0, 2],
        );
        let adv = read_receive_advertisement(&input[..], 10).unwrap();
        assert_eq!(adv.refs.len(), 2);
        assert_eq!(adv.refs[1].0, "refs/tags/v1");
        assert_eq!(adv.capabilities, ["report-status", "delete-refs", "atomic"]);
        assert!(read_receive_advertisement(&input[..], 1).is_err());
        let empty = format!("{} capabilities^{{}}\0report-status\n", "0".repeat(40));
        let input = pkts(
            &[b"# service=git-receive-pack\n", empty.as_bytes()],
            &[0, 1],
        );
        let adv = read_receive_advertisement(&input[..], 10).unwrap();
        assert!(adv.refs.is_empty());
        assert_eq!(adv.capabilities, ["report-status"]);
    }

    #[test]
    fn commands_and_reports() {
        let a = ObjectId::from_hex(&[b'1'; 40]).unwrap();
        let z = ObjectId::null(gix_hash::Kind::Sha1);
        let req = push_commands(
            &[(z, a, "refs/heads/x".into()), (a, z, "refs/heads/y".into())],
            &["report-status"],
        );
        let text = String::from_utf8_lossy(&req);
        assert!(text.contains("refs/heads/x\0report-status\n"), "{text}");
        assert!(text.ends_with("refs/heads/y\n0000"), "{text}");
        let report = pkts(
            &[
                b"unpack ok\n",
                b"ok refs/heads/x\n",
                b"ng refs/heads/y stale info\n",
            ],
            &[2],
        );
        let r = read_report(&report[..], 10).unwrap();
        assert_eq!(r.unpack_error, None);
        assert_eq!(
            r.refs,
            [
                ("refs/heads/x".to_owned(), None),
                ("refs/heads/y".to_owned(), Some("stale info".to_owned()))
            ]
        );
        let bad = pkts(&[b"unpack index-pack failed\n"], &[0]);
        assert_eq!(
            read_report(&bad[..], 10).unwrap().unpack_error.as_deref(),
            Some("index-pack failed")
        );
    }
}
