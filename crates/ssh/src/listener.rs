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

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gitstow_protocol::ProtocolVersion;
use gitstow_service::conn_caps::{self, ConnCaps};
use gitstow_service::gate::Level;
use gitstow_service::metrics as m;
use gitstow_service::{Denied, Host, Principal, Refusal};
use russh::keys::{Algorithm, HashAlg};
use russh::server::{Auth, Msg, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId, MethodKind, MethodSet};
use tokio::net::TcpListener;

use crate::command::{self, Command};
use crate::git::{self, Failure};
use crate::proxy::{self, ProxyFrom};
use crate::HostKeys;

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

/// What the client is told on stderr when [`KeyAccess`] says no.
fn denied_line(denied: Denied) -> String {
    match denied {
        Denied::NotFound => NOT_FOUND.to_owned(),
        Denied::Forbidden(why) => format!("ERROR: {why}"),
        Denied::Unavailable | Denied::StoreDown => {
            "ERROR: access control is unavailable, try again later".into()
        }
        // Not answered for a key (no secret, no Host): as not found.
        Denied::Unauthenticated
        | Denied::InvalidCredentials
        | Denied::TooManyFailures
        | Denied::LoopbackOnly => NOT_FOUND.to_owned(),
    }
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

/// What [`not_found`] says: one line for a missing repository and one the
/// key may not read.
pub(crate) const NOT_FOUND: &str = "ERROR: Repository not found.";

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

/// One client connection.
struct Connection<A: KeyAccess> {
    host: Arc<Host>,
    access: Arc<A>,
    config: Arc<SshConfig>,
    peer: SocketAddr,
    /// The address the client reached (where the HTTP side is reached
    /// too, for `git-lfs-authenticate`'s href).
    local: Option<SocketAddr>,
    authenticated: Arc<AtomicBool>,
    /// Its slot among the connections not authenticated yet, held until
    /// it is (or closes).
    pending: Option<conn_caps::Held>,
    /// Commands running in the listener (drained at shutdown).
    running: Arc<std::sync::atomic::AtomicUsize>,
    /// Commands running on this connection.
    sessions: Arc<std::sync::atomic::AtomicUsize>,
    /// The verified key's fingerprint and its token, once authenticated.
    fingerprint: Option<String>,
    token: Option<String>,
    /// Session channels opened and not yet running a command, with the
    /// `GIT_PROTOCOL` each was given.
    channels: HashMap<ChannelId, (Channel<Msg>, Option<String>)>,
}

impl<A: KeyAccess> russh::server::Handler for Connection<A> {
    type Error = russh::Error;

    async fn auth_publickey_offered(
        &mut self,
        user: &str,
        offer: russh::server::PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        // Each refused offer has its line, as a refused signature does: an
        // operator looking for why a key is refused finds it in the log.
        let fp = gitstow_service::gate::fingerprint(offer.public_key);
        if user != self.config.user {
            tracing::info!(peer = %self.peer, user, fingerprint = %fp, want = %self.config.user, "ssh: key offered for an unknown user");
            return Ok(Auth::reject());
        }
        // Only keys attached to a token go on to a signature: an agent
        // holding many keys finds its key without spending attempts.
        if matches!(offer.algorithm, Algorithm::Rsa { hash: None }) {
            tracing::info!(peer = %self.peer, user, fingerprint = %fp, "ssh: key offered with an ssh-rsa (SHA-1) signature, which is refused");
            return Ok(Auth::reject());
        }
        match self.access.token_of(&fp).await {
            Some(_) => Ok(Auth::Accept),
            None => {
                tracing::info!(peer = %self.peer, user, fingerprint = %fp, "ssh: key offered is attached to no token (gitstow key add)");
                Ok(Auth::reject())
            }
        }
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        let fp = gitstow_service::gate::fingerprint(key.public_key);
        if user != self.config.user {
            metrics::counter!(m::SSH_AUTH_FAILURES).increment(1);
            tracing::info!(peer = %self.peer, user, fingerprint = %fp, "ssh: authentication failed: unknown user");
            return Ok(Auth::reject());
        }
        if matches!(key.algorithm, Algorithm::Rsa { hash: None }) {
            metrics::counter!(m::SSH_AUTH_FAILURES).increment(1);
            tracing::info!(peer = %self.peer, user, fingerprint = %fp, "ssh: authentication failed: ssh-rsa (SHA-1) signature");
            return Ok(Auth::reject());
        }
        match self.access.token_of(&fp).await {
            Some(token) => {
                tracing::info!(peer = %self.peer, user, fingerprint = %fp, token = %token, "ssh: authenticated");
                self.fingerprint = Some(fp);
                self.token = Some(token);
                self.authenticated.store(true, Ordering::Relaxed);
                self.pending = None;
                Ok(Auth::Accept)
            }
            None => {
                // One line per failure, for fail2ban (as sshd's).
                metrics::counter!(m::SSH_AUTH_FAILURES).increment(1);
                tracing::info!(peer = %self.peer, user, fingerprint = %fp, "ssh: authentication failed: unknown key");
                Ok(Auth::reject())
            }
        }
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: russh::server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        // As sshd's `MaxSessions`: at most 10 sessions on one connection,
        // waiting for a command or running one, so that one connection
        // cannot hold more fetch slots (or anything else) than ten
        // connections could. Dropping `reply` refuses the channel
        // ("administratively prohibited", as sshd).
        let running = self.sessions.load(Ordering::Relaxed);
        if self.channels.len() + running >= MAX_SESSIONS {
            tracing::info!(peer = %self.peer, limit = MAX_SESSIONS, "ssh: session refused: too many on this connection");
            return Ok(());
        }
        self.channels.insert(channel.id(), (channel, None));
        reply.accept().await;
        Ok(())
    }

    async fn env_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        value: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        match self.channels.get_mut(&channel) {
            Some((_, protocol)) if name == "GIT_PROTOCOL" && value.len() <= 256 => {
                *protocol = Some(value.to_owned());
                session.channel_success(channel)
            }
            _ => session.channel_failure(channel),
        }
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        // `ssh git@host`: say who the key is, as forges do, and end.
        let token = self.token.clone().unwrap_or_default();
        let Some((channel, _)) = self.channels.remove(&channel) else {
            return session.channel_failure(channel);
        };
        session.channel_success(channel.id())?;
        tokio::spawn(async move {
            let (_read_half, write_half) = channel.split();
            say(
                &write_half,
                &format!("Hi {token}! You've successfully authenticated, but gitstow does not provide shell access."),
            )
            .await;
            finish(&write_half, 1).await;
        });
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let Some((channel, protocol)) = self.channels.remove(&channel) else {
            return session.channel_failure(channel);
        };
        session.channel_success(channel.id())?;
        let exec = command::parse_command(data);
        let (Some(fp), token) = (self.fingerprint.clone(), self.token.clone()) else {
            return Ok(());
        };
        let job = Job {
            host: self.host.clone(),
            access: self.access.clone(),
            peer: self.peer,
            local: self.local,
            fingerprint: fp,
            token,
            version: protocol
                .as_deref()
                .map_or(ProtocolVersion::V0, ProtocolVersion::from_git_protocol),
        };
        let running = (
            Running::new(self.running.clone()),
            Running::new(self.sessions.clone()),
        );
        tokio::spawn(async move {
            job.run(channel, exec).await;
            drop(running);
        });
        Ok(())
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        _name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_failure(channel)
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_failure(channel)
    }
}

