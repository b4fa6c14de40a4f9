//! Hidden ref namespaces, as git's `transfer.hideRefs` (git-config(1)
//! `transfer.hideRefs`, `uploadpack.hideRefs`, `receive.hideRefs`): refs
//! left out of every advertisement (upload-pack v0, v2 `ls-refs`,
//! receive-pack) and closed to pushes (`deny updating a hidden ref`,
//! `deny deleting a hidden ref`, as git's receive-pack
//! `reject_updates_to_hidden`).
//!
//! A prefix hides the ref of that exact name and every ref below it
//! (`refs/changes` hides `refs/changes` and `refs/changes/01/1/1`, not
//! `refs/changes-x`), as git's `ref_is_hidden` matches; trailing slashes
//! are dropped, as git drops them when it reads the setting.

/// The hidden prefixes of a server (and, later, of a repository).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HiddenRefs {
    prefixes: Vec<String>,
}

/// Reason git's receive-pack gives for an update of a hidden ref.
pub const DENY_UPDATING_HIDDEN: &str = "deny updating a hidden ref";
/// Reason git's receive-pack gives for a deletion of a hidden ref.
pub const DENY_DELETING_HIDDEN: &str = "deny deleting a hidden ref";

impl HiddenRefs {
    /// Hides `prefixes` (each a full ref name prefix such as
    /// `refs/changes`).
    ///
    /// # Errors
    /// A prefix that is empty (after its trailing slashes) or does not
    /// start with `refs/` (it would hide everything or nothing), or that no
    /// ref could be under (a name `git check-ref-format` refuses, such as
    /// `refs/heads/../x`).
    pub fn new<S: AsRef<str>>(prefixes: &[S]) -> Result<Self, String> {
        let mut out = Vec::new();
        for p in prefixes {
            let p = p.as_ref().trim_end_matches('/');
            if !p.starts_with("refs/")
                || p.len() <= "refs/".len()
                || crate::refname::check_ref_format_for_delete(p).is_err()
            {
                return Err(format!(
                    "hidden ref prefix {p:?}: want a namespace under refs/ (e.g. refs/changes)"
                ));
            }
            out.push(p.to_owned());
        }
        out.sort();
        out.dedup();
        Ok(HiddenRefs { prefixes: out })
    }

    /// These prefixes and `more` (a repository's own, added to the
    /// server's); a prefix of `more` that [`HiddenRefs::new`] refuses is
    /// left out (returned in the second place, for the log).
    pub fn with<S: AsRef<str>>(&self, more: &[S]) -> (Self, Vec<String>) {
        let mut out = self.clone();
        let mut refused = Vec::new();
        for p in more {
            match HiddenRefs::new(&[p.as_ref()]) {
                Ok(h) => out.prefixes.extend(h.prefixes),
                Err(_) => refused.push(p.as_ref().to_owned()),
            }
        }
        out.prefixes.sort();
        out.prefixes.dedup();
        (out, refused)
    }

    /// No prefix is hidden.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// The prefix that hides `name`, if one does (a walk in name order
    /// skips the namespace by seeking to `<prefix>0`: `'0'` follows `'/'`).
    pub fn hiding(&self, name: &str) -> Option<&str> {
        self.prefixes.iter().map(String::as_str).find(|p| {
            name.strip_prefix(p)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// Whether `name` is hidden.
    pub fn hides(&self, name: &str) -> bool {
        self.hiding(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_hide_a_namespace_and_its_name() {
        let h = HiddenRefs::new(&["refs/changes/", "refs/pull"]).unwrap();
        assert!(h.hides("refs/changes"));
        assert!(h.hides("refs/changes/01/1/1"));
        assert!(h.hides("refs/pull/7/head"));
        assert!(!h.hides("refs/changes-x"));
        assert!(!h.hides("refs/changesx/1"));
        assert!(!h.hides("refs/heads/main"));
        assert!(HiddenRefs::new(&["refs/"]).is_err());
        assert!(HiddenRefs::new(&["refs/heads/../x"]).is_err());
        assert!(HiddenRefs::new(&["refs/heads/a b"]).is_err());
        let (both, refused) = h.with(&["refs/keep-around/", "refs/", "refs/pull"]);
        assert_eq!(refused, ["refs/"]);
        assert!(both.hides("refs/keep-around/abc") && both.hides("refs/pull/1/head"));
        assert!(!h.hides("refs/keep-around/abc"));
        assert!(HiddenRefs::new(&["heads/x"]).is_err());
        assert!(HiddenRefs::new::<&str>(&[]).unwrap().is_empty());
    }
}
