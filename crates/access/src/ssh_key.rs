//! SSH public keys attached to access tokens (plan 0011): a verified key
//! presents its token, so it has exactly that token's grants, protected-ref
//! rights and name in the logs, and stops working when the token is
//! revoked or expires.
//!
//! A key is read from an OpenSSH public key line (`ALGORITHM BASE64
//! [COMMENT]`, what `ssh-keygen` writes to `KEY.pub`) and identified by
//! OpenSSH's fingerprint: `SHA256:` and the unpadded base64 of the SHA-256
//! of the key blob, as `ssh-keygen -lf KEY.pub` prints it.

use ssh_key::public::KeyData;
use ssh_key::{HashAlg, PublicKey};

use crate::{AccessDoc, Error, Result};

/// Fewest bits of an RSA modulus accepted (OpenSSH's `RequiredRSASize`).
pub const MIN_RSA_BITS: u32 = 2048;

/// Bytes of a key line accepted (an RSA key of 16,384 bits is ~2.8 KB).
const MAX_KEY_LINE: usize = 16 * 1024;

/// Bytes of a key's title.
const MAX_TITLE: usize = 256;

/// A key attached to a token, as the access document keeps it (JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredKey {
    /// OpenSSH's fingerprint, `SHA256:…` (unique in the document).
    pub fingerprint: String,
    /// The token whose rights the key has.
    pub token: String,
    /// The key's comment, or what the operator named it.
    pub title: String,
    /// The key as OpenSSH writes it, without the comment: the algorithm
    /// and the base64 key blob.
    pub public: String,
    /// When it was added (Unix seconds).
    pub added: u64,
}

/// A public key read from an OpenSSH public key line and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedKey {
    /// OpenSSH's fingerprint, `SHA256:…`.
    pub fingerprint: String,
    /// The algorithm's name (`ssh-ed25519`, `ecdsa-sha2-nistp256`,
    /// `ssh-rsa`, …).
    pub algorithm: String,
    /// Algorithm and base64 blob, without the comment.
    pub public: String,
    /// The comment of the line (empty when it has none).
    pub comment: String,
}

/// The fingerprint of a key as OpenSSH prints it (`SHA256:…`).
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Reads and checks one OpenSSH public key line.
///
/// # Errors
/// [`Error::Invalid`] when the text is not one public key line, or the
/// key's type is not accepted: ed25519, ECDSA (nistp256/384/521) and RSA
/// of at least [`MIN_RSA_BITS`] bits are; DSA (removed from OpenSSH in
/// 9.8), RSA under 2,048 bits, certificates and security-key
/// (`sk-…@openssh.com`) types are not.
pub fn parse_public_key(text: &str) -> Result<ParsedKey> {
    let line = text.trim();
    if line.len() > MAX_KEY_LINE {
        return Err(Error::Invalid(format!(
            "a public key line is at most {MAX_KEY_LINE} bytes"
        )));
    }
    if line.starts_with("-----BEGIN") {
        return Err(Error::Invalid(
            "that is a private key: give the public one (KEY.pub)".into(),
        ));
    }
    if line.is_empty() || line.lines().count() != 1 {
        return Err(Error::Invalid(
            "want one OpenSSH public key line (`ssh-ed25519 AAAA… comment`, as in KEY.pub)".into(),
        ));
    }
    let key = PublicKey::from_openssh(line).map_err(|e| {
        Error::Invalid(format!(
            "not an OpenSSH public key line ({e}): want `ssh-ed25519 AAAA… comment`, as in KEY.pub"
        ))
    })?;
    match key.key_data() {
        KeyData::Ed25519(_) | KeyData::Ecdsa(_) => {}
        KeyData::Rsa(rsa) => {
            if rsa.key_size() < MIN_RSA_BITS {
                return Err(Error::Invalid(format!(
                    "an RSA key of {} bits is too weak: at least {MIN_RSA_BITS} bits",
                    rsa.key_size()
                )));
            }
        }
        KeyData::Dsa(_) => {
            return Err(Error::Invalid(
                "DSA keys are not accepted (OpenSSH removed them): use ed25519 (`ssh-keygen -t ed25519`)"
                    .into(),
            ))
        }
        other => {
            return Err(Error::Invalid(format!(
                "{} keys are not accepted: use ed25519, ECDSA or RSA",
                other.algorithm()
            )))
        }
    }
    let algorithm = key.algorithm().to_string();
    let comment = key.comment().to_string();
    let public = PublicKey::from(key.key_data().clone())
        .to_openssh()
        .map_err(|e| Error::Invalid(format!("the key does not encode: {e}")))?
        .trim()
        .to_owned();
    Ok(ParsedKey {
        fingerprint: fingerprint(&key),
        algorithm,
        public,
        comment,
    })
}

