//! A response on its way from the blocking thread that makes it to the
//! client, the same for every transport (smart HTTP's body, an SSH
//! channel's data).
//!
//! The thread writes to a [`Writer`]; the transport's task takes the
//! chunks from its [`Source`] and sends them with [`forward`]. Three rules
//! keep a client that reads slowly, or not at all, from holding what
//! others need (as nginx's small fixed output buffers, `proxy_buffering`
//! to temp files and `send_timeout` do):
//!
//! - **A fixed window in memory.** At most [`WINDOW`] chunk of [`CHUNK`]
//!   bytes waits in memory for the client, besides the one the transport
//!   is sending, whatever the response's size.
//! - **No thread parked on a stalled client while there is room on disk.**
//!   When the window is full, the writer spills further chunks to a temp
//!   file (up to [`Spill::per_response`] bytes a response, out of a
//!   budget all responses share), and the thread goes on: a listing of
//!   megabytes is made in milliseconds and its thread (and fetch slot, for
//!   a large one) is free while the client takes it at its own pace. Only
//!   once both are full does the thread wait for the client.
//! - **A client that does not move loses its response** ([`Pace`]): each
//!   wait for it to take a chunk spends a credit of time that starts at
//!   [`Pace::stall`], and each byte it takes earns `1 / min_rate` s back
//!   (never above `stall`). A client that stops reading is dropped after
//!   `stall`; one that reads slower than `min_rate` on average, soon
//!   after; one that reads at least that fast, never.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Bytes of one chunk handed to the transport.
pub const CHUNK: usize = 64 << 10;

/// Chunks a response keeps in memory for a client that has not taken them
/// (besides the one being sent).
pub const WINDOW: usize = 1;

/// How fast a client must take a response (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// The longest a client may take nothing; also the most credit it
    /// can hold.
    pub stall: Duration,
    /// Bytes per second a client must take on average, over any stretch
    /// longer than `stall`; 0: only `stall` counts, chunk by chunk.
    pub min_rate: u64,
}

impl Pace {
    /// The default: [`crate::send_stall`] (120 s) and 1 KiB/s, as requests'
    /// bodies must arrive (`--min-body-rate`).
    pub fn default_for_responses() -> Self {
        Pace {
            stall: crate::send_stall(),
            min_rate: 1024,
        }
    }
}

/// How responses are paced and how much of them may spill to disk
/// ([`crate::Config::responses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How fast a client must take a response.
    pub pace: Pace,
    /// The most one response spills, bytes.
    pub spill_per_response: u64,
    /// The most all responses spill at once, bytes; 0: none spills.
    pub spill_total: u64,
}

impl Default for Settings {
    /// [`Pace::default_for_responses`], 16 MiB a response (a listing of
    /// about 200,000 refs), 2 GiB in all.
    fn default() -> Self {
        Settings {
            pace: Pace::default_for_responses(),
            spill_per_response: 16 << 20,
            spill_total: 2 << 30,
        }
    }
}

/// A client's credit of waiting time under a [`Pace`].
#[derive(Debug, Clone)]
pub struct Patience {
    pace: Pace,
    credit: Duration,
}

impl Patience {
    /// Full credit (`pace.stall`).
    pub fn new(pace: Pace) -> Self {
        Patience {
            pace,
            credit: pace.stall,
        }
    }

    /// How long the next wait for the client may last.
    pub fn allowed(&self) -> Duration {
        self.credit
    }

    /// Waits for `send` to hand `bytes` to the client (true: taken) as
    /// long as the credit allows, then spends the wait and earns the bytes.
    ///
    /// # Errors
    /// [`Ended::Gone`] when `send` fails, [`Ended::TooSlow`] when the
    /// credit ran out first.
    pub async fn send(
        &mut self,
        bytes: u64,
        send: impl std::future::Future<Output = bool>,
    ) -> Result<(), Ended> {
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(self.allowed(), send).await {
            Ok(true) => {
                self.moved(started.elapsed(), bytes);
                Ok(())
            }
            Ok(false) => Err(Ended::Gone),
            Err(_) => Err(Ended::TooSlow),
        }
    }

