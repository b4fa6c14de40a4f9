//! Repository names in URLs: `http://HOST/<name>.git/...`, `<name>` may hold
//! slashes (`org/repo`).

pub use gitstow_service::repo_name::{validate, InvalidName};

/// What a request path asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /<name>.git/info/refs`
    InfoRefs(&'a str),
    /// `POST /<name>.git/git-upload-pack`
    UploadPack(&'a str),
    /// `POST /<name>.git/git-receive-pack`
    ReceivePack(&'a str),
    /// `/<name>.git/info/lfs/<rest>`: Git LFS ([`crate::lfs`]).
    Lfs(&'a str, &'a str),
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
        _ => match rest.strip_prefix("info/lfs/") {
            Some(lfs) => Route::Lfs(name, lfs),
            None => Route::Other(name),
        },
    })
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
    }
}
