//! Reading a table: opening it from its footer, seeking by name through the
//! index levels, and walking records in name order.

use std::sync::Arc;

use super::block::{Block, Payload};
use super::{
    RefValue, ReftableError, Result, TableSource, BLOCK_BYTES, FOOTER_BYTES, HEADER_BYTES,
    MAX_BLOCK_BYTES, SHA1_HASH_BYTES, SHA256_HASH_BYTES,
};

/// Bytes read from the end of a table when it is opened: the footer and, in
/// all but the largest tables, the root block in the same request.
const TAIL_READ: u64 = 8192;

/// Bytes a scanning cursor reads at once from the ref blocks.
const SCAN_WINDOW: u64 = 256 * 1024;

/// Bytes a seeking cursor reads when it moves on to a block whose length it
/// does not know yet.
const NEXT_WINDOW: u64 = 2 * BLOCK_BYTES as u64;

/// An open table: its footer and root block, and where to read the rest.
pub struct Table {
    source: Arc<dyn TableSource>,
    /// Bytes of each oid (the footer's: 20 SHA-1, 32 SHA-256).
    hash_bytes: usize,
    ref_end: u64,
    levels: u8,
    records: u64,
    root: Option<(u64, Block)>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("levels", &self.levels)
            .field("records", &self.records)
            .field("ref_end", &self.ref_end)
            .finish()
    }
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

fn read_exact(source: &dyn TableSource, start: u64, end: u64) -> Result<Arc<Vec<u8>>> {
    let bytes = source.read(start..end)?;
    if bytes.len() as u64 != end - start {
        return Err(ReftableError::Source(
            format!("asked for {} bytes, got {}", end - start, bytes.len()).into(),
        ));
    }
    Ok(bytes)
}

impl Table {
    /// Opens the table of `len` bytes that `source` reads: one read of its
    /// tail (footer and root block), a second only when the root is larger.
    ///
    /// # Errors
    /// [`ReftableError::Corrupt`] when the footer or root block is not
    /// this format's; [`ReftableError::Source`] when a read fails.
    pub fn open(source: Arc<dyn TableSource>, len: u64) -> Result<Table> {
        let min = (HEADER_BYTES + FOOTER_BYTES) as u64;
        if len < min {
            return Err(ReftableError::Corrupt("shorter than a header and a footer"));
        }
        let tail_start = len - TAIL_READ.min(len);
        let tail = read_exact(source.as_ref(), tail_start, len)?;
        let footer = &tail[tail.len() - FOOTER_BYTES..];
        if &footer[..4] != b"GSRF" || footer[4] != 1 {
            return Err(ReftableError::Corrupt("not a ref table of version 1"));
        }
        if crc32fast::hash(&footer[..36]) != le_u32(&footer[36..]) {
            return Err(ReftableError::Corrupt("footer checksum"));
        }
        let hash_bytes = footer[6] as usize;
        if hash_bytes != SHA1_HASH_BYTES && hash_bytes != SHA256_HASH_BYTES {
            return Err(ReftableError::Corrupt("hash length"));
        }
        let levels = footer[5];
        let ref_end = le_u64(&footer[8..]);
        let root_offset = le_u64(&footer[16..]);
        let root_len = u64::from(le_u32(&footer[24..]));
        let records = le_u64(&footer[28..]);
        let body_end = len - FOOTER_BYTES as u64;
        if ref_end < HEADER_BYTES as u64 || ref_end > body_end {
            return Err(ReftableError::Corrupt("ref blocks end outside the table"));
        }
        if root_len == 0 {
            if ref_end != HEADER_BYTES as u64 || levels != 0 || records != 0 || ref_end != body_end
            {
                return Err(ReftableError::Corrupt("empty table with content"));
            }
            return Ok(Table {
                source,
                hash_bytes,
                ref_end,
                levels,
                records,
                root: None,
            });
        }
        // the root is the last block before the footer
        if root_len > MAX_BLOCK_BYTES
            || root_offset.checked_add(root_len) != Some(body_end)
            || root_offset
                < if levels == 0 {
                    HEADER_BYTES as u64
                } else {
                    ref_end
                }
        {
            return Err(ReftableError::Corrupt("root block placement"));
        }
        let root = if root_offset >= tail_start {
            Block::parse(
                tail,
                (root_offset - tail_start) as usize,
                root_len as usize,
                hash_bytes,
            )?
        } else {
            let bytes = read_exact(source.as_ref(), root_offset, body_end)?;
            Block::parse(bytes, 0, root_len as usize, hash_bytes)?
        };
        Ok(Table {
            source,
            hash_bytes,
            ref_end,
            levels,
            records,
            root: Some((root_offset, root)),
        })
    }

