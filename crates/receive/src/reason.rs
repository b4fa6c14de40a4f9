//! Why a command of a push was refused: one typed reason per case, and
//! the one place each becomes git's text on its `ng <ref> <reason>` line
//! (gitprotocol-pack(5) "Report Status"), in git's own words where git has
//! them (`builtin/receive-pack.c`, `refs.c`).

use std::fmt;

use gitstow_protocol::push::RefStatus;
use gitstow_store::ServerFault;

/// Why one command was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The ref name fails `git check-ref-format` (`funny refname`).
    FunnyRefname,
    /// An update of a hidden ref (`receive.hideRefs`, `--hide-refs`).
    UpdatingHidden,
    /// A deletion of a hidden ref.
    DeletingHidden,
    /// The new value, or an object it reaches, is neither in the pack nor
    /// in the repository.
    MissingObjects,
    /// The ref's old value did not match, or the update cannot apply (a
    /// name too long to lock, a directory/file conflict).
    FailedToUpdate,
    /// The update could not be committed for a failure of the server's.
    FailedBy(ServerFault),
    /// The pre-receive check said no.
    PreReceiveDeclined,
    /// A protected ref's deletion by a token below `admin`.
    DeletionProhibited,
    /// A protected ref's rewrite by a token below `admin`.
    NonFastForward,
    /// The update changes a file someone else has locked (Git LFS).
    Locked {
        /// Who holds the lock.
        owner: String,
        /// The locked path.
        path: String,
    },
    /// A chain of annotated tags too deep to check against locks.
    TagChainTooDeep,
    /// The deletion of the branch HEAD points at.
    DeleteCurrent,
    /// A creation past the repository's ref limit.
    TooManyRefs {
        /// The limit (`--max-refs`).
        max: usize,
    },
    /// Another command of an `--atomic` push failed a check.
    AtomicFailed,
    /// The ref transaction of an `--atomic` push failed.
    AtomicTransactionFailed,
    /// Maintenance pruned objects the push relies on meanwhile.
    Pruned,
    /// The repository the push read was deleted before its commit.
    RepositoryDeleted,
    /// The pack could not be taken (its `unpack` line says why).
    UnpackerError,
    /// The repository takes no pushes (a pull mirror's), and why.
    ReadOnly(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::FunnyRefname => f.write_str("funny refname"),
            Reason::UpdatingHidden => f.write_str(gitstow_protocol::hidden::DENY_UPDATING_HIDDEN),
            Reason::DeletingHidden => f.write_str(gitstow_protocol::hidden::DENY_DELETING_HIDDEN),
            Reason::MissingObjects => f.write_str("missing necessary objects"),
            Reason::FailedToUpdate => f.write_str("failed to update ref"),
            Reason::FailedBy(fault) => write!(f, "failed to update ref: {}", fault.text()),
            Reason::PreReceiveDeclined => f.write_str("pre-receive hook declined"),
            Reason::DeletionProhibited => f.write_str("deletion prohibited"),
            Reason::NonFastForward => f.write_str("non-fast-forward"),
            Reason::Locked { owner, path } => write!(f, "locked by {owner}: {path}"),
            Reason::TagChainTooDeep => f.write_str("tag chain too deep for the lock check"),
            Reason::DeleteCurrent => f.write_str("deletion of the current branch prohibited"),
            Reason::TooManyRefs { max } => {
                write!(f, "too many refs: this repository may hold at most {max}")
            }
            Reason::AtomicFailed => f.write_str("atomic push failure"),
            Reason::AtomicTransactionFailed => f.write_str("atomic transaction failed"),
            Reason::Pruned => {
                f.write_str("objects this push relies on were pruned by maintenance; push again")
            }
            Reason::RepositoryDeleted => f.write_str("the repository was deleted during the push"),
            Reason::UnpackerError => f.write_str("unpacker error"),
            Reason::ReadOnly(why) => f.write_str(why),
        }
    }
}

/// A command's line in report-status: `ok` when nothing refused it, else
/// `ng` with its reason's text.
pub fn status(refused: &Option<Reason>) -> RefStatus {
    match refused {
        None => RefStatus::Ok,
        Some(reason) => RefStatus::Rejected(reason.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_reads_as_git_says_it() {
        for (reason, text) in [
            (Reason::FunnyRefname, "funny refname"),
            (Reason::UpdatingHidden, "deny updating a hidden ref"),
            (Reason::DeletingHidden, "deny deleting a hidden ref"),
            (Reason::MissingObjects, "missing necessary objects"),
            (Reason::FailedToUpdate, "failed to update ref"),
            (
                Reason::FailedBy(ServerFault::StoreDown),
                "failed to update ref: the store does not answer, try again later",
            ),
            (Reason::PreReceiveDeclined, "pre-receive hook declined"),
            (Reason::NonFastForward, "non-fast-forward"),
            (
                Reason::DeleteCurrent,
                "deletion of the current branch prohibited",
            ),
            (Reason::AtomicFailed, "atomic push failure"),
            (Reason::UnpackerError, "unpacker error"),
        ] {
            assert_eq!(reason.to_string(), text);
        }
        assert_eq!(status(&None), RefStatus::Ok);
        assert_eq!(
            status(&Some(Reason::Locked {
                owner: "ann".into(),
                path: "a.psd".into()
            })),
            RefStatus::Rejected("locked by ann: a.psd".into())
        );
    }
}
