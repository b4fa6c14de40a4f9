//! The ref advertisement and upload-pack requests (gitprotocol-pack(5),
//! gitprotocol-v2(5)): what a transport asks for before a fetch and for
//! each of its requests.

use std::io::{Read, Write};
use std::sync::Arc;

use gitstow_odb::{RepoState, Repository};
use gitstow_protocol::{write_v2_capabilities, HiddenRefs, ProtocolVersion, Service};

use crate::metrics as m;
use crate::queue::Slot;
use crate::{Fault, Host, Principal, Refusal, LARGE_LISTING};

/// Whether a v2 request is an `ls-refs` command (its first pkt-line is
/// `command=ls-refs`, which [`Host::fetch`] lets past the fetch queue);
/// leaves `request` at its start.
pub fn is_ls_refs(request: &mut (impl Read + std::io::Seek)) -> bool {
    let mut head = [0u8; 20];
    let _ = request.rewind();
    let n = request.read(&mut head).unwrap_or(0);
    let _ = request.rewind();
    n >= 19 && head[4..19] == *b"command=ls-refs"
}

/// One of upload-pack's entries (`serve_v0`, `serve_v2`, `serve_v0_session`).
type ServeFn = fn(
    &Repository,
    &RepoState,
    &mut dyn Read,
    &mut dyn Write,
    &gitstow_upload::Options,
) -> Result<gitstow_upload::Outcome, gitstow_upload::Error>;

/// A ref advertisement ready to be written: the state it lists, the refs
/// hidden from this caller, and the fetch slot a large listing holds.
#[derive(Debug)]
pub struct Advertisement {
    repo: Repository,
    state: Arc<RepoState>,
    /// The repository does not exist yet (a push would create it).
    missing: bool,
    service: Service,
    version: ProtocolVersion,
    hidden: HiddenRefs,
    _slot: Option<Slot>,
    _writer: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// An upload-pack request ready to run: the state it answers from, its
/// options (the caller's hidden refs) and its fetch slot.
#[derive(Debug)]
pub struct Fetch {
    repo: Repository,
    state: Arc<RepoState>,
    opts: gitstow_upload::Options,
    v2: bool,
    token: Option<String>,
    arena: crate::arena::WorkArena,
    _slot: Option<Slot>,
    _writer: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Host {
    /// The advertisement of `service` for repository `name` as `principal`
    /// sees it in the protocol `version` the client asked for: v2's
    /// capabilities (upload-pack only; receive-pack stays v0), else the v0
    /// list of refs, led by `version 1` for v1. A repository
    /// that does not exist advertises no refs to receive-pack when
    /// repositories are created on their first push. A listing of more than
    /// [`LARGE_LISTING`] refs waits for a fetch slot.
    ///
    /// # Errors
    /// [`Refusal::NotFound`], [`Refusal::Busy`], or the store's failure.
    pub async fn advertisement(
        &self,
        name: &str,
        principal: &Principal,
        service: Service,
        version: ProtocolVersion,
    ) -> Result<Advertisement, Refusal> {
        let (state, missing) = match (self.state(name).await?, service) {
            (Some(s), _) => (s, false),
            (None, Service::ReceivePack) if self.config.auto_create => (Arc::default(), true),
            (None, _) => return Err(Refusal::NotFound(name.to_owned())),
        };
        // receive-pack has no v2: git's answers a v2 request in v1.
        let version = match (service, version) {
            (Service::ReceivePack, ProtocolVersion::V2) => ProtocolVersion::V1,
            (_, v) => v,
        };
        let v2_capabilities = version == ProtocolVersion::V2;
        // A listing of many refs reads tables and spends CPU for as long as
        // it is written: it waits for a fetch slot, so that a flood of them
        // shares the fetch slots with clones.
        let slot = if !v2_capabilities && state.refs.len() > LARGE_LISTING as u64 {
            Some(self.admit_fetch(name).await?)
        } else {
            None
        };
        let writer = match (v2_capabilities, &slot) {
            (false, None) => self.admit_listing(state.refs.len()).await,
            _ => None,
        };
        let hidden = match service {
            Service::UploadPack => &self.config.upload.hidden,
            Service::ReceivePack => &self.config.receive.hidden,
        };
        Ok(Advertisement {
            repo: self.repo(name),
            hidden: self.hidden(hidden, name, &principal.hide_refs),
            state,
            missing,
            service,
            version,
            _slot: slot,
            _writer: writer,
        })
    }

    /// An upload-pack request of `principal` on repository `name` (`v2`:
    /// gitprotocol-v2(5), else v0/v1), once a fetch slot is free. A v2
    /// `ls-refs` (`ls_refs`) only lists refs: it does not queue behind
    /// clones, unless the repository has so many refs that the listing is
    /// not cheap.
    ///
    /// # Errors
    /// [`Refusal::NotFound`], [`Refusal::Busy`], or the store's failure.
    pub async fn fetch(
        &self,
        name: &str,
        principal: &Principal,
        v2: bool,
        ls_refs: bool,
    ) -> Result<Fetch, Refusal> {
        let mut slot = if ls_refs {
            None
        } else {
            Some(self.admit_fetch(name).await?)
        };
        let state = match self.state(name).await? {
            Some(s) => s,
            None => return Err(Refusal::NotFound(name.to_owned())),
        };
        if ls_refs && state.refs.len() > LARGE_LISTING as u64 {
            slot = Some(self.admit_fetch(name).await?);
        }
        let writer = match (ls_refs, &slot) {
            (true, None) => self.admit_listing(state.refs.len()).await,
            _ => None,
        };
        let mut opts = self.config.upload.clone();
        opts.hidden = self.hidden(&opts.hidden, name, &principal.hide_refs);
        Ok(Fetch {
            repo: self.repo(name),
            state,
            opts,
            v2,
            token: principal.token.clone(),
            arena: self.fetch_arena,
            _slot: slot,
            _writer: writer,
        })
    }
}

impl Advertisement {
    /// The listing writer's permit this advertisement holds, if any, for
    /// the transport to hand to its [`crate::output::Writer`]
    /// (`release_before_waiting`).
    pub fn take_listing_permit(&mut self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self._writer.take()
    }

