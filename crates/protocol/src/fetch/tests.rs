use super::*;
use crate::pktline::PktReader;
use crate::pktline::{write_data, write_delim, write_flush, write_response_end};
use gix_hash::ObjectId;

const A: &str = "a8865dad5bf23af83184dd124133bdab7c6646eb";
const B: &str = "026a191405ac2b3ef86990d0ef907000cd1df7a5";
const C: &str = "cd2c4c5c6240a5bf7c20d6d4bf0e20abb37d8a49";

fn oid(hex: &str) -> ObjectId {
    ObjectId::from_hex(hex.as_bytes()).unwrap()
}

fn body(lines: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        match *line {
            "F" => write_flush(&mut out).unwrap(),
            "D" => write_delim(&mut out).unwrap(),
            "R" => write_response_end(&mut out).unwrap(),
            l => write_data(&mut out, format!("{l}\n").as_bytes()).unwrap(),
        }
    }
    out
}

fn v0(lines: &[&str], max: usize) -> Result<UploadRequestV0, FetchError> {
    read_upload_request_v0(&mut PktReader::new(&body(lines)[..]), max)
}

fn v2(lines: &[&str], max: usize) -> Result<Option<CommandRequestV2>, FetchError> {
    read_command_v2(&mut PktReader::new(&body(lines)[..]), max)
}

fn args(lines: &[&str]) -> Result<FetchArgsV2, FetchError> {
    FetchArgsV2::parse(lines.iter().map(|l| l.as_bytes()))
}

#[test]
fn v0_request_with_rounds_and_done() {
    let first = format!("want {B} multi_ack_detailed no-done side-band-64k thin-pack ofs-delta deepen-relative agent=git/2.47.3");
    let req = v0(
        &[
            &first,
            &format!("want {C}"),
            &format!("shallow {A}"),
            "deepen 3",
            "filter blob:none",
            "F",
            &format!("have {A}"),
            "F",
            &format!("have {C}"),
            &format!("have {B}"),
            "F",
            "done",
            "this is not read",
        ],
        100,
    )
    .unwrap();
    assert_eq!(req.wants, vec![oid(B), oid(C)]);
    assert!(req.capabilities.contains("multi_ack_detailed"));
    assert!(req.capabilities.contains("side-band-64k"));
    assert_eq!(req.capabilities.value("agent"), Some("git/2.47.3"));
    assert_eq!(req.haves, vec![oid(A), oid(C), oid(B)]);
    assert_eq!(req.shallows, vec![oid(A)]);
    assert_eq!(req.deepen, Some(3));
    assert!(req.deepen_relative);
    assert_eq!(req.filter.as_deref(), Some("blob:none"));
    assert!(req.done);
}

#[test]
fn v0_request_ending_without_done() {
    let want = format!("want {B} side-band-64k");
    let req = v0(&[&want, "F", &format!("have {A}"), "F"], 100).unwrap();
    assert!(!req.done);
    assert_eq!(req.haves, vec![oid(A)]);
    // want list only (shallow first request)
    let req = v0(
        &[
            &want,
            "deepen-since 1700000000",
            "deepen-not refs/heads/old",
            "F",
        ],
        100,
    )
    .unwrap();
    assert_eq!(req.deepen_since, Some(1_700_000_000));
    assert_eq!(req.deepen_not, vec!["refs/heads/old".to_owned()]);
    assert!(req.haves.is_empty() && !req.done && !req.deepen_relative);
    // done without haves (clone)
    let req = v0(&[&want, "F", "done"], 100).unwrap();
    assert!(req.done && req.haves.is_empty());
    // done without a flush after the haves
    let req = v0(&[&want, "F", &format!("have {A}"), "done"], 100).unwrap();
    assert!(req.done);
}

#[test]
fn v0_empty_requests() {
    assert_eq!(v0(&[], 10).unwrap(), UploadRequestV0::default());
    assert_eq!(v0(&["F"], 10).unwrap(), UploadRequestV0::default());
    // no wants: the rest is not read
    let req = v0(&["F", "garbage"], 10).unwrap();
    assert!(req.wants.is_empty());
}

