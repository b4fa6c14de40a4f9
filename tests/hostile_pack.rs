//! Hostile packs, made by hand and POSTed raw to receive-pack: each is
//! refused (with git's reason where git gives a user-facing one), the
//! repository is unchanged, nothing panics or hangs, and the server still
//! takes a good push afterwards.
//!
//! The canonical answers in the comments were recorded by running these same
//! tests against `git http-backend` (git 2.47.3): set
//! `HOSTILE_CANONICAL=PORT:ROOT` with
//! `python3 ../shared/tools/git-http-backend-server.py ROOT PORT` running, and
//! the tests print what canonical answers instead of asserting gitstow's.
//! Where canonical's `unpack` reason names a git internal
//! (`unpack-objects abnormal exit`, `index-pack abnormal exit`), gitstow keeps
//! its own precise reason and the test asserts only "not ok" plus
//! `ng <ref> unpacker error`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::raw_target::*;
use common::*;

impl Setup {
    /// Pushes `pack` as the new value of `refs/heads/<name>` (a create); prints
    /// and returns the report. Each push must answer within `limit`.
    fn push_pack_to(&self, name: &str, new: &str, pack: &[u8], limit: Duration) -> Report {
        let refname = format!("refs/heads/{name}");
        let body = receive_pack_request(
            &[(ZERO_OID, new, &refname)],
            "report-status side-band-64k",
            Some(pack),
        );
        let started = Instant::now();
        let resp = self.post(&body);
        let took = started.elapsed();
        assert_eq!(resp.status, 200, "{resp:?}");
        let r = report_status(&resp.body);
        eprintln!(
            "[{}] {} in {took:?}: unpack {:?} refs {:?} progress {:?}",
            if self.target.is_canonical() {
                "canonical"
            } else {
                "gitstow"
            },
            self.repo,
            r.unpack,
            r.refs,
            r.progress
                .lines()
                .filter(|l| !l.contains("%"))
                .collect::<Vec<_>>()
        );
        assert!(took < limit, "the push took {took:?}");
        r
    }

    fn push_pack(&self, new: &str, pack: &[u8]) -> Report {
        self.push_pack_to("hostile", new, pack, Duration::from_secs(20))
    }

    /// The pack stage failed: any reason but "ok", and `ng <ref> unpacker error`.
    fn assert_refused(&self, r: &Report) {
        if self.target.is_canonical() {
            return;
        }
        assert!(!r.unpack.is_empty() && r.unpack != "ok", "{r:?}");
        assert_eq!(r.refs, ["ng refs/heads/hostile unpacker error"], "{r:?}");
    }

    /// Like [`Setup::assert_refused`], and the reason says `what`.
    fn assert_refused_with(&self, r: &Report, what: &str) {
        self.assert_refused(r);
        if !self.target.is_canonical() {
            assert!(r.unpack.contains(what), "want {what:?} in {r:?}");
        }
    }

    /// Nothing changed, and the server still serves a clone and takes a good push.
    fn assert_unchanged_and_serving(&self) {
        assert_eq!(ls_remote(&self.url), self.before, "the repository changed");
        let dir = self.tmp.path().join("after");
        git(
            self.tmp.path(),
            &["clone", "--quiet", "--mirror", &self.url, "after"],
        );
        assert_eq!(git_out(&dir, &["rev-parse", "main"]), self.c2);
        fsck(Path::new(&dir));
        let (pack, c3) = self.good_pack();
        let body = receive_pack_request(
            &[(&self.c2, &c3, "refs/heads/main")],
            "report-status",
            Some(&pack),
        );
        let r = report_status(&self.post(&body).body);
        assert_eq!(r.unpack, "ok");
        assert_eq!(r.refs, vec!["ok refs/heads/main".to_owned()]);
    }

    /// A valid pack holding C3 on top of C2, and C3's id.
    fn good_pack(&self) -> (Vec<u8>, String) {
        let blob = b"after the storm\n".to_vec();
        let blob_id = object_id(Kind::Blob, &blob);
        let tree = tree_data(&[("100644", "calm.txt", &blob_id)]);
        let tree_id = object_id(Kind::Tree, &tree);
        let commit = commit_data(&tree_id, &[&self.c2], "C3\n");
        let c3 = object_id(Kind::Commit, &commit);
        let pack = PackBuilder::default()
            .add(Kind::Blob, &blob)
            .add(Kind::Tree, &tree)
            .add(Kind::Commit, &commit)
            .build();
        (pack, c3)
    }
}

