//! Authentication and authorization of requests: the token a request
//! presents (HTTP Basic, `Authorization: Basic base64(user:token)`, the user
//! name being free, so git's credential helpers, `GIT_ASKPASS` and
//! `https://user:token@host` URLs work unchanged; or `Authorization: Bearer
//! <token>`) is checked against the access document
//! ([`gitstow_access::AccessDoc`]), read from the store and kept for at most
//! [`AuthConfig::refresh`]: a token created, revoked or expired takes
//! effect on every instance within that delay.
//!
//! Answers, as a web server's Basic auth in front of `git http-backend`
//! gives them: no credentials where they are needed, `401` with
//! `WWW-Authenticate: Basic realm="gitstow"` (git then asks its credential
//! helper); a wrong, revoked or expired token (or a malformed header) `401`;
//! a valid token without the right `403` with a one-line reason git shows
//! as `remote: …`. An address with [`MAX_FAILURES`] failed attempts within
//! [`FAILURE_WINDOW`] gets `429` for further failed attempts until the window
//! has passed (a valid token is still served: behind a proxy every client
//! has the proxy's address, and checking a guess costs one SHA-256). Failures
//! are logged at a bounded rate: the first [`MAX_FAILURES`] of an address in a
//! window, then one line when it is blocked. IPv6 clients count per /64
//! (a host holds a whole /64 and can rotate within it), see
//! [`counted_as`]. No secret is ever logged or
//! answered.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use gitstow_access::{AccessDoc, Decision, Level, Rejected};
use gitstow_store::{ETag, IfNoneMatch, ObjectStore};

use crate::response::error;

/// Failed attempts from one address within [`FAILURE_WINDOW`] after which
/// it gets `429` until the window has passed.
pub const MAX_FAILURES: u32 = 10;

/// The window failed attempts are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// Addresses whose failures are remembered at once (the oldest go first).
const MAX_TRACKED: usize = 10_000;

/// Longest `Authorization` header read, in bytes: a token is 72.
const MAX_HEADER: usize = 4096;

/// The client's address, put in each request's extensions by the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub IpAddr);

/// How authentication is set up.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// How long a read of the access document is used before it is read
    /// again (the bound on how late a revocation takes effect).
    pub refresh: Duration,
    /// Enforce access control even while the document has no token (then
    /// only anonymous read is allowed): set for a server that started with
    /// tokens, or beyond loopback without `--insecure-no-auth`. Once a
    /// token has been seen, it is enforced for the rest of the process's
    /// life anyway: revoking the last token never opens a server.
    pub enforce: bool,
    /// While access control is off, answer only requests whose `Host` is a
    /// loopback name (`localhost`, `127.0.0.1`, `[::1]`, any loopback
    /// address, with any port): a web page on the user's machine cannot
    /// reach the server through a DNS name that rebinds to 127.0.0.1. Off
    /// with `--insecure-no-auth`, which serves every name on purpose.
    pub loopback_hosts_only: bool,
}

