//! Repository names in URLs: `http://HOST/<name>.git/...` or, as forges
//! take them, `http://HOST/<name>/...`; `<name>` may hold slashes
//! (`org/repo`) and is the same repository either way (named without
//! `.git` in the log and the access document).

pub use gitstow_service::repo_name::{validate, InvalidName};

/// What a request path asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /<name>[.git]/info/refs`
    InfoRefs(&'a str),
    /// `POST /<name>[.git]/git-upload-pack`
    UploadPack(&'a str),
    /// `POST /<name>[.git]/git-receive-pack`
    ReceivePack(&'a str),
    /// `/<name>[.git]/info/lfs/<rest>`: Git LFS ([`crate::lfs`]).
    Lfs(&'a str, &'a str),
    /// `POST /<name>[.git]/mirror/sync`: an upstream's webhook
    /// ([`crate::mirror_hook`]).
    MirrorSync(&'a str),
    /// A path under `<name>.git/` that smart HTTP does not use (dumb HTTP).
    Other(&'a str),
}

/// Splits a request path into the repository name (without `.git`) and
/// the endpoint. `None` when the path names no repository endpoint at all
/// (a path without `.git/` that ends in none of smart HTTP's endpoints).
pub fn route(path: &str) -> Option<Route<'_>> {
    let path = path.strip_prefix('/')?;
    fn name(prefix: &str) -> &str {
        prefix.strip_suffix(".git").unwrap_or(prefix)
    }
    if let Some(prefix) = path.strip_suffix("/info/refs") {
        return Some(Route::InfoRefs(name(prefix)));
    }
    if let Some(prefix) = path.strip_suffix("/git-upload-pack") {
        return Some(Route::UploadPack(name(prefix)));
    }
    if let Some(prefix) = path.strip_suffix("/git-receive-pack") {
        return Some(Route::ReceivePack(name(prefix)));
    }
    if let Some(prefix) = path.strip_suffix("/mirror/sync") {
        return Some(Route::MirrorSync(name(prefix)));
    }
    if let Some((prefix, rest)) = path.split_once("/info/lfs/") {
        return Some(Route::Lfs(name(prefix), rest));
    }
    let at = path.find(".git/")?;
    Some(Route::Other(&path[..at]))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            route("/org/r.git/info/lfs/objects/batch"),
            Some(Route::Lfs("org/r", "objects/batch"))
        );
        assert_eq!(route("/nothing"), None);
        assert_eq!(
            route("/org/r/mirror/sync"),
            Some(Route::MirrorSync("org/r"))
        );
        assert_eq!(
            route("/org/r.git/mirror/sync"),
            Some(Route::MirrorSync("org/r"))
        );
        assert_eq!(route("/org/r"), None);
    }

    #[test]
    fn a_name_without_git_is_the_same_repository() {
        assert_eq!(route("/org/r/info/refs"), Some(Route::InfoRefs("org/r")));
        assert_eq!(route("/r/git-upload-pack"), Some(Route::UploadPack("r")));
        assert_eq!(
            route("/org/r/git-receive-pack"),
            Some(Route::ReceivePack("org/r"))
        );
        assert_eq!(
            route("/org/r/info/lfs/locks/verify"),
            Some(Route::Lfs("org/r", "locks/verify"))
        );
        // One `.git` is the suffix; what is left is checked as a name.
        assert_eq!(
            route("/r.git.git/info/refs"),
            Some(Route::InfoRefs("r.git"))
        );
        assert_eq!(route("/info/refs"), None);
    }
}
