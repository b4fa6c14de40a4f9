//! The fetch: `git-upload-pack` for smart HTTP, protocol v0/v1 and v2.
//!
//! Data flow: the server hands a request body and a repository state to
//! [`serve_v0`] or [`serve_v2`]; negotiation ([`negotiate`]) finds the common
//! commits from the client's haves; [`walk::objects_to_send`] computes
//! reachability (wants minus what the haves reach); [`pack::write_pack`] streams
//! the pack from the containers, copying stored records verbatim, inside
//! side-band-64k when the client asked for it. [`advertise`] builds the ref
//! advertisement both services share.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod advertise;
pub mod bitmaps;
mod closure;
pub mod filter;
pub mod negotiate;
pub mod pack;
mod session;
pub mod shallow;
pub mod walk;

pub use session::serve_v0_session;

use std::io::{BufWriter, Read, Write};

use gitstow_odb::{RepoState, Repository};
use gitstow_protocol::fetch::{read_command_v2, read_upload_request_v0, FetchArgsV2, FetchError};
use gitstow_protocol::pktline::{write_flush, write_text, PktReader};
use gitstow_protocol::sideband::{write_band, Band, SideBandWriter};
use gitstow_protocol::{write_error, write_shallow_info, write_shallow_update_v0, LsRefsArgs};

/// Knobs of upload-pack.
#[derive(Debug, Clone)]
pub struct Options {
    /// Bytes of the delta-base cache used while walking and writing.
    pub cache_bytes: usize,
    /// Most pkt-lines in one request (wants, haves, shallows and the
    /// rest): beyond it the client gets an `ERR` line (see [`unreadable_request`]).
    pub max_request_lines: usize,
    /// Refs `ls-refs` leaves out (see [`gitstow_protocol::hidden`]).
    pub hidden: gitstow_protocol::HiddenRefs,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cache_bytes: 64 << 20,
            max_request_lines: 1_000_000,
            hidden: gitstow_protocol::HiddenRefs::default(),
        }
    }
}

/// What a fetch did.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Wants received.
    pub wants: usize,
    /// Haves received.
    pub haves: usize,
    /// Haves the repository has.
    pub common: usize,
    /// Commits the reachability walk read.
    pub commits_read: usize,
    /// The pack, if one was sent.
    pub pack: Option<pack::PackStats>,
    /// Object lookups of the walk and the pack, and the index searches they
    /// made (after maintenance, about one search a lookup).
    pub lookups: gitstow_odb::LookupStats,
    /// Commits the walks read from commit graphs instead of inflating them.
    pub graph_commits: u64,
    /// Commits the walks inflated because no graph held them.
    pub graph_misses: u64,
    /// The have-side bitmap, when the fetch used one.
    pub have_bitmap: Option<HaveFigures>,
    /// How the objects to send were found (`None`: no pack was sent).
    pub via: Option<walk::Via>,
}

/// What a fetch's have-side bitmap ([`bitmaps::HaveBitmap`]) held and did.
#[derive(Debug, Clone, Copy, Default)]
pub struct HaveFigures {
    /// Objects of the closure the client has.
    pub objects: u64,
    /// Commits walked down to stored bitmaps.
    pub commits_walked: usize,
    /// Objects the walk emitted that the client has, not sent.
    pub dropped: usize,
}

