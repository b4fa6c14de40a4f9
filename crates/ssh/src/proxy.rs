//! The PROXY protocol (HAProxy's `proxy-protocol.txt`, v1 text and v2
//! binary) in front of the SSH listener: behind a TCP load balancer every
//! connection comes from the balancer's address, and the header it sends
//! first names the client, for the access log, the fail2ban line and the
//! per-source startup cap.
//!
//! Policy as gitlab-sshd's `require` with an allowlist: a connection from
//! an address in `--ssh-proxy-protocol-from` must start with a header (one
//! that does not is closed: it would otherwise be counted as the balancer's
//! own); a connection from anywhere else is served as a direct one, and a
//! header it sends is not a version line, so its handshake fails (a client
//! cannot claim another address). A `LOCAL` (v2) or `UNKNOWN` (v1) header,
//! a balancer's health check, keeps the balancer's address.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;
use ppp::v1;
use ppp::v2;
use tokio::io::AsyncReadExt;

/// The longest a trusted balancer takes to send its header (it sends it
/// with the connection, before any client byte).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest header read: a v1 header is at most 107 bytes, a v2 one 16
/// bytes and its addresses and TLVs (a balancer's are a few dozen bytes).
const MAX_HEADER: usize = 1024;

/// The 12 bytes a v2 header starts with.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The networks whose connections carry a PROXY header (none: the
/// protocol is off).
#[derive(Debug, Clone, Default)]
pub struct ProxyFrom(Vec<IpNet>);

impl ProxyFrom {
    /// Headers expected from `nets` (e.g. `10.0.0.0/8`, `192.0.2.4/32`).
    pub fn new(nets: Vec<IpNet>) -> Self {
        ProxyFrom(nets)
    }

    /// Whether a connection from `peer` starts with a header.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|net| net.contains(&peer))
    }
}

/// Why a header was not taken.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// Reading the connection failed or it closed.
    #[error("reading the PROXY header: {0}")]
    Io(#[from] std::io::Error),
    /// Not sent within [`HEADER_TIMEOUT`].
    #[error("no PROXY header within {HEADER_TIMEOUT:?}")]
    Timeout,
    /// Not a PROXY header, or a malformed or oversized one.
    #[error("not a valid PROXY header: {0}")]
    Invalid(String),
}

/// Reads the PROXY header at the start of `stream` (and nothing after it):
/// the client's address it names, or `None` for a `LOCAL`/`UNKNOWN` one.
pub async fn read_header<R: tokio::io::AsyncRead + Unpin>(
    stream: &mut R,
) -> Result<Option<SocketAddr>, HeaderError> {
    tokio::time::timeout(HEADER_TIMEOUT, read_header_now(stream))
        .await
        .map_err(|_| HeaderError::Timeout)?
}

async fn read_header_now<R: tokio::io::AsyncRead + Unpin>(
    stream: &mut R,
) -> Result<Option<SocketAddr>, HeaderError> {
    // Six bytes tell the versions apart ("PROXY " or the v2 signature's
    // start) and are in every header: nothing past one is read.
    let mut buf = vec![0u8; 6];
    stream.read_exact(&mut buf).await?;
    if buf == b"PROXY " {
        // v1: up to the CRLF, a byte at a time.
        while !buf.ends_with(b"\r\n") {
            if buf.len() >= 107 {
                return Err(HeaderError::Invalid("a v1 line over 107 bytes".into()));
            }
            buf.push(stream.read_u8().await?);
        }
        return v1_address(&buf);
    }
    if buf[..] != V2_SIGNATURE[..6] {
        return Err(HeaderError::Invalid("no PROXY signature".into()));
    }
    buf.resize(16, 0);
    stream.read_exact(&mut buf[6..]).await?;
    let len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    if 16 + len > MAX_HEADER {
        return Err(HeaderError::Invalid(format!("a v2 header of {len} bytes")));
    }
    buf.resize(16 + len, 0);
    stream.read_exact(&mut buf[16..]).await?;
    v2_address(&buf)
}

