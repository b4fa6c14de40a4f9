//! pkt-line framing, as gitprotocol-common(5) "pkt-line Format" and
//! gitprotocol-v2(5) "Packet-Line Framing" define it.
//!
//! A pkt-line is a 4-digit hexadecimal length (which counts the 4 length bytes
//! themselves) followed by that many minus four bytes of payload. Four
//! lengths are special: `0000` (flush), `0001` (delim, v2 only), `0002`
//! (response-end, v2 only); `0003` is invalid. A whole pkt-line is at most
//! [`MAX_PKT_LEN`] bytes, so its payload is at most [`MAX_DATA_LEN`].
//!
//! [`PktReader`] reads packets from any [`std::io::Read`] without read-ahead,
//! so what follows the last packet (a pack after the receive-pack command
//! list) stays in the inner reader. The `write_*` functions frame one packet
//! each.

use std::io::{self, Read, Write};

/// The largest pkt-line, length prefix included (git's `LARGE_PACKET_MAX`,
/// gitprotocol-common(5)).
pub const MAX_PKT_LEN: usize = 65520;

/// The largest payload of one pkt-line: [`MAX_PKT_LEN`] minus the 4-byte
/// length prefix (gitprotocol-common(5)).
pub const MAX_DATA_LEN: usize = MAX_PKT_LEN - 4;

/// One packet read off the wire (gitprotocol-common(5), gitprotocol-v2(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// A data packet; its payload as sent, a trailing `'\n'` included.
    /// `0004` (an empty payload) is valid and gives `Data(vec![])`, as in git.
    Data(Vec<u8>),
    /// `0000`: the end of a message (flush-pkt).
    Flush,
    /// `0001`: separates sections of a v2 message (delim-pkt, gitprotocol-v2(5)).
    Delim,
    /// `0002`: the end of a v2 response in stateless connections
    /// (response-end-pkt, gitprotocol-v2(5)).
    ResponseEnd,
}

impl Packet {
    /// Data with one trailing '\n' removed, as text lines are read
    /// (gitprotocol-common(5): "a non-binary line SHOULD BE terminated by an
    /// LF, which if present MUST be included in the total length. Receivers
    /// MUST treat pkt-lines with non-binary data the same whether or not they
    /// contain the trailing LF"). `None` for flush, delim and response-end.
    pub fn as_text(&self) -> Option<&[u8]> {
        match self {
            Packet::Data(data) => Some(data.strip_suffix(b"\n").unwrap_or(data)),
            _ => None,
        }
    }

    /// The payload of a data packet, unmodified; `None` for the special packets.
    pub fn as_data(&self) -> Option<&[u8]> {
        match self {
            Packet::Data(data) => Some(data),
            _ => None,
        }
    }
}

/// Why a pkt-line could not be read (gitprotocol-common(5), pkt-line).
#[derive(Debug, thiserror::Error)]
pub enum PktError {
    /// The underlying reader failed.
    #[error("I/O error while reading a pkt-line")]
    Io(#[from] io::Error),
    /// The 4-byte length prefix is not four hexadecimal digits.
    #[error("protocol error: bad line length character in {:?}", String::from_utf8_lossy(.header))]
    InvalidLengthDigits {
        /// The four bytes that were read as the length.
        header: [u8; 4],
    },
    /// The length is `0003`, which no packet type uses.
    #[error("protocol error: bad line length {len}")]
    ReservedLength {
        /// The decoded length.
        len: usize,
    },
    /// The length is greater than [`MAX_PKT_LEN`].
    #[error("protocol error: bad line length {len}, more than the maximum of {max}")]
    TooLong {
        /// The decoded length.
        len: usize,
        /// [`MAX_PKT_LEN`].
        max: usize,
    },
    /// The input ended inside the 4-byte length prefix.
    #[error("the remote end hung up unexpectedly: {got} of 4 length bytes read")]
    TruncatedLength {
        /// How many length bytes arrived.
        got: usize,
    },
    /// The input ended inside a packet's payload.
    #[error("the remote end hung up unexpectedly: {got} of {expected} payload bytes read")]
    TruncatedData {
        /// The payload length announced by the prefix.
        expected: usize,
        /// How many payload bytes arrived.
        got: usize,
    },
}

/// Reads pkt-lines from `R` one at a time (gitprotocol-common(5)).
///
/// It reads exactly the bytes of each packet and nothing more, so after the
/// flush that ends a receive-pack command list, [`PktReader::into_inner`] or
/// [`PktReader::get_mut`] give access to the pack that follows. Wrap a raw
/// socket or body in a `BufReader` *before* handing it over if small reads are
/// costly; the `PktReader` itself does not buffer.
///
/// Allocation is bounded: a packet allocates at most [`MAX_DATA_LEN`] bytes,
/// and only after its length prefix was validated.
#[derive(Debug)]
pub struct PktReader<R> {
    inner: R,
}

impl<R: Read> PktReader<R> {
    /// Wraps `inner`; nothing is read yet.
    pub fn new(inner: R) -> Self {
        PktReader { inner }
    }

