#!/usr/bin/env python3
"""Refs at scale (issue #22): a repository of N refs, each at its own commit
of a generated linear history (`refs/changes/NN/N/1`, Gerrit's shape, and
`main` at the newest commit), served by `gitstow serve` (defaults: automatic
maintenance, file store) and by git http-backend with packed-refs and with
reftable (`git pack-refs --all`, bitmaps and a commit-graph: git at its
best), each with and without the hidden namespace (`--hide-refs
refs/changes` / `transfer.hideRefs=refs/changes`). Stdlib only; reuses the
measuring helpers of side_by_side.py.

usage: python3 benches/refs_at_scale.py [--refs 100000,1000000]
           [--gitstow target/release/gitstow] [--out FILE.md] [--workdir DIR]
           [--reuse] [--only gitstow,git packed-refs,git reftable,s3]

gitstow gets the refs as a user's server would: one push of main (the
history), then raw receive-pack requests of 90,000 ref creations each (its
per-push command limit is 100,000; git's send-pack takes minutes of client
CPU to match that many new refs), automatic maintenance left to run; the figures
are taken once its CPU settles. git's repository is a mirror of the same
source, packed as `git gc` leaves it. Per server, in this order:

- `git fetch origin main` from a clone of main that is up to date (a v2
  ls-refs with ref-prefix, nothing to send): server CPU.
- `git ls-remote` of everything (v2): server CPU.
- the push advertisement (GET info/refs?service=git-receive-pack): CPU.
- a push of one commit to main: server CPU, and bytes written to the
  store or the repository directory by it (new or changed files).
- the tombstone case: 90,000 changes deleted in one atomic push and created
  again in another (wall), then `git ls-remote` and `git fetch origin main`
  (server CPU; gitstow once its automatic maintenance settled: what a
  user meets a minute later). Not in the hidden variants.
- 16 concurrent pushers, each making 20 (4 at 1M refs, 1 at 2M and more) raw receive-pack requests of one
  ref creation (`refs/pushers/<t>/<i>`, no objects): pushes per second,
  server CPU, and refs lost (requested, answered `ok`, then not listed).
  gitstow's CPU is read once its CPU settled after the last answer (the
  maintenance passes those pushes queued have run), before the listing.
- peak RSS of the server over the phases (gitstow: VmHWM of the daemon;
  git: ru_maxrss of its largest process).

gitstow's CPU is the scheduler's runtime of the daemon in nanoseconds: the
sum over its threads of /proc/PID/task/TID/schedstat's first field, ended
threads included, read in one call as the process's CPU clock
(clock_gettime of the clock id of PID), plus the cutime+cstime of children
it reaped (ticks; it starts none). A phase's figure is taken once that CPU
moved by less than 10 ms over 2 s after the client finished, so deferred
work counts. git's is getrusage(RUSAGE_CHILDREN) of the CGI host (as in
side_by_side.py: the whole git process tree of the phase, reaped). Neither
is rounded to the 10 ms clock tick.

Every server runs in a process group of its own and is ended by group. When
a phase is cut at its cap, the receive-pack processes still at work are
found among this bench's own descendants (/proc/*/stat parent links from
this process down) and ended with their children; nothing else on the
machine is touched.

With S3_ENDPOINT, S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY and S3_BUCKET
set (`eval "$(bash scripts/s3-radosgw.sh env)"`), also a new instance's
first fetch on S3: the repository is pushed to a gitstow on the bucket
(defaults, maintenance settled), then a new instance with an empty cache
serves `git fetch origin main` (up to date) and `git ls-remote`; its store
requests and bytes read come from its /metrics.
"""
import argparse, collections, hashlib, http.client, json, os, shutil, signal, struct, subprocess, sys, tempfile
import time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import side_by_side as sbs  # noqa: E402

MiB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")


def change(n):
    return "refs/changes/%02d/%d/1" % (n % 100, n)


