//! One push of a repository to another git server (a push mirror, plan
//! 0017 step 4), as `git push --mirror --force-with-lease` makes it:
//!
//! 1. the remote's refs (`info/refs?service=git-receive-pack`);
//! 2. a command for each ref (under the filter) that differs: its old
//!    value is what the remote advertised (the null id for a creation), so
//!    that the remote refuses it if the ref moved meanwhile: a stale
//!    worker never rolls the remote back; a ref the remote has and the
//!    repository does not is deleted (the remote ends equal); a remote
//!    ref at a commit the repository does not have is left alone and
//!    reported refused ([`FETCH_FIRST`]): someone's work is never lost;
//! 3. the pack: what a v2 `fetch` from this repository with the wanted
//!    tips and the remote's known tips as haves would get (upload-pack's
//!    own walk and pack writer, thin against the remote's objects, which
//!    the remote's `index-pack --fix-thin` completes);
//! 4. `POST …/git-receive-pack` with `report-status`: one result per ref.

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use gitstow_odb::Repository;
use gix_hash::ObjectId;

use crate::{RefFilter, Upstream, UpstreamError};

/// Why a remote ref is not overwritten: its value is a commit this
/// repository does not have (git's own word for a push that would lose
/// the remote's work, then what it means here).
pub const FETCH_FIRST: &str =
    "fetch first: the remote's ref is at a commit this repository does not have; not overwritten";

/// How a push runs.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Which refs.
    pub filter: RefFilter,
    /// Most refs read from the remote's advertisement.
    pub max_refs: usize,
    /// Where the pack is spooled (the system's temp dir when `None`).
    pub staging_dir: Option<std::path::PathBuf>,
    /// Hand on the Git LFS objects the repository owns first
    /// ([`crate::lfs::upload`]: the remote's batch API says which it lacks).
    pub lfs: bool,
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions {
            filter: RefFilter::default(),
            max_refs: 1_000_000,
            staging_dir: None,
            lfs: true,
        }
    }
}

/// What a push did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// Refs created, updated and deleted on the remote.
    pub created: usize,
    /// Refs moved.
    pub updated: usize,
    /// Refs deleted.
    pub deleted: usize,
    /// Refs the remote refused, and its reason (`stale info` when it
    /// moved since its advertisement).
    pub refused: Vec<(String, String)>,
    /// Bytes of the pack sent.
    pub pack_bytes: u64,
    /// The Git LFS objects handed on, and those that could not be.
    pub lfs: crate::lfs::LfsCopied,
}

impl Pushed {
    /// Whether anything changed on the remote.
    pub fn changed(&self) -> bool {
        self.created + self.updated + self.deleted > 0
    }
}