    /// Next packet; Ok(None) on a clean EOF before any byte of a packet; Err
    /// on bad length (e.g. "0001"-"0003" other than 0001/0002 as
    /// delim/response-end, non-hex, > MAX_PKT_LEN) or truncation
    /// (gitprotocol-common(5), pkt-line).
    ///
    /// Hex digits of either case are accepted for the length, as git does.
    pub fn read_packet(&mut self) -> Result<Option<Packet>, PktError> {
        let mut header = [0u8; 4];
        let got = read_full(&mut self.inner, &mut header)?;
        if got == 0 {
            return Ok(None);
        }
        if got < header.len() {
            return Err(PktError::TruncatedLength { got });
        }
        let len = decode_length(header)?;
        let packet = match len {
            0 => Packet::Flush,
            1 => Packet::Delim,
            2 => Packet::ResponseEnd,
            3 => return Err(PktError::ReservedLength { len }),
            len if len > MAX_PKT_LEN => {
                return Err(PktError::TooLong {
                    len,
                    max: MAX_PKT_LEN,
                })
            }
            len => {
                let expected = len - 4;
                let mut data = vec![0u8; expected];
                let got = read_full(&mut self.inner, &mut data)?;
                if got < expected {
                    return Err(PktError::TruncatedData { expected, got });
                }
                Packet::Data(data)
            }
        };
        Ok(Some(packet))
    }

    /// Give back the reader positioned right after the last packet read
    /// (reads exactly, no read-ahead buffering beyond what was consumed — so
    /// a pack that follows the command flush can be read from it).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// The inner reader, positioned right after the last packet read.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

/// Decodes the 4-digit hex length of a pkt-line (gitprotocol-common(5));
/// the caller checks it against [`MAX_PKT_LEN`] and the special lengths
/// 0–3.
///
/// # Errors
/// [`PktError::InvalidLengthDigits`] when a digit is not hex.
pub fn decode_length(header: [u8; 4]) -> Result<usize, PktError> {
    let mut len = 0usize;
    for byte in header {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            b'A'..=b'F' => byte - b'A' + 10,
            _ => return Err(PktError::InvalidLengthDigits { header }),
        };
        len = (len << 4) | usize::from(digit);
    }
    Ok(len)
}

/// Fills `buf` as far as the input allows; returns how many bytes were read
/// (less than `buf.len()` only at EOF). Retries on `Interrupted`.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

/// The 4 hex digits announcing a packet of `payload_len` bytes.
pub(crate) fn length_prefix(payload_len: usize) -> [u8; 4] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let total = payload_len + 4;
    [
        HEX[(total >> 12) & 0xf],
        HEX[(total >> 8) & 0xf],
        HEX[(total >> 4) & 0xf],
        HEX[total & 0xf],
    ]
}

/// Appends one data pkt-line to `buf` (the caller checked the size).
pub(crate) fn push_data(buf: &mut Vec<u8>, data: &[u8]) {
    debug_assert!(data.len() <= MAX_DATA_LEN);
    buf.extend_from_slice(&length_prefix(data.len()));
    buf.extend_from_slice(data);
}

/// Appends one text pkt-line (`text` + `'\n'`) to `buf`; errors if too long.
pub(crate) fn push_text(buf: &mut Vec<u8>, text: &str) -> io::Result<()> {
    check_len(text.len() + 1)?;
    buf.extend_from_slice(&length_prefix(text.len() + 1));
    buf.extend_from_slice(text.as_bytes());
    buf.push(b'\n');
    Ok(())
}

fn check_len(len: usize) -> io::Result<()> {
    if len > MAX_DATA_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("pkt-line payload of {len} bytes exceeds the maximum of {MAX_DATA_LEN}"),
        ));
    }
    Ok(())
}

/// Collects pkt-lines for a multi-line response and hands them to the
/// writer in batches of about 64 KiB, so that an unbuffered writer (a
/// socket, an HTTP body channel) sees few large writes and memory stays
/// bounded for long ref lists.
pub(crate) struct PktBatch<'a, W: Write> {
    w: &'a mut W,
    buf: Vec<u8>,
}