def make_source(path, n):
    """A bare repository of n+1 commits in a line, ref i at commit i."""
    sbs.git("init", "-q", "--bare", path)
    lines = ["blob", "mark :1", "data 2", "x", ""]
    for i in range(n + 1):
        lines += ["commit refs/heads/main", "mark :%d" % (i + 2),
                  "committer c <c@x> %d +0000" % (1_600_000_000 + i), "data %d" % len(str(i)), str(i)]
        if i == 0:
            lines.append("M 100644 :1 a")
        lines.append("")
    p = subprocess.run(["git", "-C", path, "fast-import", "--quiet", "--export-marks=" + path + "/marks"],
                       input="\n".join(lines).encode(), capture_output=True)
    if p.returncode:
        sys.exit(p.stderr.decode()[-2000:])
    marks = {}
    for line in open(path + "/marks"):
        m, oid = line.split()
        marks[int(m[1:])] = oid
    # packed-refs written whole, as `git pack-refs --all` leaves it: 2.3M
    # loose refs from update-ref and then pack-refs take over an hour of
    # disk I/O; this takes seconds.
    refs = sorted((change(i), marks[i + 2]) for i in range(1, n + 1))
    with open(os.path.join(path, "packed-refs"), "w") as f:
        f.write("# pack-refs with: peeled fully-peeled sorted \n")
        f.writelines("%s %s\n" % (oid, name) for name, oid in refs)
    sbs.git("-C", path, "pack-refs", "--all")


def dir_files(root):
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def written(before, after):
    return sum(s for p, (s, m) in after.items() if before.get(p) != (s, m))


