//! Where LFS data lives in the store.
//!
//! - `.gitstow/lfs/objects/<oid[0..2]>/<oid>`: the bytes, once per store,
//!   written only after their SHA-256 was found to be the oid (the
//!   reserved `.gitstow/` prefix: no repository name starts with `.`).
//! - `<repo>.git/lfs/objects/<oid>`: repository `<repo>` owns the object
//!   (it uploaded the bytes itself); the marker holds the size in decimal.
//!   A repository reads only the objects it owns, so knowing an oid never
//!   gives another repository's file.
//! - `<repo>.git/lfs/locks`: the repository's file locks (JSON).
//! - `.gitstow/lfs/staging/<oid>/<upload>`: a presigned upload (S3) before
//!   verify has checked it and copied it to the object's key.
//! - `.gitstow/lfs/transfer-key`: the secret that signs transfer grants
//!   ([`crate::grant`]), shared by every instance on the store.

use crate::Oid;

/// The key of `oid`'s bytes.
pub fn object(oid: &Oid) -> String {
    let hex = oid.to_string();
    format!(".gitstow/lfs/objects/{}/{hex}", &hex[..2])
}

/// The key of repository `repo`'s marker for `oid`.
pub fn owned(repo: &str, oid: &Oid) -> String {
    format!("{}{oid}", owned_prefix(repo))
}

/// The prefix of every marker of `repo`.
pub fn owned_prefix(repo: &str) -> String {
    format!("{repo}.git/lfs/objects/")
}

/// Where a presigned upload of `oid` lands before verify checks it: one
/// key per grant (`upload` is [`crate::grant::upload_id`]'s), so uploads
/// never overwrite each other and verify finds the one its grant names.
pub fn staging(oid: &Oid, upload: &str) -> String {
    format!(".gitstow/lfs/staging/{oid}/{upload}")
}

/// The key of `repo`'s lock document ([`crate::locks`]).
pub fn locks(repo: &str) -> String {
    format!("{repo}.git/lfs/locks")
}

/// The key of the transfer-grant secret.
pub const TRANSFER_KEY: &str = ".gitstow/lfs/transfer-key";
