#!/usr/bin/env python3
"""Git LFS side by side: a repository of FILES files of SIZE MiB each
(1 GiB in 200 files by default, random bytes, deterministic) pushed and
cloned

- with Git LFS to `gitstow serve` on the local store (the bytes through
  gitstow),
- with Git LFS to `gitstow serve` on S3 (`--s3-endpoint`: the bytes between
  the client and the bucket, presigned),
- as plain blobs to canonical `git http-backend` (what a team without LFS
  runs),

each on its defaults. Stdlib only; needs git-lfs, and for the S3 column an
S3 server (`bash scripts/s3-radosgw.sh start`, then
`eval "$(bash scripts/s3-radosgw.sh env)"`).

Figures per phase: the client's wall time; gitstow's CPU (its process,
from /proc; the S3 server's own work is not counted) against git
http-backend's (every CGI process it ran); gitstow's peak RSS (VmHWM
reset at the start of the phase) against git's largest process; the bytes
that went through gitstow's HTTP side (`/metrics`: request and response
bodies) and the LFS bytes signed for the bucket.

    python3 benches/lfs_side_by_side.py [--files 200] [--size-mib 5]
        [--runs 1] [--out docs/benchmarks/lfs.md]
"""
import argparse, os, random, shutil, statistics, subprocess, sys, tempfile, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import side_by_side as sbs  # noqa: E402

MiB = 1 << 20


def make_tree(path, files, size, lfs):
    """A work tree of `files` random files of `size` bytes, committed (with
    `*.bin` tracked by Git LFS when `lfs`)."""
    sbs.git("init", "-q", "-b", "main", path)
    if lfs:
        subprocess.run(["git", "lfs", "track", "*.bin"], cwd=path, check=True, capture_output=True)
    rng = random.Random(42)
    for i in range(files):
        with open(os.path.join(path, "f%03d.bin" % i), "wb") as f:
            f.write(rng.randbytes(size))
    sbs.git("-C", path, "add", "-A")
    sbs.git("-C", path, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "files")