impl<'a, W: Write> PktBatch<'a, W> {
    const FLUSH_AT: usize = 64 * 1024;

    pub(crate) fn new(w: &'a mut W) -> Self {
        PktBatch {
            w,
            buf: Vec::with_capacity(4096),
        }
    }

    fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= Self::FLUSH_AT {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// One data line, as is (no newline added).
    pub(crate) fn data(&mut self, data: &[u8]) -> io::Result<()> {
        check_len(data.len())?;
        push_data(&mut self.buf, data);
        self.maybe_flush()
    }

    /// One text line; `'\n'` is appended.
    pub(crate) fn text(&mut self, text: &str) -> io::Result<()> {
        push_text(&mut self.buf, text)?;
        self.maybe_flush()
    }

    /// A special packet (`0000`, `0001`, `0002`).
    pub(crate) fn special(&mut self, packet: &[u8; 4]) -> io::Result<()> {
        self.buf.extend_from_slice(packet);
        self.maybe_flush()
    }

    /// Writes what is left.
    pub(crate) fn finish(self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.w.write_all(&self.buf)
    }
}

/// Writes `data` as one data pkt-line (gitprotocol-common(5)). Fails with
/// `InvalidInput`, writing nothing, if `data.len() > MAX_DATA_LEN`.
pub fn write_data(w: &mut impl Write, data: &[u8]) -> io::Result<()> {
    check_len(data.len())?;
    let mut buf = Vec::with_capacity(data.len() + 4);
    push_data(&mut buf, data);
    w.write_all(&buf)
}

/// Writes `text` plus a trailing `'\n'` as one data pkt-line
/// (gitprotocol-common(5): text lines SHOULD end in LF). Fails with
/// `InvalidInput` if the line would exceed [`MAX_DATA_LEN`].
pub fn write_text(w: &mut impl Write, text: &str) -> io::Result<()> {
    let mut buf = Vec::with_capacity(text.len() + 5);
    push_text(&mut buf, text)?;
    w.write_all(&buf)
}

/// Writes a flush-pkt, `0000` (gitprotocol-common(5)).
pub fn write_flush(w: &mut impl Write) -> io::Result<()> {
    w.write_all(b"0000")
}

/// Writes a delim-pkt, `0001` (gitprotocol-v2(5)).
pub fn write_delim(w: &mut impl Write) -> io::Result<()> {
    w.write_all(b"0001")
}

/// Writes a response-end-pkt, `0002` (gitprotocol-v2(5)).
pub fn write_response_end(w: &mut impl Write) -> io::Result<()> {
    w.write_all(b"0002")
}

/// Writes an error packet, `ERR <message>\n` (gitprotocol-pack(5): "An
/// error packet is a special pkt-line that contains an error string"). Git
/// clients print it and stop; it may replace any pkt-line of a response.
pub fn write_error(w: &mut impl Write, message: &str) -> io::Result<()> {
    write_text(w, &format!("ERR {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Result<Vec<Packet>, PktError> {
        let mut r = PktReader::new(bytes);
        let mut out = Vec::new();
        while let Some(p) = r.read_packet()? {
            out.push(p);
        }
        Ok(out)
    }

    #[test]
    fn roundtrip_all_packet_kinds() {
        let mut buf = Vec::new();
        write_text(&mut buf, "hello").unwrap();
        write_data(&mut buf, b"\x00bin\xff").unwrap();
        write_data(&mut buf, b"").unwrap();
        write_delim(&mut buf).unwrap();
        write_response_end(&mut buf).unwrap();
        write_flush(&mut buf).unwrap();
        assert_eq!(&buf[..], b"000ahello\n0009\x00bin\xff0004000100020000");
        let packets = read_all(&buf).unwrap();
        assert_eq!(
            packets,
            vec![
                Packet::Data(b"hello\n".to_vec()),
                Packet::Data(b"\x00bin\xff".to_vec()),
                Packet::Data(Vec::new()),
                Packet::Delim,
                Packet::ResponseEnd,
                Packet::Flush,
            ]
        );
        assert_eq!(packets[0].as_text(), Some(&b"hello"[..]));
        assert_eq!(packets[0].as_data(), Some(&b"hello\n"[..]));
        assert_eq!(packets[3].as_text(), None);
    }

    #[test]
    fn as_text_removes_only_one_newline() {
        assert_eq!(Packet::Data(b"a\n\n".to_vec()).as_text(), Some(&b"a\n"[..]));
        assert_eq!(Packet::Data(b"a".to_vec()).as_text(), Some(&b"a"[..]));
        assert_eq!(Packet::Flush.as_text(), None);
    }

    #[test]
    fn maximum_sizes() {
        let max = vec![b'x'; MAX_DATA_LEN];
        let mut buf = Vec::new();
        write_data(&mut buf, &max).unwrap();
        assert_eq!(&buf[..4], b"fff0");
        assert_eq!(buf.len(), MAX_PKT_LEN);
        assert_eq!(read_all(&buf).unwrap(), vec![Packet::Data(max.clone())]);

        let mut buf = Vec::new();
        let err = write_data(&mut buf, &vec![0; MAX_DATA_LEN + 1]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(buf.is_empty(), "nothing written on error");
        let err = write_text(&mut buf, &"y".repeat(MAX_DATA_LEN)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        write_text(&mut buf, &"y".repeat(MAX_DATA_LEN - 1)).unwrap();
        assert_eq!(buf.len(), MAX_PKT_LEN);
    }

    #[test]
    fn uppercase_hex_length_is_accepted() {
        assert_eq!(
            read_all(b"000Ahello\n").unwrap(),
            vec![Packet::Data(b"hello\n".to_vec())]
        );
    }

    #[test]
    fn clean_eof_is_none() {
        let mut r = PktReader::new(&b""[..]);
        assert!(r.read_packet().unwrap().is_none());
        assert!(r.read_packet().unwrap().is_none());
    }

    #[test]
    fn length_0003_is_rejected() {
        assert!(matches!(
            read_all(b"0003"),
            Err(PktError::ReservedLength { len: 3 })
        ));
    }

    #[test]
    fn non_hex_lengths_are_rejected() {
        for bad in [
            &b"00g5abc"[..],
            b"zzzz",
            b" 004",
            b"-001",
            b"0x05",
            b"00\n5",
        ] {
            let err = read_all(bad).unwrap_err();
            assert!(
                matches!(err, PktError::InvalidLengthDigits { .. }),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn oversized_length_is_rejected_without_allocating() {
        let err = read_all(b"fff1").unwrap_err();
        assert!(matches!(
            err,
            PktError::TooLong {
                len: 0xfff1,
                max: MAX_PKT_LEN
            }
        ));
        let err = read_all(b"ffff").unwrap_err();
        assert!(err.to_string().contains("65535"), "{err}");
    }

    #[test]
    fn truncation_is_an_error() {
        for (bad, want_len) in [(&b"0"[..], 1), (b"00", 2), (b"000", 3)] {
            match read_all(bad) {
                Err(PktError::TruncatedLength { got }) => assert_eq!(got, want_len),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        match read_all(b"000ahel") {
            Err(PktError::TruncatedData {
                expected: 6,
                got: 3,
            }) => {}
            other => panic!("{other:?}"),
        }
        match read_all(b"0005") {
            Err(PktError::TruncatedData {
                expected: 1,
                got: 0,
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn into_inner_is_positioned_after_the_last_packet() {
        let input = b"0009abcde0000PACKrest";
        let mut r = PktReader::new(&input[..]);
        assert_eq!(
            r.read_packet().unwrap(),
            Some(Packet::Data(b"abcde".to_vec()))
        );
        assert_eq!(r.read_packet().unwrap(), Some(Packet::Flush));
        let mut rest = Vec::new();
        r.get_mut().read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"PACKrest");
        let mut r = PktReader::new(&input[..]);
        r.read_packet().unwrap();
        let inner = r.into_inner();
        assert_eq!(inner, b"0000PACKrest");
    }

    /// A reader handing out one byte per call, with interruptions.
    struct Trickle<'a> {
        data: &'a [u8],
        interrupt: bool,
    }
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(io::ErrorKind::Interrupted.into());
            }
            if self.data.is_empty() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.data[0];
            self.data = &self.data[1..];
            Ok(1)
        }
    }

    #[test]
    fn short_reads_and_interrupts_are_handled() {
        let mut r = PktReader::new(Trickle {
            data: b"0008abcd0000",
            interrupt: false,
        });
        assert_eq!(
            r.read_packet().unwrap(),
            Some(Packet::Data(b"abcd".to_vec()))
        );
        assert_eq!(r.read_packet().unwrap(), Some(Packet::Flush));
        assert_eq!(r.read_packet().unwrap(), None);
    }

    #[test]
    fn io_errors_are_reported() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("boom"))
            }
        }
        assert!(matches!(
            PktReader::new(Broken).read_packet(),
            Err(PktError::Io(_))
        ));
    }

    #[test]
    fn error_packet() {
        let mut buf = Vec::new();
        write_error(&mut buf, "access denied").unwrap();
        assert_eq!(buf, b"0016ERR access denied\n");
    }
}
