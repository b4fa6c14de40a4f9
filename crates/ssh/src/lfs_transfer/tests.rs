use super::*;
use gitstow_lfs::objects::Hashing;
use gitstow_lfs::Oid;
use gitstow_protocol::pktline::{Packet, MAX_DATA_LEN};

/// The client's side of a session: pkt-lines written as git-lfs writes
/// them.
#[derive(Default)]
struct Client(Vec<u8>);

impl Client {
    fn text(mut self, line: &str) -> Self {
        pktline::write_text(&mut self.0, line).unwrap();
        self
    }
    fn data(mut self, bytes: &[u8]) -> Self {
        for piece in bytes.chunks(MAX_DATA_LEN) {
            pktline::write_data(&mut self.0, piece).unwrap();
        }
        self
    }
    fn delim(mut self) -> Self {
        pktline::write_delim(&mut self.0).unwrap();
        self
    }
    fn flush(mut self) -> Self {
        pktline::write_flush(&mut self.0).unwrap();
        self
    }
}

/// The server's answers, as text: `|` for a delim-pkt, `.` for a
/// flush-pkt, binary data as `<N bytes>`.
fn answers(bytes: &[u8]) -> Vec<String> {
    let mut r = PktReader::new(bytes);
    let mut out = Vec::new();
    while let Some(p) = r.read_packet().unwrap() {
        out.push(match p {
            Packet::Flush => ".".into(),
            Packet::Delim => "|".into(),
            Packet::ResponseEnd => "0002".into(),
            Packet::Data(d) => match std::str::from_utf8(&d) {
                Ok(t) if t.ends_with('\n') && t.len() < 200 => t.trim_end().to_owned(),
                _ => format!("<{} bytes>", d.len()),
            },
        });
    }
    out
}

fn oid_of(bytes: &[u8]) -> Oid {
    let mut h = Hashing::new(Vec::new());
    h.write_all(bytes).unwrap();
    h.finish().1 .0
}

fn session<'a>(store: &'a dyn ObjectStore, upload: bool, owner: &str) -> Session<'a> {
    Session {
        store,
        repo: "org/app",
        upload,
        admin: false,
        owner: owner.into(),
        max_size: 1 << 20,
        staging_dir: None,
        now: || 1_800_000_000,
    }
}

fn run(session: &Session<'_>, client: Client) -> (Result<(), Ended>, Vec<String>) {
    let mut out = Vec::new();
    let r = session.serve(&client.0[..], &mut out);
    (r, answers(&out))
}

#[test]
fn an_upload_then_a_download_as_git_lfs_runs_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = gitstow_store::FsStore::new(dir.path()).unwrap();
    let mut bytes = b"large file content\n".repeat(5000);
    bytes.push(b'!');
    let oid = oid_of(&bytes);
    let size = bytes.len();
    let half = size / 2;
    let client = Client::default()
        .text("version 1")
        .flush()
        .text("batch")
        .text("transfer=ssh")
        .text("hash-algo=sha256")
        .text("refname=refs/heads/main")
        .delim()
        .text(&format!("{oid} {size}"))
        .flush()
        // wrong bytes first: refused, nothing owned
        .text(&format!("put-object {oid}"))
        .text(&format!("size={size}"))
        .delim()
        .data(&bytes[..half])
        .flush()
        .text(&format!("verify-object {oid}"))
        .text(&format!("size={size}"))
        .flush()
        .text(&format!("put-object {oid}"))
        .text(&format!("size={size}"))
        .delim()
        .data(&bytes[..half])
        .data(&bytes[half..])
        .flush()
        .text(&format!("verify-object {oid}"))
        .text(&format!("size={size}"))
        .flush()
        .text("quit")
        .flush();
    let (r, got) = run(&session(&store, true, "dev"), client);
    r.unwrap();
    assert_eq!(
        got,
        [
            "version=1",
            "locking",
            ".",
            "status 200",
            ".",
            "status 200",
            "hash-algo=sha256",
            "|",
            &format!("{oid} {size} upload"),
            ".",
            "status 422",
            "|",
            &format!("expected {size} bytes, received {half}"),
            ".",
            "status 404",
            "|",
            &format!("object {oid} not found"),
            ".",
            "status 200",
            ".",
            "status 200",
            ".",
            "status 200",
            ".",
        ]
    );
    // Now owned: a second batch says noop; a download session gets it.
    let (_, got) = run(
        &session(&store, false, "reader"),
        Client::default()
            .text("version 1")
            .flush()
            .text("batch")
            .delim()
            .text(&format!("{oid} {size}"))
            .text(&format!("{} 5", oid_of(b"other")))
            .flush()
            .text(&format!("get-object {oid}"))
            .flush()
            .text(&format!("put-object {oid}"))
            .text(&format!("size={size}"))
            .delim()
            .data(&bytes)
            .flush(),
    );
    let pieces = size.div_ceil(MAX_DATA_LEN);
    let mut want: Vec<String> = [
        "version=1",
        "locking",
        ".",
        "status 200",
        ".",
        "status 200",
        "hash-algo=sha256",
        "|",
    ]
    .map(String::from)
    .to_vec();
    want.push(format!("{oid} {size} download"));
    want.push(format!("{} 5 noop", oid_of(b"other")));
    want.extend([".", "status 200"].map(String::from));
    want.push(format!("size={size}"));
    want.push("|".into());
    assert_eq!(got[..want.len()], want[..]);
    let data: Vec<&String> = got[want.len()..want.len() + pieces].iter().collect();
    assert!(data.iter().all(|d| d.starts_with('<')), "{data:?}");
    assert_eq!(
        got[want.len() + pieces..],
        [".", "status 403", "|", "this session only downloads", "."]
    );
}

