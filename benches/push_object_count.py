#!/usr/bin/env python3
"""What a push of many objects holds (issue #21, finding 8): a commit of N
files of one line each (N distinct tiny blobs, N/1,000 trees), made by
`git fast-import`, packed once by `git pack-objects`, then pushed as a raw
receive-pack request (creating refs/heads/main) to `gitstow serve` with its
defaults (a local store, automatic maintenance), CONCURRENCY pushes at once
into as many repositories. Prints the daemon's VmHWM above idle when the
last push is answered, the time, and the answers. Beside it, git's
receive-pack on the same pack: `git index-pack --stdin` (what receive-pack
runs for a pack over `receive.unpackLimit`) and the connectivity check
(`git rev-list --objects` of the new tip), each one process's peak RSS
(ru_maxrss) as `/usr/bin/time` reports it. Stdlib only.

usage: python3 benches/push_object_count.py [--objects 10000000]
           [--concurrency 1,2] [--gitstow target/release/gitstow]
           [--workdir DIR]   (the source and its pack are kept there)
"""
import argparse, http.client, os, re, shutil, subprocess, sys, tempfile, threading, time

ZERO = "0" * 40
MiB = 1024 * 1024


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def make_source(path, n):
    """A bare repository with one commit of n one-line files, 1,000 to a
    directory and 1,000 directories to a directory above them
    (`dNNN/dNNNNN/fN`: fast-import looks a tree's entries up one by one, so
    a larger directory makes the import quadratic; with one level, 10M
    files put 10,000 directories in the root tree and the import ran for
    hours)."""
    subprocess.run(["git", "init", "-q", "--bare", path], check=True)
    fi = subprocess.Popen(["git", "-C", path, "fast-import", "--quiet", "--done"],
                          stdin=subprocess.PIPE)
    w = fi.stdin
    w.write(b"commit refs/heads/main\ncommitter a <a@b> 1700000000 +0000\ndata 7\nmillion\n")
    batch = []
    for i in range(n):
        body = b"line %d\n" % i
        batch.append(b"M 100644 inline d%03d/d%05d/f%d\ndata %d\n%s"
                     % (i // 1000000, i // 1000, i, len(body), body))
        if len(batch) == 10000:
            w.write(b"".join(batch))
            batch = []
    w.write(b"".join(batch))
    w.write(b"\ndone\n")
    w.close()
    if fi.wait() != 0:
        sys.exit("fast-import failed")


def pkt(b):
    return b"%04x" % (len(b) + 4) + b


def push(port, repo, tip, pack):
    """One raw receive-pack request; returns (HTTP status, first report line)."""
    head = pkt(("%s %s refs/heads/main\0report-status" % (ZERO, tip)).encode()) + b"0000"
    size = os.path.getsize(pack)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=7200)
    c.putrequest("POST", "/%s/git-receive-pack" % repo)
    c.putheader("Content-Type", "application/x-git-receive-pack-request")
    c.putheader("Content-Length", str(len(head) + size))
    c.endheaders()
    c.send(head)
    with open(pack, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            c.send(chunk)
    r = c.getresponse()
    out = r.read()
    return r.status, out[:120].decode("latin-1").replace("\n", " | ")


def status(pid, key):
    return int(re.search(key + r":\s+(\d+)", open("/proc/%d/status" % pid).read()).group(1))


def gitstow_flood(a, workdir, tip, pack, k):
    store = os.path.join(workdir, "store-%d" % k)
    shutil.rmtree(store, ignore_errors=True)
    os.makedirs(store)
    p = subprocess.Popen([a.gitstow, "serve", "--listen", "127.0.0.1:0", "--store", "file://" + store, "--create-store",
                          "--tmp-dir", workdir], stdout=subprocess.PIPE,
                         stderr=open(workdir + "/serve.err", "a"), text=True)
    port = int(p.stdout.readline().split(":")[-1])
    time.sleep(1)
    idle = status(p.pid, "VmRSS")
    results = [None] * k

    def run(i):
        results[i] = push(port, "r%d.git" % i, tip, pack)

    t = time.time()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(k)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    took = time.time() - t
    peak = status(p.pid, "VmHWM")
    p.kill()
    p.wait()
    shutil.rmtree(store, ignore_errors=True)
    return (peak - idle) / 1024, idle / 1024, took, results


def timed(cmd, **kw):
    t = time.time()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit("%s failed: %s" % (cmd, r.stderr[-400:]))
    return int(r.stderr.decode().strip().splitlines()[-1]) / 1024, time.time() - t


def git_side(workdir, tip, pack):
    repo = os.path.join(workdir, "git-recv.git")
    shutil.rmtree(repo, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", repo], check=True)
    with open(pack, "rb") as f:
        ip, ip_s = timed(["git", "-C", repo, "index-pack", "--stdin", "--fix-thin"], stdin=f)
    subprocess.run(["git", "-C", repo, "update-ref", "refs/heads/main", tip], check=True)
    rl, rl_s = timed(["git", "-C", repo, "rev-list", "--objects", "--quiet", tip, "--not", "--all"])
    # receive-pack's own check walks the new tip against the existing refs;
    # with none, all of it:
    rl_all, rl_all_s = timed(["git", "-C", repo, "rev-list", "--objects", "--quiet", tip])
    shutil.rmtree(repo, ignore_errors=True)
    return ip, ip_s, max(rl, rl_all), rl_s + rl_all_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10_000_000)
    ap.add_argument("--concurrency", default="1,2")
    ap.add_argument("--gitstow", default="target/release/gitstow")
    ap.add_argument("--workdir")
    a = ap.parse_args()
    a.gitstow = os.path.abspath(a.gitstow)
    workdir = a.workdir or tempfile.mkdtemp(prefix="push-objects-")
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, "src-%d.git" % a.objects)
    pack = os.path.join(workdir, "src-%d.pack" % a.objects)
    if not os.path.exists(pack):
        shutil.rmtree(src, ignore_errors=True)
        t = time.time()
        make_source(src, a.objects)
        log("source of %d files made in %.0f s" % (a.objects, time.time() - t))
        with open(pack + ".tmp", "wb") as out:
            subprocess.run(["git", "-C", src, "pack-objects", "--all", "--stdout", "-q"],
                           stdin=subprocess.DEVNULL, stdout=out, check=True)
        os.rename(pack + ".tmp", pack)
    tip = subprocess.run(["git", "-C", src, "rev-parse", "refs/heads/main"], capture_output=True,
                         text=True, check=True).stdout.strip()
    with open(pack, "rb") as f:
        # The pack header's object count (gitformat-pack(5)): blobs, both
        # levels of trees, the root tree and the commit.
        objects = int.from_bytes(f.read(12)[8:12], "big")
    size = os.path.getsize(pack)
    print("pack: %d objects, %.0f MB" % (objects, size / 1e6))
    ip, ip_s, rl, rl_s = git_side(workdir, tip, pack)
    print("git index-pack --stdin: peak RSS %.0f MiB (%.0f B an object), %.0f s; "
          "connectivity check (rev-list --objects): %.0f MiB, %.0f s" % (ip, ip * MiB / objects, ip_s, rl, rl_s))
    sys.stdout.flush()
    for k in [int(x) for x in a.concurrency.split(",")]:
        above, idle, took, results = gitstow_flood(a, workdir, tip, pack, k)
        print("gitstow, %d push(es) at once: VmHWM %.0f MiB above idle (%.0f MiB idle; "
              "%.0f B an object a push), %.0f s; answers %s"
              % (k, above, idle, above * MiB / objects / k, took, results))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
