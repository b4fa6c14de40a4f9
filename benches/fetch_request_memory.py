#!/usr/bin/env python3
"""What one upload-pack request of many `want` lines costs `gitstow serve`
in memory: a repository of one commit, then a v2 `fetch` of N wants of its
tip (the hostile case of issue #12: 999,990 wants are 50 MB of request).
Prints the peak RSS above idle (VmHWM after resetting it through
/proc/PID/clear_refs, minus VmRSS before the request). Stdlib only.

usage: python3 benches/fetch_request_memory.py [BINARY] [N]
       (defaults: target/release/gitstow, 999990)
"""
import os, subprocess, sys, re, time, urllib.request, tempfile, shutil
binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/gitstow"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 999990
d = tempfile.mkdtemp()
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", "file://%s/store" % d, "--create-store", "--no-maintenance"], stdout=subprocess.PIPE, stderr=open(d + "/err", "w"), text=True)
url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
w = d + "/w"; subprocess.run(["git", "init", "-q", w], check=True)
open(w + "/a", "w").write("x")
subprocess.run(["git", "-C", w, "add", "a"], check=True)
subprocess.run(["git", "-C", w, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "a"], check=True)
subprocess.run(["git", "-C", w, "push", "-q", url + "/r.git", "HEAD:refs/heads/main"], check=True)
tip = subprocess.run(["git", "-C", w, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
def pkt(s): b = s.encode(); return b"%04x" % (len(b) + 4) + b
body = pkt("command=fetch\n") + pkt("object-format=sha1\n") + b"0001" + b"".join(pkt("want %s\n" % tip) for _ in range(n)) + pkt("done\n") + b"0000"
def status(k): return int(re.search(k + r":\s+(\d+)", open("/proc/%d/status" % p.pid).read()).group(1))
time.sleep(0.5)
open("/proc/%d/clear_refs" % p.pid, "w").write("5")
idle = status("VmRSS")
req = urllib.request.Request(url + "/r.git/git-upload-pack", data=body, headers={"Content-Type": "application/x-git-upload-pack-request", "Git-Protocol": "version=2"})
t = time.time(); out = urllib.request.urlopen(req).read(); t = time.time() - t
print("wants=%d body=%.1f MB response=%d bytes in %.2f s; idle %d kB, VmHWM %d kB, above idle %.1f MB" % (n, len(body) / 1e6, len(out), t, idle, status("VmHWM"), (status("VmHWM") - idle) / 1024))
p.kill(); shutil.rmtree(d)
