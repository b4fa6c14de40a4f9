//! Pack entry headers, as `gitformat-pack(5)` lays them out: the type/size varint,
//! then for OFS_DELTA the negative offset encoding and for REF_DELTA the base oid.
//!
//! Container records use exactly this framing, so a record can be copied into an
//! outgoing pack without touching its zlib stream.

use gix_hash::ObjectId;

/// Pack type id of a commit (`OBJ_COMMIT`).
pub const COMMIT: u8 = 1;
/// Pack type id of a tree (`OBJ_TREE`).
pub const TREE: u8 = 2;
/// Pack type id of a blob (`OBJ_BLOB`).
pub const BLOB: u8 = 3;
/// Pack type id of an annotated tag (`OBJ_TAG`).
pub const TAG: u8 = 4;
/// Pack type id of a delta against a base at a negative offset (`OBJ_OFS_DELTA`).
pub const OFS_DELTA: u8 = 6;
/// Pack type id of a delta against a base named by oid (`OBJ_REF_DELTA`).
pub const REF_DELTA: u8 = 7;

/// Where a record's delta base is, as written in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseRef {
    /// A whole object: no base.
    None,
    /// OFS_DELTA: the base starts `distance` bytes before this record.
    Distance(u64),
    /// REF_DELTA: the base is named by oid.
    Oid(ObjectId),
}

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Pack type id (1-4, 6 or 7).
    pub type_id: u8,
    /// Inflated size in bytes of what the zlib stream holds (the object, or the delta).
    pub size: u64,
    /// The delta base, if any.
    pub base: BaseRef,
    /// Bytes the header takes; the zlib stream starts right after.
    pub len: usize,
}

/// A record header that could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    /// The bytes end inside the header.
    #[error("pack entry header is truncated")]
    Truncated,
    /// A size or distance needs more than 64 bits.
    #[error("pack entry header varint overflows 64 bits")]
    Overflow,
    /// Type ids 0 and 5 are reserved.
    #[error("invalid object type {0}")]
    InvalidType(u8),
}

/// Converts a pack type id of a whole object to its kind.
pub fn kind_from_type_id(type_id: u8) -> Option<gix_object::Kind> {
    Some(match type_id {
        COMMIT => gix_object::Kind::Commit,
        TREE => gix_object::Kind::Tree,
        BLOB => gix_object::Kind::Blob,
        TAG => gix_object::Kind::Tag,
        _ => return None,
    })
}

/// Converts an object kind to its pack type id.
pub fn type_id_from_kind(kind: gix_object::Kind) -> u8 {
    match kind {
        gix_object::Kind::Commit => COMMIT,
        gix_object::Kind::Tree => TREE,
        gix_object::Kind::Blob => BLOB,
        gix_object::Kind::Tag => TAG,
    }
}

/// Appends the type/size varint of `gitformat-pack(5)` to `out`.
pub fn write_type_and_size(type_id: u8, size: u64, out: &mut Vec<u8>) {
    let mut byte = (type_id << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// Appends the OFS_DELTA distance encoding (big-endian base-128 with the +1 bias) to `out`.
pub fn write_ofs_distance(distance: u64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 10];
    let mut pos = buf.len() - 1;
    let mut d = distance;
    buf[pos] = (d & 0x7f) as u8;
    d >>= 7;
    while d != 0 {
        d -= 1;
        pos -= 1;
        buf[pos] = 0x80 | (d & 0x7f) as u8;
        d >>= 7;
    }
    out.extend_from_slice(&buf[pos..]);
}

/// Appends a full record header (type/size and the base reference) to `out`.
pub fn write_header(type_id: u8, size: u64, base: BaseRef, out: &mut Vec<u8>) {
    write_type_and_size(type_id, size, out);
    match base {
        BaseRef::None => {}
        BaseRef::Distance(d) => write_ofs_distance(d, out),
        BaseRef::Oid(oid) => out.extend_from_slice(oid.as_slice()),
    }
}

/// Decodes the record header at the start of `bytes`; a REF_DELTA base is
/// `width` bytes (20: SHA-1, 32: SHA-256), the width of the oids of the
/// container's index ([`crate::container::ContainerIndex::oid_width`]).
pub fn decode_header(bytes: &[u8], width: usize) -> Result<RecordHeader, HeaderError> {
    let mut i = 0;
    let first = *bytes.first().ok_or(HeaderError::Truncated)?;
    i += 1;
    let type_id = (first >> 4) & 0x07;
    let mut size = u64::from(first & 0x0f);
    let mut shift = 4u32;
    let mut byte = first;
    while byte & 0x80 != 0 {
        byte = *bytes.get(i).ok_or(HeaderError::Truncated)?;
        i += 1;
        if shift > 57 {
            return Err(HeaderError::Overflow);
        }
        size |= u64::from(byte & 0x7f) << shift;
        shift += 7;
    }
    let base = match type_id {
        COMMIT | TREE | BLOB | TAG => BaseRef::None,
        OFS_DELTA => {
            let mut b = *bytes.get(i).ok_or(HeaderError::Truncated)?;
            i += 1;
            let mut d = u64::from(b & 0x7f);
            while b & 0x80 != 0 {
                b = *bytes.get(i).ok_or(HeaderError::Truncated)?;
                i += 1;
                d = d
                    .checked_add(1)
                    .and_then(|d| d.checked_mul(128))
                    .ok_or(HeaderError::Overflow)?
                    | u64::from(b & 0x7f);
            }
            BaseRef::Distance(d)
        }
        REF_DELTA => {
            let raw = bytes.get(i..i + width).ok_or(HeaderError::Truncated)?;
            i += width;
            BaseRef::Oid(ObjectId::try_from(raw).map_err(|_| HeaderError::Truncated)?)
        }
        other => return Err(HeaderError::InvalidType(other)),
    };
    Ok(RecordHeader {
        type_id,
        size,
        base,
        len: i,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        for &(t, size, base) in &[
            (BLOB, 0u64, BaseRef::None),
            (COMMIT, 15, BaseRef::None),
            (TREE, 16, BaseRef::None),
            (BLOB, 1 << 40, BaseRef::None),
            (OFS_DELTA, 1234, BaseRef::Distance(1)),
            (OFS_DELTA, 1234, BaseRef::Distance(127)),
            (OFS_DELTA, 1234, BaseRef::Distance(128)),
            (OFS_DELTA, 1, BaseRef::Distance(16511)),
            (OFS_DELTA, 1, BaseRef::Distance(u32::MAX as u64 * 7)),
            (
                REF_DELTA,
                99,
                BaseRef::Oid(ObjectId::from_bytes_or_panic(&[7; 20])),
            ),
        ] {
            let mut out = Vec::new();
            write_header(t, size, base, &mut out);
            let h = decode_header(&out, 20).unwrap();
            assert_eq!(
                (h.type_id, h.size, h.base, h.len),
                (t, size, base, out.len())
            );
            assert_eq!(
                decode_header(&out[..out.len() - 1], 20),
                Err(HeaderError::Truncated)
            );
        }
    }

    #[test]
    fn reserved_types_are_refused() {
        assert_eq!(decode_header(&[0x05], 20), Err(HeaderError::InvalidType(0)));
        assert_eq!(decode_header(&[0x55], 20), Err(HeaderError::InvalidType(5)));
    }
}
