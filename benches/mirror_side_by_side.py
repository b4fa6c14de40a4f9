#!/usr/bin/env python3
"""Mirrors side by side (issue 45, plan 0017 step 6): `gitstow mirror pull`
and `gitstow mirror push` against what git does for the same job (`git clone
--mirror`, `git fetch`, `git push --mirror`), both talking to canonical `git
http-backend`. Stdlib only.

usage: python3 benches/mirror_side_by_side.py --repo SRC [--name NAME] [--runs 3]
           [--refspec R ...] [--gitstow target/release/gitstow]
           [--http-backend-server ../shared/tools/git-http-backend-server.py]
           [--out FILE.md] [--no-fsck] [--max-load 0.3] [--max-git-spread 1.15]
           [--git-ref-format reftable|files] [--workdir DIR] [--keep]

The upstream (set up once, not timed): SRC's heads and tags (--refspec) are
pushed into a bare repository; a work clone of it then makes commits of a
counter file on SRC's HEAD branch (fixed author, committer and dates, so the
same objects every time) and pushes them through http-backend into copies of
it: four states U0 (SRC), U1 (1 commit more), U21 (20 more) and U22 (1 more),
each its own repository, each at its best (`repack -adb`, `commit-graph write
--reachable`; CPU reported, not counted) and served by a fresh CGI host per
phase (same URL path, the root differs).

Each side, four phases, each timed on the client:
1. first sync: `gitstow mirror pull --create-store` of U0 into a new local
   store / `git clone --mirror` of U0;
2. after 1 commit: `gitstow mirror pull` of U1 into that store / `git fetch`
   in that clone (its remote URL set to U1's host first, not timed);
3. after 20 commits: the same from U21;
4. push mirror after one push: U22 brought in (a pull / a fetch, not timed),
   then `gitstow mirror push` of the store's repository / `git push --mirror`
   of the clone, each to its own fresh copy of U21 (a remote equal to what
   the mirror held before U22) on a CGI host.

Figures (benches/README.md has side_by_side.py's method, reused here):
- client wall, CPU (user+sys) and peak RSS: the client process is started
  and reaped (wait4(2)) by a small spawner process (see SPAWNER), whose
  rusage covers it and every descendant it waited for (git's remote-http,
  index-pack, rev-list, ...); ru_maxrss is the largest single process, with
  the spawner's own RSS (~7 MiB, reported) as its floor. gitstow's pull and
  push are one process.
- server CPU: getrusage(RUSAGE_CHILDREN) of the CGI host (http-backend and
  every git process it ran), as in side_by_side.py. The same code serves
  both sides: reported, not judged.
- bytes: this bench's CGI host launcher records each request's body
  sizes as they crossed HTTP (a request body as sent, gzip or not): for a
  pull, the bodies of upload-pack's `command=fetch` responses (the pack
  with its side-band framing, plus any negotiation answers); for a push, the
  body of the receive-pack request (commands and pack). Also every body in
  both directions (ls-refs, haves, pack), the request count, gitstow's own
  printed figure (`… fetched` / `… sent`, 2 decimals, truncated) and, for
  the first sync, the pack git's clone kept (the pack it received).
- other work, the NOISY rules and the exit status: as side_by_side.py.

Targets (judged only on a sitting that is not NOISY): after 1 and after 20
commits, client CPU <= 1.0x git's and bytes fetched <= 1.05x git's. The
first sync and the push mirror are reported with their ratios, not judged.

Sitting: git 0, gitstow 1, git 1, ..., gitstow N, git N. Run i's ratio is
gitstow's figure over the mean of git replays i-1 and i. NOISY (exit 3) when
the 1-minute load average at the start > --max-load, other work > --max-load
CPUs during a measured phase, or git's client CPU of a phase moved by more
than --max-git-spread and by more than 50 ms between the two replays around
a run. After each phase, refs are checked (`git ls-remote`) against the
upstream state's: git's clone and the remotes directly, gitstow's store
through a `gitstow serve --no-mirrors` started for the check; after each
run, `gitstow fsck` of the repository (--no-fsck skips it). None of it is
timed. Exit status: 0 PASS, 1 refs differ / fsck failed / a command failed,
2 FAIL, 3 NOISY.
"""
import argparse, json, os, re, shlex, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import side_by_side as sbs  # noqa: E402  (git, log, http_backend_phase, OtherWork, start_gitstow, ...)

