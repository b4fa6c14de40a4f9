//! The server's SSH host keys (plan 0011): created once per store and kept
//! in it, so that every instance serving a bucket presents the same keys
//! and a client's `known_hosts` entry holds for all of them; or read from
//! files the operator gives (`serve --ssh-host-key FILE`).
//!
//! A key is created with an if-absent write (S3 `If-None-Match: *`): of two
//! instances starting at once, one writes and the other reads what it
//! wrote. objgit writes its host key without a condition, so two instances
//! started together can present different keys. The private keys are kept
//! in OpenSSH's format, unencrypted: whoever can read the bucket can read
//! them (`docs/access.md` says so).

use std::path::Path;
use std::sync::Arc;

use gitstow_store::{ObjectStore, PutCondition};
use russh::keys::ssh_key::LineEnding;
use russh::keys::{Algorithm, HashAlg, PrivateKey};

/// Where the store keeps the host keys (under the server's store-wide
/// prefix, which no repository name can take).
pub const HOST_KEY_PREFIX: &str = ".gitstow/ssh/";

/// The kinds of host key a store gets: ed25519, which every OpenSSH since
/// 6.5 prefers, and RSA (4096 bits, ssh-key's size; signed with
/// rsa-sha2-256/512) for
/// clients without ed25519.
const KINDS: [(&str, Kind); 2] = [("host_ed25519", Kind::Ed25519), ("host_rsa", Kind::Rsa)];

#[derive(Debug, Clone, Copy)]
enum Kind {
    Ed25519,
    Rsa,
}

/// Errors of the host keys.
#[derive(Debug, thiserror::Error)]
pub enum HostKeyError {
    /// The store failed.
    #[error("host keys in the store: {0}")]
    Store(#[from] gitstow_store::Error),
    /// A key (in the store or a file) does not parse, or could not be made.
    #[error("host key {what}: {why}")]
    Key {
        /// The store key or file.
        what: String,
        /// Why.
        why: String,
    },
}

/// The host keys a server presents, in the order offered.
#[derive(Clone)]
pub struct HostKeys {
    keys: Vec<PrivateKey>,
}

impl std::fmt::Debug for HostKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.fingerprints()).finish()
    }
}

impl HostKeys {
    /// The store's host keys, each created (and written if absent) when the
    /// store has none yet: an ed25519 key and an RSA key of 4096 bits, at
    /// `.gitstow/ssh/host_ed25519` and `.gitstow/ssh/host_rsa`.
    ///
    /// # Errors
    /// [`HostKeyError::Store`] when the store fails; [`HostKeyError::Key`]
    /// when a stored key does not parse (it is never replaced: clients
    /// pinned it).
    pub fn from_store(store: &Arc<dyn ObjectStore>) -> Result<HostKeys, HostKeyError> {
        let mut keys = Vec::with_capacity(KINDS.len());
        for (name, kind) in KINDS {
            keys.push(load_or_create(
                store.as_ref(),
                &format!("{HOST_KEY_PREFIX}{name}"),
                kind,
            )?);
        }
        Ok(HostKeys { keys })
    }

    /// Host keys read from OpenSSH private key files (unencrypted, as
    /// `ssh-keygen -N ''` writes them, e.g. `/etc/ssh/ssh_host_ed25519_key`).
    ///
    /// # Errors
    /// [`HostKeyError::Key`] when a file cannot be read or parsed, is
    /// encrypted, or holds a DSA key.
    pub fn from_files(paths: &[impl AsRef<Path>]) -> Result<HostKeys, HostKeyError> {
        let mut keys = Vec::with_capacity(paths.len());
        for p in paths {
            let p = p.as_ref();
            let what = p.display().to_string();
            let text = std::fs::read(p).map_err(|e| HostKeyError::Key {
                what: what.clone(),
                why: e.to_string(),
            })?;
            keys.push(parse(&text, &what)?);
        }
        Ok(HostKeys { keys })
    }

    /// The keys, in the order offered.
    pub fn keys(&self) -> &[PrivateKey] {
        &self.keys
    }

    /// `ALGORITHM SHA256:…` for each key, as `ssh-keygen -lf` and
    /// `ssh-keyscan | ssh-keygen -lf -` print them.
    pub fn fingerprints(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| {
                format!(
                    "{} {}",
                    k.algorithm(),
                    k.public_key().fingerprint(HashAlg::Sha256)
                )
            })
            .collect()
    }
}

