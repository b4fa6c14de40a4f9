//! The S3 backend: [`S3Store`], its configuration ([`S3Config`],
//! [`S3Options`]), ETag spelling, failure classification and multipart
//! uploads.

use std::fs::File;
use std::future::Future;
use std::io::{Seek, Write};
use std::ops::Range;
use std::path::Path;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStreamError;
use aws_sdk_s3::Client;
use bytes::Bytes;

use crate::retry::Backoff;
use crate::stats::{Counters, Op, RequestStats, StoreMetrics};
use crate::{
    validate_key, ETag, Error, IfNoneMatch, ObjectMeta, ObjectStore, PutCondition, Result,
};

mod client;
mod config;
pub(crate) mod etag;
mod failure;
mod multipart;
mod presign;
mod put;
mod retrying;

use client::{credentials_provider, sdk_config};
pub use config::{is_s3_url, S3Config, S3Options};
use etag::IfMatchForm;
use failure::{classify, code, status, Failure};

/// The request counters of an [`S3Store`]: [`RequestStats`].
pub type S3Stats = RequestStats;

/// User metadata key holding the write id of a `put` (unique per call).
const WRITE_ID_META: &str = "gitstow-write-id";

/// A bucket (and key prefix) on AWS S3 or an S3-compatible server (Ceph
/// RGW, MinIO, …), through `aws-sdk-s3`.
///
/// It is synchronous like the [`ObjectStore`] trait: it owns a small
/// tokio runtime (2 worker threads) and blocks the calling thread on each
/// request. Callers are plain threads or tokio `spawn_blocking` threads (a
/// call from inside an async task does not panic: it runs on a helper thread,
/// but it still blocks the task's worker).
///
/// # Requests
///
/// | trait method | S3 requests |
/// |---|---|
/// | [`put`](ObjectStore::put) | PutObject (`If-None-Match: *` / `If-Match` for conditions) |
/// | [`put_file`](ObjectStore::put_file) | PutObject streamed from the file below [`S3Config::multipart_threshold`], else a multipart upload |
/// | [`get`](ObjectStore::get) | GetObject |
/// | [`get_range`](ObjectStore::get_range) | GetObject with `Range: bytes=a-b` (none for an empty range) |
/// | [`head`](ObjectStore::head) | HeadObject |
/// | [`list`](ObjectStore::list) | ListObjectsV2, 1000 keys per page |
/// | [`delete`](ObjectStore::delete) | DeleteObject |
///
/// # Behaviour every server gets (see `docs/s3-quirks.md`)
///
/// - **ETags** are returned unquoted (`9b2c…5328`, multipart `…-3`);
///   `If-Match` accepts either spelling. A conditional put refused with 412
///   HEADs the key; when the current ETag equals the expected one ignoring
///   quotes, it is repeated once (still conditional) with the other quoting
///   — Ceph RGW 16 takes only unquoted ETags — and the spelling that worked
///   is remembered for later puts. (RGW also answers 412 to a racing put
///   while the winner's write is in flight and HEAD still shows the old
///   ETag; the requoted repeat then loses too. It costs one request.)
/// - A missing key under `If-Match` (AWS: 404, RGW: 412) and 409
///   `ConditionalRequestConflict` are lost races:
///   [`Error::PreconditionFailed`].
/// - Checksums are computed and validated only where S3 requires them
///   (streamed bodies otherwise fail on RGW with `XAmzContentSHA256Mismatch`).
/// - A multipart upload whose CompleteMultipartUpload returns no ETag (RGW)
///   gets it from a HEAD. A failed multipart upload is aborted.
///
/// # Retries
///
/// The SDK's own retries are off; every request goes through one loop that
/// repeats 5xx answers, throttling (429, 503 `SlowDown`), timeouts and
/// connection errors up to [`S3Config::max_attempts`] times with exponential
/// backoff and jitter. Other 4xx answers fail at once with
/// [`Error::Backend`].
///
/// A **conditional put** is not blindly repeated: if an attempt failed in a
/// way that the server may have applied it (timeout, dropped connection,
/// 5xx), a repeat would find its own write and fail with a spurious 412. So
/// every `put` call stores a random write id as user metadata
/// (`x-amz-meta-gitstow-write-id`; the same for all attempts of one call),
/// and after an ambiguous failure the store HEADs the key at once: if the
/// object there carries our write id, the put landed and its ETag is
/// returned; if the condition still holds, the put is
/// repeated after the backoff; otherwise another writer got there first and
/// the put fails with [`Error::PreconditionFailed`] (without waiting). Ceph
/// RGW 16 needs this even without network trouble: a conditional put that
/// loses a race at commit time gets `500` (internally `ECANCELED`), not
/// `412`. (The last case also covers "ours landed and
/// someone else's landed on top" — indistinguishable from outside, and the
/// caller's re-read shows the truth.)
///
/// Keys are stored at `prefix + key`; listings strip the prefix again.
pub struct S3Store {
    client: Client,
    /// What signs requests (kept to know when presigned URLs must expire).
    credentials: aws_sdk_s3::config::SharedCredentialsProvider,
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    config: S3Config,
    backoff: Backoff,
    counters: Counters,
    if_match: IfMatchForm,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.config.bucket)
            .field("prefix", &self.config.prefix)
            .field("endpoint", &self.config.endpoint)
            .finish_non_exhaustive()
    }
}

