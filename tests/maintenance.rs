//! Repository maintenance with the real `git` against `gitstow serve`:
//! automatic geometric compaction after pushes, `gitstow maintain`, the
//! grace period of retired containers, pushes racing maintenance in both
//! orders, two maintenance runs at once, and SIGKILL at many points of a run.
//! Every scenario ends with clones identical to the source and
//! `git fsck --full --strict` clean.

mod common;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

/// Pushes `n` commits to `url`, one push each, from a fresh work tree at
/// `work`; returns the tip.
fn push_commits(work: &Path, url: &str, n: usize, tag: &str) -> String {
    if !work.exists() {
        init_repo(work);
    }
    let mut tip = String::new();
    for i in 0..n {
        let body = format!("{tag} {i}\n").repeat(20 + i);
        tip = commit_files(
            work,
            &[
                (&format!("{tag}/file-{i}.txt"), &body),
                ("shared.txt", &format!("{tag} shared {i}\n")),
            ],
            &format!("{tag} commit {i}"),
        );
        git(work, &["push", "--quiet", url, "main"]);
    }
    tip
}

fn live(store: &TestStore, name: &str) -> Vec<String> {
    store
        .repo_state(name)
        .expect("repository exists")
        .containers
        .iter()
        .map(|c| c.id.clone())
        .collect()
}

/// Waits up to 60 s for automatic maintenance to bring `name` within
/// 2·⌈log2 pushes⌉ live containers; returns that bound and the count.
fn settled_count(store: &TestStore, name: &str, pushes: usize) -> (usize, usize) {
    let bound = 2 * (usize::BITS - pushes.leading_zeros()) as usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut count = live(store, name).len();
    while count > bound && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        count = live(store, name).len();
    }
    (bound, count)
}

/// Runs `gitstow maintain args` until it no longer finds the lease held (a
/// server's own maintenance may hold it for a moment; 60 s at most);
/// returns its stdout.
fn maintain_when_free(store: &TestStore, args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let said = assert_maintained(&store.maintain(args, &[]));
        if !said.contains("lease held") || Instant::now() > deadline {
            return said;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// 24 pushes with automatic maintenance on: the container count stays
/// logarithmic while they land; `gitstow maintain --full` then merges the
/// rest; clones before and after are identical and fsck-clean, and with a
/// grace of 0 the replaced containers are gone from the store.
#[test]
fn pushes_are_compacted_and_clones_stay_identical() {
    let server = Server::start_with(&["--maintenance-grace", "3600"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("org/many");
    let pushes = 24;
    let tip = push_commits(&tmp.path().join("work"), &url, pushes, "m");
    // Automatic maintenance runs after each push, in the background.
    let (bound, count) = settled_count(server.store(), "org/many", pushes); // 2·⌈log2 24⌉ = 10
    assert!(
        count <= bound,
        "{count} live containers after {pushes} pushes (bound {bound})\n{}",
        server.logs()
    );
    let retired = server.store().retired("org/many").len();
    assert!(retired > 0, "automatic maintenance retired nothing");
    let metrics = http(server.port(), "GET", "/metrics", &[], b"").text();
    let compacted = metrics
        .lines()
        .find(|l| l.starts_with("gitstow_maintenance_runs_total{result=\"compacted\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(compacted >= 1.0, "{metrics}");
    assert!(
        metrics.contains("gitstow_maintenance_bytes_rewritten_total"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gitstow_maintenance_retired_containers"),
        "{metrics}"
    );
    assert!(server.logs().contains("maintenance"), "{}", server.logs());
    let before = mirror_checked(&url, tmp.path(), "before.git");
    assert!(before.0.contains(&tip), "{}", before.0);

    // The server's own maintenance may still hold the lease for a moment.
    let said = maintain_when_free(
        server.store(),
        &["--repo", "org/many", "--full", "--grace", "0"],
    );
    assert!(said.contains(" -> 1, bytes"), "{said}");
    let live_now = live(server.store(), "org/many");
    assert_eq!(live_now.len(), 1);
    // Grace 0: every container the state does not name is gone.
    assert_eq!(
        stored_bins(server.store(), "org/many"),
        live_now.iter().cloned().collect::<BTreeSet<_>>()
    );
    let after = mirror_checked(&url, tmp.path(), "after.git");
    assert_eq!(before, after);
    // The repository still takes pushes on top of the merged container.
    let tip2 = push_commits(&tmp.path().join("work"), &url, 2, "n");
    assert!(ls_remote(&url).contains(&tip2));
    mirror_checked(&url, tmp.path(), "again.git");
}

/// Containers replaced by a merge stay in the store for the grace period
/// (a reader of the older state can still read every object), then a later
/// run deletes them.
#[test]
fn retired_containers_are_deleted_only_after_the_grace_period() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("graced");
    push_commits(&tmp.path().join("work"), &url, 6, "g");
    let old = server.store().repo_state("graced").unwrap();
    let old_ids: BTreeSet<String> = old.containers.iter().map(|c| c.id.clone()).collect();
    assert_eq!(old_ids.len(), 6);
    let expected = mirror_checked(&url, tmp.path(), "a.git");

    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "graced", "--full", "--grace", "4"], &[]),
    );
    assert!(said.contains("containers 6 -> 1"), "{said}");
    assert!(said.contains("6 retired held"), "{said}");
    let bins = stored_bins(server.store(), "graced");
    assert!(
        old_ids.is_subset(&bins),
        "a retired container was deleted early"
    );

    // A reader that loaded the older state reads every object of it.
    let repo = gitstow_odb::Repository::new(
        server.store().open(),
        "graced",
        gitstow_odb::IndexCache::new(),
    );
    let db = repo
        .objects(&old)
        .expect("the older state's containers load");
    let mut cache = gitstow_odb::ObjectCache::new(1 << 20);
    let oids: Vec<_> = db.entries().map(|e| e.oid).collect();
    assert!(!oids.is_empty());
    for oid in &oids {
        assert!(
            db.read(oid, &mut cache).unwrap().is_some(),
            "{oid} unreadable"
        );
    }

    // Within the grace period nothing is deleted.
    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "graced", "--grace", "4"], &[]),
    );
    assert!(said.contains("deleted 0 retired"), "{said}");
    assert!(old_ids.is_subset(&stored_bins(server.store(), "graced")));
    std::thread::sleep(Duration::from_secs(5));
    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "graced", "--grace", "4"], &[]),
    );
    assert!(said.contains("deleted 6 retired"), "{said}");
    let bins = stored_bins(server.store(), "graced");
    assert!(bins.is_disjoint(&old_ids), "{bins:?}");
    assert_eq!(bins.len(), 1);
    assert_eq!(mirror_checked(&url, tmp.path(), "b.git"), expected);
}