#[test]
fn v0_errors() {
    let want = format!("want {B}");
    let e = v0(&["wants", "F"], 10).unwrap_err();
    assert!(
        matches!(e, FetchError::InvalidObjectId { ref line } if line == "wants"),
        "{e}"
    );
    let e = v0(&[&format!("want {}", &B[..39]), "F"], 10).unwrap_err();
    assert!(matches!(e, FetchError::InvalidObjectId { .. }), "{e}");
    let e = v0(&[&want, "F", "have xyz"], 10).unwrap_err();
    assert!(
        matches!(e, FetchError::InvalidObjectId { ref line } if line == "have xyz"),
        "{e}"
    );
    let e = v0(&[&want, "F", "what"], 10).unwrap_err();
    assert!(
        matches!(e, FetchError::UnexpectedLine { ref line } if line == "what"),
        "{e}"
    );
    let e = v0(&[&want], 10).unwrap_err();
    assert!(matches!(e, FetchError::UnexpectedEof { .. }), "{e}");
    let e = v0(&[&want, "D"], 10).unwrap_err();
    assert!(
        matches!(
            e,
            FetchError::UnexpectedPacket {
                packet: "delim",
                ..
            }
        ),
        "{e}"
    );
    let e = v0(&[&want, "F", "R"], 10).unwrap_err();
    assert!(
        matches!(
            e,
            FetchError::UnexpectedPacket {
                packet: "response-end",
                ..
            }
        ),
        "{e}"
    );
    for bad in [
        "deepen 0",
        "deepen -1",
        "deepen x",
        "deepen ",
        "deepen +3",
        "deepen 99999999999",
        "deepen 2147483648",
        "deepen 4294967295",
    ] {
        let e = v0(&[&want, bad, "F"], 10).unwrap_err();
        assert!(matches!(e, FetchError::InvalidDeepen { .. }), "{bad}: {e}");
    }
    for bad in ["deepen-since 0", "deepen-since -5", "deepen-since soon"] {
        let e = v0(&[&want, bad, "F"], 10).unwrap_err();
        assert!(
            matches!(e, FetchError::InvalidDeepenSince { .. }),
            "{bad}: {e}"
        );
    }
    let req = v0(&[&want, "deepen 2147483647", "F"], 10).unwrap();
    assert_eq!(req.deepen, Some(2147483647));
    let e = v0(&[&want, "deepen 1", "deepen-not refs/heads/x", "F"], 10).unwrap_err();
    assert!(matches!(e, FetchError::DeepenConflict), "{e}");
    let e = v0(&[&want, "filter blob:none", "filter tree:0", "F"], 10).unwrap_err();
    assert!(matches!(e, FetchError::DuplicateFilter { .. }), "{e}");
    let e = read_upload_request_v0(&mut PktReader::new(&b"0010want 12"[..]), 10).unwrap_err();
    assert!(
        matches!(e, FetchError::Packet(PktError::TruncatedData { .. })),
        "{e}"
    );
}

#[test]
fn v0_line_limit_counts_every_packet() {
    let want = format!("want {B}");
    let have = format!("have {A}");
    let lines = [&want[..], "F", &have, &have, "F", "done"];
    assert!(v0(&lines, 6).is_ok());
    let e = v0(&lines, 5).unwrap_err();
    assert!(matches!(e, FetchError::TooManyLines { max: 5 }), "{e}");
    // endless flushes are bounded too
    let flushes = vec!["F"; 50];
    let mut lines = vec![&want[..], "F"];
    lines.extend(flushes);
    assert!(matches!(
        v0(&lines, 10),
        Err(FetchError::TooManyLines { max: 10 })
    ));
}

#[test]
fn v2_command_parsing() {
    let req = v2(
        &[
            "command=ls-refs",
            "agent=git/2.47.3",
            "object-format=sha1",
            "server-option",
            "D",
            "peel",
            "symrefs",
            "ref-prefix refs/heads/",
            "F",
        ],
        100,
    )
    .unwrap()
    .unwrap();
    assert_eq!(req.command, "ls-refs");
    assert_eq!(
        req.capabilities,
        vec![
            ("agent".to_owned(), Some("git/2.47.3".to_owned())),
            ("object-format".to_owned(), Some("sha1".to_owned())),
            ("server-option".to_owned(), None),
        ]
    );
    assert_eq!(
        req.args.iter().collect::<Vec<_>>(),
        vec![
            &b"peel"[..],
            &b"symrefs"[..],
            &b"ref-prefix refs/heads/"[..]
        ]
    );

    // flush instead of delim: no arguments
    let req = v2(&["command=ls-refs", "F"], 10).unwrap().unwrap();
    assert!(req.args.is_empty() && req.capabilities.is_empty());
    // delim with no arguments
    let req = v2(&["command=fetch", "D", "F"], 10).unwrap().unwrap();
    assert_eq!(req.command, "fetch");
    assert!(req.args.is_empty());
    // capability before the command
    let req = v2(&["agent=x", "command=fetch", "F"], 10).unwrap().unwrap();
    assert_eq!(req.command, "fetch");
}

