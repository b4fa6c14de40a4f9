//! The written results of a synthetic run: numbers, verdicts, CSV, JSON, SVG.

use super::*;
use crate::git::PackStats;
use crate::results::{Baseline, ConcStep, Input, Machine, PhaseSpan, SeqPush, Span, Summary};
use crate::sampler::Sample;
use crate::scrape::RuntimeMetrics;

const MIB_KB: u64 = 1024;

fn span(anon_peak_mib: u64, allocated: Option<u64>) -> Span {
    Span {
        start_ms: 1000,
        wall_s: 2.0,
        cpu_s: 1.5,
        vm_hwm_peak_kb: (anon_peak_mib + 12) * MIB_KB,
        rss_anon_peak_kb: anon_peak_mib * MIB_KB,
        rss_file_peak_kb: 12 * MIB_KB,
        rise_from_start_kb: 30 * MIB_KB as i64,
        retained_rss_kb: Some(40 * MIB_KB),
        retained_anon_kb: Some(28 * MIB_KB),
        allocated_bytes: allocated,
        samples: 8,
        hwm_reset: true,
        ..Span::default()
    }
}

/// idle RssAnon 20 MiB; pack 100 MiB of 10,000 objects; push 1 peaks at
/// 100 MiB anon (rise 80 MiB), push 2 at 60 MiB; K=1 rises 10 MiB, K=8 90 MiB.
fn synthetic(allocated: Option<u64>) -> Summary {
    let mut s = Summary {
        started: "2026-01-02T03:04:05Z".into(),
        machine: Machine {
            cores: 2,
            mem_total_kb: 24 * 1024 * 1024,
            kernel: "6.1.0".into(),
            git_version: "git version 2.47.3".into(),
            daemon_version: "gitstow 0.1.0".into(),
        },
        input: Input {
            repo: "/src/repo.git".into(),
            push: "--mirror".into(),
            pack: PackStats {
                objects: 10_000,
                pack_bytes: 100 << 20,
            },
        },
        idle: Baseline {
            samples: 12,
            vm_rss_kb: 32 * MIB_KB,
            rss_anon_kb: 20 * MIB_KB,
            rss_file_kb: 12 * MIB_KB,
            pss_kb: Some(30 * MIB_KB),
            jemalloc_allocated_bytes: None,
        },
        seq: vec![
            SeqPush {
                index: 1,
                repo: "a.git".into(),
                span: span(100, allocated),
                // its maintenance peaks at 150 MiB anon: a VmHWM rise of 130
                deferred: Some(span(150, None)),
                pack_mb_per_s: 52.4,
                objects_per_s: 5000.0,
                ..SeqPush::default()
            },
            SeqPush {
                index: 2,
                repo: "b.git".into(),
                span: span(60, allocated.map(|a| a / 2)),
                ..SeqPush::default()
            },
        ],
        conc: [(1, 30), (8, 110)]
            .into_iter()
            .map(|(k, peak)| ConcStep {
                k,
                repos: (0..k).map(|i| format!("c{k}-{i}.git")).collect(),
                push_walls_s: vec![2.0; k],
                span: span(peak, None),
                ..ConcStep::default()
            })
            .collect(),
        phases: vec![
            PhaseSpan {
                name: "idle".into(),
                start_ms: 0,
                end_ms: 3000,
            },
            PhaseSpan {
                name: "seq".into(),
                start_ms: 3000,
                end_ms: 9000,
            },
        ],
        ..Summary::default()
    };
    crate::derive(&mut s);
    s
}

#[test]
fn derived_rises_and_ratios() {
    let s = synthetic(Some(250 << 20));
    assert_eq!(s.seq[0].span.rise_anon_kb, 80 * 1024);
    assert_eq!(s.seq[1].span.rise_anon_kb, 40 * 1024);
    assert_eq!(s.conc[1].span.rise_anon_kb, 90 * 1024);
    assert_eq!(s.conc[1].rise_per_push_kb, 90.0 * 1024.0 / 8.0);
    assert_eq!(s.conc[1].rise_ratio_to_k1, Some(9.0));
    assert_eq!(s.conc[0].rise_ratio_to_k1, Some(1.0));
}

