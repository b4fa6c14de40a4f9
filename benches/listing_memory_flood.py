#!/usr/bin/env python3
"""Peak memory of `gitstow serve` while CLIENTS `git ls-remote` run at once
against one repository of REFS refs (the hardening issue's finding 4: 12
listings at 1.1M refs reached 3.2 GB). The refs are made by raw pushes of
100,000 creates each (every ref at the same commit). Prints VmHWM above
idle and the wall time of the flood, for protocol v2 (`ls-refs`) and v0
(`info/refs`). Stdlib only.

usage: python3 benches/listing_memory_flood.py [BINARY] [REFS] [CLIENTS]
       (defaults: target/release/gitstow, 500000, 12)
"""
import hashlib, http.client, os, re, shutil, struct, subprocess, sys, tempfile, threading, time

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/gitstow"
n_refs = int(sys.argv[2]) if len(sys.argv) > 2 else 500_000
clients = int(sys.argv[3]) if len(sys.argv) > 3 else 12
d = tempfile.mkdtemp()
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", "file://%s/store" % d, "--create-store",
                      "--no-maintenance"], stdout=subprocess.PIPE, stderr=open(d + "/err", "w"), text=True)
url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
port = int(url.rsplit(":", 1)[1])
w = d + "/w"
subprocess.run(["git", "init", "-q", w], check=True)
open(w + "/a", "w").write("x")
subprocess.run(["git", "-C", w, "add", "a"], check=True)
subprocess.run(["git", "-C", w, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "a"], check=True)
subprocess.run(["git", "-C", w, "push", "-q", url + "/r.git", "HEAD:refs/heads/main"], check=True)
tip = subprocess.run(["git", "-C", w, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
head = b"PACK" + struct.pack(">II", 2, 0)
empty = head + hashlib.sha1(head).digest()


def pkt(b):
    return b"%04x" % (len(b) + 4) + b


t = time.time()
for start in range(0, n_refs, 100_000):
    lines = []
    for i in range(start, min(n_refs, start + 100_000)):
        line = ("%s %s refs/changes/%02d/%d/1" % ("0" * 40, tip, i % 100, i)).encode()
        if not lines:
            line += b"\0report-status"
        lines.append(pkt(line))
    body = b"".join(lines) + b"0000" + empty
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/r.git/git-receive-pack", body, {"Content-Type": "application/x-git-receive-pack-request"})
    r = c.getresponse()
    assert r.status == 200 and b"unpack ok" in r.read()[:40]
print("%d refs made in %.1f s" % (n_refs, time.time() - t))


def status(k):
    return int(re.search(k + r":\s+(\d+)", open("/proc/%d/status" % p.pid).read()).group(1))


for version in ("2", "0"):
    time.sleep(1)
    open("/proc/%d/clear_refs" % p.pid, "w").write("5")
    idle = status("VmRSS")
    outs = [None] * clients

    def run(i):
        outs[i] = subprocess.run(["git", "-c", "protocol.version=" + version, "ls-remote", url + "/r.git"],
                                 capture_output=True).stdout.count(b"\n")

    t = time.time()
    ts = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    print("v%s: %d × ls-remote of %d lines in %.1f s; VmHWM %.1f MiB above idle (%.1f MiB idle)"
          % (version, clients, outs[0], time.time() - t, (status("VmHWM") - idle) / 1024, idle / 1024))
p.kill()
shutil.rmtree(d)