/// What HEAD tells about an object.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) size: u64,
    pub(crate) etag: ETag,
    /// `x-amz-meta-gitstow-write-id`, set by this store's `put`.
    pub(crate) write_id: Option<String>,
}

impl S3Store {
    /// A store on `config.bucket` under `config.prefix`. Sends no request;
    /// see [`S3Store::check_bucket`].
    ///
    /// # Errors
    /// [`Error::Config`] from [`S3Config::validate`]; [`Error::Io`] when the
    /// runtime's threads cannot be started.
    pub fn new(config: S3Config) -> Result<Self> {
        config.validate()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gitstow-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::io(config.bucket.clone(), e))?;
        let credentials = credentials_provider(&config, &runtime);
        let client = {
            let conf = sdk_config(&config, &runtime, credentials.clone());
            let _guard = runtime.enter();
            Client::from_conf(conf)
        };
        let backoff = Backoff {
            max_attempts: config.max_attempts,
            base_delay: config.retry_base_delay,
            max_delay: config.retry_max_delay,
        };
        Ok(S3Store {
            client,
            credentials,
            runtime: Some(runtime),
            config,
            backoff,
            counters: Counters::default(),
            if_match: IfMatchForm::default(),
        })
    }

    /// The configuration this store was built with.
    pub fn config(&self) -> &S3Config {
        &self.config
    }

    /// The request counters so far.
    pub fn stats(&self) -> S3Stats {
        self.counters.snapshot()
    }

    /// Check that the bucket exists and the credentials may use it
    /// (HeadBucket). [`open`](crate::open) calls it, so a misconfigured
    /// server fails at start rather than on the first push.
    ///
    /// # Errors
    /// [`Error::Config`] when the bucket does not exist (404);
    /// [`Error::Backend`] for anything else (403, unreachable endpoint, …).
    pub fn check_bucket(&self) -> Result<()> {
        let bucket = &self.config.bucket;
        let result = self.block_on(self.retrying(Op::Other, bucket, || async move {
            match self.client.head_bucket().bucket(bucket).send().await {
                Ok(_) => Ok(true),
                Err(e) if status(&e) == Some(404) => Ok(false),
                Err(e) if matches!(status(&e), Some(401 | 403)) => {
                    Err(Failure::Final(Error::Config {
                        reason: format!(
                            "{} refused the credentials for bucket {bucket:?} (HTTP {}): check \
                             the access key and secret (--s3-access-key, --s3-secret-key or \
                             AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), and that they may read \
                             and write the bucket",
                            self.config.endpoint.as_deref().unwrap_or("AWS S3"),
                            status(&e).unwrap_or(403)
                        ),
                    }))
                }
                Err(e) => Err(classify(&e)),
            }
        }))?;
        if result {
            Ok(())
        } else {
            Err(Error::Config {
                reason: format!(
                    "bucket {bucket:?} does not exist at {}",
                    self.config.endpoint.as_deref().unwrap_or("AWS S3")
                ),
            })
        }
    }

    /// The bucket key of store key `key`.
    fn full_key(&self, key: &str) -> String {
        format!("{}{}", self.config.prefix, key)
    }

    /// Run `fut` to completion on the store's runtime.
    fn block_on<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        let rt = self.runtime.as_ref().expect("the runtime lives until drop");
        if tokio::runtime::Handle::try_current().is_ok() {
            // On an async thread `block_on` would panic; block a helper
            // thread instead (the caller should have used spawn_blocking).
            std::thread::scope(|s| {
                s.spawn(|| rt.block_on(fut))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        } else {
            rt.block_on(fut)
        }
    }

    /// HEAD `full` (the bucket key of `key`); `None` when absent.
    pub(crate) async fn head_object(&self, key: &str, full: &str) -> Result<Option<Head>> {
        let bucket = &self.config.bucket;
        self.retrying(Op::Head, key, || async move {
            let out = match self
                .client
                .head_object()
                .bucket(bucket)
                .key(full)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) => return Err(classify(&e)),
            };
            Ok(Some(Head {
                size: out.content_length().unwrap_or(0).max(0) as u64,
                etag: etag_of(out.e_tag()),
                write_id: out.metadata().and_then(|m| m.get(WRITE_ID_META)).cloned(),
            }))
        })
        .await
    }

    /// The normalised `etag` a write returned, or, when the server sent none
    /// (RGW's CompleteMultipartUpload), the one HEAD reports.
    pub(crate) async fn etag_or_head(
        &self,
        op: Op,
        key: &str,
        full: &str,
        etag: Option<&str>,
    ) -> Result<ETag> {
        match etag.map(etag::normalise) {
            Some(e) if !e.0.is_empty() => Ok(e),
            _ => match self.head_object(key, full).await? {
                Some(head) if !head.etag.0.is_empty() => Ok(head.etag),
                _ => Err(self.backend_error(
                    op,
                    key,
                    "the server returned no ETag and HEAD found none".into(),
                )),
            },
        }
    }

    /// The error for a ranged read of `start..end` that does not fit the
    /// object: its size from HEAD, or [`Error::NotFound`].
    /// One GetObject of the whole object; `None` when the key is absent.
    async fn get_object(
        &self,
        bucket: &str,
        full: &str,
    ) -> std::result::Result<Option<aws_sdk_s3::operation::get_object::GetObjectOutput>, Failure>
    {
        match self
            .client
            .get_object()
            .bucket(bucket)
            .key(full)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(classify(&e)),
        }
    }

    fn out_of_range(&self, key: &str, start: u64, end: u64, size: Option<u64>) -> Error {
        let size = match size {
            Some(size) => size,
            None => match self.block_on(self.head_object(key, &self.full_key(key))) {
                Ok(Some(head)) => head.size,
                Ok(None) => return not_found(key),
                Err(e) => return e,
            },
        };
        Error::InvalidRange {
            key: key.to_owned(),
            start,
            end,
            size,
        }
    }
}

