//! One pull of a mirror: the upstream's refs compared with the stored
//! ones, one fetch of what changed (haves: the old values of the refs
//! that moved, then the other stored tips, at most 256), and the
//! changes applied by receive-pack's ingest as one atomic push (one
//! compare-and-swap of the state, or nothing).

use std::io::{Seek, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use gitstow_odb::Repository;
use gitstow_protocol::pktline;
use gix_hash::ObjectId;

use crate::upstream::{Upstream, UpstreamError};
use crate::BACKUP_PREFIX;

/// Which of the upstream's refs a mirror takes: full names, or prefixes
/// ending in `/*` (any depth). The default is `refs/heads/*` and
/// `refs/tags/*`: never a forge's `refs/pull/*` unless asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefFilter {
    patterns: Vec<String>,
}

impl Default for RefFilter {
    fn default() -> Self {
        RefFilter {
            patterns: vec!["refs/heads/*".into(), "refs/tags/*".into()],
        }
    }
}

impl RefFilter {
    /// A filter of `patterns` (each `refs/…`, a `*` only as a last `/*`).
    ///
    /// # Errors
    /// The pattern that breaks the rule, and why.
    pub fn new(patterns: Vec<String>) -> Result<RefFilter, String> {
        if patterns.is_empty() {
            return Err("no ref pattern".into());
        }
        for p in &patterns {
            let body = p.strip_suffix("/*").unwrap_or(p);
            if !p.starts_with("refs/") || body.contains('*') || body.ends_with('/') {
                return Err(format!(
                    "{p:?} is not a ref pattern: a full ref name (refs/heads/main) or a prefix ending in /* (refs/heads/*)"
                ));
            }
            if p.starts_with(BACKUP_PREFIX) {
                return Err(format!(
                    "{p:?}: {BACKUP_PREFIX} is where a mirror keeps old tips"
                ));
            }
        }
        Ok(RefFilter { patterns })
    }

    /// The patterns.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether the mirror takes `name` (never a kept old tip).
    pub fn matches(&self, name: &str) -> bool {
        !name.starts_with(BACKUP_PREFIX)
            && self.patterns.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => p == name,
            })
    }

    /// The `ref-prefix` arguments of `ls-refs` for these patterns.
    fn prefixes(&self) -> Vec<&str> {
        self.patterns
            .iter()
            .map(|p| p.strip_suffix('*').unwrap_or(p))
            .collect()
    }
}

/// What a pull does with a ref the upstream rewrote or deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Keep its old tip under [`BACKUP_PREFIX`]`<time>/<ref>` (in the same
    /// transaction), then apply the upstream's value: a force-push or a
    /// wipe upstream loses nothing here.
    #[default]
    Safe,
    /// Apply the upstream's refs as they are (opt-in).
    Exact,
}

/// How a pull runs.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Which refs.
    pub filter: RefFilter,
    /// Safe or exact.
    pub mode: Mode,
    /// Most refs taken from the upstream's listing.
    pub max_refs: usize,
    /// Largest pack accepted from the upstream, in bytes (as a push's).
    pub max_pack_bytes: u64,
    /// The ingest's limits (object size and count, chain depth, threads,
    /// staging directory), as a push's.
    pub receive: gitstow_receive::Options,
    /// Bring the Git LFS objects the pulled pointers name
    /// ([`crate::lfs::download`]; each at most `max_pack_bytes`).
    pub lfs: bool,
    /// LFS objects an earlier pull could not bring (oid → size): tried
    /// again.
    pub lfs_retry: std::collections::BTreeMap<gitstow_lfs::Oid, u64>,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            filter: RefFilter::default(),
            mode: Mode::Safe,
            max_refs: 1_000_000,
            max_pack_bytes: 8 << 30,
            receive: gitstow_receive::Options::default(),
            lfs: true,
            lfs_retry: Default::default(),
        }
    }
}

/// What a pull did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// Refs created, updated and deleted.
    pub created: usize,
    /// Refs moved.
    pub updated: usize,
    /// Refs deleted.
    pub deleted: usize,
    /// Old tips kept (safe mode): `refs/mirror-backup/<time>/<ref>` and
    /// the object it keeps.
    pub kept: Vec<(String, ObjectId)>,
    /// Bytes of the pack fetched.
    pub pack_bytes: u64,
    /// Objects new to the repository.
    pub objects: u64,
    /// The branch the upstream's HEAD names (`refs/heads/main`), when it
    /// names one the filter takes: a mirror's HEAD follows it.
    pub head: Option<String>,
    /// The Git LFS objects brought, and those the upstream could not give.
    pub lfs: crate::lfs::LfsCopied,
}

