//! The HTTP application: smart-HTTP routes of `git http-backend`
//! (gitprotocol-http(5)) over axum.
//!
//! - `GET  /<name>.git/info/refs?service=git-upload-pack|git-receive-pack`
//! - `POST /<name>.git/git-upload-pack`
//! - `POST /<name>.git/git-receive-pack`
//!
//! and the operator's endpoints:
//!
//! - `GET /metrics`: Prometheus text (see [`crate::metrics`])
//! - `GET /debug/pprof/heap`: a jemalloc heap profile in pprof format (gzipped
//!   protobuf), when the daemon runs with `--heap-profiling`

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use gitstow_protocol::{ProtocolVersion, Service};
use gitstow_service::fault::ServerFault;
use gitstow_service::{Fault, Host, Refusal};
use gitstow_store::ObjectStore;

use gitstow_service::gate::Level;

use crate::auth::Principal;
use crate::body::{self, BodyError};
use crate::metrics::{self as m, Metrics};
use crate::repo_name::{self, Route};
use crate::response::{self, error};

/// Settings of the HTTP application.
#[derive(Debug, Clone)]
pub struct Config {
    /// The services' settings (queues, receive-pack, upload-pack,
    /// maintenance, caches, webhooks), shared with every transport.
    pub service: gitstow_service::Config,
    /// Access control.
    pub auth: gitstow_service::gate::GateConfig,
    /// Git LFS.
    pub lfs: crate::lfs::LfsConfig,
}

/// Shared state of all requests.
#[derive(Debug)]
pub struct App {
    /// The services every transport calls.
    pub(crate) host: Arc<Host>,
    /// Who may do what.
    gate: gitstow_service::gate::Gate,
    /// `/healthz`, `/readyz`.
    health: crate::request_log::Health,
    pub(crate) metrics: Option<Metrics>,
    pub(crate) config: Config,
    /// The LFS transfer key, read (or made) on first use.
    lfs_key: tokio::sync::OnceCell<gitstow_lfs::grant::TransferKey>,
}

impl App {
    /// An application serving repositories from `store`, answering `/metrics`
    /// from `metrics` (404 when `None`).
    pub fn new(store: Arc<dyn ObjectStore>, config: Config, metrics: Option<Metrics>) -> Arc<Self> {
        let host = Host::new(store.clone(), config.service.clone());
        let gate = gitstow_service::gate::Gate::new(store, config.auth.clone());
        Arc::new(App {
            host,
            gate,
            health: Default::default(),
            metrics,
            config,
            lfs_key: tokio::sync::OnceCell::new(),
        })
    }

    /// The store's LFS transfer key ([`gitstow_lfs::grant::TransferKey`]),
    /// read or made on first use and kept.
    pub(crate) async fn lfs_key(
        &self,
    ) -> Result<gitstow_lfs::grant::TransferKey, gitstow_store::Error> {
        let store = self.host.store().clone();
        self.lfs_key
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || {
                    gitstow_lfs::grant::TransferKey::load_or_create(store.as_ref())
                })
                .await
                .map_err(|e| gitstow_store::Error::Io {
                    key: gitstow_lfs::keys::TRANSFER_KEY.into(),
                    source: std::io::Error::other(e.to_string()),
                })?
            })
            .await
            .cloned()
    }

    /// The services (for another transport in the same process).
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Access control (for another transport in the same process).
    pub fn gate(&self) -> &gitstow_service::gate::Gate {
        &self.gate
    }

    /// Shutdown began: `/readyz` answers 503 from now on.
    pub fn shutting_down(&self) {
        self.health.shutting_down();
    }
}

/// The axum router, every request logged ([`crate::request_log`]).
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .fallback(handle)
        .with_state(app)
        .layer(axum::middleware::from_fn(crate::request_log::log))
}

/// The protocol version of the request's `Git-Protocol` header.
fn protocol_version(headers: &HeaderMap) -> ProtocolVersion {
    headers
        .get("git-protocol")
        .and_then(|v| v.to_str().ok())
        .map_or(ProtocolVersion::V0, ProtocolVersion::from_git_protocol)
}

fn wants_v2(headers: &HeaderMap) -> bool {
    protocol_version(headers) == ProtocolVersion::V2
}

pub(crate) fn is_gzip(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim();
            v.eq_ignore_ascii_case("gzip") || v.eq_ignore_ascii_case("x-gzip")
        })
}

pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

