//! What the admin commands (`token`, `access`, `key`, `webhook`, `repo`,
//! `fsck`) share: their failure type and the frame that opens the store,
//! runs the command and turns its outcome into an exit code.

use std::sync::Arc;

use gitstow_store::ObjectStore;

pub use crate::store_open::IfMissing;
use crate::store_open::StoreArgs;

/// A command's failure, said on stderr.
pub type Failure = Box<dyn std::error::Error>;

/// Opens the store (see [`crate::store_open::open`]; no container cache)
/// and runs `f`. Exit code: 0 done, 1 `f` failed (its error on stderr), 2
/// the store cannot be opened or is a local directory that does not exist
/// while `if_missing` refuses that.
pub fn run(
    store: &StoreArgs,
    if_missing: IfMissing,
    f: impl FnOnce(&Arc<dyn ObjectStore>) -> Result<(), Failure>,
) -> i32 {
    let opened = match crate::store_open::open(store, if_missing, None) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("gitstow: {why}");
            return 2;
        }
    };
    match f(&opened) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("gitstow: {e}");
            1
        }
    }
}
