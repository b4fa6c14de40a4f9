#!/usr/bin/env python3
"""Soak: many git clients mixing clones, incremental fetches and pushes
against one `gitstow serve` for a fixed time, while idle and trickling
connections are held open against it (issue #12). Loopback only; stdlib
only.

Each client works on one of a few repositories and pushes to a branch of
its own (`refs/heads/client-<i>`, so no push is refused as a non-fast-
forward); it fetches what the others pushed and now and then clones the
repository afresh. A holder keeps `--idle` connections that send nothing and
`--trickle` connections that send a header byte every 5 s open, opening a
new one whenever the server closes one (its header timeout), and counts the
closes. The server's resident memory (VmRSS) is sampled every second.

At the end every commit a client was told was pushed must be in its
repository, each client branch must be at the client's last pushed commit,
and `git fsck --full` of a mirror clone of each repository must be clean.

Prints a report (requests served, failures by kind, p50/p99 latency per
kind, connections held and closed by the server, RSS) in Markdown; with
`--report FILE.md`, writes it there and the RSS plot beside it
(FILE.svg). Exits 1 if a pushed commit is missing, a branch is wrong, fsck
complains, a request failed for another reason than the server saying
it is busy (a refusal the server is allowed to give under load), more
than `--max-busy-percent` of the requests were answered busy (default 5),
or fewer than `--min-served` were served (default: one git command per
client per minute of the run): a server that answers 503 to everything
after each client's first clone fails.

usage: python3 benches/soak.py [--binary target/release/gitstow]
         [--duration 600] [--clients 50] [--repos 5] [--idle 500]
         [--trickle 500] [--workdir DIR] [--report FILE.md]
         [--min-served N] [--max-busy-percent 5]
         [--serve-arg=--flag ...]
"""
import argparse
import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

GIT_ENV = dict(
    os.environ,
    GIT_TERMINAL_PROMPT="0",
    GIT_CONFIG_NOSYSTEM="1",
    GIT_AUTHOR_NAME="soak",
    GIT_AUTHOR_EMAIL="soak@example.com",
    GIT_COMMITTER_NAME="soak",
    GIT_COMMITTER_EMAIL="soak@example.com",
    HOME=tempfile.gettempdir(),
)
OP_TIMEOUT = 300  # seconds before a git command counts as hung


def git(args, cwd=None, timeout=OP_TIMEOUT, input=None):
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=GIT_ENV,
        input=input,
        capture_output=True,
        timeout=timeout,
    )


def check(args, cwd=None, input=None):
    r = git(args, cwd=cwd, input=input)
    if r.returncode != 0:
        sys.exit("git %s failed: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
    return r.stdout.decode()


def seed_repository(path, commits=60, files=40):
    """A small deterministic history (fast-import): text files edited over
    `commits` commits, a tag every 20."""
    rng = random.Random(12)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "tau"]
    contents = {"f%02d.txt" % i: [rng.choice(words) for _ in range(200)] for i in range(files)}
    out = []
    for c in range(commits):
        out.append("commit refs/heads/main\nmark :%d\n" % (c + 1))
        out.append("committer soak <soak@example.com> %d +0000\n" % (1_700_000_000 + c * 60))
        msg = "commit %d\n" % c
        out.append("data %d\n%s" % (len(msg), msg))
        if c:
            out.append("from :%d\n" % c)
        for name in rng.sample(sorted(contents), 3):
            lines = contents[name]
            lines[rng.randrange(len(lines))] = rng.choice(words) + str(c)
            data = "\n".join(lines) + "\n"
            out.append("M 100644 inline %s\ndata %d\n%s\n" % (name, len(data.encode()), data))
        if c % 20 == 19:
            out.append("tag v%d\nfrom :%d\ntagger soak <soak@example.com> %d +0000\ndata 4\ntag\n\n"
                       % (c, c + 1, 1_700_000_000 + c * 60))
    check(["init", "--quiet", "--bare", path])
    check(["fast-import", "--quiet"], cwd=path, input="".join(out).encode())


