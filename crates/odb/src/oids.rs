//! Sets, maps and lists keyed by object id that hold each oid as its raw
//! bytes at the repository's width: 20 for SHA-1, 32 for SHA-256 (plan
//! 0019, step 2).
//!
//! With gix-hash's `sha256` feature an [`ObjectId`](gix_hash::ObjectId) is
//! an enum of 33 bytes whatever the repository's format; a push, a clone
//! and GC hold one or more oids an object, so a SHA-1 repository would pay
//! 13 bytes or more an object for a format it does not use. These tables
//! hold [`RawOid<20>`] or [`RawOid<32>`] instead, and take their width from
//! the first oid put in them: every oid of one repository has one width.
//! Lookups take and give [`gix_hash::oid`], which is unsized and carries
//! its width.

use gix_hash::oid;

/// An object id as `N` raw bytes (20: SHA-1, 32: SHA-256), ordered and
/// hashed as its bytes (the hash is the first 8 bytes, as
/// [`gix_hashtable`]'s hasher expects of an oid).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(transparent)]
pub struct RawOid<const N: usize>(pub [u8; N]);

impl<const N: usize> RawOid<N> {
    /// The bytes of `id`.
    ///
    /// # Panics
    /// When `id` is not `N` bytes wide: a table holds the oids of one
    /// repository, and they have one width (a caller's bug otherwise).
    #[inline]
    pub fn of(id: &oid) -> Self {
        match Self::try_of(id) {
            Some(k) => k,
            None => width_mismatch(N, id.as_bytes().len()),
        }
    }

    /// The bytes of `id`, or `None` when it is not `N` bytes wide.
    #[inline]
    pub fn try_of(id: &oid) -> Option<Self> {
        id.as_bytes().try_into().ok().map(RawOid)
    }

    /// This oid as a [`gix_hash::oid`].
    #[inline]
    pub fn as_oid(&self) -> &oid {
        oid::from_bytes_unchecked(&self.0)
    }
}

impl<const N: usize> std::hash::Hash for RawOid<N> {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(&self.0);
    }
}

impl<const N: usize> std::fmt::Debug for RawOid<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.as_oid())
    }
}

#[cold]
#[inline(never)]
fn width_mismatch(held: usize, given: usize) -> ! {
    panic!("an oid of {given} bytes among oids of {held}: one repository's oids have one width")
}

/// The width (in bytes) of a table's oids, once known.
fn width_of(id: &oid) -> usize {
    id.as_bytes().len()
}

type Map<const N: usize, V> = gix_hashtable::HashMap<RawOid<N>, V>;

/// A set of oids of one width (see the [module](self) docs): an
/// [`OidMap`] of nothing, as hashbrown's `HashSet` is a `HashMap` of `()`
/// (the same table, the same bytes an oid).
#[derive(Debug, Default)]
pub struct OidSet(OidMap<()>);

impl OidSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `id`; true if it was not there.
    #[inline]
    pub fn insert(&mut self, id: &oid) -> bool {
        self.0.insert(id, ()).is_none()
    }

    /// Whether `id` is in the set (an oid of another width never is).
    #[inline]
    pub fn contains(&self, id: &oid) -> bool {
        self.0.contains_key(id)
    }

    /// Takes `id` out of the set; true if it was there.
    #[inline]
    pub fn remove(&mut self, id: &oid) -> bool {
        self.0.remove(id).is_some()
    }

    /// How many oids the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the set holds no oid.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Makes room for `additional` more oids.
    pub fn reserve(&mut self, additional: usize) {
        self.0.reserve(additional);
    }

    /// Adds every oid of `list` and empties it (its capacity stays).
    pub fn take_from<T: Copy>(&mut self, list: &mut OidVec<T>) {
        if let Some((first, _)) = list.get(0) {
            self.0.sized_for(first);
        }
        match (&mut self.0, &mut *list) {
            (OidMap::Sha1(m), OidVec::Sha1(v)) => m.extend(v.drain(..).map(|e| (e.0, ()))),
            (OidMap::Sha256(m), OidVec::Sha256(v)) => m.extend(v.drain(..).map(|e| (e.0, ()))),
            (_, OidVec::Empty) => {}
            (set, list) => width_mismatch(set.width(), list.width()),
        }
    }

    /// The oids, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &oid> + '_ {
        self.0.iter().map(|(id, ())| id)
    }
}

