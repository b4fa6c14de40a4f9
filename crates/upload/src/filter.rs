//! Partial-clone object filters (`filter <spec>`, git-rev-list(1) `--filter`,
//! as git's `list-objects-filter.c` applies them): `blob:none`,
//! `blob:limit=<n>[kmg]`, `tree:<depth>`, `object:type=<type>` and
//! `combine:<spec>+<spec>…` (an object is sent when every sub-filter keeps
//! it). `sparse:oid=` is refused as a git server refuses a filter it does
//! not allow (`filter 'sparse:oid' not supported`).
//!
//! Filters apply to the objects reached by the walk; objects the client
//! names in its wants (and the tags and commits they peel to) are always
//! sent: a lazy fetch of one missing blob sends `want <blob>` with the
//! clone's filter and must get the blob.

use gix_object::Kind;

/// One filter, as given or as one part of a `combine:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `blob:none`: omit every blob.
    BlobNone,
    /// `blob:limit=<n>`: omit blobs of `n` bytes or more.
    BlobLimit(u64),
    /// `tree:<depth>`: omit trees and blobs whose depth from the root tree is
    /// `depth` or more (the root tree is at depth 0; `tree:0` sends no tree).
    TreeDepth(u64),
    /// `object:type=<type>`: omit every object of another type.
    ObjectType(Kind),
}

/// A parsed filter spec: the parts every sent object must pass (one, or
/// those of a `combine:`, flattened).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    parts: Vec<Part>,
}

/// Why a filter spec is refused; the `Display` text is git's message, sent
/// to the client as an `ERR` pkt-line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// A spec git does not know or cannot parse.
    #[error("{0}")]
    Invalid(String),
    /// A filter git knows that this server does not allow (`sparse:oid`,
    /// which reads a sparse-checkout spec from a blob).
    #[error("filter '{0}' not supported")]
    NotSupported(&'static str),
}

/// `combine:` sub-specs nested deeper than this are refused (git does not
/// limit it; nothing real nests at all).
const MAX_NESTING: usize = 8;

/// Characters a `combine:` sub-spec must percent-encode (git's
/// `RESERVED_NON_WS`, plus whitespace).
const RESERVED: &[u8] = b"~`!@#$^&*()[]{}\\;'\",<>?";

impl Filter {
    /// Parses a spec; the error is git's message.
    pub fn parse(spec: &str) -> Result<Self, FilterError> {
        let mut parts = Vec::new();
        parse_into(spec, 0, &mut parts)?;
        Ok(Filter { parts })
    }

    /// The parts every sent object must pass.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Whether a commit the walk reached (not one a want names) is sent.
    pub fn keeps_commit(&self) -> bool {
        self.parts.iter().all(|p| match *p {
            Part::ObjectType(k) => k == Kind::Commit,
            _ => true,
        })
    }

    /// Whether a tree at `depth` below the root tree (root = 0) is sent.
    pub fn keeps_tree(&self, depth: u64) -> bool {
        self.parts.iter().all(|p| match *p {
            Part::TreeDepth(d) => depth < d,
            Part::ObjectType(k) => k == Kind::Tree,
            Part::BlobNone | Part::BlobLimit(_) => true,
        })
    }

    /// Whether a blob of `size` bytes at `depth` below the root tree (a
    /// root tree's entries are at depth 1) is sent.
    pub fn keeps_blob(&self, size: u64, depth: u64) -> bool {
        self.parts.iter().all(|p| match *p {
            Part::BlobNone => false,
            Part::BlobLimit(n) => size < n,
            Part::TreeDepth(d) => depth < d,
            Part::ObjectType(k) => k == Kind::Blob,
        })
    }

    /// Whether anything below a tree at `depth` can be sent: if not, the
    /// walk does not read it.
    pub fn enters_tree(&self, depth: u64) -> bool {
        self.parts.iter().all(|p| match *p {
            Part::TreeDepth(d) => depth + 1 < d,
            Part::ObjectType(k) => matches!(k, Kind::Tree | Kind::Blob),
            Part::BlobNone | Part::BlobLimit(_) => true,
        })
    }

