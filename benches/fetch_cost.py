#!/usr/bin/env python3
"""Fetch cost: what incremental fetches, a fetch from far behind, a mirror
clone of a repository whose refs moved since its last GC, and the ref
advertisement of many refs cost `gitstow serve` and canonical
`git http-backend` at its best (every push followed by `git repack -adb`
and `git commit-graph write --reachable`), in one run. Stdlib only.

usage: python3 benches/fetch_cost.py --repo SRC [--branch master]
           [--incremental 1,5,20] [--repeat 5] [--behind 1000] [--clones 3]
           [--refs 100000] [--gitstow target/release/gitstow]
           [--http-backend-server ../shared/tools/git-http-backend-server.py]
           [--defaults] [--tags] [--skip PHASES] [--out FILE.md] [--workdir DIR] [--keep]

What one run does:
1. Both servers get BRANCH's first-parent commit that lies
   sum(--incremental) commits before its tip as refs/heads/main (plus, with
   --refs N, N lightweight tags under refs/tags/bench/ on the pushed
   commits, in a second repository). gitstow then runs `gitstow maintain
   --gc` (its GC; not with --defaults, where it has only its automatic
   maintenance, as a user's server would), git `repack -adb` and
   `commit-graph write --reachable`.
2. Incremental fetches: for each K of --incremental, the next K first-parent
   commits are pushed to both (not measured; git repacks again, gitstow's
   automatic maintenance runs and settles), then a client at the previous
   tip runs `git fetch`; its ref is reset and the fetch repeated --repeat
   times. Clients keep every pack (`fetch.unpackLimit=1`); the bytes are
   the pack's size.
3. From far behind: a client whose main is --behind first-parent commits
   before the final tip fetches (--repeat times, reset in between).
4. `git clone --mirror` (--clones times): the refs moved since gitstow's
   GC, so no full-clone shortcut of an unchanged repository applies; then
   a `--single-branch --no-tags` clone of main and a `--filter=blob:none`
   clone (wants that do not reach every ref, with --tags), with the bytes
   of the pack each brought.
5. `git ls-remote` of the repository with --refs refs (--repeat times).

Figures (benches/README.md has more): server CPU of one client command.
gitstow: the CPU its threads used (/proc/PID/task/*/schedstat, ns, read
every 50 ms so that threads ending meanwhile count) from before the
command until its CPU settles (also shown: the daemon's
utime+stime in 10 ms ticks, as a mean), and its peak RSS above idle (VmHWM
after resetting it). Before each repeat the client's ref is reset and the
pack the fetch brought deleted (else git finds the objects present and
fetches nothing). git: a fresh CGI host per command, whose
SIGTERM handler reports getrusage(RUSAGE_CHILDREN): the CPU of every
http-backend, upload-pack and pack-objects process, and the peak RSS of the
largest. Medians; ratio = gitstow / git.
"""
import argparse, os, shutil, signal, statistics, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import replay  # noqa: E402  (git, own_cpu, settle, dir helpers)
import side_by_side as sbs  # noqa: E402  (per-command phases on both servers)

log, git = replay.log, replay.git


