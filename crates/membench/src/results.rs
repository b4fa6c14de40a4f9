//! What a run measured: the [`Summary`] written to `summary.json` (and
//! rendered into `report.md`), plus the samples in a [`RunResult`].
//!
//! Memory figures are kB (KiB, as `/proc` prints them) unless the name says
//! bytes; times are seconds unless the name says ms.

use serde::{Deserialize, Serialize};

use crate::git::PackStats;
use crate::sampler::{ProfileRecord, Sample, SamplerStats};

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The figures of `summary.json`.
    pub summary: Summary,
    /// Every sample, in time order (`samples.csv`).
    pub samples: Vec<Sample>,
}

/// The machine and tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Cores available to this process.
    pub cores: usize,
    /// `MemTotal` of `/proc/meminfo`, kB.
    pub mem_total_kb: u64,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// `git --version`.
    pub git_version: String,
    /// `gitstow --version` of the daemon binary.
    pub daemon_version: String,
}

/// What was pushed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// The `--repo` path or URL.
    pub repo: String,
    /// `--mirror`, or the refspecs given.
    pub push: String,
    /// Size of what each push sends.
    pub pack: PackStats,
}

/// How the daemon ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonInfo {
    /// The binary.
    pub binary: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its base URL.
    pub url: String,
    /// Its process id.
    pub pid: u32,
    /// How it stopped.
    pub exit: Option<String>,
}

/// The run plan's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Idle baseline length, s.
    pub idle_secs: f64,
    /// Sequential pushes.
    pub seq_pushes: usize,
    /// Pushes of one small commit, measuring the fixed cost of a push.
    #[serde(default)]
    pub fixed_pushes: usize,
    /// Gap after each push or step, s.
    pub gap_secs: f64,
    /// Concurrency levels.
    pub conc_steps: Vec<usize>,
    /// Settle time at the end, s.
    pub settle_secs: f64,
    /// Sampling interval, ms.
    pub sample_interval_ms: u64,
    /// RSS growth that triggers a heap profile (fraction).
    pub peak_growth: f64,
    /// Whether heap profiles were asked of the daemon.
    pub heap_profiles: bool,
}

/// The daemon at rest before any push: medians of the idle samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Samples in the idle phase.
    pub samples: usize,
    /// `VmRSS`, kB.
    pub vm_rss_kb: u64,
    /// `RssAnon`, kB.
    pub rss_anon_kb: u64,
    /// `RssFile`, kB.
    pub rss_file_kb: u64,
    /// `Pss`, kB.
    pub pss_kb: Option<u64>,
    /// `gitstow_jemalloc_allocated_bytes`, bytes.
    pub jemalloc_allocated_bytes: Option<u64>,
}

/// Memory and CPU over one measured span (a push, or a concurrency step).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Start, ms since the daemon was ready.
    pub start_ms: u64,
    /// Wall time until the (last) push ended, s.
    pub wall_s: f64,
    /// Daemon CPU time (user + system) over the span, s.
    pub cpu_s: f64,
    /// `VmHWM` right after the span: the kernel's exact peak RSS since the
    /// reset before it (or since start if the reset failed), kB.
    pub vm_hwm_peak_kb: u64,
    /// Highest sampled `RssAnon`, kB.
    pub rss_anon_peak_kb: u64,
    /// Highest sampled `RssFile`, kB.
    pub rss_file_peak_kb: u64,
    /// `rss_anon_peak_kb` minus the idle `RssAnon`, kB (may be negative).
    pub rise_anon_kb: i64,
    /// `vm_hwm_peak_kb` minus the idle `VmRSS`, kB (may be negative): the
    /// kernel's exact peak, what the memory targets check.
    #[serde(default)]
    pub rise_hwm_kb: i64,
    /// `rss_anon_peak_kb` minus `RssAnon` at the span's start, kB: the
    /// span's own rise, without what earlier pushes left behind.
    pub rise_from_start_kb: i64,
    /// `VmRSS` one gap after the span ended, kB.
    pub retained_rss_kb: Option<u64>,
    /// `RssAnon` one gap after the span ended, kB.
    pub retained_anon_kb: Option<u64>,
    /// Growth of `gitstow_allocated_bytes_total` over the span, bytes.
    pub allocated_bytes: Option<u64>,
    /// Growth of `gitstow_received_bytes_total` over the span, bytes.
    pub received_bytes: Option<u64>,
    /// Highest sampled `gitstow_jemalloc_allocated_bytes`, bytes.
    pub jemalloc_allocated_peak_bytes: Option<u64>,
    /// Highest sampled `gitstow_pushes_in_flight`: how many pushes the daemon
    /// resolved at once (its `--max-concurrent-pushes` queues the rest).
    #[serde(default)]
    pub pushes_in_flight_peak: Option<u64>,
    /// Samples taken during the span.
    pub samples: usize,
    /// Whether `clear_refs` reset the peak before the span.
    pub hwm_reset: bool,
}