pub(crate) fn body_error(e: BodyError) -> Response {
    match e {
        BodyError::TooLarge(_) => error(StatusCode::PAYLOAD_TOO_LARGE, e.to_string()),
        BodyError::TooSlow(_) => error(StatusCode::REQUEST_TIMEOUT, e.to_string()),
        BodyError::BadGzip(_) | BodyError::Transport(_) => {
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
        BodyError::Io(_) => server_error("spooling the request body", &e),
        BodyError::Spool { ref error, .. } => server_error("spooling the request body", error),
    }
}

async fn handle(State(app): State<Arc<App>>, request: axum::extract::Request) -> Response {
    let mut logged = crate::request_log::Logged::default();
    let mut resp = route(&app, request, &mut logged).await;
    resp.extensions_mut().insert(logged);
    resp
}

/// Answers a request; says in `logged` what it reached.
async fn route(
    app: &Arc<App>,
    request: axum::extract::Request,
    logged: &mut crate::request_log::Logged,
) -> Response {
    let app = app.clone();
    let (parts, body) = request.into_parts();
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    let peer = parts
        .extensions
        .get::<crate::auth::ClientAddr>()
        .map(|c| c.0);
    if let Some(resp) = app.health.answer(uri.path(), app.host.store()).await {
        return resp;
    }
    if crate::operator::is_operator_endpoint(uri.path()) {
        if let Err(resp) = crate::auth::check(
            &app.gate,
            &headers,
            uri.authority().map(|a| a.as_str()),
            peer,
            None,
            Level::Admin,
        )
        .await
        {
            return resp;
        }
    }
    if let Some(resp) = crate::operator::operator_endpoint(&app, &method, uri.path()).await {
        return resp;
    }
    let Some(route) = repo_name::route(uri.path()) else {
        return error(StatusCode::NOT_FOUND, "not found");
    };
    let name = match &route {
        Route::InfoRefs(n)
        | Route::UploadPack(n)
        | Route::ReceivePack(n)
        | Route::Lfs(n, _)
        | Route::MirrorSync(n)
        | Route::Other(n) => *n,
    };
    if let Err(e) = repo_name::validate(name) {
        if matches!(route, Route::Lfs(..)) {
            return crate::lfs::lfs_error(StatusCode::BAD_REQUEST, e.to_string());
        }
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    let name = name.to_owned();
    logged.repo = Some(name.clone());
    if let Route::Lfs(_, rest) = route {
        let query = uri.query().unwrap_or("");
        return crate::lfs::route(app, name, rest, query, method, headers, body, peer, logged)
            .await;
    }
    if let Route::MirrorSync(_) = route {
        let authority = uri.authority().map(|a| a.as_str());
        return crate::mirror_hook::answer(
            app.clone(),
            name,
            method,
            headers,
            authority,
            peer,
            body,
            logged,
        )
        .await;
    }
    let service = service_from_query(uri.query().unwrap_or(""));
    logged.service = match (&route, service) {
        (Route::InfoRefs(_), Some(Service::UploadPack)) => Some("info/refs upload-pack"),
        (Route::InfoRefs(_), Some(Service::ReceivePack)) => Some("info/refs receive-pack"),
        (Route::UploadPack(_), _) => Some("upload-pack"),
        (Route::ReceivePack(_), _) => Some("receive-pack"),
        _ => None,
    };
    let needed = match &route {
        Route::ReceivePack(_) => Level::Write,
        Route::InfoRefs(_) if service == Some(Service::ReceivePack) => Level::Write,
        _ => Level::Read,
    };
    let principal = match crate::auth::check(
        &app.gate,
        &headers,
        uri.authority().map(|a| a.as_str()),
        peer,
        Some(&name),
        needed,
    )
    .await
    {
        Ok(p) => p,
        Err(resp) => return resp,
    };
    logged.token = principal.token.clone();
    match (route, method) {
        (Route::InfoRefs(_), Method::GET) => {
            info_refs(app, name, principal, uri.query().unwrap_or(""), &headers).await
        }
        (Route::UploadPack(_), Method::POST) => {
            match expect_content_type(&headers, "application/x-git-upload-pack-request") {
                Some(resp) => resp,
                None => upload_pack(app, name, principal, headers, body).await,
            }
        }
        (Route::ReceivePack(_), Method::POST) => {
            match expect_content_type(&headers, "application/x-git-receive-pack-request") {
                Some(resp) => resp,
                None => crate::push::receive_pack(app, name, principal, headers, body).await,
            }
        }
        (Route::InfoRefs(_) | Route::UploadPack(_) | Route::ReceivePack(_), _) => {
            error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        (Route::Lfs(..) | Route::MirrorSync(_), _) => error(StatusCode::NOT_FOUND, "not found"),
        (Route::Other(_), _) => error(
            StatusCode::NOT_FOUND,
            "not found (gitstow serves smart HTTP only)",
        ),
    }
}

/// git http-backend's check: a POST must carry the service's request type (415 otherwise).
fn expect_content_type(headers: &HeaderMap, expected: &str) -> Option<Response> {
    let got = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    (got != expected).then(|| {
        error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Expected POST with Content-Type '{expected}'"),
        )
    })
}

fn service_from_query(query: &str) -> Option<Service> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("service="))
        .and_then(Service::from_name)
}

