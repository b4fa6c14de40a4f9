//! Several `gitstow serve` processes on one S3 bucket, with clients pushing
//! through all of them at once. Always runs against the S3 server of the
//! `S3_*` variables (fails without them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const DAEMONS: usize = 3;
const CLIENTS: usize = 8;
const ROUNDS: usize = 20;

struct Cluster {
    servers: Vec<Server>,
    tmp: tempfile::TempDir,
    clients: Vec<PathBuf>,
}

impl Cluster {
    fn new(repo: &str) -> Cluster {
        let store = TestStore::s3();
        let servers: Vec<Server> = (0..DAEMONS)
            .map(|_| Server::start_on(Some(&store), &[], &[]))
            .collect();
        let tmp = tempfile::tempdir().unwrap();
        let seed = tmp.path().join("seed");
        init_repo(&seed);
        commit_files(&seed, &[("README", "cluster\n")], "root");
        git(&seed, &["push", "--quiet", &servers[0].url(repo), "main"]);
        let clients = (0..CLIENTS)
            .map(|i| {
                let dir = tmp.path().join(format!("client{i}"));
                let url = servers[i % DAEMONS].url(repo);
                git(
                    tmp.path(),
                    &["clone", "--quiet", &url, dir.to_str().unwrap()],
                );
                git(&dir, &["config", "user.name", &format!("client {i}")]);
                git(
                    &dir,
                    &["config", "user.email", &format!("c{i}@example.com")],
                );
                dir
            })
            .collect();
        Cluster {
            servers,
            tmp,
            clients,
        }
    }
}

/// Runs `git args` in `dir` and returns whether it succeeded, with stderr.
fn try_git(dir: &Path, args: &[&str]) -> (bool, String) {
    let out: std::process::Output = git_cmd(dir).args(args).output().expect("git runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn commit(dir: &Path, file: &str, content: &str) -> String {
    std::fs::write(dir.join(file), content).unwrap();
    git(dir, &["add", file]);
    git(dir, &["commit", "--quiet", "-m", content.trim()]);
    git_out(dir, &["rev-parse", "HEAD"])
}

/// 8 clients, each on its own branch, push through 3 daemons at once for 20
/// rounds: every push lands and every branch ends at its client's tip.
#[test]
fn distinct_branches_all_land() {
    let cluster = Cluster::new("distinct");
    let mut landed = 0;
    for round in 0..ROUNDS {
        let handles: Vec<_> = cluster
            .clients
            .iter()
            .enumerate()
            .map(|(i, dir)| {
                let dir = dir.clone();
                let url = cluster.servers[(i + round) % DAEMONS].url("distinct");
                std::thread::spawn(move || {
                    let tip = commit(
                        &dir,
                        &format!("f{i}"),
                        &format!("client {i} round {round}\n"),
                    );
                    let (ok, err) = try_git(
                        &dir,
                        &["push", "--quiet", &url, &format!("HEAD:refs/heads/c{i}")],
                    );
                    (i, tip, ok, err)
                })
            })
            .collect();
        for h in handles {
            let (i, _tip, ok, err) = h.join().unwrap();
            assert!(
                ok,
                "round {round}: client {i}'s push to its own branch failed: {err}"
            );
            landed += 1;
        }
    }
    let refs = ls_remote(&cluster.servers[1].url("distinct"));
    for (i, dir) in cluster.clients.iter().enumerate() {
        let tip = git_out(dir, &["rev-parse", "HEAD"]);
        assert!(
            refs.contains(&format!("{tip}\trefs/heads/c{i}")),
            "branch c{i} lost updates:\n{refs}"
        );
    }
    println!(
        "distinct branches: {landed} of {} pushes landed, 0 lost",
        ROUNDS * CLIENTS
    );
    assert_eq!(landed, ROUNDS * CLIENTS);
    let mirror = cluster.tmp.path().join("check.git");
    git(
        cluster.tmp.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            &cluster.servers[2].url("distinct"),
            mirror.to_str().unwrap(),
        ],
    );
    fsck(&mirror);
}

