//! An upstream's webhook makes a pull mirror due at once (plan 0017 step
//! 5), as GitHub, Gitea and GitLab send it after each push:
//!
//! - GitHub and Gitea sign the request body: `X-Hub-Signature-256:
//!   sha256=<hex HMAC-SHA256 of the body under the secret>`;
//! - GitLab sends the secret itself: `X-Gitlab-Token: <secret>`.
//!
//! The secret is the mirror's webhook secret, stored sealed
//! ([`crate::secret`]) for `mirror:<repo>:webhook`. Both checks are in
//! constant time. A check is made before the body is read ([`begin`]) and
//! fed the body as it arrives ([`Check::update`]), so that no body is held
//! whole. An admin token is the third way in; the transport checks it.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use gitstow_store::ObjectStore;

use crate::secret::SealKey;
use crate::settings::{self, Mirror, SettingsError};

/// The context a webhook secret of `repo`'s mirror is sealed for.
pub fn context(repo: &str) -> String {
    format!("mirror:{repo}:webhook")
}

/// What the request brings to prove it comes from the upstream.
#[derive(Debug, Clone)]
pub enum Proof {
    /// `X-Hub-Signature-256` (GitHub, Gitea): `sha256=<hex>`.
    HubSignature(String),
    /// `X-Gitlab-Token` (GitLab): the secret.
    GitlabToken(String),
}

/// Why a webhook is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TriggerError {
    /// The repository has no pull mirror.
    #[error("no pull mirror here")]
    NoMirror,
    /// The mirror has no webhook secret: only an admin token may trigger it.
    #[error("this mirror has no webhook secret (gitstow mirror add --webhook-secret-file): use an admin token")]
    NoSecret,
    /// The server was not given the key that opens the secret.
    #[error("the server cannot check webhooks of this mirror: it was not given the secrets key")]
    KeyMissing,
    /// The secret does not open (another key, damage).
    #[error("the server cannot open this mirror's webhook secret")]
    Unopenable,
    /// The signature or token does not match.
    #[error("the webhook's signature or token does not match this mirror's secret")]
    Mismatch,
}

/// A check in progress: fed the body, then finished.
pub struct Check {
    mac: Option<Hmac<Sha256>>,
    expected: Vec<u8>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Check(<hidden>)")
    }
}

/// Starts checking `proof` for `repo`'s `mirror`, whose webhook secret
/// `key` opens.
///
/// # Errors
/// [`TriggerError`] (a malformed signature is a [`TriggerError::Mismatch`]).
pub fn begin(
    mirror: &Mirror,
    repo: &str,
    key: Option<&SealKey>,
    proof: &Proof,
) -> Result<Check, TriggerError> {
    let sealed = mirror
        .webhook_secret
        .as_ref()
        .ok_or(TriggerError::NoSecret)?;
    let key = key.ok_or(TriggerError::KeyMissing)?;
    let secret = key
        .open(&context(repo), sealed)
        .map_err(|_| TriggerError::Unopenable)?;
    match proof {
        Proof::HubSignature(header) => {
            let expected = header
                .strip_prefix("sha256=")
                .and_then(|h| hex::decode(h).ok())
                .ok_or(TriggerError::Mismatch)?;
            let mac = Hmac::<Sha256>::new_from_slice(&secret).expect("HMAC takes any key length");
            Ok(Check {
                mac: Some(mac),
                expected,
            })
        }
        Proof::GitlabToken(token) => {
            if bool::from(token.as_bytes().ct_eq(&secret)) {
                Ok(Check {
                    mac: None,
                    expected: Vec::new(),
                })
            } else {
                Err(TriggerError::Mismatch)
            }
        }
    }
}

impl Check {
    /// Whether the check needs the request body.
    pub fn needs_body(&self) -> bool {
        self.mac.is_some()
    }

    /// Feeds the next bytes of the body.
    pub fn update(&mut self, bytes: &[u8]) {
        if let Some(mac) = &mut self.mac {
            mac.update(bytes);
        }
    }

