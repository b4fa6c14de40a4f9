//! zlib helpers: inflate a stream of known size, deflate a whole object.

use flate2::{Decompress, FlushDecompress, Status};

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
    out.reserve_exact(size_usize + 1);
    let mut z = Decompress::new(true);
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
    use std::io::Write;
    let mut enc = flate2::write::ZlibEncoder::new(out, flate2::Compression::default());
    enc.write_all(data).expect("writing to a Vec cannot fail");
    enc.finish().expect("writing to a Vec cannot fail");
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
