//! The answer of receive-pack, gitprotocol-pack(5) "Report Status" (and
//! "report-status-v2", whose lines are the same when no hook rewrote refs):
//! `unpack ok` / `unpack <reason>`, then `ok <ref>` / `ng <ref> <reason>`
//! per command, then a flush; with side-band-64k that whole report is the
//! payload of band-1 packets, followed by one more flush outside (confirmed
//! against git 2.47 receive-pack).

use std::io::{self, Write};

use crate::pktline::push_text;
use crate::sideband::{Band, SideBandWriter};

/// The outcome of one command in a report-status (gitprotocol-pack(5)
/// "Report Status").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefStatus {
    /// `ok <ref>`
    Ok,
    /// `ng <ref> <reason>`
    Rejected(String),
}

/// report-status (v1): `unpack ok` | `unpack <reason>`, then `ok <ref>` /
/// `ng <ref> <reason>` per command, then flush (gitprotocol-pack(5) "Report
/// Status"). report-status-v2 has the same lines for these cases (option
/// lines are not used). Written as pkt-lines to `w` (caller wraps `w` in a
/// SideBandWriter(Band::Data) when side-band-64k was negotiated, then
/// writes a final flush outside — or calls
/// [`write_report_status_sideband`], which does both).
///
/// The whole report goes to `w` in one `write_all`, so a
/// [`SideBandWriter`] frames it as one band-1 packet (several only when
/// longer than 65515 bytes), byte-identical to git. Fails with
/// `InvalidInput` if a line exceeds the pkt-line limit.
pub fn write_report_status(
    w: &mut impl Write,
    unpack: Result<(), &str>,
    statuses: &[(String, RefStatus)],
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(32 + statuses.len() * 48);
    match unpack {
        Ok(()) => push_text(&mut buf, "unpack ok")?,
        Err(reason) => push_text(&mut buf, &format!("unpack {reason}"))?,
    }
    for (name, status) in statuses {
        match status {
            RefStatus::Ok => push_text(&mut buf, &format!("ok {name}"))?,
            RefStatus::Rejected(reason) => push_text(&mut buf, &format!("ng {name} {reason}"))?,
        }
    }
    buf.extend_from_slice(b"0000");
    w.write_all(&buf)
}

/// The report-status as git sends it with `side-band-64k`: the
/// [`write_report_status`] bytes inside band-1 packets, then a flush
/// (gitprotocol-pack(5); confirmed against git 2.47 receive-pack).
pub fn write_report_status_sideband(
    w: &mut impl Write,
    unpack: Result<(), &str>,
    statuses: &[(String, RefStatus)],
) -> io::Result<()> {
    let mut band = SideBandWriter::new(&mut *w, Band::Data);
    write_report_status(&mut band, unpack, statuses)?;
    crate::pktline::write_flush(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pktline::{write_data, write_flush, Packet, PktReader};

    const GIT_REPORT_PLAIN: &[u8] = include_bytes!("../tests/fixtures/report_plain.pkt");
    const GIT_REPORT_SIDEBAND: &[u8] = include_bytes!("../tests/fixtures/report_sideband.pkt");
    const GIT_REPORT_UNPACK_ERROR: &[u8] =
        include_bytes!("../tests/fixtures/report_unpack_error_sideband.pkt");

    fn statuses(list: &[(&str, Option<&str>)]) -> Vec<(String, RefStatus)> {
        list.iter()
            .map(|(n, r)| {
                (
                    n.to_string(),
                    r.map_or(RefStatus::Ok, |r| RefStatus::Rejected(r.into())),
                )
            })
            .collect()
    }

    /// Strips band-2 (progress/error text) packets: what remains is what
    /// our report writer produces.
    fn without_band2(bytes: &[u8]) -> Vec<u8> {
        let mut r = PktReader::new(bytes);
        let mut out = Vec::new();
        while let Some(p) = r.read_packet().unwrap() {
            match p {
                Packet::Data(d) if d[0] == 2 => {}
                Packet::Data(d) => write_data(&mut out, &d).unwrap(),
                Packet::Flush => write_flush(&mut out).unwrap(),
                other => panic!("{other:?}"),
            }
        }
        out
    }

    #[test]
    fn report_status_matches_git() {
        let mut out = Vec::new();
        let st = statuses(&[
            ("refs/heads/t1", None),
            ("refs/heads/a..b", Some("funny refname")),
        ]);
        write_report_status(&mut out, Ok(()), &st).unwrap();
        assert_eq!(out, GIT_REPORT_PLAIN);
        assert_eq!(
            out,
            b"000eunpack ok\n0015ok refs/heads/t1\n0025ng refs/heads/a..b funny refname\n0000"
        );
    }

    #[test]
    fn report_status_in_sideband_matches_git() {
        let st = statuses(&[
            ("refs/heads/s1", None),
            ("refs/heads/s2", None),
            ("refs/heads/a..b", Some("funny refname")),
        ]);
        let mut out = Vec::new();
        write_report_status_sideband(&mut out, Ok(()), &st).unwrap();
        assert_eq!(out, without_band2(GIT_REPORT_SIDEBAND));

        // the same through a caller-held SideBandWriter + outer flush
        let mut manual = Vec::new();
        let mut band = SideBandWriter::new(&mut manual, Band::Data);
        write_report_status(&mut band, Ok(()), &st).unwrap();
        write_flush(&mut manual).unwrap();
        assert_eq!(manual, out);

        let mut out = Vec::new();
        let st = statuses(&[("refs/heads/y1", Some("unpacker error"))]);
        write_report_status_sideband(&mut out, Err("eof before pack header was fully read"), &st)
            .unwrap();
        assert_eq!(out, GIT_REPORT_UNPACK_ERROR);
    }

    #[test]
    fn report_status_large_is_split_across_band_packets() {
        let st: Vec<_> = (0..3000)
            .map(|i| (format!("refs/heads/branch-{i:05}"), RefStatus::Ok))
            .collect();
        let mut plain = Vec::new();
        write_report_status(&mut plain, Ok(()), &st).unwrap();
        assert!(plain.len() > 65515);
        let mut out = Vec::new();
        write_report_status_sideband(&mut out, Ok(()), &st).unwrap();
        let mut r = PktReader::new(&out[..]);
        let mut joined = Vec::new();
        let mut n = 0;
        loop {
            match r.read_packet().unwrap().unwrap() {
                Packet::Data(d) => {
                    assert_eq!(d[0], 1);
                    joined.extend_from_slice(&d[1..]);
                    n += 1;
                }
                Packet::Flush => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(n, 2);
        assert_eq!(joined, plain);
        assert!(r.read_packet().unwrap().is_none());
    }
}