    /// A wait of `waited` ended with `bytes` taken (or sent, for input).
    pub fn moved(&mut self, waited: Duration, bytes: u64) {
        if self.pace.min_rate == 0 {
            self.credit = self.pace.stall;
            return;
        }
        let earned = Duration::from_secs_f64(bytes as f64 / self.pace.min_rate as f64);
        self.credit = (self.credit.saturating_sub(waited) + earned).min(self.pace.stall);
    }
}

/// Where responses spill once their window is full: a directory (`None`:
/// the system's temp directory), the most one response spills, and a
/// budget of bytes all responses share (each response's spill is given
/// back when the response ends).
#[derive(Debug)]
pub struct Spill {
    dir: Option<PathBuf>,
    per_response: u64,
    left: AtomicU64,
}

impl Spill {
    /// Spills to `dir`, at most `per_response` bytes a response and `total`
    /// bytes at once in all.
    pub fn new(dir: Option<PathBuf>, per_response: u64, total: u64) -> Arc<Self> {
        Arc::new(Spill {
            dir,
            per_response,
            left: AtomicU64::new(total),
        })
    }

    /// No spill: a full window waits for the client.
    pub fn none() -> Arc<Self> {
        Spill::new(None, 0, 0)
    }

    /// Bytes of the budget not taken now.
    pub fn left(&self) -> u64 {
        self.left.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes of the budget; false when there are not that many.
    fn take(&self, n: u64) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }

    fn give(&self, n: u64) {
        self.left.fetch_add(n, Ordering::AcqRel);
    }
}

/// One response's spill file; its bytes go back to the budget when the
/// writer and every chunk that names it are gone.
#[derive(Debug)]
struct SpillFile {
    file: std::fs::File,
    budget: Arc<Spill>,
    taken: AtomicU64,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        self.budget.give(self.taken.load(Ordering::Relaxed));
    }
}

/// A chunk on its way: in memory (holding one of the window's places) or
/// in the spill file.
#[derive(Debug)]
enum Piece {
    Memory(Bytes, OwnedSemaphorePermit),
    Spilled {
        file: Arc<SpillFile>,
        at: u64,
        len: usize,
    },
}

/// The blocking thread's end: a `Write` whose bytes reach the client
/// through the transport's [`forward`]. Dropping it sends what is
/// buffered. A write fails with `BrokenPipe` once the client is gone or
/// was dropped for its pace.
#[derive(Debug)]
pub struct Writer {
    tx: mpsc::UnboundedSender<Piece>,
    window: Arc<Semaphore>,
    spill: Arc<Spill>,
    file: Option<Arc<SpillFile>>,
    spilled: u64,
    buf: Vec<u8>,
    runtime: tokio::runtime::Handle,
    /// Given back before the writer first waits for its client.
    until_waiting: Option<OwnedSemaphorePermit>,
}

/// The transport's end: the chunks in order.
#[derive(Debug)]
pub struct Source {
    rx: mpsc::UnboundedReceiver<Piece>,
    window: Arc<Semaphore>,
    /// A chunk [`Source::started`] took, not yet given out.
    first: Option<std::io::Result<(Bytes, Taken)>>,
}

/// A writer and its source, spilling to `spill`. Call it within the
/// runtime; write from a blocking thread.
pub fn channel(spill: Arc<Spill>) -> (Writer, Source) {
    let (tx, rx) = mpsc::unbounded_channel();
    let window = Arc::new(Semaphore::new(WINDOW));
    (
        Writer {
            tx,
            window: window.clone(),
            spill,
            file: None,
            spilled: 0,
            buf: Vec::with_capacity(CHUNK),
            runtime: tokio::runtime::Handle::current(),
            until_waiting: None,
        },
        Source {
            rx,
            window,
            first: None,
        },
    )
}

fn gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
}

