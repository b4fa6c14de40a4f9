//! Unit tests of the container index.

use super::v2::{put_varint, Cursor};
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
        assert_eq!(back.lookup(&e.oid), Some(*e));
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
fn the_frame_declares_the_index_size_and_either_frame_decodes() {
    let idx = ContainerIndex::from_entries(container());
    let encoded = idx.encode();
    let raw = zstd::stream::decode_all(&encoded[..]).unwrap();
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&encoded).ok(),
        Some(Some(raw.len() as u64))
    );
    // A frame without the size (indexes written before it was declared)
    // takes the streaming way to the same index.
    let mut z = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    z.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut z, &raw).unwrap();
    let unsized_frame = z.finish().unwrap();
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&unsized_frame).ok(),
        Some(None)
    );
    for bytes in [&encoded, &unsized_frame] {
        let back = ContainerIndex::decode(bytes).unwrap();
        assert_eq!(back.encode(), encoded);
    }
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
    assert_eq!(idx.iter().collect::<Vec<_>>(), sorted);
    // and it is written back as version 2
    let again = ContainerIndex::decode(&idx.encode()).unwrap();
    assert_eq!(again.iter().collect::<Vec<_>>(), sorted);
}

/// The interpolation search finds exactly what a plain binary search finds,
/// for uniform oids (hashes), for oids crowded at one end of a fanout range
/// and for runs that share their first 8 bytes.
#[test]
fn position_agrees_with_a_binary_search() {
    let entry = |oid: ObjectId| IndexEntry {
        oid,
        offset: 0,
        length: 1,
        record_type: 3,
        kind: 3,
        size: 1,
        depth: 0,
        base: None,
    };
    let hashed = |i: u64| {
        let mut h = gix_hash::hasher(gix_hash::Kind::Sha1);
        h.update(&i.to_be_bytes());
        h.try_finalize().unwrap()
    };
    let crowded = |i: u64| {
        let mut raw = [0u8; 20];
        raw[0] = 0x42;
        raw[1] = if i.is_multiple_of(10) { 0xff } else { 0 };
        raw[12..20].copy_from_slice(&i.to_be_bytes());
        ObjectId::from_bytes_or_panic(&raw)
    };
    for make in [&hashed as &dyn Fn(u64) -> ObjectId, &crowded] {
        let present: Vec<ObjectId> = (0..20_000).step_by(2).map(make).collect();
        let idx = ContainerIndex::from_entries(present.iter().copied().map(entry).collect());
        let sorted: Vec<ObjectId> = (0..idx.len()).map(|i| idx.oid(i)).collect();
        for i in 0..20_000u64 {
            let oid = make(i);
            let expected = sorted.binary_search(&oid).ok();
            assert_eq!(idx.position(&oid), expected, "oid {oid} ({i})");
        }
    }
}

/// Values past a row's fields (a record and an object of 4 GiB or more, a
/// chain deeper than 65,535, a REF_DELTA base in and outside the container)
/// come back whole, from `from_entries` and from a decoded encoding; the rest
/// of the rows stay narrow.
#[test]
fn entries_wider_than_a_row_round_trip() {
    let oid = |b: u8| ObjectId::from_bytes_or_panic(&[b; 20]);
    let outside = oid(0xee);
    let entries = vec![
        IndexEntry {
            oid: oid(0x10),
            offset: 0,
            length: 5 << 30,
            record_type: 3,
            kind: 3,
            size: 6 << 30,
            depth: 0,
            base: None,
        },
        IndexEntry {
            oid: oid(0x20),
            offset: 5 << 30,
            length: 7,
            record_type: OFS_DELTA,
            kind: 3,
            size: 9,
            depth: 70_000,
            base: Some(oid(0x10)),
        },
        IndexEntry {
            oid: oid(0x30),
            offset: (5 << 30) + 7,
            length: 8,
            record_type: REF_DELTA,
            kind: 3,
            size: 10,
            depth: 1,
            base: Some(oid(0x20)),
        },
        IndexEntry {
            oid: oid(0x40),
            offset: (5 << 30) + 15,
            length: 9,
            record_type: REF_DELTA,
            kind: 3,
            size: 11,
            depth: 1,
            base: Some(outside),
        },
    ];
    let idx = ContainerIndex::from_entries(entries.clone());
    assert_eq!(idx.iter().collect::<Vec<_>>(), entries);
    assert_eq!(idx.rows.wide_rows(), vec![0, 1, 3]);
    let back = ContainerIndex::decode(&idx.encode()).unwrap();
    assert_eq!(back.iter().collect::<Vec<_>>(), entries);
    assert_eq!(back.rows.wide_rows(), vec![0, 1, 3]);
    for e in &entries {
        assert_eq!(back.lookup(&e.oid), Some(*e));
    }
}