// ---------------------------------------------------------------------------
// raw packs

/// A pack made of raw entries, with a header count that may lie.
#[derive(Default, Clone)]
struct RawPack {
    entries: Vec<Vec<u8>>,
    count: Option<u32>,
}

impl RawPack {
    fn entry(mut self, bytes: Vec<u8>) -> Self {
        self.entries.push(bytes);
        self
    }
    fn whole(self, kind: Kind, data: &[u8]) -> Self {
        self.entry(whole(kind as u8, data))
    }
    /// Offset of entry `i` in the pack.
    fn offset(&self, i: usize) -> usize {
        12 + self.entries[..i].iter().map(Vec::len).sum::<usize>()
    }
    fn next_offset(&self) -> usize {
        self.offset(self.entries.len())
    }
    fn build(&self) -> Vec<u8> {
        let mut out = b"PACK".to_vec();
        out.extend_from_slice(&2u32.to_be_bytes());
        let count = self.count.unwrap_or(self.entries.len() as u32);
        out.extend_from_slice(&count.to_be_bytes());
        for e in &self.entries {
            out.extend_from_slice(e);
        }
        let sum = sha1(&out);
        out.extend_from_slice(&sum);
        out
    }
}

/// A whole-object entry of type `kind` (any number, for types 0 and 5).
fn whole(kind: u8, data: &[u8]) -> Vec<u8> {
    let mut e = entry_header(kind, data.len());
    e.extend(zlib(data));
    e
}

/// An OFS_DELTA entry whose base is `distance` bytes before it.
fn ofs_delta(distance: u64, delta: &[u8]) -> Vec<u8> {
    let mut e = entry_header(6, delta.len());
    let mut n = distance;
    let mut enc = vec![(n & 0x7f) as u8];
    n >>= 7;
    while n != 0 {
        n -= 1;
        enc.push(0x80 | (n & 0x7f) as u8);
        n >>= 7;
    }
    enc.reverse();
    e.extend(enc);
    e.extend(zlib(delta));
    e
}

/// A REF_DELTA entry against `base` (hex).
fn ref_delta(base: &str, delta: &[u8]) -> Vec<u8> {
    let mut e = entry_header(7, delta.len());
    e.extend(
        (0..40)
            .step_by(2)
            .map(|i| u8::from_str_radix(&base[i..i + 2], 16).unwrap()),
    );
    e.extend(zlib(delta));
    e
}

