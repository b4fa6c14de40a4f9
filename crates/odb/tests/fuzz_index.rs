//! Property-based fuzzing of the container index reader
//! (`gitstow_odb::container::ContainerIndex::decode`).
//!
//! Inputs: arbitrary bytes; arbitrary bytes inside a valid zstd frame (with
//! and without a version-1 or version-2 header); valid encodings with random
//! edits of the compressed bytes; valid encodings whose *decompressed* form is
//! edited, then given a correct SHA-256 and recompressed, so the damage
//! reaches the structural checks instead of stopping at the checksum; and
//! version-2 bodies rebuilt here column by column ([`Parts`]) with one field
//! made to lie (prefix counts, oid order, rows, lengths, `.bin` length, types,
//! depths, OFS_DELTA base distances, REF_DELTA bases, trailing bytes).
//! Properties: `decode` never panics; what it accepts can be looked up
//! without panicking, and a version-2 index it accepts is a container's
//! (it encodes again, to the same body: the format has one encoding per
//! index); valid indexes round-trip (`from_entries` → `encode` → `decode`
//! gives the same entries, and every entry is found by `lookup`), version-1
//! indexes included; [`Parts`] builds the same bytes as `encode` (the
//! layout in the module docs); each lie is refused with `Corrupt`.
//!
//! The number of cases per property is `GITSTOW_FUZZ_CASES` (default 256).

use gitstow_fuzzkit::{config, mutate, mutation};
use gitstow_odb::container::{ContainerIndex, IndexEntry, IndexError};
use gix_hash::ObjectId;
use proptest::prelude::*;
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------

const OFS_DELTA: u8 = 6;
const REF_DELTA: u8 = 7;

fn oid_bytes() -> impl Strategy<Value = [u8; 20]> {
    prop_oneof![
        3 => any::<[u8; 20]>(),
        // clustered first bytes, so fanout buckets and prefixes hold several entries
        1 => (0u8..4, any::<[u8; 19]>()).prop_map(|(f, rest)| {
            let mut b = [f; 20];
            b[1..].copy_from_slice(&rest);
            b
        }),
        1 => (any::<u8>(), 0u8..3, 0u8..3).prop_map(|(f, s, l)| {
            let mut b = [f; 20];
            b[1] = s;
            b[19] = l;
            b
        }),
    ]
}

/// How one record is stored, before it is placed in a container.
#[derive(Debug, Clone)]
enum Shape {
    Whole(u8),
    /// An OFS_DELTA on the record `index` picks among the earlier ones.
    Ofs(u8, prop::sample::Index),
    /// A REF_DELTA on an outside oid, or (`None`) on another record of the container.
    Ref(u8, Option<[u8; 20]>, prop::sample::Index),
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        1 => (1u8..5).prop_map(Shape::Whole),
        2 => (1u8..5, any::<prop::sample::Index>()).prop_map(|(k, i)| Shape::Ofs(k, i)),
        1 => (
            1u8..5,
            prop::option::of(any::<[u8; 20]>().prop_filter("non-null", |b| b != &[0; 20])),
            any::<prop::sample::Index>()
        )
            .prop_map(|(k, b, i)| Shape::Ref(k, b, i)),
    ]
}

