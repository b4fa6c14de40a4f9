//! The other server of a mirror over SSH (plan 0017 step 3): `ssh://[user@]host[:port]/path`
//! or git's scp-like `[user@]host:path`, as git's `connect.c` reads them.
//!
//! Each request is one SSH session, as each smart HTTP request is one
//! POST: public-key authentication with the mirror's key, an `exec` of
//! `git-upload-pack '<path>'` (with `GIT_PROTOCOL=version=2`) or
//! `git-receive-pack '<path>'`, the request written and the channel's
//! input closed, the whole answer read into a spool file, then parsed by
//! the same readers as over HTTP (the advertisement first: SSH has no
//! stateless mode). Blocking: each session runs on a runtime of its own.
//!
//! The server's host key is checked against the one the mirror pinned
//! (OpenSSH's `SHA256:…` fingerprint); a mirror with none pinned takes the
//! first one it sees (`accept-new`), which its run state then keeps. A
//! changed key fails the sync as a permanent failure.

use std::io::{Seek, Write};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::client;
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg};
use russh::ChannelMsg;

use crate::UpstreamError;

/// Most bytes of a remote's error output kept for the message.
const MAX_STDERR: usize = 4096;

/// Where a mirror's SSH server is, and how it is reached.
#[derive(Clone)]
pub(crate) struct SshLink {
    user: String,
    host: String,
    port: u16,
    /// The repository's path as the command names it.
    path: String,
    key: Option<Arc<PrivateKey>>,
    /// The host key the server must show (`SHA256:…`), if pinned.
    pinned: Option<String>,
    /// The host key it showed last.
    seen: Arc<Mutex<Option<String>>>,
    timeout: Duration,
}

impl std::fmt::Debug for SshLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SshLink({}@{}:{} {}, key: {})",
            self.user,
            self.host,
            self.port,
            self.path,
            if self.key.is_some() { "<set>" } else { "none" }
        )
    }
}

