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
//!
//! - this module: a mirror's settings and run state ([`Mirror`]), and what
//!   they are made of;
//! - `document`: the stored document ([`MirrorDoc`]) and the changes to it
//!   by compare-and-swap ([`update`], [`add`], [`remove`], [`pushed`],
//!   [`resume`]).

use serde::{Deserialize, Serialize};

use crate::pull::{Mode, PullOptions, RefFilter};

mod document;

pub use document::{add, key, load, pushed, remove, resume, update, MirrorDoc, SettingsError};

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

#[cfg(test)]
mod tests;
