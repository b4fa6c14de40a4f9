//! Repository names in URLs: `http://HOST/<name>.git/...`, `<name>` may hold
//! slashes (`org/repo`).

/// Why a name is refused (HTTP 400).
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

/// What a request path asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /<name>.git/info/refs`
    InfoRefs(&'a str),
    /// `POST /<name>.git/git-upload-pack`
    UploadPack(&'a str),
    /// `POST /<name>.git/git-receive-pack`
    ReceivePack(&'a str),
    /// A path under `<name>.git/` that smart HTTP does not use (dumb HTTP).
    Other(&'a str),
}

/// Splits a request path into the repository name and the endpoint.
/// `None` when the path names no `.git` repository at all.
pub fn route(path: &str) -> Option<Route<'_>> {
    let path = path.strip_prefix('/')?;
    let at = path.find(".git/")?;
    let name = &path[..at];
    let rest = &path[at + 5..];
    Some(match rest {
        "info/refs" => Route::InfoRefs(name),
        "git-upload-pack" => Route::UploadPack(name),
        "git-receive-pack" => Route::ReceivePack(name),
        _ => Route::Other(name),
    })
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

    #[test]
    fn routes() {
        assert_eq!(
            route("/org/r.git/info/refs"),
            Some(Route::InfoRefs("org/r"))
        );
        assert_eq!(
            route("/r.git/git-upload-pack"),
            Some(Route::UploadPack("r"))
        );
        assert_eq!(
            route("/r.git/git-receive-pack"),
            Some(Route::ReceivePack("r"))
        );
        assert_eq!(route("/r.git/HEAD"), Some(Route::Other("r")));
        assert_eq!(route("/nothing"), None);
    }
}
