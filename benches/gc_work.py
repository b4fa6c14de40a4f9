#!/usr/bin/env python3
"""What lies outside the closure costs a clone, and what a GC costs: the two
figures the work rule of automatic GC weighs (`--gc-outside-objects`,
`--gc-outside-percent`; `docs/plans/0013-clones-at-every-moment.md`).
Stdlib only (and the `zstd` command, to read the state).

usage: python3 benches/gc_work.py --repo SRC [--branch master] [--pushes 10]
           [--step 20] [--clones 3] [--gitstow target/release/gitstow]
           [--workdir DIR] [--out FILE.md]

1. `gitstow serve` (the work rule off: `--gc-outside-objects 0`; automatic
   compaction on) gets BRANCH's first-parent commit that lies
   pushes × step commits before its tip as refs/heads/main: the import,
   whose push records the closure.
2. Before the first push and after each push of the next --step
   first-parent commits: the objects outside the closure (from the state),
   and --clones `git clone --mirror` runs, each measured as gitstow's server
   CPU (its threads' schedstat, from before the clone until its CPU
   settles; median) and the upload-pack log line's `via` and `commits_read`.
3. `gitstow maintain --gc` on the store: its CPU (user + sys), wall time and
   the bytes it wrote; then the clone again.

Printed (and written to --out): one row per point, and the slope of clone
CPU over objects outside (least squares), against the GC's CPU per object.
"""

import argparse, json, os, re, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import replay  # noqa: E402
import side_by_side as sbs  # noqa: E402
from fetch_cost import CpuSampler  # noqa: E402


def git(*args, **kw):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True, **kw)


def state(store, name):
    raw = subprocess.run(["zstd", "-dc", os.path.join(store, name + ".git", "state")],
                         check=True, capture_output=True).stdout
    s = json.loads(raw)
    closure = set((s.get("closure") or {}).get("containers", []))
    live = {c["id"] for c in s["containers"]}
    if not closure <= live:
        closure = set()
    inside = sum(c["objects"] for c in s["containers"] if c["id"] in closure)
    outside = sum(c["objects"] for c in s["containers"] if c["id"] not in closure)
    return inside, outside, len(s["containers"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--branch", default="master")
    ap.add_argument("--pushes", type=int, default=10)
    ap.add_argument("--step", type=int, default=20)
    ap.add_argument("--clones", type=int, default=3)
    ap.add_argument("--gitstow", default="target/release/gitstow")
    ap.add_argument("--workdir")
    ap.add_argument("--out")
    a = ap.parse_args()
    base = a.workdir or tempfile.mkdtemp(prefix="gitstow-gc-work-")
    os.makedirs(base, exist_ok=True)
    firsts = git("-C", a.repo, "rev-list", "--first-parent", "--reverse", a.branch).stdout.split()
    start = len(firsts) - 1 - a.pushes * a.step
    if start < 0:
        sys.exit("%s has only %d first-parent commits" % (a.branch, len(firsts)))
    store = os.path.join(base, "store")
    gitstow = os.path.abspath(a.gitstow)
    log_path = os.path.join(base, "gitstow.err")
    rows = []
    server = {}

    def serve():
        gs, root = sbs.start_gitstow(gitstow, "file://" + store, base, ["--gc-outside-objects", "0"])
        server.update(proc=gs, url=root + "/bench.git")

    def clone():
        """Median server CPU of --clones mirror clones, and the last one's via and commits_read."""
        pid, cpus = server["proc"].pid, []
        dest = os.path.join(base, "clone.git")
        for _ in range(a.clones):
            shutil.rmtree(dest, ignore_errors=True)
            replay.settle(pid, replay.own_cpu)
            s = CpuSampler(pid)
            s.start()
            git("clone", "--quiet", "--mirror", server["url"], dest)
            replay.settle(pid, replay.own_cpu)
            cpus.append(s.seconds())
        shutil.rmtree(dest, ignore_errors=True)
        line = [l for l in open(log_path) if "upload-pack" in l and " objects=" in l][-1]
        via = re.search(r' via="(\w+)"', line).group(1)
        commits = int(re.search(r" commits_read=(\d+)", line).group(1))
        return statistics.median(cpus), via, commits

    def point(label):
        replay.settle(server["proc"].pid, replay.own_cpu)
        inside, outside, containers = state(store, "bench")
        cpu, via, commits = clone()
        rows.append((label, inside, outside, containers, cpu, via, commits))
        print("%-22s closure %8d  outside %7d  containers %3d  clone %.3f s  via=%s commits_read=%d"
              % rows[-1], flush=True)

    serve()
    try:
        git("-C", a.repo, "push", "--quiet", server["url"], "%s:refs/heads/main" % firsts[start])
        point("import")
        for p in range(1, a.pushes + 1):
            sha = firsts[start + p * a.step]
            git("-C", a.repo, "push", "--quiet", server["url"], "%s:refs/heads/main" % sha)
            point("after push %d" % p)
        server["proc"].kill()
        server["proc"].wait()
        t0, before = time.monotonic(), os.times()
        gc = subprocess.run([gitstow, "maintain", "--store", "file://" + store, "--repo", "bench", "--gc"],
                            capture_output=True, text=True)
        after, wall = os.times(), time.monotonic() - t0
        if gc.returncode:
            sys.exit("gitstow maintain --gc failed:\n" + gc.stderr)
        gc_cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        print(gc.stdout.strip())
        serve()
        point("after maintain --gc")
    finally:
        if server["proc"].poll() is None:
            server["proc"].kill()
    xs = [r[2] for r in rows[:-1]]
    ys = [r[4] for r in rows[:-1]]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    total = rows[-1][1] + rows[-1][2]
    text = ["| point | closure objects | outside objects | containers | clone --mirror server CPU (s) | via | commits read |",
            "|---|---|---|---|---|---|---|"]
    text += ["| %s | %d | %d | %d | %.3f | %s | %d |" % r for r in rows]
    text += ["",
             "clone CPU per object outside the closure: %.2f µs (least squares over %d points)" % (slope * 1e6, len(xs)),
             "GC: %.2f s CPU, %.2f s wall, %d objects after it: %.2f µs an object" % (gc_cpu, wall, total, gc_cpu / max(total, 1) * 1e6)]
    print("\n".join(text))
    if a.out:
        open(a.out, "w").write("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