impl<I: AsRef<oid>> Extend<I> for OidSet {
    fn extend<It: IntoIterator<Item = I>>(&mut self, ids: It) {
        for id in ids {
            self.insert(id.as_ref());
        }
    }
}

impl<I: AsRef<oid>> FromIterator<I> for OidSet {
    fn from_iter<It: IntoIterator<Item = I>>(ids: It) -> Self {
        let mut set = OidSet::new();
        set.extend(ids);
        set
    }
}

/// A map from oids of one width to `V` (see the [module](self) docs).
#[derive(Debug)]
pub enum OidMap<V> {
    /// No oid yet: the width is not known; `reserved` is applied once it is.
    Empty {
        /// Room asked for before the first oid.
        reserved: usize,
    },
    /// SHA-1 keys.
    Sha1(Map<20, V>),
    /// SHA-256 keys.
    Sha256(Map<32, V>),
}

impl<V> Default for OidMap<V> {
    fn default() -> Self {
        OidMap::Empty { reserved: 0 }
    }
}

impl<V> OidMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    fn sized_for(&mut self, id: &oid) {
        if let OidMap::Empty { reserved } = *self {
            *self = match width_of(id) {
                32 => OidMap::Sha256(Map::with_capacity_and_hasher(reserved, Default::default())),
                _ => OidMap::Sha1(Map::with_capacity_and_hasher(reserved, Default::default())),
            };
        }
    }

    /// Bytes of each oid: 20 or 32, 0 before the first.
    pub fn width(&self) -> usize {
        match self {
            OidMap::Empty { .. } => 0,
            OidMap::Sha1(_) => 20,
            OidMap::Sha256(_) => 32,
        }
    }

    /// The value of `id`.
    #[inline]
    pub fn get(&self, id: &oid) -> Option<&V> {
        match self {
            OidMap::Empty { .. } => None,
            OidMap::Sha1(m) => RawOid::try_of(id).and_then(|k| m.get(&k)),
            OidMap::Sha256(m) => RawOid::try_of(id).and_then(|k| m.get(&k)),
        }
    }

    /// Whether `id` has a value.
    #[inline]
    pub fn contains_key(&self, id: &oid) -> bool {
        self.get(id).is_some()
    }

    /// Sets the value of `id`, giving back the one it replaces.
    #[inline]
    pub fn insert(&mut self, id: &oid, value: V) -> Option<V> {
        self.sized_for(id);
        match self {
            OidMap::Empty { .. } => unreachable!("sized above"),
            OidMap::Sha1(m) => m.insert(RawOid::of(id), value),
            OidMap::Sha256(m) => m.insert(RawOid::of(id), value),
        }
    }

    /// The value of `id`, inserted as `V::default()` when missing.
    #[inline]
    pub fn entry_or_default(&mut self, id: &oid) -> &mut V
    where
        V: Default,
    {
        self.entry_or_insert_with(id, V::default)
    }

    /// The value of `id`, inserted as `make()` when missing (one probe of
    /// the table either way).
    #[inline]
    pub fn entry_or_insert_with(&mut self, id: &oid, make: impl FnOnce() -> V) -> &mut V {
        self.sized_for(id);
        match self {
            OidMap::Empty { .. } => unreachable!("sized above"),
            OidMap::Sha1(m) => m.entry(RawOid::of(id)).or_insert_with(make),
            OidMap::Sha256(m) => m.entry(RawOid::of(id)).or_insert_with(make),
        }
    }

    /// Takes the value of `id` out of the map.
    #[inline]
    pub fn remove(&mut self, id: &oid) -> Option<V> {
        match self {
            OidMap::Empty { .. } => None,
            OidMap::Sha1(m) => RawOid::try_of(id).and_then(|k| m.remove(&k)),
            OidMap::Sha256(m) => RawOid::try_of(id).and_then(|k| m.remove(&k)),
        }
    }

    /// How many oids have a value.
    pub fn len(&self) -> usize {
        match self {
            OidMap::Empty { .. } => 0,
            OidMap::Sha1(m) => m.len(),
            OidMap::Sha256(m) => m.len(),
        }
    }

    /// True when no oid has a value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes room for `additional` more oids.
    pub fn reserve(&mut self, additional: usize) {
        match self {
            OidMap::Empty { reserved } => *reserved += additional,
            OidMap::Sha1(m) => m.reserve(additional),
            OidMap::Sha256(m) => m.reserve(additional),
        }
    }

    /// The oids and their values, in no order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&oid, &V)> + '_> {
        match self {
            OidMap::Empty { .. } => Box::new(std::iter::empty()),
            OidMap::Sha1(m) => Box::new(m.iter().map(|(k, v)| (k.as_oid(), v))),
            OidMap::Sha256(m) => Box::new(m.iter().map(|(k, v)| (k.as_oid(), v))),
        }
    }
}