    /// Whether the filter decides an object by its kind and size alone, so
    /// that it applies to a set of reachable objects without the paths a
    /// walk meets them at (git's `can_filter_bitmap`): `blob:none`,
    /// `blob:limit`, `tree:0`, `object:type` and combinations of them.
    /// `tree:<depth>` with a depth above 0 needs the walk.
    pub fn path_free(&self) -> bool {
        self.parts
            .iter()
            .all(|p| !matches!(p, Part::TreeDepth(d) if *d > 0))
    }

    /// Whether an object of `kind` and `size` bytes reached from the wants
    /// (not named by one) is sent, for a [`Filter::path_free`] filter (git's
    /// `filter_bitmap`: a tree at any depth is treated as the root's).
    pub fn keeps_reached(&self, kind: Kind, size: u64) -> bool {
        match kind {
            Kind::Commit => self.keeps_commit(),
            Kind::Tree => self.keeps_tree(0),
            Kind::Blob => self.keeps_blob(size, 1),
            Kind::Tag => self.parts.iter().all(|p| match *p {
                Part::ObjectType(k) => k == Kind::Tag,
                _ => true,
            }),
        }
    }

    /// Whether the walk needs blob sizes (a `blob:limit` part).
    pub fn needs_sizes(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::BlobLimit(_)))
    }

    /// Whether a tree's depth decides anything (a `tree:` part): the walk
    /// then enters a tree again when it meets it nearer the root, as git's
    /// `tree:<depth>` filter does.
    pub fn limits_depth(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::TreeDepth(_)))
    }
}

fn parse_into(spec: &str, nesting: usize, parts: &mut Vec<Part>) -> Result<(), FilterError> {
    let invalid = || FilterError::Invalid(format!("invalid filter-spec '{spec}'"));
    if spec == "blob:none" {
        parts.push(Part::BlobNone);
        return Ok(());
    }
    if let Some(n) = spec.strip_prefix("blob:limit=") {
        parts.push(Part::BlobLimit(parse_size(n).ok_or_else(invalid)?));
        return Ok(());
    }
    if let Some(n) = spec.strip_prefix("tree:") {
        let depth = n
            .parse()
            .map_err(|_| FilterError::Invalid("expected 'tree:<depth>'".into()))?;
        parts.push(Part::TreeDepth(depth));
        return Ok(());
    }
    if let Some(t) = spec.strip_prefix("object:type=") {
        let kind = Kind::from_bytes(t.as_bytes()).map_err(|_| {
            FilterError::Invalid(format!(
                "'{t}' for 'object:type=<type>' is not a valid object type"
            ))
        })?;
        parts.push(Part::ObjectType(kind));
        return Ok(());
    }
    if spec.starts_with("sparse:oid=") {
        return Err(FilterError::NotSupported("sparse:oid"));
    }
    if let Some(subs) = spec.strip_prefix("combine:") {
        if nesting >= MAX_NESTING {
            return Err(invalid());
        }
        for sub in subs.split('+') {
            if sub.is_empty() {
                return Err(FilterError::Invalid(
                    "expected something after combine:".into(),
                ));
            }
            if let Some(c) = sub
                .bytes()
                .find(|c| RESERVED.contains(c) || c.is_ascii_whitespace())
            {
                return Err(FilterError::Invalid(format!(
                    "must escape char in sub-filter-spec: '{}'",
                    c as char
                )));
            }
            let decoded = percent_decode(sub).ok_or_else(invalid)?;
            parse_into(&decoded, nesting + 1, parts)?;
        }
        return Ok(());
    }
    Err(invalid())
}

