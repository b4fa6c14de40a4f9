//! Where an S3 store is and how to talk to it: [`S3Config`], built from an
//! `s3://bucket/prefix` URL, explicit [`S3Options`] and the standard AWS
//! environment variables, in that order of precedence.

use std::fmt;
use std::time::Duration;

use crate::{validate_key, Error, Result};

/// 1 MiB.
const MIB: u64 = 1 << 20;
/// S3's smallest part (all but the last part of a multipart upload).
pub const MIN_PART_SIZE: u64 = 5 * MIB;
/// S3's largest number of parts in one multipart upload.
pub const MAX_PARTS: u64 = 10_000;

/// Settings the caller (e.g. `gitstow serve` flags) gives explicitly; every
/// `None` falls back to the environment (see [`S3Config::from_url`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// Endpoint URL, e.g. `http://127.0.0.1:7480`; `None`: `AWS_ENDPOINT_URL_S3`,
    /// `AWS_ENDPOINT_URL`, else AWS itself.
    pub endpoint: Option<String>,
    /// Region; `None`: `AWS_REGION`, `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub region: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key` rather than
    /// `bucket.endpoint/key`); `None`: `AWS_S3_FORCE_PATH_STYLE`, else true
    /// exactly when an endpoint is set.
    pub path_style: Option<bool>,
    /// Access key id; `None`: `AWS_ACCESS_KEY_ID`.
    pub access_key: Option<String>,
    /// Secret access key; `None`: `AWS_SECRET_ACCESS_KEY`.
    pub secret_key: Option<String>,
    /// Session token of temporary credentials; `None`: `AWS_SESSION_TOKEN`.
    pub session_token: Option<String>,
    /// TCP (and TLS) connect timeout; `None`: the default (3 s).
    pub connect_timeout: Option<Duration>,
    /// How long a request may wait for the server between bytes; `None`:
    /// the default (15 s).
    pub read_timeout: Option<Duration>,
    /// No retry starts this long after an operation's first attempt; `None`:
    /// the default (30 s).
    pub retry_deadline: Option<Duration>,
}

impl fmt::Debug for S3Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Options")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("path_style", &self.path_style)
            .field("access_key", &self.access_key)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Everything [`S3Store::new`](crate::S3Store::new) needs.
///
/// Build it with [`S3Config::from_url`] (URL + options + environment),
/// [`S3Config::from_env`] (bucket and prefix given, the rest from the
/// environment) or [`S3Config::new`] (nothing from the environment) and
/// adjust the public fields. Every tuning field documents its default and
/// what it costs.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Config {
    /// The bucket.
    pub bucket: String,
    /// Prepended to every key: `""` (the whole bucket) or a key prefix
    /// ending in `/`, e.g. `"gitstow/"`. Listings return keys without it.
    pub prefix: String,
    /// Endpoint URL for S3-compatible servers; `None`: AWS.
    pub endpoint: Option<String>,
    /// Region used for signing; `None`: `us-east-1`.
    pub region: Option<String>,
    /// Path-style addressing (needed by most S3-compatible servers).
    pub path_style: bool,
    /// Access key id. Required together with `secret_key`.
    pub access_key: Option<String>,
    /// Secret access key.
    pub secret_key: Option<String>,
    /// Session token of temporary credentials.
    pub session_token: Option<String>,
    /// Files of at least this many bytes are uploaded by `put_file` as a
    /// multipart upload, smaller ones with one PUT. Default 16 MiB.
    pub multipart_threshold: u64,
    /// Size of each part but the last, at least 5 MiB; grown automatically
    /// when a file would need more than 10,000 parts. Default 16 MiB. Memory
    /// use of an upload is up to `part_size * upload_concurrency`.
    pub part_size: u64,
    /// Parts of one upload in flight at once. Default 4.
    pub upload_concurrency: usize,
    /// Attempts per request, the first included; 1 disables retries.
    /// Default 5.
    pub max_attempts: u32,
    /// Upper bound of the first retry's wait (doubling per retry, with
    /// jitter). Default 100 ms.
    pub retry_base_delay: Duration,
    /// Upper bound of any retry wait. Default 5 s.
    pub retry_max_delay: Duration,
    /// TCP (and TLS) connect timeout. Default 5 s.
    pub connect_timeout: Duration,
    /// How long a request may wait for the server to answer or send more
    /// bytes (the SDK's read timeout). Default 15 s: a stalled endpoint
    /// surfaces in seconds.
    pub read_timeout: Duration,
    /// No retry starts this long after an operation's first attempt, so a
    /// stalled endpoint fails an operation after about this plus one read
    /// timeout. Default 30 s.
    pub retry_deadline: Duration,
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("path_style", &self.path_style)
            .field("access_key", &self.access_key)
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .field("multipart_threshold", &self.multipart_threshold)
            .field("part_size", &self.part_size)
            .field("upload_concurrency", &self.upload_concurrency)
            .field("max_attempts", &self.max_attempts)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("retry_deadline", &self.retry_deadline)
            .finish()
    }
}

