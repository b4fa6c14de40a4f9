//! Ref tables (plan 0010 step 3) with the real git: a repository whose
//! inline refs outgrow their bound moves them to a ref table on the push
//! that passes it (its conversion from state format 1), and from then on
//! every listing, lookup, push check and clone reads refs through the
//! tables and the inline part on top: deletions hide refs of the tables,
//! recreations show again, directory/file conflicts are found in the
//! tables, another instance on the same store reads the same refs, hidden
//! namespaces are skipped, and `gitstow fsck` checks the tables.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;

/// `refs/changes/NN/N/1` for each `n`, Gerrit's shape.
fn change(n: u32) -> String {
    format!("refs/changes/{:02}/{n}/1", n % 100)
}

/// Points the refs of `numbers` at `oid` in the work repository, in one
/// `git update-ref --stdin` (`delete` when `oid` is `None`).
fn set_changes(work: &Path, numbers: impl Iterator<Item = u32>, oid: Option<&str>) {
    use std::io::Write;
    let mut input = String::new();
    for n in numbers {
        match oid {
            Some(oid) => input.push_str(&format!("update {} {oid}\n", change(n))),
            None => input.push_str(&format!("delete {}\n", change(n))),
        }
    }
    let mut child = git_cmd(work)
        .args(["update-ref", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

/// The `oid\tname` lines of every ref of the work repository (peeled
/// tags as git ls-remote shows them: `oid\tname^{}`).
fn local_refs(work: &Path) -> BTreeSet<String> {
    let out = git_out(
        work,
        &[
            "for-each-ref",
            "--format=%(objectname)\t%(refname)\n%(*objectname)\t%(refname)^{}",
        ],
    );
    out.lines()
        .filter(|l| !l.starts_with('\t') && !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The refs `git ls-remote` lists (HEAD left out), in protocol `version`.
fn remote_refs(work: &Path, url: &str, version: &str) -> BTreeSet<String> {
    git_out(
        work,
        &[
            "-c",
            &format!("protocol.version={version}"),
            "ls-remote",
            url,
        ],
    )
    .lines()
    .filter(|l| !l.ends_with("\tHEAD"))
    .map(str::to_owned)
    .collect()
}

/// Mirror-clones the repository of `url` (its last path part, less
/// `.git`, names it in `store`), checks the clone with `git fsck --full`
/// and the repository with gitstow's fsck (which reads every table block);
/// returns the clone's path.
fn mirror_sound(url: &str, parent: &Path, store: &TestStore) -> std::path::PathBuf {
    let mirror = parent.join("mirror.git");
    let _ = std::fs::remove_dir_all(&mirror);
    git(
        parent,
        &[
            "clone",
            "--quiet",
            "--mirror",
            url,
            mirror.to_str().unwrap(),
        ],
    );
    fsck(&mirror);
    let repo = url.rsplit('/').next().unwrap().trim_end_matches(".git");
    let o = store.admin(&["fsck", "--repo", repo]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    mirror
}

/// Pushes the work repository's branches, tags and changes to `url`,
/// deleting there what it no longer has, all or nothing.
fn push_all(work: &Path, url: &str) {
    git(
        work,
        &[
            "push",
            "--quiet",
            "--atomic",
            "--prune",
            url,
            "refs/heads/*:refs/heads/*",
            "refs/tags/*:refs/tags/*",
            "refs/changes/*:refs/changes/*",
        ],
    );
}

fn assert_same_refs(work: &Path, url: &str, when: &str) {
    let local = local_refs(work);
    for version in ["0", "2"] {
        let remote = remote_refs(work, url, version);
        let missing: Vec<_> = local.difference(&remote).take(5).collect();
        let extra: Vec<_> = remote.difference(&local).take(5).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{when}, v{version}: missing {missing:?}, extra {extra:?} ({} local, {} remote)",
            local.len(),
            remote.len()
        );
    }
}

#[test]
fn refs_move_to_tables_and_read_back_through_them() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&["--no-maintenance"]);
    let url = server.url("big");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    git(&work, &["tag", "-a", "-m", "release", "v1"]);
    let c2 = commit_files(&work, &[("a.txt", "two\n")], "two");
    let c3 = commit_files(&work, &[("b.txt", "three\n")], "three");

    // 600 refs fit inline: the state keeps format 1.
    set_changes(&work, 1..=600, Some(&c1));
    push_all(&work, &url);
    let state = server.store().repo_state("big").unwrap();
    assert!(state.refs.tables.is_empty(), "600 refs stay inline");
    assert_eq!(state.refs.count, 602);
    assert_same_refs(&work, &url, "inline");

    // 900 more pass the inline bound: the push writes them all as a table.
    set_changes(&work, 601..=1500, Some(&c2));
    push_all(&work, &url);
    let state = server.store().repo_state("big").unwrap();
    assert_eq!(state.refs.tables.len(), 1, "converted to one ref table");
    assert!(state.refs.recent.is_empty());
    assert_eq!(state.refs.count, 1502);
    assert_eq!(state.refs.tables[0].records, 1502);
    assert_same_refs(&work, &url, "one table");

    // Deletions above the table hide its refs; an update of main and the
    // deletions land together.
    set_changes(&work, 1..=200, None);
    git(&work, &["branch", "-f", "side", &c1]);
    push_all(&work, &url);
    let state = server.store().repo_state("big").unwrap();
    assert_eq!(state.refs.count, 1303);
    assert!(state
        .refs
        .recent
        .iter()
        .any(|(n, v)| n == &change(7) && v.is_deletion()));
    assert_same_refs(&work, &url, "deletions above the table");

    // Recreated refs show again, at their new value.
    set_changes(&work, 1..=200, Some(&c3));
    push_all(&work, &url);
    assert_same_refs(&work, &url, "recreated");
    assert_eq!(server.store().repo_state("big").unwrap().refs.count, 1503);

    // Directory/file conflicts are found in the table.
    for (name, why) in [
        ("refs/changes/01/601", "a ref of the table is below it"),
        (
            "refs/changes/01/601/1/x",
            "a leading directory is a ref of the table",
        ),
    ] {
        let said = git_fail(&work, &["push", &url, &format!("{c3}:{name}")]);
        assert!(
            said.contains("[remote rejected]") && said.contains("failed to update ref"),
            "{name} ({why}): {said}"
        );
    }
    // A lease against a ref of the table is checked against its value.
    let said = git_fail(
        &work,
        &[
            "push",
            &format!("--force-with-lease={}:{c1}", change(700)),
            &url,
            &format!("{c3}:{}", change(700)),
        ],
    );
    assert!(
        said.contains("stale info") || said.contains("rejected"),
        "{said}"
    );
    git(
        &work,
        &[
            "push",
            "--quiet",
            &format!("--force-with-lease={}:{c2}", change(700)),
            &url,
            &format!("{c3}:{}", change(700)),
        ],
    );
    git(&work, &["update-ref", &change(700), &c3]);
    assert_same_refs(&work, &url, "after a lease");

    // Another instance on the same store reads the same refs, clones, and
    // hides a namespace by seeking past it in the table.
    let other = Server::start_on(
        Some(server.store()),
        &["--no-maintenance", "--hide-refs", "refs/changes"],
        &[],
    );
    let other_url = other.url("big");
    let listed = remote_refs(&work, &other_url, "2");
    assert!(listed.iter().all(|l| !l.contains("refs/changes/")));
    assert!(listed
        .iter()
        .any(|l| l == &format!("{c3}\trefs/heads/main")));
    assert!(listed
        .iter()
        .any(|l| l == &format!("{c1}\trefs/tags/v1^{{}}")));
    let mirror = mirror_sound(&url, tmp.path(), server.store());
    assert_eq!(local_refs(&mirror), local_refs(&work));
    // A clone of one branch asks for its ref by prefix.
    assert_eq!(main_by_one_branch_clone(tmp.path(), &other_url), c3);
}

/// `main` of `url` as a clone of that one branch (into `parent/one`) sees it:
/// the client asks for its ref by prefix.
fn main_by_one_branch_clone(parent: &Path, url: &str) -> String {
    let one = parent.join("one");
    let dir = one.to_str().unwrap();
    git(
        parent,
        &[
            "clone",
            "--quiet",
            "--single-branch",
            "--branch",
            "main",
            url,
            dir,
        ],
    );
    git_out(&one, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// Repository `name` of `server` with two ref tables: changes 1–1,000 at a
/// first commit, then 1,001–2,000 at a second, each an atomic push of a
/// work repository in `parent`; returns (work, url, first, second).
fn two_tables(
    server: &Server,
    parent: &Path,
    name: &str,
) -> (std::path::PathBuf, String, String, String) {
    let url = server.url(name);
    let work = parent.join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    let c2 = commit_files(&work, &[("a.txt", "two\n")], "two");
    set_changes(&work, 1..=1000, Some(&c1));
    push_all(&work, &url);
    set_changes(&work, 1001..=2000, Some(&c2));
    push_all(&work, &url);
    (work, url, c1, c2)
}

/// The stack grows a table a spill; maintenance merges it geometrically.
/// A merge down to the bottom drops deletion records; the replaced tables
/// are deleted once their grace period is over; refs read the same before
/// and after, and the repository still clones.
#[test]
fn maintenance_merges_the_stack_and_drops_deletions_at_the_bottom() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let (work, url, c1, _) = two_tables(&server, tmp.path(), "stack");
    // 1,000 deletions of the bottom table's refs and 1,000 creations: a
    // table with deletion records on top.
    set_changes(&work, 1..=1000, None);
    set_changes(&work, 2001..=3000, Some(&c1));
    push_all(&work, &url);
    let state = server.store().repo_state("stack").unwrap();
    let before: Vec<String> = state.refs.tables.iter().map(|t| t.id.clone()).collect();
    assert_eq!(before.len(), 3, "{:?}", state.refs.tables);
    assert_eq!(state.refs.tables[2].records, 2000, "deletions kept above");
    assert_eq!(state.refs.count, 2001);
    assert_same_refs(&work, &url, "three tables");

    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "stack", "--grace", "0"], &[]),
    );
    let state = server.store().repo_state("stack").unwrap();
    assert_eq!(state.refs.tables.len(), 1, "{said}");
    assert_eq!(
        state.refs.tables[0].records, 2001,
        "no deletion record left at the bottom: {said}"
    );
    assert_eq!(state.refs.count, 2001);
    assert_same_refs(&work, &url, "merged");
    // The replaced tables go once their grace (0 s here) is over.
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "stack", "--grace", "0"], &[]),
    );
    let tables: Vec<String> = server
        .store()
        .keys()
        .into_iter()
        .filter(|k| k.starts_with("stack.git/refs/"))
        .collect();
    assert_eq!(
        tables,
        [format!("stack.git/refs/{}.ref", state.refs.tables[0].id)]
    );
    for old in before {
        assert!(!tables.iter().any(|k| k.contains(&old)));
    }
    let mirror = mirror_sound(&url, tmp.path(), server.store());
    assert_eq!(local_refs(&mirror), local_refs(&work));
}

