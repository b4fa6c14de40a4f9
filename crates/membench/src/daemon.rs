//! The `gitstow serve` under test: started on `127.0.0.1:0`, ready when it
//! prints `gitstow listening on http://ADDR`, stopped with SIGTERM (SIGKILL
//! after a grace period); its stdout and stderr go to `daemon.log`.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// The stdout line (prefix) `gitstow serve` prints once it accepts
/// connections; the base URL follows.
pub const READY_PREFIX: &str = "gitstow listening on ";

/// How long the daemon gets to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the daemon gets to exit after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(20);

/// A running daemon.
pub struct Daemon {
    child: Option<Child>,
    /// Its process id (for `/proc/PID/*`).
    pub pid: u32,
    /// Base URL, e.g. `http://127.0.0.1:41234` (no trailing slash).
    pub url: String,
    /// The full argument list it was started with (after the binary).
    pub args: Vec<String>,
    log: PathBuf,
}

/// The base URL in a ready line, or `None` if `line` is not one.
pub fn parse_ready_line(line: &str) -> Option<String> {
    let url = line.trim().strip_prefix(READY_PREFIX)?.trim();
    (url.starts_with("http://") && url.len() > "http://".len())
        .then(|| url.trim_end_matches('/').to_owned())
}

/// The daemon binary to use when none is given: `gitstow` next to the
/// running executable (the same target directory), else `gitstow` on `PATH`.
pub fn default_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("gitstow")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("gitstow"))
}

/// The last `n` lines of a file (for error messages).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `BINARY --version`, trimmed (e.g. `gitstow 0.1.0`).
pub fn version(binary: &Path) -> Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    if !out.status.success() {
        bail!("{} --version exited with {}", binary.display(), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

impl Daemon {
    /// Starts `BINARY serve --listen 127.0.0.1:0 --store STORE [--heap-profiling] EXTRA…`
    /// with stdout and stderr appended to `log`, and waits for its ready
    /// line (at most [`READY_TIMEOUT`]).
    pub fn start(
        binary: &Path,
        store: &str,
        heap_profiling: bool,
        extra: &[String],
        log: &Path,
    ) -> Result<Daemon> {
        let mut args: Vec<String> = ["serve", "--listen", "127.0.0.1:0", "--store", store]
            .map(String::from)
            .into();
        if heap_profiling {
            args.push("--heap-profiling".into());
        }
        args.extend(extra.iter().cloned());
        let log_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("creating {}", log.display()))?;
        let mut child = Command::new(binary)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file.try_clone()?))
            .spawn()
            .with_context(|| format!("starting daemon {}", binary.display()))?;
        let pid = child.id();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("daemon-stdout".into())
            .spawn(move || forward_stdout(stdout, log_file, tx))?;
        let mut daemon = Daemon {
            child: Some(child),
            pid,
            url: String::new(),
            args,
            log: log.to_owned(),
        };
        match rx.recv_timeout(READY_TIMEOUT) {
            Ok(url) => {
                daemon.url = url;
                Ok(daemon)
            }
            Err(e) => {
                let exited = daemon
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten());
                daemon.stop();
                let why = match (e, exited) {
                    (_, Some(status)) => format!("exited with {status} before it was ready"),
                    (mpsc::RecvTimeoutError::Timeout, None) => format!(
                        "printed no {READY_PREFIX:?}http://… line within {} s",
                        READY_TIMEOUT.as_secs()
                    ),
                    (mpsc::RecvTimeoutError::Disconnected, None) => {
                        "closed its stdout before it was ready".into()
                    }
                };
                Err(anyhow!(
                    "daemon {} {}; last lines of {}:\n{}",
                    binary.display(),
                    why,
                    log.display(),
                    tail(log, 15)
                ))
            }
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops the daemon: SIGTERM, wait up to [`STOP_GRACE`], then SIGKILL.
    /// Returns how it ended, for the report (`None` if already stopped).
    pub fn stop(&mut self) -> Option<String> {
        let mut child = self.child.take()?;
        if let Ok(Some(status)) = child.try_wait() {
            return Some(format!("had already exited ({status})"));
        }
        let started = Instant::now();
        // SAFETY: kill(2) on the pid of a child we have not reaped yet.
        unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGTERM) };
        while started.elapsed() < STOP_GRACE {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(format!(
                    "exited ({status}) {:.1} s after SIGTERM",
                    started.elapsed().as_secs_f64()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
        Some(format!(
            "killed with SIGKILL ({status}): still running {} s after SIGTERM",
            STOP_GRACE.as_secs()
        ))
    }

    /// The `daemon.log` path.
    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Copies the daemon's stdout into the log, sending the URL of the first
/// ready line on `tx`.
fn forward_stdout(stdout: std::process::ChildStdout, mut log: File, tx: mpsc::Sender<String>) {
    let mut tx = Some(tx);
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(log, "{line}");
        if let Some(url) = parse_ready_line(&line) {
            if let Some(tx) = tx.take() {
                let _ = tx.send(url);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line() {
        assert_eq!(
            parse_ready_line("gitstow listening on http://127.0.0.1:41234\n").as_deref(),
            Some("http://127.0.0.1:41234")
        );
        assert_eq!(parse_ready_line("gitstow listening on http://"), None);
        assert_eq!(parse_ready_line("INFO starting"), None);
    }

    #[test]
    fn a_daemon_that_never_gets_ready_fails_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("daemon.log");
        let err = Daemon::start(Path::new("false"), "file:///nowhere", false, &[], &log)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("before it was ready"), "{err}");
        let err = Daemon::start(
            Path::new("/nonexistent/gitstow"),
            "file:///nowhere",
            false,
            &[],
            &log,
        )
        .err()
        .unwrap();
        assert!(
            format!("{err:#}").contains("/nonexistent/gitstow"),
            "{err:#}"
        );
    }
}
