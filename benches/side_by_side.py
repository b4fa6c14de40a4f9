#!/usr/bin/env python3
"""Side by side: push a repository to `gitstow serve` and to canonical
`git http-backend`, clone it back from each, and compare server CPU, client
wall time, peak RSS and stored bytes (issue #4's targets). Stdlib only.

usage: python3 benches/side_by_side.py --repo SRC [--name NAME] [--runs 3]
           [--refspec R ...] [--gitstow target/release/gitstow]
           [--http-backend-server ../shared/tools/git-http-backend-server.py]
           [--store file|s3://BUCKET[/PREFIX]] [--out FILE.md] [--no-fsck]
           [--max-load 0.3] [--max-git-spread 1.15] [--git-ref-format reftable|files]
           [--git-plain] [--workdir DIR] [--keep]

A sitting interleaves the two sides and replays git's once more than
gitstow's: git 0, gitstow 1, git 1, gitstow 2, git 2, ... A gitstow run
starts a fresh daemon (file store in a fresh temp dir), pushes SRC (refspecs,
default --mirror) into a new repository and `git clone --mirror`s it back; a
git replay does the same on a fresh http-backend host per phase. Run i's
ratio is gitstow's figure over the mean of git replays i-1 and i, the ones
just before and after it, so both sides of a ratio come from the same few
minutes; the summary gives the median of the runs' ratios (the ratio of
record) and their min and max, and the spread (max/min) of git's own CPU
over its replays. Method (benches/README.md has more):

- git at its best: its repositories keep refs in reftable (the CGI host runs
  with GIT_DEFAULT_REF_FORMAT; --git-ref-format files for the old default),
  and between the push and the clone each is repacked with reachability
  bitmaps and given a commit-graph (`repack -adb`, `commit-graph write
  --reachable`; its CPU is reported, not counted; --git-plain skips it).
- wall: elapsed time of the git client command.
- gitstow CPU: utime+stime (+cutime+cstime) of the daemon from /proc/PID/stat,
  the delta from before the client starts until the daemon's CPU stops moving
  after the client exits (so deferred work is counted).
- push, two figures, both reported: the total above, and the total without
  the maintenance passes the daemon logged meanwhile (`cpu_ms` of its
  `maintenance` lines; after an import one pass, which writes the closure's
  bitmaps). The second is the figure of record for the target: git's
  repack before the clone is not counted either.
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
- other work: the machine's busy time over each measured phase (/proc/stat,
  all CPUs) minus the CPU of this bench's own processes (its getrusage, self
  and reaped children, and the live daemon's /proc/PID/stat), per second of
  the phase: how many CPUs something else kept busy.

After each run gitstow's clone and that of the git replay after it must have
identical for-each-ref and rev-list --all --objects, and gitstow's clone must
pass git fsck --full --strict.

Verdict (the last line): NOISY, and no target judged PASS or FAIL, when the
1-minute load average at the start or the other work during any measured
phase exceeds --max-load, or git's push or clone CPU moved by more than
--max-git-spread (max/min) and by more than 50 ms between the two replays
around a run.
Exit status: 0 PASS (every
target met), 1 the clones differ or fsck failed, 2 FAIL (a target missed),
3 NOISY.
"""
import argparse, json, os, re, resource, shlex, signal, socket, statistics, subprocess
import sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")
# NOISY above this (1-minute load average at the start; CPUs of other work
# during a measured phase) and above this spread of git's own CPU over its
# replays: benches/README.md has the measurements behind both.
MAX_LOAD = 0.3
MAX_GIT_SPREAD = 1.15
# ... unless git's figures are this close in seconds (5 clock ticks): a
# 0.1 s clone moves by a tick or two whatever the machine does.
GIT_SPREAD_FLOOR = 0.05
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


def http_backend_phase(server, root, args_for, workdir, tag, run=None, env=None):
    """One fresh CGI host for one phase; returns wall, CPU and maxrss of git's side.
    The phase is `git <args_for(url)>`, or `run(url)` (returning its wall time).
    `env`: extra environment for the host and its git processes."""
    port, report = free_port(), os.path.join(workdir, "hb-%s.json" % tag)
    p = subprocess.Popen([sys.executable, "-c", LAUNCHER, server, root, str(port), report],
                         env=dict(os.environ, **(env or {})))
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