def metrics(port):
    """The counters of `gitstow serve`'s /metrics: {line name: value}."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def through(before, after):
    """Bytes through gitstow (git's request and response bodies, LFS object
    bytes in and out), and LFS bytes signed for the bucket."""
    d = lambda prefix: sum(after[k] - before.get(k, 0) for k in after if k.startswith(prefix))
    moved = d("gitstow_received_bytes_total") + d("gitstow_sent_bytes_total") \
        + d("gitstow_lfs_bytes_served_total")
    return moved, d("gitstow_lfs_bytes_signed_total")


def gitstow_side(a, work, store, flags, tree, tag):
    port = sbs.free_port()
    err = open(os.path.join(work, "gitstow-%s.err" % tag), "w")
    p = subprocess.Popen([a.gitstow, "serve", "--listen", "127.0.0.1:0", "--store", store, "--create-store",
                          "--metrics-listen", "127.0.0.1:%d" % port, *flags],
                         stdout=subprocess.PIPE, stderr=err, text=True)
    url = None
    for line in p.stdout:
        if "gitstow listening on" in line:
            url = line.split()[-1]
        if "gitstow metrics on" in line:
            break
    if not url:
        p.kill()
        sys.exit("gitstow did not start (see %s)" % err.name)
    res = {}
    try:
        repo = url + "/bench/lfs.git"
        m0 = metrics(port)
        res["push"] = sbs.gitstow_phase(p.pid, ["-C", tree, "push", "-q", repo, "main"],
                                        os.path.join(work, "%s-push.err" % tag))
        m1 = metrics(port)
        res["push"]["through"], res["push"]["signed"] = through(m0, m1)
        clone = os.path.join(work, "%s-clone" % tag)
        res["clone"] = sbs.gitstow_phase(p.pid, ["clone", "-q", repo, clone],
                                         os.path.join(work, "%s-clone.err" % tag))
        m2 = metrics(port)
        res["clone"]["through"], res["clone"]["signed"] = through(m1, m2)
        check(tree, clone)
        shutil.rmtree(clone)
    finally:
        p.terminate()
        p.wait()
    return res


def check(tree, clone):
    """The clone's files are the work tree's."""
    for name in sorted(os.listdir(tree)):
        if name.endswith(".bin"):
            with open(os.path.join(tree, name), "rb") as x, open(os.path.join(clone, name), "rb") as y:
                if x.read() != y.read():
                    sys.exit("the clone's %s differs" % name)


def http_backend_side(a, work, tree):
    root = os.path.join(work, "hb-data")
    res = {}
    res["push"] = sbs.http_backend_phase(a.http_backend_server, root,
                                         lambda url: ["-C", tree, "push", "-q", url + "/lfs.git", "main"],
                                         work, "push")
    clone = os.path.join(work, "hb-clone")
    res["clone"] = sbs.http_backend_phase(a.http_backend_server, root,
                                          lambda url: ["clone", "-q", url + "/lfs.git", clone],
                                          work, "clone")
    check(tree, clone)
    shutil.rmtree(clone)
    for ph in res.values():
        ph["through"], ph["signed"] = None, None
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size-mib", type=float, default=5.12)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--gitstow", default=os.path.join(HERE, "..", "target", "release", "gitstow"))
    ap.add_argument("--http-backend-server",
                    default=os.path.join(HERE, "..", "..", "shared", "tools", "git-http-backend-server.py"))
    ap.add_argument("--workdir")
    ap.add_argument("--out")
    a = ap.parse_args()
    a.http_backend_server = os.path.abspath(a.http_backend_server)
    size = int(a.size_mib * MiB)
    base = tempfile.mkdtemp(prefix="lfs-sbs-", dir=a.workdir)
    home = os.path.join(base, "home")
    os.makedirs(home)
    os.environ.update({"HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
    subprocess.run(["git", "lfs", "install", "--skip-repo"], check=True, capture_output=True)
    sbs.log("making %d files of %d bytes, twice (LFS and plain)" % (a.files, size))
    lfs_tree, plain_tree = os.path.join(base, "lfs-tree"), os.path.join(base, "plain-tree")
    make_tree(lfs_tree, a.files, size, True)
    make_tree(plain_tree, a.files, size, False)
    s3 = os.environ.get("S3_ENDPOINT")
    runs = []
    for i in range(a.runs):
        work = os.path.join(base, "run%d" % i)
        os.makedirs(work)
        r = {}
        sbs.log("run %d: gitstow, local store" % (i + 1))
        r["gitstow local"] = gitstow_side(a, work, "file://" + os.path.join(work, "gs-store"), [],
                                          lfs_tree, "local")
        if s3:
            sbs.log("run %d: gitstow, S3 (%s)" % (i + 1, s3))
            flags = ["--s3-endpoint", s3, "--s3-region", os.environ.get("S3_REGION", "us-east-1"),
                     "--s3-access-key", os.environ["S3_ACCESS_KEY"],
                     "--s3-secret-key", os.environ["S3_SECRET_KEY"], "--s3-path-style"]
            store = "s3://%s/lfs-bench-%d-%d" % (os.environ["S3_BUCKET"], os.getpid(), i)
            r["gitstow S3"] = gitstow_side(a, work, store, flags, lfs_tree, "s3")
        sbs.log("run %d: git http-backend, plain blobs" % (i + 1))
        r["http-backend, plain blobs"] = http_backend_side(a, work, plain_tree)
        runs.append(r)
        shutil.rmtree(work, ignore_errors=True)
    med = lambda side, ph, k: statistics.median(run[side][ph][k] for run in runs) \
        if runs[0][side][ph].get(k) is not None else None
    fmt = lambda v, f: "–" if v is None else f(v)
    lines = ["# Git LFS: %d files of %.2f MiB (%.0f MiB), gitstow vs git http-backend" %
             (a.files, size / MiB, a.files * size / MiB), "",
             "`python3 benches/lfs_side_by_side.py --files %d --size-mib %s --runs %d`" %
             (a.files, a.size_mib, a.runs), "",
             "Medians of %d run(s). CPU: gitstow's process (the S3 server's work not counted) or "
             "every git process http-backend ran; RSS: gitstow's peak (VmHWM) or git's largest "
             "process; through gitstow: git's request and response bodies and LFS object bytes "
             "in and out (`/metrics`); signed: LFS bytes "
             "given presigned URLs (they went between the client and the bucket)." % a.runs, "",
             "| side | phase | wall | server CPU | peak RSS | through gitstow | signed |",
             "|---|---|---|---|---|---|---|"]
    for side in runs[0]:
        for ph in ("push", "clone"):
            lines.append("| %s | %s | %.2f s | %.2f s | %.0f MiB | %s | %s |" % (
                side, ph, med(side, ph, "wall"), med(side, ph, "cpu"), med(side, ph, "peak") / MiB,
                fmt(med(side, ph, "through"), lambda v: "%.1f MiB" % (v / MiB)),
                fmt(med(side, ph, "signed"), lambda v: "%.0f MiB" % (v / MiB))))
    lines += ["", "Machine: %d cores, %s; %s; %s" % (
        os.cpu_count(), subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip(),
        subprocess.run(["git", "lfs", "version"], capture_output=True, text=True).stdout.strip(),
        "S3: " + s3 if s3 else "no S3 column (S3_ENDPOINT unset)"), ""]
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
