//! Composing git deltas: from a delta `A` (base → X) and a delta `B`
//! (X → Y), the delta base → Y, without the bytes of any object
//! (`gitformat-pack(5)`, "Deltified representation").
//!
//! A push may bring a delta chain deeper than the depth the store keeps
//! (`max_stored_depth`). Rather than storing the objects beyond it whole,
//! the resolver re-bases them on an object higher up the chain: the delta
//! against that object is the composition of the chain's deltas between
//! them, exact and made in time proportional to their instructions.
//!
//! A [`Composed`] is the result X of a delta as segments of X, each a
//! copy from the base or literal bytes; [`Composed::then`] maps every copy
//! of the next delta through them. Adjacent copies that continue each other
//! are merged, so composing deltas that each copy most of their base and
//! insert a little stays as small as the inserts.

use super::{instruction, varint, DeltaError, Instruction};

/// Most bytes one copy instruction moves (its size has three bytes).
const MAX_COPY: u64 = 0xff_ffff;
/// Most bytes one insert instruction carries.
const MAX_INSERT: usize = 0x7f;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// From the base at this offset.
    Base(u64),
    /// From `lits` at this offset.
    Literal(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    /// Where the segment starts in the result.
    at: u64,
    len: u64,
    from: Source,
}

/// The result of a delta (or of a chain of them) described from its base:
/// copies of base ranges and literal bytes, in result order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composed {
    base_size: u64,
    size: u64,
    segments: Vec<Segment>,
    lits: Vec<u8>,
}

impl Composed {
    /// The identity on a base of `base_size` bytes (its result is the base).
    pub fn identity(base_size: u64) -> Self {
        let segments = if base_size == 0 {
            Vec::new()
        } else {
            vec![Segment {
                at: 0,
                len: base_size,
                from: Source::Base(0),
            }]
        };
        Composed {
            base_size,
            size: base_size,
            segments,
            lits: Vec::new(),
        }
    }

    /// The size of the base, in bytes.
    pub fn base_size(&self) -> u64 {
        self.base_size
    }

    /// The size of the result, in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// About how many bytes [`Composed::encode`] writes (an upper bound:
    /// eight bytes a copy, one a literal run of up to 127 bytes, the
    /// literals, the header): what keeping this composition costs.
    pub fn encoded_bound(&self) -> u64 {
        let mut n = 20u64;
        for s in &self.segments {
            n += match s.from {
                Source::Base(_) => 8 * s.len.div_ceil(MAX_COPY),
                Source::Literal(_) => s.len + s.len.div_ceil(MAX_INSERT as u64),
            };
        }
        n
    }

    /// This followed by `delta`, whose base is this composition's result:
    /// the composition from this base to `delta`'s result.
    ///
    /// # Errors
    /// `delta` is malformed, or its base is not this result (its declared
    /// base size differs, or a copy reaches past the result's end).
    pub fn then(&self, delta: &[u8]) -> Result<Composed, DeltaError> {
        let mut i = 0;
        let base_size = varint(delta, &mut i)?;
        let result_size = varint(delta, &mut i)?;
        if base_size != self.size {
            return Err(DeltaError::BaseSizeMismatch {
                expected: base_size,
                actual: self.size,
            });
        }
        let mut out = Composed {
            base_size: self.base_size,
            size: 0,
            segments: Vec::new(),
            lits: Vec::new(),
        };
        while let Some(ins) = instruction(delta, &mut i)? {
            match ins {
                Instruction::Copy { ofs, len } => {
                    if ofs + len > self.size {
                        return Err(DeltaError::CopyOutOfBounds {
                            offset: ofs,
                            len,
                            base_len: self.size,
                        });
                    }
                    self.copy_into(&mut out, ofs, len);
                }
                Instruction::Insert(data) => out.push_literal(data),
            }
            if out.size > result_size {
                return Err(DeltaError::ResultSizeMismatch {
                    expected: result_size,
                    actual: out.size,
                });
            }
        }
        if out.size != result_size {
            return Err(DeltaError::ResultSizeMismatch {
                expected: result_size,
                actual: out.size,
            });
        }
        Ok(out)
    }

    /// Appends to `out` the result range `ofs..ofs + len` of `self`.
    fn copy_into(&self, out: &mut Composed, ofs: u64, len: u64) {
        let end = ofs + len;
        // The segment holding `ofs`: the last one starting at or before it.
        let mut k = self.segments.partition_point(|s| s.at <= ofs) - 1;
        let mut pos = ofs;
        while pos < end {
            let s = self.segments[k];
            let skip = pos - s.at;
            let take = (s.len - skip).min(end - pos);
            match s.from {
                Source::Base(b) => out.push_copy(b + skip, take),
                Source::Literal(l) => {
                    let from = l + skip as usize;
                    let bytes = &self.lits[from..from + take as usize];
                    out.push_literal(bytes);
                }
            }
            pos += take;
            k += 1;
        }
    }

    fn push_copy(&mut self, base_ofs: u64, len: u64) {
        if let Some(last) = self.segments.last_mut() {
            if let Source::Base(b) = last.from {
                if b + last.len == base_ofs {
                    last.len += len;
                    self.size += len;
                    return;
                }
            }
        }
        self.segments.push(Segment {
            at: self.size,
            len,
            from: Source::Base(base_ofs),
        });
        self.size += len;
    }

    fn push_literal(&mut self, bytes: &[u8]) {
        let len = bytes.len() as u64;
        let continues = matches!(
            self.segments.last(),
            Some(Segment { from: Source::Literal(l), len: n, .. }) if *l + *n as usize == self.lits.len()
        );
        self.lits.extend_from_slice(bytes);
        if continues {
            let last = self.segments.last_mut().expect("checked");
            last.len += len;
        } else {
            self.segments.push(Segment {
                at: self.size,
                len,
                from: Source::Literal(self.lits.len() - bytes.len()),
            });
        }
        self.size += len;
    }

