//! The background sampler: every interval it reads the daemon's `/proc`
//! figures and scrapes `/metrics`, keeps the [`Sample`], tracks the peaks of
//! the current measurement [`Window`], and asks for a heap profile whenever
//! RSS sets a new high by more than the growth threshold.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::procfs;
use crate::scrape::{Client, RuntimeMetrics};

/// One observation of the daemon.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Milliseconds since the daemon was ready.
    pub t_ms: u64,
    /// Phase of the run plan (`idle`, `seq`, `conc`, `settle`).
    pub phase: String,
    /// Step within the phase (`push-2`, `gap-2`, `k4`, `k4-gap`, …).
    pub step: String,
    /// `VmRSS` of `/proc/PID/status`, kB.
    pub vm_rss_kb: u64,
    /// `VmHWM` of `/proc/PID/status` (peak since the last reset), kB.
    pub vm_hwm_kb: u64,
    /// `RssAnon` of `/proc/PID/status`, kB.
    pub rss_anon_kb: u64,
    /// `RssFile` of `/proc/PID/status`, kB.
    pub rss_file_kb: u64,
    /// `Pss` of `/proc/PID/smaps_rollup`, kB.
    pub pss_kb: Option<u64>,
    /// `Private_Dirty` of `/proc/PID/smaps_rollup`, kB.
    pub private_dirty_kb: Option<u64>,
    /// The daemon's CPU time so far (`utime + stime` of `/proc/PID/stat`), seconds.
    pub cpu_s: f64,
    /// The `/metrics` figures, `None` when that scrape failed.
    pub metrics: Option<RuntimeMetrics>,
}

/// Peaks seen by the sampler since the last [`Sampler::reset_window`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// Samples taken in the window.
    pub samples: usize,
    /// Highest `VmRSS` sampled, kB.
    pub vm_rss_peak_kb: u64,
    /// Highest `RssAnon` sampled, kB.
    pub rss_anon_peak_kb: u64,
    /// Highest `RssFile` sampled, kB.
    pub rss_file_peak_kb: u64,
    /// Highest `gitstow_jemalloc_allocated_bytes` scraped, bytes.
    pub jemalloc_allocated_peak_bytes: Option<u64>,
    /// Highest `gitstow_pushes_in_flight` scraped: pushes the daemon ran at
    /// once (past its `--max-concurrent-pushes` queue).
    pub pushes_in_flight_peak: Option<u64>,
}

impl Window {
    fn observe(&mut self, s: &Sample) {
        self.samples += 1;
        self.vm_rss_peak_kb = self.vm_rss_peak_kb.max(s.vm_rss_kb);
        self.rss_anon_peak_kb = self.rss_anon_peak_kb.max(s.rss_anon_kb);
        self.rss_file_peak_kb = self.rss_file_peak_kb.max(s.rss_file_kb);
        if let Some(a) = s.metrics.and_then(|m| m.jemalloc_allocated_bytes) {
            let peak = self.jemalloc_allocated_peak_bytes.get_or_insert(0);
            *peak = (*peak).max(a);
        }
        if let Some(n) = s.metrics.and_then(|m| m.pushes_in_flight) {
            let peak = self.pushes_in_flight_peak.get_or_insert(0);
            *peak = (*peak).max(n);
        }
    }
}

/// One heap profile asked for (and, if `error` is `None`, saved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRecord {
    /// File name under `profiles/` (`heap-<seq>-<phase>-<rss_kb>.pb.gz`).
    pub file: String,
    /// When the new RSS high was sampled, ms since the daemon was ready.
    pub t_ms: u64,
    /// The phase then.
    pub phase: String,
    /// The RSS high that triggered it, kB.
    pub rss_kb: u64,
    /// Why the download failed, if it did.
    pub error: Option<String>,
}

