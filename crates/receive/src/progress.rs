//! Progress lines on side-band channel 2, in the shape git's own
//! `index-pack` prints them ("Resolving deltas:  42% (420/1000)").

use std::io::Write;

use gitstow_protocol::sideband::{write_band, Band};

/// Writes progress to band 2 when side-band is on and `quiet` is off; else nothing.
pub struct Progress<'a> {
    out: Option<&'a mut dyn Write>,
}

impl<'a> Progress<'a> {
    /// Progress into `out` if `enabled`.
    pub fn new(out: &'a mut dyn Write, enabled: bool) -> Self {
        Progress {
            out: enabled.then_some(out),
        }
    }

    /// A progress line for `done` of `total`; `last` ends it with ", done.".
    pub fn update(&mut self, title: &str, done: u64, total: u64, last: bool) {
        let Some(out) = self.out.as_mut() else { return };
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        let line = if last {
            format!("{title}: {pct:3}% ({done}/{total}), done.\n")
        } else {
            format!("{title}: {pct:3}% ({done}/{total})\r")
        };
        // A client that went away is noticed when the report is written.
        let _ = write_band(out, Band::Progress, line.as_bytes()).and_then(|_| out.flush());
    }

    /// A free-form progress message (a line).
    pub fn message(&mut self, text: &str) {
        let Some(out) = self.out.as_mut() else { return };
        let _ = write_band(out, Band::Progress, format!("{text}\n").as_bytes())
            .and_then(|_| out.flush());
    }
}
