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
const VERSION_1: u32 = 1;
const V1_ROW: usize = 20 + 8 + 8 + 1 + 1 + 8 + 4 + 4 + 20;
const V1_HEADER: usize = 4 + 4 + 4 + 256 * 4;
const HEADER: usize = 4 + 4 + 4 + 8;
/// Oids are bucketed by their first two bytes.
const PREFIXES: usize = 1 << 16;
/// Bytes of an oid stored per row (after the two-byte prefix).
const SUFFIX: usize = 20 - 2;
/// Upper bound on a decompressed index, in bytes.
const MAX_INDEX_BYTES: usize = 2 << 30;
/// Bytes of one row of the writer's staging file ([`IndexEntry::to_row`]).
pub const ROW: usize = 20 + 8 + 8 + 1 + 1 + 8 + 4 + 20;

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
    /// format): oid (20), offset `u64`, length `u64`, record type `u8`, kind `u8`,
    /// size `u64`, depth `u32`, base oid (20, zero when `None`).
    pub fn to_row(&self) -> [u8; ROW] {
        let mut r = [0u8; ROW];
        r[..20].copy_from_slice(self.oid.as_slice());
        r[20..28].copy_from_slice(&self.offset.to_be_bytes());
        r[28..36].copy_from_slice(&self.length.to_be_bytes());
        r[36] = self.record_type;
        r[37] = self.kind;
        r[38..46].copy_from_slice(&self.size.to_be_bytes());
        r[46..50].copy_from_slice(&self.depth.to_be_bytes());
        if let Some(b) = self.base {
            r[50..70].copy_from_slice(b.as_slice());
        }
        r
    }

    /// Parses one row written by [`IndexEntry::to_row`].
    pub fn from_row(r: &[u8; ROW]) -> IndexEntry {
        let u64_at = |i: usize| u64::from_be_bytes(r[i..i + 8].try_into().expect("8 bytes"));
        let base_raw = &r[50..70];
        IndexEntry {
            oid: ObjectId::from_bytes_or_panic(&r[..20]),
            offset: u64_at(20),
            length: u64_at(28),
            record_type: r[36],
            kind: r[37],
            size: u64_at(38),
            depth: u32::from_be_bytes(r[46..50].try_into().expect("4 bytes")),
            base: (base_raw != [0u8; 20]).then(|| ObjectId::from_bytes_or_panic(base_raw)),
        }
    }

    /// Parses one version-1 row (the crc32 is dropped).
    fn from_v1_row(r: &[u8]) -> IndexEntry {
        let u32_at = |i: usize| u32::from_be_bytes(r[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_be_bytes(r[i..i + 8].try_into().expect("8 bytes"));
        let base_raw = &r[54..74];
        IndexEntry {
            oid: ObjectId::from_bytes_or_panic(&r[..20]),
            offset: u64_at(20),
            length: u64_at(28),
            record_type: r[36],
            kind: r[37],
            size: u64_at(38),
            depth: u32_at(50),
            base: (base_raw != [0u8; 20]).then(|| ObjectId::from_bytes_or_panic(base_raw)),
        }
    }
}

/// Whether `record_type << 4 | kind` is a valid type byte (section 6).
fn valid_types(record_type: u8, kind: u8) -> bool {
    match record_type {
        1..=4 => kind == record_type,
        OFS_DELTA | REF_DELTA => (1..=4).contains(&kind),
        _ => false,
    }
}

/// Bytes of a row number when there are `n` rows (section 4).
fn row_width(n: usize) -> usize {
    match n {
        0..=0x100 => 1,
        0x101..=0x1_0000 => 2,
        0x1_0001..=0x100_0000 => 3,
        _ => 4,
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// An oid from its two-byte prefix (section 2) and its suffix (section 3).
fn oid_from_parts(prefix: usize, suffix: &[u8]) -> ObjectId {
    let mut raw = [0u8; 20];
    raw[..2].copy_from_slice(&(prefix as u16).to_be_bytes());
    raw[2..].copy_from_slice(suffix);
    ObjectId::from_bytes_or_panic(&raw)
}

/// Writes a version-2 index: [`IndexEncoder::new`] with the oids of a container's
/// records in `.bin` order, [`IndexEncoder::push`] with each record in that
/// order, then [`IndexEncoder::finish`]. Holds the oids, two row numbers a
/// record and the small columns (about 35 bytes a record), never the entries.
pub struct IndexEncoder {
    /// Oids in `.bin` order.
    oids: Vec<ObjectId>,
    /// Record numbers in oid order (row → record).
    by_oid: Vec<u32>,
    /// The next record expected by `push`.
    next: usize,
    /// Offset of the next record.
    offset: u64,
    lengths: Vec<u8>,
    types: Vec<u8>,
    sizes: Vec<u8>,
    depths: Vec<u8>,
    ofs_bases: Vec<u8>,
    ref_bases: Vec<u8>,
}

impl IndexEncoder {
    /// Starts the index of the records whose oids are `oids`, in `.bin` order.
    pub fn new(oids: Vec<ObjectId>) -> Result<Self, IndexError> {
        let n = oids.len();
        if u32::try_from(n).is_err() {
            return Err(IndexError::Invalid("too many records"));
        }
        if oids.iter().any(|o| o.as_slice().len() != 20) {
            return Err(IndexError::Invalid("not a SHA-1 oid"));
        }
        let mut by_oid: Vec<u32> = (0..n as u32).collect();
        by_oid.sort_unstable_by(|&a, &b| oids[a as usize].cmp(&oids[b as usize]));
        if by_oid
            .windows(2)
            .any(|w| oids[w[0] as usize] == oids[w[1] as usize])
        {
            return Err(IndexError::Invalid("duplicate oid"));
        }
        Ok(IndexEncoder {
            oids,
            by_oid,
            next: 0,
            offset: 0,
            lengths: Vec::with_capacity(n * 2),
            types: Vec::with_capacity(n),
            sizes: Vec::with_capacity(n * 2),
            depths: Vec::with_capacity(n),
            ofs_bases: Vec::new(),
            ref_bases: Vec::new(),
        })
    }

    /// Adds the next record in `.bin` order; its oid and offset must be the
    /// ones expected (records back to back from offset 0).
    pub fn push(&mut self, e: &IndexEntry) -> Result<(), IndexError> {
        let p = self.next;
        if self.oids.get(p) != Some(&e.oid) {
            return Err(IndexError::Invalid("records not in the order of the oids"));
        }
        if e.offset != self.offset {
            return Err(IndexError::Invalid("records are not back to back"));
        }
        if e.length == 0 {
            return Err(IndexError::Invalid("empty record"));
        }
        let end = self
            .offset
            .checked_add(e.length)
            .ok_or(IndexError::Invalid("records end past 2^64"))?;
        if !valid_types(e.record_type, e.kind) {
            return Err(IndexError::Invalid("bad record type or kind"));
        }
        match (e.record_type, e.base) {
            (OFS_DELTA, Some(base)) => {
                let row = self
                    .by_oid
                    .binary_search_by(|&i| self.oids[i as usize].cmp(&base))
                    .map_err(|_| IndexError::Invalid("OFS_DELTA base not in the container"))?;
                let at = self.by_oid[row] as usize;
                if at >= p {
                    return Err(IndexError::Invalid("OFS_DELTA base not before its delta"));
                }
                put_varint(&mut self.ofs_bases, (p - at) as u64);
            }
            (REF_DELTA, Some(base)) => {
                if base == e.oid || base.is_null() {
                    return Err(IndexError::Invalid(
                        "REF_DELTA base is the null oid or itself",
                    ));
                }
                self.ref_bases.extend_from_slice(base.as_slice());
            }
            (1..=4, None) => {}
            _ => return Err(IndexError::Invalid("base does not match the record type")),
        }
        put_varint(&mut self.lengths, e.length);
        self.types.push((e.record_type << 4) | e.kind);
        put_varint(&mut self.sizes, e.size);
        put_varint(&mut self.depths, e.depth.into());
        self.offset = end;
        self.next += 1;
        Ok(())
    }

    /// Writes the index after the last record; `bin_len` is the length of the
    /// `.bin`, where the last record must end.
    pub fn finish(self, bin_len: u64) -> Result<Vec<u8>, IndexError> {
        let n = self.oids.len();
        if self.next != n {
            return Err(IndexError::Invalid("fewer records than oids"));
        }
        if self.offset != bin_len {
            return Err(IndexError::Invalid(
                "records do not end at the end of the .bin",
            ));
        }
        let mut out = Body::new();
        out.put(MAGIC);
        out.put(&VERSION.to_be_bytes());
        out.put(&(n as u32).to_be_bytes());
        out.put(&bin_len.to_be_bytes());
        let mut counts = vec![0u64; PREFIXES];
        for o in &self.oids {
            let s = o.as_slice();
            counts[u16::from_be_bytes([s[0], s[1]]) as usize] += 1;
        }
        let mut column = Vec::with_capacity(PREFIXES);
        for c in counts {
            put_varint(&mut column, c);
        }
        out.put(&column);
        drop(column);
        let mut row_of = vec![0u32; n];
        for (row, &p) in self.by_oid.iter().enumerate() {
            out.put(&self.oids[p as usize].as_slice()[2..]);
            row_of[p as usize] = row as u32;
        }
        drop(self.by_oid);
        drop(self.oids);
        let w = row_width(n);
        for row in row_of {
            out.put(&row.to_be_bytes()[4 - w..]);
        }
        for column in [
            self.lengths,
            self.types,
            self.sizes,
            self.depths,
            self.ofs_bases,
            self.ref_bases,
        ] {
            out.put(&column);
        }
        Ok(out.finish())
    }
}

/// The body going through SHA-256 and zstd, 64 KiB at a time.
struct Body {
    z: zstd::stream::write::Encoder<'static, Vec<u8>>,
    hasher: Sha256,
    buf: Vec<u8>,
}

impl Body {
    const CHUNK: usize = 64 * 1024;

    fn new() -> Self {
        Body {
            z: zstd::stream::write::Encoder::new(Vec::new(), 3).expect("zstd encoder over a Vec"),
            hasher: Sha256::new(),
            buf: Vec::with_capacity(Self::CHUNK),
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        if self.buf.len() + bytes.len() > Self::CHUNK {
            self.flush();
        }
        if bytes.len() >= Self::CHUNK {
            self.hasher.update(bytes);
            self.write(bytes);
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.z
            .write_all(bytes)
            .expect("writing to a Vec cannot fail");
    }

    fn flush(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        self.hasher.update(&buf);
        self.write(&buf);
        self.buf = buf;
        self.buf.clear();
    }

    fn finish(mut self) -> Vec<u8> {
        use std::io::Write;
        self.flush();
        let Body { mut z, hasher, .. } = self;
        z.write_all(&hasher.finalize())
            .expect("writing to a Vec cannot fail");
        z.finish().expect("writing to a Vec cannot fail")
    }
}

/// Reads the body of a version-2 index front to back.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], IndexError> {
        if self.rest.len() < n {
            return Err(IndexError::Corrupt(what));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, IndexError> {
        let mut v = 0u64;
        for i in 0..10 {
            let &b = self.rest.get(i).ok_or(IndexError::Corrupt(what))?;
            let group = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(IndexError::Corrupt(what));
            }
            v |= group << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(IndexError::Corrupt(what));
                }
                self.rest = &self.rest[i + 1..];
                return Ok(v);
            }
        }
        Err(IndexError::Corrupt(what))
    }
}

/// The decoded index of one container, held in memory sorted by oid.
#[derive(Debug, Clone)]
pub struct ContainerIndex {
    fanout: Vec<u32>,
    entries: Vec<IndexEntry>,
}

impl Default for ContainerIndex {
    /// An index of no objects (a full, zero fanout).
    fn default() -> Self {
        ContainerIndex::from_entries(Vec::new())
    }
}

impl ContainerIndex {
    /// Builds an index from entries in any order (sorted here; duplicate oids keep the first).
    pub fn from_entries(mut entries: Vec<IndexEntry>) -> Self {
        entries.sort_by_key(|e| e.oid);
        entries.dedup_by(|a, b| a.oid == b.oid);
        let mut fanout = vec![0u32; 256];
        for e in &entries {
            fanout[e.oid.as_slice()[0] as usize] += 1;
        }
        let mut sum = 0;
        for f in fanout.iter_mut() {
            sum += *f;
            *f = sum;
        }
        ContainerIndex { fanout, entries }
    }

    /// All entries, sorted by oid.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the container holds no object.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `oid`, found through the fanout and a binary search (O(log n)).
    pub fn lookup(&self, oid: &gix_hash::oid) -> Option<&IndexEntry> {
        let first = oid.as_bytes()[0] as usize;
        let lo = if first == 0 {
            0
        } else {
            self.fanout[first - 1] as usize
        };
        let hi = self.fanout[first] as usize;
        let slice = &self.entries[lo..hi];
        slice
            .binary_search_by(|e| e.oid.as_ref().cmp(oid))
            .ok()
            .map(|i| &slice[i])
    }

    /// Serializes and zstd-compresses the index (version 2), or says why the
    /// entries are not a container's records: records back to back from offset
    /// 0, valid types, a whole record without a base, an OFS_DELTA record's
    /// base an earlier record, a REF_DELTA record's base neither null nor itself.
    pub fn try_encode(&self) -> Result<Vec<u8>, IndexError> {
        let mut order: Vec<&IndexEntry> = self.entries.iter().collect();
        order.sort_by_key(|e| e.offset);
        let mut enc = IndexEncoder::new(order.iter().map(|e| e.oid).collect())?;
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
        use std::io::Read;
        let decoder = zstd::stream::read::Decoder::new(bytes)
            .map_err(|e| IndexError::Decompress(e.to_string()))?;
        let mut raw = Vec::new();
        decoder
            .take(MAX_INDEX_BYTES as u64 + 1)
            .read_to_end(&mut raw)
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
            VERSION => Self::decode_v2(body),
            VERSION_1 => Self::decode_v1(body),
            _ => Err(IndexError::Corrupt("unknown version")),
        }
    }

    fn decode_v2(body: &[u8]) -> Result<Self, IndexError> {
        let mut cur = Cursor { rest: &body[8..] };
        let head = cur.take(HEADER - 8, "too short")?;
        let n = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let bin_len = u64::from_be_bytes(head[4..].try_into().expect("8 bytes"));

        // Prefix counts, then the oids, rows in order (which also makes the fanout).
        let mut counts = Vec::with_capacity(PREFIXES);
        let mut total = 0usize;
        for _ in 0..PREFIXES {
            let c = cur.varint("bad prefix count")?;
            let c = usize::try_from(c)
                .ok()
                .filter(|&c| c <= n - total)
                .ok_or(IndexError::Corrupt("prefix counts exceed the record count"))?;
            total += c;
            counts.push(c);
        }
        if total != n {
            return Err(IndexError::Corrupt(
                "prefix counts do not add up to the record count",
            ));
        }
        let suffixes = cur.take(
            n.checked_mul(SUFFIX)
                .ok_or(IndexError::Corrupt("too short"))?,
            "too short for the oids",
        )?;
        let mut entries = Vec::with_capacity(n);
        let mut fanout = vec![0u32; 256];
        let mut suffixes = suffixes.chunks_exact(SUFFIX);
        for (prefix, &c) in counts.iter().enumerate() {
            let mut prev: Option<&[u8]> = None;
            for _ in 0..c {
                let s = suffixes.next().expect("n suffixes");
                if prev.is_some_and(|p| p >= s) {
                    return Err(IndexError::Corrupt("oids not sorted"));
                }
                prev = Some(s);
                entries.push(IndexEntry {
                    oid: oid_from_parts(prefix, s),
                    offset: 0,
                    length: 0,
                    record_type: 0,
                    kind: 0,
                    size: 0,
                    depth: 0,
                    base: None,
                });
            }
            fanout[prefix >> 8] += c as u32;
        }
        drop(counts);
        let mut sum = 0;
        for f in fanout.iter_mut() {
            sum += *f;
            *f = sum;
        }

        // The row of each record: a permutation.
        let w = row_width(n);
        let rows = cur.take(n * w, "too short for the rows")?;
        let mut row_of = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        for r in rows.chunks_exact(w) {
            let mut be = [0u8; 4];
            be[4 - w..].copy_from_slice(r);
            let row = u32::from_be_bytes(be) as usize;
            match seen.get_mut(row) {
                Some(s) if !*s => *s = true,
                _ => return Err(IndexError::Corrupt("rows are not a permutation")),
            }
            row_of.push(row as u32);
        }
        drop(seen);

        let mut offset = 0u64;
        for &row in &row_of {
            let length = cur.varint("bad length")?;
            if length == 0 {
                return Err(IndexError::Corrupt("empty record"));
            }
            let e = &mut entries[row as usize];
            e.offset = offset;
            e.length = length;
            offset = offset
                .checked_add(length)
                .filter(|&end| end <= bin_len)
                .ok_or(IndexError::Corrupt("records end past the .bin"))?;
        }
        if offset != bin_len {
            return Err(IndexError::Corrupt("records do not fill the .bin"));
        }
        let types = cur.take(n, "too short for the types")?;
        for (&row, &t) in row_of.iter().zip(types) {
            let e = &mut entries[row as usize];
            (e.record_type, e.kind) = (t >> 4, t & 0xf);
            if !valid_types(e.record_type, e.kind) {
                return Err(IndexError::Corrupt("bad record type or kind"));
            }
        }
        for &row in &row_of {
            entries[row as usize].size = cur.varint("bad size")?;
        }
        for &row in &row_of {
            entries[row as usize].depth = u32::try_from(cur.varint("bad depth")?)
                .map_err(|_| IndexError::Corrupt("bad depth"))?;
        }
        for (p, &row) in row_of.iter().enumerate() {
            if entries[row as usize].record_type == OFS_DELTA {
                let back = cur.varint("bad OFS_DELTA base")?;
                let base_row = usize::try_from(back)
                    .ok()
                    .filter(|&b| (1..=p).contains(&b))
                    .map(|b| row_of[p - b] as usize)
                    .ok_or(IndexError::Corrupt("OFS_DELTA base out of range"))?;
                entries[row as usize].base = Some(entries[base_row].oid);
            }
        }
        for &row in &row_of {
            let e = &mut entries[row as usize];
            if e.record_type == REF_DELTA {
                let base = ObjectId::from_bytes_or_panic(cur.take(20, "too short for the bases")?);
                if base == e.oid || base.is_null() {
                    return Err(IndexError::Corrupt(
                        "REF_DELTA base is the null oid or itself",
                    ));
                }
                e.base = Some(base);
            }
        }
        if !cur.rest.is_empty() {
            return Err(IndexError::Corrupt("trailing bytes"));
        }
        Ok(ContainerIndex { fanout, entries })
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
        Ok(ContainerIndex { fanout, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container of 256 records: whole ones, OFS_DELTAs on the record
    /// before, and REF_DELTAs on an outside oid.
    fn container() -> Vec<IndexEntry> {
        let oid = |i: u64| {
            let mut raw = [(i * 7 % 256) as u8; 20];
            raw[18] = 0xaa;
            raw[19] = i as u8;
            ObjectId::from_bytes_or_panic(&raw)
        };
        (0..256u64)
            .map(|i| {
                let (record_type, base) = match i % 3 {
                    0 => (3, None),
                    1 => (OFS_DELTA, Some(oid(i - 1))),
                    _ => (REF_DELTA, Some(ObjectId::from_bytes_or_panic(&[9; 20]))),
                };
                IndexEntry {
                    oid: oid(i),
                    offset: i * 10,
                    length: 10,
                    record_type,
                    kind: 3,
                    size: 42 + i,
                    depth: (i % 3 != 0) as u32,
                    base,
                }
            })
            .collect()
    }

    #[test]
    fn roundtrip_and_lookup() {
        let entries = container();
        let idx = ContainerIndex::from_entries(entries.clone());
        let back = ContainerIndex::decode(&idx.encode()).unwrap();
        assert_eq!(back.len(), 256);
        for e in &entries {
            assert_eq!(back.lookup(&e.oid), Some(e));
        }
        assert!(back
            .lookup(&ObjectId::from_bytes_or_panic(&[1; 20]))
            .is_none());
    }

    #[test]
    fn empty_index_roundtrips() {
        let back = ContainerIndex::decode(&ContainerIndex::default().encode()).unwrap();
        assert!(back.is_empty());
    }

    #[test]
    fn varints_are_strict() {
        let read = |b: &[u8]| Cursor { rest: b }.varint("x").ok();
        assert_eq!(read(&[0]), Some(0));
        assert_eq!(read(&[0x80, 0x01]), Some(128));
        assert_eq!(read(&[0x80, 0x00]), None);
        assert_eq!(read(&[0x80]), None);
        let mut max = Vec::new();
        put_varint(&mut max, u64::MAX);
        assert_eq!(max.len(), 10);
        assert_eq!(read(&max), Some(u64::MAX));
        max[9] = 2;
        assert_eq!(read(&max), None);
        assert_eq!(read(&[0xff; 11]), None);
    }

    #[test]
    fn corruption_is_detected() {
        let idx = ContainerIndex::from_entries(container());
        let raw = zstd::stream::decode_all(&idx.encode()[..]).unwrap();
        let mut bad = raw.clone();
        bad[HEADER + 3] ^= 1;
        let bad = zstd::bulk::compress(&bad, 1).unwrap();
        assert!(ContainerIndex::decode(&bad).is_err());
        assert!(ContainerIndex::decode(b"not zstd").is_err());
    }

    #[test]
    fn entries_that_are_not_a_container_do_not_encode() {
        let good = container();
        type Edit = Box<dyn Fn(&mut Vec<IndexEntry>)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("gap", Box::new(|v| v[5].offset += 1)),
            ("empty", Box::new(|v| v[255].length = 0)),
            ("type", Box::new(|v| v[0].record_type = 5)),
            ("whole kind", Box::new(|v| v[0].kind = 1)),
            ("whole base", Box::new(|v| v[0].base = v[1].base)),
            ("ofs later", Box::new(|v| v[1].base = Some(v[3].oid))),
            ("ofs outside", Box::new(|v| v[1].base = v[2].base)),
            ("ofs itself", Box::new(|v| v[1].base = Some(v[1].oid))),
            ("ref itself", Box::new(|v| v[2].base = Some(v[2].oid))),
            ("ref none", Box::new(|v| v[2].base = None)),
        ];
        for (what, edit) in cases {
            let mut v = good.clone();
            edit(&mut v);
            assert!(
                ContainerIndex::from_entries(v).try_encode().is_err(),
                "{what}"
            );
        }
    }

    #[test]
    fn version_1_is_read() {
        let entries = container();
        let mut sorted = entries.clone();
        sorted.sort_by_key(|e| e.oid);
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&(sorted.len() as u32).to_be_bytes());
        for i in 0..256 {
            let c = sorted
                .iter()
                .filter(|e| e.oid.as_slice()[0] as usize <= i)
                .count() as u32;
            body.extend_from_slice(&c.to_be_bytes());
        }
        for e in &sorted {
            body.extend_from_slice(e.oid.as_slice());
            body.extend_from_slice(&e.offset.to_be_bytes());
            body.extend_from_slice(&e.length.to_be_bytes());
            body.extend_from_slice(&[e.record_type, e.kind]);
            body.extend_from_slice(&e.size.to_be_bytes());
            body.extend_from_slice(&0xdead_beef_u32.to_be_bytes());
            body.extend_from_slice(&e.depth.to_be_bytes());
            body.extend_from_slice(e.base.as_ref().map_or(&[0u8; 20][..], |b| b.as_slice()));
        }
        let sum = Sha256::digest(&body);
        body.extend_from_slice(&sum);
        let idx = ContainerIndex::decode(&zstd::bulk::compress(&body, 3).unwrap()).unwrap();
        assert_eq!(idx.entries(), &sorted[..]);
        // and it is written back as version 2
        let again = ContainerIndex::decode(&idx.encode()).unwrap();
        assert_eq!(again.entries(), &sorted[..]);
    }
}