    /// Writes the advertisement to `out` (pkt-lines, ending in a flush-pkt),
    /// after smart HTTP's `# service=` header when `service_header` (v0
    /// only: git http-backend sends none before v2's capabilities). Runs on
    /// a blocking thread: it reads ref tables from the store as it writes.
    ///
    /// # Errors
    /// The store's failure or the writer's ([`Fault::Server`], logged with
    /// its chain).
    pub fn write(self, out: &mut dyn Write, service_header: bool) -> Result<(), Fault> {
        self.write_listing(out, service_header)
            .map_err(|e| Fault::server("writing the advertisement", e.as_ref()))
    }

    fn write_listing(
        self,
        out: &mut dyn Write,
        service_header: bool,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        use gitstow_upload::advertise;
        let mut out = out;
        let lead = advertise::Lead {
            http_header: service_header,
            version1: self.version == ProtocolVersion::V1,
        };
        match self.service {
            Service::UploadPack if self.version == ProtocolVersion::V2 => write_v2_capabilities(
                &mut out,
                self.service,
                &advertise::upload_pack_v2_capabilities(self.state.object_format),
                false,
            )?,
            Service::UploadPack => {
                let view = self.repo.refs(&self.state)?;
                let head = advertise::head(&self.state, &view)?;
                let caps = advertise::upload_pack_v0_capabilities(&self.state, head.is_some());
                advertise::write_v0(
                    &mut out,
                    self.service,
                    &view,
                    head,
                    &caps,
                    &self.hidden,
                    lead,
                )?
            }
            Service::ReceivePack => {
                let view = self.repo.refs(&self.state)?;
                let mut caps: Vec<String> = gitstow_receive::CAPABILITIES
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                // The repository's object format; a repository a push would
                // create is created in the client's, either (SHA-1 first:
                // the advertisement's zero id is SHA-1's).
                caps.push(format!("object-format={}", self.state.object_format));
                if self.missing {
                    caps.push("object-format=sha256".into());
                }
                caps.push(format!("agent={}", advertise::AGENT));
                advertise::write_v0(
                    &mut out,
                    self.service,
                    &view,
                    None,
                    &caps,
                    &self.hidden,
                    lead,
                )?
            }
        }
        Ok(())
    }
}

impl Fetch {
    /// The listing writer's permit this `ls-refs` holds, if any (see
    /// [`Advertisement::take_listing_permit`]).
    pub fn take_listing_permit(&mut self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self._writer.take()
    }