/// A push lands while automatic maintenance sits between reading the state
/// and committing its merge: the push is not held up, and the merge is
/// re-applied on top of it.
#[test]
fn a_push_during_a_merge_lands_and_the_merge_is_reapplied() {
    let server = Server::start_on(
        None,
        &["--maintenance-grace", "3600"],
        &[("GITSTOW_TEST_MAINTENANCE_COMMIT_DELAY_MS", "2500")],
    );
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("race1");
    let work = tmp.path().join("work");
    // The first push: its container is the closure, which compaction
    // leaves alone (the first pass writes its bitmaps: awaited). Then two
    // pushes of alike size: the geometric rule merges those two.
    push_commits(&work, &url, 1, "i");
    await_closure_bitmaps(&server, "race1");
    push_commits(&work, &url, 2, "r");
    std::thread::sleep(Duration::from_millis(800));
    let tip = push_commits(&work, &url, 1, "during");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server
        .logs()
        .contains("while merging (a push committed); re-applying")
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        server
            .logs()
            .contains("while merging (a push committed); re-applying"),
        "{}",
        server.logs()
    );
    // Wait for the re-applied merge to commit.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.store().retired("race1").is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let state = server.store().repo_state("race1").unwrap();
    assert!(
        !server.store().retired("race1").is_empty(),
        "the merge never committed"
    );
    assert_eq!(inline_ref(&state, "refs/heads/main"), tip);
    let (refs, _) = mirror_checked(&url, tmp.path(), "c.git");
    assert!(refs.contains(&tip));
    let work_objects = refs_and_objects(&work).1;
    let clone_objects = refs_and_objects(&tmp.path().join("c.git")).1;
    assert_eq!(work_objects, clone_objects);
}

