//! Bytes the index cache holds outside the heap: a decoded container index
//! or a commit graph written once to an unlinked file and mapped read-only,
//! as git maps its `.idx` and `commit-graph` files (`gitformat-pack(5)`).
//!
//! Resident memory then holds the pages a request touches, not the whole
//! index: a lookup touches two to four pages of a large container's oids
//! and one of its rows, and an incremental fetch or push of git/git touches
//! a few hundred kilobytes of its 18.5 MB of index. The rest is the
//! kernel's page cache, written back to the file's disk and reclaimed under
//! memory pressure like git's own files (so the directory should be on a
//! disk, not a tmpfs, where the pages would stay in memory).
//!
//! Only values of at least [`MIN_MAPPED_BYTES`] are mapped: the many small
//! indexes of single pushes stay on the heap (a mapping costs a page at
//! least and one of the process's `vm.max_map_count` areas).

use std::io::{BufWriter, Write};
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// Smallest value worth a mapping, in bytes.
pub const MIN_MAPPED_BYTES: usize = 256 << 10;

/// Bytes written to a mapped file at a time.
const WRITE_BYTES: usize = 64 << 10;

/// Where mapped values' files are made (each unlinked as soon as it is
/// created; the mapping keeps its pages until the value is dropped).
#[derive(Debug, Clone)]
pub struct MapDir {
    dir: PathBuf,
}

impl MapDir {
    /// Values of at least [`MIN_MAPPED_BYTES`] are mapped from files in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        MapDir { dir: dir.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A read-only mapping of the `len` bytes `write` writes to a new
    /// unlinked file here; `None` when `len` is under [`MIN_MAPPED_BYTES`]
    /// (nothing is written) or the file cannot be made, written to `len`
    /// bytes or mapped (logged: the caller keeps its value on the heap).
    pub(crate) fn map(
        &self,
        len: usize,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Option<memmap2::Mmap> {
        if len < MIN_MAPPED_BYTES {
            return None;
        }
        self.try_map(len, write)
            .map_err(|e| {
                tracing::warn!(dir = %self.dir.display(), error = %e, "kept on the heap: cannot map");
            })
            .ok()
    }

    fn try_map(
        &self,
        len: usize,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<memmap2::Mmap> {
        let file = tempfile::tempfile_in(&self.dir)?;
        // Written 64 KiB at a time: the page cache's folios follow the
        // writes' size, and a read fault maps a whole folio (measured on
        // ext4, Linux 6.18: a touch maps 64 KiB after 64 KiB writes, 1 MiB
        // after one large write), so small writes keep a lookup's pages few.
        let mut out = BufWriter::with_capacity(WRITE_BYTES, &file);
        write(&mut out)?;
        out.flush()?;
        drop(out);
        let written = file.metadata()?.len();
        if written != len as u64 {
            return Err(std::io::Error::other(format!(
                "wrote {written} bytes of {len}"
            )));
        }
        // SAFETY: the file is private to this process (unlinked at creation,
        // its descriptor dropped after this call) and never written again, so
        // the mapped bytes cannot change under the slice.
        unsafe { memmap2::Mmap::map(&file) }
    }
}

/// [`Held::release_pages`] of a mapping.
pub(crate) fn release(map: &memmap2::Mmap) {
    // SAFETY: the mapping is a read-only, private mapping of a file nobody
    // writes ([`MapDir::map`]): dropping its pages loses nothing, a later
    // read faults the same bytes back in from the page cache (or the file).
    if let Err(e) = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) } {
        tracing::debug!(error = %e, "madvise(MADV_DONTNEED) failed");
    }
}

/// Immutable bytes on the heap or mapped from a [`MapDir`] file.
pub(crate) enum Held {
    Heap(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl Held {
    /// `bytes` mapped from a file in `dir` when they are large enough and
    /// the mapping succeeds (see [`MapDir::map`]), else kept on the heap.
    pub(crate) fn spill(bytes: Vec<u8>, dir: &MapDir) -> Held {
        let written = dir.map(bytes.len(), |w| {
            bytes.chunks(WRITE_BYTES).try_for_each(|c| w.write_all(c))
        });
        match written {
            Some(map) => Held::Mapped(map),
            None => Held::Heap(bytes),
        }
    }

    /// Whether the bytes are mapped.
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Held::Mapped(_))
    }

    /// Unmaps the pages read so far from this process (`madvise(2)`
    /// `MADV_DONTNEED`): they leave its resident set and stay in the page
    /// cache, so the next read maps them again without reading the disk.
    pub(crate) fn release_pages(&self) {
        if let Held::Mapped(m) = self {
            release(m);
        }
    }
}

impl Deref for Held {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Held::Heap(v) => v,
            Held::Mapped(m) => m,
        }
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = if self.is_mapped() { "mapped" } else { "heap" };
        write!(f, "Held({place}, {} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_values_are_mapped_and_small_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let md = MapDir::new(dir.path());
        let big: Vec<u8> = (0..MIN_MAPPED_BYTES + 7).map(|i| i as u8).collect();
        let held = Held::spill(big.clone(), &md);
        assert!(held.is_mapped());
        assert_eq!(&*held, &big[..]);
        // The file is unlinked at once: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let rss = || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            status
                .lines()
                .find_map(|l| l.strip_prefix("RssFile:"))
                .map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().unwrap())
        };
        // Released pages leave the resident set; the bytes read the same after.
        let sum: u64 = held.iter().step_by(4096).map(|&b| u64::from(b)).sum();
        let touched = rss().unwrap();
        held.release_pages();
        assert!(
            rss().unwrap() < touched,
            "released pages are no longer resident"
        );
        assert_eq!(
            held.iter()
                .step_by(4096)
                .map(|&b| u64::from(b))
                .sum::<u64>(),
            sum
        );
        let small = Held::spill(vec![1, 2, 3], &md);
        assert!(!small.is_mapped());
        assert_eq!(&*small, &[1, 2, 3]);
    }

    #[test]
    fn an_unusable_directory_keeps_the_bytes_on_the_heap() {
        let md = MapDir::new("/nonexistent/gitstow-map-dir");
        let big = vec![7u8; MIN_MAPPED_BYTES];
        let held = Held::spill(big.clone(), &md);
        assert!(!held.is_mapped());
        assert_eq!(&*held, &big[..]);
    }
}
