//! Writing a container: records are appended to a staging file; sealing
//! encodes its index and names the container by the SHA-256 of a salt and
//! that index (every record's oid, kind, offset and length).
//!
//! The salt is unique to the writer (process id, clock,
//! a counter and per-process random state), so two containers never share an
//! id even when their bytes are equal (a retried push, two maintenance runs
//! of the same sources). An id is then named by exactly one writer, which is
//! what lets maintenance delete a container no state names without racing a
//! push that uploads the same bytes again.
//!
//! Index rows go to a second staging file as records are appended; memory
//! holds only an oid → offset map of the open container (for OFS_DELTA bases
//! and duplicates). Sealing reads the rows back twice, the oids first (which
//! the encoder sorts) and then the other fields, which go straight into the
//! `.idx`'s columns, so a push never holds the index entries of its objects
//! (sealing holds about 35 bytes a record of the container being sealed).

use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

use gix_hash::ObjectId;
use sha2::{Digest, Sha256};

use super::index::{row_len, IndexEncoder, MAX_ROW};
use super::{ContainerId, IndexEntry};
use crate::oids::OidMap;
use crate::record::{self, BaseRef};

/// Bytes copied at a time from a file into the container.
const COPY_CHUNK: usize = 64 * 1024;

/// Where a record's zlib stream comes from.
#[derive(Clone, Copy)]
enum ZlibSource<'a> {
    Bytes(&'a [u8]),
    File {
        file: &'a std::fs::File,
        offset: u64,
        len: u64,
    },
}

/// A container being written: one hashed staging file plus the entries seen so far.
pub struct ContainerWriter {
    file: BufWriter<tempfile::NamedTempFile>,
    len: u64,
    rows: BufWriter<tempfile::NamedTempFile>,
    count: usize,
    offsets: OidMap<u64>,
    header: Vec<u8>,
    copy_buf: Vec<u8>,
}

/// A finished container: its id, the `.bin` as a local temp file, and its
/// encoded index.
pub struct SealedContainer {
    /// Hex SHA-256 of a writer-unique token ([`crate::unique_token`]) and
    /// the encoded index (every record's oid, kind, offset and length):
    /// unique to this writer, and never the hash of 300 MB of records.
    pub id: ContainerId,
    /// The `.bin` on local disk (deleted when dropped).
    pub bin: tempfile::TempPath,
    /// The `.idx` bytes ([`ContainerIndex::encode`](super::ContainerIndex::encode)'s format).
    pub index: Vec<u8>,
    /// Objects in the container.
    pub objects: usize,
    /// Size of the `.bin` in bytes.
    pub bytes: u64,
    /// Oids of the commits it stores, in index order (for its commit graph).
    pub commits: Vec<ObjectId>,
    /// The `.graph` bytes ([`crate::graph`]), when the writer computed them
    /// (uploaded with the container).
    pub graph: Option<Vec<u8>>,
}