/// Errors of upload-pack.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed (HTTP 400 if nothing was written yet).
    #[error("{0}")]
    Protocol(String),
    /// The walk refused a want or found the repository inconsistent.
    #[error(transparent)]
    Walk(#[from] walk::WalkError),
    /// Writing the pack failed.
    #[error(transparent)]
    Pack(#[from] pack::PackError),
    /// Reading the repository failed.
    #[error(transparent)]
    Odb(#[from] gitstow_odb::Error),
    /// Writing to the client failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// Whether the request is at fault (it is malformed, or wants what the
    /// repository does not have), not the server.
    pub fn is_clients(&self) -> bool {
        use gitstow_odb::limit::LimitError;
        match self {
            Error::Protocol(_) | Error::Walk(walk::WalkError::NotOurRef(_)) => true,
            Error::Walk(walk::WalkError::Object(LimitError::Missing { context, .. })) => {
                matches!(*context, "want" | "have")
            }
            _ => false,
        }
    }

    /// What the client may be told: the request's fault in its words, else
    /// the server's fault in its one text ([`gitstow_store::ServerFault`]),
    /// never a store key or an error chain (those go to the log).
    pub fn client_text(&self) -> String {
        if self.is_clients() {
            self.to_string()
        } else {
            gitstow_store::ServerFault::of(self).text().to_owned()
        }
    }
}

/// Serves one stateless v0/v1 upload-pack request (`POST /git-upload-pack`).
pub fn serve_v0(
    repo: &Repository,
    state: &RepoState,
    request: &mut dyn Read,
    out: &mut dyn Write,
    opts: &Options,
) -> Result<Outcome, Error> {
    let mut reader = PktReader::new(request);
    let read = read_upload_request_v0(&mut reader, opts.max_request_lines);
    let Some(start) = start_v0(repo, state, read, out)? else {
        return Ok(Outcome::default());
    };
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
        haves: req.haves.len(),
        ..Default::default()
    };
    if !req.done && req.have_rounds == 0 {
        // Only the want list (and shallow update) was asked for, as git's
        // stateless upload-pack answers a request that ends after its wants.
        out.flush()?;
        return Ok(outcome);
    }
    let common = negotiate::common(&db, &req.haves);
    outcome.common = common.len();
    let detailed = req.capabilities.contains("multi_ack_detailed");
    let multi = detailed || req.capabilities.contains("multi_ack");
    if !req.done {
        let ready = negotiate::ready(&db, &req.wants, &common);
        negotiate::write_v0_round(&mut &mut *out, &common, ready, multi, detailed)?;
        // no-done: once ready, git's upload-pack sends the final ACK and the
        // pack without waiting for the client's "done".
        let no_done = detailed && req.capabilities.contains("no-done") && ready;
        if !no_done {
            out.flush()?;
            return Ok(outcome);
        }
    }
    match common.last() {
        Some(last) => write_text(&mut &mut *out, &format!("ACK {last}"))?,
        None => write_text(&mut &mut *out, "NAK")?,
    }
    let ask = v0_pack_ask(&req, &common, &shallow_req, &shallow_plan, filter.as_ref());
    send_fetch(state, &refs, &db, &ask, out, opts, &mut outcome)?;
    Ok(outcome)
}

/// A v0/v1 request past its want list: checked, its shallow update sent.
struct V0Start<'s> {
    req: gitstow_protocol::UploadRequestV0,
    db: gitstow_odb::ObjectDb,
    refs: gitstow_odb::Refs<'s>,
    filter: Option<filter::Filter>,
    shallow_req: shallow::ShallowRequest,
    shallow_plan: shallow::ShallowPlan,
}

/// Checks a v0/v1 want list as read (`read`) and sends the shallow update
/// of a deepen request (git's `receive_needs`; v2 also sends shallow-info
/// to a shallow client); `None` when the request is answered already (no
/// wants, a bad request, a refused filter or want).
fn start_v0<'s>(
    repo: &Repository,
    state: &'s RepoState,
    read: Result<gitstow_protocol::UploadRequestV0, FetchError>,
    out: &mut dyn Write,
) -> Result<Option<V0Start<'s>>, Error> {
    let req = match read {
        Ok(req) => req,
        Err(e) => return unreadable_request(e, out).map(|()| None),
    };
    let db = repo.objects(state)?;
    let refs = repo.refs(state)?;
    if req.wants.is_empty() {
        return Ok(None);
    }
    let Some(filter) = filter_or_refusal(req.filter.as_deref(), out)? else {
        return Ok(None);
    };
    if refused_unknown_want(&db, &req.wants, out)? {
        return Ok(None);
    }
    let shallow_req = shallow::ShallowRequest {
        client_shallows: req.shallows.clone(),
        deepen: req.deepen,
        deepen_relative: req.deepen_relative,
        deepen_since: req.deepen_since,
        deepen_not: resolve_deepen_not(&refs, &req.deepen_not)?,
    };
    let shallow_plan = shallow::plan(&db, &req.wants, &shallow_req)?;
    if shallow_req.deepens() {
        write_shallow_update_v0(
            &mut &mut *out,
            &shallow_plan.shallows,
            &shallow_plan.unshallows,
        )?;
    }
    Ok(Some(V0Start {
        req,
        db,
        refs,
        filter,
        shallow_req,
        shallow_plan,
    }))
}

