//! Garbage collection with the real `git` against `gitstow serve`: objects of
//! a force push and of a deleted branch leave the live containers at once and
//! the store only after the grace period; a GC'd repository clones without a
//! walk; a thin push whose base was made unreachable brings it back; pushes
//! racing a GC in both orders; SIGKILL during a GC.

mod common;

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

/// Where `oid` is in the repository's state: "live", "garbage" or "absent"
/// (looked up in the indexes of the containers the state names).
fn whereabouts(store: &TestStore, name: &str, oid: &str) -> &'static str {
    let state = store.repo_state(name).expect("repository");
    let repo = gitstow_odb::Repository::new(store.open(), name, gitstow_odb::IndexCache::new());
    let oid = gix_hash::ObjectId::from_hex(oid.as_bytes()).unwrap();
    if repo.live_objects(&state).unwrap().contains(&oid) {
        "live"
    } else if repo.objects(&state).unwrap().contains(&oid) {
        "garbage"
    } else {
        "absent"
    }
}

/// Whether any container in the store (named or not) holds `oid`.
fn anywhere_in_store(store: &TestStore, name: &str, oid: &str) -> bool {
    let prefix = format!("{name}.git/containers/");
    let repo = gitstow_odb::Repository::new(store.open(), name, gitstow_odb::IndexCache::new());
    let oid = gix_hash::ObjectId::from_hex(oid.as_bytes()).unwrap();
    store
        .keys()
        .iter()
        .filter_map(|k| k.strip_prefix(&prefix))
        .filter_map(|k| k.strip_suffix(".idx"))
        .any(|id| repo.container_index(id).unwrap().lookup(&oid).is_some())
}

fn blob_of(work: &Path, path: &str) -> String {
    git_out(work, &["rev-parse", &format!("HEAD:{path}")])
}

/// A deleted branch and a force push: their objects go to garbage at the GC,
/// the clone no longer has them, and they leave the store only after the
/// grace period (garbage, then retired, then deleted).
#[test]
fn unreachable_objects_leave_after_the_grace_period() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("gc1");
    let work = tmp.path().join("work");
    init_repo(&work);
    commit_files(&work, &[("a.txt", "a\n")], "a");
    let base = commit_files(&work, &[("b.txt", "b\n")], "b");
    git(&work, &["push", "--quiet", &url, "main"]);
    git(&work, &["checkout", "--quiet", "-b", "topic"]);
    commit_files(&work, &[("topic.txt", "only on topic\n")], "topic");
    let topic_blob = blob_of(&work, "topic.txt");
    git(&work, &["push", "--quiet", &url, "topic"]);
    git(&work, &["checkout", "--quiet", "main"]);
    commit_files(&work, &[("dropped.txt", "force-pushed away\n")], "dropped");
    let dropped_blob = blob_of(&work, "dropped.txt");
    git(&work, &["push", "--quiet", &url, "main"]);
    // Delete topic, move main back.
    git(&work, &["push", "--quiet", &url, ":topic"]);
    force_main(&work, &url, &base);
    git(&work, &["reset", "--quiet", "--hard", &base]);
    assert_eq!(whereabouts(server.store(), "gc1", &topic_blob), "live");

    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc1", "--gc", "--grace", "3"], &[]),
    );
    assert!(said.contains("GC: containers"), "{said}");
    assert!(said.contains("unreachable moved to garbage"), "{said}");
    for blob in [&topic_blob, &dropped_blob] {
        assert_eq!(
            whereabouts(server.store(), "gc1", blob),
            "garbage",
            "{said}"
        );
    }
    let state = server.store().repo_state("gc1").unwrap();
    assert!(state.closed, "after a GC every live object is reachable");
    assert_eq!(state.containers.len(), 1);
    let (refs, objects) = mirror_checked(&url, tmp.path(), "a.git");
    assert!(!objects.contains(&topic_blob) && !objects.contains(&dropped_blob));
    assert!(refs.contains(&base));

    // Within the grace period the garbage stays.
    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc1", "--gc", "--grace", "3"], &[]),
    );
    assert!(said.contains("1 garbage"), "{said}");
    assert!(anywhere_in_store(server.store(), "gc1", &topic_blob));
    std::thread::sleep(Duration::from_secs(4));
    // Expired garbage is retired (no state names it), then deleted a grace period later.
    // (a plain pass, no GC: expired garbage is retired without a walk)
    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc1", "--grace", "3"], &[]),
    );
    assert!(said.contains("0 garbage"), "{said}");
    assert_eq!(whereabouts(server.store(), "gc1", &topic_blob), "absent");
    assert!(
        anywhere_in_store(server.store(), "gc1", &topic_blob),
        "deleted early"
    );
    std::thread::sleep(Duration::from_secs(4));
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc1", "--grace", "3"], &[]),
    );
    assert!(!anywhere_in_store(server.store(), "gc1", &topic_blob));
    assert!(!anywhere_in_store(server.store(), "gc1", &dropped_blob));
    let live: BTreeSet<String> = server
        .store()
        .repo_state("gc1")
        .unwrap()
        .containers
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(stored_bins(server.store(), "gc1"), live);
    assert_eq!(mirror_checked(&url, tmp.path(), "b.git"), (refs, objects));
}

