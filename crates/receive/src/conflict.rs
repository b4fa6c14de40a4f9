//! Directory/file conflicts of ref names, as git's ref layer refuses them:
//! `refs/heads/a` and `refs/heads/a/b` cannot both exist. The refs checked
//! are read through [`RefNames`]: the repository's refs ([`Overlay`] of a
//! [`Refs`] view and the updates of a push so far), or the names a push
//! creates. A check seeks in the refs: it never visits every ref, except
//! once a push for a name deeper than [`DIRECT_LOOKUPS`] components.

use std::collections::{BTreeMap, HashSet};

use gitstow_odb::Refs;
use gix_hash::ObjectId;

/// Leading directories of a ref name looked up one by one up to this many;
/// a deeper name is checked through a [`PrefixIndex`].
pub const DIRECT_LOOKUPS: usize = 16;

/// Refs a conflict check reads.
pub trait RefNames {
    /// True when ref `name` exists.
    ///
    /// # Errors
    /// The refs could not be read.
    fn contains(&self, name: &str) -> gitstow_odb::Result<bool>;
    /// True when a ref below `dir/` exists.
    ///
    /// # Errors
    /// As [`RefNames::contains`].
    fn any_below(&self, dir: &str) -> gitstow_odb::Result<bool>;
    /// Calls `f` with every ref's name.
    ///
    /// # Errors
    /// As [`RefNames::contains`].
    fn for_each_name(&self, f: &mut dyn FnMut(&str)) -> gitstow_odb::Result<()>;
}

impl RefNames for BTreeMap<String, ObjectId> {
    fn contains(&self, name: &str) -> gitstow_odb::Result<bool> {
        Ok(self.contains_key(name))
    }
    fn any_below(&self, dir: &str) -> gitstow_odb::Result<bool> {
        let below = format!("{dir}/");
        Ok(self
            .range(below.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&below)))
    }
    fn for_each_name(&self, f: &mut dyn FnMut(&str)) -> gitstow_odb::Result<()> {
        self.keys().for_each(|k| f(k));
        Ok(())
    }
}

/// The refs of a view with updates on top: `changes` maps a name to its
/// new value, `None` for a deletion.
pub struct Overlay<'v, 's> {
    /// The refs as the state has them.
    pub base: &'v Refs<'s>,
    /// Updates applied on top, by name.
    pub changes: BTreeMap<String, Option<ObjectId>>,
}

impl<'v, 's> Overlay<'v, 's> {
    /// `base` with no changes.
    pub fn new(base: &'v Refs<'s>) -> Self {
        Overlay {
            base,
            changes: BTreeMap::new(),
        }
    }

    /// The oid of `name` with the changes applied.
    ///
    /// # Errors
    /// The refs could not be read.
    pub fn get(&self, name: &str) -> gitstow_odb::Result<Option<ObjectId>> {
        match self.changes.get(name) {
            Some(v) => Ok(*v),
            None => Ok(self.base.oid(name)?),
        }
    }
}

impl RefNames for Overlay<'_, '_> {
    fn contains(&self, name: &str) -> gitstow_odb::Result<bool> {
        Ok(self.get(name)?.is_some())
    }
    fn any_below(&self, dir: &str) -> gitstow_odb::Result<bool> {
        let below = format!("{dir}/");
        let changed = self
            .changes
            .range(below.clone()..)
            .take_while(|(k, _)| k.starts_with(&below))
            .any(|(_, v)| v.is_some());
        if changed {
            return Ok(true);
        }
        self.base.any_below(dir, &|n| self.changes.contains_key(n))
    }
    fn for_each_name(&self, f: &mut dyn FnMut(&str)) -> gitstow_odb::Result<()> {
        self.base.for_each("", |name, _| {
            if !self.changes.contains_key(name) {
                f(name);
            }
            Ok(())
        })?;
        for (name, v) in &self.changes {
            if v.is_some() {
                f(name);
            }
        }
        Ok(())
    }
}

