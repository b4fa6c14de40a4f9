//! Figures of the ref table format on its own (plan 0010, step 2): writes a
//! table of N refs shaped as Gerrit's `refs/changes/NN/N/1`, each at its own
//! oid, then times a full scan, lookups of single refs (each from a cold
//! cursor, counting reads), and a prefix walk.
//!
//! `cargo run --release -p gitstow-odb --example reftable_bench -- 2300000`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use gitstow_odb::reftable::{RefValue, Result, Table, TableSource, TableWriter};
use gix_hash::ObjectId;

struct Counting(Vec<u8>, AtomicU64, AtomicU64);

impl TableSource for Counting {
    fn read(&self, range: std::ops::Range<u64>) -> Result<Arc<Vec<u8>>> {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.2.fetch_add(range.end - range.start, Ordering::Relaxed);
        self.0.read(range)
    }
}

fn oid(n: u64) -> ObjectId {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(n.to_le_bytes());
    ObjectId::from_bytes_or_panic(&h[..20])
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let mut names: Vec<String> = (1..=n)
        .map(|i| format!("refs/changes/{:02}/{i}/1", i % 100))
        .collect();
    names.push("refs/heads/main".into());
    names.sort();

    let t = Instant::now();
    let mut w = TableWriter::new(Vec::new(), gix_hash::Kind::Sha1).unwrap();
    for (i, name) in names.iter().enumerate() {
        w.add(name.as_bytes(), RefValue::Oid(oid(i as u64)))
            .unwrap();
    }
    let (bytes, summary) = w.finish().unwrap();
    let write = t.elapsed();
    println!(
        "refs {}  table {} bytes ({:.1} a ref)  written in {:.0} ms",
        summary.records,
        summary.bytes,
        summary.bytes as f64 / summary.records as f64,
        write.as_secs_f64() * 1e3
    );
    let len = bytes.len() as u64;
    let source = Arc::new(Counting(bytes, AtomicU64::new(0), AtomicU64::new(0)));
    let table = Table::open(source.clone(), len).unwrap();
    println!("index levels {}", table.levels());

    let t = Instant::now();
    let mut c = table.scan();
    c.seek(b"").unwrap();
    let mut count = 0u64;
    let mut name_bytes = 0usize;
    while let Some((name, _)) = c.current() {
        count += 1;
        name_bytes += name.len();
        c.advance().unwrap();
    }
    println!(
        "full scan: {count} refs ({name_bytes} name bytes) in {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );

    let probes = 10_000usize;
    let (r0, b0) = (
        source.1.load(Ordering::Relaxed),
        source.2.load(Ordering::Relaxed),
    );
    let t = Instant::now();
    for i in 0..probes {
        let name = &names[(i * 7919) % names.len()];
        assert!(table.get(name.as_bytes()).unwrap().is_some());
    }
    let el = t.elapsed();
    let (r1, b1) = (
        source.1.load(Ordering::Relaxed),
        source.2.load(Ordering::Relaxed),
    );
    println!(
        "lookup of one ref (uncached blocks): {:.1} µs, {:.1} reads, {:.0} bytes read",
        el.as_secs_f64() * 1e6 / probes as f64,
        (r1 - r0) as f64 / probes as f64,
        (b1 - b0) as f64 / probes as f64
    );

    let t = Instant::now();
    let mut c = table.cursor();
    c.seek(b"refs/heads/").unwrap();
    let mut heads = 0;
    while let Some((name, _)) = c.current() {
        if !name.starts_with(b"refs/heads/") {
            break;
        }
        heads += 1;
        c.advance().unwrap();
    }
    println!(
        "prefix walk refs/heads/: {heads} refs in {:.1} µs",
        t.elapsed().as_secs_f64() * 1e6
    );
}