#[test]
fn v2_empty_and_sequential_requests() {
    assert_eq!(v2(&[], 10).unwrap(), None);
    assert_eq!(v2(&["F"], 10).unwrap(), None);
    let input = body(&["command=ls-refs", "F", "command=fetch", "D", "done", "F"]);
    let mut reader = PktReader::new(&input[..]);
    assert_eq!(
        read_command_v2(&mut reader, 10).unwrap().unwrap().command,
        "ls-refs"
    );
    assert_eq!(
        read_command_v2(&mut reader, 10)
            .unwrap()
            .unwrap()
            .args
            .iter()
            .collect::<Vec<_>>(),
        vec![&b"done"[..]]
    );
    assert_eq!(read_command_v2(&mut reader, 10).unwrap(), None);
}

#[test]
fn v2_command_errors() {
    let e = v2(&["command=ls-refs", "command=fetch", "F"], 10).unwrap_err();
    assert!(
        matches!(&e, FetchError::DuplicateCommand { first, second } if first == "ls-refs" && second == "fetch")
    );
    let e = v2(&["agent=x", "D", "peel", "F"], 10).unwrap_err();
    assert!(matches!(e, FetchError::NoCommand), "{e}");
    let e = v2(&["D", "F"], 10).unwrap_err();
    assert!(matches!(e, FetchError::NoCommand), "{e}");
    let e = v2(&["command=fetch"], 10).unwrap_err();
    assert!(matches!(e, FetchError::UnexpectedEof { .. }), "{e}");
    let e = v2(&["command=fetch", "D", "done"], 10).unwrap_err();
    assert!(
        matches!(
            e,
            FetchError::UnexpectedEof {
                section: "argument list"
            }
        ),
        "{e}"
    );
    let e = v2(&["command=fetch", "D", "done", "D"], 10).unwrap_err();
    assert!(
        matches!(
            e,
            FetchError::UnexpectedPacket {
                packet: "delim",
                ..
            }
        ),
        "{e}"
    );
    let e = v2(&["command=fetch", "R"], 10).unwrap_err();
    assert!(
        matches!(
            e,
            FetchError::UnexpectedPacket {
                packet: "response-end",
                ..
            }
        ),
        "{e}"
    );
    let e = v2(&["command=fetch", "D", "a", "b", "c", "F"], 4).unwrap_err();
    assert!(matches!(e, FetchError::TooManyLines { max: 4 }), "{e}");
    assert!(v2(&["command=fetch", "D", "a", "b", "c", "F"], 6).is_ok());
    let mut bad = Vec::new();
    write_data(&mut bad, b"command=\xff").unwrap();
    write_flush(&mut bad).unwrap();
    let e = read_command_v2(&mut PktReader::new(&bad[..]), 10).unwrap_err();
    assert!(matches!(e, FetchError::NotUtf8 { .. }), "{e}");
}

#[test]
fn fetch_args_parse() {
    let a = args(&[
        "thin-pack",
        "no-progress",
        "include-tag",
        "ofs-delta\n",
        &format!("want {B}"),
        &format!("want {C}"),
        "want-ref refs/heads/main",
        &format!("have {A}"),
        &format!("shallow {A}"),
        "deepen 2147483647",
        "deepen-relative",
        "filter blob:limit=1k",
        "wait-for-done",
        "sideband-all",
        "done",
    ])
    .unwrap();
    assert_eq!(
        a,
        FetchArgsV2 {
            wants: vec![oid(B), oid(C)],
            want_refs: vec!["refs/heads/main".into()],
            haves: vec![oid(A)],
            done: true,
            thin_pack: true,
            no_progress: true,
            include_tag: true,
            ofs_delta: true,
            shallows: vec![oid(A)],
            deepen: Some(2_147_483_647),
            deepen_relative: true,
            deepen_since: None,
            deepen_not: vec![],
            filter: Some("blob:limit=1k".into()),
            wait_for_done: true,
            sideband_all: true,
        }
    );
    let a = args(&[
        "deepen-since 1234",
        "deepen-not refs/tags/v1",
        "deepen-not refs/tags/v2",
    ])
    .unwrap();
    assert_eq!(a.deepen_since, Some(1234));
    assert_eq!(a.deepen_not.len(), 2);
    assert_eq!(args(&[]).unwrap(), FetchArgsV2::default());
}

