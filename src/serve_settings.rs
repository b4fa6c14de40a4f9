//! `gitstow serve`'s flags turned into settings: every rule on the flags
//! (ranges, conflicts, defaults that depend on the machine) in one function
//! that reads nothing but its inputs ([`Settings::from_args`]), so each rule
//! is unit-tested; [`crate::serve_run`] then does what the settings say.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gitstow_http::app::Config;
use gitstow_http::listen::ConnLimits;

use crate::serve_cmd::ServeArgs;
use crate::store_open::{ContainerCache, IfMissing, StoreArgs};

/// What the machine offers, read once at start: the inputs of
/// [`Settings::from_args`] besides the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// Logical CPUs.
    pub cores: usize,
    /// `MemTotal` of `/proc/meminfo`, bytes (`None`: unknown).
    pub mem_total: Option<u64>,
    /// The soft limit of open files after raising it.
    pub open_files: u64,
    /// `GITSTOW_HEAP_PROFILING` says yes (anything but empty, `0`,
    /// `false`, `no`, `off`).
    pub heap_profiling_env: bool,
}

impl Machine {
    /// Reads the machine, raising the soft limit of open files to the hard
    /// limit first (logged; a failure is logged and leaves 1,024 assumed).
    pub fn read() -> Machine {
        let open_files = match crate::limits::raise_open_files() {
            Ok((before, after, hard)) => {
                tracing::info!(soft_before = before, soft = after, hard, "open files limit");
                after
            }
            Err(e) => {
                tracing::warn!(error = %e, "open files limit not raised");
                1024
            }
        };
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mem_total: gitstow_service::queue::mem_total(),
            open_files,
            heap_profiling_env: std::env::var("GITSTOW_HEAP_PROFILING").is_ok_and(|v| {
                !matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "" | "0" | "false" | "no" | "off"
                )
            }),
        }
    }
}

/// The SSH listener's settings (`--ssh-*`).
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// `--ssh-listen`.
    pub listen: SocketAddr,
    /// `--ssh-host-key` files (empty: the store's keys, made on first use).
    pub host_key_files: Vec<PathBuf>,
    /// The listener's settings.
    pub config: gitstow_ssh::SshConfig,
}

/// Everything `serve` runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--listen`.
    pub listen: SocketAddr,
    /// `--tls-cert` and `--tls-key`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The store.
    pub store: StoreArgs,
    /// What opening the store does when it is a local directory that does
    /// not exist: create it for the default path or `--create-store`,
    /// refuse it otherwise.
    pub if_missing: IfMissing,
    /// The container cache in front of an S3 store (`None` for a local one).
    pub cache: Option<ContainerCache>,
    /// `--tmp-dir` (default: the system's temp directory).
    pub tmp_dir: Option<PathBuf>,
    /// `--metrics-listen`.
    pub metrics_listen: Option<SocketAddr>,
    /// The SSH listener, with `--ssh-listen`.
    pub ssh: Option<SshSettings>,
    /// Connection caps and the header timeout of the HTTP listener.
    pub conn_limits: ConnLimits,
    /// The HTTP transport's settings, the service's among them.
    pub http: Config,
    /// `--pre-receive-hook`, checked to be an executable file at start.
    pub pre_receive_hook: Option<PathBuf>,
    /// `--heap-profiling` or `GITSTOW_HEAP_PROFILING`.
    pub heap_profiling: bool,
    /// `--insecure-no-auth`.
    pub insecure_no_auth: bool,
    /// `--drain-delay`.
    pub drain_delay: Duration,
    /// `--shutdown-grace`.
    pub shutdown_grace: Duration,
}

