#!/usr/bin/env python3
"""The push-time LFS lock check at scale (issue 42, finding 8; plan 0014):
a repository with one directory of FILES files; user `alice` locks LOCKS of
them through the locks API; user `bob` pushes COMMITS commits, each editing
one unlocked file of that directory. Prints the push's wall time and the
server's CPU seconds for it (utime + stime from /proc), with and without
the locks, and the load average. Run it with two binaries to compare.
Stdlib only.

usage: python3 benches/lock_check.py BINARY [LOCKS] [COMMITS] [FILES]
       (defaults: 1000, 1000, 2000: the probe's figures)
"""
import base64, http.client, json, os, re, subprocess, sys, tempfile, time

binary = sys.argv[1]
n_locks = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
n_commits = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
n_files = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
assert n_files > n_locks
d = tempfile.mkdtemp()
store = "file://%s/store" % d


def token(name):
    out = subprocess.run([binary, "token", "create", "--store", store, "--create-store", "--name", name, "--grant", "*:write"],
                         check=True, capture_output=True, text=True).stdout
    return out.split()[-1]


alice, bob = token("alice"), token("bob")
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", store, "--no-maintenance",
                      "--tmp-dir", d], stdout=subprocess.PIPE, stderr=open(d + "/err", "w"), text=True)
url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
port = int(url.rsplit(":", 1)[1])


def git(*args, **kw):
    return subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", *args], check=True, **kw)


def cpu():
    f = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def remote(secret, repo):
    return url.replace("http://", "http://x:%s@" % secret) + "/" + repo + ".git"


def run(repo, locks):
    w = d + "/" + repo
    git("init", "-q", "-b", "main", w)
    os.makedirs(w + "/assets")
    for i in range(n_files):
        open("%s/assets/f%05d.bin" % (w, i), "w").write("file %d\n" % i)
    git("-C", w, "add", ".")
    git("-C", w, "commit", "-qm", "files")
    git("-C", w, "push", "-q", remote(alice, repo), "main")
    auth = "Basic " + base64.b64encode(b"x:" + alice.encode()).decode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(locks):
        c.request("POST", "/%s.git/info/lfs/locks" % repo, json.dumps({"path": "assets/f%05d.bin" % i}),
                  {"Authorization": auth, "Content-Type": "application/vnd.git-lfs+json",
                   "Accept": "application/vnd.git-lfs+json"})
        r = c.getresponse()
        r.read()
        assert r.status == 201, r.status
    for i in range(n_commits):
        f = "%s/assets/f%05d.bin" % (w, n_files - 1 - (i % (n_files - n_locks)))
        open(f, "a").write("edit %d\n" % i)
        git("-C", w, "commit", "-qam", "edit %d" % i)
    before, t0 = cpu(), time.time()
    out = subprocess.run(["git", "-C", w, "push", "--no-verify", remote(bob, repo), "main"],
                         capture_output=True, text=True)
    wall, used = time.time() - t0, cpu() - before
    assert out.returncode == 0, out.stderr
    print("%5d locks, %d commits, %d files in the directory: push %.2f s wall, server CPU %.2f s"
          % (locks, n_commits, n_files, wall, used), flush=True)


print("load average at the start:", open("/proc/loadavg").read().split()[:3])
run("nolocks", 0)
run("locks", n_locks)
print("load average at the end:", open("/proc/loadavg").read().split()[:3])
p.terminate()
