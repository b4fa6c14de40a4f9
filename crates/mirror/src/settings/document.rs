//! The stored mirror document (`<repo>.git/mirror`, [`MirrorDoc`]) and
//! every change to it, each a compare-and-swap retried on a lost race.

use serde::{Deserialize, Serialize};

use gitstow_store::{ETag, ObjectStore, PutCondition};

use super::{Direction, Mirror};

/// The store key of `repo`'s mirror document.
pub fn key(repo: &str) -> String {
    format!("{repo}.git/mirror")
}

/// The stored document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorDoc {
    /// The pull mirror, if any.
    pub pull: Option<Mirror>,
    /// The push mirror, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<Mirror>,
}

impl MirrorDoc {
    /// Refs moved here (a push, or a pull that brought changes): the push
    /// mirror, if there is one and it is not paused, is due at once.
    /// Returns (it has one due, the document changed).
    pub fn push_due(&mut self) -> (bool, bool) {
        match self.push.as_mut().filter(|p| p.paused.is_none()) {
            None => (false, false),
            Some(p) => (true, !std::mem::replace(&mut p.due_now, true)),
        }
    }

    /// The mirror going `direction`, if any.
    pub fn get(&self, direction: Direction) -> Option<&Mirror> {
        match direction {
            Direction::Pull => self.pull.as_ref(),
            Direction::Push => self.push.as_ref(),
        }
    }

    /// The slot of the mirror going `direction`.
    pub fn slot(&mut self, direction: Direction) -> &mut Option<Mirror> {
        match direction {
            Direction::Pull => &mut self.pull,
            Direction::Push => &mut self.push,
        }
    }
}

/// Why the document could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] gitstow_store::Error),
    /// The stored document does not parse.
    #[error("the mirror document of {repo} is corrupt: {why}")]
    Corrupt {
        /// The repository.
        repo: String,
        /// Why.
        why: String,
    },
    /// The change was refused (the lease was lost, the mirror removed).
    #[error("{0}")]
    Refused(String),
    /// Another writer changed it first, more times than retried.
    #[error("the mirror settings of {0} keep changing; try again")]
    Busy(String),
}

/// `repo`'s document and its version (`None`: no mirror).
///
/// # Errors
/// [`SettingsError`].
pub fn load(
    store: &dyn ObjectStore,
    repo: &str,
) -> Result<Option<(MirrorDoc, ETag)>, SettingsError> {
    let Some((bytes, etag)) = store.get(&key(repo))? else {
        return Ok(None);
    };
    let doc = serde_json::from_slice(&bytes).map_err(|e| SettingsError::Corrupt {
        repo: repo.to_owned(),
        why: e.to_string(),
    })?;
    Ok(Some((doc, etag)))
}

