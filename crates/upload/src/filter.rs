//! Partial-clone object filters (`filter <spec>`, git-rev-list(1) `--filter`):
//! `blob:none`, `blob:limit=<n>[kmg]` and `tree:<depth>`.
//!
//! Filters apply to the objects reached through trees; objects the client
//! names in its wants are always sent (a lazy fetch of one missing blob sends
//! `want <blob>` with the clone's filter and must get the blob).

/// A parsed filter spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// `blob:none`: omit every blob.
    BlobNone,
    /// `blob:limit=<n>`: omit blobs of `n` bytes or more.
    BlobLimit(u64),
    /// `tree:<depth>`: omit trees and blobs whose depth from the root tree is
    /// `depth` or more (the root tree is at depth 0; `tree:0` sends no tree).
    TreeDepth(u64),
}

impl Filter {
    /// Parses a spec; the error is git's message (`invalid filter-spec '<spec>'`).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let invalid = || format!("invalid filter-spec '{spec}'");
        if spec == "blob:none" {
            return Ok(Filter::BlobNone);
        }
        if let Some(n) = spec.strip_prefix("blob:limit=") {
            return parse_size(n).map(Filter::BlobLimit).ok_or_else(invalid);
        }
        if let Some(n) = spec.strip_prefix("tree:") {
            return n.parse().map(Filter::TreeDepth).map_err(|_| invalid());
        }
        Err(invalid())
    }

    /// Whether a blob of `size` bytes, reached through a tree, is sent.
    pub fn keeps_blob(&self, size: u64) -> bool {
        match *self {
            Filter::BlobNone => false,
            Filter::BlobLimit(n) => size < n,
            Filter::TreeDepth(_) => true,
        }
    }

    /// Whether an object at `depth` below the root tree (root = 0) is sent.
    pub fn keeps_depth(&self, depth: u64) -> bool {
        match *self {
            Filter::TreeDepth(d) => depth < d,
            _ => true,
        }
    }
}

/// `<n>[kmg]` as git's `git_parse_ulong` reads it (binary units).
fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(Filter::parse("blob:none"), Ok(Filter::BlobNone));
        assert_eq!(
            Filter::parse("blob:limit=10k"),
            Ok(Filter::BlobLimit(10240))
        );
        assert_eq!(Filter::parse("blob:limit=7"), Ok(Filter::BlobLimit(7)));
        assert_eq!(Filter::parse("tree:0"), Ok(Filter::TreeDepth(0)));
        assert_eq!(
            Filter::parse("sparse:oid=abc"),
            Err("invalid filter-spec 'sparse:oid=abc'".into())
        );
        assert!(Filter::parse("blob:limit=x").is_err());
        assert!(!Filter::BlobLimit(10).keeps_blob(10));
        assert!(Filter::BlobLimit(10).keeps_blob(9));
        assert!(!Filter::TreeDepth(0).keeps_depth(0));
        assert!(Filter::TreeDepth(2).keeps_depth(1));
    }
}