#[test]
fn locks_are_taken_listed_and_removed_by_their_owner() {
    let dir = tempfile::tempdir().unwrap();
    let store = gitstow_store::FsStore::new(dir.path()).unwrap();
    let lock = |s: &Session<'_>, path: &str| {
        run(
            s,
            Client::default()
                .text("version 1")
                .flush()
                .text("lock")
                .text(&format!("path={path}"))
                .text("refname=refs/heads/main")
                .delim()
                .flush(),
        )
        .1
    };
    let dev = session(&store, true, "dev");
    let got = lock(&dev, "assets/a.psd");
    assert_eq!(got[5], "status 201", "{got:?}");
    let id = got[6].strip_prefix("id=").unwrap().to_owned();
    assert_eq!(
        got[7..11],
        [
            "path=assets/a.psd".to_owned(),
            "locked-at=2027-01-15T08:00:00Z".to_owned(),
            "ownername=dev".to_owned(),
            ".".to_owned()
        ]
    );
    // another owner: 409 and the holder
    let got = lock(&session(&store, true, "eve"), "assets/a.psd");
    assert_eq!(got[5], "status 409", "{got:?}");
    assert!(got.contains(&"ownername=dev".to_owned()), "{got:?}");
    // a download session may list but not lock
    let reader = session(&store, false, "reader");
    assert_eq!(
        lock(&reader, "b")[5..8],
        ["status 403", "|", "locking needs write access"]
    );
    let (_, got) = run(
        &reader,
        Client::default()
            .text("version 1")
            .flush()
            .text("list-lock")
            .text("limit=10")
            .flush(),
    );
    assert_eq!(
        got[5..],
        [
            "status 200".to_owned(),
            "|".to_owned(),
            format!("lock {id}"),
            format!("path {id} assets/a.psd"),
            format!("locked-at {id} 2027-01-15T08:00:00Z"),
            format!("ownername {id} dev"),
            format!("owner {id} theirs"),
            ".".to_owned()
        ]
    );
    // eve cannot unlock it, not even by force without admin; dev can
    let unlock = |s: &Session<'_>, force: bool| {
        let mut c = Client::default()
            .text("version 1")
            .flush()
            .text(&format!("unlock {id}"));
        if force {
            c = c.text("force=true");
        }
        run(s, c.flush()).1
    };
    assert_eq!(
        unlock(&session(&store, true, "eve"), false)[5],
        "status 403"
    );
    assert_eq!(unlock(&session(&store, true, "eve"), true)[5], "status 403");
    assert_eq!(unlock(&dev, false)[5], "status 200");
    assert_eq!(unlock(&dev, false)[5], "status 404");
}

#[test]
fn a_broken_session_ends_with_a_protocol_error_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = gitstow_store::FsStore::new(dir.path()).unwrap();
    let dev = session(&store, true, "dev");
    // a command before the version
    let (r, _) = run(&dev, Client::default().text("batch").flush());
    assert!(matches!(r, Err(Ended::Protocol(_))), "{r:?}");
    // too many arguments
    let mut c = Client::default().text("version 1").flush().text("lock");
    for i in 0..=MAX_ARGS {
        c = c.text(&format!("a{i}=b"));
    }
    let (r, _) = run(&dev, c.flush());
    assert!(matches!(r, Err(Ended::Protocol(_))), "{r:?}");
    // hung up inside a message
    let (r, _) = run(
        &dev,
        Client::default().text("version 1").flush().text("lock"),
    );
    assert!(matches!(r, Err(Ended::Protocol(_))), "{r:?}");
    // an upload over the size cap is read and refused
    let big = vec![7u8; (1 << 20) + 10];
    let mut c = Client::default()
        .text("version 1")
        .flush()
        .text(&format!("put-object {}", oid_of(&big)))
        .text(&format!("size={}", big.len()))
        .delim();
    c = c.data(&big);
    let (r, got) = run(&dev, c.flush().text("quit").flush());
    r.unwrap();
    assert_eq!(got[5..7], ["status 413", "|"]);
    assert_eq!(got[got.len() - 2..], ["status 200", "."]);
    // an unknown hash algorithm, an unknown command
    let (_, got) = run(
        &dev,
        Client::default()
            .text("version 1")
            .flush()
            .text("batch")
            .text("hash-algo=sha1")
            .delim()
            .flush()
            .text("frobnicate")
            .flush(),
    );
    assert_eq!(got[5], "status 409");
    assert_eq!(got[9..11], ["status 400", "|"]);
    assert!(store.list("").unwrap().is_empty(), "nothing stored");
}
