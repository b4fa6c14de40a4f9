//! The push: `git-receive-pack` over a spooled request.
//!
//! Data flow of [`receive_pack`]:
//! 1. read the command list, capabilities and push options ([`gitstow_protocol::push`]);
//! 2. pass 1 ([`scan`]): walk the spooled pack with gix-pack's entry iterator,
//!    check the trailer, bound sizes, and keep a compact entry table;
//! 3. pass 2 ([`resolve`]): resolve every delta exactly once on several threads,
//!    hash and parse every object ([`check`]), and stage pack-native records into
//!    segment containers through [`gitstow_odb::staging::EncodedObjectStore`];
//!    thin-pack bases come from the repository;
//! 4. connectivity: every object a pushed object names (gitlinks aside) and every
//!    new tip is in the push or the repository;
//! 5. upload the sealed containers, then the ref [`transaction`]: one
//!    compare-and-swap of the state, retried on conflicts;
//! 6. report-status (v1/v2) per ref, inside side-band-64k when negotiated, with
//!    progress on band 2 unless `quiet`.
//!
//! Nothing is visible to readers until step 5's compare-and-swap succeeds.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod big;
pub mod check;
pub mod conflict;
mod decide;
pub mod hooks;
pub mod locked;
pub mod progress;
pub mod protect;
pub mod reason;
mod rebase;
mod report;
pub mod resolve;
pub mod scan;
pub mod transaction;
mod window;

use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use gitstow_odb::staging::ContainerStaging;
use gitstow_odb::{ObjectDb, Repository};
use gitstow_protocol::pktline::PktReader;
use gitstow_protocol::push::{read_commands, read_push_options, RefStatus};
use gitstow_protocol::sideband::Band;

use crate::progress::Progress;
pub use crate::report::refuse_pack;
use crate::resolve::{Counters, ResolveError, ResolveOptions};

/// Capabilities `git-receive-pack` advertises (besides `agent`).
pub const CAPABILITIES: &[&str] = &[
    "report-status",
    "report-status-v2",
    "delete-refs",
    "side-band-64k",
    "quiet",
    "atomic",
    "ofs-delta",
    "push-options",
];

/// Objects from which a push calls [`Options::release_freed`]: pass 2's
/// tables hold about 100 bytes an object, so from here they are several
/// MiB, worth returning at once.
pub const RELEASE_AFTER_OBJECTS: u64 = 1 << 16;

/// Scratch bytes pass 1 may keep of inflated entries, per byte of pack
/// ([`scan::KeptInflated`]): git/git's 303 MiB pack inflates to 639 MB
/// (417 MB of delta instructions, 222 MB of whole objects), all kept at 3;
/// a pack that inflates further keeps the entries that fit, and pass 2
/// inflates the rest again.
const KEPT_PER_PACK_BYTE: u64 = 3;

