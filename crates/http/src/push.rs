//! `POST …/git-receive-pack`: the push request spooled, then handed to the
//! service layer ([`gitstow_service::Push`]), its report streamed back.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use gitstow_service::fault::ServerFault;
use gitstow_service::Fault;

use crate::app::{body_error, content_length, fault_response, is_gzip, refusal, App};
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
    if let Err(r) = app.host.push_target(&name).await {
        return refusal(r);
    }
    let limit = app.host.config().limits.max_push_bytes;
    if let Some(declared) = content_length(&headers) {
        if declared > limit.saturating_mul(2) {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("push of {declared} bytes exceeds the limit of {limit} bytes"),
            );
        }
    }
    let staging_dir = app.host.config().receive.staging_dir.clone();
    let spooled = match body::spool(
        body,
        is_gzip(&headers),
        limit,
        staging_dir.as_deref(),
        app.host.config().limits.pace,
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
    // git's probe before a large push answers at once (the service tells).
    let request_bytes = received.unwrap_or(u64::MAX);
    // The body is on disk; wait here (not while reading it) for a push slot.
    let push = match app.host.push(&name, &principal, request_bytes).await {
        Ok(p) => p,
        Err(r) => return refusal(r),
    };
    response::stream(
        &app.host,
        "receive-pack",
        "application/x-git-receive-pack-result",
        move |out| push.run(&spooled.file, spooled.truncated, out),
        fault_response,
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
    let fault = ServerFault::of(&spool_error);
    let host = app.host.clone();
    response::stream(
        &app.host,
        "receive-pack",
        "application/x-git-receive-pack-result",
        move |out| host.refuse_push(&mut &head[..], fault.text(), out),
        move |_: Fault| fault_response(Fault::Server(fault)),
    )
    .await
}