/// What a v0/v1 request asks of its pack (its capabilities: side-band,
/// progress, include-tag, ofs-delta, thin-pack).
fn v0_pack_ask<'a>(
    req: &'a gitstow_protocol::UploadRequestV0,
    common: &'a [gix_hash::ObjectId],
    shallow_req: &'a shallow::ShallowRequest,
    shallow_plan: &'a shallow::ShallowPlan,
    filter: Option<&'a filter::Filter>,
) -> PackAsk<'a> {
    let sideband = if req.capabilities.contains("side-band-64k") {
        Some(65515)
    } else if req.capabilities.contains("side-band") {
        Some(999)
    } else {
        None
    };
    let progress = sideband.is_some() && !req.capabilities.contains("no-progress");
    PackAsk {
        wants: &req.wants,
        common,
        shallow_req,
        shallow_plan,
        filter,
        include_tag: req.capabilities.contains("include-tag"),
        ofs_delta: req.capabilities.contains("ofs-delta"),
        thin_pack: req.capabilities.contains("thin-pack"),
        sideband,
        progress,
    }
}

/// What a fetch asks of its pack, in either protocol version.
struct PackAsk<'a> {
    wants: &'a [gix_hash::ObjectId],
    common: &'a [gix_hash::ObjectId],
    shallow_req: &'a shallow::ShallowRequest,
    shallow_plan: &'a shallow::ShallowPlan,
    filter: Option<&'a filter::Filter>,
    include_tag: bool,
    ofs_delta: bool,
    thin_pack: bool,
    /// Side-band payload size, if the pack goes in side-band.
    sideband: Option<usize>,
    progress: bool,
}

/// Finds the objects `ask` needs (from the bitmaps or by the walk, with the
/// tags it includes) and streams the pack, recording the figures in
/// `outcome`. When the fetch fails with side-band on, the client is told
/// why on band 3 (`fatal: …`, [`Error::client_text`]): git prints it, where
/// the pack would otherwise just end (after v2's `packfile` line, or v0's
/// `NAK`, nothing else can be said in the protocol).
fn send_fetch(
    state: &RepoState,
    refs: &gitstow_odb::Refs<'_>,
    db: &gitstow_odb::ObjectDb,
    ask: &PackAsk<'_>,
    out: &mut dyn Write,
    opts: &Options,
    outcome: &mut Outcome,
) -> Result<(), Error> {
    let sent = (|| -> Result<(), Error> {
        let shortcuts = Shortcuts::of(state, refs, ask.wants, db)?;
        let walk_opts =
            shortcuts.walk_options(ask.common, ask.shallow_plan, ask.filter, opts.cache_bytes);
        // A clone of every tip: the closed or closure shortcut, no bitmaps read.
        let (mut walk, have) = match walk::shortcut(db, ask.wants, &walk_opts)? {
            Some(walk) => (walk, None),
            None => {
                let have = shortcuts.have_side(
                    db,
                    ask.common,
                    ask.shallow_req,
                    ask.filter,
                    opts.cache_bytes,
                );
                let walk = objects_to_send(db, ask.wants, &walk_opts, have.as_ref(), outcome)?;
                (walk, have)
            }
        };
        if ask.include_tag {
            walk::include_tags(db, &mut walk, &peeled_tags(refs)?)?;
        }
        outcome.commits_read = walk.commits_read;
        outcome.via = Some(walk.via);
        let popts = pack::PackOptions {
            ofs_delta: ask.ofs_delta,
            cache_bytes: opts.cache_bytes,
            // A partial clone may lack blobs its trees name: no thin bases then.
            thin: ask.thin_pack && ask.filter.is_none(),
            format: state.object_format,
        };
        outcome.pack = Some(send_pack(
            db,
            &walk,
            have.as_ref(),
            out,
            ask.sideband,
            ask.progress,
            popts,
        )?);
        outcome.lookups = db.lookup_stats();
        outcome.graph_commits = db.graph_hits();
        outcome.graph_misses = db.graph_misses();
        Ok(())
    })();
    if let (Err(e), Some(_)) = (&sent, ask.sideband) {
        let said = format!("fatal: {}\n", e.client_text());
        let _ = write_band(&mut &mut *out, Band::Error, said.as_bytes());
        let _ = out.flush();
    }
    sent
}

/// What a state offers a full clone besides the walk: its ref tips when it is
/// closed (see [`walk::WalkOptions::closed_tips`]) and its closure, with the
/// positions of the closure's containers in the state's [`gitstow_odb::ObjectDb`].
struct Shortcuts {
    closed_tips: Option<Vec<gix_hash::ObjectId>>,
    closure: Option<(Vec<gix_hash::ObjectId>, Vec<usize>)>,
    /// The closure has reachability bitmaps (a GC's; a push's has none).
    closure_bitmaps: bool,
}

