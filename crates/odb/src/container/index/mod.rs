//! The container index (`.idx`): every object of one container, looked up by oid.
//!
//! An index is one zstd frame holding a body and, after it, the SHA-256 of
//! the body (32 bytes), which guards against corruption. Integers are
//! big-endian; a *varint* is an unsigned LEB128 (seven bits a byte, least
//! significant group first, the high bit set on every byte but the last; at
//! most 10 bytes, at most a `u64`, and no superfluous zero group at the end).
//!
//! # Version 2 (written)
//!
//! Column after column, so that zstd sees runs of like values. The records of
//! a container tile its `.bin` from offset 0, back to back; *record `p`* is the
//! `p`-th record in `.bin` order, *row `r`* the `r`-th oid in ascending order.
//! The oids are stored in row order (for lookups), every other column in record
//! order, where neighbours are alike (types, sizes and depths come in runs, an
//! OFS_DELTA's base is mostly a few records back) and offsets are running sums.
//!
//! 1. Header, 20 bytes: `"GSTI"`, version `u32` = 2, record count `n` `u32`,
//!    length of the `.bin` `u64`.
//! 2. Prefix counts: 65,536 varints; the `i`-th is how many oids start with
//!    the two bytes of `i` as a `u16`. They add up to `n`.
//! 3. Oid suffixes: `n` × 18 bytes, bytes 2 to 19 of each oid, rows in order
//!    (the prefix counts give bytes 0 and 1); strictly ascending within a prefix.
//! 4. Rows: for each record, its row as a `w`-byte integer, `w` the fewest bytes
//!    that hold `n - 1` (1 up to 256 records, 2 up to 65,536, 3 up to 2^24, else 4).
//!    Each row appears once.
//! 5. Lengths: `n` varints, each record's length in bytes (entry header and
//!    zlib stream), at least 1. A record's offset is the sum of the lengths
//!    before it; they add up to the `.bin` length.
//! 6. Types: `n` bytes, `record_type << 4 | kind`: the pack type id of the record
//!    as stored (1-4 whole, 6 OFS_DELTA, 7 REF_DELTA) and the kind of the
//!    resolved object (1-4; a whole record's own type).
//! 7. Sizes: `n` varints, the inflated sizes of the resolved objects.
//! 8. Depths: `n` varints of at most `u32::MAX`, the delta chain depths.
//! 9. OFS_DELTA bases: one varint per OFS_DELTA record, in record order: how many
//!    records before it its base is (1 for the record just before it).
//! 10. REF_DELTA bases: 20 bytes per REF_DELTA record, in record order: the base's
//!     oid (not the null oid, not the record's own).
//!
//! The body ends there. Every index has one body: decoding refuses anything
//! else. On git/git (419,403 objects in three containers) that is 24.3 bytes
//! an object after zstd, of which the oids take 18.2 (random bytes: sorting
//! them saves only the prefix), the rows 2.5, lengths 1.2, sizes 1.4, and types,
//! depths and bases together 0.7; version 1 took 48.7.
//!
//! # Version 3 (written for SHA-256 repositories)
//!
//! Version 2 for oids of another width (plan 0019): the header is
//! `"GSTI"`, version `u32` = 3, the hash id `u8` (1 SHA-1, 2 SHA-256, as in
//! git's commit-graph and multi-pack-index), then the record count and the
//! `.bin` length as in version 2 (21 bytes). Oid suffixes are `width - 2`
//! bytes and REF_DELTA bases `width` bytes, `width` the hash's (20 or 32).
//! Everything else is version 2's. A SHA-1 index is still written as
//! version 2, byte for byte.
//!
//! # Version 1 (still read)
//!
//! `"GSTI"`, version `u32` = 1, object count `u32`, a 256-entry fanout of `u32`
//! (cumulative counts by first oid byte, as in `gitformat-pack(5)` `.idx` files),
//! then one fixed 74-byte row per object, rows sorted by oid: oid (20), offset `u64`,
//! record length `u64`, pack type id `u8`, object kind `u8`, inflated object size
//! `u64`, crc32 `u32` (ignored), delta depth `u32`, base oid (20, zero when whole).

use gix_hash::ObjectId;
use sha2::{Digest, Sha256};

use crate::record::{OFS_DELTA, REF_DELTA};