# ---- other work on the machine ----------------------------------------------

def machine_busy():
    """Busy CPU seconds of all CPUs since boot (/proc/stat: user nice system
    irq softirq steal; guest time is inside user)."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / TICK


def own_cpu():
    """CPU seconds of this script and of its children it has reaped (the git
    clients, and each CGI host with the git processes it reaped)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class OtherWork:
    """How many CPUs other work used while a phase ran: the machine's busy
    time over the phase minus this script's own (`own_cpu`, plus the CPU of
    the live processes `pids`, i.e. gitstow's daemon, not reaped until the
    run ends), per second of wall time. The phase must reap every other
    process it starts before `stop` (the clients and the CGI host are)."""

    def __init__(self, pids=()):
        self.pids = pids
        self.t0, self.busy0, self.own0 = time.monotonic(), machine_busy(), self.own()
        self.load = os.getloadavg()[0]

    def own(self):
        return own_cpu() + sum(proc_cpu(p)[0] for p in self.pids)

    def stop(self):
        wall = time.monotonic() - self.t0
        other = (machine_busy() - self.busy0) - (self.own() - self.own0)
        return {"cpus": other / wall if wall > 0 else 0.0, "seconds": other, "wall": wall,
                "load": max(self.load, os.getloadavg()[0])}


# ---- a sitting: git 0, gitstow 1, git 1, gitstow 2, git 2, ... ---------------

def repo_name(a, k):
    return "%s-%d-%d.git" % (a.name, os.getpid(), k)


def push_args(a, k):
    return lambda url: ["-C", a.repo, "push", "-q", url + "/" + repo_name(a, k), *a.refspec]


def clone_args(a, k, dest):
    return lambda url: ["clone", "-q", "--mirror", url + "/" + repo_name(a, k), dest]


def git_at_its_best(repo):
    """What git's maintenance gives a repository before it serves clones
    (`git maintenance`/`gc` with bitmaps on, as a forge runs it): one pack
    with reachability bitmaps, and a commit-graph. Returns its CPU seconds
    (reported, not counted, as gitstow's first maintenance pass is not
    counted in the push of record)."""
    before = own_cpu()
    git("-C", repo, "repack", "-a", "-d", "-b", "-q")
    git("-C", repo, "commit-graph", "write", "--reachable")
    return own_cpu() - before


def git_replay(a, k, base):
    """git's side once: a push into a new repository on a fresh CGI host
    (refs in `--git-ref-format`, reftable by default), then, unless
    `--git-plain`, a repack with bitmaps and a commit-graph, then a clone of
    it from another fresh host."""
    work = os.path.join(base, "git%d" % k)
    os.makedirs(work)
    hb_root = os.path.join(work, "hb-data")
    repo = os.path.join(hb_root, repo_name(a, k))
    env = {"GIT_DEFAULT_REF_FORMAT": a.git_ref_format}
    r = {"clone_dir": os.path.join(work, "hb-clone")}
    for phase, args_for in (("push", push_args(a, k)), ("clone", clone_args(a, k, r["clone_dir"]))):
        if phase == "clone":
            # stored bytes: the pack receive-pack kept, before any repack
            r.update(stored_sizes(None, repo))
            r["best_cpu"] = None if a.git_plain else git_at_its_best(repo)
        log("  %s -> git http-backend (replay %d)" % (phase, k))
        w = OtherWork()
        r[phase] = http_backend_phase(a.http_backend_server, hb_root, args_for, work, phase, env=env)
        r[phase]["other"] = w.stop()
    r["dir"] = work
    return r