    /// Index levels above the ref blocks (0: the root is the only ref block).
    pub fn levels(&self) -> u8 {
        self.levels
    }

    /// Records in the table, deletions included.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// A cursor for lookups and short walks (it reads one block at a time).
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor::new(self, NEXT_WINDOW)
    }

    /// A cursor for long walks: it reads the ref blocks in windows of 256 KiB.
    pub fn scan(&self) -> Cursor<'_> {
        Cursor::new(self, SCAN_WINDOW)
    }

    /// The record of `name` in this table (a deletion record included), or
    /// `None` when it has none.
    ///
    /// # Errors
    /// As [`Cursor::seek`].
    pub fn get(&self, name: &[u8]) -> Result<Option<RefValue>> {
        let mut c = self.cursor();
        c.seek(name)?;
        Ok(c.current().filter(|(n, _)| *n == name).map(|(_, v)| v))
    }
}

/// A position in a table's records, in name order. Reuses one name buffer;
/// walking allocates only when it reads a block.
pub struct Cursor<'t> {
    table: &'t Table,
    /// The current ref block and its offset in the table.
    block: Option<(u64, Block, u64)>,
    /// Offset, in the block, of the record after the current one.
    next: usize,
    key: Vec<u8>,
    value: Option<RefValue>,
    window: Option<(u64, Arc<Vec<u8>>)>,
    window_bytes: u64,
}

impl<'t> Cursor<'t> {
    fn new(table: &'t Table, window_bytes: u64) -> Self {
        Cursor {
            table,
            block: None,
            next: 0,
            key: Vec::new(),
            value: None,
            window: None,
            window_bytes,
        }
    }

    /// The current record, or `None` past the last one (or before a seek).
    pub fn current(&self) -> Option<(&[u8], RefValue)> {
        self.value.map(|v| (self.key.as_slice(), v))
    }

