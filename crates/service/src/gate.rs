//! The access gate both transports ask: who a request is (a token's secret
//! over HTTP, a key attached to a token over SSH, or a token named by a
//! Git LFS session grant) and what it may do, answered as a [`Principal`]
//! or a typed [`Denied`] that each transport renders in its own words
//! (HTTP: 401/403/404/421/429/503; SSH: an `ERROR:` line).
//!
//! Decisions come from the access document ([`gitstow_access::AccessDoc`]),
//! read from the store and kept for at most [`GateConfig::refresh`]: a
//! token created, revoked or expired takes effect on every instance within
//! that delay. An address with [`MAX_FAILURES`] failed attempts within
//! [`FAILURE_WINDOW`] is answered [`Denied::TooManyFailures`] for further
//! failed attempts until the window has passed (a valid token is still
//! served: behind a proxy every client has the proxy's address, and
//! checking a guess costs one SHA-256). Failures are logged at a bounded
//! rate: the first [`MAX_FAILURES`] of an address in a window, then one
//! line when it is blocked. IPv6 clients count per /64 (a host holds a
//! whole /64 and can rotate within it), see [`counted_as`]. No secret is
//! ever logged.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gitstow_access::{AccessDoc, Decision, Rejected};
use gitstow_store::{ETag, IfNoneMatch, ObjectStore};

pub use gitstow_access::ssh_key::fingerprint;
pub use gitstow_access::{Level, ACCESS_KEY, SECRET_PREFIX};

use crate::{Denied, Principal};

/// Failed attempts from one address within [`FAILURE_WINDOW`] after which
/// it is refused ([`Denied::TooManyFailures`]) until the window has passed.
pub const MAX_FAILURES: u32 = 10;

/// The window failed attempts are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// Addresses whose failures are remembered at once (the oldest go first).
const MAX_TRACKED: usize = 10_000;

/// How the gate is set up.
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// How long a read of the access document is used before it is read
    /// again (the bound on how late a revocation takes effect).
    pub refresh: Duration,
    /// Enforce access control even while the document has no token (then
    /// only anonymous read is allowed): set for a server that started with
    /// tokens, or beyond loopback without `--insecure-no-auth`. Once a
    /// token has been seen, it is enforced for the rest of the process's
    /// life anyway: revoking the last token never opens a server.
    pub enforce: bool,
    /// While access control is off, answer only requests that named the
    /// loopback interface ([`Ask::names_loopback`]): a web page on the
    /// user's machine cannot reach the server through a DNS name that
    /// rebinds to 127.0.0.1. Off with `--insecure-no-auth`, which serves
    /// every name on purpose.
    pub loopback_hosts_only: bool,
}

/// A request presenting a token's secret (or none), as [`Gate::check`]
/// takes it.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    /// The secret presented: `Ok(None)` none, `Err` malformed
    /// credentials, with what is wrong (for the log only).
    pub secret: Result<Option<String>, &'static str>,
    /// The client's address (failed attempts are counted by it).
    pub peer: Option<IpAddr>,
    /// The repository (`None`: a server endpoint, which needs `admin` on
    /// every repository, `*`).
    pub repo: Option<&'a str>,
    /// What the request does.
    pub needed: Level,
    /// Whether the request named the loopback interface (HTTP: its `Host`
    /// or absolute-form authority); consulted only while access control
    /// is off.
    pub names_loopback: bool,
}

/// After a failed read of the access document, it is not read again for
/// this long (requests use the copy kept, or are refused: [`Denied::Unavailable`]).
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(1);

/// How old the copy kept may be and still be used while the document
/// cannot be read; beyond it, requests are refused ([`Denied::Unavailable`]).
pub const MAX_STALE: Duration = Duration::from_secs(30);

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

/// The access gate: the access document, kept, and the failed attempts of
/// each address.
#[derive(Debug)]
pub struct Gate {
    store: Arc<dyn ObjectStore>,
    config: GateConfig,
    cached: tokio::sync::Mutex<Cached>,
    failures: Mutex<Failures>,
    enforcing: std::sync::atomic::AtomicBool,
}

