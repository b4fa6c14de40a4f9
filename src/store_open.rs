//! The store every command names (`--store` and the `--s3-*` flags), and
//! the one way `serve` and each admin command open it ([`open`]): a local
//! store's missing directory refused or created, the S3 client's timeouts,
//! the local container cache in front of an S3 store, and the test-only
//! fault injector.

use std::path::PathBuf;
use std::sync::Arc;

use gitstow_store::ObjectStore;

/// The store every command uses without `--store`: a directory beside where
/// it runs (the one local store `serve` makes without `--create-store`).
pub const DEFAULT_STORE: &str = "file://./gitstow-data";

/// Where repositories live, as `serve` and the admin commands take it.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Where repositories live: file://PATH (the embedded local store), a plain path, or
    /// s3://BUCKET[/PREFIX] (S3 or an S3-compatible server; see the --s3-* flags).
    #[arg(long = "store", default_value = DEFAULT_STORE)]
    pub url: String,
    /// S3 endpoint URL for an S3-compatible server, e.g. http://127.0.0.1:7480
    /// (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS itself).
    #[arg(long)]
    pub s3_endpoint: Option<String>,
    /// S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, else us-east-1).
    #[arg(long)]
    pub s3_region: Option<String>,
    /// Path-style S3 addressing (endpoint/bucket/key); `--s3-path-style=false` turns it off
    /// (default: AWS_S3_FORCE_PATH_STYLE, else on exactly when an endpoint is set).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub s3_path_style: Option<bool>,
    /// S3 access key id (default: AWS_ACCESS_KEY_ID; with no keys given,
    /// AWS's credential chain: AWS_PROFILE and the shared files, web
    /// identity, container and instance roles, SSO).
    #[arg(long)]
    pub s3_access_key: Option<String>,
    /// S3 secret access key (default: AWS_SECRET_ACCESS_KEY, which keeps it out of `ps`).
    #[arg(long)]
    pub s3_secret_key: Option<String>,
    /// Seconds to wait for a TCP (and TLS) connection to the S3 endpoint.
    #[arg(long, default_value_t = 3.0, value_name = "SECS")]
    pub s3_connect_timeout: f64,
    /// Seconds an S3 request may wait for the server to answer or send more
    /// bytes before it fails (and is retried). Raise it on links where a
    /// 16 MiB part takes longer to upload.
    #[arg(long, default_value_t = 15.0, value_name = "SECS")]
    pub s3_read_timeout: f64,
    /// Seconds after an S3 operation's first attempt when no retry starts
    /// any more: a stalled store fails a request within about this plus one
    /// --s3-read-timeout.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub s3_retry_deadline: f64,
}

/// What [`open`] does with a local store whose directory does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMissing {
    /// Refuse it: a mistyped path would otherwise read as an empty store
    /// (and opening it would create the directory).
    Refuse,
    /// Refuse it, naming the flag that makes one (a command that may start
    /// a store, on a path other than [`DEFAULT_STORE`], without
    /// `--create-store`): a mistyped path would otherwise get a new, empty
    /// store (served with access control off, or holding the only token).
    RefuseUnlessAsked,
    /// Create it and say so in one line (the default path, or
    /// `--create-store`).
    Create,
}

impl IfMissing {
    /// What a command that may start a store does with a missing local
    /// directory: create it at the default path or when `create_store`
    /// (`--create-store`) asks, refuse it otherwise.
    pub fn creating(create_store: bool, args: &StoreArgs) -> IfMissing {
        if create_store || args.url == DEFAULT_STORE {
            IfMissing::Create
        } else {
            IfMissing::RefuseUnlessAsked
        }
    }
}

/// `--create-store` of the commands that may start a store (`serve`,
/// `token create`, `repo create`, `mirror pull`).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct CreateStore {
    /// Make a new, empty local store when --store names a directory that
    /// does not exist (without it, only the default ./gitstow-data is made:
    /// a mistyped path is refused).
    #[arg(long)]
    pub create_store: bool,
}

/// A local cache of immutable container objects (data, indexes, commit
/// graphs, bitmaps: keys never rewritten) in front of an S3 store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerCache {
    /// The directory (the process claims it, or `DIR-1`, `DIR-2`, … when
    /// another process on the host holds it).
    pub dir: PathBuf,
    /// Bytes the cache holds at most.
    pub max_bytes: u64,
}

