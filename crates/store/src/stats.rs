//! What a store measured about itself: request counters of a remote backend
//! ([`RequestStats`]) and hit/miss counters of the local cache
//! ([`CacheStats`]), gathered in [`StoreMetrics`] by
//! [`ObjectStore::metrics`](crate::ObjectStore::metrics) for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the requests a remote backend sent, by operation and outcome.
///
/// Request counters (`get` … `delete`) count HTTP requests, retries
/// included; `retries` counts how many of them repeated an earlier attempt.
/// `errors` counts operations that failed with
/// [`Error::Backend`](crate::Error::Backend) (after their retries);
/// `precondition_failed` counts conditional puts that lost
/// ([`Error::PreconditionFailed`](crate::Error::PreconditionFailed)).
/// All counters only grow; take two snapshots and subtract for a rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestStats {
    /// Whole-object GETs (`get`, and downloads into the cache).
    pub get: u64,
    /// Ranged GETs (`get_range`).
    pub get_range: u64,
    /// HEADs: `head`, and the ones other operations make (finding a
    /// multipart ETag, checking a conditional put after a timeout, the size
    /// behind an out-of-range read).
    pub head: u64,
    /// Unconditional single PUTs (`put` without condition, small `put_file`).
    pub put: u64,
    /// Conditional PUTs (`If-None-Match: *` or `If-Match`).
    pub put_conditional: u64,
    /// Multipart uploads started (CreateMultipartUpload).
    pub multipart_uploads: u64,
    /// Parts uploaded (UploadPart).
    pub multipart_parts: u64,
    /// Multipart uploads completed (CompleteMultipartUpload).
    pub multipart_completed: u64,
    /// Multipart uploads aborted after a failure (AbortMultipartUpload).
    pub multipart_aborted: u64,
    /// ListObjectsV2 pages.
    pub list: u64,
    /// DeleteObject requests.
    pub delete: u64,
    /// Other requests (HeadBucket when opening).
    pub other: u64,
    /// Conditional puts that found their condition false.
    pub precondition_failed: u64,
    /// Requests that repeated a failed attempt (5xx, throttling, timeouts,
    /// connection errors), and conditional puts repeated with the other
    /// `If-Match` ETag quoting.
    pub retries: u64,
    /// Operations that failed with a backend error after their retries.
    pub errors: u64,
    /// Object bytes received in GET bodies.
    pub bytes_read: u64,
    /// Object bytes sent in PUT and UploadPart bodies.
    pub bytes_written: u64,
}

/// Counters of [`CachedStore`](crate::CachedStore).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads (and HEADs) of immutable keys answered from the cache.
    pub hits: u64,
    /// Reads of immutable keys that were not cached and downloaded the object.
    pub misses: u64,
    /// Reads of immutable keys passed to the backend uncached (the object is
    /// larger than the cache, or caching failed).
    pub read_through: u64,
    /// Objects put into the cache from data being written (`put`, `put_file`).
    pub populated: u64,
    /// Objects evicted to stay under the size bound.
    pub evictions: u64,
    /// Bytes downloaded into the cache.
    pub bytes_downloaded: u64,
    /// Objects in the cache now.
    pub objects: u64,
    /// Bytes in the cache now.
    pub bytes: u64,
    /// The size bound in bytes.
    pub max_bytes: u64,
}

/// Everything a store measured; `None` where a layer does not exist or does
/// not count (the fs backend sends no requests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreMetrics {
    /// Requests of the remote backend.
    pub requests: Option<RequestStats>,
    /// The local cache of immutable objects.
    pub cache: Option<CacheStats>,
}

/// Which counter of [`RequestStats`] a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Get,
    GetRange,
    Head,
    Put,
    PutConditional,
    MultipartCreate,
    MultipartPart,
    MultipartComplete,
    MultipartAbort,
    List,
    Delete,
    Other,
}

impl Op {
    /// The operation's name in [`Error::Backend`](crate::Error::Backend).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::GetRange => "get_range",
            Op::Head => "head",
            Op::Put => "put",
            Op::PutConditional => "conditional put",
            Op::MultipartCreate => "create_multipart_upload",
            Op::MultipartPart => "upload_part",
            Op::MultipartComplete => "complete_multipart_upload",
            Op::MultipartAbort => "abort_multipart_upload",
            Op::List => "list",
            Op::Delete => "delete",
            Op::Other => "head_bucket",
        }
    }
}

const OPS: usize = 12;

/// The live counters behind [`RequestStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    requests: [AtomicU64; OPS],
    precondition_failed: AtomicU64,
    retries: AtomicU64,
    errors: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl Counters {
    pub(crate) fn request(&self, op: Op) {
        self.requests[op as usize].fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn precondition_failed(&self) {
        self.precondition_failed.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn read(&self, bytes: u64) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }
    pub(crate) fn written(&self, bytes: u64) {
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> RequestStats {
        let r = |op: Op| self.requests[op as usize].load(Ordering::Relaxed);
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        RequestStats {
            get: r(Op::Get),
            get_range: r(Op::GetRange),
            head: r(Op::Head),
            put: r(Op::Put),
            put_conditional: r(Op::PutConditional),
            multipart_uploads: r(Op::MultipartCreate),
            multipart_parts: r(Op::MultipartPart),
            multipart_completed: r(Op::MultipartComplete),
            multipart_aborted: r(Op::MultipartAbort),
            list: r(Op::List),
            delete: r(Op::Delete),
            other: r(Op::Other),
            precondition_failed: l(&self.precondition_failed),
            retries: l(&self.retries),
            errors: l(&self.errors),
            bytes_read: l(&self.bytes_read),
            bytes_written: l(&self.bytes_written),
        }
    }
}
