//! The access log, response counters and health endpoints: what an
//! operator watches from outside.
//!
//! Every request on the main listener gets one log line (target
//! `gitstow::access`, level INFO — DEBUG for `/healthz` and `/readyz`
//! answered 200 — in the server's `--log-format`) when its
//! response has been sent in full or the client went away: `method`,
//! `path` (at most 256 bytes; of the query only `service=`, so a secret a
//! client put in it is never logged),
//! `repo` and `service` when the request reached one, `status`,
//! `bytes_in` (request body bytes read), `bytes_out` (response body bytes
//! sent), `ms`, `client` (the peer address) and `token` (the token's name,
//! never its secret). Counted in `gitstow_http_responses_total{status}`
//! (when the response starts) and `gitstow_http_requests_in_flight` (until
//! the log line).
//!
//! `/healthz` (the process answers) and `/readyz` (the store answered a
//! probe within [`PROBE_TIMEOUT`], and the server is not shutting down)
//! need no credentials and never touch a repository; the probe is a HEAD
//! of the access document, done at most once per [`PROBE_EVERY`].

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use gitstow_store::ObjectStore;

use crate::metrics as m;

/// What the handler learnt about a request, for its log line (put in the
/// response's extensions).
#[derive(Debug, Clone, Default)]
pub struct Logged {
    /// The repository's name.
    pub repo: Option<String>,
    /// `upload-pack`, `receive-pack` (with `info/refs` for advertisements).
    pub service: Option<&'static str>,
    /// The token's name.
    pub token: Option<String>,
}

/// Longest path logged, in bytes.
const MAX_PATH: usize = 256;

/// How long `/readyz` waits for the store.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a store probe's answer is reused.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Readiness: the last store probe and whether shutdown began.
#[derive(Debug, Default)]
pub struct Health {
    shutting_down: AtomicBool,
    last_probe: Mutex<Option<(Instant, bool)>>,
}

impl Health {
    /// From now on `/readyz` answers 503.
    pub fn shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    /// `/healthz` or `/readyz`, or `None` for any other path.
    pub async fn answer(&self, path: &str, store: &Arc<dyn ObjectStore>) -> Option<Response> {
        match path {
            "/healthz" => Some(plain(StatusCode::OK, "ok")),
            "/readyz" => Some(self.ready(store).await),
            _ => None,
        }
    }

    async fn ready(&self, store: &Arc<dyn ObjectStore>) -> Response {
        if self.shutting_down.load(Ordering::Relaxed) {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
        }
        let cached = *self.last_probe.lock().unwrap_or_else(|e| e.into_inner());
        let ok = match cached {
            Some((at, ok)) if at.elapsed() < PROBE_EVERY => ok,
            _ => {
                let store = store.clone();
                let probe = tokio::task::spawn_blocking(move || {
                    store.head(gitstow_service::gate::ACCESS_KEY).is_ok()
                });
                let ok = matches!(
                    tokio::time::timeout(PROBE_TIMEOUT, probe).await,
                    Ok(Ok(true))
                );
                if !ok {
                    tracing::warn!("readiness probe: the store did not answer");
                }
                *self.last_probe.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((Instant::now(), ok));
                ok
            }
        };
        if ok {
            plain(StatusCode::OK, "ready")
        } else {
            plain(StatusCode::SERVICE_UNAVAILABLE, "the store does not answer")
        }
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut resp = Response::new(Body::from(format!("{text}\n")));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// The path of `uri` as the log shows it: the path, and of the query only
/// the `service` key (what `info/refs` is asked for). Anything else a
/// client put in the query (a token as `access_token=`, say) is left out.
fn logged_path(uri: &axum::http::Uri) -> String {
    let path = uri.path();
    let service = uri.query().and_then(|q| {
        q.split('&')
            .find(|kv| kv.starts_with("service="))
            .map(str::to_owned)
    });
    match service {
        Some(kv) => format!("{path}?{kv}"),
        None => path.to_owned(),
    }
}

/// The middleware: counts the request's bytes both ways and logs it when
/// its response ends.
pub async fn log(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let mut path = logged_path(request.uri());
    if path.len() > MAX_PATH {
        let mut cut = MAX_PATH;
        while !path.is_char_boundary(cut) {
            cut -= 1;
        }
        path.truncate(cut);
        path.push('…');
    }
    let client = request
        .extensions()
        .get::<crate::auth::ClientAddr>()
        .map(|c| c.0);
    let bytes_in = Arc::new(AtomicU64::new(0));
    let request = request.map(|body| {
        Body::new(Counted {
            inner: body,
            bytes: bytes_in.clone(),
            on_drop: None,
        })
    });
    metrics::gauge!(m::HTTP_IN_FLIGHT).increment(1.0);
    let response = next.run(request).await;
    let status = response.status().as_u16();
    metrics::counter!(m::HTTP_RESPONSES, "status" => status.to_string()).increment(1);
    let logged = response
        .extensions()
        .get::<Logged>()
        .cloned()
        .unwrap_or_default();
    let line = Line {
        method: method.to_string(),
        path,
        client,
        status,
        logged,
        started,
        bytes_in,
    };
    response.map(|body| {
        Body::new(Counted {
            inner: body,
            bytes: Arc::new(AtomicU64::new(0)),
            on_drop: Some(line),
        })
    })
}

/// A request's log line, written when its response body is dropped.
struct Line {
    method: String,
    path: String,
    client: Option<std::net::IpAddr>,
    status: u16,
    logged: Logged,
    started: Instant,
    bytes_in: Arc<AtomicU64>,
}

impl Line {
    fn write(&self, bytes_out: u64) {
        metrics::gauge!(m::HTTP_IN_FLIGHT).decrement(1.0);
        // A load balancer's probes that pass would fill the log: DEBUG.
        let probe = self.status == 200
            && matches!(self.path.split('?').next(), Some("/healthz" | "/readyz"));
        macro_rules! line {
            ($level:expr) => {
                tracing::event!(
            target: "gitstow::access",
            $level,
            method = %self.method,
            path = %self.path,
            repo = self.logged.repo.as_deref(),
            service = self.logged.service,
            status = self.status,
            bytes_in = self.bytes_in.load(Ordering::Relaxed),
            bytes_out,
            ms = self.started.elapsed().as_millis() as u64,
            client = self.client.map(|c| c.to_string()),
            token = self.logged.token.as_deref(),
            "request"
                )
            };
        }
        if probe {
            line!(tracing::Level::DEBUG);
        } else {
            line!(tracing::Level::INFO);
        }
    }
}

/// A body that counts the data bytes through it (and, for a response, logs
/// the request when it is dropped: sent in full, or the client gone).
struct Counted {
    inner: Body,
    bytes: Arc<AtomicU64>,
    on_drop: Option<Line>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(line) = self.on_drop.take() {
            line.write(self.bytes.load(Ordering::Relaxed));
        }
    }
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::logged_path;

    #[test]
    fn only_the_service_is_kept_of_the_query() {
        let p = |s: &str| logged_path(&s.parse().unwrap());
        assert_eq!(
            p("/org/r.git/info/refs?service=git-upload-pack"),
            "/org/r.git/info/refs?service=git-upload-pack"
        );
        assert_eq!(
            p("/org/r.git/info/refs?access_token=s3cret&service=git-receive-pack"),
            "/org/r.git/info/refs?service=git-receive-pack"
        );
        assert_eq!(p("/metrics?token=s3cret"), "/metrics");
        assert_eq!(p("/healthz"), "/healthz");
    }
}
