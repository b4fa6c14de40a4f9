#!/usr/bin/env python3
"""Clients that ask and then read nothing, against `gitstow serve` (issue
42, findings 2 and 3; plan 0014): LISTINGS connections that ask for a
repository's advertisement of REFS refs (about 100 bytes a ref) and LFS
connections that ask for an LFS object of LFS_MIB MiB, each with a 4 KiB
receive buffer and never reading. While they hang, prints the server's
resident memory above idle (VmRSS, and VmHWM), its thread count, and how
long another user's `git ls-remote` of a small repository takes. Run it
with two binaries to compare. Stdlib only.

usage: python3 benches/slow_client_flood.py BINARY [LISTINGS] [REFS] [LFS] [LFS_MIB]
       (defaults: 1600, 22000, 400, 20: the probe's figures)
"""
import hashlib, http.client, json, os, re, resource, socket, struct, subprocess, sys, tempfile, time

binary = sys.argv[1]
listings = int(sys.argv[2]) if len(sys.argv) > 2 else 1600
n_refs = int(sys.argv[3]) if len(sys.argv) > 3 else 22_000
lfs = int(sys.argv[4]) if len(sys.argv) > 4 else 400
lfs_mib = int(sys.argv[5]) if len(sys.argv) > 5 else 20

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
d = tempfile.mkdtemp()
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", "file://%s/store" % d, "--create-store",
                      "--no-maintenance", "--tmp-dir", d],
                     stdout=subprocess.PIPE, stderr=open(d + "/err", "w"), text=True)
url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
port = int(url.rsplit(":", 1)[1])


def git(*args, **kw):
    return subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", *args], check=True, **kw)


w = d + "/w"
git("init", "-q", w)
open(w + "/a", "w").write("x")
git("-C", w, "add", "a")
git("-C", w, "commit", "-qm", "a")
git("-C", w, "push", "-q", url + "/r.git", "HEAD:refs/heads/main")
git("-C", w, "push", "-q", url + "/victim.git", "HEAD:refs/heads/main")
tip = git("-C", w, "rev-parse", "HEAD", capture_output=True, text=True).stdout.strip()
head = b"PACK" + struct.pack(">II", 2, 0)
empty = head + hashlib.sha1(head).digest()


def pkt(b):
    return b"%04x" % (len(b) + 4) + b


lines = []
for i in range(n_refs):
    line = ("%s %s refs/heads/feature/a-branch-with-a-long-name-%08d" % ("0" * 40, tip, i)).encode()
    if not lines:
        line += b"\0report-status"
    lines.append(pkt(line))
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
c.request("POST", "/r.git/git-receive-pack", b"".join(lines) + b"0000" + empty,
          {"Content-Type": "application/x-git-receive-pack-request"})
r = c.getresponse()
assert r.status == 200 and b"unpack ok" in r.read()[:40]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("GET", "/r.git/info/refs?service=git-upload-pack")
adv = len(c.getresponse().read())


def status(k):
    return int(re.search(k + r":\s+(\d+)", open("/proc/%d/status" % p.pid).read()).group(1))


def load():
    return open("/proc/loadavg").read().split()[:3]


def stalled(request):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.sendall(request)
    return s


def victim():
    t = time.time()
    try:
        r = subprocess.run(["git", "ls-remote", url + "/victim.git"], capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return time.time() - t, "timed out"
    return time.time() - t, r.returncode


def flood(name, request, n, settle=15):
    time.sleep(1)
    open("/proc/%d/clear_refs" % p.pid, "w").write("5")
    idle, threads0 = status("VmRSS"), status("Threads")
    conns = []
    t = time.time()
    for _ in range(n):
        conns.append(stalled(request))
    opened = time.time() - t
    peak_rss, peak_threads, answers = 0, 0, []
    for i in range(settle):
        time.sleep(1)
        peak_rss = max(peak_rss, status("VmRSS") - idle)
        peak_threads = max(peak_threads, status("Threads"))
        if i in (2, settle - 1):
            answers.append(victim())
    hwm = status("VmHWM") - idle
    for s in conns:
        s.close()
    print("| %s | %d | %.1f | %.0f | %.0f | %d → %d | %s | %s |" % (
        name, n, opened, peak_rss / 1024, hwm / 1024, threads0, peak_threads,
        ", ".join("%.2f s%s" % (a, "" if rc == 0 else " (%s)" % rc) for a, rc in answers),
        " ".join(load())))
    sys.stdout.flush()


print("binary: %s; advertisement of %d refs: %d bytes; LFS object: %d MiB" % (binary, n_refs, adv, lfs_mib))
print()
print("| flood | connections | s to open | RSS above idle, peak MiB | VmHWM above idle MiB | threads | victim ls-remote (at 3 s, at the end) | load |")
print("|---|---|---|---|---|---|---|---|")
flood("stalled listings", b"GET /r.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: localhost\r\n\r\n", listings)

if lfs:
    data = os.urandom(lfs_mib << 20)
    oid = hashlib.sha256(data).hexdigest()
    hdr = {"Accept": "application/vnd.git-lfs+json", "Content-Type": "application/vnd.git-lfs+json"}

    def batch(op):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/r.git/info/lfs/objects/batch", json.dumps(
            {"operation": op, "transfers": ["basic"], "objects": [{"oid": oid, "size": len(data)}]}), hdr)
        return json.loads(c.getresponse().read())["objects"][0]["actions"]

    def call(action, method, body):
        path = "/" + action["href"].split("/", 3)[3]
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request(method, path, body, action.get("header", {}))
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status

    up = batch("upload")
    call(up["upload"], "PUT", data)
    if "verify" in up:
        call(up["verify"], "POST", json.dumps({"oid": oid, "size": len(data)}))
    get = batch("download")["download"]
    path = "/" + get["href"].split("/", 3)[3]
    request = "GET %s HTTP/1.1\r\nHost: localhost\r\n" % path
    for k, v in get.get("header", {}).items():
        request += "%s: %s\r\n" % (k, v)
    flood("stalled LFS downloads", (request + "\r\n").encode(), lfs)

p.terminate()
p.wait()
