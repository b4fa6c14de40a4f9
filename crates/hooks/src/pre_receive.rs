//! The operator's pre-receive check: an executable or an HTTP callout.
//!
//! **Executable** ([`Executable`]), as git runs `hooks/pre-receive`
//! (`githooks(5)`): one line `<old-oid> SP <new-oid> SP <ref-name> LF` per
//! update on stdin, push options in `GIT_PUSH_OPTION_COUNT` and
//! `GIT_PUSH_OPTION_<i>`; exit code 0 accepts. Its stdout and stderr, merged
//! as git merges them, are shown to the client on side-band 2. It also gets
//! `GITSTOW_REPOSITORY` and `GITSTOW_PUSHER` (the token's name, empty
//! without access control), `PATH`, `HOME` and `LANG`; nothing else of
//! the server's environment (which may hold store credentials). It runs in
//! a process group of its own, killed whole at the timeout.
//!
//! **HTTP callout** ([`Callout`]): a `POST` of [`CheckRequest`] as JSON;
//! a `2xx` status accepts, any other refuses; the response body (text, at
//! most [`MAX_OUTPUT`] bytes) is shown to the client either way.
//!
//! A timeout, a crash, a hook that cannot be started or a callout that
//! cannot be reached refuses the push (the server fails closed) with a
//! one-line reason; the details go to the log.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gitstow_receive::hooks::{PreReceive, PushInfo, Verdict};

/// Most bytes of a check's output shown to the client (the rest is read
/// and dropped).
pub const MAX_OUTPUT: usize = 64 << 10;

/// Appended where a check's output was cut at [`MAX_OUTPUT`].
const TRUNCATED: &[u8] = b"\n(pre-receive output cut at 64 KiB)\n";

/// What a callout receives (JSON).
#[derive(Debug, serde::Serialize)]
pub struct CheckRequest<'a> {
    /// `org/project`.
    pub repository: &'a str,
    /// The token's name; `null` without access control.
    pub pusher: Option<&'a str>,
    /// The updates, in the client's order.
    pub ref_updates: Vec<crate::webhook::RefUpdateJson>,
    /// `git push -o` values, in order.
    pub push_options: &'a [String],
}

impl<'a> CheckRequest<'a> {
    /// The request for `push`.
    pub fn of(push: &'a PushInfo<'a>) -> Self {
        CheckRequest {
            repository: push.repository,
            pusher: push.pusher,
            ref_updates: push
                .updates
                .iter()
                .map(crate::webhook::RefUpdateJson::of)
                .collect(),
            push_options: push.push_options,
        }
    }
}

fn refusal(line: &str) -> Verdict {
    Verdict {
        accepted: false,
        output: format!("error: {line}\n").into_bytes(),
    }
}

/// A pre-receive executable.
#[derive(Debug, Clone)]
pub struct Executable {
    /// The program (run without a shell, without arguments).
    pub path: PathBuf,
    /// How long it may run.
    pub timeout: Duration,
}

impl PreReceive for Executable {
    fn check(&self, push: &PushInfo<'_>) -> Verdict {
        match self.run(push) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(hook = %self.path.display(), error = %e, "pre-receive hook could not be run");
                refusal("pre-receive hook could not be run")
            }
        }
    }
}