impl Drop for S3Store {
    fn drop(&mut self) {
        // Dropping a runtime inside another one (the server's) panics;
        // shutdown_background is allowed anywhere.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Result of one ranged GET.
enum Ranged {
    Bytes(Vec<u8>),
    /// The range does not fit; the object's size if the response told it.
    OutOfRange(Option<u64>),
}

impl ObjectStore for S3Store {
    fn put(&self, key: &str, data: &[u8], condition: PutCondition) -> Result<ETag> {
        validate_key(key)?;
        let full = self.full_key(key);
        let write_id = crate::retry::unique_id();
        let body = Bytes::copy_from_slice(data);
        self.block_on(async {
            match &condition {
                PutCondition::None => self.put_plain(key, &full, body, &write_id).await,
                cond => {
                    self.put_conditional(key, &full, body, &write_id, cond)
                        .await
                }
            }
        })
    }

    fn put_file(&self, key: &str, path: &Path) -> Result<ETag> {
        validate_key(key)?;
        let size = std::fs::metadata(path)
            .map_err(|e| Error::io(key, e))?
            .len();
        let full = self.full_key(key);
        self.block_on(async {
            if size < self.config.multipart_threshold {
                self.put_small_file(key, &full, path, size).await
            } else {
                multipart::upload(self, key, &full, path, size).await
            }
        })
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        validate_key(key)?;
        let full = &self.full_key(key);
        let bucket = &self.config.bucket;
        self.block_on(self.retrying(Op::Get, key, || async move {
            let Some(out) = self.get_object(bucket, full).await? else {
                return Ok(None);
            };
            let etag = etag_of(out.e_tag());
            let data = out.body.collect().await.map_err(body_failure)?.to_vec();
            self.counters.read(data.len() as u64);
            Ok(Some((data, etag)))
        }))
    }

    fn get_if_none_match(&self, key: &str, etag: &ETag) -> Result<IfNoneMatch> {
        validate_key(key)?;
        let full = &self.full_key(key);
        let bucket = &self.config.bucket;
        // The quoted form, as HTTP says; a server that does not match it
        // answers 200 and the bytes, which is only slower.
        let condition = etag::Form::Quoted.render(etag);
        let condition = &condition;
        self.block_on(self.retrying(Op::Get, key, || async move {
            let sent = self
                .client
                .get_object()
                .bucket(bucket)
                .key(full)
                .if_none_match(condition)
                .send()
                .await;
            let out = match sent {
                Ok(out) => out,
                Err(e) if status(&e) == Some(304) => return Ok(IfNoneMatch::Unchanged),
                Err(e) if is_not_found(&e) => return Ok(IfNoneMatch::Absent),
                Err(e) => return Err(classify(&e)),
            };
            let current = etag_of(out.e_tag());
            let data = out.body.collect().await.map_err(body_failure)?.to_vec();
            self.counters.read(data.len() as u64);
            // A server that ignored the condition: compare here.
            Ok(IfNoneMatch::of(Some((data, current)), etag))
        }))
    }

    fn get_to_file(&self, key: &str, file: &mut File) -> Result<Option<ObjectMeta>> {
        validate_key(key)?;
        let full = &self.full_key(key);
        let bucket = &self.config.bucket;
        let file: &File = file;
        self.block_on(self.retrying(Op::Get, key, || async move {
            let local = |e| Failure::Final(Error::io(key, e));
            let mut out_file = file;
            out_file.set_len(0).map_err(local)?;
            out_file.rewind().map_err(local)?;
            let Some(out) = self.get_object(bucket, full).await? else {
                return Ok(None);
            };
            let etag = etag_of(out.e_tag());
            let mut body = out.body;
            let mut size = 0u64;
            while let Some(chunk) = body.try_next().await.map_err(body_failure)? {
                out_file.write_all(&chunk).map_err(local)?;
                size += chunk.len() as u64;
            }
            self.counters.read(size);
            Ok(Some(ObjectMeta { size, etag }))
        }))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>> {
        validate_key(key)?;
        let (start, end) = (range.start, range.end);
        if start == end {
            return Ok(Vec::new());
        }
        if start > end {
            return Err(self.out_of_range(key, start, end, None));
        }
        let want = end - start;
        let full = &self.full_key(key);
        let bucket = &self.config.bucket;
        let header = &format!("bytes={}-{}", start, end - 1);
        let read = self.block_on(self.retrying(Op::GetRange, key, || async move {
            let request = self
                .client
                .get_object()
                .bucket(bucket)
                .key(full)
                .range(header);
            let out = match request.send().await {
                Ok(out) => out,
                Err(e) if is_not_found(&e) => return Err(Failure::Final(not_found(key))),
                Err(e) if status(&e) == Some(416) || code(&e) == Some("InvalidRange") => {
                    return Ok(Ranged::OutOfRange(None));
                }
                Err(e) => return Err(classify(&e)),
            };
            let total = out.content_range().map(content_range_total);
            let data = out.body.collect().await.map_err(body_failure)?.to_vec();
            self.counters.read(data.len() as u64);
            match total {
                // A partial answer: short means the range ran past the end.
                Some(_) if data.len() as u64 == want => Ok(Ranged::Bytes(data)),
                Some(total) => Ok(Ranged::OutOfRange(total)),
                // No Content-Range: the server sent the whole object.
                None => {
                    let size = data.len() as u64;
                    if end > size {
                        Ok(Ranged::OutOfRange(Some(size)))
                    } else {
                        Ok(Ranged::Bytes(data[start as usize..end as usize].to_vec()))
                    }
                }
            }
        }))?;
        match read {
            Ranged::Bytes(data) => Ok(data),
            Ranged::OutOfRange(size) => Err(self.out_of_range(key, start, end, size)),
        }
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>> {
        validate_key(key)?;
        let full = self.full_key(key);
        let head = self.block_on(self.head_object(key, &full))?;
        Ok(head.map(|h| ObjectMeta {
            size: h.size,
            etag: h.etag,
        }))
    }

    /// A presigned GetObject or PutObject (see the `presign` module).
    fn presign(
        &self,
        request: crate::PresignRequest<'_>,
        ttl: std::time::Duration,
    ) -> Result<Option<crate::Presigned>> {
        validate_key(request.key())?;
        self.block_on(self.presign_request(request, ttl))
    }

    /// CopyObject up to 5 GiB; beyond, through a temp file.
    fn copy(&self, from: &str, to: &str) -> Result<ETag> {
        validate_key(from)?;
        validate_key(to)?;
        let size = self.head(from)?.map(|m| m.size);
        match size {
            None => Err(not_found(from)),
            Some(n) if n <= presign::MAX_COPY => self.block_on(self.copy_object(from, to)),
            Some(_) => {
                let mut tmp = tempfile::NamedTempFile::new().map_err(|e| Error::io(from, e))?;
                if self.get_to_file(from, tmp.as_file_mut())?.is_none() {
                    return Err(not_found(from));
                }
                self.put_file(to, tmp.path())
            }
        }
    }

    fn sha256(&self, key: &str) -> Result<Option<[u8; 32]>> {
        validate_key(key)?;
        self.block_on(self.stored_sha256(key))
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let full_prefix = &format!("{}{}", self.config.prefix, prefix);
        let bucket = &self.config.bucket;
        let store_prefix = self.config.prefix.as_str();
        self.block_on(async move {
            let mut keys = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let page = {
                    let token = &token;
                    self.retrying(Op::List, prefix, || async move {
                        self.client
                            .list_objects_v2()
                            .bucket(bucket)
                            .prefix(full_prefix)
                            .set_continuation_token(token.clone())
                            .send()
                            .await
                            .map_err(|e| classify(&e))
                    })
                    .await?
                };
                keys.extend(
                    page.contents()
                        .iter()
                        .filter_map(|o| o.key())
                        .filter_map(|k| k.strip_prefix(store_prefix))
                        .map(str::to_owned),
                );
                match (page.is_truncated(), page.next_continuation_token()) {
                    (Some(true), Some(next)) => token = Some(next.to_owned()),
                    _ => break,
                }
            }
            keys.sort_unstable();
            keys.dedup();
            Ok(keys)
        })
    }

    fn delete(&self, key: &str) -> Result<()> {
        validate_key(key)?;
        let full = &self.full_key(key);
        let bucket = &self.config.bucket;
        self.block_on(self.retrying(Op::Delete, key, || async move {
            match self
                .client
                .delete_object()
                .bucket(bucket)
                .key(full)
                .send()
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if is_not_found(&e) => Ok(()),
                Err(e) => Err(classify(&e)),
            }
        }))
    }

    fn metrics(&self) -> StoreMetrics {
        StoreMetrics {
            requests: Some(self.stats()),
            cache: None,
        }
    }
}

fn not_found(key: &str) -> Error {
    Error::NotFound {
        key: key.to_owned(),
    }
}

/// The normalised ETag of a response (empty when it had none).
fn etag_of(etag: Option<&str>) -> ETag {
    etag.map(etag::normalise).unwrap_or(ETag(String::new()))
}

/// Whether a failed request means "no such key" (404, `NoSuchKey`).
fn is_not_found<E: ProvideErrorMetadata>(err: &SdkError<E>) -> bool {
    status(err) == Some(404) || matches!(code(err), Some("NoSuchKey" | "NotFound"))
}

/// Whether a failed conditional put means the condition did not hold.
fn lost_condition<E: ProvideErrorMetadata>(err: &SdkError<E>, condition: &PutCondition) -> bool {
    let status = status(err);
    status == Some(412)
        || status == Some(409)
        || (status == Some(404) && matches!(condition, PutCondition::IfMatch(_)))
        || matches!(
            code(err),
            Some("PreconditionFailed" | "ConditionalRequestConflict")
        )
}

/// A response body that broke off: read it again.
fn body_failure(e: ByteStreamError) -> Failure {
    Failure::Transient {
        ambiguous: false,
        message: format!("reading the response body: {e}"),
    }
}

/// The total size in a `Content-Range: bytes a-b/total` header; `None` for
/// `*` or anything unparsable.
fn content_range_total(header: &str) -> Option<u64> {
    header.rsplit_once('/')?.1.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_parsing() {
        assert_eq!(content_range_total("bytes 0-9/100"), Some(100));
        assert_eq!(content_range_total("bytes 5-9/10"), Some(10));
        assert_eq!(content_range_total("bytes 0-9/*"), None);
        assert_eq!(content_range_total("garbage"), None);
    }

    #[test]
    fn new_refuses_incomplete_config_without_network() {
        let err = S3Store::new(S3Config::new("", "")).unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err:?}");
    }

    #[test]
    fn store_can_be_built_and_dropped_inside_a_runtime() {
        let mut config = S3Config::new("b", "p");
        config.access_key = Some("a".into());
        config.secret_key = Some("s".into());
        config.endpoint = Some("http://127.0.0.1:9".into());
        let store = S3Store::new(config).unwrap();
        assert_eq!(store.full_key("r/state"), "p/r/state");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // Dropping the store's runtime from async code must not panic.
        rt.block_on(async move { drop(store) });
    }
}
