//! Git LFS over HTTP (git-lfs `docs/api/batch.md`, `basic-transfers.md`),
//! under `/<repo>.git/info/lfs/`:
//!
//! - `POST objects/batch`: the batch API, authorized as git is (the same
//!   tokens: `read` to download, `write` to upload);
//! - `PUT` / `GET objects/<oid>`: the transfers, authorized by the grant
//!   the batch put in the action (`Authorization: RemoteAuth …`, see
//!   [`gitstow_lfs::grant`]) or by the user's own credentials; an upload is
//!   hashed while it is spooled and kept only when it is the oid's bytes;
//! - `POST verify`: whether the repository now has the object.
//!
//! Every answer is `application/vnd.git-lfs+json`; an error is
//! `{"message": …}` with the spec's status (401 with `LFS-Authenticate`
//! when credentials are needed, 403 for a token without the right, 404 for
//! a repository or object that is not there, 422 for an invalid request or
//! content, 507 when the server's disk is full).
//!
//! File locks (`docs/api/locking.md`): `POST locks`, `GET locks`, `POST
//! locks/verify`, `POST locks/<id>/unlock` ([`locks`]).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use gitstow_lfs::api::{ErrorBody, MEDIA_TYPE};
use gitstow_lfs::grant::{GrantError, Operation, TransferKey};
use gitstow_lfs::Oid;
use gitstow_service::gate::Level;
use gitstow_service::mirrors::{LfsAccess, LfsRefusal};

mod locks;
mod transfer;

use crate::app::App;
use crate::body;

/// Largest batch or verify request body, in bytes (100 objects take ~10 KiB).
const MAX_REQUEST: u64 = 1 << 20;

/// Bytes read from the store per step of a download: what a download
/// holds while its client takes it (400 stalled downloads held 1.6 GB
/// with 1 MiB steps and two of them queued).
pub(super) const DOWNLOAD_CHUNK: u64 = 256 << 10;

/// `git-lfs-authenticate` over SSH, for a key whose token `token` may
/// already do the operation on `repo` (`upload`: write, else read): the
/// JSON git-lfs takes (git-lfs `docs/api/server-discovery.md`: the LFS
/// API's `href`, the `header` carrying a transfer grant valid
/// `--lfs-url-ttl` seconds, `expires_in`). The href is `--public-url`, else
/// this HTTP transport reached at `local`'s address.
///
/// # Errors
/// [`Denied::Unavailable`](gitstow_service::Denied::Unavailable) when the
/// transfer key or the token cannot be read now.
pub async fn ssh_session(
    app: &App,
    token: &str,
    repo: &str,
    upload: bool,
    local: Option<std::net::SocketAddr>,
) -> Result<String, gitstow_service::Denied> {
    use gitstow_service::Denied;
    let key = app.lfs_key().await.map_err(|e| {
        tracing::error!(error = %e, "reading the LFS transfer key failed");
        Denied::Unavailable
    })?;
    let lfs = &app.config.lfs;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let token_id = app
        .gate()
        .token_id(token)
        .await
        .ok_or(Denied::Unavailable)?;
    let grant = key.session(upload, repo, token, &token_id, now + lfs.url_ttl);
    let base = match &lfs.public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => {
            let scheme = if lfs.tls { "https" } else { "http" };
            let ip = local.map_or(std::net::IpAddr::from([127, 0, 0, 1]), |a| a.ip());
            let host = match ip {
                std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                v4 => v4.to_string(),
            };
            format!("{scheme}://{host}:{}", lfs.http_port)
        }
    };
    Ok(serde_json::json!({
        "href": format!("{base}/{repo}.git/info/lfs"),
        "header": { "Authorization": format!("RemoteAuth {grant}") },
        "expires_in": lfs.url_ttl,
    })
    .to_string())
}

/// Settings of the LFS endpoints.
#[derive(Debug, Clone)]
pub struct LfsConfig {
    /// Seconds a transfer action (its grant) stays valid (`--lfs-url-ttl`).
    pub url_ttl: u64,
    /// Largest LFS object accepted, in bytes (the push size cap).
    pub max_object_size: u64,
    /// `https` when the server terminates TLS itself (then the actions'
    /// URLs say so; behind a proxy, `X-Forwarded-Proto: https` does too).
    pub tls: bool,
    /// Where clients reach the HTTP side (`--public-url`), for the URLs
    /// the LFS API answers; `None`: from each request's `Host` (and, over
    /// SSH, the address the client reached with [`LfsConfig::http_port`]).
    pub public_url: Option<String>,
    /// The HTTP port this server listens on.
    pub http_port: u16,
}

