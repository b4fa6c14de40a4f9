//! Reachability bitmaps over a GC's closure (git's `pack-bitmap.c` and
//! `Documentation/technical/bitmap-format.txt`, with roaring bitmaps in
//! place of EWAH).
//!
//! A GC writes what its tips reach into its live containers (the state's
//! closure). Their objects get one bit each: the containers in the state's
//! order, each container's objects in record (offset) order, so that what a
//! commit reaches is a few long runs. For selected commits (every tip, and
//! one commit in [`SPACING`] in commit-date order) the file stores the
//! bitmap of everything the commit reaches. What any commit of the closure
//! reaches is then the union of the bitmaps of the nearest selected
//! commits below it plus a short walk down to them ([`Reacher::reach`],
//! git's `find_objects`): a fetch learns everything the client has without
//! walking its history.
//!
//! The file is `<id>.bitmap` of the closure's first container, immutable,
//! CRC-32 checked. Layout (integers big-endian):
//!
//! ```text
//! "GSBM" | version u32 = 2 | containers u32 | bitmaps u32
//! containers × { id length u8 | id | objects u32 }
//! bitmaps × { commit oid[20] | xor offset u32 | length u32 | roaring bitmap (portable format) }
//! CRC-32 of everything before it, u32
//! ```
//!
//! Bitmaps are written fewest bits first. As with git's `xor_offset`
//! (`bitmap-format.txt`), a bitmap whose offset `k` is not 0 is stored
//! XORed with the (resolved) bitmap written `k` entries before it: its
//! build's largest selected ancestor ([`BitmapFile::xor_bases`]), so what
//! is stored is what the commit adds to it, mostly some hundreds of
//! objects instead of the whole history (git/git's 1,846 bitmaps: 50 MB
//! whole, 1.3 MB so). Version 1 (no offset field, every bitmap whole) is
//! still read.
//!
//! Version 3 is written for SHA-256 repositories (plan 0019): after the
//! version comes the hash id `u32` (1 SHA-1, 2 SHA-256), and each commit
//! oid is the hash's width; the rest is version 2's. A SHA-1 file is still
//! written as version 2, byte for byte.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use gix_hash::ObjectId;
use gix_hashtable::{HashMap, HashSet};
use roaring::RoaringBitmap;

use crate::container::ContainerIndex;
use crate::graph::CommitRow;
use crate::objects::{ObjectCache, ObjectDb};
use crate::oids::{OidSet, OidVec};
use crate::recent::RecentOids;

const MAGIC: &[u8; 4] = b"GSBM";
const VERSION: u32 = 2;
const VERSION_3: u32 = 3;

/// One commit in this many, in commit-date order from the tips, gets a
/// bitmap (git selects about one in 100 recent commits too).
pub const SPACING: usize = 100;

/// Why bitmaps could not be built, read or used.
#[derive(Debug, thiserror::Error)]
pub enum BitmapError {
    /// The file does not decode.
    #[error("bitmap file is unreadable: {0}")]
    Malformed(String),
    /// The file was written for other containers.
    #[error("bitmap file does not match the closure's containers")]
    Mismatch,
    /// A walked object is not in the closure's containers.
    #[error("object {0} is outside the closure")]
    Outside(ObjectId),
    /// An object does not parse.
    #[error("object {0} does not parse")]
    Corrupt(ObjectId),
    /// Reading failed.
    #[error(transparent)]
    Odb(#[from] crate::Error),
}

/// The bit order: for each closure container, its first bit and the
/// offset order of its entries.
#[derive(Debug)]
pub struct BitOrder {
    parts: Vec<Part>,
    total: u32,
}

#[derive(Debug)]
struct Part {
    base: u32,
    /// Entry (position in the index's oid order) → rank in offset order.
    rank: Vec<u32>,
    /// Rank → entry.
    order: Vec<u32>,
}

impl BitOrder {
    /// The order of the objects of `indexes` (the closure's containers, in
    /// the state's order).
    pub fn new(indexes: &[&ContainerIndex]) -> Self {
        let mut parts = Vec::with_capacity(indexes.len());
        let mut base = 0u32;
        for idx in indexes {
            let mut order: Vec<u32> = (0..idx.len() as u32).collect();
            order.sort_unstable_by_key(|&i| idx.entry(i as usize).offset);
            let mut rank = vec![0u32; idx.len()];
            for (r, &i) in order.iter().enumerate() {
                rank[i as usize] = r as u32;
            }
            parts.push(Part { base, rank, order });
            base += idx.len() as u32;
        }
        BitOrder { parts, total: base }
    }