def task_cpu_ns(pid):
    """CPU time of each live thread of `pid`, in ns (first field of
    /proc/PID/task/TID/schedstat: the scheduler's sum_exec_runtime)."""
    out = {}
    d = "/proc/%d/task" % pid
    for tid in os.listdir(d):
        try:
            out[tid] = int(open(os.path.join(d, tid, "schedstat")).read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


class CpuSampler(threading.Thread):
    """Reads task_cpu_ns every 50 ms and keeps each thread's last reading, so
    that a thread that ends during the phase (tokio drops blocking-pool
    threads idle for 10 s) still counts up to its last sample."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.before = task_cpu_ns(pid)
        self.last = dict(self.before)

    def run(self):
        while not self.stop.wait(0.05):
            self.last.update(task_cpu_ns(self.pid))

    def seconds(self):
        self.stop.set()
        self.join()
        self.last.update(task_cpu_ns(self.pid))
        return sum(ns - self.before.get(tid, 0) for tid, ns in self.last.items()) / 1e9


def packs(repo):
    d = os.path.join(repo, "objects", "pack")
    return set(os.listdir(d)) if os.path.isdir(d) else set()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--branch", default="master")
    ap.add_argument("--incremental", default="1,5,20")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--behind", type=int, default=1000)
    ap.add_argument("--clones", type=int, default=3)
    ap.add_argument("--refs", type=int, default=100000)
    ap.add_argument("--gitstow", default="target/release/gitstow")
    ap.add_argument("--http-backend-server",
                    default=os.path.join(HERE, "..", "..", "shared", "tools", "git-http-backend-server.py"))
    ap.add_argument("--defaults", action="store_true",
                    help="no `gitstow maintain --gc` after the initial push: automatic maintenance only")
    ap.add_argument("--tags", action="store_true",
                    help="the import also pushes every tag reachable from its commit (refs a single-branch clone does not want)")
    ap.add_argument("--skip", default="", help="phases not measured: incremental,behind,clone,refs")
    ap.add_argument("--out")
    ap.add_argument("--workdir")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    hb_server = os.path.abspath(a.http_backend_server)
    steps = [int(k) for k in a.incremental.split(",") if k]
    base = a.workdir or tempfile.mkdtemp(prefix="gitstow-fetch-cost-")
    os.makedirs(base, exist_ok=True)
    firsts = git("-C", a.repo, "rev-list", "--first-parent", "--reverse", a.branch).stdout.split()
    if len(firsts) <= sum(steps) + a.behind:
        sys.exit("%s has only %d first-parent commits" % (a.branch, len(firsts)))
    start = len(firsts) - 1 - sum(steps)

    store = os.path.join(base, "store")
    gs, gs_root = sbs.start_gitstow(os.path.abspath(a.gitstow), "file://" + store, base)
    hb_root = os.path.join(base, "hb")
    os.makedirs(hb_root)

    def stop(*_):
        if gs.poll() is None:
            gs.kill()
        if not a.keep and not a.workdir:
            shutil.rmtree(base, ignore_errors=True)

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(1)))
    results = []  # (figure, gitstow value, git value, unit)

    def measure(name, client_args_for, reset=None, times=a.repeat, bytes_of=None):
        """Runs one client command against each server `times` times."""
        gs_cpu, gs_ticks, hb_cpu, gs_peak, hb_peak, gs_bytes, hb_bytes = [], [], [], [], [], [], []
        rounds, haves = {"gs": [], "hb": []}, {"gs": [], "hb": []}
        trace = os.path.join(base, "packet-trace.txt")
        for i in range(times):
            for side in ("gs", "hb") if i % 2 == 0 else ("hb", "gs"):
                if reset:
                    reset(side)
                if bytes_of:
                    if os.path.exists(trace):
                        os.remove(trace)
                    sbs.CLIENT_ENV = dict(os.environ, GIT_TRACE_PACKET=trace)
                replay.settle(gs.pid, replay.own_cpu)
                err = os.path.join(base, "%s.err" % side)
                if side == "gs":
                    sampler = CpuSampler(gs.pid)
                    sampler.start()
                    r = sbs.gitstow_phase(gs.pid, client_args_for("gs", gs_root + "/"), err)
                    gs_cpu.append(sampler.seconds())
                    gs_ticks.append(r["cpu"])
                    gs_peak.append(r["above_idle"])
                    if bytes_of:
                        gs_bytes.append(bytes_of("gs"))
                else:
                    r = sbs.http_backend_phase(hb_server, hb_root,
                                               lambda url: client_args_for("hb", url + "/"), base, "m")
                    hb_cpu.append(r["cpu"])
                    hb_peak.append(r["peak"])
                    if bytes_of:
                        hb_bytes.append(bytes_of("hb"))
                if bytes_of:
                    sbs.CLIENT_ENV = None
                    r, h = negotiation(trace)
                    rounds[side].append(r)
                    haves[side].append(h)
        med = statistics.median
        results.append((name + ": server CPU (s)", med(gs_cpu), med(hb_cpu)))
        results.append((name + ": gitstow CPU in 10 ms ticks, mean (s)", statistics.mean(gs_ticks), med(hb_cpu)))
        if bytes_of:
            results.append((name + ": bytes received", med(gs_bytes), med(hb_bytes)))
            results.append((name + ": fetch requests (negotiation rounds)", med(rounds["gs"]), med(rounds["hb"])))
            results.append((name + ": have lines sent", med(haves["gs"]), med(haves["hb"])))
        log("%s: gitstow %.3f s, git %.3f s%s" % (name, med(gs_cpu), med(hb_cpu),
            (", bytes %d / %d" % (med(gs_bytes), med(hb_bytes))) if bytes_of else ""))
        return med(gs_peak), med(hb_peak)

    try:
        # 1. The repositories, each at its best.
        hb_repo = os.path.join(hb_root, "bench.git")
        git("init", "--quiet", "--bare", "-b", "main", hb_repo)
        for k, v in (("http.receivepack", "true"), ("gc.auto", "0"), ("receive.unpackLimit", "1"),
                     ("uploadpack.allowFilter", "true")):
            git("-C", hb_repo, "config", k, v)
        urls = {"gs": gs_root + "/bench.git", "hb": "file://" + hb_repo}

        def push(sha):
            for side in ("gs", "hb"):
                git("-C", a.repo, "push", "--quiet", urls[side], "%s:refs/heads/main" % sha)
            git("-C", hb_repo, "repack", "-adbq", "--write-bitmap-index")
            git("-C", hb_repo, "commit-graph", "write", "--reachable")
            replay.settle(gs.pid, replay.own_cpu)

        log("initial push of %s (%d first-parent commits)" % (firsts[start][:12], start + 1))
        if a.tags:
            tags = git("-C", a.repo, "tag", "--merged", firsts[start]).stdout.split()
            log("with %d tags" % len(tags))
            for side in ("gs", "hb"):
                git("-C", a.repo, "push", "--quiet", urls[side], "%s:refs/heads/main" % firsts[start],
                    *["refs/tags/%s:refs/tags/%s" % (t, t) for t in tags])
        push(firsts[start])
        if not a.defaults:
            gc = subprocess.run([a.gitstow, "maintain", "--store", "file://" + store, "--repo", "bench", "--gc"],
                                capture_output=True, text=True)
            if gc.returncode:
                sys.exit("gitstow maintain --gc failed:\n" + gc.stderr)

        def client(name, sha, seed=None):
            """A bare client whose main is `sha`, made by fetching from SRC
            (into a hard-linked copy of `seed`, if given)."""
            c = os.path.join(base, name)
            if seed:
                subprocess.run(["cp", "-al", seed, c], check=True)
            else:
                git("init", "--quiet", "--bare", c)
                git("-C", c, "config", "fetch.unpackLimit", "1")
                git("-C", c, "config", "gc.auto", "0")
            git("-C", c, "fetch", "--quiet", a.repo, "+%s:refs/heads/main" % sha)
            return c

        def resetter(clients, old):
            """Puts a client back before its fetch: main at `old`, and the
            packs the fetch brought removed (else git's quickfetch finds the
            objects present and asks for nothing)."""
            kept = {s: packs(c) for s, c in clients.items()}

            def reset(side):
                c = clients[side]
                d = os.path.join(c, "objects", "pack")
                for f in packs(c) - kept[side]:
                    os.remove(os.path.join(d, f))
                git("-C", c, "update-ref", "refs/heads/main", old)
            return reset

        seed = client("seed", firsts[start])

        # 2. Incremental fetches.
        at = start
        skip = set(a.skip.split(","))
        if "incremental" in skip:
            at += sum(steps)
            push(firsts[at])
        for k in steps if "incremental" not in skip else []:
            old, new = firsts[at], firsts[at + k]
            push(new)
            clients = {s: client("inc-%d-%s" % (k, s), old, seed) for s in ("gs", "hb")}
            reset = resetter(clients, old)

            def fetch(side, url, c=clients):
                return ["-C", c[side], "fetch", "--quiet", url + "bench.git", "+refs/heads/*:refs/heads/*"]

            measure("fetch of %d new commit%s" % (k, "" if k == 1 else "s"), fetch, reset,
                    bytes_of=lambda side, c=clients: replay.newest_pack_bytes(c[side]))
            at += k
        tip = firsts[at]

        # 3. From far behind.
        if "behind" not in skip:
            old = firsts[at - a.behind]
            behind_seed = client("behind-seed", old)
            clients = {s: client("behind-%s" % s, old, behind_seed) for s in ("gs", "hb")}
            reset_behind = resetter(clients, old)

            def fetch_behind(side, url):
                return ["-C", clients[side], "fetch", "--quiet", url + "bench.git", "+refs/heads/*:refs/heads/*"]

            measure("fetch from %d first-parent commits behind" % a.behind, fetch_behind, reset_behind,
                    bytes_of=lambda side: replay.newest_pack_bytes(clients[side]))

        # 4. Mirror clones of a repository whose refs moved since the GC.
        def rm_clone(side):
            shutil.rmtree(os.path.join(base, "clone-" + side), ignore_errors=True)

        def clone(side, url):
            return ["clone", "--quiet", "--mirror", url + "bench.git", os.path.join(base, "clone-" + side)]

        if "clone" not in skip:
            gs_peak, hb_peak = measure("clone --mirror after pushes since the GC", clone, rm_clone, times=a.clones)
            results.append(("clone --mirror: peak RSS above idle (gitstow) / of the largest git process (MiB)",
                            gs_peak / 2**20, hb_peak / 2**20))
            for side in ("gs", "hb"):
                if replay.git("-C", os.path.join(base, "clone-" + side), "rev-parse", "main").stdout.strip() != tip:
                    sys.exit("the %s clone is not at %s" % (side, tip))
            # Clones that do not want every ref: one branch, and a partial clone.
            for name, extra in (("clone --single-branch --no-tags of main", ["--single-branch", "--no-tags"]),
                                ("clone --filter=blob:none", ["--filter=blob:none"])):
                def some(side, url, extra=extra):
                    return ["clone", "--quiet", "--bare", *extra, url + "bench.git", os.path.join(base, "clone-" + side)]
                measure(name, some, rm_clone, times=a.clones,
                        bytes_of=lambda side: replay.newest_pack_bytes(os.path.join(base, "clone-" + side)))
                for side in ("gs", "hb"):
                    if replay.git("-C", os.path.join(base, "clone-" + side), "rev-parse", "main").stdout.strip() != tip:
                        sys.exit("the %s clone is not at %s" % (side, tip))

        # 5. The advertisement of many refs.
        if a.refs and "refs" not in skip:
            many = os.path.join(base, "many.git")
            git("init", "--quiet", "--bare", many)
            git("-C", many, "fetch", "--quiet", a.repo, "%s:refs/heads/main" % tip)
            commits = firsts[at - 100:at + 1]
            hb_many = os.path.join(hb_root, "many.git")
            git("init", "--quiet", "--bare", hb_many)
            git("-C", hb_many, "config", "http.receivepack", "true")
            urls_many = (gs_root + "/many.git", "file://" + hb_many)
            for url in urls_many:
                git("-C", many, "push", "--quiet", url, "refs/heads/*:refs/heads/*")
            # The tags: git's HTTP push of n refs takes time quadratic in n
            # (send-pack matches every refspec against every ref: 10,000 refs
            # took 3 minutes), so gitstow gets them as receive-pack requests
            # of 50,000 commands each (the commits are there already: an empty
            # pack), and git http-backend's repository by update-ref.
            names = ["refs/tags/bench/%06d" % i for i in range(a.refs)]
            oids = [commits[i % len(commits)] for i in range(a.refs)]
            for first in range(0, a.refs, 50000):
                receive_pack(gs_root + "/many.git", names[first:first + 50000], oids[first:first + 50000])
            lines = "".join("create %s %s\n" % (n, o) for n, o in zip(names, oids))
            subprocess.run(["git", "-C", hb_many, "update-ref", "--stdin"], input=lines, text=True, check=True)
            git("-C", hb_many, "pack-refs", "--all")
            git("-C", hb_many, "repack", "-adbq", "--write-bitmap-index")

            def ls_remote(side, url):
                return ["ls-remote", url + "many.git"]

            measure("ls-remote of %d refs" % (a.refs + 1), ls_remote)
        report(a, results)
    finally:
        stop()


def negotiation(trace):
    """(requests, haves) of a fetch from the client's packet trace
    (GIT_TRACE_PACKET): its `command=fetch` requests, the last of which
    ends negotiation (gitprotocol-v2(5)), and the `have` lines it sent."""
    requests = haves = 0
    for line in open(trace, errors="replace") if os.path.exists(trace) else ():
        if "fetch> command=fetch" in line:
            requests += 1
        elif "fetch> have " in line:
            haves += 1
    return requests, haves


def pkt(line):
    data = line.encode()
    return b"%04x" % (len(data) + 4) + data


def receive_pack(url, refs, oids):
    """Creates `refs` at `oids` (commits the repository has) in one
    receive-pack request (gitprotocol-pack(5): the command list, a flush, an
    empty pack) and checks that report-status says ok for each."""
    import hashlib, struct, urllib.request
    zero = "0" * 40
    body = [pkt("%s %s %s\0report-status agent=fetch-cost-bench\n" % (zero, oids[0], refs[0]))]
    body += [pkt("%s %s %s\n" % (zero, o, r)) for r, o in zip(refs[1:], oids[1:])]
    pack = b"PACK" + struct.pack(">II", 2, 0)
    body = b"".join(body) + b"0000" + pack + hashlib.sha1(pack).digest()
    req = urllib.request.Request(url + "/git-receive-pack", data=body, headers={
        "Content-Type": "application/x-git-receive-pack-request",
        "Accept": "application/x-git-receive-pack-result"})
    out = urllib.request.urlopen(req, timeout=600).read()
    lines, i = [], 0
    while i + 4 <= len(out):
        n = int(out[i:i + 4], 16)
        if n == 0:
            i += 4
            continue
        lines.append(out[i + 4:i + n].decode(errors="replace").rstrip("\n"))
        i += n
    ok = sum(1 for line in lines if line.startswith("ok "))
    if not lines or lines[0] != "unpack ok" or ok != len(refs):
        sys.exit("receive-pack of %d refs: %s" % (len(refs), lines[:5]))


def report(a, results):
    lines = ["# Fetch cost: %s, gitstow against git http-backend at its best" % os.path.basename(a.repo.rstrip("/")), "",
             "| figure | gitstow | git http-backend | ratio |", "|---|---|---|---|"]
    for name, g, h in results:
        fmt = "%d" if "bytes" in name or "requests" in name or "lines" in name else "%.3f"
        lines.append("| %s | %s | %s | %s |" % (name, fmt % g, fmt % h, ("%.2f" % (g / h)) if h else "n/a"))
    lines += ["", "- command: `python3 benches/fetch_cost.py %s`" % " ".join(sys.argv[1:]),
              "- medians of %d runs (clones: %d); gitstow CPU from its threads' schedstat (ns), git's from getrusage of the CGI host's children" % (a.repeat, a.clones),
              "- machine: %d cores, git %s" % (os.cpu_count(), replay.git("--version").stdout.split()[-1]), ""]
    text = "\n".join(lines)
    print(text)
    if a.out:
        open(a.out, "w").write(text + "\n")


if __name__ == "__main__":
    main()
