//! The other server of a mirror over smart HTTP(S) (gitprotocol-http(5)):
//! as a pull's upstream, protocol v2 (gitprotocol-v2(5)): `GET
//! …/info/refs?service=git-upload-pack` with `Git-Protocol: version=2`
//! for the capabilities, then `POST …/git-upload-pack` for `ls-refs` and
//! for `fetch`, as git's `remote-curl` sends them; as a push's target,
//! receive-pack: `GET …/info/refs?service=git-receive-pack`, then `POST
//! …/git-receive-pack`. Blocking (`ureq`): run it off the async runtime.
//! Or over SSH ([`crate::ssh`]): the same requests and answers, one SSH
//! session each.

use std::io::Write;
use std::time::Duration;

use gitstow_protocol::client::{self, ClientError, RemoteRef};

use crate::ssh::Input;
use gix_hash::ObjectId;

/// Why talking to the upstream failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// Not an `http://` or `https://` URL, or one with credentials in it.
    #[error("{0}")]
    Url(String),
    /// The upstream answered with an HTTP error status.
    #[error("the upstream answered HTTP {status} to {what}")]
    Status {
        /// The status code.
        status: u16,
        /// Which request.
        what: &'static str,
    },
    /// The connection failed, or timed out.
    #[error("cannot reach the upstream: {0}")]
    Connect(String),
    /// The answer broke the protocol, or a bound.
    #[error(transparent)]
    Protocol(#[from] ClientError),
    /// The upstream refused us for good until something changes: an SSH
    /// key it does not take, a host key that changed, a repository it
    /// says it does not have.
    #[error("{0}")]
    Denied(String),
}

impl UpstreamError {
    /// Whether trying again later may help (connection, timeout, 5xx, 408, 429),
    /// as opposed to a refusal that stays (401, 403, 404, a bad answer).
    pub fn is_transient(&self) -> bool {
        match self {
            UpstreamError::Connect(_) => true,
            UpstreamError::Status { status, .. } => {
                *status >= 500 || *status == 429 || *status == 408
            }
            UpstreamError::Protocol(ClientError::Io(_)) => true,
            _ => false,
        }
    }
}

/// A repository on another git server, reached over smart HTTP(S).
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The repository's URL without a trailing `/` (`https://host/org/x.git`).
    base: String,
    agent: ureq::Agent,
    /// The `Authorization` header sent with each request, if any.
    authorization: Option<Authorization>,
    /// Set for an SSH upstream: every request goes there instead.
    ssh: Option<crate::ssh::SshLink>,
}

/// An `Authorization` header value; its `Debug` hides it.
#[derive(Clone)]
struct Authorization(String);

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authorization(<hidden>)")
    }
}

