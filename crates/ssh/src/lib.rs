//! The SSH transport (plan 0011). So far: the server's host keys
//! ([`host_key`]), kept in the store so that every instance serving a
//! bucket presents the same ones.

pub mod host_key;

pub use host_key::{HostKeyError, HostKeys};
