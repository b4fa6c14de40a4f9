//! Hostile receive-pack command lists, POSTed raw: malformed pkt-lines,
//! missing capabilities, duplicate and invalid ref names, directory/file
//! conflicts, stale old values, deletes of absent refs, a very large push,
//! garbage and empty bodies. Each gets git's answer, the repository is left
//! as git would leave it, nothing panics or hangs, and the server goes on
//! serving.
//!
//! The canonical answers in the comments were recorded by running these same
//! tests against `git http-backend` (git 2.47.3): set
//! `HOSTILE_CANONICAL=PORT:ROOT` with
//! `python3 ../shared/tools/git-http-backend-server.py ROOT PORT` running; the
//! tests then print what canonical answers instead of asserting gitstow's.

mod common;

use std::path::Path;
use std::time::Instant;

use common::raw_target::*;
use common::*;

impl Setup {
    /// POSTs `body`, prints what came back, and checks it came back in time.
    fn send(&self, what: &str, body: &[u8]) -> (Response, Report) {
        let started = Instant::now();
        let resp = self.post(body);
        let took = started.elapsed();
        let r = report_status(&resp.body);
        let shown: Vec<&String> = r.refs.iter().take(4).collect();
        eprintln!(
            "[{}] {what} in {took:?}: HTTP {} body {} bytes; unpack {:?} refs {shown:?} ({} lines) progress {:?}",
            if self.canonical() { "canonical" } else { "gitstow" },
            resp.status,
            resp.body.len(),
            r.unpack,
            r.refs.len(),
            r.progress,
        );
        (resp, r)
    }

    /// Commands (old, new, ref) with `caps` on the first, an empty pack
    /// unless every command deletes.
    fn push(&self, what: &str, commands: &[(&str, &str, &str)], caps: &str) -> Report {
        let empty = PackBuilder::default().build();
        let pack = commands
            .iter()
            .any(|c| c.1 != ZERO_OID)
            .then_some(&empty[..]);
        let (resp, r) = self.send(what, &receive_pack_request(commands, caps, pack));
        assert_eq!(resp.status, 200, "{resp:?}");
        r
    }

    fn ls(&self) -> String {
        ls_remote(&self.url)
    }

    fn assert_unchanged(&self) {
        assert_eq!(self.ls(), self.before, "the repository changed");
    }

    /// The server still serves a clone and takes a good push.
    fn assert_serving(&self) {
        let dir = self.tmp.path().join("after");
        let _ = std::fs::remove_dir_all(&dir);
        git(
            self.tmp.path(),
            &["clone", "--quiet", "--mirror", &self.url, "after"],
        );
        fsck(Path::new(&dir));
        let work = self.tmp.path().join("work");
        let c = commit_files(&work, &[("later.txt", "later\n")], "later");
        git(
            &work,
            &[
                "push",
                "--quiet",
                &self.url,
                &format!("{c}:refs/heads/later"),
            ],
        );
        assert!(self.ls().contains(&format!("{c}\trefs/heads/later")));
    }
}

/// The answer to a request git's receive-pack dies on before reading a
/// command. canonical: HTTP 200, empty body (receive-pack exits with
/// "fatal: protocol error: bad line length character: ..." on stderr). gitstow:
/// HTTP 400 with the reason; either way no `ok` and nothing changed.
fn assert_dead_request(s: &Setup, resp: &Response, r: &Report) {
    if s.canonical() {
        return;
    }
    assert_eq!(resp.status, 400, "{resp:?}");
    assert!(r.unpack.is_empty() && r.refs.is_empty(), "{r:?}");
    s.assert_unchanged();
}

const CAPS: &str = "report-status delete-refs";