impl SshLink {
    /// The SSH location `url` names, `None` when it is no SSH URL (an
    /// `http(s)://` one).
    ///
    /// # Errors
    /// [`UpstreamError::Url`] for an SSH URL without a host or path, or
    /// with a password in it.
    pub(crate) fn parse(url: &str, timeout: Duration) -> Option<Result<SshLink, UpstreamError>> {
        let bad = |why: &str| Some(Err(UpstreamError::Url(format!("{why}: {url}"))));
        let (authority, path) = if let Some(rest) = url.strip_prefix("ssh://") {
            let (authority, path) = rest.split_once('/')?;
            (authority, format!("/{path}"))
        } else if url.contains("://") {
            return None;
        } else {
            // scp-like: host:path, where the part before ':' holds no '/'.
            let (authority, path) = url.split_once(':')?;
            if authority.contains('/') {
                return None;
            }
            (authority, path.to_owned())
        };
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((user, host)) => (user, host),
            None => ("git", authority),
        };
        if user.contains(':') {
            return Some(Err(UpstreamError::Url(
                "the URL holds a password: give the URL without it".into(),
            )));
        }
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if url.starts_with("ssh://") => match p.parse() {
                Ok(p) => (h, p),
                Err(_) => return bad("not a port"),
            },
            _ => (hostport, 22),
        };
        if host.is_empty() || user.is_empty() {
            return bad("no host or user in the SSH URL");
        }
        let path = path.trim_end_matches('/').to_owned();
        if path.is_empty() || path == "/" || path.contains('\'') || path.contains('\n') {
            return bad("no repository path in the SSH URL, or one git cannot quote");
        }
        Some(Ok(SshLink {
            user: user.to_owned(),
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            path,
            key: None,
            pinned: None,
            seen: Arc::new(Mutex::new(None)),
            timeout,
        }))
    }

    /// Authenticates with `key` (an OpenSSH private key, unencrypted) and
    /// requires the server's host key `pinned` (`SHA256:…`) when given.
    ///
    /// # Errors
    /// The key does not parse (the message holds none of it).
    pub(crate) fn with_key(
        mut self,
        key: &str,
        pinned: Option<&str>,
    ) -> Result<SshLink, UpstreamError> {
        if let Some(p) = pinned {
            let hash = p.strip_prefix("SHA256:").unwrap_or("");
            let base64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
            if hash.len() != 43 || !hash.chars().all(base64) {
                return Err(UpstreamError::Url(
                    "not an SSH host key fingerprint: give SHA256:… as `ssh-keygen -lf` prints it"
                        .into(),
                ));
            }
        }
        let key = russh::keys::decode_secret_key(key, None).map_err(|_| {
            UpstreamError::Url(
                "the SSH key does not parse (an unencrypted OpenSSH private key is needed)".into(),
            )
        })?;
        self.key = Some(Arc::new(key));
        self.pinned = pinned.map(str::to_owned);
        Ok(self)
    }

    /// The host key the server showed in the last session (`SHA256:…`).
    pub(crate) fn seen_host_key(&self) -> Option<String> {
        self.seen.lock().ok().and_then(|s| s.clone())
    }

    /// Runs `service` (`git-upload-pack`, `git-receive-pack`) on the
    /// repository, in protocol v2 when `v2`: writes `input`, closes the
    /// channel's input, and returns everything the service wrote (at most
    /// `max_bytes`), rewound.
    ///
    /// # Errors
    /// [`UpstreamError`]: the connection, the host key, the
    /// authentication, or the service's refusal (its stderr).
    pub(crate) fn run(
        &self,
        service: &str,
        v2: bool,
        input: Input,
        max_bytes: u64,
    ) -> Result<std::fs::File, UpstreamError> {
        self.exec(&format!("{service} '{}'", self.path), v2, input, max_bytes)
    }

    /// `git-lfs-authenticate '<path>' <operation>` (`download`, `upload`):
    /// the JSON git-lfs reads (git-lfs `docs/api/server-discovery.md`:
    /// `href`, `header`, `expires_in`).
    ///
    /// # Errors
    /// As [`SshLink::run`].
    pub(crate) fn lfs_authenticate(&self, operation: &str) -> Result<Vec<u8>, UpstreamError> {
        let command = format!("git-lfs-authenticate '{}' {operation}", self.path);
        let mut answer = self.exec(&command, false, Input::Bytes(Vec::new()), 64 << 10)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut answer, &mut bytes)
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        Ok(bytes)
    }

    fn exec(
        &self,
        command: &str,
        v2: bool,
        input: Input,
        max_bytes: u64,
    ) -> Result<std::fs::File, UpstreamError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        let mut out = tempfile::tempfile().map_err(|e| UpstreamError::Connect(e.to_string()))?;
        let session = self.session(command, v2, input, &mut out, max_bytes);
        let bounded = async { tokio::time::timeout(self.timeout, session).await };
        match runtime.block_on(bounded) {
            Err(_) => {
                return Err(UpstreamError::Connect(format!(
                    "timed out ({:?})",
                    self.timeout
                )))
            }
            Ok(r) => r?,
        }
        out.rewind()
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        Ok(out)
    }

    async fn session(
        &self,
        command: &str,
        v2: bool,
        input: Input,
        out: &mut std::fs::File,
        max_bytes: u64,
    ) -> Result<(), UpstreamError> {
        let Some(key) = &self.key else {
            return Err(UpstreamError::Denied(
                "an SSH upstream needs a key (--ssh-key-file)".into(),
            ));
        };
        let config = Arc::new(client::Config {
            // A server silent this long is given up (the whole session
            // is bounded by the mirror's timeout).
            inactivity_timeout: Some(crate::upstream::SILENCE.min(self.timeout)),
            ..Default::default()
        });
        let checker = HostKeyCheck {
            pinned: self.pinned.clone(),
            seen: self.seen.clone(),
        };
        let connected = client::connect(config, (self.host.as_str(), self.port), checker).await;
        let mut handle = match connected {
            Ok(h) => h,
            Err(e) => {
                let seen = self.seen_host_key();
                if let (Some(pinned), Some(seen)) = (&self.pinned, seen) {
                    if *pinned != seen {
                        return Err(UpstreamError::Denied(format!(
                            "the upstream's SSH host key changed: it shows {seen}, the mirror expects {pinned}"
                        )));
                    }
                }
                return Err(UpstreamError::Connect(e.to_string()));
            }
        };
        let hash = handle
            .best_supported_rsa_hash()
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?
            .flatten();
        let auth = handle
            .authenticate_publickey(
                self.user.clone(),
                PrivateKeyWithHashAlg::new(key.clone(), hash),
            )
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        if !auth.success() {
            return Err(UpstreamError::Denied(format!(
                "the upstream refused the SSH key for {}",
                self.user
            )));
        }
        let mut channel = handle
            .channel_open_session()
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        if v2 {
            channel
                .set_env(false, "GIT_PROTOCOL", "version=2")
                .await
                .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        }
        channel
            .exec(true, command)
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        let sent = match input {
            Input::Bytes(b) if b.is_empty() => Ok(()),
            Input::Bytes(b) => channel.data(&b[..]).await,
            // Streamed: a push's pack is never held whole.
            Input::File(f) => channel.data(tokio::fs::File::from_std(f)).await,
        };
        sent.map_err(|e| UpstreamError::Connect(e.to_string()))?;
        channel
            .eof()
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        let (mut written, mut stderr, mut status) = (0u64, Vec::new(), None);
        while let Some(msg) = channel.wait().await {
            match msg {
                ChannelMsg::Data { data } => {
                    written += data.len() as u64;
                    if written > max_bytes {
                        return Err(UpstreamError::Protocol(
                            gitstow_protocol::client::ClientError::TooLarge(format!(
                                "the answer (more than {max_bytes} bytes)"
                            )),
                        ));
                    }
                    out.write_all(&data)
                        .map_err(|e| UpstreamError::Connect(format!("spooling the answer: {e}")))?;
                }
                ChannelMsg::ExtendedData { data, .. } => {
                    let room = MAX_STDERR.saturating_sub(stderr.len());
                    stderr.extend_from_slice(&data[..data.len().min(room)]);
                }
                ChannelMsg::ExitStatus { exit_status } => status = Some(exit_status),
                ChannelMsg::Close => break,
                ChannelMsg::Eof if status.is_some() => break,
                _ => {}
            }
        }
        let _ = handle
            .disconnect(russh::Disconnect::ByApplication, "", "en")
            .await;
        match status {
            Some(0) | None if written > 0 => Ok(()),
            _ => {
                let said = String::from_utf8_lossy(&stderr).trim().to_owned();
                Err(UpstreamError::Denied(if said.is_empty() {
                    format!("the upstream's `{command}` ended with status {status:?}")
                } else {
                    format!("the upstream said: {said}")
                }))
            }
        }
    }
}