/// Changes `repo`'s document with `change` (given the current one, or the
/// default when there is none) by compare-and-swap, retried on a lost
/// race; `change` returns `None` to write nothing. Returns what `change`
/// returned for the write that landed.
///
/// # Errors
/// [`SettingsError`], or `change`'s own error.
pub fn update<T>(
    store: &dyn ObjectStore,
    repo: &str,
    mut change: impl FnMut(&mut MirrorDoc) -> Result<Option<T>, String>,
) -> Result<Result<Option<T>, String>, SettingsError> {
    for _ in 0..10 {
        let current = load(store, repo)?;
        let (mut doc, condition) = match current {
            Some((doc, etag)) => (doc, PutCondition::IfMatch(etag)),
            None => (MirrorDoc::default(), PutCondition::IfAbsent),
        };
        let result = match change(&mut doc) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(Ok(None)),
            Err(e) => return Ok(Err(e)),
        };
        let bytes = serde_json::to_vec_pretty(&doc).expect("a mirror document serializes");
        let written = if doc.pull.is_none() && doc.push.is_none() {
            // Nothing left: the key goes (unconditionally: a racing add is
            // rare, and then re-running it is the answer).
            store.delete(&key(repo)).map(|_| ())
        } else {
            store.put(&key(repo), &bytes, condition).map(|_| ())
        };
        match written {
            Ok(()) => return Ok(Ok(Some(result))),
            Err(gitstow_store::Error::PreconditionFailed { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(SettingsError::Busy(repo.to_owned()))
}

/// Stores `mirror` as `repo`'s mirror going `direction`, due at once (over
/// an existing one only with `replace`; its run state starts afresh). The
/// due list gets the entry first, so that no stored mirror is missing from
/// it.
///
/// # Errors
/// [`SettingsError`]; [`SettingsError::Refused`] when `repo` has a mirror
/// that way already and `replace` is not set.
pub fn add(
    store: &dyn ObjectStore,
    repo: &str,
    direction: Direction,
    mirror: &Mirror,
    replace: bool,
) -> Result<(), SettingsError> {
    crate::due::now(store, repo, direction)?;
    let same = |a: &str, b: &str| {
        let norm = |u: &str| u.trim_end_matches('/').trim_end_matches(".git").to_owned();
        norm(a) == norm(b)
    };
    let other = match direction {
        Direction::Pull => Direction::Push,
        Direction::Push => Direction::Pull,
    };
    update(store, repo, |doc| match doc.get(direction) {
        _ if doc.get(other).is_some_and(|o| same(&o.url, &mirror.url)) => Err(format!(
            "{repo} would push to the upstream it pulls from ({}): the push would undo the upstream's changes",
            mirror.url
        )),
        Some(old) if !replace => Err(match direction {
            Direction::Pull => format!(
                "{repo} mirrors {} already: pass --replace to change it",
                old.url
            ),
            Direction::Push => format!(
                "{repo} is pushed to {} already: pass --replace to change it",
                old.url
            ),
        }),
        _ => {
            *doc.slot(direction) = Some(mirror.clone());
            Ok(Some(()))
        }
    })?
    .map_err(SettingsError::Refused)?;
    Ok(())
}

/// Drops `repo`'s mirror going `direction` and its due-list entry; returns
/// the URL it mirrored (`None`: it had no such mirror). With
/// `wait_for_sync`, a mirror whose sync holds a live lease is not dropped
/// (a pull landing after the removal would undo pushes made meanwhile).
///
/// # Errors
/// [`SettingsError`]; [`SettingsError::Refused`] while a sync runs (with
/// `wait_for_sync`).
pub fn remove(
    store: &dyn ObjectStore,
    repo: &str,
    direction: Direction,
    wait_for_sync: bool,
) -> Result<Option<String>, SettingsError> {
    let now = crate::schedule::now_secs();
    let url = update(store, repo, |doc| {
        if let Some(lease) = doc.get(direction).and_then(|m| m.lease.as_ref()) {
            if wait_for_sync && lease.expires > now {
                // A sync that lands after the removal would undo what is
                // pushed meanwhile: the removal waits for it.
                return Err(format!(
                    "{repo}'s {} mirror is syncing now ({}, lease until {} s since the epoch): remove it once that ends",
                    direction.as_str(),
                    lease.owner,
                    lease.expires
                ));
            }
        }
        Ok(doc.slot(direction).take().map(|p| p.url))
    })?
    .map_err(SettingsError::Refused)?;
    crate::due::set(store, &crate::due::entry(repo, direction), None)?;
    Ok(url)
}

/// A push landed in `repo`: its push mirror, if it has one and is not
/// paused, is due at once (a push while one runs makes it run once more
/// after). Returns whether it has one due. One read of the document when
/// it has none.
///
/// # Errors
/// [`SettingsError`].
pub fn pushed(store: &dyn ObjectStore, repo: &str) -> Result<bool, SettingsError> {
    let mut has = false;
    update(store, repo, |doc| {
        let (due, changed) = doc.push_due();
        has = due;
        Ok(changed.then_some(()))
    })?
    .map_err(SettingsError::Refused)?;
    if has {
        crate::due::now(store, repo, Direction::Push)?;
    }
    Ok(has)
}

/// Ends the pause (or failure streak) of `repo`'s mirror going `direction`
/// and makes it due at once (`gitstow mirror resume`); returns whether it
/// was paused.
///
/// # Errors
/// [`SettingsError`]; [`SettingsError::Refused`] when `repo` has no mirror.
pub fn resume(
    store: &dyn ObjectStore,
    repo: &str,
    direction: Direction,
) -> Result<bool, SettingsError> {
    let was_paused = update(store, repo, |doc| match doc.slot(direction).as_mut() {
        Some(p) => {
            let was = p.paused.is_some();
            p.resume();
            Ok(Some(was))
        }
        None => Err(format!(
            "{repo} has no {} mirror (gitstow mirror add)",
            direction.as_str()
        )),
    })?
    .map_err(SettingsError::Refused)?
    .unwrap_or(false);
    crate::due::now(store, repo, direction)?;
    Ok(was_paused)
}
