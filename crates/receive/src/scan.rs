//! Pass 1 over the spooled pack: walk every entry once, check the trailer, and
//! keep a compact table of entries.
//!
//! The walk is ours rather than gix-pack's `BytesToEntriesIter` so that every
//! hostile input is refused before it costs anything: an entry's declared size
//! is checked against the object limit *before* its stream is inflated, and
//! inflating stops as soon as a stream produces more than its header declares
//! (a zlib bomb costs at most the declared size); entries never read into the
//! trailer, so a stream that never ends is "truncated", not a hang; and each
//! refusal carries the reason git's index-pack gives.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

use flate2::{Decompress, FlushDecompress, Status};
use gitstow_odb::pack_checksum::PackChecksum;
use gix_hash::ObjectId;

/// How an entry relates to a delta base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A whole object with this pack type id (1-4).
    Base(u8),
    /// OFS_DELTA against the entry at this index.
    OfsDelta(u32),
    /// REF_DELTA against the oid at this index of [`ScannedPack::ref_bases`]
    /// (kept out of line so an entry is 32 bytes, not 48).
    RefDelta(u32),
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

const _: () = assert!(std::mem::size_of::<ScannedEntry>() == 32);

/// The table pass 1 produces.
#[derive(Debug, Default)]
pub struct ScannedPack {
    /// Entries in pack order.
    pub entries: Vec<ScannedEntry>,
    /// Number of REF_DELTA entries.
    pub ref_deltas: usize,
    /// The bases REF_DELTA entries name, in pack order.
    pub ref_bases: Vec<ObjectId>,
    /// The object format the pack was read in: its ids' width and hash.
    pub format: gix_hash::Kind,
    /// The oid of every whole entry, in pack order (the k-th `Base` entry's
    /// oid is `base_oids[k]`): hashed while pass 1 inflates them, as git's
    /// index-pack does, so pass 2 never hashes them again and never inflates
    /// a blob no delta is based on.
    pub base_oids: gitstow_odb::oids::OidVec<()>,
    /// Bytes of the pack, trailer included.
    pub pack_bytes: u64,
    /// The inflated bytes of the entries, when pass 1 kept them.
    pub kept: Option<KeptInflated>,
}

/// Where pass 1 keeps the inflated bytes of the pack's entries, and how
/// much it may keep there.
#[derive(Debug)]
pub struct KeepInflated {
    /// An empty scratch file (unnamed; gone when closed).
    pub file: File,
    /// Most bytes kept in it; the entries after the one that would pass it
    /// are not kept.
    pub budget: u64,
}

/// Largest entry whose inflated bytes pass 1 keeps, in bytes.
pub const MAX_KEPT_ENTRY: u64 = 1 << 20;

/// Entries per checkpoint of [`KeptInflated`].
const CHECKPOINT: usize = 64;

/// The inflated bytes of the pack's entries (a delta's instructions, a
/// whole object's bytes), as pass 1 wrote them, back to back in pack
/// order: pass 2 reads an entry here instead of inflating its stream a
/// second time. Inflating was a quarter of a push's CPU, half of it this
/// second time, and reading the bytes back from the page cache costs a
/// fraction of that. Kept: every entry of at most [`MAX_KEPT_ENTRY`] bytes
/// before `cutoff`, the entry at which the budget ran out. Nothing per
/// entry is held in memory: an entry's offset is found from the
/// checkpoint before it.
#[derive(Debug)]
pub struct KeptInflated {
    /// The scratch file, written.
    pub file: File,
    /// Bytes written to it.
    pub len: u64,
    /// The file offset of entry `k * CHECKPOINT`'s bytes (or of the next
    /// kept ones after it).
    checkpoints: Vec<u64>,
    /// Entries from this one on are not kept.
    cutoff: usize,
}