    /// Writes this composition as a git delta (header, then copy and
    /// insert instructions) into `out`, cleared first.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        push_varint(out, self.base_size);
        push_varint(out, self.size);
        for s in &self.segments {
            match s.from {
                Source::Base(b) => {
                    let mut done = 0;
                    while done < s.len {
                        let n = (s.len - done).min(MAX_COPY);
                        push_copy(out, b + done, n);
                        done += n;
                    }
                }
                Source::Literal(l) => {
                    for chunk in self.lits[l..l + s.len as usize].chunks(MAX_INSERT) {
                        out.push(chunk.len() as u8);
                        out.extend_from_slice(chunk);
                    }
                }
            }
        }
    }
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// One copy instruction of `len` (1..=0xffffff) bytes from `ofs` (< 2^32).
fn push_copy(out: &mut Vec<u8>, ofs: u64, len: u64) {
    let at = out.len();
    out.push(0x80);
    let mut cmd = 0x80u8;
    for bit in 0..4 {
        let b = (ofs >> (8 * bit)) as u8;
        if b != 0 {
            cmd |= 1 << bit;
            out.push(b);
        }
    }
    // A size of 0x10000 may be written as none, as git does.
    if len != 0x10000 {
        for bit in 0..3 {
            let b = (len >> (8 * bit)) as u8;
            if b != 0 {
                cmd |= 0x10 << bit;
                out.push(b);
            }
        }
    }
    out[at] = cmd;
}

#[cfg(test)]
mod tests {
    use super::super::apply;
    use super::*;
    use proptest::prelude::*;

    /// A delta from `base` to a result made of `ops`: copies of base ranges
    /// and inserts, as a client's pack would carry.
    fn delta_of(base_len: u64, ops: &[(bool, u64, u64, Vec<u8>)]) -> (Vec<u8>, u64) {
        let mut body = Vec::new();
        let mut size = 0;
        for (copy, ofs, len, lit) in ops {
            if *copy && base_len > 0 {
                let ofs = ofs % base_len;
                let len = 1 + len % (base_len - ofs);
                push_copy(&mut body, ofs, len);
                size += len;
            } else if !lit.is_empty() {
                for chunk in lit.chunks(MAX_INSERT) {
                    body.push(chunk.len() as u8);
                    body.extend_from_slice(chunk);
                    size += chunk.len() as u64;
                }
            }
        }
        let mut d = Vec::new();
        push_varint(&mut d, base_len);
        push_varint(&mut d, size);
        d.extend_from_slice(&body);
        (d, size)
    }

    fn op() -> impl Strategy<Value = (bool, u64, u64, Vec<u8>)> {
        (
            any::<bool>(),
            any::<u64>(),
            0u64..70_000,
            proptest::collection::vec(any::<u8>(), 0..300),
        )
    }

    proptest! {
        /// Applying the composition of a chain of deltas gives what applying
        /// them one after another gives.
        #[test]
        fn composing_equals_applying_in_turn(
            base in proptest::collection::vec(any::<u8>(), 0..90_000),
            chain in proptest::collection::vec(proptest::collection::vec(op(), 1..12), 1..6),
        ) {
            let mut composed = Composed::identity(base.len() as u64);
            let mut current = base.clone();
            let mut next = Vec::new();
            for ops in &chain {
                let (d, _) = delta_of(current.len() as u64, ops);
                apply(&current, &d, u64::MAX, &mut next).unwrap();
                composed = composed.then(&d).unwrap();
                std::mem::swap(&mut current, &mut next);
            }
            let mut encoded = Vec::new();
            composed.encode(&mut encoded);
            prop_assert!(encoded.len() as u64 <= composed.encoded_bound());
            let mut out = Vec::new();
            apply(&base, &encoded, u64::MAX, &mut out).unwrap();
            prop_assert_eq!(out, current);
        }
    }

    #[test]
    fn small_edits_compose_to_small_deltas() {
        // 1,000 deltas each copying all of a 1 MB base and appending 4 bytes.
        let mut size = 1u64 << 20;
        let mut composed = Composed::identity(size);
        for i in 0..1000u32 {
            let mut d = Vec::new();
            push_varint(&mut d, size);
            push_varint(&mut d, size + 4);
            let mut done = 0;
            while done < size {
                let n = (size - done).min(MAX_COPY);
                push_copy(&mut d, done, n);
                done += n;
            }
            d.push(4);
            d.extend_from_slice(&i.to_be_bytes());
            composed = composed.then(&d).unwrap();
            size += 4;
        }
        let mut encoded = Vec::new();
        composed.encode(&mut encoded);
        assert!(encoded.len() < 4_100, "{}", encoded.len());
    }

    #[test]
    fn refuses_deltas_that_do_not_fit() {
        let c = Composed::identity(3);
        assert!(matches!(
            c.then(&[4, 1, 1, b'x']),
            Err(DeltaError::BaseSizeMismatch { .. })
        ));
        assert!(matches!(
            c.then(&[3, 5, 0x91, 2, 5]),
            Err(DeltaError::CopyOutOfBounds { .. })
        ));
        assert!(matches!(
            c.then(&[3, 2, 1, b'x']),
            Err(DeltaError::ResultSizeMismatch { .. })
        ));
        assert_eq!(c.then(&[3, 1, 0]), Err(DeltaError::ReservedInstruction));
        assert_eq!(c.then(&[3, 9, 5, b'x']), Err(DeltaError::Truncated));
    }
}
