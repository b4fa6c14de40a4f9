//! `git-lfs-transfer <path> upload|download`: Git LFS over the SSH channel
//! itself, so LFS over SSH needs no HTTP route (git-lfs
//! `docs/proposals/ssh_adapter.md`; the client it must satisfy is git-lfs
//! 3's `ssh/protocol.go`, `tq/ssh.go` and `locking/ssh.go`).
//!
//! pkt-lines both ways. The server advertises `version=1` and `locking`;
//! then each client message is a command line, `key=value` arguments,
//! optionally a delim-pkt and lines or binary data, and a flush-pkt; each
//! answer is `status <http-code>`, arguments, optionally a delim-pkt and
//! lines or data, and a flush-pkt:
//!
//! | command | answer |
//! |---|---|
//! | `version 1` | `status 200` |
//! | `batch` (`hash-algo=sha256`, lines `<oid> <size>`) | a line `<oid> <size> upload\|download\|noop` per object |
//! | `put-object <oid>` (`size=`, data) | `status 200` once the bytes hashed to the oid; the repository then owns the object |
//! | `verify-object <oid>` (`size=`) | `status 200` when the repository owns the object at that size |
//! | `get-object <oid>` | `status 200`, `size=`, the bytes |
//! | `lock` (`path=`) | `status 201` and the lock (`id=`, `path=`, `locked-at=`, `ownername=`); 409 and the holder's |
//! | `list-lock` / `list-locks` (`cursor=`, `limit=`, `path=`, `id=`) | lines `lock <id>`, `path <id> …`, `locked-at <id> …`, `ownername <id> …`, `owner <id> ours\|theirs`; `next-cursor=` |
//! | `unlock <id>` (`force=true`) | `status 200` and the lock removed |
//! | `quit` | `status 200`, and the session ends |
//!
//! The objects, their ownership and the locks are [`gitstow_lfs`]'s, as
//! over HTTP. An error answer is `status 4xx/5xx`, a delim-pkt and one
//! line of text that names no server path.
//!
//! - this module: the [`Session`] and its message loop;
//! - `objects`: `batch`, `put-object`, `verify-object`, `get-object`;
//! - `locking`: `lock`, `list-lock`, `unlock`;
//! - `wire`: messages and answers in pkt-lines; `run`: a session on an
//!   SSH channel.

use std::io::{BufWriter, Read, Write};
use std::path::Path;

mod locking;
mod objects;
pub(crate) mod run;
mod wire;

use wire::{drain, read_message, refuse, status, Refusal};

use gitstow_protocol::pktline::{self, PktReader};
use gitstow_store::ObjectStore;

/// Arguments one message may carry (the client sends at most five).
const MAX_ARGS: usize = 64;

/// Bytes of an object read from the store at a time for `get-object`.
const READ_CHUNK: u64 = 4 << 20;

/// One session's settings.
pub(crate) struct Session<'a> {
    /// The store of the objects and locks.
    pub(crate) store: &'a dyn ObjectStore,
    /// The repository (`org/repo`).
    pub(crate) repo: &'a str,
    /// `upload` (put, verify, lock) rather than `download` (get, list).
    pub(crate) upload: bool,
    /// Whether the key's token may remove another owner's lock (`admin`).
    pub(crate) admin: bool,
    /// The lock owner's name: the token's ([`gitstow_lfs::locks::ANONYMOUS`] with
    /// access control off).
    pub(crate) owner: String,
    /// Largest object accepted, in bytes.
    pub(crate) max_size: u64,
    /// Where uploads are spooled before they are hashed and stored
    /// (`None`: the system's temp directory).
    pub(crate) staging_dir: Option<&'a Path>,
    /// Now, in seconds since the epoch (lock dates).
    pub(crate) now: fn() -> u64,
}

/// Why a session ended before the client's `quit`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Ended {
    /// The client broke the protocol (what is said on stderr).
    #[error("{0}")]
    Protocol(String),
    /// Reading from or writing to the channel failed, or the client left.
    #[error("the connection failed: {0}")]
    Io(#[from] std::io::Error),
}

impl From<pktline::PktError> for Ended {
    fn from(e: pktline::PktError) -> Self {
        match e {
            pktline::PktError::Io(e) => Ended::Io(e),
            other => Ended::Protocol(other.to_string()),
        }
    }
}

impl Session<'_> {
    /// Runs the session: the capabilities, then one message after another
    /// until the client's `quit` (Ok) or EOF.
    ///
    /// # Errors
    /// [`Ended`] when the client breaks the protocol or the channel fails.
    pub(crate) fn serve(&self, input: impl Read, out: impl Write) -> Result<(), Ended> {
        let mut input = PktReader::new(std::io::BufReader::with_capacity(64 << 10, input));
        let mut out = BufWriter::with_capacity(64 << 10, out);
        pktline::write_text(&mut out, "version=1")?;
        pktline::write_text(&mut out, "locking")?;
        pktline::write_flush(&mut out)?;
        out.flush()?;
        let mut versioned = false;
        loop {
            let Some(message) = read_message(&mut input)? else {
                return Ok(());
            };
            let command = message.command.clone();
            let (verb, rest) = command.split_once(' ').unwrap_or((command.as_str(), ""));
            let answered = match verb {
                "version" => {
                    drain(&mut input, &message)?;
                    versioned = rest == "1";
                    if versioned {
                        status(&mut out, 200, &[])
                    } else {
                        refuse(&mut out, Refusal(400, format!("unknown version {rest}")))
                    }
                }
                "quit" => {
                    drain(&mut input, &message)?;
                    status(&mut out, 200, &[])?;
                    out.flush()?;
                    return Ok(());
                }
                _ if !versioned => {
                    return Err(Ended::Protocol(format!(
                        "{verb} before the version was agreed"
                    )))
                }
                "batch" => self.batch(&mut input, &mut out, &message),
                "put-object" => self.put_object(&mut input, &mut out, &message, rest),
                "verify-object" => {
                    drain(&mut input, &message)?;
                    self.verify_object(&mut out, &message, rest)
                }
                "get-object" => {
                    drain(&mut input, &message)?;
                    self.get_object(&mut out, rest)
                }
                "lock" => {
                    drain(&mut input, &message)?;
                    self.lock(&mut out, &message)
                }
                "list-lock" | "list-locks" => {
                    drain(&mut input, &message)?;
                    self.list_locks(&mut out, &message)
                }
                "unlock" => {
                    drain(&mut input, &message)?;
                    self.unlock(&mut out, &message, rest)
                }
                _ => {
                    drain(&mut input, &message)?;
                    refuse(&mut out, Refusal(400, format!("unknown command {verb}")))
                }
            };
            answered?;
            out.flush()?;
        }
    }
}

/// A server-side failure: logged, answered in the fault's one text (507
/// out of space, 503 store down, 500 otherwise), as over HTTP.
fn store_failed(context: &str, error: &(dyn std::error::Error + 'static)) -> Refusal {
    use gitstow_store::ServerFault;
    tracing::error!(error = %error, "ssh: LFS: {context} failed");
    let fault = ServerFault::of(error);
    let code = match fault {
        ServerFault::OutOfSpace => 507,
        ServerFault::StoreDown => 503,
        ServerFault::Internal => 500,
    };
    Refusal(code, fault.text().to_owned())
}

#[cfg(test)]
mod tests;
