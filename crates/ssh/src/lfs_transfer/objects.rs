//! The object commands of a session: `batch`, `put-object`,
//! `verify-object` and `get-object`, over [`gitstow_lfs::objects`] as the
//! HTTP batch API's transfers are.

use std::io::{BufWriter, Read, Write};

use gitstow_lfs::objects::{self, Hashing, ObjectError};
use gitstow_lfs::Oid;
use gitstow_protocol::pktline::{self, Packet, PktReader, MAX_DATA_LEN};

use super::wire::{drain, read_line, refuse, status, Message, Refusal};
use super::{store_failed, Ended, Session, READ_CHUNK};

impl Session<'_> {
    /// `batch`: an action per object.
    pub(super) fn batch(
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
    pub(super) fn put_object(
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
    pub(super) fn verify_object(
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
    pub(super) fn get_object(&self, out: &mut impl Write, oid: &str) -> Result<(), Ended> {
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
}
