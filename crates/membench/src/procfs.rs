//! What the kernel says about the daemon's memory and CPU, from `/proc/PID/*`
//! (see proc(5)), and the one write membench makes there (`clear_refs`).
//!
//! The parsers take the file's text so they can be tested on captured
//! fixtures; the `read_*` functions read the live files.

use std::fs;
use std::io;

/// Figures from `/proc/PID/status` (proc(5)), all in kB (the kernel's
/// `kB` is KiB). A field the kernel did not print is `None` (a zombie
/// process has no `Vm*` lines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// `VmRSS`: resident set size now (= RssAnon + RssFile + RssShmem).
    pub vm_rss_kb: Option<u64>,
    /// `VmHWM`: peak resident set size since start or since the last
    /// `echo 5 > clear_refs`.
    pub vm_hwm_kb: Option<u64>,
    /// `RssAnon`: resident anonymous memory (heap, stacks, anonymous maps).
    pub rss_anon_kb: Option<u64>,
    /// `RssFile`: resident file-backed mappings (binary, mapped files).
    pub rss_file_kb: Option<u64>,
}

/// Figures from `/proc/PID/smaps_rollup` (proc(5)), in kB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmapsRollup {
    /// `Pss`: proportional set size (shared pages divided among sharers).
    pub pss_kb: Option<u64>,
    /// `Private_Dirty`: pages written by this process and shared with none.
    pub private_dirty_kb: Option<u64>,
}

/// CPU time from `/proc/PID/stat` (proc(5), fields 14 `utime` and 15
/// `stime`), in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// User-mode time, in clock ticks.
    pub utime: u64,
    /// Kernel-mode time, in clock ticks.
    pub stime: u64,
}

impl CpuTicks {
    /// `utime + stime` in seconds, given the clock ticks per second
    /// ([`clock_ticks_per_second`]).
    pub fn seconds(&self, ticks_per_second: u64) -> f64 {
        (self.utime + self.stime) as f64 / ticks_per_second.max(1) as f64
    }
}

/// The value in kB of a `Name:   1234 kB` line.
fn kb_field(line: &str, name: &str) -> Option<u64> {
    let rest = line.strip_prefix(name)?.strip_prefix(':')?;
    let mut words = rest.split_whitespace();
    let value = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") | None => Some(value),
        Some(_) => None,
    }
}

/// Parses the text of `/proc/PID/status`.
pub fn parse_status(text: &str) -> Status {
    let mut status = Status::default();
    for line in text.lines() {
        if let Some(v) = kb_field(line, "VmRSS") {
            status.vm_rss_kb = Some(v);
        } else if let Some(v) = kb_field(line, "VmHWM") {
            status.vm_hwm_kb = Some(v);
        } else if let Some(v) = kb_field(line, "RssAnon") {
            status.rss_anon_kb = Some(v);
        } else if let Some(v) = kb_field(line, "RssFile") {
            status.rss_file_kb = Some(v);
        }
    }
    status
}

/// Parses the text of `/proc/PID/smaps_rollup`.
pub fn parse_smaps_rollup(text: &str) -> SmapsRollup {
    let mut rollup = SmapsRollup::default();
    for line in text.lines() {
        if let Some(v) = kb_field(line, "Pss") {
            rollup.pss_kb = Some(v);
        } else if let Some(v) = kb_field(line, "Private_Dirty") {
            rollup.private_dirty_kb = Some(v);
        }
    }
    rollup
}

/// Parses the text of `/proc/PID/stat`. The command name (field 2) is in
/// parentheses and may itself hold spaces and `)`, so fields are counted
/// from the last `)`.
pub fn parse_stat(text: &str) -> Option<CpuTicks> {
    let after = &text[text.rfind(')')? + 1..];
    // Fields after the name start at 3 (`state`): utime is 14, stime 15.
    let mut fields = after.split_whitespace().skip(14 - 3);
    let utime = fields.next()?.parse().ok()?;
    let stime = fields.next()?.parse().ok()?;
    Some(CpuTicks { utime, stime })
}

/// Reads and parses `/proc/PID/status`.
pub fn read_status(pid: u32) -> io::Result<Status> {
    Ok(parse_status(&fs::read_to_string(format!(
        "/proc/{pid}/status"
    ))?))
}

/// Reads and parses `/proc/PID/smaps_rollup` (Linux 4.14 and later).
pub fn read_smaps_rollup(pid: u32) -> io::Result<SmapsRollup> {
    Ok(parse_smaps_rollup(&fs::read_to_string(format!(
        "/proc/{pid}/smaps_rollup"
    ))?))
}

