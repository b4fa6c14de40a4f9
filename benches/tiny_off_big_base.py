#!/usr/bin/env python3
"""Tiny blobs stored as deltas of a big base (issue 42, low item; plan
0014): a pack of one blob of BASE_MIB MiB of incompressible noise and TINY
deltas off it, each copying 16 bytes of the base and
adding its number, POSTed raw to `gitstow serve` (local store). Then times
`gitstow fsck --repo` and `gitstow maintain --all` on the store, and
`git fsck` of the same pack in a bare repository, with the load average.
Stdlib only.

usage: python3 benches/tiny_off_big_base.py BINARY [BASE_MIB] [TINY]
       (defaults: 256, 200)
"""
import hashlib, http.client, os, re, struct, subprocess, sys, tempfile, time, zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rawpack import header, ofs, oid, push_raw, varint  # noqa: E402

binary = sys.argv[1]
base_size = (int(sys.argv[2]) if len(sys.argv) > 2 else 256) << 20
tiny = int(sys.argv[3]) if len(sys.argv) > 3 else 200


base = os.urandom(base_size)
body = bytearray(b"PACK" + struct.pack(">II", 2, tiny + 3))
body += header(3, len(base)) + zlib.compress(base, 1)
ids = [oid(b"blob", base)]
for i in range(tiny):
    at = len(body)
    extra = b"%d\n" % i
    o = (i * 4096) % (base_size - 16)
    d = varint(base_size) + varint(16 + len(extra)) + bytes([0x80 | 0x0f | 0x10]) + struct.pack("<I", o) + bytes([16])
    d += bytes([len(extra)]) + extra
    body += header(7, len(d)) + ids[0] + zlib.compress(d)
    ids.append(oid(b"blob", base[o:o + 16] + extra))
tree = b"".join(b"100644 f%05d\0" % i + x for i, x in enumerate(ids))
commit = b"tree %s\nauthor a <a@b> 0 +0000\ncommitter a <a@b> 0 +0000\n\ntiny\n" % oid(b"tree", tree).hex().encode()
body += header(2, len(tree)) + zlib.compress(tree)
body += header(1, len(commit)) + zlib.compress(commit)
body += hashlib.sha1(body).digest()
tip = oid(b"commit", commit).hex()
print("pack: %d bytes: a %d MiB blob and %d tiny deltas of it" % (len(body), base_size >> 20, tiny))
print("load average at the start:", open("/proc/loadavg").read().split()[:3])
d = tempfile.mkdtemp()
store = "file://%s/store" % d
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", store, "--create-store", "--no-maintenance",
                      "--tmp-dir", d], stdout=subprocess.PIPE, stderr=open(d + "/err", "w"), text=True)
url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
port = int(url.rsplit(":", 1)[1])


push_raw(port, "tiny", tip, body)
p.terminate()
p.wait()
for args in (["fsck", "--repo", "tiny"], ["maintain", "--all"], ["fsck", "--repo", "tiny"]):
    t0 = time.time()
    out = subprocess.run([binary, *args, "--store", store], capture_output=True, text=True)
    print("gitstow %s: %.1f s, exit %d" % (" ".join(args), time.time() - t0, out.returncode))
subprocess.run(["git", "init", "-q", "--bare", d + "/git.git"], check=True)
subprocess.run(["git", "-C", d + "/git.git", "index-pack", "--stdin"], input=bytes(body), capture_output=True, check=True)
t0 = time.time()
subprocess.run(["git", "-C", d + "/git.git", "fsck", "--unreachable"], capture_output=True)
print("git fsck: %.1f s" % (time.time() - t0))
print("load average at the end:", open("/proc/loadavg").read().split()[:3])
subprocess.run(["rm", "-rf", d])
