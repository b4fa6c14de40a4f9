//! The written results, as pure functions of what was measured:
//! `report.md` ([`markdown`]), `samples.csv` ([`csv`]), `summary.json`
//! ([`json`]), and the checks of the figures against their thresholds ([`evaluate_targets`]).

use std::fmt::Write;

use crate::results::{ConcStep, SeqPush, Span, Summary, Target};
use crate::sampler::Sample;

const MIB: f64 = 1024.0 * 1024.0;

/// kB → MiB with one decimal.
fn mib_kb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// Signed kB → MiB with one decimal.
fn mib_kb_signed(kb: i64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// Bytes → MiB with one decimal.
fn mib_bytes(b: u64) -> String {
    format!("{:.1}", b as f64 / MIB)
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "–".into())
}

/// Evaluates the checks on the summary's figures: the peak memory of a
/// push and of the maintenance it queues, the bytes a push allocates per
/// pack byte, and memory under concurrent pushes.
pub fn evaluate_targets(s: &Summary) -> Vec<Target> {
    let mut targets = vec![
        target_rise(s),
        target_deferred(s),
        target_allocated(s),
        target_concurrency(s),
    ];
    for t in &mut targets {
        let (name, why) = match t.id {
            2 => (
                "peak memory of a push",
                "a push must fit a small server whatever the pack: at most 64 MiB plus 100 bytes per object (the per-object tables), and never more than 128 MiB",
            ),
            6 => (
                "peak memory of the maintenance a push queues",
                "maintenance runs one pass at a time in a process whatever the load, so its peak does not add up with the pushes' (they wait for no pass); it must stay within the cap a small server gives a push, 128 MiB. Its VmHWM counts the containers' indexes and commit graph it maps (file pages the kernel can reclaim, as git's mapped .idx files are)",
            ),
            3 => (
                "bytes allocated per pack byte",
                "allocation is CPU time and fragmentation: resolving every delta once should allocate about the pack's size, not many times it. What a push of one small commit allocates (request, state, buffers: the fixed cost) is subtracted first, so that a small input is judged on what grows with its pack",
            ),
            _ => (
                "memory under concurrent pushes",
                "K pushes at once must cost at most K times one push: nothing shared may grow faster than the pushes themselves",
            ),
        };
        t.name = name.into();
        t.why = why.into();
    }
    targets
}

/// The successful sequential pushes.
fn ok_seq(s: &Summary) -> impl Iterator<Item = &SeqPush> {
    s.seq.iter().filter(|p| p.error.is_none())
}

fn target_rise(s: &Summary) -> Target {
    let objects = s.input.pack.objects;
    let rule =
        "push: VmHWM rise above idle VmRSS ≤ 128 MiB and ≤ 64 MiB + 100 B × objects".to_owned();
    let limit = (128.0 * MIB).min(64.0 * MIB + 100.0 * objects as f64);
    // the worst sequential push; without any, the K=1 step
    let worst = ok_seq(s)
        .map(|p| (format!("sequential push {}", p.index), p.span.rise_hwm_kb))
        .max_by_key(|(_, r)| *r)
        .or_else(|| {
            s.conc
                .iter()
                .find(|c| c.k == 1 && c.errors.is_empty())
                .map(|c| ("the K=1 step".to_owned(), c.span.rise_hwm_kb))
        });
    let Some((which, rise_kb)) = worst else {
        return Target {
            id: 2,
            name: String::new(),
            why: String::new(),
            rule,
            pass: None,
            detail: "no push succeeded".into(),
        };
    };
    let rise = rise_kb as f64 * 1024.0;
    Target {
        id: 2,
        name: String::new(),
        why: String::new(),
        rule,
        pass: Some(rise <= limit),
        detail: format!(
            "worst: {which}, rise {:.1} MiB; limit min(128 MiB, 64 MiB + 100 B × {objects} = {:.1} MiB) = {:.1} MiB",
            rise / MIB,
            (64.0 * MIB + 100.0 * objects as f64) / MIB,
            limit / MIB
        ),
    }
}

