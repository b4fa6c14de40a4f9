//! Connection floods: a server capped at `--max-connections` (and per
//! client address), holding fewer open files than the attack has
//! connections, keeps answering `git ls-remote` and `git clone` from another
//! address within seconds while 1,500 idle connections and 100 trickling
//! ones (a header byte, or a body byte, a second) are thrown at it; the
//! connections over a cap get `503` at once, and the idle and trickling
//! ones are closed by `--header-timeout`, `--idle-timeout` and
//! `--min-body-rate`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use socket2::{Domain, Socket, Type};

/// The flood test's `--header-timeout`: an idle connection holds its slot
/// this long.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to `port` from the loopback address `from` (127.0.0.x).
fn connect_from(from: &str, port: u16) -> std::io::Result<TcpStream> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&format!("{from}:0").parse::<SocketAddr>().unwrap().into())?;
    s.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(s.into())
}

/// Whether the server has closed `s` (EOF or reset) within `within`,
/// reading and dropping whatever it sent first (a 503 or a 408).
fn closed_by_server(s: &mut TcpStream, within: Duration) -> (bool, String) {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (false, String::from_utf8_lossy(&got).into_owned());
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (true, String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (true, String::from_utf8_lossy(&got).into_owned()),
        }
    }
}

#[test]
fn a_flood_of_idle_and_trickling_connections_does_not_starve_git() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&[
        "--max-connections",
        "600",
        "--max-connections-per-address",
        "200",
        "--header-timeout",
        &HEADER_TIMEOUT.as_secs().to_string(),
        "--idle-timeout",
        "3",
        "--min-body-rate",
        "1000",
    ]);
    let port = server.port();
    // Fewer open files than the flood has connections.
    let pid = server.pid().unwrap().to_string();
    let lowered = std::process::Command::new("prlimit")
        .args(["--pid", &pid, "--nofile=900:900"])
        .status()
        .expect("run prlimit");
    assert!(lowered.success());

    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a", "1"), ("b", "2")], "one");
    let url = server.url("flooded");
    git(&work, &["push", "--quiet", &url, "HEAD:refs/heads/main"]);

    // 1,500 idle connections from 127.0.0.2 and 127.0.0.3 (the per-address
    // cap admits 200 from each; the rest get 503 at once).
    let mut idle = Vec::new();
    for i in 0..1500 {
        let from = if i % 2 == 0 { "127.0.0.2" } else { "127.0.0.3" };
        idle.push(connect_from(from, port).expect("connect"));
    }
    // 100 trickling from 127.0.0.4: half send their header a byte a
    // second, half a valid header then their body a byte a second.
    let mut trickling = Vec::new();
    for i in 0..100 {
        let mut s = connect_from("127.0.0.4", port).unwrap();
        if i % 2 == 1 {
            s.write_all(b"POST /flooded.git/git-upload-pack HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: 100000\r\n\r\n")
                .unwrap();
        }
        trickling.push(s);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickler = {
        let stop = stop.clone();
        let mut socks: Vec<TcpStream> = trickling.iter().map(|s| s.try_clone().unwrap()).collect();
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && n < 60 {
                for s in &mut socks {
                    let _ = s.write_all(b"P");
                }
                std::thread::sleep(Duration::from_secs(1));
                n += 1;
            }
        })
    };

    // git still gets answers while the flood holds: before the header
    // timeout (10 s) frees a slot the flood took.
    let started = Instant::now();
    assert!(ls_remote(&url).contains("refs/heads/main"));
    let clone = tmp.path().join("clone");
    git(
        tmp.path(),
        &["clone", "--quiet", &url, clone.to_str().unwrap()],
    );
    fsck(&clone);
    let took = started.elapsed();
    assert!(
        took < HEADER_TIMEOUT,
        "ls-remote and clone took {took:?}: served only once the flood's connections timed out"
    );

    // Every idle connection is closed: at once (503) or by the header timeout.
    let mut refused = 0;
    for s in &mut idle {
        let (closed, said) = closed_by_server(s, Duration::from_secs(15));
        assert!(closed, "an idle connection is still open; it got {said:?}");
        if said.starts_with("HTTP/1.1 503") {
            assert!(said.contains("Retry-After: 5"), "{said}");
            refused += 1;
        }
    }
    // 400 fit under the per-address caps; the rest are refused unless the
    // header timeout (10 s) freed slots before they came.
    assert!(
        (900..=1100).contains(&refused),
        "{refused} of 1,500 idle connections were refused at once"
    );
    // The trickling ones too, while they still trickle.
    for (i, s) in trickling.iter_mut().enumerate() {
        let (closed, said) = closed_by_server(s, Duration::from_secs(15));
        assert!(
            closed,
            "trickling connection {i} is still open; it got {said:?}"
        );
        if i % 2 == 1 {
            assert!(said.starts_with("HTTP/1.1 408"), "{said}");
            assert!(said.contains("slower than 1000 bytes/s"), "{said}");
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    trickler.join().unwrap();

    let metrics = http(port, "GET", "/metrics", &[], &[]).text();
    let refused_metric = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gitstow_connections_refused_total "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(
        refused_metric >= refused as u64,
        "{refused_metric} < {refused}"
    );
    assert!(ls_remote(&url).contains("refs/heads/main"));
}
