//! `gitstow repo` and `gitstow fsck`: repositories from the command line,
//! through the same state compare-and-swap as pushes
//! ([`gitstow_maintain::admin`], [`gitstow_maintain::fsck`]), so they are
//! safe while servers run.

use std::sync::Arc;

use clap::Subcommand;
use gitstow_odb::{IndexCache, Repository};
use gitstow_store::ObjectStore;

use gitstow_maintain::fsck::Progress;

use crate::admin::{run, run_cached, Failure, IfMissing};
use crate::store_open::{CreateStore, StoreArgs};

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
    /// List the repositories (name, refs, containers, their size, Git LFS
    /// objects and their size, HEAD). Lists the store's keys under PREFIX
    /// (on S3 one request per 1,000 keys), then reads each repository's
    /// state and LFS markers, 16 requests at a time.
    List {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// Only names starting with this (`org/`).
        #[arg(long, default_value = "")]
        prefix: String,
        /// Sizes in bytes, not in KiB/MiB/GiB.
        #[arg(long)]
        bytes: bool,
        /// One JSON array on stdout: `[{"name", "refs", "containers",
        /// "bytes", "lfs_objects", "lfs_bytes", "head"}]` (sizes in bytes,
        /// `head` null when unset).
        #[arg(long)]
        json: bool,
    },
    /// Create an empty repository (for servers run with --no-auto-create).
    Create {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `--create-store`.
        #[command(flatten)]
        create: CreateStore,
        /// `org/project`.
        name: String,
        /// The branch HEAD names.
        #[arg(long, default_value = "main")]
        head: String,
        /// The repository's object format, as `git init --object-format`:
        /// `sha1` or `sha256`; fixed for its life.
        #[arg(long, default_value = "sha1", value_parser = ["sha1", "sha256"])]
        object_format: String,
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
    /// Progress on stderr (`--progress`, `--no-progress`).
    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,
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
    Ok(repo_names(&store.list(prefix)?))
}

/// The names of the repositories among store `keys` (those with a state).
fn repo_names(keys: &[String]) -> Vec<String> {
    keys.iter()
        .filter_map(|k| k.strip_suffix(".git/state"))
        .filter(|n| gitstow_http::repo_name::validate(n).is_ok())
        .map(str::to_owned)
        .collect()
}

/// One row of `repo list`.
struct Listed {
    name: String,
    summary: gitstow_maintain::admin::Summary,
    /// Git LFS objects the repository owns (its markers), and their bytes.
    lfs_objects: u64,
    lfs_bytes: u64,
}

/// Every repository under `prefix` that exists, in name order: one listing
/// of the keys, then each state and each LFS marker read,
/// [`PARALLEL_READS`](crate::admin::PARALLEL_READS) at a time.
fn list(store: &Arc<dyn ObjectStore>, prefix: &str) -> Result<Vec<Listed>, Failure> {
    let keys = store.list(prefix)?;
    let names = repo_names(&keys);
    let markers: Vec<&String> = keys
        .iter()
        .filter(|k| k.contains(".git/lfs/objects/"))
        .collect();
    let sizes = crate::admin::parallel_map(&markers, crate::admin::PARALLEL_READS, |key| {
        store.get(key).map(|got| {
            got.and_then(|(data, _)| gitstow_lfs::objects::Marker::parse(&data))
                .map_or(0, |m| m.size)
        })
    });
    let mut lfs: std::collections::HashMap<&str, (u64, u64)> = std::collections::HashMap::new();
    for (key, size) in markers.iter().zip(sizes) {
        let Some((repo, _)) = key.split_once(".git/lfs/objects/") else {
            continue;
        };
        let entry = lfs.entry(repo).or_default();
        entry.0 += 1;
        entry.1 += size?;
    }
    let summaries = crate::admin::parallel_map(&names, crate::admin::PARALLEL_READS, |name| {
        // (A `Failure` does not cross threads: its text does.)
        let repo = open_repo(store, name).map_err(|e| e.to_string())?;
        gitstow_maintain::admin::summary(&repo).map_err(|e| e.to_string())
    });
    let mut rows = Vec::new();
    for (name, summary) in names.into_iter().zip(summaries) {
        // Deleted (or gone since the listing): not listed.
        let Some(summary) = summary.map_err(Failure::from)? else {
            continue;
        };
        let (lfs_objects, lfs_bytes) = lfs.get(name.as_str()).copied().unwrap_or_default();
        rows.push(Listed {
            name,
            summary,
            lfs_objects,
            lfs_bytes,
        });
    }
    Ok(rows)
}

