//! The history itself: which branch gets the next commit, what each commit
//! changes, when branches merge, where tags go. Everything is decided by the
//! seeded [`Rng`], so a seed names one history.

use std::io::{self, Write};

use crate::content::{self, DIRS};
use crate::fast_import::{Commit, Ident, Stream};
use crate::rng::Rng;
use crate::tree::{self, Entry, Mode, Tree};
use crate::{Options, Summary};

/// The first commit's time (2020-09-13); every later commit is later.
const EPOCH: u64 = 1_600_000_000;

const AUTHORS: &[(&str, &str, &str)] = &[
    ("Ada Lovelace", "ada@example.com", "+0000"),
    ("Grace Hopper", "grace@example.org", "-0500"),
    ("Chloé Dupont", "chloe@example.net", "+0200"),
    ("Rahul Iyer", "rahul@example.in", "+0530"),
];
const COMMITTER: (&str, &str) = ("gitstow histgen", "histgen@example.com");

/// Names of the branches after `main`, in order of use; more are `topic/<n>`.
const BRANCH_NAMES: &[&str] = &[
    "dev",
    "feature/parser",
    "feature/net/http2",
    "fix/overflow",
    "release/1.x",
];

/// Files of the root commit that stay (at their paths, with their modes) for
/// the whole history: every snapshot has a text file, an executable, a
/// binary and symlinks whose targets exist.
const FIXED: &[&str] = &[
    "README.md",
    "docs/read me.md",
    "docs/ünïcödé.txt",
    "scripts/build.sh",
    "src/main.rs",
    "assets/img/logo.png",
];

fn fixed(path: &str) -> bool {
    FIXED.contains(&path)
}

struct Branch {
    name: String,
    refname: String,
    /// Mark of the tip commit; `None` until the branch's first commit.
    tip: Option<usize>,
    tree: Tree,
    /// Tree of the merge base with `main` (feature branches only).
    base: Tree,
    /// Commits on the branch that `main` has not merged yet.
    ahead: usize,
}

/// Generator state while the stream is written.
pub(crate) struct History<'o, W: Write> {
    opts: &'o Options,
    rng: Rng,
    stream: Stream<W>,
    branches: Vec<Branch>,
    next_mark: usize,
    time: u64,
    /// Counter that keeps generated paths unique.
    serial: usize,
    summary: Summary,
}

impl<'o, W: Write> History<'o, W> {
    pub(crate) fn new(opts: &'o Options, out: W) -> io::Result<Self> {
        let count = opts.branches.max(1);
        let branches = (0..count)
            .map(|i| {
                let name = match i {
                    0 => "main".to_owned(),
                    i if i <= BRANCH_NAMES.len() => BRANCH_NAMES[i - 1].to_owned(),
                    i => format!("topic/{i}"),
                };
                Branch {
                    refname: format!("refs/heads/{name}"),
                    name,
                    tip: None,
                    tree: Tree::new(),
                    base: Tree::new(),
                    ahead: 0,
                }
            })
            .collect();
        Ok(History {
            opts,
            rng: Rng::new(opts.seed),
            stream: Stream::new(out)?,
            branches,
            next_mark: 1,
            time: EPOCH,
            serial: 0,
            summary: Summary {
                commits: 0,
                tags: 0,
                branches: Vec::new(),
                merges: 0,
                renames: 0,
            },
        })
    }

    /// Writes the whole history and returns the writer and the summary.
    pub(crate) fn run(mut self) -> io::Result<(W, Summary)> {
        let total = self.opts.commits;
        if total > 0 {
            self.root_commit()?;
        }
        for i in 1..total {
            let merged = if every(self.opts.merge_every, i) {
                self.merge(i)?
            } else {
                false
            };
            if !merged {
                let b = if self.branches.len() == 1 || self.rng.one_in(2) {
                    0
                } else {
                    self.rng.between(1, self.branches.len() - 1)
                };
                self.regular_commit(b, i)?;
            }
            if every(self.opts.tag_every, i) {
                self.tag()?;
            }
        }
        self.summary.branches = self
            .branches
            .iter()
            .filter(|b| b.tip.is_some())
            .map(|b| b.name.clone())
            .collect();
        let out = self.stream.finish()?;
        Ok((out, self.summary))
    }

    fn mark(&mut self) -> usize {
        let m = self.next_mark;
        self.next_mark += 1;
        m
    }

