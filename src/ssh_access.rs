//! SSH's access control: a key attached to a token (`gitstow key add`)
//! gets that token's grants, protected and hidden refs and webhooks, read
//! from the same access document as HTTP's tokens ([`gitstow_service::gate::Gate`]).

use std::sync::Arc;

use gitstow_service::gate::Level;
use gitstow_service::Denied;
use gitstow_service::Principal;
use gitstow_ssh::KeyAccess;

use gitstow_http::app::App;

/// [`KeyAccess`] over the HTTP application's access control.
#[derive(Debug, Clone)]
pub struct SshAccess(pub Arc<App>);

impl KeyAccess for SshAccess {
    async fn token_of(&self, fingerprint: &str) -> Option<String> {
        self.0.gate().key_token(fingerprint).await
    }

    async fn authorize(
        &self,
        fingerprint: &str,
        repo: &str,
        level: Level,
    ) -> Result<Principal, Denied> {
        self.0.gate().check_key(fingerprint, repo, level).await
    }

    async fn lfs_authenticate(
        &self,
        fingerprint: &str,
        repo: &str,
        upload: bool,
        local: Option<std::net::SocketAddr>,
    ) -> Result<String, Denied> {
        let level = if upload { Level::Write } else { Level::Read };
        let principal = self.authorize(fingerprint, repo, level).await?;
        let token = principal.token.ok_or(Denied::NotFound)?;
        gitstow_http::lfs::ssh_session(&self.0, &token, repo, upload, local).await
    }
}
