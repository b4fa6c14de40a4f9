//! The container index (`.idx`): every object of one container, sorted by oid.
//!
//! Layout before compression (all integers big-endian):
//! `"GSTI"`, version `u32` = 1, object count `u32`, a 256-entry fanout of `u32`
//! (cumulative counts by first oid byte, as in `gitformat-pack(5)` `.idx` files),
//! then one fixed 74-byte row per object: oid (20), offset `u64`, record length `u64`,
//! pack type id `u8` (of the record as stored: 1-4 whole, 6 OFS_DELTA, 7 REF_DELTA),
//! object kind `u8` (1-4, the resolved object's type), inflated object size `u64`,
//! crc32 `u32` (of the record bytes), delta depth `u32`, base oid (20, zero when whole).
//! A trailing SHA-256 of everything before it guards against corruption.
//! The whole is one zstd frame.

use gix_hash::ObjectId;
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 4] = b"GSTI";
const VERSION: u32 = 1;
/// Bytes of one row of the index.
pub const ROW: usize = 20 + 8 + 8 + 1 + 1 + 8 + 4 + 4 + 20;
const HEADER: usize = 4 + 4 + 4 + 256 * 4;
/// Upper bound on a decompressed index, in bytes (about 27 million objects).
const MAX_INDEX_BYTES: usize = 2 << 30;

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
    /// CRC32 of the record bytes.
    pub crc32: u32,
    /// Delta chain depth: 0 for a whole object, base depth + 1 for a delta.
    pub depth: u32,
    /// The delta base's oid (for both OFS_DELTA and REF_DELTA records), `None` when whole.
    pub base: Option<ObjectId>,
}

/// An index that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// zstd failed or the frame is too large.
    #[error("container index does not decompress: {0}")]
    Decompress(String),
    /// Wrong magic, version, lengths or checksum.
    #[error("container index is corrupt: {0}")]
    Corrupt(&'static str),
}

impl IndexEntry {
    /// The entry as one row of the index (the layout in the module docs).
    pub fn to_row(&self) -> [u8; ROW] {
        let mut r = [0u8; ROW];
        r[..20].copy_from_slice(self.oid.as_slice());
        r[20..28].copy_from_slice(&self.offset.to_be_bytes());
        r[28..36].copy_from_slice(&self.length.to_be_bytes());
        r[36] = self.record_type;
        r[37] = self.kind;
        r[38..46].copy_from_slice(&self.size.to_be_bytes());
        r[46..50].copy_from_slice(&self.crc32.to_be_bytes());
        r[50..54].copy_from_slice(&self.depth.to_be_bytes());
        if let Some(b) = self.base {
            r[54..74].copy_from_slice(b.as_slice());
        }
        r
    }

    /// Parses one row written by [`IndexEntry::to_row`].
    pub fn from_row(r: &[u8; ROW]) -> IndexEntry {
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
            crc32: u32_at(46),
            depth: u32_at(50),
            base: (base_raw != [0u8; 20]).then(|| ObjectId::from_bytes_or_panic(base_raw)),
        }
    }
}

/// Encodes an index from rows sorted by oid without duplicates (what
/// [`ContainerIndex::encode`] writes), without building the entries in memory.
pub fn encode_sorted_rows(rows: &[[u8; ROW]]) -> Vec<u8> {
    let mut fanout = vec![0u32; 256];
    for r in rows {
        fanout[r[0] as usize] += 1;
    }
    let mut sum = 0;
    for f in fanout.iter_mut() {
        sum += *f;
        *f = sum;
    }
    encode_rows(&fanout, rows.len(), rows.iter().copied())
}

/// Header, rows and checksum, compressed as they are written (64 KiB at a time).
fn encode_rows(fanout: &[u32], count: usize, rows: impl Iterator<Item = [u8; ROW]>) -> Vec<u8> {
    use std::io::Write;
    let mut z = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("zstd encoder over a Vec");
    let mut hasher = Sha256::new();
    let mut raw = Vec::with_capacity(64 * 1024 + ROW);
    let mut flush = |raw: &mut Vec<u8>, z: &mut zstd::stream::write::Encoder<'_, Vec<u8>>| {
        hasher.update(&raw[..]);
        z.write_all(raw).expect("writing to a Vec cannot fail");
        raw.clear();
    };
    raw.extend_from_slice(MAGIC);
    raw.extend_from_slice(&VERSION.to_be_bytes());
    raw.extend_from_slice(&(count as u32).to_be_bytes());
    for f in fanout {
        raw.extend_from_slice(&f.to_be_bytes());
    }
    for row in rows {
        if raw.len() >= 64 * 1024 {
            flush(&mut raw, &mut z);
        }
        raw.extend_from_slice(&row);
    }
    flush(&mut raw, &mut z);
    let sum = hasher.finalize();
    z.write_all(&sum).expect("writing to a Vec cannot fail");
    z.finish().expect("writing to a Vec cannot fail")
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

    /// Serializes and zstd-compresses the index.
    pub fn encode(&self) -> Vec<u8> {
        encode_rows(
            &self.fanout,
            self.entries.len(),
            self.entries.iter().map(IndexEntry::to_row),
        )
    }

    /// Decompresses and checks an index written by [`ContainerIndex::encode`].
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
        if raw.len() < HEADER + 32 {
            return Err(IndexError::Corrupt("too short"));
        }
        let (body, sum) = raw.split_at(raw.len() - 32);
        if Sha256::digest(body).as_slice() != sum {
            return Err(IndexError::Corrupt("checksum mismatch"));
        }
        if &body[..4] != MAGIC {
            return Err(IndexError::Corrupt("bad magic"));
        }
        let u32_at = |i: usize| u32::from_be_bytes(body[i..i + 4].try_into().expect("4 bytes"));
        if u32_at(4) != VERSION {
            return Err(IndexError::Corrupt("unknown version"));
        }
        let count = u32_at(8) as usize;
        if body.len() != HEADER + count * ROW {
            return Err(IndexError::Corrupt(
                "length does not match the object count",
            ));
        }
        let fanout: Vec<u32> = (0..256).map(|i| u32_at(12 + 4 * i)).collect();
        if fanout[255] as usize != count || fanout.windows(2).any(|w| w[0] > w[1]) {
            return Err(IndexError::Corrupt("bad fanout"));
        }
        let entries: Vec<IndexEntry> = body[HEADER..]
            .chunks_exact(ROW)
            .map(|r| IndexEntry::from_row(r.try_into().expect("ROW bytes")))
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

    fn entry(b: u8, off: u64) -> IndexEntry {
        let mut raw = [b; 20];
        raw[19] = off as u8;
        IndexEntry {
            oid: ObjectId::from_bytes_or_panic(&raw),
            offset: off,
            length: 10,
            record_type: 3,
            kind: 3,
            size: 42,
            crc32: 7,
            depth: 0,
            base: (off % 2 == 1).then(|| ObjectId::from_bytes_or_panic(&[9; 20])),
        }
    }

    #[test]
    fn roundtrip_and_lookup() {
        let entries: Vec<_> = (0..256u64).map(|i| entry((i * 7 % 256) as u8, i)).collect();
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
    fn corruption_is_detected() {
        let idx = ContainerIndex::from_entries(vec![entry(1, 1)]);
        let raw = zstd::stream::decode_all(&idx.encode()[..]).unwrap();
        let mut bad = raw.clone();
        bad[HEADER + 3] ^= 1;
        let bad = zstd::bulk::compress(&bad, 1).unwrap();
        assert!(ContainerIndex::decode(&bad).is_err());
        assert!(ContainerIndex::decode(b"not zstd").is_err());
    }
}
