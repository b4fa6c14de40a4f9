//! Repository patterns: `org/project`, `org/*`, `*`.

use std::fmt;
use std::str::FromStr;

/// A pattern over repository names (as the server validates them:
/// `/`-separated segments of `[A-Za-z0-9._-]`, matched byte for byte, so
/// case matters). A segment `*` matches any one segment; a last segment `*`
/// matches one or more (`org/*` is every repository under `org/`, at any
/// depth; `*` is every repository). Anything else matches itself only:
/// `org/*` matches neither `org2/x` nor `orgx`, nor `org` itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RepoPattern {
    text: String,
}

impl RepoPattern {
    /// Parses a pattern: 1 to 16 segments, each `*` or a valid name segment
    /// (letters, digits, `.`, `_`, `-`; not starting with `.`; no `.git`
    /// suffix).
    pub fn parse(text: &str) -> crate::Result<Self> {
        let bad = |why: &str| {
            crate::Error::Invalid(format!("invalid repository pattern {text:?}: {why}"))
        };
        if text.is_empty() || text.len() > 200 {
            return Err(bad("must be 1 to 200 bytes"));
        }
        let segments: Vec<&str> = text.split('/').collect();
        if segments.len() > 16 {
            return Err(bad("too many segments"));
        }
        for s in segments {
            if s == "*" {
                continue;
            }
            if s.is_empty() {
                return Err(bad("empty segment"));
            }
            if s.starts_with('.') || s.ends_with(".git") {
                return Err(bad("a segment starts with '.' or ends with '.git'"));
            }
            if !s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            {
                return Err(bad("a segment is '*' or letters, digits, '.', '_' and '-'"));
            }
        }
        Ok(RepoPattern {
            text: text.to_owned(),
        })
    }

    /// Whether `name` (a validated repository name, without `.git`) matches.
    pub fn matches(&self, name: &str) -> bool {
        let pattern: Vec<&str> = self.text.split('/').collect();
        let name: Vec<&str> = name.split('/').collect();
        let last = pattern.len() - 1;
        for (i, p) in pattern.iter().enumerate() {
            let Some(n) = name.get(i) else {
                return false;
            };
            if *p == "*" {
                if i == last {
                    return true; // one or more segments
                }
                continue;
            }
            if p != n {
                return false;
            }
        }
        name.len() == pattern.len()
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for RepoPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for RepoPattern {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<Self> {
        RepoPattern::parse(s)
    }
}

impl TryFrom<String> for RepoPattern {
    type Error = crate::Error;

    fn try_from(s: String) -> crate::Result<Self> {
        RepoPattern::parse(&s)
    }
}

impl From<RepoPattern> for String {
    fn from(p: RepoPattern) -> String {
        p.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        RepoPattern::parse(p).unwrap().matches(n)
    }

    #[test]
    fn what_matches() {
        assert!(m("*", "x") && m("*", "org/x") && m("*", "a/b/c"));
        assert!(m("org/*", "org/x") && m("org/*", "org/x/y"));
        assert!(!m("org/*", "org") && !m("org/*", "org2/x") && !m("org/*", "orgx"));
        assert!(!m("org/*", "Org/x"), "case matters");
        assert!(m("org/project", "org/project"));
        assert!(!m("org/project", "org/project2") && !m("org/project", "org/project/x"));
        assert!(m("*/docs", "a/docs") && !m("*/docs", "a/b/docs") && !m("*/docs", "docs"));
    }

    #[test]
    fn what_parses() {
        for bad in [
            "",
            "org//x",
            "../x",
            "org/..",
            ".x",
            "a b",
            "org/x.git",
            "o*",
            "org/%2e",
            "/x",
            "x/",
        ] {
            assert!(RepoPattern::parse(bad).is_err(), "{bad:?}");
        }
        for good in ["*", "org/*", "a/b-c_d.e", "*/docs"] {
            assert!(RepoPattern::parse(good).is_ok(), "{good:?}");
        }
    }
}
