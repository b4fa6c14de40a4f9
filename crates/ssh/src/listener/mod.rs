//! The SSH listener (russh): public-key authentication through
//! [`KeyAccess`], `exec` of git-upload-pack / git-receive-pack handed to
//! [`crate::git`], everything else refused.
//!
//! Limits as OpenSSH's sshd and gitlab-sshd keep them: 60 s to
//! authenticate (`LoginGraceTime`), at most 6 authentication attempts
//! (`MaxAuthTries`), keepalives every 15 s and the connection dropped after
//! 3 unanswered (a silent client-side hook does not cut a push: a live
//! client answers keepalives), only `publickey` offered, `ssh-rsa` (SHA-1)
//! signatures refused (OpenSSH 8.8's default), only `GIT_PROTOCOL` taken
//! from `env` requests, no shell, pty, forwarding or subsystem.
//!
//! - this module: [`serve`], the accept loop (PROXY header, connection
//!   caps, login grace) and the settings ([`SshConfig`], [`KeyAccess`]);
//! - `connection`: one connection's handler (authentication, channels,
//!   `env` and `exec` requests);
//! - `job`: one `exec` request's work and what the client is told;
//! - `running`: the counts of running commands and of refused connections.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gitstow_service::conn_caps::{self, ConnCaps};
use gitstow_service::gate::Level;
use gitstow_service::metrics as m;
use gitstow_service::{Denied, Host, Principal};
use russh::keys::{Algorithm, HashAlg};
use russh::{MethodKind, MethodSet};
use tokio::net::TcpListener;

use crate::proxy::{self, ProxyFrom};
use crate::HostKeys;

mod connection;
mod job;
mod running;

use connection::Connection;
pub(crate) use job::{say, NOT_FOUND};
use running::{refused, Caps};

/// Who a verified key is, and what it may do: the bridge to access control
/// (implemented by the server over its access document).
pub trait KeyAccess: Send + Sync + 'static {
    /// The name of the token key `fingerprint` (OpenSSH's `SHA256:…`) is
    /// attached to, when the token exists and has not expired.
    fn token_of(&self, fingerprint: &str) -> impl Future<Output = Option<String>> + Send;

    /// Whether the token of key `fingerprint` has `level` on `repo`
    /// (`Write`: push, `Read`: fetch, `Admin`: remove another's LFS lock):
    /// the principal, or the denial to say on stderr.
    fn authorize(
        &self,
        fingerprint: &str,
        repo: &str,
        level: Level,
    ) -> impl Future<Output = Result<Principal, Denied>> + Send;

    /// `git-lfs-authenticate`: whether the token of key `fingerprint` may
    /// upload (`write`) or download (`read`) `repo`'s LFS objects, and then
    /// the JSON git-lfs takes (git-lfs `docs/api/server-discovery.md`: the
    /// LFS API's `href`, the `header` to send to it, `expires_in`), the
    /// href reached at `local`'s address unless the server has a public URL.
    fn lfs_authenticate(
        &self,
        fingerprint: &str,
        repo: &str,
        upload: bool,
        local: Option<SocketAddr>,
    ) -> impl Future<Output = Result<String, Denied>> + Send;
}

/// Settings of the SSH listener.
#[derive(Debug, Clone)]
pub struct SshConfig {
    /// The user name clients log in as (`git@host`); any other is refused.
    pub user: String,
    /// Time to authenticate before the connection is dropped.
    pub login_grace: Duration,
    /// Connections not authenticated yet above which new ones are closed at
    /// once (sshd's `MaxStartups`): a flood of handshakes that never log in
    /// holds a bounded amount of memory and CPU.
    pub max_unauthenticated: usize,
    /// Connections not authenticated yet from one client address block
    /// (an IPv4 address, an IPv6 /64) above which new ones from it are
    /// closed at once (sshd's `PerSourceMaxStartups`): one flooding
    /// address cannot take the slots of everyone else.
    pub max_unauthenticated_per_source: usize,
    /// The load balancers whose connections start with a PROXY header
    /// naming the client ([`crate::proxy`]).
    pub proxy: ProxyFrom,
    /// Interval of keepalives when the client is silent.
    pub keepalive: Duration,
}

