//! An LFS object id (`docs/spec.md`: `oid sha256:<64 lowercase hex>`).

use std::fmt;

/// The SHA-256 of an LFS object's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oid([u8; 32]);

impl Oid {
    /// Parses the 64 lowercase hex digits the spec writes; `None` for
    /// anything else (upper case, another length, other characters), so an
    /// oid never names a key outside [`crate::keys`]'s layout.
    pub fn parse(s: &str) -> Option<Oid> {
        if s.len() != 64
            || !s
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        let mut raw = [0u8; 32];
        hex::decode_to_slice(s, &mut raw).ok()?;
        Some(Oid(raw))
    }

    /// The 32 bytes of the digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The oid of a SHA-256 digest.
    pub fn from_digest(digest: [u8; 32]) -> Oid {
        Oid(digest)
    }
}

impl fmt::Display for Oid {
    /// The 64 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lowercase_hex_of_64_digits() {
        let good = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
        assert_eq!(Oid::parse(good).unwrap().to_string(), good);
        assert!(Oid::parse(&good.to_uppercase()).is_none());
        assert!(Oid::parse(&good[1..]).is_none());
        assert!(Oid::parse(&format!("{good}0")).is_none());
        assert!(
            Oid::parse("../../../../../../../../../../../../../../../../etc/passwd00000000")
                .is_none()
        );
        assert!(Oid::parse("").is_none());
    }
}