MiB = 1 << 20
PHASES = [  # key, title, what the two sides run
    ("first", "first sync", "`gitstow mirror pull` into a new store / `git clone --mirror`"),
    ("inc1", "after 1 commit", "`gitstow mirror pull` / `git fetch`"),
    ("inc20", "after 20 commits", "`gitstow mirror pull` / `git fetch`"),
    ("push", "push mirror after one push", "`gitstow mirror push` / `git push --mirror`"),
]
TITLE = {k: t for k, t, _ in PHASES}
STATES = (0, 1, 21, 22)  # commits on top of SRC in each upstream state
STATE_OF = {"first": 0, "inc1": 1, "inc20": 21}
CPU_TARGET, BYTES_TARGET = 1.0, 1.05

# side_by_side.py's CGI host launcher, which also records each git
# http-backend request it ran: which service and v2 command, and the sizes
# of the request body (as received: gzip when the client sent it so) and of
# the response body (the CGI output after its header). http_backend_phase
# runs `sbs.LAUNCHER`; this bench sets it to this one (same report keys,
# plus "requests").
LAUNCHER = r"""
import gzip, json, os, resource, runpy, signal, subprocess, sys, threading
server, root, port, report = sys.argv[1:5]
seen, lock, real_run = [], threading.Lock(), subprocess.run
def command(body, env):
    if env.get("HTTP_CONTENT_ENCODING", "").lower() in ("gzip", "x-gzip"):
        try:
            body = gzip.decompress(body)
        except Exception:
            return "?"
    try:
        n = int(body[:4], 16)
    except ValueError:
        return ""
    line = body[4:n].strip()
    return line[8:].decode("latin1") if line.startswith(b"command=") else ""
def run(args, *a, **kw):
    p = real_run(args, *a, **kw)
    if list(args) == ["git", "http-backend"]:
        env, body, out = kw.get("env") or {}, kw.get("input") or b"", p.stdout or b""
        head, sep, payload = out.partition(b"\r\n\r\n")
        if not sep:
            head, sep, payload = out.partition(b"\n\n")
        path = env.get("PATH_INFO", "")
        with lock:
            seen.append({"service": path.split(".git/", 1)[-1], "command": command(body, env),
                         "in": len(body), "out": len(payload)})
    return p
subprocess.run = run
def stop(*_):
    c, s = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    with lock, open(report + ".tmp", "w") as f:
        json.dump({"cpu": c.ru_utime + c.ru_stime, "sys": c.ru_stime, "maxrss_kb": c.ru_maxrss,
                   "host_cpu": s.ru_utime + s.ru_stime, "requests": seen}, f)
    os.rename(report + ".tmp", report)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
sys.argv = [server, root, port]
runpy.run_path(server, run_name="__main__")
"""
sbs.LAUNCHER = LAUNCHER


# ---- clients and phases -------------------------------------------------------

# Clients are started by a small process of their own, not by this script:
# Linux folds the RSS high-water mark of the process that forked a client
# into the client's ru_maxrss when it execs, so a client forked from this
# script (25 MiB and growing) would report at least that. The spawner
# (`python3 -I -S`, about 7 MiB) forks and execs each client, reaps it with
# wait4(2) and writes back its exit status, wall time and rusage: its CPU
# and that of every descendant it waited for, and its largest process's
# RSS, with the spawner's size as the floor (measured at the start and
# reported). Its own CPU is not in the figures.
SPAWNER = r"""
import os, sys, time
for line in sys.stdin.buffer:
    out, err, *argv = line.rstrip(b"\n").split(b"\0")
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    sys.stdout.write("%d %.6f %.6f %.6f %d\n" % (os.waitstatus_to_exitcode(status), wall, ru.ru_utime,
                                                 ru.ru_stime, ru.ru_maxrss))
    sys.stdout.flush()
"""


class Spawner:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, "-I", "-S", "-c", SPAWNER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.pid = self.p.pid

    def run(self, argv, out_path, err_path):
        """(exit status, wall s, user s, sys s, maxrss KiB) of `argv`."""
        self.p.stdin.write(b"\0".join(os.fsencode(x) for x in [out_path, err_path, *argv]) + b"\n")
        self.p.stdin.flush()
        rc, wall, user, sys_, maxrss = self.p.stdout.readline().split()
        return int(rc), float(wall), float(user), float(sys_), int(maxrss)

    def close(self):
        self.p.stdin.close()
        self.p.wait()


SPAWN = None  # the Spawner, started by main


