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
use gitstow_odb::{IndexCache, Repository, StateCache};
use gitstow_protocol::{write_v2_capabilities, Service};
use gitstow_store::ObjectStore;

use gitstow_access::Level;

use crate::auth::Principal;
use crate::body::{self, BodyError};
use crate::metrics::{self as m, Metrics};
use crate::queue::{Work, WorkQueue};
use crate::repo_name::{self, Route};
use crate::response::{self, error};

/// Settings of the HTTP application.
#[derive(Debug, Clone)]
pub struct Config {
    /// Create a repository on its first push.
    pub auto_create: bool,
    /// Largest receive-pack request body after decoding, in bytes.
    pub max_push_bytes: u64,
    /// Largest upload-pack request body after decoding, in bytes.
    pub max_fetch_request_bytes: u64,
    /// How fast a request body must arrive (`--idle-timeout`, `--min-body-rate`).
    pub body_pace: crate::body::Pace,
    /// Receive-pack settings.
    pub receive: gitstow_receive::Options,
    /// Upload-pack settings.
    pub upload: gitstow_upload::Options,
    /// Pushes resolving at once; later ones queue.
    pub max_concurrent_pushes: usize,
    /// How long a push may wait in the queue before it is refused.
    pub push_queue_timeout: std::time::Duration,
    /// Upload-pack requests running at once; later ones queue (with their
    /// body read).
    pub max_concurrent_fetches: usize,
    /// How long a fetch may wait in the queue before it is refused.
    pub fetch_queue_timeout: std::time::Duration,
    /// Automatic maintenance after pushes (`None`: off).
    pub maintenance: Option<crate::maintenance::MaintenanceConfig>,
    /// Objects the cache of decoded container indexes holds.
    pub index_cache_objects: usize,
    /// Access control.
    pub auth: crate::auth::AuthConfig,
    /// Bytes of decoded states the state cache holds.
    pub state_cache_bytes: usize,
    /// How webhooks are delivered.
    pub webhooks: gitstow_hooks::deliver::DeliverConfig,
}

/// Shared state of all requests.
#[derive(Debug)]
pub struct App {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) indexes: Arc<IndexCache>,
    states: Arc<StateCache>,
    pub(crate) pushes: WorkQueue,
    fetches: WorkQueue,
    /// Who may do what.
    auth: crate::auth::Auth,
    /// Where fetch work allocates (see [`crate::alloc::WorkArena`]).
    fetch_arena: crate::alloc::WorkArena,
    pub(crate) maintenance: Option<Arc<crate::maintenance::Maintenance>>,
    /// Delivers recorded push events to webhooks (`None`: it could not start).
    pub(crate) webhooks: Option<gitstow_hooks::deliver::Deliverer>,
    /// `/healthz`, `/readyz`.
    health: crate::request_log::Health,
    pub(crate) metrics: Option<Metrics>,
    pub(crate) config: Config,
}

impl App {
    /// An application serving repositories from `store`, answering `/metrics`
    /// from `metrics` (404 when `None`).
    pub fn new(store: Arc<dyn ObjectStore>, config: Config, metrics: Option<Metrics>) -> Arc<Self> {
        let indexes = IndexCache::with_limit(config.index_cache_objects);
        let maintenance = config.maintenance.clone().and_then(|mc| {
            crate::maintenance::Maintenance::start(store.clone(), indexes.clone(), mc)
                .map_err(|e| tracing::error!(error = %e, "automatic maintenance not started"))
                .ok()
        });
        let auth = crate::auth::Auth::new(store.clone(), config.auth.clone());
        let webhooks =
            gitstow_hooks::deliver::Deliverer::start(store.clone(), config.webhooks.clone())
                .map_err(|e| tracing::error!(error = %e, "webhook deliveries not started"))
                .ok();
        Arc::new(App {
            auth,
            webhooks,
            health: Default::default(),
            store,
            indexes,
            states: StateCache::with_limit(config.state_cache_bytes),
            maintenance,
            pushes: WorkQueue::new(
                Work::Push,
                config.max_concurrent_pushes,
                config.push_queue_timeout,
            ),
            fetches: WorkQueue::new(
                Work::Fetch,
                config.max_concurrent_fetches,
                config.fetch_queue_timeout,
            ),
            fetch_arena: crate::alloc::WorkArena::create(),
            metrics,
            config,
        })
    }

