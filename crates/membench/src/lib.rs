//! membench: what a push costs gitstow in memory, measured from outside.
//!
//! [`run`] starts `gitstow serve` on a store of its own, makes one local
//! copy of a source repository, and pushes it with the real `git` into fresh
//! repositories: an idle baseline, pushes of one small commit (the fixed
//! cost of a push), sequential pushes, a concurrency sweep, a settle
//! period. A background sampler reads the daemon's `/proc` figures
//! (proc(5)) and its `/metrics` every interval; heap profiles are taken on
//! new RSS highs. The results go to an output directory: `report.md`,
//! `samples.csv`, `summary.json`, `plot.svg`, `profiles/`, `daemon.log`,
//! `repos.txt`.
#![deny(missing_docs)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use crate::results::Span;

pub mod daemon;
pub mod git;
pub mod phases;
pub mod plot;
pub mod procfs;
pub mod prom;
pub mod report;
pub mod results;
pub mod sampler;
pub mod scrape;
pub mod split;

pub use results::{RunResult, Summary};

/// What to measure and where to write it. [`Config::new`] gives the
/// defaults of the command line.
#[derive(Debug, Clone)]
pub struct Config {
    /// The repository to push: a path or URL (`--repo`).
    pub repo: String,
    /// Output directory (`--out`); created if missing.
    pub out_dir: PathBuf,
    /// The `gitstow` binary; `None`: next to this executable, else on `PATH`.
    pub daemon_binary: Option<PathBuf>,
    /// `--store` of the daemon; `None`: `file://WORK/store` in the work dir.
    pub store: Option<String>,
    /// Extra `gitstow serve` arguments (`--daemon-arg`).
    pub daemon_args: Vec<String>,
    /// Start the daemon with `--heap-profiling` and take heap profiles.
    pub heap_profiles: bool,
    /// Refspecs to push; empty: `git push --mirror`.
    pub refspecs: Vec<String>,
    /// Where the local copy (and default store) go; `None`: a temp dir.
    pub work_dir: Option<PathBuf>,
    /// Idle baseline length.
    pub idle: Duration,
    /// Sequential pushes.
    pub seq_pushes: usize,
    /// Pushes of one small commit before the sequential pushes: the fixed
    /// cost of a push (request, state, buffers), told apart from what grows
    /// with the pack.
    pub fixed_pushes: usize,
    /// Idle gap after each push or step (the retained memory is read at its end).
    pub gap: Duration,
    /// Concurrency steps: K pushes started at once.
    pub conc_steps: Vec<usize>,
    /// Settle time at the end.
    pub settle: Duration,
    /// Sampling interval.
    pub sample_interval: Duration,
    /// RSS growth over the last profiled high that triggers a heap profile (fraction).
    pub peak_growth: f64,
    /// Notes for the report (`--note`).
    pub notes: Vec<String>,
}

impl Config {
    /// The command line's defaults for pushing `repo`, writing to `out_dir`.
    pub fn new(repo: impl Into<String>, out_dir: impl Into<PathBuf>) -> Config {
        Config {
            repo: repo.into(),
            out_dir: out_dir.into(),
            daemon_binary: None,
            store: None,
            daemon_args: Vec::new(),
            heap_profiles: true,
            refspecs: Vec::new(),
            work_dir: None,
            idle: Duration::from_secs(3),
            seq_pushes: 3,
            fixed_pushes: 3,
            gap: Duration::from_secs(2),
            conc_steps: vec![1, 2, 4, 8],
            settle: Duration::from_secs(5),
            sample_interval: Duration::from_millis(250),
            peak_growth: 0.05,
            notes: Vec::new(),
        }
    }
}

/// UTC date and time of `t`: (`YYYYMMDDTHHMMSSZ`, `YYYY-MM-DDTHH:MM:SSZ`).
pub fn utc_timestamp(t: SystemTime) -> (String, String) {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // civil_from_days (H. Hinnant): days since 1970-01-01 → y-m-d
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
    (
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z"),
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z"),
    )
}