def gitstow_run(a, i, base):
    """gitstow's side once: a fresh daemon and store, a push into a new
    repository, a clone of it."""
    work = os.path.join(base, "run%d" % i)
    os.makedirs(work)
    store_dir = os.path.join(work, "gs-data") if a.store == "file" else None
    store = "file://" + store_dir if store_dir else a.store
    r = {"clone_dir": os.path.join(work, "gs-clone"), "dir": work}
    gsp, gs_url = start_gitstow(a.gitstow, store, work)
    try:
        server_log = os.path.join(work, "gitstow.err")
        for phase, args_for in (("push", push_args(a, i)), ("clone", clone_args(a, i, r["clone_dir"]))):
            log("  %s -> gitstow (run %d)" % (phase, i))
            mark = os.path.getsize(server_log)
            w = OtherWork((gsp.pid,))
            r[phase] = gitstow_phase(gsp.pid, args_for(gs_url), os.path.join(work, "gs-%s.err" % phase))
            r[phase]["other"] = w.stop()
            r[phase]["maint_cpu"] = maintenance_cpu(server_log, mark)
            r[phase]["passes"] = len(log_lines(server_log, mark, "maintenance"))
    finally:
        gsp.terminate()
        gsp.wait()
    r["gs_stored"] = stored_sizes(store_dir, None)["gs"] if store_dir else None
    return r


def stored_sizes(gs_store, hb_repo):
    gs = sum(os.lstat(os.path.join(d, f)).st_size
             for d, _, fs in os.walk(gs_store) for f in fs) if gs_store else None
    if hb_repo is None:
        return {"gs": gs}
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


# ---- report -----------------------------------------------------------------

s_ = lambda x: "%.2f s" % x
m_ = lambda x: "%.1f MiB" % (x / MiB)
b_ = lambda x: "%d B (%.1f MiB)" % (x, x / MiB)
PUSH_OF_RECORD = "push: server CPU without the maintenance pass (receive-pack; of record)"


def metrics():
    """(name, gitstow's figure of a run, git's figure of a replay, format,
    target ratio, limit of gitstow's figure); None where a side has none."""
    out = []
    for ph in ("push", "clone"):
        gs = lambda key, ph=ph: lambda r: r[ph][key]
        hb = lambda key, ph=ph: lambda r: r[ph][key]
        out.append((ph + ": client wall", gs("wall"), hb("wall"), s_, None, None))
        if ph == "push":
            # Two push figures, both always given (benches/README.md has the
            # convention): everything the daemon did because of the push, and
            # that without the maintenance pass the push queued (after an
            # import: the closure's reachability bitmaps), the figure of
            # record: git's side runs no repack (its `gc --auto` inside the
            # push has nothing to do), so receive-pack against receive-pack.
            out.append(("push: server CPU, total (with gitstow's maintenance pass)", gs("cpu"), hb("cpu"), s_,
                        None, None))
            out.append(("push: of which gitstow's maintenance pass after it", gs("maint_cpu"), None, s_,
                        None, None))
            out.append((PUSH_OF_RECORD, lambda r: r["push"]["cpu"] - r["push"]["maint_cpu"], hb("cpu"), s_,
                        0.4, None))
            out.append(("push: gitstow peak RSS of the request (VmHWM when the client is done)",
                        gs("peak_request"), hb("peak"), m_, None, None))
        else:
            out.append(("clone: server CPU", gs("cpu"), hb("cpu"), s_, 1.0, None))
        out.append((ph + ": server CPU, of which sys", gs("sys"), hb("sys"), s_, None, None))
        out.append((ph + ": peak RSS (VmHWM / largest git process)", gs("peak"), hb("peak"), m_, None, None))
        out.append((ph + ": gitstow peak above idle", gs("above_idle"), None, m_, None,
                    256 * MiB if ph == "clone" else None))
        out.append((ph + ": gitstow idle RSS before", gs("idle"), None, m_, None, None))
        out.append((ph + ": gitstow RssAnon peak (sampled)", gs("anon"), None, m_, None, None))
        out.append((ph + ": gitstow RssFile peak (sampled)", gs("file"), None, m_, None, None))
        out.append((ph + ": CGI host (python) CPU, not counted", None, hb("host_cpu"), s_, None, None))
    out.append(("stored bytes: gitstow store / pack receive-pack kept",
                (lambda r: r["gs_stored"]), (lambda r: r["pack"]), b_, 1.05, None))
    return out


