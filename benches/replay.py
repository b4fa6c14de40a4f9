#!/usr/bin/env python3
"""Replay: a repository's life as many small pushes, each followed by an
incremental fetch from a second clone, against `gitstow serve` (automatic
maintenance on) and against canonical `git http-backend`, in one run.
Prints per-step server CPU of the push and of the fetch, gitstow's live
container count and stored bytes, git's pack count and bytes. Stdlib only.

usage: python3 benches/replay.py --repo SRC [--branch master] [--pushes 1000]
           [--gitstow target/release/gitstow]
           [--http-backend-server ../shared/tools/git-http-backend-server.py]
           [--git-maintenance-every 100] [--out FILE.md] [--csv FILE.csv]
           [--workdir DIR] [--keep]

Method:
- The first-parent history of BRANCH in SRC, oldest first; the commit
  `--pushes` steps before the tip is pushed first (the initial import), then
  each later first-parent commit is pushed on its own (`git push URL
  SHA:refs/heads/main`), merged side branches included.
- After each push the daemon's CPU is left to settle (maintenance runs after
  pushes, and is counted in the push's figure), then a second clone that
  started at the initial import runs `git fetch`; its server CPU is the
  fetch's.
- gitstow CPU: utime+stime of the daemon (/proc/PID/stat, in clock ticks
  of 10 ms); besides, the CPU of the upload-pack worker threads as the
  daemon logs it (`cpu_us`, CLOCK_THREAD_CPUTIME_ID, nanosecond clock), the
  precise figure of the walk and the pack, and the index searches a lookup
  made (`index_probes` / `lookups`). git CPU: the
  children's CPU (cutime+cstime) of the CGI host, whose children are every
  `git http-backend` and, through them, receive-pack, index-pack,
  upload-pack and pack-objects (each waited for before the client returns).
- git at its best: after the initial import and every
  `--git-maintenance-every` pushes the git repository gets
  `git repack -adb --write-bitmap-index` and `git commit-graph write
  --reachable` (not counted in the figures; gitstow's maintenance is).
  Between those, git keeps each push's pack as receive-pack wrote it.
- Containers: `gitstow maintain --dry-run` (reads the state, writes
  nothing) every `--sample-every` steps. Stored bytes: the store directory,
  and apart the containers' `.bin` and `.idx` files, against the `.pack`
  and the `.pack` + `.idx` of `git gc` on a mirror of the same refs.

Bytes received by each fetch are the sizes of the packs the clients keep
(`fetch.unpackLimit=1`, so every fetch keeps its pack).
"""
import argparse, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
TICK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def git(*args, check=True, cwd=None):
    p = subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd)
    if check and p.returncode:
        sys.exit("FAILED: git %s\n%s" % (" ".join(args), p.stderr[-2000:]))
    return p


def stat_fields(pid):
    f = [int(x) for x in open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[11:15]]
    return f  # utime stime cutime cstime


def own_cpu(pid):
    f = stat_fields(pid)
    return (f[0] + f[1]) / TICK


def children_cpu(pid):
    f = stat_fields(pid)
    return (f[2] + f[3]) / TICK


def settle(pid, cpu_of, limit=30.0):
    """Waits until the process's CPU stops moving; returns the last reading."""
    last, deadline = cpu_of(pid), time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.15)
        now = cpu_of(pid)
        if now - last < 0.005:
            return now
        last = now
    return last


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dir_bytes(path):
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(path) for f in fs)


def files_bytes(path, suffix):
    return sum(os.lstat(os.path.join(d, f)).st_size
               for d, _, fs in os.walk(path) for f in fs if f.endswith(suffix))


def upload_pack_lines(err_path, seen):
    """(cpu_us, lookups, index_probes) summed over the upload-pack lines the
    daemon logged since `seen` lines; returns them and the new line count."""
    lines = open(err_path, errors="replace").read().splitlines()
    cpu = lookups = probes = 0
    for l in lines[seen:]:
        if "upload-pack" not in l:
            continue
        for key in ("cpu_us", "lookups", "index_probes"):
            m = re.search(r" %s=(\d+)" % key, l)
            if m and key == "cpu_us":
                cpu += int(m.group(1))
            elif m and key == "lookups":
                lookups += int(m.group(1))
            elif m:
                probes += int(m.group(1))
    return (cpu, lookups, probes), len(lines)


