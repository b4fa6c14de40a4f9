//! Requests a client makes to the bucket itself: presigned GetObject and
//! PutObject URLs ([`ObjectStore::presign`](crate::ObjectStore::presign)),
//! the server-side copy, and the SHA-256 the server checked on upload.
//!
//! A presigned PUT signs `x-amz-checksum-sha256` (the SDK drops
//! `checksum_sha256` when presigning, aws-sdk-rust#1103, so the header is
//! added to the request before it is signed) and `content-length`: the
//! client must send exactly those, and a server that checks checksums (AWS
//! S3) refuses other bytes. Ceph RGW 16 signs them but does not check the
//! checksum nor keep it ([`S3Store::sha256`] is then `None`): the caller
//! has to hash what was stored. A URL never outlives the credentials that
//! signed it: with expiring credentials (STS, instance roles) the lifetime
//! is cut to their expiry less a minute, and no URL is made when less than
//! a minute is left.

use std::time::{Duration, SystemTime};

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::types::ChecksumMode;
use base64::Engine;

use crate::stats::Op;
use crate::{ETag, Error, PresignRequest, Presigned, Result};

use super::{classify, etag_of, is_not_found, S3Store};

/// Kept between a URL's expiry and its credentials'.
const CREDENTIALS_MARGIN: Duration = Duration::from_secs(60);

/// The largest object a single CopyObject copies (S3's limit).
pub(crate) const MAX_COPY: u64 = 5 << 30;

impl S3Store {
    /// How long a URL asked for `ttl` may live: `ttl`, cut to the signing
    /// credentials' expiry less [`CREDENTIALS_MARGIN`]; `None` when that
    /// leaves nothing.
    async fn url_lifetime(&self, ttl: Duration) -> Result<Option<Duration>> {
        use aws_credential_types::provider::ProvideCredentials;
        let creds = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| self.backend_error(Op::Head, "credentials", e.to_string()))?;
        Ok(match creds.expiry() {
            None => Some(ttl),
            Some(at) => at
                .duration_since(SystemTime::now())
                .ok()
                .and_then(|left| left.checked_sub(CREDENTIALS_MARGIN))
                .filter(|left| !left.is_zero())
                .map(|left| left.min(ttl)),
        })
    }

    pub(crate) async fn presign_request(
        &self,
        request: PresignRequest<'_>,
        ttl: Duration,
    ) -> Result<Option<Presigned>> {
        let Some(lifetime) = self.url_lifetime(ttl).await? else {
            return Ok(None);
        };
        let config = PresigningConfig::expires_in(lifetime)
            .map_err(|e| self.backend_error(Op::Get, "presign", e.to_string()))?;
        let bucket = &self.config.bucket;
        let (method, signed) = match request {
            PresignRequest::Get { key } => {
                let full = self.full_key(key);
                let signed = self
                    .client
                    .get_object()
                    .bucket(bucket)
                    .key(full)
                    .presigned(config)
                    .await
                    .map_err(|e| self.backend_error(Op::Get, key, e.to_string()))?;
                ("GET", signed)
            }
            PresignRequest::Put { key, size, sha256 } => {
                let full = self.full_key(key);
                let checksum = base64::engine::general_purpose::STANDARD.encode(sha256);
                let header = checksum.clone();
                let signed = self
                    .client
                    .put_object()
                    .bucket(bucket)
                    .key(full)
                    .content_length(i64::try_from(size).unwrap_or(i64::MAX))
                    .checksum_sha256(checksum)
                    .customize()
                    .mutate_request(move |req| {
                        req.headers_mut()
                            .insert("x-amz-checksum-sha256", header.clone());
                    })
                    .presigned(config)
                    .await
                    .map_err(|e| self.backend_error(Op::Put, key, e.to_string()))?;
                ("PUT", signed)
            }
        };
        Ok(Some(Presigned {
            method,
            url: signed.uri().to_owned(),
            headers: signed
                .headers()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            expires_in: lifetime,
        }))
    }

    /// CopyObject of `from` to `to` (at most [`MAX_COPY`] bytes).
    pub(crate) async fn copy_object(&self, from: &str, to: &str) -> Result<ETag> {
        let bucket = &self.config.bucket;
        let source = format!("{bucket}/{}", self.full_key(from));
        let full_to = self.full_key(to);
        let copied = self
            .retrying(Op::Put, to, || {
                let source = source.clone();
                let full_to = full_to.clone();
                async move {
                    match self
                        .client
                        .copy_object()
                        .bucket(bucket)
                        .key(full_to)
                        .copy_source(source)
                        .send()
                        .await
                    {
                        Ok(out) => Ok(Some(etag_of(
                            out.copy_object_result().and_then(|r| r.e_tag()),
                        ))),
                        Err(e) if is_not_found(&e) => Ok(None),
                        Err(e) => Err(classify(&e)),
                    }
                }
            })
            .await?;
        copied.ok_or_else(|| Error::NotFound {
            key: from.to_owned(),
        })
    }

    /// The SHA-256 the server keeps for `key` (HeadObject with checksum
    /// mode on), if any.
    pub(crate) async fn stored_sha256(&self, key: &str) -> Result<Option<[u8; 32]>> {
        let bucket = &self.config.bucket;
        let full = self.full_key(key);
        let b64 = self
            .retrying(Op::Head, key, || {
                let full = full.clone();
                async move {
                    match self
                        .client
                        .head_object()
                        .bucket(bucket)
                        .key(full)
                        .checksum_mode(ChecksumMode::Enabled)
                        .send()
                        .await
                    {
                        Ok(out) => Ok(out.checksum_sha256().map(str::to_owned)),
                        Err(e) if is_not_found(&e) => Ok(None),
                        Err(e) => Err(classify(&e)),
                    }
                }
            })
            .await?;
        Ok(b64
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|raw| <[u8; 32]>::try_from(raw).ok()))
    }
}
