//! zlib helpers: inflate a stream of known size, deflate a whole object.

use std::cell::RefCell;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

thread_local! {
    /// One inflate state per thread, reset between streams: a fresh one costs
    /// tens of KiB of allocation (state and window) per object otherwise.
    static INFLATE: RefCell<Decompress> = RefCell::new(Decompress::new(true));
    /// One deflate state per thread (hundreds of KiB at the default level).
    static DEFLATE: RefCell<Compress> = RefCell::new(Compress::new(Compression::default(), true));
}

/// Why a zlib stream could not be inflated to its declared size.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InflateError {
    /// The stream is not valid zlib.
    #[error("corrupt deflate stream: {0}")]
    Corrupt(String),
    /// The stream inflates to another size than the header declares.
    #[error("inflated size mismatch: expected {expected} bytes, got {actual} or more")]
    SizeMismatch {
        /// Declared size.
        expected: u64,
        /// Bytes produced.
        actual: u64,
    },
    /// The stream ends before its end marker.
    #[error("deflate stream is truncated")]
    Truncated,
}

/// Inflates `input` (one complete zlib stream) into `out`, which is cleared and
/// must end exactly `size` bytes long. Returns how many input bytes the stream used.
/// Allocates at most `size` bytes (plus a small slack to detect overlong streams).
pub fn inflate_exact(input: &[u8], size: u64, out: &mut Vec<u8>) -> Result<usize, InflateError> {
    let size_usize = usize::try_from(size).map_err(|_| InflateError::SizeMismatch {
        expected: size,
        actual: 0,
    })?;
    out.clear();
    out.reserve_exact(size_usize.saturating_add(1));
    INFLATE.with(|z| {
        let mut z = z.borrow_mut();
        z.reset(true);
        inflate_into(&mut z, input, size, size_usize, out)
    })
}

fn inflate_into(
    z: &mut Decompress,
    input: &[u8],
    size: u64,
    size_usize: usize,
    out: &mut Vec<u8>,
) -> Result<usize, InflateError> {
    loop {
        let before_in = z.total_in() as usize;
        let before_out = z.total_out();
        let status = z
            .decompress_vec(&input[before_in..], out, FlushDecompress::Finish)
            .map_err(|e| InflateError::Corrupt(e.to_string()))?;
        if out.len() > size_usize {
            return Err(InflateError::SizeMismatch {
                expected: size,
                actual: out.len() as u64,
            });
        }
        match status {
            Status::StreamEnd => break,
            Status::Ok | Status::BufError => {
                if out.len() == out.capacity() {
                    // Output full but the stream goes on: it is longer than declared.
                    out.reserve(1);
                    if out.len() > size_usize {
                        return Err(InflateError::SizeMismatch {
                            expected: size,
                            actual: out.len() as u64,
                        });
                    }
                }
                if z.total_in() as usize == before_in && z.total_out() == before_out {
                    return Err(InflateError::Truncated);
                }
            }
        }
    }
    if out.len() != size_usize {
        return Err(InflateError::SizeMismatch {
            expected: size,
            actual: out.len() as u64,
        });
    }
    Ok(z.total_in() as usize)
}

/// Deflates `data` as one zlib stream (default level), appending to `out`.
pub fn deflate(data: &[u8], out: &mut Vec<u8>) {
    DEFLATE.with(|z| {
        let mut z = z.borrow_mut();
        z.reset();
        // Incompressible data grows by a few bytes per 16 KiB block plus the header.
        out.reserve(data.len() + data.len() / 1000 + 64);
        loop {
            let consumed = z.total_in() as usize;
            let status = z
                .compress_vec(&data[consumed..], out, FlushCompress::Finish)
                .expect("deflating into a Vec cannot fail");
            if status == Status::StreamEnd {
                break;
            }
            out.reserve(out.capacity().max(64 * 1024));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_errors() {
        let data = b"some data some data some data".repeat(100);
        let mut z = Vec::new();
        deflate(&data, &mut z);
        let mut out = Vec::new();
        assert_eq!(
            inflate_exact(&z, data.len() as u64, &mut out).unwrap(),
            z.len()
        );
        assert_eq!(out, data);
        // The thread's states are reused: a second round trip gives the same bytes.
        let mut z2 = Vec::new();
        deflate(&data, &mut z2);
        assert_eq!(z2, z);
        let mut empty = Vec::new();
        deflate(b"", &mut empty);
        assert_eq!(inflate_exact(&empty, 0, &mut out).unwrap(), empty.len());
        let big: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let mut zb = Vec::new();
        deflate(&big, &mut zb);
        inflate_exact(&zb, big.len() as u64, &mut out).unwrap();
        assert_eq!(out, big);
        assert!(matches!(
            inflate_exact(&z, 10, &mut out),
            Err(InflateError::SizeMismatch { .. })
        ));
        assert!(inflate_exact(&z, data.len() as u64 + 5, &mut out).is_err());
        assert!(inflate_exact(&z[..z.len() / 2], data.len() as u64, &mut out).is_err());
        let mut bad = z.clone();
        bad[5] ^= 0xff;
        assert!(inflate_exact(&bad, data.len() as u64, &mut out).is_err());
    }
}