/// Whether pass 1 keeps an entry's bytes (before the cutoff).
fn keeps(e: &ScannedEntry) -> bool {
    e.decompressed_size <= MAX_KEPT_ENTRY
}

impl KeptInflated {
    /// The offset in [`KeptInflated::file`] of entry `i`'s inflated bytes
    /// (`entries[i].decompressed_size` of them), if kept.
    pub fn offset(&self, entries: &[ScannedEntry], i: usize) -> Option<u64> {
        if i >= self.cutoff || !keeps(entries.get(i)?) {
            return None;
        }
        let from = i / CHECKPOINT * CHECKPOINT;
        let before: u64 = entries[from..i]
            .iter()
            .filter(|e| keeps(e))
            .map(|e| e.decompressed_size)
            .sum();
        Some(self.checkpoints[i / CHECKPOINT] + before)
    }
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
    /// Most objects a pack may hold (a push holds about 250 bytes of
    /// memory per object while it is resolved).
    pub max_objects: u64,
}

fn invalid(msg: impl Into<String>) -> ScanError {
    ScanError::Invalid(msg.into())
}

/// The object kind of a whole entry's pack type id (1-4; the scan admits no other).
fn object_kind(type_id: u8) -> gix_object::Kind {
    match type_id {
        1 => gix_object::Kind::Commit,
        2 => gix_object::Kind::Tree,
        3 => gix_object::Kind::Blob,
        _ => gix_object::Kind::Tag,
    }
}

/// git's index-pack words for a truncated pack.
const TRUNCATED: &str = "pack is truncated (early EOF)";

