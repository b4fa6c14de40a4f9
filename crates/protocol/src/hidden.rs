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

use std::collections::BTreeMap;
use std::ops::Bound;

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
    /// start with `refs/`: it would hide everything or nothing.
    pub fn new<S: AsRef<str>>(prefixes: &[S]) -> Result<Self, String> {
        let mut out = Vec::new();
        for p in prefixes {
            let p = p.as_ref().trim_end_matches('/');
            if !p.starts_with("refs/") || p.len() <= "refs/".len() {
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

    /// No prefix is hidden.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// The prefix that hides `name`, if one does.
    fn hiding(&self, name: &str) -> Option<&str> {
        self.prefixes.iter().map(String::as_str).find(|p| {
            name.strip_prefix(p)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// Whether `name` is hidden.
    pub fn hides(&self, name: &str) -> bool {
        self.hiding(name).is_some()
    }

    /// The entries of `refs` whose names start with `from` (all of them when
    /// empty), in name order, hidden ones left out: a hidden namespace is
    /// skipped with one seek past it, not visited ref by ref.
    pub fn visible<'a, V>(
        &'a self,
        refs: &'a BTreeMap<String, V>,
        from: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a V)> + 'a {
        let mut iter = refs.range::<str, _>((Bound::Included(from), Bound::Unbounded));
        std::iter::from_fn(move || loop {
            let (name, value) = iter.next()?;
            if !name.starts_with(from) {
                return None;
            }
            let Some(prefix) = self.hiding(name) else {
                return Some((name, value));
            };
            if name.len() > prefix.len() {
                // Below `prefix/`: every name up to `prefix0` ('0' follows '/').
                let past = format!("{prefix}0");
                iter = refs.range::<str, _>((Bound::Included(past.as_str()), Bound::Unbounded));
            }
        })
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
        assert!(HiddenRefs::new(&["heads/x"]).is_err());
        assert!(HiddenRefs::new::<&str>(&[]).unwrap().is_empty());
    }

    #[test]
    fn visible_skips_hidden_namespaces() {
        let names = [
            "refs/changes",
            "refs/changes-x",
            "refs/changes.y",
            "refs/changes/01/1/1",
            "refs/changes/99/99/2",
            "refs/changes0",
            "refs/heads/main",
            "refs/pull/1/head",
            "refs/tags/v1",
        ];
        let refs: BTreeMap<String, u8> = names.iter().map(|n| (n.to_string(), 0)).collect();
        let h = HiddenRefs::new(&["refs/changes", "refs/pull"]).unwrap();
        let seen: Vec<&str> = h.visible(&refs, "").map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            seen,
            [
                "refs/changes-x",
                "refs/changes.y",
                "refs/changes0",
                "refs/heads/main",
                "refs/tags/v1"
            ]
        );
        let seen: Vec<&str> = h
            .visible(&refs, "refs/changes")
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(seen, ["refs/changes-x", "refs/changes.y", "refs/changes0"]);
        let none = HiddenRefs::default();
        assert_eq!(none.visible(&refs, "").count(), names.len());
    }
}
