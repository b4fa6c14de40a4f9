//! Reachability bitmaps: a GC writes, for selected commits of its closure,
//! the bitmap of everything each reaches; a fetch from far behind then
//! learns what the client has and what the wants reach from them instead
//! of walking the history, sends exactly the objects the client lacks, and
//! sends every stored delta whose base the client has as it is (thin).
//! A damaged or missing bitmap file costs a warning and a walk, never an
//! answer.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::*;

/// Every object `rev` reaches, by git.
fn reach(src: &Path, rev: &str) -> BTreeSet<String> {
    git_out(src, &["rev-list", "--objects", rev])
        .lines()
        .map(|l| l[..40].to_owned())
        .collect()
}

/// A history of 400 commits over 4 branches (merges, tags, renames,
/// binaries) mirrored to repository `name`, `main` held 5 commits back
/// while the GC runs and pushed after it (so the wants lie outside the
/// closure, as in any repository that took pushes since its last GC).
fn gc_then_push(server: &Server, tmp: &Path, name: &str) -> (PathBuf, String) {
    let src = tmp.join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 31,
            commits: 400,
            ..Default::default()
        },
    );
    let url = server.url(name);
    git(&src, &["push", "--quiet", "--mirror", &url]);
    force_main(&src, &url, &git_out(&src, &["rev-parse", "main~5"]));
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", name, "--gc", "--grace", "0"], &[]),
    );
    git(&src, &["push", "--quiet", &url, "main:refs/heads/main"]);
    (src, url)
}

/// `main` of `src` half its first-parent history back.
fn far_behind(src: &Path) -> String {
    let n: usize = git_out(src, &["rev-list", "--first-parent", "--count", "main"])
        .parse()
        .unwrap();
    assert!(n > 100, "{n} first-parent commits");
    format!("main~{}", n / 2)
}

/// A bare repository holding `main` at `rev` of `src` and nothing else.
fn client_at(src: &Path, dir: &Path, rev: &str) {
    git(
        src.parent().unwrap(),
        &["init", "--quiet", "--bare", dir.to_str().unwrap()],
    );
    let oid = git_out(src, &["rev-parse", rev]);
    git(
        dir,
        &[
            "fetch",
            "--quiet",
            src.to_str().unwrap(),
            &format!("{oid}:refs/heads/main"),
        ],
    );
}

/// `git fetch` of `main` (no tags) from `url` in `client` with protocol `version`.
fn fetch_main(client: &Path, url: &str, version: &str) {
    git(
        client,
        &[
            "-c",
            &format!("protocol.version={version}"),
            "fetch",
            "--quiet",
            "--no-tags",
            url,
            "+refs/heads/main:refs/heads/main",
        ],
    );
}

/// Every stored bitmap names exactly what git says its commit reaches.
#[test]
fn each_stored_bitmap_is_what_its_commit_reaches() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = gc_then_push(&server, tmp.path(), "exact");
    let store = server.store();
    let state = store.repo_state("exact").unwrap();
    let closure = state.closure.clone().expect("the GC left a closure");
    let repo = gitstow_odb::Repository::new(store.open(), "exact", gitstow_odb::IndexCache::new());
    let db = repo.live_objects(&state).unwrap();
    let (_, positions) = state.live_closure().expect("closure containers are live");
    let in_db: Vec<usize> = positions.iter().map(|&p| db.live_position(p)).collect();
    let loaded = db.closure_bitmaps(&in_db).expect("the GC wrote bitmaps");
    let view = gitstow_odb::bitmap::Closure {
        db: &db,
        containers: &in_db,
        order: &loaded.order,
    };
    assert!(
        loaded.file.bitmaps.len() >= 4,
        "{}",
        loaded.file.bitmaps.len()
    );
    for tip in &closure.tips {
        let commit = git_out(&src, &["rev-parse", &format!("{tip}^{{commit}}")]);
        let id = gix_hash::ObjectId::from_hex(commit.as_bytes()).unwrap();
        assert!(
            loaded.file.bitmaps.contains_key(&id),
            "tip {commit} has no bitmap"
        );
    }
    for (commit, bits) in &loaded.file.bitmaps {
        let got: BTreeSet<String> = bits.iter().map(|p| view.oid(p).to_string()).collect();
        assert_eq!(got, reach(&src, &commit.to_string()), "bitmap of {commit}");
    }
}

