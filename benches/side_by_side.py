#!/usr/bin/env python3
"""Side by side: push a repository to `gitstow serve` and to canonical
`git http-backend`, clone it back from each, and compare server CPU, client
wall time, peak RSS and stored bytes (issue #4's targets). Stdlib only.

usage: python3 benches/side_by_side.py --repo SRC [--name NAME] [--runs 3]
           [--refspec R ...] [--gitstow target/release/gitstow]
           [--http-backend-server ../shared/tools/git-http-backend-server.py]
           [--store file|s3://BUCKET[/PREFIX]] [--out FILE.md] [--no-fsck]
           [--workdir DIR] [--keep]

Each run starts a fresh gitstow daemon (file store in a fresh temp dir) and,
for each phase, a fresh http-backend server, pushes SRC (refspecs, default
--mirror) into a new repository on each, then `git clone --mirror`s it back.
Runs alternate which server goes first. Method (benches/README.md has more):

- wall: elapsed time of the git client command.
- gitstow CPU: utime+stime (+cutime+cstime) of the daemon from /proc/PID/stat,
  the delta from before the client starts until the daemon's CPU stops moving
  after the client exits (so deferred work is counted).
- gitstow memory: `5` written to /proc/PID/clear_refs before the phase resets
  VmHWM; VmHWM after the phase is the peak, minus VmRSS before the phase is
  "above idle". A thread samples RssAnon/RssFile every 100 ms for their peaks.
- git CPU and memory: the CGI host runs inside a launcher whose SIGTERM
  handler writes getrusage(RUSAGE_CHILDREN). The host waits for every
  `git http-backend`, which waits for receive-pack/upload-pack, which wait for
  index-pack/unpack-objects/pack-objects, so that figure is the CPU of the
  whole git process tree of the phase, and ru_maxrss is the peak RSS of its
  largest single process. One server per phase keeps the two phases apart.
  The python host's own CPU is shown but not counted.
- stored bytes: sum of file sizes in gitstow's store after the push, against
  the objects/pack/*.pack receive-pack kept: the very pack the client sent
  (index-pack --stdin stores it as received; nothing to fix up in an empty
  repository). Below receive.unpackLimit (100 objects) git unpacks to loose
  objects instead; the report says so.

After each run both clones must have identical for-each-ref and
rev-list --all --objects, and gitstow's clone must pass git fsck --full --strict.
"""
import argparse, json, os, re, shlex, signal, socket, statistics, subprocess
import sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")
LAUNCHER = r"""
import json, os, resource, runpy, signal, sys
server, root, port, report = sys.argv[1:5]
def stop(*_):
    c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    with open(report + ".tmp", "w") as f:
        json.dump({"cpu": c.ru_utime + c.ru_stime, "sys": c.ru_stime, "maxrss_kb": c.ru_maxrss,
                   "host_cpu": s.ru_utime + s.ru_stime}, f)
    os.rename(report + ".tmp", report)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
sys.argv = [server, root, port]
runpy.run_path(server, run_name="__main__")
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def git(*args, check=True):
    p = subprocess.run(["git", *args], capture_output=True, text=True)
    if check and p.returncode:
        sys.exit("FAILED: git %s\n%s" % (shlex.join(args), p.stderr[-2000:]))
    return p


# The environment of the git client commands measured (None: this process's);
# a bench sets GIT_TRACE2_EVENT here to read the client's negotiation rounds.
CLIENT_ENV = None


def timed_client(args, err_path):
    """Runs a git client command; returns its wall time in seconds."""
    t0 = time.monotonic()
    with open(err_path, "w") as err:
        rc = subprocess.run(["git", *args], stdout=subprocess.DEVNULL, stderr=err, env=CLIENT_ENV).returncode
    wall = time.monotonic() - t0
    if rc:
        sys.exit("FAILED: git %s\n%s" % (shlex.join(args), open(err_path).read()[-2000:]))
    return wall


# ---- gitstow daemon ---------------------------------------------------------

def start_gitstow(binary, store, workdir, extra=()):
    out = open(os.path.join(workdir, "gitstow.err"), "w")
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", store, "--create-store", *extra],
                         stdout=subprocess.PIPE, stderr=out, text=True)
    line = p.stdout.readline()
    m = re.search(r"gitstow listening on (http://\S+)", line)
    if not m:
        p.kill()
        sys.exit("gitstow did not start: %r (see %s)" % (line, out.name))
    return p, m.group(1)


def proc_cpu(pid):
    """(user + sys, sys) CPU seconds of the process, its threads and waited children."""
    f = [int(x) for x in open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[11:15]]
    return sum(f) / TICK, (f[1] + f[3]) / TICK  # utime stime cutime cstime


def proc_status(pid):
    out = {}
    for line in open("/proc/%d/status" % pid):
        k, _, v = line.partition(":")
        if v.strip().endswith("kB"):
            out[k] = int(v.split()[0]) * 1024
    return out


class RssSampler(threading.Thread):
    """Peaks of RssAnon and RssFile, sampled every 100 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stop, self.anon, self.file = pid, threading.Event(), 0, 0

    def run(self):
        while True:
            s = proc_status(self.pid)
            self.anon, self.file = max(self.anon, s["RssAnon"]), max(self.file, s["RssFile"])
            if self.stop.wait(0.1):
                return


