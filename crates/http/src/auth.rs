//! HTTP's side of access control: the token a request presents (HTTP
//! Basic, `Authorization: Basic base64(user:token)`, the user name being
//! free, so git's credential helpers, `GIT_ASKPASS` and
//! `https://user:token@host` URLs work unchanged; or `Authorization: Bearer
//! <token>`) and the name it asked for, put to the service's access gate
//! ([`gitstow_service::gate::Gate`]), whose denial is answered here.
//!
//! Answers, as a web server's Basic auth in front of `git http-backend`
//! gives them: no credentials where they are needed, `401` with
//! `WWW-Authenticate: Basic realm="gitstow"` (git then asks its credential
//! helper); a wrong, revoked or expired token (or a malformed header) `401`;
//! a valid token without the right `403` with a one-line reason git shows
//! as `remote: …`; an address with too many failed attempts `429` (see
//! [`gitstow_service::gate::MAX_FAILURES`]); access control that cannot be
//! read `503`. No secret is ever logged or answered.

use std::net::IpAddr;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use gitstow_service::gate::{Ask, Gate, Level};
use gitstow_service::Denied;

use crate::response::error;

/// Longest `Authorization` header read, in bytes: a token is 72.
const MAX_HEADER: usize = 4096;

/// The client's address, put in each request's extensions by the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub IpAddr);

/// Whether the `Host` header value `host` names the loopback interface:
/// `localhost` (or a name under `.localhost`, RFC 6761) or a loopback IP
/// address, with or without a port. A request without `Host` (HTTP/1.0)
/// counts as loopback: a browser always sends one.
pub fn is_loopback_host(host: Option<&str>) -> bool {
    let Some(host) = host else {
        return true;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        match rest.split_once(']') {
            Some((v6, _)) => v6,
            None => return false,
        }
    } else {
        host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Who made a request, once it is allowed (the service layer's).
pub use gitstow_service::Principal;

/// Whether the request may do what `needed` allows on `repo` (`None`: a
/// server endpoint, which needs `admin` on every repository, `*`), asked of
/// `gate` with the request's credentials and the name it asked for:
/// `target_authority` is the request target's authority when it came in
/// absolute form (`GET http://host/… HTTP/1.1`; RFC 9112 §3.2.2: it wins
/// over `Host`), else `Host` (two `Host` headers never name loopback).
/// `Err` is the response to send ([`answer`]).
pub async fn check(
    gate: &Gate,
    headers: &HeaderMap,
    target_authority: Option<&str>,
    peer: Option<IpAddr>,
    repo: Option<&str>,
    needed: Level,
) -> Result<Principal, Response> {
    let mut hosts = headers
        .get_all(header::HOST)
        .iter()
        .map(|h| h.to_str().unwrap_or("?"));
    let first = hosts.next();
    let one_host = hosts.next().is_none();
    let host = match target_authority {
        Some(a) => Some(a.rsplit('@').next().unwrap_or(a)),
        None => first,
    };
    let ask = Ask {
        secret: credentials(headers),
        peer,
        repo,
        needed,
        names_loopback: one_host && is_loopback_host(host),
    };
    gate.check(ask).await.map_err(|denied| {
        if denied == Denied::LoopbackOnly {
            tracing::info!(peer = ?peer, host, "refused: a name other than loopback while access control is off");
        }
        answer(denied)
    })
}

/// The response to a request the gate refused.
pub fn answer(denied: Denied) -> Response {
    match denied {
        Denied::NotFound => error(StatusCode::NOT_FOUND, "repository not found"),
        Denied::Forbidden(reason) => error(StatusCode::FORBIDDEN, reason),
        Denied::Unavailable => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "access control is unavailable, try again later",
        ),
        Denied::StoreDown => {
            crate::app::busy_error(gitstow_service::fault::ServerFault::StoreDown.text().into())
        }
        Denied::Unauthenticated => unauthorized("authentication required"),
        Denied::InvalidCredentials => unauthorized("invalid credentials"),
        Denied::TooManyFailures => too_many_failures(),
        Denied::LoopbackOnly => error(
            StatusCode::MISDIRECTED_REQUEST,
            "access control is off (no token exists), so this server answers only to localhost, 127.0.0.1 and [::1]; create a token to serve other names",
        ),
    }
}

/// The secret a request presents: the password of HTTP Basic (or its user
/// name when the password is empty and the name is a token; any other
/// `user:` is no credentials, as git's first try for `https://user@host`),
/// or a Bearer token. `Err` names what is malformed (for the log only).
pub fn credentials(headers: &HeaderMap) -> Result<Option<String>, &'static str> {
    use base64::Engine;
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    if value.len() > MAX_HEADER {
        return Err("Authorization header too long");
    }
    let value = value
        .to_str()
        .map_err(|_| "Authorization header not ASCII")?;
    let (scheme, rest) = value
        .split_once(' ')
        .ok_or("Authorization header without a scheme")?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        if rest.is_empty() {
            return Err("empty Bearer token");
        }
        return Ok(Some(rest.to_owned()));
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err("Authorization scheme is neither Basic nor Bearer");
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest)
        .map_err(|_| "Basic credentials are not base64")?;
    let decoded = String::from_utf8(decoded).map_err(|_| "Basic credentials are not UTF-8")?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or("Basic credentials without ':'")?;
    if !password.is_empty() {
        return Ok(Some(password.to_owned()));
    }
    // `user:` is what git sends first for a URL with a user name and no
    // password (before it asks its credential helper): no credentials yet,
    // unless the user name is itself a token.
    if user.starts_with(gitstow_service::gate::SECRET_PREFIX) {
        return Ok(Some(user.to_owned()));
    }
    Ok(None)
}