/// Scans the pack that starts at `pack_start` in `file` and runs to its end,
/// a pack of object format `format` (its whole objects' ids, REF_DELTA
/// bases and trailer are that hash's; `gitformat-pack(5)`); with `keep`,
/// writes the inflated bytes of its entries there (see [`KeptInflated`]).
pub fn scan(
    file: &File,
    pack_start: u64,
    limits: ScanLimits,
    keep: Option<KeepInflated>,
    format: gix_hash::Kind,
) -> Result<ScannedPack, ScanError> {
    let width = format.len_in_bytes();
    let file_len = file.metadata()?.len();
    let pack_bytes = file_len.saturating_sub(pack_start);
    if pack_bytes < 12 {
        return Err(invalid("eof before pack header was fully read"));
    }
    let mut reader = file.try_clone()?;
    reader.seek(SeekFrom::Start(pack_start))?;
    let mut input = Input {
        reader: BufReader::with_capacity(128 * 1024, reader),
        hasher: PackChecksum::new(format),
        pos: 0,
        // entries never reach into the trailer
        end: pack_bytes.saturating_sub(width as u64),
    };
    let mut header = [0u8; 12];
    input.reader.read_exact(&mut header)?;
    input.hasher.update(&header);
    input.pos = 12;
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
    if count > limits.max_objects {
        return Err(invalid(format!(
            "pack has {count} objects, more than this server's limit of {}",
            limits.max_objects
        )));
    }
    let mut out = ScannedPack {
        format,
        entries: Vec::with_capacity(count.min(1 << 20) as usize),
        ref_deltas: 0,
        ref_bases: Vec::new(),
        base_oids: Default::default(),
        pack_bytes,
        kept: None,
    };
    let budget = keep.as_ref().map_or(0, |k| k.budget);
    let mut kept = keep.map(|k| (BufWriter::with_capacity(128 * 1024, k.file), Vec::new()));
    let (mut written, mut cutoff) = (0u64, usize::MAX);
    let mut offsets: Vec<u64> = Vec::with_capacity(count.min(1 << 20) as usize);
    let mut scratch = vec![0u8; 64 * 1024];
    let mut z = Decompress::new(true);
    for i in 0..count as usize {
        let offset = input.pos;
        let bad = |what: &str| invalid(format!("pack has bad object at offset {offset}: {what}"));
        // type and size (gitformat-pack(5): 3-bit type, size in 4 + 7n bits)
        let mut c = input.byte()?;
        let type_id = (c >> 4) & 7;
        let mut size = u64::from(c & 0x0f);
        let mut shift = 4u32;
        while c & 0x80 != 0 {
            c = input.byte()?;
            if shift > 57 {
                return Err(bad("object size overflows 64 bits"));
            }
            size |= u64::from(c & 0x7f) << shift;
            shift += 7;
        }
        let kind = match type_id {
            1..=4 => EntryKind::Base(type_id),
            6 => {
                let mut c = input.byte()?;
                let mut distance = u64::from(c & 0x7f);
                while c & 0x80 != 0 {
                    c = input.byte()?;
                    distance += 1;
                    if distance >> 57 != 0 {
                        return Err(bad("delta base offset overflow"));
                    }
                    distance = (distance << 7) | u64::from(c & 0x7f);
                }
                let idx = offset
                    .checked_sub(distance)
                    .filter(|_| distance > 0)
                    .and_then(|base| offsets.binary_search(&base).ok())
                    .ok_or_else(|| bad("delta base offset is out of bound"))?;
                EntryKind::OfsDelta(idx as u32)
            }
            7 => {
                let mut id = [0u8; 32];
                for b in &mut id[..width] {
                    *b = input.byte()?;
                }
                out.ref_deltas += 1;
                out.ref_bases
                    .push(ObjectId::from_bytes_or_panic(&id[..width]));
                EntryKind::RefDelta((out.ref_bases.len() - 1) as u32)
            }
            t => return Err(bad(&format!("unknown object type {t}"))),
        };
        if size > limits.max_object_bytes {
            return Err(invalid(format!(
                "object of {size} bytes at offset {offset} exceeds the limit of {} bytes",
                limits.max_object_bytes
            )));
        }
        let data_offset = input.pos;
        let entry = ScannedEntry {
            data_offset: pack_start + data_offset,
            compressed_size: 0,
            decompressed_size: size,
            kind,
        };
        if let Some((_, checkpoints)) = kept.as_mut() {
            if i % CHECKPOINT == 0 {
                checkpoints.push(written);
            }
        }
        let mut keeper = None;
        if let Some((writer, _)) = kept.as_mut() {
            if i < cutoff && keeps(&entry) {
                if written + size <= budget {
                    written += size;
                    keeper = Some(writer);
                } else {
                    cutoff = i;
                }
            }
        }
        let mut object_hasher = match kind {
            EntryKind::Base(t) => {
                let mut h = gix_hash::hasher(format);
                h.update(&gix_object::encode::loose_header(object_kind(t), size));
                Some(h)
            }
            _ => None,
        };
        let sink = Sink {
            hasher: object_hasher.as_mut(),
            keep: keeper,
        };
        input
            .inflate(&mut z, size, &mut scratch, sink)
            .map_err(|e| match e {
                InflateFailure::Io(e) => ScanError::Io(e),
                InflateFailure::Truncated => invalid(TRUNCATED),
                InflateFailure::Bad(what) => bad(&what),
            })?;
        if let Some(h) = object_hasher {
            let oid = h.try_finalize().map_err(|e| bad(&e.to_string()))?;
            out.base_oids.push(&oid, ());
        }
        offsets.push(offset);
        out.entries.push(ScannedEntry {
            compressed_size: input.pos - data_offset,
            ..entry
        });
    }
    if let Some((writer, checkpoints)) = kept {
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        out.kept = Some(KeptInflated {
            file,
            len: written,
            checkpoints,
            cutoff,
        });
    }
    // the trailer: the format's hash of everything before it
    let digest = input.hasher.finalize();
    let mut trailer = [0u8; 32];
    let trailer = &mut trailer[..width];
    use std::os::unix::fs::FileExt;
    if input.pos + width as u64 > pack_bytes {
        return Err(invalid(TRUNCATED));
    }
    file.read_exact_at(trailer, pack_start + input.pos)?;
    if digest != *trailer {
        // git's index-pack says SHA1 whatever the format.
        return Err(invalid("pack is corrupted (SHA1 mismatch)"));
    }
    if input.pos + width as u64 != pack_bytes {
        return Err(invalid("pack has junk at the end"));
    }
    Ok(out)
}

