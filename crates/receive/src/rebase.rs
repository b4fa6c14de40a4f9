//! Where the objects of a delta chain deeper than the stored depth cap go.
//!
//! A pack may chain deltas deeper than the store keeps (`max_stored_depth`,
//! git's `pack.depth` of 50): git's index-pack keeps such chains, gitstow
//! bounds what a read replays. Storing every object beyond the cap whole
//! turned a 1.5 MB pack (a 1 MB blob and 10,000 small deltas in one chain)
//! into 189 MB. Instead, as git's `pack-objects --depth` does by choosing
//! other bases, the chain is re-based: the first object beyond the cap is
//! stored whole and starts a *scheme* S; from there on, along the chain,
//!
//! - every `block`-th object (a *head*, number j = steps / block) is stored
//!   as a delta against an earlier head, the one whose number is j with its
//!   lowest set bits cleared (head 0 is S): the composition of the chain's
//!   deltas between them ([`gitstow_odb::delta::compose`]), as a Fenwick
//!   tree links its nodes, so a head's depth is at most the popcount of j;
//! - the other objects keep their own delta against their parent.
//!
//! Depths stay at most popcount(j) + block − 1 (≤ 41 for the 10,000-deep
//! chains a push may carry, with the cap at 50), and the stored deltas add
//! about (1 + log2(steps / block) / 2) times the chain's own: each delta of
//! the chain is part of that many compositions. An object whose placement
//! would still pass the cap (a chain through objects the repository already
//! holds deep) is stored whole and starts a new scheme.
//!
//! A chain that *branches* past the cap needs one more thing: each of the
//! siblings past the cap would be the first object of its own path beyond
//! it, each stored whole (a 1 MiB blob, a chain 50 deep on it and 1,000
//! siblings off the 50th were stored as 1.05 GB). So a path whose subtree
//! can reach past the cap keeps an [`Anchor`]: its last object at a depth
//! that leaves the object placed against it room to be a scheme's first
//! head (`cap - block - 1`), and the composition of the chain's deltas
//! from it down to the current object. The first object past
//! the cap on the path is stored as a delta against the anchor instead of
//! whole, and its scheme starts there; every sibling does the same, so a
//! fan costs its own deltas plus the composition, not a whole object each.

use gitstow_odb::delta::compose::Composed;
use gitstow_odb::delta::DeltaError;
use gix_hash::ObjectId;

/// Bases from this size on are no base for a much smaller object: 16 MiB.
const LARGE_BASE: usize = 16 << 20;

/// Whether an object of `size` bytes made from a base of `base_len` bytes
/// is stored whole rather than as a delta: a base of [`LARGE_BASE`] or more
/// and an object under a sixteenth of it. Reading such a delta inflates the
/// whole base for a few bytes: 200 blobs of 16 bytes as deltas of a 256 MiB
/// base made `gitstow fsck` take 147 s (git fsck 1.9 s, which resolves
/// them base first); stored whole they cost their own bytes.
pub(crate) fn too_small_for_its_base(size: u64, base_len: usize) -> bool {
    base_len >= LARGE_BASE && size < (base_len / 16) as u64
}

/// Where one object of the chain goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Its own delta against its parent, at this depth.
    Parent(u32),
    /// This delta (git's delta format, not compressed) against `base`.
    Rebased {
        /// The head it is a delta against.
        base: ObjectId,
        /// Its depth.
        depth: u32,
        /// The composed delta.
        delta: Vec<u8>,
    },
    /// Whole (depth 0); a new scheme starts at it.
    Whole,
}

#[derive(Debug, Clone)]
struct Head {
    j: u64,
    oid: ObjectId,
    depth: u32,
    /// From this head to the current object.
    composed: Composed,
}

/// The re-basing state of one path down a chain (cloned where the chain
/// branches).
#[derive(Debug, Clone)]
pub(crate) struct Rebase {
    block: u64,
    steps: u64,
    /// The heads whose numbers are binary prefixes of the last head's, in
    /// increasing order (head 0 first, while its composition is worth
    /// keeping).
    heads: Vec<Head>,
}

