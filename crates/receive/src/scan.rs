//! Pass 1 over the spooled pack: walk every entry with gix-pack's streaming
//! entry iterator, check the trailer, and keep a compact table of entries.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use gix_hash::ObjectId;
use gix_pack::data::entry::Header;
use gix_pack::data::input;

/// How an entry relates to a delta base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A whole object with this pack type id (1-4).
    Base(u8),
    /// OFS_DELTA against the entry at this index.
    OfsDelta(u32),
    /// REF_DELTA against this oid.
    RefDelta(ObjectId),
}

/// One pack entry as pass 1 saw it.
#[derive(Debug, Clone, Copy)]
pub struct ScannedEntry {
    /// Absolute offset of the zlib stream in the spool file.
    pub data_offset: u64,
    /// Length in bytes of the zlib stream.
    pub compressed_size: u64,
    /// Inflated size in bytes of the stream (object or delta instructions).
    pub decompressed_size: u64,
    /// Whole or delta.
    pub kind: EntryKind,
}

/// The table pass 1 produces.
#[derive(Debug, Default)]
pub struct ScannedPack {
    /// Entries in pack order.
    pub entries: Vec<ScannedEntry>,
    /// Number of REF_DELTA entries.
    pub ref_deltas: usize,
    /// Bytes of the pack, trailer included.
    pub pack_bytes: u64,
}

/// Why pass 1 refused the pack; the text is what the client sees after `unpack `.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// Anything wrong with the pack bytes.
    #[error("{0}")]
    Invalid(String),
    /// Local I/O on the spool file.
    #[error("spool I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Limits applied while scanning.
#[derive(Debug, Clone, Copy)]
pub struct ScanLimits {
    /// Largest inflated entry allowed, in bytes.
    pub max_object_bytes: u64,
}

fn invalid(msg: impl Into<String>) -> ScanError {
    ScanError::Invalid(msg.into())
}

/// Scans the pack that starts at `pack_start` in `file` and runs to its end.
pub fn scan(file: &File, pack_start: u64, limits: ScanLimits) -> Result<ScannedPack, ScanError> {
    let file_len = file.metadata()?.len();
    let pack_bytes = file_len.saturating_sub(pack_start);
    if pack_bytes < 12 {
        return Err(invalid("eof before pack header was fully read"));
    }
    let mut reader = file.try_clone()?;
    reader.seek(SeekFrom::Start(pack_start))?;
    let mut header = [0u8; 12];
    reader.read_exact(&mut header)?;
    if &header[..4] != b"PACK" {
        return Err(invalid("protocol error (pack signature mismatch detected)"));
    }
    let version = u32::from_be_bytes(header[4..8].try_into().expect("4 bytes"));
    if version != 2 && version != 3 {
        return Err(invalid(format!(
            "protocol error (pack version {version} unsupported)"
        )));
    }
    let count = u32::from_be_bytes(header[8..12].try_into().expect("4 bytes")) as u64;
    // Every entry takes at least 1 byte of header and 8 of zlib (header, empty
    // block, adler32): bound the count (and any allocation from it) by the bytes received.
    if count > pack_bytes.saturating_sub(32) / 9 {
        return Err(invalid(format!(
            "pack claims {count} objects but has only {pack_bytes} bytes"
        )));
    }
    if count == 0 {
        return check_empty_pack(file, pack_start, pack_bytes, &header);
    }
    reader.seek(SeekFrom::Start(pack_start))?;
    let iter = input::BytesToEntriesIter::new_from_header(
        BufReader::with_capacity(128 * 1024, reader),
        input::Mode::Verify,
        input::EntryDataMode::Ignore,
        gix_hash::Kind::Sha1,
    )
    .map_err(|e| invalid(e.to_string()))?;
    let mut out = ScannedPack {
        entries: Vec::with_capacity(count.min(1 << 20) as usize),
        ref_deltas: 0,
        pack_bytes,
    };
    let mut offsets: Vec<u64> = Vec::with_capacity(count.min(1 << 20) as usize);
    let mut end = 12u64;
    let mut saw_trailer = false;
    for entry in iter {
        let entry = entry.map_err(|e| invalid(describe_gix_error(&e.to_string())))?;
        if entry.decompressed_size > limits.max_object_bytes {
            return Err(invalid(format!(
                "object of {} bytes at offset {} exceeds the limit of {} bytes",
                entry.decompressed_size, entry.pack_offset, limits.max_object_bytes
            )));
        }
        let kind = match entry.header {
            Header::Commit | Header::Tree | Header::Blob | Header::Tag => {
                EntryKind::Base(entry.header.as_type_id())
            }
            Header::OfsDelta { base_distance } => {
                let base_offset = entry
                    .pack_offset
                    .checked_sub(base_distance)
                    .filter(|_| base_distance > 0)
                    .ok_or_else(|| {
                        invalid(format!(
                            "delta base offset is out of bound at offset {}",
                            entry.pack_offset
                        ))
                    })?;
                let idx = offsets.binary_search(&base_offset).map_err(|_| {
                    invalid(format!(
                        "delta base offset is out of bound at offset {}",
                        entry.pack_offset
                    ))
                })?;
                EntryKind::OfsDelta(idx as u32)
            }
            Header::RefDelta { base_id } => {
                out.ref_deltas += 1;
                EntryKind::RefDelta(base_id)
            }
        };
        offsets.push(entry.pack_offset);
        out.entries.push(ScannedEntry {
            data_offset: pack_start + entry.pack_offset + u64::from(entry.header_size),
            compressed_size: entry.compressed_size,
            decompressed_size: entry.decompressed_size,
            kind,
        });
        end = entry.pack_offset + u64::from(entry.header_size) + entry.compressed_size;
        saw_trailer |= entry.trailer.is_some();
    }
    if out.entries.len() as u64 != count || !saw_trailer {
        return Err(invalid("pack is truncated"));
    }
    if end + 20 != pack_bytes {
        return Err(invalid("pack has junk at the end"));
    }
    Ok(out)
}

fn check_empty_pack(
    file: &File,
    pack_start: u64,
    pack_bytes: u64,
    header: &[u8; 12],
) -> Result<ScannedPack, ScanError> {
    use std::os::unix::fs::FileExt;
    if pack_bytes < 32 {
        return Err(invalid("pack is truncated"));
    }
    if pack_bytes > 32 {
        return Err(invalid("pack has junk at the end"));
    }
    let mut trailer = [0u8; 20];
    file.read_exact_at(&mut trailer, pack_start + 12)?;
    let mut h = gix_hash::hasher(gix_hash::Kind::Sha1);
    h.update(header);
    let digest = h.try_finalize().map_err(|e| invalid(e.to_string()))?;
    if digest.as_slice() != trailer {
        return Err(invalid("pack is corrupted (SHA1 mismatch)"));
    }
    Ok(ScannedPack {
        entries: Vec::new(),
        ref_deltas: 0,
        pack_bytes,
    })
}

/// Maps gix-pack's messages to the short reasons git's index-pack gives, where they correspond.
fn describe_gix_error(msg: &str) -> String {
    let lower = msg.to_ascii_lowercase();
    if lower.contains("mismatch")
        && (lower.contains("hash") || lower.contains("checksum") || lower.contains("trailer"))
    {
        "pack is corrupted (SHA1 mismatch)".into()
    } else if lower.contains("unexpected end")
        || lower.contains("eof")
        || lower.contains("fill whole buffer")
    {
        "pack is truncated".into()
    } else {
        msg.to_string()
    }
}