def client(argv, work, tag):
    """Runs a client command through the spawner: wall, CPU and peak RSS of
    it and every descendant it waited for; its stdout. A failure ends the
    bench (exit 1)."""
    out_path, err_path = (os.path.join(work, "client-%s.%s" % (tag, x)) for x in ("out", "err"))
    rc, wall, user, sys_, maxrss = SPAWN.run(argv, out_path, err_path)
    text = open(out_path).read()
    if rc:
        sys.exit("FAILED (exit %d): %s\n%s%s" % (rc, shlex.join(argv), text[-1000:], open(err_path).read()[-2000:]))
    return {"wall": wall, "cpu": user + sys_, "sys": sys_, "peak": maxrss * 1024, "stdout": text}


def phase(a, root, work, tag, run_client):
    """One measured phase: a fresh CGI host serving `root`, `run_client(url)`
    the timed client. Returns the client's figures with the server's
    ("server"), the other work meanwhile and the bytes over HTTP."""
    res = {}

    def run(url):
        res.update(run_client(url))
        return res["wall"]

    w = sbs.OtherWork((SPAWN.pid,))  # the spawner's CPU includes the clients it reaped
    res["server"] = sbs.http_backend_phase(a.http_backend_server, root, None, work, tag, run=run)
    res["other"] = w.stop()
    reqs = json.load(open(os.path.join(work, "hb-%s.json" % tag)))["requests"]
    res["requests"] = len(reqs)
    res["up"] = sum(r["in"] for r in reqs)
    res["down"] = sum(r["out"] for r in reqs)
    res["fetched"] = sum(r["out"] for r in reqs if r["command"] == "fetch")
    res["sent"] = sum(r["in"] for r in reqs if r["service"] == "git-receive-pack")
    res["xfer"] = res["sent"] if tag == "push" else res["fetched"]
    return res


