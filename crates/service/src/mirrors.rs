//! Mirrors inside `gitstow serve` (plan 0017): any instance runs a due
//! mirror (a pull from its upstream, or a push to its remote), none leads.
//!
//! One worker thread reads the store's due list ([`gitstow_mirror::due`],
//! one GET), and for each mirror due takes its lease
//! ([`gitstow_mirror::schedule::claim`]; another instance holding it skips
//! it), pulls or pushes, and records the outcome and the next run. A push
//! that moves refs in a repository with a push mirror makes it due at once
//! and wakes this worker ([`Host::push_mirror_due`]); pushes that land
//! while it runs make it run once more after, so a burst of pushes costs
//! one or two runs. Then it sleeps
//! until the next mirror is due, at most [`MirrorConfig::poll`] (another
//! instance or `gitstow mirror add` may have changed the list meanwhile),
//! or longer while the store has no mirrors, backing off to
//! [`MirrorConfig::idle_max`]. [`Mirrors::wake`] ends a sleep at once (an
//! upstream's webhook on this instance, a push). Syncs run one at a time:
//! a mirror's ingest takes the cores and memory of one push.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gitstow_hooks::deliver::Deliverer;
use gitstow_mirror::schedule::{self, Claimed, Done};
use gitstow_mirror::secret::SealKey;
use gitstow_mirror::settings::{Direction, MirrorDoc};
use gitstow_mirror::trigger;
pub use gitstow_mirror::trigger::{Check, Proof, TriggerError};
use gitstow_mirror::{due, PullOptions};
use gitstow_odb::{IndexCache, Repository};
use gitstow_store::ObjectStore;

use crate::metrics as m;
use crate::{Host, Refusal};

/// Environment variable that lets tests shorten the lease's time to live
/// (seconds).
pub const TEST_LEASE_ENV: &str = "GITSTOW_TEST_MIRROR_LEASE_SECS";

/// How `serve` runs mirrors.
#[derive(Debug, Clone)]
pub struct MirrorConfig {
    /// How long a lease lasts unless renewed (renewed every third of it).
    pub lease_ttl: Duration,
    /// Each request to an upstream may take this long in all.
    pub timeout: Duration,
    /// The longest sleep between two reads of the due list while mirrors
    /// exist.
    pub poll: Duration,
    /// The longest sleep while the store has no mirrors.
    pub idle_max: Duration,
    /// A pull's bounds: pack size, and the ingest's (object size and
    /// count, chain depth, threads, staging directory), as a push's.
    pub pull: PullOptions,
}

impl Default for MirrorConfig {
    fn default() -> Self {
        MirrorConfig {
            lease_ttl: std::env::var(TEST_LEASE_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .map_or(schedule::DEFAULT_LEASE_TTL, Duration::from_secs),
            timeout: Duration::from_secs(3600),
            poll: Duration::from_secs(15),
            idle_max: Duration::from_secs(60),
            pull: PullOptions::default(),
        }
    }
}

/// The mirror worker of one process.
#[derive(Debug)]
pub struct Mirrors {
    wake: Mutex<mpsc::Sender<()>>,
}

impl Mirrors {
    /// Starts the worker thread; `key` opens mirrors' credentials (`None`:
    /// a mirror with credentials fails, saying what to set); `webhooks`
    /// delivers the event of a mirror that pauses to the repository's
    /// webhooks (`None`: deliveries are not running, the pause is logged
    /// only).
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn start(
        store: Arc<dyn ObjectStore>,
        indexes: Arc<IndexCache>,
        config: MirrorConfig,
        key: Option<SealKey>,
        webhooks: Option<Deliverer>,
    ) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = mpsc::channel();
        let worker = Worker {
            owner: schedule::owner_id(),
            store,
            indexes,
            config,
            key,
            webhooks,
        };
        std::thread::Builder::new()
            .name("gitstow-mirrors".into())
            .spawn(move || worker.run(rx))?;
        Ok(Arc::new(Mirrors {
            wake: Mutex::new(tx),
        }))
    }

    /// Ends the worker's sleep: it reads the due list at once.
    pub fn wake(&self) {
        if let Ok(tx) = self.wake.lock() {
            let _ = tx.send(());
        }
    }
}

/// The worker thread's settings.
struct Worker {
    owner: String,
    store: Arc<dyn ObjectStore>,
    indexes: Arc<IndexCache>,
    config: MirrorConfig,
    key: Option<SealKey>,
    webhooks: Option<Deliverer>,
}

