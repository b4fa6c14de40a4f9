//! Property-based fuzzing of the pack reader (`gitstow_receive::scan::scan`)
//! and of the record-level decoders it shares with the object database
//! (`gitstow_odb::delta::apply`, `gitstow_odb::record::decode_header`,
//! `gitstow_odb::zlib::inflate_exact`).
//!
//! The pack inputs start from a valid small pack built here with flate2
//! (blobs, a commit, an OFS_DELTA and a REF_DELTA, empty and multi-block
//! streams), written after a random prefix into a temp file, then damaged by
//! random byte flips, truncations, insertions, deletions and duplications;
//! in half of the cases the SHA-1 trailer is recomputed so the damage reaches
//! the entry parser instead of stopping at the checksum. Properties: `scan`
//! never panics and returns Ok or a `ScanError`; on Ok the table agrees with
//! the pack (entry count from the header, sizes within the limit, offsets
//! inside the file, OFS_DELTA bases earlier). The decoders get arbitrary
//! input and small limits: never a panic, never a result (or allocation)
//! beyond the limit.
//!
//! The number of cases per property is `GITSTOW_FUZZ_CASES` (default 256).

use std::io::{Seek, SeekFrom, Write};

use gitstow_fuzzkit::{config, mutate, mutation};
use gitstow_odb::record::{self, BaseRef};
use gitstow_odb::{delta, zlib};
use gitstow_receive::scan::{scan, EntryKind, KeepInflated, ScanError, ScanLimits};
use gix_hash::ObjectId;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// A valid pack, built by hand.

fn sha1(bytes: &[u8]) -> [u8; 20] {
    let mut h = gix_hash::hasher(gix_hash::Kind::Sha1);
    h.update(bytes);
    let id = h.try_finalize().expect("sha1");
    id.as_slice().try_into().expect("20 bytes")
}

fn object_id(kind: &str, data: &[u8]) -> ObjectId {
    let mut buf = format!("{kind} {}\0", data.len()).into_bytes();
    buf.extend_from_slice(data);
    ObjectId::from_bytes_or_panic(&sha1(&buf))
}

