//! Ref tables: immutable, sorted files of ref records, in the shape of git's
//! reftable (`Documentation/technical/reftable.adoc`) without its log and
//! object blocks (gitstow keeps no reflogs and no oid → ref index).
//!
//! A repository's refs are a stack of tables (oldest first) plus a small
//! inline part of its state (plan 0010). A ref's value is the first record
//! for its name, newest table first; a deletion record (tombstone) ends the
//! search. [`MergedRefs`] walks such a stack as one sorted sequence.
//!
//! # Layout of a table
//!
//! ```text
//! header   8 bytes   "GSRT", version (1), hash length (20 SHA-1, 32 SHA-256), 0, 0
//! ref blocks         contiguous from offset 8 to `ref_end`, sorted by name
//! index blocks       from `ref_end` to the footer; the root block is last
//! footer   40 bytes  see below
//! ```
//!
//! A **block** (ref or index) is:
//!
//! ```text
//! u32 LE   length of the whole block, this field and the CRC included
//! records  back to back (below)
//! u32 LE   offset, from the block's start, of each restart point
//! u16 LE   number of restart points (at least 1 when there is a record)
//! u32 LE   CRC-32 of every byte of the block before it
//! ```
//!
//! A **record** is `varint prefix length, varint suffix length, suffix, u8
//! kind, payload`: its name is the first `prefix length` bytes of the
//! previous record's name followed by the suffix (a restart point has prefix
//! length 0). Names strictly increase within a block and across blocks.
//! Kinds: 0 a deletion (no payload), 1 an oid (hash length bytes), 2 an oid and the
//! object its tag chain peels to (twice that), 3 (index blocks only) a child
//! block: varint offset, varint length. Varints are LEB128 (7 bits a byte,
//! least significant first, at most 10 bytes). Ref blocks are cut at about
//! [`BLOCK_BYTES`], with a restart point every [`RESTART_INTERVAL`] records.
//!
//! An **index** entry names the last record of a child block and points at
//! it; index levels are added until one block (the root) holds the top
//! level. A table of one ref block has that block as its root (0 levels);
//! an empty table has no root.
//!
//! The **footer**:
//!
//! ```text
//!  0  "GSRF"
//!  4  u8      version (1)
//!  5  u8      index levels above the ref blocks
//!  6  u8      hash length (20 SHA-1, 32 SHA-256: the width of every oid of the table)
//!  7  u8      0
//!  8  u64 LE  ref_end: where the ref blocks end
//! 16  u64 LE  root block offset
//! 24  u32 LE  root block length (0: empty table)
//! 28  u64 LE  records (deletions included)
//! 36  u32 LE  CRC-32 of bytes 0..36
//! ```
//!
//! A lookup reads the tail of the table once (footer and root), then one
//! block a level: at 2.3M refs, root → index block → ref block. A full scan
//! reads the ref blocks in large sequential windows ([`Cursor::scan`]).

mod block;
mod cursor;
mod merged;
mod writer;

#[cfg(test)]
mod tests;

use std::ops::Range;
use std::sync::Arc;

use gix_hash::ObjectId;

pub use cursor::{Cursor, Table};
pub use merged::{MergedRefs, RefCursor, SliceCursor};
pub use writer::{TableSummary, TableWriter};

/// Target size of a block in bytes; a block holds at least one record, so a
/// record longer than this makes a longer block.
pub const BLOCK_BYTES: usize = 4096;

/// Records between two restart points (full names) in a block.
pub const RESTART_INTERVAL: usize = 16;

/// Longest name a table holds, in bytes (git's files backend stops near
/// 4 KiB; gitstow refuses ref names over 4096 bytes before they get here).
pub const MAX_NAME_BYTES: usize = 65_535;

/// Largest block a reader accepts: a block of [`BLOCK_BYTES`] plus one
/// record of the longest name. A damaged length never makes a larger read.
pub const MAX_BLOCK_BYTES: u64 = (BLOCK_BYTES + MAX_NAME_BYTES + 64) as u64;

/// Size of the fixed footer at the end of every table.
pub const FOOTER_BYTES: usize = 40;

/// Size of the header at the start of every table.
pub const HEADER_BYTES: usize = 8;

