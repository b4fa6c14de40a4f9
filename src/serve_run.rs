//! The start of a server from its [`Settings`]: the store (with the
//! container cache on S3), access control's exposure check, TLS, the
//! listeners of both transports (HTTP and SSH, siblings over one
//! `gitstow_service::Host`), maintenance and the webhook deliverer, then
//! the shutdown sequence (drain, grace, hard deadline).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use gitstow_http::app;

use crate::serve_settings::Settings;

/// Runs a server with `settings` until a shutdown; returns the exit code
/// (0 after a shutdown, 1 when an address or the runtime cannot be had, 2
/// when the store cannot be opened, a file does not load or access
/// control refuses the exposure).
pub fn run(mut settings: Settings) -> i32 {
    if let Some(hook) = &settings.pre_receive_hook {
        if let Err(why) = crate::serve_settings::check_pre_receive_hook(hook) {
            eprintln!("gitstow: {why}");
            return 2;
        }
    }
    if gitstow_store::is_s3_url(&settings.store.url) {
        tracing::info!(
            store = %settings.store.url,
            connect_timeout_secs = settings.store.s3_connect_timeout,
            read_timeout_secs = settings.store.s3_read_timeout,
            retry_deadline_secs = settings.store.s3_retry_deadline,
            "checking the store (HeadBucket)"
        );
    }
    let store =
        match crate::store_open::open(&settings.store, settings.if_missing, settings.cache.clone())
        {
            Ok(s) => s,
            Err(why) => {
                eprintln!("gitstow: {why}");
                return 2;
            }
        };
    // Spools and staging files live in this process's own scratch directory;
    // those of dead processes are swept now and every hour.
    let scratch = match crate::leftovers::own_scratch(
        settings.tmp_dir.as_deref(),
        crate::leftovers::SERVE_PREFIX,
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gitstow: {e}");
            return 2;
        }
    };
    settings.use_scratch(scratch.path());
    let metrics = match gitstow_http::metrics::Metrics::install(store.clone()) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(error = %e, "metrics recorder not installed");
            None
        }
    };
    match check_exposure(&settings, &store) {
        Ok(enforce) => settings.http.auth.enforce = enforce,
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
        if settings.heap_profiling {
            if let Err(e) = gitstow_http::operator::activate_heap_profiling().await {
                eprintln!("gitstow: --heap-profiling: {e}");
                return 2;
            }
        }
        let tls = match &settings.tls {
            Some((cert, key)) => match gitstow_http::tls::acceptor(cert, key) {
                Ok(a) => Some(a),
                Err(e) => {
                    tracing::error!(error = %e, "cannot serve TLS");
                    eprintln!("gitstow: cannot serve TLS: {e}");
                    return 2;
                }
            },
            None => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let listener = match tokio::net::TcpListener::bind(settings.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("gitstow: cannot listen on {}: {e}", settings.listen);
                return 1;
            }
        };
        let addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let metrics_listener = match settings.metrics_listen {
            Some(maddr) => match tokio::net::TcpListener::bind(maddr).await {
                Ok(l) => Some(l),
                Err(e) => {
                    eprintln!("gitstow: cannot listen on {maddr}: {e}");
                    return 1;
                }
            },
            None => None,
        };
        let ssh = match &settings.ssh {
            Some(s) => match ssh_listener(s.listen, &s.host_key_files, &store).await {
                Ok((l, keys)) => Some((l, keys, s.config.clone())),
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
            if let Some((l, keys, _)) = &ssh {
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
        let service = &settings.http.service;
        tracing::info!(%addr, store = %settings.store.url, max_concurrent_pushes = service.max_concurrent_pushes, max_concurrent_fetches = service.max_concurrent_fetches, heap_profiling = settings.heap_profiling, "serving");
        crate::leftovers::spawn_periodic(
            settings.tmp_dir.as_deref(),
            gitstow_store::local_root(&settings.store.url),
        );
        let _scratch = scratch;
        let store_for_stats = store.clone();
        let mut config = settings.http.clone();
        if let Ok(bound) = listener.local_addr() {
            config.lfs.http_port = bound.port();
        }
        let app = app::App::new(store, config, metrics);
        if let Some(l) = metrics_listener {
            tokio::spawn(gitstow_http::operator::serve_operator(l, app.clone()));
        }
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (ssh_stop_tx, mut ssh_stop_rx) = tokio::sync::watch::channel(false);
        // One set of connection caps for both transports: --max-connections
        // and --max-connections-per-address count HTTP's and SSH's together.
        let caps = settings.conn_limits.caps();
        let ssh_task = ssh.map(|(l, keys, ssh_config)| {
            let access = Arc::new(crate::ssh_access::SshAccess(app.clone()));
            let host = app.host().clone();
            let caps = caps.clone();
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = ssh_stop_rx.wait_for(|s| *s).await;
                };
                gitstow_ssh::serve(l, host, access, &keys, ssh_config, caps, stopped).await;
            })
        });
        let stopping = app.clone();
        let drain = settings.drain_delay;
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
        let conn_limits = settings.conn_limits;
        tracing::info!(
            max_connections = conn_limits.max_connections,
            max_per_address = conn_limits.max_per_address,
            header_timeout_secs = conn_limits.header_timeout.as_secs(),
            "connection limits"
        );
        let http = gitstow_http::listen::serve(listener, app::router(app), conn_limits, caps, tls, graceful);
        // Both transports drain: SSH commands running at the signal finish
        // (within the grace below) as HTTP requests do.
        let served = async move {
            http.await;
            if let Some(t) = ssh_task {
                let _ = t.await;
            }
        };
        let grace = settings.shutdown_grace;
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
                // A remote store's request counts and its cache's; the
                // local store counts none.
                let m = store_for_stats.metrics();
                match (m.requests, m.cache) {
                    (Some(r), c) => {
                        let c = c.unwrap_or_default();
                        tracing::info!(
                            store_gets = r.get + r.get_range,
                            store_puts = r.put + r.put_conditional + r.multipart_parts,
                            store_lists = r.list,
                            store_errors = r.errors,
                            cache_hits = c.hits,
                            cache_misses = c.misses,
                            "shut down"
                        );
                    }
                    (None, _) => tracing::info!("shut down"),
                }
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
    settings: &Settings,
    store: &Arc<dyn gitstow_store::ObjectStore>,
) -> Result<bool, String> {
    let (doc, _) = gitstow_access::load(store.as_ref())
        .map_err(|e| format!("cannot read the access document: {e}"))?;
    if let Some(m) = settings.metrics_listen.filter(|m| !m.ip().is_loopback()) {
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
    if settings.listen.ip().is_loopback() {
        tracing::warn!("access control is off: no token exists (gitstow token create); anyone who can reach this loopback address (a proxy on this host included) may do anything");
        return Ok(false);
    }
    if settings.insecure_no_auth {
        tracing::warn!(listen = %settings.listen, "access control is off (--insecure-no-auth): anyone who can reach this address may read, push and delete");
        return Ok(false);
    }
    Err(format!(
        "refusing to serve on {} without access control: no token exists. Create one \
         (gitstow token create --name NAME --grant 'org/*:write' --store {}), or pass \
         --insecure-no-auth to let anyone who can reach it do anything",
        settings.listen, settings.store.url
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
