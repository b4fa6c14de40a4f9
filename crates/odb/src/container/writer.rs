//! Writing a container: records are appended to a staging file while its
//! SHA-256 is computed; sealing names the container by that hash.
//!
//! Index rows go to a second staging file as records are appended; memory
//! holds only an oid → offset map of the open container (for OFS_DELTA bases
//! and duplicates). Sealing reads the rows back, sorts them and encodes the
//! `.idx`, so a push never holds the index entries of all its objects.

use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::Path;

use gix_hash::ObjectId;
use sha2::{Digest, Sha256};

use super::index::{encode_sorted_rows, ROW};
use super::{ContainerId, IndexEntry};
use crate::record::{self, BaseRef};

/// A container being written: one hashed staging file plus the entries seen so far.
pub struct ContainerWriter {
    file: BufWriter<tempfile::NamedTempFile>,
    hasher: Sha256,
    len: u64,
    rows: BufWriter<tempfile::NamedTempFile>,
    count: usize,
    offsets: gix_hashtable::HashMap<ObjectId, u64>,
    header: Vec<u8>,
}

/// A finished container: its id, the `.bin` as a local temp file, and its
/// encoded index.
pub struct SealedContainer {
    /// Hex SHA-256 of the `.bin`.
    pub id: ContainerId,
    /// The `.bin` on local disk (deleted when dropped).
    pub bin: tempfile::TempPath,
    /// The `.idx` bytes ([`ContainerIndex::encode`](super::ContainerIndex::encode)'s format).
    pub index: Vec<u8>,
    /// Objects in the container.
    pub objects: usize,
    /// Size of the `.bin` in bytes.
    pub bytes: u64,
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
            hasher: Sha256::new(),
            len: 0,
            rows: BufWriter::with_capacity(64 * 1024, tempfile::NamedTempFile::new_in(dir)?),
            count: 0,
            offsets: Default::default(),
            header: Vec::with_capacity(32),
        })
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

    fn write_record(&mut self, entry: IndexEntry, zlib: &[u8]) -> io::Result<()> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.header);
        crc.update(zlib);
        self.file.write_all(&self.header)?;
        self.file.write_all(zlib)?;
        self.hasher.update(&self.header);
        self.hasher.update(zlib);
        let length = (self.header.len() + zlib.len()) as u64;
        self.offsets.insert(entry.oid, self.len);
        let row = IndexEntry {
            offset: self.len,
            length,
            crc32: crc.finalize(),
            ..entry
        }
        .to_row();
        self.rows.write_all(&row)?;
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
            crc32: 0,
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
            crc32: 0,
            depth,
            base: Some(base),
        };
        self.write_record(entry, zlib)
    }

    /// Flushes the staging file and names the container by its hash.
    pub fn seal(self) -> io::Result<SealedContainer> {
        let file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.as_file().sync_data()?;
        drop(self.offsets);
        let mut rows_file = self.rows.into_inner().map_err(|e| e.into_error())?;
        let mut rows = vec![[0u8; ROW]; self.count];
        rows_file.rewind()?;
        rows_file.read_exact(rows.as_flattened_mut())?;
        drop(rows_file);
        rows.sort_unstable_by(|a, b| a[..20].cmp(&b[..20]));
        rows.dedup_by(|a, b| a[..20] == b[..20]);
        Ok(SealedContainer {
            id: hex::encode(self.hasher.finalize()),
            bin: file.into_temp_path(),
            index: encode_sorted_rows(&rows),
            objects: rows.len(),
            bytes: self.len,
        })
    }
}