/// Wide entries whose records are not in oid order (the decoder sets
/// columns by record and moves each row to its place at the end) come back
/// whole and at their rows.
#[test]
fn wide_entries_out_of_oid_order_round_trip() {
    let oid = |b: u8| ObjectId::from_bytes_or_panic(&[b; 20]);
    let entry = |o: u8, offset: u64, length: u64, record_type: u8, size: u64, depth: u32, base| {
        IndexEntry {
            oid: oid(o),
            offset,
            length,
            record_type,
            kind: 3,
            size,
            depth,
            base,
        }
    };
    // Records in .bin order: 0x40, 0x30, 0x20, 0x10, 0x50.
    let entries = vec![
        entry(0x40, 0, 5 << 30, 3, 6 << 30, 0, None),
        entry(0x30, 5 << 30, 7, OFS_DELTA, 9, 70_000, Some(oid(0x40))),
        entry(0x20, (5 << 30) + 7, 8, 3, 10, 0, None),
        entry(0x10, (5 << 30) + 15, 9, REF_DELTA, 11, 1, Some(oid(0xee))),
        entry(0x50, (5 << 30) + 24, 3, OFS_DELTA, 12, 1, Some(oid(0x20))),
    ];
    let back =
        ContainerIndex::decode(&ContainerIndex::from_entries(entries.clone()).encode()).unwrap();
    // Rows by oid: 0x10 (REF_DELTA outside), 0x20, 0x30 (deep), 0x40 (large), 0x50.
    assert_eq!(back.rows.wide_rows(), vec![0, 2, 3]);
    for e in &entries {
        assert_eq!(back.lookup(&e.oid), Some(*e));
    }
    let mut by_oid = entries.clone();
    by_oid.sort_by_key(|e| e.oid);
    assert_eq!(back.iter().collect::<Vec<_>>(), by_oid);
}

/// A decoded SHA-1 index holds 44 bytes an object (oid and row), not the
/// 96 of an [`IndexEntry`] (whose `ObjectId`s are 33 bytes each once
/// gix-hash can hold SHA-256).
#[test]
fn a_decoded_index_holds_44_bytes_an_object() {
    let n = 10_000u64;
    let entries: Vec<IndexEntry> = (0..n)
        .map(|i| {
            let mut raw = [0u8; 20];
            raw[..8].copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_be_bytes());
            IndexEntry {
                oid: ObjectId::from_bytes_or_panic(&raw),
                offset: i * 100,
                length: 100,
                record_type: 1,
                kind: 1,
                size: 300,
                depth: 0,
                base: None,
            }
        })
        .collect();
    let idx = ContainerIndex::decode(&ContainerIndex::from_entries(entries).encode()).unwrap();
    assert_eq!(std::mem::size_of::<IndexEntry>(), 96);
    assert_eq!(idx.rows.heap_bytes(), 44 * n as usize);
}

#[test]
fn a_mapped_index_reads_as_the_heap_one() {
    // 20,000 records (880 kB of oids and rows: above the mapping threshold),
    // oids from a hash so the fanout and the interpolation search are
    // exercised; every third a delta on the record before, one entry wide.
    let oid = |i: u64| {
        let h = sha2::Sha256::digest(i.to_be_bytes());
        ObjectId::from_bytes_or_panic(&h[..20])
    };
    let mut entries: Vec<IndexEntry> = (0..20_000u64)
        .map(|i| IndexEntry {
            oid: oid(i),
            offset: i * 100,
            length: 100,
            record_type: if i % 3 == 1 { OFS_DELTA } else { 2 },
            kind: 2,
            size: 1000 + i,
            depth: u32::from(i % 3 == 1),
            base: (i % 3 == 1).then(|| oid(i - 1)),
        })
        .collect();
    entries[7].size = 5 << 30;
    let heap = ContainerIndex::from_entries(entries.clone());
    let dir = tempfile::tempdir().unwrap();
    let mapped = heap.clone().mapped(&crate::mapped::MapDir::new(dir.path()));
    assert!(mapped.is_mapped() && !heap.is_mapped());
    assert_eq!(mapped.len(), heap.len());
    assert!(mapped.iter().eq(heap.iter()));
    for e in &entries {
        let at = mapped.position(&e.oid).expect("found");
        assert_eq!(mapped.oid(at), e.oid);
        assert_eq!(mapped.lookup(&e.oid), Some(*e));
    }
    assert_eq!(mapped.lookup(&oid(20_001)), None);
    // Released pages read back the same; a clone is a heap copy.
    mapped.release_pages();
    assert!(mapped.iter().eq(heap.iter()));
    let copy = mapped.clone();
    assert!(!copy.is_mapped() && copy.iter().eq(heap.iter()));
    assert_eq!(mapped.encode(), heap.encode());
    // A small index stays on the heap.
    let small =
        ContainerIndex::from_entries(container()).mapped(&crate::mapped::MapDir::new(dir.path()));
    assert!(!small.is_mapped());
}

