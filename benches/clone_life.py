#!/usr/bin/env python3
"""Clones over a repository's life, on defaults: what a `git clone --mirror`,
a `--single-branch --no-tags` clone and a `--filter=blob:none` clone cost
`gitstow serve` (automatic maintenance only, never `maintain --gc` by hand)
and canonical `git http-backend` at its best, right after the import and
after a number of pushes since; and what those pushes and the maintenance
they caused cost each side. Stdlib only (and the `zstd` command).

usage: python3 benches/clone_life.py --repo SRC [--branch master]
           [--points 0,1,20,200] [--clones 3] [--tags]
           [--gitstow target/release/gitstow]
           [--http-backend-server ../shared/tools/git-http-backend-server.py]
           [--workdir DIR] [--out FILE.md]

What one run does:
1. The import: BRANCH's first-parent commit that lies max(--points)
   commits before its tip (with --tags, every tag it reaches) is pushed to
   both servers, each push measured. gitstow runs on its defaults; git's
   repository keeps git's defaults for a server (`receive.autogc`:
   receive-pack runs `git gc --auto` after each push; `gc.autoDetach` off so
   that its CPU counts).
2. Then the next first-parent commits, one push each, to both servers.
3. At each point of --points (pushes since the import): git is brought to
   its best (`repack -adb`, `commit-graph write --reachable`; its CPU is
   reported apart, as what "at its best" costs), then each clone runs
   --clones times against each side: server CPU (gitstow: its threads'
   schedstat until its CPU settles; git: getrusage of the CGI host's
   children), the bytes of the pack received, and gitstow's `via`.
4. The life's work: CPU of the pushes (gitstow: the push and the
   maintenance pass it queued; git: receive-pack and its `gc --auto`), the
   CPU and bytes of gitstow's maintenance passes (from its `maintenance`
   log lines), the bytes git's repacks wrote, and the first automatic GC
   (push, seconds after the import, reason) if there was one.
Medians; ratio = gitstow / git.
"""
import argparse, os, re, resource, shutil, signal, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import replay  # noqa: E402
import side_by_side as sbs  # noqa: E402
from fetch_cost import CpuSampler  # noqa: E402
from gc_work import state  # noqa: E402

