//! The batch API and the transfers (git-lfs `docs/api/batch.md`,
//! `basic-transfers.md`): `POST objects/batch`, `PUT`/`GET objects/<oid>`,
//! `POST verify`.

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use gitstow_lfs::api::{BatchRequest, VerifyRequest};
use gitstow_lfs::grant::Operation;
use gitstow_lfs::objects::{self, Hashing, ObjectError};
use gitstow_lfs::Oid;
use gitstow_service::gate::Level;
use gitstow_service::mirrors::LfsAccess;

use super::{as_lfs, json, lfs_error, now_secs, store_failed, Authorized, Call, DOWNLOAD_CHUNK};

/// Downloads reading a chunk from the store at once.
static STORE_READS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(16);

/// Bytes of a download handed to hyper at a time (of a chunk read).
const PIECE: usize = gitstow_service::output::CHUNK;
use crate::body::{self, BodyError};
use crate::metrics as m;

/// Counts a batch answered: its objects by result, the bytes signed.
fn count_batch(op: Operation, answer: &gitstow_lfs::api::BatchResponse) {
    let operation = match op {
        Operation::Download => "download",
        Operation::Upload => "upload",
    };
    metrics::counter!(m::LFS_BATCHES, "operation" => operation).increment(1);
    for o in &answer.objects {
        let action = o
            .actions
            .as_ref()
            .and_then(|a| a.download.as_ref().or(a.upload.as_ref()));
        let result = match (&o.error, action) {
            (Some(_), _) => "error",
            (None, None) => "present",
            (None, Some(a)) if a.header.contains_key("Authorization") => "proxied",
            (None, Some(_)) => {
                metrics::counter!(m::LFS_BYTES_SIGNED, "operation" => operation)
                    .increment(u64::try_from(o.size).unwrap_or(0));
                "presigned"
            }
        };
        metrics::counter!(m::LFS_OBJECTS, "operation" => operation, "result" => result)
            .increment(1);
    }
}

impl Call {
    /// `POST objects/batch`.
    pub(super) async fn batch(
        self,
        body: Body,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        // Who asks is checked before the body is read (an upload needs
        // write, checked once the operation is known).
        if let Err(resp) = self.credentials(Level::Read, logged).await {
            return resp;
        }
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
        if needed != Level::Read {
            if let Err(resp) = self.credentials(needed, logged).await {
                return resp;
            }
        }
        let access = match op {
            Operation::Download => LfsAccess::Download,
            Operation::Upload => LfsAccess::Upload,
        };
        if let Err(resp) = self.repository_for(access).await {
            return resp;
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
            Ok(Ok(answer)) => {
                count_batch(op, &answer);
                json(&answer)
            }
            Ok(Err(e)) => store_failed("answering a batch", &e),
            Err(e) => store_failed("answering a batch", &e),
        }
    }

    /// `POST verify`: 200 when the repository owns the object at that size.
    pub(super) async fn verify(
        self,
        body: Body,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        let with_grant = self
            .headers
            .get(header::AUTHORIZATION)
            .is_some_and(|v| v.as_bytes().starts_with(b"RemoteAuth v1."));
        if !with_grant {
            if let Err(resp) = self.credentials(Level::Write, logged).await {
                return resp;
            }
        }
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
        let upload = match self
            .authorize(Operation::Upload, &oid, Level::Write, logged)
            .await
        {
            Ok(Authorized::Grant { upload, .. }) => upload,
            Ok(Authorized::Credentials) => None,
            Err(resp) => return resp,
        };
        if let Err(resp) = self.repository_for(LfsAccess::Granted).await {
            return resp;
        }
        let store = self.app.host.store().clone();
        let repo = self.name.clone();
        let verified = tokio::task::spawn_blocking(move || {
            let staging = upload.map(|u| gitstow_lfs::keys::staging(&oid, &u));
            objects::verify(store.as_ref(), &repo, &oid, size, staging.as_deref())
        })
        .await;
        match verified {
            Ok(Ok(objects::Verified::Owned)) => {
                tracing::info!(repo = %self.name, %oid, size, "LFS object verified");
                json(&serde_json::json!({}))
            }
            Ok(Ok(objects::Verified::Missing)) => {
                lfs_error(StatusCode::NOT_FOUND, "Object does not exist")
            }
            Ok(Err(e @ (ObjectError::WrongContent(_) | ObjectError::WrongSize { .. }))) => {
                tracing::info!(repo = %self.name, %oid, reason = %e, "LFS upload refused at verify");
                lfs_error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
            }
            Ok(Err(ObjectError::Store(e))) => store_failed("verifying an object", &e),
            Err(e) => store_failed("verifying an object", &e),
        }
    }

