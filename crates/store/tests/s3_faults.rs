//! The S3 backend against a real S3 server, through a fault proxy that loses
//! answers, requests or multipart parts (see `s3.rs` for how to run them).

mod common;

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use gitstow_store::{Error, ObjectStore, PutCondition, S3Store};

use common::*;

/// A TCP proxy in front of the S3 server that can break the next PUT:
/// `DROP_RESPONSE` forwards it (the server applies it) but closes the
/// client's connection instead of returning the answer; `DROP_REQUEST`
/// closes the connection without forwarding it (nothing is applied).
struct FaultProxy {
    endpoint: String,
    mode: Arc<std::sync::atomic::AtomicU8>,
}

const PASS: u8 = 0;
const DROP_RESPONSE: u8 = 1;
const DROP_REQUEST: u8 = 2;
/// Sticky: drop every UploadPart request.
const DROP_PARTS: u8 = 3;

impl FaultProxy {
    fn start(upstream_endpoint: &str) -> FaultProxy {
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::atomic::{AtomicBool, AtomicU8};
        let upstream = upstream_endpoint
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let mode = Arc::new(AtomicU8::new(PASS));
        let proxy_mode = mode.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let mode = proxy_mode.clone();
                let upstream = upstream.clone();
                std::thread::spawn(move || {
                    let Ok(mut server) = TcpStream::connect(&upstream) else {
                        return;
                    };
                    let drop_response = Arc::new(AtomicBool::new(false));
                    let (mut c_in, mut s_out) =
                        (client.try_clone().unwrap(), server.try_clone().unwrap());
                    let flag = drop_response.clone();
                    std::thread::spawn(move || {
                        use std::io::Read;
                        let mut buf = vec![0; 64 * 1024];
                        loop {
                            let n = match c_in.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            let line_end = buf[..n].iter().position(|&b| b == b'\n').unwrap_or(n);
                            let first_line = String::from_utf8_lossy(&buf[..line_end]);
                            if first_line.starts_with("PUT ")
                                && first_line.contains("partNumber=")
                                && mode.load(Ordering::SeqCst) == DROP_PARTS
                            {
                                let _ = c_in.shutdown(Shutdown::Both);
                                let _ = s_out.shutdown(Shutdown::Both);
                                return;
                            }
                            if buf[..n].starts_with(b"PUT ") {
                                if mode
                                    .compare_exchange(
                                        DROP_REQUEST,
                                        PASS,
                                        Ordering::SeqCst,
                                        Ordering::SeqCst,
                                    )
                                    .is_ok()
                                {
                                    let _ = c_in.shutdown(Shutdown::Both);
                                    let _ = s_out.shutdown(Shutdown::Both);
                                    return;
                                }
                                if mode
                                    .compare_exchange(
                                        DROP_RESPONSE,
                                        PASS,
                                        Ordering::SeqCst,
                                        Ordering::SeqCst,
                                    )
                                    .is_ok()
                                {
                                    flag.store(true, Ordering::SeqCst);
                                }
                            }
                            if s_out.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = s_out.shutdown(Shutdown::Write);
                    });
                    use std::io::Read;
                    let mut buf = vec![0; 64 * 1024];
                    loop {
                        let n = match server.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if drop_response.load(Ordering::SeqCst) {
                            break;
                        }
                        if client.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = client.shutdown(Shutdown::Both);
                    let _ = server.shutdown(Shutdown::Both);
                });
            }
        });
        FaultProxy { endpoint, mode }
    }

    fn break_next_put(&self, how: u8) {
        self.mode.store(how, Ordering::SeqCst);
    }

    fn triggered(&self) -> bool {
        self.mode.load(Ordering::SeqCst) == PASS
    }
}

fn store_behind(proxy: &FaultProxy, test: &str) -> S3Store {
    let mut c = config(test);
    c.endpoint = Some(proxy.endpoint.clone());
    c.retry_base_delay = std::time::Duration::from_millis(20);
    S3Store::new(c).unwrap()
}

