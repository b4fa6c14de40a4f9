//! From the blocking threads that run upload-pack and receive-pack to an
//! SSH channel: a [`BlockingWriter`] hands 64 KiB chunks to an async task
//! that sends them as channel data, as fast as the client's window allows.

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

const CHUNK: usize = 64 * 1024;

/// A `Write` for a blocking thread whose bytes go to the channel through
/// [`forward`]. Dropping it sends what is buffered.
#[derive(Debug)]
pub struct BlockingWriter {
    tx: Option<mpsc::Sender<Bytes>>,
    buf: Vec<u8>,
}

impl BlockingWriter {
    /// A writer and the receiving end [`forward`] takes.
    pub fn new() -> (Self, mpsc::Receiver<Bytes>) {
        let (tx, rx) = mpsc::channel(16);
        (
            BlockingWriter {
                tx: Some(tx),
                buf: Vec::with_capacity(CHUNK),
            },
            rx,
        )
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        let tx = self.tx.as_ref().ok_or(std::io::ErrorKind::BrokenPipe)?;
        tx.blocking_send(chunk).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the SSH client stopped reading",
            )
        })
    }
}

impl Write for BlockingWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

impl Drop for BlockingWriter {
    fn drop(&mut self) {
        let _ = self.send();
        self.tx = None;
    }
}

/// Sends every chunk of `rx` with `send` until the writer is dropped;
/// `false` when a chunk waited longer than [`gitstow_service::SEND_STALL`]
/// (a client that stopped reading, e.g. a suspended `git clone`: the
/// command ends, as over HTTP) or the channel
/// failed (the writer's next send then fails with `BrokenPipe`).
pub async fn forward<F, Fut>(mut rx: mpsc::Receiver<Bytes>, mut send: F) -> bool
where
    F: FnMut(Bytes) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let stall = gitstow_service::send_stall();
    while let Some(chunk) = rx.recv().await {
        match tokio::time::timeout(stall, send(chunk)).await {
            Ok(true) => {}
            Ok(false) => return false,
            Err(_) => {
                tracing::info!(
                    stall_ms = stall.as_millis() as u64,
                    "ssh: client stopped reading the response; the command ends"
                );
                return false;
            }
        }
    }
    true
}

/// A `Read` for a blocking thread over the bytes an async task hands it
/// (the client's stream, read from the channel by [`pump`]); EOF when the
/// task ends.
#[derive(Debug)]
pub struct BlockingReader {
    rx: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    at: usize,
}

impl BlockingReader {
    /// A reader that yields `first`, then what the sender sends.
    pub fn new(first: Vec<u8>) -> (Self, mpsc::Sender<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(4);
        (
            BlockingReader {
                rx,
                buf: first,
                at: 0,
            },
            tx,
        )
    }
}

impl std::io::Read for BlockingReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.buf.len() {
            match self.rx.blocking_recv() {
                Some(chunk) => {
                    self.buf = chunk;
                    self.at = 0;
                }
                None => return Ok(0),
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
