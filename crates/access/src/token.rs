//! Token secrets: made from 32 random bytes, kept only as their SHA-256.

use sha2::{Digest, Sha256};

/// What every secret starts with (so that secret scanners can find leaked
/// ones, as GitHub's `ghp_`).
pub const SECRET_PREFIX: &str = "gitstow_";

/// A new secret: [`SECRET_PREFIX`] and 64 hex digits of the operating
/// system's randomness (256 bits).
///
/// # Errors
/// When the system has no randomness to give ([`getrandom`]).
pub fn new_secret() -> crate::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| crate::Error::Invalid(format!("no randomness from the system: {e}")))?;
    Ok(format!("{SECRET_PREFIX}{}", hex::encode(bytes)))
}

/// The stored form of a secret: `sha256:<64 hex digits>` of its bytes. A
/// secret has 256 random bits, so a plain hash is enough (no salt or slow
/// hash: nothing to guess).
pub fn hash_secret(secret: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(secret.as_bytes())))
}

/// Whether two stored hashes are equal, in time that does not depend on
/// where they differ.
pub(crate) fn same_hash(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_new_and_hashed() {
        let a = new_secret().unwrap();
        let b = new_secret().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 64);
        let h = hash_secret(&a);
        assert!(h.starts_with("sha256:") && !h.contains(&a[SECRET_PREFIX.len()..]));
        assert!(same_hash(&h, &hash_secret(&a)));
        assert!(!same_hash(&h, &hash_secret(&b)));
    }
}
