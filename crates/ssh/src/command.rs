//! The command of an SSH `exec` request, as git's `connect.c` sends it:
//! `git-upload-pack '/org/repo.git'` (the path quoted by `sq_quote`: in
//! single quotes, a `'` or `!` inside written `'\''` and `'\!'`), with the
//! path absolute for `ssh://host/org/repo.git` and relative for the
//! scp-like `host:org/repo.git`; `git upload-pack …` (a space) from older
//! clients and other tools.

use gitstow_protocol::Service;

/// A git command a client asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// upload-pack (fetch, clone) or receive-pack (push).
    pub service: Service,
    /// The repository name as HTTP URLs carry it: no leading `/`, no
    /// trailing `/` nor `.git` (`org/repo`), checked by
    /// `gitstow_service::repo_name::validate`.
    pub repo: String,
}

/// What an `exec` request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// git-upload-pack or git-receive-pack.
    Git(Exec),
    /// `git-lfs-authenticate <path> upload|download` (git-lfs
    /// `docs/api/server-discovery.md`): where the LFS API is and how to
    /// authenticate to it.
    LfsAuthenticate {
        /// The repository, as [`Exec::repo`].
        repo: String,
        /// `upload` rather than `download`.
        upload: bool,
    },
    /// `git-lfs-transfer <path> upload|download` (git-lfs
    /// `docs/proposals/ssh_adapter.md`): Git LFS over this channel
    /// ([`crate::lfs_transfer`]).
    LfsTransfer {
        /// The repository, as [`Exec::repo`].
        repo: String,
        /// `upload` rather than `download`.
        upload: bool,
    },
}

/// Why a command is refused (the text goes to the client's stderr).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// Not git-upload-pack nor git-receive-pack (a shell command, scp, …).
    #[error(
        "gitstow runs only git-upload-pack, git-receive-pack, git-lfs-transfer and git-lfs-authenticate over SSH"
    )]
    NotGit,
    /// The path is not quoted as git quotes it, or is empty.
    #[error("the repository path is not quoted as git quotes it")]
    BadQuoting,
    /// The name breaks the rules of repository names.
    #[error("{0}")]
    BadName(String),
}

/// Longest command accepted (git's paths are far shorter; sshd takes 256 KiB).
pub const MAX_COMMAND: usize = 4096;

/// Parses the command of an `exec` request.
///
/// # Errors
/// [`ExecError`] when it is not one of git's two commands with one quoted
/// (or, for hand-typed commands, bare) path naming a valid repository.
pub fn parse(command: &[u8]) -> Result<Exec, ExecError> {
    if command.len() > MAX_COMMAND {
        return Err(ExecError::NotGit);
    }
    let command = std::str::from_utf8(command).map_err(|_| ExecError::NotGit)?;
    let (program, arg) = command.trim().split_once(' ').ok_or(ExecError::NotGit)?;
    let (program, arg) = match program {
        "git" => arg.trim_start().split_once(' ').ok_or(ExecError::NotGit)?,
        p => (p, arg),
    };
    let service = match program.strip_prefix("git-").unwrap_or(program) {
        "upload-pack" => Service::UploadPack,
        "receive-pack" => Service::ReceivePack,
        _ => return Err(ExecError::NotGit),
    };
    let path = unquote(arg.trim())?;
    Ok(Exec {
        service,
        repo: repo_name(&path)?,
    })
}

/// Parses the command of an `exec` request: one of git's two commands
/// ([`parse`]), or `git-lfs-authenticate <path> upload|download` or
/// `git-lfs-transfer <path> upload|download`, the path quoted as git
/// quotes it or bare.
///
/// # Errors
/// [`ExecError`] for anything else.
pub fn parse_command(command: &[u8]) -> Result<Command, ExecError> {
    if command.len() > MAX_COMMAND {
        return Err(ExecError::NotGit);
    }
    let text = std::str::from_utf8(command).map_err(|_| ExecError::NotGit)?;
    let text = text.trim();
    let (rest, transfer) = if let Some(rest) = text.strip_prefix("git-lfs-authenticate ") {
        (rest, false)
    } else if let Some(rest) = text.strip_prefix("git-lfs-transfer ") {
        (rest, true)
    } else {
        return parse(command).map(Command::Git);
    };
    let (path, operation) = rest.trim().rsplit_once(' ').ok_or(ExecError::NotGit)?;
    let upload = match operation {
        "upload" => true,
        "download" => false,
        _ => return Err(ExecError::NotGit),
    };
    let repo = repo_name(&unquote(path.trim())?)?;
    Ok(if transfer {
        Command::LfsTransfer { repo, upload }
    } else {
        Command::LfsAuthenticate { repo, upload }
    })
}

