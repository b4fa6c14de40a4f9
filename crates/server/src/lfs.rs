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
//! content, 507 when the server's disk is full). Locking (`locks/…`) is
//! not served yet: 404, which the client takes as "not supported".

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use gitstow_access::Level;
use gitstow_lfs::api::{BatchRequest, ErrorBody, VerifyRequest, MEDIA_TYPE};
use gitstow_lfs::grant::{GrantError, Operation, TransferKey};
use gitstow_lfs::objects::{self, Hashing, ObjectError};
use gitstow_lfs::Oid;

use crate::app::App;
use crate::body::{self, BodyError};

/// Largest batch or verify request body, in bytes (100 objects take ~10 KiB).
const MAX_REQUEST: u64 = 1 << 20;

/// Bytes read from the store per step of a download.
const DOWNLOAD_CHUNK: u64 = 1 << 20;

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
}

/// A request under `/<name>.git/info/lfs/`; `rest` is the path after that.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn route(
    app: Arc<App>,
    name: String,
    rest: &str,
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
        _ if rest == "locks" || rest.starts_with("locks/") => lfs_error(
            StatusCode::NOT_FOUND,
            "this server does not support LFS locking yet",
        ),
        _ => lfs_error(StatusCode::NOT_FOUND, "not found"),
    }
}

