//! Streaming a blocking producer's output as an HTTP response body.
//!
//! Receive-pack and upload-pack run on blocking threads and write to the
//! service's [`gitstow_service::output::Writer`] (a small window in memory,
//! spilled to disk past it); a task forwards its chunks to hyper at the
//! client's pace ([`gitstow_service::output::forward`]), one chunk at a
//! time. If the producer fails before writing anything, the handler can
//! still answer with an HTTP error status instead of a 200.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use gitstow_service::output::{self, Writer};
use gitstow_service::Host;
use tokio::sync::mpsc;

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
/// `content_type` response of `service` (its bytes counted in
/// `gitstow_sent_bytes_total{service}`), at the pace `host` asks of
/// clients: one that does not keep it loses the rest of the response,
/// which ends as a broken body, not a complete one. If `produce` fails
/// before writing, `on_error` turns the error into the response.
pub async fn stream<T, E, F>(
    host: &Host,
    service: &'static str,
    content_type: &'static str,
    produce: F,
    on_error: impl FnOnce(E) -> Response + Send,
) -> Response
where
    T: Send + 'static,
    E: Send + 'static,
    F: FnOnce(&mut Writer) -> Result<T, E> + Send + 'static,
{
    let (mut writer, mut source) = host.response();
    let task = tokio::task::spawn_blocking(move || {
        let result = produce(&mut writer);
        drop(writer);
        result
    });
    let body = if source.started().await {
        tokio::spawn(async move {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "request task panicked");
            }
        });
        body_of(source, host.response_pace(), service)
    } else {
        match task.await {
            Ok(Ok(_)) => Body::empty(),
            Ok(Err(e)) => return on_error(e),
            Err(e) => {
                tracing::error!(error = %e, "request task panicked");
                return error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
            }
        }
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    no_cache(&mut resp);
    resp
}

/// The body that hyper takes `source` through, one chunk at a time, at
/// `pace`; a response cut for its pace (or a spill that cannot be read)
/// ends in an error, so hyper breaks the connection rather than ending
/// the body as if it were whole.
pub fn body_of(source: output::Source, pace: output::Pace, service: &'static str) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let cut = Arc::new(AtomicBool::new(false));
    let cut_by_forward = cut.clone();
    let sent = metrics::counter!(crate::metrics::SENT_BYTES, "service" => service);
    tokio::spawn(async move {
        let forwarded = output::forward(source, pace, |chunk| {
            let (tx, sent) = (tx.clone(), sent.clone());
            async move {
                let n = chunk.len() as u64;
                let ok = tx.send(chunk).await.is_ok();
                if ok {
                    sent.increment(n);
                }
                ok
            }
        })
        .await;
        if forwarded.is_err() {
            cut_by_forward.store(true, Ordering::Release);
        }
    });
    let stream =
        futures_util::stream::unfold((rx, cut, false), |(mut rx, cut, ended)| async move {
            if ended {
                return None;
            }
            match rx.recv().await {
                Some(chunk) => Some((Ok(chunk), (rx, cut, false))),
                None if cut.load(Ordering::Acquire) => Some((
                    Err(std::io::Error::new(
                        std::io::ErrorKind::BrokenPipe,
                        "the response was cut",
                    )),
                    (rx, cut, true),
                )),
                None => None,
            }
        });
    Body::from_stream(stream)
}
