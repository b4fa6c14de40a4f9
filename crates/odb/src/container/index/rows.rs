//! How a decoded index is held in memory: the oids' bytes in one array
//! (`width` bytes each: 20 for SHA-1), the rest of each entry in a 24-byte
//! [`Row`] beside it (44 bytes a SHA-1 object where an [`IndexEntry`] takes
//! 72), and the few entries whose values do not fit a row kept whole on the
//! side. The oids are bytes, not [`ObjectId`]s: an `ObjectId` is as large
//! as the widest object format built in (33 bytes once SHA-256 is), and a
//! SHA-1 index holds 20 an oid whatever else the build can read.
//!
//! Measured on git/git (419,403 objects): 30.2 MB of entries before, 18.5 MB
//! of oids and rows now; a lookup still touches the oid array during the
//! search and one row after it. A large index in a server's cache is then
//! written to a file and mapped ([`Rows::map`], [`crate::mapped`]): resident
//! memory holds the pages lookups touch.

use std::collections::HashMap;

use gix_hash::ObjectId;

use super::IndexEntry;
use crate::mapped::MapDir;

/// A row's `base` when the record is whole.
const NO_BASE: u32 = u32::MAX;
/// A row's `base` when the entry is kept whole in the side list: a value
/// does not fit (a record or object of 4 GiB or more, a chain deeper than
/// 65,535, a base outside the container, a row number this large).
const WIDE: u32 = u32::MAX - 1;

/// One entry without its oid: its record's place and its object's facts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Row {
    offset: u64,
    length: u32,
    size: u32,
    /// The row of the delta base in this container, [`NO_BASE`] or [`WIDE`].
    base: u32,
    depth: u16,
    /// `record_type << 4 | kind`.
    types: u8,
}

/// The entries of one container: oids sorted, rows in the same order, and the
/// entries that do not fit a row by row number.
#[derive(Debug)]
pub(super) struct Rows {
    columns: Columns,
    wide: Vec<(u32, IndexEntry)>,
    /// Bytes of an oid.
    width: usize,
}

impl Default for Rows {
    fn default() -> Self {
        Rows {
            columns: Columns::default(),
            wide: Vec::new(),
            width: SHA1_BYTES,
        }
    }
}

/// Bytes of a SHA-1 oid.
pub(super) const SHA1_BYTES: usize = 20;

/// The oids and rows: the oids' bytes back to back and the rows, or one
/// mapped file of the `n` oids' bytes followed by the `n` rows in
/// [`ROW_BYTES`] each ([`Rows::map`]).
enum Columns {
    Heap { oids: Vec<u8>, rows: Vec<Row> },
    Mapped { map: memmap2::Mmap, n: usize },
}

impl Default for Columns {
    fn default() -> Self {
        Columns::Heap {
            oids: Vec::new(),
            rows: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Columns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Columns::Heap { rows, .. } => write!(f, "Heap({} rows)", rows.len()),
            Columns::Mapped { n, .. } => write!(f, "Mapped({n} rows)"),
        }
    }
}

/// Bytes of a mapped row: offset u64 | length u32 | size u32 | base u32 |
/// depth u16 | types u8 | 0, little-endian.
const ROW_BYTES: usize = 24;

impl Row {
    fn to_bytes(self) -> [u8; ROW_BYTES] {
        let mut b = [0u8; ROW_BYTES];
        b[..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.length.to_le_bytes());
        b[12..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..20].copy_from_slice(&self.base.to_le_bytes());
        b[20..22].copy_from_slice(&self.depth.to_le_bytes());
        b[22] = self.types;
        b
    }

    fn from_bytes(b: &[u8]) -> Row {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Row {
            offset: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            length: u32_at(8),
            size: u32_at(12),
            base: u32_at(16),
            depth: u16::from_le_bytes([b[20], b[21]]),
            types: b[22],
        }
    }
}

impl Clone for Rows {
    /// A copy on the heap (a mapped index is read back into vectors).
    fn clone(&self) -> Self {
        let n = self.len();
        Rows {
            columns: Columns::Heap {
                oids: (0..n).flat_map(|i| self.oid_bytes(i)).copied().collect(),
                rows: (0..n).map(|i| self.row(i)).collect(),
            },
            wide: self.wide.clone(),
            width: self.width,
        }
    }
}

