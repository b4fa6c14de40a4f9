//! Writing the pack a fetch receives, straight from the containers.
//!
//! Objects go out in container order (oldest container first, then by offset),
//! which puts every stored delta after its base. A record is copied verbatim
//! (its zlib stream untouched) when it is whole or when its base is also sent;
//! the base is then named by OFS_DELTA distance (if the client asked for
//! `ofs-delta`) or REF_DELTA oid. In a thin pack (the client asked for
//! `thin-pack`), a delta whose base the client has is copied verbatim too, as a
//! REF_DELTA naming that base (git's "preferred bases"; the client's
//! `index-pack --fix-thin` completes it). Any other delta is resolved and
//! deflated as a whole object. No delta search is done.

use std::io::Write;

use gitstow_odb::oids::{OidMap, OidVec};
use gitstow_odb::pack_checksum::PackChecksum;
use gitstow_odb::record::{self, BaseRef};
use gitstow_odb::{zlib, ObjectCache, ObjectDb};
use gix_hash::ObjectId;

/// Knobs of pack writing.
#[derive(Debug, Clone, Copy)]
pub struct PackOptions {
    /// The client accepts OFS_DELTA.
    pub ofs_delta: bool,
    /// Bytes of the delta-base cache for objects that must be resolved.
    pub cache_bytes: usize,
    /// The client asked for a thin pack (and has every object of its
    /// `client_has` set): deltas against those go out as they are stored.
    pub thin: bool,
    /// The repository's object format: the pack's trailer is its hash
    /// (`gitformat-pack(5)`).
    pub format: gix_hash::Kind,
}

/// Figures of a written pack.
#[derive(Debug, Default, Clone, Copy)]
pub struct PackStats {
    /// Objects written.
    pub objects: u64,
    /// Of which deltas.
    pub deltas: u64,
    /// Records copied verbatim.
    pub reused: u64,
    /// Deltas sent against a base the client has (thin pack).
    pub thin: u64,
    /// Deltas resolved and sent whole (their base neither sent nor had).
    pub resolved: u64,
    /// Pack bytes, trailer included.
    pub bytes: u64,
}

/// Why the pack could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// An object to send is in no container.
    #[error("object {0} is missing from the repository")]
    Missing(ObjectId),
    /// Reading failed.
    #[error(transparent)]
    Odb(#[from] gitstow_odb::Error),
    /// Writing to the client failed.
    #[error("writing the pack: {0}")]
    Io(#[from] std::io::Error),
}

/// Bytes a [`RunReader`] fetches at once, at most (one record larger than
/// that is read whole).
const RUN_BYTES: u64 = 1 << 20;

/// Reads the records of a pack's objects, sorted by container and offset, in
/// runs: records that follow each other in one container come from one
/// ranged read of up to [`RUN_BYTES`] instead of one read each (a clone of
/// git/git is 400,000 records).
#[derive(Default)]
struct RunReader {
    buf: Vec<u8>,
    container: usize,
    start: u64,
    end: u64,
}

/// An object to send: its container, its row in that container's index, and
/// its record's offset and length (24 bytes, for every object of a clone).
#[derive(Clone, Copy)]
struct Located {
    container: u32,
    row: u32,
    offset: u64,
    length: u64,
}

impl RunReader {
    /// The record of `located[i]`.
    fn record(
        &mut self,
        db: &ObjectDb,
        located: &[Located],
        i: usize,
    ) -> Result<&[u8], gitstow_odb::Error> {
        let Located {
            container,
            offset,
            length,
            ..
        } = located[i];
        let container = container as usize;
        let in_run = container == self.container
            && offset >= self.start
            && offset + length <= self.end
            && !self.buf.is_empty();
        if !in_run {
            let mut end = offset + length;
            for l in &located[i + 1..] {
                if l.container as usize != container
                    || l.offset != end
                    || end + l.length - offset > RUN_BYTES
                {
                    break;
                }
                end += l.length;
            }
            self.buf = db.read_span(container, offset..end)?;
            (self.container, self.start, self.end) = (container, offset, end);
        }
        let at = (offset - self.start) as usize;
        Ok(&self.buf[at..at + length as usize])
    }
}

/// The oid of `l`.
fn oid_of(db: &ObjectDb, l: &Located) -> ObjectId {
    db.container(l.container as usize).oid(l.row as usize)
}

struct HashingWriter<'a> {
    inner: &'a mut dyn Write,
    hasher: PackChecksum,
    written: u64,
}