impl Pulled {
    /// Whether anything changed.
    pub fn changed(&self) -> bool {
        self.created + self.updated + self.deleted > 0
    }
}

/// Why a pull failed; nothing was applied.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// Talking to the upstream failed.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// The upstream's pack was refused by the ingest (git's words).
    #[error("the upstream's pack was refused: {0}")]
    Unpack(String),
    /// Ref updates were refused (ref, git's reason); the pull is atomic.
    #[error("the ref updates were refused: {}", .0.iter().map(|(r, why)| format!("{r}: {why}")).collect::<Vec<_>>().join("; "))]
    Refused(Vec<(String, String)>),
    /// Reading the repository failed.
    #[error("reading the repository: {0}")]
    Repository(#[from] gitstow_odb::Error),
    /// The ingest could not run.
    #[error("the ingest failed: {0}")]
    Receive(#[from] gitstow_receive::Error),
    /// Local I/O (the spool).
    #[error("spooling the upstream's pack: {0}")]
    Io(#[from] std::io::Error),
}

impl PullError {
    /// Whether trying again without a change will not help: the upstream
    /// refused (401, 403, 404, another 4xx), its answer broke the protocol,
    /// or its pack was refused. A connection failure, a timeout, a 5xx, a
    /// ref update lost to a race or a failure of the store here may pass.
    pub fn is_permanent(&self) -> bool {
        match self {
            PullError::Upstream(e) => !e.is_transient(),
            PullError::Unpack(_) => true,
            PullError::Refused(_)
            | PullError::Repository(_)
            | PullError::Receive(_)
            | PullError::Io(_) => false,
        }
    }

    /// The run state's record of this failure.
    pub fn failed(&self) -> crate::settings::Failed {
        crate::settings::Failed {
            message: self.to_string(),
            permanent: self.is_permanent(),
        }
    }
}

/// One pull of `repo` from `upstream` (see the module's documentation).
///
/// # Errors
/// [`PullError`]; nothing is applied then.
pub fn pull(
    repo: &Repository,
    upstream: &Upstream,
    opts: &PullOptions,
) -> Result<Pulled, PullError> {
    upstream.capabilities()?;
    let mut prefixes = opts.filter.prefixes();
    prefixes.push("HEAD");
    let listed = upstream.ls_refs(&prefixes, opts.max_refs)?;
    let head = listed
        .iter()
        .find(|r| r.name == "HEAD")
        .and_then(|r| r.symref_target.clone())
        .filter(|target| opts.filter.matches(target));
    let remote: Vec<(String, ObjectId)> = listed
        .into_iter()
        .filter(|r| r.symref_target.is_none() && opts.filter.matches(&r.name))
        .map(|r| (r.name, r.oid))
        .collect();
    let current = repo.load_state()?;
    let head_before = current.as_ref().and_then(|v| v.state.head.clone());
    let containers_before: std::collections::HashSet<String> = current
        .as_ref()
        .map(|v| v.state.containers.iter().map(|c| c.id.clone()).collect())
        .unwrap_or_default();
    // One read of the refs: those the filter takes, and the kept old tips.
    let all_refs: std::collections::BTreeMap<String, ObjectId> = match current {
        Some(v) if !v.state.deleted => repo
            .refs(&v.state)
            .and_then(|refs| refs.to_map())?
            .into_iter()
            .filter_map(|(name, value)| Some((name, value.oid()?)))
            .collect(),
        _ => Default::default(),
    };
    let (kept_before, local): (
        std::collections::BTreeMap<_, _>,
        std::collections::BTreeMap<_, _>,
    ) = all_refs
        .into_iter()
        .filter(|(name, _)| name.starts_with(BACKUP_PREFIX) || opts.filter.matches(name))
        .partition(|(name, _)| name.starts_with(BACKUP_PREFIX));
    let mut commands = Vec::new();
    let mut pulled = Pulled {
        head,
        ..Pulled::default()
    };
    let null = ObjectId::null(gix_hash::Kind::Sha1);
    let upstream_names: std::collections::HashSet<&str> =
        remote.iter().map(|(n, _)| n.as_str()).collect();
    for (name, new) in &remote {
        match local.get(name) {
            Some(old) if old == new => {}
            Some(old) => {
                commands.push((*old, *new, name.clone()));
                pulled.updated += 1;
            }
            None => {
                commands.push((null, *new, name.clone()));
                pulled.created += 1;
            }
        }
    }
    for (name, old) in &local {
        if !upstream_names.contains(name.as_str()) {
            commands.push((*old, null, name.clone()));
            pulled.deleted += 1;
        }
    }
    if commands.is_empty() {
        pulled.lfs = copy_lfs(repo, upstream, opts, None)?;
        return Ok(pulled);
    }
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
    let haves = haves_for(&commands, &local, MAX_HAVES);
    let mut spool = match &opts.receive.staging_dir {
        Some(dir) => tempfile::tempfile_in(dir)?,
        None => tempfile::tempfile()?,
    };
    {
        let mut w = std::io::BufWriter::new(&mut spool);
        for (i, (old, new, name)) in commands.iter().enumerate() {
            if i == 0 {
                let caps = format!(
                    "report-status atomic object-format=sha1 agent={}",
                    gitstow_protocol::client::AGENT
                );
                let mut line = format!("{old} {new} {name}").into_bytes();
                line.push(0);
                line.extend_from_slice(caps.as_bytes());
                line.push(b'\n');
                pktline::write_data(&mut w, &line)?;
            } else {
                pktline::write_text(&mut w, &format!("{old} {new} {name}"))?;
            }
        }
        pktline::write_flush(&mut w)?;
        if !wants.is_empty() {
            pulled.pack_bytes = upstream.fetch(&wants, &haves, &mut w, opts.max_pack_bytes)?;
        }
        w.flush()?;
    }
    spool.rewind()?;
    let mut receive = opts.receive.clone();
    // HEAD follows the upstream's in the same transaction: an upstream that
    // renamed its default branch and deleted the old one in one go is
    // taken whole (the branch HEAD named may go then).
    receive.new_head = pulled
        .head
        .clone()
        .filter(|h| Some(h) != head_before.as_ref());
    if opts.mode == Mode::Safe {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        receive.keep_rewritten = Some(format!("{BACKUP_PREFIX}{secs}/"));
    }
    let mut report = Vec::new();
    let outcome = gitstow_receive::receive_pack(repo, &spool, &mut report, &receive)?;
    if let Some(e) = outcome.unpack_error {
        return Err(PullError::Unpack(e));
    }
    let refused = refused_refs(&report);
    if !refused.is_empty() {
        return Err(PullError::Refused(refused));
    }
    pulled.objects = outcome.staged;
    // The state the pull left, read once: the old tips it kept, the
    // containers it added (for their LFS pointers).
    let Some(after) = repo.load_state()? else {
        return Ok(pulled);
    };
    if opts.mode == Mode::Safe {
        pulled.kept = kept_names(repo, &after.state)
            .into_iter()
            .filter(|(n, _)| !kept_before.contains_key(n))
            .collect();
    }
    let added: Vec<String> = after
        .state
        .containers
        .iter()
        .map(|c| c.id.clone())
        .filter(|id| !containers_before.contains(id))
        .collect();
    pulled.lfs = copy_lfs(repo, upstream, opts, Some((&after.state, &added)))?;
    Ok(pulled)
}

/// Most `have` lines a pull sends with its one `done` request. Every
/// stored tip was one: 51 KB of request for git/git's 1,016 refs, against
/// git's negotiated 1.1 KB; a repository of a million tags would have sent
/// 46 MB each time something changed.
const MAX_HAVES: usize = 256;

/// The haves of a pull, distinct, at most `max`: the old values of the
/// refs it moves or deletes first (new history mostly grows from them),
/// then the other branch tips, then the other tips, each in name order.
/// Fewer haves can only make the upstream send objects the repository
/// already has, never too few: its pack is what the wants reach and the
/// haves do not.
fn haves_for(
    commands: &[(ObjectId, ObjectId, String)],
    local: &std::collections::BTreeMap<String, ObjectId>,
    max: usize,
) -> Vec<ObjectId> {
    let moved = commands.iter().map(|c| c.0).filter(|old| !old.is_null());
    let branches = local
        .iter()
        .filter(|(name, _)| name.starts_with("refs/heads/"))
        .map(|(_, oid)| *oid);
    let others = local
        .iter()
        .filter(|(name, _)| !name.starts_with("refs/heads/"))
        .map(|(_, oid)| *oid);
    let mut seen = std::collections::HashSet::new();
    moved
        .chain(branches)
        .chain(others)
        .filter(|oid| seen.insert(*oid))
        .take(max)
        .collect()
}

/// Brings the LFS objects the pointer blobs of the containers `added` to
/// a state name, and those `opts` says to try again (nothing without
/// [`PullOptions::lfs`]).
fn copy_lfs(
    repo: &Repository,
    upstream: &Upstream,
    opts: &PullOptions,
    added: Option<(&gitstow_odb::state::RepoState, &[String])>,
) -> Result<crate::lfs::LfsCopied, PullError> {
    if !opts.lfs {
        return Ok(Default::default());
    }
    let mut wanted = match added {
        Some((state, containers)) => crate::lfs::pointers_in(repo, state, containers)?,
        None => Default::default(),
    };
    wanted.extend(opts.lfs_retry.iter().map(|(o, s)| (*o, *s)));
    if wanted.is_empty() {
        return Ok(Default::default());
    }
    crate::lfs::download(
        repo.store().as_ref(),
        repo.name(),
        upstream,
        &wanted,
        opts.max_pack_bytes,
        opts.receive.staging_dir.as_deref(),
    )
    .map_err(|e| PullError::Repository(e.into()))
}

/// The kept old tips of `repo` at `state` and what they keep (empty when
/// they cannot be read: only the report of a pull uses them).
fn kept_names(
    repo: &Repository,
    state: &gitstow_odb::state::RepoState,
) -> std::collections::BTreeMap<String, ObjectId> {
    repo.refs(state)
        .and_then(|refs| refs.to_map())
        .map(|m| {
            m.into_iter()
                .filter(|(n, _)| n.starts_with(BACKUP_PREFIX))
                .filter_map(|(n, v)| Some((n, v.oid()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The `ng <ref> <reason>` lines of a report-status (gitprotocol-pack(5)).
fn refused_refs(report: &[u8]) -> Vec<(String, String)> {
    let mut r = pktline::PktReader::new(report);
    let mut refused = Vec::new();
    while let Ok(Some(p)) = r.read_packet() {
        let Some(line) = p.as_text() else { continue };
        let line = String::from_utf8_lossy(line);
        if let Some(rest) = line.strip_prefix("ng ") {
            let (name, why) = rest.split_once(' ').unwrap_or((rest, ""));
            refused.push((name.to_owned(), why.to_owned()));
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_filter_takes_branches_and_tags_only() {
        let f = RefFilter::default();
        assert!(f.matches("refs/heads/main") && f.matches("refs/tags/v1/rc"));
        assert!(!f.matches("refs/pull/1/head") && !f.matches("HEAD"));
        assert!(!f.matches("refs/mirror-backup/1/refs/heads/main"));
        let all = RefFilter::new(vec!["refs/*".into()]).unwrap();
        assert!(all.matches("refs/pull/1/head"));
        assert!(!all.matches("refs/mirror-backup/1/refs/heads/main"));
        let one = RefFilter::new(vec!["refs/heads/main".into()]).unwrap();
        assert!(one.matches("refs/heads/main") && !one.matches("refs/heads/main2"));
        assert_eq!(one.prefixes(), ["refs/heads/main"]);
        for bad in [
            "heads/*",
            "refs/*/x",
            "refs/heads/",
            "refs/mirror-backup/*",
            "refs/he*",
        ] {
            assert!(RefFilter::new(vec![bad.into()]).is_err(), "{bad}");
        }
        assert!(RefFilter::new(vec![]).is_err());
    }

    #[test]
    fn haves_are_the_moved_refs_then_branches_then_the_rest_capped() {
        let oid = |b: u8| ObjectId::from_bytes_or_panic(&[b; 20]);
        let null = ObjectId::null(gix_hash::Kind::Sha1);
        let local: std::collections::BTreeMap<String, ObjectId> = [
            ("refs/heads/a", oid(1)),
            ("refs/heads/main", oid(2)),
            ("refs/tags/v1", oid(3)),
            ("refs/tags/v2", oid(2)),
            ("refs/tags/v3", oid(4)),
        ]
        .into_iter()
        .map(|(n, o)| (n.to_owned(), o))
        .collect();
        let commands = vec![
            (oid(2), oid(9), "refs/heads/main".to_owned()),
            (null, oid(8), "refs/heads/new".to_owned()),
            (oid(4), null, "refs/tags/v3".to_owned()),
        ];
        assert_eq!(
            haves_for(&commands, &local, 10),
            vec![oid(2), oid(4), oid(1), oid(3)]
        );
        assert_eq!(
            haves_for(&commands, &local, 3),
            vec![oid(2), oid(4), oid(1)]
        );
        assert!(haves_for(&[], &Default::default(), 10).is_empty());
    }

    #[test]
    fn refused_refs_come_from_ng_lines() {
        let mut report = Vec::new();
        pktline::write_text(&mut report, "unpack ok").unwrap();
        pktline::write_text(&mut report, "ok refs/heads/a").unwrap();
        pktline::write_text(&mut report, "ng refs/heads/b atomic push failed").unwrap();
        pktline::write_flush(&mut report).unwrap();
        assert_eq!(
            refused_refs(&report),
            [("refs/heads/b".to_owned(), "atomic push failed".to_owned())]
        );
    }
}
