//! v0/v1 upload-pack over one stream (SSH; gitprotocol-pack(5) "Packfile
//! Negotiation"): unlike smart HTTP's stateless requests, the client sends
//! its want list once, then rounds of haves, each answered when its flush
//! arrives, until `done` (or `ready` with `no-done`), then the pack. The
//! rounds are answered as git's `get_common_commits` answers them; the
//! pack is the stateless path's.

use std::collections::HashSet;
use std::io::{Read, Write};

use gitstow_odb::{RepoState, Repository};
use gitstow_protocol::fetch::{read_want_list_v0, HaveLine, HaveReader};
use gitstow_protocol::pktline::{write_text, PktReader};

use crate::{
    negotiate, send_fetch, start_v0, unreadable_request, v0_pack_ask, Error, Options, Outcome,
    V0Start,
};

/// Serves a v0/v1 upload-pack session read from `request` (the client's
/// stream after the advertisement) on `out`, flushing `out` at the end of
/// each round (the client waits for the answer before its next round).
///
/// # Errors
/// A store failure or a failed write; bad requests are answered in the
/// protocol (`ERR`) and end the session.
pub fn serve_v0_session(
    repo: &Repository,
    state: &RepoState,
    request: &mut dyn Read,
    out: &mut dyn Write,
    opts: &Options,
) -> Result<Outcome, Error> {
    let mut reader = PktReader::new(request);
    let read = read_want_list_v0(&mut reader, opts.max_request_lines);
    let Some(start) = start_v0(repo, state, read, out)? else {
        return Ok(Outcome::default());
    };
    out.flush()?;
    let V0Start {
        req,
        db,
        refs,
        filter,
        shallow_req,
        shallow_plan,
    } = start;
    let mut outcome = Outcome {
        wants: req.wants.len(),
        ..Default::default()
    };
    let detailed = req.capabilities.contains("multi_ack_detailed");
    let multi = detailed || req.capabilities.contains("multi_ack");
    let no_done = detailed && req.capabilities.contains("no-done");
    let mut haves = HaveReader::new(&mut reader, opts.max_request_lines);
    let mut common = Vec::new();
    let mut seen = HashSet::new();
    let mut round = Vec::new();
    loop {
        let line = match haves.next_line() {
            Ok(Some(line)) => line,
            // The client hung up (it had what it wanted): nothing to send.
            Ok(None) => return Ok(outcome),
            Err(e) => return unreadable_request(e, out).map(|()| outcome),
        };
        match line {
            HaveLine::Have(oid) => {
                outcome.haves += 1;
                if db.contains(&oid) && seen.insert(oid) {
                    // Without multi_ack only the first common commit is acknowledged.
                    if !multi && common.is_empty() && round.is_empty() {
                        write_text(&mut &mut *out, &format!("ACK {oid}"))?;
                    }
                    round.push(oid);
                }
            }
            HaveLine::Flush => {
                if multi {
                    let kind = if detailed { "common" } else { "continue" };
                    for oid in &round {
                        write_text(&mut &mut *out, &format!("ACK {oid} {kind}"))?;
                    }
                }
                common.append(&mut round);
                let ready = detailed && negotiate::ready(&db, &req.wants, &common);
                if let (true, Some(last)) = (ready, common.last()) {
                    write_text(&mut &mut *out, &format!("ACK {last} ready"))?;
                }
                if common.is_empty() || multi {
                    write_text(&mut &mut *out, "NAK")?;
                }
                if no_done && ready {
                    // git's upload-pack then sends the final ACK and the
                    // pack without waiting for "done".
                    if let Some(last) = common.last() {
                        write_text(&mut &mut *out, &format!("ACK {last}"))?;
                    }
                    break;
                }
                out.flush()?;
            }
            HaveLine::Done => {
                common.append(&mut round);
                match common.last() {
                    None => write_text(&mut &mut *out, "NAK")?,
                    Some(last) if multi => write_text(&mut &mut *out, &format!("ACK {last}"))?,
                    Some(_) => {}
                }
                break;
            }
        }
    }
    outcome.common = common.len();
    let ask = v0_pack_ask(&req, &common, &shallow_req, &shallow_plan, filter.as_ref());
    send_fetch(state, &refs, &db, &ask, out, opts, &mut outcome)?;
    Ok(outcome)
}