impl Settings {
    /// The settings `args` ask for on `machine`.
    ///
    /// # Errors
    /// Why a flag is refused, for the line `gitstow: …` (exit code 2).
    pub fn from_args(args: ServeArgs, machine: &Machine) -> Result<Settings, String> {
        let max_connections = args
            .max_connections
            .unwrap_or_else(|| ConnLimits::default_max_connections(machine.open_files));
        let conn_limits = ConnLimits {
            max_connections,
            max_per_address: args.max_connections_per_address.unwrap_or(max_connections),
            header_timeout: Duration::from_secs(args.header_timeout),
        };
        if max_connections == 0 || conn_limits.max_per_address == 0 || args.header_timeout == 0 {
            return Err("--max-connections, --max-connections-per-address and --header-timeout must be at least 1".into());
        }
        gitstow_service::maintenance::check_grace(
            "--maintenance-grace",
            args.maintenance.maintenance_grace,
        )?;
        // A zero here would turn a bound off or refuse everything: neither
        // is what the flag is for.
        for (flag, value) in [
            ("--idle-timeout", args.idle_timeout),
            ("--access-refresh", args.access_refresh),
            ("--max-pack-size", args.max_pack_size),
            ("--max-object-size", args.max_object_size),
            ("--max-push-objects", args.max_push_objects),
            ("--max-refs", args.max_refs as u64),
            ("--threads", args.threads.map_or(1, |t| t as u64)),
            ("--ssh-login-grace", args.ssh_login_grace),
            ("--ssh-max-startups", args.ssh_max_startups as u64),
            (
                "--ssh-max-startups-per-source",
                args.ssh_max_startups_per_source as u64,
            ),
        ] {
            if value == 0 {
                return Err(format!("{flag} must be at least 1"));
            }
        }
        if args.ssh_user.is_empty() || args.ssh_user.contains(char::is_whitespace) {
            return Err(format!("--ssh-user {:?}: want a user name", args.ssh_user));
        }
        if let Some(url) = &args.public_url {
            check_http_url("--public-url", url)?;
        }
        let mut receive = gitstow_receive::Options {
            max_object_bytes: args.max_object_size,
            max_objects: args.max_push_objects,
            max_refs: args.max_refs,
            release_freed: Some(|| {
                gitstow_service::arena::purge_freed();
            }),
            ..Default::default()
        };
        if let Some(t) = args.threads {
            receive.threads = t;
        }
        if args.pre_receive_timeout == 0 || args.webhook_timeout == 0 {
            return Err("--pre-receive-timeout and --webhook-timeout must be at least 1".into());
        }
        let hook_timeout = Duration::from_secs(args.pre_receive_timeout);
        if let Some(path) = &args.pre_receive_hook {
            receive.pre_receive = Some(Arc::new(gitstow_hooks::pre_receive::Executable {
                path: path.clone(),
                timeout: hook_timeout,
            }));
        } else if let Some(url) = &args.pre_receive_url {
            check_http_url("--pre-receive-url", url)?;
            receive.pre_receive = Some(Arc::new(gitstow_hooks::pre_receive::Callout::new(
                url,
                hook_timeout,
            )));
        }
        if args.max_concurrent_pushes == Some(0) || args.push_queue_timeout == 0 {
            return Err(
                "--max-concurrent-pushes and --push-queue-timeout must be at least 1".into(),
            );
        }
        if args.max_concurrent_fetches == Some(0) || args.fetch_queue_timeout == 0 {
            return Err(
                "--max-concurrent-fetches and --fetch-queue-timeout must be at least 1".into(),
            );
        }
        let max_concurrent_pushes = args.max_concurrent_pushes.unwrap_or_else(|| {
            gitstow_service::queue::default_limit(machine.cores, machine.mem_total)
        });
        let max_concurrent_fetches = args.max_concurrent_fetches.unwrap_or_else(|| {
            gitstow_service::queue::default_fetch_limit(machine.cores, machine.mem_total)
        });
        // Where pull mirrors keep old tips is hidden too: no fetch sees it,
        // no push changes it.
        let mut hide_refs = args.hide_refs.clone();
        hide_refs.push(
            gitstow_mirror::BACKUP_PREFIX
                .trim_end_matches('/')
                .to_owned(),
        );
        let hidden = gitstow_protocol::HiddenRefs::new(&hide_refs)
            .map_err(|why| format!("--hide-refs: {why}"))?;
        receive.hidden = hidden.clone();
        let http = Config {
            service: gitstow_service::Config {
                max_concurrent_pushes,
                push_queue_timeout: Duration::from_secs(args.push_queue_timeout),
                max_concurrent_fetches,
                fetch_queue_timeout: Duration::from_secs(args.fetch_queue_timeout),
                auto_create: !args.no_auto_create,
                maintenance: (!args.maintenance.no_maintenance).then(|| args.maintenance.config()),
                mirrors: (!args.no_mirrors).then(gitstow_service::mirrors::MirrorConfig::default),
                secrets_key: args.secrets.load()?,
                receive,
                upload: gitstow_upload::Options {
                    hidden,
                    ..Default::default()
                },
                index_cache_objects: args.index_cache_size,
                index_map_dir: None,
                state_cache_bytes: usize::try_from(args.state_cache_size).unwrap_or(usize::MAX),
                webhooks: gitstow_hooks::deliver::DeliverConfig {
                    timeout: Duration::from_secs(args.webhook_timeout),
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
                limits: gitstow_service::input::Limits {
                    max_push_bytes: args.max_pack_size,
                    max_fetch_request_bytes: 64 << 20,
                    pace: gitstow_service::input::Pace {
                        idle: Duration::from_secs(args.idle_timeout),
                        min_rate: args.min_body_rate,
                    },
                },
            },
            auth: gitstow_service::gate::GateConfig {
                refresh: Duration::from_secs(args.access_refresh),
                // Decided at start, from the access document (serve_run).
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
        let ssh = args.ssh_listen.map(|listen| SshSettings {
            listen,
            host_key_files: args.ssh_host_key.clone(),
            config: gitstow_ssh::SshConfig {
                user: args.ssh_user.clone(),
                login_grace: Duration::from_secs(args.ssh_login_grace),
                max_unauthenticated: args.ssh_max_startups,
                max_unauthenticated_per_source: args.ssh_max_startups_per_source,
                proxy: gitstow_ssh::ProxyFrom::new(args.ssh_proxy_protocol_from.clone()),
                ..Default::default()
            },
        });
        let cache = gitstow_store::is_s3_url(&args.store.url).then(|| ContainerCache {
            dir: args
                .cache_dir
                .clone()
                .unwrap_or_else(|| gitstow_store::default_cache_dir(&args.store.url)),
            max_bytes: args.cache_size,
        });
        let if_missing = IfMissing::creating(args.create_store, &args.store);
        Ok(Settings {
            listen: args.listen,
            tls: args.tls_cert.zip(args.tls_key),
            store: args.store,
            if_missing,
            cache,
            tmp_dir: args.tmp_dir,
            metrics_listen: args.metrics_listen,
            ssh,
            conn_limits,
            http,
            pre_receive_hook: args.pre_receive_hook,
            heap_profiling: args.heap_profiling || machine.heap_profiling_env,
            insecure_no_auth: args.insecure_no_auth,
            drain_delay: Duration::from_secs(args.drain_delay),
            shutdown_grace: Duration::from_secs(args.shutdown_grace),
        })
    }

    /// Puts the process's scratch directory `dir` where the settings spool
    /// and stage: pushes (both transports read the service's), large index
    /// maps, and maintenance's staging.
    pub fn use_scratch(&mut self, dir: &Path) {
        let service = &mut self.http.service;
        service.receive.staging_dir = Some(dir.to_owned());
        // Large indexes and graphs are mapped from files here: resident
        // memory holds what requests touch.
        service.index_map_dir = Some(dir.to_owned());
        if let Some(m) = &mut service.maintenance {
            m.options.staging_dir = Some(dir.to_owned());
        }
    }
}

/// Refuses a URL that is not `http://HOST…` or `https://HOST…`.
fn check_http_url(flag: &str, url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    match host {
        Some(h) if !h.is_empty() && !h.starts_with(':') => Ok(()),
        _ => Err(format!("{flag} {url:?}: want an http:// or https:// URL")),
    }
}

/// Refuses a `--pre-receive-hook` that is not an executable file: every
/// push would be refused.
///
/// # Errors
/// The line to print after `gitstow: `.
pub fn check_pre_receive_hook(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        _ => Err(format!(
            "--pre-receive-hook {}: not an executable file (every push would be refused)",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACHINE: Machine = Machine {
        cores: 4,
        mem_total: Some(16 << 30),
        open_files: 65_536,
        heap_profiling_env: false,
    };

    fn args(flags: &[&str]) -> ServeArgs {
        use clap::Parser;
        let mut argv = vec!["gitstow", "serve"];
        argv.extend_from_slice(flags);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Serve(a) => *a,
            _ => unreachable!(),
        }
    }

    fn settings(flags: &[&str]) -> Result<Settings, String> {
        Settings::from_args(args(flags), &MACHINE)
    }

    fn refused(flags: &[&str], says: &str) {
        let why = settings(flags)
            .err()
            .unwrap_or_else(|| panic!("{flags:?} accepted"));
        assert!(why.contains(says), "{flags:?}: {why}");
    }

    #[test]
    fn a_new_local_store_is_made_only_at_the_default_path_or_when_asked() {
        let made = |flags: &[&str]| settings(flags).unwrap().if_missing;
        assert_eq!(made(&[]), IfMissing::Create);
        assert_eq!(
            made(&["--store", "file://./gitstow-data"]),
            IfMissing::Create
        );
        assert_eq!(
            made(&["--store", "./gitstow-dta"]),
            IfMissing::RefuseUnlessAsked
        );
        assert_eq!(
            made(&["--store", "file:///srv/git"]),
            IfMissing::RefuseUnlessAsked
        );
        assert_eq!(
            made(&["--store", "/srv/git", "--create-store"]),
            IfMissing::Create
        );
    }

    #[test]
    fn defaults_follow_the_machine() {
        let s = settings(&[]).unwrap();
        let max = ConnLimits::default_max_connections(MACHINE.open_files);
        assert_eq!(s.conn_limits.max_connections, max);
        assert_eq!(s.conn_limits.max_per_address, max);
        assert_eq!(s.conn_limits.header_timeout, Duration::from_secs(30));
        assert_eq!(
            s.http.service.max_concurrent_pushes,
            gitstow_service::queue::default_limit(4, MACHINE.mem_total)
        );
        assert_eq!(
            s.http.service.max_concurrent_fetches,
            gitstow_service::queue::default_fetch_limit(4, MACHINE.mem_total)
        );
        assert!(s.http.service.maintenance.is_some() && s.http.service.auto_create);
        assert!(s.ssh.is_none() && s.tls.is_none() && s.cache.is_none());
        assert!(!s.heap_profiling && !s.http.auth.enforce && s.http.auth.loopback_hosts_only);
        // A smaller machine gets smaller defaults.
        let small = Machine {
            cores: 1,
            mem_total: Some(1 << 30),
            open_files: 1024,
            ..MACHINE
        };
        let s = Settings::from_args(args(&[]), &small).unwrap();
        assert_eq!(
            s.conn_limits.max_connections,
            ConnLimits::default_max_connections(1024)
        );
        assert!(s.http.service.max_concurrent_pushes <= 1);
    }

    #[test]
    fn limits_of_zero_are_refused() {
        for flag in [
            "--max-connections",
            "--max-connections-per-address",
            "--header-timeout",
        ] {
            refused(
                &[flag, "0"],
                "--max-connections, --max-connections-per-address and --header-timeout",
            );
        }
        for flag in ["--pre-receive-timeout", "--webhook-timeout"] {
            refused(
                &[flag, "0"],
                "--pre-receive-timeout and --webhook-timeout must be at least 1",
            );
        }
        for flag in ["--max-concurrent-pushes", "--push-queue-timeout"] {
            refused(
                &[flag, "0"],
                "--max-concurrent-pushes and --push-queue-timeout",
            );
        }
        for flag in ["--max-concurrent-fetches", "--fetch-queue-timeout"] {
            refused(
                &[flag, "0"],
                "--max-concurrent-fetches and --fetch-queue-timeout",
            );
        }
    }

    #[test]
    fn bad_values_are_refused_with_their_flag() {
        refused(&["--maintenance-grace", "5"], "--maintenance-grace");
        refused(
            &["--pre-receive-url", "ftp://hooks.example/check"],
            "want an http:// or https:// URL",
        );
        refused(&["--hide-refs", ""], "--hide-refs");
        refused(&["--hide-refs", "refs/heads/../x"], "--hide-refs");
        refused(
            &["--pre-receive-url", "http://"],
            "want an http:// or https:// URL",
        );
        refused(&["--public-url", "ftp://x"], "--public-url");
        refused(&["--public-url", "https://:443/"], "--public-url");
        refused(&["--ssh-user", ""], "--ssh-user");
        settings(&["--public-url", "https://git.example.com/"]).unwrap();
        settings(&["--pre-receive-url", "http://127.0.0.1:9/check"]).unwrap();
    }

    #[test]
    fn flags_reach_the_settings_they_name() {
        let s = settings(&[
            "--max-connections",
            "50",
            "--max-concurrent-pushes",
            "3",
            "--threads",
            "3",
            "--hide-refs",
            "refs/pull/",
            "--no-maintenance",
            "--no-auto-create",
            "--insecure-no-auth",
            "--pre-receive-url",
            "https://hooks.example/check",
            "--heap-profiling",
        ])
        .unwrap();
        assert_eq!(s.conn_limits.max_connections, 50);
        assert_eq!(s.conn_limits.max_per_address, 50);
        assert_eq!(s.http.service.max_concurrent_pushes, 3);
        assert_eq!(s.http.service.receive.threads, 3);
        assert!(s.http.service.receive.hidden.hides("refs/pull/1/head"));
        assert!(s
            .http
            .service
            .upload
            .hidden
            .hides("refs/mirror-backup/1/refs/heads/main"));
        assert!(s.http.service.upload.hidden.hides("refs/pull/1/head"));
        assert!(s.http.service.maintenance.is_none() && !s.http.service.auto_create);
        assert!(!s.http.auth.loopback_hosts_only && s.insecure_no_auth);
        assert!(s.http.service.receive.pre_receive.is_some() && s.heap_profiling);
        let env = Machine {
            heap_profiling_env: true,
            ..MACHINE
        };
        assert!(Settings::from_args(args(&[]), &env).unwrap().heap_profiling);
    }

    #[test]
    fn one_limits_value_for_both_transports_and_an_s3_store_a_cache() {
        let s = settings(&[
            "--ssh-listen",
            "127.0.0.1:0",
            "--max-pack-size",
            "1GiB",
            "--min-body-rate",
            "7",
            "--ssh-max-startups",
            "7",
            "--store",
            "s3://bucket/prefix",
            "--cache-size",
            "1MiB",
        ])
        .unwrap();
        let limits = s.http.service.limits;
        assert_eq!(limits.max_push_bytes, 1 << 30);
        assert_eq!(limits.pace.min_rate, 7);
        assert_eq!(limits.pace.idle, Duration::from_secs(60));
        assert_eq!(s.ssh.as_ref().unwrap().config.max_unauthenticated, 7);
        let cache = s.cache.as_ref().unwrap();
        assert_eq!(cache.max_bytes, 1 << 20);
        assert_eq!(
            cache.dir,
            gitstow_store::default_cache_dir("s3://bucket/prefix")
        );
    }

    #[test]
    fn the_scratch_directory_reaches_every_spool() {
        let mut s = settings(&[]).unwrap();
        let dir = Path::new("/scratch");
        s.use_scratch(dir);
        let service = &s.http.service;
        assert_eq!(service.receive.staging_dir.as_deref(), Some(dir));
        assert_eq!(service.index_map_dir.as_deref(), Some(dir));
        let m = service.maintenance.as_ref().unwrap();
        assert_eq!(m.options.staging_dir.as_deref(), Some(dir));
        // SSH spools where receive-pack stages (the service's one value).
    }

    #[test]
    fn a_hook_must_be_an_executable_file() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let hook = tmp.path().join("hook");
        assert!(check_pre_receive_hook(&hook).is_err());
        std::fs::write(&hook, "#!/bin/sh\n").unwrap();
        let why = check_pre_receive_hook(&hook).unwrap_err();
        assert!(why.contains("not an executable file"), "{why}");
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        check_pre_receive_hook(&hook).unwrap();
        assert!(check_pre_receive_hook(tmp.path()).is_err());
    }
}
