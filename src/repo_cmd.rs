//! `gitstow repo` and `gitstow fsck`: repositories from the command line,
//! through the same state compare-and-swap as pushes
//! ([`gitstow_maintain::admin`], [`gitstow_maintain::fsck`]), so they are
//! safe while servers run.

use std::sync::Arc;

use clap::Subcommand;
use gitstow_odb::{IndexCache, Repository};
use gitstow_store::ObjectStore;

use crate::admin::{run, Failure, IfMissing};
use crate::store_open::StoreArgs;

/// `gitstow repo …`.
#[derive(Debug, clap::Args)]
pub struct RepoArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: RepoCommand,
}

/// Repository commands.
#[derive(Debug, Subcommand)]
pub enum RepoCommand {
    /// List the repositories (name, refs, containers, bytes, HEAD). Lists
    /// the store's keys under PREFIX: on S3 one request per 1,000 keys.
    List {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// Only names starting with this (`org/`).
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Create an empty repository (for servers run with --no-auto-create).
    Create {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `org/project`.
        name: String,
        /// The branch HEAD names.
        #[arg(long, default_value = "main")]
        head: String,
    },
    /// Delete a repository: its refs are gone at once (clones and fetches
    /// get "not found"; a push re-creates it where servers auto-create);
    /// its containers are deleted by maintenance after the grace period,
    /// so fetches in flight finish.
    Delete {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `org/project`.
        name: String,
    },
    /// Refused: an object store cannot rename a repository's keys at once.
    /// Push a mirror to the new name, then delete the old one (see docs/operations.md).
    Rename {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The current name.
        old: String,
        /// The new name.
        new: String,
    },
    /// Point HEAD (the branch `git clone` checks out) at BRANCH, which must
    /// exist.
    SetHead {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `org/project`.
        name: String,
        /// `main`, `release/1.0` (under refs/heads/).
        branch: String,
    },
}

/// `gitstow fsck`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["repo", "all"])))]
pub struct FsckArgs {
    /// The store and its S3 settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The repository to check.
    #[arg(long)]
    pub repo: Option<String>,
    /// Check every repository of the store.
    #[arg(long)]
    pub all: bool,
}

fn open_repo(store: &Arc<dyn ObjectStore>, name: &str) -> Result<Repository, Failure> {
    let name = name.strip_suffix(".git").unwrap_or(name);
    gitstow_http::repo_name::validate(name)?;
    Ok(Repository::new(
        store.clone(),
        name,
        IndexCache::with_limit(100_000),
    ))
}

fn admin_options() -> gitstow_maintain::Options {
    gitstow_maintain::Options::default()
}

/// The names of the repositories under `prefix`.
fn names(store: &Arc<dyn ObjectStore>, prefix: &str) -> Result<Vec<String>, Failure> {
    Ok(store
        .list(prefix)?
        .iter()
        .filter_map(|k| k.strip_suffix(".git/state"))
        .filter(|n| gitstow_http::repo_name::validate(n).is_ok())
        .map(str::to_owned)
        .collect())
}

/// Runs a repo command; returns the exit code.
pub fn repo_main(args: RepoArgs) -> i32 {
    match args.command {
        RepoCommand::List { store, prefix } => run(&store, IfMissing::Refuse, |s| {
            let mut any = false;
            for name in names(s, &prefix)? {
                let repo = open_repo(s, &name)?;
                let Some(sum) = gitstow_maintain::admin::summary(&repo)? else {
                    continue;
                };
                if !any {
                    println!(
                        "{:<32} {:>6} {:>10} {:>14}  HEAD",
                        "NAME", "REFS", "CONTAINERS", "BYTES"
                    );
                    any = true;
                }
                println!(
                    "{:<32} {:>6} {:>10} {:>14}  {}",
                    name,
                    sum.refs,
                    sum.containers,
                    sum.bytes,
                    sum.head.as_deref().unwrap_or("-")
                );
            }
            if !any {
                println!("no repositories");
            }
            Ok(())
        }),
        RepoCommand::Create { store, name, head } => run(&store, IfMissing::Create, |s| {
            let repo = open_repo(s, &name)?;
            gitstow_protocol::check_ref_format(&format!("refs/heads/{head}"))
                .map_err(|_| format!("invalid branch name {head:?}"))?;
            gitstow_maintain::admin::create(&repo, &head)?;
            println!(
                "created repository '{}' (HEAD: refs/heads/{head})",
                repo.name()
            );
            Ok(())
        }),
        RepoCommand::Delete { store, name } => run(&store, IfMissing::Refuse, |s| {
            let repo = open_repo(s, &name)?;
            // A repository created later under this name must not read the
            // LFS objects this one uploaded, nor inherit its locks: dropped
            // also when the repository itself is gone already.
            let deleted = gitstow_maintain::admin::delete(&repo, &admin_options());
            let disowned = gitstow_lfs::objects::forget(s.as_ref(), repo.name())?;
            if disowned > 0 {
                println!("dropped its claim to {disowned} Git LFS object(s)");
            }
            let retired = deleted?;
            println!(
                "deleted repository '{}': its {retired} container{} removed by maintenance after the grace period",
                repo.name(),
                if retired == 1 { " is" } else { "s are" }
            );
            Ok(())
        }),
        RepoCommand::Rename { store, old, new } => run(&store, IfMissing::Refuse, |_| {
            Err(Failure::from(format!(
                "cannot rename {old:?} to {new:?}: an object store has no atomic rename of a \
                 repository's keys. Instead: git clone --mirror the old URL, git push --mirror to \
                 the new one (with Git LFS: git lfs fetch --all from the old one, git lfs push \
                 --all to the new one, in the mirror), then gitstow repo delete {old}"
            )))
        }),
        RepoCommand::SetHead {
            store,
            name,
            branch,
        } => run(&store, IfMissing::Refuse, |s| {
            let repo = open_repo(s, &name)?;
            let branch = branch.strip_prefix("refs/heads/").unwrap_or(&branch);
            gitstow_maintain::admin::set_head(&repo, branch, &admin_options())?;
            println!("{}: HEAD -> refs/heads/{branch}", repo.name());
            Ok(())
        }),
    }
}

/// Runs `gitstow fsck`; returns the exit code: 0 sound, 1 damage found (or
/// a failure), 2 the store cannot be opened.
pub fn fsck_main(args: FsckArgs) -> i32 {
    let mut damaged = false;
    let code = run(&args.store, IfMissing::Refuse, |s| {
        let list = match &args.repo {
            Some(name) => vec![name.clone()],
            None => names(s, "")?,
        };
        let mut checked = 0;
        for name in list {
            let repo = open_repo(s, &name)?;
            let report = match gitstow_maintain::fsck::fsck(&repo) {
                Ok(Some(report)) => report,
                // Deleted since it was listed, or marked deleted: nothing to check.
                Ok(None) if args.all => continue,
                Ok(None) => {
                    return Err(Failure::from(format!(
                        "repository '{}' not found",
                        repo.name()
                    )))
                }
                // The others are still checked; the exit code says it.
                Err(e) if args.all => {
                    println!("{}: error: cannot be checked: {e}", repo.name());
                    damaged = true;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            checked += 1;
            for p in &report.problems {
                println!("{}: {p}", repo.name());
            }
            println!(
                "{}: {} containers, {} objects checked, {} reachable: {}",
                repo.name(),
                report.containers,
                report.objects,
                report.reachable,
                if report.problems.is_empty() {
                    "ok".to_owned()
                } else {
                    format!("{} problems", report.problems.len())
                }
            );
            damaged |= !report.problems.is_empty();
        }
        if checked == 0 && args.all && !damaged {
            println!("no repositories");
        }
        Ok(())
    });
    if code == 0 && damaged {
        1
    } else {
        code
    }
}
