use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gix_hash::ObjectId;

use super::*;

fn oid(n: u64) -> ObjectId {
    let mut b = [0u8; 20];
    b[..8].copy_from_slice(&n.to_be_bytes());
    b[12..].copy_from_slice(&n.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    ObjectId::from_bytes_or_panic(&b)
}

fn write(records: &[(Vec<u8>, RefValue)]) -> (Vec<u8>, TableSummary) {
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha1).unwrap();
    for (n, v) in records {
        w.add(n, *v).unwrap();
    }
    w.finish().unwrap()
}

/// Counts the reads and bytes a table costs.
struct Counting {
    bytes: Vec<u8>,
    reads: AtomicU64,
    read_bytes: AtomicU64,
}

impl TableSource for Counting {
    fn read(&self, range: Range<u64>) -> Result<Arc<Vec<u8>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes
            .fetch_add(range.end - range.start, Ordering::Relaxed);
        self.bytes.read(range)
    }
}

fn open(bytes: Vec<u8>) -> (Table, Arc<Counting>) {
    let len = bytes.len() as u64;
    let source = Arc::new(Counting {
        bytes,
        reads: AtomicU64::new(0),
        read_bytes: AtomicU64::new(0),
    });
    (Table::open(source.clone(), len).unwrap(), source)
}

fn walk(c: &mut dyn RefCursor) -> Vec<(Vec<u8>, RefValue)> {
    let mut out = Vec::new();
    while let Some((n, v)) = c.current() {
        out.push((n.to_vec(), v));
        c.advance().unwrap();
    }
    out
}

/// Gerrit's shape: `refs/changes/NN/N/1`, each at its own commit, and some
/// annotated tags and deletions.
fn changes(n: u64) -> Vec<(Vec<u8>, RefValue)> {
    let mut m = BTreeMap::new();
    for i in 1..=n {
        let name = format!("refs/changes/{:02}/{i}/1", i % 100).into_bytes();
        let v = match i % 50 {
            0 => RefValue::Peeled {
                oid: oid(i),
                peeled: oid(i + 1),
            },
            7 => RefValue::Deleted,
            _ => RefValue::Oid(oid(i)),
        };
        m.insert(name, v);
    }
    m.into_iter().collect()
}

#[test]
fn an_empty_table_reads_back_empty() {
    let (bytes, summary) = write(&[]);
    assert_eq!(summary.records, 0);
    assert_eq!(bytes.len(), HEADER_BYTES + FOOTER_BYTES);
    let (t, _) = open(bytes);
    assert_eq!(t.records(), 0);
    let mut c = t.scan();
    c.seek(b"").unwrap();
    assert!(c.current().is_none());
    assert_eq!(t.get(b"refs/heads/main").unwrap(), None);
}

#[test]
fn a_large_table_reads_back_and_seeks_through_its_index() {
    let records = changes(300_000);
    let (bytes, summary) = write(&records);
    assert_eq!(summary.records, records.len() as u64);
    assert_eq!(summary.bytes, bytes.len() as u64);
    // about 31 bytes a ref: the oid and a few bytes of name
    let per_ref = bytes.len() as f64 / records.len() as f64;
    assert!(per_ref < 40.0, "{per_ref} bytes a ref");
    let (t, source) = open(bytes);
    assert!(t.levels() >= 2, "{} index levels", t.levels());
    assert_eq!(
        source.reads.load(Ordering::Relaxed),
        1,
        "open reads the tail once"
    );

    let mut c = t.scan();
    c.seek(b"").unwrap();
    assert_eq!(walk(&mut c), records);

    // a lookup costs one block read a level below the root
    for (name, value) in records.iter().step_by(997) {
        let before = source.reads.load(Ordering::Relaxed);
        assert_eq!(t.get(name).unwrap(), Some(*value));
        let reads = source.reads.load(Ordering::Relaxed) - before;
        assert!(
            reads <= u64::from(t.levels()),
            "{reads} reads for one lookup"
        );
    }
    // names between and around the records
    assert_eq!(t.get(b"refs/changes/00/100/2").unwrap(), None);
    assert_eq!(t.get(b"refs/heads/main").unwrap(), None);
    assert_eq!(t.get(b"a").unwrap(), None);
    let mut c = t.cursor();
    c.seek(b"refs/changes/00/100/10").unwrap();
    let after = records
        .iter()
        .find(|(n, _)| n.as_slice() >= b"refs/changes/00/100/10".as_slice())
        .unwrap();
    assert_eq!(c.current().unwrap().0, after.0.as_slice());
    c.seek(b"refs/z").unwrap();
    assert!(c.current().is_none());

    // a prefix walk reads what it matches
    let prefix = b"refs/changes/42/";
    let mut c = t.cursor();
    c.seek(prefix).unwrap();
    let mut got = Vec::new();
    while let Some((n, v)) = c.current() {
        if !n.starts_with(prefix) {
            break;
        }
        got.push((n.to_vec(), v));
        c.advance().unwrap();
    }
    let want: Vec<_> = records
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .cloned()
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_scan_reads_in_windows() {
    let records = changes(100_000);
    let (bytes, _) = write(&records);
    let len = bytes.len() as u64;
    let (t, source) = open(bytes);
    let mut c = t.scan();
    c.seek(b"").unwrap();
    assert_eq!(walk(&mut c).len(), records.len());
    let reads = source.reads.load(Ordering::Relaxed);
    assert!(
        reads < len / (128 * 1024) + 8,
        "{reads} reads for {len} bytes"
    );
    assert!(source.read_bytes.load(Ordering::Relaxed) < len * 2);
}

#[test]
fn the_writer_refuses_names_out_of_order() {
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha1).unwrap();
    w.add(b"refs/heads/b", RefValue::Oid(oid(1))).unwrap();
    assert!(matches!(
        w.add(b"refs/heads/b", RefValue::Oid(oid(1))),
        Err(ReftableError::Unsorted)
    ));
    assert!(matches!(
        w.add(b"refs/heads/a", RefValue::Oid(oid(1))),
        Err(ReftableError::Unsorted)
    ));
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha1).unwrap();
    assert!(matches!(
        w.add(b"", RefValue::Deleted),
        Err(ReftableError::Unsorted)
    ));
}