/// Limits and knobs of a push.
#[derive(Debug, Clone)]
pub struct Options {
    /// Resolver threads.
    pub threads: usize,
    /// Largest object accepted, in bytes.
    pub max_object_bytes: u64,
    /// Most objects in one pack (see [`scan::ScanLimits::max_objects`]).
    pub max_objects: u64,
    /// Container size at which a new one starts, in bytes.
    pub max_container_bytes: u64,
    /// Deepest delta chain stored (deeper objects are stored whole).
    pub max_stored_depth: u32,
    /// Deepest delta chain accepted in a pack.
    pub max_chain_depth: u32,
    /// Most bytes of delta bases one resolver thread holds at once while
    /// resolving a base's other children (a hostile delta tree is refused
    /// beyond it; a single base larger than this is always allowed).
    pub max_held_bytes: u64,
    /// Most commands in one push.
    pub max_commands: usize,
    /// Most refs a repository may hold: a push's creations beyond are
    /// refused (`ng <ref> too many refs: …`).
    pub max_refs: usize,
    /// State compare-and-swap attempts.
    pub max_state_attempts: u32,
    /// Where staging files go (the system temp dir when `None`).
    pub staging_dir: Option<PathBuf>,
    /// Refs this push may not rewrite (non-fast-forward or delete); `None`:
    /// any (no access control, or an admin's push).
    pub protect: Option<protect::Protect>,
    /// Keep what a rewrite replaces (a pull mirror's safe mode): each
    /// deletion or non-fast-forward update that lands also creates
    /// `<prefix><ref>` at the ref's old value, in the same transaction
    /// ([`protect::kept_rewrites`]); `None`: nothing is kept.
    pub keep_rewritten: Option<String>,
    /// HEAD names this branch once the transaction lands (a mirror's pull:
    /// the upstream's HEAD), in the same compare-and-swap; the branch HEAD
    /// named before may then be deleted. `None`: HEAD stays, and its
    /// branch cannot be deleted (git's `receive.denyDeleteCurrent`).
    pub new_head: Option<String>,
    /// Refuse every command with this reason (`ng <ref> <reason>`): the
    /// repository takes no pushes (a pull mirror's: its refs come from
    /// its upstream). Nothing is uploaded then. `None`: pushes are taken.
    pub read_only: Option<String>,
    /// The name of the token that pushes, for the hooks (`None`: access
    /// control off).
    pub pusher: Option<String>,
    /// The pre-receive check (see [`hooks`]); `None`: none.
    pub pre_receive: Option<Arc<dyn hooks::PreReceive>>,
    /// Where what lands is announced (see [`hooks`]); `None`: nowhere.
    pub notify: Option<Arc<dyn hooks::Notify>>,
    /// Refs no push may create, update or delete (see
    /// [`gitstow_protocol::hidden`]).
    pub hidden: gitstow_protocol::HiddenRefs,
    /// Paths locked (Git LFS) by others than the pusher: a ref update
    /// that newly reaches a commit changing one is refused ([`locked`]).
    pub locked: Vec<locked::LockedPath>,
    /// Called once pass 2 of a push of at least [`RELEASE_AFTER_OBJECTS`]
    /// objects is done and its tables are dropped, before the last
    /// container is sealed: the allocator may return what they held
    /// (`gitstow serve` purges jemalloc's freed pages); `None`: nothing.
    pub release_freed: Option<fn()>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            max_object_bytes: 2 << 30,
            max_objects: 20_000_000,
            max_container_bytes: 128 << 20,
            max_stored_depth: 50,
            max_chain_depth: 10_000,
            max_held_bytes: 1 << 30,
            max_commands: 100_000,
            max_refs: 10_000_000,
            max_state_attempts: 20,
            staging_dir: None,
            protect: None,
            keep_rewritten: None,
            new_head: None,
            read_only: None,
            pusher: None,
            pre_receive: None,
            notify: None,
            hidden: gitstow_protocol::HiddenRefs::default(),
            locked: Vec::new(),
            release_freed: None,
        }
    }
}

/// What a push did; the same figures feed logs and metrics.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Commands received.
    pub commands: usize,
    /// Commands that succeeded.
    pub updated: usize,
    /// Pack size in bytes.
    pub pack_bytes: u64,
    /// Objects in the pack.
    pub objects: u64,
    /// Deltas resolved.
    pub deltas: u64,
    /// Objects staged (new to the repository).
    pub staged: u64,
    /// Thin-pack bases read from the repository.
    pub thin_bases: u64,
    /// Containers uploaded.
    pub containers: usize,
    /// Bytes of containers uploaded.
    pub container_bytes: u64,
    /// State compare-and-swap retries.
    pub state_retries: u32,
    /// The `unpack` error, if the pack was refused.
    pub unpack_error: Option<String>,
    /// Push options the client sent.
    pub push_options: Vec<String>,
    /// `error: …` lines for side-band 2, in git's words, for failed commands.
    pub remote_errors: Vec<String>,
    /// What the pre-receive check printed (side-band 2, as it is).
    pub hook_output: Vec<u8>,
    /// True when the pre-receive check refused the push.
    pub hook_declined: bool,
}

