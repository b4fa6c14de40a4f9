//! git's two services, upload-pack and receive-pack, as one entry whatever
//! the transport (architecture: the `service` layer; plan 0011).
//!
//! A transport (smart HTTP in `gitstow-http`, SSH in `gitstow-ssh`) asks
//! the access [`gate`] who the client is and gets a [`Principal`] (or a
//! typed [`Denied`] to render in its own words), names the repository and
//! asks a [`Host`] for the work: [`Host::advertisement`] (the ref
//! advertisement, or v2's capabilities), [`Host::fetch`] (an upload-pack
//! request) or [`Host::push`] (a receive-pack request). Each waits for its
//! slot in the fetch or push queue and loads the repository's state on the
//! async side, then hands back a job whose `run`/`write` the transport calls
//! on a blocking thread with the client's bytes and a writer of its framing.
//! The jobs record the same metrics, access-log lines, hooks, webhooks and
//! automatic maintenance for every transport; what differs by transport is
//! only the framing around the bytes.
//!
//! - [`fault`]: what a client may be told of a failed command, one text each.
//! - [`input`]: a request's bounds and pace, as both transports read it.
//! - [`gate`]: the access gate: tokens, SSH keys, grants, the failed-login limiter.
//! - [`queue`]: the push and fetch concurrency caps.
//! - [`maintenance`]: automatic maintenance after pushes.
//! - [`mirrors`]: pull and push mirrors run by whichever instance claims them.
//! - [`fetch`]: advertisements and upload-pack requests.
//! - [`push`]: receive-pack requests.
//! - [`metrics`]: the names of the figures recorded here.
//! - [`arena`]: the jemalloc arena fetch work allocates in, and freed
//!   pages returned at once after a large push's pass 2.
//! - [`conn_caps`]: caps on connections, in total and per client address.
//! - [`repo_name`]: repository names as clients give them.
//! - [`output`]: a response from its blocking thread to the client: a
//!   small window in memory, spilled to disk past it, the client paced.
#![deny(missing_docs)]

use std::sync::Arc;

use gitstow_odb::{IndexCache, RepoState, Repository, StateCache};
use gitstow_store::ObjectStore;

pub mod arena;
pub mod conn_caps;
pub mod fault;
pub mod fetch;
pub mod gate;
pub mod input;
pub mod maintenance;
pub mod metrics;
pub mod mirrors;
pub mod output;
pub mod push;
pub mod queue;
pub mod repo_name;

pub use fault::Fault;
pub use fetch::{Advertisement, Fetch};
pub use push::Push;

use queue::{Work, WorkQueue};

/// Refs above which a listing (`info/refs`, v2 `ls-refs`) waits for a fetch
/// slot: it streams (a line and a batch held), but reads ref tables and
/// spends CPU for as long as it is written, so a flood of them shares the
/// fetch slots with clones.
pub const LARGE_LISTING: usize = 100_000;

/// Refs up to which a listing is written without waiting for a listing
/// writer ([`Host::admit_listing`]): about 100 KB, made in a millisecond.
pub const SMALL_LISTING: usize = 1_000;

/// The longest a client may take nothing of a response, and the most
/// credit of waiting it can hold ([`output::Pace::stall`]): a client that
/// stopped reading (a suspended `git clone`) loses its response, so it
/// cannot hold a fetch slot, a thread or a spill for ever. HTTP and SSH
/// alike.
pub const SEND_STALL: std::time::Duration = std::time::Duration::from_secs(120);

