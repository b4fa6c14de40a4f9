//! Request bodies: plain, chunked (hyper decodes the framing) or
//! `Content-Encoding: gzip`, spooled to a temp file or read into memory, with a
//! size bound on the decoded bytes.

use std::io::Write;

use axum::body::Body;
use futures_util::StreamExt;

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// More than the limit after decoding (HTTP 413).
    #[error("request body exceeds the limit of {0} bytes")]
    TooLarge(u64),
    /// The gzip stream is corrupt (HTTP 400).
    #[error("request body is not valid gzip: {0}")]
    BadGzip(std::io::Error),
    /// The client sent nothing for longer than the idle timeout (HTTP 408).
    #[error("the client sent nothing for {0:?}")]
    TimedOut(std::time::Duration),
    /// The client stopped sending or the connection broke (HTTP 400).
    #[error("reading the request body: {0}")]
    Transport(String),
    /// Local spool I/O (HTTP 500).
    #[error("spooling the request body: {0}")]
    Io(std::io::Error),
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

/// The next chunk of a body, or [`BodyError::TimedOut`] when the client sends
/// nothing for `idle` (a stalled or slow-loris client must not hold a request forever).
async fn next_chunk<S>(
    stream: &mut S,
    idle: std::time::Duration,
) -> Result<Option<bytes::Bytes>, BodyError>
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, axum::Error>> + Unpin,
{
    match tokio::time::timeout(idle, stream.next()).await {
        Err(_) => Err(BodyError::TimedOut(idle)),
        Ok(None) => Ok(None),
        Ok(Some(Ok(chunk))) => Ok(Some(chunk)),
        Ok(Some(Err(e))) => Err(BodyError::Transport(e.to_string())),
    }
}

/// Streams `body` into `sink`, gunzipping when `gzip`, keeping at most `limit`
/// decoded bytes. Returns the sink and whether the body was longer (only with
/// `drain`; otherwise that is [`BodyError::TooLarge`]).
async fn copy_body<W: Write>(
    body: Body,
    sink: W,
    gzip: bool,
    limit: u64,
    drain: bool,
    idle: std::time::Duration,
) -> Result<(W, bool), BodyError> {
    let bounded = Bounded {
        inner: sink,
        written: 0,
        limit,
        drain,
        exceeded: false,
    };
    let mut stream = body.into_data_stream();
    if gzip {
        let mut dec = flate2::write::GzDecoder::new(bounded);
        while let Some(chunk) = next_chunk(&mut stream, idle).await? {
            tokio::task::block_in_place(|| dec.write_all(&chunk))
                .map_err(|e| map_write_error(e, limit, true))?;
        }
        let bounded = dec.finish().map_err(|e| map_write_error(e, limit, true))?;
        Ok((bounded.inner, bounded.exceeded))
    } else {
        let mut bounded = bounded;
        while let Some(chunk) = next_chunk(&mut stream, idle).await? {
            tokio::task::block_in_place(|| bounded.write_all(&chunk))
                .map_err(|e| map_write_error(e, limit, false))?;
        }
        Ok((bounded.inner, bounded.exceeded))
    }
}

/// A spooled request body.
pub struct Spooled {
    /// The first `limit` bytes of the decoded body, rewound to the start.
    pub file: std::fs::File,
    /// The body was longer than the limit (the rest was read and dropped).
    pub truncated: bool,
}

/// Spools the body to an anonymous temp file. A body longer than `limit` is
/// read to its end (up to twice the limit) so the caller can still answer in
/// the protocol; longer than that is [`BodyError::TooLarge`].
pub async fn spool(
    body: Body,
    gzip: bool,
    limit: u64,
    dir: Option<&std::path::Path>,
    idle: std::time::Duration,
) -> Result<Spooled, BodyError> {
    use std::io::Seek;
    let file = match dir {
        Some(d) => tempfile::tempfile_in(d),
        None => tempfile::tempfile(),
    }
    .map_err(BodyError::Io)?;
    let writer = std::io::BufWriter::with_capacity(256 * 1024, file);
    let (writer, truncated) = copy_body(body, writer, gzip, limit, true, idle).await?;
    let mut file = writer
        .into_inner()
        .map_err(|e| BodyError::Io(e.into_error()))?;
    file.rewind().map_err(BodyError::Io)?;
    Ok(Spooled { file, truncated })
}

/// Reads the whole body into memory (for small requests such as upload-pack negotiation).
pub async fn read_all(
    body: Body,
    gzip: bool,
    limit: u64,
    idle: std::time::Duration,
) -> Result<Vec<u8>, BodyError> {
    copy_body(body, Vec::new(), gzip, limit, false, idle)
        .await
        .map(|(v, _)| v)
}
