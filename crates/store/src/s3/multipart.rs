//! `put_file` of a large file: a multipart upload.
//!
//! CreateMultipartUpload, then the file's parts (each
//! [`S3Config::part_size_for`](super::S3Config::part_size_for) bytes but the
//! last) read from disk on blocking threads and uploaded with at most
//! [`S3Config::upload_concurrency`](super::S3Config::upload_concurrency) in
//! flight, so memory stays at `part_size * concurrency` whatever the file's
//! size; then CompleteMultipartUpload with the parts in order. Any failure
//! aborts the upload (AbortMultipartUpload) so no parts are left behind.
//! A crash of the process leaves the parts of its upload until a bucket
//! lifecycle rule (`AbortIncompleteMultipartUpload`) removes them.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};

use super::failure::{classify, code, status, Failure};
use super::S3Store;
use crate::stats::Op;
use crate::{ETag, Error, Result};

/// Upload the file at `path` (`size` bytes) to bucket key `full`.
pub(super) async fn upload(
    store: &S3Store,
    key: &str,
    full: &str,
    path: &Path,
    size: u64,
) -> Result<ETag> {
    let file = Arc::new(File::open(path).map_err(|e| Error::io(key, e))?);
    let bucket = &store.config.bucket;
    let upload_id = &store
        .retrying(Op::MultipartCreate, key, || async move {
            let out = store
                .client
                .create_multipart_upload()
                .bucket(bucket)
                .key(full)
                .send()
                .await
                .map_err(|e| classify(&e))?;
            out.upload_id()
                .map(str::to_owned)
                .ok_or_else(|| Failure::Fatal("no UploadId in the response".into()))
        })
        .await?;
    let result = parts_and_complete(store, key, full, &file, size, upload_id).await;
    if result.is_err() {
        let aborted = store
            .retrying(Op::MultipartAbort, key, || async move {
                match store
                    .client
                    .abort_multipart_upload()
                    .bucket(bucket)
                    .key(full)
                    .upload_id(upload_id)
                    .send()
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if status(&e) == Some(404) => Ok(()),
                    Err(e) => Err(classify(&e)),
                }
            })
            .await;
        if let Err(e) = aborted {
            tracing::warn!(key, upload_id, error = %e, "could not abort a failed multipart upload");
        }
    }
    result
}

async fn parts_and_complete(
    store: &S3Store,
    key: &str,
    full: &str,
    file: &Arc<File>,
    size: u64,
    upload_id: &str,
) -> Result<ETag> {
    let part_size = store.config.part_size_for(size);
    let parts = size.div_ceil(part_size).max(1);
    tracing::debug!(key, size, part_size, parts, "multipart upload");
    let mut completed: Vec<CompletedPart> = futures_util::stream::iter(1..=parts)
        .map(|number| {
            let offset = (number - 1) * part_size;
            let len = part_size.min(size - offset);
            upload_part(
                store,
                key,
                full,
                file.clone(),
                upload_id,
                number,
                offset,
                len,
            )
        })
        .buffer_unordered(store.config.upload_concurrency)
        .try_collect()
        .await?;
    completed.sort_by_key(|p| p.part_number());
    let manifest = &CompletedMultipartUpload::builder()
        .set_parts(Some(completed))
        .build();

    // A repeated Complete whose first attempt did land answers NoSuchUpload:
    // then HEAD decides.
    let attempts = &AtomicU32::new(0);
    let bucket = &store.config.bucket;
    let out = store
        .retrying(Op::MultipartComplete, key, || async move {
            let attempt = attempts.fetch_add(1, Ordering::Relaxed) + 1;
            match store
                .client
                .complete_multipart_upload()
                .bucket(bucket)
                .key(full)
                .upload_id(upload_id)
                .multipart_upload(manifest.clone())
                .send()
                .await
            {
                Ok(out) => Ok(out.e_tag().map(str::to_owned)),
                Err(e) if attempt > 1 && code(&e) == Some("NoSuchUpload") => Ok(None),
                Err(e) => Err(classify(&e)),
            }
        })
        .await?;
    // RGW answers with an empty <ETag>; HEAD has it. Check the size too
    // when we look anyway.
    if let Some(etag) = out.as_deref().map(super::etag::normalise) {
        if !etag.0.is_empty() {
            return Ok(etag);
        }
    }
    match store.head_object(key, full).await? {
        Some(head) if head.size == size && !head.etag.0.is_empty() => Ok(head.etag),
        Some(head) => Err(store.backend_error(
            Op::MultipartComplete,
            key,
            format!(
                "after the multipart upload HEAD shows {} bytes with ETag {:?}, expected {size} bytes",
                head.size, head.etag.0
            ),
        )),
        None => Err(store.backend_error(
            Op::MultipartComplete,
            key,
            "the multipart upload completed but HEAD finds no object".into(),
        )),
    }
}

#[allow(clippy::too_many_arguments)]
async fn upload_part(
    store: &S3Store,
    key: &str,
    full: &str,
    file: Arc<File>,
    upload_id: &str,
    number: u64,
    offset: u64,
    len: u64,
) -> Result<CompletedPart> {
    let data: Bytes = tokio::task::spawn_blocking(move || {
        let mut buf = vec![0; len as usize];
        file.read_exact_at(&mut buf, offset)
            .map(|()| Bytes::from(buf))
    })
    .await
    .map_err(|e| Error::io(key, std::io::Error::other(e)))?
    .map_err(|e| Error::io(key, e))?;
    let bucket = &store.config.bucket;
    let part_number = i32::try_from(number).map_err(|_| Error::Config {
        reason: format!("part number {number} is out of range"),
    })?;
    let out = store
        .retrying(Op::MultipartPart, key, || {
            let data = data.clone();
            async move {
                store
                    .client
                    .upload_part()
                    .bucket(bucket)
                    .key(full)
                    .upload_id(upload_id)
                    .part_number(part_number)
                    .content_length(len as i64)
                    .body(ByteStream::from(data))
                    .send()
                    .await
                    .map_err(|e| classify(&e))
            }
        })
        .await?;
    store.counters.written(len);
    let etag = out.e_tag().filter(|e| !e.is_empty()).ok_or_else(|| {
        store.backend_error(
            Op::MultipartPart,
            key,
            format!("no ETag for part {part_number}"),
        )
    })?;
    Ok(CompletedPart::builder()
        .part_number(part_number)
        .e_tag(etag)
        .build())
}