    /// Number of bits (objects of the closure).
    pub fn len(&self) -> u32 {
        self.total
    }

    /// True when the closure has no object.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// The closure's containers in an [`ObjectDb`] with their bit order.
#[derive(Clone, Copy)]
pub struct Closure<'a> {
    /// The objects.
    pub db: &'a ObjectDb,
    /// Positions of the closure's containers in `db`, in the state's order.
    pub containers: &'a [usize],
    /// Their bit order (built from the same containers).
    pub order: &'a BitOrder,
}

impl Closure<'_> {
    /// The bit of `oid`, if the closure holds it.
    pub fn position(&self, oid: &gix_hash::oid) -> Option<u32> {
        self.containers
            .iter()
            .zip(&self.order.parts)
            .find_map(|(&c, part)| {
                let i = self.db.container(c).position(oid)?;
                Some(part.base + part.rank[i])
            })
    }

    /// The object of bit `pos`.
    pub fn oid(&self, pos: u32) -> ObjectId {
        let (c, entry) = self.locate(pos);
        self.db.container(c).oid(entry)
    }

    /// The index entry (oid, kind, inflated size…) of bit `pos`.
    pub fn entry(&self, pos: u32) -> crate::container::IndexEntry {
        let (c, entry) = self.locate(pos);
        self.db.container(c).entry(entry)
    }

    /// The container position in `db` and index row of bit `pos`.
    fn locate(&self, pos: u32) -> (usize, usize) {
        let k = self.order.parts.partition_point(|p| p.base <= pos) - 1;
        let part = &self.order.parts[k];
        let entry = part.order[(pos - part.base) as usize] as usize;
        (self.containers[k], entry)
    }
}

/// A decoded bitmap file.
#[derive(Debug, Default)]
pub struct BitmapFile {
    /// (container id, objects) it was written for, in the state's order.
    pub containers: Vec<(String, u32)>,
    /// Selected commit → everything it reaches.
    pub bitmaps: HashMap<ObjectId, RoaringBitmap>,
    /// For the encoder: selected commit → the selected commit whose bitmap
    /// its own is best stored XORed with (a commit it reaches, so its
    /// bitmap is a subset with fewer bits). [`build`] fills it; a commit
    /// without an entry, or whose base is not in `bitmaps`, is stored whole.
    /// [`BitmapFile::decode`] leaves it empty.
    pub xor_bases: HashMap<ObjectId, ObjectId>,
}

