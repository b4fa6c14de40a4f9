//! TLS served directly, with rustls: `serve --tls-cert FILE --tls-key FILE`.
//!
//! - The certificate file holds a PEM chain, the server's certificate
//!   first, then its intermediates; the key file a PEM private key (PKCS#8,
//!   PKCS#1 RSA or SEC1 EC). A pair that does not load or whose key does
//!   not match the certificate fails the start.
//! - A renewed pair counts without a restart: the files' modification times
//!   and sizes are looked at again at most every [`RECHECK`] while
//!   handshakes happen, and a changed pair is loaded for the next
//!   handshakes (a pair that does not load is logged and the previous one
//!   kept). Connections already open keep their session.
//! - TLS 1.2 and 1.3 with rustls's default cipher suites (aws-lc-rs);
//!   ALPN offers `http/1.1` only (the server speaks HTTP/1.1).
//! - The handshake must end within `--header-timeout` (see
//!   [`crate::listen`]), so a client that opens a connection and stalls
//!   in the handshake holds it no longer than one that sends no request.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often, at most, the certificate and key files are looked at again.
pub const RECHECK: Duration = Duration::from_secs(30);

/// A TLS acceptor for `serve` over the pair `cert`, `key` (PEM files).
///
/// Errors: a message naming the file that is missing, unreadable, holds no
/// certificate or key, or a key that does not match the certificate.
pub fn acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let resolver = Reloading::new(cert, key, provider.clone())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS settings: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Reads the chain in `cert` and the key in `key` and checks they match.
fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "--tls-cert {}: no PEM certificate (BEGIN CERTIFICATE) in it",
            cert.display()
        ));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    CertifiedKey::from_der(chain, private, provider).map_err(|e| {
        format!(
            "--tls-key {} does not fit --tls-cert {}: {e}",
            key.display(),
            cert.display()
        )
    })
}

/// What tells a changed file: its modification time and size.
type Stamp = [Option<(SystemTime, u64)>; 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let one = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    };
    [one(cert), one(key)]
}

/// The pair in use, and what its files looked like when it was loaded.
#[derive(Debug)]
struct Current {
    pair: Arc<CertifiedKey>,
    stamp: Stamp,
    checked: Instant,
}

/// A certificate resolver that loads the pair again when its files change.
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Current>,
}

impl Reloading {
    /// A resolver over the pair in `cert`, `key`, loaded now (see [`load`]).
    fn new(cert: &Path, key: &Path, provider: Arc<CryptoProvider>) -> Result<Self, String> {
        let pair = Arc::new(load(cert, key, &provider)?);
        Ok(Reloading {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            provider,
            current: RwLock::new(Current {
                pair,
                stamp: stamp(cert, key),
                checked: Instant::now(),
            }),
        })
    }

    /// The pair for a handshake now: the current one, loaded again first if
    /// [`RECHECK`] has passed and the files changed since.
    fn pair(&self, recheck: Duration) -> Arc<CertifiedKey> {
        {
            let current = self.current.read().unwrap_or_else(|e| e.into_inner());
            if current.checked.elapsed() < recheck {
                return current.pair.clone();
            }
        }
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        if current.checked.elapsed() >= recheck {
            current.checked = Instant::now();
            let now = stamp(&self.cert, &self.key);
            if now != current.stamp {
                // Whatever the outcome, this version of the files is dealt
                // with: a pair that does not load is said once, not at
                // every handshake.
                current.stamp = now;
                match load(&self.cert, &self.key, &self.provider) {
                    Ok(pair) => {
                        tracing::info!(cert = %self.cert.display(), "TLS certificate loaded again");
                        current.pair = Arc::new(pair);
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the changed TLS certificate or key does not load; serving the previous pair");
                    }
                }
            }
        }
        current.pair.clone()
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pair(RECHECK))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A self-signed certificate and key for `cn` in `dir` (openssl CLI).
    fn self_signed(dir: &Path, cn: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{cn}.crt"));
        let key = dir.join(format!("{cn}.key"));
        let status = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "2", "-subj"])
            .arg(format!("/CN={cn}"))
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("the openssl command (CI installs it)");
        assert!(status.success());
        (cert, key)
    }

    fn fails(cert: &Path, key: &Path) -> String {
        match acceptor(cert, key) {
            Ok(_) => panic!("{} and {} loaded", cert.display(), key.display()),
            Err(e) => e,
        }
    }

    #[test]
    fn a_bad_pair_fails_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed(dir.path(), "one");
        let (_, other_key) = self_signed(dir.path(), "two");
        assert!(acceptor(&cert, &key).is_ok());
        let e = fails(&cert, &other_key);
        assert!(e.contains("does not fit"), "{e}");
        let missing = dir.path().join("missing.crt");
        let e = fails(&missing, &key);
        assert!(
            e.starts_with("--tls-cert") && e.contains("missing.crt"),
            "{e}"
        );
        let e = fails(&key, &key);
        assert!(e.contains("no PEM certificate"), "{e}");
        let e = fails(&cert, &cert);
        assert!(e.starts_with("--tls-key"), "{e}");
    }

    #[test]
    fn a_renewed_pair_is_loaded_and_a_broken_one_keeps_the_previous() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed(dir.path(), "live");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let resolver = Reloading::new(&cert, &key, provider).unwrap();
        let first = resolver.pair(Duration::ZERO).cert[0].clone();
        // Renewed: a new pair written over the files.
        let (new_cert, new_key) = self_signed(dir.path(), "renewed");
        std::fs::copy(&new_cert, &cert).unwrap();
        std::fs::copy(&new_key, &key).unwrap();
        assert_eq!(
            resolver.pair(RECHECK).cert[0],
            first,
            "not looked at before RECHECK"
        );
        let second = resolver.pair(Duration::ZERO).cert[0].clone();
        assert_ne!(second, first);
        assert_eq!(second, CertificateDer::from_pem_file(&new_cert).unwrap());
        // Half written: a key that does not match keeps the renewed pair.
        let (_, stray_key) = self_signed(dir.path(), "stray");
        std::fs::copy(&stray_key, &key).unwrap();
        assert_eq!(resolver.pair(Duration::ZERO).cert[0], second);
    }
}