/// The records of a valid container, in `.bin` order (offsets back to back from 0).
fn container(max: usize) -> impl Strategy<Value = Vec<IndexEntry>> {
    prop::collection::btree_set(oid_bytes(), 0..max)
        .prop_map(|s| s.into_iter().collect::<Vec<_>>())
        .prop_shuffle()
        .prop_flat_map(|oids| {
            let n = oids.len();
            (
                Just(oids),
                prop::collection::vec(
                    (
                        prop_oneof![4 => 1u64..3000, 1 => 1u64..(1 << 40)],
                        shape(),
                        any::<u64>(),
                        prop_oneof![3 => 0u32..60, 1 => any::<u32>()],
                    ),
                    n,
                ),
            )
        })
        .prop_map(|(oids, fields)| {
            let oids: Vec<ObjectId> = oids
                .iter()
                .map(|b| ObjectId::from_bytes_or_panic(b))
                .collect();
            let mut offset = 0;
            let mut out = Vec::new();
            for (p, (length, shape, size, depth)) in fields.into_iter().enumerate() {
                let (record_type, kind, base) = match shape {
                    Shape::Ofs(k, i) if p > 0 => (OFS_DELTA, k, Some(oids[i.index(p)])),
                    Shape::Ref(k, outside, i) => {
                        let base = match outside {
                            Some(b) => ObjectId::from_bytes_or_panic(&b),
                            None => oids[i.index(oids.len())],
                        };
                        if base == oids[p] || base.is_null() {
                            (k, k, None)
                        } else {
                            (REF_DELTA, k, Some(base))
                        }
                    }
                    Shape::Whole(k) | Shape::Ofs(k, _) => (k, k, None),
                };
                out.push(IndexEntry {
                    oid: oids[p],
                    offset,
                    length,
                    record_type,
                    kind,
                    size,
                    depth,
                    base,
                });
                offset += length;
            }
            out
        })
}

/// The decompressed bytes of an encoded index (checksum included).
fn raw_of(encoded: &[u8]) -> Vec<u8> {
    zstd::stream::decode_all(encoded).expect("valid zstd")
}

/// Recomputes the trailing SHA-256 of `raw` (when long enough) and compresses.
fn reseal(mut raw: Vec<u8>) -> Vec<u8> {
    if raw.len() >= 32 {
        let n = raw.len() - 32;
        let sum = Sha256::digest(&raw[..n]);
        raw[n..].copy_from_slice(&sum);
    }
    zstd::bulk::compress(&raw, 1).expect("zstd")
}

/// Appends the SHA-256 of `body` and compresses.
fn seal(mut body: Vec<u8>) -> Vec<u8> {
    let sum = Sha256::digest(&body);
    body.extend_from_slice(&sum);
    zstd::bulk::compress(&body, 1).expect("zstd")
}

/// Decodes and, on success, exercises the result: nothing may panic.
/// Returns whether every entry is found by `lookup` (the index is coherent).
fn decode_and_use(bytes: &[u8], probes: &[[u8; 20]]) -> Option<bool> {
    match ContainerIndex::decode(bytes) {
        Ok(idx) => {
            assert!((1..idx.len()).all(|i| idx.oid(i - 1) < idx.oid(i)));
            let mut coherent = true;
            for e in idx.iter() {
                match idx.lookup(&e.oid) {
                    Some(found) => assert_eq!(found, e),
                    None => coherent = false,
                }
            }
            for p in probes {
                let oid = ObjectId::from_bytes_or_panic(p);
                if let Some(found) = idx.lookup(&oid) {
                    assert_eq!(found.oid, oid);
                }
            }
            let raw = raw_of(bytes);
            match idx.try_encode() {
                Ok(again) => {
                    let back = ContainerIndex::decode(&again).expect("re-encoded index decodes");
                    assert!(back.iter().eq(idx.iter()));
                    if raw[4..8] == 2u32.to_be_bytes() {
                        // one body per index: what was accepted is what encode writes
                        assert_eq!(raw_of(&again), raw, "a second encoding of one index");
                    }
                }
                Err(e) => {
                    // only a version-1 index may hold entries that are no container's
                    assert_eq!(
                        raw[4..8],
                        1u32.to_be_bytes(),
                        "accepted a v2 index that lies: {e}"
                    );
                }
            }
            Some(coherent)
        }
        Err(e) => {
            drop(e.to_string());
            None
        }
    }
}

fn assert_corrupt(bytes: &[u8], what: &str) {
    match ContainerIndex::decode(bytes) {
        Err(IndexError::Corrupt(_)) => {}
        Err(e) => panic!("{what}: refused, but not as corrupt: {e}"),
        Ok(idx) => panic!("{what}: accepted {:?}", idx.iter().collect::<Vec<_>>()),
    }
}

