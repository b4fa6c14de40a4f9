//! What a refused push is answered: `unpack <reason>`, then `ng <ref> …`
//! for every command, in report-status or report-status-v2, inside
//! side-band-64k when the client asked for it (gitprotocol-pack(5) "Report
//! Status").

use std::io::Write;

use gitstow_protocol::pktline::{write_flush, PktReader};
use gitstow_protocol::push::{read_commands, write_report_status, PushRequest, RefStatus};
use gitstow_protocol::sideband::{Band, SideBandWriter};
use gitstow_protocol::Capabilities;

use crate::{Error, Options, Outcome};

/// Answers a push whose pack is refused before it is read (e.g. larger than
/// the server's limit): every command gets `ng <ref> unpacker error` after
/// `unpack <reason>`, as git's receive-pack reports an index-pack failure.
/// Only the command list at the start of `request` is read.
pub fn refuse_pack(
    request: impl std::io::Read,
    response: &mut dyn Write,
    reason: &str,
    opts: &Options,
) -> Result<Outcome, Error> {
    let mut reader = PktReader::new(request);
    let push = read_commands(&mut reader, opts.max_commands)
        .map_err(|e| Error::Protocol(e.to_string()))?;
    refuse(response, push, reason)
}

/// Refuses every command of `push` with `unpack <reason>` (and `fatal:
/// <reason>` on side-band 2), as [`refuse_pack`].
pub(crate) fn refuse(
    response: &mut dyn Write,
    push: PushRequest,
    reason: &str,
) -> Result<Outcome, Error> {
    let caps = &push.capabilities;
    if caps.contains("side-band-64k") {
        let _ = gitstow_protocol::sideband::write_band(
            &mut &mut *response,
            Band::Progress,
            format!("fatal: {reason}\n").as_bytes(),
        );
    }
    let named: Vec<(String, RefStatus)> = push
        .commands
        .iter()
        .map(|c| {
            let refused = Some(crate::reason::Reason::UnpackerError);
            (c.name.clone(), crate::reason::status(&refused))
        })
        .collect();
    write_report(response, caps, Err(reason), &named)?;
    Ok(Outcome {
        commands: push.commands.len(),
        unpack_error: Some(reason.to_owned()),
        push_options: push.push_options,
        ..Default::default()
    })
}

pub(crate) fn write_report(
    response: &mut dyn Write,
    caps: &Capabilities,
    unpack: Result<(), &str>,
    statuses: &[(String, RefStatus)],
) -> std::io::Result<()> {
    if !caps.contains("report-status") && !caps.contains("report-status-v2") {
        return response.flush();
    }
    if caps.contains("side-band-64k") {
        let mut band = SideBandWriter::new(&mut *response, Band::Data);
        write_report_status(&mut band, unpack, statuses)?;
        band.flush()?;
        drop(band);
        write_flush(&mut &mut *response)?;
    } else {
        write_report_status(&mut &mut *response, unpack, statuses)?;
    }
    response.flush()
}
