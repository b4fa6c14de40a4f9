//! A repository's mirrors as stored: `<repo>.git/mirror`, one JSON
//! document holding its pull mirror (where its refs come from) and its
//! push mirror (where they are handed on), each with its settings (URL,
//! refs, mode, interval) and its run state (last attempt, last success,
//! last error, failures in a row),
//! changed only by compare-and-swap so that two instances or commands never
//! lose each other's writes. The run state also holds the **lease** of the
//! instance (or `gitstow mirror sync`) pulling it now, so that one mirror
//! never runs twice at once, and whether it is **paused** (after permanent
//! failures, until `gitstow mirror resume`).

use serde::{Deserialize, Serialize};

use gitstow_store::{ETag, ObjectStore, PutCondition};

use crate::pull::{Mode, PullOptions, RefFilter};

/// The shortest interval between two scheduled pulls, in seconds (an
/// upstream is not a thing to poll every second).
pub const MIN_INTERVAL_SECS: u64 = 60;

/// Environment variable that lets tests set intervals down to 1 s (`1`).
pub const TEST_SHORT_INTERVAL_ENV: &str = "GITSTOW_TEST_SHORT_MIRROR_INTERVAL";

/// Permanent failures in a row (a 401, 403 or 404, a refused pack) after
/// which a mirror is paused until `gitstow mirror resume`.
pub const PAUSE_AFTER: u32 = 3;

/// Most LFS objects a mirror's run state lists as not moved (the first
/// ones; the rest are found again by the next sync that brings them).
pub const MAX_LFS_MISSING: usize = 1000;

/// The first retry after a failure comes this long after it, in seconds,
/// doubling with each failure in a row, never later than the interval.
pub const RETRY_BASE_SECS: u64 = 30;

/// The shortest interval allowed now ([`MIN_INTERVAL_SECS`], or 1 s under
/// [`TEST_SHORT_INTERVAL_ENV`]).
pub fn min_interval_secs() -> u64 {
    if std::env::var(TEST_SHORT_INTERVAL_ENV).is_ok_and(|v| v == "1") {
        1
    } else {
        MIN_INTERVAL_SECS
    }
}

/// Which way a mirror goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From an upstream into the repository (`mirror add --from`).
    Pull,
    /// From the repository to a remote (`mirror add --to`), after each
    /// push and every interval.
    Push,
}

impl Direction {
    /// `pull` or `push`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Pull => "pull",
            Direction::Push => "push",
        }
    }
}

/// Who is pulling a mirror now, and until when unless renewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The holder: `<host>/<pid>-<random>` of an instance or a command.
    pub owner: String,
    /// Seconds since the epoch at which the lease lapses.
    pub expires: u64,
}

/// A mirror's credentials for its upstream: a user name and a password or
/// token, sealed with the operator's key for this repository's mirror.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// The user name (shown in listings).
    pub username: String,
    /// The password or token, sealed ([`crate::secret::SealKey::seal`]).
    pub sealed_password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}, <sealed>)", self.username)
    }
}

impl Credential {
    /// What a sealed password of `repo`'s mirror of `url` is bound to: the
    /// repository and the URL, so that a document whose URL someone with
    /// write access to the bucket changed opens no password to send there.
    pub fn context(repo: &str, url: &str) -> String {
        format!("mirror:{repo}:{}:password", url.trim_end_matches('/'))
    }

    /// `username` and `password`, the password sealed with `key` for
    /// `repo`'s mirror of `url`.
    pub fn seal(
        key: &crate::secret::SealKey,
        repo: &str,
        url: &str,
        username: &str,
        password: &str,
    ) -> Self {
        Credential {
            username: username.to_owned(),
            sealed_password: key.seal(&Credential::context(repo, url), password.as_bytes()),
        }
    }
}

/// How a failed pull failed, for the run state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// What to show (no credentials: the URL holds none).
    pub message: String,
    /// Trying again will not help without a change (401, 403, 404, a
    /// refused pack): the mirror pauses after [`PAUSE_AFTER`] in a row.
    pub permanent: bool,
}

/// The store key of `repo`'s mirror document.
pub fn key(repo: &str) -> String {
    format!("{repo}.git/mirror")
}