impl S3Config {
    /// `bucket` and `prefix` (normalised: a non-empty prefix gets a trailing
    /// `/`) with every other field at its default and nothing taken from the
    /// environment: no endpoint (AWS), no credentials, virtual-host style.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        S3Config {
            bucket: bucket.into(),
            prefix: normalise_prefix(&prefix.into()),
            endpoint: None,
            region: None,
            path_style: false,
            access_key: None,
            secret_key: None,
            session_token: None,
            multipart_threshold: 16 * MIB,
            part_size: 16 * MIB,
            upload_concurrency: 4,
            max_attempts: 5,
            retry_base_delay: Duration::from_millis(100),
            retry_max_delay: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
            read_timeout: Duration::from_secs(15),
            retry_deadline: Duration::from_secs(30),
        }
    }

    /// [`S3Config::new`], then endpoint, region, path style and credentials
    /// from the process environment as [`S3Config::from_url`] describes.
    pub fn from_env(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        let mut config = S3Config::new(bucket, prefix);
        config.apply(&S3Options::default(), &|name| std::env::var(name).ok());
        config
    }

    /// The configuration an `s3://BUCKET[/PREFIX]` URL names.
    ///
    /// Each setting comes from `options` when given there, else from the
    /// environment:
    ///
    /// | setting | environment | default |
    /// |---|---|---|
    /// | endpoint | `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL` | AWS |
    /// | region | `AWS_REGION`, `AWS_DEFAULT_REGION` | `us-east-1` |
    /// | path style | `AWS_S3_FORCE_PATH_STYLE` (`true`/`false`/`1`/`0`) | true iff an endpoint is set |
    /// | credentials | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` | none |
    ///
    /// Empty variables count as unset. The prefix is every path segment after
    /// the bucket; a trailing `/` is optional (`s3://b/git` and `s3://b/git/`
    /// both store `repo/state` at `git/repo/state`).
    ///
    /// # Errors
    /// [`Error::UnsupportedUrl`] when `url` is not `s3://`, has no bucket, a
    /// bucket name with characters other than `[A-Za-z0-9._-]`, a prefix
    /// that is not a valid key ([`validate_key`]), or a query or fragment.
    ///
    /// ```
    /// use gitstow_store::{S3Config, S3Options};
    /// let opts = S3Options { endpoint: Some("http://127.0.0.1:7480".into()), ..Default::default() };
    /// let c = S3Config::from_url("s3://bucket/git/repos", &opts).unwrap();
    /// assert_eq!((c.bucket.as_str(), c.prefix.as_str()), ("bucket", "git/repos/"));
    /// assert!(c.path_style); // an endpoint is set
    /// ```
    pub fn from_url(url: &str, options: &S3Options) -> Result<Self> {
        Self::from_url_and_env(url, options, &|name| std::env::var(name).ok())
    }

    /// [`S3Config::from_url`] reading the environment through `env`.
    pub(crate) fn from_url_and_env(
        url: &str,
        options: &S3Options,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let (bucket, prefix) = parse_s3_url(url)?;
        let mut config = S3Config::new(bucket, prefix);
        config.apply(options, env);
        Ok(config)
    }

    /// Fill endpoint, region, path style and credentials from `options`,
    /// else `env`.
    fn apply(&mut self, options: &S3Options, env: &dyn Fn(&str) -> Option<String>) {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let pick = |given: &Option<String>, names: &[&str]| {
            given
                .clone()
                .filter(|v| !v.trim().is_empty())
                .or_else(|| names.iter().find_map(|n| var(n)))
        };
        self.endpoint = pick(
            &options.endpoint,
            &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
        );
        self.region = pick(&options.region, &["AWS_REGION", "AWS_DEFAULT_REGION"]);
        self.access_key = pick(&options.access_key, &["AWS_ACCESS_KEY_ID"]);
        self.secret_key = pick(&options.secret_key, &["AWS_SECRET_ACCESS_KEY"]);
        self.session_token = pick(&options.session_token, &["AWS_SESSION_TOKEN"]);
        self.path_style = options
            .path_style
            .or_else(|| var("AWS_S3_FORCE_PATH_STYLE").and_then(|v| parse_bool(&v)))
            .unwrap_or(self.endpoint.is_some());
        if let Some(t) = options.connect_timeout {
            self.connect_timeout = t;
        }
        if let Some(t) = options.read_timeout {
            self.read_timeout = t;
        }
        if let Some(t) = options.retry_deadline {
            self.retry_deadline = t;
        }
    }

    /// Check the settings that would make every request fail.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first problem.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::Config { reason });
        if self.bucket.is_empty() {
            return bad("no bucket".into());
        }
        match (&self.access_key, &self.secret_key) {
            (Some(_), Some(_)) => {}
            // The AWS credential chain (profiles, web identity, ECS, IMDS,
            // SSO) finds them, or the first request says it found none.
            (None, None) => {}
            (Some(_), None) => return bad("an S3 access key without a secret key".into()),
            (None, Some(_)) => return bad("an S3 secret key without an access key".into()),
        }
        if let Some(endpoint) = &self.endpoint {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return bad(format!(
                    "S3 endpoint {endpoint:?} must start with http:// or https://"
                ));
            }
        }
        if self.part_size < MIN_PART_SIZE {
            return bad(format!(
                "part size {} is below S3's minimum of {MIN_PART_SIZE} bytes",
                self.part_size
            ));
        }
        if self.upload_concurrency == 0 {
            return bad("upload concurrency 0".into());
        }
        if self.max_attempts == 0 {
            return bad("max attempts 0 (1 disables retries)".into());
        }
        Ok(())
    }

    /// The region requests are signed for.
    pub fn region_or_default(&self) -> &str {
        self.region.as_deref().unwrap_or("us-east-1")
    }

    /// The part size an upload of `size` bytes uses: [`S3Config::part_size`],
    /// grown to a whole MiB so that at most 10,000 parts are needed.
    pub fn part_size_for(&self, size: u64) -> u64 {
        let needed = size.div_ceil(MAX_PARTS).div_ceil(MIB) * MIB;
        self.part_size.max(needed)
    }
}