#[test]
fn targets_pass_and_fail_with_their_figures() {
    let s = synthetic(Some(250 << 20));
    let v: Vec<_> = s.targets.iter().map(|t| (t.id, t.pass)).collect();
    assert_eq!(
        v,
        vec![
            (2, Some(false)),
            (6, Some(false)),
            (3, Some(true)),
            (5, Some(false))
        ]
    );
    assert!(
        s.targets[1]
            .detail
            .contains("after sequential push 1, rise 130.0 MiB"),
        "{}",
        s.targets[1].detail
    );
    // (2): worst push 1, 80 MiB over min(128, 64 + 100 B × 10,000 ≈ 64.95) MiB
    assert!(
        s.targets[0]
            .detail
            .contains("sequential push 1, rise 80.0 MiB"),
        "{}",
        s.targets[0].detail
    );
    assert!(
        s.targets[0].detail.contains("= 65.0 MiB"),
        "{}",
        s.targets[0].detail
    );
    assert!(
        s.targets[2]
            .detail
            .contains("250.0 MiB allocated = 2.50 × pack"),
        "{}",
        s.targets[2].detail
    );
    assert!(s.targets[3]
        .detail
        .contains("rise at K=8 90.0 MiB; rise at K=1 10.0 MiB, × 8 = 80.0 MiB"));

    let md = markdown(&s);
    assert!(
        md.contains(
            "- **peak memory of a push: FAIL** — push: VmHWM rise above idle VmRSS ≤ 128 MiB and ≤ 64 MiB + 100 B × objects"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "- **bytes allocated per pack byte: PASS** — push: bytes allocated ≤ 3 × pack bytes"
        ),
        "{md}"
    );
    assert!(
        md.contains("- **memory under concurrent pushes: FAIL** — concurrency: VmHWM rise at K=8 ≤ 8 × rise at K=1"),
        "{md}"
    );
    // push 1's row: wall, CPU, VmHWM 112 (rise 80 above the idle VmRSS), anon 100, file 12,
    // anon rises 80 (idle) and 30 (start), retained 40/28, 250 MiB = 2.50×; then its
    // maintenance's row
    assert!(
        md.contains("| 1 | 2.00 | 1.50 | 112.0 | 80.0 | 100.0 | 12.0 | 80.0 | 30.0 | 40.0 | 28.0 | 250.0 | 2.50 | 52.4 | 5000 |"),
        "{md}"
    );
    assert!(
        md.contains("| 1 (after) | 2.00 | 1.50 | 162.0 | 130.0 | 150.0 | 12.0 | 130.0 |"),
        "{md}"
    );
    // K=8 row: rise 90, rise/K 11.25 → 11.2 (or 11.3), ratio 9.00
    assert!(
        md.contains("| 8 | 2.00 | 1.50 | 122.0 | 110.0 | 90.0 | 11."),
        "{md}"
    );
    assert!(md.contains("| 9.00 |"), "{md}");
    assert!(md.contains("2 cores, 24.0 GiB memory, Linux 6.1.0"));
    assert!(md.contains("10000 objects"));
    assert!(md.contains("the kernel's exact peak"));
    assert!(!md.contains("## Failures"));
}

#[test]
fn a_fast_and_lean_run_passes_everything() {
    let mut s = synthetic(Some(50 << 20));
    s.conc[1].span.vm_hwm_peak_kb = 82 * 1024; // rise 50 ≤ 8 × 10
    for p in &mut s.seq {
        p.span.vm_hwm_peak_kb = 72 * 1024; // rise 40 ≤ 65
        p.deferred = Some(span(120, None)); // rise 100 ≤ 128
    }
    crate::derive(&mut s);
    assert!(
        s.targets.iter().all(|t| t.pass == Some(true)),
        "{:?}",
        s.targets
    );
}