/// A client still has a commit that a force push made unreachable and a GC
/// moved to garbage; it pushes a child of that commit (a thin pack whose
/// base and parent are garbage). The push lands and brings the garbage back
/// to the live list; a later GC keeps those objects.
#[test]
fn a_thin_push_onto_garbage_brings_it_back() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("gc2");
    let work = tmp.path().join("work");
    init_repo(&work);
    let big: String = (0..400)
        .map(|i| format!("line {i} of a file big enough to delta\n"))
        .collect();
    let base = commit_files(&work, &[("big.txt", &big)], "base");
    git(&work, &["push", "--quiet", &url, "main"]);
    let gone = commit_files(&work, &[("big.txt", &format!("{big}one more\n"))], "gone");
    let gone_blob = blob_of(&work, "big.txt");
    git(&work, &["push", "--quiet", &url, "main"]);
    force_main(&work, &url, &base);
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc2", "--gc", "--grace", "3600"], &[]),
    );
    assert_eq!(whereabouts(server.store(), "gc2", &gone_blob), "garbage");

    // The client builds on `gone` and pushes it back. With push.negotiate
    // the server acknowledges `gone` (it still has it, as garbage), so the
    // pack is thin: the new blob is a delta against `gone`'s blob, which the
    // pack does not carry.
    let tip = commit_files(
        &work,
        &[("big.txt", &format!("{big}one more\nand another\n"))],
        "on top of gone",
    );
    assert_eq!(git_out(&work, &["rev-parse", "HEAD~1"]), gone);
    git(
        &work,
        &[
            "-c",
            "push.negotiate=true",
            "push",
            "--quiet",
            "--force",
            &url,
            "main",
        ],
    );
    assert!(
        server
            .logs()
            .lines()
            .rev()
            .find(|l| l.contains("receive-pack") && l.contains("thin_bases="))
            .is_some_and(|l| l.contains("thin_bases=") && !l.contains("thin_bases=0")),
        "the push was not thin against garbage:\n{}",
        server.logs()
    );
    let state = server.store().repo_state("gc2").unwrap();
    assert!(
        state.garbage.is_empty(),
        "the garbage container was not brought back"
    );
    assert_eq!(whereabouts(server.store(), "gc2", &gone_blob), "live");
    assert_eq!(inline_ref(&state, "refs/heads/main"), tip);
    let (_, objects) = mirror_checked(&url, tmp.path(), "c.git");
    assert!(objects.contains(&gone_blob));
    // The next GC finds everything reachable.
    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc2", "--gc", "--grace", "3600"], &[]),
    );
    assert!(said.contains(" 0 unreachable"), "{said}");
    assert_eq!(mirror_checked(&url, tmp.path(), "d.git").1, objects);
}

/// A push lands while a GC sits between its walk and its commit: the GC
/// re-applies on the new refs and keeps its garbage live.
#[test]
fn a_push_during_a_gc_lands_and_nothing_it_needs_is_garbage() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("gc3");
    let work = tmp.path().join("work");
    init_repo(&work);
    let base = commit_files(&work, &[("x.txt", "x\n")], "x");
    git(&work, &["push", "--quiet", &url, "main"]);
    let old = commit_files(
        &work,
        &[("old.txt", "made unreachable, then reachable again\n")],
        "old",
    );
    git(&work, &["push", "--quiet", &url, "main"]);
    force_main(&work, &url, &base);
    let store = server.store().clone();
    let gc = std::thread::spawn(move || {
        store.maintain(
            &["--repo", "gc3", "--gc", "--grace", "3600"],
            &[("GITSTOW_TEST_MAINTENANCE_COMMIT_DELAY_MS", "3000")],
        )
    });
    std::thread::sleep(Duration::from_millis(1500));
    // Move main back to `old`, which the GC has found unreachable.
    force_main(&work, &url, &old);
    let said = assert_maintained(&gc.join().unwrap());
    assert!(said.contains("GC: containers"), "{said}");
    let state = server.store().repo_state("gc3").unwrap();
    assert_eq!(inline_ref(&state, "refs/heads/main"), old);
    assert!(
        state.garbage.is_empty(),
        "garbage made on other refs: {said}"
    );
    assert!(!state.closed);
    let (refs, _) = mirror_checked(&url, tmp.path(), "e.git");
    assert!(refs.contains(&old));
}