/// Whether `url` names an S3 store (`s3://`, any case).
pub fn is_s3_url(url: &str) -> bool {
    url.get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("s3://"))
}

/// Split `s3://bucket/prefix` into the bucket and the normalised prefix.
pub(crate) fn parse_s3_url(url: &str) -> Result<(String, String)> {
    let unsupported = |reason: String| Error::UnsupportedUrl {
        url: url.to_owned(),
        reason,
    };
    if !is_s3_url(url) {
        return Err(unsupported("not an s3:// URL".into()));
    }
    let rest = &url[5..];
    if rest.contains(['?', '#']) {
        return Err(unsupported(
            "query strings and fragments are not supported; configure the endpoint, region and \
             credentials with options or AWS_* environment variables"
                .into(),
        ));
    }
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(unsupported("no bucket after s3://".into()));
    }
    if !bucket
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err(unsupported(format!(
            "bucket name {bucket:?} has characters other than letters, digits, '.', '-' and '_'"
        )));
    }
    let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
    if !trimmed.is_empty() {
        if let Err(Error::InvalidKey { reason, .. }) = validate_key(trimmed) {
            return Err(unsupported(format!("prefix {prefix:?}: {reason}")));
        }
    }
    Ok((bucket.to_owned(), normalise_prefix(trimmed)))
}