fn parse(text: &[u8], what: &str) -> Result<PrivateKey, HostKeyError> {
    let bad = |why: String| HostKeyError::Key {
        what: what.to_owned(),
        why,
    };
    let key = PrivateKey::from_openssh(text)
        .map_err(|e| bad(format!("not an OpenSSH private key ({e})")))?;
    if key.is_encrypted() {
        return Err(bad(
            "encrypted: give an unencrypted key (ssh-keygen -N '')".into()
        ));
    }
    if key.algorithm() == Algorithm::Dsa {
        return Err(bad(
            "DSA host keys are not used: give ed25519, ECDSA or RSA".into(),
        ));
    }
    Ok(key)
}

/// The key at `key` in the store, or a new one written there if absent
/// (another instance's, when it wrote first).
fn load_or_create(
    store: &dyn ObjectStore,
    key: &str,
    kind: Kind,
) -> Result<PrivateKey, HostKeyError> {
    if let Some((bytes, _)) = store.get(key)? {
        return parse(&bytes, key);
    }
    let algorithm = match kind {
        Kind::Ed25519 => Algorithm::Ed25519,
        Kind::Rsa => Algorithm::Rsa { hash: None },
    };
    let bad = |why: String| HostKeyError::Key {
        what: key.to_owned(),
        why,
    };
    let mut made = PrivateKey::random(&mut rand::rng(), algorithm)
        .map_err(|e| bad(format!("cannot make one: {e}")))?;
    made.set_comment("gitstow host key");
    let text = made
        .to_openssh(LineEnding::LF)
        .map_err(|e| bad(format!("cannot encode it: {e}")))?;
    match store.put(key, text.as_bytes(), PutCondition::IfAbsent) {
        Ok(_) => {
            tracing::info!(key, fingerprint = %made.public_key().fingerprint(HashAlg::Sha256), "SSH host key created in the store");
            Ok(made)
        }
        Err(gitstow_store::Error::PreconditionFailed { .. }) => {
            // another instance wrote first: its key is the store's
            let (bytes, _) = store
                .get(key)?
                .ok_or_else(|| bad("written by another instance, then gone".into()))?;
            parse(&bytes, key)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> Arc<dyn ObjectStore> {
        gitstow_store::open(&format!("file://{}", dir.display())).unwrap()
    }

    #[test]
    fn instances_started_together_present_the_same_keys() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let made: Vec<Vec<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let s = s.clone();
                    scope.spawn(move || HostKeys::from_store(&s).unwrap().fingerprints())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(made.iter().all(|f| f == &made[0]), "{made:?}");
        assert_eq!(made[0].len(), 2);
        assert!(made[0][0].starts_with("ssh-ed25519 SHA256:"), "{made:?}");
        assert!(made[0][1].starts_with("ssh-rsa SHA256:"), "{made:?}");
        // a later start reads them back
        assert_eq!(HostKeys::from_store(&s).unwrap().fingerprints(), made[0]);
    }

    #[test]
    fn a_damaged_stored_key_is_an_error_not_a_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        s.put(
            ".gitstow/ssh/host_ed25519",
            b"not a key",
            PutCondition::None,
        )
        .unwrap();
        let e = HostKeys::from_store(&s).unwrap_err().to_string();
        assert!(e.contains("not an OpenSSH private key"), "{e}");
        let (kept, _) = s.get(".gitstow/ssh/host_ed25519").unwrap().unwrap();
        assert_eq!(kept, b"not a key");
    }

    #[test]
    fn key_files_are_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519).unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, key.to_openssh(LineEnding::LF).unwrap().as_bytes()).unwrap();
        let keys = HostKeys::from_files(&[&good]).unwrap();
        assert_eq!(
            keys.fingerprints(),
            vec![format!(
                "ssh-ed25519 {}",
                key.public_key().fingerprint(HashAlg::Sha256)
            )]
        );
        // the fingerprint OpenSSH prints for the same key (ssh-keygen is
        // OpenSSH's client, installed by .ci/run)
        let public = dir.path().join("good.pub");
        std::fs::write(&public, key.public_key().to_openssh().unwrap()).unwrap();
        let out = std::process::Command::new("ssh-keygen")
            .arg("-lf")
            .arg(&public)
            .output()
            .expect("ssh-keygen (OpenSSH's client) is needed");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            printed.split_whitespace().nth(1),
            keys.fingerprints()[0].split_whitespace().nth(1),
            "{printed}"
        );
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "x").unwrap();
        assert!(HostKeys::from_files(&[&bad]).is_err());
        assert!(HostKeys::from_files(&[dir.path().join("missing")]).is_err());
    }
}