/// [`SEND_STALL`], or `GITSTOW_TEST_SEND_STALL_MS` (tests only: a stalled
/// reader's test cannot wait two minutes).
pub fn send_stall() -> std::time::Duration {
    static STALL: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *STALL.get_or_init(|| {
        std::env::var("GITSTOW_TEST_SEND_STALL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(SEND_STALL, std::time::Duration::from_millis)
    })
}

/// Who asks, once a transport authenticated and authorized them for the
/// repository (HTTP: a token; SSH: a key attached to a token).
#[derive(Debug, Clone, Default)]
pub struct Principal {
    /// The token's name (`None`: anonymous, or access control is off).
    pub token: Option<String>,
    /// The ref patterns this request may not rewrite or delete (the
    /// repository's protected refs, for anyone below `admin`); `None`: any.
    pub protect: Option<Vec<String>>,
    /// The webhooks (names) that receive the repository's pushes.
    pub webhooks: Vec<String>,
    /// The repository's hidden ref prefixes from the access document
    /// (`gitstow access hide-refs`), added to the server's `--hide-refs`.
    pub hide_refs: Vec<String>,
}

/// Why the access gate ([`gate::Gate`]) refused a request before it
/// reached a service: the typed denial each transport renders in its own
/// words (HTTP: a status and a message; SSH: an `ERROR:` line on stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No such repository for this principal, or no right to read it: one
    /// answer for both, so that names are not probed (SSH's keys).
    NotFound,
    /// It may read but not do this (a push with a read grant), or a token
    /// without the right: the words to say.
    Forbidden(String),
    /// Access control cannot be read now (try again later).
    Unavailable,
    /// The store does not answer, so access control cannot be read (try
    /// again later; HTTP says when).
    StoreDown,
    /// Credentials are needed and none were presented (HTTP asks for them).
    Unauthenticated,
    /// Malformed credentials, or a token that is unknown, revoked or
    /// expired.
    InvalidCredentials,
    /// Too many failed attempts from the client's address lately
    /// ([`gate::MAX_FAILURES`] in [`gate::FAILURE_WINDOW`]).
    TooManyFailures,
    /// Access control is off and the request named something other than
    /// the loopback interface ([`gate::GateConfig::loopback_hosts_only`]).
    LoopbackOnly,
}

/// Settings of the services, whatever the transport.
#[derive(Debug, Clone)]
pub struct Config {
    /// Create a repository on its first push.
    pub auto_create: bool,
    /// Receive-pack settings.
    pub receive: gitstow_receive::Options,
    /// Upload-pack settings.
    pub upload: gitstow_upload::Options,
    /// Pushes resolving at once; later ones queue.
    pub max_concurrent_pushes: usize,
    /// How long a push may wait in the queue before it is refused.
    pub push_queue_timeout: std::time::Duration,
    /// Upload-pack requests running at once; later ones queue (with their
    /// request read).
    pub max_concurrent_fetches: usize,
    /// How long a fetch may wait in the queue before it is refused.
    pub fetch_queue_timeout: std::time::Duration,
    /// Automatic maintenance after pushes (`None`: off).
    pub maintenance: Option<maintenance::MaintenanceConfig>,
    /// Mirrors (pull and push) run by this instance when due (`None`: other instances
    /// run them; pushes into pull mirrors are refused either way).
    pub mirrors: Option<mirrors::MirrorConfig>,
    /// The key that opens mirrors' credentials and webhook secrets
    /// (`None`: not given; those mirrors fail, saying what to set).
    pub secrets_key: Option<gitstow_mirror::secret::SealKey>,
    /// Objects the cache of decoded container indexes holds.
    pub index_cache_objects: usize,
    /// Where the cache maps large indexes and commit graphs from
    /// (`gitstow_odb::mapped`; `None`: they stay on the heap).
    pub index_map_dir: Option<std::path::PathBuf>,
    /// Bytes of decoded states the state cache holds.
    pub state_cache_bytes: usize,
    /// How webhooks are delivered.
    pub webhooks: gitstow_hooks::deliver::DeliverConfig,
    /// How responses are paced and spilled ([`output`]); they spill in
    /// `receive.staging_dir`.
    pub responses: output::Settings,
    /// The bounds of a request and how fast it must arrive, for every
    /// transport.
    pub limits: input::Limits,
}

/// Why a request is answered before any of git's protocol: each transport
/// words it its way (HTTP: a status and this text; SSH: `ERROR: …` on
/// stderr and exit 128). The text names no server path and no internal
/// error (those were logged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The repository does not exist (or was deleted).
    #[error("repository '{0}.git' not found")]
    NotFound(String),
    /// A queue's timeout passed (the text is [`queue::QueueTimeout`]'s).
    #[error("{0}")]
    Busy(String),
    /// The store does not answer, the server is out of space, or a part a
    /// push needs (webhook deliveries) is not running: try again later.
    #[error("{0}")]
    Unavailable(&'static str),
    /// Any other server-side failure (logged with its chain).
    #[error("internal server error, try again later")]
    Failed,
}