/// A push that could not even be read; nothing was written to the response.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command list is malformed.
    #[error("{0}")]
    Protocol(String),
    /// The repository state could not be read.
    #[error(transparent)]
    Odb(#[from] gitstow_odb::Error),
    /// Local I/O.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Why the pack stage failed, split by who is at fault.
enum UnpackFailure {
    Client(String),
    /// A failure of the server's: `detail` goes to the log, the client gets
    /// its [`gitstow_store::ServerFault`]'s text.
    Server {
        detail: String,
        reason: &'static str,
    },
}

impl UnpackFailure {
    /// A server-side failure while `what`.
    fn server(what: &str, e: &(dyn std::error::Error + 'static)) -> Self {
        UnpackFailure::Server {
            detail: format!("{what}: {e}"),
            reason: gitstow_store::ServerFault::of(e).text(),
        }
    }
}

/// Runs receive-pack over `request` (the spooled request body: pkt-line
/// commands, then the pack) against `repo`, writing the response to `response`.
///
/// Returns `Err` only when the request could not be read at all and nothing
/// was written; every later failure is reported to the client (`unpack …`,
/// `ng <ref> <reason>`) and in the [`Outcome`].
pub fn receive_pack(
    repo: &Repository,
    request: &File,
    response: &mut dyn Write,
    opts: &Options,
) -> Result<Outcome, Error> {
    let mut reader = PktReader::new(request);
    let mut push = read_commands(&mut reader, opts.max_commands)
        .map_err(|e| Error::Protocol(e.to_string()))?;
    if let Err(e) = read_push_options(&mut reader, &mut push, opts.max_commands) {
        if !e.is_push_options_limit() {
            return Err(Error::Protocol(e.to_string()));
        }
        // Over a limit: refused in the protocol, as a pack over the size limit.
        tracing::info!(repo = repo.name(), reason = %e, "push refused");
        return report::refuse(response, push, &e.to_string());
    }
    let mut file = reader.into_inner();
    let pack_start = file.stream_position()?;
    let mut outcome = Outcome {
        commands: push.commands.len(),
        push_options: push.push_options.clone(),
        ..Default::default()
    };
    if push.commands.is_empty() {
        return Ok(outcome);
    }
    let caps = &push.capabilities;
    let sideband = caps.contains("side-band-64k");
    let quiet = caps.contains("quiet");
    let versioned = repo.load_state()?;
    // The client's object format: SHA-1 when it names none.
    let client = push.capabilities.value("object-format").unwrap_or("sha1");
    let state = match versioned {
        Some(v) => v.state,
        // A push that creates the repository creates it in the client's
        // object format (both are advertised for a missing repository).
        None => gitstow_odb::RepoState {
            object_format: client.parse().unwrap_or_default(),
            ..Default::default()
        },
    };
    check_object_format(&push, client, state.object_format)?;
    let db = repo.objects(&state)?;

    let staging_dir = match &opts.staging_dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let mut progress = Progress::new(&mut *response, sideband && !quiet);
    let unpacked = if push.expects_pack() {
        unpack(
            request,
            pack_start,
            state.object_format,
            &db,
            staging_dir.path(),
            opts,
            &mut progress,
            &mut outcome,
        )
    } else {
        Ok(Unpacked::default())
    };

    let decided = unpacked.and_then(|unpacked| {
        decide::decide(repo, &push, &state, &db, unpacked, opts, &mut outcome)
    });
    let (statuses, unpack_line) = match decided {
        Err(failure) => {
            let reason = match failure {
                UnpackFailure::Client(reason) => {
                    tracing::info!(repo = repo.name(), %reason, "push refused at unpack");
                    reason
                }
                UnpackFailure::Server { detail, reason } => {
                    tracing::error!(repo = repo.name(), error = %detail, "push failed at unpack");
                    reason.to_owned()
                }
            };
            outcome.unpack_error = Some(reason.clone());
            let statuses = vec![Some(reason::Reason::UnpackerError); push.commands.len()];
            (statuses, Err(reason))
        }
        Ok(statuses) => (statuses, Ok(())),
    };
    outcome.updated = statuses.iter().filter(|s| s.is_none()).count();
    if sideband {
        // As git's copy_to_sideband: the hook's output, even with `quiet`.
        for chunk in outcome.hook_output.chunks(32 << 10) {
            let _ =
                gitstow_protocol::sideband::write_band(&mut &mut *response, Band::Progress, chunk);
        }
        for e in &outcome.remote_errors {
            // As git's rp_error: shown even with `quiet`.
            let _ = gitstow_protocol::sideband::write_band(
                &mut &mut *response,
                Band::Progress,
                format!("error: {e}\n").as_bytes(),
            );
        }
    }
    let named: Vec<(String, RefStatus)> = push
        .commands
        .iter()
        .map(|c| c.name.clone())
        .zip(statuses.iter().map(reason::status))
        .collect();
    report::write_report(
        response,
        caps,
        unpack_line.as_ref().map(|_| ()).map_err(|e| e.as_str()),
        &named,
    )?;
    Ok(outcome)
}

/// The client's object format (`client`, its `object-format` value) must
/// be the repository's, and every command's ids of its width: git's
/// receive-pack dies with `error: unsupported object format '<client's>'`
/// otherwise (`read_head_info`), before it reads a pack; so does this,
/// with nothing written.
fn check_object_format(
    push: &gitstow_protocol::push::PushRequest,
    client: &str,
    format: gix_hash::Kind,
) -> Result<(), Error> {
    if client.parse::<gix_hash::Kind>().ok() != Some(format) {
        return Err(Error::Protocol(format!(
            "error: unsupported object format '{client}'"
        )));
    }
    let oids = push.commands.iter().flat_map(|c| [c.old, c.new]);
    match oids
        .chain(push.shallow.iter().copied())
        .find(|o| o.kind() != format)
    {
        Some(oid) => Err(Error::Protocol(format!(
            "protocol error: {oid} is not a {format} object id"
        ))),
        None => Ok(()),
    }
}

#[derive(Default)]
struct Unpacked {
    /// Every object of the push with its kind, sorted by oid.
    oids: gitstow_odb::oids::OidVec<gix_object::Kind>,
    missing_references: usize,
    tag_targets: HashMap<gix_hash::ObjectId, gix_hash::ObjectId>,
    sealed: Vec<gitstow_odb::container::SealedContainer>,
}

/// Where the oids starting with each two bytes begin in `oids` (sorted),
/// and where the last end: a 2-byte fan-out, as a pack index has a 1-byte
/// one, so that a lookup searches a few entries instead of all of them.
fn fanout(oids: &gitstow_odb::oids::OidVec<gix_object::Kind>) -> Vec<u32> {
    let mut starts = vec![0u32; (1 << 16) + 1];
    for (oid, _) in oids.iter() {
        starts[fanout_slot(oid) + 1] += 1;
    }
    for k in 0..1 << 16 {
        starts[k + 1] += starts[k];
    }
    starts
}

/// The [`fanout`] slot of `oid`: its first two bytes.
fn fanout_slot(oid: &gix_hash::oid) -> usize {
    usize::from(u16::from_be_bytes([oid.as_bytes()[0], oid.as_bytes()[1]]))
}

/// Reads the pack of `request` from `pack_start` in the repository's
/// object format `format` and stages what `db` lacks.
#[allow(clippy::too_many_arguments)]
fn unpack(
    request: &File,
    pack_start: u64,
    format: gix_hash::Kind,
    db: &ObjectDb,
    staging_dir: &std::path::Path,
    opts: &Options,
    progress: &mut Progress<'_>,
    outcome: &mut Outcome,
) -> Result<Unpacked, UnpackFailure> {
    let limits = scan::ScanLimits {
        max_object_bytes: opts.max_object_bytes,
        max_objects: opts.max_objects,
    };
    // Pass 1 keeps the entries' inflated bytes for pass 2 in the staging
    // directory, up to a multiple of the pack's size (scratch disk, not memory).
    let keep = scan::KeepInflated {
        file: tempfile::tempfile_in(staging_dir)
            .map_err(|e| UnpackFailure::server("creating the kept-entries file", &e))?,
        budget: request
            .metadata()
            .map_err(|e| UnpackFailure::server("reading the spool", &e))?
            .len()
            .saturating_sub(pack_start)
            .saturating_mul(KEPT_PER_PACK_BYTE),
    };
    let pack =
        scan::scan(request, pack_start, limits, Some(keep), format).map_err(|e| match e {
            scan::ScanError::Invalid(m) => UnpackFailure::Client(m),
            scan::ScanError::Io(e) => UnpackFailure::server("reading the spool", &e),
        })?;
    outcome.pack_bytes = pack.pack_bytes;
    outcome.objects = pack.entries.len() as u64;
    let total_deltas = pack
        .entries
        .iter()
        .filter(|e| !matches!(e.kind, scan::EntryKind::Base(_)))
        .count() as u64;
    let staging = ContainerStaging::new(staging_dir, opts.max_container_bytes)
        .expecting(pack.entries.len() as u64);
    let counters = Counters::default();
    let ropts = ResolveOptions {
        threads: opts.threads,
        max_object_bytes: opts.max_object_bytes,
        max_stored_depth: opts.max_stored_depth,
        max_chain_depth: opts.max_chain_depth,
        max_held_bytes: opts.max_held_bytes,
    };
    let main = std::thread::current();
    // Set before the worker wakes this thread: `is_finished` may still be false
    // right after the unpark, which used to cost every push a 500 ms nap.
    let done = std::sync::atomic::AtomicBool::new(false);
    let resolved = std::thread::scope(|scope| {
        let (main, pack, staging, counters, done) = (&main, &pack, &staging, &counters, &done);
        let worker = scope.spawn(move || {
            let result = resolve::resolve(request, pack, db, staging, ropts, counters);
            done.store(true, Ordering::Release);
            main.unpark();
            result
        });
        while !done.load(Ordering::Acquire) {
            std::thread::park_timeout(std::time::Duration::from_millis(500));
            if !done.load(Ordering::Acquire) && total_deltas > 0 {
                progress.update(
                    "Resolving deltas",
                    counters.deltas.load(Ordering::Relaxed),
                    total_deltas,
                    false,
                );
            }
        }
        worker.join().expect("resolver panicked")
    });
    drop(pack);
    let resolved = resolved.map_err(|e| match e {
        ResolveError::Invalid(m) => UnpackFailure::Client(m),
        ResolveError::Odb(e) => UnpackFailure::server("reading a thin-pack base", &e),
        ResolveError::Io(e) => UnpackFailure::server("staging", &e),
    })?;
    if total_deltas > 0 {
        progress.update("Resolving deltas", total_deltas, total_deltas, true);
    }
    outcome.deltas = counters.deltas.load(Ordering::Relaxed);
    outcome.staged = resolved.staged;
    outcome.thin_bases = resolved.thin_bases;
    // Pass 2's tables and buffers are gone: what they held may go back to
    // the system before the threads' collections are put together and the
    // last container is sealed (for a small push, the allocator's decay
    // is soon enough).
    if let Some(release) = opts.release_freed {
        if outcome.objects >= RELEASE_AFTER_OBJECTS {
            release();
        }
    }
    let merged = check::merge(resolved.collected);
    let mut sealed = staging
        .finish()
        .map_err(|e| UnpackFailure::server("sealing a container", &e))?;
    attach_graphs(&mut sealed, merged.commits, db);
    let oids = merged.oids;
    let fanout = fanout(&oids);
    let pushed = |r: &gix_hash::oid| {
        let k = fanout_slot(r);
        oids.find_in(fanout[k] as usize..fanout[k + 1] as usize, r)
            .is_some()
    };
    let missing_references = resolved
        .references
        .iter()
        .filter(|r| !pushed(r) && !db.contains(r))
        .count();
    Ok(Unpacked {
        oids,
        missing_references,
        tag_targets: merged.tag_targets.into_iter().collect(),
        sealed,
    })
}

/// Gives each sealed container the commit graph of the commits it stores:
/// generations from the push's own commits and the repository's graphs (a
/// parent whose generation no graph knows leaves its descendants' unknown;
/// maintenance fills them in).
fn attach_graphs(
    sealed: &mut [gitstow_odb::container::SealedContainer],
    mut commits: Vec<gitstow_odb::graph::CommitRow>,
    db: &ObjectDb,
) {
    if commits.is_empty() {
        return;
    }
    commits.sort_unstable_by_key(|r| r.oid);
    commits.dedup_by_key(|r| r.oid);
    gitstow_odb::graph::fill_generations(&mut commits, |p| {
        db.graph_commit(p).map(|c| c.generation)
    });
    // A commit is mostly stored in one container: its parents move to that
    // container's rows; only a commit stored twice has them copied.
    fn find(commits: &[gitstow_odb::graph::CommitRow], oid: &gix_hash::ObjectId) -> Option<usize> {
        commits.binary_search_by_key(oid, |r| r.oid).ok()
    }
    let mut uses = vec![0u8; commits.len()];
    for oid in sealed.iter().flat_map(|c| &c.commits) {
        if let Some(i) = find(&commits, oid) {
            uses[i] = uses[i].saturating_add(1);
        }
    }
    for container in sealed {
        let mut rows: Vec<_> = container
            .commits
            .iter()
            .filter_map(|oid| {
                let i = find(&commits, oid)?;
                uses[i] -= 1;
                let parents = match uses[i] {
                    0 => std::mem::take(&mut commits[i].parents),
                    _ => commits[i].parents.clone(),
                };
                Some(gitstow_odb::graph::CommitRow {
                    parents,
                    ..commits[i]
                })
            })
            .collect();
        container.graph = Some(gitstow_odb::graph::CommitGraph::encode(&mut rows));
    }
}

/// The repository's objects with the push's containers (uploaded, not yet
/// committed), for the checks that read the pushed commits.
pub(crate) fn objects_with_push(
    repo: &Repository,
    state: &gitstow_odb::RepoState,
    containers: &[gitstow_odb::state::ContainerRef],
) -> Result<ObjectDb, UnpackFailure> {
    let mut next = state.clone();
    next.containers.extend(containers.iter().cloned());
    repo.objects(&next)
        .map_err(|e| UnpackFailure::server("reading the pushed objects", &e))
}