impl Rows {
    /// Number of rows.
    pub(super) fn len(&self) -> usize {
        match &self.columns {
            Columns::Heap { rows, .. } => rows.len(),
            Columns::Mapped { n, .. } => *n,
        }
    }

    /// Bytes of each oid (20 or 32).
    pub(super) fn width(&self) -> usize {
        self.width
    }

    /// The bytes of row `i`'s oid.
    ///
    /// # Panics
    /// When `i` is not below [`Rows::len`].
    #[inline]
    pub(super) fn oid_bytes(&self, i: usize) -> &[u8] {
        let w = self.width;
        match &self.columns {
            Columns::Heap { oids, .. } => &oids[i * w..i * w + w],
            Columns::Mapped { map, n } => {
                assert!(i < *n, "row {i} of {n}");
                &map[i * w..i * w + w]
            }
        }
    }

    /// Row `i`'s oid.
    pub(super) fn oid(&self, i: usize) -> ObjectId {
        ObjectId::from_bytes_or_panic(self.oid_bytes(i))
    }

    fn row(&self, i: usize) -> Row {
        match &self.columns {
            Columns::Heap { rows, .. } => rows[i],
            Columns::Mapped { map, n } => {
                assert!(i < *n, "row {i} of {n}");
                let at = n * self.width + i * ROW_BYTES;
                Row::from_bytes(&map[at..at + ROW_BYTES])
            }
        }
    }

    /// The entry of row `i`.
    ///
    /// # Panics
    /// When `i` is not below [`Rows::len`].
    pub(super) fn entry(&self, i: usize) -> IndexEntry {
        let r = self.row(i);
        if r.base == WIDE {
            let at = self
                .wide
                .binary_search_by_key(&(i as u32), |w| w.0)
                .expect("a wide row is in the side list");
            return self.wide[at].1;
        }
        narrow_entry(|j| self.oid(j), &r, i)
    }

    /// These rows mapped from a file in `dir` ([`MapDir::map`]); on the
    /// heap as they are when they are small or the file cannot be written.
    pub(super) fn map(self, dir: &MapDir) -> Rows {
        let Columns::Heap { oids, rows } = &self.columns else {
            return self;
        };
        let n = rows.len();
        let written = dir.map(oids.len() + n * ROW_BYTES, |w| {
            w.write_all(oids)?;
            for r in rows {
                w.write_all(&r.to_bytes())?;
            }
            Ok(())
        });
        match written {
            Some(map) => Rows {
                columns: Columns::Mapped { map, n },
                wide: self.wide,
                width: self.width,
            },
            None => self,
        }
    }

    /// [`crate::mapped::release`] of mapped oids and rows.
    pub(super) fn release_pages(&self) {
        if let Columns::Mapped { map, .. } = &self.columns {
            crate::mapped::release(map);
        }
    }

    /// Whether the oids and rows are mapped.
    pub(super) fn is_mapped(&self) -> bool {
        matches!(self.columns, Columns::Mapped { .. })
    }

    /// The rows kept whole in the side list.
    #[cfg(test)]
    pub(super) fn wide_rows(&self) -> Vec<u32> {
        self.wide.iter().map(|w| w.0).collect()
    }

    /// Bytes held on the heap, for tests and the figures above.
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        let columns = match &self.columns {
            Columns::Heap { oids, rows } => {
                oids.capacity() + rows.capacity() * std::mem::size_of::<Row>()
            }
            Columns::Mapped { .. } => 0,
        };
        columns + self.wide.capacity() * std::mem::size_of::<(u32, IndexEntry)>()
    }
}

/// The entry of narrow row `r` (row number `i`), `oid(j)` giving row `j`'s oid.
fn narrow_entry(oid: impl Fn(usize) -> ObjectId, r: &Row, i: usize) -> IndexEntry {
    IndexEntry {
        oid: oid(i),
        offset: r.offset,
        length: u64::from(r.length),
        record_type: r.types >> 4,
        kind: r.types & 0xf,
        size: u64::from(r.size),
        depth: u32::from(r.depth),
        base: (r.base != NO_BASE).then(|| oid(r.base as usize)),
    }
}