impl Upstream {
    /// The repository at `url` (`http://` or `https://`, no credentials in
    /// it), each request bounded by `timeout` in all.
    ///
    /// # Errors
    /// [`UpstreamError::Url`] for another scheme or a URL with a user or
    /// password (credentials never go in a URL: plan 0017).
    pub fn new(url: &str, timeout: Duration) -> Result<Upstream, UpstreamError> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            // A server that stops answering holds the mirror worker (and
            // the mirrors due after it) this long, not the whole timeout.
            .timeout_connect(Some(SILENCE.min(timeout)))
            .timeout_recv_response(Some(SILENCE.min(timeout)))
            .http_status_as_error(false)
            .user_agent(client::AGENT)
            .build()
            .into();
        // Said without the URL: it may hold what it should not.
        if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(UpstreamError::Url(
                "the URL holds a space or a control character".into(),
            ));
        }
        if let Some(link) = crate::ssh::SshLink::parse(url, timeout) {
            return Ok(Upstream {
                base: url.trim_end_matches('/').to_owned(),
                agent,
                authorization: None,
                ssh: Some(link?),
            });
        }
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or_else(|| UpstreamError::Url(format!("not an http(s) or ssh URL: {url}")))?;
        let authority = rest.split('/').next().unwrap_or("");
        if authority.contains('@') {
            return Err(UpstreamError::Url(
                "the URL holds credentials: give the URL without them".into(),
            ));
        }
        if authority.is_empty() {
            return Err(UpstreamError::Url(format!("no host in {url}")));
        }
        if rest.contains('?') || rest.contains('#') {
            return Err(UpstreamError::Url(
                "the URL holds a query or a fragment: give the repository's URL alone (credentials go in --username and --password-file)".into(),
            ));
        }
        let port = match authority.rsplit_once(']') {
            Some((host, rest)) if host.starts_with('[') => rest.strip_prefix(':'),
            Some(_) => return Err(UpstreamError::Url(format!("not a host: {authority}"))),
            None if authority.contains('[') => {
                return Err(UpstreamError::Url(format!("not a host: {authority}")))
            }
            None => authority.split_once(':').map(|(_, p)| p),
        };
        if port.is_some_and(|p| p.parse::<u16>().map_or(true, |p| p == 0)) {
            return Err(UpstreamError::Url(format!("not a port in {authority}")));
        }
        Ok(Upstream {
            base: url.trim_end_matches('/').to_owned(),
            agent,
            authorization: None,
            ssh: None,
        })
    }

    /// Whether the upstream is reached over SSH.
    pub fn is_ssh(&self) -> bool {
        self.ssh.is_some()
    }

    /// An SSH upstream's key (an unencrypted OpenSSH private key) and the
    /// host key it must show (`SHA256:…`; `None`: the first one seen is
    /// taken, and [`Upstream::seen_host_key`] says which). Nothing for an
    /// HTTP upstream.
    ///
    /// # Errors
    /// The key does not parse.
    pub fn with_ssh_key(
        mut self,
        key: &str,
        pinned: Option<&str>,
    ) -> Result<Upstream, UpstreamError> {
        if let Some(link) = self.ssh.take() {
            self.ssh = Some(link.with_key(key, pinned)?);
        }
        Ok(self)
    }

    /// An SSH upstream's answer to `git-lfs-authenticate` for `operation`
    /// (`download`, `upload`): where its LFS API is and the headers to
    /// send there. `None` for an HTTP upstream.
    ///
    /// # Errors
    /// [`UpstreamError`].
    pub(crate) fn lfs_authenticate(
        &self,
        operation: &str,
    ) -> Option<Result<Vec<u8>, UpstreamError>> {
        self.ssh.as_ref().map(|l| l.lfs_authenticate(operation))
    }

    /// The host key an SSH upstream showed in its last session.
    pub fn seen_host_key(&self) -> Option<String> {
        self.ssh.as_ref().and_then(|l| l.seen_host_key())
    }

    /// Sends HTTP Basic credentials (RFC 7617) with every request: a user
    /// name and a password or token (GitHub and Gitea take a token as the
    /// password with any user name, GitLab with `oauth2`).
    pub fn with_basic(mut self, username: &str, password: &str) -> Upstream {
        use base64::Engine as _;
        let pair = format!("{username}:{password}");
        self.authorization = Some(Authorization(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )));
        self
    }

    /// `request` with this server's `Authorization`, if it has one.
    pub(crate) fn authorize<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.authorization {
            Some(a) => request.header("Authorization", &a.0),
            None => request,
        }
    }

    /// The HTTP agent (its timeout bounds each request in all).
    pub(crate) fn agent(&self) -> &ureq::Agent {
        &self.agent
    }

    /// The URL as given (no credentials: [`Upstream::new`] refuses them).
    pub fn url(&self) -> &str {
        &self.base
    }

    /// The capabilities the upstream's upload-pack advertises in v2.
    ///
    /// # Errors
    /// [`UpstreamError`]; [`ClientError::NotV2`] inside it for a server
    /// that speaks only v0.
    pub fn capabilities(&self) -> Result<Vec<String>, UpstreamError> {
        if let Some(ssh) = &self.ssh {
            let answer = ssh.run(
                UPLOAD_PACK,
                true,
                Input::Bytes(Vec::new()),
                ADVERTISEMENT_BYTES,
            )?;
            return Ok(client::read_capabilities(std::io::BufReader::new(answer))?);
        }
        let url = format!("{}/info/refs?service=git-upload-pack", self.base);
        let response = self
            .authorize(self.agent.get(&url))
            .header("Git-Protocol", "version=2")
            .call()
            .map_err(connect)?;
        let response = ok(response, "the ref discovery")?;
        Ok(client::read_capabilities(
            response.into_body().into_reader(),
        )?)
    }

    /// The refs under `prefixes` (all when empty), at most `max_refs`.
    ///
    /// # Errors
    /// [`UpstreamError`].
    pub fn ls_refs(
        &self,
        prefixes: &[&str],
        max_refs: usize,
    ) -> Result<Vec<RemoteRef>, UpstreamError> {
        let body = client::ls_refs_request(prefixes);
        if let Some(ssh) = &self.ssh {
            let answer = ssh.run(UPLOAD_PACK, true, Input::Bytes(body), u64::MAX)?;
            let mut r = std::io::BufReader::new(answer);
            client::read_capabilities(&mut r)?;
            return Ok(client::read_ls_refs(r, max_refs)?);
        }
        let response = self.post(&body, "ls-refs")?;
        Ok(client::read_ls_refs(
            response.into_body().into_reader(),
            max_refs,
        )?)
    }

    /// Fetches what `wants` need beyond `haves` into `pack` (a thin pack);
    /// returns its bytes. More than `max_bytes` fails.
    ///
    /// # Errors
    /// [`UpstreamError`].
    pub fn fetch(
        &self,
        wants: &[ObjectId],
        haves: &[ObjectId],
        pack: &mut impl Write,
        max_bytes: u64,
    ) -> Result<u64, UpstreamError> {
        let body = client::fetch_request(wants, haves);
        if let Some(ssh) = &self.ssh {
            // The answer is bounded by the pack's bound, and framing.
            let bound = max_bytes
                .saturating_add(max_bytes / 8)
                .saturating_add(1 << 20);
            let answer = ssh.run(UPLOAD_PACK, true, Input::Bytes(body), bound)?;
            let mut r = std::io::BufReader::new(answer);
            client::read_capabilities(&mut r)?;
            return Ok(client::read_fetch_response(r, pack, max_bytes)?);
        }
        let response = self.post(&body, "fetch")?;
        Ok(client::read_fetch_response(
            response.into_body().into_reader(),
            pack,
            max_bytes,
        )?)
    }

    /// The refs and receive-pack capabilities of the repository as a push
    /// target (`GET …/info/refs?service=git-receive-pack`), at most
    /// `max_refs` refs.
    ///
    /// # Errors
    /// [`UpstreamError`].
    pub fn receive_advertisement(
        &self,
        max_refs: usize,
    ) -> Result<gitstow_protocol::client_push::ReceiveAdvertisement, UpstreamError> {
        if let Some(ssh) = &self.ssh {
            let answer = ssh.run(RECEIVE_PACK, false, Input::Bytes(Vec::new()), u64::MAX)?;
            return Ok(gitstow_protocol::client_push::read_receive_advertisement(
                std::io::BufReader::new(answer),
                max_refs,
            )?);
        }
        let url = format!("{}/info/refs?service=git-receive-pack", self.base);
        let response = self
            .authorize(self.agent.get(&url))
            .call()
            .map_err(connect)?;
        let response = ok(response, "the push's ref discovery")?;
        Ok(gitstow_protocol::client_push::read_receive_advertisement(
            response.into_body().into_reader(),
            max_refs,
        )?)
    }

    /// Sends a push (`POST …/git-receive-pack`: `request` holds the
    /// commands and the pack, `len` bytes) and reads its report-status.
    ///
    /// # Errors
    /// [`UpstreamError`].
    pub fn send_pack(
        &self,
        request: std::fs::File,
        len: u64,
        max_refs: usize,
    ) -> Result<gitstow_protocol::client_push::Report, UpstreamError> {
        if let Some(ssh) = &self.ssh {
            // A session of its own: the advertisement comes again first.
            let answer = ssh.run(RECEIVE_PACK, false, Input::File(request), u64::MAX)?;
            let mut r = std::io::BufReader::new(answer);
            gitstow_protocol::client_push::read_receive_advertisement(&mut r, max_refs)?;
            return Ok(gitstow_protocol::client_push::read_report(r, max_refs)?);
        }
        let url = format!("{}/git-receive-pack", self.base);
        let response = self
            .authorize(self.agent.post(&url))
            .header("Content-Type", "application/x-git-receive-pack-request")
            .header("Accept", "application/x-git-receive-pack-result")
            .header("Content-Length", &len.to_string())
            .send(request)
            .map_err(connect)?;
        let response = ok(response, "the push")?;
        Ok(gitstow_protocol::client_push::read_report(
            response.into_body().into_reader(),
            max_refs,
        )?)
    }

    fn post(
        &self,
        body: &[u8],
        what: &'static str,
    ) -> Result<ureq::http::Response<ureq::Body>, UpstreamError> {
        let url = format!("{}/git-upload-pack", self.base);
        let response = self
            .authorize(self.agent.post(&url))
            .header("Git-Protocol", "version=2")
            .header("Content-Type", "application/x-git-upload-pack-request")
            .header("Accept", "application/x-git-upload-pack-result")
            .send(body)
            .map_err(connect)?;
        ok(response, what)
    }
}

