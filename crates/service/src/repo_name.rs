//! Repository names, as every transport takes them: `<name>` of
//! `http://HOST/<name>.git/...` and of `git@HOST:<name>.git`; it may hold
//! slashes (`org/repo`).

/// Why a name is refused (HTTP 400; over SSH, `ERROR:` and exit 128).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid repository name {name:?}: {reason}")]
pub struct InvalidName {
    /// The name as requested.
    pub name: String,
    /// What rule it breaks.
    pub reason: &'static str,
}

/// Checks a repository name (without `.git`): 1 to 16 `/`-separated segments of
/// `[A-Za-z0-9._-]`, none empty, none starting with `.`, none ending in `.git`,
/// at most 200 bytes. This rules out `..`, absolute paths, percent-encoded
/// separators and NUL before anything touches the store.
pub fn validate(name: &str) -> Result<(), InvalidName> {
    let bad = |reason| {
        Err(InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 200 {
        return bad("must be 1 to 200 bytes");
    }
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 16 {
        return bad("too many path segments");
    }
    for s in segments {
        if s.is_empty() {
            return bad("empty path segment");
        }
        if s.starts_with('.') {
            return bad("a path segment starts with '.'");
        }
        if s.ends_with(".git") {
            return bad("only the last segment carries '.git'");
        }
        if !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return bad("only letters, digits, '.', '_' and '-' are allowed");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["repo", "org/repo", "a-b_c.d", "x/y/z"] {
            assert_eq!(validate(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", "..", "a/../b", "/abs", "a//b", ".hidden", "a/.x", "a%2fb", "a\0b", "a b",
            "x.git/y", "a/",
        ] {
            assert!(validate(bad).is_err(), "{bad:?}");
        }
    }
}
