//! What the daemon says about itself over HTTP: the runtime figures of
//! `GET /metrics` (Prometheus text) and heap profiles from
//! `GET /debug/pprof/heap` (gzipped pprof protobuf, served when the daemon
//! runs with `--heap-profiling`).

use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::prom;

/// How long one `/metrics` scrape may take.
pub const METRICS_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one heap profile download may take.
pub const PROFILE_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest heap profile accepted, in bytes.
const PROFILE_LIMIT: u64 = 512 << 20;

/// The daemon's own figures from one `/metrics` scrape. A gauge or counter
/// the daemon does not expose is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeMetrics {
    /// `gitstow_jemalloc_allocated_bytes`: bytes the allocator has handed out
    /// and not got back (live heap).
    pub jemalloc_allocated_bytes: Option<u64>,
    /// `gitstow_jemalloc_active_bytes`: bytes in the allocator's active pages.
    pub jemalloc_active_bytes: Option<u64>,
    /// `gitstow_jemalloc_resident_bytes`: bytes the allocator keeps resident.
    pub jemalloc_resident_bytes: Option<u64>,
    /// `gitstow_allocated_bytes_total`: bytes allocated since start (counter).
    pub allocated_bytes_total: Option<u64>,
    /// `gitstow_received_bytes_total`: request body bytes received since start.
    pub received_bytes_total: Option<u64>,
    /// `gitstow_pushes_in_flight`: pushes being served now.
    pub pushes_in_flight: Option<u64>,
}

impl RuntimeMetrics {
    /// Picks the figures out of a parsed exposition.
    pub fn from_samples(samples: &[prom::PromSample]) -> RuntimeMetrics {
        let get = |name: &str| {
            prom::value(samples, name)
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(|v| v.round() as u64)
        };
        RuntimeMetrics {
            jemalloc_allocated_bytes: get("gitstow_jemalloc_allocated_bytes"),
            jemalloc_active_bytes: get("gitstow_jemalloc_active_bytes"),
            jemalloc_resident_bytes: get("gitstow_jemalloc_resident_bytes"),
            allocated_bytes_total: get("gitstow_allocated_bytes_total"),
            received_bytes_total: get("gitstow_received_bytes_total"),
            pushes_in_flight: get("gitstow_pushes_in_flight"),
        }
    }
}

/// A blocking HTTP client for one daemon.
#[derive(Clone)]
pub struct Client {
    base: String,
    metrics: ureq::Agent,
    profiles: ureq::Agent,
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .build()
        .into()
}

impl Client {
    /// A client for the daemon at `base` (e.g. `http://127.0.0.1:41234`).
    pub fn new(base: &str) -> Client {
        Client {
            base: base.trim_end_matches('/').to_owned(),
            metrics: agent(METRICS_TIMEOUT),
            profiles: agent(PROFILE_TIMEOUT),
        }
    }

    /// `GET /metrics`, parsed. Any HTTP error, non-200 status (404 before
    /// the daemon has metrics) or unparsable line is an error.
    pub fn metrics(&self) -> Result<RuntimeMetrics> {
        let url = format!("{}/metrics", self.base);
        let text = self
            .metrics
            .get(&url)
            .call()
            .with_context(|| format!("GET {url}"))?
            .body_mut()
            .read_to_string()
            .with_context(|| format!("reading {url}"))?;
        let samples = prom::parse(&text).with_context(|| format!("parsing {url}"))?;
        Ok(RuntimeMetrics::from_samples(&samples))
    }

    /// `GET /debug/pprof/heap`: the profile's bytes.
    pub fn heap_profile(&self) -> Result<Vec<u8>> {
        let url = format!("{}/debug/pprof/heap", self.base);
        self.profiles
            .get(&url)
            .call()
            .with_context(|| format!("GET {url}"))?
            .body_mut()
            .with_config()
            .limit(PROFILE_LIMIT)
            .read_to_vec()
            .with_context(|| format!("reading {url}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_metrics_from_an_exposition() {
        let text = "gitstow_jemalloc_allocated_bytes 1048576\n\
                    gitstow_jemalloc_active_bytes 2097152\n\
                    gitstow_allocated_bytes_total 5e9\n\
                    gitstow_pushes_in_flight 2\n\
                    gitstow_received_bytes_total NaN\n";
        let m = RuntimeMetrics::from_samples(&prom::parse(text).unwrap());
        assert_eq!(
            m,
            RuntimeMetrics {
                jemalloc_allocated_bytes: Some(1 << 20),
                jemalloc_active_bytes: Some(2 << 20),
                jemalloc_resident_bytes: None,
                allocated_bytes_total: Some(5_000_000_000),
                received_bytes_total: None,
                pushes_in_flight: Some(2),
            }
        );
    }

    /// Serves `responses` (status, body) to successive connections.
    fn serve(responses: Vec<(u16, &'static str)>) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for (status, body) in responses {
                let (mut conn, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        url
    }

    #[test]
    fn a_404_or_junk_is_a_failed_scrape_and_200_gives_figures() {
        let client = Client::new(&serve(vec![
            (404, "not found\n"),
            (200, "<html>oops</html>\n"),
            (200, "gitstow_pushes_in_flight 3\n"),
            (404, "heap profiling is off\n"),
            (200, "\x1f profile"),
        ]));
        assert!(format!("{:#}", client.metrics().unwrap_err()).contains("404"));
        assert!(format!("{:#}", client.metrics().unwrap_err()).contains("metrics line 1"));
        assert_eq!(client.metrics().unwrap().pushes_in_flight, Some(3));
        assert!(client.heap_profile().is_err());
        assert_eq!(client.heap_profile().unwrap(), b"\x1f profile");
    }

    #[test]
    fn nothing_listening_is_an_error_not_a_panic() {
        // Bind then drop: the port is (very likely) closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = Client::new(&format!("http://127.0.0.1:{port}/"));
        assert!(client.metrics().is_err());
        assert!(client.heap_profile().is_err());
    }
}
