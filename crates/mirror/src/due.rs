//! The store-wide list of mirrors and when each is next due:
//! `.gitstow/mirrors/due`, one small JSON document `{"repos": {"org/app":
//! 1733550000, "org/lib push": 0, …}}` (seconds since the epoch; 0: at
//! once), an entry per mirror: the repository's name for its pull mirror,
//! the name and ` push` for its push mirror ([`entry`]). An instance
//! reads it with one GET per tick to find what is due, instead of listing
//! every repository; `mirror add`, a sync's end, `mirror resume` and
//! `mirror remove` change it by compare-and-swap.
//!
//! It is a hint: the truth is each repository's mirror document
//! ([`crate::settings`]). An entry whose mirror is gone is dropped by the
//! scheduler; an entry that says "due" when the document says otherwise is
//! corrected by whoever looks. `mirror add` writes the entry before the
//! document, so that no mirror is ever missing from the list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use gitstow_store::{ObjectStore, PutCondition};

use crate::settings::{Direction, SettingsError};

/// The key of the list.
pub const DUE_KEY: &str = ".gitstow/mirrors/due";

/// The due-list entry of `repo`'s mirror going `direction`: `org/app` for
/// a pull mirror, `org/app push` for a push mirror (a repository's name
/// holds no space).
pub fn entry(repo: &str, direction: Direction) -> String {
    match direction {
        Direction::Pull => repo.to_owned(),
        Direction::Push => format!("{repo} push"),
    }
}

/// The repository and direction of a due-list `entry` ([`entry`]'s inverse).
pub fn parse_entry(entry: &str) -> (&str, Direction) {
    match entry.strip_suffix(" push") {
        Some(repo) => (repo, Direction::Push),
        None => (entry, Direction::Pull),
    }
}

/// The stored list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DueList {
    /// Each mirror's entry ([`entry`]) and when its next sync is due.
    pub repos: BTreeMap<String, u64>,
}

impl DueList {
    /// The entries due at `now`, soonest first, and when the next
    /// one after them is due (`None`: none is).
    pub fn due_at(&self, now: u64) -> (Vec<String>, Option<u64>) {
        let mut due: Vec<(&u64, &String)> = self
            .repos
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(r, t)| (t, r))
            .collect();
        due.sort();
        let next = self.repos.values().filter(|t| **t > now).min().copied();
        (due.into_iter().map(|(_, r)| r.clone()).collect(), next)
    }
}

/// The list (empty when there is none).
///
/// # Errors
/// The store failed, or the list does not parse.
pub fn load(store: &dyn ObjectStore) -> Result<DueList, SettingsError> {
    match store.get(DUE_KEY)? {
        None => Ok(DueList::default()),
        Some((bytes, _)) => serde_json::from_slice(&bytes).map_err(|e| SettingsError::Corrupt {
            repo: DUE_KEY.to_owned(),
            why: e.to_string(),
        }),
    }
}

/// Makes `repo`'s mirror going `direction` due at once (its entry's next
/// run 0): what adding, resuming, a webhook and refs moving here all do.
///
/// # Errors
/// [`SettingsError`].
pub fn now(store: &dyn ObjectStore, repo: &str, direction: Direction) -> Result<(), SettingsError> {
    set(store, &entry(repo, direction), Some(0))
}

/// Sets `entry`'s next run (`None`: drops it) by compare-and-swap, retried
/// on a lost race; writes nothing when the entry already says so.
///
/// # Errors
/// [`SettingsError`].
pub fn set(store: &dyn ObjectStore, entry: &str, next: Option<u64>) -> Result<(), SettingsError> {
    for _ in 0..20 {
        let (mut list, condition) = match store.get(DUE_KEY)? {
            None => (DueList::default(), PutCondition::IfAbsent),
            // A corrupt list is rebuilt from this entry on (the scheduler's
            // hint, not the truth).
            Some((bytes, etag)) => (
                serde_json::from_slice(&bytes).unwrap_or_default(),
                PutCondition::IfMatch(etag),
            ),
        };
        let changed = match next {
            Some(t) => list.repos.insert(entry.to_owned(), t) != Some(t),
            None => list.repos.remove(entry).is_some(),
        };
        if !changed {
            return Ok(());
        }
        let bytes = serde_json::to_vec(&list).expect("the due list serializes");
        match store.put(DUE_KEY, &bytes, condition) {
            Ok(_) => return Ok(()),
            Err(gitstow_store::Error::PreconditionFailed { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(SettingsError::Busy(DUE_KEY.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_set_moved_and_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        assert_eq!(load(&store).unwrap(), DueList::default());
        set(&store, "org/b", Some(50)).unwrap();
        set(&store, "org/a", Some(0)).unwrap();
        set(&store, "org/c", Some(200)).unwrap();
        let list = load(&store).unwrap();
        assert_eq!(
            list.due_at(100),
            (vec!["org/a".into(), "org/b".into()], Some(200))
        );
        assert_eq!(list.due_at(300).1, None);
        set(&store, "org/a", None).unwrap();
        set(&store, "org/a", None).unwrap();
        set(&store, "org/b", Some(500)).unwrap();
        assert_eq!(load(&store).unwrap().due_at(100), (vec![], Some(200)));
    }

    #[test]
    fn entries_name_a_repository_and_a_direction() {
        for (repo, d) in [("org/a", Direction::Pull), ("org/a", Direction::Push)] {
            assert_eq!(parse_entry(&entry(repo, d)), (repo, d));
        }
        assert_eq!(entry("org/a", Direction::Push), "org/a push");
    }
}
