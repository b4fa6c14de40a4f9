//! A repository's pull mirror as stored: `<repo>.git/mirror`, one JSON
//! document of its settings (upstream URL, refs, mode, interval) and its
//! run state (last attempt, last success, last error, failures in a row),
//! changed only by compare-and-swap so that two instances or commands never
//! lose each other's writes.

use serde::{Deserialize, Serialize};

use gitstow_store::{ETag, ObjectStore, PutCondition};

use crate::pull::{Mode, PullOptions, Pulled, RefFilter};

/// The shortest interval between two scheduled pulls, in seconds (an
/// upstream is not a thing to poll every second).
pub const MIN_INTERVAL_SECS: u64 = 60;

/// The store key of `repo`'s mirror document.
pub fn key(repo: &str) -> String {
    format!("{repo}.git/mirror")
}

/// A pull mirror's settings and run state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullMirror {
    /// The upstream's URL (`http(s)://`, no credentials).
    pub url: String,
    /// The ref patterns taken (`refs/heads/*`, …).
    pub refs: Vec<String>,
    /// Apply the upstream exactly (keep no old tips).
    #[serde(default)]
    pub exact: bool,
    /// Seconds between scheduled pulls.
    pub interval_secs: u64,
    /// When a pull last started (seconds since the epoch).
    #[serde(default)]
    pub last_attempt: Option<u64>,
    /// When a pull last succeeded.
    #[serde(default)]
    pub last_success: Option<u64>,
    /// What the last failed pull said (no credentials: the URL holds none).
    #[serde(default)]
    pub last_error: Option<String>,
    /// Failed pulls since the last success.
    #[serde(default)]
    pub failures: u32,
}

impl PullMirror {
    /// A new mirror of `url` (checked as a pull would check it), taking
    /// `refs` (empty: the default patterns), every `interval_secs` (at
    /// least [`MIN_INTERVAL_SECS`]).
    ///
    /// # Errors
    /// Why the URL, a pattern or the interval is refused.
    pub fn new(
        url: &str,
        refs: Vec<String>,
        exact: bool,
        interval_secs: u64,
    ) -> Result<Self, String> {
        crate::Upstream::new(url, std::time::Duration::from_secs(1)).map_err(|e| e.to_string())?;
        let filter = if refs.is_empty() {
            RefFilter::default()
        } else {
            RefFilter::new(refs)?
        };
        if interval_secs < MIN_INTERVAL_SECS {
            return Err(format!(
                "an interval of {interval_secs} s is shorter than the least allowed, {MIN_INTERVAL_SECS} s"
            ));
        }
        Ok(PullMirror {
            url: url.trim_end_matches('/').to_owned(),
            refs: filter.patterns().to_vec(),
            exact,
            interval_secs,
            last_attempt: None,
            last_success: None,
            last_error: None,
            failures: 0,
        })
    }

    /// The options of a pull of this mirror, on top of `base` (limits).
    ///
    /// # Errors
    /// A stored pattern that no longer parses.
    pub fn pull_options(&self, base: PullOptions) -> Result<PullOptions, String> {
        Ok(PullOptions {
            filter: RefFilter::new(self.refs.clone())?,
            mode: if self.exact { Mode::Exact } else { Mode::Safe },
            ..base
        })
    }

    /// Records the outcome of a pull that started at `started`.
    pub fn record(&mut self, started: u64, outcome: &Result<Pulled, String>) {
        self.last_attempt = Some(started);
        match outcome {
            Ok(_) => {
                self.last_success = Some(started);
                self.last_error = None;
                self.failures = 0;
            }
            Err(e) => {
                self.last_error = Some(e.clone());
                self.failures = self.failures.saturating_add(1);
            }
        }
    }
}

/// The stored document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorDoc {
    /// The pull mirror, if any.
    pub pull: Option<PullMirror>,
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
        let written = if doc.pull.is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_is_added_recorded_and_removed_by_compare_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        assert!(load(&store, "org/app").unwrap().is_none());
        let m = PullMirror::new("https://h/org/app.git/", vec![], false, 600).unwrap();
        assert_eq!(m.url, "https://h/org/app.git");
        assert_eq!(m.refs, ["refs/heads/*", "refs/tags/*"]);
        update(&store, "org/app", |d| {
            d.pull = Some(m.clone());
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        update(&store, "org/app", |d| {
            let p = d.pull.as_mut().unwrap();
            p.record(100, &Err("the upstream answered HTTP 503".into()));
            p.record(200, &Err("again".into()));
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        let (doc, _) = load(&store, "org/app").unwrap().unwrap();
        let p = doc.pull.unwrap();
        assert_eq!(
            (p.failures, p.last_attempt, p.last_success),
            (2, Some(200), None)
        );
        assert_eq!(p.last_error.as_deref(), Some("again"));
        update(&store, "org/app", |d| {
            d.pull = None;
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        assert!(load(&store, "org/app").unwrap().is_none());
        for (url, refs, interval) in [
            ("https://u:p@h/x.git", vec![], 600),
            ("https://h/x.git", vec!["heads/*".to_owned()], 600),
            ("https://h/x.git", vec![], 5),
        ] {
            assert!(
                PullMirror::new(url, refs, false, interval).is_err(),
                "{url}"
            );
        }
    }
}
