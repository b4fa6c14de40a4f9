//! Side-band multiplexing, as gitprotocol-pack(5) "Packfile Data" and
//! gitprotocol-capabilities(5) "side-band, side-band-64k" describe it.
//!
//! With `side-band` or `side-band-64k` negotiated, the server sends the pack
//! (upload-pack) or the report-status (receive-pack) inside pkt-lines whose
//! first payload byte names a band: 1 data, 2 progress text, 3 a fatal error
//! message. `side-band-64k` packets are up to 65520 bytes in all, so a band
//! carries at most [`SIDE_BAND_64K_MAX_PAYLOAD`] bytes per packet; plain
//! `side-band` packets are up to 1000 bytes, [`SIDE_BAND_MAX_PAYLOAD`] of
//! them band data (git's `send_sideband` caps data at `packet_max - 5`).

use std::io::{self, Write};

use crate::pktline::{length_prefix, MAX_DATA_LEN};

/// Band data per packet with `side-band-64k`: 65520 − 4 length bytes − 1
/// band byte (gitprotocol-capabilities(5)).
pub const SIDE_BAND_64K_MAX_PAYLOAD: usize = MAX_DATA_LEN - 1;

/// Band data per packet with plain `side-band`: packets of at most 1000
/// bytes, minus 4 length bytes and 1 band byte (gitprotocol-capabilities(5);
/// git's `send_sideband` with `DEFAULT_PACKET_MAX`).
pub const SIDE_BAND_MAX_PAYLOAD: usize = 1000 - 5;

/// A side-band channel (gitprotocol-pack(5), "Packfile Data").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Band {
    /// Band 1: the pack or report-status bytes.
    Data = 1,
    /// Band 2: progress messages, shown on the client's stderr.
    Progress = 2,
    /// Band 3: a fatal error message; the client stops after it.
    Error = 3,
}