/// Fills the figures that need the idle baseline: rises, rise per push,
/// ratios to K=1; then evaluates the targets.
pub fn derive(summary: &mut Summary) {
    let idle = summary.idle.rss_anon_kb as i64;
    let idle_rss = summary.idle.vm_rss_kb as i64;
    let rises = |span: &mut Span| {
        span.rise_anon_kb = span.rss_anon_peak_kb as i64 - idle;
        span.rise_hwm_kb = span.vm_hwm_peak_kb as i64 - idle_rss;
    };
    for p in summary.fixed.iter_mut().chain(&mut summary.seq) {
        rises(&mut p.span);
        if let Some(d) = &mut p.deferred {
            rises(d);
        }
    }
    for c in &mut summary.conc {
        rises(&mut c.span);
        c.rise_per_push_kb = c.span.rise_hwm_kb as f64 / c.k.max(1) as f64;
    }
    let k1 = summary
        .conc
        .iter()
        .find(|c| c.k == 1 && c.errors.is_empty())
        .map(|c| c.span.rise_hwm_kb);
    for c in &mut summary.conc {
        c.rise_ratio_to_k1 = k1
            .filter(|&r| r > 0)
            .map(|r| c.span.rise_hwm_kb as f64 / r as f64);
    }
    summary.targets = report::evaluate_targets(summary);
}

fn check(cfg: &Config) -> Result<()> {
    if cfg.sample_interval.is_zero() {
        bail!("the sample interval must be above 0");
    }
    if cfg.conc_steps.contains(&0) {
        bail!("a concurrency step must be at least 1 push");
    }
    if cfg.peak_growth.is_nan() || cfg.peak_growth < 0.0 {
        bail!("--peak-growth must be a fraction ≥ 0");
    }
    if cfg.seq_pushes == 0 && cfg.conc_steps.is_empty() {
        bail!("nothing to measure: no sequential pushes and no concurrency steps");
    }
    Ok(())
}