fn zlib_level(data: &[u8], level: u32) -> Vec<u8> {
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn varint(mut n: u64, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A delta turning `base` into `base[..keep] + insert`.
fn make_delta(base: &[u8], keep: usize, insert: &[u8]) -> Vec<u8> {
    assert!(keep > 0 && keep <= base.len() && keep < 0x10000);
    assert!(!insert.is_empty() && insert.len() < 0x80);
    let mut d = Vec::new();
    varint(base.len() as u64, &mut d);
    varint((keep + insert.len()) as u64, &mut d);
    // copy 0..keep: offset omitted (0), two size bytes
    d.push(0x80 | 0x10 | 0x20);
    d.push((keep & 0xff) as u8);
    d.push((keep >> 8) as u8);
    d.push(insert.len() as u8);
    d.extend_from_slice(insert);
    d
}

/// Pack entries (header + zlib stream) and the total pack with trailer.
fn valid_pack(version: u32) -> Vec<u8> {
    let blob1 = b"hello world, this is the first blob of the fuzz pack\n".repeat(3);
    let blob2: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
    let tree = {
        let mut t = b"100644 a.txt\0".to_vec();
        t.extend_from_slice(object_id("blob", &blob1).as_slice());
        t
    };
    let commit = format!(
        "tree {}\nauthor A <a@example.com> 1700000000 +0000\ncommitter A <a@example.com> 1700000000 +0000\n\nfuzz\n",
        object_id("tree", &tree)
    )
    .into_bytes();
    let ofs = make_delta(&blob1, 40, b"-- ofs delta tail\n");
    let refd = make_delta(&blob2, 2000, b"ref delta tail");

    let mut pack = b"PACK".to_vec();
    pack.extend_from_slice(&version.to_be_bytes());
    pack.extend_from_slice(&7u32.to_be_bytes());
    let push = |pack: &mut Vec<u8>, type_id: u8, size: usize, base: BaseRef, z: Vec<u8>| {
        let at = pack.len() as u64;
        record::write_header(type_id, size as u64, base, pack);
        pack.extend_from_slice(&z);
        at
    };
    let b1 = push(
        &mut pack,
        record::BLOB,
        blob1.len(),
        BaseRef::None,
        zlib_level(&blob1, 6),
    );
    push(
        &mut pack,
        record::BLOB,
        blob2.len(),
        BaseRef::None,
        zlib_level(&blob2, 0),
    );
    push(
        &mut pack,
        record::TREE,
        tree.len(),
        BaseRef::None,
        zlib_level(&tree, 9),
    );
    push(
        &mut pack,
        record::COMMIT,
        commit.len(),
        BaseRef::None,
        zlib_level(&commit, 1),
    );
    push(
        &mut pack,
        record::BLOB,
        0,
        BaseRef::None,
        zlib_level(b"", 6),
    );
    let here = pack.len() as u64;
    push(
        &mut pack,
        record::OFS_DELTA,
        ofs.len(),
        BaseRef::Distance(here - b1),
        zlib_level(&ofs, 6),
    );
    push(
        &mut pack,
        record::REF_DELTA,
        refd.len(),
        BaseRef::Oid(object_id("blob", &blob2)),
        zlib_level(&refd, 6),
    );
    let trailer = sha1(&pack);
    pack.extend_from_slice(&trailer);
    pack
}

fn fix_trailer(pack: &mut [u8]) {
    if pack.len() >= 32 {
        let n = pack.len() - 20;
        let sum = sha1(&pack[..n]);
        pack[n..].copy_from_slice(&sum);
    }
}

/// Writes `prefix + pack` to a temp file and scans it from `prefix.len()`.
fn scan_bytes(
    prefix: &[u8],
    pack: &[u8],
    limit: u64,
) -> Result<gitstow_receive::scan::ScannedPack, ScanError> {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(prefix).unwrap();
    file.write_all(pack).unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    let res = scan(
        &file,
        prefix.len() as u64,
        ScanLimits {
            max_object_bytes: limit,
            max_objects: u64::MAX,
        },
        // A budget that keeps all, some or none of the deltas.
        Some(KeepInflated {
            file: tempfile::tempfile().unwrap(),
            budget: prefix.len() as u64 * 4,
        }),
        gix_hash::Kind::Sha1,
    );
    if let Ok(scanned) = &res {
        let count = u32::from_be_bytes(pack[8..12].try_into().unwrap()) as usize;
        assert_eq!(scanned.entries.len(), count);
        assert_eq!(scanned.pack_bytes, pack.len() as u64);
        let end = (prefix.len() + pack.len()) as u64;
        for (i, e) in scanned.entries.iter().enumerate() {
            assert!(e.decompressed_size <= limit);
            assert!(e.data_offset >= prefix.len() as u64 + 12);
            assert!(e.data_offset + e.compressed_size <= end - 20);
            if let EntryKind::OfsDelta(base) = e.kind {
                assert!((base as usize) < i, "OFS_DELTA base {base} of entry {i}");
            }
            // What pass 1 kept of an entry is what its stream inflates to.
            let kept = scanned.kept.as_ref().expect("kept entries");
            if let Some(at) = kept.offset(&scanned.entries, i) {
                use std::os::unix::fs::FileExt;
                assert!(at + e.decompressed_size <= kept.len);
                let mut stream = vec![0; e.compressed_size as usize];
                file.read_exact_at(&mut stream, e.data_offset).unwrap();
                let (mut want, mut got) = (Vec::new(), vec![0; e.decompressed_size as usize]);
                zlib::inflate_exact(&stream, e.decompressed_size, &mut want).unwrap();
                kept.file.read_exact_at(&mut got, at).unwrap();
                assert_eq!(got, want, "kept instructions of entry {i}");
            }
        }
        let kept = scanned.kept.as_ref().expect("kept entries");
        assert!(kept.len <= prefix.len() as u64 * 4, "within the budget");
    }
    if let Err(e) = &res {
        let _ = e.to_string();
    }
    res
}

fn limit() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(1u64 << 31),
        1 => 0u64..4096,
        1 => Just(u64::MAX / 2),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_pack_scans(prefix in prop::collection::vec(any::<u8>(), 0..64), v3 in any::<bool>()) {
        let pack = valid_pack(if v3 { 3 } else { 2 });
        let scanned = scan_bytes(&prefix, &pack, 1 << 20).unwrap();
        prop_assert_eq!(scanned.entries.len(), 7);
        prop_assert_eq!(scanned.ref_deltas, 1);
        prop_assert!(matches!(scanned.entries[5].kind, EntryKind::OfsDelta(0)));
    }

    #[test]
    fn damaged_packs_never_panic(
        prefix in prop::collection::vec(any::<u8>(), 0..16),
        mutations in prop::collection::vec(mutation(), 1..5),
        fix in any::<bool>(),
        limit in limit(),
    ) {
        let mut pack = mutate(valid_pack(2), &mutations);
        if fix {
            fix_trailer(&mut pack);
        }
        let _ = scan_bytes(&prefix, &pack, limit);
    }

    /// A valid header and object count followed by arbitrary entry bytes.
    #[test]
    fn arbitrary_entries_never_panic(
        count in prop_oneof![0u32..16, any::<u32>()],
        body in prop::collection::vec(any::<u8>(), 0..300),
        fix in any::<bool>(),
        limit in limit(),
    ) {
        let mut pack = b"PACK\0\0\0\x02".to_vec();
        pack.extend_from_slice(&count.to_be_bytes());
        pack.extend_from_slice(&body);
        pack.extend_from_slice(&[0; 20]);
        if fix {
            fix_trailer(&mut pack);
        }
        let _ = scan_bytes(&[], &pack, limit);
    }

    /// Entries built from valid pieces in random combinations: random types,
    /// declared sizes near the real ones, real or junk zlib streams.
    #[test]
    fn recombined_entries_never_panic(
        entries in prop::collection::vec(
            (
                prop::sample::select(vec![0u8, 1, 2, 3, 4, 5, 6, 7]),
                prop::collection::vec(any::<u8>(), 0..200),
                -2i64..3,
                0u64..600,
                any::<bool>(),
            ),
            0..6,
        ),
        extra_count in -1i64..2,
        limit in limit(),
    ) {
        let mut pack = b"PACK\0\0\0\x02".to_vec();
        pack.extend_from_slice(&((entries.len() as i64 + extra_count).max(0) as u32).to_be_bytes());
        for (type_id, data, size_delta, dist, junk) in &entries {
            let size = (data.len() as i64 + size_delta).max(0) as u64;
            let base = match *type_id {
                6 => BaseRef::Distance(*dist),
                7 => BaseRef::Oid(object_id("blob", data)),
                _ => BaseRef::None,
            };
            let mut header = Vec::new();
            record::write_header(*type_id, size, base, &mut header);
            pack.extend_from_slice(&header);
            if *junk {
                pack.extend_from_slice(data);
            } else {
                pack.extend_from_slice(&zlib_level(data, 6));
            }
        }
        pack.extend_from_slice(&[0; 20]);
        fix_trailer(&mut pack);
        let _ = scan_bytes(&[], &pack, limit);
    }

    // ----- odb decoders ----------------------------------------------------

    #[test]
    fn delta_apply_arbitrary(
        base in prop::collection::vec(any::<u8>(), 0..300),
        delta_bytes in prop::collection::vec(any::<u8>(), 0..300),
        limit in 0u64..1024,
        fix_base_size in any::<bool>(),
    ) {
        // often declare the right base size so the instructions get parsed
        let mut d = Vec::new();
        if fix_base_size {
            varint(base.len() as u64, &mut d);
        }
        d.extend_from_slice(&delta_bytes);
        check_delta(&base, &d, limit);
    }

    #[test]
    fn delta_apply_mutated(
        base in prop::collection::vec(any::<u8>(), 1..2000),
        keep in any::<prop::sample::Index>(),
        insert in prop::collection::vec(any::<u8>(), 1..100),
        mutations in prop::collection::vec(mutation(), 0..4),
        limit in prop_oneof![0u64..4096, Just(1u64 << 20)],
    ) {
        let keep = keep.index(base.len().min(0xffff)) + 1;
        let d = make_delta(&base, keep, &insert);
        if mutations.is_empty() && limit >= (keep + insert.len()) as u64 {
            let mut out = Vec::new();
            delta::apply(&base, &d, limit, &mut out).unwrap();
            let mut want = base[..keep].to_vec();
            want.extend_from_slice(&insert);
            prop_assert_eq!(out, want);
        }
        check_delta(&base, &mutate(d, &mutations), limit);
    }

    #[test]
    fn decode_header_arbitrary(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
        if let Ok(h) = record::decode_header(&bytes, 20) {
            prop_assert!(h.len <= bytes.len());
            prop_assert!(matches!(h.type_id, 1..=4 | 6 | 7));
            // re-encoding gives a header that decodes to the same values
            let mut again = Vec::new();
            record::write_header(h.type_id, h.size, h.base, &mut again);
            let h2 = record::decode_header(&again, 20).unwrap();
            prop_assert_eq!((h2.type_id, h2.size, h2.base), (h.type_id, h.size, h.base));
        }
    }

    #[test]
    fn header_roundtrip(
        type_id in prop::sample::select(vec![1u8, 2, 3, 4, 6, 7]),
        // decode_header refuses sizes of 2^60 and more (its varint stops at
        // shift 57), which write_header would write: real objects never are
        size in prop_oneof![0u64..1 << 20, 0u64..1 << 60],
        dist in any::<u64>(),
        oid in any::<[u8; 20]>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let base = match type_id {
            6 => BaseRef::Distance(dist),
            7 => BaseRef::Oid(ObjectId::from_bytes_or_panic(&oid)),
            _ => BaseRef::None,
        };
        let mut bytes = Vec::new();
        record::write_header(type_id, size, base, &mut bytes);
        let h = record::decode_header(&bytes, 20).unwrap();
        prop_assert_eq!((h.type_id, h.size, h.base, h.len), (type_id, size, base, bytes.len()));
        let cut = cut.index(bytes.len());
        prop_assert!(record::decode_header(&bytes[..cut], 20).is_err());
    }

    #[test]
    fn inflate_exact_arbitrary(
        input in prop::collection::vec(any::<u8>(), 0..300),
        size in 0u64..2048,
    ) {
        check_inflate(&input, size);
    }

    #[test]
    fn inflate_exact_mutated(
        data in prop::collection::vec(any::<u8>(), 0..3000),
        level in 0u32..10,
        size_delta in -3i64..4,
        mutations in prop::collection::vec(mutation(), 0..4),
        trailing in prop::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut z = zlib_level(&data, level);
        let stream_len = z.len();
        z.extend_from_slice(&trailing);
        let size = (data.len() as i64 + size_delta).max(0) as u64;
        if mutations.is_empty() && size_delta == 0 {
            let mut out = Vec::new();
            let used = zlib::inflate_exact(&z, size, &mut out).unwrap();
            prop_assert_eq!(used, stream_len);
            prop_assert_eq!(&out, &data);
        }
        check_inflate(&mutate(z, &mutations), size);
    }
}

fn check_delta(base: &[u8], d: &[u8], limit: u64) {
    let mut out = Vec::new();
    match delta::apply(base, d, limit, &mut out) {
        Ok(()) => {
            let (b, r) = delta::sizes(d).unwrap();
            assert_eq!(b, base.len() as u64);
            assert_eq!(out.len() as u64, r);
            assert!(r <= limit);
        }
        Err(e) => drop(e.to_string()),
    }
    assert!(out.len() as u64 <= limit, "{} > {limit}", out.len());
    assert!(
        out.capacity() as u64 <= limit.max(64),
        "capacity {} > limit {limit}",
        out.capacity()
    );
}

fn check_inflate(input: &[u8], size: u64) {
    let mut out = Vec::new();
    match zlib::inflate_exact(input, size, &mut out) {
        Ok(used) => {
            assert_eq!(out.len() as u64, size);
            assert!(used <= input.len());
        }
        Err(e) => drop(e.to_string()),
    }
    assert!(out.len() as u64 <= size + 1, "{} > {size} + 1", out.len());
    assert!(
        out.capacity() as u64 <= (size + 1).max(64),
        "capacity {} for size {size}",
        out.capacity()
    );
}

#[test]
fn damaged_trailer_and_junk_are_refused() {
    let pack = valid_pack(2);
    let mut bad = pack.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(
        scan_bytes(&[], &bad, 1 << 20),
        Err(ScanError::Invalid(_))
    ));
    let mut junk = pack.clone();
    junk.extend_from_slice(b"junk");
    assert!(scan_bytes(&[], &junk, 1 << 20).is_err());
    assert!(scan_bytes(&[], &pack[..pack.len() - 1], 1 << 20).is_err());
    // a limit below the largest object refuses the pack
    assert!(scan_bytes(&[], &pack, 100).is_err());
}