/// Largest object a scheme composes deltas for: a copy instruction
/// addresses 4 bytes of offset.
const MAX_COMPOSED_OBJECT: u64 = u32::MAX as u64;

/// Largest composition kept for a head (its encoded size; held in memory
/// at about four times that): beyond it, or beyond the object's own size,
/// the head is no base any more. At most log2(chain / block) + 1 heads are
/// open on a path, so a path holds at most a few tens of MiB.
const MAX_HEAD_BYTES: u64 = 1 << 20;

/// The re-basing state of one path down a chain: a scheme once it
/// passed the stored depth cap, and before that, the anchor its first
/// object past the cap goes to (cloned where the chain branches).
#[derive(Debug, Clone, Default)]
pub(crate) struct PathRebase {
    /// The scheme, once the path passed the cap.
    pub(crate) scheme: Option<Rebase>,
    /// The anchor, while no scheme runs and the path's subtree may pass
    /// the cap.
    pub(crate) anchor: Option<Anchor>,
}

impl PathRebase {
    /// Where the object that `delta` makes from the path's current object
    /// goes (`oid`, `size` bytes; the parent stored at `parent_depth`;
    /// `existing`: its depth when the repository holds it already, which
    /// it keeps): the scheme's placement once one runs; else its parent's
    /// delta within `cap`, past it a delta against the anchor, or whole.
    ///
    /// # Errors
    /// `delta` does not apply to the current object.
    pub(crate) fn place(
        &mut self,
        delta: &[u8],
        oid: ObjectId,
        size: u64,
        parent_depth: u32,
        existing: Option<u32>,
        cap: u32,
    ) -> Result<Placement, DeltaError> {
        if let Some(scheme) = self.scheme.as_mut() {
            return scheme.step(delta, oid, size, parent_depth, existing, cap);
        }
        let depth = existing.unwrap_or(parent_depth + 1);
        if depth <= cap {
            return Ok(Placement::Parent(depth));
        }
        match self.anchor.as_ref().filter(|_| existing.is_none()) {
            Some(anchor) => Ok(anchor.place(delta, size)?.unwrap_or(Placement::Whole)),
            None => Ok(Placement::Whole),
        }
    }

    /// Whether `placement` (from [`PathRebase::place`]) starts a scheme:
    /// an object stored whole, or the first one past the cap, placed
    /// against the anchor.
    pub(crate) fn starts_scheme(&self, placement: &Placement) -> bool {
        matches!(
            (placement, &self.scheme),
            (Placement::Whole, _) | (Placement::Rebased { .. }, None)
        )
    }

    /// Follows the path to the object just placed (`oid`, `size` bytes,
    /// stored at `depth`, made by `delta`; `height`: how deep its subtree
    /// goes in the pack). A scheme starts at it when `starts_scheme`, and
    /// the anchor has served; before a scheme runs, the anchor restarts
    /// at each object shallow enough to be one whose subtree goes past
    /// the cap (never in a pack made with a depth of at most the cap, as
    /// git's are), and follows the path down from there.
    ///
    /// # Errors
    /// `delta` does not apply to the anchor's current object.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn follow(
        &mut self,
        starts_scheme: bool,
        delta: &[u8],
        oid: ObjectId,
        size: u64,
        depth: u32,
        height: u16,
        cap: u32,
    ) -> Result<(), DeltaError> {
        if starts_scheme {
            self.scheme = Rebase::start(oid, size, depth, cap);
            self.anchor = None;
        } else if self.scheme.is_none() {
            self.anchor = if depth <= anchor_depth(cap) {
                (u32::from(height) > cap.saturating_sub(depth))
                    .then(|| Anchor::start(oid, size, depth))
                    .flatten()
            } else {
                match self.anchor.take() {
                    Some(anchor) => anchor.step(delta, size)?,
                    None => None,
                }
            };
        }
        Ok(())
    }

    /// Bytes the state holds (its compositions).
    pub(crate) fn held_bytes(&self) -> u64 {
        self.scheme.as_ref().map_or(0, Rebase::held_bytes)
            + self
                .anchor
                .as_ref()
                .map_or(0, |a| a.composed.encoded_bound())
    }
}

