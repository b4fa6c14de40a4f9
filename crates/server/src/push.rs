//! `POST …/git-receive-pack`: the push request spooled, queued for a push
//! slot and handed to [`gitstow_receive::receive_pack`] with the caller's
//! protected refs, hooks and webhooks; its figures logged and counted.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use crate::app::{
    body_error, content_length, is_gzip, load_state, not_found, server_error, server_failure, App,
};
use crate::auth::Principal;
use crate::body::{self, BodyError};
use crate::metrics as m;
use crate::response::{self, error};

pub(crate) async fn receive_pack(
    app: Arc<App>,
    name: String,
    principal: Principal,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !app.config.auto_create {
        match load_state(&app, &name).await {
            Ok(Some(_)) => {}
            Ok(None) => return not_found(&name),
            Err(resp) => return resp,
        }
    }
    let limit = app.config.max_push_bytes;
    if let Some(declared) = content_length(&headers) {
        if declared > limit.saturating_mul(2) {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("push of {declared} bytes exceeds the limit of {limit} bytes"),
            );
        }
    }
    let staging_dir = app.config.receive.staging_dir.clone();
    let spooled = match body::spool(
        body,
        is_gzip(&headers),
        limit,
        staging_dir.as_deref(),
        app.config.body_pace,
    )
    .await
    {
        Ok(s) => s,
        Err(BodyError::Spool { error, head }) => {
            return spool_failed(app, &name, error, head).await
        }
        Err(e) => return body_error(e),
    };
    let received = spooled.file.metadata().ok().map(|m| m.len());
    metrics::counter!(m::RECEIVED_BYTES, "service" => "receive-pack")
        .increment(received.unwrap_or(0));
    // git's probe before a large push (a lone flush-pkt, `http.postBuffer`)
    // answers at once: it is not a push, so it neither queues nor counts.
    let probe = received.is_some_and(|n| n <= 4);
    // The body is on disk; wait here (not while reading it) for a push slot.
    let slot = if probe {
        None
    } else {
        Some(app.pushes.admit().await)
    };
    let repo = app.repo(&name);
    let mut opts = app.config.receive.clone();
    opts.protect = principal
        .protect
        .map(|refs| gitstow_receive::protect::Protect { refs });
    opts.hidden = app.hidden(&opts.hidden, &name, &principal.hide_refs);
    opts.pusher = principal.token.clone();
    if !principal.webhooks.is_empty() {
        match &app.webhooks {
            Some(d) => {
                let outbox: Arc<dyn gitstow_receive::hooks::Notify> =
                    Arc::new(d.outbox(principal.webhooks));
                opts.notify = Some(outbox);
            }
            None => {
                // Refused rather than landed unannounced.
                tracing::error!(
                    repo = name,
                    "push refused: webhook deliveries are not running"
                );
                return error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server unavailable, try again later",
                );
            }
        }
    }
    let maintenance = app.maintenance.clone();
    let token = principal.token;
    response::stream(
        "receive-pack",
        "application/x-git-receive-pack-result",
        move |out| {
            let started = std::time::Instant::now();
            let request = spooled.file;
            let (result, _slot) = match slot {
                None => (
                    gitstow_receive::receive_pack(&repo, &request, out, &opts),
                    None,
                ),
                Some(Err(busy)) => {
                    tracing::warn!(repo = repo.name(), error = %busy, "push refused: queue timeout");
                    let r = gitstow_receive::refuse_pack(&request, out, &busy.to_string(), &opts);
                    (r, None)
                }
                Some(Ok(slot)) if spooled.truncated => {
                    let r = gitstow_receive::refuse_pack(
                        &request,
                        out,
                        "pack exceeds maximum allowed size",
                        &opts,
                    );
                    (r, Some(slot))
                }
                Some(Ok(slot)) => (
                    gitstow_receive::receive_pack(&repo, &request, out, &opts),
                    Some(slot),
                ),
            };
            if !probe {
                record_push(&result, started);
            }
            if let (Some(maintenance), Ok(o)) = (&maintenance, &result) {
                if o.updated > 0 {
                    maintenance.after_push(repo.name());
                }
            }
            match &result {
                // git's probe before a large push is not a push.
                Ok(_) if probe => {}
                Ok(o) => tracing::info!(
                    repo = repo.name(),
                    token = token.as_deref(),
                    commands = o.commands,
                    updated = o.updated,
                    pack_bytes = o.pack_bytes,
                    objects = o.objects,
                    deltas = o.deltas,
                    thin_bases = o.thin_bases,
                    staged = o.staged,
                    containers = o.containers,
                    state_retries = o.state_retries,
                    unpack_error = o.unpack_error.as_deref(),
                    ms = started.elapsed().as_millis() as u64,
                    "receive-pack"
                ),
                Err(e) => tracing::warn!(repo = repo.name(), error = %e, "receive-pack failed"),
            }
            result
        },
        |e: gitstow_receive::Error| match e {
            gitstow_receive::Error::Protocol(_) => error(StatusCode::BAD_REQUEST, e.to_string()),
            other => server_error("receive-pack", &other),
        },
    )
    .await
}

/// Answers a push whose body the spool could not hold in the protocol, from
/// the command list at its start: `unpack server out of space, try again
/// later` (or an internal error) and `ng <ref> unpacker error` for each
/// command, as git's receive-pack reports a failed index-pack; the details
/// go to the log. A command list longer than [`body::SPOOL_HEAD`] gets the
/// same reason as an HTTP 503/500.
async fn spool_failed(
    app: Arc<App>,
    name: &str,
    spool_error: std::io::Error,
    head: Vec<u8>,
) -> Response {
    tracing::error!(repo = name, error = %spool_error, "spooling the push failed");
    let out_of_space = gitstow_store::is_out_of_space(&spool_error);
    let reason = gitstow_receive::server_reason(&spool_error);
    let opts = app.config.receive.clone();
    let started = std::time::Instant::now();
    response::stream(
        "receive-pack",
        "application/x-git-receive-pack-result",
        move |out| {
            let result = gitstow_receive::refuse_pack(&head[..], out, reason, &opts);
            record_push(&result, started);
            result
        },
        move |_: gitstow_receive::Error| server_failure(out_of_space),
    )
    .await
}

/// Push figures for `/metrics`.
fn record_push(
    result: &Result<gitstow_receive::Outcome, gitstow_receive::Error>,
    started: std::time::Instant,
) {
    metrics::histogram!(m::PUSH_DURATION).record(started.elapsed().as_secs_f64());
    let label = match result {
        Ok(o) if o.unpack_error.is_none() && o.updated == o.commands => "ok",
        Ok(_) => "refused",
        Err(_) => "error",
    };
    metrics::counter!(m::PUSHES, "result" => label).increment(1);
    if let Ok(o) = result {
        metrics::counter!(m::OBJECTS_RESOLVED).increment(o.objects);
        metrics::counter!(m::DELTAS_RESOLVED).increment(o.deltas);
        metrics::counter!(m::CONTAINERS_UPLOADED).increment(o.containers as u64);
        metrics::counter!(m::CONTAINER_BYTES_UPLOADED).increment(o.container_bytes);
        metrics::counter!(m::STATE_CAS_RETRIES).increment(u64::from(o.state_retries));
    }
}
