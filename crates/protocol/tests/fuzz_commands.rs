//! Property-based fuzzing of the request parsers: `read_push_request`,
//! `read_upload_request_v0`, `read_command_v2`, `FetchArgsV2::parse` and
//! `LsRefsArgs::parse`.
//!
//! Inputs: arbitrary bytes; arbitrary packet sequences built from the
//! keywords the parsers look for (so they get past the first line); valid
//! generated requests and real git requests (`fixtures/`) with random
//! byte edits. Properties: no panic, every error renders; limits hold (no
//! more commands / lines than allowed); valid generated requests (random
//! oids, ref names, capabilities, options, shallow/deepen lines) parse back
//! to exactly what was generated, and the reader stops right after the
//! request, at the pack.
//!
//! The number of cases per property is `GITSTOW_FUZZ_CASES` (default 256).

use std::io::Read;

use gitstow_fuzzkit::{config, mutate, mutation};
use gitstow_protocol::pktline::{write_data, write_delim, write_flush, write_response_end};
use gitstow_protocol::{
    read_command_v2, read_push_request, read_upload_request_v0, FetchArgsV2, LsRefsArgs, PktReader,
};
use gix_hash::ObjectId;
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Generators of protocol pieces.

fn oid() -> impl Strategy<Value = ObjectId> {
    prop_oneof![
        8 => any::<[u8; 20]>().prop_map(|b| ObjectId::from_bytes_or_panic(&b)),
        1 => Just(ObjectId::null(gix_hash::Kind::Sha1)),
    ]
}

/// Ref names as git would send them (valid per git-check-ref-format).
fn ref_name() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "refs/heads/",
            "refs/tags/",
            "refs/notes/",
            "refs/x/y/",
        ]),
        "[a-zA-Z0-9_][a-zA-Z0-9_./-]{0,30}[a-zA-Z0-9_]",
    )
        .prop_map(|(p, n)| format!("{p}{n}"))
}

/// A capability word: `name` or `name=value` (no spaces, no NUL, no LF).
fn capability() -> impl Strategy<Value = (String, Option<String>)> {
    prop_oneof![
        prop::sample::select(vec![
            "report-status",
            "report-status-v2",
            "side-band-64k",
            "quiet",
            "atomic",
            "ofs-delta",
            "delete-refs",
            "thin-pack",
            "no-progress",
            "include-tag",
            "multi_ack_detailed",
            "deepen-relative",
            "no-done",
            "filter",
        ])
        .prop_map(|n| (n.to_owned(), None)),
        ("[a-z][a-z0-9-]{0,12}", "[!-~&&[^ ]]{0,20}").prop_map(|(n, v)| (n, Some(v))),
        Just(("agent".to_owned(), Some("git/2.47.3".to_owned()))),
        Just(("object-format".to_owned(), Some("sha1".to_owned()))),
    ]
}

fn cap_text(caps: &[(String, Option<String>)]) -> String {
    caps.iter()
        .map(|(n, v)| match v {
            Some(v) => format!("{n}={v}"),
            None => n.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Clone)]
enum Pkt {
    Data(Vec<u8>),
    Flush,
    Delim,
    End,
}

fn encode(pkts: &[Pkt]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pkts {
        match p {
            Pkt::Data(d) => write_data(&mut out, d).unwrap(),
            Pkt::Flush => write_flush(&mut out).unwrap(),
            Pkt::Delim => write_delim(&mut out).unwrap(),
            Pkt::End => write_response_end(&mut out).unwrap(),
        }
    }
    out
}

fn line(s: impl AsRef<[u8]>, lf: bool) -> Pkt {
    let mut d = s.as_ref().to_vec();
    if lf {
        d.push(b'\n');
    }
    Pkt::Data(d)
}

const KEYWORDS: &[&str] = &[
    "want ",
    "have ",
    "shallow ",
    "deepen ",
    "deepen-since ",
    "deepen-not ",
    "deepen-relative",
    "filter ",
    "done",
    "command=fetch",
    "command=ls-refs",
    "command=",
    "agent=git/2.47.3",
    "object-format=sha1",
    "want-ref ",
    "ref-prefix ",
    "peel",
    "symrefs",
    "unborn",
    "thin-pack",
    "ofs-delta",
    "include-tag",
    "no-progress",
    "wait-for-done",
    "sideband-all",
    "push-cert",
    "0000000000000000000000000000000000000000 ",
];

/// One line assembled from protocol words, hex ids, numbers and noise.
fn fuzzy_line() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => prop::sample::select(KEYWORDS).prop_map(|k| k.as_bytes().to_vec()),
        3 => oid().prop_map(|o| o.to_hex().to_string().into_bytes()),
        1 => "[0-9a-fA-F]{0,45}".prop_map(String::into_bytes),
        1 => prop::sample::select(vec![
            "0", "1", "-1", "+5", "4294967295", "4294967296", "18446744073709551616",
            "9223372036854775807", "-9223372036854775808", " ", "\0", "\n", "\0 ", "=",
        ]).prop_map(|s| s.as_bytes().to_vec()),
        2 => prop::collection::vec(any::<u8>(), 0..12),
        1 => ref_name().prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..5).prop_map(|v| v.concat())
}