/// canonical, every case: HTTP 200, empty body, nothing changed — except a
/// delim after a command, which git's receive-pack takes as the end of the
/// command list: "unpack eof before pack header was fully read",
/// "ng refs/heads/new unpacker error" (gitstow: HTTP 400, unexpected delim).
#[test]
fn malformed_pkt_line_lengths() {
    let s = setup("pkt-lengths");
    let cmd = format!("{} {} refs/heads/new\0{CAPS}", ZERO_OID, s.c2);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "non-hex length",
            [b"zz0a".as_slice(), cmd.as_bytes(), FLUSH].concat(),
        ),
        (
            "hex with a sign",
            [b"-0a0".as_slice(), cmd.as_bytes(), FLUSH].concat(),
        ),
        (
            "0001 where data belongs",
            [b"0001".as_slice(), &pkt(cmd.as_bytes()), FLUSH].concat(),
        ),
        (
            "0002 where data belongs",
            [b"0002".as_slice(), &pkt(cmd.as_bytes()), FLUSH].concat(),
        ),
        (
            "0003",
            [b"0003".as_slice(), &pkt(cmd.as_bytes()), FLUSH].concat(),
        ),
        (
            "length longer than the body",
            [b"0fff".as_slice(), cmd.as_bytes()].concat(),
        ),
        (
            "length past the maximum",
            [b"ffff".as_slice(), cmd.as_bytes()].concat(),
        ),
        (
            "cut inside a length",
            [pkt(cmd.as_bytes()), b"00".to_vec()].concat(),
        ),
        ("no flush", pkt(cmd.as_bytes())),
    ];
    // a delim after a valid command
    cases.push((
        "delim after a command",
        [pkt(cmd.as_bytes()), b"0001".to_vec(), FLUSH.to_vec()].concat(),
    ));
    for (what, body) in &cases {
        let (resp, r) = s.send(what, body);
        assert_dead_request(&s, &resp, &r);
    }
    s.assert_unchanged();
    s.assert_serving();
}

/// canonical: HTTP 200 with an empty body — no capabilities means no
/// report-status — and the ref IS created (git reads capabilities only from
/// the first line; without them the push is simply not reported).
#[test]
fn first_command_without_capabilities() {
    let s = setup("no-caps");
    let line = format!("{ZERO_OID} {} refs/heads/nocaps", s.c2);
    let mut body = pkt(line.as_bytes());
    body.extend_from_slice(FLUSH);
    body.extend(PackBuilder::default().build());
    let (resp, r) = s.send("no NUL on the first line", &body);
    if !s.canonical() {
        assert_eq!(resp.status, 200, "{resp:?}");
        assert!(resp.body.is_empty(), "{resp:?} {r:?}");
        assert!(s.ls().contains(&format!("{}\trefs/heads/nocaps", s.c2)));
    }
    s.assert_serving();
}

/// Pkt-lines after the flush that ends the command list: git reads them as
/// the start of the pack. canonical:
///   unpack protocol error (pack signature mismatch detected)   [create]
///   ng refs/heads/after unpacker error
/// and for a delete-only push (no pack read), the extra bytes are ignored:
///   unpack ok / ok refs/heads/gone
#[test]
fn commands_after_the_flush() {
    let s = setup("after-flush");
    let first = format!("{ZERO_OID} {} refs/heads/after\0{CAPS}", s.c2);
    let second = format!("{ZERO_OID} {} refs/heads/sneaky", s.c2);
    let mut body = pkt(first.as_bytes());
    body.extend_from_slice(FLUSH);
    body.extend(pkt(second.as_bytes()));
    body.extend_from_slice(FLUSH);
    body.extend(PackBuilder::default().build());
    let (resp, r) = s.send("a create, then a command after the flush", &body);
    if !s.canonical() {
        assert_eq!(resp.status, 200);
        assert_eq!(
            r.unpack,
            "protocol error (pack signature mismatch detected)"
        );
        assert_eq!(r.refs, ["ng refs/heads/after unpacker error"]);
        s.assert_unchanged();
    }
    // delete-only: the bytes after the flush are not read
    let gone = format!("{ZERO_OID} {ZERO_OID} refs/heads/gone\0{CAPS}");
    let mut body = pkt(gone.as_bytes());
    body.extend_from_slice(FLUSH);
    body.extend(pkt(second.as_bytes()));
    body.extend_from_slice(FLUSH);
    let (_, r) = s.send("a delete, then a command after the flush", &body);
    if !s.canonical() {
        assert_eq!(r.unpack, "ok");
        assert_eq!(r.refs, ["ok refs/heads/gone"]);
        s.assert_unchanged();
    }
    s.assert_serving();
}