#[test]
fn fetch_args_errors() {
    let e = args(&["bogus-arg"]).unwrap_err();
    assert!(matches!(&e, FetchError::UnexpectedLine { line } if line == "bogus-arg"));
    assert_eq!(e.to_string(), "unexpected line: 'bogus-arg'");
    for bad in [
        "packfile-uris https",
        "done now",
        "want",
        "command=fetch",
        "have",
    ] {
        assert!(
            matches!(args(&[bad]), Err(FetchError::UnexpectedLine { .. })),
            "{bad}"
        );
    }
    assert!(matches!(
        args(&["want 1234"]),
        Err(FetchError::InvalidObjectId { .. })
    ));
    assert!(matches!(
        args(&[&format!("have {B}0")]),
        Err(FetchError::InvalidObjectId { .. })
    ));
    assert!(matches!(
        args(&["shallow zz"]),
        Err(FetchError::InvalidObjectId { .. })
    ));
    assert!(matches!(
        args(&["deepen 0"]),
        Err(FetchError::InvalidDeepen { .. })
    ));
    assert!(matches!(
        args(&["deepen 1", "deepen-since 5"]),
        Err(FetchError::DeepenConflict)
    ));
    assert!(matches!(
        args(&["filter a", "filter b"]),
        Err(FetchError::DuplicateFilter { .. })
    ));
}

#[test]
fn v0_acks_match_git() {
    let mut out = Vec::new();
    write_ack(&mut out, &oid(A), AckKind::Common).unwrap();
    write_nak(&mut out).unwrap();
    assert_eq!(out, format!("0038ACK {A} common\n0008NAK\n").as_bytes());
    let mut out = Vec::new();
    write_ack(&mut out, &oid(A), AckKind::Continue).unwrap();
    write_ack(&mut out, &oid(A), AckKind::Ready).unwrap();
    write_ack(&mut out, &oid(A), AckKind::Final).unwrap();
    assert_eq!(
        out,
        format!("003aACK {A} continue\n0037ACK {A} ready\n0031ACK {A}\n").as_bytes()
    );
}

#[test]
fn v0_shallow_update_matches_git() {
    let mut out = Vec::new();
    write_shallow_update_v0(&mut out, &[oid(B)], &[]).unwrap();
    assert_eq!(out, format!("0034shallow {B}0000").as_bytes());
    let mut out = Vec::new();
    write_shallow_update_v0(&mut out, &[], &[oid(A)]).unwrap();
    assert_eq!(out, format!("0036unshallow {A}0000").as_bytes());
}

#[test]
fn v2_sections_match_git() {
    let mut out = Vec::new();
    write_acknowledgments(&mut out, &[oid(A)], true).unwrap();
    write_shallow_info(&mut out, &[oid(B)], &[]).unwrap();
    start_packfile_section(&mut out).unwrap();
    assert_eq!(
        out,
        format!("0014acknowledgments\n0031ACK {A}\n000aready\n00010011shallow-info\n0034shallow {B}0001000dpackfile\n").as_bytes()
    );
    let mut out = Vec::new();
    write_acknowledgments(&mut out, &[], false).unwrap();
    assert_eq!(out, b"0014acknowledgments\n0008NAK\n0000");
    let mut out = Vec::new();
    write_acknowledgments(&mut out, &[oid(A)], false).unwrap();
    assert_eq!(
        out,
        format!("0014acknowledgments\n0031ACK {A}\n0000").as_bytes()
    );
    let mut out = Vec::new();
    write_wanted_refs(&mut out, &[(oid(B), "refs/heads/main".into())]).unwrap();
    assert_eq!(
        out,
        format!("0010wanted-refs\n003d{B} refs/heads/main\n0001").as_bytes()
    );
}