def run_ratio(gsf, hbf, run, before, after):
    """gitstow's figure of a run over the mean of the git replays around it."""
    g, h = gsf(run), [hbf(before), hbf(after)]
    if g is None or None in h or not sum(h):
        return None
    return g / (sum(h) / 2)


def table(head, rs):
    return "\n".join("| " + " | ".join(x) + " |" for x in [head, ["---"] * len(head)] + rs)


def run_table(run, before, after):
    """One run: gitstow's figures, the git replays before and after it, the ratio."""
    rs = []
    for name, gsf, hbf, fmt, target, limit in metrics():
        g = gsf(run) if gsf else None
        hs = [hbf(before), hbf(after)] if hbf else [None, None]
        ratio = run_ratio(gsf, hbf, run, before, after) if gsf and hbf else None
        tgt = "≤ %.2f ×" % target if target else "≤ %d MiB" % (limit / MiB) if limit else ""
        rs.append([name, fmt(g) if g is not None else "—"] + [fmt(h) if h is not None else "—" for h in hs] +
                  ["%.3f" % ratio if ratio is not None else "", tgt])
    return table(["metric", "gitstow", "git before", "git after", "gitstow/git", "target"], rs)


def spread(xs):
    """max/min of positive figures, or None."""
    xs = [x for x in xs if x is not None]
    return max(xs) / min(xs) if xs and min(xs) > 0 else None


def summarize(runs, replays, noisy):
    """The summary's rows and the targets missed. Ratios: the median of the
    runs' own ratios, with their min and max; gitstow's figure is the median
    of its runs, git's the median of its replays."""
    med = lambda xs: statistics.median(xs) if xs and None not in xs else None
    rs, missed, ratios_of = [], [], {}
    for name, gsf, hbf, fmt, target, limit in metrics():
        g = med([gsf(r) for r in runs]) if gsf else None
        h = med([hbf(r) for r in replays]) if hbf else None
        ratios = [run_ratio(gsf, hbf, r, replays[i], replays[i + 1]) for i, r in enumerate(runs)] \
            if gsf and hbf else []
        ratios = ratios if ratios and None not in ratios else []
        ratios_of[name] = ratios
        ratio = statistics.median(ratios) if ratios else None
        tgt, verdict = "", ""
        if target is not None and ratio is not None:
            tgt, ok, got = "≤ %.2f ×" % target, ratio <= target, "%.3f ×" % ratio
        elif limit is not None and g is not None:
            tgt, ok, got = "≤ %d MiB" % (limit / MiB), g <= limit, fmt(g)
        if tgt:
            verdict = "NOISY" if noisy else "PASS" if ok else "FAIL"
            if not ok:
                missed.append("%s: %s, target %s" % (name, got, tgt))
        rs.append([name, fmt(g) if g is not None else "n/a", fmt(h) if h is not None else "—",
                   "%.3f" % ratio if ratio is not None else "",
                   "%.3f – %.3f" % (min(ratios), max(ratios)) if ratios else "", tgt, verdict])
    head = ["metric", "gitstow (median)", "git (median of replays)", "gitstow/git (median of runs)",
            "runs' ratios min – max", "target", ""]
    return table(head, rs), missed, ratios_of