/// Runs a repo command; returns the exit code.
pub fn repo_main(args: RepoArgs) -> i32 {
    match args.command {
        RepoCommand::List {
            store,
            prefix,
            bytes,
            json,
        } => run(&store, IfMissing::Refuse, |s| {
            let listed = list(s, &prefix)?;
            if json {
                let rows: Vec<serde_json::Value> = listed
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "name": r.name,
                            "refs": r.summary.refs,
                            "containers": r.summary.containers,
                            "bytes": r.summary.bytes,
                            "lfs_objects": r.lfs_objects,
                            "lfs_bytes": r.lfs_bytes,
                            "head": r.summary.head,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::from(rows));
                return Ok(());
            }
            if listed.is_empty() {
                println!("no repositories");
                return Ok(());
            }
            let size = |n: u64| {
                if bytes {
                    n.to_string()
                } else {
                    crate::size::human(n)
                }
            };
            println!(
                "{:<32} {:>6} {:>10} {:>12} {:>6} {:>12}  HEAD",
                "NAME", "REFS", "CONTAINERS", "SIZE", "LFS", "LFS SIZE"
            );
            for r in &listed {
                println!(
                    "{:<32} {:>6} {:>10} {:>12} {:>6} {:>12}  {}",
                    r.name,
                    r.summary.refs,
                    r.summary.containers,
                    size(r.summary.bytes),
                    r.lfs_objects,
                    size(r.lfs_bytes),
                    r.summary.head.as_deref().unwrap_or("-")
                );
            }
            Ok(())
        }),
        RepoCommand::Create {
            store,
            create,
            name,
            head,
            object_format,
        } => run(
            &store,
            IfMissing::creating(create.create_store, &store),
            |s| {
                let repo = open_repo(s, &name)?;
                gitstow_protocol::check_ref_format(&format!("refs/heads/{head}"))
                    .map_err(|_| format!("invalid branch name {head:?}"))?;
                let format: gix_hash::Kind = object_format
                    .parse()
                    .map_err(|_| format!("unknown object format {object_format:?}"))?;
                gitstow_maintain::admin::create(&repo, &head, format)?;
                println!(
                    "created repository '{}' (HEAD: refs/heads/{head}, object format {format})",
                    repo.name()
                );
                Ok(())
            },
        ),
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
            // Its pull mirror would bring it back, and its push mirror
            // would find nothing to push: both go too.
            use gitstow_mirror::settings::{self, Direction};
            if let Some(url) = settings::remove(s.as_ref(), repo.name(), Direction::Pull, false)? {
                println!("dropped its pull mirror of {url}");
            }
            if let Some(url) = settings::remove(s.as_ref(), repo.name(), Direction::Push, false)? {
                println!("dropped its push mirror to {url}");
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
/// a failure), 2 the store cannot be opened. An S3 store is read through a
/// private container cache: each container is downloaded once, whole.
pub fn fsck_main(args: FsckArgs) -> i32 {
    let (_scratch, cache) = match crate::admin::private_cache(None) {
        Ok(made) => made,
        Err(e) => {
            eprintln!("gitstow: {e}");
            return 2;
        }
    };
    let mut damaged = false;
    let mut meter = crate::progress::Meter::new(args.progress.shown());
    let code = run_cached(&args.store, IfMissing::Refuse, Some(cache), |s| {
        let list = match &args.repo {
            Some(name) => vec![name.clone()],
            None => names(s, "")?,
        };
        let mut checked = 0;
        for name in list {
            let repo = open_repo(s, &name)?;
            let report = gitstow_maintain::fsck::fsck(&repo, &mut |p| match p {
                Progress::Objects { done, total } => {
                    meter.update("Checking objects", done, Some(total))
                }
                Progress::Connectivity { done } => {
                    meter.update("Checking connectivity", done, None)
                }
            });
            meter.finish();
            let report = match report {
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
                "{}: {}, {} objects checked, {} reachable: {}",
                repo.name(),
                plural(report.containers, "container"),
                report.objects,
                report.reachable,
                if report.problems.is_empty() {
                    "ok".to_owned()
                } else {
                    plural(report.problems.len(), "problem")
                }
            );
            damaged |= !report.problems.is_empty();
        }
        if checked == 0 && args.all && !damaged {
            println!("no repositories");
        }
        meter.requests(s.metrics());
        Ok(())
    });
    if code == 0 && damaged {
        1
    } else {
        code
    }
}

/// `1 container`, `2 containers`.
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
