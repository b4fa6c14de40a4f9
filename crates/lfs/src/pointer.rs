//! LFS pointer files (git-lfs `docs/spec.md`): what a repository's blob
//! holds in place of a tracked file.
//!
//! ```text
//! version https://git-lfs.github.com/spec/v1
//! oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393
//! size 12345
//! ```
//!
//! At most [`MAX_POINTER`] bytes, `version` first, then keys in order, one
//! `key value` a line ending in `\n`. Read as git-lfs reads them
//! (`lfs/pointer.go`, lines by `bufio.Scanner`): a line's trailing `\r` is
//! dropped, blank lines are skipped, and the three v1 version URLs are
//! accepted (`http://git-media.io/v/2`, `https://hawser.github.com/spec/v1`,
//! `https://git-lfs.github.com/spec/v1`). What git-lfs takes for a pointer,
//! a clone downloads: collection must keep its object, so this errs toward
//! reading a blob as a pointer (other keys and their order are not checked).

use crate::Oid;

/// The largest pointer file, in bytes (the spec's limit).
pub const MAX_POINTER: u64 = 1024;

/// The oid and size a pointer file names; `None` for a blob that is not a
/// pointer (any other text or binary, a pointer of another hash or spec).
pub fn parse(blob: &[u8]) -> Option<(Oid, u64)> {
    if blob.len() as u64 > MAX_POINTER {
        return None;
    }
    let text = std::str::from_utf8(blob).ok()?;
    let mut lines = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.is_empty());
    let version = lines.next()?;
    if !matches!(
        version,
        "version https://git-lfs.github.com/spec/v1"
            | "version https://hawser.github.com/spec/v1"
            | "version http://git-media.io/v/2"
    ) {
        return None;
    }
    let (mut oid, mut size) = (None, None);
    for line in lines {
        let (key, value) = line.split_once(' ')?;
        match key {
            "oid" => oid = Oid::parse(value.strip_prefix("sha256:")?),
            "size" => size = value.parse().ok(),
            _ => {}
        }
    }
    Some((oid?, size?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_and_other_blobs() {
        let hex = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393";
        let p =
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{hex}\nsize 12345\n");
        assert_eq!(parse(p.as_bytes()), Some((Oid::parse(hex).unwrap(), 12345)));
        let ext = format!(
            "version https://git-lfs.github.com/spec/v1\next-0-foo sha256:{hex}\noid sha256:{hex}\nsize 1\n"
        );
        assert!(parse(ext.as_bytes()).is_some());
        // As git-lfs reads them: CRLF line ends, blank lines, the alpha
        // version URL.
        let want = Some((Oid::parse(hex).unwrap(), 12345));
        for also in [
            p.replace('\n', "\r\n"),
            format!("version https://git-lfs.github.com/spec/v1\n\noid sha256:{hex}\nsize 12345"),
            format!("version http://git-media.io/v/2\noid sha256:{hex}\nsize 12345\n"),
            format!(
                "version https://hawser.github.com/spec/v1\r\noid sha256:{hex}\r\nsize 12345\r\n"
            ),
        ] {
            assert_eq!(parse(also.as_bytes()), want, "{also:?}");
        }
        for not in [
            "".to_owned(),
            "hello\n".to_owned(),
            format!("version https://example.com/v1\noid sha256:{hex}\nsize 1\n"),
            format!("version https://git-lfs.github.com/spec/v1\noid sha512:{hex}\nsize 1\n"),
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{hex}\n"),
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{hex}\nsize x\n"),
        ] {
            assert_eq!(parse(not.as_bytes()), None, "{not:?}");
        }
        assert_eq!(parse(&vec![b'a'; 2000]), None);
    }
}