/// 8 clients push to the same branch through 3 daemons at once, for 20
/// rounds: exactly one wins each round, the branch ends at the winner's
/// commit, and no accepted commit is ever lost.
#[test]
fn one_branch_has_exactly_one_winner_per_round() {
    let cluster = Cluster::new("contended");
    let mut winners = Vec::new();
    let mut rejected = 0;
    for round in 0..ROUNDS {
        for dir in &cluster.clients {
            git(dir, &["fetch", "--quiet", "origin"]);
            git(dir, &["reset", "--quiet", "--hard", "origin/main"]);
        }
        let handles: Vec<_> = cluster
            .clients
            .iter()
            .enumerate()
            .map(|(i, dir)| {
                let dir = dir.clone();
                let url = cluster.servers[(i + round) % DAEMONS].url("contended");
                std::thread::spawn(move || {
                    let tip = commit(&dir, "shared", &format!("client {i} round {round}\n"));
                    let (ok, err) =
                        try_git(&dir, &["push", "--quiet", &url, "HEAD:refs/heads/main"]);
                    (i, tip, ok, err)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let won: Vec<_> = results.iter().filter(|r| r.2).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: {} pushes reported success: {:?}",
            won.len(),
            results
                .iter()
                .map(|r| (r.0, r.2, r.3.lines().last().unwrap_or("")))
                .collect::<Vec<_>>()
        );
        for r in results.iter().filter(|r| !r.2) {
            assert!(
                r.3.contains("failed to update ref")
                    || r.3.contains("fetch first")
                    || r.3.contains("non-fast-forward")
                    || r.3.contains("stale info"),
                "round {round}: client {} was refused without git's reason: {}",
                r.0,
                r.3
            );
            rejected += 1;
        }
        let tip = ls_remote(&cluster.servers[round % DAEMONS].url("contended"));
        assert!(
            tip.starts_with(&won[0].1),
            "round {round}: main is not the winner's commit: {tip}"
        );
        winners.push(won[0].1.clone());
    }
    // No lost update: every accepted commit is in the final history.
    let check = cluster.tmp.path().join("check");
    git(
        cluster.tmp.path(),
        &[
            "clone",
            "--quiet",
            &cluster.servers[0].url("contended"),
            check.to_str().unwrap(),
        ],
    );
    for w in &winners {
        let status = Command::new("git")
            .current_dir(&check)
            .args(["merge-base", "--is-ancestor", w, "HEAD"])
            .status()
            .unwrap();
        assert!(
            status.success(),
            "accepted commit {w} is not in the final history"
        );
    }
    assert_eq!(
        git_out(&check, &["rev-list", "--count", "HEAD"]),
        (ROUNDS + 1).to_string()
    );
    println!(
        "one branch: {ROUNDS} rounds, {} winners, {rejected} rejected, 0 lost updates",
        winners.len()
    );
    fsck(&check);
}

/// The container cache of each daemon is its own: with the default
/// settings, daemons of one store on one host take `DIR`, `DIR-1`, … (they
/// used to share one directory, each deleting the other's downloads at
/// start and applying its own cap to both).
#[test]
fn daemons_on_one_host_take_cache_directories_of_their_own() {
    let cluster = Cluster::new("cache");
    let dirs: Vec<String> = cluster
        .servers
        .iter()
        .map(|s| {
            let logs = s.logs();
            let line = logs
                .lines()
                .find(|l| l.contains("container cache"))
                .unwrap_or_else(|| panic!("no cache line in {logs}"))
                .to_owned();
            line.split("dir=")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap()
                .to_owned()
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = dirs.iter().collect();
    assert_eq!(distinct.len(), DAEMONS, "{dirs:?}");
    assert!(dirs[1].starts_with(dirs[0].as_str()), "{dirs:?}");
    // Every daemon serves from its own cache.
    for (i, s) in cluster.servers.iter().enumerate() {
        let dst = cluster.tmp.path().join(format!("check{i}"));
        git(
            cluster.tmp.path(),
            &["clone", "--quiet", &s.url("cache"), dst.to_str().unwrap()],
        );
    }
    for d in &dirs {
        let cached = std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.'))
            })
            .count();
        assert!(cached > 0, "nothing cached in {d}");
    }
}

/// Finding 11 of the hardening issue, on the real S3 server: a file of the
/// container cache damaged while no process held the directory (cut to
/// half its size) is not served after a restart: the first read checks it
/// against the store, drops it and reads the object again, so the clone
/// is whole.
#[test]
fn cache_files_cut_while_stopped_are_read_again() {
    let store = TestStore::s3();
    let mut server = Server::start_uncached_on(&store, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    for i in 0..5 {
        commit_files(
            &work,
            &[("f.txt", format!("version {i}\n").repeat(200).as_str())],
            &format!("c{i}"),
        );
    }
    git(&work, &["push", "--quiet", &server.url("cut"), "main"]);
    let first = tmp.path().join("first");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            &server.url("cut"),
            first.to_str().unwrap(),
        ],
    );
    let logs = server.logs();
    let dir = logs
        .lines()
        .find_map(|l| l.split("container cache dir=").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no cache line in {logs}"))
        .to_owned();
    server.kill();
    let mut cut = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        cut += 1;
    }
    assert!(cut > 0, "nothing cached in {dir}");
    server.start_again();
    let second = tmp.path().join("second");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            &server.url("cut"),
            second.to_str().unwrap(),
        ],
    );
    assert_eq!(
        git_out(&second, &["rev-parse", "HEAD"]),
        git_out(&first, &["rev-parse", "HEAD"])
    );
    fsck(&second);
    assert!(
        server.logs().contains("is not the stored object"),
        "the cut copies were noticed"
    );
}

/// Issue 48: an idle instance with no webhook configured lists the bucket
/// a few times a minute, not every 5 s (17,000 LISTs a day, on the bill):
/// the outbox scan waits 5, 10, 20, 40 … s while it finds nothing.
#[test]
fn an_idle_instance_seldom_lists_the_bucket() {
    let store = TestStore::s3();
    let server = Server::start_on(Some(&store), &[], &[]);
    let lists = || -> u64 {
        let text = http(server.port(), "GET", "/metrics", &[], b"").text();
        text.lines()
            .find(|l| l.starts_with("gitstow_store_requests_total{op=\"list\",outcome=\"sent\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no LIST counter in {text}"))
    };
    let before = lists();
    std::thread::sleep(std::time::Duration::from_secs(60));
    let listed = lists() - before;
    eprintln!("LIST requests of an idle instance over 60 s: {listed}");
    // 5 + 10 + 20 + 40 s: at most 4 outbox scans in a minute (12 before),
    // and one more of anything else.
    assert!(listed <= 5, "{listed} LISTs in a minute of idleness");
}
