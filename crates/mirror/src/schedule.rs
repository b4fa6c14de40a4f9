//! A stored mirror's sync (a pull, or a push to its remote) under its
//! lease, from any instance or from `gitstow mirror sync` (plan 0017 steps
//! 2 and 4).
//!
//! [`claim`] takes the mirror's lease in its document by compare-and-swap
//! when it is due (or when asked, `force`) and no other live lease holds
//! it; [`Claim::run`] pulls, renewing the lease every third of its time to
//! live on a thread of its own, then [`Claim::finish`]es: the outcome goes
//! into the run state, the lease is dropped, and the due list
//! ([`crate::due`]) gets the next run. A holder that dies leaves a lease
//! that lapses after its time to live; the next instance then runs the
//! mirror again from the start. That is safe, because a pull changes
//! nothing until its one compare-and-swap of the state, whose old values
//! make a stale pull lose rather than roll a ref back; and a push sends
//! the remote's advertised values as the old ones, so a stale push is
//! refused there rather than roll the remote back.

use std::sync::mpsc;
use std::time::Duration;

use gitstow_odb::Repository;
use gitstow_store::ObjectStore;

use crate::secret::SealKey;
use crate::settings::{self, Direction, Failed, Lease, Mirror, SettingsError};
use crate::{PullOptions, Pulled, PushOptions, Pushed};

/// How long a lease lasts unless renewed, by default.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(120);

/// A lease holder's name: `<host>/<pid>-<random>`, unique to this process
/// (and to each call, so that two commands in one process differ).
pub fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let t = gitstow_odb::unique_token();
    let n = u32::from_be_bytes(t[..4].try_into().expect("4 bytes"));
    format!("{host}/{}-{n:08x}", std::process::id())
}

/// Seconds since the epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What [`claim`] found.
#[derive(Debug)]
pub enum Claimed {
    /// The lease is ours: run it.
    Claimed(Box<Claim>),
    /// Not due yet (when it is), or paused (`None`).
    NotDue(Option<u64>),
    /// Another holder's live lease (with `force`, the mirror is marked due
    /// again so that it runs once more after that pull).
    Held(Lease),
    /// The repository has no mirror going that way.
    Gone,
}

/// What a sync did.
#[derive(Debug)]
pub enum Done {
    /// A pull mirror's pull.
    Pulled(Pulled),
    /// A push mirror's push.
    Pushed(Pushed),
}

impl Done {
    /// The Git LFS objects it moved, and those it could not.
    pub fn lfs(&self) -> &crate::lfs::LfsCopied {
        match self {
            Done::Pulled(p) => &p.lfs,
            Done::Pushed(p) => &p.lfs,
        }
    }
}

/// A held lease on a mirror, and the settings it was taken with.
#[derive(Debug)]
pub struct Claim {
    repo: String,
    direction: Direction,
    owner: String,
    ttl: Duration,
    mirror: Mirror,
    started: u64,
    /// The host key an SSH upstream showed (kept once a sync succeeds).
    seen_host_key: std::sync::Mutex<Option<String>>,
}

/// What a finished sync did.
#[derive(Debug)]
pub struct Synced {
    /// The upstream's (or the remote's) URL.
    pub url: String,
    /// What the sync did, or why it failed (a pull applied nothing then).
    pub outcome: Result<Done, Failed>,
    /// This outcome paused the mirror: why (as `mirror list` says it), and
    /// the failures in a row.
    pub paused: Option<(String, u32)>,
    /// When the next scheduled sync is due (`None`: paused or gone).
    pub next_run: Option<u64>,
}