/// The names of a ref map, hashed so that the leading directories of a
/// name that are refs (`refs/heads/a` of `refs/heads/a/b`) are found in
/// one pass over the name, whatever its depth: each leading part's hash
/// extends the previous one (a polynomial hash modulo 2^61 − 1 with a
/// random base, so inputs cannot be made to collide on purpose), and a
/// hit is confirmed in the refs. Built only for a name deeper than
/// [`DIRECT_LOOKUPS`], at the cost of one pass over the refs' names.
struct PrefixIndex {
    base: u64,
    hashes: HashSet<u64>,
}

const MERSENNE_61: u64 = (1 << 61) - 1;

impl PrefixIndex {
    fn new(refs: &dyn RefNames) -> gitstow_odb::Result<Self> {
        use std::hash::BuildHasher;
        let random = std::collections::hash_map::RandomState::new().hash_one(0u8);
        let mut index = PrefixIndex {
            base: 256 + random % (MERSENNE_61 - 512),
            hashes: HashSet::new(),
        };
        refs.for_each_name(&mut |name| index.insert(name))?;
        Ok(index)
    }

    fn step(&self, h: u64, byte: u8) -> u64 {
        ((u128::from(h) * u128::from(self.base) + u128::from(byte) + 1) % u128::from(MERSENNE_61))
            as u64
    }

    fn insert(&mut self, name: &str) {
        let h = name.bytes().fold(0, |h, b| self.step(h, b));
        self.hashes.insert(h);
    }

    /// The leading directories of `name` whose hash is a ref's.
    fn candidates<'n>(&self, name: &'n str) -> Vec<&'n str> {
        let mut h = 0;
        let mut out = Vec::new();
        for (i, b) in name.bytes().enumerate() {
            if b == b'/' && i > 0 && self.hashes.contains(&h) {
                out.push(&name[..i]);
            }
            h = self.step(h, b);
        }
        out
    }
}

/// The conflict check of one set of refs, with its [`PrefixIndex`] built
/// the first time a deep name is checked and kept up to date as refs are
/// added (a removed ref's hash stays: hits are confirmed in the refs).
pub struct ConflictCheck {
    index: Option<PrefixIndex>,
}

impl Default for ConflictCheck {
    fn default() -> Self {
        Self::new()
    }
}

impl ConflictCheck {
    /// A check with no index yet.
    pub fn new() -> Self {
        ConflictCheck { index: None }
    }

    /// Records that `name` was added to the refs checked.
    pub fn added(&mut self, name: &str) {
        if let Some(index) = &mut self.index {
            index.insert(name);
        }
    }

