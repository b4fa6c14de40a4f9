//! The git wire protocol as a smart-HTTP server speaks it: bytes in, typed
//! requests out; typed answers in, bytes out. No storage, no HTTP framework.
//!
//! # What it owns
//!
//! - [`pktline`]: pkt-line framing (gitprotocol-common(5)): [`PktReader`]
//!   reads [`Packet`]s from any `std::io::Read` with bounded allocation and
//!   no read-ahead; `write_*` functions frame data, text, flush, delim and
//!   response-end packets.
//! - [`sideband`]: `side-band-64k` multiplexing (gitprotocol-pack(5)):
//!   [`write_band`] and the [`SideBandWriter`] adapter.
//! - [`capabilities`]: v0/v1 capability lists ([`Capabilities`]).
//! - [`advertisement`]: what a `GET …/info/refs?service=…` answers: the v0
//!   ref advertisement, the v2 capability advertisement, and the v2
//!   `ls-refs` command ([`LsRefsArgs`], [`write_ls_refs`]).
//! - [`refname`]: git-check-ref-format(1) as receive-pack applies it.
//! - [`push`]: the receive-pack request (commands, capabilities, push
//!   options, shallow lines: [`read_push_request`]; the scan and caps a
//!   transport copies it by).
//! - [`report_status`]: receive-pack's answer ([`write_report_status`]).
//! - [`client`]: the client side of v2 (capabilities, `ls-refs`, `fetch`)
//!   for pull mirrors.
//! - [`client_push`]: the client side of receive-pack (the v0 ref
//!   advertisement, commands, report-status) for push mirrors.
//! - [`fetch`]: upload-pack requests, v0 ([`read_upload_request_v0`]) and v2
//!   ([`read_command_v2`], [`FetchArgsV2`]), and the negotiation answers
//!   (ACK/NAK, `acknowledgments`, `shallow-info`, `packfile`).
//!
//! # Data flow
//!
//! ```text
//! request body ─► PktReader ─► read_push_request / read_upload_request_v0 /
//!                              read_command_v2 (+ LsRefsArgs / FetchArgsV2)
//!                                   │ typed request
//!                                   ▼
//!                       receive / upload crates (storage, packs)
//!                                   │ typed answer
//!                                   ▼
//! response body ◄─ write_v0_advertisement / write_ls_refs / write_ack /
//!                  write_acknowledgments / write_report_status,
//!                  pack bytes through SideBandWriter(Band::Data)
//! ```
//!
//! Readers never trust their input: a packet allocates at most
//! [`MAX_DATA_LEN`] bytes, every request reader takes a line or command
//! limit, and malformed input gives an error naming the offending value,
//! never a panic. Errors are typed per operation ([`PktError`],
//! [`PushRequestError`], [`FetchError`], [`RefNameError`]).
//!
//! Object ids are [`gix_hash::ObjectId`]; only SHA-1 (40 hex digits) is
//! parsed for now.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod advertisement;
pub mod capabilities;
pub mod client;
pub mod client_push;
pub mod fetch;
pub mod hidden;
pub mod ls_refs;
pub mod pktline;
pub mod push;
pub mod refname;
pub mod report_status;
pub mod sideband;

pub use advertisement::{
    symref_capabilities, write_v0_advertisement, write_v1_advertisement, write_v2_capabilities,
    AdvertisedRef, Service, V0Refs,
};
pub use capabilities::{Capabilities, ProtocolVersion};
pub use fetch::{
    read_command_v2, read_upload_request_v0, start_packfile_section, write_ack,
    write_acknowledgments, write_nak, write_shallow_info, write_shallow_update_v0,
    write_wanted_refs, AckKind, CommandRequestV2, FetchArgsV2, FetchError, UploadRequestV0,
};
pub use hidden::HiddenRefs;
pub use ls_refs::{write_ls_refs, LsRefs, LsRefsArgs};
pub use pktline::{
    write_data, write_delim, write_error, write_flush, write_response_end, write_text, Packet,
    PktError, PktReader, MAX_DATA_LEN, MAX_PKT_LEN,
};
pub use push::{
    read_commands, read_push_options, read_push_request, write_report_status,
    write_report_status_sideband, PushRequest, PushRequestError, RefCommand, RefStatus,
    MAX_COMMAND_LIST_BYTES, MAX_PUSH_OPTIONS, MAX_PUSH_OPTION_BYTES, MAX_PUSH_SHALLOW_LINES,
};
pub use refname::{
    check_ref_format, check_ref_format_for_delete, ref_name_fits, RefNameError,
    MAX_REF_COMPONENT_BYTES, MAX_REF_NAME_BYTES,
};
pub use sideband::{
    write_band, Band, SideBandWriter, SIDE_BAND_64K_MAX_PAYLOAD, SIDE_BAND_MAX_PAYLOAD,
};

/// Parses exactly 40 (SHA-1) or 64 (SHA-256) hex digits as an object id
/// (git's `get_oid_hex_any`); `None` otherwise. Whether the width is the
/// repository's object format is the caller's check (git's receive-pack
/// and upload-pack parse with the repository's algorithm).
pub(crate) fn parse_oid(hex: &[u8]) -> Option<gix_hash::ObjectId> {
    if hex.len() != gix_hash::Kind::Sha1.len_in_hex()
        && hex.len() != gix_hash::Kind::Sha256.len_in_hex()
    {
        return None;
    }
    gix_hash::ObjectId::from_hex(hex).ok()
}

/// The object format the first `object-format=` of `capabilities` (a
/// space-separated list) names: the one an advertisement's ids use
/// (`gitprotocol-capabilities(5)`); SHA-1 when none does.
pub(crate) fn advertised_format(capabilities: &str) -> gix_hash::Kind {
    capabilities
        .split(' ')
        .find_map(|c| c.strip_prefix("object-format="))
        .and_then(|name| name.parse().ok())
        .unwrap_or(gix_hash::Kind::Sha1)
}

/// Lossy text of a line for error messages.
pub(crate) fn lossy(line: &[u8]) -> String {
    String::from_utf8_lossy(line).into_owned()
}