class Server:
    def __init__(self, binary, workdir, extra):
        self.log = open(os.path.join(workdir, "server.log"), "w")
        os.makedirs(os.path.join(workdir, "tmp"), exist_ok=True)
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0",
             "--store", "file://" + os.path.join(workdir, "store"), "--create-store",
             "--tmp-dir", os.path.join(workdir, "tmp"), *extra],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"(http://[\d.]+:(\d+))", line)
        if not m:
            sys.exit("the server did not say where it listens: %r (see %s)" % (line, self.log.name))
        self.url, self.port = m.group(1), int(m.group(2))
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latency = {}   # kind -> [seconds] of successes
        self.failures = {}  # (kind, why) -> count
        self.examples = {}  # (kind, why) -> first stderr line

    def ok(self, kind, seconds):
        with self.lock:
            self.latency.setdefault(kind, []).append(seconds)

    def failed(self, kind, why, example):
        with self.lock:
            self.failures[(kind, why)] = self.failures.get((kind, why), 0) + 1
            self.examples.setdefault((kind, why), example)

    def served(self):
        with self.lock:
            return sum(len(v) for v in self.latency.values())


def why_failed(stderr):
    if "server busy" in stderr or "HTTP 503" in stderr:
        return "busy"
    if "HTTP 5" in stderr:
        return "http-5xx"
    if "HTTP 4" in stderr:
        return "http-4xx"
    if re.search(r"Connection (refused|reset)|Empty reply|Failed to connect", stderr):
        return "connection"
    return "other"


def run_op(stats, kind, args, cwd):
    started = time.time()
    try:
        r = git(args, cwd=cwd)
    except subprocess.TimeoutExpired:
        stats.failed(kind, "hung", "no answer in %d s" % OP_TIMEOUT)
        return False
    took = time.time() - started
    if r.returncode == 0:
        stats.ok(kind, took)
        return True
    err = r.stderr.decode(errors="replace")
    first = next((l for l in err.splitlines() if l.strip()), "")
    stats.failed(kind, why_failed(err), first[:200])
    return False


class Client(threading.Thread):
    def __init__(self, i, url, workdir, deadline, stats, weights):
        super().__init__(daemon=True)
        self.i, self.url, self.deadline, self.stats = i, url, deadline, stats
        self.dir = os.path.join(workdir, "client-%d" % i)
        self.rng = random.Random(1000 + i)
        self.weights = weights
        self.pushed = []          # every commit the server accepted
        self.last_pushed = None   # the branch's tip as the client knows it
        self.ready = False

    def run(self):
        if not run_op(self.stats, "clone", ["clone", "--quiet", self.url, self.dir], None):
            return
        check(["checkout", "--quiet", "-b", "client-%d" % self.i], cwd=self.dir)
        self.ready = True
        n = 0
        while time.time() < self.deadline:
            op = self.rng.choices(["fetch", "push", "clone"], self.weights)[0]
            if op == "fetch":
                run_op(self.stats, "fetch", ["fetch", "--quiet", "origin"], self.dir)
            elif op == "push":
                n += 1
                name = "client-%d/f%d.txt" % (self.i, n % 7)
                os.makedirs(os.path.join(self.dir, "client-%d" % self.i), exist_ok=True)
                with open(os.path.join(self.dir, name), "a") as f:
                    f.write("%d %s\n" % (n, self.rng.random()))
                check(["add", name], cwd=self.dir)
                check(["commit", "--quiet", "-m", "client %d push %d" % (self.i, n)], cwd=self.dir)
                head = check(["rev-parse", "HEAD"], cwd=self.dir).strip()
                if run_op(self.stats, "push",
                          ["push", "--quiet", "origin", "HEAD:refs/heads/client-%d" % self.i],
                          self.dir):
                    self.pushed.append(head)
                    self.last_pushed = head
            else:
                target = tempfile.mkdtemp(dir=os.path.dirname(self.dir), prefix="clone-")
                shutil.rmtree(target)
                run_op(self.stats, "clone", ["clone", "--quiet", "--bare", self.url, target], None)
                shutil.rmtree(target, ignore_errors=True)


