//! Mirror credentials, sealed: AES-256-GCM (NIST SP 800-38D) with a key
//! the operator gives `serve` and the mirror commands (`--secrets-key-file`
//! or [`KEY_ENV`]), never stored in the bucket. A sealed value is
//! `v1:<key id>:<nonce hex>:<ciphertext and tag hex>`, bound to what it is
//! for (the repository and the field: the associated data), so that a
//! sealed password copied into another mirror's document does not open.
//!
//! The key is 32 random bytes written as 64 hex digits (`openssl rand -hex
//! 32`). Its id (the first 8 hex digits of its SHA-256) is stored beside
//! each sealed value, so that a wrong key is named as such rather than
//! reported as damage.

use std::fmt;
use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use sha2::{Digest, Sha256};

/// The environment variable that holds the key (64 hex digits) when no
/// `--secrets-key-file` is given.
pub const KEY_ENV: &str = "GITSTOW_SECRETS_KEY";

/// What to tell an operator who has not given the key.
pub const KEY_MISSING: &str =
    "credentials are sealed with the secrets key: give --secrets-key-file FILE or set GITSTOW_SECRETS_KEY (64 hex digits: openssl rand -hex 32)";

/// The sealing key. Its `Debug` shows only its id.
#[derive(Clone)]
pub struct SealKey {
    key: [u8; 32],
    id: String,
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey({})", self.id)
    }
}

impl SealKey {
    /// The key written as 64 hex digits (surrounding whitespace ignored).
    ///
    /// # Errors
    /// Not 64 hex digits (the message does not repeat the text).
    pub fn from_hex(text: &str) -> Result<SealKey, String> {
        let bytes = hex::decode(text.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or("the secrets key is not 64 hex digits (openssl rand -hex 32 makes one)")?;
        let id = hex::encode(&Sha256::digest(bytes)[..4]);
        Ok(SealKey { key: bytes, id })
    }

    /// The key from `file` when given, else from [`KEY_ENV`]; `None` when
    /// neither is set.
    ///
    /// # Errors
    /// The file cannot be read, or either holds no key.
    pub fn load(file: Option<&Path>) -> Result<Option<SealKey>, String> {
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the secrets key file {}: {e}", path.display()))?;
            return SealKey::from_hex(&text).map(Some);
        }
        match std::env::var(KEY_ENV) {
            Ok(text) if !text.trim().is_empty() => SealKey::from_hex(&text)
                .map(Some)
                .map_err(|e| format!("{KEY_ENV}: {e}")),
            _ => Ok(None),
        }
    }

    /// The key's id: the first 8 hex digits of its SHA-256.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Seals `plain` for `context` (what it is: `mirror:<repo>:<url>:password`).
    pub fn seal(&self, context: &str, plain: &[u8]) -> String {
        let cipher = Aes256Gcm::new(&self.key.into());
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).expect("the system's random source works");
        let sealed = cipher
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: plain,
                    aad: context.as_bytes(),
                },
            )
            .expect("AES-GCM seals a short value");
        format!(
            "v1:{}:{}:{}",
            self.id,
            hex::encode(nonce),
            hex::encode(sealed)
        )
    }

    /// Opens what [`SealKey::seal`] made for `context`.
    ///
    /// # Errors
    /// Sealed with another key (said so, with both ids), for another
    /// context, or damaged.
    pub fn open(&self, context: &str, sealed: &str) -> Result<Vec<u8>, String> {
        let mut parts = sealed.split(':');
        let (Some("v1"), Some(id), Some(nonce), Some(body), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err("the sealed credential is damaged".into());
        };
        if id != self.id {
            return Err(format!(
                "the credential was sealed with the secrets key {id}, and this one is {}",
                self.id
            ));
        }
        let nonce: [u8; 12] = hex::decode(nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or("the sealed credential is damaged")?;
        let body = hex::decode(body).map_err(|_| "the sealed credential is damaged")?;
        Aes256Gcm::new(&self.key.into())
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: &body,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| {
                "the sealed credential does not open: damaged, or sealed for another mirror".into()
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_opens_only_with_its_key_and_context() {
        let key = SealKey::from_hex(&"11".repeat(32)).unwrap();
        let other = SealKey::from_hex(&"22".repeat(32)).unwrap();
        let sealed = key.seal("mirror:org/a:password", b"hunter2");
        assert!(!sealed.contains("hunter2"));
        assert_ne!(
            sealed,
            key.seal("mirror:org/a:password", b"hunter2"),
            "a fresh nonce each time"
        );
        assert_eq!(
            key.open("mirror:org/a:password", &sealed).unwrap(),
            b"hunter2"
        );
        assert!(key.open("mirror:org/b:password", &sealed).is_err());
        let e = other.open("mirror:org/a:password", &sealed).unwrap_err();
        assert!(e.contains(key.id()) && e.contains(other.id()), "{e}");
        let mut damaged = sealed.clone();
        damaged.pop();
        damaged.push(if sealed.ends_with('0') { '1' } else { '0' });
        assert!(key.open("mirror:org/a:password", &damaged).is_err());
        for bad in ["", "xyz", &"1".repeat(63), &"1".repeat(66)] {
            let e = SealKey::from_hex(bad).unwrap_err();
            assert!(!bad.is_empty() && !e.contains(bad) || bad.is_empty(), "{e}");
        }
        assert_eq!(format!("{key:?}"), format!("SealKey({})", key.id()));
    }
}