#[test]
fn without_metrics_or_steps_targets_are_not_evaluated() {
    let mut s = synthetic(None);
    s.conc.retain(|c| c.k == 1);
    s.notes = vec!["the spool is memory-mapped now".into()];
    crate::derive(&mut s);
    assert_eq!(s.targets[2].pass, None);
    assert!(s.targets[2]
        .detail
        .contains("gitstow_allocated_bytes_total"));
    assert_eq!(s.targets[3].pass, None);
    let md = markdown(&s);
    assert!(
        md.contains("- **bytes allocated per pack byte: N/A**"),
        "{md}"
    );
    assert!(md.contains("*Why:* "), "{md}");
    assert!(md.contains("- the spool is memory-mapped now"));
    assert!(!md.contains("the kernel's exact peak"));
    // allocation cells are dashes
    assert!(md.contains("| 28.0 | – | – | 52.4 |"), "{md}");
}

#[test]
fn failed_pushes_show_in_the_tables_and_failures() {
    let mut s = synthetic(Some(1));
    s.seq[1].error = Some("git push exited with 1: | boom\nline".into());
    s.failures = vec!["seq push 2 into b.git failed".into()];
    let md = markdown(&s);
    assert!(
        md.contains("| 2 | 2.00 | FAILED: git push exited with 1:   boom line |"),
        "{md}"
    );
    assert!(md.contains("## Failures\n\n- seq push 2 into b.git failed"));
}

fn sample(t_ms: u64, phase: &str, metrics: Option<RuntimeMetrics>) -> Sample {
    Sample {
        t_ms,
        phase: phase.into(),
        step: if phase == "seq" {
            "push-1".into()
        } else {
            String::new()
        },
        vm_rss_kb: 30_000 + t_ms,
        vm_hwm_kb: 40_000,
        rss_anon_kb: 20_000 + t_ms,
        rss_file_kb: 10_000,
        pss_kb: Some(29_000),
        private_dirty_kb: None,
        cpu_s: 0.25,
        metrics,
    }
}

fn samples() -> Vec<Sample> {
    let m = RuntimeMetrics {
        jemalloc_allocated_bytes: Some(5 << 20),
        jemalloc_active_bytes: Some(6 << 20),
        jemalloc_resident_bytes: Some(7 << 20),
        allocated_bytes_total: Some(123_456),
        received_bytes_total: None,
        pushes_in_flight: Some(1),
    };
    vec![
        sample(0, "idle", Some(m)),
        sample(250, "idle", None),
        sample(500, "idle", Some(m)),
        sample(3000, "seq", None),
        sample(4000, "seq", Some(m)),
    ]
}

#[test]
fn csv_header_and_rows() {
    let text = csv(&samples());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], CSV_HEADER);
    assert_eq!(lines.len(), 6);
    let columns = CSV_HEADER.split(',').count();
    assert_eq!(columns, 15);
    assert!(
        lines.iter().all(|l| l.split(',').count() == columns),
        "{text}"
    );
    assert_eq!(
        lines[1],
        "0,idle,,30000,40000,20000,10000,29000,,0.250,5242880,6291456,7340032,123456,1"
    );
    // a failed scrape keeps its /proc figures, metrics cells empty
    assert_eq!(
        lines[2],
        "250,idle,,30250,40000,20250,10000,29000,,0.250,,,,,"
    );
    assert!(lines[4].starts_with("3000,seq,push-1,33000,"));
}

#[test]
fn baseline_is_the_median_of_idle_samples() {
    let b = Baseline::from_samples(&samples());
    assert_eq!(b.samples, 3);
    assert_eq!(b.vm_rss_kb, 30_250);
    assert_eq!(b.rss_anon_kb, 20_250);
    assert_eq!(b.jemalloc_allocated_bytes, Some(5 << 20));
}

