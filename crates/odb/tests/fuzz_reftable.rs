//! Property-based tests and fuzzing of ref tables (`gitstow_odb::reftable`).
//!
//! Models: a `BTreeMap` of name → value. Properties: a table written from a
//! sorted map reads back the same records by a full walk (seeking and
//! scanning cursors), by `get` of each name, and by `seek` to any name (the
//! first record not less than it); a stack of tables and an inline part,
//! merged, reads as the model that applies them oldest first (a deletion
//! removes the name), with and without kept deletions, from any seek; and
//! a table with random edits, or arbitrary bytes, never panics when opened
//! and walked (it reads back or fails with an error).
//!
//! The number of cases per property is `GITSTOW_FUZZ_CASES` (default 256).

use std::collections::BTreeMap;
use std::sync::Arc;

use gitstow_fuzzkit::{config, mutate, mutation};
use gitstow_odb::reftable::{MergedRefs, RefCursor, RefValue, SliceCursor, Table, TableWriter};
use gix_hash::ObjectId;
use proptest::prelude::*;

type Model = BTreeMap<Vec<u8>, RefValue>;

/// Names over a small alphabet so that they share prefixes, some long.
fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::collection::vec(prop::sample::select(b"ab/1".to_vec()), 1..14),
        1 => (prop::collection::vec(any::<u8>(), 1..6), 0usize..6000).prop_map(|(mut n, pad)| {
            n.extend(std::iter::repeat_n(b'x', pad));
            n
        }),
    ]
    .prop_map(|n| [b"refs/".as_slice(), &n].concat())
}

fn value(deletions: bool) -> impl Strategy<Value = RefValue> {
    let oid = any::<[u8; 20]>().prop_map(|b| ObjectId::from_bytes_or_panic(&b));
    let del = if deletions { 1 } else { 0 };
    prop_oneof![
        6 => oid.clone().prop_map(RefValue::Oid),
        1 => (oid.clone(), oid).prop_map(|(oid, peeled)| RefValue::Peeled { oid, peeled }),
        del => Just(RefValue::Deleted),
    ]
}

fn model(max: usize, deletions: bool) -> impl Strategy<Value = Model> {
    prop::collection::btree_map(name(), value(deletions), 0..max)
}

fn write(m: &Model) -> Vec<u8> {
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha1).unwrap();
    for (n, v) in m {
        w.add(n, *v).unwrap();
    }
    w.finish().unwrap().0
}

fn open(bytes: Vec<u8>) -> Result<Table, gitstow_odb::reftable::ReftableError> {
    let len = bytes.len() as u64;
    Table::open(Arc::new(bytes), len)
}

fn walk(c: &mut dyn RefCursor) -> Result<Vec<(Vec<u8>, RefValue)>, String> {
    let mut out = Vec::new();
    while let Some((n, v)) = c.current() {
        out.push((n.to_vec(), v));
        c.advance().map_err(|e| e.to_string())?;
        if out.len() > 1_000_000 {
            return Err("walk does not end".into());
        }
    }
    Ok(out)
}

/// Every block of a table (start, length), then the footer's span
/// (length counted so that `start + 4 .. start + len - 4` is its body).
fn spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let footer = bytes.len() - 40;
    let mut out = Vec::new();
    let mut at = 8;
    while at < footer {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        out.push((at, len));
        at += len;
    }
    out.push((footer - 4, 44));
    out
}