def gitstow_phase(pid, client_args, err_path):
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    idle = proc_status(pid)["VmRSS"]
    sampler = RssSampler(pid)
    cpu0 = proc_cpu(pid)
    sampler.start()
    wall = timed_client(client_args, err_path)
    # The peak of the request itself, before the deferred work (a push's
    # maintenance pass) that the wait below takes in.
    hwm_request = proc_status(pid)["VmHWM"]
    (cpu1, sys1), deadline = proc_cpu(pid), time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until deferred work is done
        time.sleep(0.3)
        cpu2, sys2 = proc_cpu(pid)
        settled, cpu1, sys1 = cpu2 - cpu1 < 0.02, cpu2, sys2
        if settled:
            break
    sampler.stop.set()
    sampler.join()
    hwm = proc_status(pid)["VmHWM"]
    return {"wall": wall, "cpu": cpu1 - cpu0[0], "sys": sys1 - cpu0[1], "peak": hwm, "idle": idle,
            "peak_request": hwm_request,
            "above_idle": hwm - idle, "anon": sampler.anon, "file": sampler.file}


# ---- git http-backend -------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_backend_phase(server, root, args_for, workdir, tag, run=None):
    """One fresh CGI host for one phase; returns wall, CPU and maxrss of git's side.
    The phase is `git <args_for(url)>`, or `run(url)` (returning its wall time)."""
    port, report = free_port(), os.path.join(workdir, "hb-%s.json" % tag)
    p = subprocess.Popen([sys.executable, "-c", LAUNCHER, server, root, str(port), report])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        p.kill()
        sys.exit("http-backend server did not start on port %d" % port)
    try:
        url = "http://127.0.0.1:%d" % port
        wall = run(url) if run else timed_client(args_for(url), os.path.join(workdir, "hb-%s.err" % tag))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()
    r = json.load(open(report))
    return {"wall": wall, "cpu": r["cpu"], "sys": r["sys"], "peak": r["maxrss_kb"] * 1024, "host_cpu": r["host_cpu"]}


# ---- one run ----------------------------------------------------------------

def stored_sizes(gs_store, hb_repo):
    gs = sum(os.lstat(os.path.join(d, f)).st_size
             for d, _, fs in os.walk(gs_store) for f in fs) if gs_store else None
    packdir = os.path.join(hb_repo, "objects", "pack")
    pack = sum(os.path.getsize(os.path.join(packdir, f))
               for f in os.listdir(packdir) if f.endswith(".pack"))
    loose = int(re.search(r"^count: (\d+)", git("-C", hb_repo, "count-objects", "-v").stdout, re.M)[1])
    return {"gs": gs, "pack": pack, "loose": loose}