impl Writer {
    /// Holds `permit` (a listing writer's, `crate::Host::admit_listing`)
    /// while this writer makes progress, and gives it back before the
    /// writer first waits for its client: a client that reads nothing
    /// never keeps a permit others wait for.
    pub fn release_before_waiting(&mut self, permit: Option<OwnedSemaphorePermit>) {
        self.until_waiting = permit;
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let piece = match self.window.clone().try_acquire_owned() {
            Ok(permit) => Piece::Memory(self.take_buf(), permit),
            Err(tokio::sync::TryAcquireError::Closed) => return Err(gone()),
            Err(tokio::sync::TryAcquireError::NoPermits) => match self.spill_buf() {
                Some(piece) => piece,
                // No room on disk: wait for the client (it is dropped by
                // `forward` when it does not move, which closes the window).
                None => {
                    drop(self.until_waiting.take());
                    let permit = self
                        .runtime
                        .block_on(self.window.clone().acquire_owned())
                        .map_err(|_| gone())?;
                    Piece::Memory(self.take_buf(), permit)
                }
            },
        };
        self.tx.send(piece).map_err(|_| gone())
    }

    fn take_buf(&mut self) -> Bytes {
        Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)))
    }

    /// Writes the buffer to the spill file, when this response and the
    /// budget have room.
    fn spill_buf(&mut self) -> Option<Piece> {
        let len = self.buf.len();
        if self.spilled + len as u64 > self.spill.per_response || !self.spill.take(len as u64) {
            return None;
        }
        if self.file.is_none() {
            let made = match &self.spill.dir {
                Some(dir) => tempfile::tempfile_in(dir),
                None => tempfile::tempfile(),
            };
            match made {
                Ok(file) => {
                    self.file = Some(Arc::new(SpillFile {
                        file,
                        budget: self.spill.clone(),
                        taken: AtomicU64::new(0),
                    }))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a response could not spill to disk");
                    self.spill.give(len as u64);
                    return None;
                }
            }
        }
        let file = self.file.clone()?;
        file.taken.fetch_add(len as u64, Ordering::Relaxed);
        let at = self.spilled;
        if let Err(e) = file.file.write_all_at(&self.buf, at) {
            tracing::warn!(error = %e, "a response could not spill to disk");
            // The bytes taken go back with the file.
            self.spilled = self.spill.per_response;
            return None;
        }
        self.spilled += len as u64;
        self.buf.clear();
        Some(Piece::Spilled { file, at, len })
    }
}

impl Write for Writer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let mut rest = data;
        while !rest.is_empty() {
            let n = rest.len().min(CHUNK - self.buf.len());
            self.buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if self.buf.len() >= CHUNK {
                self.send()?;
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.send();
    }
}

impl Source {
    /// Waits for the first chunk: false when the writer ended without
    /// writing anything (the caller can still answer with an error of its
    /// own). The chunk stays for [`Source::next`].
    pub async fn started(&mut self) -> bool {
        if self.first.is_none() {
            self.first = self.next().await;
        }
        self.first.is_some()
    }

    /// The next chunk, `None` once the writer is gone and all was taken;
    /// an error when a spilled chunk cannot be read back (logged). The
    /// window's place is held by the returned guard until it is dropped.
    pub async fn next(&mut self) -> Option<std::io::Result<(Bytes, Taken)>> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        match self.rx.recv().await? {
            Piece::Memory(bytes, permit) => Some(Ok((bytes, Taken(Some(permit))))),
            Piece::Spilled { file, at, len } => {
                let read = tokio::task::spawn_blocking(move || {
                    let mut buf = vec![0u8; len];
                    file.file.read_exact_at(&mut buf, at).map(|()| buf)
                })
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)));
                Some(match read {
                    Ok(buf) => Ok((Bytes::from(buf), Taken(None))),
                    Err(e) => {
                        tracing::error!(error = %e, "reading a spilled response back failed");
                        Err(std::io::Error::other("reading the response failed"))
                    }
                })
            }
        }
    }

    /// Ends the response: the writer's next write fails with `BrokenPipe`.
    pub fn close(&mut self) {
        self.window.close();
        self.rx.close();
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.close();
    }
}

/// A chunk's place in the window, given back when dropped (once the
/// transport took the chunk).
#[derive(Debug)]
pub struct Taken(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

/// Why [`forward`] ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The transport failed (the client went away).
    Gone,
    /// The client did not keep [`Pace`]: it was dropped.
    TooSlow,
    /// A spilled chunk could not be read back.
    Failed,
}

