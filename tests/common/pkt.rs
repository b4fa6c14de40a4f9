//! Test harness: pkt-line builders and readers, report-status parsing.

use super::*;

/// The all-zero object id (create / delete in a receive-pack command).
pub const ZERO_OID: &str = "0000000000000000000000000000000000000000";
/// The flush packet.
pub const FLUSH: &[u8] = b"0000";

/// A v2 `command=fetch` request body (gitprotocol-v2(5)): the command, a
/// delim-pkt, each of `args` as a pkt-line (a newline added), a flush-pkt.
pub fn v2_fetch<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Vec<u8> {
    let mut body = pkt(b"command=fetch\n");
    body.extend_from_slice(b"0001");
    for a in args {
        body.extend(pkt(format!("{}\n", a.as_ref()).as_bytes()));
    }
    body.extend_from_slice(FLUSH);
    body
}

/// One pkt-line carrying `data`.
pub fn pkt(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:04x}", data.len() + 4).into_bytes();
    out.extend_from_slice(data);
    out
}

/// A pkt-line read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pkt {
    /// `0000`
    Flush,
    /// `0001`
    Delim,
    /// `0002`
    ResponseEnd,
    /// A data line (payload without the length).
    Data(Vec<u8>),
}

/// Splits bytes into pkt-lines; stops (returning what it has) at the first
/// malformed length, e.g. where a pack starts.
pub fn pkt_lines(mut bytes: &[u8]) -> Vec<Pkt> {
    let mut out = Vec::new();
    while bytes.len() >= 4 {
        let Some(len) = std::str::from_utf8(&bytes[..4])
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
        else {
            break;
        };
        match len {
            0 => out.push(Pkt::Flush),
            1 => out.push(Pkt::Delim),
            2 => out.push(Pkt::ResponseEnd),
            3 => break,
            n if n > bytes.len() => break,
            n => out.push(Pkt::Data(bytes[4..n].to_vec())),
        }
        bytes = &bytes[len.max(4)..];
    }
    out
}

/// The text lines of a report-status response, whether sent plainly or
/// inside side-band channel 1 (channel 2 and 3 text is appended to
/// `progress`).
#[derive(Debug, Default)]
pub struct Report {
    /// `unpack ok` / `unpack <reason>` (without the trailing newline).
    pub unpack: String,
    /// `ok <ref>` / `ng <ref> <reason>` lines.
    pub refs: Vec<String>,
    /// Side-band 2 and 3 text, if any.
    pub progress: String,
}

/// Parses a receive-pack response body.
pub fn report_status(body: &[u8]) -> Report {
    let mut report = Report::default();
    let mut status_bytes = Vec::new();
    let lines = pkt_lines(body);
    let sideband = matches!(lines.first(), Some(Pkt::Data(d)) if matches!(d.first(), Some(1..=3)));
    if sideband {
        for p in lines {
            if let Pkt::Data(d) = p {
                match d[0] {
                    1 => status_bytes.extend_from_slice(&d[1..]),
                    _ => report.progress.push_str(&String::from_utf8_lossy(&d[1..])),
                }
            }
        }
    } else {
        status_bytes = body.to_vec();
    }
    for p in pkt_lines(&status_bytes) {
        if let Pkt::Data(d) = p {
            let line = String::from_utf8_lossy(&d)
                .trim_end_matches('\n')
                .to_owned();
            if let Some(rest) = line.strip_prefix("unpack ") {
                report.unpack = rest.to_owned();
            } else {
                report.refs.push(line);
            }
        }
    }
    report
}

/// A receive-pack request: commands (old, new, ref), capabilities on the
/// first, a flush, then `pack` (if any) as is.
pub fn receive_pack_request(
    commands: &[(&str, &str, &str)],
    caps: &str,
    pack: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (old, new, name)) in commands.iter().enumerate() {
        let mut line = format!("{old} {new} {name}").into_bytes();
        if i == 0 {
            line.push(0);
            line.extend_from_slice(caps.as_bytes());
        }
        out.extend(pkt(&line));
    }
    out.extend_from_slice(FLUSH);
    if let Some(pack) = pack {
        out.extend_from_slice(pack);
    }
    out
}