/// A GC commits while a push sits between reading the state and its
/// compare-and-swap: the push re-reads, brings the new garbage back, lands.
#[test]
fn a_gc_during_a_push_lets_the_push_land() {
    // The fourth state write (the push below) waits 4 s.
    let server = Server::start_on(
        None,
        &["--no-maintenance"],
        &[("GITSTOW_FAULTS", "put:/state:delay=4000:1:3")],
    );
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("gc4");
    let work = tmp.path().join("work");
    init_repo(&work);
    let base = commit_files(&work, &[("x.txt", "x\n")], "x");
    git(&work, &["push", "--quiet", &url, "main"]);
    let old = commit_files(&work, &[("old.txt", "old\n")], "old");
    git(&work, &["push", "--quiet", &url, "main"]);
    force_main(&work, &url, &base);
    // The push names `old` as its new tip: it relies on objects the GC
    // below is about to call garbage.
    let pusher = {
        let work = work.clone();
        let url = url.clone();
        let old = old.clone();
        std::thread::spawn(move || {
            git(
                &work,
                &[
                    "push",
                    "--quiet",
                    "--force",
                    &url,
                    &format!("{old}:refs/heads/main"),
                ],
            )
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc4", "--gc", "--grace", "3600"], &[]),
    );
    assert!(
        said.contains("1 unreachable")
            || said.contains("2 unreachable")
            || said.contains("3 unreachable"),
        "{said}"
    );
    pusher.join().expect("the push lands");
    let state = server.store().repo_state("gc4").unwrap();
    assert_eq!(inline_ref(&state, "refs/heads/main"), old);
    assert!(
        state.garbage.is_empty(),
        "the push did not bring the new garbage back"
    );
    assert!(
        server.logs().contains("state_retries=1"),
        "{}",
        server.logs()
    );
    let (refs, _) = mirror_checked(&url, tmp.path(), "f.git");
    assert!(refs.contains(&old));
}

/// After a GC, a fetch on the state read before it still reads every object
/// (the replaced containers are retired, not deleted).
#[test]
fn a_reader_of_the_state_before_a_gc_reads_on() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url("gc5");
    let work = tmp.path().join("work");
    init_repo(&work);
    for i in 0..5 {
        commit_files(
            &work,
            &[(&format!("f{i}.txt"), &format!("{i}\n"))],
            &format!("c{i}"),
        );
        git(&work, &["push", "--quiet", &url, "main"]);
    }
    let before = server.store().repo_state("gc5").unwrap();
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "gc5", "--gc", "--grace", "3600"], &[]),
    );
    let repo =
        gitstow_odb::Repository::new(server.store().open(), "gc5", gitstow_odb::IndexCache::new());
    let db = repo.objects(&before).unwrap();
    let mut cache = gitstow_odb::ObjectCache::new(1 << 20);
    let oids: Vec<_> = db.entries().map(|e| e.oid).collect();
    assert!(oids.len() >= 15);
    for oid in &oids {
        assert!(db.read(oid, &mut cache).unwrap().is_some());
    }
    mirror_checked(&url, tmp.path(), "g.git");
}