/// Target 6: the deferred span after each sequential push (its
/// maintenance pass), VmHWM rise above idle VmRSS ≤ 128 MiB.
fn target_deferred(s: &Summary) -> Target {
    let rule = "maintenance after a push: VmHWM rise above idle VmRSS ≤ 128 MiB".to_owned();
    let worst = ok_seq(s)
        .filter_map(|p| Some((p.index, p.deferred.as_ref()?.rise_hwm_kb)))
        .max_by_key(|(_, r)| *r);
    let (pass, detail) = match worst {
        Some((index, kb)) => (
            Some(kb as f64 * 1024.0 <= 128.0 * MIB),
            format!(
                "worst: after sequential push {index}, rise {} MiB",
                mib_kb_signed(kb)
            ),
        ),
        None => (
            None,
            "no sequential push was followed by a measured span".into(),
        ),
    };
    Target {
        id: 6,
        name: String::new(),
        why: String::new(),
        rule,
        pass,
        detail,
    }
}

fn target_allocated(s: &Summary) -> Target {
    let fixed = crate::split::split(s).and_then(|x| x.fixed_allocated);
    let rule = match fixed {
        Some(_) => "push: bytes allocated beyond a small push's ≤ 3 × pack bytes",
        None => "push: bytes allocated ≤ 3 × pack bytes",
    }
    .to_owned();
    let pack = s.input.pack.pack_bytes;
    let pushes: Vec<&SeqPush> = ok_seq(s).collect();
    let figures: Option<Vec<(usize, u64)>> = pushes
        .iter()
        .map(|p| Some((p.index, p.span.allocated_bytes?)))
        .collect();
    let unevaluated = |detail: &str| Target {
        id: 3,
        name: String::new(),
        why: String::new(),
        rule: rule.clone(),
        pass: None,
        detail: detail.into(),
    };
    match figures {
        _ if pushes.is_empty() => unevaluated("no sequential push succeeded"),
        None => unevaluated(
            "not evaluated: the daemon's /metrics gave no gitstow_allocated_bytes_total",
        ),
        Some(figures) => {
            let (index, worst) = figures.into_iter().max_by_key(|(_, a)| *a).unwrap();
            let beyond = worst.saturating_sub(fixed.unwrap_or(0));
            let fixed_text = fixed.map_or(String::new(), |f| {
                format!(" − {} MiB of a small push", mib_bytes(f))
            });
            Target {
                id: 3,
                name: String::new(),
                why: String::new(),
                rule,
                pass: Some(beyond as f64 <= 3.0 * pack as f64),
                detail: format!(
                    "worst: sequential push {index}, {} MiB allocated{fixed_text} = {:.2} × pack ({} MiB)",
                    mib_bytes(worst),
                    beyond as f64 / pack.max(1) as f64,
                    mib_bytes(pack)
                ),
            }
        }
    }
}

fn target_concurrency(s: &Summary) -> Target {
    let ok = |c: &&ConcStep| c.errors.is_empty();
    let k1 = s.conc.iter().filter(ok).find(|c| c.k == 1);
    let kn = s.conc.iter().filter(ok).find(|c| c.k == 8).or_else(|| {
        s.conc
            .iter()
            .filter(ok)
            .filter(|c| c.k > 1)
            .max_by_key(|c| c.k)
    });
    let k = kn.map_or(8, |c| c.k);
    let rule = format!("concurrency: VmHWM rise at K={k} ≤ {k} × rise at K=1");
    let (Some(k1), Some(kn)) = (k1, kn) else {
        return Target {
            id: 5,
            name: String::new(),
            why: String::new(),
            rule,
            pass: None,
            detail: "not evaluated: the sweep needs a successful K=1 step and one with K > 1"
                .into(),
        };
    };
    let (r1, rk) = (k1.span.rise_hwm_kb, kn.span.rise_hwm_kb);
    Target {
        id: 5,
        name: String::new(),
        why: String::new(),
        rule,
        pass: Some(rk <= k as i64 * r1),
        detail: format!(
            "rise at K={k} {} MiB; rise at K=1 {} MiB, × {k} = {} MiB",
            mib_kb_signed(rk),
            mib_kb_signed(r1),
            mib_kb_signed(k as i64 * r1)
        ),
    }
}

/// The verdict word of a target.
pub fn verdict(t: &Target) -> &'static str {
    match t.pass {
        Some(true) => "PASS",
        Some(false) => "FAIL",
        None => "N/A",
    }
}