class Holder(threading.Thread):
    """Keeps `idle` silent and `trickle` trickling connections open."""

    HEAD = b"GET /soak-0.git/info/refs?service=git-upload-pack HTTP/1.1\r\nX-Trickle: " + b"a" * 4096

    def __init__(self, port, idle, trickle, deadline):
        super().__init__(daemon=True)
        self.port, self.deadline = port, deadline
        self.want = {"idle": idle, "trickle": trickle}
        self.socks = {"idle": [], "trickle": []}
        self.closed = {"idle": 0, "trickle": 0}
        self.open_failures = 0
        self.held = []  # (t, open idle, open trickling)

    def connect(self):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", self.port))
        except OSError:
            self.open_failures += 1
            s.close()
            return None
        s.setblocking(False)
        return [s, 0, 0.0]  # socket, bytes of HEAD sent, last send

    def alive(self, entry):
        """False once the server closed the connection or answered it (a
        408 or 503 before it closes)."""
        try:
            entry[0].recv(4096)
            return False
        except BlockingIOError:
            return True
        except OSError:
            return False

    def run(self):
        started = time.time()
        while time.time() < self.deadline:
            now = time.time()
            for kind in ("idle", "trickle"):
                keep = []
                for e in self.socks[kind]:
                    ok = self.alive(e)
                    if ok and kind == "trickle" and now - e[2] >= 5:
                        try:
                            e[0].send(self.HEAD[e[1] % len(self.HEAD):][:1])
                            e[1] += 1
                            e[2] = now
                        except OSError:
                            ok = False
                    if ok:
                        keep.append(e)
                    else:
                        self.closed[kind] += 1
                        e[0].close()
                self.socks[kind] = keep
                while len(self.socks[kind]) < self.want[kind] and time.time() < self.deadline:
                    e = self.connect()
                    if e is None:
                        break
                    e[2] = now - self.rng_offset(len(self.socks[kind]))
                    self.socks[kind].append(e)
            self.held.append((now - started, len(self.socks["idle"]), len(self.socks["trickle"])))
            time.sleep(1)
        for kind in self.socks:
            for e in self.socks[kind]:
                e[0].close()

    @staticmethod
    def rng_offset(n):
        return (n % 5)  # spread the trickling sends over the 5 s