/// Opens the store `args` names for a command: a missing local directory
/// per `if_missing`, then the store, then `cache` in front when the store
/// is S3 (ignored for a local store), then the fault injector when
/// `GITSTOW_FAULTS` is set (tests only).
///
/// # Errors
/// The line to print after `gitstow: ` (the command then exits with 2).
pub fn open(
    args: &StoreArgs,
    if_missing: IfMissing,
    cache: Option<ContainerCache>,
) -> Result<Arc<dyn ObjectStore>, String> {
    let missing = gitstow_store::local_root(&args.url).filter(|path| !path.is_dir());
    if let Some(path) = &missing {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        match if_missing {
            IfMissing::Refuse => {
                return Err(format!(
                    "store directory {} does not exist (`gitstow serve --create-store`, `token create` and `repo create` make a new store)",
                    path.display()
                ))
            }
            IfMissing::RefuseUnlessAsked => {
                return Err(format!(
                    "store directory {} does not exist: check --store, or pass --create-store to start a new, empty store there",
                    path.display()
                ))
            }
            IfMissing::Create => announce_new_store(&path),
        }
    }
    let store = args.open_plain().map_err(|e| {
        // In the log's format too (JSON for a collector).
        tracing::error!(store = %args.url, error = %e, "cannot open the store");
        format!("cannot open store {}: {e}", args.url)
    })?;
    let store = match cache {
        Some(cache) if gitstow_store::is_s3_url(&args.url) => {
            let cached = gitstow_store::CachedStore::new(
                store,
                cache.dir,
                cache.max_bytes,
                is_immutable_key,
            );
            // The directory this process claimed (another may hold the one asked for).
            tracing::info!(dir = %cached.dir().display(), max_bytes = cache.max_bytes, "container cache");
            Arc::new(cached)
        }
        _ => store,
    };
    with_faults(store)
}

/// Whether a store key names an immutable object: a container's data
/// (`.bin`), index (`.idx`), commit graph (`.graph`) or a closure's bitmaps
/// (`.bitmap`), all named by a container's content hash.
fn is_immutable_key(key: &str) -> bool {
    [".bin", ".idx", ".graph", ".bitmap"]
        .iter()
        .any(|ext| key.ends_with(ext))
}

/// A positive, finite number of seconds.
fn secs(v: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(v.max(0.001)).unwrap_or(std::time::Duration::MAX)
}

impl StoreArgs {
    /// Opens the store (no cache in front, no faults).
    fn open_plain(&self) -> gitstow_store::Result<Arc<dyn gitstow_store::ObjectStore>> {
        let s3 = gitstow_store::S3Options {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            path_style: self.s3_path_style,
            access_key: self.s3_access_key.clone(),
            secret_key: self.s3_secret_key.clone(),
            session_token: None,
            connect_timeout: Some(secs(self.s3_connect_timeout)),
            read_timeout: Some(secs(self.s3_read_timeout)),
            retry_deadline: Some(secs(self.s3_retry_deadline)),
        };
        gitstow_store::open_with(&self.url, &s3)
    }
}

/// Says, in one line, that a new local store is made at `path`: in the log
/// when the command logs (`serve`), else on stderr.
fn announce_new_store(path: &std::path::Path) {
    if tracing::dispatcher::has_been_set() {
        tracing::info!(path = %path.display(), "creating a new, empty local store");
    } else {
        eprintln!(
            "gitstow: creating a new, empty local store at {}",
            path.display()
        );
    }
}

/// Wraps `store` in the fault injector when `GITSTOW_FAULTS` is set (tests
/// only, see `gitstow_store::fault`; never set in production).
fn with_faults(
    store: Arc<dyn gitstow_store::ObjectStore>,
) -> Result<Arc<dyn gitstow_store::ObjectStore>, String> {
    match std::env::var("GITSTOW_FAULTS") {
        Ok(spec) if !spec.is_empty() => {
            let f = gitstow_store::fault::FaultyStore::new(store, &spec)
                .map_err(|e| format!("GITSTOW_FAULTS: {e}"))?;
            tracing::warn!(%spec, "GITSTOW_FAULTS is set: injecting store faults");
            Ok(Arc::new(f))
        }
        _ => Ok(store),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(dir: &std::path::Path) -> StoreArgs {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            store: StoreArgs,
        }
        Cmd::parse_from(["x", "--store", &format!("file://{}", dir.display())]).store
    }

    #[test]
    fn a_missing_local_directory_is_refused_or_created_as_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let args = local(&tmp.path().join("typo"));
        let why = open(&args, IfMissing::Refuse, None).err().unwrap();
        assert!(why.contains("does not exist"), "{why}");
        assert!(!tmp.path().join("typo").exists());
        let why = open(&args, IfMissing::RefuseUnlessAsked, None)
            .err()
            .unwrap();
        assert!(why.contains("pass --create-store"), "{why}");
        assert!(!tmp.path().join("typo").exists());
        open(&args, IfMissing::Create, None).unwrap();
        assert!(tmp.path().join("typo").is_dir());
        open(&args, IfMissing::Refuse, None).unwrap();
        open(&args, IfMissing::RefuseUnlessAsked, None).unwrap();
    }

    #[test]
    fn only_content_named_objects_are_cached() {
        for key in [
            "a.git/containers/ab.bin",
            "a.git/containers/ab.idx",
            "a.git/x.graph",
            "a.git/x.bitmap",
        ] {
            assert!(is_immutable_key(key), "{key}");
        }
        for key in ["a.git/state", "access.json", "a.git/refs/ab.ref.tmp"] {
            assert!(!is_immutable_key(key), "{key}");
        }
    }
}