/// SIGKILL of the server at 12 moments of atomic pushes that spill a ref
/// table,
/// then of `gitstow maintain` at 12 moments of a table merge: after
/// each, the refs a reader sees are exactly the old ones or exactly the new
/// ones, and at the end the repository clones, passes `git fsck --full`
/// and gitstow's fsck.
/// POSTs `body` to `killed`'s receive-pack on `port` from another thread
/// (the daemon may die meanwhile: join gives `Err` then).
fn post_in_background(port: u16, body: Vec<u8>) -> std::thread::JoinHandle<Response> {
    std::thread::spawn(move || {
        http(
            port,
            "POST",
            "/killed.git/git-receive-pack",
            &[("Content-Type", "application/x-git-receive-pack-request")],
            &body,
        )
    })
}

#[test]
fn killed_spills_and_merges_leave_whole_refs() {
    if Server::is_canonical() {
        return;
    }
    let mut server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    git(&work, &["push", "--quiet", &server.url("killed"), "main"]);
    // Raw atomic pushes of 1,000 creations each (the client's own work,
    // seconds of ref matching for git at this size, is not what is tested),
    // killed from the moment the request is sent to after it is answered:
    // the first one, not killed, times the span.
    let zero = "0".repeat(40);
    let head = b"PACK\0\0\0\x02\0\0\0\0".to_vec();
    let mut empty_pack = head.clone();
    empty_pack.extend_from_slice(&sha1(&head));
    let creations = |first: u32| {
        let names: Vec<String> = (first..first + 1000).map(change).collect();
        let commands: Vec<(&str, &str, &str)> = names
            .iter()
            .map(|n| (zero.as_str(), c1.as_str(), n.as_str()))
            .collect();
        let body = receive_pack_request(&commands, "report-status atomic", Some(&empty_pack));
        (names, body)
    };
    let (_, body) = creations(1);
    let t = std::time::Instant::now();
    let r = post_receive_pack(&server, "killed", &body);
    let mut span = t.elapsed();
    assert!(r.text().contains("unpack ok"), "{}", r.text());
    let mut landed = 0;
    for run in 0..12u32 {
        let url = server.url("killed");
        let before = remote_refs(&work, &url, "2");
        let (names, body) = creations(1001 + run * 1000);
        let mut after = before.clone();
        after.extend(names.iter().map(|n| format!("{c1}\t{n}")));
        let request = post_in_background(server.port(), body.clone());
        std::thread::sleep(span * run / 8);
        server.kill();
        let _ = request.join();
        server.start_again();
        let seen = remote_refs(&work, &server.url("killed"), "2");
        if seen == after {
            landed += 1;
        } else {
            assert_eq!(seen, before, "run {run}: neither the old refs nor the new");
            // As a client would: push again (timed: pushes slow down as
            // tables pile up without maintenance, and the kills follow).
            let t = std::time::Instant::now();
            let r = post_receive_pack(&server, "killed", &body);
            span = t.elapsed();
            assert!(r.text().contains("unpack ok"), "{}", r.text());
            assert_eq!(remote_refs(&work, &server.url("killed"), "2"), after);
        }
    }
    eprintln!("{landed} of 12 killed pushes had landed");
    // And killed at the points around the commit, by the fault injector:
    // writing the spilled table, just before the state's compare-and-swap,
    // just after it. Each kill must land (a point the push does not reach
    // fails here), and only the last leaves the new refs.
    let points = [
        ("put:killed.git/refs/:kill:1", false),
        ("put:killed.git/state:kill:1", false),
        ("put:killed.git/state:kill-after:1", true),
    ];
    for (n, (point, lands)) in points.into_iter().enumerate() {
        let before = remote_refs(&work, &server.url("killed"), "2");
        let (names, body) = creations(13_001 + n as u32 * 1000);
        let mut after = before.clone();
        after.extend(names.iter().map(|n| format!("{c1}\t{n}")));
        let mut faulty = Server::start_on(
            Some(server.store()),
            &["--no-maintenance"],
            &[("GITSTOW_FAULTS", point)],
        );
        let request = post_in_background(faulty.port(), body);
        let answered = request.join().ok().map(|r| r.text());
        let status = faulty.terminate(std::time::Duration::from_secs(30));
        assert_eq!(
            status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
            Some(9),
            "{point}: the push never reached it; it answered {answered:?}"
        );
        assert!(
            !answered.is_some_and(|a| a.contains("unpack ok")),
            "{point}: the client was told ok"
        );
        let seen = remote_refs(&work, &server.url("killed"), "2");
        assert_eq!(seen, if lands { after } else { before }, "{point}");
    }
    let expected = remote_refs(&work, &server.url("killed"), "0");
    assert_eq!(expected.len(), 14_001, "main and 14,000 changes");
    let bin = env!("CARGO_BIN_EXE_gitstow");
    for run in 0..12u64 {
        let mut child = std::process::Command::new(bin)
            .arg("maintain")
            .args(server.store().args())
            // A killed run holds the lease until it expires: 1 s here.
            .args(["--repo", "killed", "--grace", "0", "--lease-ttl", "1"])
            .env("GITSTOW_TEST_SHORT_GRACE", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(run * 25));
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(
            remote_refs(&work, &server.url("killed"), "0"),
            expected,
            "maintenance killed after {} ms",
            run * 25
        );
    }
    assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "killed", "--grace", "0"], &[]),
    );
    let state = server.store().repo_state("killed").unwrap();
    assert!(state.refs.tables.len() <= 4, "{:?}", state.refs.tables);
    let mirror = mirror_sound(&server.url("killed"), tmp.path(), server.store());
    assert_eq!(local_refs(&mirror).len(), expected.len());
}

