//! `gitstow serve`: its flags, and the start of a server: the store (with
//! the container cache on S3), access control's exposure check, TLS, the
//! listeners, maintenance and the webhook deliverer, then the shutdown
//! sequence (drain, grace, hard deadline).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::{init_logging, parse_bytes, with_faults, LogFormat, StoreArgs};
use gitstow_http::app::{self, Config};

/// Arguments of `gitstow serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Read flags from this TOML file first (`listen = "0.0.0.0:8080"`,
    /// `max-pack-size = "8GiB"`, `no-maintenance = true`: every flag of
    /// serve, named without its dashes); flags on the command line
    /// override the file's.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Serve HTTPS with this certificate chain (PEM, the server's
    /// certificate first, then intermediates); needs --tls-key. The pair is
    /// loaded again when the files change (checked at most every 30 s), so
    /// a renewal needs no restart. /metrics on --metrics-listen stays plain
    /// HTTP.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The store and its S3 settings.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Directory of the local cache of immutable containers, used with s3:// stores
    /// (default: a directory per store under the system temp dir). Each
    /// process claims its directory: a second instance on the host takes
    /// DIR-1, a third DIR-2, … (logged).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Size bound of the container cache: bytes, or with a unit (`2GiB`,
    /// `500MB`).
    #[arg(long, default_value = "2GiB", value_parser = parse_bytes)]
    pub cache_size: u64,
    /// Objects the cache of decoded container indexes holds, over all
    /// repositories (44 bytes an index object, 76 a commit-graph commit; the
    /// indexes loaded longest ago are dropped first). Those of 256 KiB and
    /// more are mapped from files in --tmp-dir, so resident memory holds
    /// the pages requests touch and the rest is page cache.
    #[arg(long, default_value_t = gitstow_odb::repository::DEFAULT_INDEX_CACHE_OBJECTS)]
    pub index_cache_size: usize,
    /// Bytes of decoded repository states kept in memory, over all
    /// repositories (a state is reused while its version is unchanged; its
    /// inline refs, at most 64 KiB encoded, take about 100 bytes a ref):
    /// bytes, or with a unit (`64MiB`, `2GiB`).
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes)]
    pub state_cache_size: u64,
    /// Log format on stderr (what is logged: GITSTOW_LOG, default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Refuse pushes to repositories that do not exist yet (404) instead of creating them.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub no_auto_create: bool,
    /// Largest push request body (commands + pack): bytes, or with a unit
    /// (`8GiB`).
    #[arg(long, default_value = "8GiB", value_parser = parse_bytes)]
    pub max_pack_size: u64,
    /// The URL clients reach this server's HTTP side at
    /// (`https://git.example.com`), when it is not what they send as `Host`
    /// (behind a proxy that rewrites it) or not the address SSH clients
    /// reached: the Git LFS API's URLs are made from it.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Seconds a Git LFS transfer action stays valid: the batch API's
    /// upload and download URLs carry a grant for one object that expires
    /// then (at least 60: git-lfs treats an action that expires within
    /// seconds as expired already).
    #[arg(long, default_value_t = 900, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(60..))]
    pub lfs_url_ttl: u64,
    /// Largest single object in a push: bytes, or with a unit (`2GiB`).
    #[arg(long, default_value = "2GiB", value_parser = parse_bytes)]
    pub max_object_size: u64,
    /// Most objects in one push's pack (a push holds about 160 bytes of
    /// memory per object while it is resolved: 20M objects, ~3.2 GB); more is
    /// refused with `unpack pack has N objects, more than this server's limit`.
    #[arg(long, default_value_t = 20_000_000)]
    pub max_push_objects: u64,
    /// Most refs a repository may hold; a push creating more is refused per
    /// ref (`too many refs: this repository may hold at most N`). Past 64
    /// KiB of refs they live in ref tables read by block, so the limit
    /// bounds storage and full listings, not each request's memory.
    #[arg(long, default_value_t = 10_000_000)]
    pub max_refs: usize,
    /// Resolver threads per push (default: the number of cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Seconds a request body may go without a byte before the request is dropped (HTTP 408).
    #[arg(long, default_value_t = 60)]
    pub idle_timeout: u64,
    /// Bytes per second a request body must average once it has taken
    /// --idle-timeout seconds (else HTTP 408); 0 turns the check off.
    #[arg(long, default_value_t = 1024)]
    pub min_body_rate: u64,
    /// Bytes per second a client must take a response at, on average over
    /// any two minutes (git's answers, LFS downloads); one that takes
    /// nothing for two minutes, or less than this, loses its response (and
    /// the fetch slot it holds). 0: only the two minutes count.
    #[arg(long, default_value_t = 1024)]
    pub min_send_rate: u64,
    /// Disk space (in --tmp-dir) that responses a client has not taken yet
    /// may spill to, in all, so that a slow client holds no thread, fetch
    /// slot or memory while it reads (at most 16 MiB a response; past it
    /// the response waits for the client): bytes, or with a unit (`2GiB`);
    /// 0: no spill.
    #[arg(long, default_value = "2GiB", value_parser = parse_bytes)]
    pub max_response_spill: u64,
    /// Open connections at most; beyond it a new connection is answered 503
    /// at once (default: half of the open-files limit left after 256
    /// descriptors).
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Open connections from one client address at most, beyond it 503
    /// (default: no cap beyond --max-connections; set it when clients
    /// connect directly, not through a proxy or a large NAT).
    #[arg(long)]
    pub max_connections_per_address: Option<usize>,
    /// Seconds a connection gets to send a whole request head; also how long
    /// an idle keep-alive connection stays open.
    #[arg(long, default_value_t = 30)]
    pub header_timeout: u64,
    /// Seconds in-flight requests get to finish after SIGTERM/SIGINT before the process exits.
    #[arg(long, default_value_t = 300)]
    pub shutdown_grace: u64,
    /// Seconds after SIGTERM/SIGINT during which the server still accepts
    /// and serves requests while /readyz answers 503, so a load balancer
    /// takes it out of rotation before it stops listening (then
    /// --shutdown-grace begins).
    #[arg(long, default_value_t = 0)]
    pub drain_delay: u64,
    /// Directory for spool and staging files and the mapped index cache
    /// (default: the system temp dir; put it on a disk, not a tmpfs); each
    /// process works in its own `gitstow-serve-<pid>-*` directory there,
    /// and removes those of processes that died.
    #[arg(long)]
    pub tmp_dir: Option<std::path::PathBuf>,
    /// Serve on an address beyond loopback while no access token exists
    /// (everyone may then read, push, force-push and delete everywhere).
    /// Without it, such a start is refused; once a token exists (`gitstow
    /// token create`), access control is on and this flag changes nothing.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub insecure_no_auth: bool,
    /// Seconds a read of the access document (tokens, grants) is used
    /// before it is read again from the store: the longest a created,
    /// revoked or expired token takes to count on this instance.
    #[arg(long, default_value_t = 5)]
    pub access_refresh: u64,
    /// A pre-receive hook: a program run for each push after its pack is
    /// checked and before anything is stored, as git runs hooks/pre-receive
    /// (stdin: `<old> <new> <ref>` lines; GIT_PUSH_OPTION_COUNT and
    /// GIT_PUSH_OPTION_<i>; also GITSTOW_REPOSITORY and GITSTOW_PUSHER, the
    /// token's name; no other environment). Exit 0 accepts; anything else
    /// refuses every ref with `pre-receive hook declined`. Its output is
    /// shown to the pusher.
    #[arg(long, value_name = "PATH", conflicts_with = "pre_receive_url")]
    pub pre_receive_hook: Option<PathBuf>,
    /// A pre-receive callout: each push's ref updates and push options are
    /// POSTed here as JSON ({"repository", "pusher", "ref_updates": [{"ref",
    /// "old", "new"}], "push_options"}) after its pack is checked and before
    /// anything is stored; a 2xx answer accepts, any other refuses. The
    /// answer's body (text) is shown to the pusher.
    #[arg(long, value_name = "URL")]
    pub pre_receive_url: Option<String>,
    /// Hide a ref namespace, as git's transfer.hideRefs (repeatable; e.g.
    /// refs/changes, refs/pull): its refs are not advertised to fetches or
    /// pushes, and pushes to them are refused ("deny updating a hidden ref").
    #[arg(long = "hide-refs", value_name = "PREFIX")]
    pub hide_refs: Vec<String>,
    /// Seconds the pre-receive hook or callout may take; after it the push is
    /// refused (the hook's process group is killed).
    #[arg(long, default_value_t = 30)]
    pub pre_receive_timeout: u64,
    /// Seconds one webhook delivery may take before it counts as failed (and
    /// is retried later).
    #[arg(long, default_value_t = 10)]
    pub webhook_timeout: u64,
    /// Pushes resolved at once; later pushes wait in a queue (default: one per
    /// core, and no more than one per 512 MiB of memory).
    #[arg(long)]
    pub max_concurrent_pushes: Option<usize>,
    /// Seconds a push may wait in the queue before it is refused with "server busy".
    #[arg(long, default_value_t = 600)]
    pub push_queue_timeout: u64,
    /// Upload-pack requests (fetches, clones, ls-refs) served at once; later
    /// ones wait in a queue with their body read, at most 64 KiB of it in
    /// memory (default: two per core, and
    /// no more than one per 256 MiB of a quarter of the memory).
    #[arg(long)]
    pub max_concurrent_fetches: Option<usize>,
    /// Seconds a fetch may wait in the queue before it is refused with an
    /// ERR line git shows as "remote error: server busy: …".
    #[arg(long, default_value_t = 60)]
    pub fetch_queue_timeout: u64,
    /// Also serve /metrics and /debug/pprof/heap on this address (they are always
    /// on the main listener too).
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Also serve git over SSH on this address (off unless set; port 0
    /// picks a free port, printed): `git clone ssh://git@HOST:PORT/org/repo.git`.
    /// A key is attached to a token with `gitstow key add` and gets its
    /// grants. Host keys are kept in the store (made once per store).
    #[arg(long, value_name = "ADDR")]
    pub ssh_listen: Option<SocketAddr>,
    /// A host key file (OpenSSH private key) to present instead of the
    /// ones kept in the store (repeatable).
    #[arg(long, value_name = "FILE", requires = "ssh_listen")]
    pub ssh_host_key: Vec<PathBuf>,
    /// The user name SSH clients log in as (`git@HOST:org/repo.git`).
    #[arg(long, default_value = "git", value_name = "NAME")]
    pub ssh_user: String,
    /// Seconds an SSH client has to authenticate before it is disconnected
    /// (sshd's LoginGraceTime).
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub ssh_login_grace: u64,
    /// SSH connections not authenticated yet above which new ones are
    /// closed at once; past half of it (and at least 10), new ones are refused at random,
    /// 30 % rising to all at the cap (sshd's MaxStartups 10:30:100).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub ssh_max_startups: usize,
    /// SSH connections not authenticated yet from one client address (an
    /// IPv4 address, an IPv6 /64) above which new ones from it are closed
    /// at once (sshd's PerSourceMaxStartups): a flood from one address
    /// leaves the other slots to everyone else.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub ssh_max_startups_per_source: usize,
    /// Load balancers (an address or a network, e.g. 10.0.0.0/8;
    /// repeatable) whose SSH connections start with a PROXY protocol
    /// header (v1 or v2) naming the client: the address logged and counted.
    /// A connection from them without one is closed; from anywhere else a
    /// header is not accepted.
    #[arg(long, value_name = "CIDR", value_parser = parse_net, requires = "ssh_listen")]
    pub ssh_proxy_protocol_from: Vec<ipnet::IpNet>,
    /// Automatic maintenance: on or off, grace period, scans, GC rules.
    #[command(flatten)]
    pub maintenance: crate::serve_maintenance::MaintenanceArgs,
    /// Turn jemalloc's heap profiler on (sampling every 512 KiB allocated on
    /// average) and serve GET /debug/pprof/heap; also GITSTOW_HEAP_PROFILING=1.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub heap_profiling: bool,
}