/// Runs the whole benchmark and writes its output directory.
///
/// # Errors
///
/// Setup failures (no `git`, a daemon that does not start, a repository
/// that cannot be copied) before anything is measured; and, after the
/// report is written, any failed push or a daemon that died.
pub fn run(cfg: &Config) -> Result<RunResult> {
    check(cfg)?;
    let wall = Instant::now();
    let note = |msg: &str| eprintln!("[{:>7.1}s] {msg}", wall.elapsed().as_secs_f64());
    let out = &cfg.out_dir;
    fs::create_dir_all(out.join("profiles"))
        .with_context(|| format!("creating {}", out.display()))?;
    let (_tmp, work) = match &cfg.work_dir {
        Some(dir) => {
            fs::create_dir_all(dir)?;
            (None, dir.clone())
        }
        None => {
            let tmp = tempfile::Builder::new().prefix("membench-").tempdir()?;
            let path = tmp.path().to_owned();
            (Some(tmp), path)
        }
    };
    let binary = cfg
        .daemon_binary
        .clone()
        .unwrap_or_else(daemon::default_binary);
    let mut summary = Summary {
        started: utc_timestamp(SystemTime::now()).1,
        machine: results::Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mem_total_kb: procfs::mem_total_kb().unwrap_or(0),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            git_version: git::version()?,
            daemon_version: daemon::version(&binary)?,
        },
        notes: cfg.notes.clone(),
        settings: results::Settings {
            idle_secs: cfg.idle.as_secs_f64(),
            seq_pushes: cfg.seq_pushes,
            fixed_pushes: cfg.fixed_pushes,
            gap_secs: cfg.gap.as_secs_f64(),
            conc_steps: cfg.conc_steps.clone(),
            settle_secs: cfg.settle.as_secs_f64(),
            sample_interval_ms: cfg.sample_interval.as_millis() as u64,
            peak_growth: cfg.peak_growth,
            heap_profiles: cfg.heap_profiles,
        },
        ..Summary::default()
    };

    note(&format!("copying {} into {}", cfg.repo, work.display()));
    let mirror = git::mirror_path(&work);
    git::make_mirror(&cfg.repo, &mirror, &cfg.refspecs)?;
    let pack = git::pack_stats(&mirror)?;
    summary.input = results::Input {
        repo: cfg.repo.clone(),
        push: if cfg.refspecs.is_empty() {
            "--mirror".into()
        } else {
            cfg.refspecs.join(" ")
        },
        pack,
    };
    note(&format!(
        "each push sends {} objects, {:.1} MiB of pack",
        pack.objects,
        pack.pack_bytes as f64 / 1048576.0
    ));
    let small = work.join("small");
    if cfg.fixed_pushes > 0 {
        summary.fixed_pack = git::make_small(&small)?;
    }

    let store = match &cfg.store {
        Some(store) => store.clone(),
        None => {
            // `serve` makes no local store but its default one unasked.
            std::fs::create_dir_all(work.join("store"))?;
            format!("file://{}", work.join("store").display())
        }
    };
    let log = out.join("daemon.log");
    let mut daemon =
        daemon::Daemon::start(&binary, &store, cfg.heap_profiles, &cfg.daemon_args, &log)?;
    let t0 = Instant::now();
    note(&format!(
        "daemon {} ready at {} (pid {})",
        binary.display(),
        daemon.url,
        daemon.pid
    ));
    summary.daemon = results::DaemonInfo {
        binary: binary.display().to_string(),
        args: daemon.args.clone(),
        url: daemon.url.clone(),
        pid: daemon.pid,
        exit: None,
    };
    let client = scrape::Client::new(&daemon.url);
    let sampler = sampler::Sampler::start(
        daemon.pid,
        client,
        t0,
        cfg.sample_interval,
        cfg.heap_profiles.then(|| sampler::ProfileConfig {
            dir: out.join("profiles"),
            growth: cfg.peak_growth,
        }),
    );
    let repos = fs::File::create(out.join("repos.txt"))?;
    let outcome = phases::Plan {
        cfg,
        pid: daemon.pid,
        url: daemon.url.clone(),
        sampler: &sampler,
        mirror,
        pack,
        small,
        small_pack: summary.fixed_pack,
        repos,
        started: wall,
    }
    .run();
    let (mut samples, stats, profiles) = sampler.finish();
    note("stopping the daemon");
    summary.daemon.exit = daemon.stop();
    samples.sort_by_key(|s| s.t_ms);

    summary.idle = results::Baseline::from_samples(&samples);
    summary.fixed = outcome.fixed;
    summary.seq = outcome.seq;
    summary.conc = outcome.conc;
    summary.phases = outcome.phases;
    summary.settled_rss_kb = outcome.settled.map(|s| s.0);
    summary.settled_anon_kb = outcome.settled.map(|s| s.1);
    summary.profiles = profiles;
    summary.sampler = stats;
    summary.failures = outcome.failures;
    derive(&mut summary);

    write_outputs(out, &summary, &samples)?;
    note(&format!("report: {}", out.join("report.md").display()));
    for t in &summary.targets {
        note(&format!("{} {}: {}", t.name, report::verdict(t), t.detail));
    }
    if !summary.failures.is_empty() {
        bail!(
            "{} failure(s); first: {} (report in {})",
            summary.failures.len(),
            summary.failures[0],
            out.display()
        );
    }
    Ok(RunResult { summary, samples })
}

/// Writes `report.md`, `samples.csv`, `summary.json` and `plot.svg`.
fn write_outputs(out: &Path, summary: &Summary, samples: &[sampler::Sample]) -> Result<()> {
    fs::write(out.join("report.md"), report::markdown(summary))?;
    fs::write(out.join("samples.csv"), report::csv(samples))?;
    fs::write(out.join("summary.json"), report::json(summary))?;
    let svg = plot::svg(samples, &summary.phases, 1200, 600).map_err(anyhow::Error::msg)?;
    fs::write(out.join("plot.svg"), svg)?;
    Ok(())
}
