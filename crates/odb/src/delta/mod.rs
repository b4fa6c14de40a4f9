//! Applying git deltas (`gitformat-pack(5)`, "Deltified representation"),
//! and composing them ([`compose`]).
//!
//! A delta starts with two varints (base size, result size) followed by copy
//! and insert instructions. Every instruction is bounds-checked: a delta that
//! copies outside its base or produces another size than it declares is an error,
//! never a panic or an allocation beyond the declared (and caller-bounded) size.

/// Why a delta could not be applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeltaError {
    /// The delta ends inside a header varint or an instruction.
    #[error("delta is truncated")]
    Truncated,
    /// The declared base size is not the base's size.
    #[error("delta expects a base of {expected} bytes, the base has {actual}")]
    BaseSizeMismatch {
        /// Size the delta declares.
        expected: u64,
        /// Size of the base given.
        actual: u64,
    },
    /// A copy instruction reaches outside the base.
    #[error("delta copies {offset}+{len} outside a base of {base_len} bytes")]
    CopyOutOfBounds {
        /// Copy offset.
        offset: u64,
        /// Copy length.
        len: u64,
        /// Base length.
        base_len: u64,
    },
    /// Instruction 0 is reserved.
    #[error("delta uses the reserved instruction 0")]
    ReservedInstruction,
    /// The instructions produce more or fewer bytes than declared.
    #[error("delta result has {actual} bytes, it declares {expected}")]
    ResultSizeMismatch {
        /// Declared result size.
        expected: u64,
        /// Bytes produced.
        actual: u64,
    },
    /// The declared result size is above the caller's limit.
    #[error("delta result of {size} bytes is above the limit of {limit} bytes")]
    TooLarge {
        /// Declared result size.
        size: u64,
        /// The limit.
        limit: u64,
    },
}

pub mod compose;

fn varint(d: &[u8], i: &mut usize) -> Result<u64, DeltaError> {
    let mut size = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *d.get(*i).ok_or(DeltaError::Truncated)?;
        *i += 1;
        if shift > 63 {
            return Err(DeltaError::Truncated);
        }
        size |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(size);
        }
    }
}

/// One instruction of a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Instruction<'a> {
    /// Copy `len` bytes of the base from `ofs`.
    Copy {
        /// Where in the base.
        ofs: u64,
        /// How many bytes (1 to 2^24 - 1, or 0x10000 written as none).
        len: u64,
    },
    /// Insert these bytes.
    Insert(&'a [u8]),
}

/// The instruction of `delta` at `*i`, moving `*i` past it; `None` at the end.
pub(crate) fn instruction<'a>(
    delta: &'a [u8],
    i: &mut usize,
) -> Result<Option<Instruction<'a>>, DeltaError> {
    let Some(&cmd) = delta.get(*i) else {
        return Ok(None);
    };
    *i += 1;
    if cmd & 0x80 != 0 {
        let mut ofs = 0u64;
        let mut len = 0u64;
        for bit in 0..4 {
            if cmd & (1 << bit) != 0 {
                ofs |= u64::from(*delta.get(*i).ok_or(DeltaError::Truncated)?) << (8 * bit);
                *i += 1;
            }
        }
        for bit in 0..3 {
            if cmd & (0x10 << bit) != 0 {
                len |= u64::from(*delta.get(*i).ok_or(DeltaError::Truncated)?) << (8 * bit);
                *i += 1;
            }
        }
        if len == 0 {
            len = 0x10000;
        }
        Ok(Some(Instruction::Copy { ofs, len }))
    } else if cmd == 0 {
        Err(DeltaError::ReservedInstruction)
    } else {
        let len = cmd as usize;
        let data = delta.get(*i..*i + len).ok_or(DeltaError::Truncated)?;
        *i += len;
        Ok(Some(Instruction::Insert(data)))
    }
}

/// Reads the (base size, result size) header of `delta`.
pub fn sizes(delta: &[u8]) -> Result<(u64, u64), DeltaError> {
    let mut i = 0;
    Ok((varint(delta, &mut i)?, varint(delta, &mut i)?))
}

/// Applies `delta` to `base`, writing the result into `out` (cleared first).
/// `limit` bounds the declared result size in bytes before anything is allocated.
pub fn apply(base: &[u8], delta: &[u8], limit: u64, out: &mut Vec<u8>) -> Result<(), DeltaError> {
    let mut i = 0;
    let base_size = varint(delta, &mut i)?;
    let result_size = varint(delta, &mut i)?;
    if base_size != base.len() as u64 {
        return Err(DeltaError::BaseSizeMismatch {
            expected: base_size,
            actual: base.len() as u64,
        });
    }
    if result_size > limit {
        return Err(DeltaError::TooLarge {
            size: result_size,
            limit,
        });
    }
    out.clear();
    out.reserve_exact(result_size as usize);
    while let Some(ins) = instruction(delta, &mut i)? {
        match ins {
            Instruction::Copy { ofs, len } => {
                let end = ofs + len;
                if end > base.len() as u64 {
                    return Err(DeltaError::CopyOutOfBounds {
                        offset: ofs,
                        len,
                        base_len: base.len() as u64,
                    });
                }
                if out.len() as u64 + len > result_size {
                    return Err(DeltaError::ResultSizeMismatch {
                        expected: result_size,
                        actual: out.len() as u64 + len,
                    });
                }
                out.extend_from_slice(&base[ofs as usize..end as usize]);
            }
            Instruction::Insert(data) => {
                if (out.len() + data.len()) as u64 > result_size {
                    return Err(DeltaError::ResultSizeMismatch {
                        expected: result_size,
                        actual: (out.len() + data.len()) as u64,
                    });
                }
                out.extend_from_slice(data);
            }
        }
    }
    if out.len() as u64 != result_size {
        return Err(DeltaError::ResultSizeMismatch {
            expected: result_size,
            actual: out.len() as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_and_insert() {
        let base = b"hello world";
        // base 11, result 11: copy 0..6 ("hello "), insert "there"
        let delta = [11, 11, 0x90, 6, 5, b't', b'h', b'e', b'r', b'e'];
        let mut out = Vec::new();
        apply(base, &delta, 1 << 20, &mut out).unwrap();
        assert_eq!(out, b"hello there");
    }

    #[test]
    fn refuses_bad_deltas() {
        let base = b"abc";
        let mut out = Vec::new();
        assert!(matches!(
            apply(base, &[3, 5, 0x91, 2, 5], 100, &mut out),
            Err(DeltaError::CopyOutOfBounds { .. })
        ));
        assert!(matches!(
            apply(base, &[4, 1, 1, b'x'], 100, &mut out),
            Err(DeltaError::BaseSizeMismatch { .. })
        ));
        assert!(matches!(
            apply(base, &[3, 2, 1, b'x'], 100, &mut out),
            Err(DeltaError::ResultSizeMismatch { .. })
        ));
        assert_eq!(
            apply(base, &[3, 1, 0], 100, &mut out),
            Err(DeltaError::ReservedInstruction)
        );
        assert_eq!(
            apply(base, &[3, 9, 5, b'x'], 100, &mut out),
            Err(DeltaError::Truncated)
        );
        assert!(matches!(
            apply(base, &[3, 0xff, 0xff, 0xff, 0x7f], 100, &mut out),
            Err(DeltaError::TooLarge { .. })
        ));
    }
}