def pack_stats(repo):
    d = os.path.join(repo, "objects", "pack")
    packs = [f for f in os.listdir(d) if f.endswith(".pack")]
    return len(packs), sum(os.path.getsize(os.path.join(d, f)) for f in packs)


def newest_pack_bytes(repo):
    d = os.path.join(repo, "objects", "pack")
    packs = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".pack")]
    return os.path.getsize(max(packs, key=os.path.getmtime)) if packs else 0


def containers(gitstow, store, name):
    p = subprocess.run([gitstow, "maintain", "--store", store, "--repo", name, "--dry-run"],
                       capture_output=True, text=True)
    m = re.search(r"would merge \d+ of (\d+) containers", p.stdout)
    return int(m.group(1)) if m else -1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--branch", default="master")
    ap.add_argument("--pushes", type=int, default=1000)
    ap.add_argument("--gitstow", default="target/release/gitstow")
    ap.add_argument("--http-backend-server",
                    default=os.path.join(HERE, "..", "..", "shared", "tools", "git-http-backend-server.py"))
    ap.add_argument("--git-maintenance-every", type=int, default=100)
    ap.add_argument("--sample-every", type=int, default=10)
    ap.add_argument("--out")
    ap.add_argument("--csv")
    ap.add_argument("--workdir")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()

    base = a.workdir or tempfile.mkdtemp(prefix="gitstow-replay-")
    os.makedirs(base, exist_ok=True)
    firsts = git("-C", a.repo, "rev-list", "--first-parent", "--reverse", a.branch).stdout.split()
    if len(firsts) <= a.pushes:
        sys.exit("%s has only %d first-parent commits" % (a.branch, len(firsts)))
    start, steps = firsts[-a.pushes - 1], firsts[-a.pushes:]
    log("replaying %d pushes of %s after %s" % (len(steps), a.branch, start[:12]))

    store = os.path.join(base, "store")
    gs_err = open(os.path.join(base, "gitstow.err"), "w")
    gs = subprocess.Popen([a.gitstow, "serve", "--listen", "127.0.0.1:0", "--store", store, "--create-store"],
                          stdout=subprocess.PIPE, stderr=gs_err, text=True)
    m = re.search(r"gitstow listening on (http://\S+)", gs.stdout.readline())
    if not m:
        sys.exit("gitstow did not start (see %s)" % gs_err.name)
    gs_url = m.group(1) + "/replay.git"

    hb_root = os.path.join(base, "hb")
    os.makedirs(hb_root)
    hb_repo = os.path.join(hb_root, "replay.git")
    git("init", "--quiet", "--bare", "-b", "main", hb_repo)
    git("-C", hb_repo, "config", "http.receivepack", "true")
    git("-C", hb_repo, "config", "gc.auto", "0")
    port = free_port()
    hb = subprocess.Popen([sys.executable, os.path.abspath(a.http_backend_server), hb_root, str(port)],
                          stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, "hb.err"), "w"))
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    hb_url = "http://127.0.0.1:%d/replay.git" % port

    def git_best():
        git("-C", hb_repo, "repack", "-adbq", "--write-bitmap-index")
        git("-C", hb_repo, "commit-graph", "write", "--reachable")

    def stop(*_):
        for p in (gs, hb):
            if p.poll() is None:
                p.kill()
        if not a.keep and not a.workdir:
            shutil.rmtree(base, ignore_errors=True)

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(1)))
    try:
        for url in (gs_url, hb_url):
            git("-C", a.repo, "push", "--quiet", url, "%s:refs/heads/main" % start)
        git_best()
        clients = {}
        for tag, url in (("gs", gs_url), ("hb", hb_url)):
            c = os.path.join(base, "client-" + tag)
            git("clone", "--quiet", "--bare", url, c)
            git("-C", c, "config", "fetch.unpackLimit", "1")
            git("-C", c, "config", "gc.auto", "0")
            clients[tag] = c
        rows = []
        gs_cpu = settle(gs.pid, own_cpu)
        hb_cpu = settle(hb.pid, children_cpu)
        _, seen = upload_pack_lines(gs_err.name, 0)
        for i, sha in enumerate(steps, 1):
            row = {"step": i}
            git("-C", a.repo, "push", "--quiet", gs_url, "%s:refs/heads/main" % sha)
            now = settle(gs.pid, own_cpu)
            row["gs_push"], gs_cpu = now - gs_cpu, now
            git("-C", a.repo, "push", "--quiet", hb_url, "%s:refs/heads/main" % sha)
            now = settle(hb.pid, children_cpu)
            row["hb_push"], hb_cpu = now - hb_cpu, now
            git("-C", clients["gs"], "fetch", "--quiet", "origin", "+refs/heads/*:refs/heads/*")
            now = settle(gs.pid, own_cpu)
            row["gs_fetch"], gs_cpu = now - gs_cpu, now
            row["gs_bytes"] = newest_pack_bytes(clients["gs"])
            (cpu_us, lookups, probes), seen = upload_pack_lines(gs_err.name, seen)
            row["gs_fetch_thread"] = cpu_us / 1e6
            row["lookups"], row["probes"] = lookups, probes
            git("-C", clients["hb"], "fetch", "--quiet", "origin", "+refs/heads/*:refs/heads/*")
            now = settle(hb.pid, children_cpu)
            row["hb_fetch"], hb_cpu = now - hb_cpu, now
            row["hb_bytes"] = newest_pack_bytes(clients["hb"])
            if i % a.sample_every == 0 or i == len(steps):
                row["containers"] = containers(a.gitstow, store, "replay")
                row["stored"] = dir_bytes(store)
                row["hb_packs"], row["hb_pack_bytes"] = pack_stats(hb_repo)
                log("step %d: gitstow push %.3f fetch %.3f s, %d containers, %d B; git push %.3f fetch %.3f s, %d packs"
                    % (i, row["gs_push"], row["gs_fetch"], row["containers"], row["stored"],
                       row["hb_push"], row["hb_fetch"], row["hb_packs"]))
            if a.git_maintenance_every and i % a.git_maintenance_every == 0:
                git_best()
                hb_cpu = settle(hb.pid, children_cpu)
            rows.append(row)
        # Final: GC-equivalent figures.
        final_gs = containers(a.gitstow, store, "replay")
        # A grace of 0 on a store nothing else uses (gitstow refuses it otherwise).
        short = dict(os.environ, GITSTOW_TEST_SHORT_GRACE="1")
        subprocess.run([a.gitstow, "maintain", "--store", store, "--repo", "replay", "--gc", "--grace", "0"],
                       capture_output=True, text=True, check=True, env=short)
        subprocess.run([a.gitstow, "maintain", "--store", store, "--repo", "replay", "--gc", "--grace", "0"],
                       capture_output=True, text=True, check=True, env=short)
        subprocess.run([a.gitstow, "maintain", "--store", store, "--repo", "replay", "--grace", "0"],
                       capture_output=True, text=True, check=True, env=short)
        stored_full = dir_bytes(store)
        stored_bin, stored_idx = files_bytes(store, ".bin"), files_bytes(store, ".idx")
        gc_dir = os.path.join(base, "gc.git")
        git("clone", "--quiet", "--mirror", hb_repo, gc_dir)
        git("-C", gc_dir, "gc", "--quiet", "--prune=now")
        gc_pack = pack_stats(gc_dir)[1]
        gc_idx = files_bytes(os.path.join(gc_dir, "objects", "pack"), ".idx")
        git("-C", gc_dir, "gc", "--quiet", "--aggressive", "--prune=now")
        gc_aggressive = pack_stats(gc_dir)[1]
        stored = {"full": stored_full, "bin": stored_bin, "idx": stored_idx, "gc_idx": gc_idx}
        report(a, rows, final_gs, stored, gc_pack, gc_aggressive, len(steps))
    finally:
        stop()


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def report(a, rows, final_containers, stored, gc_pack, gc_aggressive, n):
    stored_full = stored["full"]
    import math
    hundred = min(100, n // 3) or 1
    first, last = rows[:hundred], rows[-hundred:]
    lines = ["# Replay: %s as %d pushes, each with an incremental fetch" % (os.path.basename(a.repo.rstrip("/")), n), ""]
    lines.append("| figure | gitstow | git http-backend | ratio |")
    lines.append("|---|---|---|---|")

    def line(name, g, h, fmt="%.4f"):
        ratio = (g / h) if h else float("nan")
        lines.append("| %s | %s | %s | %.2f |" % (name, fmt % g, fmt % h, ratio))

    line("push CPU, median of the first %d (s)" % hundred, med([r["gs_push"] for r in first]), med([r["hb_push"] for r in first]))
    line("push CPU, median of the last %d (s)" % hundred, med([r["gs_push"] for r in last]), med([r["hb_push"] for r in last]))
    line("fetch CPU, median of the first %d (s)" % hundred, med([r["gs_fetch"] for r in first]), med([r["hb_fetch"] for r in first]))
    line("fetch CPU, median of the last %d (s)" % hundred, med([r["gs_fetch"] for r in last]), med([r["hb_fetch"] for r in last]))
    line("fetch CPU, mean of the first %d (s)" % hundred, statistics.mean(r["gs_fetch"] for r in first), statistics.mean(r["hb_fetch"] for r in first))
    line("fetch CPU, mean of the last %d (s)" % hundred, statistics.mean(r["gs_fetch"] for r in last), statistics.mean(r["hb_fetch"] for r in last))
    for name, part in (("first", first), ("last", last)):
        lines.append("| fetch upload-pack thread CPU, mean of the %s %d (ms) | %.3f | | |"
                     % (name, hundred, 1e3 * statistics.mean(r["gs_fetch_thread"] for r in part)))
    for name, part in (("first", first), ("last", last)):
        lookups = sum(r["lookups"] for r in part)
        lines.append("| fetch index searches a lookup, the %s %d | %.2f | | |"
                     % (name, hundred, sum(r["probes"] for r in part) / lookups if lookups else float("nan")))
    line("fetch bytes received, total", sum(r["gs_bytes"] for r in rows), sum(r["hb_bytes"] for r in rows), "%d")
    most = max(r.get("containers", 0) for r in rows)
    lines += ["",
              "- gitstow containers: at most %d while sampled every %d pushes, %d at the end; bound 2·log2(%d) = %.1f"
              % (most, a.sample_every, final_containers, n, 2 * math.log2(n)),
              "- stored bytes after `gitstow maintain --gc --grace 0` (twice): %d; `git gc` pack of the same refs: %d (%.3f ×); `git gc --aggressive`: %d (%.3f ×)"
              % (stored_full, gc_pack, stored_full / gc_pack, gc_aggressive, stored_full / gc_aggressive),
              "- containers' `.bin` after GC: %d against `git gc`'s `.pack` %d (%.3f ×); `.bin` + `.idx`: %d against `.pack` + `.idx` %d (%.3f ×)"
              % (stored["bin"], gc_pack, stored["bin"] / gc_pack, stored["bin"] + stored["idx"],
                 gc_pack + stored["gc_idx"], (stored["bin"] + stored["idx"]) / (gc_pack + stored["gc_idx"])),
              "- git maintenance: `repack -adb` + `commit-graph write` every %d pushes (not counted)" % a.git_maintenance_every,
              ""]
    text = "\n".join(lines)
    print(text)
    if a.out:
        open(a.out, "w").write(text + "\n")
    if a.csv:
        keys = ["step", "gs_push", "hb_push", "gs_fetch", "hb_fetch", "gs_fetch_thread", "lookups", "probes",
                "gs_bytes", "hb_bytes",
                "containers", "stored", "hb_packs", "hb_pack_bytes"]
        with open(a.csv, "w") as f:
            f.write(",".join(keys) + "\n")
            for r in rows:
                f.write(",".join(str(r.get(k, "")) for k in keys) + "\n")


if __name__ == "__main__":
    main()