UNITS = {"byte": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def human_bytes(text):
    """gitstow's `5.66 MiB` / `369 bytes` (git's humanise: truncated) in bytes."""
    n, unit = text.split()
    return int(float(n) * UNITS[unit])


def parse_gitstow(res, direction):
    """gitstow's summary line: its printed pack size (`pack`), new objects."""
    out = res["stdout"]
    res["summary"] = out.strip().splitlines()[0] if out.strip() else ""
    if direction == "pull":
        m = re.search(r": pulled from \S+: (\d+) created, (\d+) updated, (\d+) deleted; (\d+) new objects, "
                      r"(\d+(?:\.\d+)? \w+) fetched", out)
        res["objects"] = int(m[4]) if m else 0
        res["pack"] = human_bytes(m[5]) if m else 0
    else:
        m = re.search(r": pushed to \S+: (\d+) created, (\d+) updated, (\d+) deleted; (\d+(?:\.\d+)? \w+) sent",
                      out)
        res["pack"] = human_bytes(m[4]) if m else 0
        res["refused"] = re.findall(r"^\S+: (\S+) refused by the remote: (.*)$", out, re.M)


def ls_remote(where):
    return sorted(sbs.git("ls-remote", where).stdout.splitlines())


def compare(side, what, got, want):
    """A check's record: same refs, else how many lines differ and a few."""
    diff = sorted(set(got) ^ set(want))
    return {"side": side, "what": what, "ok": not diff,
            "detail": "" if not diff else "%d line(s) differ, e.g. %s" % (
                len(diff), "; ".join(("only upstream: " if d in want else "only %s: " % side) + d
                                     for d in diff[:3]))}


def gitstow_refs(a, store, work):
    """`git ls-remote` of the repository in gitstow's store, through a
    `gitstow serve` started for it."""
    p, url = sbs.start_gitstow(a.gitstow, store, work, ("--no-mirrors",))
    try:
        return ls_remote("%s/%s.git" % (url, a.name))
    finally:
        p.terminate()
        p.wait()


def copy_remote(up, work):
    """A fresh remote for the push mirror: a copy of U21 (refs and objects
    equal to what the mirror held before U22, bitmaps and commit-graph
    included), in a root of its own."""
    root = os.path.join(work, "remote")
    os.makedirs(root)
    subprocess.run(["cp", "-a", up["repos"][21], os.path.join(root, os.path.basename(up["repos"][21]))],
                   check=True)
    return root


def gitstow_run(a, i, base, up):
    """gitstow's side once: a new store, the four phases."""
    work = os.path.join(base, "run%d" % i)
    os.makedirs(work)
    store = "file://" + os.path.join(work, "gs-data")
    refs = [x for r in a.gs_refs for x in ("--refs", r)]
    repo_url = lambda url: "%s/%s.git" % (url, a.name)

    def pull(tag, first=False):
        return lambda url: client([a.gitstow, "mirror", "pull", "--store", store] +
                                  (["--create-store"] if first else []) +
                                  refs + [a.name, "--from", repo_url(url)], work, tag)

    r = {"dir": work, "checks": []}
    for ph, k in STATE_OF.items():
        sbs.log("  %s -> gitstow mirror pull (run %d)" % (TITLE[ph], i))
        r[ph] = phase(a, up["roots"][k], work, ph, pull(ph, ph == "first"))
        parse_gitstow(r[ph], "pull")
        r["checks"].append(compare("gitstow", "store at U%d (%s)" % (k, TITLE[ph]), gitstow_refs(a, store, work),
                                   up["refs"][k]))
    sbs.log("  U22 pulled in (not timed); push mirror -> a copy of U21 (run %d)" % i)
    bring = phase(a, up["roots"][22], work, "bring", pull("bring"))
    parse_gitstow(bring, "pull")
    remote = copy_remote(up, work)
    r["push"] = phase(a, remote, work, "push", lambda url: client(
        [a.gitstow, "mirror", "push", "--store", store] + refs + [a.name, "--to", repo_url(url)], work, "push"))
    parse_gitstow(r["push"], "push")
    r["checks"].append(compare("gitstow", "remote after `mirror push` (U22)",
                               ls_remote(os.path.join(remote, a.name + ".git")), up["refs"][22]))
    if r["push"]["refused"]:
        r["checks"].append({"side": "gitstow", "what": "push mirror", "ok": False,
                            "detail": "refused: %s" % r["push"]["refused"]})
    if a.fsck:
        sbs.log("  gitstow fsck --repo %s" % a.name)
        p = subprocess.run([a.gitstow, "fsck", "--store", store, "--repo", a.name, "--no-progress"],
                           capture_output=True, text=True)
        said = (p.stdout + p.stderr).strip()
        r["checks"].append({"side": "gitstow", "what": "`gitstow fsck` at the end", "ok": p.returncode == 0,
                            "detail": said[-300:], "said": said.splitlines()[-1] if said else "ok"})
    return r


def git_replay(a, k, base, up):
    """git's side once: a mirror clone, two fetches, a push --mirror."""
    work = os.path.join(base, "git%d" % k)
    os.makedirs(work)
    clone = os.path.join(work, "mirror.git")
    repo_url = lambda url: "%s/%s.git" % (url, a.name)

    def fetch(tag):
        def run(url):
            sbs.git("-C", clone, "remote", "set-url", "origin", repo_url(url))  # before the clock starts
            return client(["git", "-C", clone, "fetch", "-q"], work, tag)
        return run

    r = {"dir": work, "checks": []}
    for ph, k_ in STATE_OF.items():
        sbs.log("  %s -> git %s (replay %d)" % (TITLE[ph], "clone --mirror" if ph == "first" else "fetch", k))
        run = (lambda url: client(["git", "clone", "-q", "--mirror", repo_url(url), clone], work, "first")) \
            if ph == "first" else fetch(ph)
        r[ph] = phase(a, up["roots"][k_], work, ph, run)
        if ph == "first":  # the pack the clone received, kept as it came
            packdir = os.path.join(clone, "objects", "pack")
            r[ph]["pack"] = sum(os.path.getsize(os.path.join(packdir, f))
                                for f in os.listdir(packdir) if f.endswith(".pack"))
        r["checks"].append(compare("git", "clone at U%d (%s)" % (k_, TITLE[ph]), ls_remote(clone), up["refs"][k_]))
    sbs.log("  U22 fetched (not timed); push --mirror -> a copy of U21 (replay %d)" % k)
    phase(a, up["roots"][22], work, "bring", fetch("bring"))
    remote = copy_remote(up, work)
    r["push"] = phase(a, remote, work, "push",
                      lambda url: client(["git", "-C", clone, "push", "-q", "--mirror", repo_url(url)], work, "push"))
    r["checks"].append(compare("git", "remote after `push --mirror` (U22)",
                               ls_remote(os.path.join(remote, a.name + ".git")), up["refs"][22]))
    return r


# ---- the upstream ---------------------------------------------------------------

def upstream(a, base):
    """The four upstream states (module docstring), each at its best."""
    setup = os.path.join(base, "setup")
    os.makedirs(setup)
    roots = {k: os.path.join(base, "up%d" % k) for k in STATES}
    repos = {k: os.path.join(roots[k], a.name + ".git") for k in STATES}
    u0 = repos[0]
    sbs.log("setup: %s's %s into %s" % (a.repo, " ".join(a.refspec), u0))
    sbs.git("init", "-q", "--bare", "--ref-format=" + a.git_ref_format, u0)
    sbs.git("-C", u0, "config", "http.receivepack", "true")
    sbs.git("-C", a.repo, "push", "-q", u0, *a.refspec)
    heads = sbs.git("-C", u0, "for-each-ref", "--format=%(refname)", "refs/heads/").stdout.split()
    if not heads:
        sys.exit("%s has no branch among %s" % (a.repo, " ".join(a.refspec)))
    src_head = sbs.git("-C", a.repo, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip()
    branch = src_head if src_head in heads else heads[0]
    sbs.git("-C", u0, "symbolic-ref", "HEAD", branch)
    best = {0: sbs.git_at_its_best(u0)}
    wt = os.path.join(setup, "work")
    sbs.git("clone", "-q", "--branch", branch.removeprefix("refs/heads/"), u0, wt)
    tip_time = int(sbs.git("-C", u0, "log", "-1", "--format=%ct", branch).stdout)
    counter = os.path.join(wt, "mirror-bench-counter.txt")
    prev, made = 0, 0
    for k in STATES[1:]:
        while made < k:  # one commit per counter step: same content, names and dates every sitting
            made += 1
            with open(counter, "a") as f:
                f.write("mirror bench counter %d\n" % made)
            date = "@%d +0000" % (tip_time + 60 * made)
            env = dict(os.environ, GIT_AUTHOR_NAME="Mirror Bench", GIT_AUTHOR_EMAIL="bench@example.com",
                       GIT_COMMITTER_NAME="Mirror Bench", GIT_COMMITTER_EMAIL="bench@example.com",
                       GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
            for cmd in (["add", counter], ["commit", "-q", "-m", "mirror bench counter %d" % made]):
                p = subprocess.run(["git", "-C", wt, *cmd], env=env, capture_output=True, text=True)
                if p.returncode:
                    sys.exit("FAILED: git %s\n%s" % (shlex.join(cmd), p.stderr))
        os.makedirs(roots[k])
        subprocess.run(["cp", "-a", repos[prev], repos[k]], check=True)
        sbs.log("setup: U%d = U%d + %d commit(s), pushed through git http-backend" % (k, prev, k - prev))
        sbs.http_backend_phase(a.http_backend_server, roots[k], None, setup, "setup%d" % k, run=lambda url: (
            sbs.git("-C", wt, "push", "-q", "%s/%s.git" % (url, a.name), "HEAD:" + branch), 0)[1])
        best[k] = sbs.git_at_its_best(repos[k])
        prev = k
    for k in STATES:  # warm the page cache: no side pays for a cold read
        packdir = os.path.join(repos[k], "objects", "pack")
        for f in os.listdir(packdir):
            with open(os.path.join(packdir, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass
    refs = {k: ls_remote(repos[k]) for k in STATES}
    pack = sum(os.path.getsize(os.path.join(repos[0], "objects", "pack", f))
               for f in os.listdir(os.path.join(repos[0], "objects", "pack")) if f.endswith(".pack"))
    objects = int(re.search(r"^in-pack: (\d+)", sbs.git("-C", u0, "count-objects", "-v").stdout, re.M)[1])
    subprocess.run(["rm", "-rf", setup])
    return {"roots": roots, "repos": repos, "refs": refs, "best": best, "branch": branch, "pack": pack,
            "objects": objects, "nrefs": len([r for r in refs[0] if not r.endswith("^{}") and "\tHEAD" not in r])}


# ---- report ---------------------------------------------------------------------

def sec(x):
    return "%.3f s" % x


def mib(x):
    return "%.1f MiB" % (x / MiB)


def byt(x):
    x = int(x)
    return "%d B" % x if x < 1024 else "%d B (%.2f %s)" % (x, *((x / MiB, "MiB") if x >= MiB else (x / 1024, "KiB")))


def cnt(x):
    return "%d" % x


def metrics():
    """(phase, name, figure of a run or replay (None: none), format, target ratio)."""
    out = []
    for ph, title, _ in PHASES:
        inc = ph.startswith("inc")
        f = lambda *keys, ph=ph: lambda r: dig(r, ph, *keys)
        xfer = "bytes pushed: receive-pack request body" if ph == "push" else \
            "bytes fetched: upload-pack `fetch` response bodies"
        pack = "pack as gitstow prints it" + (" / the pack git's clone kept" if ph == "first" else
                                              " (2 decimals, truncated)")
        out += [(ph, "client wall", f("wall"), sec, None),
                (ph, "client CPU, user+sys", f("cpu"), sec, CPU_TARGET if inc else None),
                (ph, "client CPU, of which sys", f("sys"), sec, None),
                (ph, "client peak RSS (gitstow / git's largest process)", f("peak"), mib, None),
                (ph, xfer, f("xfer"), byt, BYTES_TARGET if inc else None),
                (ph, "all HTTP bodies, client to server (commands, haves, pack)", f("up"), byt, None),
                (ph, "all HTTP bodies, server to client (refs, acknowledgments, pack)", f("down"), byt, None),
                (ph, "HTTP requests", f("requests"), cnt, None),
                (ph, pack, f("pack"), byt, None),
                (ph, "server CPU: http-backend + git (same code both sides; not judged)", f("server", "cpu"), sec,
                 None),
                (ph, "server peak RSS (largest git process; floor: the CGI host's own RSS)", f("server", "peak"), mib,
                 None),
                (ph, "CGI host (python) CPU, not counted", f("server", "host_cpu"), sec, None)]
    return out


def dig(r, *keys):
    for k in keys:
        if not isinstance(r, dict) or r.get(k) is None:
            return None
        r = r[k]
    return r


def tgt(target):
    return "≤ %.2f ×" % target if target else ""


def run_table(run, before, after):
    rs = []
    for ph, name, f, fmt, target in metrics():
        g, hs = f(run), [f(before), f(after)]
        ratio = sbs.run_ratio(f, f, run, before, after)
        rs.append(["%s: %s" % (TITLE[ph], name), fmt(g) if g is not None else "—"] +
                  [fmt(h) if h is not None else "—" for h in hs] + ["%.3f" % ratio if ratio is not None else "",
                                                                    tgt(target)])
    return sbs.table(["metric", "gitstow", "git before", "git after", "gitstow/git", "target"], rs)


def summarize(runs, replays, noisy):
    """The summary's rows, the targets missed, each metric's runs' ratios."""
    med = lambda xs: statistics.median(xs) if xs and None not in xs else None
    rs, missed, ratios_of = [], [], {}
    for ph, name, f, fmt, target in metrics():
        g, h = med([f(r) for r in runs]), med([f(r) for r in replays])
        ratios = [sbs.run_ratio(f, f, r, replays[i], replays[i + 1]) for i, r in enumerate(runs)]
        ratios = ratios if ratios and None not in ratios else []
        ratios_of[(ph, name)] = ratios
        ratio = statistics.median(ratios) if ratios else None
        verdict = ""
        if target and ratio is not None:
            ok = ratio <= target
            verdict = "NOISY" if noisy else "PASS" if ok else "FAIL"
            if not ok:
                missed.append("%s, %s: %.3f ×, target %s" % (TITLE[ph], name, ratio, tgt(target)))
        rs.append(["%s: %s" % (TITLE[ph], name), fmt(g) if g is not None else "—", fmt(h) if h is not None else "—",
                   "%.3f" % ratio if ratio is not None else "",
                   "%.3f – %.3f" % (min(ratios), max(ratios)) if ratios else "", tgt(target), verdict])
    head = ["metric", "gitstow (median)", "git (median of replays)", "gitstow/git (median of runs)",
            "runs' ratios min – max", "target", ""]
    return sbs.table(head, rs), missed, ratios_of


def control(a, runs, replays, ratios_of):
    """Each phase's client CPU in sitting order, the runs' ratios, git's spread."""
    lines = []
    for ph, title, _ in PHASES:
        seq = ["git %.3f" % replays[0][ph]["cpu"]]
        for i, r in enumerate(runs):
            seq += ["**gitstow %.3f**" % r[ph]["cpu"], "git %.3f" % replays[i + 1][ph]["cpu"]]
        rat = ratios_of[(ph, "client CPU, user+sys")] or [float("nan")]
        cpus = [r[ph]["cpu"] for r in replays]
        noisy = sbs.git_noisy(a, cpus)[0]
        lines.append("- %s, client CPU (s, in sitting order): %s; runs' ratios %s (min – median – max "
                     "%.3f – %.3f – %.3f); git between the replays around each run: %s (limit %.2f, beyond "
                     "%.2f s)%s" % (title, ", ".join(seq), ", ".join("%.3f" % x for x in rat), min(rat),
                                    statistics.median(rat), max(rat),
                                    ", ".join("×%.3f" % (max(p) / min(p)) if min(p) > 0 else "×inf"
                                              for p in zip(cpus, cpus[1:])),
                                    a.max_git_spread, sbs.GIT_SPREAD_FLOOR, ": NOISY" if noisy else ""))
    return lines


def other_work(runs, replays):
    """Every measured phase's other work, in sitting order."""
    out = []
    for i, rep in enumerate(replays):
        if i:
            out += [("gitstow %s (run %d)" % (TITLE[ph], i), runs[i - 1][ph]["other"]) for ph, _, _ in PHASES]
        out += [("git %s (replay %d)" % (TITLE[ph], i), rep[ph]["other"]) for ph, _, _ in PHASES]
    return out


def noise(a, runs, replays):
    phases = other_work(runs, replays)
    reasons = sbs.load_reasons(a, phases)
    worst = max(phases, key=lambda p: p[1]["cpus"])
    for ph, title, _ in PHASES:
        noisy, sp, pair = sbs.git_noisy(a, [r[ph]["cpu"] for r in replays])
        if noisy:
            reasons.append("git's client CPU of the %s moved by a factor %.3f between the replays around a run "
                           "(%.3f s, %.3f s; limit %.2f)" % (title, sp or 0, pair[0], pair[1], a.max_git_spread))
    busy, wall = sum(p[1]["seconds"] for p in phases), sum(p[1]["wall"] for p in phases)
    lines = ["- load average at the start: %.2f %.2f %.2f (limit on the 1-minute figure: %.2f)" % (*a.loadavg,
                                                                                                  a.max_load),
             "- other work during the measured phases (CPUs: the machine's busy time minus this bench's "
             "processes, per second): mean %.2f, max %.2f (%s); limit %.2f" % (
                 busy / wall if wall else 0, worst[1]["cpus"], worst[0], a.max_load),
             "- per phase: " + ", ".join("%s %.2f" % (n, p["cpus"]) for n, p in phases),
             "- highest 1-minute load average seen at a phase's start or end (this bench's own work "
             "included): %.2f" % max(p[1]["load"] for p in phases)]
    return reasons, lines


def run_notes(r, label):
    out = []
    for c in r["checks"]:
        out.append("%s, %s: %s" % (label, c["what"], c.get("said") or "refs identical to the upstream's"
                                   if c["ok"] else "WRONG (%s)" % c["detail"]))
    if "summary" in r.get("first", {}):
        out.append("%s, gitstow said: %s" % (label, " | ".join(r[ph]["summary"] for ph, _, _ in PHASES)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="source repository: its heads and tags become the upstream")
    ap.add_argument("--name", help="repository name upstream and in gitstow's store (default from SRC's path)")
    ap.add_argument("--runs", type=int, default=3, help="gitstow runs; git's side is replayed RUNS+1 times")
    ap.add_argument("--refspec", nargs="+", action="extend",
                    help="what of SRC becomes the upstream (default refs/heads/*:refs/heads/* "
                         "refs/tags/*:refs/tags/*); gitstow mirrors the destinations (--refs)")
    ap.add_argument("--gitstow", default=os.path.join(HERE, "..", "target", "release", "gitstow"))
    ap.add_argument("--http-backend-server",
                    default=os.path.join(HERE, "..", "..", "shared", "tools", "git-http-backend-server.py"))
    ap.add_argument("--out", help="also write the report as Markdown to this file")
    ap.add_argument("--no-fsck", dest="fsck", action="store_false", help="skip `gitstow fsck` after each run")
    ap.add_argument("--git-ref-format", default="reftable", choices=["reftable", "files"],
                    help="ref storage of the upstream and the remotes (git at its best: reftable)")
    sbs.add_sitting_args(ap, "git's client CPU of a phase moves by more than this factor between the "
                             "replays around a run")
    a = ap.parse_args()
    sbs.finish_sitting_args(ap, a)
    a.refspec = a.refspec or ["refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*"]
    a.gs_refs = [r.lstrip("+").split(":")[-1] for r in a.refspec]
    cmdline = shlex.join(["python3", *sys.argv])
    global SPAWN
    SPAWN = Spawner()
    base = tempfile.mkdtemp(prefix="mirror-side-by-side.", dir=a.workdir)
    runs, replays, report = [], [], []
    rm = lambda d: None if a.keep else subprocess.run(["rm", "-rf", d])
    try:
        floor = client(["true"], base, "floor")["peak"]
        up = upstream(a, base)
        setup = ("Upstream: %s's `%s` (%d refs, %d objects, a %s pack), served by `git http-backend` "
                 "(refs in %s). States U1, U21, U22: 1, 20 and 1 more commits of a counter file on `%s`, "
                 "pushed through http-backend. Each state repacked with bitmaps and given a commit-graph "
                 "before it is served (not counted): %s s CPU. gitstow mirrors `%s`. Clients' peak RSS cannot read below %s (`true` through the spawner: the RSS of the "
                 "process that forks them)." % (
                     a.repo, " ".join(a.refspec), up["nrefs"], up["objects"], byt(up["pack"]), a.git_ref_format,
                     up["branch"], ", ".join("U%d %.2f" % (k, up["best"][k]) for k in STATES),
                     " ".join(a.gs_refs), mib(floor)))
        sbs.log(setup)
        sbs.log("git replay 0 (before run 1) in %s" % base)
        replays.append(git_replay(a, 0, base, up))
        rm(replays[0]["dir"])
        for i in range(1, a.runs + 1):
            sbs.log("run %d/%d: gitstow, then git replay %d" % (i, a.runs, i))
            runs.append(gitstow_run(a, i, base, up))
            rm(runs[-1]["dir"])
            replays.append(git_replay(a, i, base, up))
            rm(replays[-1]["dir"])
            r = runs[-1]
            out = "### run %d: gitstow run %d against git replays %d (before) and %d (after)\n\n%s\n\n%s\n\n" \
                  "other work (CPUs): %s\n" % (
                      i, i, i - 1, i, run_table(r, replays[i - 1], replays[i]),
                      "\n".join("- " + n for n in run_notes(r, "gitstow run %d" % i) +
                                run_notes(replays[i], "git replay %d" % i)),
                      ", ".join("%s %.2f" % (n, o["cpus"]) for n, o in
                                [("gitstow " + TITLE[ph], r[ph]["other"]) for ph, _, _ in PHASES] +
                                [("git %s" % TITLE[ph], replays[i][ph]["other"]) for ph, _, _ in PHASES]))
            print(out, flush=True)
            report.append(out)
    finally:
        SPAWN.close()
        rm(base)
    reasons, load_lines = noise(a, runs, replays)
    tbl, missed, ratios_of = summarize(runs, replays, bool(reasons))
    bad = [n for i, r in enumerate(runs, 1) for n in run_notes(r, "gitstow run %d" % i) if "WRONG" in n] + \
        [n for k, r in enumerate(replays) for n in run_notes(r, "git replay %d" % k) if "WRONG" in n]
    verdict, status = sbs.verdict_of(bad, reasons, missed)
    summary = ("### summary: %d gitstow run(s) between %d git replays (git 0, gitstow 1, git 1, ...)\n\n"
               "Each run's ratio is gitstow's figure over the mean of the git replays just before and after "
               "it; the ratio of record is the median of the runs' ratios. Phases: %s.\n\n%s\n\n"
               "same-sitting control:\n\n%s\n\nload:\n\n%s\n\n%s\n\nverdict: %s\n"
               % (len(runs), len(replays), "; ".join("%s: %s" % (t, w) for _, t, w in PHASES), tbl,
                  "\n".join(control(a, runs, replays, ratios_of)), "\n".join(load_lines),
                  "- " + setup + "\n- git replay 0: " + "; ".join(n.split(", ", 1)[1] for n in
                                                                 run_notes(replays[0], "git replay 0")),
                  verdict))
    print(summary)
    if a.out:
        with open(a.out, "w") as f:
            f.write("# gitstow mirrors vs git: %s\n\n" % a.name)
            f.write("```\n%s\n```\n\n" % cmdline)
            f.write("".join("- %s\n" % m for m in sbs.machine(a) +
                            ["commit: " + sbs.git("-C", os.path.join(HERE, ".."), "rev-parse", "--short", "HEAD",
                                                  check=False).stdout.strip()]) + "\n")
            f.write("Client CPU and peak RSS: wait4(2) of the client command (its process tree; the largest "
                    "process's RSS). Server CPU: `git http-backend` and every git process it ran (RUSAGE_CHILDREN "
                    "of the CGI host), the same code for both sides. Bytes: HTTP bodies as the CGI host saw "
                    "them.\n\n%s\n\n" % setup)
            f.write("\n".join(report) + "\n" + summary)
        sbs.log("wrote " + a.out)
    sys.exit(status)


if __name__ == "__main__":
    main()
