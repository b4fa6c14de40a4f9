//! Reading the refs of a state: [`Refs`] merges the inline part of a
//! [`RefSet`] with its ref tables ([`crate::reftable`]), newest first, so
//! that a lookup or a ref-prefix walk reads the blocks it needs, never
//! every ref. Tables are opened through [`crate::Repository::refs`], which
//! reads them by range from the store and keeps their blocks in the index
//! cache (see `docs/plans/0010-refs-at-scale.md`).

use std::collections::BTreeMap;
use std::sync::Arc;

use gix_hash::ObjectId;

use crate::reftable::{
    prefix_end, MergedRefs, RefCursor, RefValue, ReftableError, SliceCursor, Table, TableWriter,
};
use crate::state::RefSet;

/// A view of the refs of one state: the inline part and the opened tables.
/// Cheap to build for a state without tables (no I/O).
pub struct Refs<'s> {
    set: &'s RefSet,
    /// Opened tables, newest first.
    tables: Vec<Arc<Table>>,
}

/// Reading refs fails with [`crate::Error::RefRead`] when a table cannot be
/// read or is corrupt.
pub type RefsResult<T> = crate::Result<T>;

fn utf8(name: &[u8]) -> RefsResult<&str> {
    std::str::from_utf8(name).map_err(|_| ReftableError::Corrupt("ref name is not UTF-8").into())
}

impl<'s> Refs<'s> {
    /// The view of `set` whose tables are `tables`, newest first (as
    /// [`crate::Repository::refs`] opens them).
    pub fn new(set: &'s RefSet, tables: Vec<Arc<Table>>) -> Self {
        Refs { set, tables }
    }

    /// The view of a set without tables.
    ///
    /// # Panics
    /// Never: a set with tables is read as if it had none only in tests
    /// (debug builds assert it has none).
    pub fn inline(set: &'s RefSet) -> Self {
        debug_assert!(set.tables.is_empty(), "a set with tables needs its store");
        Refs {
            set,
            tables: Vec::new(),
        }
    }

    /// Live refs in all.
    pub fn len(&self) -> u64 {
        self.set.count
    }

    /// True when there are no refs.
    pub fn is_empty(&self) -> bool {
        self.set.count == 0
    }

    /// The value of ref `name` (never [`RefValue::Deleted`]), or `None`.
    /// Reads at most one block path in each table until a record is found.
    ///
    /// # Errors
    /// A table could not be read or is corrupt.
    pub fn get(&self, name: &str) -> RefsResult<Option<RefValue>> {
        if let Some(v) = self.set.recent_get(name) {
            return Ok(v.oid().map(|_| v));
        }
        for t in &self.tables {
            if let Some(v) = t.get(name.as_bytes())? {
                return Ok(v.oid().map(|_| v));
            }
        }
        Ok(None)
    }

    /// The oid of ref `name`, or `None`.
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn oid(&self, name: &str) -> RefsResult<Option<ObjectId>> {
        Ok(self.get(name)?.and_then(|v| v.oid()))
    }

    /// True when ref `name` exists.
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn contains(&self, name: &str) -> RefsResult<bool> {
        Ok(self.get(name)?.is_some())
    }

    /// A walk of the refs whose names start with `prefix` (every ref for
    /// `""`), in name order. A full walk reads tables in large windows, a
    /// prefix walk block by block.
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn walk(&self, prefix: &str) -> RefsResult<RefWalk<'_>> {
        let mut merged =
            MergedRefs::new(self.sources(prefix.is_empty())).until(prefix_end(prefix.as_bytes()));
        merged.seek(prefix.as_bytes())?;
        Ok(RefWalk {
            merged,
            prefix: prefix.as_bytes().to_vec(),
            started: false,
        })
    }

    /// Cursors over the inline part and every table, newest first: the
    /// tables' reading in large windows (`scan`, for long walks) or block by
    /// block.
    fn sources(&self, scan: bool) -> Vec<Box<dyn RefCursor + '_>> {
        let mut sources: Vec<Box<dyn RefCursor + '_>> = Vec::with_capacity(self.tables.len() + 1);
        sources.push(Box::new(SliceCursor::new(&self.set.recent)));
        for t in &self.tables {
            sources.push(Box::new(if scan { t.scan() } else { t.cursor() }));
        }
        sources
    }

    /// A merge of the inline part and every table, standing at its first
    /// record: what a merge of tables copies. With `keep_deletions`, the
    /// deletion records that win are yielded too (a table with older ones
    /// below it needs them).
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn merged_walk(&self, keep_deletions: bool) -> RefsResult<MergedRefs<'_>> {
        let mut merged = MergedRefs::new(self.sources(true));
        if keep_deletions {
            merged = merged.keeping_deletions();
        }
        merged.seek(b"")?;
        Ok(merged)
    }

    /// Calls `f` with every ref under `prefix`, in name order.
    ///
    /// # Errors
    /// As [`Refs::get`], or `f`'s.
    pub fn for_each(
        &self,
        prefix: &str,
        mut f: impl FnMut(&str, RefValue) -> RefsResult<()>,
    ) -> RefsResult<()> {
        let mut walk = self.walk(prefix)?;
        while let Some((name, value)) = walk.next()? {
            f(name, value)?;
        }
        Ok(())
    }

    /// True when a ref below `dir/` exists that `excluded` does not rule
    /// out: one seek, then as many records as `excluded` skips.
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn any_below(&self, dir: &str, excluded: &dyn Fn(&str) -> bool) -> RefsResult<bool> {
        let below = format!("{dir}/");
        let mut walk = self.walk(&below)?;
        while let Some((name, _)) = walk.next()? {
            if !excluded(name) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every ref, as a map (for maintenance and checks that visit every
    /// ref anyway; request paths walk instead).
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn to_map(&self) -> RefsResult<BTreeMap<String, RefValue>> {
        let mut out = BTreeMap::new();
        self.for_each("", |name, value| {
            out.insert(name.to_owned(), value);
            Ok(())
        })?;
        Ok(out)
    }

    /// Every ref's oid (with repeats), for walks that start from every tip.
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn tips(&self) -> RefsResult<Vec<ObjectId>> {
        let mut out = Vec::with_capacity(usize::try_from(self.len()).unwrap_or(0));
        self.for_each("", |_, value| {
            out.extend(value.oid());
            Ok(())
        })?;
        Ok(out)
    }

    /// The oid HEAD resolves to through `head` (its target), if that ref exists.
    ///
    /// # Errors
    /// As [`Refs::get`].
    pub fn head_oid(&self, head: Option<&str>) -> RefsResult<Option<ObjectId>> {
        match head {
            Some(h) => self.oid(h),
            None => Ok(None),
        }
    }
}

/// A walk over a [`Refs`] view in name order, bounded by a prefix; it can
/// jump ahead ([`RefWalk::skip_to`]) to leave a namespace out with one seek.
pub struct RefWalk<'r> {
    merged: MergedRefs<'r>,
    prefix: Vec<u8>,
    started: bool,
}

impl RefWalk<'_> {
    /// The next ref under the prefix, or `None` at the end.
    ///
    /// # Errors
    /// A table could not be read or is corrupt.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> RefsResult<Option<(&str, RefValue)>> {
        if self.started {
            self.merged.advance()?;
        }
        self.started = true;
        // the merge ends at the prefix's end, so every name it yields from
        // the prefix on is under it
        match self.merged.current() {
            Some((name, value)) => Ok(Some((utf8(name)?, value))),
            None => Ok(None),
        }
    }

    /// Moves so that the next ref returned is the first at or after
    /// `target` (a name past the prefix ends the walk).
    ///
    /// # Errors
    /// As [`RefWalk::next`].
    pub fn skip_to(&mut self, target: &[u8]) -> RefsResult<()> {
        self.merged.seek(target.max(self.prefix.as_slice()))?;
        self.started = false;
        Ok(())
    }
}

