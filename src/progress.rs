//! Progress on stderr for admin commands that read much of the store, in
//! git's form (`Checking objects:  45% (6321/14062)`, then `, done.`),
//! with a rate; shown on a terminal unless `--no-progress`, or always with
//! `--progress` (as `git fsck` decides), and the store's request count at
//! the end.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use gitstow_store::StoreMetrics;

/// How often a line is redrawn at most.
const EVERY: Duration = Duration::from_millis(100);

/// The `--progress` / `--no-progress` pair of a command.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ProgressArgs {
    /// Show progress on stderr even when it is not a terminal.
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
    /// Show no progress (the default when stderr is not a terminal).
    #[arg(long, overrides_with = "progress")]
    pub no_progress: bool,
}

impl ProgressArgs {
    /// Whether progress is shown: as asked, else when stderr is a terminal.
    pub fn shown(self) -> bool {
        if self.no_progress {
            false
        } else {
            self.progress || std::io::stderr().is_terminal()
        }
    }
}

/// One progress line at a time on stderr: a title, a count (of a total,
/// when known) and a rate in units per second.
#[derive(Debug)]
pub struct Meter {
    shown: bool,
    /// The line being drawn: its title, when it started, the last count.
    line: Option<(String, Instant, u64, Option<u64>)>,
    last_draw: Option<Instant>,
}

impl Meter {
    /// A meter that draws when `shown`.
    pub fn new(shown: bool) -> Self {
        Meter {
            shown,
            line: None,
            last_draw: None,
        }
    }

    /// `done` of `total` under `title`: a new title ends the line before.
    pub fn update(&mut self, title: &str, done: u64, total: Option<u64>) {
        if !self.shown {
            return;
        }
        if self.line.as_ref().is_some_and(|(t, ..)| t != title) {
            self.finish();
        }
        let now = Instant::now();
        let started = match &mut self.line {
            Some((_, started, count, of)) => {
                *count = done;
                *of = total;
                *started
            }
            None => {
                // The first draw waits an interval: a line that is done by
                // then is drawn once, done.
                self.line = Some((title.to_owned(), now, done, total));
                self.last_draw = Some(now);
                now
            }
        };
        let due = self.last_draw.is_none_or(|t| now - t >= EVERY);
        if due {
            self.last_draw = Some(now);
            let text = render(title, done, total, now - started);
            eprint!("{text}\r");
            let _ = std::io::stderr().flush();
        }
    }

    /// Ends the current line with `, done.`.
    pub fn finish(&mut self) {
        if let Some((title, started, done, total)) = self.line.take() {
            eprintln!("{}, done.", render(&title, done, total, started.elapsed()));
        }
    }

    /// Says how many requests the store sent (a remote store's counters;
    /// nothing for the local store).
    pub fn requests(&mut self, metrics: StoreMetrics) {
        self.finish();
        if let (true, Some(line)) = (self.shown, requests_line(metrics)) {
            eprintln!("{line}");
        }
    }
}

/// `Title:  45% (6321/14062), 5123/s` or `Title: 6321, 5123/s`.
fn render(title: &str, done: u64, total: Option<u64>, elapsed: Duration) -> String {
    let rate = (done as f64 / elapsed.as_secs_f64().max(0.001)).round() as u64;
    match total {
        Some(total) if total > 0 => {
            let pct = done.saturating_mul(100) / total;
            format!("{title}: {pct:3}% ({done}/{total}), {rate}/s")
        }
        _ => format!("{title}: {done}, {rate}/s"),
    }
}

/// `Store requests: 4 (2 GET, 1 HEAD, 1 LIST), 5.9 MB read` for a remote
/// store; `None` for one that sends no requests.
pub fn requests_line(metrics: StoreMetrics) -> Option<String> {
    let r = metrics.requests?;
    let parts = [
        (r.get + r.get_range, "GET"),
        (r.head, "HEAD"),
        (r.list, "LIST"),
        (
            r.put + r.put_conditional + r.multipart_parts + r.multipart_uploads,
            "PUT",
        ),
        (r.delete, "DELETE"),
        (
            r.other + r.multipart_completed + r.multipart_aborted,
            "other",
        ),
    ];
    let total: u64 = parts.iter().map(|(n, _)| n).sum();
    let named: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    Some(format!(
        "Store requests: {total} ({}), {} read",
        named.join(", "),
        crate::size::human(r.bytes_read)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_as_git_does_with_a_rate() {
        assert_eq!(
            render("Checking objects", 45, Some(100), Duration::from_secs(1)),
            "Checking objects:  45% (45/100), 45/s"
        );
        assert_eq!(
            render("Checking connectivity", 7, None, Duration::from_millis(500)),
            "Checking connectivity: 7, 14/s"
        );
    }

    #[test]
    fn counts_every_request_of_a_remote_store_only() {
        assert_eq!(requests_line(StoreMetrics::default()), None);
        let stats = gitstow_store::RequestStats {
            get: 1,
            get_range: 2,
            head: 1,
            list: 1,
            bytes_read: 2048,
            ..Default::default()
        };
        let m = StoreMetrics {
            requests: Some(stats),
            cache: None,
        };
        assert_eq!(
            requests_line(m).unwrap(),
            "Store requests: 5 (3 GET, 1 HEAD, 1 LIST), 2.00 KiB read"
        );
    }
}