// ---------------------------------------------------------------------------
// Version 2 rebuilt column by column, after the module docs.

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The sections of a version-2 body.
#[derive(Debug, Clone)]
struct Parts {
    count: u32,
    bin_len: u64,
    prefix_counts: Vec<u64>,
    suffixes: Vec<[u8; 18]>,
    /// Bytes of a row number.
    width: usize,
    rows: Vec<u32>,
    lengths: Vec<u64>,
    types: Vec<u8>,
    sizes: Vec<u64>,
    depths: Vec<u64>,
    ofs: Vec<u64>,
    refs: Vec<[u8; 20]>,
    trailer: Vec<u8>,
}

impl Parts {
    /// The parts of a container whose records, in `.bin` order, are `records`.
    fn of(records: &[IndexEntry]) -> Parts {
        let n = records.len();
        let mut sorted: Vec<usize> = (0..n).collect();
        sorted.sort_by_key(|&p| records[p].oid);
        let mut row_of = vec![0u32; n];
        for (r, &p) in sorted.iter().enumerate() {
            row_of[p] = r as u32;
        }
        let mut prefix_counts = vec![0u64; 1 << 16];
        for e in records {
            let s = e.oid.as_slice();
            prefix_counts[u16::from_be_bytes([s[0], s[1]]) as usize] += 1;
        }
        let pos_of = |oid: &ObjectId| records.iter().position(|e| &e.oid == oid);
        let mut ofs = Vec::new();
        let mut refs = Vec::new();
        for (p, e) in records.iter().enumerate() {
            match e.record_type {
                OFS_DELTA => ofs.push((p - pos_of(&e.base.unwrap()).unwrap()) as u64),
                REF_DELTA => refs.push(e.base.unwrap().as_slice().try_into().unwrap()),
                _ => {}
            }
        }
        Parts {
            count: n as u32,
            bin_len: records.iter().map(|e| e.length).sum(),
            prefix_counts,
            suffixes: sorted
                .iter()
                .map(|&p| records[p].oid.as_slice()[2..].try_into().unwrap())
                .collect(),
            width: match n {
                0..=0x100 => 1,
                0x101..=0x1_0000 => 2,
                0x1_0001..=0x100_0000 => 3,
                _ => 4,
            },
            rows: row_of,
            lengths: records.iter().map(|e| e.length).collect(),
            types: records
                .iter()
                .map(|e| (e.record_type << 4) | e.kind)
                .collect(),
            sizes: records.iter().map(|e| e.size).collect(),
            depths: records.iter().map(|e| e.depth.into()).collect(),
            ofs,
            refs,
            trailer: Vec::new(),
        }
    }

    fn body(&self) -> Vec<u8> {
        let mut b = b"GSTI".to_vec();
        b.extend_from_slice(&2u32.to_be_bytes());
        b.extend_from_slice(&self.count.to_be_bytes());
        b.extend_from_slice(&self.bin_len.to_be_bytes());
        for &c in &self.prefix_counts {
            put_varint(&mut b, c);
        }
        for s in &self.suffixes {
            b.extend_from_slice(s);
        }
        for r in &self.rows {
            b.extend_from_slice(&r.to_be_bytes()[4 - self.width..]);
        }
        for &v in &self.lengths {
            put_varint(&mut b, v);
        }
        b.extend_from_slice(&self.types);
        for column in [&self.sizes, &self.depths, &self.ofs] {
            for &v in column {
                put_varint(&mut b, v);
            }
        }
        for r in &self.refs {
            b.extend_from_slice(r);
        }
        b.extend_from_slice(&self.trailer);
        b
    }

    fn encoded(&self) -> Vec<u8> {
        seal(self.body())
    }
}

