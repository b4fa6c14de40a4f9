#!/usr/bin/env python3
"""A push of big objects with delta children (issue 42, finding 9; plan
0014): a pack of BLOBS constant blobs of SIZE_MIB MiB, each with one delta
child (the blob and 8 more bytes), a tree and a commit, POSTed raw to a
default `gitstow serve` (local store). Prints the server's peak RSS above
idle (VmHWM, reset before the push) and the push's wall time, then the same
for `git index-pack --stdin` on the same pack (its VmHWM from
/usr/bin/time), and the load average. Stdlib only.

usage: python3 benches/big_object_push.py BINARY [SIZE_MIB] [BLOBS]
       (defaults: 1024, 2: the probe's pack)
"""
import hashlib, http.client, os, re, struct, subprocess, sys, tempfile, time, zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rawpack import header, ofs, oid, push_raw, varint  # noqa: E402

binary = sys.argv[1]
size = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024) << 20
blobs = int(sys.argv[3]) if len(sys.argv) > 3 else 2


entries, ids = [], []
for k in range(blobs):
    base = bytes([97 + k]) * size
    tail = bytes([k]) * 8
    d = varint(size) + varint(size + 8)
    for o in range(0, size, 8 << 20):
        n = min(8 << 20, size - o)  # a copy moves at most 2^24 - 1 bytes
        d += bytes([0x80 | 0x0f | 0x70]) + struct.pack("<I", o) + struct.pack("<I", n)[:3]
    d += bytes([8]) + tail
    entries.append(("base", header(3, size) + zlib.compress(base, 1)))
    entries.append(("delta", d))
    ids.append(oid(b"blob", base))
    h = hashlib.sha1(b"blob %d\0" % (size + 8))
    h.update(base)
    h.update(tail)
    ids.append(h.digest())
    del base
tree = b"".join(b"100644 f%d\0" % i + x for i, x in enumerate(ids))
commit = b"tree %s\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\nbig\n" % oid(b"tree", tree).hex().encode()
body = bytearray(b"PACK" + struct.pack(">II", 2, len(entries) + 2))
last = 0
for kind, e in entries:
    at = len(body)
    if kind == "base":
        body += e
    else:
        body += header(6, len(e)) + ofs(at - last) + zlib.compress(e)
    last = at
body += header(2, len(tree)) + zlib.compress(tree)
body += header(1, len(commit)) + zlib.compress(commit)
body += hashlib.sha1(body).digest()
tip = oid(b"commit", commit).hex()
print("pack: %d bytes, %d blobs of %d MiB with a delta child each" % (len(body), blobs, size >> 20))
print("load average at the start:", open("/proc/loadavg").read().split()[:3])

d = tempfile.mkdtemp()
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", "file://%s/store" % d, "--create-store",
                      "--no-maintenance", "--tmp-dir", d], stdout=subprocess.PIPE,
                     stderr=open(d + "/err", "w"), text=True)
url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
port = int(url.rsplit(":", 1)[1])


def kb(field):
    return int(re.search(field + r":\s+(\d+)", open("/proc/%d/status" % p.pid).read()).group(1))


open("/proc/%d/clear_refs" % p.pid, "w").write("5")
idle = kb("VmRSS")
t0 = time.time()
push_raw(port, "big", tip, body)
wall = time.time() - t0
print("gitstow receive-pack: %.1f s, peak %d MiB above idle (VmHWM)" % (wall, (kb("VmHWM") - idle) >> 10))
p.terminate()
subprocess.run(["git", "init", "-q", "--bare", d + "/git.git"], check=True)
t0 = time.time()
out = subprocess.run(["/usr/bin/time", "-v", "git", "-C", d + "/git.git", "index-pack", "--stdin"],
                     input=bytes(body), capture_output=True)
wall = time.time() - t0
peak = int(re.search(rb"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
print("git index-pack --stdin: %.1f s, peak %d MiB (VmHWM)" % (wall, peak >> 10))
print("load average at the end:", open("/proc/loadavg").read().split()[:3])
subprocess.run(["rm", "-rf", d])