/// The same ref twice in one push. git applies non-atomic commands one by
/// one, so the second sees what the first did. canonical:
///   two creates:            ok refs/heads/dup / ng refs/heads/dup failed to update ref
///   two updates c2->c1:     ok refs/heads/main / ng refs/heads/main failed to update ref
///   an update then its undo (c2->c1, c1->c2): ok / ok (main ends at c2)
///   two creates, --atomic:  ng refs/heads/dup2 atomic transaction failed (both)
#[test]
fn duplicate_ref_names() {
    let s = setup("dup");
    let r = s.push(
        "two creates of one ref",
        &[
            (ZERO_OID, &s.c1, "refs/heads/dup"),
            (ZERO_OID, &s.c2, "refs/heads/dup"),
        ],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.unpack, "ok");
        assert_eq!(
            r.refs,
            [
                "ok refs/heads/dup",
                "ng refs/heads/dup failed to update ref"
            ]
        );
        assert!(s.ls().contains(&format!("{}\trefs/heads/dup", s.c1)));
    }
    let r = s.push(
        "two updates of main",
        &[
            (&s.c2, &s.c1, "refs/heads/main"),
            (&s.c2, &s.c1, "refs/heads/main"),
        ],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(
            r.refs,
            [
                "ok refs/heads/main",
                "ng refs/heads/main failed to update ref"
            ]
        );
    }
    let r = s.push(
        "an update and its undo",
        &[
            (&s.c1, &s.c2, "refs/heads/main"),
            (&s.c2, &s.c1, "refs/heads/main"),
        ],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.refs, ["ok refs/heads/main", "ok refs/heads/main"]);
        assert!(s.ls().contains(&format!("{}\trefs/heads/main", s.c1)));
    }
    let r = s.push(
        "two creates of one ref, atomic",
        &[
            (ZERO_OID, &s.c1, "refs/heads/dup2"),
            (ZERO_OID, &s.c2, "refs/heads/dup2"),
        ],
        "report-status atomic",
    );
    if !s.canonical() {
        assert_eq!(
            r.refs,
            [
                "ng refs/heads/dup2 atomic transaction failed",
                "ng refs/heads/dup2 atomic transaction failed"
            ]
        );
        assert!(!s.ls().contains("refs/heads/dup2"));
    }
    s.assert_serving();
}

/// Every name below: canonical "unpack ok", "ng <name> funny refname"
/// (control characters included, echoed raw).
#[test]
fn invalid_ref_names() {
    let s = setup("names");
    let names = [
        "refs/heads/a..b",
        "refs/heads/a@{b",
        "refs/heads/x.lock",
        "refs/heads/with space",
        "refs/heads/ctl\u{1}x",
        "refs/heads/del\u{7f}x",
        "refs/heads/trailing/",
        "refs/heads/trailing.",
        "refs/heads//double",
        "refs/heads/.hidden",
        "refs/heads/a:b",
        "refs/heads/a?b",
        "refs/heads/a*b",
        "refs/heads/a[b",
        "refs/heads/a\\b",
        "refs/heads/a^b",
        "refs/heads/a~b",
        "HEAD",
        "main",
        "refs/foo",
        "refs",
        "refs/",
        "heads/main",
        "",
    ];
    for name in names {
        let r = s.push(
            &format!("create {name:?}"),
            &[(ZERO_OID, &s.c2, name)],
            CAPS,
        );
        if !s.canonical() {
            assert_eq!(r.unpack, "ok", "{name:?}: {r:?}");
            assert_eq!(r.refs, [format!("ng {name} funny refname")], "{name:?}");
        }
    }
    // deletes: canonical checks names less strictly (one level is fine):
    //   ng refs/heads/a..b funny refname / ng HEAD funny refname /
    //   ng refs/foo failed to update ref (valid to delete, but absent)
    for (name, why) in [
        ("refs/heads/a..b", "funny refname"),
        ("HEAD", "funny refname"),
        ("refs/foo", "failed to update ref"),
    ] {
        let r = s.push(
            &format!("delete {name:?}"),
            &[(&s.c2, ZERO_OID, name)],
            CAPS,
        );
        if !s.canonical() {
            assert_eq!(r.unpack, "ok");
            assert_eq!(r.refs, [format!("ng {name} {why}")]);
        }
    }
    s.assert_unchanged();
    // canonical: "refs/heads/@" alone is a valid name: ok refs/heads/@
    let r = s.push(
        "create refs/heads/@",
        &[(ZERO_OID, &s.c2, "refs/heads/@")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.refs, ["ok refs/heads/@"]);
    }
    s.assert_serving();
}