/// The longest an upstream may take to connect or to begin its answer.
pub(crate) const SILENCE: Duration = Duration::from_secs(300);

/// The services an SSH upstream runs.
const UPLOAD_PACK: &str = "git-upload-pack";
const RECEIVE_PACK: &str = "git-receive-pack";

/// Most bytes of a capability advertisement read over SSH.
const ADVERTISEMENT_BYTES: u64 = 1 << 20;

/// `response` when its status is 200, else [`UpstreamError::Status`]
/// naming `what` was asked.
fn ok(
    response: ureq::http::Response<ureq::Body>,
    what: &'static str,
) -> Result<ureq::http::Response<ureq::Body>, UpstreamError> {
    match response.status().as_u16() {
        200 => Ok(response),
        status => Err(UpstreamError::Status { status, what }),
    }
}

/// A transport error, without the URL (it is said once by the caller).
fn connect(e: ureq::Error) -> UpstreamError {
    UpstreamError::Connect(match e {
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_credentials_or_other_schemes_are_refused() {
        let t = Duration::from_secs(1);
        assert!(Upstream::new("https://github.com/org/x.git/", t).is_ok());
        assert!(Upstream::new("http://[::1]:8080/org/x.git", t).is_ok());
        assert!(Upstream::new("http://h:8080/org/x.git", t).is_ok());
        assert_eq!(
            Upstream::new("http://h/x.git/", t).unwrap().url(),
            "http://h/x.git"
        );
        for bad in [
            "https://user:secret@github.com/org/x.git",
            "https://token@github.com/org/x.git",
            "ssh://git:secret@h/x.git",
            "https:///x.git",
            "https://h/x.git?private_token=secret",
            "https://h/x.git#secret",
            "https://h/x secret.git",
            "https://h/x.git\r\nsecret",
            "https://h:99999/x.git",
            "https://h:0/x.git",
            "https://[::1/x.git",
        ] {
            let e = Upstream::new(bad, t).unwrap_err().to_string();
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
