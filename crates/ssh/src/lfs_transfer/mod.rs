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

use std::io::{BufWriter, Read, Write};
use std::path::Path;

pub(crate) mod run;
mod wire;

use wire::{drain, read_line, read_message, refuse, status, Message, Refusal};

use gitstow_lfs::locks::{self, Created, Lock, LockError, Unlocked};
use gitstow_lfs::objects::{self, Hashing, ObjectError};
use gitstow_lfs::Oid;
use gitstow_protocol::pktline::{self, Packet, PktReader, MAX_DATA_LEN};
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
    /// The lock owner's name: the token's ([`locks::ANONYMOUS`] with
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

    /// `batch`: an action per object.
    fn batch(
        &self,
        input: &mut PktReader<impl Read>,
        out: &mut impl Write,
        message: &Message,
    ) -> Result<(), Ended> {
        let mut lines = Vec::new();
        if message.delim {
            while let Some(line) = read_line(input)? {
                // Lines past the cap are read (the stream stays in step)
                // and the batch refused.
                if lines.len() <= gitstow_lfs::api::MAX_OBJECTS {
                    lines.push(line);
                }
            }
        }
        if let Some(algo) = message.arg("hash-algo").filter(|a| *a != "sha256") {
            return refuse(
                out,
                Refusal(
                    409,
                    format!("unsupported hash algorithm '{algo}': this server uses sha256"),
                ),
            );
        }
        if lines.len() > gitstow_lfs::api::MAX_OBJECTS {
            return refuse(
                out,
                Refusal(
                    413,
                    format!(
                        "too many objects in one batch (at most {})",
                        gitstow_lfs::api::MAX_OBJECTS
                    ),
                ),
            );
        }
        let mut answer = Vec::with_capacity(lines.len());
        for line in &lines {
            let mut words = line.split(' ');
            let (Some(oid), Some(size)) = (
                words.next().and_then(Oid::parse),
                words.next().and_then(|s| s.parse::<u64>().ok()),
            ) else {
                return refuse(out, Refusal(422, format!("not an object line: {line:?}")));
            };
            if self.upload && size > self.max_size {
                return refuse(
                    out,
                    Refusal(
                        413,
                        format!(
                            "object {oid} is {size} bytes, more than the largest accepted ({})",
                            self.max_size
                        ),
                    ),
                );
            }
            let owned = match objects::owned_size(self.store, self.repo, &oid) {
                Ok(owned) => owned,
                Err(e) => return refuse(out, store_failed("answering a batch", &e)),
            };
            let action = match (self.upload, owned) {
                (true, Some(_)) => "noop",
                (true, None) => "upload",
                (false, Some(n)) if n == size => "download",
                // Not the repository's (or another size): nothing to fetch;
                // git-lfs then says the object is not on the server.
                (false, _) => "noop",
            };
            answer.push(format!("{oid} {size} {action}"));
        }
        pktline::write_text(out, "status 200")?;
        pktline::write_text(out, "hash-algo=sha256")?;
        pktline::write_delim(out)?;
        for line in answer {
            pktline::write_text(out, &line)?;
        }
        pktline::write_flush(out).map_err(Ended::from)
    }

    /// `put-object <oid>`: the bytes spooled and hashed, then stored and
    /// owned (as a PUT through gitstow over HTTP).
    fn put_object(
        &self,
        input: &mut PktReader<impl Read>,
        out: &mut impl Write,
        message: &Message,
        oid: &str,
    ) -> Result<(), Ended> {
        let spool = match self.staging_dir {
            Some(dir) => tempfile::NamedTempFile::new_in(dir),
            None => tempfile::NamedTempFile::new(),
        };
        let spool = match spool {
            Ok(f) => f,
            Err(e) => {
                drain(input, message)?;
                return refuse(out, store_failed("spooling an upload", &e));
            }
        };
        let mut writer = Hashing::new(BufWriter::with_capacity(256 << 10, spool.as_file()));
        // Everything is read (the stream stays in step); what is kept
        // stops at the cap, and the upload is then refused.
        let mut over = false;
        let mut failed = None;
        if message.delim {
            while let Some(packet) = input.read_packet()? {
                match packet {
                    Packet::Flush => break,
                    Packet::Data(data) => {
                        if over || failed.is_some() {
                            continue;
                        }
                        if let Err(e) = writer.write_all(&data) {
                            failed = Some(e);
                        }
                    }
                    Packet::Delim | Packet::ResponseEnd => {
                        return Err(Ended::Protocol(
                            "a special packet inside an object's data".into(),
                        ))
                    }
                }
                over |= writer.len() > self.max_size;
            }
        }
        if !self.upload {
            return refuse(out, Refusal(403, "this session only downloads".into()));
        }
        let Some(oid) = Oid::parse(oid) else {
            return refuse(out, Refusal(422, format!("not an object id: {oid:?}")));
        };
        let Some(size) = message.size() else {
            return refuse(out, Refusal(422, "put-object without size=".into()));
        };
        if over {
            return refuse(
                out,
                Refusal(
                    413,
                    format!("more than the largest object accepted ({})", self.max_size),
                ),
            );
        }
        if let Some(e) = failed {
            return refuse(out, store_failed("spooling an upload", &e));
        }
        let (buffered, hashed) = writer.finish();
        if let Err(e) = buffered.into_inner().map_err(|e| e.into_error()) {
            return refuse(out, store_failed("spooling an upload", &e));
        }
        match objects::accept(self.store, self.repo, &oid, size, hashed, spool.path()) {
            Ok(()) => status(out, 200, &[]),
            Err(e @ (ObjectError::WrongContent(_) | ObjectError::WrongSize { .. })) => {
                refuse(out, Refusal(422, e.to_string()))
            }
            Err(ObjectError::Store(e)) => refuse(out, store_failed("storing an upload", &e)),
        }
    }

    /// `verify-object <oid>`: whether the repository owns it at `size=`.
    fn verify_object(
        &self,
        out: &mut impl Write,
        message: &Message,
        oid: &str,
    ) -> Result<(), Ended> {
        let Some(oid) = Oid::parse(oid.split(' ').next().unwrap_or("")) else {
            return refuse(out, Refusal(422, format!("not an object id: {oid:?}")));
        };
        // The spec puts the size on the command line, git-lfs sends `size=`.
        let size = message.size().or_else(|| {
            message
                .command
                .rsplit(' ')
                .next()
                .and_then(|s| s.parse().ok())
        });
        match objects::owned_size(self.store, self.repo, &oid) {
            Ok(Some(n)) if Some(n) == size => status(out, 200, &[]),
            Ok(_) => refuse(out, Refusal(404, format!("object {oid} not found"))),
            Err(e) => refuse(out, store_failed("verifying an upload", &e)),
        }
    }

    /// `get-object <oid>`: the bytes, read from the store a chunk at a time.
    fn get_object(&self, out: &mut impl Write, oid: &str) -> Result<(), Ended> {
        let Some(oid) = Oid::parse(oid) else {
            return refuse(out, Refusal(422, format!("not an object id: {oid:?}")));
        };
        let size = match objects::owned_size(self.store, self.repo, &oid) {
            Ok(Some(n)) => n,
            Ok(None) => return refuse(out, Refusal(404, format!("object {oid} not found"))),
            Err(e) => return refuse(out, store_failed("reading an object", &e)),
        };
        // The first chunk is read before the answer starts: a store that
        // fails then still gets a status.
        let end = size.min(READ_CHUNK);
        let first = match objects::read(self.store, &oid, 0..end) {
            Ok(bytes) => bytes,
            Err(e) => return refuse(out, store_failed("reading an object", &e)),
        };
        pktline::write_text(out, "status 200")?;
        pktline::write_text(out, &format!("size={size}"))?;
        pktline::write_delim(out)?;
        let mut chunk = first;
        let mut at = end;
        loop {
            for piece in chunk.chunks(MAX_DATA_LEN) {
                pktline::write_data(out, piece)?;
            }
            if at >= size {
                break;
            }
            let end = size.min(at + READ_CHUNK);
            chunk = objects::read(self.store, &oid, at..end).map_err(|e| {
                tracing::error!(repo = self.repo, %oid, error = %e, "ssh: reading an LFS object failed mid-answer");
                // The client sees a short object and refuses it.
                Ended::Io(std::io::Error::other("the store failed"))
            })?;
            at = end;
        }
        pktline::write_flush(out).map_err(Ended::from)
    }

    /// `lock`: a new lock on `path=`, or 409 and the one that holds it.
    fn lock(&self, out: &mut impl Write, message: &Message) -> Result<(), Ended> {
        if !self.upload {
            return refuse(out, Refusal(403, "locking needs write access".into()));
        }
        let Some(path) = message.arg("path") else {
            return refuse(out, Refusal(422, "lock without path=".into()));
        };
        match locks::create(self.store, self.repo, path, &self.owner, (self.now)()) {
            Ok(Created::New(lock)) => status(out, 201, &lock_args(&lock)),
            Ok(Created::Exists(lock)) => {
                pktline::write_text(out, "status 409")?;
                for arg in lock_args(&lock) {
                    pktline::write_text(out, &arg)?;
                }
                pktline::write_delim(out)?;
                pktline::write_text(out, "lock already created")?;
                pktline::write_flush(out).map_err(Ended::from)
            }
            Err(e) => refuse(out, lock_failed(e)),
        }
    }

    /// `list-lock` (and git-lfs's `list-locks` for verify): a page of
    /// locks, each marked ours or theirs.
    fn list_locks(&self, out: &mut impl Write, message: &Message) -> Result<(), Ended> {
        let all = match locks::all(self.store, self.repo) {
            Ok(all) => all,
            Err(e) => return refuse(out, lock_failed(e)),
        };
        let path = message.arg("path");
        let id = message.arg("id");
        let limit = message
            .arg("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let page = locks::page(
            &all,
            |l| path.is_none_or(|p| l.path == p) && id.is_none_or(|i| l.id == i),
            message.arg("cursor"),
            limit,
        );
        pktline::write_text(out, "status 200")?;
        if let Some(next) = &page.next_cursor {
            pktline::write_text(out, &format!("next-cursor={next}"))?;
        }
        pktline::write_delim(out)?;
        for l in &page.locks {
            let who = if l.owner.name == self.owner {
                "ours"
            } else {
                "theirs"
            };
            pktline::write_text(out, &format!("lock {}", l.id))?;
            pktline::write_text(out, &format!("path {} {}", l.id, l.path))?;
            pktline::write_text(out, &format!("locked-at {} {}", l.id, l.locked_at))?;
            pktline::write_text(out, &format!("ownername {} {}", l.id, l.owner.name))?;
            pktline::write_text(out, &format!("owner {} {who}", l.id))?;
        }
        pktline::write_flush(out).map_err(Ended::from)
    }

    /// `unlock <id>`: one's own lock, or another's with `force=true` and
    /// admin rights.
    fn unlock(&self, out: &mut impl Write, message: &Message, id: &str) -> Result<(), Ended> {
        if !self.upload {
            return refuse(out, Refusal(403, "unlocking needs write access".into()));
        }
        let force = message.arg("force") == Some("true");
        if force && !self.admin {
            return refuse(
                out,
                Refusal(
                    403,
                    "removing another owner's lock needs admin access".into(),
                ),
            );
        }
        match locks::unlock(self.store, self.repo, id, &self.owner, force) {
            Ok(Unlocked::Removed(lock)) => status(out, 200, &lock_args(&lock)),
            Ok(Unlocked::NotFound) => refuse(out, Refusal(404, format!("no lock has id {id}"))),
            Ok(Unlocked::NotOwner(lock)) => refuse(
                out,
                Refusal(
                    403,
                    format!(
                        "the lock on {} is {}'s: unlock it with --force (admin only)",
                        lock.path, lock.owner.name
                    ),
                ),
            ),
            Err(e) => refuse(out, lock_failed(e)),
        }
    }
}