/// Writes `data` on `band` with `side-band-64k` framing, split into as many
/// packets of at most [`SIDE_BAND_64K_MAX_PAYLOAD`] bytes as needed
/// (gitprotocol-pack(5)). Empty `data` writes nothing, as git's
/// `send_sideband` does.
pub fn write_band(w: &mut impl Write, band: Band, data: &[u8]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(data.len().min(SIDE_BAND_64K_MAX_PAYLOAD) + 5);
    for chunk in data.chunks(SIDE_BAND_64K_MAX_PAYLOAD) {
        buf.clear();
        push_band_packet(&mut buf, band, chunk);
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Appends one band packet (`chunk` must fit one packet).
fn push_band_packet(buf: &mut Vec<u8>, band: Band, chunk: &[u8]) {
    buf.extend_from_slice(&length_prefix(chunk.len() + 1));
    buf.push(band as u8);
    buf.extend_from_slice(chunk);
}

/// A Write adapter that frames everything written to it as band `band`
/// packets (chunked to the limit). Also used by "side-band" (small,
/// [`SIDE_BAND_MAX_PAYLOAD`] bytes) if constructed with that max
/// (gitprotocol-pack(5), gitprotocol-capabilities(5)).
///
/// Each `write` call emits at most one packet, with one `write_all` on the
/// inner writer, so an unbuffered sink sees whole packets. It does not
/// write the flush that ends a side-band stream; the caller does
/// ([`crate::pktline::write_flush`] on [`SideBandWriter::get_mut`] or after
/// [`SideBandWriter::into_inner`]). `flush` flushes the inner writer.
#[derive(Debug)]
pub struct SideBandWriter<W> {
    inner: W,
    band: Band,
    max: usize,
    buf: Vec<u8>,
}

impl<W: Write> SideBandWriter<W> {
    /// Frames writes as `band` packets of up to [`SIDE_BAND_64K_MAX_PAYLOAD`]
    /// bytes (`side-band-64k`).
    pub fn new(inner: W, band: Band) -> Self {
        Self::with_max_payload(inner, band, SIDE_BAND_64K_MAX_PAYLOAD)
    }

    /// Frames writes as `band` packets carrying at most `max` bytes each;
    /// use [`SIDE_BAND_MAX_PAYLOAD`] for plain `side-band`. `max` is clamped
    /// to `1..=SIDE_BAND_64K_MAX_PAYLOAD`.
    pub fn with_max_payload(inner: W, band: Band, max: usize) -> Self {
        let max = max.clamp(1, SIDE_BAND_64K_MAX_PAYLOAD);
        SideBandWriter {
            inner,
            band,
            max,
            buf: Vec::new(),
        }
    }

    /// The inner writer; nothing is buffered here, so nothing is lost.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// The inner writer, e.g. to write a flush or another band.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }
}

impl<W: Write> Write for SideBandWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let chunk = &data[..data.len().min(self.max)];
        self.buf.clear();
        push_band_packet(&mut self.buf, self.band, chunk);
        self.inner.write_all(&self.buf)?;
        Ok(chunk.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pktline::{Packet, PktReader};

    fn packets(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut r = PktReader::new(bytes);
        let mut out = Vec::new();
        while let Some(p) = r.read_packet().unwrap() {
            match p {
                Packet::Data(d) => out.push(d),
                other => panic!("unexpected {other:?}"),
            }
        }
        out
    }

    #[test]
    fn small_band_packet() {
        let mut buf = Vec::new();
        write_band(&mut buf, Band::Progress, b"Counting\n").unwrap();
        assert_eq!(buf, b"000e\x02Counting\n");
        let mut buf = Vec::new();
        write_band(&mut buf, Band::Error, b"").unwrap();
        assert!(buf.is_empty());
    }

    #[test]
    fn chunking_at_65515() {
        let data: Vec<u8> = (0..(2 * SIDE_BAND_64K_MAX_PAYLOAD + 7))
            .map(|i| i as u8)
            .collect();
        let mut buf = Vec::new();
        write_band(&mut buf, Band::Data, &data).unwrap();
        let got = packets(&buf);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].len(), 65516);
        assert_eq!(&buf[..4], b"fff0");
        assert_eq!(got[1].len(), 65516);
        assert_eq!(got[2].len(), 8);
        let mut joined = Vec::new();
        for p in &got {
            assert_eq!(p[0], 1);
            joined.extend_from_slice(&p[1..]);
        }
        assert_eq!(joined, data);

        // exactly one full packet
        let mut buf = Vec::new();
        write_band(&mut buf, Band::Data, &data[..SIDE_BAND_64K_MAX_PAYLOAD]).unwrap();
        assert_eq!(packets(&buf).len(), 1);
        assert_eq!(buf.len(), 65520);
    }

    #[test]
    fn writer_chunks_and_is_transparent() {
        let data = vec![7u8; SIDE_BAND_64K_MAX_PAYLOAD + 1];
        let mut w = SideBandWriter::new(Vec::new(), Band::Data);
        w.write_all(&data).unwrap();
        w.flush().unwrap();
        assert_eq!(w.write(b"").unwrap(), 0);
        let out = w.into_inner();
        let got = packets(&out);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), SIDE_BAND_64K_MAX_PAYLOAD + 1);
        assert_eq!(got[1], b"\x01\x07");
    }

    #[test]
    fn small_side_band() {
        let data = vec![b'a'; 2000];
        let mut w =
            SideBandWriter::with_max_payload(Vec::new(), Band::Progress, SIDE_BAND_MAX_PAYLOAD);
        w.write_all(&data).unwrap();
        let got = packets(w.get_mut());
        assert_eq!(
            got.iter().map(|p| p.len() + 4).collect::<Vec<_>>(),
            vec![1000, 1000, 2000 - 2 * 995 + 5]
        );
        assert!(got.iter().all(|p| p[0] == 2));

        let mut w = SideBandWriter::with_max_payload(Vec::new(), Band::Data, 0);
        w.write_all(b"ab").unwrap();
        assert_eq!(w.into_inner(), b"0006\x01a0006\x01b");
    }
}