/// Renders `report.md`.
pub fn markdown(s: &Summary) -> String {
    let mut md = String::new();
    let m = &s.machine;
    let _ = writeln!(md, "# membench: what a push costs gitstow in memory\n");
    let _ = writeln!(md, "Run started {} UTC.\n", s.started);
    let _ = writeln!(md, "## Machine\n");
    let _ = writeln!(
        md,
        "- {} cores, {:.1} GiB memory, Linux {}\n- {}\n- daemon: {}\n",
        m.cores,
        m.mem_total_kb as f64 / 1024.0 / 1024.0,
        m.kernel,
        m.git_version,
        m.daemon_version
    );
    let _ = writeln!(md, "## Input\n");
    let p = &s.input.pack;
    let _ = writeln!(
        md,
        "- repository: `{}`\n- push: `git push {}`\n- pack: {} bytes ({} MiB), {} objects \
         (objects: `git count-objects -v`; bytes: the `.pack` files of the local copy)\n",
        s.input.repo,
        s.input.push,
        p.pack_bytes,
        mib_bytes(p.pack_bytes),
        p.objects
    );
    let d = &s.daemon;
    let _ = writeln!(
        md,
        "## Daemon\n\n- `{} {}`\n- {} (pid {}); {}\n",
        d.binary,
        d.args.join(" "),
        d.url,
        d.pid,
        d.exit.as_deref().unwrap_or("still running at the end")
    );
    let st = &s.settings;
    let _ = writeln!(
        md,
        "Plan: idle {} s, {} sequential pushes with {} s gaps, concurrency steps {:?}, settle {} s; \
         a sample every {} ms.\n",
        st.idle_secs, st.seq_pushes, st.gap_secs, st.conc_steps, st.settle_secs, st.sample_interval_ms
    );
    let i = &s.idle;
    let _ = writeln!(md, "## Idle baseline (medians of {} samples)\n", i.samples);
    let _ = writeln!(
        md,
        "| VmRSS MiB | RssAnon MiB | RssFile MiB | Pss MiB | jemalloc allocated MiB |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        md,
        "| {} | {} | {} | {} | {} |\n",
        mib_kb(i.vm_rss_kb),
        mib_kb(i.rss_anon_kb),
        mib_kb(i.rss_file_kb),
        opt(i.pss_kb, mib_kb),
        opt(i.jemalloc_allocated_bytes, mib_bytes)
    );
    if !s.fixed.is_empty() {
        let _ = writeln!(
            md,
            "## Pushes of one small commit\n\n{} objects, {} bytes each, each into a new \
             repository: what any push costs whatever its size.\n",
            s.fixed_pack.objects, s.fixed_pack.pack_bytes
        );
        push_table(&mut md, &s.fixed, s.fixed_pack.pack_bytes);
    }
    let _ = writeln!(md, "## Sequential pushes\n");
    push_table(&mut md, &s.seq, s.input.pack.pack_bytes);
    split_section(&mut md, s);
    conc_table(&mut md, s);
    if let (Some(rss), Some(anon)) = (s.settled_rss_kb, s.settled_anon_kb) {
        let _ = writeln!(
            md,
            "## Settle\n\nAt the end: VmRSS {} MiB, RssAnon {} MiB ({} MiB above idle).\n",
            mib_kb(rss),
            mib_kb(anon),
            mib_kb_signed(anon as i64 - i.rss_anon_kb as i64)
        );
    }
    let _ = writeln!(md, "## Targets\n");
    for t in &s.targets {
        let _ = writeln!(
            md,
            "- **{}: {}** — {}: {}. *Why:* {}.",
            t.name,
            verdict(t),
            t.rule,
            t.detail,
            t.why
        );
    }
    let _ = writeln!(md, "\n## Notes\n");
    if s.notes.is_empty() {
        let _ = writeln!(
            md,
            "- The memory targets use the kernel's exact peak (VmHWM, reset before each push and \
             each deferred span) above the idle VmRSS: a sampled figure misses peaks shorter \
             than the sampling interval. RssAnon (sampled) is shown beside it."
        );
    }
    for n in &s.notes {
        let _ = writeln!(md, "- {n}");
    }
    let _ = writeln!(
        md,
        "- Sources: VmRSS, VmHWM, RssAnon, RssFile from /proc/PID/status; Pss, Private_Dirty from \
         /proc/PID/smaps_rollup; CPU = utime + stime of /proc/PID/stat; the peak VmHWM is the \
         kernel's after `echo 5 > /proc/PID/clear_refs` before each push or step, other peaks \
         are the highest sample; rise above idle = peak VmHWM − idle VmRSS (what the targets use), \
         anon rise above idle = peak RssAnon − idle RssAnon, rise above start = peak RssAnon − \
         RssAnon when the push or step started; a sequential push's deferred span runs from its \
         end until the daemon uses under a quarter of a core over 2 s (its maintenance pass is \
         done), so the next \
         push starts on a still daemon; retained = one gap after the span ended; \
         allocated = growth of gitstow_allocated_bytes_total on /metrics."
    );
    let sm = &s.sampler;
    let _ = writeln!(
        md,
        "- /metrics scrapes: {} ok, {} failed{}.",
        sm.scrapes_ok,
        sm.scrapes_failed,
        sm.first_scrape_error
            .as_deref()
            .map(|e| format!(" (first: {})", e.replace('\n', " ")))
            .unwrap_or_default()
    );
    let ok = s.profiles.iter().filter(|p| p.error.is_none()).count();
    let _ = writeln!(
        md,
        "- Heap profiles: {ok} saved in profiles/ of {} asked for{}.",
        s.profiles.len(),
        s.profiles
            .iter()
            .find_map(|p| p.error.as_deref())
            .map(|e| format!(" (first failure: {})", e.replace('\n', " ")))
            .unwrap_or_default()
    );
    if !s.failures.is_empty() {
        let _ = writeln!(md, "\n## Failures\n");
        for f in &s.failures {
            let _ = writeln!(md, "- {}", f.replace('\n', " "));
        }
    }
    let _ = writeln!(
        md,
        "\nFiles: samples.csv, summary.json, plot.svg, profiles/, daemon.log, repos.txt."
    );
    md
}