/// `%XX` escapes decoded (git's `url_percent_decode`); `None` if the result
/// is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
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

    fn parts(spec: &str) -> Vec<Part> {
        Filter::parse(spec).unwrap().parts
    }

    #[test]
    fn specs() {
        assert_eq!(parts("blob:none"), [Part::BlobNone]);
        assert_eq!(parts("blob:limit=10k"), [Part::BlobLimit(10240)]);
        assert_eq!(parts("blob:limit=7"), [Part::BlobLimit(7)]);
        assert_eq!(parts("tree:0"), [Part::TreeDepth(0)]);
        assert_eq!(parts("object:type=tree"), [Part::ObjectType(Kind::Tree)]);
        assert_eq!(
            parts("combine:blob:none+tree%3A2"),
            [Part::BlobNone, Part::TreeDepth(2)]
        );
        assert_eq!(
            parts("combine:object%3Atype%3Dblob+combine%3Atree%3A1%2Bblob%3Alimit%3D1k"),
            [
                Part::ObjectType(Kind::Blob),
                Part::TreeDepth(1),
                Part::BlobLimit(1024)
            ]
        );
    }

    #[test]
    fn refusals_in_gits_words() {
        let err = |s: &str| Filter::parse(s).unwrap_err().to_string();
        assert_eq!(err("sparse:oid=abc"), "filter 'sparse:oid' not supported");
        assert_eq!(
            err("combine:blob:none+sparse%3Aoid%3Dabc"),
            "filter 'sparse:oid' not supported"
        );
        assert_eq!(err("bogus"), "invalid filter-spec 'bogus'");
        assert_eq!(
            err("combine:blob:none+bogus"),
            "invalid filter-spec 'bogus'"
        );
        assert_eq!(err("tree:x"), "expected 'tree:<depth>'");
        assert_eq!(
            err("object:type=frob"),
            "'frob' for 'object:type=<type>' is not a valid object type"
        );
        assert_eq!(
            err("combine:blob:none+tree:1 "),
            "must escape char in sub-filter-spec: ' '"
        );
        assert!(Filter::parse("blob:limit=x").is_err());
        assert!(Filter::parse("combine:").is_err());
        let deep = (0..20).fold("blob:none".to_string(), |s, _| {
            format!("combine:{}", s.replace('%', "%25").replace(':', "%3A"))
        });
        assert!(Filter::parse(&deep).is_err(), "nesting is bounded");
    }

    #[test]
    fn what_each_keeps() {
        let f = |s: &str| Filter::parse(s).unwrap();
        assert!(!f("blob:limit=10").keeps_blob(10, 1));
        assert!(f("blob:limit=10").keeps_blob(9, 1));
        assert!(!f("tree:0").keeps_tree(0));
        assert!(f("tree:2").keeps_tree(1));
        assert!(!f("tree:2").keeps_blob(1, 2));
        assert!(f("tree:2").enters_tree(0) && !f("tree:2").enters_tree(1));
        assert!(!f("object:type=blob").keeps_commit());
        assert!(!f("object:type=blob").keeps_tree(0));
        assert!(f("object:type=blob").enters_tree(0));
        assert!(!f("object:type=commit").enters_tree(0));
        let c = f("combine:blob:none+tree:2");
        assert!(c.keeps_tree(1) && !c.keeps_blob(1, 1) && c.keeps_commit());
        assert!(f("blob:none").path_free() && f("tree:0").path_free());
        assert!(f("combine:blob:limit=1k+object:type=blob").path_free());
        assert!(!f("tree:1").path_free() && !c.path_free());
        let reached = |s: &str, k, n| f(s).keeps_reached(k, n);
        assert!(!reached("blob:none", Kind::Blob, 0) && reached("blob:none", Kind::Tree, 9));
        assert!(
            reached("blob:limit=10", Kind::Blob, 9) && !reached("blob:limit=10", Kind::Blob, 10)
        );
        assert!(!reached("tree:0", Kind::Tree, 1) && !reached("tree:0", Kind::Blob, 1));
        assert!(reached("tree:0", Kind::Commit, 1));
        assert!(
            !reached("object:type=tree", Kind::Commit, 1)
                && reached("object:type=tree", Kind::Tree, 1)
        );
        assert!(!reached("object:type=commit", Kind::Tag, 1));
    }
}
