//! [`ReadWindow`]: pass 2's reads of the spool and of the bytes pass 1
//! kept, served from a window read ahead.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Bytes of a file read ahead: one `pread` for the entries a window holds
/// instead of one each. A delta lies near its base (85% of git/git's
/// within 64 KiB after it) and a walk goes from a base to its children in
/// pack order, so most reads of the spool, and of the deltas pass 1 kept
/// in the same order, fall in the window the last one filled.
#[derive(Default)]
pub(crate) struct ReadWindow {
    /// The file's bytes from `at` on.
    buf: Vec<u8>,
    at: u64,
}

/// Bytes a [`ReadWindow`] reads at once; a read of more than a quarter
/// of it goes to the file directly.
const WINDOW: usize = 16 << 10;

impl ReadWindow {
    /// Replaces `out` with the `len` bytes at `offset` of `file`, whose
    /// bytes of interest end at `end`.
    pub(crate) fn read(
        &mut self,
        file: &File,
        end: u64,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        out.clear();
        let held = offset >= self.at && offset + len as u64 <= self.at + self.buf.len() as u64;
        if !held {
            if len > WINDOW / 4 {
                out.resize(len, 0);
                return file.read_exact_at(out, offset);
            }
            let left = usize::try_from(end.saturating_sub(offset)).unwrap_or(WINDOW);
            self.buf.resize(WINDOW.min(left).max(len), 0);
            if let Err(e) = file.read_exact_at(&mut self.buf, offset) {
                self.buf.clear();
                return Err(e);
            }
            self.at = offset;
        }
        let from = (offset - self.at) as usize;
        out.extend_from_slice(&self.buf[from..from + len]);
        Ok(())
    }
}
