//! SSH's access control: a key attached to a token (`gitstow key add`)
//! gets that token's grants, protected and hidden refs and webhooks, read
//! from the same access document as HTTP's tokens ([`crate::auth::Auth`]).

use std::sync::Arc;

use gitstow_access::Level;
use gitstow_service::Principal;
use gitstow_ssh::{Denied, KeyAccess};

use crate::app::App;

/// [`KeyAccess`] over the HTTP application's access control.
#[derive(Debug, Clone)]
pub struct SshAccess(pub Arc<App>);

impl KeyAccess for SshAccess {
    async fn token_of(&self, fingerprint: &str) -> Option<String> {
        self.0.auth().key_token(fingerprint).await
    }

    async fn authorize(
        &self,
        fingerprint: &str,
        repo: &str,
        write: bool,
    ) -> Result<Principal, Denied> {
        let needed = if write { Level::Write } else { Level::Read };
        self.0.auth().check_key(fingerprint, repo, needed).await
    }

    async fn lfs_authenticate(
        &self,
        fingerprint: &str,
        repo: &str,
        upload: bool,
        local: Option<std::net::SocketAddr>,
    ) -> Result<String, Denied> {
        let principal = self.authorize(fingerprint, repo, upload).await?;
        let token = principal.token.ok_or(Denied::NotFound)?;
        let key = self.0.lfs_key().await.map_err(|e| {
            tracing::error!(error = %e, "reading the LFS transfer key failed");
            Denied::Unavailable
        })?;
        let lfs = &self.0.config.lfs;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let token_id = self
            .0
            .auth()
            .token_id(&token)
            .await
            .ok_or(Denied::Unavailable)?;
        let grant = key.session(upload, repo, &token, &token_id, now + lfs.url_ttl);
        let base = match &lfs.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => {
                let scheme = if lfs.tls { "https" } else { "http" };
                let ip = local.map_or(std::net::IpAddr::from([127, 0, 0, 1]), |a| a.ip());
                let host = match ip {
                    std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                    v4 => v4.to_string(),
                };
                format!("{scheme}://{host}:{}", lfs.http_port)
            }
        };
        Ok(serde_json::json!({
            "href": format!("{base}/{repo}.git/info/lfs"),
            "header": { "Authorization": format!("RemoteAuth {grant}") },
            "expires_in": lfs.url_ttl,
        })
        .to_string())
    }
}