/// `id=`, `path=`, `locked-at=`, `ownername=` of `lock`.
fn lock_args(lock: &Lock) -> Vec<String> {
    vec![
        format!("id={}", lock.id),
        format!("path={}", lock.path),
        format!("locked-at={}", lock.locked_at),
        format!("ownername={}", lock.owner.name),
    ]
}

/// A lock operation's failure as an answer.
fn lock_failed(e: LockError) -> Refusal {
    match e {
        LockError::BadPath(_) => Refusal(422, e.to_string()),
        LockError::TooMany => Refusal(409, e.to_string()),
        LockError::Busy => Refusal(503, e.to_string()),
        LockError::Corrupt(_) | LockError::Store(_) => store_failed("a lock operation", &e),
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
mod tests {
    use super::*;

    /// The client's side of a session: pkt-lines written as git-lfs writes
    /// them.
    #[derive(Default)]
    struct Client(Vec<u8>);

    impl Client {
        fn text(mut self, line: &str) -> Self {
            pktline::write_text(&mut self.0, line).unwrap();
            self
        }
        fn data(mut self, bytes: &[u8]) -> Self {
            for piece in bytes.chunks(MAX_DATA_LEN) {
                pktline::write_data(&mut self.0, piece).unwrap();
            }
            self
        }
        fn delim(mut self) -> Self {
            pktline::write_delim(&mut self.0).unwrap();
            self
        }
        fn flush(mut self) -> Self {
            pktline::write_flush(&mut self.0).unwrap();
            self
        }
    }

    /// The server's answers, as text: `|` for a delim-pkt, `.` for a
    /// flush-pkt, binary data as `<N bytes>`.
    fn answers(bytes: &[u8]) -> Vec<String> {
        let mut r = PktReader::new(bytes);
        let mut out = Vec::new();
        while let Some(p) = r.read_packet().unwrap() {
            out.push(match p {
                Packet::Flush => ".".into(),
                Packet::Delim => "|".into(),
                Packet::ResponseEnd => "0002".into(),
                Packet::Data(d) => match std::str::from_utf8(&d) {
                    Ok(t) if t.ends_with('\n') && t.len() < 200 => t.trim_end().to_owned(),
                    _ => format!("<{} bytes>", d.len()),
                },
            });
        }
        out
    }

    fn oid_of(bytes: &[u8]) -> Oid {
        let mut h = Hashing::new(Vec::new());
        h.write_all(bytes).unwrap();
        h.finish().1 .0
    }

    fn session<'a>(store: &'a dyn ObjectStore, upload: bool, owner: &str) -> Session<'a> {
        Session {
            store,
            repo: "org/app",
            upload,
            admin: false,
            owner: owner.into(),
            max_size: 1 << 20,
            staging_dir: None,
            now: || 1_800_000_000,
        }
    }

    fn run(session: &Session<'_>, client: Client) -> (Result<(), Ended>, Vec<String>) {
        let mut out = Vec::new();
        let r = session.serve(&client.0[..], &mut out);
        (r, answers(&out))
    }

    #[test]
    fn an_upload_then_a_download_as_git_lfs_runs_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let mut bytes = b"large file content\n".repeat(5000);
        bytes.push(b'!');
        let oid = oid_of(&bytes);
        let size = bytes.len();
        let half = size / 2;
        let client = Client::default()
            .text("version 1")
            .flush()
            .text("batch")
            .text("transfer=ssh")
            .text("hash-algo=sha256")
            .text("refname=refs/heads/main")
            .delim()
            .text(&format!("{oid} {size}"))
            .flush()
            // wrong bytes first: refused, nothing owned
            .text(&format!("put-object {oid}"))
            .text(&format!("size={size}"))
            .delim()
            .data(&bytes[..half])
            .flush()
            .text(&format!("verify-object {oid}"))
            .text(&format!("size={size}"))
            .flush()
            .text(&format!("put-object {oid}"))
            .text(&format!("size={size}"))
            .delim()
            .data(&bytes[..half])
            .data(&bytes[half..])
            .flush()
            .text(&format!("verify-object {oid}"))
            .text(&format!("size={size}"))
            .flush()
            .text("quit")
            .flush();
        let (r, got) = run(&session(&store, true, "dev"), client);
        r.unwrap();
        assert_eq!(
            got,
            [
                "version=1",
                "locking",
                ".",
                "status 200",
                ".",
                "status 200",
                "hash-algo=sha256",
                "|",
                &format!("{oid} {size} upload"),
                ".",
                "status 422",
                "|",
                &format!("expected {size} bytes, received {half}"),
                ".",
                "status 404",
                "|",
                &format!("object {oid} not found"),
                ".",
                "status 200",
                ".",
                "status 200",
                ".",
                "status 200",
                ".",
            ]
        );
        // Now owned: a second batch says noop; a download session gets it.
        let (_, got) = run(
            &session(&store, false, "reader"),
            Client::default()
                .text("version 1")
                .flush()
                .text("batch")
                .delim()
                .text(&format!("{oid} {size}"))
                .text(&format!("{} 5", oid_of(b"other")))
                .flush()
                .text(&format!("get-object {oid}"))
                .flush()
                .text(&format!("put-object {oid}"))
                .text(&format!("size={size}"))
                .delim()
                .data(&bytes)
                .flush(),
        );
        let pieces = size.div_ceil(MAX_DATA_LEN);
        let mut want: Vec<String> = [
            "version=1",
            "locking",
            ".",
            "status 200",
            ".",
            "status 200",
            "hash-algo=sha256",
            "|",
        ]
        .map(String::from)
        .to_vec();
        want.push(format!("{oid} {size} download"));
        want.push(format!("{} 5 noop", oid_of(b"other")));
        want.extend([".", "status 200"].map(String::from));
        want.push(format!("size={size}"));
        want.push("|".into());
        assert_eq!(got[..want.len()], want[..]);
        let data: Vec<&String> = got[want.len()..want.len() + pieces].iter().collect();
        assert!(data.iter().all(|d| d.starts_with('<')), "{data:?}");
        assert_eq!(
            got[want.len() + pieces..],
            [".", "status 403", "|", "this session only downloads", "."]
        );
    }

    #[test]
    fn locks_are_taken_listed_and_removed_by_their_owner() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let lock = |s: &Session<'_>, path: &str| {
            run(
                s,
                Client::default()
                    .text("version 1")
                    .flush()
                    .text("lock")
                    .text(&format!("path={path}"))
                    .text("refname=refs/heads/main")
                    .delim()
                    .flush(),
            )
            .1
        };
        let dev = session(&store, true, "dev");
        let got = lock(&dev, "assets/a.psd");
        assert_eq!(got[5], "status 201", "{got:?}");
        let id = got[6].strip_prefix("id=").unwrap().to_owned();
        assert_eq!(
            got[7..11],
            [
                "path=assets/a.psd".to_owned(),
                "locked-at=2027-01-15T08:00:00Z".to_owned(),
                "ownername=dev".to_owned(),
                ".".to_owned()
            ]
        );
        // another owner: 409 and the holder
        let got = lock(&session(&store, true, "eve"), "assets/a.psd");
        assert_eq!(got[5], "status 409", "{got:?}");
        assert!(got.contains(&"ownername=dev".to_owned()), "{got:?}");
        // a download session may list but not lock
        let reader = session(&store, false, "reader");
        assert_eq!(
            lock(&reader, "b")[5..8],
            ["status 403", "|", "locking needs write access"]
        );
        let (_, got) = run(
            &reader,
            Client::default()
                .text("version 1")
                .flush()
                .text("list-lock")
                .text("limit=10")
                .flush(),
        );
        assert_eq!(
            got[5..],
            [
                "status 200".to_owned(),
                "|".to_owned(),
                format!("lock {id}"),
                format!("path {id} assets/a.psd"),
                format!("locked-at {id} 2027-01-15T08:00:00Z"),
                format!("ownername {id} dev"),
                format!("owner {id} theirs"),
                ".".to_owned()
            ]
        );
        // eve cannot unlock it, not even by force without admin; dev can
        let unlock = |s: &Session<'_>, force: bool| {
            let mut c = Client::default()
                .text("version 1")
                .flush()
                .text(&format!("unlock {id}"));
            if force {
                c = c.text("force=true");
            }
            run(s, c.flush()).1
        };
        assert_eq!(
            unlock(&session(&store, true, "eve"), false)[5],
            "status 403"
        );
        assert_eq!(unlock(&session(&store, true, "eve"), true)[5], "status 403");
        assert_eq!(unlock(&dev, false)[5], "status 200");
        assert_eq!(unlock(&dev, false)[5], "status 404");
    }

    #[test]
    fn a_broken_session_ends_with_a_protocol_error_and_stores_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = gitstow_store::FsStore::new(dir.path()).unwrap();
        let dev = session(&store, true, "dev");
        // a command before the version
        let (r, _) = run(&dev, Client::default().text("batch").flush());
        assert!(matches!(r, Err(Ended::Protocol(_))), "{r:?}");
        // too many arguments
        let mut c = Client::default().text("version 1").flush().text("lock");
        for i in 0..=MAX_ARGS {
            c = c.text(&format!("a{i}=b"));
        }
        let (r, _) = run(&dev, c.flush());
        assert!(matches!(r, Err(Ended::Protocol(_))), "{r:?}");
        // hung up inside a message
        let (r, _) = run(
            &dev,
            Client::default().text("version 1").flush().text("lock"),
        );
        assert!(matches!(r, Err(Ended::Protocol(_))), "{r:?}");
        // an upload over the size cap is read and refused
        let big = vec![7u8; (1 << 20) + 10];
        let mut c = Client::default()
            .text("version 1")
            .flush()
            .text(&format!("put-object {}", oid_of(&big)))
            .text(&format!("size={}", big.len()))
            .delim();
        c = c.data(&big);
        let (r, got) = run(&dev, c.flush().text("quit").flush());
        r.unwrap();
        assert_eq!(got[5..7], ["status 413", "|"]);
        assert_eq!(got[got.len() - 2..], ["status 200", "."]);
        // an unknown hash algorithm, an unknown command
        let (_, got) = run(
            &dev,
            Client::default()
                .text("version 1")
                .flush()
                .text("batch")
                .text("hash-algo=sha1")
                .delim()
                .flush()
                .text("frobnicate")
                .flush(),
        );
        assert_eq!(got[5], "status 409");
        assert_eq!(got[9..11], ["status 400", "|"]);
        assert!(store.list("").unwrap().is_empty(), "nothing stored");
    }
}
