//! From an SSH channel to the blocking threads that run upload-pack: a
//! [`BlockingReader`] fed by [`pump`]. (Their output goes the other way
//! through `gitstow_service::output`, as HTTP's does.)

use std::time::Duration;

use gitstow_service::output::{Pace, Patience};
use tokio::sync::mpsc;

/// A `Read` for a blocking thread over the bytes an async task hands it
/// (the client's stream, read from the channel by [`pump`]), after a
/// `prefix` read before (a v0 request's want list); EOF when the task
/// ends. Each wait for the client's next bytes spends a credit of
/// [`Pace`] that the bytes earn back: a client that paces its
/// negotiation (one `have` every few seconds) while it holds a fetch slot
/// gets `TimedOut` once the credit is spent.
pub struct BlockingReader {
    prefix: Option<Box<dyn std::io::Read + Send>>,
    rx: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    at: usize,
    patience: Patience,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for BlockingReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingReader")
            .field("buffered", &(self.buf.len() - self.at))
            .field("patience", &self.patience)
            .finish_non_exhaustive()
    }
}

impl BlockingReader {
    /// A reader that yields `prefix`, then what the sender sends, waiting
    /// for it as `pace` allows. Call it within the runtime.
    pub fn new(prefix: Box<dyn std::io::Read + Send>, pace: Pace) -> (Self, mpsc::Sender<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(4);
        (
            BlockingReader {
                prefix: Some(prefix),
                rx,
                buf: Vec::new(),
                at: 0,
                patience: Patience::new(pace),
                runtime: tokio::runtime::Handle::current(),
            },
            tx,
        )
    }
}

impl std::io::Read for BlockingReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if let Some(prefix) = &mut self.prefix {
            match prefix.read(out)? {
                0 => self.prefix = None,
                n => return Ok(n),
            }
        }
        while self.at >= self.buf.len() {
            let started = tokio::time::Instant::now();
            let allowed = self.patience.allowed();
            let next = self
                .runtime
                .block_on(tokio::time::timeout(allowed, self.rx.recv()));
            match next {
                Ok(Some(chunk)) => {
                    self.patience.moved(started.elapsed(), chunk.len() as u64);
                    self.buf = chunk;
                    self.at = 0;
                }
                Ok(None) => return Ok(0),
                Err(_) => {
                    tracing::info!(
                        "ssh: the client's negotiation is slower than the minimum rate; the command ends"
                    );
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client sent its negotiation too slowly",
                    ));
                }
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Hands what `input` gives to `tx` until EOF, a read error, `idle`
/// without bytes, or the reader is gone.
pub async fn pump(
    input: &mut (impl tokio::io::AsyncRead + Unpin + Send),
    tx: mpsc::Sender<Vec<u8>>,
    idle: Duration,
) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match tokio::time::timeout(idle, input.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return,
        };
        if tx.send(buf[..n].to_vec()).await.is_err() {
            return;
        }
    }
}

/// An `AsyncRead` that counts the bytes read through it.
#[derive(Debug)]
pub struct Counted<R> {
    inner: R,
    /// Bytes read so far.
    pub bytes: u64,
}

impl<R> Counted<R> {
    /// Counts what is read from `inner`.
    pub fn new(inner: R) -> Self {
        Counted { inner, bytes: 0 }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Counted<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        self.bytes += read as u64;
        polled
    }
}