/// One way to make a valid index lie (the checksum stays right).
#[derive(Debug, Clone)]
enum Lie {
    Count(u32),
    BinLen(u64),
    /// Adds one oid to a prefix, taken from another one unless `bump`.
    PrefixShift(prop::sample::Index, prop::sample::Index, bool),
    /// Swaps two suffixes (a disorder when they share a prefix).
    SwapSuffixes(prop::sample::Index, prop::sample::Index),
    /// One row number replaced by another (possibly out of range).
    Row(prop::sample::Index, u32),
    Length(prop::sample::Index, u64),
    Type(prop::sample::Index, u8),
    Depth(prop::sample::Index, u64),
    /// One OFS_DELTA base distance replaced (0, past record 0, or anything).
    Ofs(prop::sample::Index, u64),
    /// A REF_DELTA base made the record itself or the null oid.
    RefSelf(prop::sample::Index, bool),
    Trailer(Vec<u8>),
    Truncate(prop::sample::Index),
}

fn lie() -> impl Strategy<Value = Lie> {
    use prop::sample::Index;
    prop_oneof![
        any::<u32>().prop_map(Lie::Count),
        any::<u64>().prop_map(Lie::BinLen),
        (any::<Index>(), any::<Index>(), any::<bool>())
            .prop_map(|(a, b, c)| Lie::PrefixShift(a, b, c)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Lie::SwapSuffixes(a, b)),
        (any::<Index>(), prop_oneof![0u32..80, any::<u32>()]).prop_map(|(a, v)| Lie::Row(a, v)),
        (any::<Index>(), prop_oneof![0u64..3, any::<u64>()]).prop_map(|(a, v)| Lie::Length(a, v)),
        (any::<Index>(), any::<u8>()).prop_map(|(a, v)| Lie::Type(a, v)),
        (any::<Index>(), prop_oneof![0u64..3, any::<u64>()]).prop_map(|(a, v)| Lie::Depth(a, v)),
        (any::<Index>(), prop_oneof![0u64..80, any::<u64>()]).prop_map(|(a, v)| Lie::Ofs(a, v)),
        (any::<Index>(), any::<bool>()).prop_map(|(a, v)| Lie::RefSelf(a, v)),
        prop::collection::vec(any::<u8>(), 1..4).prop_map(Lie::Trailer),
        any::<Index>().prop_map(Lie::Truncate),
    ]
}

