//! The maintenance lease: one object per repository,
//! `<name>.git/maintenance`, that keeps two instances (or two `gitstow
//! maintain` runs) off the same repository's maintenance at once.
//!
//! The lease is JSON `{"owner": …, "expires": secs, "last_scan": secs}`,
//! taken and renewed only by conditional PUTs: `If-None-Match: *` when there
//! is none, `If-Match: <etag>` over an expired one or one's own. A holder that
//! stalls past `expires` loses it to the next taker; that is safe, because
//! maintenance commits only through the state's compare-and-swap (a stale
//! holder's commit fails or finds its sources gone) and deletes only what
//! the state retired more than a grace period ago. The lease saves work; it
//! is not what keeps the repository consistent.
//!
//! `last_scan` records when the containers were last listed to find orphans,
//! so that scan (a LIST) runs at most once per scan interval per repository.

use std::time::Duration;

use gitstow_odb::CommitOutcome;
use gitstow_odb::Repository;
use gitstow_store::ETag;
use serde::{Deserialize, Serialize};

use crate::{now_secs, Error, Result};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct LeaseFile {
    owner: String,
    expires: u64,
    #[serde(default)]
    last_scan: u64,
    #[serde(default)]
    last_gc: u64,
}

/// When the orphan scan and the GC of `repo` last ran (seconds since the
/// epoch; 0 when no maintenance ever ran there), read without taking the lease.
pub fn last_runs(repo: &Repository) -> Result<(u64, u64)> {
    Ok(match repo.store().get(&lease_key(repo))? {
        None => (0, 0),
        Some((bytes, _)) => serde_json::from_slice::<LeaseFile>(&bytes)
            .map(|f| (f.last_scan, f.last_gc))
            .unwrap_or((0, 0)),
    })
}

/// A held lease; renew it during long work, release it at the end.
#[derive(Debug)]
pub struct Lease {
    repo: Repository,
    etag: ETag,
    file: LeaseFile,
    ttl: Duration,
}

/// The key of a repository's lease object.
pub fn lease_key(repo: &Repository) -> String {
    format!("{}maintenance", repo.prefix())
}

fn unique_owner() -> String {
    let t = gitstow_odb::unique_token();
    let n = u64::from_be_bytes(t[..8].try_into().expect("8 bytes"));
    format!("{}-{n:016x}", std::process::id())
}

impl Lease {
    /// Takes the lease of `repo` for `ttl`, or `Ok(None)` when another holder's
    /// lease has not expired (or another taker won the race for it).
    pub fn acquire(repo: &Repository, ttl: Duration) -> Result<Option<Lease>> {
        let key = lease_key(repo);
        let now = now_secs();
        let (expected, last_scan, last_gc) = match repo.store().get(&key)? {
            None => (None, 0, 0),
            Some((bytes, etag)) => {
                // An unreadable lease is treated as expired: it will be overwritten.
                let old: LeaseFile = serde_json::from_slice(&bytes).unwrap_or_default();
                if old.expires > now {
                    return Ok(None);
                }
                (Some(etag), old.last_scan, old.last_gc)
            }
        };
        let file = LeaseFile {
            owner: unique_owner(),
            expires: now + ttl.as_secs().max(1),
            // The first lease of a repository starts its scan clock.
            last_scan: if last_scan == 0 { now } else { last_scan },
            last_gc: if last_gc == 0 { now } else { last_gc },
        };
        let bytes = serde_json::to_vec(&file).expect("lease serializes");
        match repo.compare_and_swap(&key, &bytes, expected.as_ref())? {
            CommitOutcome::Committed(etag) => Ok(Some(Lease {
                repo: repo.clone(),
                etag,
                file,
                ttl,
            })),
            CommitOutcome::Conflict => Ok(None),
        }
    }

    /// When the orphan scan last ran, or when the first lease was taken
    /// (seconds since the epoch).
    pub fn last_scan(&self) -> u64 {
        self.file.last_scan
    }

    /// When the last GC ran, or when the first lease was taken (seconds since the epoch).
    pub fn last_gc(&self) -> u64 {
        self.file.last_gc
    }

    /// Records that a GC ran now (written at the next renew or release).
    pub fn collected(&mut self) {
        self.file.last_gc = now_secs();
    }

    /// Records that the orphan scan ran now (written at the next renew or release).
    pub fn scanned(&mut self) {
        self.file.last_scan = now_secs();
    }

    /// The holder's id, as written in the lease.
    pub fn owner(&self) -> &str {
        &self.file.owner
    }

    fn write(&mut self, expires: u64) -> Result<()> {
        let mut file = self.file.clone();
        file.expires = expires;
        let bytes = serde_json::to_vec(&file).expect("lease serializes");
        match self
            .repo
            .compare_and_swap(&lease_key(&self.repo), &bytes, Some(&self.etag))?
        {
            CommitOutcome::Committed(etag) => {
                self.etag = etag;
                self.file = file;
                Ok(())
            }
            CommitOutcome::Conflict => Err(Error::LeaseLost),
        }
    }

    /// Extends the lease by its ttl from now; [`Error::LeaseLost`] when
    /// someone else took it meanwhile (stop then: the work is theirs).
    pub fn renew(&mut self) -> Result<()> {
        let expires = now_secs() + self.ttl.as_secs().max(1);
        self.write(expires)
    }

    /// Gives the lease up (it expires now), keeping `last_scan`.
    pub fn release(mut self) -> Result<()> {
        self.write(0)
    }
}