fn varint(mut n: usize, out: &mut Vec<u8>) {
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

/// One delta instruction.
enum Op<'a> {
    Copy(usize, usize),
    Insert(&'a [u8]),
}

/// A delta: header sizes as given, then the instructions.
fn delta(base_size: usize, result_size: usize, ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(base_size, &mut out);
    varint(result_size, &mut out);
    for op in ops {
        match op {
            Op::Copy(ofs, len) => {
                let mut cmd = 0x80u8;
                let mut args = Vec::new();
                for i in 0..4 {
                    let b = (ofs >> (8 * i)) as u8;
                    if b != 0 {
                        cmd |= 1 << i;
                        args.push(b);
                    }
                }
                for i in 0..3 {
                    let b = (len >> (8 * i)) as u8;
                    if b != 0 {
                        cmd |= 0x10 << i;
                        args.push(b);
                    }
                }
                out.push(cmd);
                out.extend(args);
            }
            Op::Insert(data) => {
                for chunk in data.chunks(127) {
                    out.push(chunk.len() as u8);
                    out.extend_from_slice(chunk);
                }
            }
        }
    }
    out
}

/// A blob of `n` distinct-ish lines.
fn text(n: usize, tag: &str) -> Vec<u8> {
    (0..n)
        .map(|i| format!("{tag} line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

/// A pack of one blob, with a tree and a commit naming it; returns the pack and the commit id.
fn blob_commit_pack(blob: &[u8]) -> (RawPack, String) {
    let blob_id = object_id(Kind::Blob, blob);
    let tree = tree_data(&[("100644", "f", &blob_id)]);
    let commit = commit_data(&object_id(Kind::Tree, &tree), &[], "c\n");
    let id = object_id(Kind::Commit, &commit);
    let pack = RawPack::default()
        .whole(Kind::Blob, blob)
        .whole(Kind::Tree, &tree)
        .whole(Kind::Commit, &commit);
    (pack, id)
}

// ---------------------------------------------------------------------------
// damaged framing

// canonical, every framing case below (fewer than 100 objects, so
// unpack-objects; "index-pack" for the larger ones):
//   unpack unpack-objects abnormal exit
//   ng refs/heads/hostile unpacker error
// with the precise reason only on side-band 2 ("fatal: ...").

/// canonical band 2: "fatal: final sha1 did not match". gitstow: "pack is
/// corrupted (SHA1 mismatch)" (index-pack's words).
#[test]
fn wrong_trailer() {
    let s = setup("wrong-trailer");
    let (pack, id) = blob_commit_pack(&text(50, "t"));
    let mut bytes = pack.build();
    *bytes.last_mut().unwrap() ^= 0x40;
    let r = s.push_pack(&id, &bytes);
    s.assert_refused_with(&r, "SHA1 mismatch");
    s.assert_unchanged_and_serving();
}

/// canonical: cut inside the 12-byte pack header: "unpack eof before pack
/// header was fully read" (a reason of receive-pack's own, so gitstow gives
/// the same); every other cut: band 2 "fatal: early EOF". gitstow: "pack is
/// truncated (early EOF)", or "pack claims N objects but has only M bytes"
/// when the cut leaves too few bytes for the count.
#[test]
fn truncated_at_several_points() {
    let s = setup("truncated");
    let (pack, id) = blob_commit_pack(&text(50, "t"));
    let bytes = pack.build();
    let second = pack.offset(1);
    let cuts = [
        ("inside the pack header", 7),
        ("inside an entry header", pack.offset(0) + 1),
        ("inside the second entry header", second + 1),
        ("inside zlib data", second + 6),
        ("inside the trailer", bytes.len() - 7),
        ("before the trailer", bytes.len() - 20),
    ];
    // entry headers here are multi-byte only for the first blob (size > 15)
    for (what, at) in cuts {
        eprintln!("cut {what} at {at}");
        let r = s.push_pack(&id, &bytes[..at]);
        s.assert_refused(&r);
        if at < 12 && !s.target.is_canonical() {
            assert_eq!(r.unpack, "eof before pack header was fully read");
        }
    }
    s.assert_unchanged_and_serving();
}

/// canonical ignores bytes after the trailer, with unpack-objects (under 100
/// objects) and with `index-pack --stdin` (120 objects) alike: "unpack ok",
/// "ok refs/heads/hostile" / "ok refs/heads/junk120". gitstow refuses both
/// with "pack has junk at the end" (index-pack's words for a pack file):
/// a deliberate, stricter answer — no git client sends bytes after the pack.
#[test]
fn trailing_garbage() {
    let s = setup("junk");
    let (pack, id) = blob_commit_pack(&text(50, "t"));
    let mut bytes = pack.build();
    bytes.extend_from_slice(b"garbage after the trailer");
    let r = s.push_pack(&id, &bytes);
    s.assert_refused_with(&r, "junk at the end");
    // 120 objects: index-pack
    let (mut pack, id) = blob_commit_pack(&text(50, "t"));
    for i in 0..117 {
        pack = pack.whole(Kind::Blob, format!("filler {i}\n").as_bytes());
    }
    let mut bytes = pack.build();
    bytes.extend_from_slice(b"garbage after the trailer");
    let r = s.push_pack_to("junk120", &id, &bytes, Duration::from_secs(20));
    if !s.target.is_canonical() {
        assert_eq!(r.unpack, "pack has junk at the end");
        assert_eq!(r.refs, ["ng refs/heads/junk120 unpacker error"]);
        s.assert_unchanged_and_serving();
    }
}

/// canonical (band 2; "unpack unpack-objects abnormal exit", or
/// "index-pack abnormal exit" from 100 objects up):
///   4 (one more):  "fatal: Out of memory, malloc failed (tried to allocate 94249213861 bytes)"
///                  (the trailer read as an entry header)
///   2, 1 (fewer):  "fatal: final sha1 did not match"
///   1000:          "fatal: pack has bad object at offset 296: inflate returned -3"
///   4294967295:    "fatal: size_t overflow: 18446744073709551615 + 1"
/// gitstow: "pack is truncated (early EOF)", "pack is corrupted (SHA1
/// mismatch)", "pack claims N objects but has only M bytes" (no allocation
/// from the count).
#[test]
fn wrong_object_count() {
    let s = setup("count");
    let (mut pack, id) = blob_commit_pack(&text(50, "t"));
    for count in [4, 2, 1, 1000, u32::MAX] {
        pack.count = Some(count);
        let r = s.push_pack(&id, &pack.build());
        s.assert_refused(&r);
    }
    s.assert_unchanged_and_serving();
}

/// An entry whose stream inflates to more or fewer bytes than its header says.
/// canonical band 2: "error: inflate returned -5" (header larger) / "error:
/// inflate returned 1" (header smaller), "unpack unpack-objects abnormal
/// exit". gitstow: "pack has bad object at offset 12: inflates to 490 bytes,
/// its header declares 491" / "...: inflates to more than the 489 bytes its
/// header declares" (inflating stops there).
#[test]
fn inflated_size_differs_from_header() {
    let s = setup("size-lies");
    let blob = text(50, "s");
    let id = blob_commit_pack(&blob).1;
    for declared in [blob.len() - 1, blob.len() + 1, 1, blob.len() * 100] {
        let mut e = entry_header(3, declared);
        e.extend(zlib(&blob));
        let (mut pack, _) = blob_commit_pack(&blob);
        pack.entries[0] = e;
        let r = s.push_pack(&id, &pack.build());
        s.assert_refused(&r);
    }
    s.assert_unchanged_and_serving();
}

/// canonical: "unpack unpack-objects abnormal exit", band 2 "error: bad
/// object type 0" / "... 5". gitstow: "pack has bad object at offset 12:
/// unknown object type 0" (index-pack's words).
#[test]
fn object_types_0_and_5() {
    let s = setup("types");
    let (_, id) = blob_commit_pack(b"x\n");
    for kind in [0u8, 5] {
        let pack = RawPack::default().entry(whole(kind, b"hello\n")).build();
        let r = s.push_pack(&id, &pack);
        s.assert_refused_with(&r, &format!("object type {kind}"));
    }
    s.assert_unchanged_and_serving();
}

/// canonical: band 2 "fatal: write stream object 21 != 68719476753",
/// "unpack unpack-objects abnormal exit". gitstow refuses on the header,
/// before inflating or allocating anything: "object of 68719476736 bytes at
/// offset 12 exceeds the limit of 2147483648 bytes".
#[test]
fn header_declares_64_gib() {
    let s = setup("huge-header");
    let (_, id) = blob_commit_pack(b"x\n");
    let mut e = entry_header(3, 64 << 30);
    e.extend(zlib(b"tiny"));
    let pack = RawPack::default().entry(e).build();
    let r = s.push_pack_to("hostile", &id, &pack, Duration::from_secs(5));
    s.assert_refused(&r);
    s.assert_unchanged_and_serving();
}

/// `--max-object-size 1000` and a 2,000-byte blob (gitstow only).
#[test]
fn object_above_max_object_size() {
    if canonical().is_some() {
        return;
    }
    let s = setup_with("max-object", &["--max-object-size", "1000"]);
    let (pack, id) = blob_commit_pack(&vec![b'a'; 2000]);
    let r = s.push_pack(&id, &pack.build());
    s.assert_refused_with(&r, "exceeds the limit of 1000 bytes");
    s.assert_unchanged_and_serving();
}

/// A zlib bomb: 50 MB of zeros in ~50 KB, with `--max-object-size 1000000`
/// (gitstow only), once declaring its true size and once declaring 10 bytes.
#[test]
fn zlib_bomb() {
    if canonical().is_some() {
        return;
    }
    let s = setup_with("bomb", &["--max-object-size", "1000000"]);
    let zeros = vec![0u8; 50 << 20];
    let z = zlib(&zeros);
    drop(zeros);
    assert!(z.len() < 200_000, "{}", z.len());
    let (_, id) = blob_commit_pack(b"x\n");
    for declared in [50usize << 20, 10] {
        let mut e = entry_header(3, declared);
        e.extend_from_slice(&z);
        let pack = RawPack::default().entry(e).build();
        let r = s.push_pack_to("hostile", &id, &pack, Duration::from_secs(5));
        s.assert_refused(&r);
    }
    s.assert_unchanged_and_serving();
}

/// A zlib stream made of stored (uncompressed) blocks with no final block:
/// it never ends; the pack trailer is correct. canonical: band 2 "error:
/// inflate returned -5" when the header declares the stored bytes exactly,
/// "inflate returned -3" (data stream error) otherwise; "unpack
/// unpack-objects abnormal exit". gitstow: entries never read into the
/// trailer: "pack is truncated (early EOF)", or "inflates to more than the
/// 10 bytes its header declares".
#[test]
fn zlib_stream_that_never_ends() {
    let s = setup("endless");
    let (_, id) = blob_commit_pack(b"x\n");
    let block = vec![b'z'; 1000];
    let mut stream = vec![0x78, 0x01];
    for _ in 0..100 {
        // BFINAL=0, BTYPE=00 (stored), LEN, NLEN, data
        stream.push(0x00);
        stream.extend_from_slice(&(block.len() as u16).to_le_bytes());
        stream.extend_from_slice(&(!(block.len() as u16)).to_le_bytes());
        stream.extend_from_slice(&block);
    }
    for declared in [100 * block.len(), 1_000_000, 10] {
        let mut e = entry_header(3, declared);
        e.extend_from_slice(&stream);
        let pack = RawPack::default().entry(e).build();
        let r = s.push_pack(&id, &pack);
        s.assert_refused(&r);
    }
    s.assert_unchanged_and_serving();
}

// ---------------------------------------------------------------------------
// deltas

/// Distances 0, one byte before the pack start, and 2^40. canonical, all
/// three: band 2 "fatal: offset value out of bound for delta base object".
/// gitstow: "pack has bad object at offset 57: delta base offset is out of
/// bound" (index-pack's words).
#[test]
fn ofs_delta_bad_distance() {
    let s = setup("ofs-distance");
    let base = text(10, "b");
    let d = delta(base.len(), 3, &[Op::Insert(b"new")]);
    let id = blob_commit_pack(b"new").1;
    for distance in [0u64, 13, 1 << 40] {
        let pack = RawPack::default().whole(Kind::Blob, &base);
        let distance = if distance == 13 {
            pack.next_offset() as u64 + 1 // before the pack start
        } else {
            distance
        };
        let pack = pack.entry(ofs_delta(distance, &d)).build();
        let r = s.push_pack(&id, &pack);
        s.assert_refused(&r);
    }
    s.assert_unchanged_and_serving();
}

/// canonical: band 2 "fatal: unresolved deltas left after unpacking"
/// ("unpack unpack-objects abnormal exit"). gitstow: "pack has 1 unresolved deltas".
#[test]
fn ref_delta_to_an_absent_base() {
    let s = setup("absent-base");
    let ghost = object_id(Kind::Blob, b"never pushed\n");
    let d = delta(13, 3, &[Op::Insert(b"new")]);
    let id = blob_commit_pack(b"new").1;
    let pack = RawPack::default()
        .whole(Kind::Blob, b"other\n")
        .entry(ref_delta(&ghost, &d))
        .build();
    let r = s.push_pack(&id, &pack);
    s.assert_refused_with(&r, "unresolved");
    s.assert_unchanged_and_serving();
}

/// Deltas whose instructions are wrong. canonical band 2: "error: delta
/// replay has gone wild" + "fatal: failed to apply delta" (copies outside,
/// wrong sizes, reserved 0, truncated), and for 64 GiB "fatal: Out of
/// memory, malloc failed (tried to allocate 68719476737 bytes)"; all "unpack
/// unpack-objects abnormal exit". gitstow: "entry at spool offset N: delta
/// copies 80+20 outside a base of 90 bytes" etc.; the 64 GiB result is
/// refused before allocating.
#[test]
fn bad_delta_instructions() {
    let s = setup("bad-delta");
    let base = text(10, "b");
    let id = blob_commit_pack(b"x").1;
    let n = base.len();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("copy past the end", delta(n, 20, &[Op::Copy(n - 10, 20)])),
        ("copy far outside", delta(n, 16, &[Op::Copy(1 << 30, 16)])),
        (
            "result shorter than declared",
            delta(n, 50, &[Op::Copy(0, 10)]),
        ),
        (
            "result longer than declared",
            delta(n, 5, &[Op::Copy(0, 10)]),
        ),
        ("wrong base size", delta(n + 1, 3, &[Op::Insert(b"abc")])),
        ("reserved instruction 0", {
            let mut d = delta(n, 1, &[]);
            d.push(0);
            d
        }),
        ("truncated copy", {
            let mut d = delta(n, 4, &[]);
            d.push(0x91); // offset byte 0 and size byte 0 announced, none follow
            d
        }),
        ("declares 64 GiB", delta(n, 64 << 30, &[Op::Copy(0, 10)])),
    ];
    for (what, d) in cases {
        eprintln!("{what}");
        let mut pack = RawPack::default().whole(Kind::Blob, &base);
        let dist = pack.next_offset() - pack.offset(0);
        pack = pack.entry(ofs_delta(dist as u64, &d));
        let r = s.push_pack(&id, &pack.build());
        s.assert_refused(&r);
        // and the same as a REF_DELTA
        let pack = RawPack::default()
            .whole(Kind::Blob, &base)
            .entry(ref_delta(&object_id(Kind::Blob, &base), &d));
        let r = s.push_pack(&id, &pack.build());
        s.assert_refused(&r);
    }
    s.assert_unchanged_and_serving();
}

/// Two REF_DELTAs naming each other, and one naming itself. canonical: band
/// 2 "fatal: unresolved deltas left after unpacking" ("unpack unpack-objects
/// abnormal exit"). gitstow: "pack has 2 unresolved deltas".
#[test]
fn delta_cycle() {
    let s = setup("cycle");
    let a = b"cycle a\n".to_vec();
    let b = b"cycle b\n".to_vec();
    let a_id = object_id(Kind::Blob, &a);
    let b_id = object_id(Kind::Blob, &b);
    // a = delta(b), b = delta(a)
    let da = delta(b.len(), a.len(), &[Op::Insert(&a)]);
    let db = delta(a.len(), b.len(), &[Op::Insert(&b)]);
    let tree = tree_data(&[("100644", "a", &a_id), ("100644", "b", &b_id)]);
    let commit = commit_data(&object_id(Kind::Tree, &tree), &[], "cycle\n");
    let id = object_id(Kind::Commit, &commit);
    let pack = RawPack::default()
        .entry(ref_delta(&b_id, &da))
        .entry(ref_delta(&a_id, &db))
        .whole(Kind::Tree, &tree)
        .whole(Kind::Commit, &commit)
        .build();
    let r = s.push_pack(&id, &pack);
    s.assert_refused_with(&r, "unresolved");
    // a REF_DELTA naming itself
    let self_id = object_id(Kind::Blob, b"me\n");
    let d = delta(3, 3, &[Op::Insert(b"me\n")]);
    let pack = RawPack::default().entry(ref_delta(&self_id, &d)).build();
    let r = s.push_pack(&id, &pack);
    s.assert_refused_with(&r, "unresolved");
    s.assert_unchanged_and_serving();
}

/// A chain of `depth` OFS deltas over a 1-byte blob, each adding one byte;
/// the last blob is in a tree and a commit. Returns the pack, the commit and
/// the last blob.
fn chain_pack(depth: usize) -> (Vec<u8>, String, Vec<u8>) {
    let mut pack = RawPack::default();
    let mut data = b"0".to_vec();
    pack = pack.whole(Kind::Blob, &data);
    for i in 0..depth {
        let b = [b'a' + (i % 26) as u8];
        let d = delta(
            data.len(),
            data.len() + 1,
            &[Op::Copy(0, data.len()), Op::Insert(&b)],
        );
        let dist = pack.next_offset() - pack.offset(pack.entries.len() - 1);
        pack = pack.entry(ofs_delta(dist as u64, &d));
        data.push(b[0]);
    }
    let blob_id = object_id(Kind::Blob, &data);
    let tree = tree_data(&[("100644", "deep.txt", &blob_id)]);
    let commit = commit_data(&object_id(Kind::Tree, &tree), &[], "deep\n");
    let id = object_id(Kind::Commit, &commit);
    pack = pack.whole(Kind::Tree, &tree).whole(Kind::Commit, &commit);
    (pack.build(), id, data)
}

/// 3,000 chained OFS deltas: git accepts any depth. canonical: "unpack ok",
/// "ok refs/heads/deep"; gitstow the same (stored chains are cut at 50), and
/// the clone has the last blob.
#[test]
fn deep_delta_chain_is_accepted() {
    let s = setup("deep");
    let (pack, id, data) = chain_pack(3000);
    let r = s.push_pack_to("deep", &id, &pack, Duration::from_secs(60));
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(r.refs, ["ok refs/heads/deep"], "{r:?}");
    let dir = s.tmp.path().join("deep");
    git(
        s.tmp.path(),
        &["clone", "--quiet", "--branch", "deep", &s.url, "deep"],
    );
    assert_eq!(git_out(&dir, &["rev-parse", "HEAD"]), id);
    assert_eq!(std::fs::read(dir.join("deep.txt")).unwrap(), data);
    fsck(&dir);
}

/// 20,000 chained deltas (each a copy of the same 64 bytes plus nothing
/// new, so memory stays small). canonical: "unpack ok". gitstow: refused
/// past `max_chain_depth` (10,000): "delta chain deeper than 10000 objects";
/// never a stack overflow.
#[test]
fn very_deep_delta_chain_does_not_overflow() {
    let s = setup("deeper");
    let base = vec![b'q'; 64];
    let mut pack = RawPack::default().whole(Kind::Blob, &base);
    let mut last = base.clone();
    for i in 0..20_000usize {
        let mut next = last.clone();
        next[i % 64] = b'a' + (i % 26) as u8;
        let d = delta(
            64,
            64,
            &[Op::Copy(0, i % 64), Op::Insert(&next[i % 64..=i % 64]), {
                let from = i % 64 + 1;
                Op::Copy(from, 64 - from)
            }],
        );
        // Copy(_, 0) would mean 0x10000 in git: drop empty copies
        let d = if i % 64 == 0 {
            delta(64, 64, &[Op::Insert(&next[..1]), Op::Copy(1, 63)])
        } else if i % 64 == 63 {
            delta(64, 64, &[Op::Copy(0, 63), Op::Insert(&next[63..])])
        } else {
            d
        };
        let dist = pack.next_offset() - pack.offset(pack.entries.len() - 1);
        pack = pack.entry(ofs_delta(dist as u64, &d));
        last = next;
    }
    let blob_id = object_id(Kind::Blob, &last);
    let tree = tree_data(&[("100644", "deeper.txt", &blob_id)]);
    let commit = commit_data(&object_id(Kind::Tree, &tree), &[], "deeper\n");
    let id = object_id(Kind::Commit, &commit);
    let pack = pack.whole(Kind::Tree, &tree).whole(Kind::Commit, &commit);
    let r = s.push_pack_to("hostile", &id, &pack.build(), Duration::from_secs(120));
    if r.unpack == "ok" {
        assert_eq!(r.refs, ["ok refs/heads/hostile"], "{r:?}");
    } else {
        s.assert_refused_with(&r, "delta chain deeper than");
        s.assert_unchanged_and_serving();
    }
    if let Target::Gitstow(server) = &s.target {
        assert!(!server.logs().contains("panicked"), "{}", server.logs());
    }
}

// ---------------------------------------------------------------------------
// objects that do not parse (canonical with receive.fsckObjects=true, which is
// what gitstow always checks; default canonical does not look at them)

fn push_tree(s: &Setup, entries: &[(&str, &str, &str)]) -> Report {
    let tree = tree_data(entries);
    let commit = commit_data(&object_id(Kind::Tree, &tree), &[], "t\n");
    let id = object_id(Kind::Commit, &commit);
    let mut pack = RawPack::default();
    let mut seen = Vec::new();
    for (_, _, oid) in entries {
        if !seen.contains(oid) {
            seen.push(*oid);
        }
    }
    let blob = b"blob\n";
    pack = pack.whole(Kind::Blob, blob);
    pack = pack.whole(Kind::Tree, &tree).whole(Kind::Commit, &commit);
    s.push_pack(&id, &pack.build())
}

/// canonical with receive.fsckObjects=true: "unpack unpack-objects abnormal
/// exit", "ng refs/heads/hostile unpacker error", band 2:
///   commit without tree: "error: bogus commit object <oid>", "fatal: invalid commit"
///   others: "error: object <oid>: treeNotSorted: not properly sorted" (resp.
///   duplicateEntries: contains duplicate file entries, hasDotgit: contains
///   '.git' for .git .GIT ".git " ".git." git~1 ".gi\u{200c}t"),
///   "fatal: fsck error in packed object"
/// except mode 100645, which git only warns about and ACCEPTS ("warning:
/// object <oid>: badFilemode: contains bad file modes", "unpack ok"):
/// gitstow refuses it (a server-side choice: it stores only modes git writes).
/// gitstow's reasons: "invalid tree object <oid>: <fsck id>: <git's text>",
/// "invalid commit object <oid>: object parsing failed".
#[test]
fn objects_that_do_not_parse() {
    let s = setup("unparseable");
    s.fsck_objects();
    let blob = object_id(Kind::Blob, b"blob\n");
    // commit without a tree
    let commit = b"author A U Thor <author@example.com> 1700000000 +0000\n\
committer C O Mitter <committer@example.com> 1700000000 +0000\n\nno tree\n";
    let id = object_id(Kind::Commit, commit);
    let r = s.push_pack(&id, &RawPack::default().whole(Kind::Commit, commit).build());
    s.assert_refused(&r);
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (
            "treeNotSorted",
            vec![("100644", "b", &blob), ("100644", "a", &blob)],
        ),
        (
            "duplicateEntries",
            vec![("100644", "a", &blob), ("100644", "a", &blob)],
        ),
        ("badFilemode", vec![("100645", "a", &blob)]),
        ("hasDotgit", vec![("100644", ".git", &blob)]),
        ("hasDotgit", vec![("100644", ".GIT", &blob)]),
        ("hasDotgit", vec![("100644", ".git ", &blob)]),
        ("hasDotgit", vec![("100644", ".git.", &blob)]),
        ("hasDotgit", vec![("100644", "git~1", &blob)]),
        ("hasDotgit", vec![("100644", ".gi\u{200c}t", &blob)]),
    ];
    for (what, entries) in &cases {
        eprintln!("{what} {entries:?}");
        let r = push_tree(&s, entries);
        s.assert_refused_with(&r, what);
    }
    s.assert_unchanged_and_serving();
}

/// A tag of an object that is nowhere. canonical (default config): "unpack
/// ok", "ng refs/tags/ghost missing necessary objects".
#[test]
fn tag_of_an_absent_object() {
    let s = setup("ghost-tag");
    let ghost = object_id(Kind::Commit, b"not here\n");
    let tag = format!(
        "object {ghost}\ntype commit\ntag ghost\ntagger T <t@example.com> 1700000000 +0000\n\nboo\n"
    );
    let tag_id = object_id(Kind::Tag, tag.as_bytes());
    let pack = RawPack::default().whole(Kind::Tag, tag.as_bytes()).build();
    let body = receive_pack_request(
        &[(ZERO_OID, &tag_id, "refs/tags/ghost")],
        "report-status",
        Some(&pack),
    );
    let r = report_status(&s.post(&body).body);
    eprintln!("ghost tag: {r:?}");
    if !s.target.is_canonical() {
        assert_eq!(r.unpack, "ok", "{r:?}");
        assert_eq!(r.refs, ["ng refs/tags/ghost missing necessary objects"]);
    }
    s.assert_unchanged_and_serving();
}

/// A delta tree made to defeat resolving the heaviest child last: every level
/// has two REF_DELTA children (their subtrees cannot be known ahead), the one
/// that continues the chain first. 9,000 levels recurse 9,000 deep: no stack
/// overflow, and the push is accepted (canonical: "unpack ok").
#[test]
fn deep_ref_delta_tree_does_not_overflow() {
    let s = setup("ref-tree");
    let levels = 9_000usize;
    let obj = |tag: char, i: usize| format!("{tag}{i:08}{}", "-".repeat(55)).into_bytes();
    let mut pack = RawPack::default().whole(Kind::Blob, &obj('x', 0));
    for i in 0..levels {
        let base = object_id(Kind::Blob, &obj('x', i));
        let next = delta(64, 64, &[Op::Insert(&obj('x', i + 1))]);
        let leaf = delta(64, 64, &[Op::Insert(&obj('l', i))]);
        pack = pack
            .entry(ref_delta(&base, &next))
            .entry(ref_delta(&base, &leaf));
    }
    let tip = object_id(Kind::Blob, &obj('x', levels));
    let tree = tree_data(&[("100644", "tip", &tip)]);
    let commit = commit_data(&object_id(Kind::Tree, &tree), &[], "tree\n");
    let id = object_id(Kind::Commit, &commit);
    let pack = pack.whole(Kind::Tree, &tree).whole(Kind::Commit, &commit);
    let r = s.push_pack_to("hostile", &id, &pack.build(), Duration::from_secs(120));
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(r.refs, ["ok refs/heads/hostile"], "{r:?}");
    let dir = s.tmp.path().join("tree");
    git(
        s.tmp.path(),
        &["clone", "--quiet", "--branch", "hostile", &s.url, "tree"],
    );
    assert_eq!(std::fs::read(dir.join("tip")).unwrap(), obj('x', levels));
}