/// SIGKILL at 9 points of a GC: the repository clones identical and
/// fsck-clean after each, and later runs leave nothing unnamed behind.
#[test]
fn sigkill_anywhere_in_gc_leaves_a_repository_that_clones() {
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let points = [
        "put:maintenance:kill:1",
        "get:.bin:kill:1:1",
        "put_file:.bin:kill:1",
        "put_file:.bin:kill-after:1:1",
        "put:.idx:kill:1:1",
        "put:/state:kill:1",
        "put:/state:kill-after:1",
        "put:/retired:kill:1",
        "delete:.bin:kill:1",
    ];
    for (n, point) in points.iter().enumerate() {
        let name = format!("gckill-{n}");
        let url = server.url(&name);
        let work = tmp.path().join(format!("w{n}"));
        init_repo(&work);
        let base = commit_files(&work, &[("a.txt", "a\n")], "a");
        git(&work, &["push", "--quiet", &url, "main"]);
        commit_files(&work, &[("b.txt", "b\n")], "b");
        git(&work, &["push", "--quiet", &url, "main"]);
        force_main(&work, &url, &base);
        git(&work, &["reset", "--quiet", "--hard", &base]);
        commit_files(&work, &[("c.txt", "c\n")], "c");
        git(&work, &["push", "--quiet", &url, "main"]);
        let expected_refs = git_out(&work, &["rev-parse", "HEAD"]);
        let out = server.store().maintain(
            &["--repo", &name, "--gc", "--grace", "0", "--lease-ttl", "1"],
            &[("GITSTOW_FAULTS", point)],
        );
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: the run was not killed there: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let (refs, objects) = mirror_checked(&url, tmp.path(), &format!("k{n}.git"));
        assert!(refs.contains(&expected_refs), "{point}");
        assert_eq!(objects, refs_and_objects(&work).1, "{point}");
        std::thread::sleep(Duration::from_millis(2100));
        let deadline = Instant::now() + Duration::from_secs(20);
        // GC (grace 0: garbage expires at once), then two runs to retire
        // and delete what the killed run left.
        for args in [
            &["--repo", &name, "--gc", "--grace", "0", "--lease-ttl", "1"][..],
            &["--repo", &name, "--gc", "--grace", "0", "--lease-ttl", "1"][..],
            &["--repo", &name, "--grace", "0", "--lease-ttl", "1"][..],
            &["--repo", &name, "--grace", "0", "--lease-ttl", "1"][..],
        ] {
            assert_maintained(&server.store().maintain(args, &[]));
            assert!(Instant::now() < deadline);
        }
        let state = server.store().repo_state(&name).unwrap();
        let live: BTreeSet<String> = state.containers.iter().map(|c| c.id.clone()).collect();
        assert!(state.garbage.is_empty(), "{point}");
        assert_eq!(
            stored_bins(server.store(), &name),
            live,
            "{point}: leftovers"
        );
        let again = mirror_checked(&url, tmp.path(), &format!("k{n}-after.git"));
        assert_eq!(again.1, objects, "{point}");
    }
}

