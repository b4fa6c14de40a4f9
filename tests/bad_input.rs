//! Malformed pushes that git itself never sends, made by hand and POSTed
//! raw: each is refused with the reason canonical git gives, the repository
//! is unchanged, and the server goes on serving.

mod common;

use std::path::Path;

use common::raw_pack::{delta, ofs_delta, Op, RawPack};
use common::*;

/// A repository pushed with git: main = C1 - C2.
struct Setup {
    server: Server,
    tmp: tempfile::TempDir,
    url: String,
    c1: String,
    c2: String,
    before: String,
}

const REPO: &str = "victim";

fn setup() -> Setup {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "C1");
    let c2 = commit_files(&work, &[("a.txt", "one\ntwo\n")], "C2");
    let url = server.url(REPO);
    git(&work, &["push", "--quiet", &url, "main"]);
    let before = ls_remote(&url);
    Setup {
        server,
        tmp,
        url,
        c1,
        c2,
        before,
    }
}

impl Setup {
    /// A valid pack holding a new commit C3 on top of C2 (blob, tree,
    /// commit, in that order) and C3's id.
    fn c3_pack(&self) -> (PackBuilder, String) {
        let text: String = (0..200)
            .map(|i| format!("line {i} of the new file\n"))
            .collect();
        let blob = text.into_bytes();
        let blob_id = object_id(Kind::Blob, &blob);
        let tree = tree_data(&[("100644", "new.txt", &blob_id)]);
        let tree_id = object_id(Kind::Tree, &tree);
        let commit = commit_data(&tree_id, &[&self.c2], "C3\n");
        let c3 = object_id(Kind::Commit, &commit);
        let pack = PackBuilder::default()
            .add(Kind::Blob, &blob)
            .add(Kind::Tree, &tree)
            .add(Kind::Commit, &commit);
        (pack, c3)
    }

    fn push_raw(&self, commands: &[(&str, &str, &str)], caps: &str, pack: Option<&[u8]>) -> Report {
        let body = receive_pack_request(commands, caps, pack);
        let resp = post_receive_pack(&self.server, REPO, &body);
        // canonical: 200 with Content-Type application/x-git-receive-pack-result
        assert_eq!(resp.status, 200, "{resp:?}");
        assert_eq!(
            resp.header("content-type"),
            Some("application/x-git-receive-pack-result")
        );
        report_status(&resp.body)
    }

    /// Nothing changed and the server still serves a correct clone.
    fn assert_unchanged_and_serving(&self) {
        assert_eq!(ls_remote(&self.url), self.before, "the repository changed");
        let dir = self.tmp.path().join("after");
        git(
            self.tmp.path(),
            &["clone", "--quiet", "--mirror", &self.url, "after"],
        );
        assert_eq!(git_out(&dir, &["rev-parse", "main"]), self.c2);
        fsck(Path::new(&dir));
        // and a good push still works
        let (pack, c3) = self.c3_pack();
        let report = self.push_raw(
            &[(&self.c2, &c3, "refs/heads/main")],
            "report-status",
            Some(&pack.build()),
        );
        assert_eq!(report.unpack, "ok");
        assert_eq!(report.refs, vec!["ok refs/heads/main".to_owned()]);
    }
}

/// The pack itself is bad. canonical (all three damaged-pack cases):
///   unpack unpack-objects abnormal exit      (packs below receive.unpackLimit,
///   unpack index-pack abnormal exit           100 objects; index-pack above)
///   ng refs/heads/main unpacker error
/// The unpack reason names git's internals, so only "not ok" is asserted.
fn assert_unpacker_error(r: &Report, refname: &str) {
    assert!(!r.unpack.is_empty() && r.unpack != "ok", "{r:?}");
    assert_eq!(
        r.refs,
        vec![format!("ng {refname} unpacker error")],
        "{r:?}"
    );
}

/// (a) a byte flipped inside an object's zlib stream (trailer recomputed).
#[test]
fn corrupt_zlib_stream() {
    let s = setup();
    let (pack, c3) = s.c3_pack();
    let (at, len) = pack.offsets()[0];
    let mut bytes = pack.build();
    bytes[at + len / 2] ^= 0x55;
    fix_trailer(&mut bytes);
    let r = s.push_raw(
        &[(&s.c2, &c3, "refs/heads/main")],
        "report-status",
        Some(&bytes),
    );
    assert_unpacker_error(&r, "refs/heads/main");
    s.assert_unchanged_and_serving();
}

