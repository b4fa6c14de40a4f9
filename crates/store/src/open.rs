//! Opening a store from a URL.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{is_s3_url, Error, FsStore, ObjectStore, Result, S3Config, S3Options, S3Store};

/// Open the store that `url` names, creating its directory if missing;
/// S3 settings come from the environment only. Same as
/// [`open_with`]`(url, &S3Options::default())`.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let url = format!("file://{}/store", dir.path().display());
/// let store = gitstow_store::open(&url).unwrap();
/// assert!(store.list("").unwrap().is_empty());
/// assert!(gitstow_store::open("ftp://host/x").is_err());
/// ```
///
/// # Errors
/// See [`open_with`].
pub fn open(url: &str) -> Result<Arc<dyn ObjectStore>> {
    open_with(url, &S3Options::default())
}

/// Open the store that `url` names, with explicit settings for S3 stores.
///
/// Accepted forms:
///
/// - `s3://BUCKET` or `s3://BUCKET/PREFIX`: an [`S3Store`] configured by
///   [`S3Config::from_url`] from `s3` and the AWS environment variables.
///   Opening checks that the bucket exists ([`S3Store::check_bucket`]), so
///   it sends one request (retried like any other).
/// - `file:///abs/path`: an [`FsStore`] at `/abs/path`;
/// - `file://relative/path`: an [`FsStore`] at `relative/path` below the
///   current directory (gitstow's shorthand; RFC 8089 would read
///   `relative` as a host name);
/// - a plain path, absolute or relative to the current directory, e.g.
///   `/srv/gitstow` or `data/store`.
///
/// `%XX` escapes in the path of a `file://` URL are decoded (`%20` is a
/// space); a plain path is taken verbatim. Relative paths are made absolute
/// here, so later changes of the current directory do not move the store.
/// Schemes are matched case-insensitively.
///
/// `s3` is ignored for the other forms.
///
/// # Errors
/// - [`Error::UnsupportedUrl`] for a malformed `s3://` URL (see
///   [`S3Config::from_url`]), any other `scheme://`, an empty URL or path,
///   or a bad `%` escape;
/// - [`Error::Config`] for an S3 store without credentials or whose bucket
///   does not exist; [`Error::Backend`] when the S3 endpoint refuses or
///   cannot be reached;
/// - [`Error::Io`] (the path as `key`) when the directory cannot be created
///   or the current directory cannot be read.
pub fn open_with(url: &str, s3: &S3Options) -> Result<Arc<dyn ObjectStore>> {
    if is_s3_url(url) {
        let store = S3Store::new(S3Config::from_url(url, s3)?)?;
        store.check_bucket()?;
        return Ok(Arc::new(store));
    }
    let path = fs_root(url)?;
    let path = std::path::absolute(&path).map_err(|e| Error::io(url, e))?;
    Ok(Arc::new(FsStore::new(path)?))
}

/// The directory a filesystem store URL (or plain path) names, as
/// [`open`] reads it; `None` for an S3 URL or one [`open`] refuses.
pub fn local_root(url: &str) -> Option<PathBuf> {
    if is_s3_url(url) {
        return None;
    }
    fs_root(url).ok()
}

/// The directory a filesystem store URL names, as written (possibly relative).
fn fs_root(url: &str) -> Result<PathBuf> {
    let unsupported = |reason: &str| Error::UnsupportedUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    if url.is_empty() {
        return Err(unsupported("empty store URL"));
    }
    let Some((scheme, rest)) = split_scheme(url) else {
        return Ok(PathBuf::from(url));
    };
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(unsupported(&format!(
            "unknown scheme {scheme:?}; expected file://, s3:// or a plain path"
        )));
    }
    if rest.is_empty() {
        return Err(unsupported("no path after file://"));
    }
    let bytes = percent_decode(rest).ok_or_else(|| unsupported("bad %-escape in path"))?;
    if bytes.is_empty() {
        return Err(unsupported("no path after file://"));
    }
    Ok(Path::new(OsStr::from_bytes(&bytes)).to_path_buf())
}

/// Split `scheme://rest` when `url` starts with an RFC 3986 scheme followed by `://`.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first_ok && rest_ok).then_some((scheme, rest))
}