impl Default for SshConfig {
    /// The defaults above. A command's input is bounded by the service's
    /// limits (`gitstow_service::input::Limits`), as over HTTP.
    fn default() -> Self {
        SshConfig {
            user: "git".into(),
            login_grace: Duration::from_secs(60),
            max_unauthenticated: 100,
            max_unauthenticated_per_source: 10,
            proxy: ProxyFrom::default(),
            keepalive: Duration::from_secs(15),
        }
    }
}

/// How long a connection told to go (the login grace time is over) has
/// to close before it is dropped.
const DISCONNECT_WAIT: Duration = Duration::from_secs(5);

/// Serves SSH on `listener` until `shutdown` completes, then returns once
/// the commands running then have finished (the caller bounds the wait).
///
/// Every connection holds a slot of `connections` for its whole life: the
/// server's caps in all and per client address (`--max-connections`,
/// `--max-connections-per-address`), shared with the HTTP listener, so SSH
/// and HTTP together stay under them. A connection beyond them is closed
/// at once, as one beyond the startup caps is.
pub async fn serve<A: KeyAccess>(
    listener: TcpListener,
    host: Arc<Host>,
    access: Arc<A>,
    keys: &HostKeys,
    config: SshConfig,
    connections: ConnCaps,
    shutdown: impl Future<Output = ()>,
) {
    let russh_config = Arc::new(russh::server::Config {
        server_id: russh::SshId::Standard(std::borrow::Cow::Borrowed(concat!(
            "SSH-2.0-gitstow_",
            env!("CARGO_PKG_VERSION")
        ))),
        methods: MethodSet::from(&[MethodKind::PublicKey][..]),
        auth_rejection_time: Duration::from_millis(300),
        auth_rejection_time_initial: Some(Duration::ZERO),
        keys: keys.keys().to_vec(),
        max_auth_attempts: 6,
        inactivity_timeout: None,
        keepalive_interval: Some(config.keepalive),
        keepalive_max: 3,
        nodelay: true,
        preferred: russh::Preferred {
            key: std::borrow::Cow::Borrowed(&[
                Algorithm::Ed25519,
                Algorithm::Ecdsa {
                    curve: russh::keys::EcdsaCurve::NistP256,
                },
                Algorithm::Ecdsa {
                    curve: russh::keys::EcdsaCurve::NistP384,
                },
                Algorithm::Ecdsa {
                    curve: russh::keys::EcdsaCurve::NistP521,
                },
                Algorithm::Rsa {
                    hash: Some(HashAlg::Sha512),
                },
                Algorithm::Rsa {
                    hash: Some(HashAlg::Sha256),
                },
            ]),
            ..Default::default()
        },
        ..Default::default()
    });
    let config = Arc::new(config);
    let startups = ConnCaps::new(
        config.max_unauthenticated,
        config.max_unauthenticated_per_source,
    )
    .with_early_drop(conn_caps::EarlyDrop::half_of(config.max_unauthenticated));
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::pin!(shutdown);
    loop {
        let (mut stream, accepted_from) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "ssh: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // A balancer's connection is counted against the client its header
        // names, once read; any other against its own address.
        let proxied = config.proxy.trusts(accepted_from.ip());
        let source = (!proxied).then_some(accepted_from.ip());
        let open = match connections.admit(source) {
            Ok(held) => held,
            Err(cap) => {
                refused(accepted_from, cap, Caps::Open(&connections));
                continue;
            }
        };
        let mut pending = match startups.admit_rolled(source, rand::random_range(0..100)) {
            Ok(held) => held,
            Err(cap) => {
                refused(accepted_from, cap, Caps::Startups(&config));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().ok();
        let connection = Connection {
            host: host.clone(),
            access: access.clone(),
            config: config.clone(),
            peer: accepted_from,
            local,
            authenticated: Arc::new(AtomicBool::new(false)),
            pending: None,
            running: running.clone(),
            sessions: Arc::default(),
            fingerprint: None,
            token: None,
            channels: HashMap::new(),
        };
        let startups = startups.clone();
        let connections = connections.clone();
        let russh_config = russh_config.clone();
        let login_grace = config.login_grace;
        tokio::spawn(async move {
            // The connection's slot among all the server's, held to its
            // end (`open` lives as long as this task).
            let mut open = open;
            let _open = m::InFlight::new(m::SSH_CONNECTIONS_OPEN);
            // The grace time counts from the accept: a client that never
            // sends its version line is dropped too.
            let deadline = tokio::time::Instant::now() + login_grace;
            let mut connection = connection;
            if proxied {
                // Within the login grace time as well as the header's own.
                let header = tokio::time::timeout_at(deadline, proxy::read_header(&mut stream))
                    .await
                    .unwrap_or(Err(proxy::HeaderError::Timeout));
                match header {
                    Ok(Some(client)) => {
                        if let Err(cap) = connections.attribute(&mut open, client.ip()) {
                            return refused(client, cap, Caps::Open(&connections));
                        }
                        if let Err(cap) = startups.attribute(&mut pending, client.ip()) {
                            return refused(client, cap, Caps::Startups(&connection.config));
                        }
                        tracing::debug!(peer = %client, via = %accepted_from, "ssh: PROXY header");
                        connection.peer = client;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::info!(via = %accepted_from, error = %e, "ssh: connection closed: no valid PROXY header from a trusted balancer");
                        return;
                    }
                }
            }
            connection.pending = Some(pending);
            let peer = connection.peer;
            let authenticated = connection.authenticated.clone();
            let timed_out = || {
                metrics::counter!(m::SSH_AUTH_FAILURES).increment(1);
                tracing::info!(%peer, "ssh: no authentication within the login grace time");
            };
            // A second descriptor of the socket, to shut it under russh
            // (whose session runs as its own task) when the client does not
            // go when told.
            let (stream, twin) = match twin_of(stream) {
                Ok(both) => both,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "ssh: cannot take the connection");
                    return;
                }
            };
            let started = russh::server::run_stream(russh_config, stream, connection);
            let session = match tokio::time::timeout_at(deadline, started).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "ssh: handshake failed");
                    return;
                }
                Err(_) => return timed_out(),
            };
            let handle = session.handle();
            tokio::pin!(session);
            tokio::select! {
                _ = &mut session => return,
                _ = tokio::time::sleep_until(deadline) => {}
            }
            if !authenticated.load(Ordering::Relaxed) {
                timed_out();
                let _ = handle
                    .disconnect(
                        russh::Disconnect::ByApplication,
                        "authentication timed out".into(),
                        "en".into(),
                    )
                    .await;
                // After a disconnect russh reads until the client closes:
                // a client that never does would keep the connection and
                // its startup slot (held by the handler) for ever.
                if tokio::time::timeout(DISCONNECT_WAIT, &mut session)
                    .await
                    .is_err()
                {
                    let _ = twin.shutdown(std::net::Shutdown::Both);
                    let _ = session.await;
                }
                return;
            }
            let _ = session.await;
        });
    }
    // Drain: the commands running at the signal finish.
    let mut said = false;
    while running.load(Ordering::Relaxed) > 0 {
        if !said {
            tracing::info!(
                commands = running.load(Ordering::Relaxed),
                "ssh: waiting for running commands"
            );
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sessions one connection may have open at once, waiting for a command
/// or running one (sshd's `MaxSessions`).
pub const MAX_SESSIONS: usize = 10;

/// `stream` and a second descriptor of its socket (for `shutdown`).
fn twin_of(
    stream: tokio::net::TcpStream,
) -> std::io::Result<(tokio::net::TcpStream, std::net::TcpStream)> {
    let std = stream.into_std()?;
    let twin = std.try_clone()?;
    Ok((tokio::net::TcpStream::from_std(std)?, twin))
}
