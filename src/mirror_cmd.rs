//! `gitstow mirror`: take a repository in from another git server (plan
//! 0017). `mirror pull` runs one pull now, from the command line (`mirror
//! push` one push to another server); `mirror add --from` stores a pull
//! mirror and `mirror add --to` a push mirror (`<repo>.git/mirror`), which
//! every `serve` syncs when it is due (whichever instance claims its lease
//! first; a push mirror after each push too); `mirror sync` runs one now
//! under the same lease and records the outcome, `mirror list` shows them, `mirror resume` ends a pause, `mirror
//! remove` drops one. All are safe to run while servers serve the store (a
//! pull is one compare-and-swap of the state, as a push; the settings
//! change by compare-and-swap too).

use std::time::Duration;

use clap::Subcommand;
use gitstow_mirror::schedule::{self, Claimed, Done};
use gitstow_mirror::settings::{self, Credential, Direction, Mirror};
use gitstow_mirror::{Mode, PullOptions, PushOptions, RefFilter, Upstream};
use gitstow_odb::{IndexCache, Repository};

use crate::admin::{run, Failure, IfMissing};
use crate::mirror_credentials::{SecretsKeyArg, UpstreamLogin, WebhookSecretArg};
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
        /// The upstream repository's URL: http://, https:// or SSH
        /// (ssh://git@host/org/project.git, git@host:org/project.git, with
        /// --ssh-key-file), without credentials (e.g.
        /// https://github.com/org/project.git).
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
        /// The upstream's credentials, if it wants some.
        #[command(flatten)]
        login: UpstreamLogin,
    },
    /// Push REPO to another git server now, as `git push --mirror
    /// --force-with-lease` would: every ref under the patterns that differs
    /// from the remote's advertisement, with the advertised value as the
    /// old one (a ref that moved there meanwhile is refused, not
    /// overwritten); refs the remote has and REPO does not are deleted.
    Push {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The repository here (`org/project`).
        repo: String,
        /// The remote repository's URL: http://, https:// or SSH (with
        /// --ssh-key-file), without credentials.
        #[arg(long, value_name = "URL")]
        to: String,
        /// The refs to push (repeatable; default: refs/heads/* and refs/tags/*).
        #[arg(long = "refs", value_name = "PATTERN")]
        refs: Vec<String>,
        /// Seconds each request to the remote may take in all.
        #[arg(long, default_value_t = 3600, value_name = "SECS")]
        timeout: u64,
        /// The remote's credentials, if it wants some.
        #[command(flatten)]
        login: UpstreamLogin,
    },
    /// Store a mirror of REPO (kept in the store): with --from, a pull
    /// mirror (its upstream, refs, mode and interval), which every `gitstow
    /// serve` on the store pulls when it is due (at once, then every
    /// interval), and the repository then refuses pushes (the upstream is
    /// where its changes come from); with --to, a push mirror, which a
    /// `serve` pushes to its remote within seconds of each push that moves
    /// refs, and every interval (as `mirror push` does: the remote ends
    /// equal, and a ref that moved there meanwhile is refused, not
    /// overwritten). `mirror sync` runs either now.
    Add {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The repository here (`org/project`).
        repo: String,
        /// The upstream repository's URL (http://, https:// or SSH with
        /// --ssh-key-file; no credentials).
        #[arg(long, value_name = "URL", required_unless_present = "to")]
        from: Option<String>,
        /// The remote repository's URL to push to (http://, https:// or SSH
        /// with --ssh-key-file; no credentials).
        #[arg(long, value_name = "URL", conflicts_with_all = ["from", "exact", "webhook_secret_file", "webhook_secret_env"])]
        to: Option<String>,
        /// The refs to take (repeatable; default: refs/heads/* and refs/tags/*).
        #[arg(long = "refs", value_name = "PATTERN")]
        refs: Vec<String>,
        /// Apply the upstream's refs exactly (keep no old tips).
        #[arg(long)]
        exact: bool,
        /// Seconds between scheduled syncs (at least 60).
        #[arg(long, default_value_t = 3600, value_name = "SECS")]
        interval: u64,
        /// Replace the repository's mirror if it has one.
        #[arg(long)]
        replace: bool,
        /// The upstream's credentials, if it wants some (stored sealed
        /// with the secrets key).
        #[command(flatten)]
        login: UpstreamLogin,
        /// `--webhook-secret-file` / `--webhook-secret-env`.
        #[command(flatten)]
        webhook: WebhookSecretArg,
        /// `--secrets-key-file`.
        #[command(flatten)]
        key: SecretsKeyArg,
    },
    /// Run REPO's stored mirror now (a paused one too), and record the
    /// outcome (last success, last error) in its run state. When an
    /// instance is running it already, it is marked to run once more
    /// after that instead.
    Sync {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The repository here (`org/project`).
        repo: String,
        /// `--push`.
        #[command(flatten)]
        way: WayArg,
        /// Seconds each request to the upstream may take in all.
        #[arg(long, default_value_t = 3600, value_name = "SECS")]
        timeout: u64,
        /// `--secrets-key-file` (for a mirror with credentials).
        #[command(flatten)]
        key: SecretsKeyArg,
    },
    /// List the stored mirrors: repository, upstream, refs, mode, interval,
    /// state (syncing, paused, next run), last success, last error (one
    /// listing of the store's keys).
    List {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// One JSON array on stdout, a row per mirror: `[{"repository",
        /// "direction" ("pull" or "push"), "from" (a pull mirror's upstream,
        /// else null), "to" (a push mirror's remote, else null), "refs",
        /// "exact", "username", "webhook", "interval_secs", "state", "next_run", "last_attempt",
        /// "last_success", "last_error", "failures", "paused", "lfs_missing":
        /// [{"oid", "size", "why"}], "ssh_host_key"}]` (times in
        /// seconds since the epoch; `state`: "syncing", "paused" or
        /// "scheduled").
        #[arg(long)]
        json: bool,
    },
    /// End the pause of REPO's mirror (paused after permanent failures:
    /// 401, 403, 404, a refused pack) and make it due at once.
    Resume {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The repository here (`org/project`).
        repo: String,
        /// `--push`.
        #[command(flatten)]
        way: WayArg,
    },
    /// Drop REPO's stored mirror (the repository stays as it is; without
    /// its pull mirror it takes pushes again).
    Remove {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The repository here (`org/project`).
        repo: String,
        /// `--push`.
        #[command(flatten)]
        way: WayArg,
    },
}