impl BitmapFile {
    /// Encodes the file.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_to(&mut out).expect("writing to a Vec");
        out
    }

    /// Encodes the file into `out` as it goes (a large file is never held
    /// whole); returns its length in bytes.
    ///
    /// # Errors
    /// Writing to `out` failed.
    pub fn encode_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<u64> {
        use std::io::Write;
        let mut out = CrcWriter {
            out,
            crc: crc32fast::Hasher::new(),
            len: 0,
        };
        out.write_all(MAGIC)?;
        let width = self
            .bitmaps
            .keys()
            .next()
            .map_or(20, |c| c.as_slice().len());
        if width == 20 {
            out.write_all(&VERSION.to_be_bytes())?;
        } else {
            out.write_all(&VERSION_3.to_be_bytes())?;
            out.write_all(&u32::from(crate::SHA256_HASH_ID).to_be_bytes())?;
        }
        out.write_all(&(self.containers.len() as u32).to_be_bytes())?;
        out.write_all(&(self.bitmaps.len() as u32).to_be_bytes())?;
        for (id, objects) in &self.containers {
            out.write_all(&[id.len() as u8])?;
            out.write_all(id.as_bytes())?;
            out.write_all(&objects.to_be_bytes())?;
        }
        // Fewest bits first (ties by oid): a base, which reaches less than
        // what uses it, is always written before it.
        let mut written: Vec<(&ObjectId, &RoaringBitmap)> = self.bitmaps.iter().collect();
        written.sort_by_key(|(c, b)| (b.len(), **c));
        let index: HashMap<ObjectId, usize> = written
            .iter()
            .enumerate()
            .map(|(i, (c, _))| (**c, i))
            .collect();
        for (i, (commit, whole)) in written.iter().enumerate() {
            let xored = self
                .xor_bases
                .get(*commit)
                .and_then(|base| index.get(base))
                .filter(|&&b| b < i)
                .map(|&b| {
                    let mut xor = *whole ^ written[b].1;
                    xor.optimize();
                    ((i - b) as u32, xor)
                })
                .filter(|(_, xor)| xor.serialized_size() < whole.serialized_size());
            let (offset, stored) = match &xored {
                Some((offset, xor)) => (*offset, xor),
                None => (0, *whole),
            };
            out.write_all(commit.as_bytes())?;
            out.write_all(&offset.to_be_bytes())?;
            out.write_all(&(stored.serialized_size() as u32).to_be_bytes())?;
            stored.serialize_into(&mut out)?;
        }
        let CrcWriter { out, crc, len } = out;
        out.write_all(&crc.finalize().to_be_bytes())?;
        Ok(len + 4)
    }

    /// Decodes what [`BitmapFile::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<BitmapFile, BitmapError> {
        let bad = |why: &str| BitmapError::Malformed(why.to_owned());
        if bytes.len() < 20 || &bytes[..4] != MAGIC {
            return Err(bad("not a bitmap file"));
        }
        let (body, trailer) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(body) != u32::from_be_bytes(trailer.try_into().expect("4 bytes")) {
            return Err(bad("checksum mismatch"));
        }
        let mut r = body;
        let mut take = |n: usize| -> Result<&[u8], BitmapError> {
            if r.len() < n {
                return Err(bad("truncated"));
            }
            let (head, rest) = r.split_at(n);
            r = rest;
            Ok(head)
        };
        let be32 = |b: &[u8]| u32::from_be_bytes(b.try_into().expect("4 bytes"));
        take(4)?;
        let version = be32(take(4)?);
        let width = match version {
            1 | VERSION => 20,
            VERSION_3 => {
                let id = be32(take(4)?);
                crate::width_of_hash_id(id)
                    .ok_or_else(|| BitmapError::Malformed(format!("unknown hash id {id}")))?
            }
            _ => {
                return Err(BitmapError::Malformed(format!(
                    "version {version}, this build reads 1 to {VERSION_3}"
                )))
            }
        };
        let containers = be32(take(4)?) as usize;
        let bitmaps = be32(take(4)?) as usize;
        let mut file = BitmapFile::default();
        for _ in 0..containers {
            let len = take(1)?[0] as usize;
            let id = std::str::from_utf8(take(len)?)
                .map_err(|_| bad("container id is not UTF-8"))?
                .to_owned();
            file.containers.push((id, be32(take(4)?)));
        }
        // Resolved in file order: an XOR base comes before what uses it.
        let mut resolved: Vec<(ObjectId, RoaringBitmap)> = Vec::with_capacity(bitmaps.min(4096));
        for i in 0..bitmaps {
            let commit = ObjectId::from_bytes_or_panic(take(width)?);
            let offset = if version == 1 {
                0
            } else {
                be32(take(4)?) as usize
            };
            let len = be32(take(4)?) as usize;
            let stored = RoaringBitmap::deserialize_from(take(len)?)
                .map_err(|e| BitmapError::Malformed(format!("bitmap of {commit}: {e}")))?;
            let bitmap = if offset == 0 {
                stored
            } else {
                let base = i
                    .checked_sub(offset)
                    .ok_or_else(|| bad("XOR offset before the first bitmap"))?;
                let mut whole = resolved[base].1.clone();
                whole ^= stored;
                whole.optimize();
                whole
            };
            resolved.push((commit, bitmap));
        }
        file.bitmaps = resolved.into_iter().collect();
        if !r.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(file)
    }
}

/// A writer that sums what passes through it with CRC-32 and counts it.
struct CrcWriter<'a> {
    out: &'a mut dyn std::io::Write,
    crc: crc32fast::Hasher,
    len: u64,
}

impl std::io::Write for CrcWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A bitmap file with the bit order of the containers it was written for.
#[derive(Debug)]
pub struct LoadedBitmaps {
    /// The file.
    pub file: BitmapFile,
    /// The bit order of its containers.
    pub order: BitOrder,
}