log, git = replay.log, replay.git
log_lines, field = sbs.log_lines, sbs.log_field
CLONES = (
    ("clone --mirror", ["--mirror"]),
    ("clone --single-branch --no-tags", ["--bare", "--single-branch", "--no-tags"]),
    ("clone --filter=blob:none", ["--bare", "--filter=blob:none"]),
)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pack_files(repo):
    d = os.path.join(repo, "objects", "pack")
    return {f: os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)} if os.path.isdir(d) else {}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--branch", default="master")
    ap.add_argument("--points", default="0,1,20,200")
    ap.add_argument("--clones", type=int, default=3)
    ap.add_argument("--tags", action="store_true")
    ap.add_argument("--gitstow", default="target/release/gitstow")
    ap.add_argument("--http-backend-server",
                    default=os.path.join(HERE, "..", "..", "shared", "tools", "git-http-backend-server.py"))
    ap.add_argument("--workdir")
    ap.add_argument("--out")
    a = ap.parse_args()
    points = sorted({int(p) for p in a.points.split(",") if p})
    hb_server = os.path.abspath(a.http_backend_server)
    base = a.workdir or tempfile.mkdtemp(prefix="gitstow-clone-life-")
    os.makedirs(base, exist_ok=True)
    firsts = git("-C", a.repo, "rev-list", "--first-parent", "--reverse", a.branch).stdout.split()
    start = len(firsts) - 1 - points[-1]
    if start < 1:
        sys.exit("%s has only %d first-parent commits" % (a.branch, len(firsts)))

    store = os.path.join(base, "store")
    os.environ.setdefault("GITSTOW_LOG", "info")
    gs, gs_root = sbs.start_gitstow(os.path.abspath(a.gitstow), "file://" + store, base)
    gs_log = os.path.join(base, "gitstow.err")
    hb_root = os.path.join(base, "hb")
    hb_repo = os.path.join(hb_root, "bench.git")
    os.makedirs(hb_root, exist_ok=True)
    git("init", "--quiet", "--bare", "-b", "main", hb_repo)
    for k, v in (("http.receivepack", "true"), ("uploadpack.allowFilter", "true"), ("gc.autoDetach", "false")):
        git("-C", hb_repo, "config", k, v)
    signal.signal(signal.SIGTERM, lambda *_: (gs.kill(), sys.exit(1)))

    life = {"gs_push": 0.0, "hb_push": 0.0, "hb_written": 0, "hb_best": 0.0, "hb_best_written": 0}
    first_gc = None
    imported_at = None
    rows = []  # (point, clone, gs cpu, hb cpu, gs bytes, hb bytes, via)

    def push(n, refspecs):
        """Pushes `refspecs` of SRC to both sides; adds the CPU to `life`."""
        nonlocal first_gc
        mark = os.path.getsize(gs_log)
        replay.settle(gs.pid, replay.own_cpu)
        sampler = CpuSampler(gs.pid)
        sampler.start()
        sbs.timed_client(["-C", a.repo, "push", "--quiet", gs_root + "/bench.git", *refspecs],
                         os.path.join(base, "push-gs.err"))
        replay.settle(gs.pid, replay.own_cpu, limit=120)
        life["gs_push"] += sampler.seconds()
        for ln in log_lines(gs_log, mark, "maintenance"):
            life.setdefault("gs_maint_cpu", 0.0)
            life["gs_maint_cpu"] += int(field(ln, "cpu_ms") or 0) / 1000
            life["gs_maint_bytes"] = life.get("gs_maint_bytes", 0) + int(field(ln, "bytes_rewritten") or 0)
            life["gs_passes"] = life.get("gs_passes", 0) + 1
            if field(ln, "gc") == "true" and first_gc is None:
                first_gc = (n, time.monotonic() - imported_at, field(ln, "gc_reason"))
        before = pack_files(hb_repo)
        r = sbs.http_backend_phase(hb_server, hb_root, lambda url: [
            "-C", a.repo, "push", "--quiet", url + "/bench.git", *refspecs], base, "push")
        life["hb_push"] += r["cpu"]
        after = pack_files(hb_repo)
        life["hb_written"] += sum(s for f, s in after.items() if f not in before)

    def best():
        """git at its best before a measurement: one pack with bitmaps and a commit-graph."""
        before, cpu = pack_files(hb_repo), children_cpu()
        git("-C", hb_repo, "repack", "-adbq", "--write-bitmap-index")
        git("-C", hb_repo, "commit-graph", "write", "--reachable")
        life["hb_best"] += children_cpu() - cpu
        life["hb_best_written"] += sum(s for f, s in pack_files(hb_repo).items() if f not in before)

    def clones(point):
        for name, extra in CLONES:
            gs_cpu, hb_cpu, gs_bytes, hb_bytes, vias = [], [], [], [], []
            for i in range(a.clones):
                for side in ("gs", "hb") if i % 2 == 0 else ("hb", "gs"):
                    dest = os.path.join(base, "clone-" + side)
                    shutil.rmtree(dest, ignore_errors=True)
                    args = lambda url: ["clone", "--quiet", *extra, url + "/bench.git", dest]
                    if side == "gs":
                        replay.settle(gs.pid, replay.own_cpu)
                        mark = os.path.getsize(gs_log)
                        sampler = CpuSampler(gs.pid)
                        sampler.start()
                        sbs.gitstow_phase(gs.pid, args(gs_root), os.path.join(base, "clone-gs.err"))
                        gs_cpu.append(sampler.seconds())
                        gs_bytes.append(replay.newest_pack_bytes(dest))
                        lines = log_lines(gs_log, mark, "upload-pack")
                        vias.append(field(lines[-1], "via") if lines else "?")
                    else:
                        r = sbs.http_backend_phase(hb_server, hb_root, args, base, "clone")
                        hb_cpu.append(r["cpu"])
                        hb_bytes.append(replay.newest_pack_bytes(dest))
            med = statistics.median
            rows.append((point, name, med(gs_cpu), med(hb_cpu), med(gs_bytes), med(hb_bytes),
                         ",".join(sorted(set(vias)))))
            log("after %d pushes, %s: gitstow %.3f s, git %.3f s (%.2fx), bytes %.3fx, via %s" % (
                point, name, med(gs_cpu), med(hb_cpu), med(gs_cpu) / med(hb_cpu),
                med(gs_bytes) / med(hb_bytes), rows[-1][6]))

    try:
        refspecs = ["%s:refs/heads/main" % firsts[start]]
        if a.tags:
            tags = git("-C", a.repo, "tag", "--merged", firsts[start]).stdout.split()
            refspecs += ["refs/tags/%s:refs/tags/%s" % (t, t) for t in tags]
        log("import of %s (%d first-parent commits, %d refs)" % (firsts[start][:12], start + 1, len(refspecs)))
        imported_at = time.monotonic()
        push(0, refspecs)
        imported = dict(life)
        done = 0
        for point in points:
            while done < point:
                done += 1
                push(done, ["%s:refs/heads/main" % firsts[start + done]])
            inside, outside, containers = state(store, "bench")
            log("%d pushes: %d objects in the closure, %d outside, %d containers" % (done, inside, outside, containers))
            best()
            clones(point)
        inside, outside, containers = state(store, "bench")
    finally:
        gs.kill()

    out = ["# Clones over a repository's life: gitstow on defaults vs git http-backend at its best", "",
           "- source: %s %s; import at first-parent commit %d of %d%s" % (
               a.repo, a.branch, start + 1, len(firsts), " with its tags" if a.tags else ""),
           "- medians of %d clones per side; ratio = gitstow / git" % a.clones, "",
           "| pushes since the import | clone | gitstow CPU (s) | git CPU (s) | CPU ratio | bytes ratio | gitstow via |",
           "|---|---|---|---|---|---|---|"]
    for p, name, g, h, gb, hb, via in rows:
        out.append("| %d | %s | %.3f | %.3f | %.2f | %.3f | %s |" % (p, name, g, h, g / h, gb / hb, via))
    pushes = points[-1]
    since = {k: life.get(k, 0) - imported.get(k, 0) for k in set(life) | set(imported)}
    ratio = lambda g, h: "%.2f" % (g / h) if h else "n/a"
    out += ["", "| the life's work | gitstow | git | ratio |", "|---|---|---|---|",
            "| import push: server CPU with the first maintenance pass / receive-pack and gc --auto (s) "
            "| %.2f | %.2f | %s |" % (imported["gs_push"], imported["hb_push"],
                                      ratio(imported["gs_push"], imported["hb_push"])),
            "| first maintenance pass after the import: CPU (s) | %.2f | | |" % imported.get("gs_maint_cpu", 0.0),
            "| %d pushes after it: server CPU with the maintenance they caused (s) | %.2f | %.2f | %s |" % (
                pushes, since["gs_push"], since["hb_push"], ratio(since["gs_push"], since["hb_push"])),
            "| of which maintenance passes (gitstow: %d passes) (s) | %.2f | (gc --auto) | |" % (
                since.get("gs_passes", 0), since.get("gs_maint_cpu", 0.0)),
            "| bytes rewritten by maintenance / packs written by receive-pack and gc --auto | %d | %d | |" % (
                since.get("gs_maint_bytes", 0), since["hb_written"]),
            "| git's repacks to its best before each measurement: CPU (s), bytes written | | %.2f, %d | |" % (
                life["hb_best"], life["hb_best_written"]),
            "", "- first automatic GC: %s" % (
                "push %d, %.0f s after the import (reason %s)" % first_gc if first_gc else
                "none within %d pushes" % pushes),
            "- at the end: %d objects in the closure, %d outside it (%.1f%%), %d containers" % (
                inside, outside, 100.0 * outside / max(inside, 1), containers)]
    text = "\n".join(out) + "\n"
    print(text)
    if a.out:
        open(a.out, "w").write(text)


if __name__ == "__main__":
    main()
