//! The lock commands of a session: `lock`, `list-lock` and `unlock`, over
//! [`gitstow_lfs::locks`] as the HTTP locking API's are (git-lfs
//! `docs/api/locking.md`).

use std::io::Write;

use gitstow_lfs::locks::{self, Created, Lock, LockError, Unlocked};
use gitstow_protocol::pktline;

use super::wire::{refuse, status, Message, Refusal};
use super::{store_failed, Ended, Session};

impl Session<'_> {
    /// `lock`: a new lock on `path=`, or 409 and the one that holds it.
    pub(super) fn lock(&self, out: &mut impl Write, message: &Message) -> Result<(), Ended> {
        if !self.upload {
            return refuse(out, Refusal(403, "locking needs write access".into()));
        }
        let Some(path) = message.arg("path") else {
            return refuse(out, Refusal(422, "lock without path=".into()));
        };
        match locks::create(self.store, self.repo, path, &self.owner, (self.now)()) {
            Ok(Created::New(lock)) => status(out, 201, &lock_args(&lock)),
            Ok(Created::Exists(lock)) => {
                pktline::write_text(out, "status 409")?;
                for arg in lock_args(&lock) {
                    pktline::write_text(out, &arg)?;
                }
                pktline::write_delim(out)?;
                pktline::write_text(out, "lock already created")?;
                pktline::write_flush(out).map_err(Ended::from)
            }
            Err(e) => refuse(out, lock_failed(e)),
        }
    }

    /// `list-lock` (and git-lfs's `list-locks` for verify): a page of
    /// locks, each marked ours or theirs.
    pub(super) fn list_locks(&self, out: &mut impl Write, message: &Message) -> Result<(), Ended> {
        let all = match locks::all(self.store, self.repo) {
            Ok(all) => all,
            Err(e) => return refuse(out, lock_failed(e)),
        };
        let path = message.arg("path");
        let id = message.arg("id");
        let limit = message
            .arg("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let page = locks::page(
            &all,
            |l| path.is_none_or(|p| l.path == p) && id.is_none_or(|i| l.id == i),
            message.arg("cursor"),
            limit,
        );
        pktline::write_text(out, "status 200")?;
        if let Some(next) = &page.next_cursor {
            pktline::write_text(out, &format!("next-cursor={next}"))?;
        }
        pktline::write_delim(out)?;
        for l in &page.locks {
            let who = if l.owner.name == self.owner {
                "ours"
            } else {
                "theirs"
            };
            pktline::write_text(out, &format!("lock {}", l.id))?;
            pktline::write_text(out, &format!("path {} {}", l.id, l.path))?;
            pktline::write_text(out, &format!("locked-at {} {}", l.id, l.locked_at))?;
            pktline::write_text(out, &format!("ownername {} {}", l.id, l.owner.name))?;
            pktline::write_text(out, &format!("owner {} {who}", l.id))?;
        }
        pktline::write_flush(out).map_err(Ended::from)
    }

    /// `unlock <id>`: one's own lock, or another's with `force=true` and
    /// admin rights.
    pub(super) fn unlock(
        &self,
        out: &mut impl Write,
        message: &Message,
        id: &str,
    ) -> Result<(), Ended> {
        if !self.upload {
            return refuse(out, Refusal(403, "unlocking needs write access".into()));
        }
        let force = message.arg("force") == Some("true");
        if force && !self.admin {
            return refuse(
                out,
                Refusal(
                    403,
                    "removing another owner's lock needs admin access".into(),
                ),
            );
        }
        match locks::unlock(self.store, self.repo, id, &self.owner, force) {
            Ok(Unlocked::Removed(lock)) => status(out, 200, &lock_args(&lock)),
            Ok(Unlocked::NotFound) => refuse(out, Refusal(404, format!("no lock has id {id}"))),
            Ok(Unlocked::NotOwner(lock)) => refuse(
                out,
                Refusal(
                    403,
                    format!(
                        "the lock on {} is {}'s: unlock it with --force (admin only)",
                        lock.path, lock.owner.name
                    ),
                ),
            ),
            Err(e) => refuse(out, lock_failed(e)),
        }
    }
}

/// `id=`, `path=`, `locked-at=`, `ownername=` of `lock`.
fn lock_args(lock: &Lock) -> Vec<String> {
    vec![
        format!("id={}", lock.id),
        format!("path={}", lock.path),
        format!("locked-at={}", lock.locked_at),
        format!("ownername={}", lock.owner.name),
    ]
}

/// A lock operation's failure as an answer.
fn lock_failed(e: LockError) -> Refusal {
    match e {
        LockError::BadPath(_) => Refusal(422, e.to_string()),
        LockError::TooMany => Refusal(409, e.to_string()),
        LockError::Busy => Refusal(503, e.to_string()),
        LockError::Corrupt(_) | LockError::Store(_) => store_failed("a lock operation", &e),
    }
}