/// Whether `key` names an immutable object: a container (`.bin`), its index
/// (`.idx`), commit graph (`.graph`) or a closure's bitmaps (`.bitmap`), all
/// named by a container's content hash.
fn is_immutable_key(key: &str) -> bool {
    [".bin", ".idx", ".graph", ".bitmap"]
        .iter()
        .any(|ext| key.ends_with(ext))
}

/// Open the store `args.store` names; an S3 store gets the local container cache in front.
fn open_store(args: &ServeArgs) -> gitstow_store::Result<Arc<dyn gitstow_store::ObjectStore>> {
    let store = args.store.open()?;
    if !gitstow_store::is_s3_url(&args.store.url) {
        return Ok(store);
    }
    let dir = args
        .cache_dir
        .clone()
        .unwrap_or_else(|| gitstow_store::default_cache_dir(&args.store.url));
    let cached = gitstow_store::CachedStore::new(store, dir, args.cache_size, is_immutable_key);
    // The directory this process claimed (another instance may hold the default).
    tracing::info!(dir = %cached.dir().display(), max_bytes = args.cache_size, "container cache");
    Ok(Arc::new(cached))
}

/// `store` behind a local cache of its immutable objects
/// ([`is_immutable_key`]) in `dir`, of at most `max_bytes`.
pub(crate) fn with_container_cache(
    store: Arc<dyn gitstow_store::ObjectStore>,
    dir: PathBuf,
    max_bytes: u64,
) -> Arc<dyn gitstow_store::ObjectStore> {
    Arc::new(gitstow_store::CachedStore::new(
        store,
        dir,
        max_bytes,
        is_immutable_key,
    ))
}

