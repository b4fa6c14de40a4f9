//! `gitstow mirror`: take a repository in from another git server (plan
//! 0017). `mirror pull` runs one pull now, from the command line: safe to
//! run while servers serve the store (one compare-and-swap of the state,
//! as a push).

use std::time::Duration;

use clap::Subcommand;
use gitstow_mirror::{Mode, PullOptions, RefFilter, Upstream};
use gitstow_odb::{IndexCache, Repository};

use crate::admin::{run, Failure, IfMissing};
use crate::store_open::{CreateStore, StoreArgs};

/// `gitstow mirror …`.
#[derive(Debug, clap::Args)]
pub struct MirrorArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: MirrorCommand,
}

/// Mirror commands.
#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// Pull REPO from another git server now: what changed upstream is
    /// fetched (only objects the repository lacks) and applied in one
    /// compare-and-swap, creating the repository on its first pull. Safe
    /// by default: a ref the upstream rewrote or deleted keeps its old tip
    /// under refs/mirror-backup/<time>/ (hidden from fetches), then takes
    /// the upstream's value.
    Pull {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `--create-store`.
        #[command(flatten)]
        create: CreateStore,
        /// The repository here (`org/project`).
        repo: String,
        /// The upstream repository's URL: http:// or https://, without
        /// credentials (e.g. https://github.com/org/project.git).
        #[arg(long, value_name = "URL")]
        from: String,
        /// The refs to take: full names or prefixes ending in /*
        /// (repeatable; default: refs/heads/* and refs/tags/*).
        #[arg(long = "refs", value_name = "PATTERN")]
        refs: Vec<String>,
        /// Apply the upstream's refs exactly: a rewritten or deleted ref
        /// keeps no old tip.
        #[arg(long)]
        exact: bool,
        /// Seconds each request to the upstream may take in all.
        #[arg(long, default_value_t = 3600, value_name = "SECS")]
        timeout: u64,
    },
}

/// Runs a mirror command; returns the exit code.
pub fn mirror_main(args: MirrorArgs) -> i32 {
    match args.command {
        MirrorCommand::Pull {
            store,
            create,
            repo,
            from,
            refs,
            exact,
            timeout,
        } => run(
            &store,
            IfMissing::creating(create.create_store, &store),
            |s| {
                let name = repo.strip_suffix(".git").unwrap_or(&repo);
                gitstow_http::repo_name::validate(name)?;
                let filter = if refs.is_empty() {
                    RefFilter::default()
                } else {
                    RefFilter::new(refs.clone())?
                };
                let upstream = Upstream::new(&from, Duration::from_secs(timeout.max(1)))?;
                let (scratch, _) = crate::admin::private_cache(None)?;
                let opts = PullOptions {
                    filter,
                    mode: if exact { Mode::Exact } else { Mode::Safe },
                    receive: gitstow_receive::Options {
                        staging_dir: Some(scratch.path().to_owned()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let repository = Repository::new(s.clone(), name, IndexCache::new());
                let pulled = gitstow_mirror::pull(&repository, &upstream, &opts).map_err(|e| {
                    Failure::from(format!("{name}: pull from {} failed: {e}", upstream.url()))
                })?;
                if !pulled.changed() {
                    println!("{name}: up to date with {}", upstream.url());
                    return Ok(());
                }
                println!(
                "{name}: pulled from {}: {} created, {} updated, {} deleted; {} new objects, {} fetched",
                upstream.url(),
                pulled.created,
                pulled.updated,
                pulled.deleted,
                pulled.objects,
                crate::size::human(pulled.pack_bytes)
            );
                for (kept, oid) in &pulled.kept {
                    println!(
                        "{name}: kept the old tip {oid} as {kept} (hidden; fetch it by its id)"
                    );
                }
                Ok(())
            },
        ),
    }
}