/// Directory/file conflicts. canonical (non-atomic, commands applied in order):
///   main/sub while main exists:      ng refs/heads/main/sub failed to update ref
///   x while x/y exists:              ng refs/heads/x failed to update ref
///   p then p/q in one push:          ok refs/heads/p / ng refs/heads/p/q failed to update ref
///   delete x/y then create x:        ok refs/heads/x/y / ok refs/heads/x
///   create y then delete y/z:        ng refs/heads/y failed to update ref / ok refs/heads/y/z
#[test]
fn directory_file_conflicts() {
    let s = setup("df");
    let r = s.push(
        "create x/y and y/z",
        &[
            (ZERO_OID, &s.c2, "refs/heads/x/y"),
            (ZERO_OID, &s.c2, "refs/heads/y/z"),
        ],
        CAPS,
    );
    assert_eq!(r.refs, ["ok refs/heads/x/y", "ok refs/heads/y/z"]);
    let before = s.ls();
    let r = s.push(
        "main/sub while main exists",
        &[(ZERO_OID, &s.c2, "refs/heads/main/sub")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.unpack, "ok");
        assert_eq!(r.refs, ["ng refs/heads/main/sub failed to update ref"]);
    }
    let r = s.push(
        "x while x/y exists",
        &[(ZERO_OID, &s.c2, "refs/heads/x")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.refs, ["ng refs/heads/x failed to update ref"]);
    }
    assert_eq!(s.ls(), before);
    let r = s.push(
        "p and p/q in one push",
        &[
            (ZERO_OID, &s.c2, "refs/heads/p"),
            (ZERO_OID, &s.c2, "refs/heads/p/q"),
        ],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(
            r.refs,
            ["ok refs/heads/p", "ng refs/heads/p/q failed to update ref"]
        );
    }
    let r = s.push(
        "delete x/y and create x in one push",
        &[
            (&s.c2, ZERO_OID, "refs/heads/x/y"),
            (ZERO_OID, &s.c2, "refs/heads/x"),
        ],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.refs, ["ok refs/heads/x/y", "ok refs/heads/x"]);
    }
    let r = s.push(
        "create y then delete y/z in one push",
        &[
            (ZERO_OID, &s.c2, "refs/heads/y"),
            (&s.c2, ZERO_OID, "refs/heads/y/z"),
        ],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(
            r.refs,
            ["ng refs/heads/y failed to update ref", "ok refs/heads/y/z"]
        );
    }
    s.assert_serving();
}