impl Gate {
    /// A gate over the access document of `store`.
    pub fn new(store: Arc<dyn ObjectStore>, config: GateConfig) -> Gate {
        Gate {
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

    /// [`Gate::document`], or the denial a request gets when it cannot be
    /// read ([`Denied::StoreDown`] when the store does not answer).
    async fn document_or_denied(&self) -> Result<Arc<AccessDoc>, Denied> {
        self.document().await.map_err(|e| {
            tracing::error!(error = %e, "reading the access document failed");
            if gitstow_store::is_unavailable(&e) {
                Denied::StoreDown
            } else {
                Denied::Unavailable
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

    /// Whether the request `ask` describes may do what it needs: the
    /// principal, or why not. While access control is off, everything is
    /// allowed (to requests that named loopback, unless
    /// [`GateConfig::loopback_hosts_only`] is off).
    pub async fn check(&self, ask: Ask<'_>) -> Result<Principal, Denied> {
        let Ask {
            secret,
            peer,
            repo,
            needed,
            names_loopback,
        } = ask;
        let doc = self.document_or_denied().await?;
        use std::sync::atomic::Ordering;
        let webhooks = repo.map_or_else(Vec::new, |r| {
            doc.webhooks_for(r).map(|w| w.name.clone()).collect()
        });
        let hide_refs = repo.map_or_else(Vec::new, |r| doc.hidden_refs(r));
        if doc.enforced() {
            self.enforcing.store(true, Ordering::Relaxed);
        } else if !self.enforcing.load(Ordering::Relaxed) {
            if self.config.loopback_hosts_only && !names_loopback {
                return Err(Denied::LoopbackOnly);
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
                Denied::TooManyFailures
            }
            Some(p) => {
                tracing::info!(peer = %p, repo, reason = why, "authentication failed");
                self.failed(p);
                Denied::InvalidCredentials
            }
            None => {
                tracing::info!(repo, reason = why, "authentication failed");
                Denied::InvalidCredentials
            }
        };
        let token = match secret {
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
            Decision::Unauthenticated => Err(Denied::Unauthenticated),
            Decision::Forbidden(reason) => {
                tracing::info!(token = name.as_deref(), repo, %reason, "request refused");
                Err(Denied::Forbidden(reason))
            }
        }
    }
}

impl Gate {
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
    ) -> Result<Principal, Denied> {
        let doc = self.document_or_denied().await?;
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

impl Gate {
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
    /// [`Gate::token_id`]) may do on `repo`, for a request that
    /// proved it is that token by other means than its secret (a Git LFS
    /// session grant, minted for an SSH key of the token): the principal,
    /// or the denial ([`Denied::InvalidCredentials`] when the token is gone or
    /// expired, [`Denied::Forbidden`] without the right). Revoking the token stops the grant at once.
    pub async fn check_named(
        &self,
        name: &str,
        token_id: &str,
        repo: &str,
        needed: Level,
    ) -> Result<Principal, Denied> {
        let doc = self.document_or_denied().await?;
        let now = now_secs();
        let Some(token) = doc.tokens.iter().find(|t| {
            t.name == name
                && !token_id.is_empty()
                && t.hash.starts_with(token_id)
                && t.expires.is_none_or(|e| e > now)
        }) else {
            return Err(Denied::InvalidCredentials);
        };
        match doc.decide_enforced(Some(token), repo, needed) {
            Decision::Allow => Ok(allowed(&doc, token, repo)),
            Decision::Forbidden(reason) => Err(Denied::Forbidden(reason)),
            Decision::Unauthenticated => Err(Denied::InvalidCredentials),
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
        let gate = Gate::new(
            store,
            GateConfig {
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
            assert!(!gate.blocked(peer));
            gate.failed(peer);
        }
        assert!(gate.blocked(b));
        assert!(!gate.blocked(c));
    }
}
