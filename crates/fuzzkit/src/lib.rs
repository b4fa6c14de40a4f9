//! Shared pieces of the proptest fuzz harnesses (dev-only, not published):
//! the case count from `GITSTOW_FUZZ_CASES` (default 256, so a normal test run
//! stays short; a campaign sets it higher) and byte-level mutations of valid
//! inputs (bit flips, overwrites, truncation, insertion, deletion, duplication).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use proptest::prelude::*;

/// Cases per property: `GITSTOW_FUZZ_CASES`, default 256.
pub fn cases() -> u32 {
    std::env::var("GITSTOW_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// A proptest config with [`cases`] cases and no failure files.
pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum Mutation {
    Flip {
        at: prop::sample::Index,
        bits: u8,
    },
    Set {
        at: prop::sample::Index,
        byte: u8,
    },
    Truncate {
        at: prop::sample::Index,
    },
    Insert {
        at: prop::sample::Index,
        bytes: Vec<u8>,
    },
    Delete {
        at: prop::sample::Index,
        len: usize,
    },
    Duplicate {
        at: prop::sample::Index,
        len: usize,
    },
}

/// Any single [`Mutation`].
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), 1u8..).prop_map(|(at, bits)| Mutation::Flip { at, bits }),
        (any::<prop::sample::Index>(), any::<u8>())
            .prop_map(|(at, byte)| Mutation::Set { at, byte }),
        any::<prop::sample::Index>().prop_map(|at| Mutation::Truncate { at }),
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(any::<u8>(), 1..8)
        )
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<prop::sample::Index>(), 1usize..16)
            .prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<prop::sample::Index>(), 1usize..32)
            .prop_map(|(at, len)| Mutation::Duplicate { at, len }),
    ]
}

/// Applies `mutations` in order; indices wrap into the current length.
pub fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let n = bytes.len();
        match m {
            Mutation::Flip { at, bits } if n > 0 => bytes[at.index(n)] ^= bits,
            Mutation::Set { at, byte } if n > 0 => bytes[at.index(n)] = *byte,
            Mutation::Truncate { at } => bytes.truncate(at.index(n + 1)),
            Mutation::Insert { at, bytes: ins } => {
                let at = at.index(n + 1);
                bytes.splice(at..at, ins.iter().copied());
            }
            Mutation::Delete { at, len } if n > 0 => {
                let at = at.index(n);
                bytes.drain(at..(at + len).min(n));
            }
            Mutation::Duplicate { at, len } if n > 0 => {
                let at = at.index(n);
                let piece = bytes[at..(at + len).min(n)].to_vec();
                bytes.splice(at..at, piece);
            }
            _ => {}
        }
    }
    bytes
}