/// Where [`Input::inflate`] sends what it inflates: a whole object's
/// bytes to its hasher, and the bytes pass 1 keeps to [`KeptInflated`]'s file.
struct Sink<'a> {
    hasher: Option<&'a mut gix_hash::Hasher>,
    keep: Option<&'a mut BufWriter<File>>,
}

enum InflateFailure {
    Io(std::io::Error),
    Truncated,
    Bad(String),
}

/// The pack bytes after the header, hashed as they are consumed, never past `end`.
struct Input {
    reader: BufReader<File>,
    hasher: PackChecksum,
    /// Offset in the pack of the next byte.
    pos: u64,
    /// Offset in the pack where entries must stop (the trailer).
    end: u64,
}

impl Input {
    /// Buffered bytes, at most up to `end`; empty at `end` or at EOF.
    fn fill(&mut self) -> std::io::Result<&[u8]> {
        let left = self.end.saturating_sub(self.pos);
        let buf = self.reader.fill_buf()?;
        Ok(&buf[..buf.len().min(usize::try_from(left).unwrap_or(usize::MAX))])
    }

    fn consume(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let buf = self
            .reader
            .fill_buf()
            .expect("consuming bytes fill_buf returned before");
        self.hasher.update(&buf[..n]);
        self.reader.consume(n);
        self.pos += n as u64;
    }

    fn byte(&mut self) -> Result<u8, ScanError> {
        let b = *self.fill()?.first().ok_or_else(|| invalid(TRUNCATED))?;
        self.consume(1);
        Ok(b)
    }

    /// Inflates one zlib stream, discarding its output, and checks that it
    /// produces exactly `size` bytes; stops as soon as it produces more.
    /// The output goes to `sink`.
    fn inflate(
        &mut self,
        z: &mut Decompress,
        size: u64,
        scratch: &mut [u8],
        mut sink: Sink<'_>,
    ) -> Result<(), InflateFailure> {
        z.reset(true);
        loop {
            let buf = self.fill().map_err(InflateFailure::Io)?;
            if buf.is_empty() {
                return Err(InflateFailure::Truncated);
            }
            let (in_before, out_before) = (z.total_in(), z.total_out());
            // never ask for more output than one byte past the declared size
            let room = (size.saturating_add(1) - out_before).min(scratch.len() as u64) as usize;
            let status = z
                .decompress(buf, &mut scratch[..room], FlushDecompress::None)
                .map_err(|e| InflateFailure::Bad(format!("inflate: {e}")))?;
            let used = (z.total_in() - in_before) as usize;
            self.consume(used);
            let produced = &scratch[..((z.total_out() - out_before) as usize).min(room)];
            if let Some(h) = sink.hasher.as_deref_mut() {
                h.update(produced);
            }
            if let Some(w) = sink.keep.as_deref_mut() {
                w.write_all(produced).map_err(InflateFailure::Io)?;
            }
            if z.total_out() > size {
                return Err(InflateFailure::Bad(format!(
                    "inflates to more than the {size} bytes its header declares"
                )));
            }
            match status {
                Status::StreamEnd => break,
                Status::Ok | Status::BufError => {
                    if used == 0 && z.total_out() == out_before {
                        return Err(InflateFailure::Bad("inflate makes no progress".into()));
                    }
                }
            }
        }
        if z.total_out() != size {
            return Err(InflateFailure::Bad(format!(
                "inflates to {} bytes, its header declares {size}",
                z.total_out()
            )));
        }
        Ok(())
    }
}