impl Write for HashingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a version-2 pack of `objects` (no duplicates) to `out`; with
/// `opts.thin`, deltas against objects `client_has` says the client has
/// are sent as they are.
pub fn write_pack(
    db: &ObjectDb,
    objects: &OidVec<()>,
    client_has: &dyn Fn(&ObjectId) -> bool,
    out: &mut dyn Write,
    opts: PackOptions,
) -> Result<PackStats, PackError> {
    let mut located: Vec<Located> = Vec::with_capacity(objects.len());
    for oid in objects.ids() {
        let loc = db
            .lookup(oid)
            .ok_or_else(|| PackError::Missing(oid.to_owned()))?;
        located.push(Located {
            container: loc.container as u32,
            row: loc.row as u32,
            offset: loc.entry.offset,
            length: loc.entry.length,
        });
    }
    located.sort_unstable_by_key(|l| (l.container, l.offset));
    // Each object's place in `located` (one map, built once: a delta's base
    // is looked up once), and the pack offset of each written one by place.
    let mut position: OidMap<u32> = OidMap::new();
    position.reserve(located.len());
    for (i, l) in located.iter().enumerate() {
        position.insert(&oid_of(db, l), i as u32);
    }
    let mut written_at: Vec<u64> = Vec::with_capacity(located.len());
    let mut cache = ObjectCache::new(opts.cache_bytes);
    let mut stats = PackStats::default();
    let mut w = HashingWriter {
        inner: out,
        hasher: PackChecksum::new(opts.format),
        written: 0,
    };
    let mut head = Vec::with_capacity(12);
    head.extend_from_slice(b"PACK");
    head.extend_from_slice(&2u32.to_be_bytes());
    head.extend_from_slice(&(located.len() as u32).to_be_bytes());
    w.write_all(&head)?;
    let mut header = Vec::with_capacity(32);
    let mut deflated = Vec::new();
    let mut runs = RunReader::default();
    for (i, l) in located.iter().enumerate() {
        let entry = db.container(l.container as usize).entry(l.row as usize);
        let offset = w.written;
        // A delta whose base is sent too, or is one the client has (thin):
        // sent as stored; another is resolved and sent whole.
        let base = entry.base.map(|b| (b, position.get(&b).copied()));
        match base {
            None => {
                let raw = runs.record(db, &located, i)?;
                w.write_all(raw)?;
                stats.reused += 1;
            }
            Some((base, at)) if at.is_some() || (opts.thin && client_has(&base)) => {
                let thin = at.is_none();
                let raw = runs.record(db, &located, i)?;
                let h = record::decode_header(raw, entry.oid.as_slice().len()).map_err(|e| {
                    gitstow_odb::Error::CorruptObject {
                        oid: entry.oid,
                        reason: e.to_string(),
                    }
                })?;
                header.clear();
                let base_ref = match at.and_then(|j| written_at.get(j as usize)) {
                    Some(&at) if opts.ofs_delta => BaseRef::Distance(offset - at),
                    _ => BaseRef::Oid(base),
                };
                let type_id = match base_ref {
                    BaseRef::Distance(_) => record::OFS_DELTA,
                    _ => record::REF_DELTA,
                };
                record::write_header(type_id, h.size, base_ref, &mut header);
                w.write_all(&header)?;
                w.write_all(&raw[h.len..])?;
                stats.reused += 1;
                stats.deltas += 1;
                stats.thin += u64::from(thin);
            }
            Some(_) => {
                stats.resolved += 1;
                let obj = db
                    .read(&entry.oid, &mut cache)?
                    .ok_or(PackError::Missing(entry.oid))?;
                header.clear();
                record::write_header(
                    record::type_id_from_kind(obj.kind),
                    obj.data.len() as u64,
                    BaseRef::None,
                    &mut header,
                );
                deflated.clear();
                zlib::deflate(&obj.data, &mut deflated);
                w.write_all(&header)?;
                w.write_all(&deflated)?;
            }
        }
        written_at.push(offset);
        stats.objects += 1;
    }
    let HashingWriter {
        inner,
        hasher,
        written,
    } = w;
    let trailer = hasher.finalize();
    inner.write_all(&trailer)?;
    stats.bytes = written + trailer.len() as u64;
    Ok(stats)
}
