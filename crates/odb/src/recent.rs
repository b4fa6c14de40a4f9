//! [`RecentOids`]: a direct-mapped table of recently seen oids, each with
//! a small value. Walks meet the same oids again and again (a tree names
//! mostly what the tree it was resolved from named; a commit's tree
//! entries are mostly its parent's), and a hit here (one 20-byte compare)
//! saves a probe of a much larger set or index.

/// Recently seen oids and a `u32` each, one per slot, a slot picked by the
/// oid's first bytes (oids are uniformly distributed); a newer oid evicts
/// the one in its slot. A slot is the oid's width plus 4 bytes (24 for
/// SHA-1, 36 for SHA-256): the oid, then its value plus one (0: empty, so
/// no oid, the null one included, is ever a false hit). The table is
/// allocated zeroed at the first [`RecentOids::put`], at the width of the
/// oid put (every oid of one repository has one width; an oid of another
/// width is never found nor kept), so a short walk makes resident only the
/// pages it touches.
pub struct RecentOids {
    slots: Vec<u8>,
    /// Slots once allocated (a power of two).
    len: usize,
    /// Width of the oids (0 until the first put).
    width: usize,
}

impl RecentOids {
    /// A table of `slots` slots (rounded up to a power of two, at least 1),
    /// allocated when first written.
    pub fn new(slots: usize) -> Self {
        RecentOids {
            slots: Vec::new(),
            len: slots.max(1).next_power_of_two(),
            width: 0,
        }
    }

    #[inline]
    fn slot(&self, oid: &gix_hash::oid) -> std::ops::Range<usize> {
        let b = oid.as_bytes();
        let i =
            (usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2])) & (self.len - 1);
        let slot = self.width + 4;
        i * slot..(i + 1) * slot
    }

    /// The value remembered for `oid`, if its slot holds it.
    #[inline]
    pub fn get(&self, oid: &gix_hash::oid) -> Option<u32> {
        let b = oid.as_bytes();
        if b.len() != self.width {
            return None;
        }
        let slot = self.slots.get(self.slot(oid))?;
        let tag = u32::from_le_bytes(slot[self.width..].try_into().expect("4 bytes"));
        let same = if self.width == 20 {
            // Three loads and compares, not a call to memcmp.
            let word = |s: &[u8], at: usize| {
                u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
            };
            word(slot, 0) == word(b, 0)
                && word(slot, 8) == word(b, 8)
                && word(slot, 12) == word(b, 12)
        } else {
            slot[..self.width] == *b
        };
        (tag != 0 && same).then(|| tag - 1)
    }

    /// Remembers `value` (below `u32::MAX`) for `oid`, evicting the oid in
    /// its slot.
    #[inline]
    pub fn put(&mut self, oid: &gix_hash::oid, value: u32) {
        let b = oid.as_bytes();
        if self.slots.is_empty() {
            self.width = b.len();
            self.slots = vec![0; self.len * (self.width + 4)];
        } else if b.len() != self.width {
            return;
        }
        let range = self.slot(oid);
        let slot = &mut self.slots[range];
        slot[..self.width].copy_from_slice(b);
        slot[self.width..].copy_from_slice(&value.saturating_add(1).to_le_bytes());
    }

    /// True if `oid` is in its slot; otherwise puts it there (a set of
    /// recent oids).
    #[inline]
    pub fn hit_or_insert(&mut self, oid: &gix_hash::oid) -> bool {
        if self.get(oid).is_some() {
            return true;
        }
        self.put(oid, 0);
        false
    }
}

/// 16 Ki slots (384 KiB once written for SHA-1, 576 KiB for SHA-256): what one tree's names and its
/// neighbours' need.
impl Default for RecentOids {
    fn default() -> Self {
        RecentOids::new(1 << 14)
    }
}

impl std::fmt::Debug for RecentOids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentOids")
            .field("slots", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix_hash::ObjectId;

    #[test]
    fn recent_oids_answer_only_for_the_oid_in_the_slot() {
        let mut recent = RecentOids::new(2048);
        let a = ObjectId::from_bytes_or_panic(&[3; 20]);
        let null = ObjectId::null(gix_hash::Kind::Sha1);
        assert_eq!(recent.get(&a), None);
        assert_eq!(
            recent.get(&null),
            None,
            "an empty slot is not the null oid's"
        );
        recent.put(&a, 0);
        recent.put(&null, 41);
        assert_eq!((recent.get(&a), recent.get(&null)), (Some(0), Some(41)));
        // Same first three bytes: same slot; the newer one evicts the older.
        let mut same = [3u8; 20];
        same[19] = 9;
        let b = ObjectId::from_bytes_or_panic(&same);
        assert_eq!(recent.get(&b), None);
        recent.put(&b, 7);
        assert_eq!((recent.get(&b), recent.get(&a)), (Some(7), None));
        // An oid of another width is neither found nor kept.
        let long = ObjectId::from_bytes_or_panic(&[3; 32]);
        recent.put(&long, 5);
        assert_eq!((recent.get(&long), recent.get(&b)), (None, Some(7)));
    }

    #[test]
    fn sha256_oids_are_compared_whole() {
        let mut recent = RecentOids::new(64);
        let a = ObjectId::from_bytes_or_panic(&[5; 32]);
        let mut late = [5u8; 32];
        late[31] = 6;
        let b = ObjectId::from_bytes_or_panic(&late);
        recent.put(&a, 1);
        assert_eq!((recent.get(&a), recent.get(&b)), (Some(1), None));
        assert!(recent.hit_or_insert(&a) && !recent.hit_or_insert(&b));
        assert_eq!(recent.get(&a), None, "b took a's slot");
        // A SHA-1 oid in a SHA-256 table is neither found nor kept.
        let short = ObjectId::from_bytes_or_panic(&[5; 20]);
        recent.put(&short, 2);
        assert_eq!(recent.get(&short), None);
    }
}
