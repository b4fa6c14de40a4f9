//! Test harness: a raw HTTP/1.1 client for requests git itself never sends.

use super::*;

/// A parsed HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request over a fresh connection (`Connection: close`,
/// `Content-Length` body) to 127.0.0.1:`port`.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nUser-Agent: git/gitstow-tests\r\n"
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if method != "GET" || !body.is_empty() {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    // the server may answer (and close) before reading all of a bad body
    let _ = s.write_all(body);
    let _ = s.flush();
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        if raw.is_empty() {
            panic!("reading the response to {method} {path}: {e}");
        }
    }
    parse_response(&raw).unwrap_or_else(|| {
        panic!(
            "malformed HTTP response to {method} {path}: {:?}",
            String::from_utf8_lossy(&raw)
        )
    })
}

fn parse_response(mut raw: &[u8]) -> Option<Response> {
    // Skip interim answers (`100 Continue` after `Expect: 100-continue`).
    while raw.starts_with(b"HTTP/1.1 1") {
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
        raw = &raw[end + 4..];
    }
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n")?;
            let size_str = std::str::from_utf8(&rest[..nl]).ok()?;
            let size = usize::from_str_radix(size_str.split(';').next()?.trim(), 16).ok()?;
            rest = &rest[nl + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        body = out;
    } else if let Some(len) = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.truncate(len);
    }
    Some(Response {
        status,
        headers,
        body,
    })
}

/// POSTs a receive-pack request body to `/<repo>.git/git-receive-pack`.
pub fn post_receive_pack(server: &Server, repo: &str, body: &[u8]) -> Response {
    http(
        server.port(),
        "POST",
        &format!("/{repo}.git/git-receive-pack"),
        &[
            ("Content-Type", "application/x-git-receive-pack-request"),
            ("Accept", "application/x-git-receive-pack-result"),
        ],
        body,
    )
}

/// POSTs a protocol v2 command request body to `/<repo>.git/git-upload-pack`.
pub fn post_upload_pack_v2(server: &Server, repo: &str, body: &[u8]) -> Response {
    http(
        server.port(),
        "POST",
        &format!("/{repo}.git/git-upload-pack"),
        &[
            ("Content-Type", "application/x-git-upload-pack-request"),
            ("Git-Protocol", "version=2"),
        ],
        body,
    )
}