/// The argument without git's `sq_quote` quoting; a bare word (no quotes,
/// no shell metacharacters) is taken as is.
fn unquote(arg: &str) -> Result<String, ExecError> {
    if !arg.starts_with('\'') {
        let plain = !arg.is_empty()
            && arg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-~".contains(&b));
        return plain.then(|| arg.to_owned()).ok_or(ExecError::BadQuoting);
    }
    let mut out = String::new();
    let mut rest = arg;
    loop {
        // Inside quotes up to the closing one.
        let body = rest.strip_prefix('\'').ok_or(ExecError::BadQuoting)?;
        let end = body.find('\'').ok_or(ExecError::BadQuoting)?;
        out.push_str(&body[..end]);
        rest = &body[end + 1..];
        if rest.is_empty() {
            return Ok(out);
        }
        // Between quoted parts only `\'` and `\!` (sq_quote's escapes).
        let (c, after) = match rest.as_bytes() {
            [b'\\', c @ (b'\'' | b'!'), ..] => (*c as char, &rest[2..]),
            _ => return Err(ExecError::BadQuoting),
        };
        out.push(c);
        rest = after;
    }
}

/// `/org/repo.git/` → `org/repo`, checked.
fn repo_name(path: &str) -> Result<String, ExecError> {
    let name = path.trim_start_matches('/').trim_end_matches('/');
    let name = name.strip_suffix(".git").unwrap_or(name);
    gitstow_service::repo_name::validate(name).map_err(|e| ExecError::BadName(e.to_string()))?;
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_lfs_authenticate() {
        let lfs = |c: &str| parse_command(c.as_bytes());
        assert_eq!(
            lfs("git-lfs-authenticate org/repo.git upload"),
            Ok(Command::LfsAuthenticate {
                repo: "org/repo".into(),
                upload: true
            })
        );
        assert_eq!(
            lfs("git-lfs-authenticate '/org/repo.git' download"),
            Ok(Command::LfsAuthenticate {
                repo: "org/repo".into(),
                upload: false
            })
        );
        for bad in [
            "git-lfs-authenticate org/repo.git delete",
            "git-lfs-authenticate org/repo.git",
            "git-lfs-authenticate '../x' upload",
            "git-lfs-authenticate org/repo.git;id upload",
            "git-lfs-transfer org/repo.git lock",
            "git-lfs-transfer '../x' download",
            "git-lfs-transfer org/repo.git",
        ] {
            assert!(lfs(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            lfs("git-upload-pack 'org/r.git'"),
            Ok(Command::Git(Exec { .. }))
        ));
        // git-lfs 3's pure-SSH protocol, as its client runs it.
        assert_eq!(
            lfs("git-lfs-transfer 'org/repo.git' upload"),
            Ok(Command::LfsTransfer {
                repo: "org/repo".into(),
                upload: true
            })
        );
        assert_eq!(
            lfs("git-lfs-transfer /org/repo download"),
            Ok(Command::LfsTransfer {
                repo: "org/repo".into(),
                upload: false
            })
        );
    }

    fn ok(cmd: &str) -> (Service, String) {
        let e = parse(cmd.as_bytes()).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        (e.service, e.repo)
    }

    #[test]
    fn commands_as_git_sends_them() {
        // ssh://host/org/repo.git
        assert_eq!(
            ok("git-upload-pack '/org/repo.git'"),
            (Service::UploadPack, "org/repo".into())
        );
        // host:org/repo.git
        assert_eq!(
            ok("git-receive-pack 'org/repo.git'"),
            (Service::ReceivePack, "org/repo".into())
        );
        assert_eq!(
            ok("git-upload-pack 'repo'"),
            (Service::UploadPack, "repo".into())
        );
        assert_eq!(
            ok("git upload-pack '/repo.git/'"),
            (Service::UploadPack, "repo".into())
        );
        assert_eq!(
            ok("git-upload-pack /org/r.git"),
            (Service::UploadPack, "org/r".into())
        );
    }

    #[test]
    fn sq_quote_escapes_are_undone_and_then_checked() {
        // git quotes a `'` in a path as '\'' : the name is then refused by
        // the name rules, not by the quoting.
        assert!(matches!(
            parse(br"git-upload-pack 'it'\''s.git'"),
            Err(ExecError::BadName(_))
        ));
        assert_eq!(unquote(r"'a'\''b'\!'c'").unwrap(), "a'b!c");
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            "",
            "ls -la",
            "sh -c 'id'",
            "git-upload-archive 'repo.git'",
            "scp -t /tmp",
            "git-upload-pack",
            "git-upload-pack 'repo.git",
            "git-upload-pack 'repo.git' ; id",
            "git-upload-pack 'repo.git''more'",
            "git-upload-pack repo.git;id",
            "git-upload-pack '../etc/passwd'",
            "git-upload-pack '/org/../x.git'",
            "git-upload-pack ''",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(parse(&[b'a'; MAX_COMMAND + 1]).is_err());
        assert!(parse(b"git-upload-pack '\xff'").is_err());
    }
}