/// One `exec` request's work.
struct Job<A: KeyAccess> {
    host: Arc<Host>,
    access: Arc<A>,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    fingerprint: String,
    token: Option<String>,
    version: ProtocolVersion,
}

impl<A: KeyAccess> Job<A> {
    async fn run(self, channel: Channel<Msg>, exec: Result<Command, command::ExecError>) {
        let (mut read_half, write_half) = channel.split();
        let exec = match exec {
            Ok(Command::Git(e)) => e,
            Ok(Command::LfsAuthenticate { repo, upload }) => {
                return self.lfs_authenticate(&write_half, &repo, upload).await;
            }
            Ok(Command::LfsTransfer { repo, upload }) => {
                let input = crate::io::Counted::new(read_half.make_reader());
                return self.lfs_transfer(input, write_half, &repo, upload).await;
            }
            Err(e) => {
                tracing::info!(peer = %self.peer, token = self.token.as_deref(), error = %e, "ssh: command refused");
                say(&write_half, &format!("ERROR: {e}.")).await;
                finish(&write_half, 128).await;
                return;
            }
        };
        let write = exec.service == gitstow_protocol::Service::ReceivePack;
        let principal = match self
            .access
            .authorize(
                &self.fingerprint,
                &exec.repo,
                if write { Level::Write } else { Level::Read },
            )
            .await
        {
            Ok(p) => p,
            Err(denied) => {
                tracing::info!(peer = %self.peer, token = self.token.as_deref(), repo = %exec.repo, ?denied, "ssh: request refused");
                let line = denied_line(denied);
                say(&write_half, &line).await;
                finish(&write_half, 128).await;
                return;
            }
        };
        let started = std::time::Instant::now();
        let mut input = crate::io::Counted::new(read_half.make_reader());
        let output = git::Output::new(write_half);
        let request = git::Request {
            host: &self.host,
            principal: &principal,
            name: &exec.repo,
            service: exec.service,
            version: self.version,
        };
        let result = git::run(request, &mut input, &output).await;
        let write_half = output.half();
        let status = match &result {
            Ok(()) => 0,
            Err(Failure::Refused(Refusal::NotFound(_))) => {
                say(write_half, NOT_FOUND).await;
                128
            }
            Err(Failure::Refused(r)) => {
                say(write_half, &format!("ERROR: {r}")).await;
                128
            }
            Err(Failure::Protocol(why)) => {
                say(write_half, &format!("fatal: {why}")).await;
                128
            }
            Err(Failure::Fault(fault)) => {
                say(write_half, &format!("fatal: {fault}")).await;
                128
            }
            Err(Failure::Gone) => 128,
        };
        metrics::counter!(
            m::SSH_COMMANDS,
            "service" => exec.service.name(),
            "status" => if status == 0 { "0" } else { "128" }
        )
        .increment(1);
        tracing::info!(
            transport = "ssh",
            peer = %self.peer,
            token = self.token.as_deref(),
            fingerprint = %self.fingerprint,
            repo = %exec.repo,
            service = exec.service.name(),
            version = ?self.version,
            bytes_in = input.bytes,
            bytes_out = output.sent(),
            status,
            ms = started.elapsed().as_millis() as u64,
            "ssh command"
        );
        finish(write_half, status).await;
    }
}