/// What the sampler counted besides samples.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerStats {
    /// `/metrics` scrapes that gave figures.
    pub scrapes_ok: u64,
    /// `/metrics` scrapes that failed (their samples keep the /proc figures).
    pub scrapes_failed: u64,
    /// The first failed scrape's error.
    pub first_scrape_error: Option<String>,
    /// Ticks when `/proc/PID/status` had no figures (the daemon was gone).
    pub proc_failures: u64,
}

/// Where heap profiles go, and the growth that triggers one.
#[derive(Debug, Clone)]
pub struct ProfileConfig {
    /// The `profiles/` directory.
    pub dir: PathBuf,
    /// Fractional growth of RSS over the last profiled high that triggers
    /// another profile (0.05 = 5 %).
    pub growth: f64,
}

struct State {
    phase: String,
    step: String,
    samples: Vec<Sample>,
    window: Window,
    stats: SamplerStats,
    profiled_high_kb: u64,
    profile_seq: u32,
}

struct Shared {
    pid: u32,
    t0: Instant,
    ticks: u64,
    client: Client,
    stop: AtomicBool,
    state: Mutex<State>,
    profile_growth: Option<f64>,
    profile_tx: Mutex<Option<mpsc::Sender<ProfileRecord>>>,
}

/// The running sampler; [`Sampler::finish`] stops it.
pub struct Sampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    profiler: Option<JoinHandle<Vec<ProfileRecord>>>,
}