    pub(crate) fn repo(&self, name: &str) -> Repository {
        Repository::new(self.store.clone(), name, self.indexes.clone())
    }

    /// The hidden ref prefixes of repository `name`: the server's (`base`,
    /// from `--hide-refs`) and the repository's from the access document.
    pub(crate) fn hidden(
        &self,
        base: &gitstow_protocol::HiddenRefs,
        name: &str,
        repo_prefixes: &[String],
    ) -> gitstow_protocol::HiddenRefs {
        if repo_prefixes.is_empty() {
            return base.clone();
        }
        let (hidden, refused) = base.with(repo_prefixes);
        if !refused.is_empty() {
            tracing::warn!(
                repo = name,
                ?refused,
                "access document: hidden ref prefixes ignored (not under refs/)"
            );
        }
        hidden
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

fn wants_v2(headers: &HeaderMap) -> bool {
    headers
        .get("git-protocol")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(':').any(|p| p.trim() == "version=2"))
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
        BodyError::TimedOut(_) | BodyError::TooSlow(_) => {
            error(StatusCode::REQUEST_TIMEOUT, e.to_string())
        }
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
    if let Some(resp) = app.health.answer(uri.path(), &app.store).await {
        return resp;
    }
    if crate::operator::is_operator_endpoint(uri.path()) {
        if let Err(resp) = app
            .auth
            .check(
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
        Route::InfoRefs(n) | Route::UploadPack(n) | Route::ReceivePack(n) | Route::Other(n) => *n,
    };
    if let Err(e) = repo_name::validate(name) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    let name = name.to_owned();
    logged.repo = Some(name.clone());
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
    let principal = match app
        .auth
        .check(
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

pub(crate) async fn load_state(
    app: &Arc<App>,
    name: &str,
) -> Result<Option<Arc<gitstow_odb::RepoState>>, Response> {
    let repo = app.repo(name);
    let states = app.states.clone();
    let loaded = tokio::task::spawn_blocking(move || repo.load_shared_state(&states)).await;
    match loaded {
        // A deleted repository (`gitstow repo delete`) is not found.
        Ok(Ok(v)) => Ok(v.map(|v| v.state).filter(|s| !s.deleted)),
        Ok(Err(e)) => Err(server_error(
            &format!("reading the state of repository {name}"),
            &e,
        )),
        Err(_) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")),
    }
}

/// A server-side failure while `context`: the error and its chain go to the
/// log; the client gets a 500 (503 when the server is out of space) whose
/// body names no path and no internal error.
pub(crate) fn server_error(context: &str, e: &(dyn std::error::Error + 'static)) -> Response {
    tracing::error!(error = %e, "{context} failed");
    if gitstow_store::is_unavailable(e) {
        return busy_error("the store does not answer, try again later".into());
    }
    server_failure(gitstow_store::is_out_of_space(e))
}

/// What [`server_error`] answers: 503 with `Retry-After` when the server is
/// out of space, else 500.
pub(crate) fn server_failure(out_of_space: bool) -> Response {
    if out_of_space {
        return busy_error("the server is out of space, try again later".into());
    }
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal server error, try again later",
    )
}

/// HTTP 503 with `Retry-After: 60` and `message` (git shows it as `remote: …`).
pub(crate) fn busy_error(message: String) -> Response {
    let mut resp = error(StatusCode::SERVICE_UNAVAILABLE, message);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("60"));
    resp
}

pub(crate) fn not_found(name: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("repository '{name}.git' not found"),
    )
}

/// Refs above which a listing (`info/refs`, v2 `ls-refs`) waits for a fetch
/// slot: it streams (a line and a batch held), but reads ref tables and
/// spends CPU for as long as it is written, so a flood of them shares the
/// fetch slots with clones.
pub const LARGE_LISTING: usize = 100_000;

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
    let state = match load_state(&app, &name).await {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let state = match (state, service) {
        (Some(s), _) => s,
        (None, Service::ReceivePack) if app.config.auto_create => Arc::default(),
        (None, _) => return not_found(&name),
    };
    let v2_capabilities = service == Service::UploadPack && wants_v2(headers);
    // A listing of many refs reads tables and spends CPU for as long as it
    // is written: it waits for a fetch slot, so that a flood of them
    // shares the fetch slots with clones.
    let slot = if !v2_capabilities && state.refs.len() > LARGE_LISTING as u64 {
        match app.fetches.admit().await {
            Ok(slot) => Some(slot),
            Err(busy) => {
                tracing::warn!(repo = %name, error = %busy, "ref listing refused: queue timeout");
                return error(StatusCode::SERVICE_UNAVAILABLE, busy.to_string());
            }
        }
    } else {
        None
    };
    let repo = app.repo(&name);
    let hidden = match service {
        Service::UploadPack => &app.config.upload.hidden,
        Service::ReceivePack => &app.config.receive.hidden,
    };
    let hidden = app.hidden(hidden, &name, &principal.hide_refs);
    let content_type = service.advertisement_content_type();
    // Ref tables are read from the store (off the async threads), and the
    // advertisement streams as they are read: a listing of millions of
    // refs holds a line and a batch, not their list.
    response::stream(
        "info/refs",
        content_type,
        move |out| {
            let _slot = slot;
            advertisement(out, &repo, &state, service, v2_capabilities, &hidden)
        },
        |e| server_error("writing the advertisement", e.as_ref()),
    )
    .await
}

/// Writes the body of an `info/refs` answer for `service` to `out` (the
/// v2 capabilities, or the v0 advertisement of the refs of `state`).
fn advertisement(
    out: &mut impl std::io::Write,
    repo: &gitstow_odb::Repository,
    state: &gitstow_odb::RepoState,
    service: Service,
    v2_capabilities: bool,
    hidden: &gitstow_protocol::HiddenRefs,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use gitstow_upload::advertise;
    match service {
        Service::UploadPack if v2_capabilities => write_v2_capabilities(
            out,
            service,
            &advertise::upload_pack_v2_capabilities(),
            false,
        )?,
        Service::UploadPack => {
            let view = repo.refs(state)?;
            let head = advertise::head(state, &view)?;
            let caps = advertise::upload_pack_v0_capabilities(state, head.is_some());
            advertise::write_v0(out, service, &view, head, &caps, hidden)?
        }
        Service::ReceivePack => {
            let view = repo.refs(state)?;
            let mut caps: Vec<String> = gitstow_receive::CAPABILITIES
                .iter()
                .map(|s| s.to_string())
                .collect();
            caps.push(format!("agent={}", advertise::AGENT));
            advertise::write_v0(out, service, &view, None, &caps, hidden)?
        }
    }
    Ok(())
}

/// Whether a v2 request is an `ls-refs` command (its first pkt-line is
/// `command=ls-refs`); leaves `request` at its start.
fn is_ls_refs(request: &mut tempfile::SpooledTempFile) -> bool {
    use std::io::{Read, Seek};
    let mut head = [0u8; 20];
    let n = request.read(&mut head).unwrap_or(0);
    let _ = request.rewind();
    n >= 19 && head[4..19] == *b"command=ls-refs"
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
        app.config.max_fetch_request_bytes,
        app.config.receive.staging_dir.as_deref(),
        app.config.body_pace,
    )
    .await
    {
        Ok(r) => r,
        Err(BodyError::Io(e)) => {
            // Said in the protocol: git shows nothing of a POST's error body.
            tracing::error!(repo = %name, error = %e, "spooling the fetch request failed");
            return response::git_error(
                "application/x-git-upload-pack-result",
                gitstow_receive::server_reason(&e),
            );
        }
        Err(e) => return body_error(e),
    };
    let (mut request, received) = request;
    let v2 = wants_v2(&headers);
    // A v2 `ls-refs` only lists refs: it does not queue behind clones,
    // unless the repository has so many refs that the listing is not cheap.
    let ls_refs = v2 && is_ls_refs(&mut request);
    let admit = || async {
        match app.fetches.admit().await {
            Ok(slot) => Ok(slot),
            Err(busy) => {
                tracing::warn!(repo = %name, error = %busy, "fetch refused: queue timeout");
                Err(response::git_error(
                    "application/x-git-upload-pack-result",
                    &busy.to_string(),
                ))
            }
        }
    };
    let mut slot = if ls_refs {
        None
    } else {
        match admit().await {
            Ok(slot) => Some(slot),
            Err(resp) => return resp,
        }
    };
    let state = match load_state(&app, &name).await {
        Ok(Some(s)) => s,
        Ok(None) => return not_found(&name),
        Err(resp) => return resp,
    };
    if ls_refs && state.refs.len() > LARGE_LISTING as u64 {
        match admit().await {
            Ok(s) => slot = Some(s),
            Err(resp) => return resp,
        }
    }
    metrics::counter!(m::RECEIVED_BYTES, "service" => "upload-pack").increment(received);
    let repo = app.repo(&name);
    let mut opts = app.config.upload.clone();
    opts.hidden = app.hidden(&opts.hidden, &name, &principal.hide_refs);
    let arena = app.fetch_arena;
    let token = principal.token;
    response::stream(
        "upload-pack",
        "application/x-git-upload-pack-result",
        move |out| {
            let _slot = slot;
            let _arena = arena.enter();
            let started = std::time::Instant::now();
            let cpu_started = m::thread_cpu();
            let mut request = std::io::BufReader::with_capacity(64 << 10, request);
            let result = if v2 {
                gitstow_upload::serve_v2(&repo, &state, &mut request, out, &opts)
            } else {
                gitstow_upload::serve_v0(&repo, &state, &mut request, out, &opts)
            };
            metrics::histogram!(m::FETCH_DURATION).record(started.elapsed().as_secs_f64());
            let cpu = m::thread_cpu().saturating_sub(cpu_started);
            metrics::histogram!(m::FETCH_CPU).record(cpu.as_secs_f64());
            if let Ok(o) = &result {
                metrics::counter!(m::OBJECTS_SENT).increment(o.pack.map_or(0, |p| p.objects));
            }
            match &result {
                Ok(o) => tracing::info!(
                    repo = repo.name(),
                    token = token.as_deref(),
                    v2,
                    wants = o.wants,
                    haves = o.haves,
                    commits_read = o.commits_read,
                    graph_commits = o.graph_commits,
                    graph_misses = o.graph_misses,
                    have_bitmap_objects = o.have_bitmap.map(|h| h.objects),
                    have_bitmap_walked = o.have_bitmap.map(|h| h.commits_walked),
                    have_bitmap_dropped = o.have_bitmap.map(|h| h.dropped),
                    objects = o.pack.map(|p| p.objects),
                    thin_deltas = o.pack.map(|p| p.thin),
                    resolved_deltas = o.pack.map(|p| p.resolved),
                    bytes = o.pack.map(|p| p.bytes),
                    lookups = o.lookups.lookups,
                    index_probes = o.lookups.probes,
                    ms = started.elapsed().as_millis() as u64,
                    cpu_us = cpu.as_micros() as u64,
                    "upload-pack"
                ),
                Err(e) => tracing::warn!(repo = repo.name(), error = %e, "upload-pack failed"),
            }
            result
        },
        |e: gitstow_upload::Error| match e {
            gitstow_upload::Error::Protocol(_) | gitstow_upload::Error::Walk(_) => {
                error(StatusCode::BAD_REQUEST, e.to_string())
            }
            other => server_error("upload-pack", &other),
        },
    )
    .await
}