impl<A: KeyAccess> Job<A> {
    /// `git-lfs-transfer <repo> upload|download`: the key's rights checked
    /// (write to upload and lock, read to download and list locks; admin
    /// noted for a forced unlock), the repository (or, for an upload where
    /// pushes create repositories, its name) checked, then the session
    /// ([`crate::lfs_transfer`]) on a blocking thread, fed from the channel
    /// at the pace input must keep.
    async fn lfs_transfer(
        &self,
        mut input: crate::io::Counted<impl tokio::io::AsyncRead + Unpin + Send>,
        write_half: russh::ChannelWriteHalf<Msg>,
        repo: &str,
        upload: bool,
    ) {
        let started = std::time::Instant::now();
        let level = if upload { Level::Write } else { Level::Read };
        let refused = match self.access.authorize(&self.fingerprint, repo, level).await {
            Err(denied) => Some(denied_line(denied)),
            Ok(principal) => {
                match crate::lfs_transfer::run::repository(&self.host, repo, upload).await {
                    Err(line) => Some(line),
                    Ok(()) => {
                        let admin = self
                            .access
                            .authorize(&self.fingerprint, repo, Level::Admin)
                            .await
                            .is_ok();
                        let owner = principal
                            .token
                            .unwrap_or_else(|| gitstow_lfs::locks::ANONYMOUS.to_owned());
                        let output = git::Output::new(write_half);
                        let status = crate::lfs_transfer::run::run(
                            &self.host, &mut input, &output, repo, upload, admin, owner,
                        )
                        .await;
                        let write_half = output.half();
                        let sent = output.sent();
                        let bytes = (input.bytes, sent);
                        self.log_lfs("git-lfs-transfer", repo, upload, status, bytes, started);
                        finish(write_half, status).await;
                        return;
                    }
                }
            }
        };
        let line = refused.unwrap_or_default();
        tracing::info!(peer = %self.peer, token = self.token.as_deref(), repo, why = %line, "ssh: git-lfs-transfer refused");
        say(&write_half, &line).await;
        finish(&write_half, 128).await;
    }

    /// `git-lfs-authenticate <repo> upload|download`: the JSON git-lfs
    /// reads (`href`, `header`, `expires_in`) on stdout, or `ERROR: …`.
    async fn lfs_authenticate(
        &self,
        write_half: &russh::ChannelWriteHalf<Msg>,
        repo: &str,
        upload: bool,
    ) {
        let started = std::time::Instant::now();
        let answer = self
            .access
            .lfs_authenticate(&self.fingerprint, repo, upload, self.local)
            .await;
        let mut sent = 0;
        let status = match answer {
            Ok(json) => {
                let line = format!("{json}\n").into_bytes();
                sent = line.len() as u64;
                let _ = write_half.data_bytes(line).await;
                0
            }
            Err(denied) => {
                tracing::info!(peer = %self.peer, token = self.token.as_deref(), repo, ?denied, "ssh: git-lfs-authenticate refused");
                let line = denied_line(denied);
                say(write_half, &line).await;
                128
            }
        };
        self.log_lfs(
            "git-lfs-authenticate",
            repo,
            upload,
            status,
            (0, sent),
            started,
        );
        finish(write_half, status).await;
    }