/// Two instances on one store take pushes of distinct refs at once, each
/// push large enough that the inline part spills a table every few pushes
/// and automatic maintenance merges the stack meanwhile: every ref a push
/// was answered `ok` for is listed by both instances, nothing else is, and
/// the repository clones and checks sound.
#[test]
fn two_instances_pushing_distinct_refs_lose_nothing() {
    if Server::is_canonical() {
        return;
    }
    let a = Server::start_with(&[]);
    let b = Server::start_on(Some(a.store()), &[], &[]);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    git(&work, &["push", "--quiet", &a.url("two"), "main"]);
    let zero = "0".repeat(40);
    let head = b"PACK\0\0\0\x02\0\0\0\0".to_vec();
    let mut empty_pack = head.clone();
    empty_pack.extend_from_slice(&sha1(&head));
    const PUSHES: u32 = 8;
    const REFS: u32 = 400;
    let pushers: Vec<_> = [&a, &b]
        .iter()
        .enumerate()
        .map(|(who, server)| {
            let port = server.port();
            let (zero, c1, pack) = (zero.clone(), c1.clone(), empty_pack.clone());
            std::thread::spawn(move || {
                let mut landed = Vec::new();
                for push in 0..PUSHES {
                    let first = 1 + (who as u32 * PUSHES + push) * REFS;
                    let names: Vec<String> = (first..first + REFS).map(change).collect();
                    let commands: Vec<(&str, &str, &str)> = names
                        .iter()
                        .map(|n| (zero.as_str(), c1.as_str(), n.as_str()))
                        .collect();
                    let body = receive_pack_request(&commands, "report-status", Some(&pack));
                    let r = http(
                        port,
                        "POST",
                        "/two.git/git-receive-pack",
                        &[("Content-Type", "application/x-git-receive-pack-request")],
                        &body,
                    );
                    let text = r.text();
                    assert!(text.contains("unpack ok"), "instance {who}: {text}");
                    for n in names {
                        if text.contains(&format!("ok {n}\n")) {
                            landed.push(n);
                        } else {
                            assert!(text.contains(&format!("ng {n} ")), "{n}: {text}");
                        }
                    }
                }
                landed
            })
        })
        .collect();
    let mut expected: BTreeSet<String> = [format!("{c1}\trefs/heads/main")].into();
    for p in pushers {
        expected.extend(p.join().unwrap().into_iter().map(|n| format!("{c1}\t{n}")));
    }
    assert_eq!(
        expected.len() as u32,
        1 + 2 * PUSHES * REFS,
        "every push of distinct refs is answered ok"
    );
    for server in [&a, &b] {
        for version in ["0", "2"] {
            assert_eq!(remote_refs(&work, &server.url("two"), version), expected);
        }
    }
    mirror_sound(&b.url("two"), tmp.path(), a.store());
}