/// Length of a SHA-1 oid: the hash length byte of a SHA-1 repository's
/// tables (header and footer).
pub const SHA1_HASH_BYTES: usize = 20;

/// Length of a SHA-256 oid: the hash length byte of a SHA-256
/// repository's tables. A reader takes each table's from its footer.
pub const SHA256_HASH_BYTES: usize = 32;

/// What a record says of a ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefValue {
    /// The ref was deleted (a tombstone: older tables' records for the name
    /// no longer count).
    Deleted,
    /// The ref points at `oid`.
    Oid(ObjectId),
    /// The ref points at the annotated tag `oid`, whose tag chain ends at
    /// `peeled`.
    Peeled {
        /// The tag the ref names.
        oid: ObjectId,
        /// The first non-tag object the tag chain reaches.
        peeled: ObjectId,
    },
}

impl RefValue {
    /// The oid the ref points at, or `None` for a deletion.
    pub fn oid(&self) -> Option<ObjectId> {
        match self {
            RefValue::Deleted => None,
            RefValue::Oid(oid) | RefValue::Peeled { oid, .. } => Some(*oid),
        }
    }

    /// The peeled target of an annotated tag, if the record carries one.
    pub fn peeled(&self) -> Option<ObjectId> {
        match self {
            RefValue::Peeled { peeled, .. } => Some(*peeled),
            _ => None,
        }
    }

    /// True for a deletion record.
    pub fn is_deletion(&self) -> bool {
        matches!(self, RefValue::Deleted)
    }
}

/// Why a table could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ReftableError {
    /// The bytes are not a table of this format, or are damaged.
    #[error("ref table is corrupt: {0}")]
    Corrupt(&'static str),
    /// Reading from the table's source failed.
    #[error("ref table could not be read: {0}")]
    Source(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The writer was given names out of order, or a duplicate.
    #[error("ref table names must strictly increase")]
    Unsorted,
    /// The writer was given a name longer than [`MAX_NAME_BYTES`].
    #[error("ref name of {0} bytes is longer than a ref table holds")]
    NameTooLong(usize),
    /// Writing the table's bytes failed.
    #[error("ref table could not be written: {0}")]
    Write(#[from] std::io::Error),
    /// The writer was given an oid of another width than its table's
    /// (a caller's mix of object formats).
    #[error("an oid of {given} bytes in a ref table of {table}-byte oids")]
    HashWidth {
        /// The oid's width.
        given: usize,
        /// The table's.
        table: usize,
    },
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, ReftableError>;

/// Where a table's bytes come from: a store read by range, a cache, or a
/// buffer in memory.
pub trait TableSource: Send + Sync {
    /// The bytes of `range` of the table, exactly (`range` lies inside the
    /// table's length given to [`Table::open`]).
    ///
    /// # Errors
    /// [`ReftableError::Source`] when the bytes cannot be read.
    fn read(&self, range: Range<u64>) -> Result<Arc<Vec<u8>>>;
}

impl TableSource for Vec<u8> {
    fn read(&self, range: Range<u64>) -> Result<Arc<Vec<u8>>> {
        let start = usize::try_from(range.start).map_err(|_| ReftableError::Corrupt("range"))?;
        let end = usize::try_from(range.end).map_err(|_| ReftableError::Corrupt("range"))?;
        self.get(start..end)
            .map(|b| Arc::new(b.to_vec()))
            .ok_or(ReftableError::Corrupt("range beyond the table"))
    }
}

/// The smallest name greater than every name that starts with `prefix`, or
/// `None` when there is none (an empty prefix, or one of only `0xff`
/// bytes): where a cursor seeks to skip a namespace (a hidden prefix).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Appends `n` as a LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads a LEB128 varint at `*pos` of `data`, at most 10 bytes, advancing `*pos`.
pub(crate) fn get_varint(data: &[u8], pos: &mut usize) -> Result<u64> {
    let mut n = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *data
            .get(*pos)
            .ok_or(ReftableError::Corrupt("varint past the end"))?;
        *pos += 1;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return Err(ReftableError::Corrupt("varint overflows"));
        }
        n |= bits << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(ReftableError::Corrupt("varint too long"))
}