/// canonical: every one "unpack ok", "ng <ref> failed to update ref".
#[test]
fn old_value_mismatch() {
    let s = setup("stale");
    let r = s.push(
        "update main from c1",
        &[(&s.c1, &s.c2, "refs/heads/main")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.unpack, "ok");
        assert_eq!(r.refs, ["ng refs/heads/main failed to update ref"]);
    }
    let r = s.push(
        "create main (exists)",
        &[(ZERO_OID, &s.c1, "refs/heads/main")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.refs, ["ng refs/heads/main failed to update ref"]);
    }
    // canonical: ng refs/heads/main deletion of the current branch prohibited
    let r = s.push(
        "delete main from c1",
        &[(&s.c1, ZERO_OID, "refs/heads/main")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(
            r.refs,
            ["ng refs/heads/main deletion of the current branch prohibited"]
        );
    }
    let r = s.push(
        "update an absent ref",
        &[(&s.c1, &s.c2, "refs/heads/absent")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.refs, ["ng refs/heads/absent failed to update ref"]);
    }
    s.assert_unchanged();
    s.assert_serving();
}

/// canonical: zero old value: "ok refs/heads/nope"; non-zero old value:
/// "ng refs/heads/nope failed to update ref".
#[test]
fn deletes_of_absent_refs() {
    let s = setup("absent");
    let r = s.push(
        "delete absent, zero old",
        &[(ZERO_OID, ZERO_OID, "refs/heads/nope")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.unpack, "ok");
        assert_eq!(r.refs, ["ok refs/heads/nope"]);
    }
    let r = s.push(
        "delete absent, non-zero old",
        &[(&s.c1, ZERO_OID, "refs/heads/nope")],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.unpack, "ok");
        assert_eq!(r.refs, ["ng refs/heads/nope failed to update ref"]);
    }
    // canonical does not enforce its own delete-refs capability: ok refs/heads/nope
    let r = s.push(
        "delete absent without delete-refs",
        &[(ZERO_OID, ZERO_OID, "refs/heads/nope")],
        "report-status",
    );
    if !s.canonical() {
        assert_eq!(r.refs, ["ok refs/heads/nope"]);
    }
    s.assert_unchanged();
    s.assert_serving();
}

/// 20,000 ref creations in one push: all land. canonical: "unpack ok" and
/// 20,000 "ok" lines, in about 2.3 s.
#[test]
fn twenty_thousand_refs() {
    let s = setup("many");
    let names: Vec<String> = (0..20_000)
        .map(|i| format!("refs/heads/many/b{i:05}"))
        .collect();
    let commands: Vec<(&str, &str, &str)> = names
        .iter()
        .map(|n| (ZERO_OID, s.c2.as_str(), n.as_str()))
        .collect();
    let started = Instant::now();
    let r = s.push("20,000 creates", &commands, "report-status");
    eprintln!("20,000 creates took {:?}", started.elapsed());
    assert_eq!(r.unpack, "ok");
    assert_eq!(r.refs.len(), 20_000);
    assert!(
        r.refs.iter().all(|l| l.starts_with("ok ")),
        "{:?}",
        &r.refs[..3]
    );
    let ls = s.ls();
    assert_eq!(ls.lines().count(), 20_002, "HEAD + main + 20,000");
    s.assert_serving();
}

/// canonical: HTTP 200, empty body for random bytes, text, an empty body
/// and a lone flush.
#[test]
fn garbage_and_empty_bodies() {
    let s = setup("garbage");
    let mut noise = Vec::new();
    let mut x = 0x1234_5678u32;
    for _ in 0..100_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let (resp, r) = s.send("random bytes", &noise);
    assert_dead_request(&s, &resp, &r);
    let (resp, r) = s.send("text", b"hello, this is not a pkt-line stream\n");
    assert_dead_request(&s, &resp, &r);
    // canonical: HTTP 200, empty body; nothing changes
    let (resp, r) = s.send("empty body", b"");
    if !s.canonical() {
        assert_eq!(resp.status, 200, "{resp:?}");
        assert!(resp.body.is_empty() && r.refs.is_empty(), "{resp:?}");
    }
    let (resp, _) = s.send("flush only", FLUSH);
    if !s.canonical() {
        assert_eq!(resp.status, 200, "{resp:?}");
        assert!(resp.body.is_empty(), "{resp:?}");
    }
    s.assert_unchanged();
    s.assert_serving();
}

