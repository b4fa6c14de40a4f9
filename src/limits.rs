//! Process limits a server sets for itself at start.

/// Raises the soft limit of open files (`RLIMIT_NOFILE`) to the hard limit,
/// as production servers do (nginx's `worker_rlimit_nofile`, systemd's
/// `LimitNOFILE`): every connection, request spool and container read
/// holds a descriptor, and with the soft limit a shell hands down (often
/// 1,024) a thousand idle connections starve `accept` for everyone.
/// Returns the soft limit before and after, and the hard limit.
///
/// # Errors
/// The `getrlimit`/`setrlimit` error; the limit is then unchanged.
pub fn raise_open_files() -> std::io::Result<(u64, u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit that does not exceed the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim = raised;
    }
    Ok((before, lim.rlim_cur, lim.rlim_max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        // Lower the soft limit a little (other tests of this process keep
        // enough descriptors), then raise it.
        let lower = libc::rlimit {
            rlim_cur: lim.rlim_max.min(lim.rlim_cur).saturating_sub(1).max(64),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: a valid rlimit below the hard limit.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lower) }, 0);
        let (before, after, hard) = raise_open_files().unwrap();
        assert_eq!(before, lower.rlim_cur);
        assert_eq!(after, hard);
        assert_eq!(hard, lim.rlim_max);
        let (again, same, _) = raise_open_files().unwrap();
        assert_eq!((again, same), (hard, hard));
    }
}