/// The bytes of a ref table of a repository of object format `format`
/// holding what `cursor` yields from where it stands to its end (names
/// strictly increasing), and its record count: copied name by name, never
/// collected.
///
/// # Errors
/// [`ReftableError::Unsorted`], [`ReftableError::NameTooLong`] or
/// [`ReftableError::HashWidth`], or the cursor's read errors.
pub fn encode_cursor(
    cursor: &mut dyn RefCursor,
    format: gix_hash::Kind,
) -> crate::reftable::Result<(Vec<u8>, u64)> {
    let mut w = TableWriter::new(Vec::new(), format)?;
    while let Some((name, value)) = cursor.current() {
        w.add(name, value)?;
        cursor.advance()?;
    }
    let (bytes, summary) = w.finish()?;
    Ok((bytes, summary.records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::RefTableRef;

    fn oid(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    fn table(records: &[(&str, RefValue)]) -> Arc<Table> {
        let (bytes, _) =
            encode_cursor(&mut SliceCursor::new(records), gix_hash::Kind::Sha1).unwrap();
        let len = bytes.len() as u64;
        Arc::new(Table::open(Arc::new(bytes), len).unwrap())
    }

    #[test]
    fn inline_part_wins_and_deletions_hide() {
        let bottom = table(&[
            ("refs/heads/a", RefValue::Oid(oid(1))),
            ("refs/heads/b", RefValue::Oid(oid(2))),
            ("refs/heads/c/d", RefValue::Oid(oid(3))),
        ]);
        let top = table(&[
            ("refs/heads/a", RefValue::Deleted),
            ("refs/heads/e", RefValue::Oid(oid(5))),
        ]);
        let mut set = RefSet {
            tables: vec![
                RefTableRef {
                    id: "bottom".into(),
                    records: 3,
                    bytes: 0,
                },
                RefTableRef {
                    id: "top".into(),
                    records: 2,
                    bytes: 0,
                },
            ],
            recent: Vec::new(),
            count: 3,
        };
        set.update("refs/heads/b", RefValue::Oid(oid(9)), true);
        set.update("refs/heads/c/d", RefValue::Deleted, true);
        set.update("refs/heads/f", RefValue::Oid(oid(6)), false);
        let refs = Refs::new(&set, vec![top, bottom]);
        assert_eq!(refs.len(), 3);
        assert_eq!(refs.oid("refs/heads/a").unwrap(), None);
        assert_eq!(refs.oid("refs/heads/b").unwrap(), Some(oid(9)));
        assert_eq!(refs.oid("refs/heads/c/d").unwrap(), None);
        assert_eq!(refs.oid("refs/heads/e").unwrap(), Some(oid(5)));
        let all: Vec<String> = refs.to_map().unwrap().into_keys().collect();
        assert_eq!(all, ["refs/heads/b", "refs/heads/e", "refs/heads/f"]);
        assert!(!refs.any_below("refs/heads/c", &|_| false).unwrap());
        assert!(refs.any_below("refs/heads", &|_| false).unwrap());
        assert!(!refs.any_below("refs/heads", &|_| true).unwrap());
        // A walk bounded by a prefix, with a jump past a namespace.
        let mut walk = refs.walk("refs/heads/").unwrap();
        assert_eq!(walk.next().unwrap().unwrap().0, "refs/heads/b");
        walk.skip_to(b"refs/heads/f").unwrap();
        assert_eq!(walk.next().unwrap().unwrap().0, "refs/heads/f");
        assert!(walk.next().unwrap().is_none());
        assert_eq!(refs.tips().unwrap().len(), 3);
    }
}