/// What a session writes to the service.
pub(crate) enum Input {
    /// A small request.
    Bytes(Vec<u8>),
    /// A spooled one (a push's commands and pack), rewound.
    File(std::fs::File),
}

/// Checks the server's host key against the pinned one, and notes it.
struct HostKeyCheck {
    pinned: Option<String>,
    seen: Arc<Mutex<Option<String>>>,
}

impl client::Handler for HostKeyCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            return Ok(false);
        };
        let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
        let ok = self.pinned.as_ref().is_none_or(|p| *p == fingerprint);
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some(fingerprint);
        }
        Ok(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> SshLink {
        SshLink::parse(url, Duration::from_secs(1))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn ssh_urls_are_read_as_git_reads_them() {
        let l = parsed("ssh://git@h:2222/org/app.git");
        assert_eq!(
            (l.user.as_str(), l.host.as_str(), l.port, l.path.as_str()),
            ("git", "h", 2222, "/org/app.git")
        );
        let l = parsed("me@h.example:org/app.git");
        assert_eq!(
            (l.user.as_str(), l.host.as_str(), l.port, l.path.as_str()),
            ("me", "h.example", 22, "org/app.git")
        );
        let l = parsed("ssh://h/org/app");
        assert_eq!((l.user.as_str(), l.port), ("git", 22));
        assert!(SshLink::parse("https://h/x.git", Duration::from_secs(1)).is_none());
        for bad in [
            "ssh://u:secret@h/x.git",
            "ssh://h:port/x",
            "git@h:",
            "ssh://@h/x",
        ] {
            let e = SshLink::parse(bad, Duration::from_secs(1))
                .unwrap()
                .unwrap_err()
                .to_string();
            assert!(!e.contains("secret@"), "{e}");
        }
    }
}