impl Refusal {
    /// What a server-side `error` while `context` answers; the error and
    /// its chain go to the log.
    pub fn from_error(context: &str, error: &(dyn std::error::Error + 'static)) -> Refusal {
        match Fault::server(context, error) {
            Fault::Server(f) if f.passes() => Refusal::Unavailable(f.text()),
            _ => Refusal::Failed,
        }
    }
}

/// The repositories of one store as the services see them: the store, the
/// caches of decoded indexes and states, the fetch and push queues,
/// automatic maintenance and webhook deliveries. One per process, shared by
/// every transport.
#[derive(Debug)]
pub struct Host {
    store: Arc<dyn ObjectStore>,
    indexes: Arc<IndexCache>,
    states: Arc<StateCache>,
    pushes: WorkQueue,
    fetches: WorkQueue,
    /// Where fetch work allocates (see [`arena::WorkArena`]).
    fetch_arena: arena::WorkArena,
    maintenance: Option<Arc<maintenance::Maintenance>>,
    /// The mirror worker (`None`: off here, or it could not start).
    mirrors: Option<Arc<mirrors::Mirrors>>,
    /// Delivers recorded push events to webhooks (`None`: it could not start).
    webhooks: Option<gitstow_hooks::deliver::Deliverer>,
    /// Where responses spill, shared by all of them.
    spill: Arc<output::Spill>,
    /// Listings of more than [`SMALL_LISTING`] refs written at once.
    listings: Arc<tokio::sync::Semaphore>,
    config: Config,
}

impl Host {
    /// The services of `store` with `config`; starts automatic maintenance
    /// and webhook deliveries (a part that cannot start is logged, and
    /// pushes that need it are refused).
    pub fn new(store: Arc<dyn ObjectStore>, config: Config) -> Arc<Self> {
        let indexes = match &config.index_map_dir {
            Some(dir) => IndexCache::mapped_in(
                config.index_cache_objects,
                gitstow_odb::mapped::MapDir::new(dir),
            ),
            None => IndexCache::with_limit(config.index_cache_objects),
        };
        let maintenance = config.maintenance.clone().and_then(|mc| {
            maintenance::Maintenance::start(store.clone(), indexes.clone(), mc)
                .map_err(|e| tracing::error!(error = %e, "automatic maintenance not started"))
                .ok()
        });
        let webhooks =
            gitstow_hooks::deliver::Deliverer::start(store.clone(), config.webhooks.clone())
                .map_err(|e| tracing::error!(error = %e, "webhook deliveries not started"))
                .ok();
        let mirrors = config.mirrors.clone().and_then(|mut mc| {
            // A pull is held to a push's bounds, staged where pushes stage.
            let r = &config.receive;
            mc.pull.receive = gitstow_receive::Options {
                threads: r.threads,
                max_object_bytes: r.max_object_bytes,
                max_objects: r.max_objects,
                max_container_bytes: r.max_container_bytes,
                max_stored_depth: r.max_stored_depth,
                max_chain_depth: r.max_chain_depth,
                max_held_bytes: r.max_held_bytes,
                max_refs: r.max_refs,
                staging_dir: r.staging_dir.clone(),
                release_freed: r.release_freed,
                ..Default::default()
            };
            mc.pull.max_pack_bytes = config.limits.max_push_bytes;
            mirrors::Mirrors::start(
                store.clone(),
                indexes.clone(),
                mc,
                config.secrets_key.clone(),
                webhooks.clone(),
            )
            .map_err(|e| tracing::error!(error = %e, "mirror syncs not started"))
            .ok()
        });
        // Once no push or fetch runs, the pages requests read of the mapped
        // indexes and graphs leave the resident set (they stay in the page
        // cache): an idle server holds what it needs, not what it last read.
        let released = indexes.clone();
        let idle = queue::WhenIdle::new(move || released.release_pages());
        let spill = output::Spill::new(
            config.receive.staging_dir.clone(),
            config.responses.spill_per_response,
            config.responses.spill_total,
        );
        let writers = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        Arc::new(Host {
            webhooks,
            spill,
            listings: Arc::new(tokio::sync::Semaphore::new(writers)),
            states: StateCache::with_limit(config.state_cache_bytes),
            maintenance,
            mirrors,
            pushes: WorkQueue::new(
                Work::Push,
                config.max_concurrent_pushes,
                config.push_queue_timeout,
            )
            .with_idle(idle.clone()),
            fetches: WorkQueue::new(
                Work::Fetch,
                config.max_concurrent_fetches,
                config.fetch_queue_timeout,
            )
            .with_idle(idle),
            fetch_arena: arena::WorkArena::create(),
            store,
            indexes,
            config,
        })
    }

