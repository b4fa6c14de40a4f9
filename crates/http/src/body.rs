//! Request bodies: plain, chunked (hyper decodes the framing) or
//! `Content-Encoding: gzip`, spooled to a temp file or read into memory, with a
//! size bound on the decoded bytes.

use std::io::Write;

use axum::body::Body;
use futures_util::StreamExt;
use gitstow_service::input::{Pace, Paced, Slow};

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// More than the limit after decoding (HTTP 413).
    #[error("request body exceeds the limit of {0} bytes")]
    TooLarge(u64),
    /// The gzip stream is corrupt (HTTP 400).
    #[error("request body is not valid gzip: {0}")]
    BadGzip(std::io::Error),
    /// The client sent nothing for longer than the idle timeout, or slower
    /// than the minimum rate on average since the body began once it had
    /// taken the idle timeout (HTTP 408).
    #[error(transparent)]
    TooSlow(#[from] Slow),
    /// The client stopped sending or the connection broke (HTTP 400).
    #[error("reading the request body: {0}")]
    Transport(String),
    /// Local spool I/O (HTTP 500).
    #[error("spooling the request body: {0}")]
    Io(std::io::Error),
    /// The spool could not hold a [`spool`]ed body (its disk is full, or
    /// the temp file could not be made): the body was still read to its end
    /// (so the client can read an answer) and `head` holds its first bytes,
    /// up to [`SPOOL_HEAD`]: a push's command list, to answer it in the
    /// protocol (`unpack …`).
    #[error("spooling the request body: {error}")]
    Spool {
        /// What the spool's file system said.
        error: std::io::Error,
        /// The first bytes of the decoded body.
        head: Vec<u8>,
    },
}

/// Bytes at the start of a [`spool`]ed body also kept in memory while it is
/// read ([`BodyError::Spool`]): a push's command list fits unless it names
/// hundreds of refs.
pub const SPOOL_HEAD: usize = 64 << 10;

/// The spool's writer: the temp file, and a copy of the body's first
/// [`SPOOL_HEAD`] bytes. After a write fails, the file is dropped and the
/// rest of the body is read and dropped too.
struct SpoolSink {
    /// The file, or why it failed.
    file: std::io::Result<std::io::BufWriter<std::fs::File>>,
    head: Vec<u8>,
}

impl Write for SpoolSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let keep = SPOOL_HEAD.saturating_sub(self.head.len()).min(buf.len());
        self.head.extend_from_slice(&buf[..keep]);
        if let Ok(file) = &mut self.file {
            if let Err(e) = file.write_all(buf) {
                self.file = Err(e);
            }
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `Write` that counts bytes and stops at `limit`. With `drain`, bytes past
/// the limit are counted and dropped (so the client can still read an answer
/// that names the limit) until twice the limit; without it, or past that, it errors.
struct Bounded<W> {
    inner: W,
    written: u64,
    limit: u64,
    drain: bool,
    exceeded: bool,
}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.limit.saturating_sub(self.written);
        if !self.exceeded && buf.len() as u64 > room && room > 0 {
            // The part that fits is kept: what is kept is always the first
            // `limit` bytes, however the body was cut into writes.
            let n = self.inner.write(&buf[..room as usize])?;
            self.written += n as u64;
            return Ok(n);
        }
        if self.exceeded || self.written + buf.len() as u64 > self.limit {
            self.exceeded = true;
            self.written += buf.len() as u64;
            if !self.drain || self.written > self.limit.saturating_mul(2) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::FileTooLarge,
                    "limit",
                ));
            }
            return Ok(buf.len());
        }
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn map_write_error(e: std::io::Error, limit: u64, gzip: bool) -> BodyError {
    if e.kind() == std::io::ErrorKind::FileTooLarge {
        BodyError::TooLarge(limit)
    } else if gzip && e.kind() == std::io::ErrorKind::InvalidInput
        || e.kind() == std::io::ErrorKind::InvalidData
    {
        BodyError::BadGzip(e)
    } else {
        BodyError::Io(e)
    }
}

/// The next chunk of `stream` within `paced`'s bounds.
async fn next_chunk<S>(paced: &mut Paced, stream: &mut S) -> Result<Option<bytes::Bytes>, BodyError>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, axum::Error>> + Unpin,
{
    match paced.wait(stream.next()).await? {
        None => Ok(None),
        Some(Ok(chunk)) => {
            paced.received(chunk.len() as u64);
            Ok(Some(chunk))
        }
        Some(Err(e)) => Err(BodyError::Transport(e.to_string())),
    }
}

/// Streams `body` into `sink`, gunzipping when `gzip`, keeping at most `limit`
/// decoded bytes. Returns the sink and whether the body was longer (only with
/// `drain`; otherwise that is [`BodyError::TooLarge`]).
pub(crate) async fn copy_body<W: Write>(
    body: Body,
    sink: W,
    gzip: bool,
    limit: u64,
    drain: bool,
    pace: Pace,
) -> Result<(W, bool), BodyError> {
    let mut paced = Paced::new(pace);
    let bounded = Bounded {
        inner: sink,
        written: 0,
        limit,
        drain,
        exceeded: false,
    };
    let mut stream = body.into_data_stream();
    let mut batch = Batch::default();
    if gzip {
        let mut dec = flate2::write::GzDecoder::new(bounded);
        while let Some(chunk) = next_chunk(&mut paced, &mut stream).await? {
            batch
                .add(chunk, &mut dec)
                .map_err(|e| map_write_error(e, limit, true))?;
        }
        batch
            .write(&mut dec)
            .map_err(|e| map_write_error(e, limit, true))?;
        let bounded = dec.finish().map_err(|e| map_write_error(e, limit, true))?;
        Ok((bounded.inner, bounded.exceeded))
    } else {
        let mut bounded = bounded;
        while let Some(chunk) = next_chunk(&mut paced, &mut stream).await? {
            batch
                .add(chunk, &mut bounded)
                .map_err(|e| map_write_error(e, limit, false))?;
        }
        batch
            .write(&mut bounded)
            .map_err(|e| map_write_error(e, limit, false))?;
        Ok((bounded.inner, bounded.exceeded))
    }
}

