//! `gitstow serve`: its flags ([`ServeArgs`]), turned into settings by
//! [`crate::serve_settings`] and run by [`crate::serve_run`].

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::cli::{init_logging, parse_bytes, LogFormat};
use crate::store_open::StoreArgs;

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
    /// Make a new, empty local store when --store names a directory that
    /// does not exist (without it, only the default ./gitstow-data is made:
    /// a mistyped path is refused rather than served empty).
    #[arg(long)]
    pub create_store: bool,
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
    /// Run no mirror pulls on this instance (by default every instance
    /// reads the store's list of mirrors, one GET every 15 s while mirrors
    /// exist and at most every 60 s while none do, and pulls those due
    /// whose lease it takes first).
    /// Pushes into pull mirrors are refused either way.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub no_mirrors: bool,
    /// `--secrets-key-file`: opens the credentials of mirrors.
    #[command(flatten)]
    pub secrets: crate::mirror_credentials::SecretsKeyArg,
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
    /// Seconds a request (an HTTP body, an SSH command's input) may go
    /// without a byte before it is dropped (HTTP 408).
    #[arg(long, default_value_t = 60)]
    pub idle_timeout: u64,
    /// Bytes per second a request (an HTTP body, an SSH push or fetch
    /// request) must average once it has taken --idle-timeout seconds
    /// (else HTTP 408, or `fatal:` over SSH); 0 turns the check off.
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
    /// Open connections at most, HTTP and SSH together; beyond it a new
    /// HTTP connection is answered 503 at once and an SSH one closed
    /// (default: half of the open-files limit left after 256 descriptors).
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Open connections from one client address at most, HTTP and SSH
    /// together, beyond it 503 (SSH: closed) (default: no cap beyond
    /// --max-connections; set it when clients connect directly, not through
    /// a proxy or a large NAT).
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

/// Runs `gitstow serve`; returns the exit code (0 after a shutdown, 1 when
/// the address or runtime cannot be had, 2 on a bad setting).
pub fn main(args: ServeArgs) -> i32 {
    init_logging(args.log_format);
    let machine = crate::serve_settings::Machine::read();
    match crate::serve_settings::Settings::from_args(args, &machine) {
        Ok(settings) => crate::serve_run::run(settings),
        Err(why) => {
            eprintln!("gitstow: {why}");
            2
        }
    }
}

/// A network (`10.0.0.0/8`) or one address (`192.0.2.4`, as a /32 or /128).
fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("not an address or a network: {s}"))
}