/// Every ref of `state` as `oid\tname` lines, read through the tables it
/// names by a reader of its own (a new cache: the tables come from the store).
fn refs_of_state(
    store: &TestStore,
    repo: &str,
    state: &gitstow_odb::RepoState,
) -> BTreeSet<String> {
    let reader = gitstow_odb::Repository::new(store.open(), repo, gitstow_odb::IndexCache::new());
    let refs = reader.refs(state).expect("the state's tables open");
    let mut out = BTreeSet::new();
    refs.for_each("", |name, value| {
        if let Some(oid) = value.oid() {
            out.insert(format!("{oid}\t{name}"));
        }
        Ok(())
    })
    .expect("the state's refs read");
    out
}

/// A reader that loaded an older state (a fetch under way when the stack
/// was merged and the refs moved on) still reads every ref of that state
/// through the grace period: the merge retires the tables it replaced
/// without deleting them, and a later state does not change what the old
/// one names.
#[test]
fn a_reader_of_an_older_state_reads_its_refs_after_a_merge() {
    if Server::is_canonical() {
        return;
    }
    let server = Server::start_with(&["--no-maintenance"]);
    let tmp = tempfile::tempdir().unwrap();
    let (work, url, c1, c2) = two_tables(&server, tmp.path(), "older");
    set_changes(&work, 1..=500, None);
    push_all(&work, &url);
    let old = server.store().repo_state("older").unwrap();
    assert!(old.refs.tables.len() >= 2, "{:?}", old.refs.tables);
    let expected = local_refs(&work);
    assert_eq!(refs_of_state(server.store(), "older", &old), expected);

    // The stack is merged (the old tables retired, kept for the grace
    // period), then the refs move on.
    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "older", "--grace", "600"], &[]),
    );
    set_changes(&work, 2001..=2100, Some(&c1));
    set_changes(&work, 501..=600, None);
    push_all(&work, &url);
    let new = server.store().repo_state("older").unwrap();
    assert!(
        new.refs.tables.iter().all(|t| !old.refs.tables.contains(t)),
        "the merge replaced every table of the older state: {said}"
    );
    assert_same_refs(&work, &url, "moved on");
    assert_eq!(
        refs_of_state(server.store(), "older", &old),
        expected,
        "the older state reads whole after the merge"
    );
    // Its objects too: a clone of the refs it names.
    let db = gitstow_odb::Repository::new(
        server.store().open(),
        "older",
        gitstow_odb::IndexCache::new(),
    )
    .objects(&old)
    .expect("the older state's containers load");
    let mut cache = gitstow_odb::ObjectCache::new(1 << 20);
    for oid in [&c1, &c2] {
        let oid = gix_hash::ObjectId::from_hex(oid.as_bytes()).unwrap();
        assert!(db.read(&oid, &mut cache).unwrap().is_some());
    }
}