/// Fills [`Rows`] field by field (the decoder sets a column at a time): a
/// value that does not fit moves its entry to the side list, where later
/// fields are set too.
///
/// Fields are set by *slot*: slot `i` is row `i` ([`RowsBuilder::new`]) or
/// the row a permutation gives it ([`RowsBuilder::in_order`]: a version-2
/// index's columns come in record order). A column is then written front to
/// back, and [`RowsBuilder::finish`] moves each row to its place once, in
/// place: on git/git's 419,403-object index that is one random write a row
/// instead of one a field (five passes of cache misses over 10 MB).
pub(super) struct RowsBuilder {
    /// The oids' bytes, sorted, `width` each.
    oids: Vec<u8>,
    width: usize,
    /// The row of each slot, `None` when slot `i` is row `i`.
    row_of: Option<Vec<u32>>,
    /// Rows by slot.
    rows: Vec<Row>,
    /// Wide entries by slot.
    wide: HashMap<u32, IndexEntry>,
}

impl RowsBuilder {
    /// Rows for the oids `oids` holds (sorted, `width` bytes each), set by
    /// row; every field zero and every record whole.
    pub(super) fn new(oids: Vec<u8>, width: usize) -> Self {
        Self::build(oids, width, None)
    }

    /// [`RowsBuilder::new`], set by slot: slot `i` holds row `row_of[i]`.
    ///
    /// # Panics
    /// In [`RowsBuilder::finish`], when `row_of` is not a permutation of
    /// the rows (the decoder checks that first).
    pub(super) fn in_order(oids: Vec<u8>, width: usize, row_of: Vec<u32>) -> Self {
        debug_assert_eq!(oids.len(), row_of.len() * width);
        Self::build(oids, width, Some(row_of))
    }

    fn build(oids: Vec<u8>, width: usize, row_of: Option<Vec<u32>>) -> Self {
        let rows = vec![
            Row {
                base: NO_BASE,
                ..Row::default()
            };
            oids.len() / width
        ];
        RowsBuilder {
            oids,
            width,
            row_of,
            rows,
            wide: HashMap::new(),
        }
    }

    /// The bytes of row `row`'s oid.
    #[inline]
    pub(super) fn oid_bytes(&self, row: usize) -> &[u8] {
        &self.oids[row * self.width..(row + 1) * self.width]
    }

    /// Row `row`'s oid.
    pub(super) fn oid(&self, row: usize) -> ObjectId {
        ObjectId::from_bytes_or_panic(self.oid_bytes(row))
    }

    /// The row that slot `slot` holds.
    #[inline]
    pub(super) fn row_of(&self, slot: usize) -> usize {
        match &self.row_of {
            Some(rows) => rows[slot] as usize,
            None => slot,
        }
    }

    /// The record type of slot `slot` set so far.
    pub(super) fn record_type(&self, slot: usize) -> u8 {
        self.rows[slot].types >> 4
    }

    /// Slot `slot`'s entry in the side list, moved there on first use.
    fn widen(&mut self, slot: usize) -> &mut IndexEntry {
        let row = self.row_of(slot);
        let entry = narrow_entry(|j| self.oid(j), &self.rows[slot], row);
        self.wide.entry(slot as u32).or_insert(entry)
    }

    /// The wide entry of `slot` when its values do not all fit (`fits`).
    #[inline]
    fn wide_entry(&mut self, slot: usize, fits: bool) -> Option<&mut IndexEntry> {
        if fits && (self.wide.is_empty() || !self.wide.contains_key(&(slot as u32))) {
            None
        } else {
            Some(self.widen(slot))
        }
    }

    /// Sets the record's offset and length in the `.bin`.
    pub(super) fn set_place(&mut self, slot: usize, offset: u64, length: u64) {
        let narrow = u32::try_from(length).ok();
        self.rows[slot].offset = offset;
        self.rows[slot].length = narrow.unwrap_or(0);
        if let Some(e) = self.wide_entry(slot, narrow.is_some()) {
            (e.offset, e.length) = (offset, length);
        }
    }