    /// Ends the check (in constant time).
    ///
    /// # Errors
    /// [`TriggerError::Mismatch`].
    pub fn finish(self) -> Result<(), TriggerError> {
        match self.mac {
            None => Ok(()),
            Some(mac) => mac
                .verify_slice(&self.expected)
                .map_err(|_| TriggerError::Mismatch),
        }
    }
}

/// Makes `repo`'s mirror due at once (the next read of the due list by
/// any instance pulls it; a pull running now runs once more after).
///
/// # Errors
/// [`SettingsError`]; [`SettingsError::Refused`] when there is no mirror.
pub fn make_due(store: &dyn ObjectStore, repo: &str) -> Result<(), SettingsError> {
    settings::update(store, repo, |doc| match doc.pull.as_mut() {
        Some(p) if p.due_now => Ok(None),
        Some(p) => {
            p.due_now = true;
            Ok(Some(()))
        }
        None => Err(TriggerError::NoMirror.to_string()),
    })?
    .map_err(SettingsError::Refused)?;
    crate::due::now(store, repo, settings::Direction::Pull)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_and_tokens_are_checked_against_the_sealed_secret() {
        let key = SealKey::from_hex(&"11".repeat(32)).unwrap();
        let mut m = Mirror::new("https://h/x.git", vec![], false, 600).unwrap();
        let hub = |sig: &str| Proof::HubSignature(sig.to_owned());
        assert_eq!(
            begin(&m, "org/x", Some(&key), &hub("sha256=00")).unwrap_err(),
            TriggerError::NoSecret
        );
        m.webhook_secret = Some(key.seal(&context("org/x"), b"s3cret"));
        assert_eq!(
            begin(&m, "org/x", None, &hub("sha256=00")).unwrap_err(),
            TriggerError::KeyMissing
        );
        assert_eq!(
            begin(&m, "org/y", Some(&key), &hub("sha256=00")).unwrap_err(),
            TriggerError::Unopenable,
            "sealed for another mirror"
        );
        let body = br#"{"ref":"refs/heads/main"}"#;
        let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(body);
        let good = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        let mut c = begin(&m, "org/x", Some(&key), &hub(&good)).unwrap();
        assert!(c.needs_body());
        c.update(&body[..5]);
        c.update(&body[5..]);
        c.finish().unwrap();
        let mut c = begin(&m, "org/x", Some(&key), &hub(&good)).unwrap();
        c.update(b"another body");
        assert_eq!(c.finish().unwrap_err(), TriggerError::Mismatch);
        for bad in ["sha1=00", "sha256=zz", ""] {
            assert_eq!(
                begin(&m, "org/x", Some(&key), &hub(bad)).unwrap_err(),
                TriggerError::Mismatch
            );
        }
        let gitlab = |t: &str| Proof::GitlabToken(t.to_owned());
        let c = begin(&m, "org/x", Some(&key), &gitlab("s3cret")).unwrap();
        assert!(!c.needs_body());
        c.finish().unwrap();
        assert_eq!(
            begin(&m, "org/x", Some(&key), &gitlab("s3cre")).unwrap_err(),
            TriggerError::Mismatch
        );
    }

    #[test]
    fn a_trigger_makes_the_mirror_due_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        assert!(make_due(&store, "org/x").is_err());
        let mut m = Mirror::new("https://h/x.git", vec![], false, 600).unwrap();
        m.last_attempt = Some(1000);
        settings::add(&store, "org/x", settings::Direction::Pull, &m, false).unwrap();
        crate::due::set(&store, "org/x", Some(1600)).unwrap();
        make_due(&store, "org/x").unwrap();
        let p = settings::load(&store, "org/x")
            .unwrap()
            .unwrap()
            .0
            .pull
            .unwrap();
        assert_eq!(p.next_run(), Some(0));
        assert_eq!(crate::due::load(&store).unwrap().repos["org/x"], 0);
    }
}
