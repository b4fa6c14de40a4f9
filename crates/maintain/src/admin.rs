//! What `gitstow repo` changes in a repository, through the same state
//! compare-and-swap as pushes and maintenance: create, delete (refs gone at
//! once; containers retired, so maintenance deletes their bytes after the
//! grace period and fetches in flight finish), set HEAD, and a summary.

use gitstow_odb::{CommitOutcome, RepoState, Repository};

use crate::{retire, update_state, Error, Options, Result, Step};

/// Why an admin change was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// No repository of that name (or it was deleted).
    #[error("repository '{0}' not found")]
    NotFound(String),
    /// `create` of a name that exists.
    #[error("repository '{0}' exists already")]
    Exists(String),
    /// `set-head` to a branch the repository does not have.
    #[error("repository '{repo}' has no branch '{branch}'")]
    NoSuchBranch {
        /// The repository.
        repo: String,
        /// The branch asked for.
        branch: String,
    },
    /// The store or the state failed.
    #[error(transparent)]
    Failed(#[from] Error),
}

impl From<gitstow_odb::Error> for Refused {
    fn from(e: gitstow_odb::Error) -> Self {
        Refused::Failed(Error::Odb(e))
    }
}

/// What `repo list` shows of one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Refs.
    pub refs: usize,
    /// Live and garbage containers.
    pub containers: usize,
    /// Their bytes.
    pub bytes: u64,
    /// The ref HEAD names.
    pub head: Option<String>,
}

/// The summary of `repo`, `None` when it does not exist (or was deleted).
pub fn summary(repo: &Repository) -> Result<Option<Summary>> {
    let Some(v) = repo.load_state()? else {
        return Ok(None);
    };
    let s = v.state;
    if s.deleted {
        return Ok(None);
    }
    Ok(Some(Summary {
        refs: usize::try_from(s.refs.len()).unwrap_or(usize::MAX),
        containers: s.containers.len() + s.garbage.len(),
        bytes: s.containers.iter().map(|c| c.bytes).sum::<u64>()
            + s.garbage.iter().map(|g| g.bytes).sum::<u64>(),
        head: s.head,
    }))
}

/// Creates an empty repository whose HEAD names `refs/heads/<head>`, in
/// object format `format` (`sha1`, or `sha256`: `git init
/// --object-format`), which it keeps for its life.
pub fn create(repo: &Repository, head: &str, format: gix_hash::Kind) -> Result<(), Refused> {
    let fresh = RepoState {
        head: Some(format!("refs/heads/{head}")),
        incarnation: gitstow_odb::state::new_incarnation(),
        object_format: format,
        ..Default::default()
    };
    loop {
        let current = repo.load_state()?;
        let expected = match &current {
            Some(v) if !v.state.deleted => return Err(Refused::Exists(repo.name().to_owned())),
            Some(v) => Some(&v.etag),
            None => None,
        };
        match repo.commit_state(&fresh, expected)? {
            CommitOutcome::Committed(_) => return Ok(()),
            CommitOutcome::Conflict => continue,
        }
    }
}

/// Deletes `repo`: one compare-and-swap leaves a state without refs or
/// containers, marked deleted (the repository is not found from then on);
/// its containers go on the retired list first, so maintenance deletes
/// them after the grace period. Returns how many containers were retired.
pub fn delete(repo: &Repository, opts: &Options) -> Result<usize, Refused> {
    let Some(current) = repo.load_state()? else {
        return Err(Refused::NotFound(repo.name().to_owned()));
    };
    if current.state.deleted {
        return Err(Refused::NotFound(repo.name().to_owned()));
    }
    let mut retired = 0;
    let done = update_state(repo, opts, "deleting the repository", |state| {
        if state.deleted {
            return Step::Done(None);
        }
        let ids: Vec<String> = state
            .containers
            .iter()
            .map(|c| c.id.clone())
            .chain(state.garbage.iter().map(|g| g.id.clone()))
            .chain(state.refs.tables.iter().map(|t| t.id.clone()))
            .collect();
        let tombstone = RepoState {
            head: None,
            deleted: true,
            ..Default::default()
        };
        Step::Write(tombstone, Some(ids))
    })?;
    if let Some(Some(ids)) = done {
        // Retired after the commit, from what the committed state held: a
        // container a push added meanwhile is in `ids` (its commit was the
        // state this one replaced). Named by no state now, so the sweep
        // deletes them once the grace period has passed.
        retire(repo, opts, &ids)?;
        retired = ids.len();
    }
    Ok(retired)
}

/// Points HEAD at `refs/heads/<branch>`, which must exist.
pub fn set_head(repo: &Repository, branch: &str, opts: &Options) -> Result<(), Refused> {
    let target = format!("refs/heads/{branch}");
    let mut missing = false;
    let mut absent = true;
    let mut lookup: Result<(), gitstow_odb::Error> = Ok(());
    update_state(repo, opts, "setting HEAD", |state| {
        absent = state.deleted;
        missing = match repo.refs(state).and_then(|refs| refs.contains(&target)) {
            Ok(found) => !found,
            Err(e) => {
                lookup = Err(e);
                return Step::Done(());
            }
        };
        if absent || missing || state.head.as_deref() == Some(target.as_str()) {
            return Step::Done(());
        }
        let mut next = state.clone();
        next.head = Some(target.clone());
        Step::Write(next, ())
    })?
    .ok_or_else(|| Refused::NotFound(repo.name().to_owned()))?;
    lookup?;
    if absent {
        return Err(Refused::NotFound(repo.name().to_owned()));
    }
    if missing {
        return Err(Refused::NoSuchBranch {
            repo: repo.name().to_owned(),
            branch: branch.to_owned(),
        });
    }
    Ok(())
}