/// A clone that started before a GC (grace 1 h) finishes after it, complete
/// and fsck-clean: the containers it reads are retired, not deleted.
#[test]
fn a_clone_running_during_a_gc_finishes() {
    let mut setup = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let url = setup.url("gc6");
    let work = tmp.path().join("work");
    init_repo(&work);
    let mut first = String::new();
    for i in 0..6 {
        let tip = commit_files(
            &work,
            &[(&format!("f{i}.txt"), &format!("{i}\n").repeat(100))],
            &format!("c{i}"),
        );
        if i == 0 {
            first = tip;
        }
        git(&work, &["push", "--quiet", &url, "main"]);
    }
    git(
        &work,
        &[
            "push",
            "--quiet",
            &url,
            &format!("{first}:refs/heads/first"),
        ],
    );
    let expected = mirror_checked(&url, tmp.path(), "expected.git");
    setup.kill();
    // Every read of a container of this server takes 300 ms: its clone lasts
    // seconds (about 20 reads), a GC on S3 about 2 s.
    let slow = Server::start_on(
        Some(setup.store()),
        &["--no-maintenance"],
        &[("GITSTOW_FAULTS", "get_range:.bin:delay=300")],
    );
    let url = slow.url("gc6");
    let dst = tmp.path().join("during.git");
    let clone = {
        let (url, dst) = (url.clone(), dst.clone());
        let parent = tmp.path().to_path_buf();
        std::thread::spawn(move || {
            git(
                &parent,
                &["clone", "--quiet", "--mirror", &url, dst.to_str().unwrap()],
            )
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    let said = assert_maintained(
        &slow
            .store()
            .maintain(&["--repo", "gc6", "--gc", "--grace", "3600"], &[]),
    );
    assert!(
        !clone.is_finished(),
        "the clone ended before the GC did; nothing was tested\n{said}"
    );
    let live_now: Vec<String> = slow
        .store()
        .repo_state("gc6")
        .unwrap()
        .containers
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert!(!slow.store().retired("gc6").is_empty(), "{said}");
    clone.join().unwrap();
    fsck(&dst);
    assert_eq!(refs_and_objects(&dst), expected);
    // The repository as the GC left it serves the same.
    assert!(!live_now.is_empty());
    assert_eq!(mirror_checked(&url, tmp.path(), "after.git"), expected);
}

/// The work rule of automatic GC, with low thresholds: an imported
/// repository's pushes are compacted among themselves while its closure
/// stays (a mirror clone still skips the walk); once the objects pushed
/// outside the closure pass the floor and the share, the next pass is a
/// GC (logged with `gc_reason="work"`, counted in `/metrics`) that renews
/// the closure with bitmaps, and clones stay identical to the source.
#[test]
fn automatic_gc_runs_when_pushes_leave_enough_outside_the_closure() {
    let server = Server::start_with(&[
        "--gc-outside-objects",
        "150",
        "--gc-outside-percent",
        "10",
        "--gc-min-interval",
        "0",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 25,
            commits: 120,
            ..Default::default()
        },
    );
    let url = server.url("worked");
    git(&src, &["push", "--quiet", "--mirror", &url]);
    let import = server.store().repo_state("worked").unwrap();
    let closure_objects: u64 = import.containers.iter().map(|c| c.objects).sum();
    assert!(import.closure.is_some());
    // The push below (203 objects) must pass 10 % of the closure.
    assert!(closure_objects < 2000, "{closure_objects} objects");

    // Small pushes: a few objects each, well under the floor.
    let work = tmp.path().join("work");
    git(
        tmp.path(),
        &["clone", "--quiet", src.to_str().unwrap(), "work"],
    );
    let gc_lines = |logs: &str| {
        logs.lines()
            .filter(|l| l.contains(" maintenance ") || l.ends_with(" maintenance"))
            .filter(|l| l.contains(" gc=true"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for i in 0..6 {
        commit_files(&work, &[(&format!("small-{i}.txt"), "small\n")], "small");
        git(&work, &["push", "--quiet", &url, "HEAD:main"]);
    }
    let settled = |pushes: usize| {
        // Every push's pass has run once the runs counted reach the pushes
        // (or stay put for 3 s: a push queued while its repository was
        // still queued is run once).
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = (0.0, Instant::now());
        loop {
            let m = http(server.port(), "GET", "/metrics", &[], b"").text();
            let runs: f64 = m
                .lines()
                .filter(|l| l.starts_with("gitstow_maintenance_runs_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum();
            if runs != last.0 {
                last = (runs, Instant::now());
            }
            if runs >= pushes as f64 || (runs > 0.0 && last.1.elapsed() > Duration::from_secs(3)) {
                return m;
            }
            assert!(Instant::now() < deadline, "maintenance did not run:\n{m}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    settled(7);
    let state = server.store().repo_state("worked").unwrap();
    assert!(gc_lines(&server.logs()).is_empty(), "{}", server.logs());
    assert!(
        state.live_closure().is_some(),
        "compaction dropped the import's closure: {state:?}"
    );
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "before.git"],
    );
    assert_eq!(log_text(&last_pack_line(&server.logs()), "via"), "closure");

    // One push of many new files: past the floor and the share.
    let files: Vec<(String, String)> = (0..200)
        .map(|i| (format!("many/{i}.txt"), format!("file {i}\n")))
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    commit_files(&work, &files, "many files");
    git(&work, &["push", "--quiet", &url, "HEAD:main"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let line = loop {
        if let Some(line) = gc_lines(&server.logs()).pop() {
            break line;
        }
        assert!(
            Instant::now() < deadline,
            "no GC by work:\n{}",
            server.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(log_text(&line, "gc_reason"), "work", "{line}");
    let outside = log_field(&line, "outside_objects");
    assert!(outside >= 200 && outside * 10 >= closure_objects, "{line}");
    let metrics = settled(8);
    assert!(
        metrics.contains("gitstow_maintenance_gc_total{reason=\"work\"} 1"),
        "{metrics}"
    );
    let state = server.store().repo_state("worked").unwrap();
    let closure = state.closure.clone().expect("the GC left a closure");
    assert!(closure.bitmaps, "{closure:?}");
    assert!(state.live_closure().is_some());

    git(
        &src,
        &["fetch", "--quiet", work.to_str().unwrap(), "HEAD:main"],
    );
    git(
        tmp.path(),
        &["clone", "--quiet", "--mirror", &url, "after.git"],
    );
    let after = tmp.path().join("after.git");
    fsck(&after);
    assert_eq!(refs_and_objects(&after), refs_and_objects(&src));
    fsck(&tmp.path().join("before.git"));
}
