//! Walking a stack of ref sources (tables and an inline part) as one sorted
//! sequence: for each name the newest source's record wins, and a deletion
//! record hides the name.

use super::{Cursor, RefValue, Result};

/// A sorted source of ref records that can seek: a table's [`Cursor`], a
/// [`SliceCursor`] over records in memory, or a [`MergedRefs`].
pub trait RefCursor {
    /// Moves to the first record whose name is not less than `target`.
    ///
    /// # Errors
    /// When the source cannot be read (see [`super::ReftableError`]).
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Moves to the next record.
    ///
    /// # Errors
    /// As [`RefCursor::seek`].
    fn advance(&mut self) -> Result<()>;
    /// The current record, `None` past the end.
    fn current(&self) -> Option<(&[u8], RefValue)>;
}

impl RefCursor for Cursor<'_> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        Cursor::seek(self, target)
    }
    fn advance(&mut self) -> Result<()> {
        Cursor::advance(self)
    }
    fn current(&self) -> Option<(&[u8], RefValue)> {
        Cursor::current(self)
    }
}

/// A cursor over records in memory, sorted by name with no repeats (the
/// inline part of a state).
pub struct SliceCursor<'a, N> {
    records: &'a [(N, RefValue)],
    pos: usize,
}

impl<'a, N: AsRef<[u8]>> SliceCursor<'a, N> {
    /// A cursor over `records`, which must be sorted by name; before the
    /// first [`RefCursor::seek`] it stands at the first record.
    pub fn new(records: &'a [(N, RefValue)]) -> Self {
        SliceCursor { records, pos: 0 }
    }
}

impl<N: AsRef<[u8]>> RefCursor for SliceCursor<'_, N> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self.records.partition_point(|(n, _)| n.as_ref() < target);
        Ok(())
    }
    fn advance(&mut self) -> Result<()> {
        self.pos = (self.pos + 1).min(self.records.len());
        Ok(())
    }
    fn current(&self) -> Option<(&[u8], RefValue)> {
        self.records.get(self.pos).map(|(n, v)| (n.as_ref(), *v))
    }
}

/// Several sources, newest first, read as one: each name once, with the
/// value of the newest source that has a record for it. Deletion records
/// hide their names unless [`MergedRefs::keeping_deletions`] (what a merge
/// of tables above the bottom of the stack writes out).
///
/// Each step compares the sources' current names (a stack holds about
/// log2(refs) tables) and copies one name into a buffer it reuses.
pub struct MergedRefs<'a> {
    sources: Vec<Box<dyn RefCursor + 'a>>,
    winner: Option<usize>,
    keep_deletions: bool,
    key: Vec<u8>,
}

impl<'a> MergedRefs<'a> {
    /// Merges `sources`, newest first. Not positioned: call
    /// [`RefCursor::seek`] (`seek(b"")` for a full walk).
    pub fn new(sources: Vec<Box<dyn RefCursor + 'a>>) -> Self {
        MergedRefs {
            sources,
            winner: None,
            keep_deletions: false,
            key: Vec::new(),
        }
    }

    /// The same merge, yielding deletion records that win instead of
    /// hiding them.
    pub fn keeping_deletions(mut self) -> Self {
        self.keep_deletions = true;
        self
    }

    /// Steps every source standing at `self.key` past it.
    fn skip_key(&mut self) -> Result<()> {
        for s in &mut self.sources {
            if s.current().is_some_and(|(n, _)| n == self.key.as_slice()) {
                s.advance()?;
            }
        }
        Ok(())
    }

    /// Picks the winner among the sources' current records, stepping past
    /// names whose newest record is a deletion (unless they are kept).
    fn settle(&mut self) -> Result<()> {
        loop {
            let mut best: Option<(usize, &[u8], RefValue)> = None;
            for (i, s) in self.sources.iter().enumerate() {
                if let Some((name, value)) = s.current() {
                    if best.is_none_or(|(_, b, _)| name < b) {
                        best = Some((i, name, value));
                    }
                }
            }
            let Some((i, name, value)) = best else {
                self.winner = None;
                return Ok(());
            };
            if self.keep_deletions || !value.is_deletion() {
                self.winner = Some(i);
                return Ok(());
            }
            self.key.clear();
            self.key.extend_from_slice(name);
            self.skip_key()?;
        }
    }
}

impl RefCursor for MergedRefs<'_> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for s in &mut self.sources {
            s.seek(target)?;
        }
        self.settle()
    }

    fn advance(&mut self) -> Result<()> {
        let Some(i) = self.winner else {
            return Ok(());
        };
        let Some((name, _)) = self.sources[i].current() else {
            return Ok(());
        };
        self.key.clear();
        self.key.extend_from_slice(name);
        self.skip_key()?;
        self.settle()
    }

    fn current(&self) -> Option<(&[u8], RefValue)> {
        self.winner.and_then(|i| self.sources[i].current())
    }
}