/// Runs `gitstow serve`; returns the exit code (0 after a shutdown, 1 when
/// the address or runtime cannot be had, 2 on a bad setting).
pub fn main(args: ServeArgs) -> i32 {
    init_logging(args.log_format);
    let nofile = match crate::limits::raise_open_files() {
        Ok((before, after, hard)) => {
            tracing::info!(soft_before = before, soft = after, hard, "open files limit");
            after
        }
        Err(e) => {
            tracing::warn!(error = %e, "open files limit not raised");
            1024
        }
    };
    let max_connections = args
        .max_connections
        .unwrap_or_else(|| gitstow_http::listen::ConnLimits::default_max_connections(nofile));
    let conn_limits = gitstow_http::listen::ConnLimits {
        max_connections,
        max_per_address: args.max_connections_per_address.unwrap_or(max_connections),
        header_timeout: std::time::Duration::from_secs(args.header_timeout),
    };
    if max_connections == 0 || conn_limits.max_per_address == 0 || args.header_timeout == 0 {
        eprintln!("gitstow: --max-connections, --max-connections-per-address and --header-timeout must be at least 1");
        return 2;
    }
    if let Err(why) = gitstow_http::maintenance::check_grace(
        "--maintenance-grace",
        args.maintenance.maintenance_grace,
    ) {
        eprintln!("gitstow: {why}");
        return 2;
    }
    if gitstow_store::is_s3_url(&args.store.url) {
        tracing::info!(
            store = %args.store.url,
            connect_timeout_secs = args.store.s3_connect_timeout,
            read_timeout_secs = args.store.s3_read_timeout,
            retry_deadline_secs = args.store.s3_retry_deadline,
            "checking the store (HeadBucket)"
        );
    }
    let store = match open_store(&args) {
        Ok(s) => s,
        Err(e) => {
            // In the log's format too (JSON for a collector).
            tracing::error!(store = %args.store.url, error = %e, "cannot open the store");
            eprintln!("gitstow: cannot open store {}: {e}", args.store.url);
            return 2;
        }
    };
    let store = match with_faults(store) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gitstow: {e}");
            return 2;
        }
    };
    // Spools and staging files live in this process's own scratch directory;
    // those of dead processes are swept now and every hour.
    let scratch = match crate::leftovers::own_scratch(
        args.tmp_dir.as_deref(),
        crate::leftovers::SERVE_PREFIX,
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gitstow: {e}");
            return 2;
        }
    };
    let mut receive = gitstow_receive::Options {
        max_object_bytes: args.max_object_size,
        max_objects: args.max_push_objects,
        max_refs: args.max_refs,
        staging_dir: Some(scratch.path().to_owned()),
        release_freed: Some(|| {
            gitstow_service::arena::purge_freed();
        }),
        ..Default::default()
    };
    if let Some(t) = args.threads {
        receive.threads = t.max(1);
    }
    if args.pre_receive_timeout == 0 || args.webhook_timeout == 0 {
        eprintln!("gitstow: --pre-receive-timeout and --webhook-timeout must be at least 1");
        return 2;
    }
    let hook_timeout = std::time::Duration::from_secs(args.pre_receive_timeout);
    if let Some(path) = &args.pre_receive_hook {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => {}
            _ => {
                eprintln!(
                    "gitstow: --pre-receive-hook {}: not an executable file (every push would be refused)",
                    path.display()
                );
                return 2;
            }
        }
        receive.pre_receive = Some(Arc::new(gitstow_hooks::pre_receive::Executable {
            path: path.clone(),
            timeout: hook_timeout,
        }));
    } else if let Some(url) = &args.pre_receive_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            eprintln!("gitstow: --pre-receive-url {url:?}: want an http:// or https:// URL");
            return 2;
        }
        receive.pre_receive = Some(Arc::new(gitstow_hooks::pre_receive::Callout::new(
            url,
            hook_timeout,
        )));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mem = gitstow_http::queue::mem_total();
    let max_concurrent_pushes = args
        .max_concurrent_pushes
        .unwrap_or_else(|| gitstow_http::queue::default_limit(cores, mem));
    if args.max_concurrent_pushes == Some(0) || args.push_queue_timeout == 0 {
        eprintln!("gitstow: --max-concurrent-pushes and --push-queue-timeout must be at least 1");
        return 2;
    }
    let max_concurrent_fetches = args
        .max_concurrent_fetches
        .unwrap_or_else(|| gitstow_http::queue::default_fetch_limit(cores, mem));
    if args.max_concurrent_fetches == Some(0) || args.fetch_queue_timeout == 0 {
        eprintln!("gitstow: --max-concurrent-fetches and --fetch-queue-timeout must be at least 1");
        return 2;
    }
    let hidden = match gitstow_protocol::HiddenRefs::new(&args.hide_refs) {
        Ok(h) => h,
        Err(why) => {
            eprintln!("gitstow: --hide-refs: {why}");
            return 2;
        }
    };
    receive.hidden = hidden.clone();
    let heap_profiling = args.heap_profiling
        || std::env::var("GITSTOW_HEAP_PROFILING").is_ok_and(|v| {
            !matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "" | "0" | "false" | "no" | "off"
            )
        });
    let metrics = match gitstow_http::metrics::Metrics::install(store.clone()) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(error = %e, "metrics recorder not installed");
            None
        }
    };
    let mut config = Config {
        service: gitstow_service::Config {
            max_concurrent_pushes,
            push_queue_timeout: std::time::Duration::from_secs(args.push_queue_timeout.max(1)),
            max_concurrent_fetches,
            fetch_queue_timeout: std::time::Duration::from_secs(args.fetch_queue_timeout),
            auto_create: !args.no_auto_create,
            maintenance: (!args.maintenance.no_maintenance)
                .then(|| args.maintenance.config(scratch.path())),
            receive,
            upload: gitstow_upload::Options {
                hidden,
                ..Default::default()
            },
            index_cache_objects: args.index_cache_size,
            // Large indexes and graphs are mapped from files in the scratch
            // directory: resident memory holds what requests touch.
            index_map_dir: Some(scratch.path().to_owned()),
            state_cache_bytes: usize::try_from(args.state_cache_size).unwrap_or(usize::MAX),
            webhooks: gitstow_hooks::deliver::DeliverConfig {
                timeout: std::time::Duration::from_secs(args.webhook_timeout.max(1)),
                ..Default::default()
            },
            responses: gitstow_service::output::Settings {
                pace: gitstow_service::output::Pace {
                    stall: gitstow_service::send_stall(),
                    min_rate: args.min_send_rate,
                },
                spill_total: args.max_response_spill,
                ..Default::default()
            },
        },
        max_push_bytes: args.max_pack_size,
        max_fetch_request_bytes: 64 << 20,
        body_pace: gitstow_http::body::Pace {
            idle: std::time::Duration::from_secs(args.idle_timeout.max(1)),
            min_rate: args.min_body_rate,
        },
        auth: gitstow_http::auth::AuthConfig {
            refresh: std::time::Duration::from_secs(args.access_refresh.max(1)),
            enforce: false,
            loopback_hosts_only: !args.insecure_no_auth,
        },
        lfs: gitstow_http::lfs::LfsConfig {
            url_ttl: args.lfs_url_ttl.max(1),
            max_object_size: args.max_pack_size,
            tls: args.tls_cert.is_some(),
            public_url: args.public_url.clone(),
            http_port: args.listen.port(),
        },
    };
    match check_exposure(&args, &store) {
        Ok(enforce) => config.auth.enforce = enforce,
        Err(why) => {
            eprintln!("gitstow: {why}");
            return 2;
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gitstow: cannot start the runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        if heap_profiling {
            if let Err(e) = gitstow_http::operator::activate_heap_profiling().await {
                eprintln!("gitstow: --heap-profiling: {e}");
                return 2;
            }
        }
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => match gitstow_http::tls::acceptor(cert, key) {
                Ok(a) => Some(a),
                Err(e) => {
                    tracing::error!(error = %e, "cannot serve TLS");
                    eprintln!("gitstow: cannot serve TLS: {e}");
                    return 2;
                }
            },
            _ => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let listener = match tokio::net::TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("gitstow: cannot listen on {}: {e}", args.listen);
                return 1;
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let metrics_listener = match args.metrics_listen {
            Some(maddr) => match tokio::net::TcpListener::bind(maddr).await {
                Ok(l) => Some(l),
                Err(e) => {
                    eprintln!("gitstow: cannot listen on {maddr}: {e}");
                    return 1;
                }
            },
            None => None,
        };
        let ssh = match args.ssh_listen {
            Some(saddr) => match ssh_listener(saddr, &args.ssh_host_key, &store).await {
                Ok(s) => Some(s),
                Err(why) => {
                    eprintln!("gitstow: --ssh-listen: {why}");
                    return 1;
                }
            },
            None => None,
        };
        {
            use std::io::Write;
            let mut stdout = std::io::stdout();
            let _ = writeln!(stdout, "gitstow listening on {scheme}://{addr}");
            if let Some((l, keys)) = &ssh {
                if let Ok(saddr) = l.local_addr() {
                    let _ = writeln!(stdout, "gitstow ssh on ssh://{saddr}");
                }
                for fp in keys.fingerprints() {
                    let _ = writeln!(stdout, "gitstow ssh host key {fp}");
                }
            }
            if let Some(Ok(maddr)) = metrics_listener.as_ref().map(|l| l.local_addr()) {
                let _ = writeln!(stdout, "gitstow metrics on http://{maddr}/metrics");
            }
            let _ = stdout.flush();
        }
        tracing::info!(%addr, store = %args.store.url, max_concurrent_pushes, max_concurrent_fetches, heap_profiling, "serving");
        crate::leftovers::spawn_periodic(
            args.tmp_dir.as_deref(),
            gitstow_store::local_root(&args.store.url),
        );
        let _scratch = scratch;
        let store_for_stats = store.clone();
        let ssh_limits = gitstow_ssh::git::Limits {
            max_push_bytes: config.max_push_bytes,
            max_fetch_request_bytes: config.max_fetch_request_bytes,
            idle: config.body_pace.idle,
            min_rate: config.body_pace.min_rate,
            staging_dir: config.service.receive.staging_dir.clone(),
        };
        let ssh_config = gitstow_ssh::SshConfig {
            user: args.ssh_user.clone(),
            login_grace: std::time::Duration::from_secs(args.ssh_login_grace.max(1)),
            max_unauthenticated: args.ssh_max_startups.max(1),
            max_unauthenticated_per_source: args.ssh_max_startups_per_source.max(1),
            proxy: gitstow_ssh::ProxyFrom::new(args.ssh_proxy_protocol_from.clone()),
            ..gitstow_ssh::SshConfig::new(ssh_limits)
        };
        let mut config = config;
        if let Ok(bound) = listener.local_addr() {
            config.lfs.http_port = bound.port();
        }
        let app = app::App::new(store, config, metrics);
        if let Some(l) = metrics_listener {
            tokio::spawn(gitstow_http::operator::serve_operator(l, app.clone()));
        }
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (ssh_stop_tx, mut ssh_stop_rx) = tokio::sync::watch::channel(false);
        let ssh_task = ssh.map(|(l, keys)| {
            let access = Arc::new(crate::ssh_access::SshAccess(app.clone()));
            let host = app.host().clone();
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = ssh_stop_rx.wait_for(|s| *s).await;
                };
                gitstow_ssh::serve(l, host, access, &keys, ssh_config, stopped).await;
            })
        });
        let stopping = app.clone();
        let drain = std::time::Duration::from_secs(args.drain_delay);
        let graceful = async move {
            shutdown_signal().await;
            stopping.shutting_down();
            let _ = ssh_stop_tx.send(true);
            if !drain.is_zero() {
                tracing::info!(drain_secs = drain.as_secs(), "draining: /readyz answers 503; still serving");
                tokio::time::sleep(drain).await;
            }
            let _ = stop_tx.send(());
        };
        tracing::info!(
            max_connections = conn_limits.max_connections,
            max_per_address = conn_limits.max_per_address,
            header_timeout_secs = conn_limits.header_timeout.as_secs(),
            "connection limits"
        );
        let http = gitstow_http::listen::serve(listener, app::router(app), conn_limits, tls, graceful);
        // Both transports drain: SSH commands running at the signal finish
        // (within the grace below) as HTTP requests do.
        let served = async move {
            http.await;
            if let Some(t) = ssh_task {
                let _ = t.await;
            }
        };
        let grace = std::time::Duration::from_secs(args.shutdown_grace);
        // In-flight requests get `grace` after the signal; then the process exits anyway
        // (an idle keep-alive or a half-sent request must not hold it forever).
        let deadline = async move {
            if stop_rx.await.is_ok() {
                tokio::time::sleep(grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = served => {
                let m = store_for_stats.metrics();
                let r = m.requests.unwrap_or_default();
                let c = m.cache.unwrap_or_default();
                tracing::info!(
                    store_gets = r.get + r.get_range,
                    store_puts = r.put + r.put_conditional + r.multipart_parts,
                    store_lists = r.list,
                    store_errors = r.errors,
                    cache_hits = c.hits,
                    cache_misses = c.misses,
                    "shut down"
                );
                0
            },
            _ = deadline => {
                tracing::warn!(grace_secs = grace.as_secs(), "requests still open after the shutdown grace period; exiting");
                // A hard deadline: blocking work stuck on the store must not
                // hold the process (dropping the runtime would wait for it).
                std::process::exit(0);
            }
        }
    })
}

