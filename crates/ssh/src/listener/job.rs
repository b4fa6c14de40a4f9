//! One `exec` request's work: the command checked against the key's
//! rights, then git's command ([`crate::git`]), `git-lfs-transfer`
//! ([`crate::lfs_transfer`]) or `git-lfs-authenticate` run over the
//! channel, and what the client is told on stderr and in the exit status.

use std::net::SocketAddr;
use std::sync::Arc;

use gitstow_protocol::ProtocolVersion;
use gitstow_service::gate::Level;
use gitstow_service::metrics as m;
use gitstow_service::{Denied, Host, Refusal};
use russh::server::Msg;
use russh::Channel;

use super::KeyAccess;
use crate::command::{self, Command};
use crate::git::{self, Failure};

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

/// What [`not_found`] says: one line for a missing repository and one the
/// key may not read.
pub(crate) const NOT_FOUND: &str = "ERROR: Repository not found.";

/// One `exec` request's work.
pub(super) struct Job<A: KeyAccess> {
    pub(super) host: Arc<Host>,
    pub(super) access: Arc<A>,
    pub(super) peer: SocketAddr,
    pub(super) local: Option<SocketAddr>,
    pub(super) fingerprint: String,
    pub(super) token: Option<String>,
    pub(super) version: ProtocolVersion,
}

impl<A: KeyAccess> Job<A> {
    pub(super) async fn run(
        self,
        channel: Channel<Msg>,
        exec: Result<Command, command::ExecError>,
    ) {
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

/// Writes `line` to the client's stderr (git prints it as is).
pub(crate) async fn say(out: &russh::ChannelWriteHalf<Msg>, line: &str) {
    let _ = out
        .extended_data_bytes(1, format!("{line}\n").into_bytes())
        .await;
}

/// Sends the exit status, EOF and close.
pub(super) async fn finish(out: &russh::ChannelWriteHalf<Msg>, status: u32) {
    let _ = out.exit_status(status).await;
    let _ = out.eof().await;
    let _ = out.close().await;
}
