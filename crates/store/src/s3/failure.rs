//! Sorting failed S3 requests into "try again" and "give up".

use std::error::Error as StdError;

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::Error;

/// How one attempt of a request failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Worth repeating. `ambiguous`: the server may have applied the request
    /// although we saw no success (timeout, dropped connection, 5xx), so a
    /// conditional write must check before it repeats.
    Transient { ambiguous: bool, message: String },
    /// Repeating cannot help (4xx, bad configuration).
    Fatal(String),
    /// A definite answer of the store's own vocabulary (not found, lost
    /// compare-and-swap, bad range, local I/O): returned as it is.
    Final(Error),
}

/// HTTP status of the response behind `err`, if there was one.
pub(crate) fn status<E>(err: &SdkError<E>) -> Option<u16> {
    err.raw_response().map(|r| r.status().as_u16())
}

/// S3 error code of `err` (`NoSuchKey`, `SlowDown`, …), if the server sent one.
pub(crate) fn code<E: ProvideErrorMetadata>(err: &SdkError<E>) -> Option<&str> {
    match err {
        SdkError::ServiceError(e) => e.err().code(),
        _ => None,
    }
}

/// `"HTTP 503 SlowDown: Please reduce your request rate"`-style summary; for
/// a request that got no S3 answer, what happened and the root cause only
/// (`"cannot reach the S3 endpoint: Connection refused (os error 111)"`):
/// the SDK's whole error chain goes to the debug log, not into messages.
pub(crate) fn describe<E>(err: &SdkError<E>) -> String
where
    E: ProvideErrorMetadata + StdError + 'static,
{
    match err {
        SdkError::ServiceError(e) => {
            let status = e.raw().status().as_u16();
            let code = e.err().code().unwrap_or("no error code");
            match e.err().message() {
                Some(m) => format!("HTTP {status} {code}: {m}"),
                None => format!("HTTP {status} {code}"),
            }
        }
        other => {
            tracing::debug!(error = %DisplayErrorContext(other), "S3 request failed");
            let what = match other {
                SdkError::DispatchFailure(_) => "cannot reach the S3 endpoint",
                SdkError::TimeoutError(_) => "the S3 request timed out",
                SdkError::ResponseError(_) => "unreadable S3 response",
                _ => "the S3 request could not be made",
            };
            format!("{what}: {}", root_cause(other))
        }
    }
}

/// The last error of `err`'s source chain.
fn root_cause<'a>(err: &'a (dyn StdError + 'static)) -> &'a (dyn StdError + 'static) {
    let mut root = err;
    while let Some(next) = root.source() {
        root = next;
    }
    root
}

/// Whether the request failed because the credential chain found no
/// credentials (an error of the credentials provider in its sources).
fn no_credentials<E>(err: &SdkError<E>) -> bool
where
    E: StdError + 'static,
{
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<aws_credential_types::provider::error::CredentialsError>()
            .is_some()
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// Which profile in which files the credential chain read (as aws-config
/// picks them: `AWS_PROFILE`, `AWS_SHARED_CREDENTIALS_FILE`,
/// `AWS_CONFIG_FILE`, else `default` in `~/.aws/`).
fn profile_looked_at() -> String {
    let var = |name: &str, default: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_owned())
    };
    format!(
        "profile {:?} in {} and {}",
        var("AWS_PROFILE", "default"),
        var("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
        var("AWS_CONFIG_FILE", "~/.aws/config")
    )
}

/// Sort a failed request.
pub(crate) fn classify<E>(err: &SdkError<E>) -> Failure
where
    E: ProvideErrorMetadata + StdError + 'static,
{
    let message = describe(err);
    if no_credentials(err) {
        // Retrying will not make credentials appear. The request never
        // left: what the chain's last provider said, not the endpoint.
        let root = root_cause(err);
        return Failure::Fatal(format!(
            "no usable S3 credentials (looked at --s3-access-key/--s3-secret-key, \
             AWS_ACCESS_KEY_ID, {}, web identity, ECS and EC2 instance roles, SSO); \
             the last one said: {root}",
            profile_looked_at()
        ));
    }
    match err {
        SdkError::ConstructionFailure(_) => Failure::Fatal(message),
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => Failure::Transient {
            ambiguous: true,
            message,
        },
        SdkError::DispatchFailure(d) if d.is_user() => Failure::Fatal(message),
        // A dropped connection may have carried the whole request.
        SdkError::DispatchFailure(_) => Failure::Transient {
            ambiguous: true,
            message,
        },
        SdkError::ServiceError(_) => {
            let status = status(err).unwrap_or(0);
            let code = code(err).unwrap_or("");
            let throttled = status == 429
                || status == 503
                || matches!(
                    code,
                    "SlowDown"
                        | "Throttling"
                        | "ThrottlingException"
                        | "ThrottledException"
                        | "RequestThrottled"
                        | "RequestLimitExceeded"
                        | "TooManyRequestsException"
                        | "ServiceUnavailable"
                );
            if throttled {
                // Refused before it was applied.
                Failure::Transient {
                    ambiguous: false,
                    message,
                }
            } else if code == "RequestTimeout" {
                // The server gave up reading our body: not applied.
                Failure::Transient {
                    ambiguous: false,
                    message,
                }
            } else if status >= 500 || code == "InternalError" {
                Failure::Transient {
                    ambiguous: true,
                    message,
                }
            } else {
                Failure::Fatal(message)
            }
        }
        _ => Failure::Fatal(message),
    }
}