/// A list of oids of one width, each with a `T` (`()` for a plain list of
/// oids): `N + size_of::<T>()` bytes an item, aligned as `T` (see the
/// [module](self) docs).
#[derive(Debug, Clone, Default)]
pub enum OidVec<T> {
    /// No oid yet.
    #[default]
    Empty,
    /// SHA-1 oids.
    Sha1(Vec<(RawOid<20>, T)>),
    /// SHA-256 oids.
    Sha256(Vec<(RawOid<32>, T)>),
}

impl<T: Copy> OidVec<T> {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty list with room for `n` items of `id`'s width.
    pub fn with_capacity_for(id: &oid, n: usize) -> Self {
        match width_of(id) {
            32 => OidVec::Sha256(Vec::with_capacity(n)),
            _ => OidVec::Sha1(Vec::with_capacity(n)),
        }
    }

    fn width(&self) -> usize {
        match self {
            OidVec::Empty => 0,
            OidVec::Sha1(_) => 20,
            OidVec::Sha256(_) => 32,
        }
    }

    /// Appends `id` with `value`, growing by doubling (see
    /// [`OidVec::reserve_exact`] for other growth).
    #[inline]
    pub fn push(&mut self, id: &oid, value: T) {
        if let OidVec::Empty = self {
            *self = Self::with_capacity_for(id, 0);
        }
        match self {
            OidVec::Empty => unreachable!("sized above"),
            OidVec::Sha1(v) => v.push((RawOid::of(id), value)),
            OidVec::Sha256(v) => v.push((RawOid::of(id), value)),
        }
    }

    /// Takes the last item off the list.
    #[inline]
    pub fn pop(&mut self) -> Option<(gix_hash::ObjectId, T)> {
        match self {
            OidVec::Empty => None,
            OidVec::Sha1(v) => v.pop().map(|(k, t)| (k.as_oid().to_owned(), t)),
            OidVec::Sha256(v) => v.pop().map(|(k, t)| (k.as_oid().to_owned(), t)),
        }
    }