const MAGIC: &[u8; 4] = b"GSTI";
const VERSION: u32 = 2;
const VERSION_3: u32 = 3;
const VERSION_1: u32 = 1;
const V1_ROW: usize = 20 + 8 + 8 + 1 + 1 + 8 + 4 + 4 + 20;
const V1_HEADER: usize = 4 + 4 + 4 + 256 * 4;
const HEADER: usize = 4 + 4 + 4 + 8;
/// Oids are bucketed by their first two bytes.
const PREFIXES: usize = 1 << 16;
/// Upper bound on a decompressed index, in bytes.
const MAX_INDEX_BYTES: usize = 2 << 30;
/// Bytes of one row of the writer's staging file ([`IndexEntry::to_row`])
/// for oids of `width` bytes.
pub const fn row_len(width: usize) -> usize {
    width + 8 + 8 + 1 + 1 + 8 + 4 + width
}

/// The longest row ([`row_len`] of a SHA-256 oid).
pub const MAX_ROW: usize = row_len(32);

/// One object of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The object's id.
    pub oid: ObjectId,
    /// Byte offset of its record in the `.bin`.
    pub offset: u64,
    /// Length in bytes of the record (header + zlib stream).
    pub length: u64,
    /// Pack type id of the record as stored (1-4 whole, 6 OFS_DELTA, 7 REF_DELTA).
    pub record_type: u8,
    /// The resolved object's kind as a pack type id (1-4).
    pub kind: u8,
    /// Inflated size in bytes of the resolved object.
    pub size: u64,
    /// Delta chain depth: 0 for a whole object, base depth + 1 for a delta.
    pub depth: u32,
    /// The delta base's oid (for both OFS_DELTA and REF_DELTA records), `None` when whole.
    pub base: Option<ObjectId>,
}

