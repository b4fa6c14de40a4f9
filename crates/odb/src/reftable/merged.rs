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
/// The sources not at their end are kept ordered by (current name, place in
/// the stack); a step moves the first one (and any at the same name) on and
/// puts it back in order, comparing from the smallest name up. While one
/// table holds a run of the next names, as the bottom table holds most of
/// them, a step is one comparison; otherwise a few (a stack holds about
/// log2(refs) tables). Nothing is allocated or copied per step.
pub struct MergedRefs<'a> {
    sources: Vec<Box<dyn RefCursor + 'a>>,
    /// Sources not at their end, in descending (name, place) order: the
    /// last one is the winner.
    order: Vec<usize>,
    keep_deletions: bool,
    /// Names from here on are past the walk ([`MergedRefs::until`]).
    end: Option<Vec<u8>>,
}

impl<'a> MergedRefs<'a> {
    /// Merges `sources`, newest first. Not positioned: call
    /// [`RefCursor::seek`] (`seek(b"")` for a full walk).
    pub fn new(sources: Vec<Box<dyn RefCursor + 'a>>) -> Self {
        MergedRefs {
            order: Vec::with_capacity(sources.len()),
            sources,
            keep_deletions: false,
            end: None,
        }
    }

    /// The same merge, ending before the first name not less than `end`
    /// (`None`: at the sources' end). A walk of a prefix ends at
    /// [`super::prefix_end`] of it, so that a run of deletion records past
    /// the prefix is never stepped through: after deleting a range of
    /// refs, a lookup below one of them costs a seek, not the range.
    pub fn until(mut self, end: Option<Vec<u8>>) -> Self {
        self.end = end;
        self
    }

    /// True when `name` is past the walk.
    fn past_end(&self, name: &[u8]) -> bool {
        self.end.as_deref().is_some_and(|e| name >= e)
    }

    /// The same merge, yielding deletion records that win instead of
    /// hiding them.
    pub fn keeping_deletions(mut self) -> Self {
        self.keep_deletions = true;
        self
    }

    fn name(&self, i: usize) -> &[u8] {
        self.sources[i].current().map_or(&[], |(n, _)| n)
    }

    /// True when source `a`'s record comes before source `b`'s: a smaller
    /// name, or the same name in a newer source.
    fn before(&self, a: usize, b: usize) -> bool {
        match self.name(a).cmp(self.name(b)) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => a < b,
        }
    }

    /// Puts source `i` back in order, unless it is at its end.
    fn put_back(&mut self, i: usize) {
        if self.sources[i].current().is_none() {
            return;
        }
        let mut at = self.order.len();
        while at > 0 && self.before(self.order[at - 1], i) {
            at -= 1;
        }
        self.order.insert(at, i);
    }

    /// Moves the winner and every source at the same name past it.
    fn step(&mut self) -> Result<()> {
        let Some(first) = self.order.pop() else {
            return Ok(());
        };
        while let Some(&next) = self.order.last() {
            if self.name(next) != self.name(first) {
                break;
            }
            self.order.pop();
            self.sources[next].advance()?;
            self.put_back(next);
        }
        self.sources[first].advance()?;
        self.put_back(first);
        Ok(())
    }

    /// Steps past names whose newest record is a deletion (unless they are
    /// kept).
    fn settle(&mut self) -> Result<()> {
        if self.keep_deletions {
            return Ok(());
        }
        while let Some((_, value)) = self.current() {
            if !value.is_deletion() {
                break;
            }
            // `current` stops at the end: deletions past it are left unread
            self.step()?;
        }
        Ok(())
    }
}

impl RefCursor for MergedRefs<'_> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for s in &mut self.sources {
            s.seek(target)?;
        }
        self.order.clear();
        for i in (0..self.sources.len()).rev() {
            self.put_back(i);
        }
        self.settle()
    }

    fn advance(&mut self) -> Result<()> {
        self.step()?;
        self.settle()
    }

    fn current(&self) -> Option<(&[u8], RefValue)> {
        self.order
            .last()
            .and_then(|&i| self.sources[i].current())
            .filter(|(name, _)| !self.past_end(name))
    }
}