/// One row of [`push_table`]: a push's span (with its rates) or the
/// deferred span after it (rates blank).
fn span_row(md: &mut String, label: &str, x: &Span, pack: f64, push: Option<&SeqPush>) {
    let _ = writeln!(
        md,
        "| {label} | {:.2} | {:.2} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        x.wall_s,
        x.cpu_s,
        mib_kb(x.vm_hwm_peak_kb),
        if x.hwm_reset { "" } else { " (since start)" },
        mib_kb_signed(x.rise_hwm_kb),
        mib_kb(x.rss_anon_peak_kb),
        mib_kb(x.rss_file_peak_kb),
        mib_kb_signed(x.rise_anon_kb),
        mib_kb_signed(x.rise_from_start_kb),
        opt(x.retained_rss_kb, mib_kb),
        opt(x.retained_anon_kb, mib_kb),
        opt(x.allocated_bytes, mib_bytes),
        opt(x.allocated_bytes, |a| format!("{:.2}", a as f64 / pack)),
        push.map_or(String::new(), |p| format!("{:.1}", p.pack_mb_per_s)),
        push.map_or(String::new(), |p| format!("{:.0}", p.objects_per_s)),
    );
}

/// A table of single pushes that each send `pack_bytes`, each sequential
/// push followed by the deferred work it left (`N (after)`).
fn push_table(md: &mut String, pushes: &[SeqPush], pack_bytes: u64) {
    if pushes.is_empty() {
        let _ = writeln!(md, "None.\n");
        return;
    }
    let _ = writeln!(
        md,
        "| # | wall s | CPU s | VmHWM peak MiB | rise above idle (VmHWM) MiB | RssAnon peak MiB | RssFile peak MiB | rise above idle (anon) MiB \
         | rise above start (anon) MiB | retained RSS MiB | retained anon MiB | allocated MiB | allocated / pack \
         | MB/s | objects/s |"
    );
    let _ = writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let pack = pack_bytes.max(1) as f64;
    for p in pushes {
        let x = &p.span;
        if let Some(e) = &p.error {
            let _ = writeln!(
                md,
                "| {} | {:.2} | FAILED: {} |",
                p.index,
                x.wall_s,
                e.replace(['\n', '|'], " ")
            );
            continue;
        }
        span_row(md, &p.index.to_string(), x, pack, Some(p));
        if let Some(d) = &p.deferred {
            span_row(md, &format!("{} (after)", p.index), d, pack, None);
        }
    }
    let _ = writeln!(md);
}