/// Binds `--ssh-listen` and loads the host keys (`--ssh-host-key` files,
/// else the store's, made on first use). The address is bound first: a
/// port in use fails at once, not after the keys are made (an RSA key
/// takes a second or two).
async fn ssh_listener(
    addr: SocketAddr,
    files: &[PathBuf],
    store: &Arc<dyn gitstow_store::ObjectStore>,
) -> Result<(tokio::net::TcpListener, gitstow_ssh::HostKeys), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let keys = if files.is_empty() {
        let store = store.clone();
        tokio::task::spawn_blocking(move || gitstow_ssh::HostKeys::from_store(&store))
            .await
            .map_err(|e| e.to_string())?
    } else {
        gitstow_ssh::HostKeys::from_files(files)
    }
    .map_err(|e| format!("host keys: {e}"))?;
    Ok((listener, keys))
}

/// Refuses to serve beyond loopback while no token exists, unless
/// `--insecure-no-auth`; logs whether access control is on. `Ok(true)`:
/// enforce access control for the process's life, even if every token is
/// revoked later.
fn check_exposure(
    args: &ServeArgs,
    store: &Arc<dyn gitstow_store::ObjectStore>,
) -> Result<bool, String> {
    let (doc, _) = gitstow_access::load(store.as_ref())
        .map_err(|e| format!("cannot read the access document: {e}"))?;
    if let Some(m) = args.metrics_listen.filter(|m| !m.ip().is_loopback()) {
        tracing::warn!(metrics_listen = %m, "the operator endpoints (/metrics, /debug/pprof/heap) on --metrics-listen have no access control: keep that address private");
    }
    if doc.enforced() {
        tracing::info!(
            tokens = doc.tokens.len(),
            anonymous_read = doc.anonymous_read.len(),
            "access control is on"
        );
        return Ok(true);
    }
    if args.listen.ip().is_loopback() {
        tracing::warn!("access control is off: no token exists (gitstow token create); anyone who can reach this loopback address (a proxy on this host included) may do anything");
        return Ok(false);
    }
    if args.insecure_no_auth {
        tracing::warn!(listen = %args.listen, "access control is off (--insecure-no-auth): anyone who can reach this address may read, push and delete");
        return Ok(false);
    }
    Err(format!(
        "refusing to serve on {} without access control: no token exists. Create one \
         (gitstow token create --name NAME --grant 'org/*:write' --store {}), or pass \
         --insecure-no-auth to let anyone who can reach it do anything",
        args.listen, args.store.url
    ))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested: finishing in-flight requests");
}

/// A network (`10.0.0.0/8`) or one address (`192.0.2.4`, as a /32 or /128).
fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("not an address or a network: {s}"))
}
