//! Connections: the accept loop in front of the routes, with the limits a
//! production HTTP server sets.
//!
//! - **Connection caps**: at most `max_connections` open connections, and
//!   `max_per_address` from one client address; a connection beyond either
//!   is accepted and answered at once with `503 Service Unavailable`,
//!   `Retry-After` and a one-line reason, then closed (so a flood cannot
//!   exhaust file descriptors and starve `accept`). The per-address cap
//!   counts an IPv4 address, or an IPv6 client's /64
//!   ([`gitstow_service::conn_caps`]); behind a proxy every client has the
//!   proxy's.
//! - **Header read timeout** (hyper's `header_read_timeout`): a connection
//!   must deliver a whole request head within `header_timeout` of starting
//!   to wait for one. It covers a new connection that sends nothing, one
//!   that trickles its header a byte at a time, and an idle keep-alive
//!   connection between requests (hyper starts the timer whenever it
//!   waits for a head).
//! - Request bodies that stall or trickle are the body reader's to stop
//!   (`--idle-timeout`, `--min-body-rate`, see [`crate::body`]).
//!
//! Graceful shutdown as axum's: on the signal the listener closes, idle
//! connections close, and in-flight requests finish (the caller bounds
//! that with `--shutdown-grace`).

use gitstow_service::conn_caps::ConnCaps;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tower::ServiceExt;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// Connection limits of a listener.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// Open connections at most (beyond: 503).
    pub max_connections: usize,
    /// Open connections from one client address at most (beyond: 503).
    pub max_per_address: usize,
    /// Time a connection gets to deliver a request head (and the longest a
    /// keep-alive connection stays idle).
    pub header_timeout: Duration,
}

impl ConnLimits {
    /// The connection caps these limits set, to share between the HTTP
    /// listener ([`serve`]) and the SSH one.
    pub fn caps(&self) -> ConnCaps {
        ConnCaps::new(self.max_connections, self.max_per_address)
    }

    /// The default connection cap for a process whose open-files soft
    /// limit is `nofile`: half of what is left after 256 descriptors for
    /// the store and logs (a connection may hold a second one: its request
    /// spooled to a temp file); at least 16.
    pub fn default_max_connections(nofile: u64) -> usize {
        (nofile.saturating_sub(256) / 2).max(16) as usize
    }
}

/// A connection's slot under the caps, and its place in
/// `gitstow_connections_open`.
struct Held {
    _slot: gitstow_service::conn_caps::Held,
    _gauge: crate::metrics::InFlight,
}

/// Takes a slot for a connection from `peer`, or says which cap is reached.
fn admit(caps: &ConnCaps, peer: IpAddr) -> Result<Held, &'static str> {
    let slot = caps.admit(Some(peer)).map_err(|c| c.reason())?;
    Ok(Held {
        _slot: slot,
        _gauge: crate::metrics::InFlight::new(crate::metrics::CONNECTIONS_OPEN),
    })
}

/// Answers a connection over a cap: 503, `Retry-After: 5`, the reason,
/// then a [lingering close](answer_and_close).
async fn refuse(stream: TcpStream, reason: &'static str) {
    let body = format!("server busy: {reason}, try again later\n");
    answer_and_close(stream, "503 Service Unavailable\r\nRetry-After: 5", &body).await;
}

/// Answers a plain HTTP request on the TLS port: `400` and the reason,
/// then a [lingering close](answer_and_close).
async fn plain_http_on_tls(stream: TcpStream) {
    let body = "this server speaks HTTPS on this port: use an https:// URL\n";
    answer_and_close(stream, "400 Bad Request", body).await;
}

/// Writes one HTTP/1.1 response (`status` and any header lines after it,
/// a text `body`) to a connection served outside hyper, then closes it
/// lingering: what the client sends meanwhile is read and dropped until it
/// closes (a close with unread data would be a reset that loses the
/// answer); two seconds at most in all.
async fn answer_and_close(mut stream: TcpStream, status: &str, body: &str) {
    use tokio::io::AsyncReadExt;
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
}