impl Shortcuts {
    fn of(
        state: &RepoState,
        refs: &gitstow_odb::Refs<'_>,
        wants: &[gix_hash::ObjectId],
        db: &gitstow_odb::ObjectDb,
    ) -> Result<Self, Error> {
        // Every tip wanted needs about as many wants as refs: a fetch of a
        // few refs of a large repository does not read every ref to find
        // out (the shortcut is only ever skipped, which is always safe).
        let may_want_all = refs.len() <= (wants.len() as u64).saturating_mul(4) + 64;
        let closed_tips = if state.closed && may_want_all {
            let mut tips = refs.tips()?;
            tips.sort_unstable();
            tips.dedup();
            Some(tips)
        } else {
            None
        };
        let closure = state.live_closure().map(|(c, positions)| {
            let in_db = positions.into_iter().map(|p| db.live_position(p));
            (c.tips.clone(), in_db.collect())
        });
        Ok(Shortcuts {
            closed_tips,
            closure,
            closure_bitmaps: state.closure.as_ref().is_some_and(|c| c.bitmaps),
        })
    }

    /// The have-side bitmap of a fetch that can use one: no shallow boundary,
    /// no filter that needs paths ([`filter::Filter::path_free`]), and the
    /// state has a closure with bitmaps. Without
    /// haves (a clone) it is empty: the bitmaps then give what the wants
    /// reach (a single-branch clone reads them instead of walking).
    fn have_side(
        &self,
        db: &gitstow_odb::ObjectDb,
        haves: &[gix_hash::ObjectId],
        shallow: &shallow::ShallowRequest,
        filter: Option<&filter::Filter>,
        cache_bytes: usize,
    ) -> Option<bitmaps::HaveBitmap> {
        let (_, containers) = self.closure.as_ref()?;
        if !self.closure_bitmaps
            || filter.is_some_and(|f| !f.path_free())
            || !shallow.client_shallows.is_empty()
            || shallow.deepens()
        {
            return None;
        }
        bitmaps::HaveBitmap::compute(db, containers, haves, cache_bytes)
    }

    fn walk_options<'a>(
        &'a self,
        haves: &'a [gix_hash::ObjectId],
        shallow: &'a shallow::ShallowPlan,
        filter: Option<&'a filter::Filter>,
        cache_bytes: usize,
    ) -> walk::WalkOptions<'a> {
        walk::WalkOptions {
            haves,
            shallow,
            filter,
            cache_bytes,
            closed_tips: self.closed_tips.as_deref(),
            closure: self
                .closure
                .as_ref()
                .map(|(tips, containers)| walk::ClosureView { tips, containers }),
            known_containers: &[],
        }
    }
}

/// The objects to send when no clone shortcut applies ([`walk::shortcut`]):
/// from the reachability bitmaps when the fetch has a have side
/// ([`bitmaps::fetch_over`], exact), else by the walk, minus what
/// the have side says the client has (the sparse tree walk compares paths,
/// not reachability). Records the have side's figures in `outcome`.
fn objects_to_send(
    db: &gitstow_odb::ObjectDb,
    wants: &[gix_hash::ObjectId],
    opts: &walk::WalkOptions<'_>,
    have: Option<&bitmaps::HaveBitmap>,
    outcome: &mut Outcome,
) -> Result<walk::Walk, Error> {
    let Some(have) = have else {
        return Ok(walk::walk_objects(db, wants, opts)?);
    };
    let mut dropped = 0;
    let walk = match bitmaps::fetch_over(db, wants, opts, have)? {
        Some(walk) => walk::Walk {
            via: walk::Via::Bitmaps,
            ..walk
        },
        None => {
            let mut walk = walk::walk_objects(db, wants, opts)?;
            let before = walk.objects.len();
            walk.objects.retain(|o, ()| !have.contains(db, o));
            dropped = before - walk.objects.len();
            walk
        }
    };
    outcome.have_bitmap = Some(HaveFigures {
        objects: have.len(),
        commits_walked: have.commits_walked,
        dropped,
    });
    Ok(walk)
}

