//! Test harness: objects and packs made by hand.

use super::*;

/// Git object types as a pack encodes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 1
    Commit = 1,
    /// 2
    Tree = 2,
    /// 3
    Blob = 3,
    /// 4
    Tag = 4,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Commit => "commit",
            Kind::Tree => "tree",
            Kind::Blob => "blob",
            Kind::Tag => "tag",
        }
    }
}

/// The object id (hex) of an object of `kind` with content `data`.
pub fn object_id(kind: Kind, data: &[u8]) -> String {
    let mut full = format!("{} {}\0", kind.name(), data.len()).into_bytes();
    full.extend_from_slice(data);
    hex(&sha1(&full))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A tree object's content; entries are (mode, name, oid hex), given in
/// git's order.
pub fn tree_data(entries: &[(&str, &str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (mode, name, oid) in entries {
        out.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        out.extend_from_slice(&unhex(oid));
    }
    out
}

/// A commit object's content.
pub fn commit_data(tree: &str, parents: &[&str], message: &str) -> Vec<u8> {
    let mut s = format!("tree {tree}\n");
    for p in parents {
        s.push_str(&format!("parent {p}\n"));
    }
    s.push_str("author A U Thor <author@example.com> 1700000000 +0000\n");
    s.push_str("committer C O Mitter <committer@example.com> 1700000000 +0000\n\n");
    s.push_str(message);
    s.into_bytes()
}

/// `bytes` that do not compress: an xorshift64 stream from `state`
/// (non-zero), the same bytes for the same state.
pub fn noise(bytes: usize, mut state: u64) -> Vec<u8> {
    (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// zlib (deflate) of `data`, as packs store object bodies.
pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A pack entry's type-and-size header.
pub fn entry_header(kind: u8, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut byte = (kind << 4) | (size as u8 & 0x0f);
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
    out
}

/// A pack under construction; [`PackBuilder::offsets`] tells where each
/// entry's zlib stream starts, for tests that damage one.
#[derive(Default)]
pub struct PackBuilder {
    entries: Vec<Vec<u8>>,
    zlib_at: Vec<(usize, usize)>,
}

impl PackBuilder {
    /// Adds a whole object.
    pub fn add(mut self, kind: Kind, data: &[u8]) -> Self {
        let mut e = entry_header(kind as u8, data.len());
        let header_len = e.len();
        let z = zlib(data);
        let z_len = z.len();
        e.extend(z);
        let at = 12 + self.entries.iter().map(Vec::len).sum::<usize>();
        self.zlib_at.push((at + header_len, z_len));
        self.entries.push(e);
        self
    }

    /// (offset in the pack, length) of each entry's zlib stream.
    pub fn offsets(&self) -> &[(usize, usize)] {
        &self.zlib_at
    }

    /// Header, entries, SHA-1 trailer.
    pub fn build(&self) -> Vec<u8> {
        let mut out = b"PACK".to_vec();
        out.extend_from_slice(&2u32.to_be_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for e in &self.entries {
            out.extend_from_slice(e);
        }
        let sum = sha1(&out);
        out.extend_from_slice(&sum);
        out
    }
}

/// Replaces the last 20 bytes of `pack` with the SHA-1 of the rest (after a
/// test changed the body and wants only that change to be wrong).
pub fn fix_trailer(pack: &mut [u8]) {
    let n = pack.len() - 20;
    let sum = sha1(&pack[..n]);
    pack[n..].copy_from_slice(&sum);
}

/// One entry of a parsed pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackEntry {
    /// 1..=4 whole objects, 6 OFS_DELTA, 7 REF_DELTA.
    pub kind: u8,
    /// Inflated size from the entry header.
    pub size: usize,
    /// For REF_DELTA, the base object id.
    pub base: Option<String>,
}

/// Walks a pack's entries (inflating each to find the next).
pub fn parse_pack(pack: &[u8]) -> Vec<PackEntry> {
    assert_eq!(&pack[..4], b"PACK", "not a pack");
    let count = u32::from_be_bytes(pack[8..12].try_into().unwrap()) as usize;
    let mut pos = 12;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let mut c = pack[pos];
        pos += 1;
        let kind = (c >> 4) & 7;
        let mut size = (c & 0x0f) as usize;
        let mut shift = 4;
        while c & 0x80 != 0 {
            c = pack[pos];
            pos += 1;
            size |= ((c & 0x7f) as usize) << shift;
            shift += 7;
        }
        let mut base = None;
        if kind == 6 {
            loop {
                let b = pack[pos];
                pos += 1;
                if b & 0x80 == 0 {
                    break;
                }
            }
        } else if kind == 7 {
            base = Some(hex(&pack[pos..pos + 20]));
            pos += 20;
        }
        let mut d = flate2::Decompress::new(true);
        let mut sink = vec![0u8; size.max(1)];
        loop {
            let before = d.total_in();
            let status = d
                .decompress(&pack[pos..], &mut sink, flate2::FlushDecompress::Finish)
                .expect("inflate pack entry");
            if status == flate2::Status::StreamEnd {
                break;
            }
            if d.total_in() == before {
                sink = vec![0u8; sink.len() * 2];
            }
        }
        pos += d.total_in() as usize;
        out.push(PackEntry { kind, size, base });
    }
    out
}

/// SHA-1 (FIPS 180-4), for object ids and pack trailers.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xefcd_ab89,
        0x98ba_dcfe,
        0x1032_5476,
        0xc3d2_e1f0,
    ];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes(word.try_into().unwrap());
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5a82_7999),
                20..=39 => (b ^ c ^ d, 0x6ed9_eba1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc),
                _ => (b ^ c ^ d, 0xca62_c1d6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}