    /// The repository.
    pub fn repo(&self) -> &Repository {
        &self.repo
    }

    /// Answers the upload-pack request read from `request` on `out`, in the
    /// fetch arena, and records its figures (`gitstow_fetch_duration_seconds`,
    /// `gitstow_fetch_cpu_seconds`, `gitstow_objects_sent_total`) and its
    /// access-log line. Runs on a blocking thread.
    ///
    /// # Errors
    /// A bad request ([`Fault::BadRequest`]: the protocol, or a want the
    /// walk refuses) or a failure of the store or the writer
    /// ([`Fault::Server`], logged with its chain).
    pub fn run(
        self,
        request: &mut dyn Read,
        out: &mut dyn Write,
    ) -> Result<gitstow_upload::Outcome, Fault> {
        let serve = if self.v2 {
            gitstow_upload::serve_v2
        } else {
            gitstow_upload::serve_v0
        };
        self.run_with(serve, request, out)
    }

    /// Answers a v0/v1 upload-pack session over one stream (SSH): the want
    /// list, each round of haves as it ends, then the pack
    /// ([`gitstow_upload::serve_v0_session`]); `out` is flushed at the end
    /// of each round. Figures and log line as [`Fetch::run`].
    ///
    /// # Errors
    /// As [`Fetch::run`].
    pub fn run_session(
        self,
        request: &mut dyn Read,
        out: &mut dyn Write,
    ) -> Result<gitstow_upload::Outcome, Fault> {
        self.run_with(gitstow_upload::serve_v0_session, request, out)
    }

    fn run_with(
        self,
        serve: ServeFn,
        request: &mut dyn Read,
        out: &mut dyn Write,
    ) -> Result<gitstow_upload::Outcome, Fault> {
        let _arena = self.arena.enter();
        let started = std::time::Instant::now();
        let cpu_started = m::thread_cpu();
        let mut request = std::io::BufReader::with_capacity(64 << 10, request);
        let (repo, state, opts) = (&self.repo, &self.state, &self.opts);
        let result = serve(repo, state, &mut request, out, opts);
        metrics::histogram!(m::FETCH_DURATION).record(started.elapsed().as_secs_f64());
        let cpu = m::thread_cpu().saturating_sub(cpu_started);
        metrics::histogram!(m::FETCH_CPU).record(cpu.as_secs_f64());
        match &result {
            Ok(o) => {
                metrics::counter!(m::OBJECTS_SENT).increment(o.pack.map_or(0, |p| p.objects));
                tracing::info!(
                    repo = repo.name(),
                    token = self.token.as_deref(),
                    v2 = self.v2,
                    wants = o.wants,
                    haves = o.haves,
                    commits_read = o.commits_read,
                    via = o.via.map(|v| v.as_str()),
                    graph_commits = o.graph_commits,
                    graph_misses = o.graph_misses,
                    have_bitmap_objects = o.have_bitmap.map(|h| h.objects),
                    have_bitmap_walked = o.have_bitmap.map(|h| h.commits_walked),
                    have_bitmap_dropped = o.have_bitmap.map(|h| h.dropped),
                    objects = o.pack.map(|p| p.objects),
                    thin_deltas = o.pack.map(|p| p.thin),
                    resolved_deltas = o.pack.map(|p| p.resolved),
                    bytes = o.pack.map(|p| p.bytes),
                    lookups = o.lookups.lookups,
                    index_probes = o.lookups.probes,
                    ms = started.elapsed().as_millis() as u64,
                    cpu_us = cpu.as_micros() as u64,
                    "upload-pack"
                )
            }
            Err(e) => tracing::warn!(repo = repo.name(), error = %e, "upload-pack failed"),
        }
        result.map_err(|e| Fault::of_fetch(&e))
    }
}