/// The TLS handshake of a new connection, within `timeout` of its start;
/// `None` (counted and logged) when it fails or takes too long, or when the
/// client speaks plain HTTP (answered by [`plain_http_on_tls`]).
async fn tls_handshake(
    acceptor: &tokio_rustls::TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    timeout: Duration,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let deadline = tokio::time::Instant::now() + timeout;
    // A TLS handshake starts with 0x16; a letter is plain HTTP sent to the
    // HTTPS port: say so, as nginx does.
    let mut first = [0u8; 1];
    let failure = match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0].is_ascii_uppercase() => {
            plain_http_on_tls(stream).await;
            "plain HTTP on the TLS port".to_owned()
        }
        Ok(Ok(1)) => match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
            Ok(Ok(tls)) => return Some(tls),
            Ok(Err(e)) => format!("TLS handshake failed: {e}"),
            Err(_) => "TLS handshake timed out".to_owned(),
        },
        _ => "no TLS handshake within the header timeout".to_owned(),
    };
    metrics::counter!(crate::metrics::TLS_HANDSHAKE_FAILURES).increment(1);
    tracing::debug!(%peer, %failure, "connection closed");
    None
}

/// Whether an `accept` error concerns only the connection being accepted
/// (the next `accept` may succeed at once), as axum's serve treats them.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset | Interrupted
    ) || matches!(
        e.raw_os_error(),
        Some(
            libc::EPROTO
                | libc::ENETDOWN
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH
        )
    )
}

/// Largest read buffer of a connection, in bytes (see [`serve`]).
const READ_BUF_MAX: usize = 128 << 10;

/// Serves `router` on `listener` under `limits` until `shutdown` resolves,
/// then waits for open connections to finish their requests. Each
/// connection holds a slot of `caps` (made from `limits`' connection caps
/// by [`ConnLimits::caps`], and shared with the SSH listener, so that both
/// transports together stay under them). With `tls`, each connection's TLS
/// handshake (see [`crate::tls`]) must end within `limits.header_timeout`,
/// and HTTP is spoken inside it.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    caps: ConnCaps,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // The read buffer grows by doubling up to this (hyper's default is
        // 408 KiB): a push's body goes to its spool in chunks of this size
        // at most, and 128 KiB reads of a 300 MiB body cost no more CPU
        // than larger ones. Headers that do not parse within it get 431
        // (hyper checks once a read leaves them incomplete, so headers
        // somewhat past it can still pass).
        .max_buf_size(READ_BUF_MAX)
        .keep_alive(true);
    let mut last_accept_error = None::<std::time::Instant>;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer): (TcpStream, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // EMFILE and the like: say so at most once a second, and
                    // give the other connections time to close.
                    if last_accept_error.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        tracing::warn!(error = %e, "accept failed");
                        last_accept_error = Some(std::time::Instant::now());
                    }
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(50)) => continue,
                        () = &mut shutdown => break,
                    }
                }
            },
            () = &mut shutdown => break,
        };
        let held = match admit(&caps, peer.ip()) {
            Ok(h) => h,
            Err(reason) => {
                metrics::counter!(crate::metrics::CONNECTIONS_REFUSED).increment(1);
                tracing::debug!(%peer, reason, "connection refused");
                tokio::spawn(refuse(stream, reason));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        // The handlers learn the client's address from the request.
        let client = crate::auth::ClientAddr(peer.ip());
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(client);
                req
            },
        ));
        let watcher = graceful.watcher();
        let http = http.clone();
        let tls = tls.clone();
        let handshake_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let _held = held;
            let ended = match tls {
                None => {
                    let conn = http.serve_connection(TokioIo::new(stream), service);
                    watcher.watch(conn).await
                }
                Some(acceptor) => {
                    let Some(stream) =
                        tls_handshake(&acceptor, stream, peer, handshake_timeout).await
                    else {
                        return;
                    };
                    let conn = http.serve_connection(TokioIo::new(stream), service);
                    watcher.watch(conn).await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_which_cap_and_the_default_follows_the_files_limit() {
        let caps = ConnCaps::new(1, 1);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let _a1 = admit(&caps, a).unwrap();
        assert_eq!(
            admit(&caps, a).err(),
            Some("too many connections to this server")
        );
        assert_eq!(ConnLimits::default_max_connections(1024), 384);
        assert_eq!(ConnLimits::default_max_connections(100), 16);
    }
}
