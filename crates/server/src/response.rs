//! Streaming a blocking producer's output as an HTTP response body.
//!
//! Receive-pack and upload-pack run on blocking threads and write to a
//! [`ChannelWriter`]; the async side forwards chunks to the client as they come.
//! If the producer fails before writing anything, the handler can still answer
//! with an HTTP error status instead of a 200.

use std::io::Write;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::mpsc;

/// A `Write` that sends what it is given to the response stream, in chunks of
/// at least 64 KiB unless flushed, counting the bytes in
/// `gitstow_sent_bytes_total{service}`. A client that takes nothing for
/// [`gitstow_service::SEND_STALL`] (it stopped reading, e.g. a suspended `git clone`) ends
/// the response with `BrokenPipe`, so it cannot hold a fetch slot and a
/// thread forever.
pub struct ChannelWriter {
    tx: mpsc::Sender<Bytes>,
    buf: Vec<u8>,
    sent: metrics::Counter,
    runtime: tokio::runtime::Handle,
}

const CHUNK: usize = 64 * 1024;

use gitstow_service::send_stall;

impl ChannelWriter {
    /// A writer for `service`'s response (`receive-pack`, `upload-pack`) and
    /// the receiving end for the response. Call it within the runtime; write
    /// to it from a blocking thread.
    pub fn new(service: &'static str) -> (Self, mpsc::Receiver<Bytes>) {
        let (tx, rx) = mpsc::channel(16);
        (
            ChannelWriter {
                tx,
                buf: Vec::with_capacity(CHUNK),
                sent: metrics::counter!(crate::metrics::SENT_BYTES, "service" => service),
                runtime: tokio::runtime::Handle::current(),
            },
            rx,
        )
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.sent.increment(self.buf.len() as u64);
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        let sent = self
            .runtime
            .block_on(tokio::time::timeout(send_stall(), self.tx.send(chunk)));
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "client went away",
            )),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "client stopped reading the response",
            )),
        }
    }
}

impl Write for ChannelWriter {
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

impl Drop for ChannelWriter {
    fn drop(&mut self) {
        let _ = self.send();
    }
}

/// Headers git http-backend sends on dynamic responses (no caching).
pub fn no_cache(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert(
        header::EXPIRES,
        HeaderValue::from_static("Fri, 01 Jan 1980 00:00:00 GMT"),
    );
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, max-age=0, must-revalidate"),
    );
}

/// A plain-text error response.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let mut msg = message.into();
    msg.push('\n');
    let mut resp = (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        msg,
    )
        .into_response();
    no_cache(&mut resp);
    resp
}

/// A refusal git shows: HTTP 200 with `content_type` and one `ERR <message>`
/// pkt-line (gitprotocol-pack(5)), which git prints as `fatal: remote
/// error: <message>` (it shows nothing of a POST's HTTP error body).
pub fn git_error(content_type: &'static str, message: &str) -> Response {
    let mut body = Vec::new();
    gitstow_protocol::write_error(&mut body, message).expect("writing to a Vec");
    let mut resp = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    no_cache(&mut resp);
    resp
}

/// Runs `produce` on a blocking thread and streams what it writes as a
/// `content_type` response of `service`. If it fails before writing,
/// `on_error` turns the error into the response.
pub async fn stream<T, E, F>(
    service: &'static str,
    content_type: &'static str,
    produce: F,
    on_error: impl FnOnce(E) -> Response + Send,
) -> Response
where
    T: Send + 'static,
    E: Send + 'static,
    F: FnOnce(&mut ChannelWriter) -> Result<T, E> + Send + 'static,
{
    let (mut writer, mut rx) = ChannelWriter::new(service);
    let task = tokio::task::spawn_blocking(move || {
        let result = produce(&mut writer);
        drop(writer);
        result
    });
    let first = rx.recv().await;
    let body = match first {
        Some(first) => {
            let rest = tokio_stream::wrappers::ReceiverStream::new(rx);
            let stream = futures_util::stream::once(async move { first })
                .chain(rest)
                .map(Ok::<Bytes, std::io::Error>);
            tokio::spawn(async move {
                if let Err(e) = task.await {
                    tracing::error!(error = %e, "request task panicked");
                }
            });
            Body::from_stream(stream)
        }
        None => match task.await {
            Ok(Ok(_)) => Body::empty(),
            Ok(Err(e)) => return on_error(e),
            Err(e) => {
                tracing::error!(error = %e, "request task panicked");
                return error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
            }
        },
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    no_cache(&mut resp);
    resp
}

use futures_util::StreamExt;