impl Sampler {
    /// Starts sampling daemon `pid` (HTTP via `client`) every `interval`;
    /// `t0` is time zero of the samples. With `profiles`, heap profiles are
    /// downloaded on new RSS highs by a thread of their own.
    pub fn start(
        pid: u32,
        client: Client,
        t0: Instant,
        interval: Duration,
        profiles: Option<ProfileConfig>,
    ) -> Sampler {
        let (profile_tx, profiler) = match &profiles {
            Some(cfg) => {
                let (tx, rx) = mpsc::channel::<ProfileRecord>();
                let (dir, client) = (cfg.dir.clone(), client.clone());
                let handle = std::thread::Builder::new()
                    .name("membench-profiler".into())
                    .spawn(move || profile_loop(rx, dir, client))
                    .expect("spawn profiler thread");
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        let shared = Arc::new(Shared {
            pid,
            t0,
            ticks: procfs::clock_ticks_per_second(),
            client,
            stop: AtomicBool::new(false),
            state: Mutex::new(State {
                phase: "start".into(),
                step: String::new(),
                samples: Vec::new(),
                window: Window::default(),
                stats: SamplerStats::default(),
                profiled_high_kb: 0,
                profile_seq: 0,
            }),
            profile_growth: profiles.map(|p| p.growth),
            profile_tx: Mutex::new(profile_tx),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("membench-sampler".into())
                .spawn(move || {
                    let start = Instant::now();
                    let mut n: u32 = 0;
                    while !shared.stop.load(Ordering::Relaxed) {
                        shared.take();
                        n += 1;
                        let mut next = start + interval * n;
                        let now = Instant::now();
                        while next < now {
                            n += 1; // fell behind (slow scrape): skip ticks
                            next = start + interval * n;
                        }
                        while !shared.stop.load(Ordering::Relaxed) && Instant::now() < next {
                            std::thread::sleep(
                                (next - Instant::now()).min(Duration::from_millis(20)),
                            );
                        }
                    }
                })
                .expect("spawn sampler thread")
        };
        Sampler {
            shared,
            thread: Some(thread),
            profiler,
        }
    }

    /// Labels the samples taken from now on.
    pub fn set_phase(&self, phase: &str, step: &str) {
        let mut st = self.shared.state.lock().unwrap();
        st.phase = phase.to_owned();
        st.step = step.to_owned();
    }

    /// Starts a new measurement window (peaks from now on).
    pub fn reset_window(&self) {
        self.shared.state.lock().unwrap().window = Window::default();
    }

    /// The current window's peaks.
    pub fn window(&self) -> Window {
        self.shared.state.lock().unwrap().window
    }

    /// Takes a sample now, in the calling thread (so a push shorter than
    /// the interval still gets one at its end); `None` if the daemon is gone.
    pub fn sample_now(&self) -> Option<Sample> {
        self.shared.take()
    }

    /// Milliseconds since time zero.
    pub fn now_ms(&self) -> u64 {
        self.shared.t0.elapsed().as_millis() as u64
    }

    /// Stops sampling and waits for pending heap profiles; returns the
    /// samples, the counters and the profiles.
    pub fn finish(mut self) -> (Vec<Sample>, SamplerStats, Vec<ProfileRecord>) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.profile_tx.lock().unwrap().take();
        let profiles = self
            .profiler
            .take()
            .and_then(|p| p.join().ok())
            .unwrap_or_default();
        let mut st = self.shared.state.lock().unwrap();
        (std::mem::take(&mut st.samples), st.stats.clone(), profiles)
    }
}

impl Shared {
    /// Collects one sample and records it.
    fn take(&self) -> Option<Sample> {
        let status = procfs::read_status(self.pid).unwrap_or_default();
        let (Some(vm_rss_kb), Some(vm_hwm_kb)) = (status.vm_rss_kb, status.vm_hwm_kb) else {
            self.state.lock().unwrap().stats.proc_failures += 1;
            return None;
        };
        let rollup = procfs::read_smaps_rollup(self.pid).unwrap_or_default();
        let cpu_s = procfs::read_cpu(self.pid)
            .map(|c| c.seconds(self.ticks))
            .unwrap_or(f64::NAN);
        let scraped = self.client.metrics();
        let t_ms = self.t0.elapsed().as_millis() as u64;
        let mut st = self.state.lock().unwrap();
        let metrics = match scraped {
            Ok(m) => {
                st.stats.scrapes_ok += 1;
                Some(m)
            }
            Err(e) => {
                st.stats.scrapes_failed += 1;
                st.stats
                    .first_scrape_error
                    .get_or_insert_with(|| format!("{e:#}"));
                None
            }
        };
        let sample = Sample {
            t_ms,
            phase: st.phase.clone(),
            step: st.step.clone(),
            vm_rss_kb,
            vm_hwm_kb,
            rss_anon_kb: status.rss_anon_kb.unwrap_or(0),
            rss_file_kb: status.rss_file_kb.unwrap_or(0),
            pss_kb: rollup.pss_kb,
            private_dirty_kb: rollup.private_dirty_kb,
            cpu_s,
            metrics,
        };
        st.window.observe(&sample);
        if let Some(growth) = self.profile_growth {
            if vm_rss_kb as f64 > st.profiled_high_kb as f64 * (1.0 + growth) {
                st.profiled_high_kb = vm_rss_kb;
                st.profile_seq += 1;
                let record = ProfileRecord {
                    file: format!("heap-{:03}-{}-{vm_rss_kb}.pb.gz", st.profile_seq, st.phase),
                    t_ms,
                    phase: st.phase.clone(),
                    rss_kb: vm_rss_kb,
                    error: None,
                };
                if let Some(tx) = self.profile_tx.lock().unwrap().as_ref() {
                    let _ = tx.send(record);
                }
            }
        }
        st.samples.push(sample.clone());
        Some(sample)
    }
}

/// Downloads the profiles asked for, one at a time; a failure is logged on
/// stderr (the first one in full) and recorded, never fatal.
fn profile_loop(
    rx: mpsc::Receiver<ProfileRecord>,
    dir: PathBuf,
    client: Client,
) -> Vec<ProfileRecord> {
    let mut done = Vec::new();
    let mut failures = 0;
    for mut record in rx {
        let result = client
            .heap_profile()
            .and_then(|bytes| Ok(fs::write(dir.join(&record.file), bytes)?));
        if let Err(e) = result {
            failures += 1;
            if failures == 1 {
                eprintln!("membench: heap profile {} not taken: {e:#}", record.file);
            }
            record.error = Some(format!("{e:#}"));
        }
        done.push(record);
    }
    if failures > 1 {
        eprintln!("membench: {failures} heap profiles could not be taken");
    }
    done
}