#[test]
fn summary_json_round_trips() {
    let s = synthetic(Some(250 << 20));
    let text = json(&s);
    let back: Summary = serde_json::from_str(&text).unwrap();
    assert_eq!(back, s);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["seq"][0]["span"]["vm_hwm_peak_kb"], 112 * 1024);
    assert_eq!(v["targets"][0]["pass"], false);
}

#[test]
fn svg_has_lines_and_shaded_phases() {
    let s = synthetic(None);
    let svg = crate::plot::svg(&samples(), &s.phases, 800, 400).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.contains("<svg"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    assert!(
        svg.contains("<polyline") || svg.contains("<path"),
        "no line in the plot"
    );
    assert!(svg.matches("<rect").count() >= 3, "phases not shaded"); // background + 2 phases
    for label in ["idle", "seq", "VmRSS", "RssAnon", "jemalloc allocated"] {
        assert!(svg.contains(label), "{label} missing from the plot");
    }
    // no samples at all still draws an (empty) chart
    crate::plot::svg(&[], &[], 400, 300).unwrap();
}

#[test]
fn utc_timestamps() {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    assert_eq!(
        crate::utc_timestamp(t),
        (
            "20231114T221320Z".to_owned(),
            "2023-11-14T22:13:20Z".to_owned()
        )
    );
    let leap = std::time::UNIX_EPOCH + std::time::Duration::from_secs(951_782_400); // 2000-02-29
    assert_eq!(crate::utc_timestamp(leap).1, "2000-02-29T00:00:00Z");
}

#[test]
fn a_small_push_is_subtracted_as_the_fixed_cost() {
    // Input pushes allocate 350 and 175 MiB of a 100 MiB pack: 3.5 × fails
    // the check on the whole; small pushes allocating 80 MiB (and using
    // 0.5 s of CPU, rising 10 MiB) are what any push costs.
    let mut s = synthetic(Some(350 << 20));
    assert_eq!(s.targets[2].pass, Some(false));
    s.fixed = (1..=3)
        .map(|i| SeqPush {
            index: i,
            repo: format!("small-{i}.git"),
            span: Span {
                cpu_s: 0.5,
                rise_from_start_kb: 10 * MIB_KB as i64,
                allocated_bytes: Some(80 << 20),
                ..Span::default()
            },
            ..SeqPush::default()
        })
        .collect();
    s.fixed_pack = PackStats {
        objects: 3,
        pack_bytes: 12_288,
    };
    crate::derive(&mut s);
    let t = &s.targets[2];
    assert_eq!(t.pass, Some(true), "{t:?}");
    assert!(
        t.detail
            .contains("350.0 MiB allocated − 80.0 MiB of a small push = 2.70 × pack"),
        "{}",
        t.detail
    );
    let x = crate::split::split(&s).unwrap();
    assert_eq!(x.fixed_pushes, 3);
    assert_eq!(x.fixed_allocated, Some(80 << 20));
    // Medians of the two input pushes (lower middle): 175 MiB, 1.5 s CPU,
    // 30 MiB rise; beyond the fixed part: 95 MiB, 1 s, 20 MiB.
    assert_eq!(x.allocated_per_byte, Some(0.95));
    assert!((x.cpu_s_per_mib - 0.01).abs() < 1e-9, "{x:?}");
    assert_eq!(x.rise_per_object, 20.0 * 1048576.0 / 10_000.0);
    let md = markdown(&s);
    assert!(md.contains("## Pushes of one small commit"), "{md}");
    assert!(md.contains("## Fixed and per-byte costs"), "{md}");
    assert!(
        md.contains("| daemon CPU | 0.500 s | 0.010 s per MiB of pack |"),
        "{md}"
    );
    assert!(
        md.contains("| allocated | 80.0 MiB | 0.95 bytes per pack byte |"),
        "{md}"
    );
    // Without small pushes nothing is subtracted and there is no split.
    let plain = synthetic(Some(350 << 20));
    assert!(crate::split::split(&plain).is_none());
    assert!(!markdown(&plain).contains("Fixed and per-byte"));
}