    fn serial(&mut self) -> usize {
        self.serial += 1;
        self.serial
    }

    /// Advances the clock and returns (author, committer) for the next commit.
    fn idents(&mut self) -> (Ident<'static>, Ident<'static>) {
        self.time += self.rng.between(30, 7200) as u64;
        let (name, email, tz) = *self.rng.pick(AUTHORS);
        (
            Ident {
                name,
                email,
                time: self.time,
                tz,
            },
            Ident {
                name: COMMITTER.0,
                email: COMMITTER.1,
                time: self.time,
                tz: "+0000",
            },
        )
    }

    fn root_commit(&mut self) -> io::Result<()> {
        let rng = &mut self.rng;
        let mut t = Tree::new();
        t.insert(
            "README.md".into(),
            Entry::new(Mode::File, content::new_text(rng, "md", 20)),
        );
        t.insert(
            "docs/read me.md".into(),
            Entry::new(Mode::File, content::new_text(rng, "md", 8)),
        );
        t.insert(
            "docs/ünïcödé.txt".into(),
            Entry::new(Mode::File, content::new_text(rng, "txt", 5)),
        );
        t.insert(
            "scripts/build.sh".into(),
            Entry::new(Mode::Exec, content::new_text(rng, "sh", 12)),
        );
        t.insert(
            "src/main.rs".into(),
            Entry::new(Mode::File, content::new_text(rng, "rs", 40)),
        );
        t.insert(
            "docs/latest.md".into(),
            Entry::new(Mode::Link, b"../README.md".to_vec()),
        );
        t.insert(
            "current".into(),
            Entry::new(Mode::Link, b"src/main.rs".to_vec()),
        );
        if self.opts.large_blob_bytes > 0 {
            let logo = content::new_binary(rng, self.opts.large_blob_bytes);
            t.insert("assets/img/logo.png".into(), Entry::new(Mode::File, logo));
        }
        while t.len() < self.opts.files.min(16) {
            self.add_text(&mut t);
        }
        let (author, committer) = self.idents();
        let mark = self.mark();
        let empty = Tree::new();
        self.stream.commit(&Commit {
            refname: "refs/heads/main",
            mark,
            author,
            committer,
            message: "Initial import\n",
            from: None,
            merge: None,
            changes: tree::diff(&empty, &t),
        })?;
        let main = &mut self.branches[0];
        main.tip = Some(mark);
        main.tree = t;
        self.summary.commits += 1;
        Ok(())
    }

    fn add_text(&mut self, t: &mut Tree) -> String {
        let ext = *self.rng.pick(content::TEXT_EXTS);
        let n = self.serial();
        let path = content::new_path(&mut self.rng, n, ext);
        let lines = self.rng.between(3, 40);
        let data = content::new_text(&mut self.rng, ext, lines);
        let mode = if ext == "sh" { Mode::Exec } else { Mode::File };
        t.insert(path.clone(), Entry::new(mode, data));
        format!("Add {path}")
    }

