//! Segment containers: a `.bin` of pack-native records back to back and its
//! `.idx`, named by the SHA-256 of the `.bin` (so immutable and cacheable forever).
//!
//! - [`index`]: the `.idx` format and lookups by oid.
//! - [`writer`]: appending records to a staging file and sealing it.

pub mod index;
pub mod writer;

pub use index::{ContainerIndex, IndexEntry, IndexError};
pub use writer::{ContainerWriter, SealedContainer};

/// A container's id: lowercase hex SHA-256 of its `.bin` bytes (64 characters).
pub type ContainerId = String;