impl AccessDoc {
    /// Attaches `key` to the token named `token`, titled `title` (the
    /// key's comment when `None`); returns what was stored.
    ///
    /// # Errors
    /// [`Error::Invalid`] when there is no such token, the key belongs to
    /// a token already (its name is given), or the title is not one line
    /// of at most 256 bytes.
    pub fn add_key(
        &mut self,
        token: &str,
        key: &ParsedKey,
        title: Option<&str>,
        added: u64,
    ) -> Result<&StoredKey> {
        if !self.has_token(token) {
            return Err(Error::Invalid(format!("no token named {token:?}")));
        }
        if let Some(k) = self.key(&key.fingerprint) {
            return Err(Error::Invalid(format!(
                "key {} belongs to token {:?} already (remove it first)",
                key.fingerprint, k.token
            )));
        }
        let title = title.unwrap_or(&key.comment).trim();
        if title.len() > MAX_TITLE || title.contains(char::is_control) {
            return Err(Error::Invalid(format!(
                "a key's title is one line of at most {MAX_TITLE} bytes"
            )));
        }
        self.ssh_keys.push(StoredKey {
            fingerprint: key.fingerprint.clone(),
            token: token.to_owned(),
            title: title.to_owned(),
            public: key.public.clone(),
            added,
        });
        self.version = 1;
        Ok(self.ssh_keys.last().expect("just pushed"))
    }

    /// Removes the key of `fingerprint` (`SHA256:…`); returns it, or
    /// `None` when no key has it.
    pub fn remove_key(&mut self, fingerprint: &str) -> Option<StoredKey> {
        let at = self
            .ssh_keys
            .iter()
            .position(|k| k.fingerprint == fingerprint)?;
        Some(self.ssh_keys.remove(at))
    }

    /// The key of `fingerprint`, if one is attached to a token.
    pub fn key(&self, fingerprint: &str) -> Option<&StoredKey> {
        self.ssh_keys.iter().find(|k| k.fingerprint == fingerprint)
    }

    /// The token the key of `fingerprint` is attached to, when it exists
    /// and has not expired at `now` (seconds since the epoch): who an SSH
    /// client that proved it holds the key is.
    pub fn key_token(&self, fingerprint: &str, now: u64) -> Option<&crate::StoredToken> {
        let key = self.key(fingerprint)?;
        self.tokens
            .iter()
            .find(|t| t.name == key.token)
            .filter(|t| t.expires.is_none_or(|e| e > now))
    }