/// Answers git's `ERR upload-pack: not our ref <oid>` for the first want the
/// repository lacks (the client prints it as "remote error: …"); true if it did.
/// A request that could not be read: over the line limit, git's `ERR`
/// line (`fatal: remote error: upload-pack: …`, as upload-pack answers
/// what it refuses) and `Ok`; anything else a [`Error::Protocol`].
fn unreadable_request(e: FetchError, out: &mut dyn Write) -> Result<(), Error> {
    let FetchError::TooManyLines { max } = e else {
        return Err(Error::Protocol(e.to_string()));
    };
    write_error(
        &mut &mut *out,
        &format!("upload-pack: request too large: more than {max} lines (wants, haves, shallows)"),
    )?;
    out.flush()?;
    Ok(())
}

fn refused_unknown_want(
    db: &gitstow_odb::ObjectDb,
    wants: &[gix_hash::ObjectId],
    out: &mut dyn Write,
) -> Result<bool, Error> {
    let Some(missing) = wants.iter().find(|w| !db.contains(w)) else {
        return Ok(false);
    };
    write_error(
        &mut &mut *out,
        &format!("upload-pack: not our ref {missing}"),
    )?;
    out.flush()?;
    Ok(true)
}

fn resolve_deepen_not(
    refs: &gitstow_odb::Refs<'_>,
    names: &[String],
) -> Result<Vec<gix_hash::ObjectId>, Error> {
    shallow::resolve_deepen_not(refs, names)?.map_err(Error::Protocol)
}

/// The request's filter (`Some(None)` without one), or `None` once git's
/// `ERR` line for a spec it refuses is written (the client prints it as
/// "remote error: …", as upload-pack's `check_one_filter` answers).
fn filter_or_refusal(
    spec: Option<&str>,
    out: &mut dyn Write,
) -> Result<Option<Option<filter::Filter>>, Error> {
    match spec.map(filter::Filter::parse).transpose() {
        Ok(filter) => Ok(Some(filter)),
        Err(e) => {
            write_error(&mut &mut *out, &e.to_string())?;
            out.flush()?;
            Ok(None)
        }
    }
}

/// (tag oid, peeled oid) of every ref under `refs/tags/` that points at an
/// annotated tag: the tags git's pack-objects `--include-tag` considers
/// (`refs_for_each_tag_ref`).
fn peeled_tags(
    refs: &gitstow_odb::Refs<'_>,
) -> Result<Vec<(gix_hash::ObjectId, gix_hash::ObjectId)>, Error> {
    let mut out = Vec::new();
    refs.for_each("refs/tags/", |_, value| {
        if let (Some(oid), Some(peeled)) = (value.oid(), value.peeled()) {
            out.push((oid, peeled));
        }
        Ok(())
    })?;
    Ok(out)
}

/// Streams the pack, framed in side-band when `sideband` gives the payload size.
#[allow(clippy::too_many_arguments)]
fn send_pack(
    db: &gitstow_odb::ObjectDb,
    walk: &walk::Walk,
    have: Option<&bitmaps::HaveBitmap>,
    out: &mut dyn Write,
    sideband: Option<usize>,
    progress: bool,
    popts: pack::PackOptions,
) -> Result<pack::PackStats, Error> {
    if progress {
        let msg = format!("Enumerating objects: {}, done.\n", walk.objects.len());
        write_band(&mut &mut *out, Band::Progress, msg.as_bytes())?;
    }
    let client_has = |oid: &gix_hash::ObjectId| {
        walk.client_has.contains(oid) || have.is_some_and(|h| h.contains(db, oid))
    };
    let stats = match sideband {
        Some(max) => {
            let band = SideBandWriter::with_max_payload(&mut *out, Band::Data, max);
            let mut buffered = BufWriter::with_capacity(max, band);
            let result = pack::write_pack(db, &walk.objects, &client_has, &mut buffered, popts);
            let stats = match result {
                Ok(s) => s,
                Err(e) => {
                    // What was written goes out; `send_fetch` says why it
                    // ends there.
                    drop(buffered);
                    return Err(e.into());
                }
            };
            buffered.flush()?;
            drop(buffered);
            if progress {
                let msg = format!(
                    "Total {} (delta {}), reused {} (delta {}), pack-reused 0\n",
                    stats.objects, stats.deltas, stats.reused, stats.deltas
                );
                write_band(&mut &mut *out, Band::Progress, msg.as_bytes())?;
            }
            write_flush(&mut &mut *out)?;
            stats
        }
        None => {
            let mut buffered = BufWriter::with_capacity(64 << 10, &mut *out);
            let stats = pack::write_pack(db, &walk.objects, &client_has, &mut buffered, popts)?;
            buffered.flush()?;
            stats
        }
    };
    out.flush()?;
    Ok(stats)
}

