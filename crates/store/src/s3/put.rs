//! The write path of [`S3Store`]: plain and conditional PutObject (with the
//! write id that settles ambiguous failures and RGW's `If-Match` spelling)
//! and small files streamed in one request.

use std::path::Path;

use aws_sdk_s3::primitives::{ByteStream, Length};
use bytes::Bytes;

use super::*;

impl S3Store {
    /// One unconditional PUT of `body`, repeated on transient failures.
    pub(super) async fn put_plain(
        &self,
        key: &str,
        full: &str,
        body: Bytes,
        write_id: &str,
    ) -> Result<ETag> {
        let bucket = &self.config.bucket;
        let len = body.len() as u64;
        let out = self
            .retrying(Op::Put, key, || {
                let body = body.clone();
                async move {
                    self.client
                        .put_object()
                        .bucket(bucket)
                        .key(full)
                        .content_length(len as i64)
                        .metadata(WRITE_ID_META, write_id)
                        .body(ByteStream::from(body))
                        .send()
                        .await
                        .map_err(|e| classify(&e))
                }
            })
            .await?;
        self.counters.written(len);
        self.etag_or_head(Op::Put, key, full, out.e_tag()).await
    }

    /// A conditional PUT: see the [`S3Store`] docs for the ETag quoting retry and
    /// for what happens after an ambiguous failure.
    pub(super) async fn put_conditional(
        &self,
        key: &str,
        full: &str,
        body: Bytes,
        write_id: &str,
        condition: &PutCondition,
    ) -> Result<ETag> {
        let op = Op::PutConditional;
        let len = body.len() as u64;
        let mut form = self.if_match.current();
        let mut requoted = false;
        let mut attempt = 1;
        loop {
            self.counters.request(op);
            let mut request = self
                .client
                .put_object()
                .bucket(&self.config.bucket)
                .key(full)
                .content_length(len as i64)
                .metadata(WRITE_ID_META, write_id)
                .body(ByteStream::from(body.clone()));
            request = match condition {
                PutCondition::IfAbsent => request.if_none_match("*"),
                PutCondition::IfMatch(expected) => request.if_match(form.render(expected)),
                PutCondition::None => request,
            };
            let err = match request.send().await {
                Ok(out) => {
                    if matches!(condition, PutCondition::IfMatch(_)) {
                        self.if_match.accepted(form);
                    }
                    self.counters.written(len);
                    return self.etag_or_head(op, key, full, out.e_tag()).await;
                }
                Err(e) => e,
            };
            if lost_condition(&err, condition) {
                if let PutCondition::IfMatch(expected) = condition {
                    if !requoted {
                        let current = self.head_object(key, full).await?;
                        if current.is_some_and(|c| etag::same(&c.etag, expected)) {
                            requoted = true;
                            form = form.other();
                            self.counters.retry();
                            tracing::debug!(
                                key,
                                ?form,
                                "If-Match refused although the ETag matches; \
                                 retrying with the other quoting"
                            );
                            continue;
                        }
                    }
                }
                return Err(self.lost(key));
            }
            match classify(&err) {
                Failure::Transient { ambiguous, message }
                    if attempt < self.backoff.max_attempts =>
                {
                    if ambiguous {
                        // The failed attempt may have been applied, or may
                        // have lost a race (RGW answers a put that loses at
                        // commit with 500): look before repeating it.
                        let current = self.head_object(key, full).await?;
                        if let Some(head) = &current {
                            if head.write_id.as_deref() == Some(write_id) {
                                tracing::info!(
                                    key,
                                    "conditional put had landed before its failure"
                                );
                                return Ok(head.etag.clone());
                            }
                        }
                        let holds = match condition {
                            PutCondition::IfAbsent => current.is_none(),
                            PutCondition::IfMatch(expected) => {
                                current.is_some_and(|c| etag::same(&c.etag, expected))
                            }
                            PutCondition::None => true,
                        };
                        if !holds {
                            tracing::debug!(key, error = %message, "conditional put failed; its condition no longer holds");
                            return Err(self.lost(key));
                        }
                    }
                    self.pause(op, key, attempt, &message).await;
                    attempt += 1;
                }
                Failure::Transient { message, .. } => {
                    let message = format!("{message} (gave up after {attempt} attempts)");
                    return Err(self.unavailable_error(op, key, message));
                }
                Failure::Fatal(message) => return Err(self.backend_error(op, key, message)),
                Failure::Final(e) => return Err(e),
            }
        }
    }

    /// PUT a file below the multipart threshold, streamed from disk.
    pub(super) async fn put_small_file(
        &self,
        key: &str,
        full: &str,
        path: &Path,
        size: u64,
    ) -> Result<ETag> {
        let bucket = &self.config.bucket;
        let out = self
            .retrying(Op::Put, key, || async move {
                let body = ByteStream::read_from()
                    .path(path)
                    .length(Length::Exact(size))
                    .build()
                    .await
                    .map_err(|e| Failure::Final(Error::io(key, std::io::Error::other(e))))?;
                self.client
                    .put_object()
                    .bucket(bucket)
                    .key(full)
                    .content_length(size as i64)
                    .body(body)
                    .send()
                    .await
                    .map_err(|e| classify(&e))
            })
            .await?;
        self.counters.written(size);
        self.etag_or_head(Op::Put, key, full, out.e_tag()).await
    }
}