#[test]
fn conditional_put_whose_answer_was_lost_is_not_a_spurious_conflict() {
    let proxy = FaultProxy::start(&server().endpoint);
    let s = store_behind(&proxy, "lost-answer");

    // If-None-Match: the server creates the object, the client never hears.
    proxy.break_next_put(DROP_RESPONSE);
    let v1 = s
        .put("r/state", b"created", PutCondition::IfAbsent)
        .unwrap();
    assert!(proxy.triggered());
    let stats = s.stats();
    assert_eq!(
        (stats.put_conditional, stats.head),
        (1, 1),
        "not sent again: HEAD found our write: {stats:?}"
    );
    assert_eq!(
        s.get("r/state").unwrap(),
        Some((b"created".to_vec(), v1.clone()))
    );

    // If-Match: same, on an update.
    proxy.break_next_put(DROP_RESPONSE);
    let v2 = s
        .put("r/state", b"updated", PutCondition::IfMatch(v1.clone()))
        .unwrap();
    assert!(proxy.triggered());
    assert_eq!(
        s.get("r/state").unwrap(),
        Some((b"updated".to_vec(), v2.clone()))
    );

    let stats = s.stats();
    assert_eq!(stats.precondition_failed, 0, "{stats:?}");
    assert!(stats.retries >= 2, "{stats:?}");
    assert_eq!(stats.errors, 0);

    // A stale writer still loses after a lost answer.
    proxy.break_next_put(DROP_RESPONSE);
    assert!(matches!(
        s.put("r/state", b"stale", PutCondition::IfMatch(v1)),
        Err(Error::PreconditionFailed { .. })
    ));
    assert_eq!(s.get("r/state").unwrap().unwrap().0, b"updated");
}

#[test]
fn conditional_put_whose_request_was_lost_is_sent_again() {
    let proxy = FaultProxy::start(&server().endpoint);
    let s = store_behind(&proxy, "lost-request");
    proxy.break_next_put(DROP_REQUEST);
    let v1 = s.put("r/state", b"one", PutCondition::IfAbsent).unwrap();
    assert!(proxy.triggered());
    proxy.break_next_put(DROP_REQUEST);
    let v2 = s.put("r/state", b"two", PutCondition::IfMatch(v1)).unwrap();
    assert!(proxy.triggered());
    assert_eq!(s.get("r/state").unwrap(), Some((b"two".to_vec(), v2)));
    let stats = s.stats();
    assert_eq!(
        (stats.precondition_failed, stats.errors),
        (0, 0),
        "{stats:?}"
    );
    assert!(
        stats.put_conditional >= 4,
        "each put was sent twice: {stats:?}"
    );

    // Plain puts and reads are retried the same way.
    proxy.break_next_put(DROP_REQUEST);
    s.put("r/plain", b"p", PutCondition::None).unwrap();
    assert!(proxy.triggered());
    assert_eq!(s.get("r/plain").unwrap().unwrap().0, b"p");
}

#[test]
fn works_when_called_from_async_code() {
    let s = store("from-async");
    s.put("k", b"v", PutCondition::None).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let got = rt.block_on(async { s.get("k").unwrap() });
    assert_eq!(got.unwrap().0, b"v");
}

#[test]
fn failed_multipart_upload_is_aborted() {
    let proxy = FaultProxy::start(&server().endpoint);
    let mut c = config("multipart-abort");
    c.endpoint = Some(proxy.endpoint.clone());
    c.retry_base_delay = std::time::Duration::from_millis(10);
    c.max_attempts = 2;
    c.multipart_threshold = 5 * MIB as u64;
    c.part_size = 5 * MIB as u64;
    let s = S3Store::new(c).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "f", &pattern(11 * MIB, 6));
    proxy.break_next_put(DROP_PARTS);
    match s.put_file("r/containers/f.bin", &path) {
        Err(Error::Backend { op, message, .. }) => {
            assert_eq!(op, "upload_part");
            assert!(message.contains("gave up after 2 attempts"), "{message}");
        }
        other => panic!("expected Backend, got {other:?}"),
    }
    let stats = s.stats();
    assert_eq!((stats.multipart_uploads, stats.multipart_completed), (1, 0));
    assert_eq!(stats.multipart_aborted, 1, "{stats:?}");
    assert_eq!(s.head("r/containers/f.bin").unwrap(), None);

    // With the network healthy again the same upload works: 3 parts.
    proxy.break_next_put(PASS);
    let etag = s.put_file("r/containers/f.bin", &path).unwrap();
    assert!(etag.0.ends_with("-3"), "{etag:?}");
    assert_eq!(
        s.head("r/containers/f.bin").unwrap().unwrap().size,
        11 * MIB as u64
    );
}
