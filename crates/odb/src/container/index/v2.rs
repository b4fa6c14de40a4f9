//! Format v2 of the container index: the encoder and the decoder (the
//! layout is in the parent module's docs).

use super::*;

/// Whether `record_type << 4 | kind` is a valid type byte (section 6).
fn valid_types(record_type: u8, kind: u8) -> bool {
    match record_type {
        1..=4 => kind == record_type,
        OFS_DELTA | REF_DELTA => (1..=4).contains(&kind),
        _ => false,
    }
}

/// Bytes of a row number when there are `n` rows (section 4).
fn row_width(n: usize) -> usize {
    match n {
        0..=0x100 => 1,
        0x101..=0x1_0000 => 2,
        0x1_0001..=0x100_0000 => 3,
        _ => 4,
    }
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes a version-2 index (SHA-1 oids) or a version-3 one (SHA-256):
/// [`IndexEncoder::new`] with the oids of a container's records in `.bin`
/// order, [`IndexEncoder::push`] with each record in that order, then
/// [`IndexEncoder::finish`]. Holds the oids, two row numbers a record and
/// the small columns (about 35 bytes a record for SHA-1), never the entries.
pub struct IndexEncoder {
    /// Oids' bytes in `.bin` order, `width` bytes each.
    oids: Vec<u8>,
    width: usize,
    /// Record numbers in oid order (row → record).
    by_oid: Vec<u32>,
    /// The next record expected by `push`.
    next: usize,
    /// Offset of the next record.
    offset: u64,
    lengths: Vec<u8>,
    types: Vec<u8>,
    sizes: Vec<u8>,
    depths: Vec<u8>,
    ofs_bases: Vec<u8>,
    ref_bases: Vec<u8>,
}

impl IndexEncoder {
    /// Starts the index of the records whose oids are `oids` (`width`
    /// bytes each, 20 or 32), in `.bin` order.
    pub fn new(oids: Vec<u8>, width: usize) -> Result<Self, IndexError> {
        if width != SHA1_BYTES && width != 32 {
            return Err(IndexError::Invalid("oids neither SHA-1 nor SHA-256"));
        }
        if !oids.len().is_multiple_of(width) {
            return Err(IndexError::Invalid("oids of two widths"));
        }
        let n = oids.len() / width;
        if u32::try_from(n).is_err() {
            return Err(IndexError::Invalid("too many records"));
        }
        let at = |i: u32| &oids[i as usize * width..(i as usize + 1) * width];
        let mut by_oid: Vec<u32> = (0..n as u32).collect();
        by_oid.sort_unstable_by(|&a, &b| at(a).cmp(at(b)));
        if by_oid.windows(2).any(|w| at(w[0]) == at(w[1])) {
            return Err(IndexError::Invalid("duplicate oid"));
        }
        Ok(IndexEncoder {
            oids,
            width,
            by_oid,
            next: 0,
            offset: 0,
            lengths: Vec::with_capacity(n * 2),
            types: Vec::with_capacity(n),
            sizes: Vec::with_capacity(n * 2),
            depths: Vec::with_capacity(n),
            ofs_bases: Vec::new(),
            ref_bases: Vec::new(),
        })
    }

    /// Adds the next record in `.bin` order; its oid and offset must be the
    /// ones expected (records back to back from offset 0).
    pub fn push(&mut self, e: &IndexEntry) -> Result<(), IndexError> {
        let p = self.next;
        if self.oid(p) != Some(e.oid.as_slice()) {
            return Err(IndexError::Invalid("records not in the order of the oids"));
        }
        if e.offset != self.offset {
            return Err(IndexError::Invalid("records are not back to back"));
        }
        if e.length == 0 {
            return Err(IndexError::Invalid("empty record"));
        }
        let end = self
            .offset
            .checked_add(e.length)
            .ok_or(IndexError::Invalid("records end past 2^64"))?;
        if !valid_types(e.record_type, e.kind) {
            return Err(IndexError::Invalid("bad record type or kind"));
        }
        match (e.record_type, e.base) {
            (OFS_DELTA, Some(base)) => {
                let row = self
                    .by_oid
                    .binary_search_by(|&i| self.oid_at(i as usize).cmp(base.as_slice()))
                    .map_err(|_| IndexError::Invalid("OFS_DELTA base not in the container"))?;
                let at = self.by_oid[row] as usize;
                if at >= p {
                    return Err(IndexError::Invalid("OFS_DELTA base not before its delta"));
                }
                put_varint(&mut self.ofs_bases, (p - at) as u64);
            }
            (REF_DELTA, Some(base)) => {
                if base.as_slice().len() != self.width {
                    return Err(IndexError::Invalid("oids of two widths"));
                }
                if base == e.oid || base.is_null() {
                    return Err(IndexError::Invalid(
                        "REF_DELTA base is the null oid or itself",
                    ));
                }
                self.ref_bases.extend_from_slice(base.as_slice());
            }
            (1..=4, None) => {}
            _ => return Err(IndexError::Invalid("base does not match the record type")),
        }
        put_varint(&mut self.lengths, e.length);
        self.types.push((e.record_type << 4) | e.kind);
        put_varint(&mut self.sizes, e.size);
        put_varint(&mut self.depths, e.depth.into());
        self.offset = end;
        self.next += 1;
        Ok(())
    }

    /// The oid of record `p`, if there is one.
    fn oid(&self, p: usize) -> Option<&[u8]> {
        self.oids.get(p * self.width..(p + 1) * self.width)
    }

    /// The oid of record `p` (below the record count).
    fn oid_at(&self, p: usize) -> &[u8] {
        &self.oids[p * self.width..(p + 1) * self.width]
    }

    /// Writes the index after the last record; `bin_len` is the length of the
    /// `.bin`, where the last record must end.
    pub fn finish(self, bin_len: u64) -> Result<Vec<u8>, IndexError> {
        let width = self.width;
        let n = self.oids.len() / width;
        if self.next != n {
            return Err(IndexError::Invalid("fewer records than oids"));
        }
        if self.offset != bin_len {
            return Err(IndexError::Invalid(
                "records do not end at the end of the .bin",
            ));
        }
        let mut counts = vec![0u64; PREFIXES];
        for s in self.oids.chunks_exact(width) {
            counts[u16::from_be_bytes([s[0], s[1]]) as usize] += 1;
        }
        let mut column = Vec::with_capacity(PREFIXES);
        for c in counts {
            put_varint(&mut column, c);
        }
        let w = row_width(n);
        let columns = [
            &self.lengths,
            &self.types,
            &self.sizes,
            &self.depths,
            &self.ofs_bases,
            &self.ref_bases,
        ];
        // What the frame will declare, so that a reader sizes its buffer once.
        let sha1 = width == SHA1_BYTES;
        let size = HEADER
            + usize::from(!sha1)
            + column.len()
            + n * (width - 2 + w)
            + columns.iter().map(|c| c.len()).sum::<usize>()
            + 32;
        let mut out = Body::new(size as u64);
        out.put(MAGIC);
        if sha1 {
            out.put(&VERSION.to_be_bytes());
        } else {
            out.put(&VERSION_3.to_be_bytes());
            out.put(&[crate::SHA256_HASH_ID]);
        }
        out.put(&(n as u32).to_be_bytes());
        out.put(&bin_len.to_be_bytes());
        out.put(&column);
        drop(column);
        let mut row_of = vec![0u32; n];
        for (row, &p) in self.by_oid.iter().enumerate() {
            out.put(&self.oid_at(p as usize)[2..]);
            row_of[p as usize] = row as u32;
        }
        drop(self.by_oid);
        drop(self.oids);
        for row in row_of {
            out.put(&row.to_be_bytes()[4 - w..]);
        }
        for column in columns {
            out.put(column);
        }
        Ok(out.finish())
    }
}

/// The body going through SHA-256 and zstd, 64 KiB at a time.
struct Body {
    z: zstd::stream::write::Encoder<'static, Vec<u8>>,
    hasher: Sha256,
    buf: Vec<u8>,
}

impl Body {
    const CHUNK: usize = 64 * 1024;

    /// A body of `size` bytes (SHA-256 included), which the zstd frame
    /// declares (`ZSTD_c_contentSizeFlag`).
    fn new(size: u64) -> Self {
        // Indexes compress to 79-89 % of their size (their oids do not
        // compress): the output is allocated once, not grown by doubling.
        let out = Vec::with_capacity((size - size / 16) as usize);
        let mut z = zstd::stream::write::Encoder::new(out, 3).expect("zstd encoder over a Vec");
        z.include_contentsize(true).expect("a zstd parameter");
        z.set_pledged_src_size(Some(size))
            .expect("a zstd parameter");
        Body {
            z,
            hasher: Sha256::new(),
            buf: Vec::with_capacity(Self::CHUNK),
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        if self.buf.len() + bytes.len() > Self::CHUNK {
            self.flush();
        }
        if bytes.len() >= Self::CHUNK {
            self.hasher.update(bytes);
            self.write(bytes);
        } else {
            self.buf.extend_from_slice(bytes);
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.z
            .write_all(bytes)
            .expect("writing to a Vec cannot fail");
    }

    fn flush(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        self.hasher.update(&buf);
        self.write(&buf);
        self.buf = buf;
        self.buf.clear();
    }

    fn finish(mut self) -> Vec<u8> {
        use std::io::Write;
        self.flush();
        let Body { mut z, hasher, .. } = self;
        z.write_all(&hasher.finalize())
            .expect("writing to a Vec cannot fail");
        z.finish().expect("writing to a Vec cannot fail")
    }
}

/// Reads the body of a version-2 index front to back.
pub(super) struct Cursor<'a> {
    pub(super) rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], IndexError> {
        if self.rest.len() < n {
            return Err(IndexError::Corrupt(what));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// The next varint (most are one byte: sizes, depths and bases of a
    /// large index come in runs of small values).
    #[inline]
    pub(super) fn varint(&mut self, what: &'static str) -> Result<u64, IndexError> {
        match self.rest.split_first() {
            Some((&b, rest)) if b < 0x80 => {
                self.rest = rest;
                Ok(u64::from(b))
            }
            _ => self.long_varint(what),
        }
    }

    /// [`Cursor::varint`] of more than one byte, or none left.
    #[inline(never)]
    fn long_varint(&mut self, what: &'static str) -> Result<u64, IndexError> {
        let mut v = 0u64;
        for i in 0..10 {
            let &b = self.rest.get(i).ok_or(IndexError::Corrupt(what))?;
            let group = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(IndexError::Corrupt(what));
            }
            v |= group << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(IndexError::Corrupt(what));
                }
                self.rest = &self.rest[i + 1..];
                return Ok(v);
            }
        }
        Err(IndexError::Corrupt(what))
    }
}