/// Sends every chunk of `source` with `send` (true: the transport took
/// it) until the writer is gone, the client is too slow for `pace`, or
/// `send` fails; then closes the source, so the writer's next write fails.
///
/// # Errors
/// [`Ended`], after logging a slow client at `info`.
pub async fn forward<F, Fut>(mut source: Source, pace: Pace, mut send: F) -> Result<u64, Ended>
where
    F: FnMut(Bytes) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut patience = Patience::new(pace);
    let mut sent = 0u64;
    while let Some(next) = source.next().await {
        let Ok((chunk, taken)) = next else {
            return Err(Ended::Failed);
        };
        let n = chunk.len() as u64;
        if let Err(ended) = patience.send(n, send(chunk)).await {
            if ended == Ended::TooSlow {
                tracing::info!(
                    sent,
                    stall_ms = pace.stall.as_millis() as u64,
                    min_rate = pace.min_rate,
                    "client stopped reading the response (slower than the minimum rate); the response ends"
                );
            }
            return Err(ended);
        }
        sent += n;
        drop(taken);
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_is_spent_waiting_and_earned_by_bytes_up_to_the_stall() {
        let pace = Pace {
            stall: Duration::from_secs(60),
            min_rate: 1024,
        };
        let mut p = Patience::new(pace);
        assert_eq!(p.allowed(), Duration::from_secs(60));
        // 64 KiB after 10 s: 64 s earned, capped at the stall.
        p.moved(Duration::from_secs(10), 64 << 10);
        assert_eq!(p.allowed(), Duration::from_secs(60));
        // 1 KiB after 50 s: 60 - 50 + 1.
        p.moved(Duration::from_secs(50), 1024);
        assert_eq!(p.allowed(), Duration::from_secs(11));
        // Slower than the rate: the credit runs out.
        p.moved(Duration::from_secs(11), 0);
        assert_eq!(p.allowed(), Duration::ZERO);
        // No rate: each wait gets the whole stall.
        let mut q = Patience::new(Pace {
            min_rate: 0,
            ..pace
        });
        q.moved(Duration::from_secs(59), 0);
        assert_eq!(q.allowed(), Duration::from_secs(60));
    }

    fn collect(source: Source) -> Vec<u8> {
        let rt = tokio::runtime::Handle::current();
        rt.block_on(async {
            let got = Arc::new(std::sync::Mutex::new(Vec::new()));
            let into = got.clone();
            forward(source, Pace::default_for_responses(), move |c| {
                let into = into.clone();
                async move {
                    into.lock().unwrap().extend_from_slice(&c);
                    true
                }
            })
            .await
            .unwrap();
            let v = got.lock().unwrap().clone();
            v
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_spills_past_its_window_and_finishes_without_a_reader() {
        let spill = Spill::new(None, 1 << 20, 1 << 20);
        let (mut w, source) = channel(spill.clone());
        let data: Vec<u8> = (0..(600 << 10)).map(|i| (i * 7 % 251) as u8).collect();
        let expect = data.clone();
        // Nobody reads while it writes: 600 KiB pass the 128 KiB window.
        let written = tokio::task::spawn_blocking(move || {
            w.write_all(&data).unwrap();
            drop(w);
        });
        tokio::time::timeout(Duration::from_secs(10), written)
            .await
            .expect("the writer did not wait for the client")
            .unwrap();
        assert!(spill.left() < 1 << 20);
        let got = tokio::task::spawn_blocking(move || collect(source))
            .await
            .unwrap();
        assert_eq!(got, expect);
        // The spill is given back with the response.
        assert_eq!(spill.left(), 1 << 20);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn without_room_to_spill_a_client_that_takes_nothing_is_dropped() {
        let (mut w, source) = channel(Spill::none());
        let writing = tokio::task::spawn_blocking(move || w.write_all(&vec![1u8; 1 << 20]));
        let pace = Pace {
            stall: Duration::from_millis(300),
            min_rate: 1 << 20,
        };
        // The client takes one chunk, then nothing.
        let mut first = true;
        let ended = forward(source, pace, move |_| {
            let stall = !first;
            first = false;
            async move {
                if stall {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                true
            }
        })
        .await;
        assert_eq!(ended, Err(Ended::TooSlow));
        let wrote = tokio::time::timeout(Duration::from_secs(10), writing)
            .await
            .expect("the writer was released")
            .unwrap();
        assert_eq!(wrote.unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
    }
}