/// Serves one v2 command request (`POST /git-upload-pack` with `Git-Protocol: version=2`):
/// `ls-refs` or `fetch` (gitprotocol-v2(5)).
pub fn serve_v2(
    repo: &Repository,
    state: &RepoState,
    request: &mut dyn Read,
    out: &mut dyn Write,
    opts: &Options,
) -> Result<Outcome, Error> {
    let mut reader = PktReader::new(request);
    let cmd = match read_command_v2(&mut reader, opts.max_request_lines) {
        Ok(Some(cmd)) => cmd,
        Ok(None) => return Ok(Outcome::default()),
        Err(e) => return unreadable_request(e, out).map(|()| Outcome::default()),
    };
    // git's serve.c: every command names the client's object format (SHA-1
    // when it names none), and it must be the repository's.
    let client = cmd
        .capabilities
        .iter()
        .find(|(k, _)| k == "object-format")
        .and_then(|(_, v)| v.as_deref())
        .unwrap_or("sha1");
    if client != state.object_format.to_string() {
        write_error(
            &mut &mut *out,
            &format!(
                "mismatched object format: server {}; client {client}",
                state.object_format
            ),
        )?;
        out.flush()?;
        return Ok(Outcome::default());
    }
    match cmd.command.as_str() {
        "ls-refs" => {
            let args =
                LsRefsArgs::parse(cmd.args.iter()).map_err(|e| Error::Protocol(e.to_string()))?;
            let view = repo.refs(state)?;
            advertise::write_ls_refs(&mut &mut *out, &args, state, &view, &opts.hidden)?;
            out.flush()?;
            Ok(Outcome::default())
        }
        "fetch" => fetch_v2(repo, state, &cmd.args, out, opts),
        other => Err(Error::Protocol(format!("invalid command '{other}'"))),
    }
}

fn fetch_v2(
    repo: &Repository,
    state: &RepoState,
    args: &gitstow_protocol::fetch::Args,
    out: &mut dyn Write,
    opts: &Options,
) -> Result<Outcome, Error> {
    let args = FetchArgsV2::parse(args.iter()).map_err(|e| Error::Protocol(e.to_string()))?;
    let db = repo.objects(state)?;
    let refs = repo.refs(state)?;
    let mut outcome = Outcome {
        wants: args.wants.len(),
        haves: args.haves.len(),
        ..Default::default()
    };
    let Some(filter) = filter_or_refusal(args.filter.as_deref(), out)? else {
        return Ok(outcome);
    };
    if refused_unknown_want(&db, &args.wants, out)? {
        return Ok(outcome);
    }
    let common = negotiate::common(&db, &args.haves);
    outcome.common = common.len();
    if !args.done {
        // wait-for-done: acknowledge, but send no pack until the client says done.
        let ready = !args.wait_for_done && negotiate::ready(&db, &args.wants, &common);
        negotiate::write_v2_acknowledgments(&mut &mut *out, &common, ready)?;
        if !ready {
            out.flush()?;
            return Ok(outcome);
        }
    }
    let shallow_req = shallow::ShallowRequest {
        client_shallows: args.shallows.clone(),
        deepen: args.deepen,
        deepen_relative: args.deepen_relative,
        deepen_since: args.deepen_since,
        deepen_not: resolve_deepen_not(&refs, &args.deepen_not)?,
    };
    let shallow_plan = shallow::plan(&db, &args.wants, &shallow_req)?;
    if shallow_req.needs_shallow_section() {
        write_shallow_info(
            &mut &mut *out,
            &shallow_plan.shallows,
            &shallow_plan.unshallows,
        )?;
    }
    write_text(&mut &mut *out, "packfile")?;
    let ask = PackAsk {
        wants: &args.wants,
        common: &common,
        shallow_req: &shallow_req,
        shallow_plan: &shallow_plan,
        filter: filter.as_ref(),
        include_tag: args.include_tag,
        ofs_delta: args.ofs_delta,
        thin_pack: args.thin_pack,
        sideband: Some(65515),
        progress: !args.no_progress,
    };
    send_fetch(state, &refs, &db, &ask, out, opts, &mut outcome)?;
    Ok(outcome)
}
