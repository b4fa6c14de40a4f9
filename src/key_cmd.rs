//! `gitstow key`: SSH public keys attached to access tokens
//! ([`gitstow_access::ssh_key`]). Like the token commands, each reads the
//! access document and writes it back by compare-and-swap; servers see the
//! change within `serve --access-refresh`.

use std::time::{SystemTime, UNIX_EPOCH};

use clap::Subcommand;

use crate::admin::{run, Failure, IfMissing};
use crate::store_open::StoreArgs;

/// `gitstow key …`.
#[derive(Debug, clap::Args)]
pub struct KeyArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: KeyCommand,
}

/// Key commands.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Attach an OpenSSH public key to a token: over SSH the key then has
    /// exactly the token's grants and protected-ref rights, and its name
    /// in the logs; revoking the token removes its keys. ed25519, ECDSA
    /// and RSA (at least 2048 bits) keys; not DSA. A key belongs to one
    /// token.
    Add {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// The token whose rights the key gets.
        #[arg(long)]
        token: String,
        /// A name for the key in `key list` (default: the key's comment).
        #[arg(long)]
        title: Option<String>,
        /// The public key file (`~/.ssh/id_ed25519.pub`), or `-` for
        /// standard input.
        public_key_file: String,
    },
    /// List keys: `FINGERPRINT TOKEN TITLE`, the fingerprint as
    /// `ssh-keygen -lf` prints it.
    List {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// Only the keys of this token.
        #[arg(long)]
        token: Option<String>,
        /// One JSON array on stdout: `[{"fingerprint", "token", "title",
        /// "algorithm", "added"}]` (`added` in RFC 3339).
        #[arg(long)]
        json: bool,
    },
    /// Remove a key by its fingerprint (`SHA256:…`, as `key list` and
    /// `ssh-keygen -lf` print it).
    Remove {
        /// The store and its S3 settings.
        #[command(flatten)]
        store: StoreArgs,
        /// `SHA256:…`.
        fingerprint: String,
    },
}

/// Most bytes read from a public key file (one line; RSA 16,384 bits is
/// ~2.8 KB).
const MAX_KEY_FILE: u64 = 64 * 1024;

/// Runs a key command; returns the exit code.
pub fn key_main(args: KeyArgs) -> i32 {
    match args.command {
        KeyCommand::Add {
            store,
            token,
            title,
            public_key_file,
        } => run(&store, IfMissing::Refuse, |s| {
            let text = read_key_file(&public_key_file)?;
            let key = gitstow_access::parse_public_key(&text)?;
            let added = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let stored = gitstow_access::update(s, |doc| {
                doc.add_key(&token, &key, title.as_deref(), added).cloned()
            })?;
            println!(
                "added key {} ({}) to token '{}'",
                stored.fingerprint, key.algorithm, stored.token
            );
            Ok(())
        }),
        KeyCommand::List { store, token, json } => run(&store, IfMissing::Refuse, |s| {
            let (doc, _) = gitstow_access::load(s.as_ref())?;
            if let Some(t) = &token {
                if !doc.has_token(t) {
                    return Err(format!("no token named {t:?}").into());
                }
            }
            let keys: Vec<_> = doc.keys(token.as_deref()).collect();
            if json {
                let rows: Vec<serde_json::Value> = keys
                    .iter()
                    .map(|k| {
                        serde_json::json!({
                            "fingerprint": k.fingerprint,
                            "token": k.token,
                            "title": k.title,
                            "algorithm": k.public.split(' ').next().unwrap_or(""),
                            "added": crate::token_cmd::date(k.added),
                        })
                    })
                    .collect();
                println!("{}", serde_json::Value::from(rows));
            } else if keys.is_empty() {
                println!("no keys");
            } else {
                println!("{:<51} {:<24} TITLE", "FINGERPRINT", "TOKEN");
                for k in keys {
                    println!("{:<51} {:<24} {}", k.fingerprint, k.token, k.title);
                }
            }
            Ok(())
        }),
        KeyCommand::Remove { store, fingerprint } => run(&store, IfMissing::Refuse, |s| {
            let removed = gitstow_access::update(s, |doc| Ok(doc.remove_key(&fingerprint)))?;
            match removed {
                Some(k) => {
                    println!("removed key {} of token '{}'", k.fingerprint, k.token);
                    Ok(())
                }
                None => Err(format!("no key has fingerprint {fingerprint:?}").into()),
            }
        }),
    }
}

/// The text of a public key file (`-`: standard input), at most 64 KiB.
fn read_key_file(path: &str) -> Result<String, Failure> {
    use std::io::Read;
    let mut text = String::new();
    let read = if path == "-" {
        std::io::stdin()
            .take(MAX_KEY_FILE + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_KEY_FILE + 1).read_to_string(&mut text))
    };
    read.map_err(|e| format!("cannot read {path}: {e}"))?;
    if text.len() as u64 > MAX_KEY_FILE {
        return Err(format!("{path} is not a public key file (over 64 KiB)").into());
    }
    Ok(text)
}