/// Body bytes gathered until they add up to [`Batch::BYTES`], then written
/// in one `block_in_place`: a push's body comes in chunks of some KiB, and
/// handing the runtime's worker to another thread for each of them cost
/// more than writing them. The bytes are copied out of each chunk at once,
/// so that hyper reuses its read buffer instead of allocating a new one
/// while chunks of it are held.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
}

impl Batch {
    const BYTES: usize = 256 * 1024;

    /// Gathers `chunk`; writes what is gathered to `sink` once it is enough.
    fn add<W: Write>(&mut self, chunk: bytes::Bytes, sink: &mut W) -> std::io::Result<()> {
        // A body of one chunk holds only what it sent; from the second
        // chunk on, the batch is allocated at its full size at once rather
        // than grown by doubling to it.
        let need = self.bytes.len() + chunk.len();
        if need > self.bytes.capacity() && !self.bytes.is_empty() {
            let want = need.max(Self::BYTES + Self::BYTES / 4);
            self.bytes.reserve_exact(want - self.bytes.len());
        }
        self.bytes.extend_from_slice(&chunk);
        if self.bytes.len() >= Self::BYTES {
            self.write(sink)?;
        }
        Ok(())
    }

    /// Writes what is gathered to `sink` (blocking, off the runtime's worker).
    fn write<W: Write>(&mut self, sink: &mut W) -> std::io::Result<()> {
        if self.bytes.is_empty() {
            return Ok(());
        }
        let written = tokio::task::block_in_place(|| sink.write_all(&self.bytes));
        self.bytes.clear();
        written
    }
}

/// A spooled request body.
pub struct Spooled {
    /// The first `limit` bytes of the decoded body, rewound to the start.
    pub file: std::fs::File,
    /// The body was longer than the limit (the rest was read and dropped).
    pub truncated: bool,
}

/// Spools the body to an anonymous temp file in `dir` (the system's temp
/// directory without one). A body longer than `limit` is read to its end
/// (up to twice the limit) so the caller can still answer in the protocol;
/// longer than that is [`BodyError::TooLarge`]. A spool that fails to write
/// is [`BodyError::Spool`] once the body is read.
pub async fn spool(
    body: Body,
    gzip: bool,
    limit: u64,
    dir: Option<&std::path::Path>,
    pace: Pace,
) -> Result<Spooled, BodyError> {
    use std::io::Seek;
    let made = match dir {
        Some(d) => tempfile::tempfile_in(d),
        None => tempfile::tempfile(),
    };
    let sink = SpoolSink {
        file: made.map(|f| std::io::BufWriter::with_capacity(256 * 1024, f)),
        head: Vec::new(),
    };
    let (SpoolSink { file, head }, truncated) =
        copy_body(body, sink, gzip, limit, true, pace).await?;
    let written = file.and_then(|w| {
        let mut f = w.into_inner().map_err(|e| e.into_error())?;
        f.rewind()?;
        Ok(f)
    });
    match written {
        Ok(file) => Ok(Spooled { file, truncated }),
        Err(error) => Err(BodyError::Spool { error, head }),
    }
}

/// Bytes of a [`buffer`]ed body kept in memory; the rest goes to a temp file.
pub const IN_MEMORY: usize = 64 << 10;

/// Reads the whole body into memory up to [`IN_MEMORY`] bytes and into an
/// anonymous temp file in `dir` beyond (upload-pack requests: most are
/// small, a mirror clone's want list is megabytes, and a request waiting
/// for a fetch slot must hold little memory); rewound to the start. Longer
/// than `limit` decoded is [`BodyError::TooLarge`]. Returns the buffer and
/// its length in bytes.
pub async fn buffer(
    body: Body,
    gzip: bool,
    limit: u64,
    dir: Option<&std::path::Path>,
    pace: Pace,
) -> Result<(tempfile::SpooledTempFile, u64), BodyError> {
    use std::io::Seek;
    let sink = match dir {
        Some(d) => tempfile::spooled_tempfile_in(IN_MEMORY, d),
        None => tempfile::spooled_tempfile(IN_MEMORY),
    };
    let (mut sink, _) = copy_body(body, sink, gzip, limit, false, pace).await?;
    let len = sink
        .seek(std::io::SeekFrom::End(0))
        .map_err(BodyError::Io)?;
    sink.rewind().map_err(BodyError::Io)?;
    Ok((sink, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_across_the_limit_keeps_the_part_that_fits() {
        let mut bounded = Bounded {
            inner: Vec::new(),
            written: 0,
            limit: 10,
            drain: true,
            exceeded: false,
        };
        bounded.write_all(b"0123").unwrap();
        bounded.write_all(b"456789abcdef").unwrap();
        assert_eq!(bounded.inner, b"0123456789");
        assert!(bounded.exceeded);
        // Past twice the limit, even a drained body is refused.
        let err = bounded.write_all(&[0; 8]).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge);

        let mut strict = Bounded {
            inner: Vec::new(),
            written: 0,
            limit: 4,
            drain: false,
            exceeded: false,
        };
        assert!(strict.write_all(b"0123456").is_err());
        assert_eq!(strict.inner, b"0123");
    }
}