def check_clones(gs_clone, hb_clone, fsck):
    same = lambda *a: git("-C", gs_clone, *a).stdout == git("-C", hb_clone, *a).stdout
    refs = same("for-each-ref")
    objs = sorted(git("-C", gs_clone, "rev-list", "--all", "--objects").stdout.splitlines()) == \
        sorted(git("-C", hb_clone, "rev-list", "--all", "--objects").stdout.splitlines())
    ok = None
    if fsck:
        log("  fsck --full --strict of gitstow's clone")
        ok = git("-C", gs_clone, "fsck", "--full", "--strict", check=False).returncode == 0
    return {"refs": refs, "objects": objs, "fsck": ok}


def log_lines(path, start, word):
    """The lines of gitstow's log after byte `start` whose message is `word`
    (`maintenance`, `upload-pack`, ...)."""
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    return [ln for ln in text.splitlines() if re.search(r"\s%s\s" % re.escape(word), ln)]


def log_field(line, name):
    """The value of field `name` in a gitstow log line (quotes removed), or None."""
    m = re.search(r"\b%s=(\"[^\"]*\"|\S+)" % name, line)
    return m.group(1).strip('"') if m else None


def maintenance_cpu(server_log, start):
    """CPU seconds of the maintenance passes gitstow logged after byte
    `start` of its log (the `cpu_ms` of each `maintenance` line)."""
    return sum(int(log_field(ln, "cpu_ms") or 0) for ln in log_lines(server_log, start, "maintenance")) / 1000


def one_run(a, i, base):
    work = os.path.join(base, "run%d" % i)
    os.makedirs(work)
    repo = "%s-%d-%d.git" % (a.name, os.getpid(), i)
    store_dir = os.path.join(work, "gs-data") if a.store == "file" else None
    store = "file://" + store_dir if store_dir else a.store
    hb_root = os.path.join(work, "hb-data")
    gs_clone, hb_clone = os.path.join(work, "gs-clone"), os.path.join(work, "hb-clone")
    push = lambda url: ["-C", a.repo, "push", "-q", url + "/" + repo, *a.refspec]
    clone = lambda dest: lambda url: ["clone", "-q", "--mirror", url + "/" + repo, dest]
    gsp, gs_url = start_gitstow(a.gitstow, store, work)
    r = {}
    try:
        def gs(phase, args_for):
            log("  %s -> gitstow" % phase)
            err = os.path.join(work, "gs-%s.err" % phase)
            server_log = os.path.join(work, "gitstow.err")
            mark = os.path.getsize(server_log)
            r.setdefault(phase, {})["gs"] = gitstow_phase(gsp.pid, args_for(gs_url), err)
            r[phase]["gs"]["maint_cpu"] = maintenance_cpu(server_log, mark)

        def hb(phase, args_for):
            log("  %s -> git http-backend" % phase)
            r.setdefault(phase, {})["git"] = http_backend_phase(
                a.http_backend_server, hb_root, args_for, work, phase)

        order = [gs, hb] if i % 2 else [hb, gs]  # alternate who goes first
        for f in order:
            f("push", push)
        for f in order:
            f("clone", clone(gs_clone if f is gs else hb_clone))
    finally:
        gsp.terminate()
        gsp.wait()
    r["stored"] = stored_sizes(store_dir, os.path.join(hb_root, repo))
    r["checks"] = check_clones(gs_clone, hb_clone, a.fsck)
    return r


# ---- report -----------------------------------------------------------------