def control(runs, replays, ratios_of, a):
    """The same-sitting control: each replay's and run's CPU in sitting order,
    the runs' ratios, and the spreads."""
    lines = []
    for name, key, gsf in (
            ("push, server CPU total", "push: server CPU, total (with gitstow's maintenance pass)",
             lambda r: r["push"]["cpu"]),
            ("push, server CPU without the maintenance pass (of record)", PUSH_OF_RECORD,
             lambda r: r["push"]["cpu"] - r["push"]["maint_cpu"]),
            ("clone, server CPU", "clone: server CPU", lambda r: r["clone"]["cpu"])):
        ph = name.split(",")[0]
        seq = ["git %.2f" % replays[0][ph]["cpu"]]
        for i, r in enumerate(runs):
            seq += ["**gitstow %.2f**" % gsf(r), "git %.2f" % replays[i + 1][ph]["cpu"]]
        rat = ratios_of[key]
        lines.append("- %s (s, in sitting order): %s; runs' ratios %s: min – median – max %.3f – %.3f – %.3f; "
                     "gitstow max/min %.2f" % (name, ", ".join(seq), ", ".join("%.3f" % x for x in rat),
                                               min(rat), statistics.median(rat), max(rat),
                                               spread([gsf(r) for r in runs]) or 0))
    lines.append("- gitstow's maintenance passes logged during each run's push: %s (their CPU is what the "
                 "figure of record leaves out)" % ", ".join("%d (%.2f s)" % (r["push"]["passes"], r["push"]["maint_cpu"])
                                                             for r in runs))
    for ph in ("push", "clone"):
        cpus = [r[ph]["cpu"] for r in replays]
        noisy = git_noisy(a, cpus)[0]
        lines.append("- git's %s CPU over its %d replays: %.2f – %.2f s (max/min %.3f over the sitting); "
                     "between the replays around each run: %s (limit %.2f, beyond %.2f s)%s" % (
                         ph, len(replays), min(cpus), max(cpus), spread(cpus) or 0,
                         ", ".join("×%.3f" % (max(p) / min(p)) if min(p) > 0 else "×inf"
                                   for p in zip(cpus, cpus[1:])),
                         a.max_git_spread, GIT_SPREAD_FLOOR, ": NOISY" if noisy else ""))
    return lines


def other_work(runs, replays):
    """Every measured phase's other work, in sitting order."""
    out = []
    for i, rep in enumerate(replays):
        if i:
            r = runs[i - 1]
            out += [("gitstow %s (run %d)" % (ph, i), r[ph]["other"]) for ph in ("push", "clone")]
        out += [("git %s (replay %d)" % (ph, i), rep[ph]["other"]) for ph in ("push", "clone")]
    return out


def add_sitting_args(ap, spread):
    """The options every side-by-side sitting takes: the NOISY thresholds
    (`spread`: what --max-git-spread bounds), the temp dir."""
    ap.add_argument("--max-load", type=float, default=MAX_LOAD,
                    help="NOISY above this 1-minute load average at the start, or this many CPUs of other "
                         "work during any measured phase (default %(default)s)")
    ap.add_argument("--max-git-spread", type=float, default=MAX_GIT_SPREAD,
                    help="NOISY when %s (default %%(default)s)" % spread)
    ap.add_argument("--workdir", default=tempfile.gettempdir(), help="where the temp dir goes")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")


def finish_sitting_args(ap, a):
    """Checks and completes parsed arguments: --runs, absolute paths, the
    name (from the repository's path when not given), the load at the start
    (a warning when the sitting will be NOISY for it)."""
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    a.repo, a.gitstow = os.path.abspath(a.repo), os.path.abspath(a.gitstow)
    a.http_backend_server = os.path.abspath(a.http_backend_server)
    if not a.name:  # /x/owner+proj/repo -> owner-proj; /x/proj.git -> proj
        parts = a.repo.rstrip("/").split("/")
        a.name = parts[-2] if parts[-1] in ("repo", ".git") else parts[-1].removesuffix(".git")
    a.name = re.sub(r"[^A-Za-z0-9._-]", "-", a.name)
    a.loadavg = os.getloadavg()
    if a.loadavg[0] > a.max_load:
        log("warning: load average %.2f > %.2f: the sitting will be NOISY (no PASS)" % (a.loadavg[0], a.max_load))


def load_reasons(a, phases):
    """Why the machine made the sitting NOISY: the 1-minute load average at
    the start, or the most other work during a measured phase (`phases`:
    (name, {"cpus": …}) pairs), beyond --max-load."""
    reasons = []
    if a.loadavg[0] > a.max_load:
        reasons.append("1-minute load average %.2f at the start > %.2f" % (a.loadavg[0], a.max_load))
    worst = max(phases, key=lambda p: p[1]["cpus"])
    if worst[1]["cpus"] > a.max_load:
        reasons.append("other work used %.2f CPUs during the %s (limit %.2f)" % (worst[1]["cpus"], worst[0],
                                                                              a.max_load))
    return reasons