#[test]
fn a_name_longer_than_a_table_holds_is_refused() {
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha1).unwrap();
    let name = vec![b'r'; MAX_NAME_BYTES + 1];
    assert!(matches!(
        w.add(&name, RefValue::Deleted),
        Err(ReftableError::NameTooLong(n)) if n == MAX_NAME_BYTES + 1
    ));
}

#[test]
fn a_name_longer_than_a_block_gets_a_block_of_its_own() {
    let long = |c: u8| {
        let mut n = b"refs/heads/".to_vec();
        n.extend(std::iter::repeat_n(c, 9000));
        n
    };
    let records = vec![
        (b"refs/heads/a".to_vec(), RefValue::Oid(oid(1))),
        (long(b'b'), RefValue::Oid(oid(2))),
        (long(b'c'), RefValue::Deleted),
        (b"refs/heads/d".to_vec(), RefValue::Oid(oid(3))),
    ];
    let (bytes, _) = write(&records);
    let (t, _) = open(bytes);
    for (n, v) in &records {
        assert_eq!(t.get(n).unwrap(), Some(*v));
    }
    for mut c in [t.cursor(), t.scan()] {
        c.seek(b"").unwrap();
        assert_eq!(walk(&mut c), records);
    }
}

#[test]
fn prefix_end_is_the_first_name_past_a_namespace() {
    assert_eq!(
        prefix_end(b"refs/changes/"),
        Some(b"refs/changes0".to_vec())
    );
    assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
    assert_eq!(prefix_end(b"\xff"), None);
    assert_eq!(prefix_end(b""), None);
}

#[test]
fn the_newest_record_wins_and_deletions_hide_names() {
    let older = vec![
        (b"refs/heads/a".to_vec(), RefValue::Oid(oid(1))),
        (b"refs/heads/b".to_vec(), RefValue::Oid(oid(2))),
        (b"refs/heads/c".to_vec(), RefValue::Oid(oid(3))),
    ];
    let newer = vec![
        (b"refs/heads/b".to_vec(), RefValue::Deleted),
        (b"refs/heads/c".to_vec(), RefValue::Oid(oid(30))),
        (b"refs/heads/d".to_vec(), RefValue::Deleted),
    ];
    let inline = vec![
        ("refs/heads/b".to_string(), RefValue::Oid(oid(20))),
        ("refs/heads/e".to_string(), RefValue::Oid(oid(5))),
    ];
    let (t_old, _) = open(write(&older).0);
    let (t_new, _) = open(write(&newer).0);
    let merged = |keep: bool| {
        let m = MergedRefs::new(vec![
            Box::new(SliceCursor::new(&inline)),
            Box::new(t_new.scan()),
            Box::new(t_old.scan()),
        ]);
        if keep {
            m.keeping_deletions()
        } else {
            m
        }
    };
    let mut m = merged(false);
    m.seek(b"").unwrap();
    let names: Vec<_> = walk(&mut m)
        .into_iter()
        .map(|(n, v)| (String::from_utf8(n).unwrap(), v.oid()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("refs/heads/a".into(), Some(oid(1))),
            ("refs/heads/b".into(), Some(oid(20))),
            ("refs/heads/c".into(), Some(oid(30))),
            ("refs/heads/e".into(), Some(oid(5))),
        ]
    );
    // without the inline part, b is deleted; kept deletions show it and d
    let mut m =
        MergedRefs::new(vec![Box::new(t_new.scan()), Box::new(t_old.scan())]).keeping_deletions();
    m.seek(b"refs/heads/b").unwrap();
    let got = walk(&mut m);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], (b"refs/heads/b".to_vec(), RefValue::Deleted));
    assert_eq!(got[2], (b"refs/heads/d".to_vec(), RefValue::Deleted));
    let _ = merged(true);
}

