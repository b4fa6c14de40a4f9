//! Blocks: building one (prefix compression, restart points, CRC) and
//! reading records out of one. The layout is in the module docs of
//! [`super`].

use std::cmp::Ordering;
use std::sync::Arc;

use gix_hash::ObjectId;

use super::{get_varint, put_varint, RefValue, ReftableError, Result, RESTART_INTERVAL};

pub(crate) const KIND_DELETION: u8 = 0;
pub(crate) const KIND_OID: u8 = 1;
pub(crate) const KIND_PEELED: u8 = 2;
pub(crate) const KIND_CHILD: u8 = 3;

/// Bytes after the records: restart count and CRC (the restart offsets vary).
const TRAILER_FIXED: usize = 2 + 4;

/// What a record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Payload {
    /// A ref record.
    Ref(RefValue),
    /// An index record: the child block at `offset`, `len` bytes.
    Child { offset: u64, len: u64 },
}

/// A block being built.
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    last: Vec<u8>,
    count: usize,
}

impl BlockBuilder {
    pub(crate) fn new() -> Self {
        BlockBuilder {
            buf: vec![0; 4],
            restarts: Vec::new(),
            last: Vec::new(),
            count: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records added so far.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The name of the last record added.
    pub(crate) fn last_name(&self) -> &[u8] {
        &self.last
    }

    /// The block's size if a record of `name` with a payload of
    /// `payload_len` bytes were added (an upper bound: as if at a restart).
    pub(crate) fn size_with(&self, name: &[u8], payload_len: usize) -> usize {
        self.buf.len()
            + 20
            + name.len()
            + 1
            + payload_len
            + (self.restarts.len() + 1) * 4
            + TRAILER_FIXED
    }

    /// Appends a record; names must strictly increase (the writer checks).
    pub(crate) fn add(&mut self, name: &[u8], payload: &Payload) {
        let prefix = if self.count.is_multiple_of(RESTART_INTERVAL) {
            self.restarts.push(self.buf.len() as u32);
            0
        } else {
            self.last
                .iter()
                .zip(name)
                .take_while(|(a, b)| a == b)
                .count()
        };
        put_varint(&mut self.buf, prefix as u64);
        put_varint(&mut self.buf, (name.len() - prefix) as u64);
        self.buf.extend_from_slice(&name[prefix..]);
        match payload {
            Payload::Ref(RefValue::Deleted) => self.buf.push(KIND_DELETION),
            Payload::Ref(RefValue::Oid(oid)) => {
                self.buf.push(KIND_OID);
                self.buf.extend_from_slice(oid.as_bytes());
            }
            Payload::Ref(RefValue::Peeled { oid, peeled }) => {
                self.buf.push(KIND_PEELED);
                self.buf.extend_from_slice(oid.as_bytes());
                self.buf.extend_from_slice(peeled.as_bytes());
            }
            Payload::Child { offset, len } => {
                self.buf.push(KIND_CHILD);
                put_varint(&mut self.buf, *offset);
                put_varint(&mut self.buf, *len);
            }
        }
        self.last.clear();
        self.last.extend_from_slice(name);
        self.count += 1;
    }

    /// The finished block's bytes; the builder is empty again.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut buf = std::mem::replace(&mut self.buf, vec![0; 4]);
        for r in &self.restarts {
            buf.extend_from_slice(&r.to_le_bytes());
        }
        buf.extend_from_slice(&(self.restarts.len() as u16).to_le_bytes());
        let len = (buf.len() + 4) as u32;
        buf[..4].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        self.restarts.clear();
        self.last.clear();
        self.count = 0;
        buf
    }
}

/// A checked block: a range of a shared buffer.
#[derive(Clone)]
pub(crate) struct Block {
    buf: Arc<Vec<u8>>,
    start: usize,
    /// Length of the block.
    len: usize,
    /// End of the records, relative to `start`.
    records_end: usize,
    restarts: usize,
    /// Bytes of each oid (the table's footer: 20 or 32).
    hash_bytes: usize,
}

/// Payload length of a kind with oids of `hash_bytes`, or `None` for a
/// varint payload (child).
fn fixed_payload(kind: u8, hash_bytes: usize) -> Result<Option<usize>> {
    match kind {
        KIND_DELETION => Ok(Some(0)),
        KIND_OID => Ok(Some(hash_bytes)),
        KIND_PEELED => Ok(Some(2 * hash_bytes)),
        KIND_CHILD => Ok(None),
        _ => Err(ReftableError::Corrupt("unknown record kind")),
    }
}

/// True when a name whose tail after the shared prefix is `suffix` comes
/// after the previous name, whose tail is `previous`. A writer shares the
/// longest prefix, so the first bytes almost always decide (no call to
/// `memcmp` per record); a shorter shared prefix falls back to the full
/// comparison.
fn follows(suffix: &[u8], previous: &[u8]) -> bool {
    match (suffix.first(), previous.first()) {
        (_, None) => !suffix.is_empty(),
        (Some(a), Some(b)) if a != b => a > b,
        _ => suffix > previous,
    }
}

fn oid_at(data: &[u8], hash_bytes: usize) -> ObjectId {
    ObjectId::from_bytes_or_panic(&data[..hash_bytes])
}

impl Block {
    /// Checks the block of `len` bytes at `start` of `buf`: its length field,
    /// CRC and restart table; its oids are `hash_bytes` long (20 or 32).
    pub(crate) fn parse(
        buf: Arc<Vec<u8>>,
        start: usize,
        len: usize,
        hash_bytes: usize,
    ) -> Result<Block> {
        let data = buf
            .get(
                start
                    ..start
                        .checked_add(len)
                        .ok_or(ReftableError::Corrupt("block length"))?,
            )
            .ok_or(ReftableError::Corrupt("block beyond the table"))?;
        if len < 4 + TRAILER_FIXED {
            return Err(ReftableError::Corrupt("block too short"));
        }
        if u32::from_le_bytes(data[..4].try_into().expect("4 bytes")) as usize != len {
            return Err(ReftableError::Corrupt("block length field"));
        }
        let crc = u32::from_le_bytes(data[len - 4..].try_into().expect("4 bytes"));
        if crc32fast::hash(&data[..len - 4]) != crc {
            return Err(ReftableError::Corrupt("block checksum"));
        }
        let restarts =
            u16::from_le_bytes(data[len - 6..len - 4].try_into().expect("2 bytes")) as usize;
        let records_end = (len - TRAILER_FIXED)
            .checked_sub(restarts * 4)
            .filter(|&e| e >= 4)
            .ok_or(ReftableError::Corrupt("restart table"))?;
        if restarts == 0 && records_end != 4 {
            return Err(ReftableError::Corrupt("records without a restart point"));
        }
        let block = Block {
            buf,
            start,
            len,
            records_end,
            restarts,
            hash_bytes,
        };
        let mut previous = 0;
        for i in 0..restarts {
            let r = block.restart(i);
            if r < 4 || r >= records_end || (i > 0 && r <= previous) || (i == 0 && r != 4) {
                return Err(ReftableError::Corrupt("restart offset"));
            }
            previous = r;
        }
        Ok(block)
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Offset (from the block's start) of restart point `i`.
    fn restart(&self, i: usize) -> usize {
        let at = self.records_end + i * 4;
        u32::from_le_bytes(self.data()[at..at + 4].try_into().expect("4 bytes")) as usize
    }

    /// Length of the block in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Offset of the first record.
    pub(crate) fn first(&self) -> usize {
        4
    }

    /// True when `pos` is past the last record.
    pub(crate) fn at_end(&self, pos: usize) -> bool {
        pos >= self.records_end
    }

    /// Decodes the record at `pos` into `key` (which holds the previous
    /// record's name, or anything at a restart point) and returns its payload
    /// and the next record's offset. Checks that the name is greater than
    /// the previous one when `key` holds it (`ordered`).
    pub(crate) fn decode(
        &self,
        pos: usize,
        key: &mut Vec<u8>,
        ordered: bool,
    ) -> Result<(Payload, usize)> {
        let data = &self.data()[..self.records_end];
        let mut p = pos;
        let prefix = get_varint(data, &mut p)?;
        let suffix_len = get_varint(data, &mut p)?;
        if prefix > key.len() as u64 {
            return Err(ReftableError::Corrupt(
                "record prefix longer than the previous name",
            ));
        }
        let prefix = prefix as usize;
        if pos == self.first() && prefix != 0 {
            return Err(ReftableError::Corrupt(
                "first record of a block with a prefix",
            ));
        }
        let suffix_end = usize::try_from(suffix_len)
            .ok()
            .and_then(|s| p.checked_add(s))
            .filter(|&e| e < data.len())
            .ok_or(ReftableError::Corrupt("record name past the block"))?;
        let suffix = &data[p..suffix_end];
        if suffix.is_empty() {
            return Err(ReftableError::Corrupt("record name repeats"));
        }
        if ordered && !follows(suffix, &key[prefix..]) {
            return Err(ReftableError::Corrupt("record names out of order"));
        }
        key.truncate(prefix);
        key.extend_from_slice(suffix);
        p = suffix_end;
        let kind = data[p];
        p += 1;
        let h = self.hash_bytes;
        let payload = match fixed_payload(kind, h)? {
            Some(n) => {
                let body = data
                    .get(p..p + n)
                    .ok_or(ReftableError::Corrupt("record value past the block"))?;
                p += n;
                Payload::Ref(match kind {
                    KIND_DELETION => RefValue::Deleted,
                    KIND_OID => RefValue::Oid(oid_at(body, h)),
                    _ => RefValue::Peeled {
                        oid: oid_at(body, h),
                        peeled: oid_at(&body[h..], h),
                    },
                })
            }
            None => {
                let offset = get_varint(data, &mut p)?;
                let len = get_varint(data, &mut p)?;
                Payload::Child { offset, len }
            }
        };
        Ok((payload, p))
    }

    /// Compares the full name stored at restart point `i` with `target`.
    fn cmp_restart(&self, i: usize, target: &[u8]) -> Result<Ordering> {
        let data = &self.data()[..self.records_end];
        let mut p = self.restart(i);
        let prefix = get_varint(data, &mut p)?;
        let len = get_varint(data, &mut p)?;
        if prefix != 0 {
            return Err(ReftableError::Corrupt("restart point with a prefix"));
        }
        let name = usize::try_from(len)
            .ok()
            .and_then(|l| p.checked_add(l))
            .and_then(|e| data.get(p..e))
            .ok_or(ReftableError::Corrupt("record name past the block"))?;
        Ok(name.cmp(target))
    }

    /// The offset of the restart point from which a scan for `target` starts:
    /// the last one whose name is not greater than `target` (the first one
    /// when all are).
    pub(crate) fn restart_for(&self, target: &[u8]) -> Result<usize> {
        // binary search for the first restart whose name is greater
        let (mut lo, mut hi) = (0, self.restarts);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.cmp_restart(mid, target)? == Ordering::Greater {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(if lo == 0 {
            self.first()
        } else {
            self.restart(lo - 1)
        })
    }
}