def verdict_of(bad, reasons, missed):
    """The verdict line and exit status: WRONG (1) when a check failed,
    NOISY (3) when the sitting is, FAIL (2) when a target was missed, else
    PASS (0)."""
    if bad:
        return "WRONG: " + "; ".join(bad), 1
    if reasons:
        return "NOISY: " + "; ".join(reasons) + " (no target is judged; re-run on a quiet machine)", 3
    if missed:
        return "FAIL: " + "; ".join(missed), 2
    return "PASS: every target met on a quiet machine", 0


def bracket_spread(cpus):
    """The largest max/min of two successive replays (the two around a run:
    the control of that run's ratio), and that pair; (None, pair) when a
    figure is 0. A drift through the sitting moves both replays of a pair
    and the run between them alike, so it is not counted; git answering the
    same work differently from one replay to the next is."""
    pairs = list(zip(cpus, cpus[1:])) or [(cpus[0], cpus[0])]
    worst = max(pairs, key=lambda p: max(p) / min(p) if min(p) > 0 else float("inf"))
    return (max(worst) / min(worst) if min(worst) > 0 else None), worst


def git_noisy(a, cpus):
    """Whether git's replays `cpus` make the sitting NOISY (a pair around a
    run beyond --max-git-spread and beyond GIT_SPREAD_FLOOR, which is a few
    clock ticks, not noise), with that spread and pair."""
    sp, pair = bracket_spread(cpus)
    noisy = sp is None or (sp > a.max_git_spread and max(pair) - min(pair) > GIT_SPREAD_FLOOR)
    return noisy, sp, pair


def noise(a, runs, replays):
    """The reasons the sitting is NOISY (empty: quiet), and the lines saying
    what was measured."""
    phases = other_work(runs, replays)
    reasons = load_reasons(a, phases)
    worst = max(phases, key=lambda p: p[1]["cpus"])
    for ph in ("push", "clone"):
        noisy, sp, pair = git_noisy(a, [r[ph]["cpu"] for r in replays])
        if noisy:
            reasons.append("git's %s CPU moved by a factor %.3f between the replays around a run "
                           "(%.2f s, %.2f s; limit %.2f)" % (ph, sp or 0, pair[0], pair[1], a.max_git_spread))
    busy = sum(p[1]["seconds"] for p in phases)
    wall = sum(p[1]["wall"] for p in phases)
    lines = ["- load average at the start: %.2f %.2f %.2f (limit on the 1-minute figure: %.2f)" % (*a.loadavg, a.max_load),
             "- other work during the measured phases (CPUs: the machine's busy time minus this bench's "
             "processes, per second): mean %.2f, max %.2f (%s); limit %.2f" % (
                 busy / wall if wall else 0, worst[1]["cpus"], worst[0], a.max_load),
             "- per phase: " + ", ".join("%s %.2f" % (n, p["cpus"]) for n, p in phases),
             "- highest 1-minute load average seen at a phase's start or end (this bench's own work "
             "included): %.2f" % max(p[1]["load"] for p in phases)]
    return reasons, lines


