//! Property-based fuzzing of the container index reader
//! (`gitstow_odb::container::ContainerIndex::decode`).
//!
//! Inputs: arbitrary bytes; arbitrary bytes inside a valid zstd frame; valid
//! encodings with random edits of the compressed bytes; and valid encodings
//! whose *decompressed* form is edited, then given a correct SHA-256 and
//! recompressed, so the damage reaches the structural checks (magic,
//! version, count, fanout, row order) instead of stopping at the checksum.
//! Properties: `decode` never panics; what it accepts can be looked up
//! without panicking; valid indexes round-trip (`from_entries` → `encode` →
//! `decode` gives the same entries, and every entry is found by `lookup`).
//!
//! The number of cases per property is `GITSTOW_FUZZ_CASES` (default 256).

use gitstow_fuzzkit::{config, mutate, mutation};
use gitstow_odb::container::{ContainerIndex, IndexEntry};
use gix_hash::ObjectId;
use proptest::prelude::*;
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------

/// Header of the decompressed index: magic, version, count, 256 fanout words.
const HEADER: usize = 4 + 4 + 4 + 256 * 4;
/// One row: oid, offset, length, record type, kind, size, crc32, depth, base.
const ROW: usize = 20 + 8 + 8 + 1 + 1 + 8 + 4 + 4 + 20;

fn oid_bytes() -> impl Strategy<Value = [u8; 20]> {
    prop_oneof![
        3 => any::<[u8; 20]>(),
        // clustered first bytes, so fanout buckets hold several entries
        1 => (0u8..4, any::<[u8; 19]>()).prop_map(|(f, rest)| {
            let mut b = [f; 20];
            b[1..].copy_from_slice(&rest);
            b
        }),
        1 => (any::<u8>(), 0u8..3).prop_map(|(f, l)| {
            let mut b = [f; 20];
            b[19] = l;
            b
        }),
    ]
}

