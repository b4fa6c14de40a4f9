//! The object database of one repository in an object store.
//!
//! A repository is a **state object** ([`state::RepoState`]: refs, symbolic
//! HEAD, peeled tags and the list of live containers) plus immutable **segment
//! containers** ([`container`]): `.bin` files of pack-native records (a pack
//! entry header and its zlib stream, exactly as `gitformat-pack(5)` stores it)
//! with a sorted `.idx` each.
//!
//! Data flow:
//! - **In** (a push): the receive side resolves each object once and hands its
//!   record to an [`staging::EncodedObjectStore`]; [`staging::ContainerStaging`]
//!   appends records to hashed staging files and seals them into containers;
//!   [`Repository::upload_container`] stores them; [`Repository::commit_state`]
//!   publishes them with the ref updates in one compare-and-swap.
//! - **Out** (a fetch): [`Repository::objects`] loads the indexes of a state into
//!   an [`objects::ObjectDb`], which finds records by oid and resolves delta
//!   chains ([`delta`]) when whole objects are needed.
#![deny(missing_docs)]

pub mod bitmap;
pub mod container;
pub mod delta;
mod error;
pub mod graph;
pub mod limit;
pub mod mapped;
pub mod objects;
pub mod oids;
pub mod pack_checksum;
pub mod recent;
pub mod record;
pub mod refs;
pub mod reftable;
pub mod repository;
pub mod retired;
pub mod staging;
pub mod state;
pub mod state_cache;
pub mod zlib;
mod zstd_frame;

pub use error::{Error, Result};
pub use objects::{LookupStats, Object, ObjectCache, ObjectDb};
pub use refs::Refs;
pub use repository::{CommitOutcome, IndexCache, Repository, SharedState, VersionedState};
pub use state::{RefSet, RepoState};
pub use state_cache::StateCache;

/// Makes room for `len` bytes in the recycled buffer `out` (capacity at
/// least `len`), before [`zlib::inflate_exact`] or [`delta::apply`] fill
/// it: rounded up to a power of two up to 1 MiB, so that a buffer reused for
/// objects of many sizes grows in a few steps rather than at every new
/// largest object (each step is a new allocation), and exactly beyond 1 MiB,
/// so that a large object never gets twice the memory it needs. Not for a
/// buffer that is kept (a cached object): its spare capacity would be
/// memory no budget counts.
pub fn reserve_rounded(out: &mut Vec<u8>, len: usize) {
    if out.capacity() < len {
        let want = if len <= 1 << 20 {
            len.next_power_of_two()
        } else {
            len
        };
        out.reserve_exact(want - out.len());
    }
}

/// 32 bytes that no other call, in this process or another, returns: the
/// SHA-256 of the process id, the clock, a counter and per-process random
/// state. Salts container ids (so no two writers share one) and names
/// maintenance lease holders.
pub fn unique_token() -> [u8; 32] {
    use sha2::{Digest, Sha256};
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(nanos);
    let mut token = Sha256::new();
    token.update(std::process::id().to_be_bytes());
    token.update(nanos.to_be_bytes());
    token.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    token.update(h.finish().to_be_bytes());
    token.finalize().into()
}

/// The object hash this build serves (`object-format=sha1`).
pub const OBJECT_HASH: gix_hash::Kind = gix_hash::Kind::Sha1;

/// The oid width in bytes of hash id `id` as a stored file names it (1
/// SHA-1, 2 SHA-256: git's commit-graph and multi-pack-index numbers, which
/// are `gix_hash::Kind`'s), or `None` for an id this build does not know.
pub(crate) fn width_of_hash_id(id: u32) -> Option<usize> {
    let kind = gix_hash::Kind::try_from(u8::try_from(id).ok()?).ok()?;
    Some(kind.len_in_bytes())
}

/// The hash id a stored file writes for a SHA-256 repository
/// ([`width_of_hash_id`]).
pub(crate) const SHA256_HASH_ID: u8 = gix_hash::Kind::Sha256 as u8;

#[cfg(test)]
mod tests {
    #[test]
    fn a_recycled_buffer_grows_in_powers_of_two_then_exactly() {
        let mut buf = Vec::new();
        super::reserve_rounded(&mut buf, 1000);
        assert_eq!(buf.capacity(), 1024);
        // Enough room already: nothing is allocated.
        super::reserve_rounded(&mut buf, 1024);
        assert_eq!(buf.capacity(), 1024);
        super::reserve_rounded(&mut buf, 1025);
        assert_eq!(buf.capacity(), 2048);
        let big = (1 << 20) + 3;
        super::reserve_rounded(&mut buf, big);
        assert_eq!(buf.capacity(), big);
    }
}