/// Decodes a version-2 body (`width` 20, `hash_id_bytes` 0) or a version-3
/// one (`width` from the hash id, `hash_id_bytes` 1: the hash id, already
/// read by the caller, follows the version).
pub(super) fn decode(
    body: &[u8],
    width: usize,
    hash_id_bytes: usize,
) -> Result<ContainerIndex, IndexError> {
    let suffix = width - 2;
    let mut cur = Cursor { rest: &body[8..] };
    cur.take(hash_id_bytes, "too short")?;
    let head = cur.take(HEADER - 8, "too short")?;
    let n = u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    let bin_len = u64::from_be_bytes(head[4..].try_into().expect("8 bytes"));

    // Prefix counts, then the oids, rows in order (which also makes the fanout).
    let mut counts = Vec::with_capacity(PREFIXES);
    let mut total = 0usize;
    for _ in 0..PREFIXES {
        let c = cur.varint("bad prefix count")?;
        let c = usize::try_from(c)
            .ok()
            .filter(|&c| c <= n - total)
            .ok_or(IndexError::Corrupt("prefix counts exceed the record count"))?;
        total += c;
        counts.push(c);
    }
    if total != n {
        return Err(IndexError::Corrupt(
            "prefix counts do not add up to the record count",
        ));
    }
    let suffixes = cur.take(
        n.checked_mul(suffix)
            .ok_or(IndexError::Corrupt("too short"))?,
        "too short for the oids",
    )?;
    // The oids' bytes, rows in order.
    let mut oids = Vec::with_capacity(n * width);
    let mut suffixes = suffixes.chunks_exact(suffix);
    for (prefix, &c) in counts.iter().enumerate() {
        let mut prev: Option<&[u8]> = None;
        for _ in 0..c {
            let s = suffixes.next().expect("n suffixes");
            if prev.is_some_and(|p| p >= s) {
                return Err(IndexError::Corrupt("oids not sorted"));
            }
            prev = Some(s);
            oids.extend_from_slice(&(prefix as u16).to_be_bytes());
            oids.extend_from_slice(s);
        }
    }
    drop(counts);
    let fanout = fanout_of(&oids, width);

    // The row of each record: a permutation.
    let w = row_width(n);
    let rows = cur.take(n * w, "too short for the rows")?;
    let mut row_of = Vec::with_capacity(n);
    // One bit a row (52 KB for 419,403 rows: it stays in the cache).
    let mut seen = vec![0u64; n.div_ceil(64)];
    for r in rows.chunks_exact(w) {
        let row = r.iter().fold(0usize, |v, &b| v << 8 | usize::from(b));
        let (word, bit) = (row / 64, 1u64 << (row % 64));
        match seen.get_mut(word) {
            Some(s) if row < n && *s & bit == 0 => *s |= bit,
            _ => return Err(IndexError::Corrupt("rows are not a permutation")),
        }
        row_of.push(row as u32);
    }
    drop(seen);
    // Columns are set by record (slot `p` is record `p`), front to back.
    let mut b = RowsBuilder::in_order(oids, width, row_of);

    let mut offset = 0u64;
    for p in 0..n {
        let length = cur.varint("bad length")?;
        if length == 0 {
            return Err(IndexError::Corrupt("empty record"));
        }
        b.set_place(p, offset, length);
        offset = offset
            .checked_add(length)
            .filter(|&end| end <= bin_len)
            .ok_or(IndexError::Corrupt("records end past the .bin"))?;
    }
    if offset != bin_len {
        return Err(IndexError::Corrupt("records do not fill the .bin"));
    }
    let types = cur.take(n, "too short for the types")?;
    for (p, &t) in types.iter().enumerate() {
        let (record_type, kind) = (t >> 4, t & 0xf);
        if !valid_types(record_type, kind) {
            return Err(IndexError::Corrupt("bad record type or kind"));
        }
        b.set_types(p, record_type, kind);
    }
    for p in 0..n {
        b.set_size(p, cur.varint("bad size")?);
    }
    for p in 0..n {
        let depth = u32::try_from(cur.varint("bad depth")?)
            .map_err(|_| IndexError::Corrupt("bad depth"))?;
        b.set_depth(p, depth);
    }
    for p in 0..n {
        if b.record_type(p) == OFS_DELTA {
            let back = cur.varint("bad OFS_DELTA base")?;
            let base_row = usize::try_from(back)
                .ok()
                .filter(|&b| (1..=p).contains(&b))
                .map(|back| b.row_of(p - back))
                .ok_or(IndexError::Corrupt("OFS_DELTA base out of range"))?;
            b.set_base_row(p, base_row);
        }
    }
    for p in 0..n {
        if b.record_type(p) == REF_DELTA {
            let base = ObjectId::from_bytes_or_panic(cur.take(width, "too short for the bases")?);
            if base.as_slice() == b.oid_bytes(b.row_of(p)) || base.is_null() {
                return Err(IndexError::Corrupt(
                    "REF_DELTA base is the null oid or itself",
                ));
            }
            let at = find_by(&fanout, |i| b.oid_bytes(i), &base);
            b.set_base(p, base, at);
        }
    }
    if !cur.rest.is_empty() {
        return Err(IndexError::Corrupt("trailing bytes"));
    }
    Ok(ContainerIndex {
        fanout,
        rows: b.finish(),
    })
}
