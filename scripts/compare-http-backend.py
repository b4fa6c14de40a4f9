#!/usr/bin/env python3
"""Run the same git scenarios against canonical `git http-backend` and against
`gitstow serve`, and print a markdown table of what each did.

usage: scripts/compare-http-backend.py [--out FILE] [--gitstow BIN] [--keep]

Starts `target/release/gitstow serve --listen 127.0.0.1:0 --store file://TMP`
(built first with `cargo build --release -p gitstow` under `flock
/tmp/cargo.lock` if missing) and `python3
/work/shared/tools/git-http-backend-server.py TMP2 PORT` (a free port in
28300-28399). The http-backend server runs with a HOME whose gitconfig sets
`uploadpack.allowFilter` and `uploadpack.allowAnySHA1InWant` (what gitstow
does unconditionally); everything else is git's default.

Each scenario prints a short line per server (exit code and the relevant
stderr line, or the HTTP status line and the first response line). Ports,
temporary paths and object ids are normalised: ids of the test history are
shown by name (c1..c5, f1, tag:v1, blob:...), others as <oid>. Timings are
shown in brackets and not compared. python3 stdlib only.
"""
import argparse
import base64
import datetime
import gzip
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKEND = "/work/shared/tools/git-http-backend-server.py"
TIMEOUT = 300
ZERO = "0" * 40

# ---------------------------------------------------------------------------
# processes


def git_env(home, extra=None):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        "LANG": "C",
        "GIT_AUTHOR_NAME": "A U Thor",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "C O Mitter",
        "GIT_COMMITTER_EMAIL": "committer@example.com",
    }
    if extra:
        env.update(extra)
    return env


def write_gitconfig(home, extra=""):
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, ".gitconfig"), "w") as f:
        f.write(
            "[user]\n\tname = A U Thor\n\temail = author@example.com\n"
            "[init]\n\tdefaultBranch = main\n"
            "[advice]\n\tdetachedHead = false\n\tpushUpdateRejected = false\n"
            "[gc]\n\tauto = 0\n"
            "[protocol]\n\tversion = 2\n" + extra
        )


