//! The framing of `git-lfs-transfer` messages: a client message (command,
//! arguments, an optional delim-pkt and section, a flush-pkt) read into a
//! [`Message`], and the answers (`status`, arguments, an error line).

use std::io::{Read, Write};

use gitstow_protocol::pktline::{self, Packet, PktReader};

use super::{Ended, MAX_ARGS};

/// A request's command line and arguments (up to its delim-pkt or
/// flush-pkt); `delim` when a delim-pkt follows them.
pub(super) struct Message {
    pub(super) command: String,
    pub(super) args: Vec<(String, String)>,
    pub(super) delim: bool,
}

impl Message {
    pub(super) fn arg(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn size(&self) -> Option<u64> {
        self.arg("size").and_then(|s| s.parse().ok())
    }
}

/// An answer that is not 2xx: its code and its one line.
pub(super) struct Refusal(pub(super) u16, pub(super) String);

/// `status <code>`, `args`, flush.
pub(super) fn status(out: &mut impl Write, code: u16, args: &[String]) -> Result<(), Ended> {
    pktline::write_text(out, &format!("status {code}"))?;
    for arg in args {
        pktline::write_text(out, arg)?;
    }
    pktline::write_flush(out).map_err(Ended::from)
}

/// `status <code>`, delim, the refusal's line, flush.
pub(super) fn refuse(out: &mut impl Write, Refusal(code, text): Refusal) -> Result<(), Ended> {
    pktline::write_text(out, &format!("status {code}"))?;
    pktline::write_delim(out)?;
    pktline::write_text(out, &text)?;
    pktline::write_flush(out).map_err(Ended::from)
}

/// The next message's command and arguments; `None` on a clean EOF.
pub(super) fn read_message(input: &mut PktReader<impl Read>) -> Result<Option<Message>, Ended> {
    let command = loop {
        match input.read_packet()? {
            None => return Ok(None),
            // A stray flush between messages is harmless.
            Some(Packet::Flush) => continue,
            Some(p) => match p.as_text() {
                Some(text) => break text_of(text)?,
                None => {
                    return Err(Ended::Protocol(
                        "a message starts with a special packet".into(),
                    ))
                }
            },
        }
    };
    let mut args = Vec::new();
    loop {
        match input.read_packet()? {
            None => {
                return Err(Ended::Protocol(
                    "the client hung up inside a message".into(),
                ))
            }
            Some(Packet::Flush) => {
                return Ok(Some(Message {
                    command,
                    args,
                    delim: false,
                }))
            }
            Some(Packet::Delim) => {
                return Ok(Some(Message {
                    command,
                    args,
                    delim: true,
                }))
            }
            Some(p) => {
                let text = text_of(p.as_text().unwrap_or_default())?;
                if args.len() >= MAX_ARGS {
                    return Err(Ended::Protocol("too many arguments".into()));
                }
                let (k, v) = text.split_once('=').unwrap_or((text.as_str(), ""));
                args.push((k.to_owned(), v.to_owned()));
            }
        }
    }
}

/// The next text line of a section; `None` at its flush-pkt.
pub(super) fn read_line(input: &mut PktReader<impl Read>) -> Result<Option<String>, Ended> {
    match input.read_packet()? {
        None => Err(Ended::Protocol(
            "the client hung up inside a message".into(),
        )),
        Some(Packet::Flush) => Ok(None),
        Some(Packet::Data(data)) => text_of(data.strip_suffix(b"\n").unwrap_or(&data)).map(Some),
        Some(_) => Err(Ended::Protocol("a special packet inside a message".into())),
    }
}

/// Reads what follows a message's delim-pkt up to its flush-pkt, unused.
pub(super) fn drain(input: &mut PktReader<impl Read>, message: &Message) -> Result<(), Ended> {
    if message.delim {
        while input.read_packet()?.is_some_and(|p| p != Packet::Flush) {}
    }
    Ok(())
}

pub(super) fn text_of(bytes: &[u8]) -> Result<String, Ended> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Ended::Protocol("a line is not UTF-8".into()))
}