    /// The keys attached to `token` (every key for `None`), in the order
    /// they were added.
    pub fn keys<'a>(&'a self, token: Option<&'a str>) -> impl Iterator<Item = &'a StoredKey> + 'a {
        self.ssh_keys
            .iter()
            .filter(move |k| token.is_none_or(|t| k.token == t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Grant;

    // Made by `ssh-keygen -t … -C …` (public halves only); fingerprints as
    // `ssh-keygen -lf` printed them.
    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOTd0t1GBU13jMbcs6THShqscfsOr0YCf0DMfRUMO6Si dev@laptop";
    const ED25519_FP: &str = "SHA256:a/Xy8lF8sImc8jLLiOB6TKRN9oTUQUqjuFr3RUxCO3Q";
    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBOjeGaGr81SYjCAxc5+nPvPTQaYwMYUa5KLc9n8MYOoInGOOe+fl5MsVNQy7vdAGKTiQQ/J/IEGZLO6p7Tooe/E= e";
    const ECDSA_FP: &str = "SHA256:zh2zNINdBxYjiiWk3vd4acuoSzqxE0zJ2UjbgiI0cI4";
    const RSA_2048: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCq1Gs3p+6+iyKryaYR8isDsV8s88f9zx9pSxMB+LahZxMCZ2sA/zxJ+MD9UBlBx88csAkcLxqiMZjR67DG/D49cRo0ZMazwb5CB5qBMGak9h4W6SJ3Fken+snZMsu6RRMbOJQXmLnEUawKNP8SsEOaRvrI9f3ZHD2vmra4R0Figk/Bk0CsAKQZHTzlczwj5g8HbjWfTWKzx5LiEI4WDaGhON/OdtFm+mQCBxnu4XXPMDKgznnPXLFCuujGe7C3AQGm5j+koewMKTQZpYhhxKhA4DmTHSKtUElV4VJvbF2oCQmHDksf+UDbzGK4AmUNyxAk3Pl4SIHfH4vCp1KGTCdv r";
    const RSA_2048_FP: &str = "SHA256:PwblFQIua1bqwo4CanVvg28/okQErxddoMRwn+jNbjc";
    const RSA_1024: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDMB8BKnSrxHrdWw7gj7pzZTkJoBjdJT7X0FLhwee2I7aRNkCUqEbe5YNt9GLjyaGLf4bW5S1a4zGOG+vk05vZhI7Iv+/6jJLbxRQTkUB+QSEg8e2Gf6t/n2helNmRTiMBN+QsgRMVajrTa7VSuvxg7cnjLedGBZ7nLsisl45mJVw== weak";
    const DSA: &str = "ssh-dss AAAAB3NzaC1kc3MAAACBAIoWatM36GT8Ww0458pjby1dfmPgve97F0ZzNzsHk3Q67hmKdQEalBjODNuGPDYe/VBo7QP7YfKFcEb+57D861xV3lhhQ22pnlryBl4ltlaHAnD9idwIutOmA6y7zQqHYxym9mzkH6+OV9hhxh3xEM2AdLzhpvkNL41cFbdzENXnAAAAFQC4giD/FqxXhq9O0DrSSqABkMw8IwAAAIBtWSUelPTAgB1OWBXzJP0gctyaUKTohH1KTlj6+okTlRUNS22ZJ1uglyVEOfJAURbnQOA9/30LcGa4H34luytiFx0BgV64yl4//5oBI8jIUPf8+9lVlhyMUe6JnvcDKR2kdpgwFaP+I7k8lM/fkylholybFcRamlHYMLgTw2VlaAAAAIAgruXxSORWgaWMO5oS79+zBPKSIJeqQBXLe8qG6RLjQClVMZwKlyEnEh0xwafXGl92/bHx5M+OtAHqbvzqJuqH0dp/eXYQbj3QGDZ6e+QnD6UpzqWJyh1gaIt1r/i+ID9slCauNmTbSeulkrLmRa6Msgl0ShLzpvGkcVyJZoZbBw== root@vm";

    #[test]
    fn an_ed25519_key_reads_with_openssh_fingerprint() {
        let k = parse_public_key(&format!("  {ED25519}\n")).unwrap();
        assert_eq!(k.algorithm, "ssh-ed25519");
        assert_eq!(k.comment, "dev@laptop");
        assert_eq!(k.fingerprint, ED25519_FP);
        assert_eq!(k.public, ED25519.trim_end_matches(" dev@laptop"));
        for (line, fp, alg) in [
            (ECDSA, ECDSA_FP, "ecdsa-sha2-nistp256"),
            (RSA_2048, RSA_2048_FP, "ssh-rsa"),
        ] {
            let k = parse_public_key(line).unwrap();
            assert_eq!((k.fingerprint.as_str(), k.algorithm.as_str()), (fp, alg));
        }
    }

    #[test]
    fn what_is_not_one_accepted_public_key_is_refused() {
        for (text, says) in [
            ("", "one OpenSSH public key line"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n", "private key"),
            ("ssh-ed25519 AAAA", "not an OpenSSH public key"),
            (
                &ED25519.replacen("ssh-ed25519", "ssh-rsa", 1),
                "not an OpenSSH public key",
            ),
            (RSA_1024, "1024 bits is too weak"),
            (DSA, "DSA keys are not accepted"),
            (
                &format!("{ED25519}\n{ED25519}"),
                "one OpenSSH public key line",
            ),
        ] {
            let e = parse_public_key(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn keys_belong_to_one_existing_token_and_go_with_it() {
        let mut doc = AccessDoc::default();
        let k = parse_public_key(ED25519).unwrap();
        assert!(doc.add_key("ci", &k, None, 1).is_err(), "no such token");
        doc.add_token("ci", vec![Grant::parse("org/*:write").unwrap()], 0, None)
            .unwrap();
        doc.add_token("other", vec![Grant::parse("*:read").unwrap()], 0, None)
            .unwrap();
        assert_eq!(doc.add_key("ci", &k, None, 1).unwrap().title, "dev@laptop");
        let e = doc
            .add_key("other", &k, Some("x"), 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("belongs to token \"ci\""), "{e}");
        assert_eq!(doc.key(ED25519_FP).unwrap().token, "ci");
        assert_eq!(doc.keys(Some("other")).count(), 0);
        // revoking the token takes its keys: a later token of that name
        // does not inherit them
        assert!(doc.revoke("ci"));
        assert!(doc.key(ED25519_FP).is_none());
        doc.add_token("ci", vec![Grant::parse("*:admin").unwrap()], 0, None)
            .unwrap();
        assert!(doc.key(ED25519_FP).is_none());
        doc.add_key("ci", &k, Some("laptop"), 3).unwrap();
        assert_eq!(doc.remove_key(ED25519_FP).unwrap().title, "laptop");
        assert!(doc.remove_key(ED25519_FP).is_none());
    }
}