/// (b) the pack cut in the middle.
#[test]
fn truncated_pack() {
    let s = setup();
    let (pack, c3) = s.c3_pack();
    let bytes = pack.build();
    let r = s.push_raw(
        &[(&s.c2, &c3, "refs/heads/main")],
        "report-status",
        Some(&bytes[..bytes.len() / 2]),
    );
    assert_unpacker_error(&r, "refs/heads/main");
    s.assert_unchanged_and_serving();
}

/// (c) a wrong SHA-1 trailer.
#[test]
fn wrong_trailer() {
    let s = setup();
    let (pack, c3) = s.c3_pack();
    let mut bytes = pack.build();
    *bytes.last_mut().unwrap() ^= 1;
    let r = s.push_raw(
        &[(&s.c2, &c3, "refs/heads/main")],
        "report-status",
        Some(&bytes),
    );
    assert_unpacker_error(&r, "refs/heads/main");
    s.assert_unchanged_and_serving();
}

/// (d) a commit that does not parse (no tree line).
#[test]
fn unparseable_commit() {
    let s = setup();
    let commit = b"author A U Thor <author@example.com> 1700000000 +0000\n\
committer C O Mitter <committer@example.com> 1700000000 +0000\n\nno tree\n";
    let id = object_id(Kind::Commit, commit);
    let pack = PackBuilder::default().add(Kind::Commit, commit).build();
    let r = s.push_raw(
        &[(ZERO_OID, &id, "refs/heads/broken")],
        "report-status",
        Some(&pack),
    );
    // canonical, default config (no object checks; the connectivity walk
    // cannot parse it):
    //   unpack ok
    //   ng refs/heads/broken missing necessary objects
    // canonical with receive.fsckObjects=true (checked while unpacking):
    //   unpack unpack-objects abnormal exit   (or index-pack abnormal exit)
    //   ng refs/heads/broken unpacker error
    // gitstow checks objects while indexing, so either refusal is right.
    let checked = r.unpack != "ok" && r.refs == ["ng refs/heads/broken unpacker error"];
    let walked = r.unpack == "ok" && r.refs == ["ng refs/heads/broken missing necessary objects"];
    assert!(checked || walked, "{r:?}");
    s.assert_unchanged_and_serving();
}

/// Canonical git's answer (default config) when the pack is fine but ref
/// `name` would reach an object that is nowhere: `unpack ok`, then
/// `ng <name> missing necessary objects`.
fn assert_missing_objects(r: &Report, name: &str) {
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(
        r.refs,
        [format!("ng {name} missing necessary objects")],
        "{r:?}"
    );
}

/// (e) a commit whose tree is in neither the pack nor the repository.
#[test]
fn missing_object() {
    let s = setup();
    let absent_tree = object_id(Kind::Tree, &tree_data(&[("100644", "ghost", &s.c1)]));
    let commit = commit_data(&absent_tree, &[&s.c2], "points at nothing\n");
    let id = object_id(Kind::Commit, &commit);
    let pack = PackBuilder::default().add(Kind::Commit, &commit).build();
    let r = s.push_raw(
        &[(&s.c2, &id, "refs/heads/main")],
        "report-status",
        Some(&pack),
    );
    assert_missing_objects(&r, "refs/heads/main");
    // a ref at an object that is nowhere, with an empty pack
    let empty = PackBuilder::default().build();
    let r = s.push_raw(
        &[(ZERO_OID, &id, "refs/heads/ghost")],
        "report-status",
        Some(&empty),
    );
    assert_missing_objects(&r, "refs/heads/ghost");
    s.assert_unchanged_and_serving();
}

