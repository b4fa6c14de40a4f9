//! [`PackChecksum`]: the trailer of a pack (`gitformat-pack(5)`), the
//! hash of the repository's object format over everything before it, as
//! receive-pack checks it and upload-pack writes it.
//!
//! For SHA-1 it is plain SHA-1 (SHA-NI where the CPU has it), not the
//! collision-detecting one object ids need (sha1dc, about twice the cost
//! over 300 MB of pack): the trailer only guards against corruption in
//! transit. Whoever sends a pack chooses its bytes and can write any
//! trailer, so a collision gains nothing; git ≥ 2.48 checks and writes it
//! the same way (`unsafe_hash_algo`), and the value is the same. For
//! SHA-256 it is SHA-256 (`sha2`, SHA-NI where the CPU has it).

/// A pack's checksum being computed, in one object format.
pub enum PackChecksum {
    /// SHA-1's (20 bytes).
    Sha1(sha1::Sha1),
    /// SHA-256's (32 bytes).
    Sha256(sha2::Sha256),
}

impl PackChecksum {
    /// A checksum of object format `format` over nothing yet.
    pub fn new(format: gix_hash::Kind) -> Self {
        match format {
            gix_hash::Kind::Sha256 => PackChecksum::Sha256(Default::default()),
            _ => PackChecksum::Sha1(Default::default()),
        }
    }

    /// Adds `bytes`.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            PackChecksum::Sha1(h) => sha1::Digest::update(h, bytes),
            PackChecksum::Sha256(h) => sha2::Digest::update(h, bytes),
        }
    }

    /// The checksum: 20 bytes for SHA-1, 32 for SHA-256.
    pub fn finalize(self) -> Vec<u8> {
        match self {
            PackChecksum::Sha1(h) => sha1::Digest::finalize(h).to_vec(),
            PackChecksum::Sha256(h) => sha2::Digest::finalize(h).to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_hashes_as_git_does_at_its_width() {
        for (kind, width) in [(gix_hash::Kind::Sha1, 20), (gix_hash::Kind::Sha256, 32)] {
            let mut c = PackChecksum::new(kind);
            c.update(b"PA");
            c.update(b"CK");
            let mut h = gix_hash::hasher(kind);
            h.update(b"PACK");
            let sum = c.finalize();
            assert_eq!(sum.len(), width);
            assert_eq!(sum, h.try_finalize().unwrap().as_slice());
        }
    }
}