/// An object of a path at most [`anchor_depth`] deep (a scheme's first head
/// fits there) and the composition from it to the path's current object.
#[derive(Debug, Clone)]
pub(crate) struct Anchor {
    oid: ObjectId,
    depth: u32,
    composed: Composed,
}

/// The deepest an anchor may be for a cap of `cap`: the object placed
/// against it, one deeper, is a scheme's first head, which needs room for
/// a block after it (`Rebase::step`: a head's depth + block within the
/// cap).
pub(crate) fn anchor_depth(cap: u32) -> u32 {
    cap.saturating_sub(block_of(cap) as u32 + 1)
}

/// A scheme's block for a cap of `cap`.
fn block_of(cap: u32) -> u64 {
    u64::from(cap * 2 / 3).max(1)
}

impl Anchor {
    /// An anchor at the object `oid` of `size` bytes stored at `depth`;
    /// `None` when the object is too large to compose deltas from.
    pub(crate) fn start(oid: ObjectId, size: u64, depth: u32) -> Option<Anchor> {
        (size <= MAX_COMPOSED_OBJECT).then(|| Anchor {
            oid,
            depth,
            composed: Composed::identity(size),
        })
    }

    /// Follows the path one object down (`delta` makes the object of
    /// `size` bytes from the current one); `None` when the composition
    /// grew past what is worth keeping (the object's size, or 1 MiB).
    ///
    /// # Errors
    /// `delta` does not apply to the current object.
    pub(crate) fn step(self, delta: &[u8], size: u64) -> Result<Option<Anchor>, DeltaError> {
        let composed = self.composed.then(delta)?;
        Ok((composed.encoded_bound() <= size.clamp(64, MAX_HEAD_BYTES))
            .then_some(Anchor { composed, ..self }))
    }

    /// Where the object that `delta` makes from the current one (of `size`
    /// bytes) goes instead of whole: a delta against the anchor, one
    /// deeper than it; `None` when that delta would be larger than the
    /// object or 1 MiB.
    ///
    /// # Errors
    /// `delta` does not apply to the current object.
    pub(crate) fn place(&self, delta: &[u8], size: u64) -> Result<Option<Placement>, DeltaError> {
        let composed = self.composed.then(delta)?;
        if composed.encoded_bound() > size.clamp(64, MAX_HEAD_BYTES) {
            return Ok(None);
        }
        let mut out = Vec::new();
        composed.encode(&mut out);
        Ok(Some(Placement::Rebased {
            base: self.oid,
            depth: self.depth + 1,
            delta: out,
        }))
    }
}

impl Rebase {
    /// A scheme starting at the object `oid` of `size` bytes stored whole
    /// (or already held at depth `depth`), for a depth cap of `cap`; `None`
    /// when the object is too large to compose deltas from.
    pub(crate) fn start(oid: ObjectId, size: u64, depth: u32, cap: u32) -> Option<Rebase> {
        (size <= MAX_COMPOSED_OBJECT).then(|| Rebase {
            block: block_of(cap),
            steps: 0,
            heads: vec![Head {
                j: 0,
                oid,
                depth,
                composed: Composed::identity(size),
            }],
        })
    }

    /// Bytes the scheme holds (its compositions).
    pub(crate) fn held_bytes(&self) -> u64 {
        self.heads.iter().map(|h| h.composed.encoded_bound()).sum()
    }