fn entry() -> impl Strategy<Value = IndexEntry> {
    (
        oid_bytes(),
        any::<u64>(),
        any::<u64>(),
        prop::sample::select(vec![1u8, 2, 3, 4, 6, 7]),
        1u8..5,
        any::<u64>(),
        any::<u32>(),
        0u32..60,
        prop::option::of(any::<[u8; 20]>().prop_filter("non-zero base", |b| b != &[0; 20])),
    )
        .prop_map(
            |(oid, offset, length, record_type, kind, size, crc32, depth, base)| IndexEntry {
                oid: ObjectId::from_bytes_or_panic(&oid),
                offset,
                length,
                record_type,
                kind,
                size,
                crc32,
                depth,
                base: base.map(|b| ObjectId::from_bytes_or_panic(&b)),
            },
        )
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

/// Decodes and, on success, exercises the result: nothing may panic.
/// Returns whether every entry is found by `lookup` (the index is coherent).
fn decode_and_use(bytes: &[u8], probes: &[[u8; 20]]) -> Option<bool> {
    match ContainerIndex::decode(bytes) {
        Ok(idx) => {
            assert!(idx.entries().windows(2).all(|w| w[0].oid < w[1].oid));
            let mut coherent = true;
            for e in idx.entries() {
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
            // and it encodes again to something that decodes
            let again = ContainerIndex::decode(&idx.encode()).expect("re-encoded index decodes");
            assert_eq!(again.entries(), idx.entries());
            Some(coherent)
        }
        Err(e) => {
            drop(e.to_string());
            None
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
        with_header in any::<bool>(),
        count in 0u32..40,
        seal in any::<bool>(),
    ) {
        let mut raw = raw;
        if with_header {
            let mut head = b"GSTI\0\0\0\x01".to_vec();
            head.extend_from_slice(&count.to_be_bytes());
            raw.splice(0..0, head);
        }
        let bytes = if seal { reseal(raw) } else { zstd::bulk::compress(&raw, 1).unwrap() };
        decode_and_use(&bytes, &[]);
    }

    #[test]
    fn valid_indexes_roundtrip(
        entries in prop::collection::vec(entry(), 0..80),
        probes in prop::collection::vec(any::<[u8; 20]>(), 0..8),
    ) {
        let idx = ContainerIndex::from_entries(entries.clone());
        let encoded = idx.encode();
        let back = ContainerIndex::decode(&encoded).unwrap();
        prop_assert_eq!(back.entries(), idx.entries());
        // duplicates keep the first one given
        let mut distinct: Vec<IndexEntry> = Vec::new();
        for e in &entries {
            if !distinct.iter().any(|d| d.oid == e.oid) {
                distinct.push(*e);
            }
        }
        prop_assert_eq!(back.len(), distinct.len());
        for e in &distinct {
            prop_assert_eq!(back.lookup(&e.oid), Some(e));
        }
        for p in &probes {
            let oid = ObjectId::from_bytes_or_panic(p);
            let want = distinct.iter().find(|e| e.oid == oid);
            prop_assert_eq!(back.lookup(&oid), want);
        }
        prop_assert_eq!(decode_and_use(&encoded, &probes), Some(true));
    }

    #[test]
    fn mutated_compressed_indexes_never_panic(
        entries in prop::collection::vec(entry(), 0..20),
        mutations in prop::collection::vec(mutation(), 1..5),
        probes in prop::collection::vec(oid_bytes(), 0..4),
    ) {
        let encoded = ContainerIndex::from_entries(entries).encode();
        decode_and_use(&mutate(encoded, &mutations), &probes);
    }

    /// Damage behind a valid checksum: only the structural checks stand
    /// between it and the reader.
    #[test]
    fn mutated_raw_indexes_never_panic(
        entries in prop::collection::vec(entry(), 0..20),
        mutations in prop::collection::vec(mutation(), 1..5),
        probes in prop::collection::vec(oid_bytes(), 0..4),
    ) {
        let raw = raw_of(&ContainerIndex::from_entries(entries).encode());
        decode_and_use(&reseal(mutate(raw, &mutations)), &probes);
    }

    /// Edits aimed at the fields the decoder checks: the count, the fanout
    /// and the rows' oids (checksum recomputed).
    #[test]
    fn targeted_raw_edits_never_panic(
        entries in prop::collection::vec(entry(), 1..20),
        count in prop_oneof![Just(None), any::<u32>().prop_map(Some), (0u32..25).prop_map(Some)],
        fanout_edits in prop::collection::vec((0usize..256, 0u32..25), 0..3),
        row_edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..20, any::<u8>()), 0..3),
        probes in prop::collection::vec(oid_bytes(), 0..4),
    ) {
        let idx = ContainerIndex::from_entries(entries);
        let mut raw = raw_of(&idx.encode());
        if let Some(c) = count {
            raw[8..12].copy_from_slice(&c.to_be_bytes());
        }
        for (slot, value) in &fanout_edits {
            let at = 12 + 4 * slot;
            raw[at..at + 4].copy_from_slice(&value.to_be_bytes());
        }
        for (row, byte, value) in &row_edits {
            let at = HEADER + ROW * row.index(idx.len()) + byte;
            raw[at] = *value;
        }
        decode_and_use(&reseal(raw), &probes);
    }
}

/// A fanout that disagrees with the rows (monotonic, right total, checksum
/// recomputed) is refused by `decode` (found by fuzzing: it used to be
/// accepted, and `lookup` then missed entries that `entries()` listed).
#[test]
fn incoherent_fanout_is_refused() {
    let mk = |first: u8| IndexEntry {
        oid: ObjectId::from_bytes_or_panic(&[first; 20]),
        offset: 0,
        length: 1,
        record_type: 3,
        kind: 3,
        size: 1,
        crc32: 0,
        depth: 0,
        base: None,
    };
    let idx = ContainerIndex::from_entries(vec![mk(0x10), mk(0x20)]);
    let mut raw = raw_of(&idx.encode());
    // fanout[0x10] = 0 instead of 1: still monotonic, still ends at 2
    let at = 12 + 4 * 0x10;
    raw[at..at + 4].copy_from_slice(&0u32.to_be_bytes());
    match ContainerIndex::decode(&reseal(raw)) {
        Err(_) => {}
        Ok(idx) => {
            let missing: Vec<_> = idx
                .entries()
                .iter()
                .filter(|e| idx.lookup(&e.oid).is_none())
                .map(|e| e.oid)
                .collect();
            panic!("accepted an index whose lookups miss {missing:?}");
        }
    }
}

/// `lookup` on `ContainerIndex::default()` finds nothing (found by fuzzing:
/// the derived default had an empty fanout and `lookup` indexed out of bounds).
#[test]
fn default_index_lookup_does_not_panic() {
    assert!(ContainerIndex::default()
        .lookup(&ObjectId::null(gix_hash::Kind::Sha1))
        .is_none());
}