/// Takes the lease of `repo`'s mirror going `direction` for `owner` for
/// `ttl` when the mirror is due
/// at `now` (or always, with `force`: `gitstow mirror sync`, which runs a
/// paused mirror too) and no other live lease holds it.
///
/// # Errors
/// [`SettingsError`].
pub fn claim(
    store: &dyn ObjectStore,
    repo: &str,
    direction: Direction,
    owner: &str,
    ttl: Duration,
    now: u64,
    force: bool,
) -> Result<Claimed, SettingsError> {
    let mut verdict = None;
    let mut taken = None;
    settings::update(store, repo, |doc| {
        taken = None;
        let Some(p) = doc.slot(direction).as_mut() else {
            verdict = Some(Claimed::Gone);
            return Ok(None);
        };
        if let Some(lease) = p.held_by_other(owner, now) {
            verdict = Some(Claimed::Held(lease.clone()));
            if force && !p.due_now {
                p.due_now = true;
                return Ok(Some(()));
            }
            return Ok(None);
        }
        if !force {
            match p.next_run() {
                Some(t) if t <= now => {}
                other => {
                    verdict = Some(Claimed::NotDue(other));
                    return Ok(None);
                }
            }
        }
        p.lease = Some(Lease {
            owner: owner.to_owned(),
            expires: now.saturating_add(ttl.as_secs().max(1)),
        });
        p.due_now = false;
        verdict = None;
        taken = Some(p.clone());
        Ok(Some(()))
    })?
    .map_err(SettingsError::Refused)?;
    if let Some(mirror) = taken {
        return Ok(Claimed::Claimed(Box::new(Claim {
            repo: repo.to_owned(),
            direction,
            owner: owner.to_owned(),
            ttl,
            mirror,
            started: now,
            seen_host_key: Default::default(),
        })));
    }
    Ok(verdict.unwrap_or(Claimed::Gone))
}

impl Claim {
    /// The mirror's settings as claimed.
    pub fn mirror(&self) -> &Mirror {
        &self.mirror
    }

    /// Extends the lease by its time to live from now.
    ///
    /// # Errors
    /// [`SettingsError::Refused`] when the lease is no longer ours (it
    /// lapsed and another took it, or the mirror was removed).
    pub fn renew(&self, store: &dyn ObjectStore) -> Result<(), SettingsError> {
        settings::update(store, &self.repo, |doc| {
            match doc.slot(self.direction).as_mut() {
                Some(p) if p.lease.as_ref().is_some_and(|l| l.owner == self.owner) => {
                    p.lease = Some(Lease {
                        owner: self.owner.clone(),
                        expires: now_secs().saturating_add(self.ttl.as_secs().max(1)),
                    });
                    Ok(Some(()))
                }
                _ => Err("the mirror's lease was lost".to_owned()),
            }
        })?
        .map(|_| ())
        .map_err(SettingsError::Refused)
    }

