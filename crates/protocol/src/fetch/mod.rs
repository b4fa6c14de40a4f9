//! Upload-pack requests and the negotiation answers: protocol v0/v1
//! (gitprotocol-pack(5) "Packfile Negotiation", gitprotocol-http(5) "Smart
//! Service git-upload-pack") and v2 (gitprotocol-v2(5) "Command Request",
//! "fetch").
//!
//! Facts confirmed against git 2.47 upload-pack (stateless RPC):
//!
//! - v0 acks, multi_ack_detailed: `ACK <oid> common\n`, `ACK <oid> ready\n`,
//!   `NAK\n`, and after `done` a final `ACK <oid>\n` (no suffix); with
//!   multi_ack: `ACK <oid> continue\n`.
//! - v2 `acknowledgments` section: `NAK\n` when nothing is common, else
//!   `ACK <oid>\n` per common object, then `ready\n` and a delim when the
//!   pack follows, or a flush when the client must send more haves. When
//!   the client sent `done` there is no acknowledgments section at all: the
//!   response starts with `packfile\n`.
//! - `shallow <oid>` / `unshallow <oid>` lines carry **no** trailing LF, in
//!   v0 (then a flush) and in the v2 `shallow-info` section (then a delim).
//! - An unknown v2 argument makes git die with `unexpected line: '<arg>'`.

use crate::pktline::PktError;

mod args;
mod response;
mod v0;
mod v2;

pub use response::{
    start_packfile_section, write_ack, write_acknowledgments, write_nak, write_shallow_info,
    write_shallow_update_v0, write_wanted_refs, AckKind,
};
pub use v0::{read_upload_request_v0, read_want_list_v0, HaveLine, HaveReader, UploadRequestV0};
pub use v2::{read_command_v2, Args, CommandRequestV2, FetchArgsV2};

/// Why an upload-pack request (v0 or v2, including `ls-refs` arguments)
/// could not be read (gitprotocol-pack(5), gitprotocol-v2(5)).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The pkt-line layer failed (I/O, bad length, truncation).
    #[error(transparent)]
    Packet(#[from] PktError),
    /// A line that is not valid at this point of the request; the words of
    /// git's v2 `process_args`.
    #[error("unexpected line: '{line}'")]
    UnexpectedLine {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// A `want`, `have` or `shallow` line without a valid 40-hex object id.
    #[error("protocol error: expected to get object ID, not '{line}'")]
    InvalidObjectId {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// `deepen` needs a positive integer.
    #[error("invalid deepen: '{line}'")]
    InvalidDeepen {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// `deepen-since` needs a positive Unix timestamp.
    #[error("invalid deepen-since: '{line}'")]
    InvalidDeepenSince {
        /// The line as received (lossy UTF-8).
        line: String,
    },
    /// `deepen <n>` together with `deepen-since` or `deepen-not`.
    #[error("--depth and --shallow-since (or --shallow-exclude) cannot be used together")]
    DeepenConflict,
    /// A second `filter` line.
    #[error("multiple filter-specs cannot be combined: '{line}'")]
    DuplicateFilter {
        /// The second filter line (lossy UTF-8).
        line: String,
    },
    /// A line whose text argument (ref name, filter, capability) is not UTF-8.
    #[error("line is not valid UTF-8: '{line}'")]
    NotUtf8 {
        /// The line (lossy UTF-8).
        line: String,
    },
    /// A second `command=` in one v2 request.
    #[error("command '{second}' requested after already requesting command '{first}'")]
    DuplicateCommand {
        /// The first command.
        first: String,
        /// The second command.
        second: String,
    },
    /// A v2 request with capability lines but no `command=`.
    #[error("no command requested")]
    NoCommand,
    /// More packets than the caller's line limit.
    #[error("request too long: more than {max} lines")]
    TooManyLines {
        /// The limit passed to the reader.
        max: usize,
    },
    /// The input ended inside a request.
    #[error("the remote end hung up in the middle of the {section}")]
    UnexpectedEof {
        /// Which part of the request was being read.
        section: &'static str,
    },
    /// A delim or response-end packet where it is not allowed.
    #[error("protocol error: unexpected {packet} packet in the {section}")]
    UnexpectedPacket {
        /// `"flush"`, `"delim"` or `"response-end"`.
        packet: &'static str,
        /// Which part of the request was being read.
        section: &'static str,
    },
}

#[cfg(test)]
mod tests;
