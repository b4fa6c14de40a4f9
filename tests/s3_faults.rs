//! Injected store faults (`GITSTOW_FAULTS`, see `gitstow_store::fault`) during
//! pushes and clones against the S3 server of the `S3_*` variables: a push
//! either lands whole and says so, or reports an error and changes nothing,
//! and the daemon keeps serving.

mod common;

use common::*;

struct Case {
    spec: &'static str,
    /// Whether the push must land (`Some(true)`), must fail (`Some(false)`).
    lands: bool,
}

const CASES: &[Case] = &[
    // The commit point fails: nothing may change.
    Case {
        spec: "put:/state:fail",
        lands: false,
    },
    // A container upload fails: nothing may change.
    Case {
        spec: "put_file:.bin:fail",
        lands: false,
    },
    // The index upload fails after its container went up.
    Case {
        spec: "put:.idx:fail",
        lands: false,
    },
    // The state write lands but reports an error (a timeout after the fact):
    // read back, it counts as committed.
    Case {
        spec: "put:/state:fail-after",
        lands: true,
    },
    // Reading the state before the push fails once.
    Case {
        spec: "get:/state:fail:1",
        lands: false,
    },
    // Slow requests everywhere: still lands.
    Case {
        spec: "*::delay=20",
        lands: true,
    },
];

#[test]
fn pushes_land_whole_or_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.git");
    histgen(
        &base,
        &gitstow_histgen::Options {
            seed: 31,
            commits: 60,
            ..Default::default()
        },
    );
    for (n, case) in CASES.iter().enumerate() {
        let store = TestStore::s3();
        let repo = "faulty";
        {
            let clean = Server::start_on(Some(&store), &[], &[]);
            git(&base, &["push", "--quiet", "--mirror", &clean.url(repo)]);
        }
        let server = Server::start_on(Some(&store), &[], &[("GITSTOW_FAULTS", case.spec)]);
        let url = server.url(repo);
        let work = tmp.path().join(format!("w{n}"));
        git(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                &base.to_string_lossy(),
                work.to_str().unwrap(),
            ],
        );
        commit_files(&work, &[("new-file", &format!("case {n}\n"))], "update");
        let before = {
            let clean = Server::start_on(Some(&store), &[], &[]);
            ls_remote(&clean.url(repo))
        };
        let out = git_cmd(&work)
            .args([
                "push",
                &url,
                "HEAD:refs/heads/main",
                "HEAD:refs/heads/added",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let clean = Server::start_on(Some(&store), &[], &[]);
        let after = ls_remote(&clean.url(repo));
        if case.lands {
            assert!(out.status.success(), "{}: push failed: {stderr}", case.spec);
            assert!(
                after.contains(&git_out(&work, &["rev-parse", "HEAD"])),
                "{}: not landed:\n{after}",
                case.spec
            );
        } else {
            assert!(
                !out.status.success(),
                "{}: push reported success:\n{stderr}",
                case.spec
            );
            assert_eq!(
                before, after,
                "{}: the refs changed although the push failed",
                case.spec
            );
            assert!(
                stderr.contains("remote rejected")
                    || stderr.contains("unpack")
                    || stderr.contains("error"),
                "{}: no clear error: {stderr}",
                case.spec
            );
        }
        // The faulty daemon still answers, and the repository is whole.
        let probe = http(
            server.port(),
            "GET",
            &format!("/{repo}.git/info/refs?service=git-receive-pack"),
            &[],
            b"",
        );
        assert_ne!(probe.status, 0);
        let mirror = tmp.path().join(format!("m{n}.git"));
        git(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                "--mirror",
                &clean.url(repo),
                mirror.to_str().unwrap(),
            ],
        );
        fsck(&mirror);
        println!(
            "fault {:?}: push {}",
            case.spec,
            if case.lands {
                "landed"
            } else {
                "refused, state unchanged"
            }
        );
    }
}

/// A clone through a daemon whose container reads are slow or fail once
/// either completes correctly or fails cleanly; it never hangs.
#[test]
fn clones_survive_slow_or_failing_reads() {
    let store = TestStore::s3();
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.git");
    histgen(
        &base,
        &gitstow_histgen::Options {
            seed: 32,
            commits: 60,
            ..Default::default()
        },
    );
    {
        let clean = Server::start_on(Some(&store), &[], &[]);
        git(&base, &["push", "--quiet", "--mirror", &clean.url("reads")]);
    }
    let slow = Server::start_on(
        Some(&store),
        &[],
        &[("GITSTOW_FAULTS", "get_range:.bin:delay=5")],
    );
    let c1 = tmp.path().join("slow.git");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            &slow.url("reads"),
            c1.to_str().unwrap(),
        ],
    );
    fsck(&c1);
    let failing = Server::start_on(
        Some(&store),
        &[],
        &[("GITSTOW_FAULTS", "get:.idx:fail;get_range:.idx:fail")],
    );
    let err = git_fail(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--mirror",
            &failing.url("reads"),
            "fails.git",
        ],
    );
    assert!(!err.is_empty(), "a failing clone printed nothing");
    // The same daemon still serves the advertisement.
    let probe = http(
        failing.port(),
        "GET",
        "/reads.git/info/refs?service=git-upload-pack",
        &[],
        b"",
    );
    assert_eq!(probe.status, 200);
}
