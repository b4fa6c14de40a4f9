//! The generator's model of a worktree: path → (mode, content), and the
//! three-way merge that decides what a merge commit contains.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use crate::content;
use crate::rng::Rng;

/// The three kinds of tree entry the history uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `100644`
    File,
    /// `100755`
    Exec,
    /// `120000`: the content is the link target.
    Link,
}

impl Mode {
    /// The octal mode as git's fast-import (and tree objects) spell it.
    pub(crate) fn octal(self) -> &'static str {
        match self {
            Mode::File => "100644",
            Mode::Exec => "100755",
            Mode::Link => "120000",
        }
    }
}

/// One file in the model. Content is shared between snapshots (`Rc`), so
/// cloning a whole tree for a branch or a merge base costs a few pointers.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) mode: Mode,
    pub(crate) data: Rc<Vec<u8>>,
}

impl Entry {
    pub(crate) fn new(mode: Mode, data: Vec<u8>) -> Self {
        Entry {
            mode,
            data: Rc::new(data),
        }
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.mode == other.mode && (Rc::ptr_eq(&self.data, &other.data) || self.data == other.data)
    }
}

/// A snapshot: every file by its full path. Paths of files always contain a
/// `.` in their last component or are fixed names, directory names never do,
/// so a file can never collide with a directory of the same name.
pub(crate) type Tree = BTreeMap<String, Entry>;

/// One change from a parent tree to a child tree, as fast-import takes it.
#[derive(Debug)]
pub(crate) enum Change<'a> {
    /// `D path`
    Delete(&'a str),
    /// `M mode inline path` + data
    Modify(&'a str, &'a Entry),
}

/// The changes that turn `from` into `to`, deletions first.
pub(crate) fn diff<'a>(from: &'a Tree, to: &'a Tree) -> Vec<Change<'a>> {
    let mut out = Vec::new();
    for path in from.keys() {
        if !to.contains_key(path) {
            out.push(Change::Delete(path));
        }
    }
    for (path, entry) in to {
        if from.get(path) != Some(entry) {
            out.push(Change::Modify(path, entry));
        }
    }
    out
}

/// The outcome of a [`merge`].
pub(crate) struct Merged {
    pub(crate) tree: Tree,
    /// Paths both sides changed differently since the base, resolved by
    /// choosing (or combining) content.
    pub(crate) conflicts: usize,
}

/// A three-way merge at file granularity: a path changed on one side only
/// takes that side; a path changed on both sides to different results is a
/// conflict, resolved by taking ours, theirs, or (both text) a combination.
pub(crate) fn merge(base: &Tree, ours: &Tree, theirs: &Tree, rng: &mut Rng) -> Merged {
    let mut tree = ours.clone();
    let mut conflicts = 0;
    let paths: BTreeSet<&String> = base.keys().chain(theirs.keys()).collect();
    for path in paths {
        let b = base.get(path);
        let t = theirs.get(path);
        if b == t {
            continue; // theirs did not touch it
        }
        let o = ours.get(path);
        if o == b || o == t {
            // only theirs changed it, or both made the same change
            match t {
                Some(t) => tree.insert(path.clone(), t.clone()),
                None => tree.remove(path),
            };
            continue;
        }
        conflicts += 1;
        match (o, t, rng.below(3)) {
            (_, _, 0) => {} // keep ours
            (_, Some(t), 1) => {
                tree.insert(path.clone(), t.clone());
            }
            (_, None, 1) => {
                tree.remove(path);
            }
            (Some(o), Some(t), _)
                if o.mode != Mode::Link
                    && t.mode != Mode::Link
                    && content::is_text(path)
                    && content::is_text_data(&o.data)
                    && content::is_text_data(&t.data) =>
            {
                let data = content::combine(&o.data, &t.data);
                tree.insert(path.clone(), Entry::new(o.mode, data));
            }
            (_, Some(t), _) => {
                tree.insert(path.clone(), t.clone());
            }
            (_, None, _) => {}
        }
    }
    Merged { tree, conflicts }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(items: &[(&str, &str)]) -> Tree {
        items
            .iter()
            .map(|(p, d)| (p.to_string(), Entry::new(Mode::File, d.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn one_sided_changes_merge_cleanly() {
        let base = tree(&[("a.txt", "1\n"), ("b.txt", "2\n"), ("c.txt", "3\n")]);
        let ours = tree(&[("a.txt", "1 ours\n"), ("b.txt", "2\n"), ("c.txt", "3\n")]);
        let theirs = tree(&[("a.txt", "1\n"), ("c.txt", "3\n"), ("d.txt", "4\n")]);
        let m = merge(&base, &ours, &theirs, &mut Rng::new(0));
        assert_eq!(m.conflicts, 0);
        assert_eq!(
            m.tree,
            tree(&[("a.txt", "1 ours\n"), ("c.txt", "3\n"), ("d.txt", "4\n")])
        );
    }

    #[test]
    fn two_sided_changes_conflict() {
        let base = tree(&[("a.txt", "1\n")]);
        let ours = tree(&[("a.txt", "ours\n")]);
        let theirs = tree(&[("a.txt", "theirs\n")]);
        let m = merge(&base, &ours, &theirs, &mut Rng::new(0));
        assert_eq!(m.conflicts, 1);
        assert!(m.tree.contains_key("a.txt"));
    }

    #[test]
    fn diff_lists_deletes_then_modifications() {
        let from = tree(&[("a.txt", "1\n"), ("b.txt", "2\n")]);
        let to = tree(&[("b.txt", "2 changed\n"), ("c.txt", "3\n")]);
        let d = diff(&from, &to);
        assert!(matches!(d[0], Change::Delete("a.txt")));
        assert!(matches!(d[1], Change::Modify("b.txt", _)));
        assert!(matches!(d[2], Change::Modify("c.txt", _)));
        assert_eq!(d.len(), 3);
    }
}