def notes(runs, replays, first=1):
    out = []
    for i, r in enumerate(runs, first):
        c, loose = r["checks"], replays[i]["loose"]
        out.append("run %d: refs %s, objects %s, fsck of gitstow's clone %s%s" % (
            i, "identical" if c["refs"] else "DIFFER", "identical" if c["objects"] else "DIFFER",
            {True: "ok", False: "FAILED", None: "skipped"}[c["fsck"]],
            "; receive-pack left %d loose objects (below unpackLimit), so the pack size "
            "understates what the client sent" % loose if loose else ""))
    best = [r.get("best_cpu") for r in replays]
    if any(b is not None for b in best):
        out.append("git's repositories were repacked with bitmaps and given a commit-graph after "
                   "the push, before the clone (not counted): %s s CPU per replay" %
                   ", ".join("%.2f" % b for b in best if b is not None))
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
    ap.add_argument("--runs", type=int, default=3, help="gitstow runs; git's side is replayed RUNS+1 times")
    ap.add_argument("--refspec", nargs="+", action="extend", help="push refspecs (default --mirror; write --refspec=-x for one starting with -)")
    ap.add_argument("--gitstow", default=os.path.join(HERE, "..", "target", "release", "gitstow"))
    ap.add_argument("--http-backend-server",
                    default=os.path.join(HERE, "..", "..", "shared", "tools", "git-http-backend-server.py"))
    ap.add_argument("--store", default="file", help="file (a fresh temp dir per run) or s3://BUCKET[/PREFIX]")
    ap.add_argument("--out", help="also write the report as Markdown to this file")
    ap.add_argument("--no-fsck", dest="fsck", action="store_false")
    ap.add_argument("--git-ref-format", default="reftable", choices=["reftable", "files"],
                    help="ref storage of git's repositories (git at its best: reftable)")
    ap.add_argument("--git-plain", action="store_true",
                    help="clone from git's repository as pushed: no repack with bitmaps, no commit-graph")
    add_sitting_args(ap, "git's push or clone CPU moves by more than this factor (max/min) across its replays")
    a = ap.parse_args()
    finish_sitting_args(ap, a)
    a.refspec = a.refspec or ["--mirror"]
    cmdline = shlex.join(["python3", *sys.argv])
    packdir = os.path.join(git("-C", a.repo, "rev-parse", "--absolute-git-dir").stdout.strip(), "objects", "pack")
    for f in os.listdir(packdir):  # warm the page cache so run 1 is not the cold one
        with open(os.path.join(packdir, f), "rb") as fh:
            while fh.read(1 << 24):
                pass
    base = tempfile.mkdtemp(prefix="side-by-side.", dir=a.workdir)
    runs, replays, report = [], [], []
    rm = lambda d: None if a.keep else subprocess.run(["rm", "-rf", d])
    try:
        log("git replay 0 (before run 1) in %s" % base)
        replays.append(git_replay(a, 0, base))
        rm(replays[0]["dir"])
        for i in range(1, a.runs + 1):
            log("run %d/%d: gitstow, then git replay %d" % (i, a.runs, i))
            runs.append(gitstow_run(a, i, base))
            replays.append(git_replay(a, i, base))
            runs[-1]["checks"] = check_clones(runs[-1]["clone_dir"], replays[-1]["clone_dir"], a.fsck)
            others = [("gitstow " + ph, runs[-1][ph]["other"]) for ph in ("push", "clone")] + \
                [("git %s (replay %d)" % (ph, i), replays[-1][ph]["other"]) for ph in ("push", "clone")]
            out = "### run %d: gitstow run %d against git replays %d (before) and %d (after)\n\n%s\n\n%s\n\n" \
                  "other work (CPUs): %s\n" % (
                      i, i, i - 1, i, run_table(runs[-1], replays[i - 1], replays[i]),
                      notes([runs[-1]], replays, i)[0],
                      ", ".join("%s %.2f" % (n, o["cpus"]) for n, o in others))
            print(out, flush=True)
            report.append(out)
            rm(runs[-1]["dir"])
            rm(replays[-1]["dir"])
    finally:
        rm(base)
    reasons, load_lines = noise(a, runs, replays)
    tbl, missed, ratios_of = summarize(runs, replays, bool(reasons))
    bad = [n for n in notes(runs, replays) if "DIFFER" in n or "FAILED" in n]
    verdict, status = verdict_of(bad, reasons, missed)
    summary = ("### summary: %d gitstow run(s) between %d git replays (git 0, gitstow 1, git 1, ...)\n\n"
               "Each run's ratio is gitstow's figure over the mean of the git replays just before and "
               "after it; the ratio of record is the median of the runs' ratios.\n\n%s\n\n"
               "same-sitting control:\n\n%s\n\nload:\n\n%s\n\n%s\n\nverdict: %s\n"
               % (len(runs), len(replays), tbl, "\n".join(control(runs, replays, ratios_of, a)),
                  "\n".join(load_lines), "\n".join("- " + n for n in notes(runs, replays)), verdict))
    print(summary)
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
    sys.exit(status)


if __name__ == "__main__":
    main()