impl Lie {
    /// Applies the lie; `false` when it does not apply (or changes nothing).
    fn apply(&self, parts: &mut Parts, records: &[IndexEntry]) -> bool {
        let n = parts.rows.len();
        match self {
            Lie::Count(c) => {
                let changed = *c != parts.count;
                parts.count = *c;
                changed
            }
            Lie::BinLen(l) => {
                let changed = *l != parts.bin_len;
                parts.bin_len = *l;
                changed
            }
            Lie::PrefixShift(from, to, bump) => {
                let used: Vec<usize> = (0..parts.prefix_counts.len())
                    .filter(|&i| parts.prefix_counts[i] > 0)
                    .collect();
                let to = to.index(parts.prefix_counts.len());
                parts.prefix_counts[to] += 1;
                if *bump {
                    // one more than the record count
                    return true;
                }
                // moved from another prefix: other oids, perhaps still a valid index
                match used.get(from.index(used.len().max(1))) {
                    Some(&from) => parts.prefix_counts[from] -= 1,
                    None => parts.prefix_counts[to] -= 1,
                }
                false
            }
            Lie::SwapSuffixes(a, b) => {
                if n < 2 {
                    return false;
                }
                let (a, b) = (a.index(n), b.index(n));
                let (lo, hi) = (a.min(b), a.max(b));
                // a disorder only when both are under one prefix
                let prefix_of = |row: usize| {
                    let mut sorted: Vec<&IndexEntry> = records.iter().collect();
                    sorted.sort_by_key(|e| e.oid);
                    let s = sorted[row].oid.as_slice();
                    [s[0], s[1]]
                };
                if lo == hi || prefix_of(lo) != prefix_of(hi) {
                    return false;
                }
                parts.suffixes.swap(lo, hi);
                true
            }
            Lie::Row(at, v) => {
                if n == 0 {
                    return false;
                }
                let at = at.index(n);
                // kept within the row width, so the body keeps its length
                let max = if parts.width == 4 {
                    u32::MAX
                } else {
                    (1u32 << (8 * parts.width)) - 1
                };
                let old = parts.rows[at];
                parts.rows[at] = (*v).min(max);
                // no longer a permutation
                parts.rows[at] != old
            }
            Lie::Length(at, v) => {
                if n == 0 || parts.lengths[at.index(n)] == *v {
                    return false;
                }
                parts.lengths[at.index(n)] = *v;
                true
            }
            Lie::Type(at, v) => {
                let (rt, kind) = (v >> 4, v & 0xf);
                let valid = match rt {
                    1..=4 => kind == rt,
                    OFS_DELTA | REF_DELTA => (1..=4).contains(&kind),
                    _ => false,
                };
                if n == 0 || valid {
                    return false;
                }
                parts.types[at.index(n)] = *v;
                true
            }
            Lie::Depth(at, v) => {
                if n == 0 || *v <= u32::MAX as u64 {
                    return false;
                }
                parts.depths[at.index(n)] = *v;
                true
            }
            Lie::Ofs(at, v) => {
                let ofs_records: Vec<usize> = (0..n)
                    .filter(|&p| records[p].record_type == OFS_DELTA)
                    .collect();
                if ofs_records.is_empty() {
                    return false;
                }
                let i = at.index(ofs_records.len());
                let p = ofs_records[i] as u64;
                // out of range: 0 (itself) or before record 0
                if *v != 0 && *v <= p {
                    return false;
                }
                parts.ofs[i] = *v;
                true
            }
            Lie::RefSelf(at, null) => {
                let ref_records: Vec<usize> = (0..n)
                    .filter(|&p| records[p].record_type == REF_DELTA)
                    .collect();
                if ref_records.is_empty() {
                    return false;
                }
                let i = at.index(ref_records.len());
                parts.refs[i] = if *null {
                    [0; 20]
                } else {
                    records[ref_records[i]].oid.as_slice().try_into().unwrap()
                };
                true
            }
            Lie::Trailer(t) => {
                parts.trailer = t.clone();
                true
            }
            Lie::Truncate(_) => true,
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        decode_and_use(&bytes, &[]);
    }

    #[test]
    fn arbitrary_zstd_payloads_never_panic(
        raw in prop::collection::vec(any::<u8>(), 0..3000),
        header in 0u8..3,
        count in 0u32..40,
        seal in any::<bool>(),
    ) {
        let mut raw = raw;
        if header > 0 {
            let mut head = b"GSTI\0\0\0".to_vec();
            head.push(header);
            head.extend_from_slice(&count.to_be_bytes());
            raw.splice(0..0, head);
        }
        let bytes = if seal { reseal(raw) } else { zstd::bulk::compress(&raw, 1).unwrap() };
        decode_and_use(&bytes, &[]);
    }

    #[test]
    fn valid_indexes_roundtrip(
        records in container(80),
        probes in prop::collection::vec(oid_bytes(), 0..8),
    ) {
        let idx = ContainerIndex::from_entries(records.clone());
        let encoded = idx.encode();
        let back = ContainerIndex::decode(&encoded).unwrap();
        prop_assert!(back.iter().eq(idx.iter()));
        prop_assert_eq!(back.len(), records.len());
        for e in &records {
            prop_assert_eq!(back.lookup(&e.oid), Some(*e));
        }
        for p in &probes {
            let oid = ObjectId::from_bytes_or_panic(p);
            let want = records.iter().find(|e| e.oid == oid);
            prop_assert_eq!(back.lookup(&oid), want.copied());
        }
        prop_assert_eq!(decode_and_use(&encoded, &probes), Some(true));
        // the layout of the module docs, byte for byte
        let mut body = Parts::of(&records).body();
        body.extend_from_slice(&Sha256::digest(&body));
        prop_assert_eq!(raw_of(&encoded), body);
    }

    /// Version 1 (what stores written before version 2 hold) is still read.
    #[test]
    fn version_1_indexes_are_read(records in container(40), crc in any::<u32>()) {
        // version 1 wrote no base as the null oid
        prop_assume!(records.iter().all(|e| e.base.is_none_or(|b| !b.is_null())));
        let mut sorted = records.clone();
        sorted.sort_by_key(|e| e.oid);
        let mut body = b"GSTI\0\0\0\x01".to_vec();
        body.extend_from_slice(&(sorted.len() as u32).to_be_bytes());
        for i in 0..256 {
            let c = sorted.iter().filter(|e| e.oid.as_slice()[0] as usize <= i).count() as u32;
            body.extend_from_slice(&c.to_be_bytes());
        }
        for e in &sorted {
            body.extend_from_slice(e.oid.as_slice());
            body.extend_from_slice(&e.offset.to_be_bytes());
            body.extend_from_slice(&e.length.to_be_bytes());
            body.extend_from_slice(&[e.record_type, e.kind]);
            body.extend_from_slice(&e.size.to_be_bytes());
            body.extend_from_slice(&crc.to_be_bytes());
            body.extend_from_slice(&e.depth.to_be_bytes());
            body.extend_from_slice(e.base.as_ref().map_or(&[0u8; 20][..], |b| b.as_slice()));
        }
        let encoded = seal(body);
        let idx = ContainerIndex::decode(&encoded).unwrap();
        prop_assert_eq!(idx.iter().collect::<Vec<_>>(), sorted.clone());
        prop_assert_eq!(decode_and_use(&encoded, &[]), Some(true));
    }

    /// `from_entries` keeps the first of duplicate oids.
    #[test]
    fn duplicates_keep_the_first(records in container(20), dups in prop::collection::vec(any::<prop::sample::Index>(), 0..5)) {
        prop_assume!(!records.is_empty());
        let mut all = records.clone();
        for d in &dups {
            let mut e = records[d.index(records.len())];
            e.size = e.size.wrapping_add(1);
            all.push(e);
        }
        let idx = ContainerIndex::from_entries(all);
        prop_assert_eq!(idx.len(), records.len());
        for e in &records {
            prop_assert_eq!(idx.lookup(&e.oid), Some(*e));
        }
    }

    #[test]
    fn mutated_compressed_indexes_never_panic(
        records in container(20),
        mutations in prop::collection::vec(mutation(), 1..5),
        probes in prop::collection::vec(oid_bytes(), 0..4),
    ) {
        let encoded = ContainerIndex::from_entries(records).encode();
        decode_and_use(&mutate(encoded, &mutations), &probes);
    }

    /// Damage behind a valid checksum: only the structural checks stand
    /// between it and the reader.
    #[test]
    fn mutated_raw_indexes_never_panic(
        records in container(20),
        mutations in prop::collection::vec(mutation(), 1..5),
        probes in prop::collection::vec(oid_bytes(), 0..4),
    ) {
        let raw = raw_of(&ContainerIndex::from_entries(records).encode());
        decode_and_use(&reseal(mutate(raw, &mutations)), &probes);
    }

    /// A body that lies in one field (checksum right) is refused as corrupt.
    #[test]
    fn lies_are_refused(
        records in container(40),
        lie in lie(),
        probes in prop::collection::vec(oid_bytes(), 0..4),
    ) {
        let mut parts = Parts::of(&records);
        let applies = lie.apply(&mut parts, &records);
        let mut body = parts.body();
        if let Lie::Truncate(at) = &lie {
            body.truncate(at.index(body.len()));
        }
        let encoded = seal(body);
        if applies {
            assert_corrupt(&encoded, &format!("{lie:?}"));
        }
        decode_and_use(&encoded, &probes);
    }

    /// OFS_DELTA base distances out of range (0: the record itself; past
    /// record 0) are refused, whatever the record.
    #[test]
    fn out_of_range_ofs_bases_are_refused(
        records in container(40),
        at in any::<prop::sample::Index>(),
        beyond in 1u64..1000,
        zero in any::<bool>(),
    ) {
        let ofs: Vec<usize> = (0..records.len()).filter(|&p| records[p].record_type == OFS_DELTA).collect();
        prop_assume!(!ofs.is_empty());
        let i = at.index(ofs.len());
        let mut parts = Parts::of(&records);
        parts.ofs[i] = if zero { 0 } else { ofs[i] as u64 + beyond };
        assert_corrupt(&parts.encoded(), "OFS_DELTA base out of range");
    }
}

/// A fanout that disagrees with the rows (monotonic, right total, checksum
/// recomputed) is refused by `decode` of a version-1 index (found by fuzzing:
/// it used to be accepted, and `lookup` then missed entries that `entries()` listed).
#[test]
fn incoherent_v1_fanout_is_refused() {
    let mut body = b"GSTI\0\0\0\x01".to_vec();
    body.extend_from_slice(&2u32.to_be_bytes());
    for i in 0..256u32 {
        // the right fanout has 1 from 0x10 on; this one has 0 at 0x10
        let c = u32::from(i > 0x10) + u32::from(i >= 0x20);
        body.extend_from_slice(&c.to_be_bytes());
    }
    for first in [0x10u8, 0x20] {
        body.extend_from_slice(&[first; 20]);
        body.extend_from_slice(&[0; 74 - 20]);
    }
    assert_corrupt(&seal(body), "incoherent v1 fanout");
}

/// An OFS_DELTA whose base distance points at itself, at a record past the
/// start, or a REF_DELTA on itself, is refused (hand-made cases).
#[test]
fn bad_bases_are_refused() {
    let oid = |b: u8| ObjectId::from_bytes_or_panic(&[b; 20]);
    let records = vec![
        IndexEntry {
            oid: oid(0x30),
            offset: 0,
            length: 5,
            record_type: 3,
            kind: 3,
            size: 9,
            depth: 0,
            base: None,
        },
        IndexEntry {
            oid: oid(0x10),
            offset: 5,
            length: 7,
            record_type: OFS_DELTA,
            kind: 3,
            size: 11,
            depth: 1,
            base: Some(oid(0x30)),
        },
        IndexEntry {
            oid: oid(0x20),
            offset: 12,
            length: 3,
            record_type: REF_DELTA,
            kind: 2,
            size: 1,
            depth: 4,
            base: Some(oid(0x40)),
        },
    ];
    let parts = Parts::of(&records);
    assert!(ContainerIndex::decode(&parts.encoded()).is_ok());
    for (what, ofs) in [("itself", 0), ("before record 0", 2), ("far", u64::MAX)] {
        let mut p = parts.clone();
        p.ofs[0] = ofs;
        assert_corrupt(&p.encoded(), what);
    }
    let mut p = parts.clone();
    p.refs[0] = [0x20; 20];
    assert_corrupt(&p.encoded(), "REF_DELTA on itself");
    let mut p = parts.clone();
    assert_eq!(p.rows, [2, 0, 1]);
    p.rows[1] = 2;
    assert_corrupt(&p.encoded(), "rows not a permutation");
    let mut p = parts.clone();
    p.rows[1] = 3;
    assert_corrupt(&p.encoded(), "row out of range");
    let mut p = parts;
    p.bin_len += 1;
    assert_corrupt(&p.encoded(), "records short of the .bin");
}

/// `lookup` on `ContainerIndex::default()` finds nothing (found by fuzzing:
/// the derived default had an empty fanout and `lookup` indexed out of bounds).
#[test]
fn default_index_lookup_does_not_panic() {
    assert!(ContainerIndex::default()
        .lookup(&ObjectId::null(gix_hash::Kind::Sha1))
        .is_none());
}