    /// The access-log line of a Git LFS command (`service`), as git's
    /// commands have theirs; `bytes` are (in, out).
    fn log_lfs(
        &self,
        service: &'static str,
        repo: &str,
        upload: bool,
        status: u32,
        (bytes_in, bytes_out): (u64, u64),
        started: std::time::Instant,
    ) {
        tracing::info!(
            transport = "ssh",
            peer = %self.peer,
            token = self.token.as_deref(),
            fingerprint = %self.fingerprint,
            repo,
            service,
            operation = if upload { "upload" } else { "download" },
            bytes_in,
            bytes_out,
            status,
            ms = started.elapsed().as_millis() as u64,
            "ssh command"
        );
    }
}

/// `stream` and a second descriptor of its socket (for `shutdown`).
fn twin_of(
    stream: tokio::net::TcpStream,
) -> std::io::Result<(tokio::net::TcpStream, std::net::TcpStream)> {
    let std = stream.into_std()?;
    let twin = std.try_clone()?;
    Ok((tokio::net::TcpStream::from_std(std)?, twin))
}

/// A command counted among the running ones (of the listener, or of its
/// connection), until dropped.
struct Running(Arc<std::sync::atomic::AtomicUsize>);

impl Running {
    fn new(count: Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Running(count)
    }
}

/// Seconds between two warnings of refused connections: a flood of
/// thousands a second is one log line every this many seconds (with how
/// many since the last), and every one is counted in the metric.
const REFUSED_WARN_EVERY_SECS: u64 = 10;

/// When the last warning of refused connections was logged (seconds since
/// the Unix epoch), and how many were refused since.
static REFUSED_WARNED_AT: AtomicU64 = AtomicU64::new(0);
static REFUSED_SINCE: AtomicU64 = AtomicU64::new(0);

/// Which caps a refused connection met.
#[derive(Clone, Copy)]
enum Caps<'a> {
    /// The server's open connections, HTTP's and SSH's together.
    Open(&'a ConnCaps),
    /// The connections not authenticated yet (`MaxStartups`).
    Startups(&'a SshConfig),
}

/// Says (metric, and a warning at most every
/// [`REFUSED_WARN_EVERY_SECS`]) that a connection from `peer` met one of
/// `caps`; the connection is then closed without a word (as sshd does).
fn refused(peer: SocketAddr, cap: conn_caps::CapReached, caps: Caps<'_>) {
    metrics::counter!(m::SSH_CONNECTIONS_REFUSED).increment(1);
    let since = REFUSED_SINCE.fetch_add(1, Ordering::Relaxed) + 1;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = REFUSED_WARNED_AT.load(Ordering::Relaxed);
    if now < last + REFUSED_WARN_EVERY_SECS
        || REFUSED_WARNED_AT
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    REFUSED_SINCE.fetch_sub(since, Ordering::Relaxed);
    let ((total, per_source), what) = match caps {
        Caps::Open(c) => (c.limits(), "open connections (HTTP and SSH)"),
        Caps::Startups(config) => (
            (
                config.max_unauthenticated,
                config.max_unauthenticated_per_source,
            ),
            "not authenticated yet",
        ),
    };
    let (limit, whence) = match cap {
        conn_caps::CapReached::Total => (total, ""),
        conn_caps::CapReached::Source => (per_source, " from this address"),
    };
    tracing::warn!(%peer, limit, refused = since, "ssh: connection refused: too many {what}{whence} ({since} refused since the last such warning, at most one every {REFUSED_WARN_EVERY_SECS} s; all counted in {})", m::SSH_CONNECTIONS_REFUSED);
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Writes `line` to the client's stderr (git prints it as is).
pub(crate) async fn say(out: &russh::ChannelWriteHalf<Msg>, line: &str) {
    let _ = out
        .extended_data_bytes(1, format!("{line}\n").into_bytes())
        .await;
}

/// Sends the exit status, EOF and close.
async fn finish(out: &russh::ChannelWriteHalf<Msg>, status: u32) {
    let _ = out.exit_status(status).await;
    let _ = out.eof().await;
    let _ = out.close().await;
}
