//! The run plan against a running daemon: `idle` baseline, `fixed` pushes
//! of one small commit, `seq` pushes one at a time, the `conc` sweep (K
//! pushes at once), `settle`. Each push or step is a measured [`Span`]: the kernel's peak is reset before it, the
//! sampler's window tracks its peaks, and the retained memory is read one
//! gap after it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::git::{self, PackStats, PushOutcome};
use crate::procfs;
use crate::results::{ConcStep, PhaseSpan, SeqPush, Span};
use crate::sampler::Sampler;
use crate::scrape::RuntimeMetrics;
use crate::Config;

/// What the plan measured (derived figures such as rises are filled in
/// later, once the idle baseline is known).
#[derive(Debug, Default)]
pub struct PlanOutcome {
    /// Pushes of one small commit.
    pub fixed: Vec<SeqPush>,
    /// Sequential pushes.
    pub seq: Vec<SeqPush>,
    /// Concurrency steps.
    pub conc: Vec<ConcStep>,
    /// Phases in time order.
    pub phases: Vec<PhaseSpan>,
    /// `VmRSS` and `RssAnon` at the end of settle, kB.
    pub settled: Option<(u64, u64)>,
    /// Failed pushes, a daemon that died.
    pub failures: Vec<String>,
    /// The daemon was gone after a failed push (the rest of the plan was skipped).
    pub daemon_died: bool,
}

/// Runs the plan; push failures are recorded, not returned. Stops early if
/// the daemon dies.
pub struct Plan<'a> {
    /// The settings.
    pub cfg: &'a Config,
    /// The daemon's pid.
    pub pid: u32,
    /// Its base URL.
    pub url: String,
    /// The sampler watching it.
    pub sampler: &'a Sampler,
    /// The local copy pushed from.
    pub mirror: PathBuf,
    /// Size of what each push sends.
    pub pack: PackStats,
    /// The repository of one small commit the `fixed` pushes send
    /// ([`git::make_small`]).
    pub small: PathBuf,
    /// Size of what each `fixed` push sends.
    pub small_pack: PackStats,
    /// `repos.txt`, written as pushes end.
    pub repos: File,
    /// When the run started (for progress lines).
    pub started: Instant,
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

