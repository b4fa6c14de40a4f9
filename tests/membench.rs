//! membench end to end: a real `gitstow serve` (this package's binary), a
//! generated history pushed by the real git in every phase, and every file
//! of the output directory checked. Whatever `/metrics` answers (figures or
//! a 404) the run must complete.

mod common;

use std::fs;
use std::time::Duration;

use common::*;
use gitstow_membench::{report, Config, Summary};

#[test]
fn membench_measures_every_phase_and_writes_its_report() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src.git");
    histgen(
        &src,
        &gitstow_histgen::Options {
            seed: 7,
            commits: 300,
            ..Default::default()
        },
    );
    let store = TestStore::from_env(tmp.path());
    let out = tmp.path().join("out");
    let mut cfg = Config::new(src.to_str().unwrap(), &out);
    cfg.daemon_binary = Some(env!("CARGO_BIN_EXE_gitstow").into());
    cfg.store = Some(store.url());
    cfg.daemon_args = store.args().split_off(2); // the S3 flags, if any
    cfg.work_dir = Some(tmp.path().join("work"));
    cfg.idle = Duration::from_millis(1200);
    cfg.seq_pushes = 2;
    cfg.fixed_pushes = 2;
    cfg.gap = Duration::from_millis(500);
    cfg.conc_steps = vec![1, 2];
    cfg.settle = Duration::from_secs(1);
    cfg.sample_interval = Duration::from_millis(100);

    let result = gitstow_membench::run(&cfg).unwrap_or_else(|e| {
        panic!(
            "membench failed: {e:#}\n--- daemon.log ---\n{}",
            fs::read_to_string(out.join("daemon.log")).unwrap_or_default()
        )
    });
    let s = &result.summary;
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert!(
        s.input.pack.objects > 300 && s.input.pack.pack_bytes > 0,
        "{:?}",
        s.input
    );
    assert!(
        s.idle.samples >= 3 && s.idle.rss_anon_kb > 0,
        "{:?}",
        s.idle
    );

    // Every push landed: each repository advertises exactly the source's refs.
    let mut want: Vec<String> = git_out(
        &src,
        &["for-each-ref", "--format=%(objectname)\t%(refname)"],
    )
    .lines()
    .map(String::from)
    .collect();
    want.sort();
    let repos: Vec<&String> = s
        .seq
        .iter()
        .map(|p| &p.repo)
        .chain(s.conc.iter().flat_map(|c| &c.repos))
        .collect();
    assert_eq!(repos.len(), 2 + 1 + 2);
    let server = Server::start_on(Some(&store), &[], &[]);
    for repo in &repos {
        let name = repo.strip_suffix(".git").unwrap();
        let mut got: Vec<String> = ls_remote(&server.url(name))
            .lines()
            .filter(|l| l.contains("\trefs/") && !l.ends_with("^{}"))
            .map(String::from)
            .collect();
        got.sort();
        assert_eq!(got, want, "refs of {repo}");
    }

    // The small pushes: one commit each, landed, with their own figures.
    assert_eq!(s.fixed.len(), 2);
    assert_eq!(s.fixed_pack.objects, 3, "{:?}", s.fixed_pack);
    for p in &s.fixed {
        assert_eq!(p.error, None);
        let refs = ls_remote(&server.url(p.repo.strip_suffix(".git").unwrap()));
        assert_eq!(
            refs.lines()
                .filter(|l| l.ends_with("\trefs/heads/main"))
                .count(),
            1,
            "{refs}"
        );
        assert!(p.span.allocated_bytes.unwrap() > 0, "{p:?}");
    }
    let split = gitstow_membench::split::split(s).expect("fixed and per-byte costs");
    assert!(split.allocated_per_byte.unwrap() > 0.0, "{split:?}");

    // Per-push figures.
    assert_eq!(s.seq.len(), 2);
    for p in &s.seq {
        assert_eq!(p.error, None);
        let x = &p.span;
        assert!(x.wall_s > 0.0 && x.cpu_s >= 0.0, "{p:?}");
        assert!(
            x.vm_hwm_peak_kb > 0 && x.rss_anon_peak_kb > 0 && x.rss_file_peak_kb > 0,
            "{p:?}"
        );
        assert!(x.vm_hwm_peak_kb >= x.rss_anon_peak_kb, "{p:?}");
        assert!(x.hwm_reset, "clear_refs failed");
        assert!(x.retained_anon_kb.unwrap() > 0, "{p:?}");
        assert!(p.pack_mb_per_s > 0.0 && p.objects_per_s > 0.0);
        // The daemon's /metrics: bytes allocated over the push, and its heap.
        let allocated = x.allocated_bytes.expect("allocated bytes from /metrics");
        assert!(
            allocated > s.input.pack.pack_bytes / 2,
            "{allocated} bytes allocated for a {}-byte pack",
            s.input.pack.pack_bytes
        );
        assert!(x.jemalloc_allocated_peak_bytes.unwrap() > 0, "{p:?}");
    }
    assert!(s.sampler.scrapes_ok > 0, "no /metrics scrape succeeded");
    // Heap profiles were taken (the first sample sets the first high).
    assert!(
        fs::read_dir(out.join("profiles")).unwrap().count() > 0,
        "no heap profile"
    );
    assert_eq!(s.conc.iter().map(|c| c.k).collect::<Vec<_>>(), vec![1, 2]);
    for c in &s.conc {
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.push_walls_s.len(), c.k);
        assert!(
            c.span.vm_hwm_peak_kb > 0 && c.span.rss_anon_peak_kb > 0,
            "{c:?}"
        );
    }
    assert!(s.settled_anon_kb.unwrap() > 0);
    let phases: Vec<&str> = s.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(phases, ["idle", "fixed", "seq", "conc", "settle"]);
    assert_eq!(
        s.targets.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![2, 6, 3, 5]
    );
    // each sequential push is followed by the span of the work it queued
    assert!(
        s.seq
            .iter()
            .all(|p| p.deferred.as_ref().is_some_and(|d| d.vm_hwm_peak_kb > 0)),
        "{:?}",
        s.seq
    );
    assert!(
        s.daemon.exit.as_deref().unwrap().contains("exited"),
        "{:?}",
        s.daemon.exit
    );
    // every sample is one scrape, successful or not
    let scrapes = s.sampler.scrapes_ok + s.sampler.scrapes_failed;
    assert_eq!(scrapes, result.samples.len() as u64);

    // report.md
    let md = fs::read_to_string(out.join("report.md")).unwrap();
    for needle in [
        "## Idle baseline",
        "## Pushes of one small commit",
        "## Sequential pushes",
        "## Fixed and per-byte costs",
        "## Concurrency sweep",
        "## Targets",
        "- **peak memory of a push: ",
        "- **bytes allocated per pack byte: ",
        "- **memory under concurrent pushes: ",
        "*Why:* ",
        &s.machine.git_version,
        &s.machine.daemon_version,
    ] {
        assert!(
            md.contains(needle),
            "{needle:?} missing from report.md:\n{md}"
        );
    }
    // samples.csv: the header, 15 cells a row, rows in every phase
    let csv = fs::read_to_string(out.join("samples.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(report::CSV_HEADER));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), result.samples.len());
    assert!(rows.iter().all(|r| r.len() == 15), "{csv}");
    for phase in ["idle", "fixed", "seq", "conc", "settle"] {
        assert!(
            rows.iter().any(|r| r[1] == phase),
            "no {phase} rows in samples.csv"
        );
    }
    assert!(
        rows.iter().all(|r| r[3].parse::<u64>().unwrap() > 0),
        "VmRSS column"
    );
    // summary.json parses back, and its per-push peaks are there
    let json = fs::read_to_string(out.join("summary.json")).unwrap();
    let back: Summary = serde_json_from(&json);
    assert_eq!(back.seq.len(), 2);
    for (a, b) in back.seq.iter().zip(&s.seq) {
        assert_eq!(
            (&a.repo, a.span.vm_hwm_peak_kb),
            (&b.repo, b.span.vm_hwm_peak_kb)
        );
        assert_eq!(a.span.rss_anon_peak_kb, b.span.rss_anon_peak_kb);
        assert!(a.span.vm_hwm_peak_kb > 0 && a.span.rss_anon_peak_kb > 0);
    }
    assert_eq!(back.conc.len(), 2);
    assert_eq!(back.targets, s.targets);
    assert_eq!(back.idle, s.idle);
    // plot.svg, repos.txt, daemon.log, profiles/
    let svg = fs::read_to_string(out.join("plot.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("</svg>") && svg.contains("<rect"));
    let repos_txt = fs::read_to_string(out.join("repos.txt")).unwrap();
    assert_eq!(repos_txt.lines().count(), 2 + 5, "{repos_txt}");
    for repo in &repos {
        let line = repos_txt
            .lines()
            .find(|l| l.contains(repo.as_str()))
            .unwrap();
        assert!(line.ends_with("\tok"), "{line}");
    }
    let log = fs::read_to_string(out.join("daemon.log")).unwrap();
    assert!(
        log.contains("gitstow listening on http://127.0.0.1:"),
        "{log}"
    );
    assert!(out.join("profiles").is_dir());
}

/// `summary.json` as a [`Summary`], failing the test with the text.
fn serde_json_from(text: &str) -> Summary {
    gitstow_membench::results::Summary::from_json(text)
        .unwrap_or_else(|e| panic!("summary.json does not parse: {e}\n{text}"))
}
