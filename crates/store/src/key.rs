//! Object keys: which strings name an object.
//!
//! A key is a `/`-separated path such as `myrepo/containers/<id>.bin`. The
//! rules are strict enough that every valid key maps to a path below the
//! [`FsStore`](crate::FsStore) root without escaping it, and portable enough
//! that the same keys work unchanged on S3.

use crate::{Error, Result};

/// The longest key accepted, in bytes (S3's own limit).
pub const MAX_KEY_LEN: usize = 1024;

/// Keys beginning with this string are refused, except under
/// [`SERVER_PREFIX`]: the store keeps its own bookkeeping (`.gitstow-tmp/`,
/// `.gitstow-locks/`) under names that start with it, so no object can
/// collide with, or be listed among, those files.
pub const RESERVED_PREFIX: &str = ".gitstow";

/// The prefix of the server's store-wide keys (the access document, later a
/// webhook outbox): a repository's keys never begin with `.` (its name's
/// segments cannot), so nothing under it is a repository's, and a listing
/// of repositories never meets it.
pub const SERVER_PREFIX: &str = ".gitstow/";

/// Check that `key` may name an object.
///
/// A valid key is non-empty, at most [`MAX_KEY_LEN`] bytes, neither starts
/// nor ends with `/`, has no empty, `.` or `..` segment, contains no
/// backslash and no control character (NUL included), and does not begin
/// with [`RESERVED_PREFIX`] (unless it begins with [`SERVER_PREFIX`]).
///
/// # Errors
/// [`Error::InvalidKey`] naming the first rule that `key` breaks.
///
/// ```
/// use gitstow_store::validate_key;
/// assert!(validate_key("repo/containers/ab12.bin").is_ok());
/// assert!(validate_key("repo//state").is_err());
/// assert!(validate_key("../etc/passwd").is_err());
/// ```
pub fn validate_key(key: &str) -> Result<()> {
    let reject = |reason: &'static str| {
        Err(Error::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    };
    if key.is_empty() {
        return reject("key is empty");
    }
    if key.len() > MAX_KEY_LEN {
        return reject("key is longer than 1024 bytes");
    }
    if key.starts_with('/') {
        return reject("key starts with '/'");
    }
    if key.ends_with('/') {
        return reject("key ends with '/'");
    }
    if key.contains('\\') {
        return reject("key contains a backslash");
    }
    if key.chars().any(char::is_control) {
        return reject("key contains a control character");
    }
    for segment in key.split('/') {
        match segment {
            "" => return reject("empty path segment"),
            "." | ".." => return reject("'.' or '..' path segment"),
            _ => {}
        }
    }
    if key.starts_with(RESERVED_PREFIX) && !key.starts_with(SERVER_PREFIX) {
        return reject("keys beginning with \".gitstow\" are reserved for the store");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(key: &str) -> &'static str {
        match validate_key(key) {
            Err(Error::InvalidKey { key: k, reason }) => {
                assert_eq!(k, key);
                reason
            }
            other => panic!("{key:?} should be rejected, got {other:?}"),
        }
    }

    #[test]
    fn accepts_ordinary_keys() {
        for key in [
            "state",
            "repo/state",
            "repo/containers/0123abcd.bin",
            "a/b/c/d/e",
            "with space/and-dash_underscore.txt",
            ".hidden/file",
            "...",
            "a/.../b",
            "gitstow/x",
            "x/.gitstow-tmp/y",
            "ünïcødé/ключ",
        ] {
            validate_key(key).unwrap_or_else(|e| panic!("{key:?}: {e}"));
        }
        validate_key(&"a".repeat(MAX_KEY_LEN)).unwrap();
    }

    #[test]
    fn rejects_empty() {
        assert_eq!(reason(""), "key is empty");
    }

    #[test]
    fn rejects_too_long() {
        assert_eq!(
            reason(&"a".repeat(MAX_KEY_LEN + 1)),
            "key is longer than 1024 bytes"
        );
        // Bytes, not chars: 513 two-byte chars are 1026 bytes.
        assert_eq!(reason(&"é".repeat(513)), "key is longer than 1024 bytes");
    }

    #[test]
    fn rejects_leading_and_trailing_slash() {
        assert_eq!(reason("/abs"), "key starts with '/'");
        assert_eq!(reason("/"), "key starts with '/'");
        assert_eq!(reason("dir/"), "key ends with '/'");
    }

    #[test]
    fn rejects_empty_segment() {
        assert_eq!(reason("a//b"), "empty path segment");
    }

    #[test]
    fn rejects_dot_segments() {
        for key in [".", "..", "a/./b", "a/../b", "../x", "x/..", "x/."] {
            assert_eq!(reason(key), "'.' or '..' path segment", "{key:?}");
        }
    }

    #[test]
    fn rejects_control_characters() {
        for key in ["a\0b", "a\nb", "tab\there", "del\u{7f}", "c1\u{85}"] {
            assert_eq!(reason(key), "key contains a control character", "{key:?}");
        }
    }

    #[test]
    fn rejects_backslash() {
        assert_eq!(reason("a\\b"), "key contains a backslash");
        assert_eq!(reason("..\\x"), "key contains a backslash");
    }

    #[test]
    fn the_servers_prefix_is_a_key() {
        assert!(validate_key(".gitstow/access").is_ok());
        assert!(validate_key(".gitstow/outbox/1").is_ok());
    }

    #[test]
    fn rejects_reserved_names() {
        for key in [
            ".gitstow-tmp",
            ".gitstow-tmp/x",
            ".gitstow-locks/abc",
            ".gitstow",
            ".gitstow-other/y",
        ] {
            assert_eq!(
                reason(key),
                "keys beginning with \".gitstow\" are reserved for the store",
                "{key:?}"
            );
        }
    }
}