/// Recomputes the CRC of the block (or footer) at `start`.
fn reseal(bytes: &mut [u8], start: usize, len: usize) {
    if start + len == bytes.len() {
        let f = start + 4;
        let crc = crc32fast::hash(&bytes[f..f + 36]);
        bytes[f + 36..f + 40].copy_from_slice(&crc.to_le_bytes());
    } else {
        let crc = crc32fast::hash(&bytes[start..start + len - 4]);
        bytes[start + len - 4..start + len].copy_from_slice(&crc.to_le_bytes());
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_table_reads_back_its_records(m in model(3000, true), targets in prop::collection::vec(name(), 0..20)) {
        let table = open(write(&m)).unwrap();
        prop_assert_eq!(table.records(), m.len() as u64);
        let all: Vec<_> = m.iter().map(|(n, v)| (n.clone(), *v)).collect();
        for mut c in [table.cursor(), table.scan()] {
            c.seek(b"").unwrap();
            prop_assert_eq!(&walk(&mut c).unwrap(), &all);
        }
        for (n, v) in m.iter().step_by(7) {
            prop_assert_eq!(table.get(n).unwrap(), Some(*v));
        }
        let mut c = table.cursor();
        for t in &targets {
            c.seek(t).unwrap();
            let want = m.range(t.clone()..).next().map(|(n, v)| (n.clone(), *v));
            prop_assert_eq!(c.current().map(|(n, v)| (n.to_vec(), v)), want);
            prop_assert_eq!(table.get(t).unwrap(), m.get(t).copied());
        }
    }

    #[test]
    fn a_merged_stack_reads_as_its_updates_applied_in_order(
        layers in prop::collection::vec(model(400, true), 1..6),
        inline in model(40, true),
        target in name(),
    ) {
        // layers oldest first; the inline part is newest
        let mut applied = Model::new();
        let mut latest = Model::new();
        for layer in layers.iter().chain(std::iter::once(&inline)) {
            for (n, v) in layer {
                latest.insert(n.clone(), *v);
                if v.is_deletion() { applied.remove(n); } else { applied.insert(n.clone(), *v); }
            }
        }
        let tables: Vec<Table> = layers.iter().map(|l| open(write(l)).unwrap()).collect();
        let inline: Vec<(Vec<u8>, RefValue)> = inline.into_iter().collect();
        let sources = |scan: bool| {
            let mut s: Vec<Box<dyn RefCursor + '_>> = vec![Box::new(SliceCursor::new(&inline))];
            for t in tables.iter().rev() {
                s.push(Box::new(if scan { t.scan() } else { t.cursor() }));
            }
            s
        };
        let mut merged = MergedRefs::new(sources(true));
        merged.seek(b"").unwrap();
        let want: Vec<_> = applied.iter().map(|(n, v)| (n.clone(), *v)).collect();
        prop_assert_eq!(walk(&mut merged).unwrap(), want);
        let mut merged = MergedRefs::new(sources(false)).keeping_deletions();
        merged.seek(&target).unwrap();
        let want: Vec<_> = latest.range(target.clone()..).map(|(n, v)| (n.clone(), *v)).collect();
        prop_assert_eq!(walk(&mut merged).unwrap(), want);
    }

    #[test]
    fn a_damaged_table_never_panics(m in model(600, true), edits in prop::collection::vec(mutation(), 1..4), target in name()) {
        let bytes = mutate(write(&m), &edits);
        if let Ok(table) = open(bytes) {
            for mut c in [table.cursor(), table.scan()] {
                if c.seek(b"").is_ok() {
                    let _ = walk(&mut c);
                }
                let _ = c.seek(&target);
            }
            let _ = table.get(&target);
        }
    }

    #[test]
    fn damage_behind_a_good_checksum_never_panics(
        m in model(600, true),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<u8>()), 1..4),
        target in name(),
    ) {
        // the damage reaches the structural checks: each edit lands in a
        // block (or the footer) whose checksum is then made right again
        let mut bytes = write(&m);
        for (which, at, byte) in edits {
            let spans = spans(&bytes);
            let (start, len) = spans[which.index(spans.len())];
            let i = start + 4 + at.index(len - 8);
            bytes[i] = byte;
            reseal(&mut bytes, start, len);
        }
        if let Ok(table) = open(bytes) {
            for mut c in [table.cursor(), table.scan()] {
                if c.seek(b"").is_ok() {
                    let _ = walk(&mut c);
                }
                let _ = c.seek(&target);
            }
            let _ = table.get(&target);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000), target in name()) {
        // with and without a valid footer magic at the end
        let mut framed = bytes.clone();
        framed.extend_from_slice(b"GSRF\x01\x01\x14\x00");
        for b in [bytes, framed] {
            if let Ok(table) = open(b) {
                let mut c = table.scan();
                if c.seek(b"").is_ok() {
                    let _ = walk(&mut c);
                }
                let _ = table.get(&target);
            }
        }
    }
}