/// Which of a repository's mirrors a command means.
#[derive(Debug, clap::Args)]
pub struct WayArg {
    /// The push mirror (`mirror add --to`), when the repository has both;
    /// without it, the pull mirror, or the push mirror when that is the
    /// only one.
    #[arg(long)]
    push: bool,
}

impl WayArg {
    /// The direction meant for `repo` in `store`.
    fn direction(
        &self,
        store: &dyn gitstow_store::ObjectStore,
        repo: &str,
    ) -> Result<Direction, Failure> {
        if self.push {
            return Ok(Direction::Push);
        }
        let doc = settings::load(store, repo)?.map(|(d, _)| d);
        Ok(match doc {
            Some(d) if d.pull.is_none() && d.push.is_some() => Direction::Push,
            _ => Direction::Pull,
        })
    }
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
            login,
        } => run(
            &store,
            IfMissing::creating(create.create_store, &store),
            |s| {
                let name = repo_name(&repo)?;
                let filter = if refs.is_empty() {
                    RefFilter::default()
                } else {
                    RefFilter::new(refs.clone())?
                };
                let upstream =
                    login.apply(Upstream::new(&from, Duration::from_secs(timeout.max(1)))?)?;
                let (scratch, _) = crate::admin::private_cache(None)?;
                let opts = PullOptions {
                    filter,
                    mode: if exact { Mode::Exact } else { Mode::Safe },
                    ..base_options(scratch.path())
                };
                let repository = Repository::new(s.clone(), &name, IndexCache::new());
                let pulled = gitstow_mirror::pull(&repository, &upstream, &opts);
                login.tell_host_key(&name, &upstream);
                let pulled = pulled.map_err(|e| {
                    Failure::from(format!("{name}: pull from {} failed: {e}", upstream.url()))
                })?;
                gitstow_service::mirrors::follow_head(&repository, pulled.head.as_deref());
                print_pulled(&name, upstream.url(), &pulled);
                // What came is handed on by the push mirror, if any.
                if pulled.changed() && settings::pushed(s.as_ref(), &name)? {
                    println!("{name}: its push mirror is due (a running gitstow serve pushes it)");
                }
                Ok(())
            },
        ),
        MirrorCommand::Push {
            store,
            repo,
            to,
            refs,
            timeout,
            login,
        } => run(&store, IfMissing::Refuse, |s| {
            let name = repo_name(&repo)?;
            let filter = if refs.is_empty() {
                RefFilter::default()
            } else {
                RefFilter::new(refs.clone())?
            };
            let remote = login.apply(Upstream::new(&to, Duration::from_secs(timeout.max(1)))?)?;
            let (scratch, _) = crate::admin::private_cache(None)?;
            let repository = Repository::new(s.clone(), &name, IndexCache::new());
            if repository.load_state()?.is_none_or(|v| v.state.deleted) {
                return Err(format!("repository '{name}' not found").into());
            }
            let opts = PushOptions {
                filter,
                staging_dir: Some(scratch.path().to_owned()),
                ..Default::default()
            };
            let pushed = gitstow_mirror::push(&repository, &remote, &opts);
            login.tell_host_key(&name, &remote);
            let pushed = pushed.map_err(|e| {
                Failure::from(format!("{name}: push to {} failed: {e}", remote.url()))
            })?;
            print_pushed(&name, remote.url(), &pushed);
            if pushed.refused.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{name}: {} ref(s) refused by the remote",
                    pushed.refused.len()
                )
                .into())
            }
        }),
        MirrorCommand::Add {
            store,
            repo,
            from,
            to,
            refs,
            exact,
            interval,
            replace,
            login,
            webhook,
            key,
        } => run(&store, IfMissing::Refuse, |s| {
            let name = repo_name(&repo)?;
            let (direction, url) = match (&from, &to) {
                (_, Some(to)) => (Direction::Push, to),
                (Some(from), None) => (Direction::Pull, from),
                (None, None) => return Err("give --from URL or --to URL".into()),
            };
            let push = direction == Direction::Push;
            let mut mirror = Mirror::new(url, refs.clone(), exact || push, interval)?;
            if let Some((user, password)) = login.read()? {
                let key = key.require()?;
                mirror.credential =
                    Some(Credential::seal(&key, &name, &mirror.url, &user, &password));
            }
            // Refused now rather than at the first sync: an SSH URL
            // without a key, a key or a host key that does not parse.
            login.apply(Upstream::new(url, Duration::from_secs(1))?)?;
            if let Some(pem) = login.ssh_key()? {
                let key = key.require()?;
                mirror.sealed_ssh_key =
                    Some(key.seal(&Mirror::ssh_key_context(&name, &mirror.url), pem.as_bytes()));
            }
            mirror.ssh_host_key = login.ssh_host_key.clone();
            if let Some(secret) = webhook.read()? {
                let key = key.require()?;
                let context = gitstow_mirror::trigger::context(&name);
                mirror.webhook_secret = Some(key.seal(&context, secret.as_bytes()));
            }
            settings::add(s.as_ref(), &name, direction, &mirror, replace)?;
            if push {
                println!(
                    "{name}: push mirror to {} ({}; after each push and every {} s); `gitstow mirror sync --push {name}` pushes it now",
                    mirror.url,
                    mirror.refs.join(" "),
                    mirror.interval_secs
                );
            } else {
                println!(
                    "{name}: pull mirror of {} ({}; {}; every {} s); `gitstow mirror sync {name}` pulls it now",
                    mirror.url,
                    mirror.refs.join(" "),
                    if exact { "exact" } else { "safe" },
                    mirror.interval_secs
                );
            }
            Ok(())
        }),
        MirrorCommand::Sync {
            store,
            repo,
            way,
            timeout,
            key,
        } => run(&store, IfMissing::Refuse, |s| {
            let name = repo_name(&repo)?;
            let direction = way.direction(s.as_ref(), &name)?;
            let key = key.load()?;
            let owner = schedule::owner_id();
            let (verb, gerund, prep) = match direction {
                Direction::Pull => ("pull", "pulled", "from"),
                Direction::Push => ("push", "pushed", "to"),
            };
            let claim = match schedule::claim(
                s.as_ref(),
                &name,
                direction,
                &owner,
                schedule::DEFAULT_LEASE_TTL,
                schedule::now_secs(),
                true,
            )? {
                Claimed::Claimed(c) => c,
                Claimed::Held(lease) => {
                    println!(
                        "{name}: being {gerund} by {} (lease until {}); it will run once more after that {verb}",
                        lease.owner,
                        crate::token_cmd::date(lease.expires)
                    );
                    return Ok(());
                }
                Claimed::Gone | Claimed::NotDue(_) => {
                    return Err(format!("{name} has no {verb} mirror (gitstow mirror add)").into())
                }
            };
            let (scratch, _) = crate::admin::private_cache(None)?;
            let repository = Repository::new(s.clone(), &name, IndexCache::new());
            let synced = claim.run(
                s.as_ref(),
                &repository,
                key.as_ref(),
                base_options(scratch.path()),
                Duration::from_secs(timeout.max(1)),
            )?;
            match synced.outcome {
                Ok(Done::Pulled(pulled)) => {
                    gitstow_service::mirrors::follow_head(&repository, pulled.head.as_deref());
                    print_pulled(&name, &synced.url, &pulled);
                    Ok(())
                }
                Ok(Done::Pushed(pushed)) => {
                    print_pushed(&name, &synced.url, &pushed);
                    Ok(())
                }
                Err(e) => {
                    let paused = if synced.paused.is_some() {
                        " (the mirror is paused now: gitstow mirror resume)"
                    } else {
                        ""
                    };
                    Err(format!(
                        "{name}: {verb} {prep} {} failed: {}{paused}",
                        synced.url, e.message
                    )
                    .into())
                }
            }
        }),
        MirrorCommand::List { store, json } => run(&store, IfMissing::Refuse, |s| {
            let now = schedule::now_secs();
            let mut rows = Vec::new();
            for key in s.list("")? {
                let Some(name) = key.strip_suffix(".git/mirror") else {
                    continue;
                };
                if let Some((doc, _)) = settings::load(s.as_ref(), name)? {
                    for (direction, m) in [(Direction::Pull, doc.pull), (Direction::Push, doc.push)]
                    {
                        if let Some(m) = m {
                            rows.push((name.to_owned(), direction, m));
                        }
                    }
                }
            }
            if json {
                let out: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|(name, direction, p)| {
                        let (from, to) = match direction {
                            Direction::Pull => (Some(&p.url), None),
                            Direction::Push => (None, Some(&p.url)),
                        };
                        serde_json::json!({
                            "repository": name,
                            "direction": direction.as_str(),
                            "from": from,
                            "to": to,
                            "refs": p.refs,
                            "exact": p.exact,
                            "username": p.credential.as_ref().map(|c| &c.username),
                            "webhook": p.webhook_secret.is_some(),
                            "interval_secs": p.interval_secs,
                            "state": state_of(p, now).0,
                            "next_run": p.next_run(),
                            "last_attempt": p.last_attempt,
                            "last_success": p.last_success,
                            "last_error": p.last_error,
                            "failures": p.failures,
                            "paused": p.paused,
                            "lfs_missing": p.lfs_missing,
                            "ssh_host_key": p.ssh_host_key,
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::from(out));
                return Ok(());
            }
            if rows.is_empty() {
                println!("no mirrors");
            }
            for (name, direction, p) in rows {
                let when = |t: Option<u64>| t.map_or("never".to_owned(), crate::token_cmd::date);
                let mut error = p
                    .last_error
                    .as_ref()
                    .map(|e| format!("; last error ({} in a row): {e}", p.failures))
                    .unwrap_or_default();
                if let Some(first) = p.lfs_missing.first() {
                    error += &format!(
                        "; {} Git LFS object(s) not moved (first {}: {})",
                        p.lfs_missing.len(),
                        first.oid,
                        first.why
                    );
                }
                let login = p
                    .credential
                    .as_ref()
                    .map(|c| format!("; as {}", c.username))
                    .unwrap_or_default()
                    + if p.webhook_secret.is_some() {
                        "; webhook"
                    } else {
                        ""
                    };
                let (way, mode) = match direction {
                    Direction::Pull => ("pull from", if p.exact { "exact; " } else { "safe; " }),
                    Direction::Push => ("push to", "after each push and "),
                };
                println!(
                    "{name}: {way} {} ({}; {mode}every {} s{login}); {}; last success {}{error}",
                    p.url,
                    p.refs.join(" "),
                    p.interval_secs,
                    state_of(&p, now).1,
                    when(p.last_success),
                );
            }
            Ok(())
        }),
        MirrorCommand::Resume { store, repo, way } => run(&store, IfMissing::Refuse, |s| {
            let name = repo_name(&repo)?;
            let direction = way.direction(s.as_ref(), &name)?;
            let was_paused = settings::resume(s.as_ref(), &name, direction)?;
            println!(
                "{name}: {}; due at once (a running gitstow serve runs it within seconds)",
                if was_paused {
                    "resumed"
                } else {
                    "was not paused"
                }
            );
            Ok(())
        }),
        MirrorCommand::Remove { store, repo, way } => run(&store, IfMissing::Refuse, |s| {
            let name = repo_name(&repo)?;
            let direction = way.direction(s.as_ref(), &name)?;
            match (
                settings::remove(s.as_ref(), &name, direction, true)?,
                direction,
            ) {
                (Some(url), Direction::Pull) => {
                    println!("{name}: no longer mirrors {url} (the repository stays as it is, and takes pushes again)");
                    Ok(())
                }
                (Some(url), Direction::Push) => {
                    println!("{name}: no longer pushed to {url} (the remote stays as it is)");
                    Ok(())
                }
                (None, _) => Err(format!("{name} has no {} mirror", direction.as_str()).into()),
            }
        }),
    }
}