/// A request under `/<name>.git/info/lfs/`; `rest` is the path after that,
/// `query` the query string.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn route(
    app: Arc<App>,
    name: String,
    rest: &str,
    query: &str,
    method: Method,
    headers: HeaderMap,
    body: Body,
    peer: Option<IpAddr>,
    logged: &mut crate::request_log::Logged,
) -> Response {
    let call = Call {
        app,
        name,
        headers,
        peer,
    };
    let oid_path = rest.strip_prefix("objects/").filter(|r| *r != "batch");
    let unlock_id = rest
        .strip_prefix("locks/")
        .and_then(|r| r.strip_suffix("/unlock"));
    match (rest, method) {
        ("objects/batch", Method::POST) => call.batch(body, logged).await,
        ("verify", Method::POST) => {
            logged.service = Some("lfs verify");
            call.verify(body, logged).await
        }
        (_, Method::PUT) if oid_path.is_some() => {
            logged.service = Some("lfs upload");
            call.upload(oid_path.unwrap_or_default(), body, logged)
                .await
        }
        (_, Method::GET) if oid_path.is_some() => {
            logged.service = Some("lfs download");
            call.download(oid_path.unwrap_or_default(), logged).await
        }
        ("locks", Method::POST) => {
            logged.service = Some("lfs lock");
            call.lock(body, logged).await
        }
        ("locks", Method::GET) => {
            logged.service = Some("lfs locks");
            call.list_locks(query, logged).await
        }
        ("locks/verify", Method::POST) => {
            logged.service = Some("lfs locks verify");
            call.verify_locks(body, logged).await
        }
        (_, Method::POST) if unlock_id.is_some() => {
            logged.service = Some("lfs unlock");
            call.unlock(unlock_id.unwrap_or_default(), body, logged)
                .await
        }
        _ => lfs_error(StatusCode::NOT_FOUND, "not found"),
    }
}

/// An error answer in the LFS API's form.
pub(crate) fn lfs_error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = serde_json::to_vec(&ErrorBody {
        message: message.into(),
    })
    .unwrap_or_default();
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    if status == StatusCode::UNAUTHORIZED {
        resp.headers_mut().insert(
            "LFS-Authenticate",
            HeaderValue::from_static("Basic realm=\"gitstow\""),
        );
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"gitstow\""),
        );
    }
    resp
}

/// The server's plain error `resp` (auth, body, store) as an LFS error:
/// the same status and message, `Retry-After` kept.
pub(super) async fn as_lfs(resp: Response) -> Response {
    let status = resp.status();
    let retry = resp.headers().get(header::RETRY_AFTER).cloned();
    let text = axum::body::to_bytes(resp.into_body(), 64 << 10)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let mut out = lfs_error(status, text);
    if let Some(r) = retry {
        out.headers_mut().insert(header::RETRY_AFTER, r);
    }
    out
}

