//! `gitstow maintain`: one maintenance pass over one repository or all of a
//! store, from the command line (cron, an operator, a test), with progress on
//! stderr and a summary per repository on stdout.
//!
//! It is safe to run while `gitstow serve` instances serve the same store:
//! it takes the same per-repository lease as their automatic maintenance and
//! commits only by compare-and-swap of the state.

use std::time::Duration;

use gitstow_odb::{IndexCache, Repository};

use crate::cli::LogFormat;
use crate::store_open::{IfMissing, StoreArgs};

/// Arguments of `gitstow maintain`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["repo", "all"])))]
pub struct MaintainArgs {
    /// The store and its S3 settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The repository to maintain (its name without `.git`, e.g. `org/project`).
    #[arg(long)]
    pub repo: Option<String>,
    /// Maintain every repository of the store (lists the store).
    #[arg(long)]
    pub all: bool,
    /// Merge every container that is not full into as few as possible,
    /// instead of only what the geometric rule asks for.
    #[arg(long)]
    pub full: bool,
    /// Garbage collection: rewrite what the refs reach into new containers,
    /// move what they do not reach into garbage containers (held for the
    /// grace period, then deleted a grace period after that).
    #[arg(long)]
    pub gc: bool,
    /// Say what would be done; write and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds a container stays after no state names it (must be at least
    /// the longest push, from its first upload to its commit, and the longest
    /// fetch).
    #[arg(long, default_value_t = 86_400)]
    pub grace: u64,
    /// Seconds the maintenance lease lasts without renewal (a run that dies
    /// holds the repository that long).
    #[arg(long, default_value_t = 600)]
    pub lease_ttl: u64,
    /// Directory for staging files (default: the system temp dir).
    #[arg(long)]
    pub tmp_dir: Option<std::path::PathBuf>,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Runs the command; returns the process exit code (0 done, 1 a repository
/// failed, 2 bad arguments or no store).
pub fn main(args: MaintainArgs) -> i32 {
    crate::cli::init_logging(args.log_format);
    if let Err(why) = gitstow_service::maintenance::check_grace("--grace", args.grace) {
        eprintln!("gitstow: {why}");
        return 2;
    }
    // Staging files (and an S3 store's cache) live in this run's own
    // scratch directory; those of dead processes are swept first.
    let (scratch, cache) = match crate::admin::private_cache(args.tmp_dir.as_deref()) {
        Ok(made) => made,
        Err(e) => {
            eprintln!("gitstow: {e}");
            return 2;
        }
    };
    let store = match crate::store_open::open(&args.store, IfMissing::Refuse, Some(cache)) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("gitstow: {why}");
            return 2;
        }
    };
    let names = match &args.repo {
        Some(name) => {
            // As in a URL: `org/project.git` names `org/project`.
            let name = name.strip_suffix(".git").unwrap_or(name);
            if let Err(e) = gitstow_http::repo_name::validate(name) {
                eprintln!("gitstow: {e}");
                return 2;
            }
            vec![name.to_owned()]
        }
        None => match store.list("") {
            Ok(keys) => keys
                .iter()
                .filter_map(|k| k.strip_suffix(".git/state"))
                .filter(|n| gitstow_http::repo_name::validate(n).is_ok())
                .map(str::to_owned)
                .collect(),
            Err(e) => {
                eprintln!("gitstow: cannot list the store: {e}");
                return 1;
            }
        },
    };
    let opts = gitstow_maintain::Options {
        grace: Duration::from_secs(args.grace),
        staging_dir: Some(scratch.path().to_owned()),
        full: args.full,
        gc: args.gc,
        scan_now: true,
        dry_run: args.dry_run,
        lease_ttl: Duration::from_secs(args.lease_ttl.max(1)),
        // Tests only: widen the window between a run's read of the state and its commit.
        test_commit_delay: std::env::var("GITSTOW_TEST_MAINTENANCE_COMMIT_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis),
        ..Default::default()
    };
    let indexes = IndexCache::new();
    let mut failed = 0;
    for name in &names {
        let repo = Repository::new(store.clone(), name, indexes.clone());
        let result = gitstow_maintain::run(&repo, &opts, &mut |line| eprintln!("{line}"));
        match result {
            Ok(r) => {
                println!("{}", summary(&r, args.dry_run, args.gc));
                if r.skipped == Some(gitstow_maintain::Skipped::NoRepository) && args.repo.is_some()
                {
                    failed += 1;
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("gitstow: {name}: maintenance failed: {e}");
            }
        }
    }
    if names.is_empty() {
        eprintln!("gitstow: no repository to maintain");
    }
    // Over the whole store: Git LFS claims, objects and staged uploads
    // nothing needs (a run for one repository leaves them).
    if args.repo.is_none() {
        let lfs_opts = gitstow_maintain::lfs::LfsOptions {
            grace: Duration::from_secs(args.grace),
            dry_run: args.dry_run,
            now: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        match gitstow_maintain::lfs::collect(&store, &indexes, &lfs_opts) {
            Ok(r) => println!(
                "git lfs: {} {} claims no pointer needs, {} objects ({} bytes) no repository claims, {} abandoned uploads; {} unclaimed objects held for the grace period",
                if args.dry_run { "would drop" } else { "dropped" },
                r.markers_dropped,
                r.objects_dropped,
                r.bytes_dropped,
                r.staging_dropped,
                r.objects_pending
            ),
            Err(e) => {
                failed += 1;
                eprintln!("gitstow: git lfs collection failed: {e}");
            }
        }
    }
    if failed > 0 {
        1
    } else {
        0
    }
}

/// One line about one repository's run.
fn summary(r: &gitstow_maintain::Report, dry_run: bool, gc: bool) -> String {
    use gitstow_maintain::Skipped;
    match r.skipped {
        Some(Skipped::NoRepository) => return format!("{}: no such repository", r.repo),
        Some(Skipped::LeaseHeld) => {
            return format!(
                "{}: skipped: another instance is maintaining it (lease held)",
                r.repo
            )
        }
        _ => {}
    }
    if dry_run {
        return format!(
            "{}: would merge {} of {} containers ({} bytes); {} retired containers due for deletion; {} orphan containers; {} retired in all{}",
            r.repo, r.merged, r.containers_before, r.bytes_before, r.deleted, r.orphans, r.retired_held,
            if gc { "; a dry run does not simulate the GC (it reads no objects)" } else { "" }
        );
    }
    let superseded = if r.skipped == Some(Skipped::Superseded) {
        " (another run merged first)"
    } else {
        ""
    };
    if r.gc {
        return format!(
            "{}: GC: containers {} -> {}, bytes {} -> {}; {} objects reachable, {} unreachable moved to garbage, {} duplicate objects dropped{}; deleted {} retired; {} orphans found; {} garbage and {} retired containers held for the grace period; {:.2} s",
            r.repo,
            r.containers_before,
            r.containers_after,
            r.bytes_before,
            r.bytes_after,
            r.reachable,
            r.unreachable,
            r.objects_dropped,
            superseded,
            r.deleted,
            r.orphans,
            r.garbage_held,
            r.retired_held,
            r.duration.as_secs_f64()
        );
    }
    format!(
        "{}: containers {} -> {}, bytes {} -> {}; merged {} into {} ({} bytes written, {} duplicate objects dropped){}; deleted {} retired; {} orphans found; {} retired held for the grace period; {} garbage held, {} garbage retired; {:.2} s",
        r.repo,
        r.containers_before,
        r.containers_after,
        r.bytes_before,
        r.bytes_after,
        r.merged,
        r.written,
        r.bytes_rewritten,
        r.objects_dropped,
        superseded,
        r.deleted,
        r.orphans,
        r.retired_held,
        r.garbage_held,
        r.garbage_retired,
        r.duration.as_secs_f64()
    )
}
