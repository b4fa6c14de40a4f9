//! Writing a `git fast-import` stream (see git-fast-import(1)): commits with
//! marks, inline file data, merges, annotated tags and `reset` for
//! lightweight tags.

use std::io::{self, Write};

use crate::tree::{Change, Entry};

/// An identity with a fixed timestamp: `Name <email> <seconds> <tz>`.
pub(crate) struct Ident<'a> {
    pub(crate) name: &'a str,
    pub(crate) email: &'a str,
    pub(crate) time: u64,
    pub(crate) tz: &'a str,
}

impl std::fmt::Display for Ident<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} <{}> {} {}",
            self.name, self.email, self.time, self.tz
        )
    }
}

/// A commit to write.
pub(crate) struct Commit<'a> {
    /// Full ref name, e.g. `refs/heads/main`.
    pub(crate) refname: &'a str,
    pub(crate) mark: usize,
    pub(crate) author: Ident<'a>,
    pub(crate) committer: Ident<'a>,
    pub(crate) message: &'a str,
    /// First parent (none for a root commit).
    pub(crate) from: Option<usize>,
    /// Second parent of a merge.
    pub(crate) merge: Option<usize>,
    pub(crate) changes: Vec<Change<'a>>,
}

/// A fast-import stream over any writer (in practice fast-import's stdin).
pub(crate) struct Stream<W: Write> {
    out: W,
}

impl<W: Write> Stream<W> {
    /// Starts a stream; it asks for the `done` feature so that a truncated
    /// stream is an error rather than a shorter history.
    pub(crate) fn new(mut out: W) -> io::Result<Self> {
        out.write_all(b"feature done\n")?;
        Ok(Stream { out })
    }

    fn data(&mut self, bytes: &[u8]) -> io::Result<()> {
        writeln!(self.out, "data {}", bytes.len())?;
        self.out.write_all(bytes)?;
        self.out.write_all(b"\n")
    }

    /// Writes one commit.
    pub(crate) fn commit(&mut self, c: &Commit<'_>) -> io::Result<()> {
        writeln!(self.out, "commit {}\nmark :{}", c.refname, c.mark)?;
        writeln!(self.out, "author {}\ncommitter {}", c.author, c.committer)?;
        self.data(c.message.as_bytes())?;
        if let Some(from) = c.from {
            writeln!(self.out, "from :{from}")?;
        }
        if let Some(merge) = c.merge {
            writeln!(self.out, "merge :{merge}")?;
        }
        for change in &c.changes {
            match change {
                Change::Delete(path) => writeln!(self.out, "D {}", quote(path))?,
                Change::Modify(path, Entry { mode, data }) => {
                    writeln!(self.out, "M {} inline {}", mode.octal(), quote(path))?;
                    self.data(data)?;
                }
            }
        }
        self.out.write_all(b"\n")
    }

    /// An annotated tag `refs/tags/<name>` pointing at the commit `mark`.
    pub(crate) fn annotated_tag(
        &mut self,
        name: &str,
        mark: usize,
        tagger: &Ident<'_>,
        message: &str,
    ) -> io::Result<()> {
        writeln!(self.out, "tag {name}\nfrom :{mark}\ntagger {tagger}")?;
        self.data(message.as_bytes())
    }

    /// Points `refname` at the commit `mark` (a lightweight tag, or a branch).
    pub(crate) fn reset(&mut self, refname: &str, mark: usize) -> io::Result<()> {
        writeln!(self.out, "reset {refname}\nfrom :{mark}\n")
    }

    /// Ends the stream and hands back the writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.out.write_all(b"done\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A path in fast-import's C-style quotes, which every path may use and paths
/// with spaces, quotes or newlines need.
fn quote(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    out.push('"');
    for ch in path.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Mode;

    #[test]
    fn commit_stream_text() {
        let entry = Entry::new(Mode::Exec, b"#!/bin/sh\n".to_vec());
        let mut s = Stream::new(Vec::new()).unwrap();
        s.commit(&Commit {
            refname: "refs/heads/main",
            mark: 2,
            author: Ident {
                name: "A",
                email: "a@x",
                time: 5,
                tz: "+0100",
            },
            committer: Ident {
                name: "C",
                email: "c@x",
                time: 6,
                tz: "+0000",
            },
            message: "msg\n",
            from: Some(1),
            merge: None,
            changes: vec![
                Change::Delete("old file.txt"),
                Change::Modify("run.sh", &entry),
            ],
        })
        .unwrap();
        let out = String::from_utf8(s.finish().unwrap()).unwrap();
        assert_eq!(
            out,
            "feature done\ncommit refs/heads/main\nmark :2\nauthor A <a@x> 5 +0100\n\
             committer C <c@x> 6 +0000\ndata 4\nmsg\n\nfrom :1\nD \"old file.txt\"\n\
             M 100755 inline \"run.sh\"\ndata 10\n#!/bin/sh\n\n\ndone\n"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("a b/\"c\"\\"), "\"a b/\\\"c\\\"\\\\\"");
    }
}