impl Worker {
    fn run(&self, wake: mpsc::Receiver<()>) {
        let (store, config) = (&self.store, &self.config);
        let first_idle = Duration::from_secs(5).min(config.idle_max);
        let mut idle = first_idle;
        loop {
            let now = schedule::now_secs();
            let wait = match due::load(store.as_ref()) {
                Ok(list) if list.repos.is_empty() => {
                    let wait = idle;
                    idle = (idle * 2).min(config.idle_max);
                    wait
                }
                Ok(list) => {
                    idle = first_idle;
                    let (due, mut next) = list.due_at(now);
                    let mut ran = false;
                    for entry in due {
                        let (repo, direction) = due::parse_entry(&entry);
                        let mirror = Due {
                            entry: &entry,
                            repo,
                            direction,
                        };
                        match self.sync_one(&mirror, now) {
                            Tried::Ran => ran = true,
                            // Look again when that lease lapses (its holder
                            // may have died).
                            Tried::HeldUntil(t) => next = Some(next.map_or(t, |n| n.min(t))),
                            Tried::Nothing => {}
                        }
                    }
                    if ran {
                        Duration::ZERO
                    } else {
                        next.map_or(config.poll, |t| {
                            Duration::from_secs(t.saturating_sub(now).max(1)).min(config.poll)
                        })
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "mirrors: reading the due list");
                    config.poll
                }
            };
            if wait.is_zero() {
                continue;
            }
            match wake.recv_timeout(wait) {
                Ok(()) => {
                    idle = first_idle;
                    while wake.try_recv().is_ok() {}
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

/// What [`Worker::sync_one`] did.
enum Tried {
    /// A pull ran (whatever its outcome).
    Ran,
    /// Another holder's lease holds the mirror until then.
    HeldUntil(u64),
    /// Not due after all, gone, or the store failed.
    Nothing,
}

/// A due-list entry: the mirror of `repo` going `direction`.
struct Due<'a> {
    entry: &'a str,
    repo: &'a str,
    direction: Direction,
}

impl Worker {
    /// Claims and runs `mirror` if it is due and free; corrects its due-list
    /// entry when the list was wrong.
    fn sync_one(&self, mirror: &Due<'_>, now: u64) -> Tried {
        let (store, indexes, config, owner) =
            (&self.store, &self.indexes, &self.config, &self.owner);
        let key = self.key.as_ref();
        let (repo, direction) = (mirror.repo, mirror.direction);
        let claimed = schedule::claim(
            store.as_ref(),
            repo,
            direction,
            owner,
            config.lease_ttl,
            now,
            false,
        );
        let claim = match claimed {
            Ok(Claimed::Claimed(c)) => c,
            Ok(Claimed::Held(lease)) => return Tried::HeldUntil(lease.expires),
            Ok(Claimed::NotDue(next)) => {
                // The list said due; the mirror's own document says otherwise.
                if let Err(e) = due::set(store.as_ref(), mirror.entry, next) {
                    tracing::warn!(repo, error = %e, "mirrors: correcting the due list");
                }
                return Tried::Nothing;
            }
            Ok(Claimed::Gone) => {
                if let Err(e) = due::set(store.as_ref(), mirror.entry, None) {
                    tracing::warn!(repo, error = %e, "mirrors: correcting the due list");
                }
                return Tried::Nothing;
            }
            Err(e) => {
                tracing::warn!(repo, error = %e, "mirrors: claiming a mirror");
                return Tried::Nothing;
            }
        };
        let started = Instant::now();
        let repository = Repository::new(store.clone(), repo, indexes.clone());
        let synced = claim.run(
            store.as_ref(),
            &repository,
            key,
            config.pull.clone(),
            config.timeout,
        );
        let way = direction.as_str();
        metrics::histogram!(m::MIRROR_SYNC_DURATION, "direction" => way)
            .record(started.elapsed().as_secs_f64());
        let ms = started.elapsed().as_millis() as u64;
        match &synced {
            Ok(s) => match &s.outcome {
                Ok(Done::Pushed(p)) => {
                    metrics::counter!(m::MIRROR_SYNCS, "direction" => way, "result" => "ok")
                        .increment(1);
                    tracing::info!(
                        repo,
                        remote = %s.url,
                        created = p.created,
                        updated = p.updated,
                        deleted = p.deleted,
                        pack_bytes = p.pack_bytes,
                        lfs_copied = p.lfs.copied,
                        lfs_missing = p.lfs.missing.len(),
                        next_run = s.next_run,
                        ms,
                        "mirror push"
                    );
                }
                Ok(Done::Pulled(p)) => {
                    metrics::counter!(m::MIRROR_SYNCS, "direction" => way, "result" => "ok")
                        .increment(1);
                    follow_head(&repository, p.head.as_deref());
                    tracing::info!(
                        repo,
                        upstream = %s.url,
                        created = p.created,
                        updated = p.updated,
                        deleted = p.deleted,
                        kept = p.kept.len(),
                        objects = p.objects,
                        pack_bytes = p.pack_bytes,
                        lfs_copied = p.lfs.copied,
                        lfs_missing = p.lfs.missing.len(),
                        next_run = s.next_run,
                        ms,
                        "mirror sync"
                    );
                }
                Err(f) => {
                    let result = if s.paused.is_some() {
                        "paused"
                    } else {
                        "failed"
                    };
                    metrics::counter!(m::MIRROR_SYNCS, "direction" => way, "result" => result)
                        .increment(1);
                    tracing::warn!(
                        repo,
                        direction = way,
                        url = %s.url,
                        error = %f.message,
                        permanent = f.permanent,
                        paused = s.paused.is_some(),
                        next_run = s.next_run,
                        ms,
                        "mirror sync failed"
                    );
                }
            },
            Err(e) => {
                metrics::counter!(m::MIRROR_SYNCS, "direction" => way, "result" => "error")
                    .increment(1);
                tracing::warn!(repo, error = %e, ms, "mirror sync: recording the outcome");
            }
        }
        if let Ok(schedule::Synced {
            paused: Some((why, failures)),
            url,
            ..
        }) = &synced
        {
            self.tell_paused(repo, direction, url, why, *failures);
        }
        Tried::Ran
    }

    /// Records the event of `repo`'s mirror pausing for the webhooks that
    /// receive the repository's events (one read of the access document); a
    /// failure is logged.
    fn tell_paused(&self, repo: &str, direction: Direction, url: &str, why: &str, failures: u32) {
        let Some(deliverer) = &self.webhooks else {
            return;
        };
        let webhooks: Vec<String> = match gitstow_access::load(self.store.as_ref()) {
            Ok((doc, _)) => doc.webhooks_for(repo).map(|w| w.name.clone()).collect(),
            Err(e) => {
                tracing::warn!(repo, error = %e, "mirror paused: reading the webhooks");
                return;
            }
        };
        let event = gitstow_hooks::webhook::MirrorJson {
            direction: direction.as_str().to_owned(),
            url: url.to_owned(),
            paused: why.to_owned(),
            failures,
        };
        if let Err(e) = deliverer.outbox(webhooks).mirror_paused(repo, event) {
            tracing::warn!(repo, error = %e, "mirror paused: recording the webhook event");
        }
    }
}

/// The way from a push to its repository's push mirror.
#[derive(Debug, Clone)]
pub(crate) struct PushMirrorDue {
    store: Arc<dyn ObjectStore>,
    mirrors: Option<Arc<Mirrors>>,
}

impl PushMirrorDue {
    /// A push moved refs in `repo`: its push mirror is due at once and
    /// this instance's worker wakes. A failure is logged (the push stands;
    /// the mirror's interval catches up). Blocks on the store.
    pub(crate) fn pushed(&self, repo: &str) {
        match gitstow_mirror::settings::pushed(self.store.as_ref(), repo) {
            Ok(true) => {
                if let Some(m) = &self.mirrors {
                    m.wake();
                }
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(repo, error = %e, "mirror: making the push mirror due")
            }
        }
    }
}

/// Why an upstream's webhook is refused.
#[derive(Debug, thiserror::Error)]
pub enum HookRefusal {
    /// The check said no (no mirror, no secret, no key, a mismatch).
    #[error(transparent)]
    Trigger(#[from] TriggerError),
    /// The store failed (logged).
    #[error(transparent)]
    Store(#[from] Refusal),
}

/// Why Git LFS objects of a repository may not move
/// ([`Host::lfs_repository`]).
#[derive(Debug, thiserror::Error)]
pub enum LfsRefusal {
    /// No such repository, and not an upload to a name a push would create.
    #[error("repository not found")]
    NotFound,
    /// An upload into a pull mirror (the text says which upstream to
    /// push to, as a push's refusal does).
    #[error("{0}")]
    PullMirror(String),
    /// The store failed (logged).
    #[error(transparent)]
    Store(#[from] Refusal),
}

/// What a push or an LFS upload into a pull mirror of `url` is told.
pub(crate) fn pull_mirror_refusal(url: &str) -> String {
    format!("this repository is a pull mirror of {url}: push to the upstream")
}

/// What a Git LFS request does with a repository's objects
/// ([`Host::lfs_repository`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LfsAccess {
    /// Download or list (locks).
    Download,
    /// A batch upload, or an SSH `git-lfs-transfer … upload` session.
    Upload,
    /// One object's upload or verify under a grant an upload batch signed
    /// (which checked the repository's mirrors already).
    Granted,
}

impl Host {
    /// Whether Git LFS objects of `name` may move, for both transports'
    /// batch and transfer commands: the repository exists, or an upload
    /// goes to a name a push would create (git-lfs uploads before the
    /// push); an upload into a pull mirror is refused as a push into it
    /// is (its objects come from the upstream). One read of the state
    /// and, for [`LfsAccess::Upload`], one of the mirror document at the
    /// same time (as a push reads it).
    ///
    /// # Errors
    /// [`LfsRefusal`].
    pub async fn lfs_repository(&self, name: &str, access: LfsAccess) -> Result<(), LfsRefusal> {
        let mirrors = async {
            match access {
                LfsAccess::Upload => self.mirrors_of(name).await.map(Some),
                LfsAccess::Download | LfsAccess::Granted => Ok(None),
            }
        };
        let (state, mirrors) = tokio::join!(self.state(name), mirrors);
        let upload = access != LfsAccess::Download;
        match state? {
            Some(_) => {}
            None if upload && self.config().auto_create => {}
            None => return Err(LfsRefusal::NotFound),
        }
        if let Some(pull) = mirrors?.and_then(|m| m.pull) {
            return Err(LfsRefusal::PullMirror(pull_mirror_refusal(&pull.url)));
        }
        Ok(())
    }

    /// `name`'s mirrors (none: the default document): one read of its
    /// mirror document.
    ///
    /// # Errors
    /// The store failed or the document is corrupt.
    pub(crate) async fn mirrors_of(&self, name: &str) -> Result<MirrorDoc, Refusal> {
        let repo = name.to_owned();
        let doc = self
            .read_store("reading the mirror settings", move |store| {
                gitstow_mirror::settings::load(store, &repo)
            })
            .await?;
        Ok(doc.map(|(d, _)| d).unwrap_or_default())
    }

    /// What a push into a repository with a push mirror calls once refs
    /// moved ([`PushMirrorDue::pushed`]).
    pub(crate) fn push_mirror_due(&self) -> PushMirrorDue {
        PushMirrorDue {
            store: self.store.clone(),
            mirrors: self.mirrors.clone(),
        }
    }

    /// Starts checking an upstream's webhook for `name`'s pull mirror
    /// ([`gitstow_mirror::trigger`]): one read of the mirror document.
    /// Feed the check the request body if it needs it, finish it, then
    /// [`Host::mirror_due_now`].
    ///
    /// # Errors
    /// [`HookRefusal`].
    pub async fn mirror_webhook(
        &self,
        name: &str,
        proof: Proof,
    ) -> Result<trigger::Check, HookRefusal> {
        let mirror = self
            .mirrors_of(name)
            .await?
            .pull
            .ok_or(TriggerError::NoMirror)?;
        Ok(trigger::begin(
            &mirror,
            name,
            self.config.secrets_key.as_ref(),
            &proof,
        )?)
    }

    /// Makes `name`'s pull mirror due at once and wakes this instance's
    /// worker (another instance may take it first).
    ///
    /// # Errors
    /// [`HookRefusal`] ([`TriggerError::NoMirror`] when it has none).
    pub async fn mirror_due_now(&self, name: &str) -> Result<(), HookRefusal> {
        let repo = name.to_owned();
        let done = self
            .read_store("making a mirror due", move |store| {
                match trigger::make_due(store, &repo) {
                    // No pull mirror: a refusal, not a failure.
                    Err(gitstow_mirror::settings::SettingsError::Refused(_)) => Ok(false),
                    other => other.map(|()| true),
                }
            })
            .await?;
        if !done {
            return Err(TriggerError::NoMirror.into());
        }
        self.wake_mirrors();
        Ok(())
    }
}

/// Points `repo`'s HEAD at `target` (`refs/heads/…`, the upstream's HEAD)
/// when it names another branch (a failure is logged: the pull stands).
pub fn follow_head(repo: &Repository, target: Option<&str>) {
    let Some(branch) = target.and_then(|t| t.strip_prefix("refs/heads/")) else {
        return;
    };
    let current = repo
        .load_state()
        .ok()
        .flatten()
        .and_then(|v| v.state.head.clone());
    if current.as_deref() == target {
        return;
    }
    let opts = gitstow_maintain::Options::default();
    match gitstow_maintain::admin::set_head(repo, branch, &opts) {
        Ok(()) => tracing::info!(
            repo = repo.name(),
            head = target,
            "mirror: HEAD follows the upstream's"
        ),
        Err(e) => {
            tracing::warn!(repo = repo.name(), error = %e, "mirror: setting HEAD to the upstream's")
        }
    }
}