/// [`container`] with SHA-256 oids.
fn container_sha256() -> Vec<IndexEntry> {
    let wide = |o: &ObjectId| {
        let mut raw = [0u8; 32];
        raw[..20].copy_from_slice(o.as_slice());
        raw[20..].copy_from_slice(&o.as_slice()[..12]);
        ObjectId::from_bytes_or_panic(&raw)
    };
    container()
        .into_iter()
        .map(|e| IndexEntry {
            oid: wide(&e.oid),
            base: e.base.as_ref().map(wide),
            ..e
        })
        .collect()
}

/// The decompressed body of an encoded index.
fn body_of(encoded: &[u8]) -> Vec<u8> {
    let raw = zstd::stream::decode_all(encoded).unwrap();
    raw[..raw.len() - 32].to_vec()
}

#[test]
fn a_sha256_index_is_version_3_and_round_trips() {
    let entries = container_sha256();
    let idx = ContainerIndex::from_entries(entries.clone());
    assert_eq!(idx.oid_width(), 32);
    let encoded = idx.encode();
    let body = body_of(&encoded);
    assert_eq!(&body[..4], MAGIC);
    assert_eq!(u32::from_be_bytes(body[4..8].try_into().unwrap()), 3);
    assert_eq!(body[8], 2, "hash id 2: SHA-256");
    let back = ContainerIndex::decode(&encoded).unwrap();
    assert_eq!((back.len(), back.oid_width()), (256, 32));
    for e in &entries {
        assert_eq!(back.lookup(&e.oid), Some(*e));
        // The same first 20 bytes as a SHA-1 oid are never found.
        let short = ObjectId::from_bytes_or_panic(&e.oid.as_slice()[..20]);
        assert_eq!(back.lookup(&short), None);
    }
    // Re-encoding what was decoded gives the same bytes.
    assert_eq!(back.encode(), encoded);
}

#[test]
fn a_sha1_index_is_still_version_2() {
    let idx = ContainerIndex::from_entries(container());
    let body = body_of(&idx.encode());
    assert_eq!(u32::from_be_bytes(body[4..8].try_into().unwrap()), 2);
    assert_eq!(idx.oid_width(), 20);
}

#[test]
fn a_version_3_index_with_an_unknown_hash_id_is_corrupt() {
    let encoded = ContainerIndex::from_entries(container_sha256()).encode();
    let mut body = body_of(&encoded);
    body[8] = 3;
    let mut raw = body.clone();
    raw.extend_from_slice(&Sha256::digest(&body));
    let bad = zstd::bulk::compress(&raw, 3).unwrap();
    assert!(matches!(
        ContainerIndex::decode(&bad),
        Err(IndexError::Corrupt("unknown hash id"))
    ));
}

#[test]
fn entries_of_two_widths_do_not_encode() {
    let mut entries = container();
    // Record 2 is a REF_DELTA: its base of the other width.
    entries[2].base = container_sha256()[2].base;
    assert!(ContainerIndex::from_entries(entries).try_encode().is_err());
}

#[test]
fn staging_rows_round_trip_in_both_widths() {
    for e in container().into_iter().chain(container_sha256()) {
        let mut row = [0u8; MAX_ROW];
        let n = e.to_row(&mut row);
        let w = e.oid.as_slice().len();
        assert_eq!(n, row_len(w));
        assert_eq!(IndexEntry::from_row(&row[..n], w), e);
    }
}

#[test]
fn a_sha1_index_is_written_byte_for_byte_as_before() {
    let bytes = ContainerIndex::from_entries(container()).encode();
    let digest = hex::encode(Sha256::digest(&bytes));
    // The bytes every build since before SHA-256 writes (computed at
    // 89d54bb): a SHA-1 repository's files do not change.
    assert_eq!(
        digest,
        "1252c28e5f89ce1feed81f20c2372855cb5cac4289c9619a3b3634d3cd5da488"
    );
}
