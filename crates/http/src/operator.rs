//! The operator's endpoints: `/metrics` and `/debug/pprof/heap`, on the
//! main listener (behind `*:admin` when access control is on) or on
//! `--metrics-listen`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use std::sync::Arc;

use crate::app::App;
use crate::response::error;

/// A router with only the operator's endpoints (`--metrics-listen`).
pub fn operator_router(app: Arc<App>) -> Router {
    Router::new().fallback(operator).with_state(app)
}

/// Serves the operator's endpoints alone on `listener`
/// (`--metrics-listen`: plain HTTP, no access control) until the listener
/// fails, which is logged.
pub async fn serve_operator(listener: tokio::net::TcpListener, app: Arc<App>) {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(%addr, "metrics listener");
    if let Err(e) = axum::serve(listener, operator_router(app)).await {
        tracing::error!(error = %e, "metrics listener failed");
    }
}

async fn operator(State(app): State<Arc<App>>, method: Method, uri: Uri) -> Response {
    operator_endpoint(&app, &method, uri.path())
        .await
        .unwrap_or_else(|| error(StatusCode::NOT_FOUND, "not found"))
}

/// Whether `path` is one of the operator's endpoints.
pub(crate) fn is_operator_endpoint(path: &str) -> bool {
    matches!(path, "/metrics" | "/debug/pprof/heap")
}

/// `/metrics` and `/debug/pprof/heap`, or `None` for any other path. On the
/// main listener, with access control on, they need a `*:admin` token; on
/// `--metrics-listen` (the operator's own network) nothing.
pub(crate) async fn operator_endpoint(app: &App, method: &Method, path: &str) -> Option<Response> {
    if !is_operator_endpoint(path) {
        return None;
    }
    if method != Method::GET {
        return Some(error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"));
    }
    Some(match path {
        "/metrics" => match &app.metrics {
            Some(metrics) => {
                let mut resp = Response::new(Body::from(metrics.render()));
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                );
                resp
            }
            None => error(StatusCode::NOT_FOUND, "metrics are not enabled"),
        },
        _ => heap_profile().await,
    })
}

/// A pprof heap profile from jemalloc's sampling profiler (`jemalloc_pprof`),
/// if `--heap-profiling` activated it.
async fn heap_profile() -> Response {
    let off = || {
        error(
            StatusCode::NOT_FOUND,
            "heap profiling is off: start gitstow serve with --heap-profiling",
        )
    };
    let Some(ctl) = jemalloc_pprof::PROF_CTL.as_ref() else {
        return off();
    };
    let mut ctl = ctl.lock().await;
    if !ctl.activated() {
        return off();
    }
    match ctl.dump_pprof() {
        Ok(profile) => {
            let mut resp = Response::new(Body::from(profile));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/octet-stream"),
            );
            resp.headers_mut().insert(
                header::CONTENT_DISPOSITION,
                header::HeaderValue::from_static("attachment; filename=\"heap.pb.gz\""),
            );
            resp
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("heap profile failed: {e}"),
        ),
    }
}

/// Turns jemalloc's profiler on (`prof.active`); the binary starts it built in but
/// inactive (see [`crate::alloc::MALLOC_CONF`]).
pub async fn activate_heap_profiling() -> Result<(), String> {
    let ctl = jemalloc_pprof::PROF_CTL
        .as_ref()
        .ok_or("jemalloc was started without prof:true")?;
    ctl.lock().await.activate().map_err(|e| e.to_string())
}