/// A mirror's settings and run state: a pull mirror's upstream or a push
/// mirror's remote (the fields of a pull alone, `exact` and
/// `webhook_secret`, are unset on a push mirror: it always makes the
/// remote equal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mirror {
    /// The upstream's URL (`http(s)://`, no credentials).
    pub url: String,
    /// The ref patterns taken (`refs/heads/*`, …).
    pub refs: Vec<String>,
    /// Apply the upstream exactly (keep no old tips).
    #[serde(default)]
    pub exact: bool,
    /// The credentials sent to the upstream (HTTP Basic), the password
    /// sealed ([`crate::secret`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<Credential>,
    /// An SSH upstream's private key (OpenSSH), sealed for
    /// `mirror:<repo>:<url>:ssh-key` ([`crate::secret`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_ssh_key: Option<String>,
    /// The host key an SSH upstream must show (`SHA256:…`): given, or the
    /// first one a successful sync saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_host_key: Option<String>,
    /// The secret an upstream's webhook proves itself with, sealed for
    /// `mirror:<repo>:webhook` ([`crate::trigger`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
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
    /// Why the mirror is paused (no scheduled pulls until `gitstow mirror
    /// resume`), when it is.
    #[serde(default)]
    pub paused: Option<String>,
    /// A pull was asked for (`mirror sync` while another held the lease,
    /// an upstream's webhook): due at once.
    #[serde(default)]
    pub due_now: bool,
    /// The lease of the pull running now.
    #[serde(default)]
    pub lease: Option<Lease>,
    /// Git LFS objects the last sync could not move (at most
    /// [`MAX_LFS_MISSING`]): a pull asks for them again at the next sync.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lfs_missing: Vec<crate::lfs::Missing>,
}