/// A client half the history behind gets exactly what it lacks (fewer objects
/// than `rev-list --objects new --not old`, which only subtracts what the
/// boundary's trees hold), reading few commits, in v2 and v0.
#[test]
fn a_fetch_from_far_behind_takes_what_the_bitmaps_say() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let (src, url) = gc_then_push(&server, tmp.path(), "behind");
    let old = far_behind(&src);
    let lacks: BTreeSet<String> = reach(&src, "main")
        .difference(&reach(&src, &old))
        .cloned()
        .collect();
    for version in ["2", "0"] {
        let client = tmp.path().join(format!("client-v{version}.git"));
        client_at(&src, &client, &old);
        fetch_main(&client, &url, version);
        let line = last_pack_line(&server.logs());
        eprintln!("v{version}: {line}");
        assert_eq!(log_field(&line, "objects"), lacks.len() as u64, "{line}");
        assert!(log_field(&line, "have_bitmap_objects") > 0, "{line}");
        assert!(log_field(&line, "commits_read") < 100, "{line}");
        assert_eq!(
            git_out(&client, &["rev-parse", "main"]),
            git_out(&src, &["rev-parse", "main"])
        );
        fsck(&client);
    }
}

/// Bitmaps overwritten with junk, then deleted: the same fetch gives the
/// same result by the walk (which sends no less than the bitmaps did), and
/// the server says why.
#[test]
fn a_damaged_or_missing_bitmap_falls_back_with_a_warning() {
    let first = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let (src, _) = gc_then_push(&first, tmp.path(), "fallback");
    let store = first.store();
    let state = store.repo_state("fallback").unwrap();
    let key = format!(
        "fallback.git/containers/{}.bitmap",
        state.closure.as_ref().unwrap().containers[0]
    );
    let objects = store.open();
    let expected = git_out(&src, &["rev-parse", "main"]);
    // With the bitmaps, for comparison.
    let client = tmp.path().join("client-bitmaps.git");
    client_at(&src, &client, &far_behind(&src));
    fetch_main(&client, &first.url("fallback"), "2");
    let with_bitmaps = last_pack_line(&first.logs());
    assert!(
        with_bitmaps.contains("have_bitmap_objects"),
        "{with_bitmaps}"
    );
    for (damage, warning) in [
        ("junk", "reachability bitmaps unusable"),
        ("delete", "reachability bitmaps missing"),
    ] {
        match damage {
            "junk" => {
                objects
                    .put(
                        &key,
                        b"not a bitmap file",
                        gitstow_store::PutCondition::None,
                    )
                    .unwrap();
            }
            _ => objects.delete(&key).unwrap(),
        }
        // A new process that cached nothing.
        let server = Server::start_uncached_on(store, &["--no-maintenance"]);
        let client = tmp.path().join(format!("client-{damage}.git"));
        client_at(&src, &client, &far_behind(&src));
        fetch_main(&client, &server.url("fallback"), "2");
        assert_eq!(git_out(&client, &["rev-parse", "main"]), expected);
        fsck(&client);
        let logs = server.logs();
        assert!(logs.contains(warning), "{logs}");
        let line = last_pack_line(&logs);
        assert!(!line.contains("have_bitmap_objects"), "{line}");
        // The walk sends at least as much, and resolves at least as many
        // deltas whose base it cannot prove the client has.
        for figure in ["objects", "resolved_deltas", "bytes"] {
            assert!(
                log_field(&with_bitmaps, figure) <= log_field(&line, figure),
                "{figure}: with bitmaps {with_bitmaps}, without {line}"
            );
        }
        assert!(!logs.contains("panicked"), "{logs}");
    }
}
