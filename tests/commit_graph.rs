//! Commit graphs: every container a push or maintenance writes has a
//! `.graph` side file with each of its commits' tree, parents, time and
//! generation number (git's topological level); walks read commits from it;
//! a damaged or missing graph costs a warning and time, never an answer.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use common::*;
use gitstow_odb::graph::CommitGraph;

/// Every commit of `src`'s refs with its topological level, from git:
/// 1 for a root, else 1 + the largest of its parents'.
fn git_generations(src: &Path) -> BTreeMap<String, u32> {
    let listing = git_out(
        src,
        &[
            "rev-list",
            "--all",
            "--topo-order",
            "--reverse",
            "--parents",
        ],
    );
    let mut level: BTreeMap<String, u32> = BTreeMap::new();
    for line in listing.lines() {
        let mut ids = line.split_whitespace();
        let commit = ids.next().unwrap().to_owned();
        let g = ids.map(|p| level[p] + 1).max().unwrap_or(1);
        level.insert(commit, g);
    }
    level
}

/// The generation each of `commits` has in the graphs of repository
/// `name`'s live containers; panics if a live container has no graph.
fn stored_generations(store: &TestStore, name: &str, commits: &[&String]) -> HashMap<String, u32> {
    let state = store.repo_state(name).expect("repository exists");
    let objects = store.open();
    let mut out = HashMap::new();
    for c in &state.containers {
        let key = format!("{name}.git/containers/{}.graph", c.id);
        let (bytes, _) = objects
            .get(&key)
            .unwrap()
            .unwrap_or_else(|| panic!("container {} has no graph", c.id));
        let graph = CommitGraph::decode(&bytes).unwrap();
        for oid in commits {
            let id = gix_hash::ObjectId::from_hex(oid.as_bytes()).unwrap();
            if let Some(found) = graph.find(&id) {
                out.insert((*oid).clone(), found.generation);
            }
        }
    }
    out
}

fn assert_generations_match(store: &TestStore, name: &str, src: &Path, when: &str) {
    let expected = git_generations(src);
    let stored = stored_generations(store, name, &expected.keys().collect::<Vec<_>>());
    for (oid, g) in &expected {
        let Some(got) = stored.get(oid) else {
            panic!("{when}: commit {oid} is in no graph");
        };
        assert_eq!(got, g, "{when}: generation of {oid}");
    }
}

/// Pushes in three steps (each one container with its graph, the later
/// ones naming parents stored earlier), then GC: every commit is in a graph
/// with git's topological level, before and after maintenance rewrites the
/// containers.
#[test]
fn every_commit_is_in_a_graph_with_gits_generation() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 21,
            commits: 240,
            branches: 4,
            merge_every: 7,
            ..Default::default()
        },
    );
    let url = server.url("graphs");
    for behind in [120, 40] {
        force_main(
            &src,
            &url,
            &git_out(&src, &["rev-parse", &format!("main~{behind}")]),
        );
    }
    // A client at main~40, to fetch the rest after the GC.
    let client = tmp.path().join("client.git");
    git(
        tmp.path(),
        &["clone", "--quiet", "--bare", &url, client.to_str().unwrap()],
    );
    git(&src, &["push", "--quiet", "--mirror", &url]);
    let store = server.store();
    assert!(store.repo_state("graphs").unwrap().containers.len() >= 3);
    assert_generations_match(store, "graphs", &src, "after pushes");
    assert_maintained(&store.maintain(&["--repo", "graphs", "--gc", "--grace", "0"], &[]));
    assert_generations_match(store, "graphs", &src, "after GC");
    // The walk of an incremental fetch reads its commits from the graphs.
    git(
        &client,
        &["fetch", "--quiet", "origin", "+refs/heads/*:refs/heads/*"],
    );
    let line = last_pack_line(&server.logs());
    assert!(log_field(&line, "commits_read") > 0, "{line}");
    assert!(log_field(&line, "graph_commits") > 0, "{line}");
    assert_eq!(log_field(&line, "graph_misses"), 0, "{line}");
    fsck(&client);
}

/// A graph overwritten with junk and another deleted: fetches and clones
/// give the same answer as before, read the commits instead, and the
/// server logs why.
#[test]
fn a_damaged_or_missing_graph_falls_back_with_a_warning() {
    let first = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 22,
            commits: 160,
            ..Default::default()
        },
    );
    let url = first.url("damaged");
    force_main(&src, &url, &git_out(&src, &["rev-parse", "main~60"]));
    // A client at main~60 (one branch), to fetch the rest.
    let behind = tmp.path().join("behind.git");
    git(
        tmp.path(),
        &["clone", "--quiet", "--bare", &url, behind.to_str().unwrap()],
    );
    git(&src, &["push", "--quiet", "--mirror", &url]);

    // A mirror clone, then the client behind fetching main: what each
    // received, and the server's log line of each.
    let fetch = |server: &Server, dir: &str| {
        let url = server.url("damaged");
        let cloned = mirror_checked(&url, tmp.path(), dir);
        let clone_line = last_pack_line(&server.logs());
        let client = tmp.path().join(format!("{dir}-fetch"));
        copy_dir(&behind, &client);
        git(
            &client,
            &["fetch", "--quiet", &url, "+refs/heads/main:refs/heads/main"],
        );
        fsck(&client);
        let fetch_line = last_pack_line(&server.logs());
        assert_ne!(clone_line, fetch_line, "the fetch sent no pack");
        (cloned, refs_and_objects(&client), clone_line, fetch_line)
    };
    let (clone_before, fetch_before, clone_line, fetch_line) = fetch(&first, "before.git");
    assert_eq!(clone_before, refs_and_objects(&src));
    for line in [&clone_line, &fetch_line] {
        assert!(log_field(line, "commits_read") > 0, "{line}");
        assert!(log_field(line, "graph_commits") > 0, "{line}");
        assert_eq!(log_field(line, "graph_misses"), 0, "{line}");
    }

    let store = first.store();
    let state = store.repo_state("damaged").unwrap();
    assert!(state.containers.len() >= 2);
    let objects = store.open();
    let graph_key = |i: usize| format!("damaged.git/containers/{}.graph", state.containers[i].id);
    objects
        .put(
            &graph_key(0),
            b"junk, not a commit graph",
            gitstow_store::PutCondition::None,
        )
        .unwrap();
    objects.delete(&graph_key(1)).unwrap();
    // A new process that cached nothing.
    let server = Server::start_uncached_on(store, &["--no-maintenance"]);

    let (clone_after, fetch_after, clone_line_after, fetch_line_after) =
        fetch(&server, "after.git");
    assert_eq!(clone_after, clone_before);
    assert_eq!(fetch_after, fetch_before);
    for (before, after) in [
        (&clone_line, &clone_line_after),
        (&fetch_line, &fetch_line_after),
    ] {
        assert_eq!(
            log_field(after, "objects"),
            log_field(before, "objects"),
            "{after}"
        );
        assert!(log_field(after, "graph_misses") > 0, "{after}");
    }
    let logs = server.logs();
    assert!(logs.contains("commit graph unusable"), "{logs}");
    assert!(logs.contains("commit graph missing"), "{logs}");
    assert!(!logs.contains("panicked"), "{logs}");
}

/// Copies directory `from` to `to` (a bare repository).
fn copy_dir(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}