/// The HTTP answer to a [`Refusal`]: 404, 503 with `Retry-After`, or 500.
pub(crate) fn refusal(r: Refusal) -> Response {
    match r {
        Refusal::NotFound(_) => error(StatusCode::NOT_FOUND, r.to_string()),
        Refusal::Busy(_) => error(StatusCode::SERVICE_UNAVAILABLE, r.to_string()),
        Refusal::Unavailable(_) => busy_error(r.to_string()),
        Refusal::Failed => error(StatusCode::INTERNAL_SERVER_ERROR, r.to_string()),
    }
}

/// A server-side failure while `context`: the error and its chain go to the
/// log; the client gets the [`ServerFault`]'s answer ([`fault_response`]),
/// whose body names no path and no internal error.
pub(crate) fn server_error(context: &str, e: &(dyn std::error::Error + 'static)) -> Response {
    fault_response(Fault::server(context, e))
}

/// The HTTP answer to a failed command: 400 with the client's fault, 503
/// with `Retry-After` for a fault that passes (out of space, a store that
/// does not answer), else 500.
pub(crate) fn fault_response(fault: Fault) -> Response {
    match fault {
        Fault::BadRequest(why) => error(StatusCode::BAD_REQUEST, why),
        Fault::Server(f) if f.passes() => busy_error(f.text().into()),
        Fault::Server(f) => error(StatusCode::INTERNAL_SERVER_ERROR, f.text()),
    }
}

/// HTTP 503 with `Retry-After: 60` and `message` (git shows it as `remote: …`).
pub(crate) fn busy_error(message: String) -> Response {
    let mut resp = error(StatusCode::SERVICE_UNAVAILABLE, message);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("60"));
    resp
}

/// Refs above which a listing waits for a fetch slot (see
/// [`gitstow_service::LARGE_LISTING`]).
pub const LARGE_LISTING: usize = gitstow_service::LARGE_LISTING;

async fn info_refs(
    app: Arc<App>,
    name: String,
    principal: Principal,
    query: &str,
    headers: &HeaderMap,
) -> Response {
    let requested = query.split('&').find_map(|kv| kv.strip_prefix("service="));
    let Some(service) = service_from_query(query) else {
        return match requested {
            Some(other) => error(StatusCode::FORBIDDEN, format!("unsupported service '{other}'")),
            None => error(
                StatusCode::FORBIDDEN,
                "dumb HTTP is not supported: request info/refs with ?service=git-upload-pack or git-receive-pack",
            ),
        };
    };
    let mut advertisement = match app
        .host
        .advertisement(&name, &principal, service, protocol_version(headers))
        .await
    {
        Ok(a) => a,
        Err(r) => return refusal(r),
    };
    let content_type = service.advertisement_content_type();
    // Ref tables are read from the store (off the async threads), and the
    // advertisement streams as they are read: a listing of millions of
    // refs holds a line and a batch, not their list.
    response::stream(
        &app.host,
        "info/refs",
        content_type,
        move |out| {
            out.release_before_waiting(advertisement.take_listing_permit());
            advertisement.write(out, true)
        },
        fault_response,
    )
    .await
}

async fn upload_pack(
    app: Arc<App>,
    name: String,
    principal: Principal,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // The body is read before the request queues for a fetch slot (a
    // client that trickles holds no slot), in memory up to 64 KiB and in a
    // temp file beyond (a waiting request holds little memory).
    let request = match body::buffer(
        body,
        is_gzip(&headers),
        app.host.config().limits.max_fetch_request_bytes,
        app.host.config().receive.staging_dir.as_deref(),
        app.host.config().limits.pace,
    )
    .await
    {
        Ok(r) => r,
        Err(BodyError::Io(e)) => {
            // Said in the protocol: git shows nothing of a POST's error body.
            tracing::error!(repo = %name, error = %e, "spooling the fetch request failed");
            return response::git_error(
                "application/x-git-upload-pack-result",
                ServerFault::of(&e).text(),
            );
        }
        Err(e) => return body_error(e),
    };
    let (mut request, received) = request;
    let v2 = wants_v2(&headers);
    // A v2 `ls-refs` only lists refs: it does not queue behind clones,
    // unless the repository has so many refs that the listing is not cheap.
    let ls_refs = v2 && gitstow_service::fetch::is_ls_refs(&mut request);
    metrics::counter!(m::RECEIVED_BYTES, "service" => "upload-pack").increment(received);
    let mut fetch = match app.host.fetch(&name, &principal, v2, ls_refs).await {
        Ok(f) => f,
        // Said in the protocol: git shows nothing of a POST's error body.
        Err(Refusal::Busy(busy)) => {
            return response::git_error("application/x-git-upload-pack-result", &busy)
        }
        Err(r) => return refusal(r),
    };
    response::stream(
        &app.host,
        "upload-pack",
        "application/x-git-upload-pack-result",
        move |out| {
            out.release_before_waiting(fetch.take_listing_permit());
            fetch.run(&mut request, out)
        },
        fault_response,
    )
    .await
}