/// The fixed and per-byte parts of a push's cost ([`crate::split`]).
fn split_section(md: &mut String, s: &Summary) {
    let Some(x) = crate::split::split(s) else {
        return;
    };
    let _ = writeln!(
        md,
        "## Fixed and per-byte costs\n\n\
         A push's cost is a fixed part, paid by any push (the median of {} pushes of one small \
         commit), plus a part that grows with what is pushed (the median of {} sequential \
         pushes of the input, less the fixed part, over the input's {} MiB and {} objects).\n",
        x.fixed_pushes,
        x.input_pushes,
        mib_bytes(s.input.pack.pack_bytes),
        s.input.pack.objects
    );
    let _ = writeln!(md, "| | fixed, per push | beyond it |");
    let _ = writeln!(md, "|---|---:|---:|");
    let _ = writeln!(
        md,
        "| daemon CPU | {:.3} s | {:.3} s per MiB of pack |",
        x.fixed_cpu_s, x.cpu_s_per_mib
    );
    let _ = writeln!(
        md,
        "| memory: RssAnon rise above start | {} MiB | {:.0} bytes per object |",
        mib_kb_signed(x.fixed_rise_kb),
        x.rise_per_object
    );
    let _ = writeln!(
        md,
        "| allocated | {} MiB | {} per pack byte |\n",
        opt(x.fixed_allocated, mib_bytes),
        opt(x.allocated_per_byte, |a| format!("{a:.2} bytes"))
    );
}

fn conc_table(md: &mut String, s: &Summary) {
    let _ = writeln!(
        md,
        "## Concurrency sweep (K pushes started at once, each into its own repository)\n\n\
         The daemon resolves at most `--max-concurrent-pushes` of them at once (default: one \
         per core) and queues the rest; \"in flight\" is the most it ran at once (sampled \
         `gitstow_pushes_in_flight`), so rows past the cap show memory staying flat.\n"
    );
    if s.conc.is_empty() {
        let _ = writeln!(md, "None.\n");
        return;
    }
    let _ = writeln!(
        md,
        "| K | wall s | CPU s | VmHWM peak MiB | RssAnon peak MiB | rise above idle MiB | rise / K MiB \
         | rise(K) / rise(1) | rise above start MiB | retained anon MiB | allocated MiB | in flight | failed |"
    );
    let _ = writeln!(
        md,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for c in &s.conc {
        let x = &c.span;
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} |",
            c.k,
            x.wall_s,
            x.cpu_s,
            mib_kb(x.vm_hwm_peak_kb),
            mib_kb(x.rss_anon_peak_kb),
            mib_kb_signed(x.rise_anon_kb),
            c.rise_per_push_kb / 1024.0,
            opt(c.rise_ratio_to_k1, |r| format!("{r:.2}")),
            mib_kb_signed(x.rise_from_start_kb),
            opt(x.retained_anon_kb, mib_kb),
            opt(x.allocated_bytes, mib_bytes),
            opt(x.pushes_in_flight_peak, |n| n.to_string()),
            c.errors.len()
        );
    }
    let _ = writeln!(md);
}

/// The header of `samples.csv` (memory in kB, CPU in s, metrics in bytes).
pub const CSV_HEADER: &str = "t_ms,phase,step,vm_rss_kb,vm_hwm_kb,rss_anon_kb,rss_file_kb,pss_kb,\
private_dirty_kb,cpu_s,jemalloc_allocated_bytes,jemalloc_active_bytes,jemalloc_resident_bytes,\
allocated_bytes_total,pushes_in_flight";

/// Renders `samples.csv`: [`CSV_HEADER`] and one row per sample; the metrics
/// cells are empty when that scrape failed.
pub fn csv(samples: &[Sample]) -> String {
    let mut out = String::with_capacity(64 + samples.len() * 120);
    let cell = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    let _ = writeln!(out, "{CSV_HEADER}");
    for s in samples {
        let m = s.metrics.unwrap_or_default();
        let cpu = if s.cpu_s.is_finite() {
            format!("{:.3}", s.cpu_s)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.t_ms,
            s.phase,
            s.step,
            s.vm_rss_kb,
            s.vm_hwm_kb,
            s.rss_anon_kb,
            s.rss_file_kb,
            cell(s.pss_kb),
            cell(s.private_dirty_kb),
            cpu,
            cell(m.jemalloc_allocated_bytes),
            cell(m.jemalloc_active_bytes),
            cell(m.jemalloc_resident_bytes),
            cell(m.allocated_bytes_total),
            cell(m.pushes_in_flight)
        );
    }
    out
}

/// Renders `summary.json`.
pub fn json(s: &Summary) -> String {
    serde_json::to_string_pretty(s).expect("a summary always serializes")
}

#[cfg(test)]
mod tests;
