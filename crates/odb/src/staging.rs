//! The seam through which a push hands resolved objects to the odb.
//!
//! The receive side resolves every delta once and, for each object, calls
//! [`EncodedObjectStore::stage`] with its pack-native record. [`ContainerStaging`]
//! appends those records to hashed staging files, one per segment container,
//! rolling over to a new container at the configured size.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gix_hash::ObjectId;

use crate::container::{ContainerWriter, SealedContainer};

/// How a staged object is encoded.
#[derive(Debug, Clone, Copy)]
pub enum Encoding<'a> {
    /// The whole object as a zlib stream.
    Whole {
        /// The zlib stream, as received.
        zlib: &'a [u8],
    },
    /// The whole object as a zlib stream of `len` bytes at `offset` of
    /// `file`, copied into the container in pieces (never held in memory).
    WholeFromFile {
        /// The file holding the stream (a push's spool).
        file: &'a std::fs::File,
        /// Where the stream starts, in bytes.
        offset: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// A delta against `base` as a zlib stream of delta instructions.
    Delta {
        /// The base object's id.
        base: ObjectId,
        /// Inflated size in bytes of the delta instructions.
        delta_size: u64,
        /// The zlib stream, as received.
        zlib: &'a [u8],
        /// Delta chain depth of this object (1 = its base is whole).
        depth: u32,
    },
}

/// One resolved object with its pack-native encoding.
#[derive(Debug, Clone, Copy)]
pub struct EncodedObject<'a> {
    /// The object's id.
    pub id: ObjectId,
    /// Its kind.
    pub kind: gix_object::Kind,
    /// Its inflated size in bytes.
    pub size: u64,
    /// Its record.
    pub encoding: Encoding<'a>,
}

/// A sink for resolved objects. Implementations must be safe to call from
/// several resolver threads at once.
pub trait EncodedObjectStore: Send + Sync {
    /// Stages one object. An `Err` aborts the push.
    fn stage(&self, object: EncodedObject<'_>) -> std::io::Result<()>;
}

struct Inner {
    current: Option<ContainerWriter>,
    sealed: Vec<SealedContainer>,
    staged: u64,
}

/// Stages objects into segment containers in a local directory.
pub struct ContainerStaging {
    dir: PathBuf,
    max_container_bytes: u64,
    /// Objects the caller expects to stage (0: unknown).
    expected: u64,
    inner: Mutex<Inner>,
}

impl ContainerStaging {
    /// Stages into files under `dir`; a container is sealed once it reaches
    /// `max_container_bytes` (an object larger than that gets a container of its own).
    pub fn new(dir: &Path, max_container_bytes: u64) -> Self {
        ContainerStaging {
            dir: dir.to_owned(),
            max_container_bytes,
            expected: 0,
            inner: Mutex::new(Inner {
                current: None,
                sealed: Vec::new(),
                staged: 0,
            }),
        }
    }

    /// Expects at most `objects` objects (a pack's count): a container's
    /// table of the objects in it is allocated for those not yet staged,
    /// once, instead of growing by doubling to them.
    pub fn expecting(mut self, objects: u64) -> Self {
        self.expected = objects;
        self
    }

    /// Seals the last container and returns all containers in the order they were written.
    pub fn finish(self) -> std::io::Result<Vec<SealedContainer>> {
        let mut inner = self.inner.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = inner.current.take() {
            if !w.is_empty() {
                inner.sealed.push(w.seal()?);
            }
        }
        Ok(inner.sealed)
    }

    /// Objects staged so far.
    pub fn staged(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).staged
    }
}

impl EncodedObjectStore for ContainerStaging {
    fn stage(&self, object: EncodedObject<'_>) -> std::io::Result<()> {
        let record_len = match object.encoding {
            Encoding::Whole { zlib } => zlib.len() as u64,
            Encoding::WholeFromFile { len, .. } => len,
            Encoding::Delta { zlib, .. } => zlib.len() as u64,
        };
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let full = inner
            .current
            .as_ref()
            .is_some_and(|w| !w.is_empty() && w.len() + record_len > self.max_container_bytes);
        if full {
            let w = inner.current.take().expect("checked above");
            inner.sealed.push(w.seal()?);
        }
        if inner.current.is_none() {
            let mut w = ContainerWriter::new(&self.dir)?;
            w.reserve(self.expected.saturating_sub(inner.staged).min(1 << 24) as usize);
            inner.current = Some(w);
        }
        let w = inner.current.as_mut().expect("set above");
        if w.contains(&object.id) {
            return Ok(());
        }
        match object.encoding {
            Encoding::Whole { zlib } => {
                w.append_whole(object.id, object.kind, object.size, zlib)?
            }
            Encoding::WholeFromFile { file, offset, len } => {
                w.append_whole_from_file(object.id, object.kind, object.size, file, offset, len)?
            }
            Encoding::Delta {
                base,
                delta_size,
                zlib,
                depth,
            } => w.append_delta(
                object.id,
                object.kind,
                object.size,
                depth,
                base,
                delta_size,
                zlib,
            )?,
        }
        inner.staged += 1;
        Ok(())
    }
}