/// A mirror's state at `now`: its JSON word and its words for people.
fn state_of(p: &Mirror, now: u64) -> (&'static str, String) {
    let date = crate::token_cmd::date;
    if let Some(lease) = p.lease.as_ref().filter(|l| l.expires > now) {
        let until = date(lease.expires);
        return (
            "syncing",
            format!("syncing on {} (lease until {until})", lease.owner),
        );
    }
    if let Some(why) = &p.paused {
        return ("paused", format!("paused ({why}; gitstow mirror resume)"));
    }
    match p.next_run() {
        Some(t) if t <= now => ("scheduled", "due now".to_owned()),
        Some(t) => ("scheduled", format!("next run {}", date(t))),
        None => ("scheduled", "not scheduled".to_owned()),
    }
}

/// The pull limits of a command-line pull: staging in this run's scratch
/// directory.
fn base_options(scratch: &std::path::Path) -> PullOptions {
    PullOptions {
        receive: gitstow_receive::Options {
            staging_dir: Some(scratch.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Prints what a pull of `name` from `url` did.
fn print_pulled(name: &str, url: &str, pulled: &gitstow_mirror::Pulled) {
    if !pulled.changed() {
        println!("{name}: up to date with {url}");
        print_lfs(name, "brought", &pulled.lfs);
        return;
    }
    println!(
        "{name}: pulled from {url}: {} created, {} updated, {} deleted; {} new objects, {} fetched",
        pulled.created,
        pulled.updated,
        pulled.deleted,
        pulled.objects,
        crate::size::human(pulled.pack_bytes)
    );
    for (kept, oid) in &pulled.kept {
        println!("{name}: kept the old tip {oid} as {kept} (hidden; fetch it by its id)");
    }
    print_lfs(name, "brought", &pulled.lfs);
}

/// Prints the Git LFS objects a sync of `name` moved (`verb`), and those
/// it could not.
fn print_lfs(name: &str, verb: &str, lfs: &gitstow_mirror::lfs::LfsCopied) {
    if lfs.copied > 0 {
        println!(
            "{name}: {} Git LFS object(s) {verb} ({})",
            lfs.copied,
            crate::size::human(lfs.bytes)
        );
    }
    for m in &lfs.missing {
        println!(
            "{name}: Git LFS object {} ({} bytes) not {verb}: {} (tried again at the next sync)",
            m.oid, m.size, m.why
        );
    }
}

/// Prints what a push of `name` to `url` did.
fn print_pushed(name: &str, url: &str, pushed: &gitstow_mirror::Pushed) {
    if !pushed.changed() && pushed.refused.is_empty() {
        println!("{name}: {url} is up to date");
    } else {
        println!(
            "{name}: pushed to {url}: {} created, {} updated, {} deleted; {} sent",
            pushed.created,
            pushed.updated,
            pushed.deleted,
            crate::size::human(pushed.pack_bytes)
        );
    }
    for (r, why) in &pushed.refused {
        println!("{name}: {r} refused by the remote: {why}");
    }
    print_lfs(name, "handed on", &pushed.lfs);
}

/// `org/project` (a `.git` suffix dropped), checked.
fn repo_name(repo: &str) -> Result<String, Failure> {
    let name = repo.strip_suffix(".git").unwrap_or(repo);
    gitstow_http::repo_name::validate(name)?;
    Ok(name.to_owned())
}