    /// How many items the list holds.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            OidVec::Empty => 0,
            OidVec::Sha1(v) => v.len(),
            OidVec::Sha256(v) => v.len(),
        }
    }

    /// True when the list holds no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items fit without growing (0 before the first oid).
    #[inline]
    pub fn capacity(&self) -> usize {
        match self {
            OidVec::Empty => 0,
            OidVec::Sha1(v) => v.capacity(),
            OidVec::Sha256(v) => v.capacity(),
        }
    }

    /// Makes room for exactly `additional` more items of `id`'s width (the
    /// width is needed before the first oid is in).
    pub fn reserve_exact(&mut self, id: &oid, additional: usize) {
        match self {
            OidVec::Empty => *self = Self::with_capacity_for(id, additional),
            OidVec::Sha1(v) => v.reserve_exact(additional),
            OidVec::Sha256(v) => v.reserve_exact(additional),
        }
    }

    /// Shrinks the capacity to at most `min_capacity` (or the length).
    pub fn shrink_to(&mut self, min_capacity: usize) {
        match self {
            OidVec::Empty => {}
            OidVec::Sha1(v) => v.shrink_to(min_capacity),
            OidVec::Sha256(v) => v.shrink_to(min_capacity),
        }
    }

    /// Removes every item (the capacity stays).
    pub fn clear(&mut self) {
        match self {
            OidVec::Empty => {}
            OidVec::Sha1(v) => v.clear(),
            OidVec::Sha256(v) => v.clear(),
        }
    }

    /// Item `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<(&oid, T)> {
        match self {
            OidVec::Empty => None,
            OidVec::Sha1(v) => v.get(i).map(|(k, t)| (k.as_oid(), *t)),
            OidVec::Sha256(v) => v.get(i).map(|(k, t)| (k.as_oid(), *t)),
        }
    }

    /// The oid of item `i`.
    ///
    /// # Panics
    /// When `i` is out of bounds.
    #[inline]
    pub fn oid(&self, i: usize) -> &oid {
        match self.get(i) {
            Some((id, _)) => id,
            None => panic!("item {i} of a list of {}", self.len()),
        }
    }

    /// The items in order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&oid, T)> + '_> {
        match self {
            OidVec::Empty => Box::new(std::iter::empty()),
            OidVec::Sha1(v) => Box::new(v.iter().map(|(k, t)| (k.as_oid(), *t))),
            OidVec::Sha256(v) => Box::new(v.iter().map(|(k, t)| (k.as_oid(), *t))),
        }
    }

    /// The oids in order.
    pub fn ids(&self) -> impl Iterator<Item = &oid> + '_ {
        self.iter().map(|(id, _)| id)
    }

    /// Appends every item of `other`, which must hold oids of this list's
    /// width (an empty list takes `other`'s).
    pub fn append(&mut self, other: OidVec<T>) {
        match (&mut *self, other) {
            (_, OidVec::Empty) => {}
            (OidVec::Empty, other) => *self = other,
            (OidVec::Sha1(v), OidVec::Sha1(o)) => v.extend(o),
            (OidVec::Sha256(v), OidVec::Sha256(o)) => v.extend(o),
            (v, o) => width_mismatch(v.width(), o.width()),
        }
    }

    /// Keeps only the items for which `keep` is true, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&oid, T) -> bool) {
        match self {
            OidVec::Empty => {}
            OidVec::Sha1(v) => v.retain(|(k, t)| keep(k.as_oid(), *t)),
            OidVec::Sha256(v) => v.retain(|(k, t)| keep(k.as_oid(), *t)),
        }
    }

    /// Sorts the items by oid and keeps the first of each oid.
    pub fn sort_dedup(&mut self) {
        match self {
            OidVec::Empty => {}
            OidVec::Sha1(v) => {
                v.sort_unstable_by_key(|e| e.0);
                v.dedup_by_key(|e| e.0);
            }
            OidVec::Sha256(v) => {
                v.sort_unstable_by_key(|e| e.0);
                v.dedup_by_key(|e| e.0);
            }
        }
    }

    /// Where `id` is in the list (sorted by oid), if it is.
    #[inline]
    pub fn find(&self, id: &oid) -> Option<usize> {
        self.find_in(0..self.len(), id)
    }

    /// Where `id` is among items `range` (sorted by oid), if it is.
    #[inline]
    pub fn find_in(&self, range: std::ops::Range<usize>, id: &oid) -> Option<usize> {
        let found = match self {
            OidVec::Empty => None,
            OidVec::Sha1(v) => RawOid::try_of(id)
                .and_then(|k| v.get(range.clone())?.binary_search_by_key(&k, |e| e.0).ok()),
            OidVec::Sha256(v) => RawOid::try_of(id)
                .and_then(|k| v.get(range.clone())?.binary_search_by_key(&k, |e| e.0).ok()),
        };
        found.map(|i| range.start + i)
    }
}

