//! What becomes of each command of a push once its pack is unpacked, in
//! named phases, in the order JGit's `ReceivePack.service()` and git's
//! `execute_commands` take them:
//!
//! 1. [`validate`]: each command on its own (ref name, hidden refs, the
//!    objects it needs), as git's `check_aliased_updates` /
//!    `reject_updates_to_hidden` / `check_connected` and JGit's
//!    `validateCommands`;
//! 2. [`crate::hooks::pre_receive`]: the pre-receive check on what is left;
//! 3. [`upload`]: the push's containers to the store, if any command is
//!    left (git's index-pack writing the pack);
//! 4. the repository's policies: protected refs
//!    ([`crate::protect::refuse_rewrites`]) and Git LFS locks
//!    ([`crate::locked::refuse_locked`]);
//! 5. [`prepare_notice`]: the push's webhook notice recorded before
//!    anything is committed;
//! 6. [`transact`]: the ref transaction, one compare-and-swap of the state
//!    ([`Transaction`]), then the notice released with what landed.
//!
//! Each command carries its fate as `Option<Reason>` (`None`: not refused
//! yet; after the transaction, updated); the reasons become git's `ng`
//! text in one place ([`crate::reason`]).

use gitstow_odb::state::ContainerRef;
use gitstow_odb::{ObjectDb, RepoState, Repository};
use gitstow_protocol::push::PushRequest;
use gitstow_protocol::{
    check_ref_format, check_ref_format_for_delete, ref_name_fits, MAX_REF_COMPONENT_BYTES,
    MAX_REF_NAME_BYTES,
};

use crate::reason::Reason;
use crate::transaction::Transaction;
use crate::{hooks, locked, protect, Options, Outcome, UnpackFailure, Unpacked};

/// Each command's fate: why it was refused, `None` while it is not.
pub(crate) type Fates = Vec<Option<Reason>>;

/// Runs the phases on an unpacked push; returns each command's fate
/// after the transaction (`None`: updated). A container the store cannot
/// take fails the push as an unpack failure, as git's index-pack failing
/// to write the pack does.
pub(crate) fn decide(
    repo: &Repository,
    push: &PushRequest,
    state: &RepoState,
    db: &ObjectDb,
    unpacked: Unpacked,
    opts: &Options,
    outcome: &mut Outcome,
) -> Result<Fates, UnpackFailure> {
    let mut fates = validate(push, db, &unpacked, opts, outcome);
    let mut non_commit_branch = non_commit_branches(push, db, &unpacked);
    if let Some(hook) = &opts.pre_receive {
        hooks::pre_receive(repo, push, &mut fates, hook.as_ref(), opts, outcome);
    }
    let containers = if fates.iter().any(Option::is_none) {
        upload(repo, unpacked.sealed, outcome)?
    } else {
        Vec::new()
    };
    if let Some(protect) = &opts.protect {
        protect::refuse_rewrites(repo, state, &containers, push, &mut fates, protect, outcome)?;
    }
    if !opts.locked.is_empty() {
        locked::refuse_locked(
            repo,
            state,
            &containers,
            push,
            &mut fates,
            &opts.locked,
            outcome,
        )?;
    }
    // What the push rewrites, kept in the same transaction (safe mirrors).
    let kept = match &opts.keep_rewritten {
        Some(prefix) => protect::kept_rewrites(repo, state, &containers, push, &fates, prefix)?,
        None => Vec::new(),
    };
    let pending = match prepare_notice(repo, push, &fates, opts) {
        Ok(pending) => pending,
        Err(fault) => return Ok(vec![Some(Reason::FailedBy(fault)); push.commands.len()]),
    };
    let commands: std::borrow::Cow<'_, [gitstow_protocol::push::RefCommand]> = if kept.is_empty() {
        std::borrow::Cow::Borrowed(&push.commands)
    } else {
        fates.extend(kept.iter().map(|_| None));
        non_commit_branch.extend(kept.iter().map(|_| false));
        std::borrow::Cow::Owned(push.commands.iter().cloned().chain(kept).collect())
    };
    let tx = Transaction {
        commands: &commands,
        rejected: fates,
        non_commit_branch,
        containers,
        // Read before anything was uploaded (0 for a new repository).
        deletions_at_start: state.deletions,
        // A push into a repository with objects may rely on them.
        incarnation_at_start: {
            let has_objects = !(state.containers.is_empty() && state.garbage.is_empty());
            (has_objects && !state.deleted).then_some(state.incarnation)
        },
        tag_targets: &unpacked.tag_targets,
        db,
        atomic: push.capabilities.contains("atomic"),
        max_refs: opts.max_refs,
        max_attempts: opts.max_state_attempts,
        new_head: opts.new_head.as_deref(),
        object_format: state.object_format,
    };
    let mut fates = transact(repo, push, tx, pending, outcome);
    // The kept refs are the server's doing: not reported to the client.
    fates.truncate(push.commands.len());
    Ok(fates)
}