def percentile(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def svg_plot(samples, title):
    """RSS (MiB) over time (s) as an SVG line chart."""
    w, h, left, bottom, top, right = 720, 320, 60, 40, 30, 20
    if not samples:
        return "<svg xmlns='http://www.w3.org/2000/svg'/>"
    t_max = max(t for t, _ in samples) or 1
    y_max = max(r for _, r in samples) * 1.1 or 1
    x = lambda t: left + (w - left - right) * t / t_max
    y = lambda r: h - bottom - (h - bottom - top) * r / y_max
    pts = " ".join("%.1f,%.1f" % (x(t), y(r)) for t, r in samples)
    out = ["<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif' font-size='11'>" % (w, h),
           "<rect width='100%' height='100%' fill='white'/>",
           "<text x='%d' y='18' font-size='13'>%s</text>" % (left, title),
           "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>" % (left, h - bottom, w - right, h - bottom),
           "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='black'/>" % (left, top, left, h - bottom)]
    for i in range(6):
        r = y_max * i / 5
        out.append("<text x='%d' y='%.1f' text-anchor='end'>%.0f</text>" % (left - 5, y(r) + 4, r))
        out.append("<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>" % (left, y(r), w - right, y(r)))
        t = t_max * i / 5
        out.append("<text x='%.1f' y='%d' text-anchor='middle'>%.0f</text>" % (x(t), h - bottom + 15, t))
    out.append("<text x='%d' y='%d' text-anchor='middle'>seconds</text>" % ((w + left) // 2, h - 5))
    out.append("<text x='12' y='%d' transform='rotate(-90 12 %d)' text-anchor='middle'>RSS, MiB</text>" % ((h) // 2, (h) // 2))
    out.append("<polyline fill='none' stroke='#1f77b4' stroke-width='1.5' points='%s'/>" % pts)
    out.append("</svg>")
    return "\n".join(out)


def verify(url, clients, workdir, repos):
    """Every pushed commit present, every client branch at its last push,
    fsck --full clean; returns the problems found."""
    problems = []
    for r in range(repos):
        mirror = os.path.join(workdir, "verify-%d.git" % r)
        res = git(["clone", "--quiet", "--mirror", "%s/soak-%d.git" % (url, r), mirror])
        if res.returncode != 0:
            problems.append("soak-%d: mirror clone failed: %s" % (r, res.stderr.decode(errors="replace")))
            continue
        fsck = git(["fsck", "--full", "--strict"], cwd=mirror)
        if fsck.returncode != 0 or fsck.stdout.strip() or b"error" in fsck.stderr:
            problems.append("soak-%d: fsck: %s %s" % (r, fsck.stdout.decode(), fsck.stderr.decode()))
        mine = [c for c in clients if c.i % repos == r]
        oids = [o for c in mine for o in c.pushed]
        if oids:
            res = git(["cat-file", "--batch-check"], cwd=mirror, input=("\n".join(oids) + "\n").encode())
            missing = [l for l in res.stdout.decode().splitlines() if l.endswith("missing")]
            if missing:
                problems.append("soak-%d: %d pushed commits missing, e.g. %s" % (r, len(missing), missing[0]))
        refs = dict(reversed(l.split(" ", 1)) for l in
                    check(["for-each-ref", "--format=%(objectname) %(refname)"], cwd=mirror).splitlines())
        for c in mine:
            if c.last_pushed and refs.get("refs/heads/client-%d" % c.i) != c.last_pushed:
                problems.append("soak-%d: client-%d is at %s, last pushed %s"
                                % (r, c.i, refs.get("refs/heads/client-%d" % c.i), c.last_pushed))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default="target/release/gitstow")
    ap.add_argument("--duration", type=float, default=600, help="seconds of load")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--repos", type=int, default=5)
    ap.add_argument("--idle", type=int, default=500, help="silent connections held open")
    ap.add_argument("--trickle", type=int, default=500, help="trickling connections held open")
    ap.add_argument("--weights", default="5,3,1", help="fetch,push,clone weights")
    ap.add_argument("--workdir")
    ap.add_argument("--report", help="write the report here (Markdown) and the RSS plot beside it (.svg)")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra `gitstow serve` argument")
    ap.add_argument("--min-served", type=int,
                    help="fewest git commands served for a pass (default: one per client per minute)")
    ap.add_argument("--max-busy-percent", type=float, default=5.0,
                    help="most requests answered busy, in percent of all, for a pass")
    a = ap.parse_args()
    min_served = a.min_served if a.min_served is not None else int(a.clients * a.duration / 60)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = a.idle + a.trickle + 8 * a.clients + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    workdir = a.workdir or tempfile.mkdtemp(prefix="gitstow-soak-")
    os.makedirs(workdir, exist_ok=True)
    server = Server(a.binary, workdir, a.serve_arg)
    try:
        seed = os.path.join(workdir, "seed.git")
        seed_repository(seed)
        for r in range(a.repos):
            check(["push", "--quiet", "--mirror", "%s/soak-%d.git" % (server.url, r)], cwd=seed)
        idle_rss = server.rss_kb()
        stats = Stats()
        started = time.time()
        deadline = started + a.duration
        holder = Holder(server.port, a.idle, a.trickle, deadline)
        holder.start()
        weights = [float(x) for x in a.weights.split(",")]
        clients = [Client(i, "%s/soak-%d.git" % (server.url, i % a.repos), workdir, deadline, stats, weights)
                   for i in range(a.clients)]
        for c in clients:
            c.start()
        samples = []
        while time.time() < deadline or any(c.is_alive() for c in clients):
            samples.append((time.time() - started, server.rss_kb() / 1024))
            time.sleep(1)
            if time.time() > deadline + OP_TIMEOUT + 60:
                break
        holder.join(30)
        elapsed = time.time() - started
        problems = verify(server.url, clients, workdir, a.repos)
        peak_rss = max(r for _, r in samples)
    finally:
        server.stop()

    lines = ["# Soak: %d clients for %.0f s against one `gitstow serve`" % (a.clients, a.duration), "",
             "%d repositories (a 60-commit seed each); fetch, push and clone in the ratio %s; "
             "%d silent and %d trickling connections held open. Binary: `%s`."
             % (a.repos, a.weights.replace(",", ":"), a.idle, a.trickle, a.binary), "",
             "| kind | served | p50 s | p99 s | max s |", "|---|---|---|---|---|"]
    for kind in ("fetch", "push", "clone"):
        v = stats.latency.get(kind, [])
        lines.append("| %s | %d | %.3f | %.3f | %.3f |" % (kind, len(v), percentile(v, 50), percentile(v, 99), max(v) if v else float("nan")))
    served = stats.served()
    lines += ["", "Served %d requests in %.0f s (%.1f git commands/s)." % (served, elapsed, served / elapsed), ""]
    if stats.failures:
        lines += ["| failed | why | count | first message |", "|---|---|---|---|"]
        for (kind, why), n in sorted(stats.failures.items()):
            lines.append("| %s | %s | %d | %s |" % (kind, why, n, stats.examples[(kind, why)].replace("|", "\\|")))
    else:
        lines.append("No request failed.")
    held = holder.held[len(holder.held) // 2:] or [(0, 0, 0)]
    lines += ["", "Connections held open (median over the second half): %d silent, %d trickling; "
              "closed by the server (header timeout) and opened again: %d silent, %d trickling; "
              "connections that could not be opened: %d."
              % (percentile([h[1] for h in held], 50), percentile([h[2] for h in held], 50),
                 holder.closed["idle"], holder.closed["trickle"], holder.open_failures),
              "", "RSS: %.1f MiB idle after the seed pushes, peak %.1f MiB, %.1f MiB at the end."
              % (idle_rss / 1024, peak_rss, samples[-1][1]),
              "", "Pushed commits: %d, all verified present; fsck --full clean." % sum(len(c.pushed) for c in clients)
              if not problems else "", ""]
    bad = [k for k in stats.failures if k[1] != "busy"]
    busy = sum(n for (_, why), n in stats.failures.items() if why == "busy")
    asked = served + sum(stats.failures.values())
    busy_percent = 100.0 * busy / asked if asked else 0.0
    if served < min_served:
        problems.append("served %d git commands, fewer than the %d a pass needs (--min-served)"
                        % (served, min_served))
    if busy_percent > a.max_busy_percent:
        problems.append("%.1f %% of the requests were answered busy (%d of %d), more than %.1f %% "
                        "(--max-busy-percent)" % (busy_percent, busy, asked, a.max_busy_percent))
    lines += ["Verdict: served %d (at least %d needed), busy %.1f %% (at most %.1f %%): %s."
              % (served, min_served, busy_percent, a.max_busy_percent,
                 "PASS" if not (problems or bad) else "FAIL"), ""]
    if problems:
        lines += ["PROBLEMS:"] + ["- " + p for p in problems]
    report = "\n".join(l for l in lines if l is not None)
    print(report)
    if a.report:
        with open(a.report, "w") as f:
            f.write(report + "\n\n![RSS over time](%s)\n" % os.path.basename(os.path.splitext(a.report)[0] + ".svg"))
        with open(os.path.splitext(a.report)[0] + ".svg", "w") as f:
            f.write(svg_plot(samples, "gitstow serve RSS under the soak (%d clients, %d held connections)"
                             % (a.clients, a.idle + a.trickle)))
    if problems or bad or not all(c.ready for c in clients):
        sys.exit(1)
    if not a.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