impl Mirror {
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
        let least = min_interval_secs();
        if interval_secs < least {
            return Err(format!(
                "an interval of {interval_secs} s is shorter than the least allowed, {least} s"
            ));
        }
        Ok(Mirror {
            url: url.trim_end_matches('/').to_owned(),
            refs: filter.patterns().to_vec(),
            exact,
            credential: None,
            sealed_ssh_key: None,
            ssh_host_key: None,
            webhook_secret: None,
            interval_secs,
            last_attempt: None,
            last_success: None,
            last_error: None,
            failures: 0,
            paused: None,
            due_now: false,
            lease: None,
            lfs_missing: Vec::new(),
        })
    }

    /// When the next scheduled pull is due (seconds since the epoch; 0: at
    /// once), or `None` while paused. After a failure the retry comes
    /// sooner than the interval: [`RETRY_BASE_SECS`] doubled per failure
    /// in a row, at most the interval.
    pub fn next_run(&self) -> Option<u64> {
        if self.paused.is_some() {
            return None;
        }
        let Some(last) = self.last_attempt else {
            return Some(0);
        };
        if self.due_now {
            return Some(0);
        }
        let wait = if self.failures == 0 {
            self.interval_secs
        } else {
            let doubled = RETRY_BASE_SECS.saturating_mul(1 << (self.failures - 1).min(20));
            doubled.min(self.interval_secs)
        };
        Some(last.saturating_add(wait))
    }

    /// Whether a lease other than `owner`'s holds the mirror at `now`.
    pub fn held_by_other(&self, owner: &str, now: u64) -> Option<&Lease> {
        self.lease
            .as_ref()
            .filter(|l| l.owner != owner && l.expires > now)
    }

    /// The upstream of `repo`'s mirror, with its credentials opened with
    /// `key`, each request bounded by `timeout`.
    ///
    /// # Errors
    /// The URL is refused, the mirror has credentials and no key was
    /// given ([`crate::secret::KEY_MISSING`]), or they do not open.
    pub fn upstream(
        &self,
        repo: &str,
        key: Option<&crate::secret::SealKey>,
        timeout: std::time::Duration,
    ) -> Result<crate::Upstream, String> {
        let mut upstream = crate::Upstream::new(&self.url, timeout).map_err(|e| e.to_string())?;
        if let Some(sealed) = &self.sealed_ssh_key {
            let key = key.ok_or(crate::secret::KEY_MISSING)?;
            let pem = key.open(&Mirror::ssh_key_context(repo, &self.url), sealed)?;
            let pem = String::from_utf8(pem).map_err(|_| "the sealed SSH key is not UTF-8")?;
            upstream = upstream
                .with_ssh_key(&pem, self.ssh_host_key.as_deref())
                .map_err(|e| e.to_string())?;
        }
        let Some(c) = &self.credential else {
            return Ok(upstream);
        };
        let key = key.ok_or(crate::secret::KEY_MISSING)?;
        let password = key.open(&Credential::context(repo, &self.url), &c.sealed_password)?;
        let password =
            String::from_utf8(password).map_err(|_| "the sealed password is not UTF-8")?;
        Ok(upstream.with_basic(&c.username, &password))
    }

    /// What a sealed SSH key of `repo`'s mirror is bound to.
    pub fn ssh_key_context(repo: &str, url: &str) -> String {
        format!("mirror:{repo}:{}:ssh-key", url.trim_end_matches('/'))
    }

    /// The options of a pull of this mirror, on top of `base` (limits).
    ///
    /// # Errors
    /// A stored pattern that no longer parses.
    pub fn pull_options(&self, base: PullOptions) -> Result<PullOptions, String> {
        Ok(PullOptions {
            filter: RefFilter::new(self.refs.clone())?,
            mode: if self.exact { Mode::Exact } else { Mode::Safe },
            lfs_retry: self
                .lfs_missing
                .iter()
                .filter_map(|m| Some((gitstow_lfs::Oid::parse(&m.oid)?, m.size)))
                .collect(),
            ..base
        })
    }

    /// Records the outcome of a sync (pull or push) that started at `started`; a
    /// permanent failure that makes [`PAUSE_AFTER`] failures in a row
    /// pauses the mirror, a success ends a pause. Returns whether this
    /// outcome paused it.
    pub fn record(&mut self, started: u64, outcome: Result<(), &Failed>) -> bool {
        self.last_attempt = Some(started);
        match outcome {
            Ok(_) => {
                self.last_success = Some(started);
                self.last_error = None;
                self.failures = 0;
                self.paused = None;
                false
            }
            Err(e) => {
                self.last_error = Some(e.message.clone());
                self.failures = self.failures.saturating_add(1);
                if e.permanent && self.failures >= PAUSE_AFTER && self.paused.is_none() {
                    self.paused = Some(format!(
                        "{} failures in a row, the last one permanent: {}",
                        self.failures, e.message
                    ));
                    return true;
                }
                false
            }
        }
    }

    /// Clears a pause and the failure count, and makes the mirror due at
    /// once (`gitstow mirror resume`).
    pub fn resume(&mut self) {
        self.paused = None;
        self.failures = 0;
        self.due_now = true;
    }
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
    crate::due::set(store, &crate::due::entry(repo, direction), Some(0))?;
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
        has = false;
        let Some(p) = doc.push.as_mut().filter(|p| p.paused.is_none()) else {
            return Ok(None);
        };
        has = true;
        if p.due_now {
            return Ok(None);
        }
        p.due_now = true;
        Ok(Some(()))
    })?
    .map_err(SettingsError::Refused)?;
    if has {
        crate::due::set(store, &crate::due::entry(repo, Direction::Push), Some(0))?;
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
    crate::due::set(store, &crate::due::entry(repo, direction), Some(0))?;
    Ok(was_paused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(message: &str, permanent: bool) -> Failed {
        Failed {
            message: message.into(),
            permanent,
        }
    }

    #[test]
    fn failures_back_off_then_permanent_ones_pause_until_resumed() {
        let mut m = Mirror::new("https://h/x.git", vec![], false, 3600).unwrap();
        assert_eq!(m.next_run(), Some(0), "a new mirror is due at once");
        assert!(!m.record(1000, Ok(())));
        assert_eq!(m.next_run(), Some(4600));
        // Transient failures: 30 s, 60 s, 120 s … never past the interval.
        let mut waits = Vec::new();
        for i in 0..9 {
            let t = 2000 + i * 10_000;
            assert!(!m.record(t, Err(&failed("HTTP 503", false))));
            waits.push(m.next_run().unwrap() - t);
        }
        assert_eq!(waits, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert!(m.paused.is_none(), "transient failures never pause");
        m.due_now = true;
        assert_eq!(m.next_run(), Some(0));
        m.due_now = false;
        // Permanent failures pause at the third in a row.
        assert!(!m.record(200_000, Ok(())));
        assert!(!m.record(200_100, Err(&failed("HTTP 401", true))));
        assert!(!m.record(200_200, Err(&failed("HTTP 401", true))));
        assert!(m.record(200_300, Err(&failed("HTTP 401", true))));
        assert_eq!(m.next_run(), None);
        assert!(m.paused.as_deref().unwrap().contains("HTTP 401"));
        m.resume();
        assert_eq!((m.next_run(), m.failures), (Some(0), 0));
        // Leases: one's own does not hold one off; an expired one neither.
        m.lease = Some(Lease {
            owner: "a".into(),
            expires: 500,
        });
        assert!(m.held_by_other("b", 499).is_some());
        assert!(m.held_by_other("a", 499).is_none());
        assert!(m.held_by_other("b", 500).is_none());
    }

    #[test]
    fn a_push_mirror_beside_a_pull_mirror_is_made_due_by_pushes() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let due = |entry: &str| crate::due::load(&store).unwrap().repos.get(entry).copied();
        // No push mirror: a push reads the document and writes nothing.
        assert!(!pushed(&store, "org/app").unwrap());
        assert!(load(&store, "org/app").unwrap().is_none());
        let pull = Mirror::new("https://up/app.git", vec![], false, 600).unwrap();
        let push = Mirror::new("https://down/app.git", vec![], true, 600).unwrap();
        add(&store, "org/app", Direction::Pull, &pull, false).unwrap();
        add(&store, "org/app", Direction::Push, &push, false).unwrap();
        let refused = add(&store, "org/app", Direction::Push, &push, false).unwrap_err();
        assert!(refused
            .to_string()
            .contains("is pushed to https://down/app.git already"));
        assert_eq!((due("org/app"), due("org/app push")), (Some(0), Some(0)));
        // A run of each, then a push: only the push mirror is due again.
        update(&store, "org/app", |d| {
            d.pull.as_mut().unwrap().record(100, Ok(()));
            d.push.as_mut().unwrap().record(100, Ok(()));
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        crate::due::set(&store, "org/app push", Some(700)).unwrap();
        assert!(pushed(&store, "org/app").unwrap());
        let (doc, _) = load(&store, "org/app").unwrap().unwrap();
        assert_eq!(doc.push.as_ref().unwrap().next_run(), Some(0));
        assert_eq!(doc.pull.as_ref().unwrap().next_run(), Some(700));
        assert_eq!(due("org/app push"), Some(0));
        // A paused push mirror stays paused.
        update(&store, "org/app", |d| {
            let p = d.push.as_mut().unwrap();
            p.due_now = false;
            p.paused = Some("401".into());
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        assert!(!pushed(&store, "org/app").unwrap());
        // Each goes on its own; the document with them.
        assert_eq!(
            remove(&store, "org/app", Direction::Push, true)
                .unwrap()
                .as_deref(),
            Some("https://down/app.git")
        );
        assert_eq!(due("org/app push"), None);
        assert!(load(&store, "org/app").unwrap().unwrap().0.pull.is_some());
        remove(&store, "org/app", Direction::Pull, true).unwrap();
        assert!(load(&store, "org/app").unwrap().is_none());
    }

    #[test]
    fn a_syncing_mirror_is_not_removed_and_no_mirror_pushes_to_its_own_upstream() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let pull = Mirror::new("https://up/org/app.git", vec![], false, 600).unwrap();
        add(&store, "org/app", Direction::Pull, &pull, false).unwrap();
        // The pull mirror's own upstream as the push mirror's remote (with
        // or without `.git` and `/`): refused.
        for url in [
            "https://up/org/app.git",
            "https://up/org/app/",
            "https://up/org/app",
        ] {
            let push = Mirror::new(url, vec![], true, 600).unwrap();
            let e = add(&store, "org/app", Direction::Push, &push, false).unwrap_err();
            assert!(
                e.to_string()
                    .contains("would push to the upstream it pulls from"),
                "{e}"
            );
        }
        // A live lease holds off `mirror remove`, not `repo delete`'s.
        update(&store, "org/app", |d| {
            d.pull.as_mut().unwrap().lease = Some(Lease {
                owner: "host/1-a".into(),
                expires: u64::MAX,
            });
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        let e = remove(&store, "org/app", Direction::Pull, true).unwrap_err();
        assert!(e.to_string().contains("is syncing now (host/1-a"), "{e}");
        assert!(load(&store, "org/app").unwrap().is_some());
        assert!(remove(&store, "org/app", Direction::Pull, false)
            .unwrap()
            .is_some());
    }

    #[test]
    fn a_sealed_password_opens_only_for_the_url_it_was_sealed_for() {
        let key = crate::secret::SealKey::from_hex(&"11".repeat(32)).unwrap();
        let mut m = Mirror::new("https://up/org/app.git", vec![], false, 600).unwrap();
        m.credential = Some(Credential::seal(&key, "org/app", &m.url, "bot", "pw-0123"));
        let t = std::time::Duration::from_secs(1);
        assert!(m.upstream("org/app", Some(&key), t).is_ok());
        // The URL changed in the bucket: the password does not open.
        m.url = "https://evil.example/capture.git".into();
        let e = m.upstream("org/app", Some(&key), t).unwrap_err();
        assert!(!e.contains("pw-0123"), "{e}");
    }

    #[test]
    fn a_mirror_is_added_recorded_and_removed_by_compare_and_swap() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        assert!(load(&store, "org/app").unwrap().is_none());
        let m = Mirror::new("https://h/org/app.git/", vec![], false, 600).unwrap();
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
            p.record(100, Err(&failed("the upstream answered HTTP 503", false)));
            p.record(200, Err(&failed("again", false)));
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
            assert!(Mirror::new(url, refs, false, interval).is_err(), "{url}");
        }
    }
}