def rows(runs):
    """Table rows over runs (medians; a single run gives its own values)."""
    med = lambda f: statistics.median(f(r) for r in runs) if all(f(r) is not None for r in runs) else None
    s = lambda x: "%.2f s" % x
    m = lambda x: "%.1f MiB" % (x / MiB)
    b = lambda x: "%d B (%.1f MiB)" % (x, x / MiB)
    out = []

    def row(name, gsf, gitf, fmt, target=None, gs_only_limit=None):
        g, h = med(gsf), (med(gitf) if gitf else None)
        ratio = g / h if g is not None and h else None
        verdict, tgt = "", ""
        if target is not None and ratio is not None:
            tgt, verdict = "≤ %.2f ×" % target, "PASS" if ratio <= target else "FAIL"
        if gs_only_limit is not None and g is not None:
            tgt, verdict = "≤ %d MiB" % (gs_only_limit / MiB), "PASS" if g <= gs_only_limit else "FAIL"
        out.append([name, fmt(g) if g is not None else "n/a", fmt(h) if h is not None else "—",
                    "%.3f" % ratio if ratio is not None else "", tgt, verdict])

    for ph in ("push", "clone"):
        row(ph + ": client wall", lambda r: r[ph]["gs"]["wall"], lambda r: r[ph]["git"]["wall"], s)
        row(ph + ": server CPU", lambda r: r[ph]["gs"]["cpu"], lambda r: r[ph]["git"]["cpu"], s,
            target=None if ph == "push" else 1.0)
        if ph == "push":
            # The maintenance pass a push queues runs right after it (after an
            # import: the closure's reachability bitmaps); git's receive-pack
            # runs its `gc --auto` inside the figure above.
            row("push: of which gitstow's maintenance pass after it", lambda r: r[ph]["gs"]["maint_cpu"],
                None, s)
            row("push: server CPU without that pass (receive-pack)",
                lambda r: r[ph]["gs"]["cpu"] - r[ph]["gs"]["maint_cpu"], lambda r: r[ph]["git"]["cpu"], s,
                target=0.4)
            row("push: gitstow peak RSS of the request (VmHWM when the client is done)",
                lambda r: r[ph]["gs"]["peak_request"], lambda r: r[ph]["git"]["peak"], m)
        row(ph + ": server CPU, of which sys", lambda r: r[ph]["gs"]["sys"], lambda r: r[ph]["git"]["sys"], s)
        row(ph + ": peak RSS (VmHWM / largest git process)", lambda r: r[ph]["gs"]["peak"],
            lambda r: r[ph]["git"]["peak"], m)
        row(ph + ": gitstow peak above idle", lambda r: r[ph]["gs"]["above_idle"], None, m,
            gs_only_limit=256 * MiB if ph == "clone" else None)
        row(ph + ": gitstow idle RSS before", lambda r: r[ph]["gs"]["idle"], None, m)
        row(ph + ": gitstow RssAnon peak (sampled)", lambda r: r[ph]["gs"]["anon"], None, m)
        row(ph + ": gitstow RssFile peak (sampled)", lambda r: r[ph]["gs"]["file"], None, m)
        row(ph + ": CGI host (python) CPU, not counted", lambda r: None, lambda r: r[ph]["git"]["host_cpu"], s)
    row("stored bytes: gitstow store / pack receive-pack kept", lambda r: r["stored"]["gs"],
        lambda r: r["stored"]["pack"], b, target=1.05)
    return out


def table(rs):
    head = ["metric", "gitstow", "git", "gitstow/git", "target", ""]
    return "\n".join("| " + " | ".join(x) + " |" for x in [head, ["---"] * len(head)] + rs)


def notes(runs, first=1):
    out = []
    for i, r in enumerate(runs, first):
        c = r["checks"]
        out.append("run %d: refs %s, objects %s, fsck of gitstow's clone %s%s" % (
            i, "identical" if c["refs"] else "DIFFER", "identical" if c["objects"] else "DIFFER",
            {True: "ok", False: "FAILED", None: "skipped"}[c["fsck"]],
            "; receive-pack left %d loose objects (below unpackLimit), so the pack size "
            "understates what the client sent" % r["stored"]["loose"] if r["stored"]["loose"] else ""))
    return out


