//! What a push calls out to: a pre-receive check before anything is
//! stored, and a notice of what landed (webhooks). The server gives
//! implementations through [`crate::Options`]; this crate only calls them at
//! the right moments:
//!
//! 1. after the pack is checked (every object parsed, connectivity known)
//!    and before any container is stored: [`PreReceive::check`] with the
//!    commands not refused yet; a refusal refuses every one of them with
//!    `ng <ref> pre-receive hook declined` and the hook's output on
//!    side-band 2, as git's `run_receive_hook` does (`githooks(5)`,
//!    pre-receive);
//! 2. just before the state's compare-and-swap: [`Notify::prepare`] with the
//!    updates about to be committed (an outbox entry is written there, so a
//!    crash after the commit loses no notice); if it fails, nothing is
//!    committed;
//! 3. after the transaction: [`Pending::finish`] with the updates that
//!    landed (none: the notice is withdrawn).

use gitstow_odb::Repository;
use gitstow_protocol::push::PushRequest;
use gix_hash::ObjectId;

use crate::reason::Reason;
use crate::{Options, Outcome};

/// One ref update of a push, as git's hooks receive it (`<old> <new> <ref>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    /// Full ref name (`refs/heads/main`).
    pub name: String,
    /// The value the client expects (null: create).
    pub old: ObjectId,
    /// The new value (null: delete).
    pub new: ObjectId,
}

/// A push as the hooks see it.
#[derive(Debug, Clone)]
pub struct PushInfo<'a> {
    /// The repository's name (`org/project`).
    pub repository: &'a str,
    /// The name of the token that pushed (`None`: access control off).
    pub pusher: Option<&'a str>,
    /// The updates, in the client's order.
    pub updates: &'a [RefUpdate],
    /// The push options (`git push -o`), in order.
    pub push_options: &'a [String],
}

/// A pre-receive check's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// True: the push goes on.
    pub accepted: bool,
    /// What the client is shown on side-band 2 (git prints each line as
    /// `remote: …`): the hook's output, or why it could not decide.
    pub output: Vec<u8>,
}

/// A check every push passes before it is stored (git's pre-receive hook).
pub trait PreReceive: Send + Sync + std::fmt::Debug {
    /// Decides on `push`; blocks for at most the check's own timeout. An
    /// error of the check itself (timeout, crash, unreachable) is a
    /// refusal.
    fn check(&self, push: &PushInfo<'_>) -> Verdict;
}

/// Records what a push is about to commit, so it can be announced after.
pub trait Notify: Send + Sync + std::fmt::Debug {
    /// Records `push` before the commit. An error refuses the push (nothing
    /// is committed): a notice that could be lost must not be promised.
    fn prepare(&self, push: &PushInfo<'_>) -> Result<Box<dyn Pending>, std::io::Error>;
}

/// A recorded notice, waiting for the transaction's outcome.
pub trait Pending: Send {
    /// The transaction ended: `landed` are the updates now in the state
    /// (empty: nothing to announce, the record is withdrawn).
    fn finish(self: Box<Self>, landed: &[RefUpdate]);
}

pub(crate) fn update_of(cmd: &gitstow_protocol::push::RefCommand) -> RefUpdate {
    RefUpdate {
        name: cmd.name.clone(),
        old: cmd.old,
        new: cmd.new,
    }
}

/// The updates of the commands not refused yet.
pub(crate) fn updates_of(push: &PushRequest, rejected: &[Option<Reason>]) -> Vec<RefUpdate> {
    push.commands
        .iter()
        .zip(rejected)
        .filter(|(_, r)| r.is_none())
        .map(|(c, _)| update_of(c))
        .collect()
}

pub(crate) fn push_info<'a>(
    repo: &'a Repository,
    push: &'a PushRequest,
    updates: &'a [RefUpdate],
    opts: &'a Options,
) -> PushInfo<'a> {
    PushInfo {
        repository: repo.name(),
        pusher: opts.pusher.as_deref(),
        updates,
        push_options: &push.push_options,
    }
}

/// Runs the pre-receive check on the commands not refused yet; a refusal
/// refuses each of them with git's `pre-receive hook declined`.
pub(crate) fn pre_receive(
    repo: &Repository,
    push: &PushRequest,
    rejected: &mut [Option<Reason>],
    hook: &dyn PreReceive,
    opts: &Options,
    outcome: &mut Outcome,
) {
    let updates = updates_of(push, rejected);
    if updates.is_empty() {
        return;
    }
    let verdict = hook.check(&push_info(repo, push, &updates, opts));
    outcome.hook_output = verdict.output;
    if !verdict.accepted {
        tracing::info!(repo = repo.name(), "push refused by the pre-receive check");
        outcome.hook_declined = true;
        for r in rejected.iter_mut().filter(|r| r.is_none()) {
            *r = Some(Reason::PreReceiveDeclined);
        }
    }
}