/// Reads and parses `/proc/PID/stat`.
pub fn read_cpu(pid: u32) -> io::Result<CpuTicks> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::other(format!("unparsable /proc/{pid}/stat")))
}

/// Resets the kernel's peak RSS of the process: writes `5` to
/// `/proc/PID/clear_refs` (proc(5)), after which `VmHWM` restarts from the
/// current `VmRSS`. Needs the process to be ours (or CAP_SYS_PTRACE).
pub fn reset_peak_rss(pid: u32) -> io::Result<()> {
    fs::write(format!("/proc/{pid}/clear_refs"), "5")
}

/// Clock ticks per second, the unit of `/proc/PID/stat` CPU times:
/// `sysconf(_SC_CLK_TCK)` (sysconf(3)), else 100.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Total memory of the machine in kB (`MemTotal` of `/proc/meminfo`).
pub fn mem_total_kb() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|l| kb_field(l, "MemTotal"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from a running `gitstow serve` (Linux 6.x), trimmed.
    const STATUS: &str = "Name:\tgitstow\n\
Umask:\t0022\n\
State:\tS (sleeping)\n\
Tgid:\t41234\n\
Pid:\t41234\n\
VmPeak:\t 1125676 kB\n\
VmSize:\t 1059116 kB\n\
VmLck:\t       0 kB\n\
VmPin:\t       0 kB\n\
VmHWM:\t  176480 kB\n\
VmRSS:\t   23516 kB\n\
RssAnon:\t    9872 kB\n\
RssFile:\t   13644 kB\n\
RssShmem:\t       0 kB\n\
VmData:\t  150236 kB\n\
Threads:\t4\n\
voluntary_ctxt_switches:\t120\n";

    const SMAPS_ROLLUP: &str =
        "55d0c2a4c000-7ffd8b5f3000 ---p 00000000 00:00 0                          [rollup]\n\
Rss:               23516 kB\n\
Pss:               21904 kB\n\
Pss_Dirty:          9901 kB\n\
Pss_Anon:           9872 kB\n\
Pss_File:          12032 kB\n\
Pss_Shmem:             0 kB\n\
Shared_Clean:       1760 kB\n\
Shared_Dirty:          0 kB\n\
Private_Clean:     11856 kB\n\
Private_Dirty:      9900 kB\n\
Referenced:        23516 kB\n\
Anonymous:          9872 kB\n\
Swap:                  0 kB\n";

    #[test]
    fn status_fields_in_kb() {
        let s = parse_status(STATUS);
        assert_eq!(s.vm_rss_kb, Some(23516));
        assert_eq!(s.vm_hwm_kb, Some(176480));
        assert_eq!(s.rss_anon_kb, Some(9872));
        assert_eq!(s.rss_file_kb, Some(13644));
    }

    #[test]
    fn zombie_status_has_no_memory_lines() {
        let s = parse_status("Name:\tgitstow\nState:\tZ (zombie)\nThreads:\t1\n");
        assert_eq!(s, Status::default());
    }

    #[test]
    fn smaps_rollup_pss_and_private_dirty_not_their_lookalikes() {
        let r = parse_smaps_rollup(SMAPS_ROLLUP);
        assert_eq!(r.pss_kb, Some(21904));
        assert_eq!(r.private_dirty_kb, Some(9900));
    }

    #[test]
    fn stat_counts_fields_after_the_last_paren() {
        // comm holds a space and a ')': fields must be counted after the last one.
        let stat = "41234 (git stow) x) S 1 41234 41234 0 -1 4194560 2511 0 0 0 \
                    1234 56 0 0 20 0 4 0 987654 1084534784 5879 18446744073709551615";
        let cpu = parse_stat(stat).unwrap();
        assert_eq!(
            cpu,
            CpuTicks {
                utime: 1234,
                stime: 56
            }
        );
        assert!((cpu.seconds(100) - 12.90).abs() < 1e-9);
        assert_eq!(parse_stat("41234 (gitstow) S 1 2"), None);
    }

    #[test]
    fn live_files_of_this_process() {
        let pid = std::process::id();
        let s = read_status(pid).unwrap();
        assert!(s.vm_rss_kb.unwrap() > 0 && s.rss_anon_kb.is_some());
        assert!(read_smaps_rollup(pid).unwrap().pss_kb.unwrap() > 0);
        read_cpu(pid).unwrap();
        reset_peak_rss(pid).unwrap();
        assert!(clock_ticks_per_second() >= 1);
        assert!(mem_total_kb().unwrap() > 0);
    }
}