impl LoadedBitmaps {
    /// Binds `file` to the closure containers `ids` with their `indexes`;
    /// [`BitmapError::Mismatch`] when it was written for others.
    pub fn bind(
        file: BitmapFile,
        ids: &[&str],
        indexes: &[&ContainerIndex],
    ) -> Result<Self, BitmapError> {
        let matches = file.containers.len() == ids.len()
            && file
                .containers
                .iter()
                .zip(ids.iter().zip(indexes))
                .all(|((fid, n), (id, idx))| fid == id && *n as usize == idx.len());
        if !matches {
            return Err(BitmapError::Mismatch);
        }
        let order = BitOrder::new(indexes);
        if file
            .bitmaps
            .values()
            .any(|b| b.max().is_some_and(|m| m >= order.len()))
        {
            return Err(BitmapError::Malformed("a bit past the last object".into()));
        }
        Ok(LoadedBitmaps { file, order })
    }
}

/// Computes what commits reach, as bitmaps over a [`Closure`].
pub struct Reacher<'a> {
    closure: Closure<'a>,
    cache: ObjectCache,
    /// Bits found lately (a tree entry is mostly the one its neighbour
    /// commit's tree had: a slot compare instead of an index search), a
    /// slot per two objects of the closure, 1 Ki to 128 Ki slots (3 MiB,
    /// where a map of every oid a build met grew to 25 MB on git/git).
    positions: RecentOids,
    /// Commits walked (not covered by a stored bitmap) so far.
    pub commits_walked: usize,
    /// Trees read so far.
    pub trees_read: usize,
    /// The selected commit whose stored bitmap, of those the last
    /// [`Reacher::reach`] used, has the most bits ([`BitmapFile::xor_bases`]).
    pub largest_used: Option<ObjectId>,
}

impl<'a> Reacher<'a> {
    /// A reacher over `closure`, with a cache of `cache_bytes` of objects.
    pub fn new(closure: Closure<'a>, cache_bytes: usize) -> Self {
        Reacher {
            positions: RecentOids::new((closure.order.len() as usize / 2).clamp(1 << 10, 1 << 17)),
            closure,
            cache: ObjectCache::new(cache_bytes),
            commits_walked: 0,
            trees_read: 0,
            largest_used: None,
        }
    }

    fn commit(&mut self, oid: &ObjectId) -> Result<CommitRow, BitmapError> {
        self.closure
            .db
            .commit_row(oid, &mut self.cache)?
            .ok_or(BitmapError::Outside(*oid))
    }

    fn position(&mut self, oid: &gix_hash::oid) -> Result<u32, BitmapError> {
        if let Some(p) = self.positions.get(oid) {
            return Ok(p);
        }
        let p = self
            .closure
            .position(oid)
            .ok_or_else(|| BitmapError::Outside(oid.to_owned()))?;
        self.positions.put(oid, p);
        Ok(p)
    }

    /// Everything `roots` (commits of the closure) reach: the stored bitmaps
    /// of the selected commits met, plus the objects of the commits walked
    /// down to them (newest first, so that a selected commit is met before
    /// the older commits its bitmap covers), their trees read only where a
    /// subtree is not already set.
    pub fn reach(
        &mut self,
        roots: &[ObjectId],
        bitmaps: &HashMap<ObjectId, RoaringBitmap>,
    ) -> Result<RoaringBitmap, BitmapError> {
        self.reach_beyond(roots, bitmaps, RoaringBitmap::new())
    }

    /// `known` (a set closed under reachability, such as what the client
    /// has) plus what `roots` reach: the walk stops at every commit and
    /// tree of `known`, so it costs what lies outside it (git's
    /// `find_objects` with the have bitmap as "seen").
    pub fn reach_beyond(
        &mut self,
        roots: &[ObjectId],
        bitmaps: &HashMap<ObjectId, RoaringBitmap>,
        known: RoaringBitmap,
    ) -> Result<RoaringBitmap, BitmapError> {
        let mut bits = known;
        let mut queue = DateQueue::default();
        let mut trees = OidVec::new();
        let mut largest: Option<(u64, ObjectId)> = None;
        for r in roots {
            queue.push(self, *r)?;
        }
        while let Some(c) = queue.pop() {
            let pos = self.position(&c.oid)?;
            if bits.contains(pos) {
                continue;
            }
            if let Some(stored) = bitmaps.get(&c.oid) {
                bits |= stored;
                let n = stored.len();
                if largest.is_none_or(|(m, _)| n > m) {
                    largest = Some((n, c.oid));
                }
                continue;
            }
            bits.insert(pos);
            self.commits_walked += 1;
            trees.push(&c.tree, ());
            for p in c.parents {
                queue.push(self, p)?;
            }
        }
        self.largest_used = largest.map(|(_, c)| c);
        while let Some((t, ())) = trees.pop() {
            let pos = self.position(&t)?;
            if !bits.insert(pos) {
                continue;
            }
            self.trees_read += 1;
            let obj = self
                .closure
                .db
                .read(&t, &mut self.cache)?
                .ok_or(BitmapError::Outside(t))?;
            for entry in obj.tree_entries() {
                let (_, id, is_tree) = entry.map_err(|_| BitmapError::Corrupt(t))?;
                if is_tree {
                    trees.push(&id, ());
                } else {
                    bits.insert(self.position(&id)?);
                }
            }
            self.cache.recycle(obj);
        }
        Ok(bits)
    }
}