    /// Follows the chain one object down: `delta` (inflated instructions)
    /// makes the object `oid` of `size` bytes from the current one, whose
    /// stored depth is `parent_depth`. `existing`: the object's depth when
    /// the repository holds it already (nothing is stored for it then).
    /// Returns where it goes; after a [`Placement::Whole`] the caller
    /// starts a new scheme at it.
    ///
    /// # Errors
    /// `delta` does not apply to the current object (the caller applied it
    /// already, so this is a bug or damage).
    pub(crate) fn step(
        &mut self,
        delta: &[u8],
        oid: ObjectId,
        size: u64,
        parent_depth: u32,
        existing: Option<u32>,
        cap: u32,
    ) -> Result<Placement, DeltaError> {
        let mut kept = Vec::with_capacity(self.heads.len());
        for mut h in std::mem::take(&mut self.heads) {
            h.composed = h.composed.then(delta)?;
            // A composition larger than the object is worth less than a
            // whole copy: that head is no base any more.
            if h.composed.encoded_bound() <= size.clamp(64, MAX_HEAD_BYTES) {
                kept.push(h);
            }
        }
        self.heads = kept;
        self.steps += 1;
        if !self.steps.is_multiple_of(self.block) {
            let depth = existing.unwrap_or(parent_depth + 1);
            return Ok(if depth <= cap {
                Placement::Parent(depth)
            } else {
                Placement::Whole
            });
        }
        let j = self.steps / self.block;
        self.heads
            .retain(|h| h.j == 0 || j & !((h.j & h.j.wrapping_neg()) - 1) == h.j);
        let room = self.block; // the head and the block - 1 objects after it
        let placement = match existing {
            Some(depth) => Some((depth, None)),
            None => self
                .heads
                .iter()
                .rev()
                .find(|h| u64::from(h.depth) + room <= u64::from(cap))
                .map(|h| {
                    let mut out = Vec::new();
                    h.composed.encode(&mut out);
                    (h.depth + 1, Some((h.oid, out)))
                }),
        };
        let Some((depth, rebased)) = placement else {
            return Ok(Placement::Whole);
        };
        self.heads.push(Head {
            j,
            oid,
            depth,
            composed: Composed::identity(size),
        });
        Ok(match rebased {
            Some((base, delta)) => Placement::Rebased { base, depth, delta },
            None => Placement::Parent(depth),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gitstow_odb::delta::apply;

    /// A delta copying all of a `base_len`-byte base and appending `tail`.
    fn append(base_len: u64, tail: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        for n in [base_len, base_len + tail.len() as u64] {
            let mut n = n;
            loop {
                let b = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    d.push(b);
                    break;
                }
                d.push(b | 0x80);
            }
        }
        if base_len > 0 {
            // copy 0..base_len (< 2^24 here)
            d.push(0x80 | 0x70);
            d.extend_from_slice(&(base_len as u32).to_le_bytes()[..3]);
        }
        d.push(tail.len() as u8);
        d.extend_from_slice(tail);
        d
    }

    fn oid(n: u64) -> ObjectId {
        let mut b = [0u8; 20];
        b[..8].copy_from_slice(&n.to_be_bytes());
        ObjectId::from_bytes_or_panic(&b)
    }

    /// A chain of 10,000 appends past the cap: every placement within the
    /// cap, every re-based delta rebuilding its object from its base, and
    /// the stored delta bytes within a small factor of the chain's.
    #[test]
    fn a_deep_chain_stays_within_the_cap_and_a_small_factor() {
        let cap = 50;
        let mut objects: Vec<Vec<u8>> = vec![vec![7u8; 1000]];
        let mut depth_of = vec![0u32];
        let mut rb = Rebase::start(oid(0), 1000, 0, cap).unwrap();
        let (mut chain_bytes, mut stored_bytes, mut wholes) = (0u64, 0u64, 0);
        for i in 1..10_000u64 {
            let parent = objects.last().unwrap().clone();
            let d = append(parent.len() as u64, &i.to_be_bytes());
            let mut child = Vec::new();
            apply(&parent, &d, u64::MAX, &mut child).unwrap();
            chain_bytes += d.len() as u64;
            let id = oid(i);
            let placed = rb
                .step(
                    &d,
                    id,
                    child.len() as u64,
                    depth_of[i as usize - 1],
                    None,
                    cap,
                )
                .unwrap();
            let depth = match placed {
                Placement::Parent(depth) => {
                    stored_bytes += d.len() as u64;
                    depth
                }
                Placement::Rebased { base, depth, delta } => {
                    let b = usize::try_from(u64::from_be_bytes(
                        base.as_bytes()[..8].try_into().unwrap(),
                    ))
                    .unwrap();
                    assert_eq!(depth, depth_of[b] + 1);
                    let mut out = Vec::new();
                    apply(&objects[b], &delta, u64::MAX, &mut out).unwrap();
                    assert_eq!(out, child, "object {i} from its new base {b}");
                    stored_bytes += delta.len() as u64;
                    depth
                }
                Placement::Whole => {
                    wholes += 1;
                    rb = Rebase::start(id, child.len() as u64, 0, cap).unwrap();
                    stored_bytes += child.len() as u64;
                    0
                }
            };
            assert!(depth <= cap, "object {i} at depth {depth}");
            depth_of.push(depth);
            objects.push(child);
        }
        assert_eq!(wholes, 0);
        assert!(
            stored_bytes <= 6 * chain_bytes,
            "{stored_bytes} stored for {chain_bytes} of chain"
        );
        assert!(rb.held_bytes() < 1 << 20);
    }

    /// A head the repository holds deep is no base: the next heads use an
    /// earlier one, or start again whole when none is shallow enough.
    #[test]
    fn existing_objects_keep_their_depth() {
        let cap = 6; // block 4
        let mut rb = Rebase::start(oid(0), 10, 0, cap).unwrap();
        let mut size = 10;
        let mut depth = 0;
        let mut placements = Vec::new();
        for i in 1..=8u64 {
            let d = append(size, b"x");
            size += 1;
            let existing = (i == 4).then_some(6);
            let p = rb.step(&d, oid(i), size, depth, existing, cap).unwrap();
            depth = match &p {
                Placement::Parent(d) => *d,
                Placement::Rebased { depth, .. } => *depth,
                Placement::Whole => 0,
            };
            placements.push(p);
        }
        assert_eq!(placements[3], Placement::Parent(6), "held at its depth");
        // Objects 5-7 after a head at 6 pass the cap: whole.
        assert_eq!(placements[4], Placement::Whole);
    }

    /// An anchor follows a path down and places a child past the cap as a
    /// delta against itself that rebuilds the child; a composition that
    /// grows past the object's size is dropped.
    #[test]
    fn an_anchor_places_a_child_past_the_cap_as_a_delta_against_itself() {
        let cap = 50;
        assert_eq!(anchor_depth(cap), 16);
        let mut objects: Vec<Vec<u8>> = vec![vec![3u8; 4000]];
        let mut anchor = Anchor::start(oid(0), 4000, 16).unwrap();
        for i in 1..=34u8 {
            let base = objects.last().unwrap().clone();
            let d = append(base.len() as u64, &[i; 8]);
            let mut next = base.clone();
            next.extend_from_slice(&[i; 8]);
            anchor = anchor.step(&d, next.len() as u64).unwrap().expect("kept");
            objects.push(next);
        }
        // Two siblings off the last object (at 50), both from the anchor, at 17.
        for tail in [b"sibling-a", b"sibling-b"] {
            let parent = objects.last().unwrap();
            let d = append(parent.len() as u64, tail);
            let mut child = parent.clone();
            child.extend_from_slice(tail);
            let Some(Placement::Rebased { base, depth, delta }) =
                anchor.place(&d, child.len() as u64).unwrap()
            else {
                panic!("not re-based on the anchor");
            };
            assert_eq!((base, depth), (oid(0), 17));
            // A scheme started there has room for a block of heads.
            assert!(depth + block_of(cap) as u32 <= cap);
            assert!(delta.len() < 1000, "{} bytes of delta", delta.len());
            let mut out = Vec::new();
            apply(&objects[0], &delta, u64::MAX, &mut out).unwrap();
            assert_eq!(out, child);
        }
        // Past the object's size, the composition is not worth keeping.
        let small = Anchor::start(oid(0), 10, 0).unwrap();
        let d = append(10, &[9u8; 100]);
        assert!(small.step(&d, 12).unwrap().is_none());
    }
}