def cpu_ns(pid):
    """CPU of process `pid` in ns: the scheduler's runtime of all its threads,
    live and ended (what /proc/PID/task/*/schedstat's first fields add up to
    for the live ones), read as the process's CPU clock, plus the
    cutime+cstime of the children it reaped (ticks)."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    children = (int(f[13]) + int(f[14])) * 1_000_000_000 // TICK
    try:
        # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), as clock_getcpuclockid(3) makes it
        return time.clock_gettime_ns(((~pid) << 3) | 2) + children
    except OSError:  # no such clock: the live threads' schedstat (ended threads are missed)
        total = 0
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                total += int(open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return total + children


SETTLE_QUIET = 2.0  # s without CPU moving ...
SETTLE_MOVED = 0.01  # ... by this many seconds or more


def settle(pid, cap=None):
    """Waits until the daemon's CPU moved by less than SETTLE_MOVED over the
    last SETTLE_QUIET seconds (polled every 0.25 s): the work queued so far,
    such as the maintenance passes of the pushes before, has run. Returns
    its CPU (ns) then (or after `cap` seconds, when given)."""
    t0 = time.monotonic()
    seen = collections.deque([(t0, cpu_ns(pid))])
    while True:
        time.sleep(0.25)
        now, cpu = time.monotonic(), cpu_ns(pid)
        seen.append((now, cpu))
        while len(seen) > 1 and seen[1][0] <= now - SETTLE_QUIET:
            seen.popleft()
        if seen[0][0] <= now - SETTLE_QUIET and cpu - seen[0][1] < SETTLE_MOVED * 1e9:
            return cpu
        if cap is not None and now - t0 > cap:
            sbs.log("warning: gitstow's CPU still moving after %d s; read as is" % cap)
            return cpu


def descendants(root):
    """The processes below `root` (pids), from the parent links of /proc/*/stat."""
    children = collections.defaultdict(list)
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children[ppid].append(int(d))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def argv(pid):
    try:
        return open("/proc/%d/cmdline" % pid, "rb").read().decode("utf-8", "replace").split("\0")
    except OSError:
        return []


def pkt(b):
    return b"%04x" % (len(b) + 4) + b


def changes_of(src):
    refs = sbs.git("-C", src, "for-each-ref", "--format=%(objectname) %(refname)", "refs/changes/").stdout.split("\n")
    return [r.split(" ") for r in refs if r]


def post_commands(url, commands, caps, timeout=3600):
    """Raw receive-pack requests of 90,000 (old, new, name) commands each
    (no objects); exits unless every command is answered ok."""
    head = b"PACK" + struct.pack(">II", 2, 0)
    empty = head + hashlib.sha1(head).digest()
    for start in range(0, len(commands), 90_000):
        lines = []
        for old, new, name in commands[start:start + 90_000]:
            line = ("%s %s %s" % (old, new, name)).encode()
            if not lines:
                line += b"\0" + caps.encode()
            lines.append(pkt(line))
        deletes_only = all(new == "0" * 40 for _, new, _ in commands[start:start + 90_000])
        status, answer = raw_post(url, b"".join(lines) + b"0000" + (b"" if deletes_only else empty), timeout)
        if status != 200 or b"unpack ok" not in answer[:40] or b"ng " in answer:
            sys.exit("raw push refused: %d %r" % (status, answer[:300]))


TOMBSTONES = 90_000


# git on reftable spent over 10 minutes of CPU on the atomic deletion of
# 90,000 refs at 100k refs (git 2.47): its phase is cut there.
RECREATE_CAP = 600


def stop_receive_packs(repo):
    """Ends git's receive-packs still running past a phase's cap (only those
    below this bench's own process: its CGI host's), with their children,
    and the locks they leave in `repo`."""
    mine = descendants(os.getpid())
    victims = set()
    for pid in mine:
        args = argv(pid)
        if "--stateless-rpc" in args and any(x.endswith("receive-pack") for x in args):
            victims.add(pid)
            victims.update(descendants(pid))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(1)
    sbs.log("ended %d receive-pack processes of this bench past the cap (and their children)" % len(victims))
    for d, _, fs in os.walk(repo):
        for f in fs:
            if f.endswith(".lock"):
                os.unlink(os.path.join(d, f))


def delete_recreate(src, url, timeout=3600):
    """Deletes the first 90,000 changes in one atomic push, then creates them
    again in another (the tombstone case); returns the wall time of both.
    Atomic: git's receive-pack otherwise deletes ref by ref, each deletion
    rewriting packed-refs (90,000 rewrites of 6 MB at 100k refs: hours)."""
    refs = changes_of(src)[:TOMBSTONES]
    zero = "0" * 40
    t = time.monotonic()
    post_commands(url, [(oid, zero, name) for oid, name in refs], "report-status delete-refs atomic", timeout)
    post_commands(url, [(zero, oid, name) for oid, name in refs], "report-status atomic",
                  max(1, timeout - (time.monotonic() - t)))
    return time.monotonic() - t


def push_refs(src, url):
    """main with the history by `git push`, then the refs by raw
    receive-pack requests of 90,000 creations each (git's send-pack spends
    minutes of client CPU matching 90,000 new refs; the server's work is
    the same)."""
    sbs.git("-C", src, "push", "-q", url, "refs/heads/main:refs/heads/main")
    post_commands(url, [("0" * 40, oid, name) for oid, name in changes_of(src)], "report-status")


def raw_post(url, body, timeout=3600):
    host, port = url.split("//")[1].split("/")[0].split(":")
    path = "/" + url.split("//")[1].split("/", 1)[1] + "/git-receive-pack"
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    c.request("POST", path, body, {"Content-Type": "application/x-git-receive-pack-request"})
    r = c.getresponse()
    return r.status, r.read()


PUSHERS = 16
# git 2.47 on reftable at 2.3M refs spent over 7 minutes of CPU on one of
# the 16 concurrent one-ref pushes: the phase is cut there (the pushes not
# answered by then count as not pushed).
PUSHERS_CAP = 600
# Pushes per pusher: 20, or 4 at 1M refs and more (git's receive-pack
# spends seconds of CPU a push there, checking connectivity against every ref).
PUSHES_EACH = 20


def pushers(url, oids):
    """16 threads, each making 20 raw pushes of one new ref; returns (wall,
    pushes answered ok, {ref: oid} of those answered ok)."""
    import threading
    head = b"PACK" + struct.pack(">II", 2, 0)
    empty = head + hashlib.sha1(head).digest()
    ok, landed = [0] * PUSHERS, {}
    t0 = time.monotonic()

    def run(t):
        for i in range(PUSHES_EACH):
            name = "refs/pushers/%d/%d" % (t, i)
            oid = oids[(t * PUSHES_EACH + i) % len(oids)]
            line = ("%s %s %s\0report-status" % ("0" * 40, oid, name)).encode()
            left = PUSHERS_CAP - (time.monotonic() - t0)
            if left <= 0:
                return
            try:
                status, answer = raw_post(url, pkt(line) + b"0000" + empty, left)
            except OSError:  # refused, reset or cut: not answered ok
                continue
            if status == 200 and (b"ok " + name.encode()) in answer:
                ok[t] += 1
                landed[name] = oid
    threads = [threading.Thread(target=run, args=(t,)) for t in range(PUSHERS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.monotonic() - t0, sum(ok), landed


def lost_refs(url, landed, repo=None):
    """How many refs answered ok are not listed: read back by `git
    ls-remote`, or from git's repository `repo` (git 2.47 on reftable with
    hideRefs leaves refs of newer tables out of its listings: not a loss)."""
    if repo:
        lines = [l.replace(" ", "\t", 1) for l in sbs.git(
            "-C", repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/pushers/").stdout.splitlines()]
    else:
        lines = sbs.git("ls-remote", url, "refs/pushers/*").stdout.splitlines()
    listed = dict((n, o) for o, n in (l.split("\t") for l in lines))
    return sum(1 for n, o in landed.items() if listed.get(n) != o)


def delete_pushers(url, repo=None):
    if repo:
        upd = sbs.git("-C", repo, "for-each-ref", "--format=delete %(refname)", "refs/pushers/").stdout
        subprocess.run(["git", "-C", repo, "update-ref", "--stdin"], input=upd.encode(), check=True)
        return
    refs = [l.split("\t") for l in sbs.git("ls-remote", url, "refs/pushers/*").stdout.splitlines()]
    if not refs:
        return
    head = b"PACK" + struct.pack(">II", 2, 0)
    lines = [pkt(("%s %s %s%s" % (o, "0" * 40, n, "\0report-status delete-refs" if i == 0 else "")).encode())
             for i, (o, n) in enumerate(refs)]
    status, answer = raw_post(url, b"".join(lines) + b"0000")
    if status != 200 or b"ng " in answer:
        sys.exit("deleting the pushers' refs failed: %d %r" % (status, answer[:300]))


def client(work, src, url):
    """A clone of main (made from the source: cheap), origin at url."""
    sbs.git("clone", "-q", "--single-branch", "--branch", "main", src, work)
    sbs.git("-C", work, "remote", "set-url", "origin", url)


def adv_fetch(url):
    with urllib.request.urlopen(url + "/info/refs?service=git-receive-pack", timeout=600) as r:
        return len(r.read())


def serve(a, store, hidden, workdir):
    args = [a.gitstow, "serve", "--listen", "127.0.0.1:0", "--store", "file://" + store, "--create-store"]
    if hidden:
        args += ["--hide-refs", "refs/changes"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(workdir + "/gs.err", "a"), text=True,
                         start_new_session=True)
    return p, p.stdout.readline().split()[-1] + "/r.git"


def stop(p):
    """Ends a server this bench started, with its process group (its own:
    start_new_session), and reaps it."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def gitstow_store(a, src, n, workdir):
    """A store holding the repository, filled by pushes (once per size)."""
    store = os.path.join(workdir, "gs-store-%d" % n)
    if os.path.exists(store):
        return store
    p, url = serve(a, store, False, workdir)
    t = time.time()
    push_refs(src, url)
    settle(p.pid)
    sbs.log("gitstow: %d refs pushed in %.0f s (maintenance settled)" % (n, time.time() - t))
    stop(p)
    return store


def gitstow_side(a, src, n, hidden, workdir):
    store = gitstow_store(a, src, n, workdir)
    p, url = serve(a, store, hidden, workdir)
    work = os.path.join(workdir, "gs-client")
    shutil.rmtree(work, ignore_errors=True)
    client(work, src, url)
    # Up to date with the server's main (an earlier variant's push moved it),
    # and the server warm, as a running one is.
    sbs.git("-C", work, "fetch", "-q", "origin", "main")
    sbs.git("-C", work, "reset", "-q", "--hard", "FETCH_HEAD")
    sbs.git("-C", work, "ls-remote", url)
    out, peaks = {}, []
    with open("/proc/%d/clear_refs" % p.pid, "w") as f:
        f.write("5")
    err = workdir + "/client.err"

    def phase(args):
        """A measured command's server CPU in seconds, once the daemon's CPU
        settled (gitstow_phase resets VmHWM first: the peak of what ran
        since the previous phase is taken before it)."""
        peaks.append(sbs.proc_status(p.pid)["VmHWM"])
        c0 = cpu_ns(p.pid)
        r = sbs.gitstow_phase(p.pid, args, err)
        c1 = settle(p.pid)
        peaks.append(r["peak"])
        return (c1 - c0) / 1e9
    settle(p.pid)
    out["fetch"] = phase(["-C", work, "fetch", "-q", "origin", "main"])
    out["ls_remote"] = phase(["-C", work, "ls-remote", url])
    c0 = cpu_ns(p.pid)
    adv_fetch(url)
    out["advertisement"] = (settle(p.pid) - c0) / 1e9
    sbs.git("-C", work, "commit", "-q", "--allow-empty", "-m", "one more")
    before = dir_files(store)
    out["push"] = phase(["-C", work, "push", "-q", "--force", "origin", "HEAD:main"])
    out["push_bytes"] = written(before, dir_files(store))
    oids = sbs.git("-C", src, "rev-list", "--max-count=%d" % (PUSHERS * PUSHES_EACH), "main").stdout.split()
    c0 = cpu_ns(p.pid)
    wall, ok, landed = pushers(url, oids)
    cpu = (settle(p.pid) - c0) / 1e9  # with the maintenance the pushes queued
    out["pushers"] = (ok / wall, cpu, lost_refs(url, landed), ok)
    delete_pushers(url)
    if not hidden:
        out["recreate"] = delete_recreate(src, url)
        settle(p.pid)
        out["ls_after"] = phase(["-C", work, "ls-remote", url])
        out["fetch_after"] = phase(["-C", work, "fetch", "-q", "origin", "main"])
    out["rss"] = max(peaks + [sbs.proc_status(p.pid)["VmHWM"]])
    stop(p)
    return out


def git_repo(src, ref_format, workdir):
    """git's repository: a mirror of the source, as `git gc` leaves it, with
    bitmaps and a commit-graph (made once per ref format)."""
    root = os.path.join(workdir, "hb")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    repo = os.path.join(root, "r.git")
    sbs.git("clone", "-q", "--mirror", "--ref-format=" + ref_format, src, repo)
    sbs.git("-C", repo, "config", "http.receivepack", "true")
    sbs.git("-C", repo, "gc", "-q")
    sbs.git("-C", repo, "repack", "-adq", "--write-bitmap-index")
    sbs.git("-C", repo, "commit-graph", "write", "--reachable")
    return root, repo


def git_side(a, src, root, repo, hidden, workdir):
    if hidden:
        sbs.git("-C", repo, "config", "transfer.hideRefs", "refs/changes")
    else:
        sbs.git("-C", repo, "config", "--unset-all", "transfer.hideRefs", check=False)
    # Refs as `git gc` leaves them, after the other variant's push (git
    # 2.47 on reftable with hideRefs set after that push refused the push
    # below: "cannot lock ref 'refs/heads/main': reference already exists").
    sbs.git("-C", repo, "pack-refs", "--all")
    work = os.path.join(workdir, "hb-client")
    shutil.rmtree(work, ignore_errors=True)
    client(work, src, "http://127.0.0.1:1/r.git")
    out, err = {}, workdir + "/client.err"

    def phase(tag, args_for, run=None):
        return sbs.http_backend_phase(a.http_backend_server, root, args_for, workdir, tag, run)

    def set_origin(u):
        sbs.git("-C", work, "remote", "set-url", "origin", u + "/r.git")

    r = phase("fetch", lambda u: (set_origin(u), ["-C", work, "fetch", "-q", "origin", "main"])[1])
    out["fetch"], rss = r["cpu"], r["peak"]
    r = phase("ls", lambda u: ["-C", work, "ls-remote", u + "/r.git"])
    out["ls_remote"], rss = r["cpu"], max(rss, r["peak"])
    # The push advertisement is part of git's push below (a GET by hand
    # would mix the CGI host's CPU in).
    out["advertisement"] = None
    sbs.git("-C", work, "commit", "-q", "--allow-empty", "-m", "one more")
    before = dir_files(repo)
    r = phase("push", lambda u: (set_origin(u), ["-C", work, "push", "-q", "--force", "origin", "HEAD:main"])[1])
    out["push"], rss = r["cpu"], max(rss, r["peak"])
    out["push_bytes"] = written(before, dir_files(repo))
    oids = sbs.git("-C", src, "rev-list", "--max-count=%d" % (PUSHERS * PUSHES_EACH), "main").stdout.split()
    res = {}

    def run(u):
        wall, ok, landed = pushers(u + "/r.git", oids)
        if wall >= PUSHERS_CAP:  # cut: git's receive-packs are still at it
            stop_receive_packs(repo)
        res["r"] = wall, ok, lost_refs(u + "/r.git", landed, repo)
        delete_pushers(u + "/r.git", repo)
        return wall
    r = phase("pushers", None, run)
    wall, ok, lost = res["r"]
    out["pushers"] = (ok / wall, r["cpu"], lost, ok, wall >= PUSHERS_CAP)
    rss = max(rss, r["peak"])
    if not hidden:
        def recreate(u):
            try:
                return delete_recreate(src, u + "/r.git", RECREATE_CAP)
            except OSError:  # the cap: git's receive-pack is still at it
                stop_receive_packs(repo)
                return None
        r = phase("recreate", None, recreate)
        out["recreate"], rss = r["wall"], max(rss, r["peak"])
        if out["recreate"] is None:
            out["recreate"] = "> %d s (cut)" % RECREATE_CAP
            out["ls_after"] = out["fetch_after"] = "n/a"
        else:
            r = phase("ls-after", lambda u: ["-C", work, "ls-remote", u + "/r.git"])
            out["ls_after"], rss = r["cpu"], max(rss, r["peak"])
            r = phase("fetch-after", lambda u: (set_origin(u), ["-C", work, "fetch", "-q", "origin", "main"])[1])
            out["fetch_after"], rss = r["cpu"], max(rss, r["peak"])
    out["rss"] = rss
    return out


def s3_args():
    e = os.environ
    if not e.get("S3_ENDPOINT"):
        return None
    return ["--s3-endpoint", e["S3_ENDPOINT"], "--s3-region", e.get("S3_REGION", "us-east-1"),
            "--s3-access-key", e["S3_ACCESS_KEY"], "--s3-secret-key", e["S3_SECRET_KEY"], "--s3-path-style"]


def metrics(url):
    base = url.rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/metrics", timeout=60) as r:
        text = r.read().decode()
    reqs = read = 0
    for line in text.splitlines():
        if line.startswith("gitstow_store_requests_total{") and 'outcome="sent"' in line:
            reqs += float(line.split()[-1])
        if line.startswith("gitstow_store_bytes_total{") and 'direction="read"' in line:
            read += float(line.split()[-1])
    return int(reqs), int(read)


def s3_first_fetch(a, src, n, workdir):
    """A new instance's first `git fetch origin main` and `git ls-remote` on
    S3: store requests and bytes read, from its /metrics."""
    extra = s3_args()
    store = "s3://%s/refs-at-scale-%d-%d" % (os.environ["S3_BUCKET"], n, int(time.time()))

    def start(cache):
        args = [a.gitstow, "serve", "--listen", "127.0.0.1:0", "--store", store, "--cache-dir", cache] + extra
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(workdir + "/gs-s3.err", "a"), text=True,
                             start_new_session=True)
        return p, p.stdout.readline().split()[-1] + "/r.git"
    p, url = start(os.path.join(workdir, "s3-cache-fill"))
    t = time.time()
    push_refs(src, url)
    settle(p.pid)
    sbs.log("gitstow on S3: %d refs pushed in %.0f s (maintenance settled)" % (n, time.time() - t))
    stop(p)
    work = os.path.join(workdir, "gs-s3-client")
    shutil.rmtree(work, ignore_errors=True)
    client(work, src, url)
    out = {}
    for phase, args in (("fetch", ["fetch", "-q", "origin", "main"]), ("ls_remote", ["ls-remote", "origin"])):
        cache = os.path.join(workdir, "s3-cache-" + phase)
        shutil.rmtree(cache, ignore_errors=True)
        p, url = start(cache)
        sbs.git("-C", work, "remote", "set-url", "origin", url)
        base = metrics(url)
        t0 = time.monotonic()
        sbs.git("-C", work, *args)
        wall = time.monotonic() - t0
        now = metrics(url)
        out[phase] = (now[0] - base[0], now[1] - base[1], wall)
        stop(p)
    return out


def fmt(v, unit):
    if v is None:
        return "–"
    if isinstance(v, str) and v != "n/a":
        return v
    if unit == "pushers":
        rate, cpu, lost, ok = v[:4]
        cut = ", cut at %d s" % PUSHERS_CAP if len(v) > 4 and v[4] else ""
        return "%.1f/s, %.2f s CPU, %d of %d lost%s" % (rate, cpu, lost, ok, cut)
    if v == "n/a":
        return "–"
    if unit == "s":
        return "%.3f s" % v
    if unit == "B":
        return "%d B" % v if v < 10_000 else "%.0f kB" % (v / 1e3) if v < 1e6 else "%.1f MB" % (v / 1e6)
    return "%.0f MB" % (v / MiB)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--refs", default="100000")
    ap.add_argument("--gitstow", default="target/release/gitstow")
    ap.add_argument("--http-backend-server", default=os.path.join(HERE, "../../shared/tools/git-http-backend-server.py"))
    ap.add_argument("--workdir")
    ap.add_argument("--out")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the columns measured by an earlier run in WORKDIR (results-N.json)")
    ap.add_argument("--only", default="gitstow,git packed-refs,git reftable,s3",
                    help="the column groups to measure (comma-separated: gitstow, git packed-refs, git reftable, s3); "
                         "the others are left out or, with --reuse, taken from results-N.json")
    a = ap.parse_args()
    only = set(x.strip() for x in a.only.split(","))
    a.gitstow = os.path.abspath(a.gitstow)
    a.http_backend_server = os.path.abspath(a.http_backend_server)
    workdir = a.workdir or tempfile.mkdtemp(prefix="refs-at-scale-")
    report = ["# Refs at scale: gitstow beside git http-backend", "",
              "`python3 benches/refs_at_scale.py --refs %s` (one run each, 2-core machine, %s)" %
              (a.refs, sbs.git("--version").stdout.strip()), ""]
    global PUSHES_EACH
    for n in [int(x) for x in a.refs.split(",")]:
        # git's pushes cost ~9 s of CPU each at 1M refs (a connectivity
        # check over every ref): 4 each at 1M, 1 each above 2M.
        PUSHES_EACH = 20 if n < 1_000_000 else 4 if n < 2_000_000 else 1
        src = os.path.join(workdir, "src-%d.git" % n)
        if not os.path.exists(src):
            t = time.time()
            make_source(src, n)
            sbs.log("source of %d refs made in %.0f s" % (n, time.time() - t))
        saved = os.path.join(workdir, "results-%d.json" % n)
        cols = json.load(open(saved)) if a.reuse and os.path.exists(saved) else {}

        def keep(name, measure):
            if name not in cols:
                cols[name] = measure()
                json.dump(cols, open(saved, "w"))
        for hidden in (False, True):
            tag = " hidden" if hidden else ""
            if "gitstow" in only:
                keep("gitstow" + tag, lambda: gitstow_side(a, src, n, hidden, workdir))
        for rf in ("files", "reftable"):
            name = "git %s" % ("packed-refs" if rf == "files" else rf)
            if name not in only or (name in cols and name + " hidden" in cols):
                continue
            root, repo = git_repo(src, rf, workdir)
            for hidden in (False, True):
                tag = " hidden" if hidden else ""
                keep(name + tag, lambda: git_side(a, src, root, repo, hidden, workdir))
            sbs.log("%d refs, git %s done" % (n, rf))
        order = [c for c in ["gitstow", "git packed-refs", "git reftable"] if c in cols]
        names = [c + t for t in ("", " hidden") for c in order if c + t in cols]
        report += ["## %d refs" % n, "", "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for key, label, unit in [("fetch", "`git fetch origin main`, server CPU", "s"),
                                 ("ls_remote", "`git ls-remote`, server CPU", "s"),
                                 ("advertisement", "push advertisement (GET), server CPU", "s"),
                                 ("push", "push of one commit, server CPU", "s"),
                                 ("push_bytes", "bytes written by that push", "B"),
                                 ("pushers", "16 concurrent pushers × %d one-ref pushes" % PUSHES_EACH, "pushers"),
                                 ("recreate", "delete 90,000 changes, then create them again (two pushes), wall", "s"),
                                 ("ls_after", "`git ls-remote` after that, server CPU", "s"),
                                 ("fetch_after", "`git fetch origin main` after that, server CPU", "s"),
                                 ("rss", "peak RSS", "M")]:
            report.append("| %s | " % label + " | ".join(fmt(cols[c].get(key, "n/a"), unit) for c in names) + " |")
        report.append("")
        if s3_args() and ("s3" in only or "s3" in cols):
            keep("s3", lambda: s3_first_fetch(a, src, n, workdir))
            s3 = cols["s3"]
            report += ["A new instance on S3 (Ceph RGW on loopback), empty cache, one command:", "",
                       "| | store requests | bytes read | wall |", "|---|---|---|---|"]
            for key, label in (("fetch", "`git fetch origin main` (up to date)"), ("ls_remote", "`git ls-remote`")):
                reqs, read, wall = s3[key]
                report.append("| %s | %d | %s | %.2f s |" % (label, reqs, fmt(read, "B"), wall))
            report.append("")
    text = "\n".join(report) + "\n"
    print(text)
    if a.out:
        open(a.out, "w").write(text)


if __name__ == "__main__":
    main()