    /// Moves to the first record whose name is not less than `target`
    /// (past the end when there is none). `seek(b"")` starts a full walk.
    ///
    /// # Errors
    /// [`ReftableError::Corrupt`] for a damaged block or index;
    /// [`ReftableError::Source`] when a read fails.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.value = None;
        self.block = None;
        let Some((root_offset, root)) = &self.table.root else {
            return Ok(());
        };
        let (mut offset, mut block) = (*root_offset, root.clone());
        for level in (1..=self.table.levels).rev() {
            let Some((payload, _)) = first_at_least(&block, target, &mut self.key)? else {
                return Ok(());
            };
            let Payload::Child { offset: child, len } = payload else {
                return Err(ReftableError::Corrupt("ref record in an index block"));
            };
            let (lo, hi) = if level == 1 {
                (HEADER_BYTES as u64, self.table.ref_end)
            } else {
                (self.table.ref_end, offset)
            };
            if child < lo
                || child.checked_add(len).is_none_or(|end| end > hi)
                || len == 0
                || len > MAX_BLOCK_BYTES
            {
                return Err(ReftableError::Corrupt(
                    "index entry points outside its level",
                ));
            }
            block = if level == 1 {
                self.ref_block(child, Some(len))?
            } else {
                let bytes = read_exact(self.table.source.as_ref(), child, child + len)?;
                Block::parse(bytes, 0, len as usize, self.table.hash_bytes)?
            };
            offset = child;
        }
        let len = block_len(&block);
        match first_at_least(&block, target, &mut self.key)? {
            Some((payload, next)) => {
                self.value = Some(ref_value(payload)?);
                self.next = next;
                self.block = Some((offset, block, len));
                Ok(())
            }
            None => {
                // every name of this block is smaller: the target falls
                // between blocks, so the walk goes on at the next one
                self.block = Some((offset, block, len));
                self.key.clear();
                self.next_block(false)
            }
        }
    }

    /// Moves to the next record (past the end after the last one).
    ///
    /// # Errors
    /// As [`Cursor::seek`]; also when names do not increase.
    pub fn advance(&mut self) -> Result<()> {
        if self.value.is_none() {
            return Ok(());
        }
        let Some((_, block, _)) = &self.block else {
            return Ok(());
        };
        if block.at_end(self.next) {
            return self.next_block(true);
        }
        let (payload, next) = block.decode(self.next, &mut self.key, true)?;
        self.value = Some(ref_value(payload)?);
        self.next = next;
        Ok(())
    }

    /// Moves to the first record of the ref block after the current one;
    /// `ordered`: the key holds the previous name, which the first record
    /// must pass.
    fn next_block(&mut self, ordered: bool) -> Result<()> {
        self.value = None;
        let Some((offset, _, len)) = self.block.take() else {
            return Ok(());
        };
        let offset = offset + len;
        if offset >= self.table.ref_end {
            return Ok(());
        }
        let block = self.ref_block(offset, None)?;
        let len = block_len(&block);
        if block.at_end(block.first()) {
            return Err(ReftableError::Corrupt("empty ref block"));
        }
        let (payload, next) = block.decode(block.first(), &mut self.key, ordered)?;
        self.value = Some(ref_value(payload)?);
        self.next = next;
        self.block = Some((offset, block, len));
        Ok(())
    }

    /// The ref block at `offset` (of `len` bytes when known), from the
    /// window when it holds it, else read (with a new window).
    fn ref_block(&mut self, offset: u64, len: Option<u64>) -> Result<Block> {
        let ref_end = self.table.ref_end;
        if let Some((start, buf)) = &self.window {
            if let Some(block) = block_in(buf, *start, offset, len, self.table.hash_bytes)? {
                return Ok(block);
            }
        }
        let want = match len {
            Some(len) if self.window_bytes == NEXT_WINDOW => len,
            Some(len) => len.max(self.window_bytes),
            None => self.window_bytes,
        };
        let end = offset.saturating_add(want).min(ref_end);
        let buf = read_exact(self.table.source.as_ref(), offset, end)?;
        if let Some(block) = block_in(&buf, offset, offset, len, self.table.hash_bytes)? {
            self.window = Some((offset, buf));
            return Ok(block);
        }
        // a block longer than the window: read it whole
        let full = header_len(&buf).ok_or(ReftableError::Corrupt("block header"))?;
        if full > MAX_BLOCK_BYTES || offset.checked_add(full).is_none_or(|e| e > ref_end) {
            return Err(ReftableError::Corrupt("block beyond the ref blocks"));
        }
        let buf = read_exact(self.table.source.as_ref(), offset, offset + full)?;
        Block::parse(buf, 0, full as usize, self.table.hash_bytes)
    }
}

/// The length field of the block at the start of `buf`.
fn header_len(buf: &[u8]) -> Option<u64> {
    buf.get(..4).map(|b| u64::from(le_u32(b)))
}

fn block_len(block: &Block) -> u64 {
    block.len() as u64
}

/// The block at `offset` if `buf` (which starts at table offset `start`)
/// holds all of it.
fn block_in(
    buf: &Arc<Vec<u8>>,
    start: u64,
    offset: u64,
    len: Option<u64>,
    hash_bytes: usize,
) -> Result<Option<Block>> {
    if offset < start {
        return Ok(None);
    }
    let at = (offset - start) as usize;
    let Some(found) = buf.get(at..).and_then(header_len) else {
        return Ok(None);
    };
    if len.is_some_and(|l| l != found) {
        return Err(ReftableError::Corrupt(
            "block length differs from its index entry",
        ));
    }
    if (at as u64).saturating_add(found) > buf.len() as u64 {
        return Ok(None);
    }
    Block::parse(buf.clone(), at, found as usize, hash_bytes).map(Some)
}

fn ref_value(payload: Payload) -> Result<RefValue> {
    match payload {
        Payload::Ref(v) => Ok(v),
        Payload::Child { .. } => Err(ReftableError::Corrupt("index record in a ref block")),
    }
}

/// The first record of `block` whose name is not less than `target` (its
/// name left in `key`) and the offset of the record after it.
fn first_at_least(
    block: &Block,
    target: &[u8],
    key: &mut Vec<u8>,
) -> Result<Option<(Payload, usize)>> {
    let start = block.restart_for(target)?;
    let mut pos = start;
    key.clear();
    while !block.at_end(pos) {
        let (payload, next) = block.decode(pos, key, pos != start)?;
        if key.as_slice() >= target {
            return Ok(Some((payload, next)));
        }
        pos = next;
    }
    Ok(None)
}
