//! Segment containers: a `.bin` of pack-native records back to back and its
//! `.idx`, named by an id unique to its writer (the SHA-256 of a
//! writer-unique token and the `.idx`), so immutable and cacheable forever.
//!
//! - [`index`]: the `.idx` format and lookups by oid.
//! - [`writer`]: appending records to a staging file and sealing it.

pub mod index;
pub mod writer;

pub use index::{ContainerIndex, IndexEntry, IndexError};
pub use writer::{ContainerWriter, SealedContainer};

/// A container's id: lowercase hex SHA-256 of a writer-unique token and the
/// container's encoded index (64 characters).
pub type ContainerId = String;