/// (e2) a blob absent from pack and repository, named by one entry of a
/// tree of 10,001 that is resolved from a delta on a tree of 10,000 present
/// blobs: the resolver threads flush what they collect many times (8,192
/// names at a time) and the one absent name still reaches the check.
#[test]
fn missing_object_named_in_a_delta_among_many() {
    let s = setup();
    let blobs: Vec<Vec<u8>> = (0..10_000)
        .map(|i| format!("blob {i}\n").into_bytes())
        .collect();
    let ids: Vec<String> = blobs.iter().map(|b| object_id(Kind::Blob, b)).collect();
    let names: Vec<String> = (0..ids.len()).map(|i| format!("f{i:05}")).collect();
    let entries: Vec<(&str, &str, &str)> = names
        .iter()
        .zip(&ids)
        .map(|(n, id)| ("100644", n.as_str(), id.as_str()))
        .collect();
    let base = tree_data(&entries);
    let ghost = object_id(Kind::Blob, b"nowhere\n");
    let mut with_ghost = entries.clone();
    with_ghost.push(("100644", "zz-ghost", &ghost));
    let tree = tree_data(&with_ghost);
    let commit = commit_data(&object_id(Kind::Tree, &tree), &[&s.c2], "many\n");
    let id = object_id(Kind::Commit, &commit);
    let mut pack = RawPack::default();
    for b in &blobs {
        pack = pack.whole(Kind::Blob, b);
    }
    let base_at = pack.next_offset();
    pack = pack.whole(Kind::Tree, &base);
    let d = delta(
        base.len(),
        tree.len(),
        &[Op::Copy(0, base.len()), Op::Insert(&tree[base.len()..])],
    );
    let distance = (pack.next_offset() - base_at) as u64;
    let pack = pack
        .entry(ofs_delta(distance, &d))
        .whole(Kind::Commit, &commit)
        .build();
    let r = s.push_raw(
        &[(&s.c2, &id, "refs/heads/main")],
        "report-status",
        Some(&pack),
    );
    assert_missing_objects(&r, "refs/heads/main");
    s.assert_unchanged_and_serving();
}

/// (f) an invalid ref name, at a commit the server has (empty pack).
#[test]
fn invalid_ref_name() {
    let s = setup();
    let empty = PackBuilder::default().build();
    let r = s.push_raw(
        &[(ZERO_OID, &s.c2, "refs/heads/bad..name")],
        "report-status",
        Some(&empty),
    );
    // canonical: "unpack ok", "ng refs/heads/bad..name funny refname"
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(r.refs, ["ng refs/heads/bad..name funny refname"], "{r:?}");
    s.assert_unchanged_and_serving();
}

/// (g) a stale old value (main is at C2, the command says C1).
#[test]
fn stale_old_value() {
    let s = setup();
    let (pack, c3) = s.c3_pack();
    let r = s.push_raw(
        &[(&s.c1, &c3, "refs/heads/main")],
        "report-status side-band-64k",
        Some(&pack.build()),
    );
    // canonical (report inside side-band channel 1):
    //   unpack ok
    //   ng refs/heads/main failed to update ref
    // and on channel 2: "error: cannot lock ref 'refs/heads/main': is at
    // <C2> but expected <C1>"
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(r.refs, ["ng refs/heads/main failed to update ref"], "{r:?}");
    let expected = format!(
        "error: cannot lock ref 'refs/heads/main': is at {} but expected {}",
        s.c2, s.c1
    );
    assert!(r.progress.contains(&expected), "{r:?}");
    s.assert_unchanged_and_serving();
}

/// (h) atomic: a valid create plus a stale update; neither lands.
#[test]
fn atomic_with_a_stale_old_value() {
    let s = setup();
    let (pack, c3) = s.c3_pack();
    let r = s.push_raw(
        &[
            (ZERO_OID, &s.c2, "refs/heads/side"),
            (&s.c1, &c3, "refs/heads/main"),
        ],
        "report-status atomic",
        Some(&pack.build()),
    );
    // canonical:
    //   unpack ok
    //   ng refs/heads/side atomic transaction failed
    //   ng refs/heads/main atomic transaction failed
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(
        r.refs,
        [
            "ng refs/heads/side atomic transaction failed",
            "ng refs/heads/main atomic transaction failed"
        ],
        "{r:?}"
    );
    s.assert_unchanged_and_serving();
}

/// (i) not pkt-lines at all.
#[test]
fn garbage_request() {
    let s = setup();
    let resp = post_receive_pack(&s.server, REPO, b"hello, this is not a pkt-line stream\n");
    // canonical: 200, Content-Type application/x-git-receive-pack-result,
    // empty body (receive-pack dies on "bad line length character")
    assert!(
        resp.status == 200 || (400..500).contains(&resp.status),
        "{resp:?}"
    );
    let r = report_status(&resp.body);
    assert!(
        r.unpack != "ok" && r.refs.iter().all(|l| !l.starts_with("ok")),
        "{r:?}"
    );
    s.assert_unchanged_and_serving();
}