/// `401` asking for Basic credentials.
fn unauthorized(message: &str) -> Response {
    let mut resp = error(StatusCode::UNAUTHORIZED, message);
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"gitstow\""),
    );
    resp
}

/// `429` for an address that failed too often.
fn too_many_failures() -> Response {
    let mut resp = error(
        StatusCode::TOO_MANY_REQUESTS,
        "too many failed authentication attempts from your address, try again later",
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_bytes(value).unwrap(),
        );
        h
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            None,
            Some("localhost"),
            Some("LOCALHOST:8080"),
            Some("localhost."),
            Some("x.localhost:1"),
            Some("127.0.0.1"),
            Some("127.1.2.3:80"),
            Some("[::1]"),
            Some("[::1]:8080"),
        ] {
            assert!(is_loopback_host(ok), "{ok:?}");
        }
        for bad in [
            "attacker.example.com",
            "attacker.example.com:8080",
            "127.0.0.1.nip.io",
            "localhost.attacker.com",
            "10.0.0.1:80",
            "[::2]:80",
            "[::1",
            "?",
            "",
        ] {
            assert!(!is_loopback_host(Some(bad)), "{bad}");
        }
    }

    #[test]
    fn credentials_from_headers() {
        assert_eq!(credentials(&HeaderMap::new()), Ok(None));
        // "user:tok"
        assert_eq!(
            credentials(&with(b"Basic dXNlcjp0b2s=")),
            Ok(Some("tok".into()))
        );
        // "tok:": git's first try for a URL with a user name: no credentials
        assert_eq!(credentials(&with(b"basic dG9rOg==")), Ok(None));
        // "gitstow_x:" (a token as the user name)
        assert_eq!(
            credentials(&with(b"Basic Z2l0c3Rvd194Og==")),
            Ok(Some("gitstow_x".into()))
        );
        assert_eq!(credentials(&with(b"Bearer abc")), Ok(Some("abc".into())));
        for bad in [
            &b"Basic !!!"[..],
            b"Basic dXNlcg==", // "user": no colon
            b"Digest x",
            b"Basic",
            b"Bearer ",
            b"Basic \xff\xfe",
        ] {
            assert!(
                credentials(&with(bad)).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = format!("Basic {}", "A".repeat(MAX_HEADER));
        assert!(credentials(&with(huge.as_bytes())).is_err());
    }
}