/// Pass 1 keeps every entry of a pack when the budget allows, none when
/// it is zero, and the ones before the budget runs out otherwise (the
/// property above checks the kept bytes themselves).
#[test]
fn kept_entries_follow_the_budget() {
    let pack = valid_pack(2);
    let kept = |prefix_len: usize| {
        let scanned = scan_bytes(&vec![0; prefix_len], &pack, 1 << 20).unwrap();
        let kept = scanned.kept.as_ref().unwrap();
        let flags: Vec<bool> = (0..scanned.entries.len())
            .map(|i| kept.offset(&scanned.entries, i).is_some())
            .collect();
        let sizes: Vec<u64> = scanned
            .entries
            .iter()
            .map(|e| e.decompressed_size)
            .collect();
        (flags, sizes, kept.len)
    };
    // scan_bytes's budget is 4 bytes per byte of prefix.
    let (none, sizes, len) = kept(0);
    assert!(sizes.len() >= 6, "the pack has entries");
    assert!(none.iter().all(|k| !k) && len == 0, "{none:?}");
    let (all, _, len) = kept(1 << 16);
    assert!(all.iter().all(|&k| k), "{all:?}");
    assert_eq!(len, sizes.iter().sum::<u64>());
    // Room for the first two entries only: the third and all after it
    // are not kept, even those that would fit what is left.
    let two = sizes[0] + sizes[1];
    let (some, _, len) = kept((two as usize).div_ceil(4));
    assert_eq!(len, two);
    assert!(some[..2].iter().all(|&k| k), "{some:?}");
    assert!(some[2..].iter().all(|k| !k), "{some:?}");
}
