//! The one error type of the crate, shared by every [`ObjectStore`](crate::ObjectStore)
//! operation, and its `Result` alias.

/// What went wrong in a store operation.
///
/// Variants name the rule that broke and carry the offending values. The
/// callers that matter branch on [`Error::NotFound`] (absent object where one
/// is required) and [`Error::PreconditionFailed`] (a lost compare-and-swap:
/// re-read and retry); everything else is reported as it is.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operation that needs an existing object found none at `key`.
    #[error("no object at key {key:?}")]
    NotFound {
        /// The key that was looked up.
        key: String,
    },
    /// A conditional put did not hold: the object exists although
    /// [`PutCondition::IfAbsent`](crate::PutCondition::IfAbsent) was asked
    /// for, or its etag differs from (or it lacks) the one given with
    /// [`PutCondition::IfMatch`](crate::PutCondition::IfMatch).
    /// Nothing was written.
    #[error("precondition failed for key {key:?}")]
    PreconditionFailed {
        /// The key of the conditional put.
        key: String,
    },
    /// `key` breaks a rule of [`validate_key`](crate::validate_key).
    #[error("invalid key {key:?}: {reason}")]
    InvalidKey {
        /// The rejected key, verbatim.
        key: String,
        /// The rule it breaks, e.g. `"empty path segment"`.
        reason: &'static str,
    },
    /// A ranged read asked for bytes `start..end` (half-open, in bytes) of an
    /// object of `size` bytes with `start > end` or `end > size`.
    #[error("range {start}..{end} is outside object {key:?} of {size} bytes")]
    InvalidRange {
        /// The key that was read.
        key: String,
        /// First byte asked for.
        start: u64,
        /// One past the last byte asked for.
        end: u64,
        /// The object's size in bytes.
        size: u64,
    },
    /// [`open`](crate::open) was given a URL it cannot open.
    #[error("unsupported store URL {url:?}: {reason}")]
    UnsupportedUrl {
        /// The URL, verbatim.
        url: String,
        /// Why it cannot be opened, e.g. `"no bucket after s3://"`.
        reason: String,
    },
    /// A remote backend (S3) refused a request or could not be reached,
    /// after the retries the backend allows (see
    /// [`S3Config::max_attempts`](crate::S3Config::max_attempts)).
    #[error("{op} of {key:?} failed: {message}")]
    Backend {
        /// The operation, e.g. `"get"`, `"put"`, `"upload_part"`.
        op: &'static str,
        /// The object key (or list prefix) being worked on.
        key: String,
        /// What the backend said, with HTTP status and error code when
        /// there was a response.
        message: String,
        /// True when the backend did not answer usably until the retries
        /// ran out (timeouts, refused connections, 5xx, throttling): the
        /// store is unavailable rather than refusing this request.
        unavailable: bool,
    },
    /// A store's configuration is incomplete or contradictory, e.g. an S3
    /// store without credentials, or a part size below S3's 5 MiB minimum.
    #[error("store configuration: {reason}")]
    Config {
        /// What is missing or wrong.
        reason: String,
    },
    /// The backend's I/O failed. `key` is the object key being worked on;
    /// for operations without one it is the list prefix
    /// ([`ObjectStore::list`](crate::ObjectStore::list)) or the store's root
    /// path ([`FsStore::new`](crate::FsStore::new), [`open`](crate::open)).
    #[error("I/O error on key {key:?}: {source}")]
    Io {
        /// The key (or prefix, or root path) being worked on.
        key: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Wrap an I/O error that happened while working on `key`.
    pub(crate) fn io(key: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            key: key.into(),
            source,
        }
    }
}

/// The crate's result type: `E` defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether `e`, or an error in its chain of sources, is the operating
/// system's "no space left on device" (`ENOSPC`) or "disk quota exceeded"
/// (`EDQUOT`): what a client may be told ("out of space, try again later")
/// where any other server-side failure stays in the log.
pub fn is_out_of_space(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |err| err.source()).any(|err| {
        err.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            )
        })
    })
}

/// Whether `e` (or an error in its chain) is a store that did not answer
/// ([`Error::Backend`] with `unavailable`): what a client may be told ("the
/// store is unavailable, try again later", HTTP 503).
pub fn is_unavailable(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |err| err.source()).any(|err| {
        matches!(
            err.downcast_ref::<Error>(),
            Some(Error::Backend {
                unavailable: true,
                ..
            })
        )
    })
}

/// What a client may be told of a server-side failure, whatever the
/// transport or the engine: one text each, never a path or an error chain
/// (those go to the log). Git shows the text as `remote: …`, in an
/// `unpack` or `ERR` line, or after `fatal:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFault {
    /// The server's disk (or quota) is full ([`is_out_of_space`]).
    OutOfSpace,
    /// The store did not answer ([`is_unavailable`]).
    StoreDown,
    /// Anything else.
    Internal,
}

impl std::fmt::Display for ServerFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

impl ServerFault {
    /// The fault `e` is, by its chain: out of space, a store that does not
    /// answer, or anything else.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> ServerFault {
        if is_out_of_space(e) {
            ServerFault::OutOfSpace
        } else if is_unavailable(e) {
            ServerFault::StoreDown
        } else {
            ServerFault::Internal
        }
    }

    /// The words for the client.
    pub fn text(self) -> &'static str {
        match self {
            ServerFault::OutOfSpace => "server out of space, try again later",
            ServerFault::StoreDown => "the store does not answer, try again later",
            ServerFault::Internal => "internal server error, try again later",
        }
    }

    /// Whether the fault passes by itself (a full disk freed, a store back):
    /// HTTP answers 503 with `Retry-After`, else 500.
    pub fn passes(self) -> bool {
        !matches!(self, ServerFault::Internal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_told_by_their_chain_and_say_nothing_of_it() {
        let full = Error::io(
            "a.git/containers/x.bin",
            std::io::Error::from(std::io::ErrorKind::StorageFull),
        );
        assert_eq!(ServerFault::of(&full), ServerFault::OutOfSpace);
        let down = Error::Backend {
            op: "get",
            key: "a.git/state".into(),
            message: "timed out".into(),
            unavailable: true,
        };
        assert_eq!(ServerFault::of(&down), ServerFault::StoreDown);
        let other = Error::io("a.git/containers/x.bin", std::io::Error::other("boom"));
        assert_eq!(ServerFault::of(&other), ServerFault::Internal);
        for f in [
            ServerFault::OutOfSpace,
            ServerFault::StoreDown,
            ServerFault::Internal,
        ] {
            assert_eq!(f.to_string(), f.text());
            assert!(!f.text().contains(".git") && f.text().ends_with("try again later"));
        }
        assert!(ServerFault::StoreDown.passes() && !ServerFault::Internal.passes());
    }

    #[test]
    fn out_of_space_is_found_through_the_chain() {
        let full = std::io::Error::from_raw_os_error(28);
        assert!(is_out_of_space(&full));
        let wrapped = Error::io("r.git/containers/x.bin", full);
        assert!(is_out_of_space(&wrapped));
        let other = Error::io("k", std::io::Error::from_raw_os_error(13));
        assert!(!is_out_of_space(&other));
        assert!(!is_out_of_space(&Error::NotFound { key: "k".into() }));
    }
}