/// An index that could not be read, or entries that cannot be written as one.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// zstd failed or the frame is too large.
    #[error("container index does not decompress: {0}")]
    Decompress(String),
    /// Wrong magic, version, lengths, checksum, or contents that do not
    /// describe a container.
    #[error("container index is corrupt: {0}")]
    Corrupt(&'static str),
    /// Entries to encode that are not the records of a container.
    #[error("entries do not describe a container: {0}")]
    Invalid(&'static str),
}

impl IndexEntry {
    /// The entry as one row of the writer's staging file (not a stored
    /// format), [`row_len`] of the oid's width `w` bytes at the start of
    /// `r`: oid (`w`), offset `u64`, length `u64`, record type `u8`, kind
    /// `u8`, size `u64`, depth `u32`, base oid (`w`, zero when `None`).
    ///
    /// # Panics
    /// When `r` is shorter than the row.
    pub fn to_row(&self, r: &mut [u8]) -> usize {
        let w = self.oid.as_slice().len();
        let r = &mut r[..row_len(w)];
        r[..w].copy_from_slice(self.oid.as_slice());
        let r2 = &mut r[w..];
        r2[..8].copy_from_slice(&self.offset.to_be_bytes());
        r2[8..16].copy_from_slice(&self.length.to_be_bytes());
        r2[16] = self.record_type;
        r2[17] = self.kind;
        r2[18..26].copy_from_slice(&self.size.to_be_bytes());
        r2[26..30].copy_from_slice(&self.depth.to_be_bytes());
        match self.base {
            Some(b) => r2[30..].copy_from_slice(b.as_slice()),
            None => r2[30..].fill(0),
        }
        row_len(w)
    }

    /// Parses one row of `width`-byte oids written by [`IndexEntry::to_row`].
    pub fn from_row(r: &[u8], width: usize) -> IndexEntry {
        Self::parse_row(r, width, 26)
    }

    /// Parses one version-1 row: the same layout with a crc32 (dropped) before the depth.
    fn from_v1_row(r: &[u8]) -> IndexEntry {
        Self::parse_row(r, SHA1_BYTES, 30)
    }

    /// The fields of a row of `width`-byte oids whose depth (`u32`) is at
    /// `depth_at` after the oid, followed by the base oid.
    fn parse_row(r: &[u8], width: usize, depth_at: usize) -> IndexEntry {
        let (oid, rest) = r.split_at(width);
        let u64_at = |i: usize| u64::from_be_bytes(rest[i..i + 8].try_into().expect("8 bytes"));
        let base_raw = &rest[depth_at + 4..depth_at + 4 + width];
        IndexEntry {
            oid: ObjectId::from_bytes_or_panic(oid),
            offset: u64_at(0),
            length: u64_at(8),
            record_type: rest[16],
            kind: rest[17],
            size: u64_at(18),
            depth: u32::from_be_bytes(rest[depth_at..depth_at + 4].try_into().expect("4 bytes")),
            base: base_raw
                .iter()
                .any(|&b| b != 0)
                .then(|| ObjectId::from_bytes_or_panic(base_raw)),
        }
    }
}

mod rows;
mod v2;

use rows::{Rows, RowsBuilder, SHA1_BYTES};
pub use v2::IndexEncoder;

/// An oid as integers that order as its bytes do: compared inline, without a
/// `memcmp` call per step of a lookup's binary search (a clone does millions).
fn oid_key(b: &[u8]) -> (u64, u64, u32) {
    (
        u64::from_be_bytes(b[..8].try_into().expect("20-byte oid")),
        u64::from_be_bytes(b[8..16].try_into().expect("20-byte oid")),
        u32::from_be_bytes(b[16..20].try_into().expect("20-byte oid")),
    )
}

/// [`find`] over the oid bytes `oid_at(i)` of row `i`.
#[inline]
fn find_by<'a>(
    fanout: &[u32],
    oid_at: impl Fn(usize) -> &'a [u8],
    oid: &gix_hash::oid,
) -> Option<usize> {
    let b = oid.as_bytes();
    let first = b[0] as usize;
    let lo = if first == 0 {
        0
    } else {
        fanout[first - 1] as usize
    };
    let hi = fanout[first] as usize;
    if lo >= hi {
        return None;
    }
    let want = oid_key(b);
    let key = |i: usize| oid_key(oid_at(i));
    let fraction = u64::from_be_bytes([0, b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let guess = lo + ((u128::from(fraction) * (hi - lo) as u128) >> 56) as usize;
    let (start, end) = match key(guess).cmp(&want) {
        std::cmp::Ordering::Equal => return Some(guess),
        std::cmp::Ordering::Less => {
            let (mut start, mut step) = (guess + 1, 1);
            loop {
                let probe = guess + step;
                if probe >= hi {
                    break (start, hi);
                }
                match key(probe).cmp(&want) {
                    std::cmp::Ordering::Equal => return Some(probe),
                    std::cmp::Ordering::Less => start = probe + 1,
                    std::cmp::Ordering::Greater => break (start, probe),
                }
                step *= 2;
            }
        }
        std::cmp::Ordering::Greater => {
            let (mut end, mut step) = (guess, 1);
            loop {
                if step > guess - lo {
                    break (lo, end);
                }
                let probe = guess - step;
                match key(probe).cmp(&want) {
                    std::cmp::Ordering::Equal => return Some(probe),
                    std::cmp::Ordering::Greater => end = probe,
                    std::cmp::Ordering::Less => break (probe + 1, end),
                }
                step *= 2;
            }
        }
    };
    let (mut lo, mut hi) = (start, end);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key(mid).cmp(&want) {
            std::cmp::Ordering::Equal => return Some(mid),
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
        }
    }
    None
}

/// The decoded index of one container, held in memory sorted by oid: 44
/// bytes an object (the oids in one array, the rest in a row beside each;
/// see the `rows` module), a 1 KiB fanout.
#[derive(Debug, Clone)]
pub struct ContainerIndex {
    fanout: Vec<u32>,
    rows: Rows,
}

impl Default for ContainerIndex {
    /// An index of no objects (a full, zero fanout).
    fn default() -> Self {
        ContainerIndex::from_entries(Vec::new())
    }
}

/// The fanout of sorted oids, `oids` holding their bytes `width` each:
/// entry `b` counts the oids whose first byte is at most `b` (as in
/// `gitformat-pack(5)` `.idx` files).
fn fanout_of(oids: &[u8], width: usize) -> Vec<u32> {
    let mut fanout = vec![0u32; 256];
    for o in oids.chunks_exact(width) {
        fanout[o[0] as usize] += 1;
    }
    let mut sum = 0;
    for f in fanout.iter_mut() {
        sum += *f;
        *f = sum;
    }
    fanout
}

impl ContainerIndex {
    /// Builds an index from entries in any order (sorted here; duplicate oids keep the first).
    pub fn from_entries(mut entries: Vec<IndexEntry>) -> Self {
        entries.sort_by_key(|e| e.oid);
        entries.dedup_by(|a, b| a.oid == b.oid);
        let width = entries
            .first()
            .map_or(SHA1_BYTES, |e| e.oid.as_slice().len());
        let oids: Vec<u8> = entries
            .iter()
            .flat_map(|e| e.oid.as_slice())
            .copied()
            .collect();
        let fanout = fanout_of(&oids, width);
        let mut b = RowsBuilder::new(oids, width);
        for (row, e) in entries.iter().enumerate() {
            b.set_place(row, e.offset, e.length);
            b.set_types(row, e.record_type, e.kind);
            b.set_size(row, e.size);
            b.set_depth(row, e.depth);
            if let Some(base) = e.base {
                let at = find_by(&fanout, |i| b.oid_bytes(i), &base);
                b.set_base(row, base, at);
            }
        }
        ContainerIndex {
            fanout,
            rows: b.finish(),
        }
    }

    /// The entry of row `i` (rows are in oid order).
    ///
    /// # Panics
    /// When `i` is not below [`ContainerIndex::len`].
    pub fn entry(&self, i: usize) -> IndexEntry {
        self.rows.entry(i)
    }

    /// The oid of row `i` (rows are in oid order).
    ///
    /// # Panics
    /// When `i` is not below [`ContainerIndex::len`].
    pub fn oid(&self, i: usize) -> ObjectId {
        self.rows.oid(i)
    }

    /// This index with its oids and rows mapped from a file in `dir` when
    /// it is large enough ([`crate::mapped`]): what a server's cache holds.
    /// A failure to write the file is logged and the index kept as it is.
    pub fn mapped(self, dir: &crate::mapped::MapDir) -> ContainerIndex {
        ContainerIndex {
            fanout: self.fanout,
            rows: self.rows.map(dir),
        }
    }

    /// Drops the pages of a mapped index from the resident set (they stay
    /// in the page cache; see [`crate::mapped`]); nothing for one on the heap.
    pub fn release_pages(&self) {
        self.rows.release_pages();
    }

    /// Whether the oids and rows are mapped from a file
    /// ([`ContainerIndex::mapped`]).
    pub fn is_mapped(&self) -> bool {
        self.rows.is_mapped()
    }

    /// All entries, in oid order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = IndexEntry> + '_ {
        (0..self.len()).map(|i| self.rows.entry(i))
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when the container holds no object.
    pub fn is_empty(&self) -> bool {
        self.rows.len() == 0
    }

    /// The entry of `oid`, found through the fanout and an interpolation
    /// search (see [`ContainerIndex::position`]).
    pub fn lookup(&self, oid: &gix_hash::oid) -> Option<IndexEntry> {
        self.position(oid).map(|i| self.rows.entry(i))
    }

    /// Where `oid`'s entry is: its row, the `i` of [`ContainerIndex::entry`].
    ///
    /// Oids are uniformly distributed, so within the fanout's range for the
    /// first byte, bytes 1..8 place an entry at about that fraction of the
    /// range: the search probes there first, then gallops outwards until the
    /// entry is bracketed and binary-searches the bracket. Typically 2 to 4
    /// cache lines are touched where a plain binary search of a large
    /// container touches one per step (11 for 400,000 objects); a skewed
    /// range costs at most twice the steps of a binary search.
    pub fn position(&self, oid: &gix_hash::oid) -> Option<usize> {
        if oid.as_bytes().len() != self.rows.width() {
            return None;
        }
        find_by(&self.fanout, |i| self.rows.oid_bytes(i), oid)
    }

    /// Bytes of each oid of this index: 20 (SHA-1) or 32 (SHA-256); what
    /// [`crate::record::decode_header`] needs to read its records.
    pub fn oid_width(&self) -> usize {
        self.rows.width()
    }

    /// Serializes and zstd-compresses the index (version 2), or says why the
    /// entries are not a container's records: records back to back from offset
    /// 0, valid types, a whole record without a base, an OFS_DELTA record's
    /// base an earlier record, a REF_DELTA record's base neither null nor itself.
    pub fn try_encode(&self) -> Result<Vec<u8>, IndexError> {
        let mut order: Vec<IndexEntry> = self.iter().collect();
        order.sort_by_key(|e| e.offset);
        let width = self.oid_width();
        let mut oids = Vec::with_capacity(order.len() * width);
        for e in &order {
            oids.extend_from_slice(e.oid.as_slice());
        }
        let mut enc = IndexEncoder::new(oids, width)?;
        for e in &order {
            enc.push(e)?;
        }
        let bin_len = order.last().map_or(0, |e| e.offset + e.length);
        enc.finish(bin_len)
    }

    /// [`ContainerIndex::try_encode`] for entries known to be a container's
    /// (from [`ContainerIndex::decode`] of a version-2 index, or a writer's).
    ///
    /// # Panics
    /// When `try_encode` fails.
    pub fn encode(&self) -> Vec<u8> {
        self.try_encode()
            .unwrap_or_else(|e| panic!("encoding a container index: {e}"))
    }

    /// Decompresses and checks an index written by [`ContainerIndex::encode`]
    /// (version 2) or by an earlier gitstow (version 1).
    pub fn decode(bytes: &[u8]) -> Result<Self, IndexError> {
        // Indexes written since frames declare their size take one buffer.
        let limit = MAX_INDEX_BYTES as u64;
        let raw = crate::zstd_frame::decompress(bytes, limit, limit)
            .map_err(|e| IndexError::Decompress(e.to_string()))?;
        if raw.len() > MAX_INDEX_BYTES {
            return Err(IndexError::Decompress(
                "index is larger than the limit".into(),
            ));
        }
        if raw.len() < 8 + 32 {
            return Err(IndexError::Corrupt("too short"));
        }
        let (body, sum) = raw.split_at(raw.len() - 32);
        if Sha256::digest(body).as_slice() != sum {
            return Err(IndexError::Corrupt("checksum mismatch"));
        }
        if &body[..4] != MAGIC {
            return Err(IndexError::Corrupt("bad magic"));
        }
        match u32::from_be_bytes(body[4..8].try_into().expect("4 bytes")) {
            VERSION => v2::decode(body, SHA1_BYTES, 0),
            VERSION_3 => match body
                .get(8)
                .and_then(|&id| crate::width_of_hash_id(id.into()))
            {
                Some(width) => v2::decode(body, width, 1),
                None => Err(IndexError::Corrupt("unknown hash id")),
            },
            VERSION_1 => Self::decode_v1(body),
            _ => Err(IndexError::Corrupt("unknown version")),
        }
    }

    fn decode_v1(body: &[u8]) -> Result<Self, IndexError> {
        if body.len() < V1_HEADER {
            return Err(IndexError::Corrupt("too short"));
        }
        let u32_at = |i: usize| u32::from_be_bytes(body[i..i + 4].try_into().expect("4 bytes"));
        let count = u32_at(8) as usize;
        if body.len() != V1_HEADER + count * V1_ROW {
            return Err(IndexError::Corrupt(
                "length does not match the object count",
            ));
        }
        let fanout: Vec<u32> = (0..256).map(|i| u32_at(12 + 4 * i)).collect();
        if fanout[255] as usize != count || fanout.windows(2).any(|w| w[0] > w[1]) {
            return Err(IndexError::Corrupt("bad fanout"));
        }
        let entries: Vec<IndexEntry> = body[V1_HEADER..]
            .chunks_exact(V1_ROW)
            .map(IndexEntry::from_v1_row)
            .collect();
        if entries.windows(2).any(|w| w[0].oid >= w[1].oid) {
            return Err(IndexError::Corrupt("entries not sorted"));
        }
        let mut counted = [0u32; 256];
        for e in &entries {
            counted[e.oid.as_slice()[0] as usize] += 1;
        }
        let mut sum = 0;
        for (c, f) in counted.iter().zip(&fanout) {
            sum += c;
            if sum != *f {
                return Err(IndexError::Corrupt("fanout does not match the entries"));
            }
        }
        Ok(ContainerIndex::from_entries(entries))
    }
}

#[cfg(test)]
mod tests;