fn fuzzy_packets() -> impl Strategy<Value = Vec<Pkt>> {
    prop::collection::vec(
        prop_oneof![
            8 => fuzzy_line().prop_map(Pkt::Data),
            2 => Just(Pkt::Flush),
            1 => Just(Pkt::Delim),
            1 => Just(Pkt::End),
        ],
        0..16,
    )
}

const SEEDS: &[&[u8]] = &[
    include_bytes!("fixtures/request_push_options.pkt"),
    include_bytes!("fixtures/request_v2_ls_refs.pkt"),
    include_bytes!("fixtures/request_v2_fetch_clone.pkt"),
    include_bytes!("fixtures/request_v2_fetch_haves.pkt"),
    include_bytes!("fixtures/request_v0_fetch_deepen_first.pkt"),
    include_bytes!("fixtures/request_v0_fetch_deepen.pkt"),
];

/// Every parser over the same bytes: none may panic, every limit holds.
fn run_all(bytes: &[u8], limit: usize) {
    match read_push_request(&mut PktReader::new(bytes), limit) {
        Ok(req) => {
            assert!(req.commands.len() <= limit);
            assert!(req.push_options.len() <= limit);
            let _ = req.expects_pack();
        }
        Err(e) => drop(e.to_string()),
    }
    match read_upload_request_v0(&mut PktReader::new(bytes), limit) {
        Ok(req) => {
            assert!(req.wants.len() + req.haves.len() + req.shallows.len() <= limit);
            assert!(!(req.deepen.is_some() && req.deepen_since.is_some()));
        }
        Err(e) => drop(e.to_string()),
    }
    let mut reader = PktReader::new(bytes);
    // several requests may follow one another on one stream
    for _ in 0..4 {
        match read_command_v2(&mut reader, limit) {
            Ok(Some(req)) => {
                assert!(req.args.len() + req.capabilities.len() < limit.max(1));
                match FetchArgsV2::parse(req.args.iter()) {
                    Ok(a) => assert!(a.deepen.is_none() || a.deepen_not.is_empty()),
                    Err(e) => drop(e.to_string()),
                }
                match LsRefsArgs::parse(req.args.iter()) {
                    Ok(a) => drop(a.matches("refs/heads/main")),
                    Err(e) => drop(e.to_string()),
                }
            }
            Ok(None) => break,
            Err(e) => {
                drop(e.to_string());
                break;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Valid generated requests.

#[derive(Debug, Clone)]
struct PushCase {
    shallow: Vec<ObjectId>,
    commands: Vec<(ObjectId, ObjectId, String, bool)>,
    caps: Vec<(String, Option<String>)>,
    options: Option<Vec<String>>,
    pack: Vec<u8>,
}

fn push_case() -> impl Strategy<Value = PushCase> {
    (
        prop::collection::vec(oid(), 0..3),
        prop::collection::vec((oid(), oid(), ref_name(), any::<bool>()), 1..10),
        prop::collection::vec(capability(), 0..6),
        prop::option::of(prop::collection::vec("[ -~]{0,40}", 0..5)),
        prop::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(shallow, commands, caps, options, pack)| PushCase {
            shallow,
            commands,
            caps,
            options,
            pack,
        })
}

fn encode_push(case: &PushCase) -> Vec<u8> {
    let mut caps = case.caps.clone();
    if case.options.is_some() {
        caps.push(("push-options".into(), None));
    }
    let mut pkts = Vec::new();
    for s in &case.shallow {
        pkts.push(line(format!("shallow {s}"), false));
    }
    for (i, (old, new, name, lf)) in case.commands.iter().enumerate() {
        let mut text = format!("{old} {new} {name}");
        if i == 0 {
            // git's client puts a space after the NUL
            text.push_str(&format!("\0 {}", cap_text(&caps)));
        }
        pkts.push(line(text, *lf));
    }
    pkts.push(Pkt::Flush);
    if let Some(options) = &case.options {
        for o in options {
            pkts.push(line(o, true));
        }
        pkts.push(Pkt::Flush);
    }
    let mut out = encode(&pkts);
    out.extend_from_slice(&case.pack);
    out
}

#[derive(Debug, Clone)]
enum Deepen {
    None,
    Depth(u32),
    Since(i64, Vec<String>),
}

fn deepen() -> impl Strategy<Value = Deepen> {
    prop_oneof![
        Just(Deepen::None),
        (1u32..=i32::MAX as u32).prop_map(Deepen::Depth),
        (1i64.., prop::collection::vec(ref_name(), 0..3)).prop_map(|(t, n)| Deepen::Since(t, n)),
        prop::collection::vec(ref_name(), 1..3).prop_map(|n| Deepen::Since(0, n)),
    ]
}

fn filter() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        Just("blob:none".to_owned()),
        (0u32..100_000).prop_map(|n| format!("blob:limit={n}")),
        Just("blob:limit=1k".to_owned()),
        (0u32..5).prop_map(|n| format!("tree:{n}")),
        "[!-~]{1,30}",
    ])
}

fn deepen_lines(shallows: &[ObjectId], deepen: &Deepen, filter: &Option<String>) -> Vec<String> {
    let mut lines: Vec<String> = shallows.iter().map(|s| format!("shallow {s}")).collect();
    match deepen {
        Deepen::None => {}
        Deepen::Depth(n) => lines.push(format!("deepen {n}")),
        Deepen::Since(t, names) => {
            if *t > 0 {
                lines.push(format!("deepen-since {t}"));
            }
            lines.extend(names.iter().map(|n| format!("deepen-not {n}")));
        }
    }
    if let Some(f) = filter {
        lines.push(format!("filter {f}"));
    }
    lines
}

fn check_deepen(
    deepen: &Deepen,
    got_deepen: Option<u32>,
    got_since: Option<i64>,
    got_not: &[String],
) -> Result<(), TestCaseError> {
    match deepen {
        Deepen::None => {
            prop_assert_eq!(got_deepen, None);
            prop_assert_eq!(got_since, None);
            prop_assert!(got_not.is_empty());
        }
        Deepen::Depth(n) => {
            prop_assert_eq!(got_deepen, Some(*n));
            prop_assert_eq!(got_since, None);
            prop_assert!(got_not.is_empty());
        }
        Deepen::Since(t, names) => {
            prop_assert_eq!(got_deepen, None);
            prop_assert_eq!(got_since, (*t > 0).then_some(*t));
            prop_assert_eq!(got_not, &names[..]);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        limit in 0usize..64,
    ) {
        run_all(&bytes, limit);
    }

    #[test]
    fn keyword_packets_never_panic(pkts in fuzzy_packets(), limit in 0usize..32) {
        run_all(&encode(&pkts), limit);
    }

    #[test]
    fn mutated_git_requests_never_panic(
        seed in prop::sample::select(SEEDS),
        mutations in prop::collection::vec(mutation(), 1..6),
        limit in 0usize..200,
    ) {
        run_all(&mutate(seed.to_vec(), &mutations), limit);
    }

    #[test]
    fn arbitrary_v2_args_never_panic(
        args in prop::collection::vec(
            prop_oneof![fuzzy_line(), prop::collection::vec(any::<u8>(), 0..50)], 0..20),
    ) {
        if let Err(e) = FetchArgsV2::parse(&args) {
            drop(e.to_string());
        }
        if let Err(e) = LsRefsArgs::parse(&args) {
            drop(e.to_string());
        }
    }

    #[test]
    fn push_requests_roundtrip(case in push_case()) {
        prop_assume!(case.caps.iter().all(|(n, _)| n != "push-options"));
        let bytes = encode_push(&case);
        let mut reader = PktReader::new(&bytes[..]);
        // push options are bounded by the command limit too
        let limit = case
            .commands
            .len()
            .max(case.options.as_ref().map_or(0, Vec::len));
        let req = read_push_request(&mut reader, limit).unwrap();
        prop_assert_eq!(&req.shallow, &case.shallow);
        prop_assert_eq!(req.commands.len(), case.commands.len());
        for (got, (old, new, name, _)) in req.commands.iter().zip(&case.commands) {
            prop_assert_eq!(&got.old, old);
            prop_assert_eq!(&got.new, new);
            prop_assert_eq!(&got.name, name);
        }
        let mut want_caps = case.caps.clone();
        if case.options.is_some() {
            want_caps.push(("push-options".into(), None));
        }
        let got_caps: Vec<(String, Option<String>)> = req
            .capabilities
            .iter()
            .map(|(n, v)| (n.to_owned(), v.map(str::to_owned)))
            .collect();
        prop_assert_eq!(got_caps, want_caps);
        match &case.options {
            Some(o) => prop_assert_eq!(&req.push_options, o),
            None => prop_assert!(req.push_options.is_empty()),
        }
        let mut rest = Vec::new();
        reader.into_inner().read_to_end(&mut rest).unwrap();
        prop_assert_eq!(rest, case.pack.clone());
        // a limit one below what was sent is refused
        prop_assert!(read_push_request(&mut PktReader::new(&bytes[..]), limit - 1).is_err());
    }

    #[test]
    fn mutated_push_requests_never_panic(
        case in push_case(),
        mutations in prop::collection::vec(mutation(), 1..6),
        limit in 0usize..12,
    ) {
        run_all(&mutate(encode_push(&case), &mutations), limit);
    }

    #[test]
    fn upload_v0_requests_roundtrip(
        wants in prop::collection::vec(oid(), 1..6),
        caps in prop::collection::vec(capability(), 0..6),
        shallows in prop::collection::vec(oid(), 0..3),
        deepen in deepen(),
        filter in filter(),
        rounds in prop::collection::vec(prop::collection::vec(oid(), 0..5), 0..4),
        done in any::<bool>(),
        lf in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let mut pkts = Vec::new();
        for (i, w) in wants.iter().enumerate() {
            if i == 0 && !caps.is_empty() {
                pkts.push(line(format!("want {w} {}", cap_text(&caps)), lf));
            } else {
                pkts.push(line(format!("want {w}"), lf));
            }
        }
        for l in deepen_lines(&shallows, &deepen, &filter) {
            pkts.push(line(l, lf));
        }
        pkts.push(Pkt::Flush);
        for round in &rounds {
            for h in round {
                pkts.push(line(format!("have {h}"), lf));
            }
            pkts.push(Pkt::Flush);
        }
        if done {
            pkts.push(line("done", lf));
        }
        let bytes = encode(&pkts);
        let req = read_upload_request_v0(&mut PktReader::new(&bytes[..]), pkts.len()).unwrap();
        prop_assert_eq!(&req.wants, &wants);
        prop_assert_eq!(&req.shallows, &shallows);
        prop_assert_eq!(&req.filter, &filter);
        check_deepen(&deepen, req.deepen, req.deepen_since, &req.deepen_not)?;
        let haves: Vec<ObjectId> = rounds.concat();
        prop_assert_eq!(&req.haves, &haves);
        prop_assert_eq!(req.have_rounds, rounds.len());
        prop_assert_eq!(req.done, done);
        prop_assert_eq!(
            req.deepen_relative,
            caps.iter().any(|(n, _)| n == "deepen-relative")
        );
        prop_assert_eq!(req.capabilities.len(), caps.len());
        // the line limit is exact
        prop_assert!(read_upload_request_v0(&mut PktReader::new(&bytes[..]), pkts.len() - 1).is_err());
        run_all(&mutate(bytes, &mutations), pkts.len());
    }

    #[test]
    fn fetch_v2_requests_roundtrip(
        caps in prop::collection::vec(("[a-z][a-z0-9-]{0,12}", prop::option::of("[ -~]{0,20}")), 0..4),
        wants in prop::collection::vec(oid(), 0..5),
        want_refs in prop::collection::vec(ref_name(), 0..3),
        haves in prop::collection::vec(oid(), 0..5),
        flags in any::<[bool; 8]>(),
        shallows in prop::collection::vec(oid(), 0..3),
        deepen in deepen(),
        filter in filter(),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        prop_assume!(caps.iter().all(|(k, _)| k != "command"));
        let mut pkts = vec![line("command=fetch", true)];
        for (k, v) in &caps {
            pkts.push(line(match v { Some(v) => format!("{k}={v}"), None => k.clone() }, true));
        }
        pkts.push(Pkt::Delim);
        let mut args: Vec<String> = Vec::new();
        let names = [
            "thin-pack", "no-progress", "include-tag", "ofs-delta",
            "deepen-relative", "wait-for-done", "sideband-all", "done",
        ];
        for (on, name) in flags.iter().zip(names) {
            if *on {
                args.push(name.to_owned());
            }
        }
        args.extend(wants.iter().map(|w| format!("want {w}")));
        args.extend(want_refs.iter().map(|r| format!("want-ref {r}")));
        args.extend(haves.iter().map(|h| format!("have {h}")));
        args.extend(deepen_lines(&shallows, &deepen, &filter));
        for a in &args {
            pkts.push(line(a, true));
        }
        pkts.push(Pkt::Flush);
        let mut bytes = encode(&pkts);
        bytes.extend_from_slice(b"0000");
        let mut reader = PktReader::new(&bytes[..]);
        let req = read_command_v2(&mut reader, pkts.len()).unwrap().unwrap();
        prop_assert_eq!(&req.command, "fetch");
        prop_assert_eq!(&req.capabilities, &caps);
        // a lone flush after a request is "no request"
        prop_assert!(read_command_v2(&mut reader, 10).unwrap().is_none());
        let got_args: Vec<Vec<u8>> = args.iter().map(|a| a.clone().into_bytes()).collect();
        let read_args: Vec<Vec<u8>> = req.args.iter().map(<[u8]>::to_vec).collect();
        prop_assert_eq!(&read_args, &got_args);
        let parsed = FetchArgsV2::parse(req.args.iter()).unwrap();
        prop_assert_eq!(&parsed.wants, &wants);
        prop_assert_eq!(&parsed.want_refs, &want_refs);
        prop_assert_eq!(&parsed.haves, &haves);
        prop_assert_eq!(&parsed.shallows, &shallows);
        prop_assert_eq!(&parsed.filter, &filter);
        check_deepen(&deepen, parsed.deepen, parsed.deepen_since, &parsed.deepen_not)?;
        prop_assert_eq!(
            [
                parsed.thin_pack, parsed.no_progress, parsed.include_tag, parsed.ofs_delta,
                parsed.deepen_relative, parsed.wait_for_done, parsed.sideband_all, parsed.done,
            ],
            flags
        );
        prop_assert!(read_command_v2(&mut PktReader::new(&bytes[..]), pkts.len() - 1).is_err());
        run_all(&mutate(bytes, &mutations), pkts.len());
    }

    #[test]
    fn ls_refs_requests_roundtrip(
        flags in any::<[bool; 3]>(),
        prefixes in prop::collection::vec("[ -~]{0,30}", 0..6),
        lf in any::<bool>(),
    ) {
        let mut pkts = vec![line("command=ls-refs", lf), line("agent=git/2.47.3", lf), Pkt::Delim];
        for (on, name) in flags.iter().zip(["peel", "symrefs", "unborn"]) {
            if *on {
                pkts.push(line(name, lf));
            }
        }
        for p in &prefixes {
            pkts.push(line(format!("ref-prefix {p}"), true));
        }
        pkts.push(Pkt::Flush);
        let bytes = encode(&pkts);
        let req = read_command_v2(&mut PktReader::new(&bytes[..]), 100).unwrap().unwrap();
        prop_assert_eq!(&req.command, "ls-refs");
        let parsed = LsRefsArgs::parse(req.args.iter()).unwrap();
        prop_assert_eq!([parsed.peel, parsed.symrefs, parsed.unborn], flags);
        prop_assert_eq!(&parsed.ref_prefixes, &prefixes);
        for p in &prefixes {
            let name = format!("{p}tail");
            prop_assert!(parsed.matches(&name));
        }
    }
}