fn v1_address(bytes: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    let header = v1::Header::try_from(bytes).map_err(|e| HeaderError::Invalid(e.to_string()))?;
    Ok(match header.addresses {
        v1::Addresses::Unknown => None,
        v1::Addresses::Tcp4(a) => Some(SocketAddr::new(a.source_address.into(), a.source_port)),
        v1::Addresses::Tcp6(a) => Some(SocketAddr::new(a.source_address.into(), a.source_port)),
    })
}

fn v2_address(bytes: &[u8]) -> Result<Option<SocketAddr>, HeaderError> {
    let header = v2::Header::try_from(bytes).map_err(|e| HeaderError::Invalid(e.to_string()))?;
    if header.command == v2::Command::Local {
        return Ok(None);
    }
    Ok(match header.addresses {
        v2::Addresses::IPv4(a) => Some(SocketAddr::new(a.source_address.into(), a.source_port)),
        v2::Addresses::IPv6(a) => Some(SocketAddr::new(a.source_address.into(), a.source_port)),
        v2::Addresses::Unspecified | v2::Addresses::Unix(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8]) -> (Result<Option<SocketAddr>, HeaderError>, Vec<u8>) {
        let mut input = bytes;
        let got = read_header(&mut input).await;
        (got, input.to_vec())
    }

    #[tokio::test]
    async fn v1_names_the_client_and_leaves_the_ssh_line() {
        let (got, rest) =
            read(b"PROXY TCP4 192.0.2.7 10.0.0.1 51234 22\r\nSSH-2.0-OpenSSH_9.6\r\n").await;
        assert_eq!(got.unwrap(), Some("192.0.2.7:51234".parse().unwrap()));
        assert_eq!(rest, b"SSH-2.0-OpenSSH_9.6\r\n");
        let (got, rest) = read(b"PROXY TCP6 2001:db8::7 2001:db8::1 51234 22\r\nSSH-").await;
        assert_eq!(got.unwrap(), Some("[2001:db8::7]:51234".parse().unwrap()));
        assert_eq!(rest, b"SSH-");
        let (got, rest) = read(b"PROXY UNKNOWN\r\nS").await;
        assert_eq!(got.unwrap(), None);
        assert_eq!(rest, b"S");
    }

    #[tokio::test]
    async fn v2_names_the_client_and_local_keeps_the_balancer() {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend([
            0x21, 0x11, 0, 12, 192, 0, 2, 7, 10, 0, 0, 1, 0xc8, 0x22, 0, 22,
        ]);
        h.extend(b"SSH-2.0-x\r\n");
        let (got, rest) = read(&h).await;
        assert_eq!(got.unwrap(), Some("192.0.2.7:51234".parse().unwrap()));
        assert_eq!(rest, b"SSH-2.0-x\r\n");
        let mut local = V2_SIGNATURE.to_vec();
        local.extend([0x20, 0x00, 0, 0]);
        local.extend(b"SSH");
        let (got, rest) = read(&local).await;
        assert_eq!(got.unwrap(), None);
        assert_eq!(rest, b"SSH");
    }

    #[tokio::test]
    async fn anything_else_is_refused() {
        for bad in [
            &b"SSH-2.0-OpenSSH_9.6\r\n"[..],
            b"PROXY TCP4 not-an-address 10.0.0.1 1 22\r\n",
            b"PROXY TCP4 192.0.2.7 10.0.0.1 51234 22 and on and on and on and on and on and on and on and on and on and on and on\r\n",
            b"PROXY TCP4",
        ] {
            let (got, _) = read(bad).await;
            assert!(got.is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut huge = V2_SIGNATURE.to_vec();
        huge.extend([0x21, 0x11, 0xff, 0xff]);
        assert!(matches!(read(&huge).await.0, Err(HeaderError::Invalid(_))));
    }

    #[test]
    fn trusted_networks_include_mapped_addresses() {
        let from = ProxyFrom::new(vec!["10.0.0.0/8".parse().unwrap()]);
        assert!(from.trusts("10.1.2.3".parse().unwrap()));
        assert!(from.trusts("::ffff:10.1.2.3".parse().unwrap()));
        assert!(!from.trusts("192.0.2.7".parse().unwrap()));
        assert!(!ProxyFrom::default().trusts("10.1.2.3".parse().unwrap()));
    }
}