    /// A response's writer (for the blocking thread that makes it) and
    /// source (for the transport's [`output::forward`]), spilling as
    /// [`Config::responses`] allows. Call it within the runtime.
    pub fn response(&self) -> (output::Writer, output::Source) {
        output::channel(self.spill.clone())
    }

    /// How fast clients must take responses.
    pub fn response_pace(&self) -> output::Pace {
        self.config.responses.pace
    }

    /// Makes this instance's mirror worker read the due list at once (a
    /// mirror was made due: an upstream's webhook); nothing when it runs
    /// no mirrors.
    pub fn wake_mirrors(&self) {
        if let Some(m) = &self.mirrors {
            m.wake();
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Repository `name` (not checked to exist).
    pub fn repo(&self, name: &str) -> Repository {
        Repository::new(self.store.clone(), name, self.indexes.clone())
    }

    /// The state of repository `name` through the state cache (read off the
    /// async threads); `None` when it does not exist or was deleted.
    ///
    /// # Errors
    /// [`Refusal`] when the store fails (logged).
    pub async fn state(&self, name: &str) -> Result<Option<Arc<RepoState>>, Refusal> {
        let repo = self.repo(name);
        let states = self.states.clone();
        let loaded = tokio::task::spawn_blocking(move || repo.load_shared_state(&states)).await;
        match loaded {
            // A deleted repository (`gitstow repo delete`) is not found.
            Ok(Ok(v)) => Ok(v.map(|v| v.state).filter(|s| !s.deleted)),
            Ok(Err(e)) => Err(Refusal::from_error(
                &format!("reading the state of repository {name}"),
                &e,
            )),
            Err(_) => Err(Refusal::Failed),
        }
    }

    /// Runs `read` (a read of the store's documents) on a blocking thread;
    /// its failure, or the thread's, is a [`Refusal`] while `context` (the
    /// error goes to the log).
    pub(crate) async fn read_store<T, E>(
        &self,
        context: &str,
        read: impl FnOnce(&dyn ObjectStore) -> Result<T, E> + Send + 'static,
    ) -> Result<T, Refusal>
    where
        T: Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || read(store.as_ref())).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Refusal::from_error(context, &e)),
            Err(e) => Err(Refusal::from_error(context, &e)),
        }
    }

    /// The hidden ref prefixes of repository `name`: the server's (`base`,
    /// from `--hide-refs`) and the repository's from the access document.
    pub fn hidden(
        &self,
        base: &gitstow_protocol::HiddenRefs,
        name: &str,
        repo_prefixes: &[String],
    ) -> gitstow_protocol::HiddenRefs {
        if repo_prefixes.is_empty() {
            return base.clone();
        }
        let (hidden, refused) = base.with(repo_prefixes);
        if !refused.is_empty() {
            tracing::warn!(
                repo = name,
                ?refused,
                "access document: hidden ref prefixes ignored (not under refs/)"
            );
        }
        hidden
    }

    /// Waits for a listing writer when a listing of `refs` refs is more
    /// than [`SMALL_LISTING`]: as many are written at once as there are
    /// cores (at least 2), each in milliseconds to its response's spill,
    /// so that a flood of listings nobody reads takes neither the blocking
    /// threads nor the memory of as many producers at once, and a small
    /// listing (another user's `ls-remote`) never waits behind them.
    pub async fn admit_listing(&self, refs: u64) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if refs <= SMALL_LISTING as u64 {
            return None;
        }
        self.listings.clone().acquire_owned().await.ok()
    }

    /// Waits for a fetch slot.
    ///
    /// # Errors
    /// [`Refusal::Busy`] when the queue's timeout passed (logged).
    pub async fn admit_fetch(&self, name: &str) -> Result<queue::Slot, Refusal> {
        self.fetches.admit().await.map_err(|busy| {
            tracing::warn!(repo = %name, error = %busy, "fetch refused: queue timeout");
            Refusal::Busy(busy.to_string())
        })
    }
}