    /// Pulls `repo` (this mirror's repository) with the claimed settings
    /// on top of `base` (limits, staging), or pushes it to the remote (the
    /// refs under the mirror's patterns, staged where `base` stages), each
    /// request to the upstream or remote bounded by `timeout`, renewing
    /// the lease meanwhile; then [`Claim::finish`]es.
    ///
    /// # Errors
    /// [`SettingsError`] recording the outcome (the pull's own failure is
    /// in [`Synced::outcome`]).
    pub fn run(
        self,
        store: &dyn ObjectStore,
        repo: &Repository,
        key: Option<&SealKey>,
        base: PullOptions,
        timeout: Duration,
    ) -> Result<Synced, SettingsError> {
        let outcome = std::thread::scope(|scope| {
            let (stop, stopped) = mpsc::channel::<()>();
            let me = &self;
            scope.spawn(move || {
                let every = (self.ttl / 3).max(Duration::from_secs(1));
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    if let Err(e) = me.renew(store) {
                        tracing::warn!(repo = %me.repo, error = %e, "mirror: renewing the lease");
                        return;
                    }
                }
            });
            let outcome = match self.direction {
                Direction::Pull => self.pull(repo, key, base, timeout).map(Done::Pulled),
                Direction::Push => self.push(repo, key, &base, timeout).map(Done::Pushed),
            };
            drop(stop);
            outcome
        });
        self.finish(store, outcome)
    }

    fn pull(
        &self,
        repo: &Repository,
        key: Option<&SealKey>,
        base: PullOptions,
        timeout: Duration,
    ) -> Result<Pulled, Failed> {
        let refused = |message: String| Failed {
            message,
            permanent: true,
        };
        let upstream = self
            .mirror
            .upstream(&self.repo, key, timeout)
            .map_err(refused)?;
        let opts = self.mirror.pull_options(base).map_err(refused)?;
        let pulled = crate::pull(repo, &upstream, &opts).map_err(|e| e.failed());
        self.saw(&upstream);
        pulled
    }

    fn push(
        &self,
        repo: &Repository,
        key: Option<&SealKey>,
        base: &PullOptions,
        timeout: Duration,
    ) -> Result<Pushed, Failed> {
        let refused = |message: String| Failed {
            message,
            permanent: true,
        };
        // A repository not created yet (its first push makes the mirror
        // due) or deleted has nothing to hand on: the remote is left as
        // it is, never emptied.
        let state = repo.load_state().map_err(|e| Failed {
            message: format!("reading the repository: {e}"),
            permanent: false,
        })?;
        if state.is_none_or(|v| v.state.deleted) {
            return Ok(Pushed::default());
        }
        let remote = self
            .mirror
            .upstream(&self.repo, key, timeout)
            .map_err(refused)?;
        let opts = PushOptions {
            filter: crate::RefFilter::new(self.mirror.refs.clone()).map_err(refused)?,
            max_refs: base.max_refs,
            staging_dir: base.receive.staging_dir.clone(),
            lfs: true,
        };
        let pushed = crate::push(repo, &remote, &opts).map_err(|e| Failed {
            message: e.to_string(),
            permanent: e.is_permanent(),
        });
        self.saw(&remote);
        let pushed = pushed?;
        if pushed.refused.is_empty() {
            return Ok(pushed);
        }
        // A ref the remote moved since its advertisement is pushed again
        // at the next run (from a new advertisement); one it refuses for
        // its own reasons (a hook, a protected branch) will be refused
        // again.
        let stale = pushed
            .refused
            .iter()
            .all(|(_, why)| why.contains("stale info"));
        Err(Failed {
            message: format!(
                "the remote refused {}",
                pushed
                    .refused
                    .iter()
                    .map(|(r, why)| format!("{r} ({why})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            permanent: !stale,
        })
    }

    /// Notes the host key an SSH upstream showed.
    fn saw(&self, upstream: &crate::Upstream) {
        if let (Some(key), Ok(mut seen)) = (upstream.seen_host_key(), self.seen_host_key.lock()) {
            *seen = Some(key);
        }
    }

    /// Records `outcome` in the run state, drops the lease (when it is
    /// still ours) and sets the mirror's next run in the due list.
    ///
    /// # Errors
    /// [`SettingsError`].
    pub fn finish(
        self,
        store: &dyn ObjectStore,
        outcome: Result<Done, Failed>,
    ) -> Result<Synced, SettingsError> {
        let mut paused = None;
        // What a pull brought is handed on as a push's would be: the push
        // mirror made due in the same write.
        let hand_on = matches!(&outcome, Ok(Done::Pulled(p)) if p.changed());
        let mut push_due = false;
        let next_run = settings::update(store, &self.repo, |doc| {
            push_due = hand_on && doc.push_due().0;
            match doc.slot(self.direction).as_mut() {
                // Replaced meanwhile: the new settings have their own run state.
                Some(p) if p.url == self.mirror.url => {
                    paused = None;
                    if let Ok(done) = &outcome {
                        if p.ssh_host_key.is_none() {
                            p.ssh_host_key = self.seen_host_key.lock().ok().and_then(|s| s.clone());
                        }
                        p.lfs_missing = done.lfs().missing.clone();
                        p.lfs_missing.truncate(settings::MAX_LFS_MISSING);
                    }
                    if p.record(self.started, outcome.as_ref().map(|_| ())) {
                        paused = p.paused.clone().map(|why| (why, p.failures));
                    }
                    if p.lease.as_ref().is_some_and(|l| l.owner == self.owner) {
                        p.lease = None;
                    }
                    Ok(Some(p.next_run()))
                }
                Some(p) => Ok(Some(p.next_run())),
                None => Ok(Some(None)),
            }
        })?
        .map_err(SettingsError::Refused)?
        .flatten();
        crate::due::set(
            store,
            &crate::due::entry(&self.repo, self.direction),
            next_run,
        )?;
        if push_due {
            crate::due::now(store, &self.repo, Direction::Push)?;
        }
        Ok(Synced {
            url: self.mirror.url,
            outcome,
            paused,
            next_run,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with_mirror() -> (tempfile::TempDir, gitstow_store::FsStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let m = Mirror::new("http://127.0.0.1:9/x.git", vec![], false, 600).unwrap();
        settings::update(&store, "org/x", |d| {
            d.pull = Some(m.clone());
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        (dir, store)
    }

    #[test]
    fn one_claim_at_a_time_until_it_lapses_or_finishes() {
        let (_dir, store) = store_with_mirror();
        let ttl = Duration::from_secs(100);
        let Claimed::Claimed(a) =
            claim(&store, "org/x", Direction::Pull, "a", ttl, 1000, false).unwrap()
        else {
            panic!("a new mirror is due");
        };
        match claim(&store, "org/x", Direction::Pull, "b", ttl, 1050, false).unwrap() {
            Claimed::Held(l) => assert_eq!((l.owner.as_str(), l.expires), ("a", 1100)),
            other => panic!("{other:?}"),
        }
        // A forced claim while held marks the mirror due again.
        assert!(matches!(
            claim(&store, "org/x", Direction::Pull, "b", ttl, 1050, true).unwrap(),
            Claimed::Held(_)
        ));
        assert!(
            settings::load(&store, "org/x")
                .unwrap()
                .unwrap()
                .0
                .pull
                .unwrap()
                .due_now
        );
        // The lease lapses: another takes it, and the first one cannot renew.
        let Claimed::Claimed(b) =
            claim(&store, "org/x", Direction::Pull, "b", ttl, 1101, false).unwrap()
        else {
            panic!("a lapsed lease is taken");
        };
        assert!(a.renew(&store).is_err());
        b.renew(&store).unwrap();
        let synced = b
            .finish(&store, Ok(Done::Pulled(Pulled::default())))
            .unwrap();
        assert_eq!(synced.next_run, Some(1101 + 600));
        assert_eq!(crate::due::load(&store).unwrap().repos["org/x"], 1701);
        let p = settings::load(&store, "org/x")
            .unwrap()
            .unwrap()
            .0
            .pull
            .unwrap();
        assert_eq!((p.lease, p.last_success), (None, Some(1101)));
        assert!(matches!(
            claim(&store, "org/x", Direction::Pull, "c", ttl, 1200, false).unwrap(),
            Claimed::NotDue(Some(1701))
        ));
        assert!(matches!(
            claim(&store, "org/y", Direction::Pull, "c", ttl, 1200, false).unwrap(),
            Claimed::Gone
        ));
    }

    #[test]
    fn what_a_pull_brings_makes_the_push_mirror_due() {
        let (_dir, store) = store_with_mirror();
        let push = Mirror::new("http://127.0.0.1:9/copy.git", vec![], true, 600).unwrap();
        settings::add(&store, "org/x", Direction::Push, &push, false).unwrap();
        crate::due::set(&store, "org/x push", Some(5000)).unwrap();
        settings::update(&store, "org/x", |d| {
            let p = d.push.as_mut().unwrap();
            p.record(100, Ok(()));
            p.due_now = false;
            Ok(Some(()))
        })
        .unwrap()
        .unwrap();
        let ttl = Duration::from_secs(100);
        let Claimed::Claimed(c) =
            claim(&store, "org/x", Direction::Pull, "a", ttl, 1000, false).unwrap()
        else {
            panic!("due");
        };
        // Nothing came: the push mirror stays as it was.
        c.finish(&store, Ok(Done::Pulled(Pulled::default())))
            .unwrap();
        assert_eq!(crate::due::load(&store).unwrap().repos["org/x push"], 5000);
        let Claimed::Claimed(c) =
            claim(&store, "org/x", Direction::Pull, "a", ttl, 1000, true).unwrap()
        else {
            panic!("forced");
        };
        let brought = Pulled {
            updated: 1,
            ..Pulled::default()
        };
        c.finish(&store, Ok(Done::Pulled(brought))).unwrap();
        assert_eq!(crate::due::load(&store).unwrap().repos["org/x push"], 0);
        let doc = settings::load(&store, "org/x").unwrap().unwrap().0;
        assert!(doc.push.unwrap().due_now);
    }

    #[test]
    fn a_run_against_a_dead_upstream_records_a_transient_failure() {
        let (_dir, store) = store_with_mirror();
        let Claimed::Claimed(c) = claim(
            &store,
            "org/x",
            Direction::Pull,
            "a",
            DEFAULT_LEASE_TTL,
            now_secs(),
            false,
        )
        .unwrap() else {
            panic!("due");
        };
        let repo = Repository::new(
            std::sync::Arc::new(gitstow_store::FsStore::new(_dir.path()).unwrap()),
            "org/x",
            gitstow_odb::IndexCache::new(),
        );
        let synced = c
            .run(
                &store,
                &repo,
                None,
                PullOptions::default(),
                Duration::from_secs(5),
            )
            .unwrap();
        let failed = synced.outcome.unwrap_err();
        assert!(!failed.permanent, "{failed:?}");
        assert!(
            failed.message.contains("cannot reach the upstream"),
            "{failed:?}"
        );
        let p = settings::load(&store, "org/x")
            .unwrap()
            .unwrap()
            .0
            .pull
            .unwrap();
        assert_eq!((p.failures, p.lease.is_none()), (1, true));
        assert_eq!(synced.next_run, Some(p.last_attempt.unwrap() + 30));
    }
}