/// An error answer in the LFS API's form.
fn lfs_error(status: StatusCode, message: impl Into<String>) -> Response {
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
async fn as_lfs(resp: Response) -> Response {
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
fn json<T: serde::Serialize>(value: &T) -> Response {
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

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A store failure while `context`, logged; the client gets 507 when the
/// disk is full, 503 when the store does not answer, else 500, naming
/// nothing of the server.
fn store_failed(context: &str, e: &(dyn std::error::Error + 'static)) -> Response {
    tracing::error!(error = %e, "LFS: {context} failed");
    if gitstow_store::is_out_of_space(e) {
        return lfs_error(
            StatusCode::INSUFFICIENT_STORAGE,
            "the server is out of space, try again later",
        );
    }
    if gitstow_store::is_unavailable(e) {
        let mut resp = lfs_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the store does not answer, try again later",
        );
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
        return resp;
    }
    lfs_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal server error, try again later",
    )
}

/// One request's context.
struct Call {
    app: Arc<App>,
    name: String,
    headers: HeaderMap,
    peer: Option<IpAddr>,
}

/// How a transfer was authorized.
enum Authorized {
    /// By a grant: the size it was given for.
    Grant(u64),
    /// By the user's credentials.
    Credentials,
}

impl Call {
    /// The user's credentials checked for `needed` on the repository.
    async fn credentials(
        &self,
        needed: Level,
        logged: &mut crate::request_log::Logged,
    ) -> Result<(), Response> {
        match self
            .app
            .auth()
            .check(&self.headers, None, self.peer, Some(&self.name), needed)
            .await
        {
            Ok(p) => {
                logged.token = p.token;
                Ok(())
            }
            Err(resp) => Err(as_lfs(resp).await),
        }
    }

    /// The transfer grant in `Authorization: RemoteAuth …` checked for `op`
    /// on `oid`, or (without one) the user's credentials for `fallback`.
    async fn authorize(
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
            .and_then(|v| v.strip_prefix("RemoteAuth "));
        let Some(grant) = grant else {
            self.credentials(fallback, logged).await?;
            return Ok(Authorized::Credentials);
        };
        let key = self.key().await?;
        match key.check(grant.trim(), op, &self.name, oid, now_secs()) {
            Ok(size) => Ok(Authorized::Grant(size)),
            Err(e @ (GrantError::Invalid | GrantError::Expired)) => {
                tracing::info!(peer = ?self.peer, repo = %self.name, reason = %e, "LFS transfer refused");
                Err(lfs_error(StatusCode::FORBIDDEN, e.to_string()))
            }
        }
    }

    async fn key(&self) -> Result<TransferKey, Response> {
        self.app
            .lfs_key()
            .await
            .map_err(|e| store_failed("reading the transfer key", &e))
    }

    /// `POST objects/batch`.
    async fn batch(self, body: Body, logged: &mut crate::request_log::Logged) -> Response {
        let req: BatchRequest = match self.read_json(body).await {
            Ok(r) => r,
            Err(resp) => return resp,
        };
        let op = match gitstow_lfs::batch::operation(&req) {
            Ok(op) => op,
            Err(e) => {
                let status =
                    StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
                return lfs_error(status, e.to_string());
            }
        };
        let (needed, service) = match op {
            Operation::Download => (Level::Read, "lfs batch download"),
            Operation::Upload => (Level::Write, "lfs batch upload"),
        };
        logged.service = Some(service);
        if let Err(resp) = self.credentials(needed, logged).await {
            return resp;
        }
        match self.app.host.state(&self.name).await {
            Ok(Some(_)) => {}
            Ok(None) if op == Operation::Upload && self.app.host.config().auto_create => {}
            Ok(None) => return lfs_error(StatusCode::NOT_FOUND, "Repository not found"),
            Err(r) => return as_lfs(crate::app::refusal(r)).await,
        }
        let key = match self.key().await {
            Ok(k) => k,
            Err(resp) => return resp,
        };
        let lfs_url = self.lfs_url();
        let config = self.app.config.lfs.clone();
        let store = self.app.host.store().clone();
        let repo = self.name.clone();
        let answered = tokio::task::spawn_blocking(move || {
            gitstow_lfs::batch::Batch {
                repo: &repo,
                lfs_url: &lfs_url,
                key: &key,
                now: now_secs(),
                ttl: config.url_ttl,
                max_size: config.max_object_size,
            }
            .answer(store.as_ref(), &req, op)
        })
        .await;
        match answered {
            Ok(Ok(answer)) => json(&answer),
            Ok(Err(e)) => store_failed("answering a batch", &e),
            Err(e) => store_failed("answering a batch", &e),
        }
    }

    /// `POST verify`: 200 when the repository owns the object at that size.
    async fn verify(self, body: Body, logged: &mut crate::request_log::Logged) -> Response {
        let req: VerifyRequest = match self.read_json(body).await {
            Ok(r) => r,
            Err(resp) => return resp,
        };
        let (Some(oid), Ok(size)) = (Oid::parse(&req.oid), u64::try_from(req.size)) else {
            return lfs_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid object: an oid is 64 lowercase hex digits, a size at least 0",
            );
        };
        if let Err(resp) = self
            .authorize(Operation::Upload, &oid, Level::Write, logged)
            .await
        {
            return resp;
        }
        let store = self.app.host.store().clone();
        let repo = self.name.clone();
        let found = tokio::task::spawn_blocking(move || {
            Ok::<_, gitstow_store::Error>((
                objects::owned_size(store.as_ref(), &repo, &oid)?,
                objects::stored_size(store.as_ref(), &oid)?,
            ))
        })
        .await;
        match found {
            Ok(Ok((Some(owned), Some(stored)))) if owned == size && stored == size => {
                json(&serde_json::json!({}))
            }
            Ok(Ok((Some(_), Some(_)))) => lfs_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "the object's size differs from the one given",
            ),
            Ok(Ok(_)) => lfs_error(StatusCode::NOT_FOUND, "Object does not exist"),
            Ok(Err(e)) => store_failed("verifying an object", &e),
            Err(e) => store_failed("verifying an object", &e),
        }
    }

    /// `PUT objects/<oid>`: the bytes, hashed while spooled, kept when they
    /// are the oid's and of the size granted.
    async fn upload(
        self,
        oid: &str,
        body: Body,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        let Some(oid) = Oid::parse(oid) else {
            return lfs_error(StatusCode::NOT_FOUND, "not an LFS object id");
        };
        let size = match self
            .authorize(Operation::Upload, &oid, Level::Write, logged)
            .await
        {
            Ok(Authorized::Grant(size)) => size,
            Ok(Authorized::Credentials) => match self
                .headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            {
                Some(n) => n,
                None => {
                    return lfs_error(
                        StatusCode::LENGTH_REQUIRED,
                        "an upload without a grant needs Content-Length",
                    )
                }
            },
            Err(resp) => return resp,
        };
        let max = self.app.config.lfs.max_object_size;
        if size > max {
            return lfs_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("object of {size} bytes exceeds the limit of {max} bytes"),
            );
        }
        let dir = self.app.host.config().receive.staging_dir.clone();
        let spool = match dir {
            Some(d) => tempfile::NamedTempFile::new_in(d),
            None => tempfile::NamedTempFile::new(),
        };
        let spool = match spool {
            Ok(f) => f,
            Err(e) => return store_failed("making an LFS spool file", &e),
        };
        let writer = match spool.reopen() {
            Ok(f) => Hashing::new(std::io::BufWriter::with_capacity(256 << 10, f)),
            Err(e) => return store_failed("opening an LFS spool file", &e),
        };
        let copied =
            body::copy_body(body, writer, false, size, false, self.app.config.body_pace).await;
        let hashed = match copied {
            Ok((w, _)) => {
                let (w, hashed) = w.finish();
                if let Err(e) = w.into_inner().map_err(|e| e.into_error()) {
                    return store_failed("spooling an LFS upload", &e);
                }
                hashed
            }
            Err(BodyError::TooLarge(_)) => {
                return lfs_error(
                    StatusCode::BAD_REQUEST,
                    format!("more than the {size} bytes announced for this object"),
                )
            }
            Err(BodyError::Io(e)) | Err(BodyError::Spool { error: e, .. }) => {
                return store_failed("spooling an LFS upload", &e)
            }
            Err(e) => return as_lfs(crate::app::body_error(e)).await,
        };
        let store = self.app.host.store().clone();
        let repo = self.name.clone();
        let accepted = tokio::task::spawn_blocking(move || {
            let r = objects::accept(store.as_ref(), &repo, &oid, size, hashed, spool.path());
            drop(spool);
            r
        })
        .await;
        match accepted {
            Ok(Ok(())) => {
                tracing::info!(repo = %self.name, %oid, size, "LFS object stored");
                Response::new(Body::empty())
            }
            Ok(Err(e @ (ObjectError::WrongContent(_) | ObjectError::WrongSize { .. }))) => {
                lfs_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
            }
            Ok(Err(ObjectError::Store(e))) => store_failed("storing an LFS object", &e),
            Err(e) => store_failed("storing an LFS object", &e),
        }
    }

    /// `GET objects/<oid>`: the bytes, streamed from the store.
    async fn download(self, oid: &str, logged: &mut crate::request_log::Logged) -> Response {
        let Some(oid) = Oid::parse(oid) else {
            return lfs_error(StatusCode::NOT_FOUND, "not an LFS object id");
        };
        let authorized = self
            .authorize(Operation::Download, &oid, Level::Read, logged)
            .await;
        if let Err(resp) = authorized {
            return resp;
        }
        let store = self.app.host.store().clone();
        let repo = self.name.clone();
        let found = tokio::task::spawn_blocking(move || {
            Ok::<_, gitstow_store::Error>((
                objects::owned_size(store.as_ref(), &repo, &oid)?,
                objects::stored_size(store.as_ref(), &oid)?,
            ))
        })
        .await;
        let size = match found {
            Ok(Ok((Some(_), Some(size)))) => size,
            Ok(Ok(_)) => return lfs_error(StatusCode::NOT_FOUND, "Object does not exist"),
            Ok(Err(e)) => return store_failed("finding an LFS object", &e),
            Err(e) => return store_failed("finding an LFS object", &e),
        };
        // Read a chunk at a time on a blocking thread, sent from a task: a
        // client that stops reading holds no thread, and is dropped after
        // the send stall (as a stalled git fetch is).
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
        let store = self.app.host.store().clone();
        tokio::spawn(async move {
            let mut at = 0;
            while at < size {
                let end = size.min(at + DOWNLOAD_CHUNK);
                let store = store.clone();
                let read = tokio::task::spawn_blocking(move || {
                    objects::read(store.as_ref(), &oid, at..end)
                })
                .await;
                let chunk = match read {
                    Ok(Ok(c)) => Ok(Bytes::from(c)),
                    Ok(Err(e)) => {
                        tracing::error!(error = %e, %oid, "LFS: reading an object failed");
                        Err(std::io::Error::other("reading the object failed"))
                    }
                    Err(e) => {
                        tracing::error!(error = %e, %oid, "LFS: reading an object failed");
                        Err(std::io::Error::other("reading the object failed"))
                    }
                };
                let failed = chunk.is_err();
                let sent =
                    tokio::time::timeout(gitstow_service::send_stall(), tx.send(chunk)).await;
                match sent {
                    Ok(Ok(())) if !failed => at = end,
                    Ok(_) => return,
                    Err(_) => {
                        tracing::info!(%oid, "LFS: the client stopped reading a download");
                        return;
                    }
                }
            }
        });
        let mut resp = Response::new(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        resp.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        resp
    }

    /// A JSON request body of at most [`MAX_REQUEST`] bytes; 422 when it
    /// does not parse.
    async fn read_json<T: serde::de::DeserializeOwned>(&self, body: Body) -> Result<T, Response> {
        let dir = self.app.host.config().receive.staging_dir.clone();
        let (mut buf, _) = match body::buffer(
            body,
            false,
            MAX_REQUEST,
            dir.as_deref(),
            self.app.config.body_pace,
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

    /// `http(s)://HOST/<name>.git/info/lfs`, from the request's `Host`.
    fn lfs_url(&self) -> String {
        let https = self.app.config.lfs.tls
            || self
                .headers
                .get("x-forwarded-proto")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
        let host = self
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| {
                !h.is_empty()
                    && h.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
            })
            .unwrap_or("localhost");
        let scheme = if https { "https" } else { "http" };
        format!("{scheme}://{host}/{}.git/info/lfs", self.name)
    }
}