/// 100,000 refs deleted in atomic pushes and then created again: the
/// deletions sit in one table above the refs they hide and the creations in
/// the next (a lookup reads one block path per table, however many
/// deletion records there are), every listing is exact throughout, and a
/// merge down to the bottom leaves no deletion record. The cost beside git
/// is in `docs/benchmarks/refs-at-scale.md` (the tombstone row).
#[test]
fn deleting_and_recreating_100k_refs_keeps_the_stack_short() {
    if Server::is_canonical() {
        return;
    }
    const N: u32 = 100_000;
    let server = Server::start_with(&["--no-maintenance"]);
    let url = server.url("tomb");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    init_repo(&work);
    let c1 = commit_files(&work, &[("a.txt", "one\n")], "one");
    git(&work, &["push", "--quiet", &url, "main"]);
    let zero = "0".repeat(40);
    let head = b"PACK\0\0\0\x02\0\0\0\0".to_vec();
    let mut empty_pack = head.clone();
    empty_pack.extend_from_slice(&sha1(&head));
    let names: Vec<String> = (1..=N).map(change).collect();
    // Two atomic pushes of 50,000 commands each (the limit is 100,000).
    let push = |old: &str, new: &str| {
        for half in names.chunks(50_000) {
            let commands: Vec<(&str, &str, &str)> =
                half.iter().map(|n| (old, new, n.as_str())).collect();
            let caps = if new == zero {
                "report-status delete-refs atomic"
            } else {
                "report-status atomic"
            };
            let pack = (new != zero).then_some(empty_pack.as_slice());
            let body = receive_pack_request(&commands, caps, pack);
            let r = post_receive_pack(&server, "tomb", &body);
            assert!(
                r.text().contains("unpack ok")
                    && !r.text().contains("\nng ")
                    && !r.text().contains("0000ng"),
                "{}",
                &r.text()[..r.text().len().min(300)]
            );
        }
    };
    let listed = || remote_refs(&work, &url, "2");
    let all: BTreeSet<String> = names
        .iter()
        .map(|n| format!("{c1}\t{n}"))
        .chain([format!("{c1}\trefs/heads/main")])
        .collect();
    push(&zero, &c1);
    assert_eq!(listed(), all);
    push(&c1, &zero);
    assert_eq!(listed(), BTreeSet::from([format!("{c1}\trefs/heads/main")]));
    push(&zero, &c1);
    assert_eq!(listed(), all);
    let state = server.store().repo_state("tomb").unwrap();
    assert_eq!(state.refs.count, u64::from(N) + 1);
    // Each push spilled its commands as one table: the 100,000 deletions
    // are records of tables, not a scan through a list.
    assert!(state.refs.tables.len() <= 6, "{:?}", state.refs.tables);
    let records: u64 = state.refs.tables.iter().map(|t| t.records).sum();
    assert!(records >= 3 * u64::from(N), "{:?}", state.refs.tables);
    // A fetch of one branch still answers (it seeks past the deletions).
    assert_eq!(main_by_one_branch_clone(tmp.path(), &url), c1);

    let said = assert_maintained(
        &server
            .store()
            .maintain(&["--repo", "tomb", "--grace", "0"], &[]),
    );
    let state = server.store().repo_state("tomb").unwrap();
    assert_eq!(state.refs.tables.len(), 1, "{said}");
    assert_eq!(
        state.refs.tables[0].records + state.refs.recent.len() as u64,
        u64::from(N) + 1,
        "no deletion record left at the bottom: {said}"
    );
    assert_eq!(listed(), all);
}