/// Whether the `Host` header value `host` names the loopback interface:
/// `localhost` (or a name under `.localhost`, RFC 6761) or a loopback IP
/// address, with or without a port. A request without `Host` (HTTP/1.0)
/// counts as loopback: a browser always sends one.
pub fn is_loopback_host(host: Option<&str>) -> bool {
    let Some(host) = host else {
        return true;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        match rest.split_once(']') {
            Some((v6, _)) => v6,
            None => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// After a failed read of the access document, it is not read again for
/// this long (requests use the copy kept, or are refused with 503).
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// How old the copy kept may be and still be used while the document
/// cannot be read; beyond it, requests are refused with 503.
pub const MAX_STALE: Duration = Duration::from_secs(30);

/// Who made a request, once it is allowed (the service layer's).
pub use gitstow_service::Principal;

#[derive(Debug)]
struct Cached {
    doc: Arc<AccessDoc>,
    etag: Option<ETag>,
    read_at: Option<Instant>,
    failed_at: Option<Instant>,
    /// Whether the last failed read was a store that did not answer.
    failed_unavailable: bool,
}

#[derive(Debug, Default)]
struct Failures {
    by_address: HashMap<IpAddr, (u32, Instant)>,
}

/// Checks requests against the access document.
#[derive(Debug)]
pub struct Auth {
    store: Arc<dyn ObjectStore>,
    config: AuthConfig,
    cached: tokio::sync::Mutex<Cached>,
    failures: Mutex<Failures>,
    enforcing: std::sync::atomic::AtomicBool,
}

impl Auth {
    /// Checks against the access document of `store`.
    pub fn new(store: Arc<dyn ObjectStore>, config: AuthConfig) -> Auth {
        Auth {
            enforcing: std::sync::atomic::AtomicBool::new(config.enforce),
            store,
            config,
            cached: tokio::sync::Mutex::new(Cached {
                doc: Arc::new(AccessDoc::default()),
                etag: None,
                read_at: None,
                failed_at: None,
                failed_unavailable: false,
            }),
            failures: Mutex::new(Failures::default()),
        }
    }

    /// [`Auth::document`], or the 503 a request gets when it cannot be
    /// read (with `Retry-After` when the store does not answer).
    async fn document_or_answer(&self) -> Result<Arc<AccessDoc>, Response> {
        self.document().await.map_err(|e| {
            tracing::error!(error = %e, "reading the access document failed");
            if gitstow_store::is_unavailable(&e) {
                crate::app::busy_error("the store does not answer, try again later".into())
            } else {
                error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "access control is unavailable, try again later",
                )
            }
        })
    }

    /// The access document, read again when the copy kept is older than the
    /// refresh interval (one request reads; the others wait for it).
    pub async fn document(&self) -> Result<Arc<AccessDoc>, gitstow_access::Error> {
        let mut cached = self.cached.lock().await;
        if cached
            .read_at
            .is_some_and(|t| t.elapsed() < self.config.refresh)
        {
            return Ok(cached.doc.clone());
        }
        if cached
            .failed_at
            .is_some_and(|t| t.elapsed() < RETRY_AFTER_ERROR)
        {
            return self.stale(&cached).ok_or_else(|| {
                gitstow_access::Error::Store(gitstow_store::Error::Backend {
                    op: "get",
                    key: gitstow_access::ACCESS_KEY.into(),
                    message: "the access document could not be read a moment ago".into(),
                    unavailable: cached.failed_unavailable,
                })
            });
        }
        let store = self.store.clone();
        let etag = cached.etag.clone();
        let read = tokio::task::spawn_blocking(move || match etag {
            Some(etag) => store.get_if_none_match(gitstow_access::ACCESS_KEY, &etag),
            None => store.get(gitstow_access::ACCESS_KEY).map(|got| match got {
                Some((bytes, etag)) => IfNoneMatch::Changed(bytes, etag),
                None => IfNoneMatch::Absent,
            }),
        })
        .await
        .map_err(|e| gitstow_access::Error::Invalid(format!("reading the access document: {e}")))
        .and_then(|r| r.map_err(gitstow_access::Error::from))
        .and_then(|read| match read {
            IfNoneMatch::Unchanged => Ok(None),
            IfNoneMatch::Changed(bytes, etag) => {
                Ok(Some((gitstow_access::parse(&bytes)?, Some(etag))))
            }
            IfNoneMatch::Absent => Ok(Some((AccessDoc::default(), None))),
        });
        match read {
            Err(e) => {
                cached.failed_at = Some(Instant::now());
                cached.failed_unavailable = gitstow_store::is_unavailable(&e);
                if let Some(doc) = self.stale(&cached) {
                    tracing::warn!(error = %e, "reading the access document failed; using the copy read {:?} ago", cached.read_at.map(|t| t.elapsed()).unwrap_or_default());
                    return Ok(doc);
                }
                return Err(e);
            }
            Ok(Some((doc, etag))) => {
                cached.doc = Arc::new(doc);
                cached.etag = etag;
            }
            Ok(None) => {}
        }
        cached.failed_at = None;
        cached.read_at = Some(Instant::now());
        Ok(cached.doc.clone())
    }

    /// The copy kept, while it is younger than [`MAX_STALE`] (or six
    /// refresh intervals, if longer): a store that fails for a moment (or a
    /// process out of file descriptors) does not refuse every request.
    fn stale(&self, cached: &Cached) -> Option<Arc<AccessDoc>> {
        let bound = MAX_STALE.max(self.config.refresh * 6);
        cached
            .read_at
            .is_some_and(|t| t.elapsed() < bound)
            .then(|| cached.doc.clone())
    }

    /// Whether `peer` has failed too often lately.
    fn blocked(&self, peer: IpAddr) -> bool {
        let peer = counted_as(peer);
        let f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        f.by_address
            .get(&peer)
            .is_some_and(|(n, since)| *n >= MAX_FAILURES && since.elapsed() < FAILURE_WINDOW)
    }

    /// Counts a failed attempt from `peer`.
    fn failed(&self, peer: IpAddr) {
        let peer = counted_as(peer);
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if f.by_address.len() >= MAX_TRACKED && !f.by_address.contains_key(&peer) {
            f.by_address
                .retain(|_, (_, since)| since.elapsed() < FAILURE_WINDOW);
            if f.by_address.len() >= MAX_TRACKED {
                let oldest = f
                    .by_address
                    .iter()
                    .min_by_key(|(_, (_, since))| *since)
                    .map(|(a, _)| *a);
                if let Some(a) = oldest {
                    f.by_address.remove(&a);
                }
            }
        }
        let entry = f.by_address.entry(peer).or_insert((0, Instant::now()));
        if entry.1.elapsed() >= FAILURE_WINDOW {
            *entry = (0, Instant::now());
        }
        entry.0 += 1;
        metrics::counter!(crate::metrics::AUTH_FAILURES).increment(1);
    }

    /// Counts a failed attempt from `peer` while it is blocked; true for the
    /// first one of its window (the one worth a log line).
    fn refused_while_blocked(&self, peer: IpAddr) -> bool {
        let peer = counted_as(peer);
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        metrics::counter!(crate::metrics::AUTH_FAILURES).increment(1);
        match f.by_address.get_mut(&peer) {
            Some(entry) => {
                entry.0 = entry.0.saturating_add(1);
                entry.0 == MAX_FAILURES + 1
            }
            None => false,
        }
    }

    /// Whether the request may do what `needed` allows on `repo` (`None`:
    /// a server endpoint, which needs `admin` on every repository, `*`).
    /// `target_authority` is the request target's authority when it came in
    /// absolute form (`GET http://host/… HTTP/1.1`). `Err` is the response
    /// to send.
    pub async fn check(
        &self,
        headers: &HeaderMap,
        target_authority: Option<&str>,
        peer: Option<IpAddr>,
        repo: Option<&str>,
        needed: Level,
    ) -> Result<Principal, Response> {
        let doc = self.document_or_answer().await?;
        use std::sync::atomic::Ordering;
        let webhooks = repo.map_or_else(Vec::new, |r| {
            doc.webhooks_for(r).map(|w| w.name.clone()).collect()
        });
        let hide_refs = repo.map_or_else(Vec::new, |r| doc.hidden_refs(r));
        if doc.enforced() {
            self.enforcing.store(true, Ordering::Relaxed);
        } else if !self.enforcing.load(Ordering::Relaxed) {
            // The name asked for: an absolute-form target's authority when
            // there is one (RFC 9112 §3.2.2: it wins over `Host`), else
            // `Host`; two `Host` headers are refused.
            let hosts: Vec<&str> = headers
                .get_all(header::HOST)
                .iter()
                .map(|h| h.to_str().unwrap_or("?"))
                .collect();
            let host = match target_authority {
                Some(a) => Some(a.rsplit('@').next().unwrap_or(a)),
                None => hosts.first().copied(),
            };
            if self.config.loopback_hosts_only && (hosts.len() > 1 || !is_loopback_host(host)) {
                tracing::info!(peer = ?peer, host, "refused: a name other than loopback while access control is off");
                return Err(error(
                    StatusCode::MISDIRECTED_REQUEST,
                    "access control is off (no token exists), so this server answers only to localhost, 127.0.0.1 and [::1]; create a token to serve other names",
                ));
            }
            return Ok(Principal {
                webhooks,
                hide_refs,
                ..Principal::default()
            });
        }
        // Only failures are held back: a valid token is served even from an
        // address that failed often (behind a proxy, everyone's).
        // Logged at a bounded rate: each of an address's first
        // MAX_FAILURES failures in a window, then one line when it is
        // blocked (the access log still has a line per request).
        let fail = |why: &str| match peer {
            Some(p) if self.blocked(p) => {
                if self.refused_while_blocked(p) {
                    tracing::info!(%p, window_secs = FAILURE_WINDOW.as_secs(), "refused with 429: too many failed attempts from this address; its further failures in this window are not logged");
                }
                too_many_failures()
            }
            Some(p) => {
                tracing::info!(peer = %p, repo, reason = why, "authentication failed");
                self.failed(p);
                unauthorized("invalid credentials")
            }
            None => {
                tracing::info!(repo, reason = why, "authentication failed");
                unauthorized("invalid credentials")
            }
        };
        let token = match credentials(headers) {
            Ok(None) => None,
            Err(why) => return Err(fail(why)),
            Ok(Some(secret)) => match doc.authenticate(&secret, now_secs()) {
                Ok(t) => Some(t),
                Err(Rejected::Unknown) => return Err(fail("unknown or revoked token")),
                Err(Rejected::Expired) => return Err(fail("expired token")),
            },
        };
        let decision = match repo {
            Some(r) => doc.decide_enforced(token, r, needed),
            None => server_endpoint_decision(token),
        };
        let name = token.map(|t| t.name.clone());
        match decision {
            Decision::Allow => Ok(Principal {
                protect: repo
                    .filter(|r| doc.level(token, r) < Some(Level::Admin))
                    .map(|r| doc.protected_refs(r)),
                token: name,
                webhooks,
                hide_refs,
            }),
            Decision::Unauthenticated => Err(unauthorized("authentication required")),
            Decision::Forbidden(reason) => {
                tracing::info!(token = name.as_deref(), repo, %reason, "request refused");
                Err(error(StatusCode::FORBIDDEN, reason))
            }
        }
    }
}

impl Auth {
    /// SSH: the name of the token the key of `fingerprint` is attached to,
    /// when it exists and has not expired (`None` too when the access
    /// document cannot be read: no login then).
    pub async fn key_token(&self, fingerprint: &str) -> Option<String> {
        let doc = self
            .document()
            .await
            .map_err(|e| tracing::error!(error = %e, "reading the access document failed"))
            .ok()?;
        doc.key_token(fingerprint, now_secs())
            .map(|t| t.name.clone())
    }

    /// SSH: whether the token of key `fingerprint` may do what `needed`
    /// allows on `repo`. A repository the token may not read is answered as
    /// one that does not exist.
    pub async fn check_key(
        &self,
        fingerprint: &str,
        repo: &str,
        needed: Level,
    ) -> Result<Principal, gitstow_service::Denied> {
        use gitstow_service::Denied;
        let doc = self.document().await.map_err(|e| {
            tracing::error!(error = %e, "reading the access document failed");
            Denied::Unavailable
        })?;
        let token = doc
            .key_token(fingerprint, now_secs())
            .ok_or(Denied::NotFound)?;
        match doc.decide_enforced(Some(token), repo, needed) {
            Decision::Allow => Ok(allowed(&doc, token, repo)),
            Decision::Forbidden(reason) if doc.level(Some(token), repo).is_some() => {
                Err(Denied::Forbidden(reason))
            }
            Decision::Forbidden(_) | Decision::Unauthenticated => Err(Denied::NotFound),
        }
    }
}

impl Auth {
    /// The id of the token named `name` (the first 16 hex digits of its
    /// stored hash), for a grant bound to it; `None` when there is none.
    pub async fn token_id(&self, name: &str) -> Option<String> {
        let doc = self.document().await.ok()?;
        doc.tokens
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.hash.chars().take(16).collect())
    }

    /// What the token named `name` (of id `token_id`, see
    /// [`Auth::token_id`]) may do on `repo`, for a request that
    /// proved it is that token by other means than its secret (a Git LFS
    /// session grant, minted for an SSH key of the token): the principal,
    /// or the answer (401 when the token is gone or expired, 403 without
    /// the right). Revoking the token stops the grant at once.
    pub async fn check_named(
        &self,
        name: &str,
        token_id: &str,
        repo: &str,
        needed: Level,
    ) -> Result<Principal, Response> {
        let doc = self.document_or_answer().await?;
        let now = now_secs();
        let Some(token) = doc.tokens.iter().find(|t| {
            t.name == name
                && !token_id.is_empty()
                && t.hash.starts_with(token_id)
                && t.expires.is_none_or(|e| e > now)
        }) else {
            return Err(unauthorized("invalid credentials"));
        };
        match doc.decide_enforced(Some(token), repo, needed) {
            Decision::Allow => Ok(allowed(&doc, token, repo)),
            Decision::Forbidden(reason) => Err(error(StatusCode::FORBIDDEN, reason)),
            Decision::Unauthenticated => Err(unauthorized("invalid credentials")),
        }
    }
}

/// The principal of `token`, allowed on `repo`: its protected refs (unless
/// it administers the repository), webhooks and hidden refs.
fn allowed(doc: &AccessDoc, token: &gitstow_access::StoredToken, repo: &str) -> Principal {
    Principal {
        protect: (doc.level(Some(token), repo) < Some(Level::Admin))
            .then(|| doc.protected_refs(repo)),
        token: Some(token.name.clone()),
        webhooks: doc.webhooks_for(repo).map(|w| w.name.clone()).collect(),
        hide_refs: doc.hidden_refs(repo),
    }
}

/// The server endpoints (`/metrics`, `/debug/pprof/heap`) need `admin` on
/// `*` (every repository).
fn server_endpoint_decision(token: Option<&gitstow_access::StoredToken>) -> Decision {
    let Some(t) = token else {
        return Decision::Unauthenticated;
    };
    let admin_everywhere = t
        .grants
        .iter()
        .any(|g| g.repos.as_str() == "*" && g.level == Level::Admin);
    if admin_everywhere {
        Decision::Allow
    } else {
        Decision::Forbidden(format!(
            "token '{}' is not an admin of every repository ('*:admin')",
            t.name
        ))
    }
}

/// The secret a request presents: the password of HTTP Basic (or its user
/// name when the password is empty and the name is a token; any other
/// `user:` is no credentials, as git's first try for `https://user@host`),
/// or a Bearer token. `Err` names what is malformed (for the log only).
pub fn credentials(headers: &HeaderMap) -> Result<Option<String>, &'static str> {
    use base64::Engine;
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    if value.len() > MAX_HEADER {
        return Err("Authorization header too long");
    }
    let value = value
        .to_str()
        .map_err(|_| "Authorization header not ASCII")?;
    let (scheme, rest) = value
        .split_once(' ')
        .ok_or("Authorization header without a scheme")?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        if rest.is_empty() {
            return Err("empty Bearer token");
        }
        return Ok(Some(rest.to_owned()));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err("Authorization scheme is neither Basic nor Bearer");
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest)
        .map_err(|_| "Basic credentials are not base64")?;
    let decoded = String::from_utf8(decoded).map_err(|_| "Basic credentials are not UTF-8")?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or("Basic credentials without ':'")?;
    if !password.is_empty() {
        return Ok(Some(password.to_owned()));
    }
    // `user:` is what git sends first for a URL with a user name and no
    // password (before it asks its credential helper): no credentials yet,
    // unless the user name is itself a token.
    if user.starts_with(gitstow_access::SECRET_PREFIX) {
        return Ok(Some(user.to_owned()));
    }
    Ok(None)
}