impl Plan<'_> {
    fn progress(&self, msg: &str) {
        eprintln!("[{:>7.1}s] {msg}", self.started.elapsed().as_secs_f64());
    }

    fn daemon_alive(&self) -> bool {
        procfs::read_status(self.pid).is_ok_and(|s| s.vm_rss_kb.is_some())
    }

    /// Runs every phase.
    pub fn run(mut self) -> PlanOutcome {
        let mut out = PlanOutcome::default();
        self.phase(&mut out, "idle", |p, _| {
            p.sampler.set_phase("idle", "");
            std::thread::sleep(p.cfg.idle);
        });
        let plan_ok = |out: &PlanOutcome| !out.daemon_died;
        if self.cfg.fixed_pushes > 0 {
            self.phase(&mut out, "fixed", |p, out| {
                for i in 1..=p.cfg.fixed_pushes {
                    if !plan_ok(out) {
                        break;
                    }
                    let push = p.one_push(Kind::Fixed, i, out);
                    out.fixed.push(push);
                }
            });
        }
        if self.cfg.seq_pushes > 0 && plan_ok(&out) {
            self.phase(&mut out, "seq", |p, out| {
                for i in 1..=p.cfg.seq_pushes {
                    if !plan_ok(out) {
                        break;
                    }
                    let push = p.one_push(Kind::Seq, i, out);
                    out.seq.push(push);
                }
            });
        }
        if !self.cfg.conc_steps.is_empty() && plan_ok(&out) {
            self.phase(&mut out, "conc", |p, out| {
                for &k in &p.cfg.conc_steps {
                    if !plan_ok(out) {
                        break;
                    }
                    let step = p.conc_step(k, out);
                    out.conc.push(step);
                }
            });
        }
        if plan_ok(&out) {
            self.phase(&mut out, "settle", |p, out| {
                p.sampler.set_phase("settle", "");
                std::thread::sleep(p.cfg.settle);
                if let Some(s) = p.sampler.sample_now() {
                    out.settled = Some((s.vm_rss_kb, s.rss_anon_kb));
                    p.progress(&format!(
                        "settled: VmRSS {:.1} MiB, RssAnon {:.1} MiB",
                        mib(s.vm_rss_kb),
                        mib(s.rss_anon_kb)
                    ));
                }
            });
        }
        out
    }

    fn phase(
        &mut self,
        out: &mut PlanOutcome,
        name: &str,
        body: impl FnOnce(&mut Self, &mut PlanOutcome),
    ) {
        self.progress(&format!("phase {name}"));
        self.sampler.set_phase(name, "");
        let start_ms = self.sampler.now_ms();
        body(self, out);
        out.phases.push(PhaseSpan {
            name: name.into(),
            start_ms,
            end_ms: self.sampler.now_ms(),
        });
    }

    fn new_repo(&self) -> (String, String) {
        let name = format!("{}.git", uuid::Uuid::new_v4());
        let url = format!("{}/{}", self.url, name);
        (name, url)
    }

    fn record_repo(&mut self, phase: &str, step: &str, name: &str, outcome: &PushOutcome) {
        let result = match &outcome.error {
            None => "ok".to_owned(),
            Some(e) => format!("FAILED {}", e.replace(['\n', '\t'], " ")),
        };
        let _ = writeln!(
            self.repos,
            "{phase}\t{step}\t{name}\t{:.2}s\t{result}",
            outcome.wall_s
        );
    }

    /// Measures `pushes` (run by the caller's closure) as one span, then
    /// waits a gap and reads the retained memory.
    fn measure(
        &self,
        phase: &str,
        step: &str,
        pushes: impl FnOnce() -> Vec<PushOutcome>,
    ) -> (Span, Vec<PushOutcome>) {
        let hwm_reset = procfs::reset_peak_rss(self.pid).is_ok();
        self.sampler.set_phase(phase, step);
        self.sampler.reset_window();
        let first = self.sampler.sample_now();
        let start_ms = self.sampler.now_ms();
        let started = Instant::now();
        let outcomes = pushes();
        let wall_s = started.elapsed().as_secs_f64();
        let last = self.sampler.sample_now();
        let window = self.sampler.window();
        let hwm = procfs::read_status(self.pid).ok().and_then(|s| s.vm_hwm_kb);
        // Growth of a counter between the first and last scrape; a counter
        // absent from a scrape that succeeded has not counted anything yet.
        let delta = |f: &dyn Fn(&RuntimeMetrics) -> Option<u64>| -> Option<u64> {
            let (a, b) = (first.as_ref()?.metrics?, last.as_ref()?.metrics?);
            Some(f(&b)?.saturating_sub(f(&a).unwrap_or(0)))
        };
        let mut span = Span {
            start_ms,
            wall_s,
            // 0 when /proc/PID/stat could not be read (keeps summary.json numeric)
            cpu_s: match (&first, &last) {
                (Some(a), Some(b)) if (b.cpu_s - a.cpu_s).is_finite() => {
                    ((b.cpu_s - a.cpu_s) * 1000.0).round() / 1000.0
                }
                _ => 0.0,
            },
            vm_hwm_peak_kb: hwm
                .unwrap_or(window.vm_rss_peak_kb)
                .max(window.vm_rss_peak_kb),
            rss_anon_peak_kb: window.rss_anon_peak_kb,
            rss_file_peak_kb: window.rss_file_peak_kb,
            rise_from_start_kb: first
                .as_ref()
                .map_or(0, |s| window.rss_anon_peak_kb as i64 - s.rss_anon_kb as i64),
            allocated_bytes: delta(&|m| m.allocated_bytes_total),
            received_bytes: delta(&|m| m.received_bytes_total),
            jemalloc_allocated_peak_bytes: window.jemalloc_allocated_peak_bytes,
            pushes_in_flight_peak: window.pushes_in_flight_peak,
            samples: window.samples,
            hwm_reset,
            ..Span::default()
        };
        self.sampler.set_phase(phase, &format!("{step}-gap"));
        std::thread::sleep(self.cfg.gap);
        if let Some(s) = self.sampler.sample_now() {
            span.retained_rss_kb = Some(s.vm_rss_kb);
            span.retained_anon_kb = Some(s.rss_anon_kb);
        }
        (span, outcomes)
    }

    /// Waits until the daemon has used under a quarter of a core over the
    /// last [`STILL_FOR`] (the work a push queued is done: a maintenance
    /// pass keeps a core busy, while answering the sampler's scrapes costs a
    /// few percent), at most [`STILL_AT_MOST`].
    fn wait_still(&self) {
        let ticks = procfs::clock_ticks_per_second().max(1);
        let cpu = || procfs::read_cpu(self.pid).ok().map(|t| t.seconds(ticks));
        let started = Instant::now();
        let step = Duration::from_millis(250);
        let window = (STILL_FOR.as_millis() / step.as_millis()) as usize;
        let mut history = std::collections::VecDeque::new();
        while started.elapsed() < STILL_AT_MOST {
            let Some(now) = cpu() else { return };
            history.push_back(now);
            if history.len() > window {
                let then = history.pop_front().unwrap_or(now);
                if now - then < STILL_FOR.as_secs_f64() / 4.0 {
                    return;
                }
            }
            std::thread::sleep(step);
        }
        self.progress(&format!(
            "the daemon was still busy after {} s; going on",
            STILL_AT_MOST.as_secs()
        ));
    }

    /// One push of phase `kind`, the `index`th, into a new repository.
    fn one_push(&mut self, kind: Kind, index: usize, out: &mut PlanOutcome) -> SeqPush {
        let (phase, total, source, refspecs, pack) = match kind {
            Kind::Fixed => (
                "fixed",
                self.cfg.fixed_pushes,
                self.small.clone(),
                vec![git::SMALL_REFSPEC.to_owned()],
                self.small_pack,
            ),
            Kind::Seq => (
                "seq",
                self.cfg.seq_pushes,
                self.mirror.clone(),
                self.cfg.refspecs.clone(),
                self.pack,
            ),
        };
        let (name, url) = self.new_repo();
        let step = format!("push-{index}");
        self.progress(&format!("{phase} push {index}/{total} → {name}"));
        let (span, mut outcomes) =
            self.measure(phase, &step, || vec![git::push(&source, &url, &refspecs)]);
        // What the push left the daemon to do (its maintenance pass), in a
        // span of its own, so that the next push starts on a still daemon.
        let deferred = (kind == Kind::Seq).then(|| {
            self.measure(phase, &format!("{step}-deferred"), || {
                self.wait_still();
                Vec::new()
            })
            .0
        });
        let outcome = outcomes.pop().expect("one push");
        self.record_repo(phase, &step, &name, &outcome);
        let error = outcome.error.clone();
        match &error {
            None => self.progress(&format!(
                "{phase} push {index} done: {:.2} s, CPU {:.2} s, VmHWM {:.1} MiB, RssAnon peak {:.1} MiB, \
                 retained anon {}",
                outcome.wall_s,
                span.cpu_s,
                mib(span.vm_hwm_peak_kb),
                mib(span.rss_anon_peak_kb),
                span.retained_anon_kb
                    .map_or("unknown".into(), |kb| format!("{:.1} MiB", mib(kb)))
            )),
            Some(e) => self.fail(out, format!("{phase} push {index} into {name} failed: {e}")),
        }
        let wall = outcome.wall_s.max(1e-9);
        SeqPush {
            index,
            repo: name,
            error,
            pack_mb_per_s: pack.pack_bytes as f64 / 1e6 / wall,
            objects_per_s: pack.objects as f64 / wall,
            span,
            deferred,
        }
    }

    fn conc_step(&mut self, k: usize, out: &mut PlanOutcome) -> ConcStep {
        let repos: Vec<(String, String)> = (0..k).map(|_| self.new_repo()).collect();
        let step = format!("k{k}");
        self.progress(&format!("conc K={k}: starting {k} push(es) at once"));
        let (mirror, refspecs) = (self.mirror.clone(), self.cfg.refspecs.clone());
        let (span, outcomes) = self.measure("conc", &step, || {
            concurrent_pushes(&mirror, &refspecs, &repos)
        });
        let mut errors = Vec::new();
        for ((name, _), outcome) in repos.iter().zip(&outcomes) {
            self.record_repo("conc", &step, name, outcome);
            if let Some(e) = &outcome.error {
                errors.push(e.clone());
                self.fail(out, format!("conc K={k} push into {name} failed: {e}"));
            }
        }
        self.progress(&format!(
            "conc K={k} done: {:.2} s, CPU {:.2} s, VmHWM {:.1} MiB, RssAnon peak {:.1} MiB, {} failed",
            span.wall_s,
            span.cpu_s,
            mib(span.vm_hwm_peak_kb),
            mib(span.rss_anon_peak_kb),
            errors.len()
        ));
        ConcStep {
            k,
            repos: repos.into_iter().map(|(n, _)| n).collect(),
            push_walls_s: outcomes.iter().map(|o| o.wall_s).collect(),
            errors,
            span,
            ..ConcStep::default()
        }
    }

    fn fail(&self, out: &mut PlanOutcome, msg: String) {
        self.progress(&format!("FAILED: {msg}"));
        out.failures.push(msg);
        if !out.daemon_died && !self.daemon_alive() {
            out.daemon_died = true;
            let msg =
                "the daemon died; the rest of the plan was skipped (see daemon.log)".to_owned();
            self.progress(&msg);
            out.failures.push(msg);
        }
    }
}

/// How long the daemon must stay all but idle (under a quarter of a core)
/// for the work a push queued to count as done.
const STILL_FOR: Duration = Duration::from_secs(2);
/// The longest wait for it.
const STILL_AT_MOST: Duration = Duration::from_secs(600);

/// The phases made of single pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One small commit: the fixed cost of a push.
    Fixed,
    /// The whole input.
    Seq,
}

/// Starts one `git push` per repository at the same moment and waits for all.
fn concurrent_pushes(
    mirror: &Path,
    refspecs: &[String],
    repos: &[(String, String)],
) -> Vec<PushOutcome> {
    let barrier = Barrier::new(repos.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = repos
            .iter()
            .map(|(_, url)| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    git::push(mirror, url, refspecs)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| PushOutcome {
                    wall_s: 0.0,
                    error: Some("push thread panicked".into()),
                })
            })
            .collect()
    })
}