/// A push in the other object format: a SHA-256 client's commands (64-hex
/// ids, `object-format=sha256`), or SHA-256 ids under SHA-1's name, to a
/// SHA-1 repository. canonical: receive-pack dies with `error: unsupported
/// object format 'sha256'` before reading a pack (the message goes to
/// http-backend's stderr; the client reads no report). Nothing is stored.
#[test]
fn a_push_in_the_other_object_format_is_refused() {
    let s = setup();
    let (zero, new) = ("0".repeat(64), "ab".repeat(32));
    for caps in [
        "report-status object-format=sha256",
        "report-status object-format=sha1",
    ] {
        let body = receive_pack_request(
            &[(&zero, &new, "refs/heads/wide")],
            caps,
            Some(&PackBuilder::default().build()),
        );
        let resp = post_receive_pack(&s.server, REPO, &body);
        assert!(
            resp.status == 200 || (400..500).contains(&resp.status),
            "{resp:?}"
        );
        let r = report_status(&resp.body);
        assert!(r.unpack != "ok" && r.refs.is_empty(), "{caps}: {r:?}");
    }
    // A SHA-1 push naming SHA-256 as its format is refused too.
    let body = receive_pack_request(
        &[(&s.c2, &s.c1, "refs/heads/back")],
        "report-status object-format=sha256",
        Some(&PackBuilder::default().build()),
    );
    let r = report_status(&post_receive_pack(&s.server, REPO, &body).body);
    assert!(r.unpack != "ok" && r.refs.is_empty(), "{r:?}");
    let log = s.server.logs();
    assert!(log.contains("unsupported object format 'sha256'"), "{log}");
    s.assert_unchanged_and_serving();
}

/// A repository that does not exist: clone fails, info/refs is 404.
#[test]
fn missing_repository() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let err = git_fail(tmp.path(), &["clone", &server.url("absent"), "x"]);
    // canonical: "fatal: repository 'http://127.0.0.1:PORT/absent.git/' not found"
    assert!(err.contains("absent.git/' not found"), "{err}");
    let resp = http(
        server.port(),
        "GET",
        "/absent.git/info/refs?service=git-upload-pack",
        &[],
        b"",
    );
    // canonical: "HTTP/1.1 404 Not Found", empty body
    assert_eq!(resp.status, 404, "{resp:?}");
    // and reading it did not create it
    let entries = server.store_keys();
    assert!(
        !entries.iter().any(|e| e.starts_with("absent")),
        "{entries:?}"
    );
}

/// A blob or a tree pushed to a branch. canonical:
///   remote: error: cannot update ref 'refs/heads/blob': trying to write
///   non-commit object <oid> to branch 'refs/heads/blob'
///   ng refs/heads/blob failed to update ref
#[test]
fn non_commit_object_to_a_branch() {
    let s = setup();
    let work = s.tmp.path().join("work");
    let blob = git_out(&work, &["rev-parse", "HEAD:a.txt"]);
    let tree = git_out(&work, &["rev-parse", "HEAD^{tree}"]);
    let r = s.push_raw(
        &[
            (ZERO_OID, &blob, "refs/heads/blob"),
            (ZERO_OID, &tree, "refs/heads/tree"),
        ],
        "report-status",
        Some(&PackBuilder::default().build()),
    );
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(
        r.refs,
        [
            "ng refs/heads/blob failed to update ref",
            "ng refs/heads/tree failed to update ref"
        ],
        "{r:?}"
    );
    // An annotated tag is not a commit either.
    git(&work, &["tag", "-a", "ann", "-m", "annotated"]);
    git(&work, &["push", "--quiet", &s.url, "refs/tags/ann"]);
    let tag = git_out(&work, &["rev-parse", "ann"]);
    let r = s.push_raw(
        &[(ZERO_OID, &tag, "refs/heads/tagged")],
        "report-status",
        Some(&PackBuilder::default().build()),
    );
    assert_eq!(
        r.refs,
        ["ng refs/heads/tagged failed to update ref"],
        "{r:?}"
    );
    // A tag may point at a blob.
    let r = s.push_raw(
        &[(ZERO_OID, &blob, "refs/tags/blob")],
        "report-status",
        Some(&PackBuilder::default().build()),
    );
    assert_eq!(r.refs, ["ok refs/tags/blob"], "{r:?}");
}