/// Why a push failed as a whole (per-ref refusals are in [`Pushed`]).
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// Talking to the remote failed.
    #[error(transparent)]
    Remote(#[from] UpstreamError),
    /// The remote could not take the pack.
    #[error("the remote could not take the pack: {0}")]
    Unpack(String),
    /// The remote lacks a capability a push needs.
    #[error("the remote does not take {0}")]
    Unsupported(&'static str),
    /// Reading the repository failed.
    #[error("reading the repository: {0}")]
    Repository(#[from] gitstow_odb::Error),
    /// Making the pack failed.
    #[error("making the pack: {0}")]
    Pack(#[from] gitstow_upload::Error),
    /// Local I/O (the spool).
    #[error("spooling the pack: {0}")]
    Io(#[from] std::io::Error),
}

impl PushError {
    /// Whether trying again without a change will not help.
    pub fn is_permanent(&self) -> bool {
        match self {
            PushError::Remote(e) => !e.is_transient(),
            PushError::Unpack(_) | PushError::Unsupported(_) => true,
            PushError::Repository(_) | PushError::Pack(_) | PushError::Io(_) => false,
        }
    }
}

/// One push of `repo` to `remote` (see the module's documentation).
///
/// # Errors
/// [`PushError`]; the remote changed nothing then, unless it took some
/// refs before failing (its report would say which).
pub fn push(repo: &Repository, remote: &Upstream, opts: &PushOptions) -> Result<Pushed, PushError> {
    let adv = remote.receive_advertisement(opts.max_refs)?;
    let has = |cap: &str| adv.capabilities.iter().any(|c| c == cap);
    if !has("report-status") {
        return Err(PushError::Unsupported("report-status"));
    }
    let theirs: BTreeMap<&str, ObjectId> = adv
        .refs
        .iter()
        .filter(|(name, _)| opts.filter.matches(name))
        .map(|(name, oid)| (name.as_str(), *oid))
        .collect();
    let state = repo.load_state()?.filter(|v| !v.state.deleted);
    let ours: BTreeMap<String, ObjectId> = match &state {
        Some(v) => repo
            .refs(&v.state)
            .and_then(|refs| refs.to_map())?
            .into_iter()
            .filter(|(name, _)| opts.filter.matches(name))
            .filter_map(|(name, value)| Some((name, value.oid()?)))
            .collect(),
        None => BTreeMap::new(),
    };
    let null = ObjectId::null(gix_hash::Kind::Sha1);
    let mut commands = Vec::new();
    let mut pushed = Pushed::default();
    // The LFS objects go first, as git-lfs's pre-push sends them: the
    // remote never holds a pointer whose object it lacks because of us.
    if opts.lfs && state.is_some() {
        let store = repo.store().as_ref();
        let owned = crate::lfs::owned(store, repo.name()).map_err(gitstow_odb::Error::from)?;
        if !owned.is_empty() {
            pushed.lfs = crate::lfs::upload(store, remote, &owned, opts.staging_dir.as_deref())
                .map_err(gitstow_odb::Error::from)?;
        }
    }
    // A remote ref at a commit this repository does not have holds work
    // that would be lost (pushed there by someone else, or by the
    // upstream of this repository's own pull mirror under another name):
    // it is not overwritten nor deleted, and the ref is reported refused.
    let db = match &state {
        Some(v) => Some(repo.objects(&v.state)?),
        None => None,
    };
    let unknown = |old: &ObjectId| !db.as_ref().is_some_and(|db| db.contains(old));
    for (name, new) in &ours {
        match theirs.get(name.as_str()) {
            Some(old) if old == new => {}
            Some(old) if unknown(old) => {
                pushed.refused.push((name.clone(), FETCH_FIRST.to_owned()));
            }
            Some(old) => {
                commands.push((*old, *new, name.clone()));
                pushed.updated += 1;
            }
            None => {
                commands.push((null, *new, name.clone()));
                pushed.created += 1;
            }
        }
    }
    for (name, old) in &theirs {
        if !ours.contains_key(*name) {
            if unknown(old) {
                pushed
                    .refused
                    .push(((*name).to_owned(), FETCH_FIRST.to_owned()));
                continue;
            }
            if !has("delete-refs") {
                return Err(PushError::Unsupported("delete-refs"));
            }
            commands.push((*old, null, (*name).to_owned()));
            pushed.deleted += 1;
        }
    }
    if commands.is_empty() {
        return Ok(pushed);
    }
    let mut request = match &opts.staging_dir {
        Some(dir) => tempfile::tempfile_in(dir)?,
        None => tempfile::tempfile()?,
    };
    let caps = ["report-status", "ofs-delta"]
        .into_iter()
        .filter(|c| *c == "report-status" || has(c))
        .chain(std::iter::once(concat!(
            "agent=gitstow/",
            env!("CARGO_PKG_VERSION")
        )))
        .collect::<Vec<_>>();
    request.write_all(&gitstow_protocol::client_push::push_commands(
        &commands, &caps,
    ))?;
    let wants: Vec<ObjectId> = {
        let mut w: Vec<ObjectId> = commands
            .iter()
            .map(|c| c.1)
            .filter(|n| !n.is_null())
            .collect();
        w.sort();
        w.dedup();
        w
    };
    if let (false, Some(v), Some(db)) = (wants.is_empty(), &state, &db) {
        if !has("ofs-delta") {
            return Err(PushError::Unsupported("ofs-delta"));
        }
        let mut haves: Vec<ObjectId> = theirs
            .values()
            .chain(adv.refs.iter().map(|(_, oid)| oid))
            .filter(|oid| !oid.is_null() && db.contains(oid))
            .copied()
            .collect();
        haves.sort();
        haves.dedup();
        // The pack as upload-pack makes it for a fetch of the wants by a
        // client that has the haves, its side-band framing taken off.
        let fetch = gitstow_protocol::client::fetch_request(&wants, &haves);
        let mut answer = match &opts.staging_dir {
            Some(dir) => tempfile::tempfile_in(dir)?,
            None => tempfile::tempfile()?,
        };
        let upload = gitstow_upload::Options::default();
        gitstow_upload::serve_v2(repo, &v.state, &mut &fetch[..], &mut answer, &upload)?;
        answer.rewind()?;
        let mut w = std::io::BufWriter::new(&mut request);
        pushed.pack_bytes = gitstow_protocol::client::read_fetch_response(
            std::io::BufReader::new(answer),
            &mut w,
            u64::MAX,
        )
        .map_err(|e| PushError::Remote(e.into()))?;
        w.flush()?;
    }
    let len = request.stream_position()?;
    request.rewind()?;
    let report = remote.send_pack(request, len, commands.len() + 1)?;
    if let Some(e) = report.unpack_error {
        return Err(PushError::Unpack(e));
    }
    for (name, why) in report.refs {
        if let Some(why) = why {
            let kind = commands
                .iter()
                .find(|c| c.2 == name)
                .map(|c| (c.0.is_null(), c.1.is_null()));
            match kind {
                Some((true, _)) => pushed.created -= 1,
                Some((_, true)) => pushed.deleted -= 1,
                Some(_) => pushed.updated -= 1,
                None => {}
            }
            pushed.refused.push((name, why));
        }
    }
    Ok(pushed)
}
