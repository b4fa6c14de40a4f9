//! `gitstow webhook`: the webhooks of the access document
//! ([`gitstow_access::Webhook`]); events are delivered by every server of
//! the store (see [`gitstow_hooks::deliver`]).

use clap::Subcommand;
use gitstow_access::{RepoPattern, Webhook};

use crate::cli::StoreArgs;
use crate::token_cmd::{run, Failure};

/// `gitstow webhook …`.
#[derive(Debug, clap::Args)]
pub struct WebhookArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: WebhookCommand,
}

/// Webhook commands.
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Announce the pushes to the repositories PATTERN matches: each push
    /// that lands is POSTed to URL as JSON (repository, pusher's token
    /// name, ref updates with old and new oids, push options), signed
    /// with HMAC-SHA256 of the body in `X-Gitstow-Signature-256:
    /// sha256=<hex>`, at least once (retried with backoff for about 4
    /// hours). The signing secret is printed once, as the last word of the
    /// output, unless given with --secret-file.
    Add {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// A unique name (letters, digits, '.', '_', '-').
        #[arg(long)]
        name: String,
        /// `org/project`, `org/*` or `*`.
        #[arg(long = "repo", default_value = "*")]
        pattern: String,
        /// Where events are POSTed (http:// or https://).
        #[arg(long = "url", value_name = "URL")]
        to: String,
        /// A file holding the signing secret (at least 16 bytes; a trailing
        /// newline is dropped). Default: a new random secret.
        #[arg(long)]
        secret_file: Option<std::path::PathBuf>,
    },
    /// List the webhooks (names, patterns, URLs; never secrets).
    List {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Remove a webhook by name (events not delivered yet to it are dropped).
    Remove {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The webhook's name.
        name: String,
    },
}

/// `url` without what may be a credential: the user information
/// (`user:password@`) and the query are shown as `***`.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    let path = match path.split_once('?') {
        Some((p, _)) => format!("{p}?***"),
        None => path.to_owned(),
    };
    format!("{scheme}://{host}{path}")
}

/// Runs a webhook command; returns the exit code.
pub fn webhook_main(args: WebhookArgs) -> i32 {
    match args.command {
        WebhookCommand::Add {
            store,
            name,
            pattern,
            to: url,
            secret_file,
        } => run(&store, |s| {
            let repos = RepoPattern::parse(&pattern)?;
            let (secret, generated) = match &secret_file {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| format!("--secret-file {}: {e}", path.display()))?;
                    (text.trim_end_matches(['\n', '\r']).to_owned(), false)
                }
                None => {
                    let secret = gitstow_access::new_secret()?;
                    let hex = secret
                        .strip_prefix(gitstow_access::SECRET_PREFIX)
                        .unwrap_or(&secret)
                        .to_owned();
                    (hex, true)
                }
            };
            let hook = Webhook {
                name: name.clone(),
                repos: repos.clone(),
                url: url.clone(),
                secret: secret.clone(),
            };
            gitstow_access::update(s, |doc| doc.add_webhook(hook.clone()))?;
            let shown = redact_url(&url);
            if generated {
                println!(
                    "added webhook '{name}': pushes to {repos} are POSTed to {shown}; its signing secret, shown only now:"
                );
                println!("{secret}");
            } else {
                println!("added webhook '{name}': pushes to {repos} are POSTed to {shown}");
            }
            Ok(())
        }),
        WebhookCommand::List { store } => run(&store, |s| {
            let (doc, _) = gitstow_access::load(s.as_ref())?;
            if doc.webhooks.is_empty() {
                println!("no webhooks");
                return Ok(());
            }
            println!("{:<24} {:<24} URL", "NAME", "REPOSITORIES");
            for w in &doc.webhooks {
                println!(
                    "{:<24} {:<24} {}",
                    w.name,
                    w.repos.as_str(),
                    redact_url(&w.url)
                );
            }
            Ok(())
        }),
        WebhookCommand::Remove { store, name } => run(&store, |s| {
            let removed = gitstow_access::update(s, |doc| Ok(doc.remove_webhook(&name)))?;
            if !removed {
                return Err(Failure::from(format!("no webhook named {name:?}")));
            }
            println!("removed webhook '{name}'");
            Ok(())
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(
            super::redact_url("https://u:p@ci.example:8443/hook?token=x"),
            "https://***@ci.example:8443/hook?***"
        );
        assert_eq!(
            super::redact_url("http://ci.example/hook"),
            "http://ci.example/hook"
        );
    }
}
