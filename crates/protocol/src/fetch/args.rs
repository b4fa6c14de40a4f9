//! Shared pieces of the request readers: bounded packet input and argument parsing.

use gix_hash::ObjectId;

use super::FetchError;
use crate::pktline::{Packet, PktReader};

pub(super) fn packet_kind(packet: &Packet) -> &'static str {
    match packet {
        Packet::Data(_) => "data",
        Packet::Flush => "flush",
        Packet::Delim => "delim",
        Packet::ResponseEnd => "response-end",
    }
}

/// Reads packets while counting them against a limit.
pub(super) struct Limited<'a, R> {
    pub(super) reader: &'a mut PktReader<R>,
    pub(super) left: usize,
    pub(super) max: usize,
}

impl<R: std::io::Read> Limited<'_, R> {
    pub(super) fn next(&mut self) -> Result<Option<Packet>, FetchError> {
        let packet = self.reader.read_packet()?;
        if packet.is_some() {
            if self.left == 0 {
                return Err(FetchError::TooManyLines { max: self.max });
            }
            self.left -= 1;
        }
        Ok(packet)
    }
}

pub(super) fn utf8(arg: &[u8], line: &[u8]) -> Result<String, FetchError> {
    std::str::from_utf8(arg)
        .map(str::to_owned)
        .map_err(|_| FetchError::NotUtf8 {
            line: crate::lossy(line),
        })
}

pub(super) fn oid_arg(hex: &[u8], line: &[u8]) -> Result<ObjectId, FetchError> {
    crate::parse_oid(hex).ok_or_else(|| FetchError::InvalidObjectId {
        line: crate::lossy(line),
    })
}

/// `deepen <n>`: a positive decimal integer that fits git's `int` (git's
/// `process_deepen` reads it into an `int` and dies on `<= 0`, so
/// 2147483648 and up are "Invalid deepen" there too).
pub(super) fn deepen_arg(arg: &[u8], line: &[u8]) -> Result<u32, FetchError> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|&n| n > 0 && n <= i32::MAX as u32)
        .ok_or_else(|| FetchError::InvalidDeepen {
            line: crate::lossy(line),
        })
}

/// `deepen-since <timestamp>`: a positive decimal integer (git's
/// `process_deepen_since` refuses 0).
pub(super) fn deepen_since_arg(arg: &[u8], line: &[u8]) -> Result<i64, FetchError> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| FetchError::InvalidDeepenSince {
            line: crate::lossy(line),
        })
}

/// The shallow-related lines shared by v0 and v2 requests.
#[derive(Default)]
pub(super) struct DeepenState {
    pub(super) shallows: Vec<ObjectId>,
    pub(super) deepen: Option<u32>,
    pub(super) deepen_since: Option<i64>,
    pub(super) deepen_not: Vec<String>,
    pub(super) filter: Option<String>,
}

impl DeepenState {
    /// Consumes `line` if it is a shallow/deepen/filter line.
    pub(super) fn accept(&mut self, line: &[u8]) -> Result<bool, FetchError> {
        if let Some(hex) = line.strip_prefix(b"shallow ") {
            self.shallows.push(oid_arg(hex, line)?);
        } else if let Some(n) = line.strip_prefix(b"deepen ") {
            self.deepen = Some(deepen_arg(n, line)?);
        } else if let Some(ts) = line.strip_prefix(b"deepen-since ") {
            self.deepen_since = Some(deepen_since_arg(ts, line)?);
        } else if let Some(name) = line.strip_prefix(b"deepen-not ") {
            self.deepen_not.push(utf8(name, line)?);
        } else if let Some(spec) = line.strip_prefix(b"filter ") {
            if self.filter.is_some() {
                return Err(FetchError::DuplicateFilter {
                    line: crate::lossy(line),
                });
            }
            self.filter = Some(utf8(spec, line)?);
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    pub(super) fn check(&self) -> Result<(), FetchError> {
        if self.deepen.is_some() && (self.deepen_since.is_some() || !self.deepen_not.is_empty()) {
            return Err(FetchError::DeepenConflict);
        }
        Ok(())
    }
}
