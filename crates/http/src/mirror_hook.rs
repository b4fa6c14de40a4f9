//! `POST /<name>[.git]/mirror/sync`: an upstream's webhook (or an admin)
//! makes the repository's pull mirror due at once (plan 0017 step 5).
//!
//! Three ways in: `X-Hub-Signature-256` (GitHub, Gitea: the body signed
//! with the mirror's webhook secret), `X-Gitlab-Token` (GitLab: the secret
//! itself), or a token with `admin` on the repository (the access gate, as
//! every route). Without any, the gate answers 401; a proof that does not
//! hold gets one 403 whatever the reason (an admin learns the reason: 404
//! for a repository without a pull mirror). The body is read only
//! for a signature, streamed through the HMAC, at most
//! [`MAX_HOOK_BODY`] bytes (GitHub's own cap on a payload). Answers `202
//! Accepted` once the mirror is due: any instance pulls it, this one
//! first if it runs mirrors.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use gitstow_service::gate::Level;
use gitstow_service::mirrors::{Check, HookRefusal, Proof, TriggerError};

use crate::app::{body_error, refusal, App};
use crate::response::error;

/// The largest webhook body read, in bytes (GitHub caps payloads at 25 MB).
pub const MAX_HOOK_BODY: u64 = 25 << 20;

/// Answers a mirror trigger for repository `name` (valid already), with
/// the request's parts as the other routes take them.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn answer(
    app: Arc<App>,
    name: String,
    method: Method,
    headers: HeaderMap,
    authority: Option<&str>,
    peer: Option<std::net::IpAddr>,
    body: Body,
    logged: &mut crate::request_log::Logged,
) -> Response {
    logged.service = Some("mirror sync");
    if method != Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    }
    let text = |h: &str| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let proof = if let Some(sig) = text("x-hub-signature-256") {
        Some(Proof::HubSignature(sig))
    } else {
        text("x-gitlab-token").map(Proof::GitlabToken)
    };
    let Some(proof) = proof else {
        // No upstream's proof: an admin of the repository may.
        match crate::auth::check(
            app.gate(),
            &headers,
            authority,
            peer,
            Some(&name),
            Level::Admin,
        )
        .await
        {
            Ok(p) => logged.token = p.token,
            Err(resp) => return resp,
        }
        return due_now(&app, &name, true).await;
    };
    let mut check = match app.host.mirror_webhook(&name, proof).await {
        Ok(c) => c,
        Err(r) => return refused(&name, r, false),
    };
    if check.needs_body() {
        let fed = crate::body::copy_body(
            body,
            Feed(&mut check),
            false,
            MAX_HOOK_BODY,
            false,
            app.host.config().limits.pace,
        )
        .await;
        if let Err(e) = fed {
            return body_error(e);
        }
    }
    if let Err(e) = check.finish() {
        return refused(&name, e.into(), false);
    }
    due_now(&app, &name, false).await
}

async fn due_now(app: &App, name: &str, admin: bool) -> Response {
    match app.host.mirror_due_now(name).await {
        Ok(()) => error(StatusCode::ACCEPTED, format!("{name}: mirror sync queued")),
        Err(r) => refused(name, r, admin),
    }
}

/// The answer to a webhook whose proof does not hold, whatever the reason
/// (no such mirror, no secret, no key, a mismatch): one text, so that a
/// caller without the secret learns nothing of which repositories are
/// mirrors. The reason goes to the log.
const NOT_PROVEN: &str = "webhook refused: the signature or token does not match";

/// The HTTP answer to a refused trigger (logged with its reason): an
/// admin learns why; a webhook's caller gets 403 [`NOT_PROVEN`].
fn refused(name: &str, r: HookRefusal, admin: bool) -> Response {
    tracing::warn!(repo = name, reason = %r, "mirror webhook refused");
    match r {
        HookRefusal::Store(r) => refusal(r),
        HookRefusal::Trigger(_) if !admin => error(StatusCode::FORBIDDEN, NOT_PROVEN),
        HookRefusal::Trigger(t) => {
            let status = match t {
                TriggerError::NoMirror => StatusCode::NOT_FOUND,
                TriggerError::NoSecret | TriggerError::Mismatch => StatusCode::FORBIDDEN,
                TriggerError::KeyMissing | TriggerError::Unopenable => {
                    StatusCode::SERVICE_UNAVAILABLE
                }
            };
            error(status, t.to_string())
        }
    }
}

/// The body, into the check.
struct Feed<'a>(&'a mut Check);

impl std::io::Write for Feed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