    /// Paths (in tree order) of entries that satisfy `f`.
    fn paths(t: &Tree, f: impl Fn(&str, &Entry) -> bool) -> Vec<String> {
        t.iter()
            .filter(|(p, e)| f(p, e))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// One ordinary commit on branch `b`: a few edits and, on schedule,
    /// renames, copies, binary changes, symlinks, mode changes, deletions.
    fn regular_commit(&mut self, b: usize, i: usize) -> io::Result<()> {
        let parent = match self.branches[b].tip {
            Some(tip) => tip,
            None => {
                // a new branch starts at main's tip
                let main_tree = self.branches[0].tree.clone();
                let branch = &mut self.branches[b];
                branch.tree = main_tree.clone();
                branch.base = main_tree;
                self.branches[0].tip.expect("main has the root commit")
            }
        };
        let before = self.branches[b].tree.clone();
        let mut t = before.clone();
        let mut what = self.evolve(&mut t, i);
        if what.is_empty() || t == before {
            what.push(self.add_text(&mut t));
        }
        let mut message = what[0].clone();
        message.push('\n');
        if what.len() > 1 {
            message.push('\n');
            for w in &what[1..] {
                message.push_str(&format!("- {w}\n"));
            }
        }
        let (author, committer) = self.idents();
        let mark = self.mark();
        let branch = &self.branches[b];
        self.stream.commit(&Commit {
            refname: &branch.refname,
            mark,
            author,
            committer,
            message: &message,
            from: Some(parent),
            merge: None,
            changes: tree::diff(&before, &t),
        })?;
        let branch = &mut self.branches[b];
        branch.tip = Some(mark);
        branch.tree = t;
        branch.ahead += 1;
        self.summary.commits += 1;
        Ok(())
    }

    /// Applies this commit's changes to `t`; returns what was done, in words.
    fn evolve(&mut self, t: &mut Tree, i: usize) -> Vec<String> {
        let opts = self.opts;
        let mut what = Vec::new();
        let texts = Self::paths(t, |p, e| e.mode != Mode::Link && content::is_text(p));
        for _ in 0..self.rng.between(1, 3) {
            if texts.is_empty() {
                break;
            }
            let path = self.rng.pick(&texts).clone();
            let entry = &t[&path];
            let data = content::edit_text(&mut self.rng, content::ext_of(&path), &entry.data);
            let mode = entry.mode;
            t.insert(path.clone(), Entry::new(mode, data));
            what.push(format!("Update {path}"));
        }
        if t.len() < opts.files && self.rng.one_in(3) {
            what.push(self.add_text(t));
        }
        if every(opts.rename_every, i) {
            let movable = Self::paths(t, |p, e| e.mode != Mode::Link && !fixed(p));
            if !movable.is_empty() {
                let from = self.rng.pick(&movable).clone();
                let mut entry = t.remove(&from).expect("picked from the tree");
                let n = self.serial();
                let to = content::new_path(&mut self.rng, n, content::ext_of(&from));
                if content::is_text(&from) && self.rng.one_in(2) {
                    let data =
                        content::edit_text(&mut self.rng, content::ext_of(&from), &entry.data);
                    entry = Entry::new(entry.mode, data);
                }
                t.insert(to.clone(), entry);
                what.push(format!("Rename {from} to {to}"));
                self.summary.renames += 1;
            }
            if t.len() < opts.files + 4 && self.rng.one_in(4) {
                let texts = Self::paths(t, |p, e| e.mode != Mode::Link && content::is_text(p));
                if !texts.is_empty() {
                    let from = self.rng.pick(&texts).clone();
                    let entry = t[&from].clone();
                    let n = self.serial();
                    let to = content::new_path(&mut self.rng, n, content::ext_of(&from));
                    t.insert(to.clone(), entry);
                    what.push(format!("Copy {from} to {to}"));
                }
            }
        }
        if opts.large_blob_bytes > 0 && every(opts.binary_every, i) {
            let binaries = Self::paths(t, |p, e| {
                e.mode != Mode::Link && content::BINARY_EXTS.contains(&content::ext_of(p))
            });
            if binaries.is_empty() || (binaries.len() < 1 + opts.files / 8 && self.rng.one_in(3)) {
                let ext = *self.rng.pick(content::BINARY_EXTS);
                let n = self.serial();
                let path = content::new_path(&mut self.rng, n, ext);
                let len = self.rng.between(256, opts.large_blob_bytes.max(256));
                let data = content::new_binary(&mut self.rng, len);
                t.insert(path.clone(), Entry::new(Mode::File, data));
                what.push(format!("Add binary {path}"));
            } else {
                let path = self.rng.pick(&binaries).clone();
                let data =
                    content::edit_binary(&mut self.rng, &t[&path].data, opts.large_blob_bytes);
                t.insert(path.clone(), Entry::new(Mode::File, data));
                what.push(format!("Tweak binary {path}"));
            }
        }
        if self.rng.one_in(25) {
            let links = Self::paths(t, |_, e| e.mode == Mode::Link);
            let targets = Self::paths(t, |_, e| e.mode != Mode::Link);
            if !targets.is_empty() {
                let target = self.rng.pick(&targets).clone();
                let full = links.len() > opts.files / 10;
                let link = if !links.is_empty() && (full || self.rng.one_in(2)) {
                    self.rng.pick(&links).clone()
                } else {
                    let dir = *self.rng.pick(DIRS);
                    let n = self.serial();
                    let name = format!("alias_{n}.lnk");
                    if dir.is_empty() {
                        name
                    } else {
                        format!("{dir}/{name}")
                    }
                };
                let rel = content::relative_target(&link, &target);
                t.insert(link.clone(), Entry::new(Mode::Link, rel.into_bytes()));
                what.push(format!("Point {link} at {target}"));
            }
        }
        if self.rng.one_in(50) {
            let scripts = Self::paths(t, |p, e| {
                e.mode != Mode::Link && p.ends_with(".sh") && !fixed(p)
            });
            if !scripts.is_empty() {
                let path = self.rng.pick(&scripts).clone();
                let e = t.get_mut(&path).expect("picked from the tree");
                e.mode = if e.mode == Mode::Exec {
                    Mode::File
                } else {
                    Mode::Exec
                };
                what.push(format!("chmod {path}"));
            }
        }
        // merges bring the files of every branch together: prune back to size
        let over = t.len() > opts.files + 4;
        if t.len() > opts.files / 2 + 4 && self.rng.one_in(if over { 4 } else { 30 }) {
            let all = Self::paths(t, |p, e| e.mode != Mode::Link && !fixed(p));
            if !all.is_empty() {
                let path = self.rng.pick(&all).clone();
                t.remove(&path);
                what.push(format!("Remove {path}"));
            }
        }
        what
    }

    /// A merge commit, scheduled at commit `i`: usually a feature branch into
    /// `main`, sometimes `main` into a feature branch. Returns false (and
    /// writes nothing) when no branch has anything to merge.
    fn merge(&mut self, _i: usize) -> io::Result<bool> {
        let ready: Vec<usize> = (1..self.branches.len())
            .filter(|&b| self.branches[b].tip.is_some() && self.branches[b].ahead > 0)
            .collect();
        if ready.is_empty() {
            return Ok(false);
        }
        let b = *self.rng.pick(&ready);
        let main_moved = self.branches[0].tree != self.branches[b].base;
        let into_main = !(main_moved && self.rng.one_in(4));
        let (target, source) = if into_main { (0, b) } else { (b, 0) };
        let merged = tree::merge(
            &self.branches[b].base,
            &self.branches[target].tree,
            &self.branches[source].tree,
            &mut self.rng,
        );
        let mut message = if into_main {
            format!("Merge branch '{}'\n", self.branches[b].name)
        } else {
            format!("Merge branch 'main' into {}\n", self.branches[b].name)
        };
        if merged.conflicts > 0 {
            message.push_str(&format!(
                "\nResolved {} conflicting file(s) by choosing content.\n",
                merged.conflicts
            ));
        }
        let (author, committer) = self.idents();
        let mark = self.mark();
        let (tgt, src) = (&self.branches[target], &self.branches[source]);
        self.stream.commit(&Commit {
            refname: &tgt.refname,
            mark,
            author,
            committer,
            message: &message,
            from: tgt.tip,
            merge: src.tip,
            changes: tree::diff(&tgt.tree, &merged.tree),
        })?;
        self.summary.commits += 1;
        self.summary.merges += 1;
        if into_main {
            let main = &mut self.branches[0];
            main.tip = Some(mark);
            main.tree = merged.tree.clone();
            let fast_forward = self.rng.one_in(3);
            let branch = &mut self.branches[b];
            branch.ahead = 0;
            if fast_forward {
                // the branch moves up to the merge and goes on from there
                branch.tip = Some(mark);
                branch.tree = merged.tree.clone();
                branch.base = merged.tree;
                self.stream.reset(&self.branches[b].refname, mark)?;
            } else {
                branch.base = branch.tree.clone();
            }
        } else {
            let main_tree = self.branches[0].tree.clone();
            let branch = &mut self.branches[b];
            branch.tip = Some(mark);
            branch.tree = merged.tree;
            branch.base = main_tree;
            branch.ahead += 1;
        }
        Ok(true)
    }

    /// Tags the commit just written: annotated and lightweight in turn.
    fn tag(&mut self) -> io::Result<()> {
        let mark = self.next_mark - 1;
        let n = self.summary.tags;
        if n.is_multiple_of(2) {
            let name = format!("v1.{}", n / 2);
            let tagger = Ident {
                name: COMMITTER.0,
                email: COMMITTER.1,
                time: self.time + 1,
                tz: "+0000",
            };
            let message = format!("Release {name}\n\nChanges since the last release.\n");
            self.stream.annotated_tag(&name, mark, &tagger, &message)?;
        } else {
            self.stream
                .reset(&format!("refs/tags/snapshot/{}", n / 2), mark)?;
        }
        self.summary.tags += 1;
        Ok(())
    }
}

/// Whether event "every `n` commits" happens at commit `i` (never if n == 0).
fn every(n: usize, i: usize) -> bool {
    n != 0 && i.is_multiple_of(n)
}
