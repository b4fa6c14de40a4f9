//! Request bodies sent by a real git 2.47 client (captured between `git
//! push` / `git clone` / `git fetch` and `git http-backend`), parsed through
//! the public API as the receive and upload crates will.

use std::io::Read;

use gitstow_protocol::{
    check_ref_format, read_command_v2, read_push_request, read_upload_request_v0, FetchArgsV2,
    LsRefsArgs, PktReader,
};

const PUSH: &[u8] = include_bytes!("fixtures/request_push_options.pkt");
const V2_LS_REFS: &[u8] = include_bytes!("fixtures/request_v2_ls_refs.pkt");
const V2_FETCH_CLONE: &[u8] = include_bytes!("fixtures/request_v2_fetch_clone.pkt");
const V2_FETCH_HAVES: &[u8] = include_bytes!("fixtures/request_v2_fetch_haves.pkt");
const V0_DEEPEN_FIRST: &[u8] = include_bytes!("fixtures/request_v0_fetch_deepen_first.pkt");
const V0_DEEPEN: &[u8] = include_bytes!("fixtures/request_v0_fetch_deepen.pkt");

#[test]
fn git_push_with_options_then_pack() {
    // git push -o ci.skip -o "note=hello world" … main:refs/heads/p2
    let mut reader = PktReader::new(PUSH);
    let req = read_push_request(&mut reader, 100).unwrap();
    assert_eq!(req.commands.len(), 1);
    let cmd = &req.commands[0];
    assert!(cmd.is_create());
    assert_eq!(cmd.name, "refs/heads/p2");
    check_ref_format(&cmd.name).unwrap();
    for cap in ["report-status-v2", "side-band-64k", "quiet", "push-options"] {
        assert!(req.capabilities.contains(cap), "{cap}");
    }
    assert_eq!(req.capabilities.value("object-format"), Some("sha1"));
    assert_eq!(
        req.push_options,
        vec!["ci.skip".to_owned(), "note=hello world".to_owned()]
    );
    assert!(req.shallow.is_empty());
    assert!(req.expects_pack());
    let mut pack = Vec::new();
    reader.into_inner().read_to_end(&mut pack).unwrap();
    assert!(
        pack.starts_with(b"PACK\0\0\0\x02"),
        "reader positioned at the pack"
    );
}

#[test]
fn git_v2_ls_refs() {
    let mut reader = PktReader::new(V2_LS_REFS);
    let req = read_command_v2(&mut reader, 100).unwrap().unwrap();
    assert_eq!(req.command, "ls-refs");
    assert!(req
        .capabilities
        .contains(&("object-format".to_owned(), Some("sha1".to_owned()))));
    let args = LsRefsArgs::parse(req.args.iter()).unwrap();
    assert!(args.peel && args.symrefs && args.unborn);
    assert_eq!(args.ref_prefixes, vec!["HEAD", "refs/heads/", "refs/tags/"]);
    assert!(args.matches("HEAD") && args.matches("refs/tags/v1") && !args.matches("refs/notes/x"));
    assert_eq!(read_command_v2(&mut reader, 100).unwrap(), None);
}

#[test]
fn git_v2_fetch_clone() {
    let mut reader = PktReader::new(V2_FETCH_CLONE);
    let req = read_command_v2(&mut reader, 1000).unwrap().unwrap();
    assert_eq!(req.command, "fetch");
    let args = FetchArgsV2::parse(req.args.iter()).unwrap();
    assert!(args.thin_pack && args.no_progress && args.ofs_delta && args.done);
    assert!(!args.wants.is_empty());
    assert!(args.haves.is_empty());
}

#[test]
fn git_v2_fetch_negotiation_round() {
    let req = read_command_v2(&mut PktReader::new(V2_FETCH_HAVES), 1000)
        .unwrap()
        .unwrap();
    let args = FetchArgsV2::parse(req.args.iter()).unwrap();
    assert_eq!(args.wants.len(), 1);
    assert_eq!(args.haves.len(), 1);
    assert!(args.include_tag);
    assert!(!args.done);
}

#[test]
fn git_v0_shallow_fetch() {
    // first request of `git fetch --depth=1`: wants + deepen, flush, EOF
    let req = read_upload_request_v0(&mut PktReader::new(V0_DEEPEN_FIRST), 100).unwrap();
    assert_eq!(req.wants.len(), 1);
    assert_eq!(req.deepen, Some(1));
    assert!(req.capabilities.contains("multi_ack_detailed"));
    assert!(req.capabilities.contains("no-done"));
    assert!(req.haves.is_empty() && !req.done);

    // second request: the same, then haves and done
    let req = read_upload_request_v0(&mut PktReader::new(V0_DEEPEN), 100).unwrap();
    assert_eq!(req.deepen, Some(1));
    assert_eq!(req.haves.len(), 5);
    assert!(req.done);
    assert_eq!(req.capabilities.value("agent"), Some("git/2.47.3"));
}