class Ctx:
    """What a scenario needs: the server URL, a scratch dir, git."""

    def __init__(self, name, url, work, home, names):
        self.name = name
        self.url = url
        self.work = work
        self.home = home
        self.names = names  # oid -> display name

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def git(self, *args, cwd=None, env=None, input=None):
        start = time.monotonic()
        try:
            p = subprocess.run(
                ["git", *args],
                cwd=cwd or self.work,
                env=git_env(self.home, env),
                input=input,
                capture_output=True,
                timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return Result(124, "", "timeout", TIMEOUT)
        return Result(
            p.returncode,
            p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"),
            time.monotonic() - start,
        )

    def out(self, *args, cwd=None):
        r = self.git(*args, cwd=cwd)
        return r.stdout.strip() if r.rc == 0 else f"<{args[0]} failed: {r.rc}>"


class Result:
    def __init__(self, rc, stdout, stderr, secs):
        self.rc, self.stdout, self.stderr, self.secs = rc, stdout, stderr, secs


NOISE = re.compile(
    r"^(Cloning into|remote: (Enumerating|Counting|Compressing|Total|Resolving|Processed)|"
    r"Receiving objects|Resolving deltas|Counting objects|Compressing objects|Writing objects|"
    r"Delta compression|Total \d|Enumerating objects|Unpacking objects|Updating files|To http|"
    r"From http|POST git-|Checking connectivity|Checking objects|Updating [0-9a-f]+\.\.|"
    r"Fast-forward|Switched to|Already on|Your branch|HEAD is now|remote: *$)"
)


KEY = re.compile(r"(->|\[rejected\]|\[remote rejected\]|^fatal:|^error:|^warning:)")


def relevant(text, limit=3):
    """Key lines (ref updates, fatal/error) first, then what the remote said."""
    key, remote, other = [], [], []
    for line in text.replace("\r", "\n").splitlines():
        line = line.strip()
        if not line or NOISE.match(line):
            continue
        line = re.sub(r"\s+", " ", line)
        bucket = remote if line.startswith("remote:") else key if KEY.search(line) else other
        if line not in bucket:
            bucket.append(line)
    lines = key + other
    shown = lines[:limit]
    if len(lines) > limit:
        shown.append(f"(+{len(lines) - limit} lines)")
    if remote:
        more = f" (+{len(remote) - 1} remote lines)" if len(remote) > 1 else ""
        shown.append(remote[0] + more)
    return " / ".join(shown)


def summary(r, extra=""):
    s = f"exit={r.rc}"
    rel = relevant(r.stderr)
    if rel:
        s += f"; {rel}"
    if extra:
        s += f"; {extra}"
    return s


def free_port():
    for port in range(28300, 28400):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise SystemExit("no free port in 28300-28399")


class Server:
    def __init__(self, label, argv, env, url_from):
        self.label = label
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.url = url_from(self)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_gitstow(binary, store, extra=()):
    def url(srv):
        line = srv.proc.stdout.readline().strip()
        m = re.match(r"gitstow listening on (http://\S+)", line)
        if not m:
            srv.stop()
            raise SystemExit(f"unexpected first line from gitstow: {line!r}")
        return m.group(1)

    env = dict(os.environ)
    env.pop("GITSTOW_LOG", None)
    return Server(
        "gitstow",
        [binary, "serve", "--listen", "127.0.0.1:0", "--store", f"file://{store}", "--create-store", *extra],
        env,
        url,
    )


def start_backend(root, home, script=BACKEND, env=None):
    port = free_port()

    def url(srv):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return f"http://127.0.0.1:{port}"
            except OSError:
                if srv.proc.poll() is not None:
                    raise SystemExit("git-http-backend-server.py exited")
                time.sleep(0.1)
        srv.stop()
        raise SystemExit("git-http-backend-server.py did not start")

    return Server(
        "git http-backend",
        [sys.executable, script, root, str(port)],
        git_env(home, env),
        url,
    )


# ---------------------------------------------------------------------------
# the test history (deterministic: same ids for both servers)


def build_source(src, home):
    def g(*args, date=None, input=None):
        env = git_env(home)
        if date:
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
        p = subprocess.run(["git", *args], cwd=src, env=env, input=input, capture_output=True)
        if p.returncode:
            raise SystemExit(f"git {args}: {p.stderr.decode()}")
        return p.stdout.decode().strip()

    def write(path, data):
        full = os.path.join(src, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)

    def commit(msg, day):
        g("add", "-A")
        g("commit", "-q", "-m", msg, date=f"2020-01-0{day}T12:00:00+0000")

    os.makedirs(src)
    g("init", "-q", "-b", "main")
    big1 = bytes((i * 7 + 3) % 251 for i in range(2048))
    big2 = bytes((i * 13 + 5) % 241 for i in range(2048))
    write("a.txt", b"one\n")
    write("dir/b.txt", b"b1\n")
    write("big.bin", big1)
    commit("c1", 1)
    write("a.txt", b"two\n")
    commit("c2", 2)
    g("tag", "-a", "-m", "v1", "v1", date="2020-01-02T12:00:00+0000")
    write("dir/b.txt", b"b3\n")
    commit("c3", 3)
    g("tag", "light")
    write("big.bin", big2)
    commit("c4", 4)
    write("a.txt", b"five\n")
    commit("c5", 5)
    g("checkout", "-q", "-b", "feature", "HEAD~2")
    write("f.txt", b"feature\n")
    commit("f1", 6)
    g("tag", "-a", "-m", "ftag", "ftag", date="2020-01-06T12:00:00+0000")
    g("checkout", "-q", "main")
    g("branch", "rewind", "main~1")
    names = {}
    for line in g("log", "--all", "--format=%H %s").splitlines():
        oid, subject = line.split(" ", 1)
        names[oid] = subject
    for tag in ("v1", "ftag"):
        names[g("rev-parse", tag)] = f"tag:{tag}"
    for line in g("rev-list", "--objects", "--all").splitlines():
        parts = line.split(" ", 1)
        if parts[0] not in names:
            names[parts[0]] = f"obj:{parts[1]}" if len(parts) > 1 and parts[1] else "obj:root-tree"
    # 20,000 refs, all at c1, for the many-refs push
    c1 = g("rev-parse", "main~4")
    g("update-ref", "--stdin", input="".join(
        f"create refs/many/r{i:05d} {c1}\n" for i in range(20000)).encode())
    return names


# ---------------------------------------------------------------------------
# raw HTTP


def pkt_lines(body, limit=4):
    """Data pkt-lines of body as text ('0000' for a flush); side-band 1 is
    shown as 'PACK on band 1' once, band-2 progress is dropped. None if body
    is not a pkt-line stream."""
    out, i, packed = [], 0, False
    while i + 4 <= len(body) and len(out) < limit:
        try:
            n = int(body[i:i + 4], 16)
        except ValueError:
            return None
        if n == 0:
            out.append("0000")
            i += 4
            continue
        if n < 4 or i + n > len(body):
            return None
        data = body[i + 4:i + n]
        i += n
        band = data[0] if data[:1] in (b"\x01", b"\x02", b"\x03") else None
        if band == 2:
            continue
        if band == 1:
            inner = pkt_lines(data[1:], limit)
            if inner is not None and not data[1:].startswith(b"PACK"):
                out.extend(inner)
            elif not packed:
                out.append("PACK on band 1")
                packed = True
            continue
        if band == 3:
            data = b"band 3: " + data[1:]
        out.append(data.decode("utf-8", "replace").rstrip("\n"))
    return out


def body_summary(body):
    """(compared, shown-only): pkt-line content is compared, error text is not."""
    if not body:
        return "", "empty body"
    lines = pkt_lines(body)
    if lines:
        return "; " + " | ".join(x[:70] for x in lines), ""
    text = body[:90].decode("utf-8", "replace").strip().replace("\n", " ")
    return "", f"body {text!r}"


def raw(url, method, path, headers=None, body=b"", expect_continue=False):
    host, port = url.split("//")[1].split(":")
    port = int(port)
    headers = dict(headers or {})
    headers.setdefault("Host", f"{host}:{port}")
    headers["Connection"] = "close"
    if method == "POST":
        headers["Content-Length"] = str(len(body))
    if expect_continue:
        headers["Expect"] = "100-continue"
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    interim = None
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(head.encode())
        if expect_continue:
            s.settimeout(2)
            try:
                first = s.recv(65536)
            except socket.timeout:
                first = b""
            s.settimeout(30)
            if first.startswith(b"HTTP/1.1 100"):
                interim = "100 Continue"
                first = first.split(b"\r\n\r\n", 1)[1]
            elif first:
                interim = "final answer before the body"
            else:
                interim = "no 100 Continue (waited 2 s)"
            pending = first
        else:
            pending = b""
        if body and interim != "final answer before the body":
            try:
                s.sendall(body)
            except OSError:
                pass
        chunks = [pending]
        while True:
            try:
                c = s.recv(65536)
            except socket.timeout:
                break
            if not c:
                break
            chunks.append(c)
    resp = b"".join(chunks)
    head, _, payload = resp.partition(b"\r\n\r\n")
    lines = head.decode("latin1").split("\r\n")
    status = lines[0]
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        payload = dechunk(payload)
    status = " ".join(status.split(" ")[1:])
    return status, hdrs, payload, interim


def dechunk(data):
    out, i = bytearray(), 0
    while True:
        j = data.find(b"\r\n", i)
        if j < 0:
            return bytes(out)
        n = int(data[i:j].split(b";")[0] or b"0", 16)
        if n == 0:
            return bytes(out)
        out += data[j + 2:j + 2 + n]
        i = j + 2 + n + 2


def http_summary(resp, extra=""):
    status, hdrs, payload, interim = resp
    s = f"HTTP {status}"
    if interim:
        s = f"{interim}, then {s}"
    compared, shown = body_summary(payload)
    s = f"{s}{compared}{extra}"
    return (s, shown) if shown else s


def pkt(text):
    data = text.encode() if isinstance(text, str) else text
    return b"%04x" % (len(data) + 4) + data


# ---------------------------------------------------------------------------
# scenarios

SCENARIOS = []


def scenario(title):
    def register(f):
        SCENARIOS.append((title, f))
        return f
    return register


def count(ctx, repo, *rev):
    return ctx.out("rev-list", "--count", *rev, cwd=repo)


def missing(ctx, repo):
    r = ctx.git("rev-list", "--objects", "--all", "--missing=print", cwd=repo)
    return sum(1 for line in r.stdout.splitlines() if line.startswith("?"))


@scenario("push to a new repository (main, feature, 3 tags)")
def push_new(ctx):
    r = ctx.git("push", f"{ctx.url}/base.git", "main", "feature", "v1", "light", "ftag",
                cwd=ctx.src)
    ls = ctx.git("ls-remote", "--symref", f"{ctx.url}/base.git", "HEAD")
    head = ls.stdout.split("\n")[0].split("\t")[0] if ls.rc == 0 else "?"
    return summary(r, f"HEAD -> {head}")


def clone_check(ctx, dst, r):
    if r.rc:
        return summary(r)
    head = ctx.out("rev-parse", "HEAD", cwd=dst)
    branch = ctx.out("symbolic-ref", "--short", "HEAD", cwd=dst)
    refs = len(ctx.out("for-each-ref", cwd=dst).splitlines())
    fsck = ctx.git("fsck", "--no-progress", cwd=dst)
    return summary(r, f"HEAD={head} on {branch}; {refs} refs; fsck exit={fsck.rc}")


@scenario("clone, protocol v0")
def clone_v0(ctx):
    dst = ctx.path("clone-v0")
    return clone_check(ctx, dst, ctx.git("-c", "protocol.version=0", "clone",
                                         f"{ctx.url}/base.git", dst))


@scenario("clone, protocol v2")
def clone_v2(ctx):
    dst = ctx.path("clone-v2")
    return clone_check(ctx, dst, ctx.git("-c", "protocol.version=2", "clone",
                                         f"{ctx.url}/base.git", dst))


@scenario("shallow clone --depth 1")
def shallow(ctx):
    dst = ctx.path("shallow")
    r = ctx.git("clone", "--depth", "1", f"{ctx.url}/base.git", dst)
    return summary(r, f"commits={count(ctx, dst, 'HEAD')}")


@scenario("fetch --deepen=2 (in the depth-1 clone)")
def deepen(ctx):
    dst = ctx.path("shallow")
    r = ctx.git("fetch", "--deepen=2", cwd=dst)
    return summary(r, f"commits={count(ctx, dst, 'origin/main')}")


@scenario("clone --shallow-since=2020-01-03 (c3..c5)")
def shallow_since(ctx):
    dst = ctx.path("since")
    r = ctx.git("clone", "--single-branch", "--shallow-since=2020-01-03T00:00:00+0000",
                f"{ctx.url}/base.git", dst)
    return summary(r, f"commits={count(ctx, dst, 'HEAD')}")


@scenario("clone --shallow-exclude=v1")
def shallow_exclude(ctx):
    dst = ctx.path("exclude")
    r = ctx.git("clone", "--single-branch", "--shallow-exclude=v1", f"{ctx.url}/base.git", dst)
    return summary(r, f"commits={count(ctx, dst, 'HEAD')}")


@scenario("fetch --unshallow (in the depth-1 clone)")
def unshallow(ctx):
    dst = ctx.path("shallow")
    r = ctx.git("fetch", "--unshallow", cwd=dst)
    shallow_file = os.path.exists(os.path.join(dst, ".git", "shallow"))
    return summary(r, f"commits={count(ctx, dst, 'origin/main')}; .git/shallow "
                      f"{'present' if shallow_file else 'gone'}")


def partial(ctx, spec):
    dst = ctx.path("partial-" + re.sub(r"\W", "_", spec))
    r = ctx.git("clone", "--no-checkout", f"--filter={spec}", f"{ctx.url}/base.git", dst)
    if r.rc:
        return summary(r)
    before = missing(ctx, dst)
    co = ctx.git("checkout", "-q", "main", cwd=dst)
    feat = ctx.git("checkout", "-q", "feature", cwd=dst)
    after = missing(ctx, dst)
    fsck = ctx.git("fsck", "--no-progress", cwd=dst)
    return summary(r, f"missing after clone={before}; checkout main exit={co.rc}, feature "
                      f"exit={feat.rc} {relevant(co.stderr + feat.stderr, 1)}; missing after={after}; "
                      f"fsck exit={fsck.rc}")


@scenario("partial clone --filter=blob:none, then checkout")
def blob_none(ctx):
    return partial(ctx, "blob:none")


@scenario("partial clone --filter=blob:limit=1k, then checkout")
def blob_limit(ctx):
    return partial(ctx, "blob:limit=1k")


@scenario("partial clone --filter=tree:0, then checkout")
def tree0(ctx):
    return partial(ctx, "tree:0")


@scenario("tag auto-follow (fetch main only: v1, light follow; ftag does not)")
def autofollow(ctx):
    dst = ctx.path("follow")
    ctx.git("init", "-q", dst)
    ctx.git("remote", "add", "-t", "main", "origin", f"{ctx.url}/base.git", cwd=dst)
    r = ctx.git("fetch", "origin", cwd=dst)
    tags = ctx.out("tag", "-l", cwd=dst).replace("\n", ",")
    return summary(r, f"tags=[{tags}]")


@scenario("ls-remote --heads (v2 ref-prefix) and a pattern")
def ls_remote(ctx):
    r = ctx.git("ls-remote", "--heads", f"{ctx.url}/base.git")
    heads = ",".join(line.split("\t")[1] for line in r.stdout.splitlines())
    r2 = ctx.git("ls-remote", f"{ctx.url}/base.git", "v1")
    v1 = ",".join(f"{line.split(chr(9))[1]}={line.split(chr(9))[0]}" for line in r2.stdout.splitlines())
    return f"exit={r.rc}; heads=[{heads}]; exit={r2.rc}; v1 pattern=[{v1}]"


@scenario("non-fast-forward push (client-side reject)")
def non_ff(ctx):
    ctx.git("push", "-q", f"{ctx.url}/ff.git", "main", cwd=ctx.src)
    r = ctx.git("push", f"{ctx.url}/ff.git", "rewind:main", cwd=ctx.src)
    return summary(r)


@scenario("force push (rewind main by one commit)")
def force(ctx):
    r = ctx.git("push", "--force", f"{ctx.url}/ff.git", "rewind:main", cwd=ctx.src)
    return summary(r, "main=" + ctx.out("ls-remote", f"{ctx.url}/ff.git", "refs/heads/main")
                   .split("\t")[0])


@scenario("delete a branch")
def delete_branch(ctx):
    ctx.git("push", "-q", f"{ctx.url}/del.git", "main", "feature", cwd=ctx.src)
    r = ctx.git("push", f"{ctx.url}/del.git", "--delete", "feature", cwd=ctx.src)
    return summary(r)


@scenario("delete the current branch (HEAD -> main)")
def delete_current(ctx):
    r = ctx.git("push", f"{ctx.url}/del.git", "--delete", "main", cwd=ctx.src)
    ls = ctx.git("ls-remote", "--symref", f"{ctx.url}/del.git")
    return summary(r, f"then ls-remote exit={ls.rc}: {len(ls.stdout.splitlines())} lines")


@scenario("push --force-with-lease with a stale expectation")
def lease(ctx):
    url = f"{ctx.url}/lease.git"
    ctx.git("push", "-q", url, "rewind:main", cwd=ctx.src)
    a = ctx.path("lease-a")
    ctx.git("clone", "-q", url, a)
    ctx.git("push", "-q", url, "main:main", cwd=ctx.src)  # someone else moves main
    ctx.git("commit", "-q", "--allow-empty", "-m", "mine", cwd=a,
            env={"GIT_AUTHOR_DATE": "2020-02-01T00:00:00+0000",
                 "GIT_COMMITTER_DATE": "2020-02-01T00:00:00+0000"})
    r = ctx.git("push", "--force-with-lease", "origin", "main", cwd=a)
    return summary(r)


@scenario("push --atomic: a good branch and a blob to refs/heads/bad")
def atomic(ctx):
    url = f"{ctx.url}/atomic.git"
    ctx.git("push", "-q", url, "main", cwd=ctx.src)
    blob = ctx.out("rev-parse", "main:a.txt", cwd=ctx.src)
    r = ctx.git("push", "--atomic", url, "feature:refs/heads/good", f"{blob}:refs/heads/bad",
                cwd=ctx.src)
    refs = ctx.out("ls-remote", url).count("\n") + 1
    return summary(r, f"refs now={refs}")


@scenario("push options (-o ci.skip -o 'note=a b')")
def push_options(ctx):
    r = ctx.git("push", "-o", "ci.skip", "-o", "note=a b", f"{ctx.url}/base.git",
                "main:refs/heads/opts", cwd=ctx.src)
    return summary(r)


@scenario("push a blob to a branch")
def blob_branch(ctx):
    blob = ctx.out("rev-parse", "main:a.txt", cwd=ctx.src)
    r = ctx.git("push", f"{ctx.url}/base.git", f"{blob}:refs/heads/blobby", cwd=ctx.src)
    return summary(r)


@scenario("fetch of a missing object id (v2)")
def fetch_missing(ctx):
    dst = ctx.path("clone-v2")
    r = ctx.git("fetch", "origin", "0123456789abcdef0123456789abcdef01234567", cwd=dst)
    return summary(r)


@scenario("fetch of a missing object id (v0)")
def fetch_missing_v0(ctx):
    dst = ctx.path("clone-v2")
    r = ctx.git("-c", "protocol.version=0", "fetch", "origin",
                "0123456789abcdef0123456789abcdef01234567", cwd=dst)
    return summary(r)


@scenario("20,000 refs in one push (one POST of 20,000 create commands + pack), then ls-remote")
def many_refs(ctx):
    # `git push` of 20,000 refspecs spends minutes in the client's own
    # send-pack (quadratic refspec matching; ~170 s here, the same for both
    # servers), so the request is sent directly and only the server is timed.
    c1 = ctx.out("rev-parse", "main~4", cwd=ctx.src)
    pack = subprocess.run(["git", "pack-objects", "--revs", "--stdout", "-q"], cwd=ctx.src,
                          env=git_env(ctx.home), input=f"{c1}\n".encode(),
                          capture_output=True).stdout
    lines = [pkt(f"{ZERO} {c1} refs/heads/many/r{i:05d}"
                 + ("\0 report-status agent=compare" if i == 0 else "")) for i in range(20000)]
    body = b"".join(lines) + b"0000" + pack
    start = time.monotonic()
    status, _, payload, _ = raw(ctx.url, "POST", "/many.git/git-receive-pack",
                                {"Content-Type": "application/x-git-receive-pack-request"}, body)
    secs = time.monotonic() - start
    report = pkt_lines(payload, 30000) or []
    oks = sum(1 for x in report if x.startswith("ok "))
    ng = [x for x in report if x.startswith("ng ")]
    ls = ctx.git("ls-remote", f"{ctx.url}/many.git")
    n = len(ls.stdout.splitlines())
    head = "; HEAD listed" if any(x.endswith("\tHEAD") for x in ls.stdout.splitlines()) else ""
    text = (f"HTTP {status}; {report[0] if report else '(no report)'}; {oks} ok, {len(ng)} ng"
            f"{' (' + ng[0] + ')' if ng else ''}; ls-remote exit={ls.rc}, {n} lines{head}")
    return text, f"POST {secs:.1f} s, ls-remote {ls.secs:.1f} s"


# raw requests ---------------------------------------------------------------


def upload_v0_body(ctx):
    return pkt(f"want {ctx.main} side-band-64k ofs-delta agent=compare\n") + b"0000" + pkt("done\n")


@scenario("GET info/refs?service=git-foo (unknown service)")
def unknown_service(ctx):
    return http_summary(raw(ctx.url, "GET", "/base.git/info/refs?service=git-foo"))


@scenario("dumb HTTP: GET /base.git/info/refs (no service)")
def dumb_info_refs(ctx):
    return http_summary(raw(ctx.url, "GET", "/base.git/info/refs"))


@scenario("dumb HTTP: GET /base.git/HEAD")
def dumb_head(ctx):
    return http_summary(raw(ctx.url, "GET", "/base.git/HEAD"))


@scenario("dumb HTTP: GET /base.git/objects/info/packs")
def dumb_packs(ctx):
    return http_summary(raw(ctx.url, "GET", "/base.git/objects/info/packs"))


@scenario("GET /base.git/git-upload-pack (POST endpoint)")
def get_upload(ctx):
    return http_summary(raw(ctx.url, "GET", "/base.git/git-upload-pack"))


@scenario("GET /base.git/git-receive-pack (POST endpoint)")
def get_receive(ctx):
    return http_summary(raw(ctx.url, "GET", "/base.git/git-receive-pack"))


@scenario("POST git-upload-pack with Content-Type: text/plain")
def wrong_type(ctx):
    return http_summary(raw(ctx.url, "POST", "/base.git/git-upload-pack",
                            {"Content-Type": "text/plain"}, upload_v0_body(ctx)))


@scenario("POST git-receive-pack with Content-Type: text/plain")
def wrong_type_receive(ctx):
    return http_summary(raw(ctx.url, "POST", "/base.git/git-receive-pack",
                            {"Content-Type": "text/plain"}, b"0000"))


@scenario("POST git-upload-pack, garbage body")
def garbage_upload(ctx):
    return http_summary(raw(ctx.url, "POST", "/base.git/git-upload-pack",
                            {"Content-Type": "application/x-git-upload-pack-request"},
                            b"this is not a pkt-line stream\n"))


@scenario("POST git-receive-pack, garbage body")
def garbage_receive(ctx):
    return http_summary(raw(ctx.url, "POST", "/base.git/git-receive-pack",
                            {"Content-Type": "application/x-git-receive-pack-request"},
                            b"this is not a pkt-line stream\n"))


@scenario("POST git-upload-pack, gzip body (v0 want main, done)")
def gzip_upload(ctx):
    return http_summary(raw(ctx.url, "POST", "/base.git/git-upload-pack",
                            {"Content-Type": "application/x-git-upload-pack-request",
                             "Content-Encoding": "gzip"},
                            gzip.compress(upload_v0_body(ctx))))


@scenario("POST git-receive-pack, gzip body (delete refs/heads/gz)")
def gzip_receive(ctx):
    url = f"{ctx.url}/raw.git"
    ctx.git("push", "-q", url, "main", "main:refs/heads/gz", cwd=ctx.src)
    body = pkt(f"{ctx.main} {ZERO} refs/heads/gz\0 report-status delete-refs agent=compare") + b"0000"
    resp = raw(ctx.url, "POST", "/raw.git/git-receive-pack",
               {"Content-Type": "application/x-git-receive-pack-request",
                "Content-Encoding": "gzip"}, gzip.compress(body))
    gone = "refs/heads/gz" not in ctx.out("ls-remote", url)
    return http_summary(resp, f"; ref deleted={gone}")


@scenario("POST git-upload-pack with Expect: 100-continue")
def expect_continue(ctx):
    return http_summary(raw(ctx.url, "POST", "/base.git/git-upload-pack",
                            {"Content-Type": "application/x-git-upload-pack-request"},
                            upload_v0_body(ctx), expect_continue=True))


@scenario("invalid repo name: GET /a/.git/info/refs?service=git-upload-pack")
def bad_name_dotgit(ctx):
    return http_summary(raw(ctx.url, "GET", "/a/.git/info/refs?service=git-upload-pack"))


@scenario("invalid repo name: GET /a%2fb.git/info/refs?service=git-upload-pack")
def bad_name_pct(ctx):
    return http_summary(raw(ctx.url, "GET", "/a%2fb.git/info/refs?service=git-upload-pack"))


@scenario("invalid repo name: GET /../base.git/info/refs?service=git-upload-pack")
def bad_name_dotdot(ctx):
    return http_summary(raw(ctx.url, "GET", "/../base.git/info/refs?service=git-upload-pack"))


@scenario("missing repository: GET /missing.git/info/refs?service=git-upload-pack")
def missing_refs(ctx):
    return http_summary(raw(ctx.url, "GET", "/missing.git/info/refs?service=git-upload-pack"))


@scenario("missing repository: git clone")
def missing_clone(ctx):
    return summary(ctx.git("clone", f"{ctx.url}/missing.git", ctx.path("missing")))


# ---------------------------------------------------------------------------
# behind Basic auth: gitstow with tokens (reader: *:read, writer: *:write)
# and a pre-receive hook; git http-backend behind basic-auth-backend.py with
# the same users, receive.denyNonFastForwards and receive.denyDeletes, and
# the same hook (core.hooksPath)

AUTH_SCENARIOS = []

HOOK = """#!/bin/sh
while read old new ref; do
  if [ "$ref" = refs/heads/blocked ]; then
    echo "policy: $ref is reserved" >&2
    exit 1
  fi
done
exit 0
"""


def auth_scenario(title):
    def register(f):
        AUTH_SCENARIOS.append((title, f))
        return f
    return register


def as_user(ctx, user, *args, secret=None, cwd=None):
    """git with a credential helper that answers `user`'s secret (`None`: no helper)."""
    pre = []
    if user:
        creds = ctx.path(f"creds-{user}")
        host = ctx.url.split("//")[1]
        with open(creds, "w") as f:
            f.write(f"http://{user}:{secret or ctx.secrets[user]}@{host}\n")
        pre = ["-c", f"credential.helper=store --file={creds}"]
    return ctx.git(*pre, *args, cwd=cwd)


def basic(user, secret):
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


@auth_scenario("push with write credentials (credential helper): main, feature, v1")
def auth_push(ctx):
    return summary(as_user(ctx, "writer", "push", f"{ctx.url}/auth.git", "main", "feature",
                           "v1", cwd=ctx.src))


@auth_scenario("clone without credentials (no helper, no terminal)")
def auth_clone_none(ctx):
    return summary(as_user(ctx, None, "clone", f"{ctx.url}/auth.git", ctx.path("a0")))


@auth_scenario("clone with a wrong secret")
def auth_clone_wrong(ctx):
    return summary(as_user(ctx, "reader", "clone", f"{ctx.url}/auth.git", ctx.path("a1"),
                           secret="gitstow_" + "0" * 64))


@auth_scenario("clone with read credentials")
def auth_clone_read(ctx):
    dst = ctx.path("a2")
    return clone_check(ctx, dst, as_user(ctx, "reader", "clone", f"{ctx.url}/auth.git", dst))


@auth_scenario("push with read credentials")
def auth_push_read(ctx):
    return summary(as_user(ctx, "reader", "push", f"{ctx.url}/auth.git",
                           "main:refs/heads/by-reader", cwd=ctx.src))


@auth_scenario("force-push main with write credentials (protected / denyNonFastForwards)")
def auth_force(ctx):
    return summary(as_user(ctx, "writer", "push", "--force", f"{ctx.url}/auth.git",
                           "rewind:main", cwd=ctx.src))


@auth_scenario("delete main with write credentials (protected / denyDeletes)")
def auth_delete_main(ctx):
    return summary(as_user(ctx, "writer", "push", f"{ctx.url}/auth.git", ":refs/heads/main",
                           cwd=ctx.src))


@auth_scenario("delete tag v1 with write credentials (protected / denyDeletes)")
def auth_delete_tag(ctx):
    return summary(as_user(ctx, "writer", "push", f"{ctx.url}/auth.git", ":refs/tags/v1",
                           cwd=ctx.src))


@auth_scenario("push a branch the pre-receive hook refuses (and one it accepts)")
def auth_hook(ctx):
    r = as_user(ctx, "writer", "push", f"{ctx.url}/auth.git", "main:refs/heads/blocked",
                "main:refs/heads/fine", cwd=ctx.src)
    ls = as_user(ctx, "reader", "ls-remote", f"{ctx.url}/auth.git")
    got = [n for n in ("blocked", "fine") if f"refs/heads/{n}" in ls.stdout]
    return summary(r, f"branches now: {','.join(got) or 'neither'}")


@auth_scenario("raw: GET info/refs?service=git-upload-pack without Authorization")
def auth_raw_none(ctx):
    resp = raw(ctx.url, "GET", "/auth.git/info/refs?service=git-upload-pack")
    return http_summary(resp, f"; WWW-Authenticate: {resp[1].get('www-authenticate')}")


@auth_scenario("raw: GET info/refs with Authorization: Basic !!! (bad base64)")
def auth_raw_bad(ctx):
    return http_summary(raw(ctx.url, "GET", "/auth.git/info/refs?service=git-upload-pack",
                            {"Authorization": "Basic !!!"}))


@auth_scenario("raw: GET info/refs?service=git-receive-pack with read credentials")
def auth_raw_read_push(ctx):
    return http_summary(raw(ctx.url, "GET", "/auth.git/info/refs?service=git-receive-pack",
                            {"Authorization": basic("reader", ctx.secrets["reader"])}))


# ---------------------------------------------------------------------------


def normalise(text, ctx, tmp):
    text = text.replace(ctx.url, "URL")
    text = re.sub(r"127\.0\.0\.1:\d+", "HOST", text)
    text = text.replace(tmp, "TMP")
    for secret in getattr(ctx, "secrets", {}).values():
        text = text.replace(secret, "SECRET")

    def name(m):
        hexs = m.group(0)
        for oid, n in ctx.names.items():
            if oid.startswith(hexs.lower()):
                return n
        return "<oid>"

    return re.sub(r"\b[0-9a-f]{7,40}\b", name, text)


# ---------------------------------------------------------------------------
# hidden refs: git http-backend with transfer.hideRefs=refs/changes beside
# gitstow --hide-refs refs/changes; repository `hidden` holds main (c5) and
# refs/changes/01/1/1 (c4), pushed before the namespace was hidden

HIDDEN_SCENARIOS = []


def hidden_scenario(title):
    def register(f):
        HIDDEN_SCENARIOS.append((title, f))
        return f
    return register


def refs_of(r):
    return ",".join(line.split("\t")[1] for line in r.stdout.splitlines())


@hidden_scenario("ls-remote, protocol v2 (ls-refs)")
def hidden_ls_v2(ctx):
    r = ctx.git("-c", "protocol.version=2", "ls-remote", f"{ctx.url}/hidden.git")
    return f"exit={r.rc}; refs=[{refs_of(r)}]"


@hidden_scenario("ls-remote, protocol v0 (info/refs)")
def hidden_ls_v0(ctx):
    r = ctx.git("-c", "protocol.version=0", "ls-remote", f"{ctx.url}/hidden.git")
    return f"exit={r.rc}; refs=[{refs_of(r)}]"


@hidden_scenario("ls-remote of the hidden namespace (v2 ref-prefix)")
def hidden_ls_prefix(ctx):
    r = ctx.git("ls-remote", f"{ctx.url}/hidden.git", "refs/changes/*")
    return f"exit={r.rc}; refs=[{refs_of(r)}]"


@hidden_scenario("push advertisement (info/refs?service=git-receive-pack)")
def hidden_push_adv(ctx):
    resp = raw(ctx.url, "GET", "/hidden.git/info/refs?service=git-receive-pack")
    names = re.findall(rb"[0-9a-f]{40} (refs/[^\x00\n]+)", resp[2])
    return f"HTTP {resp[0]}; refs=[{','.join(n.decode() for n in names)}]"


@hidden_scenario("push to a hidden ref")
def hidden_push(ctx):
    return summary(ctx.git("push", f"{ctx.url}/hidden.git", "main:refs/changes/02/2/1", cwd=ctx.src))


@hidden_scenario("delete a hidden ref")
def hidden_delete(ctx):
    return summary(ctx.git("push", f"{ctx.url}/hidden.git", ":refs/changes/01/1/1", cwd=ctx.src))


@hidden_scenario("fetch a hidden tip by its id (v2, then v0)")
def hidden_fetch(ctx):
    tip = ctx.out("rev-parse", "main~1", cwd=ctx.src)
    out = []
    for version in ("2", "0"):
        d = ctx.path(f"hidden-fetch-v{version}")
        ctx.git("init", "-q", d)
        r = ctx.git("-c", f"protocol.version={version}", "fetch", "-q", f"{ctx.url}/hidden.git", tip, cwd=d)
        out.append(f"v{version} exit={r.rc} type={ctx.out('cat-file', '-t', tip, cwd=d)}")
    return "; ".join(out)


def run_all(ctx, tmp, scenarios=None):
    results = []
    for title, f in scenarios or SCENARIOS:
        try:
            out = f(ctx)
        except Exception as e:  # a scenario's own failure is a result too
            out = f"script error: {type(e).__name__}: {e}"
        if isinstance(out, tuple):
            text, extra = out
        else:
            text, extra = out, ""
        results.append((normalise(text, ctx, tmp), normalise(extra, ctx, tmp)))
        print(f"  [{ctx.name}] {title}: {results[-1][0][:110]}", file=sys.stderr)
    return results


def table(scenarios, columns):
    """Markdown rows for `scenarios` and how many behave the same."""
    rows, same_count = [], 0
    for (title, _), (b, bx), (g, gx) in zip(scenarios, columns[0], columns[1]):
        same = b == g
        same_count += same
        bt = f"{b} [{bx}]" if bx else b
        gt = f"{g} [{gx}]" if gx else g
        rows.append(f"| {cell(title)} | {cell(bt)} | {cell(gt)} | {'yes' if same else '**no**'} |")
    return rows, same_count


def cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the markdown here instead of stdout")
    ap.add_argument("--gitstow", default=os.path.join(REPO, "target/release/gitstow"))
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()

    if not os.path.exists(args.gitstow):
        print("building target/release/gitstow …", file=sys.stderr)
        subprocess.run(["flock", "/tmp/cargo.lock", "cargo", "build", "--release", "-p", "gitstow"],
                       cwd=REPO, check=True)

    tmp = tempfile.mkdtemp(prefix="compare-http-backend-")
    servers = []
    try:
        home = os.path.join(tmp, "home")
        write_gitconfig(home)
        server_home = os.path.join(tmp, "server-home")
        write_gitconfig(server_home,
                        "[uploadpack]\n\tallowFilter = true\n\tallowAnySHA1InWant = true\n")
        src = os.path.join(tmp, "src")
        names = build_source(src, home)
        main_oid = subprocess.run(["git", "rev-parse", "main"], cwd=src, env=git_env(home),
                                  capture_output=True, text=True).stdout.strip()

        backend = start_backend(os.path.join(tmp, "backend-root"), server_home)
        servers.append(backend)
        gitstow = start_gitstow(args.gitstow, os.path.join(tmp, "gitstow-store"))
        servers.append(gitstow)

        columns = []
        for srv in servers:
            work = os.path.join(tmp, "work-" + ("backend" if srv is backend else "gitstow"))
            os.makedirs(work)
            ctx = Ctx(srv.label, srv.url, work, home, names)
            ctx.src, ctx.main = src, main_oid
            columns.append(run_all(ctx, tmp))

        # Behind Basic auth.
        hooks = os.path.join(tmp, "hooks")
        os.makedirs(hooks)
        hook = os.path.join(hooks, "pre-receive")
        with open(hook, "w") as f:
            f.write(HOOK)
        os.chmod(hook, 0o755)
        auth_home = os.path.join(tmp, "auth-server-home")
        write_gitconfig(auth_home,
                        "[uploadpack]\n\tallowFilter = true\n\tallowAnySHA1InWant = true\n"
                        "[receive]\n\tdenyNonFastForwards = true\n\tdenyDeletes = true\n"
                        f"[core]\n\thooksPath = {hooks}\n")
        backend_secrets = {"reader": "r-secret", "writer": "w-secret"}
        auth_backend = start_backend(
            os.path.join(tmp, "auth-backend-root"), auth_home,
            script=os.path.join(REPO, "scripts/basic-auth-backend.py"),
            env={"BASIC_AUTH_USERS": "reader:r-secret:read,writer:w-secret:write"})
        servers.append(auth_backend)
        auth_store = os.path.join(tmp, "auth-gitstow-store")
        gitstow_secrets = {}
        for user, grant in (("reader", "*:read"), ("writer", "*:write")):
            made = subprocess.run([args.gitstow, "token", "create", "--store", f"file://{auth_store}",
                                   "--name", user, "--grant", grant],
                                  capture_output=True, text=True, check=True)
            gitstow_secrets[user] = made.stdout.split()[-1]
        auth_gitstow = start_gitstow(args.gitstow, auth_store, ["--pre-receive-hook", hook])
        servers.append(auth_gitstow)
        auth_columns = []
        for srv, secrets in ((auth_backend, backend_secrets), (auth_gitstow, gitstow_secrets)):
            work = os.path.join(tmp, "auth-work-" + ("backend" if srv is auth_backend else "gitstow"))
            os.makedirs(work)
            ctx = Ctx(srv.label, srv.url, work, home, names)
            ctx.src, ctx.main, ctx.secrets = src, main_oid, secrets
            auth_columns.append(run_all(ctx, tmp, AUTH_SCENARIOS))

        # Hidden refs: the repository is filled before the namespace is hidden.
        seed = ["main", "main~1:refs/changes/01/1/1"]
        hidden_root = os.path.join(tmp, "hidden-backend-root")
        os.makedirs(hidden_root)
        subprocess.run(["git", "init", "-q", "--bare", os.path.join(hidden_root, "hidden.git")],
                       env=git_env(home), check=True)
        subprocess.run(["git", "push", "-q", os.path.join(hidden_root, "hidden.git"), *seed],
                       cwd=src, env=git_env(home), check=True)
        hidden_home = os.path.join(tmp, "hidden-server-home")
        write_gitconfig(hidden_home,
                        "[uploadpack]\n\tallowFilter = true\n\tallowAnySHA1InWant = true\n"
                        "[transfer]\n\thideRefs = refs/changes\n")
        hidden_store = os.path.join(tmp, "hidden-gitstow-store")
        seeding = start_gitstow(args.gitstow, hidden_store)
        subprocess.run(["git", "push", "-q", f"{seeding.url}/hidden.git", *seed],
                       cwd=src, env=git_env(home), check=True)
        seeding.stop()
        # The same store, the namespace hidden for this repository only
        # (`gitstow access hide-refs`) instead of by the server's flag.
        repo_hidden_store = os.path.join(tmp, "repo-hidden-gitstow-store")
        shutil.copytree(hidden_store, repo_hidden_store)
        subprocess.run([args.gitstow, "access", "hide-refs", "--store", f"file://{repo_hidden_store}",
                        "hidden", "refs/changes"], check=True, capture_output=True)
        hidden_backend = start_backend(hidden_root, hidden_home)
        servers.append(hidden_backend)
        hidden_gitstow = start_gitstow(args.gitstow, hidden_store, ["--hide-refs", "refs/changes"])
        servers.append(hidden_gitstow)
        hidden_columns = []
        for srv in (hidden_backend, hidden_gitstow):
            work = os.path.join(tmp, "hidden-work-" + ("backend" if srv is hidden_backend else "gitstow"))
            os.makedirs(work)
            ctx = Ctx(srv.label, srv.url, work, home, names)
            ctx.src, ctx.main = src, main_oid
            hidden_columns.append(run_all(ctx, tmp, HIDDEN_SCENARIOS))
        repo_hidden_gitstow = start_gitstow(args.gitstow, repo_hidden_store)
        servers.append(repo_hidden_gitstow)
        work = os.path.join(tmp, "repo-hidden-work-gitstow")
        os.makedirs(work)
        ctx = Ctx(repo_hidden_gitstow.label, repo_hidden_gitstow.url, work, home, names)
        ctx.src, ctx.main = src, main_oid
        repo_hidden_column = run_all(ctx, tmp, HIDDEN_SCENARIOS)

        git_version = subprocess.run(["git", "--version"], capture_output=True,
                                     text=True).stdout.strip()
        rows, same_count = table(SCENARIOS, columns)
        auth_rows, auth_same = table(AUTH_SCENARIOS, auth_columns)
        hidden_rows, hidden_same = table(HIDDEN_SCENARIOS, hidden_columns)
        repo_hidden_rows, repo_hidden_same = table(
            HIDDEN_SCENARIOS, [hidden_columns[0], repo_hidden_column])
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                              capture_output=True, text=True).stdout.strip() or "?"
        now = datetime.datetime.now(datetime.timezone.utc)
        out = "\n".join([
            "# gitstow beside git http-backend",
            "",
            "Produced by `python3 scripts/compare-http-backend.py --out "
            "docs/behaviour-vs-http-backend.md`",
            f"on {now:%Y-%m-%d %H:%M} UTC with {git_version}, gitstow built from `{head}`",
            "(`target/release/gitstow serve --store file://TMP`). The canonical side is",
            "`git http-backend` behind `/work/shared/tools/git-http-backend-server.py`, with",
            "`uploadpack.allowFilter` and `uploadpack.allowAnySHA1InWant` set (what gitstow does",
            "unconditionally) and git's defaults otherwise. Rerun the command to refresh this file.",
            "",
            "Each cell: exit code and the key client lines (ref updates, errors, then the first",
            "`remote:` line), or the HTTP status and the first pkt-lines of the answer. Ports,",
            "temp paths and object ids are normalised (ids of the test history by name: c1..c5,",
            "f1, tag:v1, obj:<path>). Text in [brackets] (timings, plain-text error bodies) is",
            "shown but not compared.",
            "",
            "| scenario | git http-backend | gitstow | same? |",
            "|---|---|---|---|",
            *rows,
            "",
            f"{same_count} of {len(rows)} scenarios behave the same.",
            "",
            "## Behind Basic auth",
            "",
            "gitstow with two tokens (`reader`: `*:read`, `writer`: `*:write`) and",
            "`--pre-receive-hook` (a script refusing `refs/heads/blocked`); beside it `git",
            "http-backend` behind `scripts/basic-auth-backend.py`, HTTP Basic auth as",
            "git-http-backend(1) puts Apache in front (`Require` per service, with",
            "`AuthzSendForbiddenOnFailure On`: a known user without the right gets 403), the",
            "same two users, `receive.denyNonFastForwards`, `receive.denyDeletes` and the same",
            "hook (`core.hooksPath`). gitstow protects HEAD's branch and tags by default (a",
            "`write` token may not rewrite or delete them); git's settings protect every ref.",
            "Credentials come from `credential.helper store`; secrets are shown as SECRET.",
            "",
            "| scenario | git http-backend behind Basic auth | gitstow | same? |",
            "|---|---|---|---|",
            *auth_rows,
            "",
            f"{auth_same} of {len(auth_rows)} scenarios behave the same.",
            "",
            "Where they differ: the text of a 401 or 403 (git shows it as `remote: …`) names",
            "the token, the repository and the levels in gitstow, where a web server says",
            "`Unauthorized` or `Forbidden`; and gitstow protects tags (as the hosting",
            "services' protected tags do), where git's `receive.denyDeletes` and",
            "`receive.denyNonFastForwards` cover only `refs/heads/*`.",
            "",
            "## Hidden refs",
            "",
            "A repository holding `main` (c5) and `refs/changes/01/1/1` (c4), pushed before the",
            "namespace was hidden: `git http-backend` with `transfer.hideRefs = refs/changes`",
            "beside `gitstow serve --hide-refs refs/changes`.",
            "",
            "| scenario | git http-backend, transfer.hideRefs | gitstow --hide-refs | same? |",
            "|---|---|---|---|",
            *hidden_rows,
            "",
            f"{hidden_same} of {len(hidden_rows)} scenarios behave the same.",
            "",
            "The same repository with the namespace hidden for it alone (`gitstow access",
            "hide-refs hidden refs/changes`, kept in the access document) and no `--hide-refs`:",
            "",
            "| scenario | git http-backend, transfer.hideRefs | gitstow access hide-refs | same? |",
            "|---|---|---|---|",
            *repo_hidden_rows,
            "",
            f"{repo_hidden_same} of {len(repo_hidden_rows)} scenarios behave the same.",
            "",
        ])
        if args.out:
            with open(args.out, "w") as f:
                f.write(out)
        else:
            sys.stdout.write(out)
    finally:
        for srv in servers:
            srv.stop()
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