/// `gitstow maintain` commits a merge while a push sits between reading the
/// state and its compare-and-swap (its state write delayed): the push's
/// write fails, it re-reads, and lands on top of the merge.
#[test]
fn a_merge_during_a_push_lets_the_push_land() {
    // The third state write (the third push's commit) waits 4 s.
    let server = Server::start_on(
        None,
        &["--no-maintenance"],
        &[("GITSTOW_FAULTS", "put:/state:delay=4000:1:2")],
    );
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("race2");
    let work = tmp.path().join("work");
    push_commits(&work, &url, 2, "s");
    commit_files(&work, &[("late.txt", "late\n")], "late");
    let tip = git_out(&work, &["rev-parse", "HEAD"]);
    let pusher = {
        let work = work.clone();
        let url = url.clone();
        std::thread::spawn(move || git(&work, &["push", "--quiet", &url, "main"]))
    };
    std::thread::sleep(Duration::from_millis(1500));
    let said = assert_maintained(&server.store().maintain(&["--repo", "race2", "--full"], &[]));
    assert!(said.contains("containers 2 -> 1"), "{said}");
    pusher.join().expect("the push succeeds");
    let logs = server.logs();
    assert!(logs.contains("state_retries=1"), "{logs}");
    let state = server.store().repo_state("race2").unwrap();
    assert_eq!(inline_ref(&state, "refs/heads/main"), tip);
    assert_eq!(state.containers.len(), 2, "the merged one and the push's");
    let (refs, objects) = mirror_checked(&url, tmp.path(), "d.git");
    assert!(refs.contains(&tip));
    assert_eq!(objects, refs_and_objects(&work).1);
}

/// Two `gitstow maintain` runs on one repository at once: the lease lets one
/// merge, the other stands aside; the repository ends merged and intact.
#[test]
fn two_maintenance_runs_at_once() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("twice");
    let work = tmp.path().join("work");
    push_commits(&work, &url, 8, "t");
    let expected = mirror_checked(&url, tmp.path(), "e.git");
    let store = server.store().clone();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                store.maintain(&["--repo", "twice", "--full", "--grace", "0"], &[])
            })
        })
        .collect();
    let outs: Vec<String> = runs
        .into_iter()
        .map(|h| assert_maintained(&h.join().unwrap()))
        .collect();
    let merged = outs
        .iter()
        .filter(|o| o.contains("containers 8 -> 1"))
        .count();
    assert!(merged >= 1, "{outs:?}");
    assert_eq!(live(server.store(), "twice").len(), 1);
    assert_eq!(mirror_checked(&url, tmp.path(), "f.git"), expected);
    // Whatever a losing run wrote is found by the next scan and removed.
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "twice", "--grace", "0"], &[]),
    );
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "twice", "--grace", "0"], &[]),
    );
    assert_eq!(stored_bins(server.store(), "twice").len(), 1);
}

/// SIGKILL at 14 points of a maintenance run (taking the lease, downloading
/// a source, uploading the merged `.bin` and `.idx`, before and after the
/// commit, before and after writing the retired list, in the deletions, in
/// the orphan scan, renewing the lease): after
/// each, the repository clones identical and fsck-clean, and a later run
/// finishes the job and leaves no container behind that the state does not
/// name.
#[test]
fn sigkill_anywhere_in_maintenance_leaves_a_repository_that_clones() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let points = [
        "put:maintenance:kill:1",
        "get:.bin:kill:1",
        "get:.bin:kill:1:2",
        "put_file:.bin:kill:1",
        "put_file:.bin:kill-after:1",
        "put:.idx:kill:1",
        "put:/state:kill:1",
        "put:/state:kill-after:1",
        "delete:.idx:kill:1",
        "delete:.bin:kill:1:2",
        "list::kill:1",
        "put:/retired:kill:1",
        "put:/retired:kill-after:1:1",
        "put:maintenance:kill:1:1",
    ];
    for (n, point) in points.iter().enumerate() {
        let name = format!("kill-{n}");
        let url = server.url(&name);
        let work = tmp.path().join(format!("work-{n}"));
        push_commits(&work, &url, 4, "k");
        // One orphan for the scan to find: a maintained, then abandoned copy.
        let out = server.store().maintain(
            &[
                "--repo",
                &name,
                "--full",
                "--grace",
                "0",
                "--lease-ttl",
                "1",
            ],
            &[("GITSTOW_FAULTS", point)],
        );
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: the run was not killed there: {}\n{}",
            stdout(&out),
            String::from_utf8_lossy(&out.stderr)
        );
        let (refs, objects) = mirror_checked(&url, tmp.path(), &format!("k{n}.git"));
        assert_eq!(objects, refs_and_objects(&work).1, "{point}");
        assert!(
            refs.contains(&git_out(&work, &["rev-parse", "HEAD"])),
            "{point}"
        );
        // The lease of the killed run expires; later runs finish the job.
        std::thread::sleep(Duration::from_millis(2100));
        for _ in 0..2 {
            assert_maintained(&server.store().maintain(
                &[
                    "--repo",
                    &name,
                    "--full",
                    "--grace",
                    "0",
                    "--lease-ttl",
                    "1",
                ],
                &[],
            ));
        }
        let live: BTreeSet<String> = live(server.store(), &name).into_iter().collect();
        assert_eq!(live.len(), 1, "{point}");
        assert_eq!(
            stored_bins(server.store(), &name),
            live,
            "{point}: leftovers"
        );
        let again = mirror_checked(&url, tmp.path(), &format!("k{n}-after.git"));
        assert_eq!(again.1, objects, "{point}");
    }
}