/// Deleting a ref that does not exist while expecting a value. canonical:
///   ng refs/heads/nonexistent failed to update ref
/// (without an expected value, the delete is accepted).
#[test]
fn delete_of_an_absent_ref_with_an_old_value() {
    let s = setup();
    let r = s.push_raw(
        &[(&s.c1, ZERO_OID, "refs/heads/nonexistent")],
        "report-status delete-refs",
        None,
    );
    assert_eq!(r.unpack, "ok", "{r:?}");
    assert_eq!(
        r.refs,
        ["ng refs/heads/nonexistent failed to update ref"],
        "{r:?}"
    );
    let r = s.push_raw(
        &[(ZERO_OID, ZERO_OID, "refs/heads/nonexistent")],
        "report-status delete-refs",
        None,
    );
    assert_eq!(r.refs, ["ok refs/heads/nonexistent"], "{r:?}");
    s.assert_unchanged_and_serving();
}

/// A push larger than `--max-pack-size`. canonical (receive.maxInputSize):
///   remote: fatal: pack exceeds maximum allowed size
///   ! [remote rejected] main -> main (unpacker error)
#[test]
fn pack_larger_than_the_limit() {
    let server = Server::start_with(&["--max-pack-size", "200000"]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("w");
    init_repo(&work);
    let noise: String = (0..60_000u32)
        .map(|i| format!("{:x}", i.wrapping_mul(2_654_435_761)))
        .collect();
    commit_files(&work, &[("big.txt", &noise)], "big");
    let url = server.url("limited");
    let err = git_fail(&work, &["push", &url, "main"]);
    assert!(err.contains("pack exceeds maximum allowed size"), "{err}");
    assert!(err.contains("unpacker error"), "{err}");
    // Nothing was created; a small push still works.
    let small = tmp.path().join("s");
    init_repo(&small);
    commit_files(&small, &[("a", "a\n")], "small");
    git(&small, &["push", "--quiet", &url, "main"]);
}

/// A POST whose Content-Type is not the service's request type. canonical:
/// 415 "Expected POST with Content-Type 'application/x-git-receive-pack-request'".
#[test]
fn wrong_content_type() {
    let s = setup();
    let resp = http(
        s.server.port(),
        "POST",
        &format!("/{REPO}.git/git-receive-pack"),
        &[("Content-Type", "text/plain")],
        b"0000",
    );
    assert_eq!(resp.status, 415, "{resp:?}");
    s.assert_unchanged_and_serving();
}

/// `--atomic` with a blob pushed to a branch: git refuses the blob inside the
/// ref transaction, so every ref of the push gets "atomic transaction failed".
#[test]
fn atomic_push_with_a_blob_to_a_branch() {
    let s = setup();
    let work = s.tmp.path().join("work");
    let blob = git_out(&work, &["rev-parse", "HEAD:a.txt"]);
    let r = s.push_raw(
        &[
            (ZERO_OID, &s.c2, "refs/heads/good"),
            (ZERO_OID, &blob, "refs/heads/bad"),
        ],
        "report-status atomic",
        Some(&PackBuilder::default().build()),
    );
    // canonical: ng refs/heads/good atomic transaction failed
    //            ng refs/heads/bad atomic transaction failed
    assert_eq!(
        r.refs,
        [
            "ng refs/heads/good atomic transaction failed",
            "ng refs/heads/bad atomic transaction failed"
        ],
        "{r:?}"
    );
    s.assert_unchanged_and_serving();
}

/// Hardening, finding 8: a push holds about 250 bytes per object while it
/// is resolved, so the object count of a pack is capped
/// (`--max-push-objects`, 20M by default): beyond it the push is refused
/// at the pack header, in git's unpack words, and nothing is stored.
#[test]
fn a_pack_over_the_object_limit_is_refused() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&["--no-maintenance", "--max-push-objects", "2"]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "one\n")], "one");
    let said = git_fail(&work, &["push", &server.url("capped"), "main"]);
    assert!(
        said.contains(
            "remote unpack failed: pack has 3 objects, more than this server's limit of 2"
        ),
        "{said}"
    );
    let out = git_cmd(&work)
        .args(["ls-remote", &server.url("capped")])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("refs/heads/main"));
}