impl<I: AsRef<oid>> Extend<I> for OidVec<()> {
    fn extend<It: IntoIterator<Item = I>>(&mut self, ids: It) {
        for id in ids {
            self.push(id.as_ref(), ());
        }
    }
}

impl<I: AsRef<oid>> FromIterator<I> for OidVec<()> {
    fn from_iter<It: IntoIterator<Item = I>>(ids: It) -> Self {
        let mut list = OidVec::new();
        list.extend(ids);
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha1(b: u8) -> gix_hash::ObjectId {
        gix_hash::ObjectId::from_bytes_or_panic(&[b; 20])
    }

    fn sha256(b: u8) -> gix_hash::ObjectId {
        gix_hash::ObjectId::from_bytes_or_panic(&[b; 32])
    }

    #[test]
    fn a_sha1_table_holds_20_bytes_an_oid() {
        assert_eq!(std::mem::size_of::<RawOid<20>>(), 20);
        assert_eq!(std::mem::size_of::<(RawOid<20>, gix_object::Kind)>(), 21);
        assert_eq!(std::mem::size_of::<(RawOid<20>, ())>(), 20);
        let mut v = OidVec::new();
        v.push(&sha1(1), ());
        assert!(matches!(v, OidVec::Sha1(_)));
    }

    #[test]
    fn sets_take_their_width_from_the_first_oid() {
        for (a, b) in [(sha1(1), sha1(2)), (sha256(1), sha256(2))] {
            let mut s = OidSet::new();
            s.reserve(10);
            assert!(!s.contains(&a));
            assert!(s.insert(&a));
            assert!(!s.insert(&a));
            assert!(s.contains(&a) && !s.contains(&b));
            assert_eq!(s.len(), 1);
            assert_eq!(s.iter().map(|o| o.to_owned()).collect::<Vec<_>>(), vec![a]);
        }
        // An oid of the other width is never in a set.
        let mut s = OidSet::new();
        s.insert(&sha1(1));
        assert!(!s.contains(&sha256(1)));
    }

    #[test]
    fn maps_get_insert_and_remove_in_both_widths() {
        for (a, b) in [(sha1(1), sha1(2)), (sha256(1), sha256(2))] {
            let mut m: OidMap<Vec<u32>> = OidMap::new();
            m.entry_or_default(&a).push(1);
            m.entry_or_default(&a).push(2);
            assert_eq!(m.get(&a), Some(&vec![1, 2]));
            assert_eq!(m.insert(&b, vec![3]), None);
            assert_eq!(m.len(), 2);
            assert_eq!(m.remove(&a), Some(vec![1, 2]));
            assert!(!m.contains_key(&a) && m.contains_key(&b));
        }
    }

    #[test]
    fn lists_sort_dedup_find_and_feed_a_set() {
        for make in [sha1 as fn(u8) -> gix_hash::ObjectId, sha256] {
            let mut v = OidVec::new();
            for b in [5u8, 3, 5, 1] {
                v.push(&make(b), b as u32);
            }
            let mut w = OidVec::new();
            w.push(&make(4), 4);
            v.append(w);
            v.sort_dedup();
            let got: Vec<_> = v.iter().map(|(o, t)| (o.to_owned(), t)).collect();
            let want: Vec<_> = [1u8, 3, 4, 5]
                .iter()
                .map(|&b| (make(b), b as u32))
                .collect();
            assert_eq!(got, want);
            assert_eq!(v.find_in(0..4, &make(4)), Some(2));
            assert_eq!(v.find_in(3..4, &make(4)), None);
            assert_eq!(v.find_in(0..4, &make(2)), None);
            let mut s = OidSet::new();
            s.take_from(&mut v);
            assert!(v.is_empty() && s.len() == 4 && s.contains(&make(3)));
        }
    }

    #[test]
    #[should_panic(expected = "one width")]
    fn a_list_refuses_an_oid_of_another_width() {
        let mut v = OidVec::new();
        v.push(&sha1(1), ());
        v.push(&sha256(1), ());
    }
}