    /// `PUT objects/<oid>`: the bytes, hashed while spooled, kept when they
    /// are the oid's and of the size granted.
    pub(super) async fn upload(
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
            Ok(Authorized::Grant { size, .. }) => size,
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
        if let Err(resp) = self.repository_for(LfsAccess::Granted).await {
            return resp;
        }
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
        let copied = body::copy_body(
            body,
            writer,
            false,
            size,
            false,
            self.app.host().config().limits.pace,
        )
        .await;
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
                metrics::counter!(m::LFS_BYTES_SERVED, "direction" => "in").increment(size);
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
    pub(super) async fn download(
        self,
        oid: &str,
        logged: &mut crate::request_log::Logged,
    ) -> Response {
        let Some(oid) = Oid::parse(oid) else {
            return lfs_error(StatusCode::NOT_FOUND, "not an LFS object id");
        };
        let authorized = self
            .authorize(Operation::Download, &oid, Level::Read, logged)
            .await;
        if let Err(resp) = authorized {
            return resp;
        }
        if let Err(resp) = self.repository_for(LfsAccess::Download).await {
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
        // Read a chunk at a time on a blocking thread, sent from a task in
        // pieces of 64 KiB, one waiting for hyper at a time and the next
        // chunk read only once this one is taken: a stalled download holds
        // one chunk and no thread, and is dropped when the client does not
        // keep the response pace (as a stalled git fetch is).
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
        let store = self.app.host.store().clone();
        let mut patience = gitstow_service::output::Patience::new(self.app.host.response_pace());
        tokio::spawn(async move {
            let mut at = 0;
            while at < size {
                let end = size.min(at + DOWNLOAD_CHUNK);
                let store = store.clone();
                // A few reads at once: 400 downloads starting together took
                // as many blocking threads.
                let Ok(reading) = STORE_READS.acquire().await else {
                    return;
                };
                let read = tokio::task::spawn_blocking(move || {
                    objects::read(store.as_ref(), &oid, at..end)
                })
                .await;
                // Given back before the chunk waits for the client.
                drop(reading);
                let chunk = match read {
                    Ok(Ok(c)) => Bytes::from(c),
                    failed => {
                        match failed {
                            Ok(Err(e)) => {
                                tracing::error!(error = %e, %oid, "LFS: reading an object failed")
                            }
                            Err(e) => {
                                tracing::error!(error = %e, %oid, "LFS: reading an object failed")
                            }
                            Ok(Ok(_)) => {}
                        }
                        let failed =
                            tx.send(Err(std::io::Error::other("reading the object failed")));
                        let _ = tokio::time::timeout(patience.allowed(), failed).await;
                        return;
                    }
                };
                let mut piece_at = 0;
                while piece_at < chunk.len() {
                    let piece = chunk.slice(piece_at..chunk.len().min(piece_at + PIECE));
                    let n = piece.len();
                    let taken = patience.send(n as u64, async { tx.send(Ok(piece)).await.is_ok() });
                    match taken.await {
                        Ok(()) => {}
                        Err(gitstow_service::output::Ended::TooSlow) => {
                            tracing::info!(%oid, "LFS: the client stopped reading a download (slower than the minimum rate)");
                            return;
                        }
                        Err(_) => return,
                    }
                    piece_at += n;
                }
                metrics::counter!(m::LFS_BYTES_SERVED, "direction" => "out").increment(end - at);
                at = end;
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

    /// `http(s)://HOST/<name>.git/info/lfs`, from the request's `Host`.
    fn lfs_url(&self) -> String {
        if let Some(url) = &self.app.config.lfs.public_url {
            return format!("{}/{}.git/info/lfs", url.trim_end_matches('/'), self.name);
        }
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