/// Commits newest first by commit time (ties in the order queued), each
/// read once, when it is queued; a commit is queued at most once.
#[derive(Default)]
struct DateQueue {
    heap: BinaryHeap<(i64, Reverse<u64>, ObjectId)>,
    rows: HashMap<ObjectId, CommitRow>,
    /// Every commit queued so far (one per commit walked).
    queued: OidSet,
    seq: u64,
}

impl DateQueue {
    fn push(&mut self, reacher: &mut Reacher<'_>, oid: ObjectId) -> Result<(), BitmapError> {
        if self.queued.insert(&oid) {
            let row = reacher.commit(&oid)?;
            self.seq += 1;
            self.heap.push((row.time, Reverse(self.seq), oid));
            self.rows.insert(oid, row);
        }
        Ok(())
    }

    fn pop(&mut self) -> Option<CommitRow> {
        let (_, _, oid) = self.heap.pop()?;
        self.rows.remove(&oid)
    }
}

/// Builds the bitmap file of a closure: every commit tip in `tips`
/// (tags are peeled) and one commit in [`SPACING`] of a commit-date walk
/// from them get a bitmap, built oldest first so that each one's walk stops
/// at the ones below it. `ids` are the closure containers' ids.
pub fn build(
    closure: Closure<'_>,
    ids: &[String],
    tips: &[ObjectId],
    cache_bytes: usize,
) -> Result<BitmapFile, BitmapError> {
    let db = closure.db;
    let mut cache = ObjectCache::new(cache_bytes);
    let mut commit_tips = Vec::new();
    for tip in tips {
        let mut cur = *tip;
        for _ in 0..64 {
            let obj = db
                .read(&cur, &mut cache)?
                .ok_or(BitmapError::Outside(cur))?;
            match obj.kind {
                gix_object::Kind::Tag => {
                    cur = gix_object::TagRef::from_bytes(&obj.data, obj.hash)
                        .map_err(|_| BitmapError::Corrupt(cur))?
                        .target();
                }
                gix_object::Kind::Commit => {
                    commit_tips.push(cur);
                    break;
                }
                _ => break,
            }
        }
    }
    // Selection: a commit-date walk of every commit of the closure.
    let mut reacher = Reacher::new(closure, cache_bytes);
    let mut queue = DateQueue::default();
    for t in &commit_tips {
        queue.push(&mut reacher, *t)?;
    }
    let tip_set: HashSet = commit_tips.iter().copied().collect();
    let mut selected = Vec::new();
    let mut walked = 0usize;
    while let Some(c) = queue.pop() {
        if walked.is_multiple_of(SPACING) || tip_set.contains(&c.oid) {
            selected.push(c.oid);
        }
        walked += 1;
        for p in c.parents {
            queue.push(&mut reacher, p)?;
        }
    }
    // Oldest first: each walk stops at the bitmaps already built.
    let mut file = BitmapFile {
        containers: ids
            .iter()
            .zip(closure.containers)
            .map(|(id, &c)| (id.clone(), db.container(c).len() as u32))
            .collect(),
        bitmaps: HashMap::default(),
        xor_bases: HashMap::default(),
    };
    for c in selected.into_iter().rev() {
        let mut bits = reacher.reach(&[c], &file.bitmaps)?;
        bits.optimize();
        file.bitmaps.insert(c, bits);
        if let Some(base) = reacher.largest_used {
            file.xor_bases.insert(c, base);
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_decodes_to_what_was_encoded_and_a_flipped_bit_is_refused() {
        a_file_round_trips_at(20, 2);
    }

    #[test]
    fn a_sha256_file_is_version_3_and_round_trips() {
        a_file_round_trips_at(32, 3);
    }

    fn a_file_round_trips_at(width: usize, version: u32) {
        let mut file = BitmapFile {
            containers: vec![("c1".into(), 10), ("c2".into(), 300_000)],
            ..BitmapFile::default()
        };
        for (seed, bits) in [(1u8, 0..5u32), (2, 100..250_000)] {
            file.bitmaps.insert(
                ObjectId::from_bytes_or_panic(&vec![seed; width]),
                bits.collect(),
            );
        }
        // A history: each commit reaches the one before and a few scattered
        // objects more, and is based on it (or, every fifth, on the one
        // before that); one base is not a selected commit.
        let oid = |seed: u8| ObjectId::from_bytes_or_panic(&vec![seed; width]);
        let mut reach: RoaringBitmap = (0..1000u32).collect();
        for seed in 3u8..60 {
            reach.extend((0..40u32).map(|k| 1000 + u32::from(seed) * 4099 + k * 97));
            file.bitmaps.insert(oid(seed), reach.clone());
            let back = if seed % 5 == 0 { 2 } else { 1 };
            file.xor_bases.insert(oid(seed), oid(seed - back));
        }
        file.xor_bases.insert(oid(3), oid(200));
        let mut streamed = Vec::new();
        let len = file.encode_to(&mut streamed).unwrap();
        assert_eq!(len, streamed.len() as u64);
        assert_eq!(streamed, file.encode());
        let whole: usize = file.bitmaps.values().map(|b| b.serialized_size()).sum();
        assert!(
            streamed.len() * 4 < whole,
            "{} against {whole}",
            streamed.len()
        );
        assert_eq!(
            u32::from_be_bytes(streamed[4..8].try_into().unwrap()),
            version
        );
        let back = BitmapFile::decode(&streamed).unwrap();
        assert_eq!(back.containers, file.containers);
        assert_eq!(back.bitmaps, file.bitmaps);
        let mid = streamed.len() / 2;
        streamed[mid] ^= 1;
        assert!(BitmapFile::decode(&streamed).is_err());
    }

    #[test]
    fn a_sha1_bitmap_file_is_written_byte_for_byte_as_before() {
        use sha2::Digest;
        let mut file = BitmapFile {
            containers: vec![("c1".into(), 1000)],
            ..BitmapFile::default()
        };
        let oid = |seed: u8| ObjectId::from_bytes_or_panic(&[seed; 20]);
        for seed in 1u8..6 {
            file.bitmaps
                .insert(oid(seed), (0..u32::from(seed) * 150).collect());
        }
        file.xor_bases.insert(oid(3), oid(2));
        let digest = hex::encode(sha2::Sha256::digest(file.encode()));
        // The bytes every build since before SHA-256 writes (computed at
        // 89d54bb): a SHA-1 repository's files do not change.
        assert_eq!(
            digest,
            "d57b5d5dc2392dce3a42562501fd83979c08b0cc3a89f433dc6c7d3bb0f564f4"
        );
    }

    #[test]
    fn a_version_1_file_is_still_read() {
        let commit = ObjectId::from_bytes_or_panic(&[7; 20]);
        let bits: RoaringBitmap = (3..900u32).collect();
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        for n in [1u32, 1, 1] {
            v1.extend_from_slice(&n.to_be_bytes());
        }
        v1.extend_from_slice(&[2, b'c', b'1']);
        v1.extend_from_slice(&1000u32.to_be_bytes());
        v1.extend_from_slice(commit.as_bytes());
        v1.extend_from_slice(&(bits.serialized_size() as u32).to_be_bytes());
        bits.serialize_into(&mut v1).unwrap();
        v1.extend_from_slice(&crc32fast::hash(&v1).to_be_bytes());
        let file = BitmapFile::decode(&v1).unwrap();
        assert_eq!(file.containers, vec![("c1".to_owned(), 1000)]);
        assert_eq!(file.bitmaps.get(&commit), Some(&bits));
    }

    #[test]
    fn an_xor_offset_before_the_first_bitmap_is_refused() {
        let mut file = BitmapFile::default();
        file.bitmaps
            .insert(ObjectId::from_bytes_or_panic(&[1; 20]), (0..9u32).collect());
        let mut bytes = file.encode();
        // The offset follows the header (16 bytes) and the oid.
        bytes[16 + 20 + 3] = 1;
        let body = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..body]).to_be_bytes();
        bytes[body..].copy_from_slice(&crc);
        assert!(matches!(
            BitmapFile::decode(&bytes),
            Err(BitmapError::Malformed(_))
        ));
    }
}