impl std::fmt::Debug for SealedContainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedContainer")
            .field("id", &self.id)
            .field("objects", &self.objects)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl ContainerWriter {
    /// Starts a container whose staging file lives in `dir`.
    pub fn new(dir: &Path) -> io::Result<Self> {
        Ok(ContainerWriter {
            file: BufWriter::with_capacity(256 * 1024, tempfile::NamedTempFile::new_in(dir)?),
            len: 0,
            rows: BufWriter::with_capacity(64 * 1024, tempfile::NamedTempFile::new_in(dir)?),
            count: 0,
            offsets: Default::default(),
            header: Vec::with_capacity(32),
            copy_buf: Vec::new(),
        })
    }

    /// Makes room for `objects` more objects in the table of the records
    /// written (oid → offset), which otherwise grows by doubling.
    pub fn reserve(&mut self, objects: usize) {
        self.offsets.reserve(objects);
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// True when `oid` is already in this container.
    pub fn contains(&self, oid: &ObjectId) -> bool {
        self.offsets.contains_key(oid)
    }

    /// Writes the record (`self.header` and `zlib`) and its index row; an oid
    /// already in the container is not written again (the index holds one
    /// record an oid, and records lie back to back).
    fn write_record(&mut self, entry: IndexEntry, zlib: ZlibSource<'_>) -> io::Result<()> {
        if self.offsets.contains_key(&entry.oid) {
            return Ok(());
        }
        self.file.write_all(&self.header)?;
        let zlib_len = match zlib {
            ZlibSource::Bytes(zlib) => {
                self.file.write_all(zlib)?;
                zlib.len() as u64
            }
            ZlibSource::File { file, offset, len } => {
                use std::os::unix::fs::FileExt;
                let mut buf = std::mem::take(&mut self.copy_buf);
                buf.resize(COPY_CHUNK.min(len as usize), 0);
                let mut done = 0u64;
                let copied = loop {
                    if done == len {
                        break Ok(());
                    }
                    let n = (len - done).min(buf.len() as u64) as usize;
                    if let Err(e) = file.read_exact_at(&mut buf[..n], offset + done) {
                        break Err(e);
                    }
                    if let Err(e) = self.file.write_all(&buf[..n]) {
                        break Err(e);
                    }
                    done += n as u64;
                };
                self.copy_buf = buf;
                copied?;
                len
            }
        };
        let length = self.header.len() as u64 + zlib_len;
        self.offsets.insert(&entry.oid, self.len);
        let mut row = [0u8; MAX_ROW];
        let n = IndexEntry {
            offset: self.len,
            length,
            ..entry
        }
        .to_row(&mut row);
        self.rows.write_all(&row[..n])?;
        self.count += 1;
        self.len += length;
        Ok(())
    }

    /// Appends a whole object: `zlib` is the zlib stream of its `size` bytes, kept verbatim.
    pub fn append_whole(
        &mut self,
        oid: ObjectId,
        kind: gix_object::Kind,
        size: u64,
        zlib: &[u8],
    ) -> io::Result<()> {
        self.write_whole(oid, kind, size, ZlibSource::Bytes(zlib))
    }

    /// Appends a whole object whose zlib stream is `len` bytes at `offset` of
    /// `file` (a push's spool), copied in pieces of at most 64 KiB: a record of
    /// any size costs no more memory than that.
    pub fn append_whole_from_file(
        &mut self,
        oid: ObjectId,
        kind: gix_object::Kind,
        size: u64,
        file: &std::fs::File,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        self.write_whole(oid, kind, size, ZlibSource::File { file, offset, len })
    }

    fn write_whole(
        &mut self,
        oid: ObjectId,
        kind: gix_object::Kind,
        size: u64,
        zlib: ZlibSource<'_>,
    ) -> io::Result<()> {
        let type_id = record::type_id_from_kind(kind);
        self.header.clear();
        record::write_header(type_id, size, BaseRef::None, &mut self.header);
        let entry = IndexEntry {
            oid,
            offset: 0,
            length: 0,
            record_type: type_id,
            kind: type_id,
            size,
            depth: 0,
            base: None,
        };
        self.write_record(entry, zlib)
    }

    /// Appends a delta: `zlib` is the zlib stream of `delta_size` bytes of delta
    /// instructions against `base`. Stored as OFS_DELTA when the base is in this
    /// container, else as REF_DELTA. `size` is the resolved object's size, `depth` its chain depth.
    #[allow(clippy::too_many_arguments)]
    pub fn append_delta(
        &mut self,
        oid: ObjectId,
        kind: gix_object::Kind,
        size: u64,
        depth: u32,
        base: ObjectId,
        delta_size: u64,
        zlib: &[u8],
    ) -> io::Result<()> {
        self.header.clear();
        let (record_type, base_ref) = match self.offsets.get(&base) {
            Some(&base_offset) => (record::OFS_DELTA, BaseRef::Distance(self.len - base_offset)),
            None => (record::REF_DELTA, BaseRef::Oid(base)),
        };
        record::write_header(record_type, delta_size, base_ref, &mut self.header);
        let entry = IndexEntry {
            oid,
            offset: 0,
            length: 0,
            record_type,
            kind: record::type_id_from_kind(kind),
            size,
            depth,
            base: Some(base),
        };
        self.write_record(entry, ZlibSource::Bytes(zlib))
    }

    /// Copies a stored record of another container: its zlib stream is `len`
    /// bytes at `offset` of `file` (copied in pieces of at most 64 KiB, never
    /// inflated), `payload_size` the inflated size its header gives (the
    /// object's for a whole record, the delta instructions' for a delta).
    /// `entry` describes the object (oid, kind, size, depth, base). A delta
    /// whose base is already in this container is written as an OFS_DELTA,
    /// any other as a REF_DELTA; an oid already here is not written again.
    pub fn append_record_from_file(
        &mut self,
        entry: &IndexEntry,
        payload_size: u64,
        file: &std::fs::File,
        offset: u64,
        len: u64,
    ) -> io::Result<()> {
        self.header.clear();
        let record_type = match entry.base {
            None => {
                record::write_header(entry.kind, payload_size, BaseRef::None, &mut self.header);
                entry.kind
            }
            Some(base) => {
                let (record_type, base_ref) = match self.offsets.get(&base) {
                    Some(&at) => (record::OFS_DELTA, BaseRef::Distance(self.len - at)),
                    None => (record::REF_DELTA, BaseRef::Oid(base)),
                };
                record::write_header(record_type, payload_size, base_ref, &mut self.header);
                record_type
            }
        };
        let entry = IndexEntry {
            record_type,
            ..*entry
        };
        self.write_record(entry, ZlibSource::File { file, offset, len })
    }

    /// Flushes the staging file, names the container by its hash and encodes its index.
    pub fn seal(self) -> io::Result<SealedContainer> {
        let file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.as_file().sync_data()?;
        // The width of the records' oids (an empty container: SHA-1's).
        let width = match self.offsets.width() {
            0 => 20,
            w => w,
        };
        drop(self.offsets);
        let mut rows = self.rows.into_inner().map_err(|e| e.into_error())?;
        let invalid = |e: super::IndexError| io::Error::new(io::ErrorKind::InvalidData, e);
        let mut buf = [0u8; MAX_ROW];
        let row = &mut buf[..row_len(width)];
        rows.rewind()?;
        let mut oids = Vec::with_capacity(self.count * width);
        let mut reader = BufReader::with_capacity(64 * 1024, rows.as_file_mut());
        for _ in 0..self.count {
            reader.read_exact(row)?;
            oids.extend_from_slice(&row[..width]);
        }
        drop(reader);
        let mut encoder = IndexEncoder::new(oids, width).map_err(invalid)?;
        rows.rewind()?;
        let mut reader = BufReader::with_capacity(64 * 1024, rows.as_file_mut());
        let mut commits = Vec::new();
        for _ in 0..self.count {
            reader.read_exact(row)?;
            let entry = IndexEntry::from_row(row, width);
            if entry.kind == record::COMMIT {
                commits.push(entry.oid);
            }
            encoder.push(&entry).map_err(invalid)?;
        }
        drop(reader);
        drop(rows);
        let index = encoder.finish(self.len).map_err(invalid)?;
        let mut id = Sha256::new();
        id.update(crate::unique_token());
        id.update(&index);
        Ok(SealedContainer {
            id: hex::encode(id.finalize()),
            bin: file.into_temp_path(),
            index,
            objects: self.count,
            bytes: self.len,
            commits,
            graph: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::ContainerIndex;
    use crate::record::{decode_header, OFS_DELTA, REF_DELTA};

    #[test]
    fn sealed_index_describes_the_bin() {
        sealed_index_describes_the_bin_at(20);
    }

    #[test]
    fn a_sha256_container_is_sealed_with_32_byte_oids_and_bases() {
        sealed_index_describes_the_bin_at(32);
    }

    fn sealed_index_describes_the_bin_at(width: usize) {
        let dir = tempfile::tempdir().unwrap();
        let oid = |b: u8| ObjectId::from_bytes_or_panic(&vec![b; width]);
        let mut w = ContainerWriter::new(dir.path()).unwrap();
        w.append_whole(oid(0x50), gix_object::Kind::Blob, 5, b"zlib-a")
            .unwrap();
        w.append_delta(
            oid(0x10),
            gix_object::Kind::Blob,
            7,
            1,
            oid(0x50),
            3,
            b"zl-b",
        )
        .unwrap();
        w.append_delta(
            oid(0x30),
            gix_object::Kind::Tree,
            9,
            4,
            oid(0x99),
            2,
            b"z-c",
        )
        .unwrap();
        // a second record of one oid is not written
        w.append_whole(oid(0x10), gix_object::Kind::Blob, 7, b"again")
            .unwrap();
        w.append_whole(oid(0x20), gix_object::Kind::Commit, 11, b"zlib-d")
            .unwrap();
        let sealed = w.seal().unwrap();
        assert_eq!(sealed.objects, 4);
        let bin = std::fs::read(&sealed.bin).unwrap();
        assert_eq!(bin.len() as u64, sealed.bytes);
        let idx = ContainerIndex::decode(&sealed.index).unwrap();
        assert_eq!((idx.len(), idx.oid_width()), (4, width));
        let mut end = 0;
        let mut by_offset: Vec<_> = idx.iter().collect();
        by_offset.sort_by_key(|e| e.offset);
        for e in &by_offset {
            assert_eq!(e.offset, end);
            end += e.length;
            let record = &bin[e.offset as usize..(e.offset + e.length) as usize];
            let header = decode_header(record, width).unwrap();
            assert_eq!(header.type_id, e.record_type);
            if e.record_type == REF_DELTA {
                assert_eq!(header.base, BaseRef::Oid(e.base.unwrap()));
            }
        }
        assert_eq!(end, sealed.bytes);
        let b = idx.lookup(&oid(0x10)).unwrap();
        assert_eq!(
            (b.record_type, b.kind, b.size, b.depth),
            (OFS_DELTA, 3, 7, 1)
        );
        assert_eq!(b.base, Some(oid(0x50)));
        let c = idx.lookup(&oid(0x30)).unwrap();
        assert_eq!(
            (c.record_type, c.kind, c.size, c.depth),
            (REF_DELTA, 2, 9, 4)
        );
        assert_eq!(c.base, Some(oid(0x99)));
        let d = idx.lookup(&oid(0x20)).unwrap();
        assert_eq!((d.record_type, d.kind, d.base), (1, 1, None));
        assert_eq!(
            &bin[d.offset as usize..][..d.length as usize][d.length as usize - 6..],
            b"zlib-d"
        );
    }
}
