//! The odb's error type.

use gix_hash::ObjectId;

/// Everything that can go wrong reading or writing a repository in a store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    // Not `transparent`: the store's error stays in the `source()` chain,
    // where `gitstow_store::is_unavailable` looks for it.
    #[error("{0}")]
    Store(#[from] gitstow_store::Error),
    /// A container index is unreadable.
    #[error("container {container}: {source}")]
    Index {
        /// The container id.
        container: String,
        /// What is wrong.
        #[source]
        source: crate::container::IndexError,
    },
    /// A ref table could not be opened (its footer or root block).
    #[error("ref table {table}: {source}")]
    Refs {
        /// The table id.
        table: String,
        /// What is wrong.
        #[source]
        source: crate::reftable::ReftableError,
    },
    /// Reading refs through their tables failed, or a table could not be
    /// written.
    #[error(transparent)]
    RefRead(#[from] crate::reftable::ReftableError),
    /// The state object is unreadable.
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    /// A stored record is corrupt.
    #[error("object {oid} is corrupt: {reason}")]
    CorruptObject {
        /// The object.
        oid: ObjectId,
        /// What is wrong.
        reason: String,
    },
    /// A delta's base is in no container.
    #[error("object {oid} is a delta against {base}, which the repository does not have")]
    MissingBase {
        /// The delta.
        oid: ObjectId,
        /// The missing base.
        base: ObjectId,
    },
    /// Local I/O (staging files).
    #[error("local I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// `Result` with the odb's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