/// Two `gitstow serve` instances on one store, each with automatic
/// maintenance, take the pushes to one repository in turn: the lease keeps
/// their runs apart, the container count stays logarithmic, clones from
/// either are identical and fsck-clean, and what a run replaced is deleted
/// once the grace period is over.
#[test]
fn two_servers_maintain_one_repository() {
    let a = Server::start_with(&["--maintenance-grace", "3600"]);
    let b = Server::start_on(Some(a.store()), &["--maintenance-grace", "3600"], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let pushes = 16;
    let mut tip = String::new();
    for i in 0..pushes {
        let body = format!("both {i}\n").repeat(30 + i);
        tip = commit_files(
            &work,
            &[(&format!("f/{i}.txt"), &body), ("shared.txt", &body)],
            &format!("commit {i}"),
        );
        let url = if i % 2 == 0 {
            a.url("org/both")
        } else {
            b.url("org/both")
        };
        git(&work, &["push", "--quiet", &url, "main"]);
    }
    let (bound, count) = settled_count(a.store(), "org/both", pushes); // 2·⌈log2 16⌉ = 10
    assert!(
        count <= bound,
        "{count} live containers after {pushes} pushes"
    );
    let runs = |s: &Server| {
        s.logs()
            .lines()
            .filter(|l| l.contains(" maintenance ") || l.ends_with(" maintenance"))
            .filter(|l| l.contains("merged="))
            .count()
    };
    assert!(
        runs(&a) + runs(&b) >= 1,
        "no maintenance ran\n{}\n{}",
        a.logs(),
        b.logs()
    );
    let from_a = mirror_checked(&a.url("org/both"), tmp.path(), "a.git");
    let from_b = mirror_checked(&b.url("org/both"), tmp.path(), "b.git");
    assert_eq!(from_a, from_b);
    assert!(from_a.0.contains(&tip), "{}", from_a.0);
    // The grace period over, a run leaves only what the state names.
    for _ in 0..2 {
        maintain_when_free(a.store(), &["--repo", "org/both", "--grace", "0"]);
    }
    let named: BTreeSet<String> = live(a.store(), "org/both").into_iter().collect();
    assert_eq!(stored_bins(a.store(), "org/both"), named);
    assert_eq!(
        mirror_checked(&b.url("org/both"), tmp.path(), "c.git"),
        from_a
    );
}

/// `gitstow maintain`'s errors an operator meets first: a local store
/// directory that does not exist (not "no repository"), an S3 endpoint that
/// cannot be reached (one line, without the SDK's error chain), and
/// `--repo name.git` read as `name`.
#[test]
fn maintain_errors_are_clear() {
    let bin = env!("CARGO_BIN_EXE_gitstow");
    let run = |args: &[&str]| {
        std::process::Command::new(bin)
            .arg("maintain")
            .args(args)
            .env("AWS_ACCESS_KEY_ID", "key")
            .env("AWS_SECRET_ACCESS_KEY", "secret")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let out = run(&["--store", "file:///nonexistent/gitstow-store", "--all"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("does not exist"), "{err}");

    let out = run(&[
        "--store",
        "s3://bucket",
        "--s3-endpoint",
        "http://127.0.0.1:1",
        "--all",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("cannot reach the S3 endpoint"), "{err}");
    for internal in ["DispatchFailure", "hyper", "ConnectorError", "Os {"] {
        assert!(!err.contains(internal), "{internal} in:\n{err}");
    }

    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    push_commits(&tmp.path().join("work"), &server.url("dotgit"), 1, "d");
    let said = assert_maintained(&server.store().maintain(&["--repo", "dotgit.git"], &[]));
    assert!(said.starts_with("dotgit: "), "{said}");
}

/// Hardening, finding 1: instance A (default grace) takes pushes whose
/// containers wait seconds in the store before their commit (A's commit
/// graph uploads are delayed), while instance B on the same store runs
/// maintenance with a grace of 1 s and an orphan scan every second, kept
/// busy by pushes to another branch. B's scan takes A's uploads for a
/// failed push's and deletes them; A must then refuse to name them (`ng`,
/// push again), never answer `ok` for objects that are gone. Repeated;
/// `gitstow fsck` is clean and every branch clones after each round.
#[test]
fn a_push_never_commits_containers_another_instance_deleted() {
    let a = Server::start_on(None, &[], &[("GITSTOW_FAULTS", "put:.graph:delay=4000")]);
    let b = Server::start_on(
        Some(a.store()),
        &[
            "--maintenance-grace",
            "1",
            "--maintenance-scan-interval",
            "1",
        ],
        &[],
    );
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "first\n")], "first");
    git(&work, &["push", "--quiet", &b.url("race"), "main"]);
    let side = tmp.path().join("side");
    git(
        tmp.path(),
        &["clone", "--quiet", &b.url("race"), side.to_str().unwrap()],
    );
    let mut refused = 0;
    for round in 0..3 {
        let body = format!("round {round}\n").repeat(200);
        let tip = commit_files(&work, &[(&format!("r{round}.txt"), &body)], "slow");
        let url = a.url("race");
        let dir = work.clone();
        let slow = std::thread::spawn(move || {
            git_cmd(&dir)
                .args(["push", "--porcelain", &url, "main"])
                .output()
                .unwrap()
        });
        // Pushes to B until A answers: each queues a maintenance pass on B.
        let mut i = 0;
        while !slow.is_finished() {
            commit_files(&side, &[("side.txt", &format!("{round} {i}\n"))], "side");
            let _ = git_cmd(&side)
                .args(["push", "--quiet", &b.url("race"), "HEAD:refs/heads/side"])
                .output();
            i += 1;
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = slow.join().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            // Landed: its objects must be in the store.
            let clone = tmp.path().join(format!("check-{round}"));
            git(
                tmp.path(),
                &["clone", "--quiet", &b.url("race"), clone.to_str().unwrap()],
            );
            assert_eq!(git_out(&clone, &["rev-parse", "origin/main"]).trim(), tip);
            fsck(&clone);
        } else {
            assert!(
                said.contains("pruned by maintenance; push again"),
                "round {round}: {said}\n{}",
                a.logs()
            );
            refused += 1;
            // As git: the refused commit is pushed again.
            git(&work, &["reset", "--quiet", "--hard", "HEAD~1"]);
        }
        // fsck reads one state and then every container it names: with B
        // deleting what a grace of 1 s ago stopped being named, a run that
        // takes longer may see a container go that a newer state no
        // longer names. A state naming a missing container fails every run.
        let mut o = a.store().admin(&["fsck", "--repo", "race"]);
        for _ in 0..3 {
            if o.status.success() {
                break;
            }
            eprintln!("fsck, again: {}", String::from_utf8_lossy(&o.stdout));
            std::thread::sleep(Duration::from_millis(500));
            o = a.store().admin(&["fsck", "--repo", "race"]);
        }
        assert!(
            o.status.success(),
            "round {round}: fsck failed after the push said:\n{said}\n{}{}\nA:\n{}\nB:\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            a.logs(),
            b.logs()
        );
    }
    // The race was run: B deleted A's uploads at least once.
    assert!(refused >= 1, "no push met the deletion\nB:\n{}", b.logs());
}

/// A grace period shorter than an hour is refused at start, by `serve` and
/// by `maintain` (tests set `GITSTOW_TEST_SHORT_GRACE=1` to shorten it).
#[test]
fn a_short_grace_is_refused() {
    let bin = env!("CARGO_BIN_EXE_gitstow");
    let tmp = tempfile::tempdir().unwrap();
    let store = format!("file://{}", tmp.path().display());
    for args in [
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--maintenance-grace",
            "0",
        ],
        vec![
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--maintenance-grace",
            "3599",
        ],
        vec!["maintain", "--all", "--grace", "1"],
    ] {
        let mut child = std::process::Command::new(bin)
            .args(&args)
            .args(["--store", &store])
            .env_remove("GITSTOW_TEST_SHORT_GRACE")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A server that accepted the setting would run on: stop it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("shorter than 3600 seconds"), "{args:?}: {err}");
    }
}