/// A JSON answer (200).
pub(super) fn json<T: serde::Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => {
            let mut resp = Response::new(Body::from(body));
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
            resp
        }
        Err(e) => {
            tracing::error!(error = %e, "encoding an LFS answer failed");
            lfs_error(StatusCode::INTERNAL_SERVER_ERROR, "internal server error")
        }
    }
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A store failure while `context`, logged; the client gets 507 when the
/// disk is full, 503 when the store does not answer, else 500, naming
/// nothing of the server.
pub(super) fn store_failed(context: &str, e: &(dyn std::error::Error + 'static)) -> Response {
    use gitstow_service::fault::ServerFault;
    tracing::error!(error = %e, "LFS: {context} failed");
    let fault = ServerFault::of(e);
    match fault {
        ServerFault::OutOfSpace => lfs_error(StatusCode::INSUFFICIENT_STORAGE, fault.text()),
        ServerFault::StoreDown => {
            let mut resp = lfs_error(StatusCode::SERVICE_UNAVAILABLE, fault.text());
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
            resp
        }
        ServerFault::Internal => lfs_error(StatusCode::INTERNAL_SERVER_ERROR, fault.text()),
    }
}

/// One request's context.
pub(super) struct Call {
    app: Arc<App>,
    name: String,
    headers: HeaderMap,
    peer: Option<IpAddr>,
}

/// How a transfer was authorized.
pub(super) enum Authorized {
    /// By a grant: the size it was given for, and the upload it names
    /// (its staging key's id, [`gitstow_lfs::grant::upload_id`]).
    Grant { size: u64, upload: Option<String> },
    /// By the user's credentials.
    Credentials,
}

impl Call {
    /// The user's credentials checked for `needed` on the repository; the
    /// token's name (`None`: access control is off).
    pub(super) async fn credentials(
        &self,
        needed: Level,
        logged: &mut crate::request_log::Logged,
    ) -> Result<Option<String>, Response> {
        if let Some(session) = self.session_grant() {
            return self.session(session, needed, logged).await;
        }
        match crate::auth::check(
            self.app.gate(),
            &self.headers,
            None,
            self.peer,
            Some(&self.name),
            needed,
        )
        .await
        {
            Ok(p) => {
                logged.token = p.token.clone();
                Ok(p.token)
            }
            Err(resp) => Err(as_lfs(resp).await),
        }
    }

    /// A session grant in `Authorization: RemoteAuth s1.…` (what
    /// `git-lfs-authenticate` over SSH gave), if that is what the request
    /// carries.
    fn session_grant(&self) -> Option<String> {
        self.headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("RemoteAuth "))
            .map(str::trim)
            .filter(|g| g.starts_with("s1."))
            .map(str::to_owned)
    }

    /// The token a session grant names, checked for `needed` (a download
    /// session: `read` only).
    async fn session(
        &self,
        grant: String,
        needed: Level,
        logged: &mut crate::request_log::Logged,
    ) -> Result<Option<String>, Response> {
        let key = self.key().await?;
        let session = match key.check_session(&grant, &self.name, now_secs()) {
            Ok(s) => s,
            Err(e) => return Err(lfs_error(StatusCode::UNAUTHORIZED, e.to_string())),
        };
        // A download session reads; an upload session does what its token
        // may (an admin's force-unlocks too).
        if !session.upload && needed > Level::Read {
            return Err(lfs_error(
                StatusCode::FORBIDDEN,
                "this SSH session was authenticated for download only",
            ));
        }
        match self
            .app
            .gate()
            .check_named(&session.token, &session.token_id, &self.name, needed)
            .await
            .map_err(crate::auth::answer)
        {
            Ok(p) => {
                logged.token = p.token.clone();
                Ok(p.token)
            }
            Err(resp) => Err(as_lfs(resp).await),
        }
    }

    /// The transfer grant in `Authorization: RemoteAuth …` checked for `op`
    /// on `oid`, or (without one) the user's credentials for `fallback`.
    pub(super) async fn authorize(
        &self,
        op: Operation,
        oid: &Oid,
        fallback: Level,
        logged: &mut crate::request_log::Logged,
    ) -> Result<Authorized, Response> {
        let grant = self
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("RemoteAuth "))
            .filter(|g| !g.trim().starts_with("s1."));
        let Some(grant) = grant else {
            self.credentials(fallback, logged).await?;
            return Ok(Authorized::Credentials);
        };
        let key = self.key().await?;
        match key.check(grant.trim(), op, &self.name, oid, now_secs()) {
            Ok(size) => Ok(Authorized::Grant {
                size,
                upload: gitstow_lfs::grant::upload_id(grant.trim()),
            }),
            Err(e @ (GrantError::Invalid | GrantError::Expired)) => {
                tracing::info!(peer = ?self.peer, repo = %self.name, reason = %e, "LFS transfer refused");
                Err(lfs_error(StatusCode::FORBIDDEN, e.to_string()))
            }
        }
    }

    /// Whether the repository may take or serve LFS objects
    /// ([`gitstow_service::Host::lfs_repository`]): 404 when it does not
    /// exist, 403 for an upload into a pull mirror.
    pub(super) async fn repository_for(&self, access: LfsAccess) -> Result<(), Response> {
        match self.app.host.lfs_repository(&self.name, access).await {
            Ok(()) => Ok(()),
            Err(LfsRefusal::NotFound) => {
                Err(lfs_error(StatusCode::NOT_FOUND, "Repository not found"))
            }
            Err(LfsRefusal::PullMirror(why)) => Err(lfs_error(StatusCode::FORBIDDEN, why)),
            Err(LfsRefusal::Store(r)) => Err(as_lfs(crate::app::refusal(r)).await),
        }
    }

    pub(super) async fn key(&self) -> Result<TransferKey, Response> {
        self.app
            .lfs_key()
            .await
            .map_err(|e| store_failed("reading the transfer key", &e))
    }

    /// A JSON request body of at most [`MAX_REQUEST`] bytes; 422 when it
    /// does not parse.
    pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        body: Body,
    ) -> Result<T, Response> {
        let dir = self.app.host.config().receive.staging_dir.clone();
        let (mut buf, _) = match body::buffer(
            body,
            false,
            MAX_REQUEST,
            dir.as_deref(),
            self.app.host().config().limits.pace,
        )
        .await
        {
            Ok(b) => b,
            Err(e) => return Err(as_lfs(crate::app::body_error(e)).await),
        };
        let mut bytes = Vec::new();
        if let Err(e) = std::io::Read::read_to_end(&mut buf, &mut bytes) {
            return Err(store_failed("reading an LFS request", &e));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            lfs_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("malformed LFS request: {e}"),
            )
        })
    }
}