    /// Sets the record type and the object kind (pack type ids).
    pub(super) fn set_types(&mut self, slot: usize, record_type: u8, kind: u8) {
        self.rows[slot].types = record_type << 4 | kind;
        if let Some(e) = self.wide_entry(slot, true) {
            (e.record_type, e.kind) = (record_type, kind);
        }
    }

    /// Sets the inflated size of the object.
    pub(super) fn set_size(&mut self, slot: usize, size: u64) {
        let narrow = u32::try_from(size).ok();
        self.rows[slot].size = narrow.unwrap_or(0);
        if let Some(e) = self.wide_entry(slot, narrow.is_some()) {
            e.size = size;
        }
    }

    /// Sets the delta chain depth.
    pub(super) fn set_depth(&mut self, slot: usize, depth: u32) {
        let narrow = u16::try_from(depth).ok();
        self.rows[slot].depth = narrow.unwrap_or(0);
        if let Some(e) = self.wide_entry(slot, narrow.is_some()) {
            e.depth = depth;
        }
    }

    /// Sets the delta base: `base`, found at row `at` of this container or
    /// (`None`) outside it.
    pub(super) fn set_base(&mut self, slot: usize, base: ObjectId, at: Option<usize>) {
        self.put_base(slot, at, |_| base);
    }

    /// Sets the delta base to row `at` of this container; its oid is read
    /// only when the entry is wide (a base's oid is a cache miss a delta
    /// in a large index).
    pub(super) fn set_base_row(&mut self, slot: usize, at: usize) {
        self.put_base(slot, Some(at), |b| b.oid(at));
    }

    /// [`RowsBuilder::set_base`] with the base's oid asked of `base` only
    /// when the entry is or becomes wide.
    fn put_base(&mut self, slot: usize, at: Option<usize>, base: impl FnOnce(&Self) -> ObjectId) {
        let narrow = at.and_then(|a| u32::try_from(a).ok()).filter(|&a| a < WIDE);
        self.rows[slot].base = narrow.unwrap_or(NO_BASE);
        if narrow.is_none() || !self.wide.is_empty() {
            let base = base(self);
            if let Some(e) = self.wide_entry(slot, narrow.is_some()) {
                e.base = Some(base);
            }
        }
    }

    /// The rows, each moved to its row, the wide ones marked and listed by row.
    pub(super) fn finish(mut self) -> Rows {
        let mut wide: Vec<(u32, IndexEntry)> = match &self.row_of {
            Some(rows) => self
                .wide
                .into_iter()
                .map(|(slot, e)| (rows[slot as usize], e))
                .collect(),
            None => self.wide.into_iter().collect(),
        };
        if let Some(row_of) = self.row_of.take() {
            permute(&mut self.rows, &row_of);
        }
        wide.sort_unstable_by_key(|w| w.0);
        for (row, _) in &wide {
            self.rows[*row as usize].base = WIDE;
        }
        Rows {
            columns: Columns::Heap {
                oids: self.oids,
                rows: self.rows,
            },
            wide,
            width: self.width,
        }
    }
}

/// Moves `rows[i]` to `rows[row_of[i]]` for every `i`, in place (cycle by
/// cycle; an `n`-byte mark of the slots done).
///
/// # Panics
/// When `row_of` is not a permutation of `0..rows.len()`.
fn permute(rows: &mut [Row], row_of: &[u32]) {
    assert_eq!(rows.len(), row_of.len(), "one row per slot");
    let mut done = vec![false; rows.len()];
    for start in 0..rows.len() {
        if done[start] {
            continue;
        }
        let mut carry = rows[start];
        let mut slot = start;
        loop {
            assert!(!done[slot], "row_of is a permutation");
            done[slot] = true;
            let to = row_of[slot] as usize;
            std::mem::swap(&mut carry, &mut rows[to]);
            if to == start {
                break;
            }
            slot = to;
        }
    }
}