#[test]
fn damage_is_an_error_not_a_wrong_answer() {
    let records = changes(20_000);
    let (bytes, _) = write(&records);
    // a flipped byte in the first ref block
    let mut bad = bytes.clone();
    bad[HEADER_BYTES + 40] ^= 0x10;
    let (t, _) = open(bad);
    let mut c = t.scan();
    assert!(matches!(
        c.seek(b"").and_then(|_| c.advance()),
        Err(ReftableError::Corrupt(_))
    ));
    // a flipped byte in the footer
    let mut bad = bytes.clone();
    let at = bad.len() - 20;
    bad[at] ^= 1;
    let len = bad.len() as u64;
    assert!(matches!(
        Table::open(Arc::new(bad), len),
        Err(ReftableError::Corrupt(_))
    ));
    // a truncated table
    let short = bytes[..bytes.len() - 1].to_vec();
    let len = short.len() as u64;
    assert!(Table::open(Arc::new(short), len).is_err());
}

#[test]
fn varints_are_bounded() {
    let mut out = Vec::new();
    for n in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
        out.clear();
        put_varint(&mut out, n);
        let mut pos = 0;
        assert_eq!(get_varint(&out, &mut pos).unwrap(), n);
        assert_eq!(pos, out.len());
    }
    let mut pos = 0;
    assert!(get_varint(&[0xff; 11], &mut pos).is_err());
    let mut pos = 0;
    assert!(get_varint(
        &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
        &mut pos
    )
    .is_err());
    let mut pos = 0;
    assert!(get_varint(&[0x80], &mut pos).is_err());
}

/// The merge against a model (a map applied oldest first): random stacks
/// where one source holds long runs of the next names, names repeat across
/// sources, and deletions hide names or are kept; walked whole and from
/// seeks.
#[test]
fn a_merge_of_random_stacks_matches_the_model() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..200 {
        let sources = 1 + rand(5) as usize;
        let mut stacks: Vec<BTreeMap<Vec<u8>, RefValue>> = vec![BTreeMap::new(); sources];
        let names = 1 + rand(400);
        for k in 0..names {
            // runs: a name goes to one source for a while, then another
            let run_source = ((k / (1 + rand(40))) as usize + round) % sources;
            let copies = if rand(6) == 0 { 1 + rand(3) } else { 1 };
            for c in 0..copies {
                let s = if c == 0 {
                    run_source
                } else {
                    rand(sources as u64) as usize
                };
                let v = if rand(5) == 0 {
                    RefValue::Deleted
                } else {
                    RefValue::Oid(oid(k * 10 + c))
                };
                stacks[s].insert(format!("refs/x/{k:05}").into_bytes(), v);
            }
        }
        // model: newest first in `stacks`, so apply from the last
        let mut model: BTreeMap<Vec<u8>, RefValue> = BTreeMap::new();
        for s in stacks.iter().rev() {
            for (n, v) in s {
                model.insert(n.clone(), *v);
            }
        }
        let tables: Vec<Table> = stacks
            .iter()
            .map(|s| open(write(&s.clone().into_iter().collect::<Vec<_>>()).0).0)
            .collect();
        for keep in [false, true] {
            let mut m = MergedRefs::new(
                tables
                    .iter()
                    .map(|t| Box::new(t.scan()) as Box<dyn RefCursor>)
                    .collect(),
            );
            if keep {
                m = m.keeping_deletions();
            }
            let target = format!("refs/x/{:05}", rand(names + 1)).into_bytes();
            let start = if rand(2) == 0 { Vec::new() } else { target };
            m.seek(&start).unwrap();
            let want: Vec<_> = model
                .range(start.clone()..)
                .filter(|(_, v)| keep || !v.is_deletion())
                .map(|(n, v)| (n.clone(), *v))
                .collect();
            assert_eq!(walk(&mut m), want, "round {round}, keep {keep}");
        }
    }
}