/// Hardening, finding 3: ref names where git's files backend cannot lock
/// them (a component over 255 bytes, a name over 4,096) are refused per
/// ref in git's words; 1,000 names of 2,000 components each are taken in
/// one push (the directory/file check walks each name once: this took 46 s
/// of CPU at 32,000 components, walking every prefix), and a deep name
/// under a deep ref still conflicts.
/// canonical: "ng <ref> failed to update ref" for the first two (git:
/// "File name too long").
#[test]
fn long_and_deep_ref_names() {
    let s = setup("long");
    let wide = format!("refs/heads/{}", "w".repeat(256));
    let long = format!("refs/heads/{}", "abc/".repeat(1_100)) + "z";
    let r = s.push(
        "a component of 256 bytes, a name of 4,412",
        &[(ZERO_OID, &s.c2, &wide), (ZERO_OID, &s.c2, &long)],
        CAPS,
    );
    if !s.canonical() {
        assert_eq!(r.unpack, "ok");
        assert_eq!(
            r.refs,
            [
                format!("ng {wide} failed to update ref"),
                format!("ng {long} failed to update ref")
            ]
        );
        s.assert_unchanged();
    }
    let stem = format!("refs/heads/{}", "a/".repeat(2_000));
    let names: Vec<String> = (0..1_000).map(|i| format!("{stem}n{i}")).collect();
    let commands: Vec<(&str, &str, &str)> = names
        .iter()
        .map(|n| (ZERO_OID, s.c2.as_str(), n.as_str()))
        .collect();
    let r = s.push(
        "1,000 names of 2,000 components",
        &commands,
        "report-status",
    );
    assert_eq!(r.unpack, "ok");
    assert!(
        r.refs.iter().all(|l| l.starts_with("ok ")),
        "{:?}",
        &r.refs[..2]
    );
    assert_eq!(s.ls().lines().count(), 1_002, "HEAD + main + 1,000");
    let under = format!("{stem}n7/x");
    let r = s.push(
        "a name under a deep ref",
        &[(ZERO_OID, &s.c2, &under)],
        CAPS,
    );
    assert_eq!(r.refs, [format!("ng {under} failed to update ref")]);
}

/// Hardening, finding 4: `--max-refs` bounds the refs of a repository.
/// Creations that would pass it are refused per ref; updates and
/// deletions never are, and a deletion makes room.
#[test]
fn the_ref_limit_refuses_creations_beyond_it() {
    let s = setup_with("limited", &["--max-refs", "3"]);
    if s.canonical() {
        return;
    }
    let r = s.push(
        "3 creates next to main",
        &[
            (ZERO_OID, &s.c2, "refs/heads/a"),
            (ZERO_OID, &s.c2, "refs/heads/b"),
            (ZERO_OID, &s.c2, "refs/heads/c"),
        ],
        CAPS,
    );
    assert_eq!(
        r.refs,
        [
            "ng refs/heads/a too many refs: this repository may hold at most 3",
            "ng refs/heads/b too many refs: this repository may hold at most 3",
            "ng refs/heads/c too many refs: this repository may hold at most 3",
        ]
    );
    s.assert_unchanged();
    let r = s.push(
        "2 creates",
        &[
            (ZERO_OID, &s.c2, "refs/heads/a"),
            (ZERO_OID, &s.c2, "refs/heads/b"),
        ],
        CAPS,
    );
    assert_eq!(r.refs, ["ok refs/heads/a", "ok refs/heads/b"]);
    let r = s.push(
        "an update, and a create in place of a delete",
        &[
            (&s.c2, &s.c1, "refs/heads/main"),
            (&s.c2, ZERO_OID, "refs/heads/a"),
            (ZERO_OID, &s.c2, "refs/heads/c"),
        ],
        CAPS,
    );
    assert_eq!(
        r.refs,
        ["ok refs/heads/main", "ok refs/heads/a", "ok refs/heads/c"]
    );
}
