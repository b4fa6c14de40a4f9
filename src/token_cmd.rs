//! `gitstow token` and `gitstow access`: the access document
//! ([`gitstow_access::AccessDoc`]) from the command line. Each command reads
//! the document from the store and writes it back by compare-and-swap, so
//! it is safe while servers run (they see the change within their refresh
//! interval, `serve --access-refresh`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Subcommand;
use gitstow_access::{AccessDoc, Grant, RepoPattern, StoredToken};

use crate::admin::{run, Failure, IfMissing};
use crate::store_open::{CreateStore, StoreArgs};

/// `gitstow token …`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// Token commands.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; its secret is printed once, as the last word of the
    /// output, and stored only as a hash. Use it as the password of HTTP
    /// Basic (any user name) or as a Bearer token.
    Create {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `--create-store`.
        #[command(flatten)]
        create: CreateStore,
        /// A unique name (letters, digits, '.', '_', '-'): logs and webhooks
        /// name the token's requests by it.
        #[arg(long)]
        name: String,
        /// PATTERN:LEVEL, repeatable: `org/project:read`, `org/*:write`
        /// (every repository under org/), `*:admin` (every repository, and
        /// the server endpoints). Levels: read (clone, fetch), write (also
        /// push and create; a force-push or deletion of a protected ref, by
        /// default HEAD's branch and tags, needs admin), admin (also
        /// /metrics and /debug/pprof/heap when granted on `*`).
        #[arg(long = "grant", required = true)]
        grants: Vec<String>,
        /// How long it works: `90d`, `12h`, `30min` (default: until revoked).
        #[arg(long)]
        expires: Option<String>,
    },
    /// List the tokens (names, grants, dates; never secrets).
    List {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// One JSON array on stdout: `[{"name", "created", "expires",
        /// "expired", "grants": ["write:org/*", …]}]` (dates in RFC 3339,
        /// `expires` null for never).
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by name (every server stops accepting it within its
    /// refresh interval).
    Revoke {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The token's name.
        name: String,
        /// Revoke even the last token: every server that enforces access
        /// control then refuses everything but anonymous read.
        #[arg(long)]
        force: bool,
    },
}

/// `gitstow access …`.
#[derive(Debug, clap::Args)]
pub struct AccessArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: AccessCommand,
}

