//! The `gitstow` command line (clap).

use clap::{Parser, Subcommand, ValueEnum};

/// gitstow: a git server (smart HTTP and SSH, Git LFS over both) that keeps repositories in object storage.
#[derive(Debug, Parser)]
#[command(
    name = "gitstow",
    version,
    about,
    after_help = "\
Start here:
  gitstow serve --store file://./gitstow-data        serve on 127.0.0.1:8080
  git push http://127.0.0.1:8080/app.git main        a push creates the repository
  gitstow token create --name me --grant '*:admin'   before serving beyond loopback

Every command that reads the store takes --store and the --s3-* flags.
Environment: GITSTOW_LOG (log filter, default info), and for S3 the AWS
variables, profiles and roles (see `gitstow serve --help`).
`gitstow help COMMAND` or `gitstow COMMAND --help` for each command;
docs/ in the source covers deployment, TLS, backups and what the store
holds (docs/deployment.md, docs/operations.md)."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log line format.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve repositories over smart HTTP and, with --ssh-listen, SSH; Git LFS over both.
    #[command(
        args_override_self = true,
        after_long_help = "\
Endpoints (besides the repositories' smart-HTTP routes):
  GET /healthz   200 while the process runs (no credentials, no store access)
  GET /readyz    200 when the store answered within the last seconds; 503 while
                 shutting down or with the store down
  GET /metrics   Prometheus text (also on --metrics-listen)

Signals: SIGTERM or SIGINT start a shutdown (--drain-delay, then
--shutdown-grace for requests in flight, then exit).

Environment:
  GITSTOW_LOG            log filter (tracing's EnvFilter syntax), default info;
                         the access log is target gitstow::access
  GITSTOW_HEAP_PROFILING=1  as --heap-profiling
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN   static S3 keys
  AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE,
  AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, container and instance roles, SSO:
                         AWS's credential chain, used when no static keys are given
  AWS_REGION, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
  AWS_S3_FORCE_PATH_STYLE   defaults of the --s3-* flags

Exit status: 0 after a shutdown, 1 when the address or runtime cannot be had,
2 on a bad setting, a store that cannot be opened or TLS files that do not load."
    )]
    Serve(Box<crate::serve_cmd::ServeArgs>),
    /// Maintain repositories: merge containers, delete what is past its grace period.
    Maintain(crate::maintain_cmd::MaintainArgs),
    /// Create, list and revoke access tokens.
    Token(crate::token_cmd::TokenArgs),
    /// Attach SSH public keys to tokens; list and remove them.
    Key(crate::key_cmd::KeyArgs),
    /// Show access control; allow or deny anonymous read; protect refs.
    Access(crate::token_cmd::AccessArgs),
    /// Announce pushes to HTTP receivers (signed JSON events).
    Webhook(crate::webhook_cmd::WebhookArgs),
    /// List, create, delete repositories; set HEAD.
    Repo(crate::repo_cmd::RepoArgs),
    /// Take a repository in from another git server and hand it on (pull and push mirrors).
    Mirror(crate::mirror_cmd::MirrorArgs),
    /// Check stored repositories: containers, indexes, objects, reachability.
    #[command(
        after_help = "Exit status: 0 sound, 1 damage found (or a check that failed), 2 the store cannot be opened."
    )]
    Fsck(crate::repo_cmd::FsckArgs),
}

/// A size: plain bytes (`1048576`) or a number with a unit: `KiB`, `MiB`,
/// `GiB`, `TiB` (powers of 1024; `K`, `M`, `G`, `T` too) or `KB`, `MB`,
/// `GB`, `TB` (powers of 1000); case-insensitive, a space allowed.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim().to_ascii_lowercase());
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit (want bytes, KiB, MiB, GiB, KB, MB, GB)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?}: not a size (e.g. 2GiB, 500MB, 1048576)"))?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("{text:?}: out of range"));
    }
    Ok(bytes as u64)
}

/// Sets up tracing on stderr in `format` (`GITSTOW_LOG` filters, default `info`).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GITSTOW_LOG")
        // The AWS SDK's INFO lines (credentials loaded, with the key id)
        // are noise in a server's log.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,aws_config=warn"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Entry point of the binary; returns the process exit code.
pub fn main() -> i32 {
    gitstow_http::alloc::tune_libc_malloc();
    let args = match crate::config_file::expand(std::env::args_os().collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("gitstow: {e}");
            return 2;
        }
    };
    let cli = Cli::parse_from(args);
    if !matches!(cli.command, Command::Serve(_)) {
        // The admin commands print listings: `gitstow repo list | head`
        // ends them quietly, as SIGPIPE ends other Unix tools (Rust
        // ignores it, and a print to a closed pipe would panic).
        // SAFETY: at start, before any thread exists; SIG_DFL is a valid
        // disposition for SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Command::Serve(args) => crate::serve_cmd::main(*args),
        Command::Maintain(args) => crate::maintain_cmd::main(args),
        Command::Token(args) => crate::token_cmd::token_main(args),
        Command::Key(args) => crate::key_cmd::key_main(args),
        Command::Access(args) => crate::token_cmd::access_main(args),
        Command::Webhook(args) => crate::webhook_cmd::webhook_main(args),
        Command::Repo(args) => crate::repo_cmd::repo_main(args),
        Command::Mirror(args) => crate::mirror_cmd::mirror_main(args),
        Command::Fsck(args) => crate::repo_cmd::fsck_main(args),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_take_units() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("2 gib"), Ok(2 << 30));
        assert_eq!(parse_bytes("500MB"), Ok(500_000_000));
        assert_eq!(parse_bytes("1.5K"), Ok(1536));
        assert!(parse_bytes("2 GiBs").is_err());
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("-1").is_err());
    }

    #[test]
    fn every_size_flag_of_serve_takes_units() {
        use clap::Parser;
        let cli = super::Cli::try_parse_from([
            "gitstow",
            "serve",
            "--state-cache-size",
            "2GiB",
            "--cache-size",
            "500MB",
            "--max-pack-size",
            "1GiB",
        ])
        .unwrap();
        let super::Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.state_cache_size, 2 << 30);
        assert_eq!(s.cache_size, 500_000_000);
        assert_eq!(s.max_pack_size, 1 << 30);
    }
}
