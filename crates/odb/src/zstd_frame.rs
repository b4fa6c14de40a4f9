//! Decompressing a zstd frame in one allocation when it declares its size.
//!
//! States (`zstd::bulk::compress`) and container indexes (pledged size) are
//! written as frames that declare their decompressed size
//! (`ZSTD_getFrameContentSize`). Such a frame is decompressed into one
//! buffer of that size, without the stream decoder's input buffer and the
//! output's doublings; any other frame is streamed.

use std::io::Read;

/// The bytes of the zstd frame(s) in `bytes`. A frame that declares a size
/// of at most `bulk_max` bytes gets a buffer of that size (the declaration
/// is not trusted with more); otherwise the stream is read, at most
/// `read_max + 1` bytes of it, so that a caller with a limit can tell a
/// decompressed size beyond it.
///
/// # Errors
/// The bytes are not zstd, or do not decompress to what the frame declares.
pub(crate) fn decompress(bytes: &[u8], bulk_max: u64, read_max: u64) -> std::io::Result<Vec<u8>> {
    match zstd::zstd_safe::get_frame_content_size(bytes) {
        Ok(Some(size)) if size <= bulk_max => zstd::bulk::decompress(bytes, size as usize),
        _ => {
            let mut raw = Vec::new();
            zstd::stream::read::Decoder::with_buffer(bytes)?
                .take(read_max.saturating_add(1))
                .read_to_end(&mut raw)?;
            Ok(raw)
        }
    }
}