/// A walk of a prefix ends at the prefix's end: a long run of deletion
/// records right after it (a range of refs deleted, not yet merged into the
/// bottom table) is not stepped through, so a lookup below a name costs a
/// seek whatever was deleted around it.
#[test]
fn a_prefix_walk_does_not_step_through_deletions_past_its_end() {
    let name = |i: u32| format!("refs/x/{i:05}").into_bytes();
    let older: Vec<_> = (0..20_000)
        .map(|i| (name(i), RefValue::Oid(oid(u64::from(i)))))
        .collect();
    let newer: Vec<_> = (10_001..20_000)
        .map(|i| (name(i), RefValue::Deleted))
        .collect();
    let (t_old, old_reads) = open(write(&older).0);
    let (t_new, new_reads) = open(write(&newer).0);
    let walk = |end: Option<Vec<u8>>| {
        let before =
            new_reads.reads.load(Ordering::Relaxed) + old_reads.reads.load(Ordering::Relaxed);
        let mut m =
            MergedRefs::new(vec![Box::new(t_new.cursor()), Box::new(t_old.cursor())]).until(end);
        m.seek(b"refs/x/10000/").unwrap();
        let got = walk(&mut m);
        let reads = new_reads.reads.load(Ordering::Relaxed)
            + old_reads.reads.load(Ordering::Relaxed)
            - before;
        (got, reads)
    };
    let (got, reads) = walk(prefix_end(b"refs/x/10000/"));
    assert!(got.is_empty());
    assert!(reads <= 4, "{reads} block reads for one empty prefix");
    // unbounded, the same seek steps through the 9,999 deletions to the
    // names after them
    let (got, reads) = walk(None);
    assert_eq!(got.len(), 0, "every later name is deleted");
    assert!(reads > 20, "{reads}");
}

/// `changes(n)` with SHA-256 oids (the SHA-1 oid's bytes, then 12 more).
fn changes_sha256(n: u64) -> Vec<(Vec<u8>, RefValue)> {
    let wide = |o: ObjectId| {
        let mut b = [0x5au8; 32];
        b[..20].copy_from_slice(o.as_slice());
        ObjectId::from_bytes_or_panic(&b)
    };
    changes(n)
        .into_iter()
        .map(|(name, v)| {
            let v = match v {
                RefValue::Oid(o) => RefValue::Oid(wide(o)),
                RefValue::Peeled { oid, peeled } => RefValue::Peeled {
                    oid: wide(oid),
                    peeled: wide(peeled),
                },
                RefValue::Deleted => RefValue::Deleted,
            };
            (name, v)
        })
        .collect()
}

#[test]
fn a_sha256_table_says_32_in_its_header_and_footer_and_reads_back() {
    let records = changes_sha256(50_000);
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha256).unwrap();
    for (n, v) in &records {
        w.add(n, *v).unwrap();
    }
    let (bytes, summary) = w.finish().unwrap();
    assert_eq!(summary.records, records.len() as u64);
    assert_eq!(bytes[5], 32, "the header's hash length");
    assert_eq!(bytes[bytes.len() - FOOTER_BYTES + 6], 32, "the footer's");
    let (t, _) = open(bytes);
    assert!(t.levels() >= 1, "{} index levels", t.levels());
    let mut c = t.scan();
    c.seek(b"").unwrap();
    assert_eq!(walk(&mut c), records);
    let (name, value) = &records[records.len() / 3];
    assert_eq!(t.get(name).unwrap(), Some(*value));
    // A SHA-1 table still says 20.
    let (one, _) = write(&changes(10));
    assert_eq!((one[5], one[one.len() - FOOTER_BYTES + 6]), (20, 20));
}

#[test]
fn the_writer_refuses_an_oid_of_the_other_width() {
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha256).unwrap();
    assert!(matches!(
        w.add(b"refs/heads/main", RefValue::Oid(oid(1))),
        Err(ReftableError::HashWidth {
            given: 20,
            table: 32
        })
    ));
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha1).unwrap();
    let wide = ObjectId::from_bytes_or_panic(&[1; 32]);
    assert!(w
        .add(
            b"refs/tags/v1",
            RefValue::Peeled {
                oid: oid(1),
                peeled: wide
            }
        )
        .is_err());
}

#[test]
fn a_sha1_ref_table_is_written_byte_for_byte_as_before() {
    use sha2::Digest;
    let (bytes, _) = write(&changes(3000));
    let digest = hex::encode(sha2::Sha256::digest(&bytes));
    // The bytes every build since before SHA-256 writes (computed at
    // 89d54bb): a SHA-1 repository's files do not change.
    assert_eq!(
        digest,
        "3fcef9171fab90a3ae8df4dbe1251bc7a3a7fda9794eb981cbb36e2931d780da"
    );
}