def machine(a):
    mem = re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read())[1]
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read())
    gv = subprocess.run([a.gitstow, "--version"], capture_output=True, text=True).stdout.strip()
    return ["nproc: %d (%s)" % (os.cpu_count(), cpu[1] if cpu else "?"),
            "MemTotal: %.1f GiB" % (int(mem) / 1024 / 1024), "kernel: " + os.uname().release,
            git("--version").stdout.strip(), "gitstow --version: " + gv,
            "load average at the start: %.2f %.2f %.2f (other work on the machine skews CPU figures)"
            % a.loadavg]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="source repository to push")
    ap.add_argument("--name", help="repository name on the servers (default from SRC's path)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--refspec", nargs="+", action="extend", help="push refspecs (default --mirror; write --refspec=-x for one starting with -)")
    ap.add_argument("--gitstow", default=os.path.join(HERE, "..", "target", "release", "gitstow"))
    ap.add_argument("--http-backend-server",
                    default=os.path.join(HERE, "..", "..", "shared", "tools", "git-http-backend-server.py"))
    ap.add_argument("--store", default="file", help="file (a fresh temp dir per run) or s3://BUCKET[/PREFIX]")
    ap.add_argument("--out", help="also write the report as Markdown to this file")
    ap.add_argument("--no-fsck", dest="fsck", action="store_false")
    ap.add_argument("--workdir", default=tempfile.gettempdir(), help="where the temp dir goes")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()
    a.repo, a.gitstow = os.path.abspath(a.repo), os.path.abspath(a.gitstow)
    a.http_backend_server = os.path.abspath(a.http_backend_server)
    a.refspec = a.refspec or ["--mirror"]
    if not a.name:  # /x/owner+proj/repo -> owner-proj; /x/proj.git -> proj
        parts = a.repo.rstrip("/").split("/")
        a.name = parts[-2] if parts[-1] in ("repo", ".git") else parts[-1].removesuffix(".git")
    a.name = re.sub(r"[^A-Za-z0-9._-]", "-", a.name)
    cmdline = shlex.join(["python3", *sys.argv])
    a.loadavg = os.getloadavg()
    if a.loadavg[0] > 0.5:
        log("warning: load average %.2f; other work on the machine skews the figures" % a.loadavg[0])
    packdir = os.path.join(git("-C", a.repo, "rev-parse", "--absolute-git-dir").stdout.strip(), "objects", "pack")
    for f in os.listdir(packdir):  # warm the page cache so run 1 is not the cold one
        with open(os.path.join(packdir, f), "rb") as fh:
            while fh.read(1 << 24):
                pass
    base = tempfile.mkdtemp(prefix="side-by-side.", dir=a.workdir)
    runs, report = [], []
    try:
        for i in range(1, a.runs + 1):
            log("run %d/%d (%s first) in %s" % (i, a.runs, "gitstow" if i % 2 else "http-backend", base))
            runs.append(one_run(a, i, base))
            out = "### run %d\n\n%s\n\n%s\n" % (i, table(rows([runs[-1]])), notes([runs[-1]], i)[0])
            print(out, flush=True)
            report.append(out)
            if not a.keep:
                subprocess.run(["rm", "-rf", os.path.join(base, "run%d" % i)])
    finally:
        if not a.keep:
            subprocess.run(["rm", "-rf", base])
    summary = ("### summary: medians of %d run(s); ratios are of the medians\n\n%s\n\n%s\n"
               % (len(runs), table(rows(runs)), "\n".join("- " + n for n in notes(runs))))
    print(summary)
    bad = [n for n in notes(runs) if "DIFFER" in n or "FAILED" in n]
    if a.out:
        with open(a.out, "w") as f:
            f.write("# gitstow vs git http-backend: %s\n\n" % a.name)
            f.write("```\n%s\n```\n\n" % cmdline)
            f.write("".join("- %s\n" % m for m in machine(a)) + "\n")
            f.write("Pushed refspecs: %s. Server CPU of git = http-backend and every process it "
                    "spawns (RUSAGE_CHILDREN of the CGI host); the stored-bytes reference is the "
                    "pack receive-pack kept, i.e. the pack the client sent.\n\n" % " ".join(a.refspec))
            f.write("\n".join(report) + "\n" + summary)
        log("wrote " + a.out)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