/// Decode `%XX` escapes; `None` on a malformed escape.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PutCondition;

    fn unsupported_reason(url: &str) -> String {
        match fs_root(url) {
            Err(Error::UnsupportedUrl { url: u, reason }) => {
                assert_eq!(u, url);
                reason
            }
            other => panic!("{url:?} should be unsupported, got {other:?}"),
        }
    }

    #[test]
    fn file_url_absolute() {
        assert_eq!(
            fs_root("file:///srv/gitstow").unwrap(),
            Path::new("/srv/gitstow")
        );
        assert_eq!(fs_root("FILE:///srv/x").unwrap(), Path::new("/srv/x"));
    }

    #[test]
    fn local_root_is_the_fs_root_of_local_urls_only() {
        assert_eq!(local_root("file:///srv/x"), Some(PathBuf::from("/srv/x")));
        assert_eq!(local_root("data/store"), Some(PathBuf::from("data/store")));
        assert_eq!(local_root("s3://bucket/prefix"), None);
        assert_eq!(local_root("ftp://x"), None);
    }

    #[test]
    fn file_url_relative() {
        let root = fs_root("file://data/store").unwrap();
        assert_eq!(root, Path::new("data/store"));
        assert!(root.is_relative());
        let abs = std::path::absolute(&root).unwrap();
        assert_eq!(abs, std::env::current_dir().unwrap().join("data/store"));
    }

    #[test]
    fn file_url_percent_decoding() {
        assert_eq!(
            fs_root("file:///tmp/a%20b%2Fc").unwrap(),
            Path::new("/tmp/a b/c")
        );
        assert_eq!(
            unsupported_reason("file:///tmp/100%"),
            "bad %-escape in path"
        );
        assert_eq!(
            unsupported_reason("file:///tmp/%zz"),
            "bad %-escape in path"
        );
        assert_eq!(
            unsupported_reason("file:///tmp/%+1"),
            "bad %-escape in path"
        );
    }

    #[test]
    fn plain_paths() {
        assert_eq!(fs_root("/srv/gitstow").unwrap(), Path::new("/srv/gitstow"));
        assert_eq!(fs_root("rel/dir").unwrap(), Path::new("rel/dir"));
        // Verbatim: no %-decoding, and a colon is not a scheme without "//".
        assert_eq!(fs_root("/tmp/100%").unwrap(), Path::new("/tmp/100%"));
        assert_eq!(fs_root("file:foo").unwrap(), Path::new("file:foo"));
        assert_eq!(fs_root("./a://b").unwrap(), Path::new("./a://b"));
    }

    #[test]
    fn s3_urls_go_to_the_s3_backend() {
        // Refused before any request: a malformed URL, or no credentials.
        match open("s3://") {
            Err(Error::UnsupportedUrl { reason, .. }) => {
                assert_eq!(reason, "no bucket after s3://")
            }
            other => panic!("expected UnsupportedUrl, got {other:?}"),
        }
        let no_credentials = S3Options {
            access_key: Some("only-the-key".into()),
            ..Default::default()
        };
        match open_with("S3://bucket/prefix", &no_credentials) {
            Err(Error::Config { reason }) => {
                assert_eq!(reason, "an S3 access key without a secret key")
            }
            other => panic!("expected Config, got {other:?}"),
        }
    }

    #[test]
    fn other_bad_urls() {
        assert_eq!(unsupported_reason(""), "empty store URL");
        assert_eq!(unsupported_reason("file://"), "no path after file://");
        assert!(unsupported_reason("http://example.com/x").starts_with("unknown scheme \"http\""));
    }

    #[test]
    fn open_creates_directory_for_every_form() {
        let dir = tempfile::tempdir().unwrap();
        let abs = dir.path().join("via-url/nested");
        let plain = dir.path().join("via-plain");
        for (url, root) in [
            (format!("file://{}", abs.display()), &abs),
            (plain.display().to_string(), &plain),
        ] {
            assert!(!root.exists());
            let store = open(&url).unwrap();
            assert!(root.is_dir(), "{url}");
            store.put("k", b"v", PutCondition::None).unwrap();
            assert_eq!(std::fs::read(root.join("k")).unwrap(), b"v");
        }
    }

    #[test]
    fn open_fails_on_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            open(file.to_str().unwrap()),
            Err(Error::Io { .. })
        ));
    }
}