/// One push of the sequential phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeqPush {
    /// 1-based.
    pub index: usize,
    /// Repository name (`<uuid>.git`).
    pub repo: String,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// Its figures.
    pub span: Span,
    /// The work the push left the daemon (the maintenance pass it queued),
    /// measured from the push's end until the daemon is all but idle:
    /// so that no push is charged with its predecessor's maintenance.
    /// `None` for the small pushes, and in summaries from before it.
    #[serde(default)]
    pub deferred: Option<Span>,
    /// Pack bytes per second of wall time, MB/s (10^6 B).
    pub pack_mb_per_s: f64,
    /// Objects per second of wall time.
    pub objects_per_s: f64,
}

/// One step of the concurrency sweep: K pushes started at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConcStep {
    /// Pushes started at once.
    pub k: usize,
    /// Their repositories.
    pub repos: Vec<String>,
    /// Wall time of each push, s.
    pub push_walls_s: Vec<f64>,
    /// The failures, if any.
    pub errors: Vec<String>,
    /// Figures of the whole step.
    pub span: Span,
    /// `rise_hwm_kb / k`, kB.
    pub rise_per_push_kb: f64,
    /// Rise at this K over rise at K=1 (`None` without a K=1 step, or when that rise is ≤ 0).
    pub rise_ratio_to_k1: Option<f64>,
}

/// A phase's time span, for the plot.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpan {
    /// `idle`, `seq`, `conc` or `settle`.
    pub name: String,
    /// Start, ms since the daemon was ready.
    pub start_ms: u64,
    /// End, ms.
    pub end_ms: u64,
}

/// A check of the measured figures against a threshold, evaluated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// A stable number (2: peak memory of a push, 3: bytes allocated per
    /// pack byte, 5: memory under concurrent pushes).
    pub id: u32,
    /// What it measures, in words.
    #[serde(default)]
    pub name: String,
    /// Why the threshold is what it is.
    #[serde(default)]
    pub why: String,
    /// What it says.
    pub rule: String,
    /// `Some(true)` PASS, `Some(false)` FAIL, `None` not evaluated.
    pub pass: Option<bool>,
    /// The figures (or why it was not evaluated).
    pub detail: String,
}

/// `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// UTC time the run started (`YYYY-MM-DDTHH:MM:SSZ`).
    pub started: String,
    /// The machine.
    pub machine: Machine,
    /// The input.
    pub input: Input,
    /// The daemon.
    pub daemon: DaemonInfo,
    /// The plan's settings.
    pub settings: Settings,
    /// Idle baseline.
    pub idle: Baseline,
    /// Pushes of one small commit (what every push costs whatever its
    /// size), made before the sequential pushes.
    #[serde(default)]
    pub fixed: Vec<SeqPush>,
    /// What each of the `fixed` pushes sends.
    #[serde(default)]
    pub fixed_pack: crate::git::PackStats,
    /// Sequential pushes.
    pub seq: Vec<SeqPush>,
    /// Concurrency sweep.
    pub conc: Vec<ConcStep>,
    /// Settle phase: `VmRSS` and `RssAnon` at its end, kB.
    pub settled_rss_kb: Option<u64>,
    /// `RssAnon` at the end of the settle phase, kB.
    pub settled_anon_kb: Option<u64>,
    /// Phases in time order.
    pub phases: Vec<PhaseSpan>,
    /// Targets evaluated.
    pub targets: Vec<Target>,
    /// Heap profiles asked for.
    pub profiles: Vec<ProfileRecord>,
    /// Sampler counters.
    pub sampler: SamplerStats,
    /// `--note` texts.
    pub notes: Vec<String>,
    /// Failures (failed pushes, a daemon that died): non-empty means the run failed.
    pub failures: Vec<String>,
}

impl Summary {
    /// Reads a `summary.json`.
    pub fn from_json(text: &str) -> Result<Summary, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The median of `values` (the lower middle one for an even count).
pub fn median<T: Ord + Copy>(mut values: Vec<T>) -> Option<T> {
    values.sort_unstable();
    values.get(values.len().saturating_sub(1) / 2).copied()
}

impl Baseline {
    /// Medians over the samples of phase `idle`.
    pub fn from_samples(samples: &[Sample]) -> Baseline {
        let idle: Vec<&Sample> = samples.iter().filter(|s| s.phase == "idle").collect();
        let med =
            |f: &dyn Fn(&Sample) -> Option<u64>| median(idle.iter().filter_map(|s| f(s)).collect());
        Baseline {
            samples: idle.len(),
            vm_rss_kb: med(&|s| Some(s.vm_rss_kb)).unwrap_or(0),
            rss_anon_kb: med(&|s| Some(s.rss_anon_kb)).unwrap_or(0),
            rss_file_kb: med(&|s| Some(s.rss_file_kb)).unwrap_or(0),
            pss_kb: med(&|s| s.pss_kb),
            jemalloc_allocated_bytes: med(&|s| s.metrics.and_then(|m| m.jemalloc_allocated_bytes)),
        }
    }
}
