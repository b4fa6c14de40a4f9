//! `membench`: the command line of [`gitstow_membench::run`].

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::Parser;

/// Measures what a push costs a gitstow daemon in memory: starts `gitstow serve`,
/// pushes a repository into it with the real git (idle baseline, sequential pushes,
/// a concurrency sweep, settle) while sampling /proc/PID and /metrics, and writes
/// report.md, samples.csv, summary.json, plot.svg, heap profiles, daemon.log and repos.txt.
#[derive(Debug, Parser)]
#[command(name = "membench", version)]
struct Cli {
    /// The repository to push: a path or URL (copied once: `git clone --mirror`, or with
    /// --refspec a fetch of just the refs those read).
    #[arg(long)]
    repo: String,
    /// Push these refspecs instead of `--mirror` (repeat the flag for several).
    #[arg(long = "refspec", value_name = "REFSPEC")]
    refspecs: Vec<String>,
    /// Output directory [default: membench-out/<UTC timestamp>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// The gitstow binary [default: `gitstow` next to membench, else on PATH].
    #[arg(long, value_name = "PATH")]
    daemon_binary: Option<PathBuf>,
    /// The daemon's --store: file://PATH or s3://BUCKET[/PREFIX] (S3 credentials from the
    /// environment) [default: file://<work dir>/store].
    #[arg(long)]
    store: Option<String>,
    /// An extra `gitstow serve` argument (repeat for several, e.g. --daemon-arg=--threads=2).
    #[arg(long = "daemon-arg", value_name = "ARG", allow_hyphen_values = true)]
    daemon_args: Vec<String>,
    /// Do not start the daemon with --heap-profiling nor take heap profiles.
    #[arg(long)]
    no_heap_profiles: bool,
    /// Where the local copy of the repository goes [default: a temp dir, removed at the end].
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Idle baseline before the first push, in seconds.
    #[arg(long, default_value_t = 3.0)]
    idle_secs: f64,
    /// Pushes made one after another.
    #[arg(long, default_value_t = 3)]
    seq_pushes: usize,
    /// Pushes of one small commit made first, each into a new repository:
    /// what a push costs whatever its size (the report subtracts it to
    /// give the cost per pack byte); 0 skips them.
    #[arg(long, default_value_t = 3)]
    fixed_pushes: usize,
    /// Idle gap after each push and each concurrency step, in seconds (the retained memory
    /// is read at its end).
    #[arg(long, default_value_t = 2.0)]
    gap_secs: f64,
    /// Concurrency sweep: for each K, K pushes started at once, each into a new repository.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    conc_steps: Vec<usize>,
    /// Idle time after the last push, in seconds.
    #[arg(long, default_value_t = 5.0)]
    settle_secs: f64,
    /// Sampling interval, in milliseconds.
    #[arg(long, default_value_t = 250)]
    sample_interval: u64,
    /// Take a heap profile when RSS exceeds the last profiled high by this fraction.
    #[arg(long, default_value_t = 0.05)]
    peak_growth: f64,
    /// A note for the report (repeat for several), e.g. that the spool is memory-mapped.
    #[arg(long = "note", value_name = "TEXT")]
    notes: Vec<String>,
}

fn secs(s: f64, flag: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("{flag} must be a number of seconds ≥ 0"))
}

fn config(cli: Cli) -> Result<gitstow_membench::Config, String> {
    let out = cli.out.unwrap_or_else(|| {
        let (stamp, _) = gitstow_membench::utc_timestamp(SystemTime::now());
        PathBuf::from("membench-out").join(stamp)
    });
    let mut cfg = gitstow_membench::Config::new(cli.repo, out);
    cfg.refspecs = cli.refspecs;
    cfg.daemon_binary = cli.daemon_binary;
    cfg.store = cli.store;
    cfg.daemon_args = cli.daemon_args;
    cfg.heap_profiles = !cli.no_heap_profiles;
    cfg.work_dir = cli.work_dir;
    cfg.idle = secs(cli.idle_secs, "--idle-secs")?;
    cfg.seq_pushes = cli.seq_pushes;
    cfg.fixed_pushes = cli.fixed_pushes;
    cfg.gap = secs(cli.gap_secs, "--gap-secs")?;
    cfg.conc_steps = cli.conc_steps;
    cfg.settle = secs(cli.settle_secs, "--settle-secs")?;
    cfg.sample_interval = Duration::from_millis(cli.sample_interval);
    cfg.peak_growth = cli.peak_growth;
    cfg.notes = cli.notes;
    Ok(cfg)
}

fn main() {
    let cfg = match config(Cli::parse()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("membench: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = gitstow_membench::run(&cfg) {
        eprintln!("membench: {e:#}");
        std::process::exit(1);
    }
}