/// Phase 1: each command on its own: a ref name git refuses (`funny
/// refname`), a hidden ref, a name too long for git's files backend to
/// lock, a new value (or an object the pack refers to) neither pushed nor
/// in the repository.
fn validate(
    push: &PushRequest,
    db: &ObjectDb,
    unpacked: &Unpacked,
    opts: &Options,
    outcome: &mut Outcome,
) -> Fates {
    push.commands
        .iter()
        .map(|cmd| {
            let name_ok = if cmd.new.is_null() {
                check_ref_format_for_delete(&cmd.name).is_ok()
            } else {
                check_ref_format(&cmd.name).is_ok()
            };
            if !name_ok {
                Some(Reason::FunnyRefname)
            } else if let Some(why) = &opts.read_only {
                Some(Reason::ReadOnly(why.clone()))
            } else if opts.hidden.hides(&cmd.name) {
                // git's reject_updates_to_hidden.
                Some(if cmd.new.is_null() {
                    Reason::DeletingHidden
                } else {
                    Reason::UpdatingHidden
                })
            } else if cmd.new.is_null() {
                None
            } else if !ref_name_fits(&cmd.name) {
                // Where git's files backend fails to lock it (a path or a
                // file name too long for the file system).
                outcome.remote_errors.push(format!(
                    "cannot lock ref '{}': ref name too long (at most {MAX_REF_NAME_BYTES} bytes, {MAX_REF_COMPONENT_BYTES} in a component)",
                    shown_name(&cmd.name)
                ));
                Some(Reason::FailedToUpdate)
            } else if (unpacked.oids.find(&cmd.new).is_none()
                && !db.contains(&cmd.new))
                || unpacked.missing_references > 0
            {
                Some(Reason::MissingObjects)
            } else {
                None
            }
        })
        .collect()
}

/// Per command, whether it points a branch (`refs/heads/*`) at something
/// other than a commit: git's ref layer refuses that inside the
/// transaction.
fn non_commit_branches(push: &PushRequest, db: &ObjectDb, unpacked: &Unpacked) -> Vec<bool> {
    push.commands
        .iter()
        .map(|cmd| {
            !cmd.new.is_null()
                && cmd.name.starts_with("refs/heads/")
                && object_kind(unpacked, db, &cmd.new)
                    .is_some_and(|k| k != gitstow_odb::record::COMMIT)
        })
        .collect()
}

/// Phase 3: the push's sealed containers to the store.
fn upload(
    repo: &Repository,
    sealed: Vec<gitstow_odb::container::SealedContainer>,
    outcome: &mut Outcome,
) -> Result<Vec<ContainerRef>, UnpackFailure> {
    let mut containers = Vec::with_capacity(sealed.len());
    for sealed in sealed {
        let c = repo
            .upload_container(sealed)
            .map_err(|e| UnpackFailure::server("storing a container", &e))?;
        outcome.container_bytes += c.bytes;
        containers.push(c);
    }
    outcome.containers = containers.len();
    Ok(containers)
}

/// Phase 5: the push's notice to webhooks, recorded before anything is
/// committed (`None`: no webhook, or nothing left to update).
///
/// # Errors
/// The fault that kept the notice from being recorded: nothing is then
/// committed, for a notice that could be lost is not promised.
fn prepare_notice(
    repo: &Repository,
    push: &PushRequest,
    fates: &Fates,
    opts: &Options,
) -> Result<Option<Box<dyn hooks::Pending>>, gitstow_store::ServerFault> {
    let Some(notify) = &opts.notify else {
        return Ok(None);
    };
    if fates.iter().all(Option::is_some) {
        return Ok(None);
    }
    let updates = hooks::updates_of(push, fates);
    notify
        .prepare(&hooks::push_info(repo, push, &updates, opts))
        .map(Some)
        .map_err(|e| {
            tracing::error!(repo = repo.name(), error = %e, "recording the push's notice failed");
            gitstow_store::ServerFault::of(&e)
        })
}

/// Phase 6: the ref transaction, then the notice released with the updates
/// that landed. A transaction that fails refuses every command with git's
/// words (`failed to update ref`) and why only as far as the client can act
/// on it: the details are in the log.
fn transact(
    repo: &Repository,
    push: &PushRequest,
    tx: Transaction<'_>,
    pending: Option<Box<dyn hooks::Pending>>,
    outcome: &mut Outcome,
) -> Fates {
    let result = tx.run(repo);
    if let Some(pending) = pending {
        let landed: Vec<hooks::RefUpdate> = match &result {
            Ok(t) => push
                .commands
                .iter()
                .zip(&t.statuses)
                .filter(|(_, s)| s.is_none())
                .map(|(c, _)| hooks::update_of(c))
                .collect(),
            Err(_) => Vec::new(),
        };
        pending.finish(&landed);
    }
    match result {
        Ok(t) => {
            outcome.state_retries = t.retries;
            outcome.remote_errors.extend(t.messages);
            t.statuses
        }
        Err(e) => {
            tracing::error!(repo = repo.name(), error = %e, "ref transaction failed");
            let fault = gitstow_store::ServerFault::of(&e);
            vec![Some(Reason::FailedBy(fault)); push.commands.len()]
        }
    }
}

/// The pack type id of an object's kind, from the push's containers or the repository.
fn object_kind(unpacked: &Unpacked, db: &ObjectDb, oid: &gix_hash::ObjectId) -> Option<u8> {
    let pushed = unpacked.oids.find(oid);
    pushed
        .and_then(|i| unpacked.oids.get(i))
        .map(|(_, kind)| gitstow_odb::record::type_id_from_kind(kind))
        .or_else(|| db.lookup(oid).map(|l| l.entry.kind))
}

/// A ref name as an error message shows it: the first 256 bytes of a
/// longer one, then `…`.
fn shown_name(name: &str) -> String {
    if name.len() <= 256 {
        return name.to_owned();
    }
    let mut cut = 256;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &name[..cut])
}
