//! The `gitstow` command line (clap).

use std::net::SocketAddr;

use clap::{Parser, Subcommand, ValueEnum};

use crate::app::{self, Config};

/// gitstow: a git smart-HTTP server that keeps repositories in object storage.
#[derive(Debug, Parser)]
#[command(name = "gitstow", version, about)]
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
    /// Serve repositories over smart HTTP.
    Serve(ServeArgs),
}

/// Arguments of `gitstow serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Where repositories live: file://PATH (the embedded local store) or a plain path.
    #[arg(long, default_value = "file://./gitstow-data")]
    pub store: String,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Refuse pushes to repositories that do not exist yet (404) instead of creating them.
    #[arg(long)]
    pub no_auto_create: bool,
    /// Largest push request body (commands + pack) in bytes.
    #[arg(long, default_value_t = 8 << 30)]
    pub max_pack_size: u64,
    /// Largest single object in a push, in bytes.
    #[arg(long, default_value_t = 2 << 30)]
    pub max_object_size: u64,
    /// Resolver threads per push (default: the number of cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Directory for spool and staging files (default: the system temp dir).
    #[arg(long)]
    pub tmp_dir: Option<std::path::PathBuf>,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("GITSTOW_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Entry point of the binary; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
    }
}

fn serve(args: ServeArgs) -> i32 {
    init_logging(args.log_format);
    let store = match gitstow_store::open(&args.store) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gitstow: cannot open store {}: {e}", args.store);
            return 2;
        }
    };
    let mut receive = gitstow_receive::Options {
        max_object_bytes: args.max_object_size,
        staging_dir: args.tmp_dir.clone(),
        ..Default::default()
    };
    if let Some(t) = args.threads {
        receive.threads = t.max(1);
    }
    let config = Config {
        auto_create: !args.no_auto_create,
        max_push_bytes: args.max_pack_size,
        max_fetch_request_bytes: 64 << 20,
        receive,
        upload: gitstow_upload::Options::default(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gitstow: cannot start the runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("gitstow: cannot listen on {}: {e}", args.listen);
                return 1;
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        {
            use std::io::Write;
            let mut stdout = std::io::stdout();
            let _ = writeln!(stdout, "gitstow listening on http://{addr}");
            let _ = stdout.flush();
        }
        tracing::info!(%addr, store = %args.store, "serving");
        let app = app::App::new(store, config);
        let served = axum::serve(listener, app::router(app))
            .with_graceful_shutdown(shutdown_signal())
            .await;
        match served {
            Ok(()) => {
                tracing::info!("shut down");
                0
            }
            Err(e) => {
                eprintln!("gitstow: server error: {e}");
                1
            }
        }
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested: finishing in-flight requests");
}
