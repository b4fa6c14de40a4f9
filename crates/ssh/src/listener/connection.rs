//! One client connection's SSH handler: public-key authentication through
//! [`KeyAccess`], the session channels it may open (at most
//! [`MAX_SESSIONS`]), the `env` requests taken (`GIT_PROTOCOL` only), and
//! each `exec` handed to a [`Job`]; shells, ptys and subsystems refused.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use gitstow_protocol::ProtocolVersion;
use gitstow_service::conn_caps;
use gitstow_service::metrics as m;
use gitstow_service::Host;
use russh::keys::Algorithm;
use russh::server::{Auth, Msg, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId};

use super::job::{finish, say, Job};
use super::running::Running;
use super::{KeyAccess, SshConfig, MAX_SESSIONS};
use crate::command;

/// One client connection.
pub(super) struct Connection<A: KeyAccess> {
    pub(super) host: Arc<Host>,
    pub(super) access: Arc<A>,
    pub(super) config: Arc<SshConfig>,
    pub(super) peer: SocketAddr,
    /// The address the client reached (where the HTTP side is reached
    /// too, for `git-lfs-authenticate`'s href).
    pub(super) local: Option<SocketAddr>,
    pub(super) authenticated: Arc<AtomicBool>,
    /// Its slot among the connections not authenticated yet, held until
    /// it is (or closes).
    pub(super) pending: Option<conn_caps::Held>,
    /// Commands running in the listener (drained at shutdown).
    pub(super) running: Arc<std::sync::atomic::AtomicUsize>,
    /// Commands running on this connection.
    pub(super) sessions: Arc<std::sync::atomic::AtomicUsize>,
    /// The verified key's fingerprint and its token, once authenticated.
    pub(super) fingerprint: Option<String>,
    pub(super) token: Option<String>,
    /// Session channels opened and not yet running a command, with the
    /// `GIT_PROTOCOL` each was given.
    pub(super) channels: HashMap<ChannelId, (Channel<Msg>, Option<String>)>,
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
