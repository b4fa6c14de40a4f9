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
- peak RSS of the server over the phases (gitstow: VmHWM of the daemon;
  git: ru_maxrss of its largest process).
"""
import argparse, hashlib, http.client, os, shutil, struct, subprocess, sys, tempfile, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import side_by_side as sbs  # noqa: E402

MiB = 1024 * 1024


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
    upd = "".join("create %s %s\n" % (change(i), marks[i + 2]) for i in range(1, n + 1))
    subprocess.run(["git", "-C", path, "update-ref", "--stdin"], input=upd.encode(), check=True)


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


def settle(pid):
    last = sbs.proc_cpu(pid)[0]
    while True:
        time.sleep(1.0)
        now = sbs.proc_cpu(pid)[0]
        if now - last < 0.05:
            return
        last = now


def pkt(b):
    return b"%04x" % (len(b) + 4) + b


def push_refs(src, url):
    """main with the history by `git push`, then the refs by raw
    receive-pack requests of 90,000 creations each (git's send-pack spends
    minutes of client CPU matching 90,000 new refs; the server's work is
    the same)."""
    sbs.git("-C", src, "push", "-q", url, "refs/heads/main:refs/heads/main")
    refs = sbs.git("-C", src, "for-each-ref", "--format=%(objectname) %(refname)", "refs/changes/").stdout.split("\n")
    refs = [r.split(" ") for r in refs if r]
    head = b"PACK" + struct.pack(">II", 2, 0)
    empty = head + hashlib.sha1(head).digest()
    host, port = url.split("//")[1].split("/")[0].split(":")
    path = "/" + url.split("//")[1].split("/", 1)[1] + "/git-receive-pack"
    for start in range(0, len(refs), 90_000):
        lines = []
        for oid, name in refs[start:start + 90_000]:
            line = ("%s %s %s" % ("0" * 40, oid, name)).encode()
            if not lines:
                line += b"\0report-status"
            lines.append(pkt(line))
        body = b"".join(lines) + b"0000" + empty
        c = http.client.HTTPConnection(host, int(port), timeout=3600)
        c.request("POST", path, body, {"Content-Type": "application/x-git-receive-pack-request"})
        r = c.getresponse()
        answer = r.read()
        if r.status != 200 or b"unpack ok" not in answer[:40] or b"ng " in answer:
            sys.exit("raw push refused: %d %r" % (r.status, answer[:300]))


def client(work, src, url):
    """A clone of main (made from the source: cheap), origin at url."""
    sbs.git("clone", "-q", "--single-branch", "--branch", "main", src, work)
    sbs.git("-C", work, "remote", "set-url", "origin", url)


def adv_fetch(url):
    with urllib.request.urlopen(url + "/info/refs?service=git-receive-pack", timeout=600) as r:
        return len(r.read())


def serve(a, store, hidden, workdir):
    args = [a.gitstow, "serve", "--listen", "127.0.0.1:0", "--store", "file://" + store]
    if hidden:
        args += ["--hide-refs", "refs/changes"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(workdir + "/gs.err", "a"), text=True)
    return p, p.stdout.readline().split()[-1] + "/r.git"


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
    p.kill()
    p.wait()
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
    out = {}
    with open("/proc/%d/clear_refs" % p.pid, "w") as f:
        f.write("5")
    err = workdir + "/client.err"
    out["fetch"] = sbs.gitstow_phase(p.pid, ["-C", work, "fetch", "-q", "origin", "main"], err)["cpu"]
    out["ls_remote"] = sbs.gitstow_phase(p.pid, ["-C", work, "ls-remote", url], err)["cpu"]
    c0 = sbs.proc_cpu(p.pid)[0]
    adv_fetch(url)
    out["advertisement"] = sbs.proc_cpu(p.pid)[0] - c0
    sbs.git("-C", work, "commit", "-q", "--allow-empty", "-m", "one more")
    before = dir_files(store)
    out["push"] = sbs.gitstow_phase(p.pid, ["-C", work, "push", "-q", "--force", "origin", "HEAD:main"], err)["cpu"]
    out["push_bytes"] = written(before, dir_files(store))
    out["rss"] = sbs.proc_status(p.pid)["VmHWM"]
    p.kill()
    p.wait()
    return out


def git_side(a, src, ref_format, hidden, workdir):
    root = os.path.join(workdir, "hb")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    repo = os.path.join(root, "r.git")
    sbs.git("clone", "-q", "--mirror", "--ref-format=" + ref_format, src, repo)
    sbs.git("-C", repo, "config", "http.receivepack", "true")
    if hidden:
        sbs.git("-C", repo, "config", "transfer.hideRefs", "refs/changes")
    sbs.git("-C", repo, "gc", "-q")
    sbs.git("-C", repo, "repack", "-adq", "--write-bitmap-index")
    sbs.git("-C", repo, "commit-graph", "write", "--reachable")
    work = os.path.join(workdir, "hb-client")
    shutil.rmtree(work, ignore_errors=True)
    client(work, src, "http://127.0.0.1:1/r.git")
    out, err = {}, workdir + "/client.err"

    def phase(tag, args_for):
        return sbs.http_backend_phase(a.http_backend_server, root, args_for, workdir, tag)

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
    out["rss"] = rss
    return out


def fmt(v, unit):
    if v is None:
        return "–"
    if unit == "s":
        return "%.3f s" % v
    if unit == "B":
        return "%d B" % v if v < 10_000 else "%.1f MB" % (v / 1e6)
    return "%.0f MB" % (v / MiB)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--refs", default="100000")
    ap.add_argument("--gitstow", default="target/release/gitstow")
    ap.add_argument("--http-backend-server", default=os.path.join(HERE, "../../shared/tools/git-http-backend-server.py"))
    ap.add_argument("--workdir")
    ap.add_argument("--out")
    a = ap.parse_args()
    a.gitstow = os.path.abspath(a.gitstow)
    a.http_backend_server = os.path.abspath(a.http_backend_server)
    workdir = a.workdir or tempfile.mkdtemp(prefix="refs-at-scale-")
    report = ["# Refs at scale: gitstow beside git http-backend", "",
              "`python3 benches/refs_at_scale.py --refs %s` (one run each, 2-core machine, %s)" %
              (a.refs, sbs.git("--version").stdout.strip()), ""]
    for n in [int(x) for x in a.refs.split(",")]:
        src = os.path.join(workdir, "src-%d.git" % n)
        if not os.path.exists(src):
            t = time.time()
            make_source(src, n)
            sbs.log("source of %d refs made in %.0f s" % (n, time.time() - t))
        cols = {}
        for hidden in (False, True):
            tag = " hidden" if hidden else ""
            cols["gitstow" + tag] = gitstow_side(a, src, n, hidden, workdir)
            for rf in ("files", "reftable"):
                cols["git %s%s" % ("packed-refs" if rf == "files" else rf, tag)] = git_side(a, src, rf, hidden, workdir)
            sbs.log("%d refs%s done" % (n, tag))
        names = list(cols)
        report += ["## %d refs" % n, "", "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for key, label, unit in [("fetch", "`git fetch origin main`, server CPU", "s"),
                                 ("ls_remote", "`git ls-remote`, server CPU", "s"),
                                 ("advertisement", "push advertisement (GET), server CPU", "s"),
                                 ("push", "push of one commit, server CPU", "s"),
                                 ("push_bytes", "bytes written by that push", "B"),
                                 ("rss", "peak RSS", "M")]:
            report.append("| %s | " % label + " | ".join(fmt(cols[c][key], unit) for c in names) + " |")
        report.append("")
    text = "\n".join(report) + "\n"
    print(text)
    if a.out:
        open(a.out, "w").write(text)


if __name__ == "__main__":
    main()