/// `401` asking for Basic credentials.
fn unauthorized(message: &str) -> Response {
    let mut resp = error(StatusCode::UNAUTHORIZED, message);
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"gitstow\""),
    );
    resp
}

/// `429` for an address that failed too often.
fn too_many_failures() -> Response {
    let mut resp = error(
        StatusCode::TOO_MANY_REQUESTS,
        "too many failed authentication attempts from your address, try again later",
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    resp
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The address failed attempts of `peer` count against: an IPv4 address
/// itself (also when mapped into IPv6, `::ffff:a.b.c.d`), an IPv6 address's
/// /64 network (its last 64 bits zeroed).
pub fn counted_as(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !u128::from(u64::MAX),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_count_per_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(counted_as(a), counted_as(b));
        assert_ne!(counted_as(a), counted_as(c));
        assert_eq!(counted_as(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(counted_as(v4), v4);
        assert_eq!(counted_as("::ffff:192.0.2.7".parse().unwrap()), v4);
        assert_ne!(counted_as("192.0.2.8".parse().unwrap()), v4);
        // A client rotating within its /64 is held back like one address.
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::open(&format!("file://{}", dir.path().display())).unwrap();
        let auth = Auth::new(
            store,
            AuthConfig {
                refresh: Duration::from_secs(5),
                enforce: true,
                loopback_hosts_only: true,
            },
        );
        for i in 0..MAX_FAILURES {
            let peer = IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from_be_bytes([0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0])
                    + i as u128,
            ));
            assert!(!auth.blocked(peer));
            auth.failed(peer);
        }
        assert!(auth.blocked(b));
        assert!(!auth.blocked(c));
    }

    fn with(value: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_bytes(value).unwrap(),
        );
        h
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            None,
            Some("localhost"),
            Some("LOCALHOST:8080"),
            Some("localhost."),
            Some("x.localhost:1"),
            Some("127.0.0.1"),
            Some("127.1.2.3:80"),
            Some("[::1]"),
            Some("[::1]:8080"),
        ] {
            assert!(is_loopback_host(ok), "{ok:?}");
        }
        for bad in [
            "attacker.example.com",
            "attacker.example.com:8080",
            "127.0.0.1.nip.io",
            "localhost.attacker.com",
            "10.0.0.1:80",
            "[::2]:80",
            "[::1",
            "?",
            "",
        ] {
            assert!(!is_loopback_host(Some(bad)), "{bad}");
        }
    }

    #[test]
    fn credentials_from_headers() {
        assert_eq!(credentials(&HeaderMap::new()), Ok(None));
        // "user:tok"
        assert_eq!(
            credentials(&with(b"Basic dXNlcjp0b2s=")),
            Ok(Some("tok".into()))
        );
        // "tok:": git's first try for a URL with a user name: no credentials
        assert_eq!(credentials(&with(b"basic dG9rOg==")), Ok(None));
        // "gitstow_x:" (a token as the user name)
        assert_eq!(
            credentials(&with(b"Basic Z2l0c3Rvd194Og==")),
            Ok(Some("gitstow_x".into()))
        );
        assert_eq!(credentials(&with(b"Bearer abc")), Ok(Some("abc".into())));
        for bad in [
            &b"Basic !!!"[..],
            b"Basic dXNlcg==", // "user": no colon
            b"Digest x",
            b"Basic",
            b"Bearer ",
            b"Basic \xff\xfe",
        ] {
            assert!(
                credentials(&with(bad)).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = format!("Basic {}", "A".repeat(MAX_HEADER));
        assert!(credentials(&with(huge.as_bytes())).is_err());
    }
}
