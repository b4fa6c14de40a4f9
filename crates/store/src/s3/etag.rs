//! ETag spelling: what S3 sends, what [`ETag`] holds, what `If-Match` needs.
//!
//! S3 sends `ETag: "9b2cf535f27731c974343645a3985328"` (HTTP's quoted
//! entity-tag). The store hands out the **unquoted** form
//! (`9b2cf535f27731c974343645a3985328`, multipart: `…-3`) and accepts either
//! back in [`PutCondition::IfMatch`](crate::PutCondition::IfMatch).
//!
//! For `If-Match`, servers disagree: AWS, MinIO, moto accept the quoted
//! form, Ceph RGW 16 only the unquoted one (the quoted one always gets 412).
//! [`IfMatchForm`] remembers which spelling the server took last; until a
//! conditional put has succeeded it sends the quoted form, as HTTP says.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::ETag;

/// `etag` without one pair of surrounding double quotes and without a weak
/// `W/` marker: `"abc"` → `abc`, `W/"abc"` → `abc`, `abc` → `abc`.
pub(crate) fn normalise(etag: &str) -> ETag {
    let e = etag.trim();
    let e = e.strip_prefix("W/").unwrap_or(e);
    let e = e
        .strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
        .unwrap_or(e);
    ETag(e.to_owned())
}

/// Whether two etags name the same version, ignoring quoting.
pub(crate) fn same(a: &ETag, b: &ETag) -> bool {
    normalise(&a.0) == normalise(&b.0)
}

/// A spelling of an etag in `If-Match`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `"abc"`.
    Quoted,
    /// `abc`.
    Unquoted,
}

impl Form {
    pub(crate) fn render(self, etag: &ETag) -> String {
        let bare = normalise(&etag.0).0;
        match self {
            Form::Quoted => format!("\"{bare}\""),
            Form::Unquoted => bare,
        }
    }

    pub(crate) fn other(self) -> Form {
        match self {
            Form::Quoted => Form::Unquoted,
            Form::Unquoted => Form::Quoted,
        }
    }
}

/// The `If-Match` spelling the server accepted last (shared by all threads);
/// 0 until a conditional put has succeeded.
#[derive(Debug, Default)]
pub(crate) struct IfMatchForm(AtomicU8);

const QUOTED: u8 = 1;
const UNQUOTED: u8 = 2;

impl IfMatchForm {
    /// The spelling to try first.
    pub(crate) fn current(&self) -> Form {
        match self.0.load(Ordering::Relaxed) {
            UNQUOTED => Form::Unquoted,
            _ => Form::Quoted,
        }
    }

    /// The server accepted `form`.
    pub(crate) fn accepted(&self, form: Form) {
        let v = match form {
            Form::Quoted => QUOTED,
            Form::Unquoted => UNQUOTED,
        };
        if self.0.swap(v, Ordering::Relaxed) != v {
            tracing::debug!(?form, "S3 server accepts this If-Match ETag spelling");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_strips_quotes_once() {
        assert_eq!(normalise("\"abc\"").0, "abc");
        assert_eq!(normalise("abc").0, "abc");
        assert_eq!(normalise("W/\"abc\"").0, "abc");
        assert_eq!(normalise(" \"abc-3\" ").0, "abc-3");
        assert_eq!(normalise("\"\"").0, "");
        assert_eq!(normalise("\"abc").0, "\"abc", "unbalanced quotes stay");
    }

    #[test]
    fn same_ignores_quoting() {
        let q = ETag("\"d41d8cd98f00b204e9800998ecf8427e\"".into());
        let u = ETag("d41d8cd98f00b204e9800998ecf8427e".into());
        assert!(same(&q, &u) && same(&u, &q) && same(&u, &u));
        assert!(!same(&u, &ETag("d41d8cd98f00b204e9800998ecf8427f".into())));
    }

    #[test]
    fn render_both_forms_from_either_input() {
        for input in ["abc", "\"abc\""] {
            let e = ETag(input.into());
            assert_eq!(Form::Quoted.render(&e), "\"abc\"");
            assert_eq!(Form::Unquoted.render(&e), "abc");
        }
        assert_eq!(Form::Quoted.other(), Form::Unquoted);
        assert_eq!(Form::Unquoted.other(), Form::Quoted);
    }

    #[test]
    fn form_memory() {
        let f = IfMatchForm::default();
        assert_eq!(f.current(), Form::Quoted, "HTTP's spelling first");
        f.accepted(Form::Unquoted);
        assert_eq!(f.current(), Form::Unquoted);
        f.accepted(Form::Quoted);
        assert_eq!(f.current(), Form::Quoted);
    }
}