impl Executable {
    fn run(&self, push: &PushInfo<'_>) -> std::io::Result<Verdict> {
        use std::os::unix::process::CommandExt;
        let (mut reader, writer) = std::io::pipe()?;
        let mut cmd = Command::new(&self.path);
        cmd.env_clear()
            .stdin(Stdio::piped())
            .stdout(writer.try_clone()?)
            .stderr(writer)
            .process_group(0)
            .env("GITSTOW_REPOSITORY", push.repository)
            .env("GITSTOW_PUSHER", push.pusher.unwrap_or(""))
            .env("GIT_PUSH_OPTION_COUNT", push.push_options.len().to_string());
        for key in ["PATH", "HOME", "LANG"] {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        for (i, o) in push.push_options.iter().enumerate() {
            cmd.env(format!("GIT_PUSH_OPTION_{i}"), o);
        }
        let mut child = cmd.spawn()?;
        // The command holds copies of the pipe's write end: without this the
        // output never ends.
        drop(cmd);
        let started = Instant::now();
        let mut input = String::new();
        for u in push.updates {
            input.push_str(&format!("{} {} {}\n", u.old, u.new, u.name));
        }
        let mut stdin = child.stdin.take().expect("piped");
        // A hook that does not read its input must not block the server.
        std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        let output = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        {
            let output = output.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let mut out = output.lock().unwrap_or_else(|e| e.into_inner());
                            let room = MAX_OUTPUT.saturating_sub(out.len());
                            out.extend_from_slice(&buf[..n.min(room)]);
                            if n > room && room > 0 {
                                out.extend_from_slice(TRUNCATED);
                            }
                        }
                    }
                }
                let _ = done_tx.send(());
            });
        }
        let status = loop {
            if exited(child.id()) {
                // What it left running in its group (a background job that
                // holds the output pipe) goes with it; the hook is not reaped
                // yet, so its pid (the group's id) cannot have been reused.
                // SAFETY: kill(2) on the group the child leads; no memory involved.
                unsafe {
                    libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
                }
                break Some(child.wait()?);
            }
            if started.elapsed() >= self.timeout {
                // The whole group: a shell's children too.
                // SAFETY: kill(2) with a negative pid signals the process group
                // the child leads (process_group(0) above); no memory is involved.
                unsafe {
                    libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
                }
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // What the hook printed; a descendant still holding the pipe does not
        // hold the push for long.
        let _ = done_rx.recv_timeout(Duration::from_millis(500));
        let mut output = std::mem::take(&mut *output.lock().unwrap_or_else(|e| e.into_inner()));
        let accepted = match status {
            Some(s) if s.success() => true,
            Some(s) => {
                tracing::info!(hook = %self.path.display(), status = %s, "pre-receive hook declined");
                false
            }
            None => {
                tracing::warn!(hook = %self.path.display(), timeout_secs = self.timeout.as_secs_f64(), "pre-receive hook timed out; killed");
                output.extend_from_slice(
                    format!(
                        "error: pre-receive hook timed out after {}\n",
                        human(self.timeout)
                    )
                    .as_bytes(),
                );
                false
            }
        };
        Ok(Verdict { accepted, output })
    }
}

/// Whether the child `pid` has exited, without reaping it (`waitid` with
/// `WNOWAIT`).
fn exited(pid: u32) -> bool {
    // SAFETY: waitid(2) writes only into `info`, a zeroed siginfo_t we own.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() != 0
    }
}

/// `10s`, `1.5s`.
fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else {
        format!("{s:.1}s")
    }
}

/// A pre-receive HTTP callout.
#[derive(Debug, Clone)]
pub struct Callout {
    url: String,
    timeout: Duration,
    agent: ureq::Agent,
}

impl Callout {
    /// A callout to `url` (`http://` or `https://`), each call bounded by
    /// `timeout` in all (connect, send, answer).
    pub fn new(url: &str, timeout: Duration) -> Callout {
        Callout {
            url: url.to_owned(),
            timeout,
            agent: crate::agent(timeout),
        }
    }
}

impl PreReceive for Callout {
    fn check(&self, push: &PushInfo<'_>) -> Verdict {
        let body = match serde_json::to_vec(&CheckRequest::of(push)) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "pre-receive request not encoded");
                return refusal("pre-receive check failed");
            }
        };
        let answer = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .send(&body[..]);
        let response = match answer {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => {
                tracing::warn!(url = %self.url, "pre-receive callout timed out");
                return refusal(&format!(
                    "pre-receive check timed out after {}",
                    human(self.timeout)
                ));
            }
            Err(e) => {
                tracing::error!(url = %self.url, error = %e, "pre-receive callout failed");
                return refusal("pre-receive check unavailable");
            }
        };
        let status = response.status().as_u16();
        let mut output = Vec::new();
        let read = response
            .into_body()
            .into_reader()
            .take(MAX_OUTPUT as u64 + 1)
            .read_to_end(&mut output);
        if output.len() > MAX_OUTPUT {
            output.truncate(MAX_OUTPUT);
            output.extend_from_slice(TRUNCATED);
        }
        if let Err(e) = read {
            tracing::warn!(url = %self.url, error = %e, "pre-receive callout's answer cut short");
            if matches!(status, 200..=299) {
                // Half an answer is no acceptance.
                let timed_out =
                    e.kind() == std::io::ErrorKind::TimedOut || e.to_string().contains("timeout");
                return refusal(&if timed_out {
                    format!("pre-receive check timed out after {}", human(self.timeout))
                } else {
                    "pre-receive check failed".into()
                });
            }
        }
        if !output.is_empty() && !output.ends_with(b"\n") {
            output.push(b'\n');
        }
        let accepted = matches!(status, 200..=299);
        if !accepted {
            tracing::info!(url = %self.url, status, "pre-receive callout declined");
        }
        Verdict { accepted, output }
    }
}