    /// Whether `name` would conflict with a ref of `refs`: one that is a
    /// leading directory of `name`, or one below `name/`. Costs a lookup a
    /// leading directory up to [`DIRECT_LOOKUPS`] of them (a hash a byte
    /// beyond) and one seek below `name/`, not its depth × the refs.
    ///
    /// # Errors
    /// The refs could not be read.
    pub fn df_conflict(&mut self, refs: &dyn RefNames, name: &str) -> gitstow_odb::Result<bool> {
        let depth = name.bytes().filter(|&b| b == b'/').count();
        if depth <= DIRECT_LOOKUPS {
            for (i, _) in name.match_indices('/').filter(|(i, _)| *i > 0) {
                if refs.contains(&name[..i])? {
                    return Ok(true);
                }
            }
        } else {
            if self.index.is_none() {
                self.index = Some(PrefixIndex::new(refs)?);
            }
            let index = self.index.as_ref().expect("built above");
            for candidate in index.candidates(name) {
                if refs.contains(candidate)? {
                    return Ok(true);
                }
            }
        }
        refs.any_below(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gitstow_odb::RefSet;

    fn refs(names: &[&str]) -> BTreeMap<String, ObjectId> {
        names
            .iter()
            .map(|n| (n.to_string(), ObjectId::null(gix_hash::Kind::Sha1)))
            .collect()
    }

    fn set(names: &[&str]) -> RefSet {
        let mut set = RefSet::default();
        for n in names {
            set.insert(n, ObjectId::null(gix_hash::Kind::Sha1));
        }
        set
    }

    /// Shallow and deep names find the same conflicts (the deep ones
    /// through the hash index), leading directories and refs below alike.
    #[test]
    fn directory_file_conflicts_at_any_depth() {
        let deep = format!("refs/heads/{}", "d/".repeat(40));
        let deep_ref = format!("{deep}x");
        let names = [
            "refs/heads/a",
            "refs/heads/b/c",
            deep.trim_end_matches('/'),
            &deep_ref,
        ];
        let set = set(&names);
        let view = Refs::inline(&set);
        let map = Overlay::new(&view);
        let mut check = ConflictCheck::new();
        assert!(check.df_conflict(&map, "refs/heads/a/x").unwrap());
        assert!(check.df_conflict(&map, "refs/heads/b").unwrap());
        assert!(!check.df_conflict(&map, "refs/heads/bc").unwrap());
        assert!(!check.df_conflict(&map, "refs/heads/c/d").unwrap());
        // Deeper than DIRECT_LOOKUPS: through the index.
        assert!(check.df_conflict(&map, &format!("{deep}x/y")).unwrap());
        assert!(
            check.df_conflict(&map, &format!("{deep}z/y")).unwrap(),
            "the directory itself is a ref"
        );
        let other = format!("refs/heads/{}", "e/".repeat(40)) + "x";
        assert!(!check.df_conflict(&map, &other).unwrap());
        assert!(check.index.is_some());
        // A ref deleted by the overlay does not conflict.
        let mut without = Overlay::new(&view);
        without
            .changes
            .insert(deep.trim_end_matches('/').to_owned(), None);
        assert!(!check.df_conflict(&without, &format!("{deep}z/y")).unwrap());
        without.changes.insert("refs/heads/b/c".into(), None);
        assert!(!check.df_conflict(&without, "refs/heads/b").unwrap());
        // A ref added after the index was built is found.
        let mut with = Overlay::new(&view);
        let added = format!("refs/heads/{}", "f/".repeat(30)) + "g";
        with.changes
            .insert(added.clone(), Some(ObjectId::null(gix_hash::Kind::Sha1)));
        check.added(&added);
        assert!(check
            .df_conflict(&with, &format!("{added}/h/{}", "i/".repeat(20)))
            .unwrap());
        assert!(check.df_conflict(&with, "refs/heads/f").unwrap());
        // The plain map of a push's creations answers the same.
        let created = refs(&names);
        assert!(ConflictCheck::new()
            .df_conflict(&created, "refs/heads/b")
            .unwrap());
        assert!(!ConflictCheck::new()
            .df_conflict(&created, "refs/heads/bc")
            .unwrap());
    }

    /// Names of 2,000 components against refs sharing their leading
    /// directories: the check walks each name once and looks up only the
    /// leading directories that are refs (none here), where the walk of
    /// every prefix looked up 2,000 per name.
    #[test]
    fn deep_names_cost_their_length() {
        let stem = "a/".repeat(2_000);
        let map: BTreeMap<String, ObjectId> = (0..200)
            .map(|i| {
                (
                    format!("refs/{stem}r{i}"),
                    ObjectId::null(gix_hash::Kind::Sha1),
                )
            })
            .collect();
        let mut check = ConflictCheck::new();
        for i in 0..200 {
            let name = format!("refs/{stem}n{i}/x");
            assert!(!check.df_conflict(&map, &name).unwrap());
            let index = check.index.as_ref().expect("a deep name builds the index");
            assert_eq!(index.candidates(&name), Vec::<&str>::new());
        }
    }
}
