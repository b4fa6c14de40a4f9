//! Test harness: hand-made packs (any framing, any delta) and the checks the
//! hostile-input tests make of a refused push (`tests/hostile_pack.rs`,
//! `tests/hostile_deltas.rs`).

use std::path::Path;
use std::time::Instant;

use super::raw_target::*;
use super::*;

impl Setup {
    /// Pushes `pack` as the new value of `refs/heads/<name>` (a create); prints
    /// how long it took and returns the report. A server that stops
    /// answering fails the request at [`http`]'s 60 s read timeout; how long
    /// a hostile pack takes is printed, not asserted (a figure for `benches/`).
    pub fn push_pack_to(&self, name: &str, new: &str, pack: &[u8]) -> Report {
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
        r
    }

    pub fn push_pack(&self, new: &str, pack: &[u8]) -> Report {
        self.push_pack_to("hostile", new, pack)
    }

    /// The pack stage failed: any reason but "ok", and `ng <ref> unpacker error`.
    pub fn assert_refused(&self, r: &Report) {
        if self.target.is_canonical() {
            return;
        }
        assert!(!r.unpack.is_empty() && r.unpack != "ok", "{r:?}");
        assert_eq!(r.refs, ["ng refs/heads/hostile unpacker error"], "{r:?}");
    }

    /// Like [`Setup::assert_refused`], and the reason says `what`.
    pub fn assert_refused_with(&self, r: &Report, what: &str) {
        self.assert_refused(r);
        if !self.target.is_canonical() {
            assert!(r.unpack.contains(what), "want {what:?} in {r:?}");
        }
    }

    /// Nothing changed, and the server still serves a clone and takes a good push.
    pub fn assert_unchanged_and_serving(&self) {
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
    pub fn good_pack(&self) -> (Vec<u8>, String) {
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
pub struct RawPack {
    pub entries: Vec<Vec<u8>>,
    pub count: Option<u32>,
}

impl RawPack {
    pub fn entry(mut self, bytes: Vec<u8>) -> Self {
        self.entries.push(bytes);
        self
    }
    pub fn whole(self, kind: Kind, data: &[u8]) -> Self {
        self.entry(whole(kind as u8, data))
    }
    /// Offset of entry `i` in the pack.
    pub fn offset(&self, i: usize) -> usize {
        12 + self.entries[..i].iter().map(Vec::len).sum::<usize>()
    }
    pub fn next_offset(&self) -> usize {
        self.offset(self.entries.len())
    }
    pub fn build(&self) -> Vec<u8> {
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
pub fn whole(kind: u8, data: &[u8]) -> Vec<u8> {
    let mut e = entry_header(kind, data.len());
    e.extend(zlib(data));
    e
}

/// An OFS_DELTA entry whose base is `distance` bytes before it.
pub fn ofs_delta(distance: u64, delta: &[u8]) -> Vec<u8> {
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
pub fn ref_delta(base: &str, delta: &[u8]) -> Vec<u8> {
    let mut e = entry_header(7, delta.len());
    e.extend(
        (0..40)
            .step_by(2)
            .map(|i| u8::from_str_radix(&base[i..i + 2], 16).unwrap()),
    );
    e.extend(zlib(delta));
    e
}

pub fn varint(mut n: usize, out: &mut Vec<u8>) {
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
pub enum Op<'a> {
    Copy(usize, usize),
    Insert(&'a [u8]),
}

/// A delta: header sizes as given, then the instructions.
pub fn delta(base_size: usize, result_size: usize, ops: &[Op]) -> Vec<u8> {
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
pub fn text(n: usize, tag: &str) -> Vec<u8> {
    (0..n)
        .map(|i| format!("{tag} line {i}\n"))
        .collect::<String>()
        .into_bytes()
}

/// A pack of one blob, with a tree and a commit naming it; returns the pack and the commit id.
pub fn blob_commit_pack(blob: &[u8]) -> (RawPack, String) {
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
