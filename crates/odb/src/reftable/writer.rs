//! Writing a table: records in name order in, the bytes of the layout in
//! [`super`] out.

use std::io::Write;

use super::block::{BlockBuilder, Payload};
use super::{RefValue, ReftableError, Result, BLOCK_BYTES};

/// What a finished table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSummary {
    /// Records written, deletions included.
    pub records: u64,
    /// Deletion records among them.
    pub deletions: u64,
    /// Size of the table in bytes.
    pub bytes: u64,
}

/// An index entry: the last name of a block and where the block is.
struct Entry {
    last: Vec<u8>,
    offset: u64,
    len: u64,
}

/// Writes a table to `W` as records are added in strictly increasing name
/// order. Holds one block and one index entry per ref block (about 1% of
/// the table) in memory.
pub struct TableWriter<W: Write> {
    out: W,
    pos: u64,
    block: BlockBuilder,
    entries: Vec<Entry>,
    last: Option<Vec<u8>>,
    records: u64,
    deletions: u64,
    /// Bytes of each oid (20 or 32), in the header and the footer.
    hash_bytes: usize,
}

impl<W: Write> TableWriter<W> {
    /// Starts a table of a repository whose object format is `format`
    /// (every oid added has its width), writing its header.
    ///
    /// # Errors
    /// [`ReftableError::Write`] when `out` fails.
    pub fn new(mut out: W, format: gix_hash::Kind) -> Result<Self> {
        let hash_bytes = format.len_in_bytes();
        out.write_all(&[b'G', b'S', b'R', b'T', 1, hash_bytes as u8, 0, 0])?;
        Ok(TableWriter {
            out,
            pos: super::HEADER_BYTES as u64,
            block: BlockBuilder::new(),
            entries: Vec::new(),
            last: None,
            records: 0,
            deletions: 0,
            hash_bytes,
        })
    }

    /// `oid`'s width, which must be the table's.
    fn width_of(&self, oid: &gix_hash::oid) -> Result<usize> {
        match oid.as_bytes().len() {
            n if n == self.hash_bytes => Ok(n),
            given => Err(ReftableError::HashWidth {
                given,
                table: self.hash_bytes,
            }),
        }
    }

    /// Adds the record of `name`; names must strictly increase.
    ///
    /// # Errors
    /// [`ReftableError::Unsorted`] for a name not greater than the previous
    /// one (or empty); [`ReftableError::NameTooLong`] past
    /// [`super::MAX_NAME_BYTES`]; [`ReftableError::HashWidth`] for an oid
    /// of another width than the table's; [`ReftableError::Write`] when
    /// `out` fails.
    pub fn add(&mut self, name: &[u8], value: RefValue) -> Result<()> {
        if name.is_empty() || self.last.as_deref().is_some_and(|last| name <= last) {
            return Err(ReftableError::Unsorted);
        }
        if name.len() > super::MAX_NAME_BYTES {
            return Err(ReftableError::NameTooLong(name.len()));
        }
        let payload_len = match value {
            RefValue::Deleted => 0,
            RefValue::Oid(oid) => self.width_of(&oid)?,
            RefValue::Peeled { oid, peeled } => self.width_of(&oid)? + self.width_of(&peeled)?,
        };
        if !self.block.is_empty() && self.block.size_with(name, payload_len) > BLOCK_BYTES {
            self.flush_ref_block(Some(name))?;
        }
        self.block.add(name, &Payload::Ref(value));
        let last = self.last.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(name);
        self.records += 1;
        self.deletions += u64::from(value.is_deletion());
        Ok(())
    }

    /// Writes the current ref block; `next` is the first name of the block
    /// after it, if any (its index entry then holds a short separator).
    fn flush_ref_block(&mut self, next: Option<&[u8]>) -> Result<()> {
        let last = separator(self.block.last_name(), next);
        let bytes = self.block.finish();
        self.out.write_all(&bytes)?;
        self.entries.push(Entry {
            last,
            offset: self.pos,
            len: bytes.len() as u64,
        });
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Writes the index levels and the footer and returns the output and
    /// what the table holds.
    ///
    /// # Errors
    /// [`ReftableError::Write`] when `out` fails.
    pub fn finish(mut self) -> Result<(W, TableSummary)> {
        if !self.block.is_empty() {
            self.flush_ref_block(None)?;
        }
        let ref_end = self.pos;
        let mut levels = 0u8;
        let mut level = std::mem::take(&mut self.entries);
        while level.len() > 1 {
            levels = levels
                .checked_add(1)
                .ok_or(ReftableError::Corrupt("more than 255 index levels"))?;
            let mut upper = Vec::new();
            let mut block = BlockBuilder::new();
            for e in &level {
                let payload = Payload::Child {
                    offset: e.offset,
                    len: e.len,
                };
                // two entries at least a block, so every level halves
                if block.len() >= 2 && block.size_with(&e.last, 20) > BLOCK_BYTES {
                    self.write_index_block(&mut block, &mut upper)?;
                }
                block.add(&e.last, &payload);
            }
            self.write_index_block(&mut block, &mut upper)?;
            level = upper;
        }
        let (root_offset, root_len) = level.first().map_or((0, 0), |e| (e.offset, e.len));
        let mut footer = Vec::with_capacity(super::FOOTER_BYTES);
        footer.extend_from_slice(b"GSRF");
        footer.extend_from_slice(&[1, levels, self.hash_bytes as u8, 0]);
        footer.extend_from_slice(&ref_end.to_le_bytes());
        footer.extend_from_slice(&root_offset.to_le_bytes());
        footer.extend_from_slice(&(root_len as u32).to_le_bytes());
        footer.extend_from_slice(&self.records.to_le_bytes());
        let crc = crc32fast::hash(&footer);
        footer.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&footer)?;
        self.out.flush()?;
        let bytes = self.pos + footer.len() as u64;
        Ok((
            self.out,
            TableSummary {
                records: self.records,
                deletions: self.deletions,
                bytes,
            },
        ))
    }

    fn write_index_block(
        &mut self,
        block: &mut BlockBuilder,
        upper: &mut Vec<Entry>,
    ) -> Result<()> {
        let last = block.last_name().to_vec();
        let bytes = block.finish();
        self.out.write_all(&bytes)?;
        upper.push(Entry {
            last,
            offset: self.pos,
            len: bytes.len() as u64,
        });
        self.pos += bytes.len() as u64;
        Ok(())
    }
}

/// The index key of a block whose last name is `last`, when the next block
/// starts at `next`: the shortest prefix of `next` that is greater than
/// `last` and less than `next` (any key in between sends a seek to the right
/// block), else `last` itself.
fn separator(last: &[u8], next: Option<&[u8]>) -> Vec<u8> {
    if let Some(next) = next {
        let common = last.iter().zip(next).take_while(|(a, b)| a == b).count();
        if common < last.len() && common + 1 < next.len() {
            return next[..=common].to_vec();
        }
    }
    last.to_vec()
}