/// `""` stays empty; anything else ends in exactly one `/`.
fn normalise_prefix(prefix: &str) -> String {
    let trimmed = prefix.trim_end_matches('/');
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("{trimmed}/")
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn reason(url: &str) -> String {
        match parse_s3_url(url) {
            Err(Error::UnsupportedUrl { url: u, reason }) => {
                assert_eq!(u, url);
                reason
            }
            other => panic!("{url:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn url_bucket_and_prefix() {
        let p = |url| parse_s3_url(url).unwrap();
        assert_eq!(p("s3://bucket"), ("bucket".into(), "".into()));
        assert_eq!(p("s3://bucket/"), ("bucket".into(), "".into()));
        assert_eq!(
            p("S3://Bucket.x-y_z/a"),
            ("Bucket.x-y_z".into(), "a/".into())
        );
        assert_eq!(p("s3://b/a/b/c/"), ("b".into(), "a/b/c/".into()));
        assert!(
            is_s3_url("s3://x") && is_s3_url("S3://x") && !is_s3_url("s3:/x") && !is_s3_url("s")
        );
    }

    #[test]
    fn url_refusals() {
        assert_eq!(reason("s3://"), "no bucket after s3://");
        assert_eq!(reason("s3:///prefix"), "no bucket after s3://");
        assert!(reason("s3://bu cket/x").starts_with("bucket name"));
        assert_eq!(reason("s3://b/a//c"), "prefix \"a//c\": empty path segment");
        assert_eq!(
            reason("s3://b/../x"),
            "prefix \"../x\": '.' or '..' path segment"
        );
        assert!(reason("s3://b/p?region=x").starts_with("query strings"));
        assert_eq!(reason("file:///x"), "not an s3:// URL");
    }

    #[test]
    fn env_fills_what_options_leave_open() {
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "AK"),
            ("AWS_SECRET_ACCESS_KEY", "SK"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"),
        ]);
        let c = S3Config::from_url_and_env("s3://b/p", &S3Options::default(), &env).unwrap();
        assert_eq!(c.access_key.as_deref(), Some("AK"));
        assert_eq!(c.secret_key.as_deref(), Some("SK"));
        assert_eq!(c.session_token, None);
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert!(c.path_style, "an endpoint implies path style");
        c.validate().unwrap();

        let opts = S3Options {
            endpoint: Some("https://s3.example".into()),
            region: Some("us-west-2".into()),
            path_style: Some(false),
            access_key: Some("AK2".into()),
            secret_key: Some("SK2".into()),
            ..Default::default()
        };
        let c = S3Config::from_url_and_env("s3://b", &opts, &env).unwrap();
        assert_eq!(c.endpoint.as_deref(), Some("https://s3.example"));
        assert_eq!(c.region.as_deref(), Some("us-west-2"));
        assert!(!c.path_style);
        assert_eq!(c.access_key.as_deref(), Some("AK2"));
        assert_eq!(c.secret_key.as_deref(), Some("SK2"));
    }

    #[test]
    fn env_precedence_and_defaults() {
        let env = env_of(&[
            ("AWS_REGION", "r1"),
            ("AWS_DEFAULT_REGION", "r2"),
            ("AWS_ENDPOINT_URL_S3", "http://s3-specific"),
            ("AWS_ENDPOINT_URL", "http://generic"),
            ("AWS_S3_FORCE_PATH_STYLE", "false"),
            ("AWS_ACCESS_KEY_ID", ""),
        ]);
        let c = S3Config::from_url_and_env("s3://b", &S3Options::default(), &env).unwrap();
        assert_eq!(c.region.as_deref(), Some("r1"));
        assert_eq!(c.endpoint.as_deref(), Some("http://s3-specific"));
        assert!(
            !c.path_style,
            "AWS_S3_FORCE_PATH_STYLE=false wins over the endpoint default"
        );
        assert_eq!(c.access_key, None, "empty variables count as unset");

        let c = S3Config::from_url_and_env("s3://b", &S3Options::default(), &env_of(&[])).unwrap();
        assert_eq!(
            (c.endpoint.as_deref(), c.region_or_default()),
            (None, "us-east-1")
        );
        assert!(!c.path_style, "AWS itself: virtual-host style");
        assert_eq!(c.multipart_threshold, 16 << 20);
        assert_eq!(c.part_size, 16 << 20);
        assert_eq!(c.upload_concurrency, 4);
        assert_eq!(c.max_attempts, 5);

        let forced = env_of(&[("AWS_S3_FORCE_PATH_STYLE", "1")]);
        let c = S3Config::from_url_and_env("s3://b", &S3Options::default(), &forced).unwrap();
        assert!(c.path_style);
    }

    #[test]
    fn validate_names_the_problem() {
        let mut c = S3Config::new("b", "");
        let reason = |c: &S3Config| match c.validate() {
            Err(Error::Config { reason }) => reason,
            other => panic!("expected Config error, got {other:?}"),
        };
        c.validate().unwrap(); // no keys: the credential chain's
        c.access_key = Some("a".into());
        assert_eq!(reason(&c), "an S3 access key without a secret key");
        c.secret_key = Some("s".into());
        c.validate().unwrap();
        c.endpoint = Some("127.0.0.1:7480".into());
        assert!(reason(&c).contains("must start with http://"));
        c.endpoint = None;
        c.part_size = MIB;
        assert!(reason(&c).contains("below S3's minimum"));
    }

    #[test]
    fn secrets_are_not_debug_printed() {
        let mut c = S3Config::new("b", "p");
        c.secret_key = Some("topsecret".into());
        c.session_token = Some("tok".into());
        let s = format!("{c:?}");
        assert!(!s.contains("topsecret") && !s.contains("tok\""), "{s}");
        let o = S3Options {
            secret_key: Some("topsecret".into()),
            ..Default::default()
        };
        assert!(!format!("{o:?}").contains("topsecret"));
    }

    #[test]
    fn part_size_grows_for_huge_files() {
        let c = S3Config::new("b", "");
        assert_eq!(c.part_size_for(40 * MIB), 16 * MIB);
        // 10,000 parts of 16 MiB is 156.25 GiB; 200 GiB needs 21 MiB parts.
        let size = 200 * 1024 * MIB;
        let part = c.part_size_for(size);
        assert_eq!(part, 21 * MIB);
        assert!(size.div_ceil(part) <= MAX_PARTS);
    }

    #[test]
    fn prefix_normalisation() {
        assert_eq!(S3Config::new("b", "").prefix, "");
        assert_eq!(S3Config::new("b", "x").prefix, "x/");
        assert_eq!(S3Config::new("b", "x/y//").prefix, "x/y/");
    }
}