/// Access commands.
#[derive(Debug, Subcommand)]
pub enum AccessCommand {
    /// Show who may do what: whether access control is on, the tokens and
    /// the repositories anyone may read.
    Show {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Let anyone read (clone, fetch) the repositories PATTERN matches,
    /// without credentials.
    AllowAnonymousRead {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `org/project`, `org/*` or `*`.
        pattern: String,
    },
    /// Set the refs of the repositories PATTERN matches that only an
    /// `admin` token may force-push or delete (non-fast-forward updates and
    /// deletions by others are refused as git's receive.denyNonFastForwards
    /// and receive.denyDeletes refuse them). Without this, a repository
    /// protects HEAD's branch and refs/tags/*. The newest `protect` whose
    /// pattern matches decides; none listed: nothing protected there.
    Protect {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `org/project`, `org/*` or `*`.
        pattern: String,
        /// `HEAD` (the branch HEAD names), `refs/heads/main`, `refs/heads/release/*`, `refs/tags/*`.
        refs: Vec<String>,
    },
    /// Remove a `protect` (its repositories go back to the default: HEAD's
    /// branch and refs/tags/*).
    Unprotect {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The pattern as it was protected.
        pattern: String,
    },
    /// Hide ref namespaces of the repositories PATTERN matches, as git's
    /// transfer.hideRefs: their refs are in no advertisement (fetch, push)
    /// and a push to one is refused ("deny updating a hidden ref"); a
    /// hidden tip can still be fetched by its id. Adds to the server's
    /// --hide-refs and to every other entry that matches; replaces this
    /// pattern's entry; no PREFIX removes it. Servers see the change within
    /// --access-refresh seconds.
    HideRefs {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `org/project`, `org/*` or `*`.
        pattern: String,
        /// `refs/changes`, `refs/pull`, `refs/merge-requests`, `refs/keep-around`.
        prefixes: Vec<String>,
    },
    /// Take back an `allow-anonymous-read`.
    DenyAnonymousRead {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The pattern as it was allowed.
        pattern: String,
    },
}

/// Runs a token command; returns the exit code.
pub fn token_main(args: TokenArgs) -> i32 {
    match args.command {
        TokenCommand::Create {
            store,
            create: asked,
            name,
            grants,
            expires,
        } => run(
            &store,
            IfMissing::creating(asked.create_store, &store),
            |s| create(s, &name, &grants, expires.as_deref()),
        ),
        TokenCommand::List { store, json } => run(&store, IfMissing::Refuse, |s| {
            let (doc, _) = gitstow_access::load(s.as_ref())?;
            if json {
                println!("{}", tokens_json(&doc));
            } else {
                print_tokens(&doc);
            }
            Ok(())
        }),
        TokenCommand::Revoke { store, name, force } => run(&store, IfMissing::Refuse, |s| {
            let removed = gitstow_access::update(s, |doc| {
                let last = doc.tokens.len() == 1 && doc.tokens[0].name == name;
                if last && !force {
                    return Err(gitstow_access::Error::Invalid(format!(
                        "{name:?} is the last token: without it every server that enforces \
                         access control refuses everything but anonymous read; pass --force \
                         to revoke it anyway"
                    )));
                }
                Ok(doc.revoke(&name))
            })?;
            if !removed {
                return Err(format!("no token named {name:?}").into());
            }
            println!("revoked token '{name}'");
            Ok(())
        }),
    }
}

/// Runs an access command; returns the exit code.
pub fn access_main(args: AccessArgs) -> i32 {
    match args.command {
        AccessCommand::Show { store } => run(&store, IfMissing::Refuse, |s| {
            let (doc, _) = gitstow_access::load(s.as_ref())?;
            if doc.enforced() {
                println!("access control: on ({} tokens)", doc.tokens.len());
            } else {
                println!(
                    "access control: off (no token exists: `gitstow serve` allows everything, \
                     and refuses to listen beyond loopback without --insecure-no-auth)"
                );
            }
            print_tokens(&doc);
            for p in &doc.protected {
                println!(
                    "protected in {}: {}",
                    p.repos,
                    if p.refs.is_empty() {
                        "nothing".into()
                    } else {
                        p.refs.join(" ")
                    }
                );
            }
            println!(
                "protected in every other repository (the default): {}",
                gitstow_access::DEFAULT_PROTECTED.join(" ")
            );
            for k in doc.keys(None) {
                println!("ssh key {} of {}: {}", k.fingerprint, k.token, k.title);
            }
            for h in &doc.hidden {
                println!("hidden in {}: {}", h.repos, h.refs.join(" "));
            }
            if doc.anonymous_read.is_empty() {
                println!("anonymous read: none");
            } else {
                let list: Vec<&str> = doc.anonymous_read.iter().map(RepoPattern::as_str).collect();
                println!("anonymous read: {}", list.join(", "));
            }
            Ok(())
        }),
        AccessCommand::AllowAnonymousRead { store, pattern } => {
            run(&store, IfMissing::Refuse, |s| {
                let p = RepoPattern::parse(&pattern)?;
                gitstow_access::update(s, |doc| {
                    if !doc.anonymous_read.contains(&p) {
                        doc.anonymous_read.push(p.clone());
                    }
                    Ok(())
                })?;
                println!("anyone may now read {p}");
                Ok(())
            })
        }
        AccessCommand::Protect {
            store,
            pattern,
            refs,
        } => run(&store, IfMissing::Refuse, |s| {
            let p = RepoPattern::parse(&pattern)?;
            gitstow_access::update(s, |doc| doc.protect(p.clone(), refs.clone()))?;
            if refs.is_empty() {
                println!("{p}: no ref protected");
            } else {
                println!("{p}: only admin may rewrite or delete {}", refs.join(" "));
            }
            Ok(())
        }),
        AccessCommand::HideRefs {
            store,
            pattern,
            prefixes,
        } => run(&store, IfMissing::Refuse, |s| {
            let p = RepoPattern::parse(&pattern)?;
            let replaced =
                gitstow_access::update(s, |doc| doc.hide_refs(p.clone(), prefixes.clone()))?;
            match (prefixes.is_empty(), replaced) {
                (true, false) => return Err(format!("{pattern:?} has no hide-refs entry").into()),
                (true, true) => println!("{p}: no ref namespace hidden by this entry"),
                (false, _) => println!("{p}: hidden {}", prefixes.join(" ")),
            }
            Ok(())
        }),
        AccessCommand::Unprotect { store, pattern } => run(&store, IfMissing::Refuse, |s| {
            let removed = gitstow_access::update(s, |doc| {
                let before = doc.protected.len();
                doc.protected.retain(|p| p.repos.as_str() != pattern);
                Ok(before != doc.protected.len())
            })?;
            if !removed {
                return Err(format!("{pattern:?} has no protect entry").into());
            }
            println!(
                "{pattern}: back to the default ({})",
                gitstow_access::DEFAULT_PROTECTED.join(" ")
            );
            Ok(())
        }),
        AccessCommand::DenyAnonymousRead { store, pattern } => {
            run(&store, IfMissing::Refuse, |s| {
                let removed = gitstow_access::update(s, |doc| {
                    let before = doc.anonymous_read.len();
                    doc.anonymous_read.retain(|p| p.as_str() != pattern);
                    Ok(before != doc.anonymous_read.len())
                })?;
                if !removed {
                    return Err(format!("{pattern:?} was not allowed anonymous read").into());
                }
                println!("anonymous read of {pattern} taken back");
                Ok(())
            })
        }
    }
}

fn create(
    store: &std::sync::Arc<dyn gitstow_store::ObjectStore>,
    name: &str,
    grants: &[String],
    expires: Option<&str>,
) -> Result<(), Failure> {
    let grants: Vec<Grant> = grants
        .iter()
        .map(|g| Grant::parse(g))
        .collect::<Result<_, _>>()?;
    let now = now_secs();
    let expires = match expires {
        None => None,
        Some(text) => {
            let d = humantime::parse_duration(text)
                .map_err(|e| format!("--expires {text:?}: {e} (e.g. 90d, 12h, 30min)"))?;
            Some(now.saturating_add(d.as_secs().max(1)))
        }
    };
    let secret = gitstow_access::update(store, |doc| {
        doc.add_token(name, grants.clone(), now, expires)
    })?;
    let what: Vec<String> = grants.iter().map(Grant::to_string).collect();
    println!(
        "created token '{name}' ({}; {}); its secret, shown only now:",
        what.join(", "),
        match expires {
            Some(e) => format!("expires {}", date(e)),
            None => "does not expire".into(),
        }
    );
    println!("{secret}");
    Ok(())
}

fn print_tokens(doc: &AccessDoc) {
    if doc.tokens.is_empty() {
        println!("no tokens");
        return;
    }
    let now = now_secs();
    println!("{:<24} {:<21} {:<28} GRANTS", "NAME", "CREATED", "EXPIRES");
    for t in &doc.tokens {
        println!(
            "{:<24} {:<21} {:<28} {}",
            t.name,
            date(t.created),
            expiry(t, now),
            t.grants
                .iter()
                .map(Grant::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// `token list --json`: the tokens as a JSON array.
fn tokens_json(doc: &AccessDoc) -> serde_json::Value {
    let now = now_secs();
    doc.tokens
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "created": date(t.created),
                "expires": t.expires.map(date),
                "expired": t.expires.is_some_and(|e| e <= now),
                "grants": t.grants.iter().map(Grant::to_string).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn expiry(t: &StoredToken, now: u64) -> String {
    match t.expires {
        None => "never".into(),
        Some(e) if e <= now => format!("{} (expired)", date(e)),
        Some(e) => date(e),
    }
}

/// `2026-12-02T03:16:42Z`.
pub fn date(secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
