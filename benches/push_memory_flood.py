#!/usr/bin/env python3
"""Peak memory of `gitstow serve` under floods of the worst pushes of the
hardening issue (#21), with a webhook configured (events go through the
outbox): push options far over the limit, push options at the limit, ref
names at the length limit, deep ref names, and a command list over its cap.
Each scenario sends CONCURRENCY raw receive-pack requests at once (twice
the default push slots on 2 cores) and prints VmHWM above idle (VmHWM is
reset through /proc/PID/clear_refs before each scenario), the answers'
first lines and the time taken. Stdlib only.

usage: python3 benches/push_memory_flood.py [BINARY] [CONCURRENCY]
       (defaults: target/release/gitstow, 4)
"""
import hashlib, http.client, http.server, os, re, shutil, struct, subprocess, sys, tempfile, threading, time

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/gitstow"
concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 4
d = tempfile.mkdtemp()
store = "file://%s/store" % d
os.makedirs(d + "/store")

received = []


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        received.append(len(self.rfile.read(n)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
threading.Thread(target=hook.serve_forever, daemon=True).start()
open(d + "/secret", "w").write("a-shared-secret-of-some-length\n")
subprocess.run([binary, "webhook", "add", "--store", store, "--name", "w", "--repo", "*",
                "--url", "http://127.0.0.1:%d/" % hook.server_port, "--secret-file", d + "/secret", "--allow-internal"],
               check=True, capture_output=True)
p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--store", store, "--no-maintenance",
                      "--tmp-dir", d], stdout=subprocess.PIPE, stderr=open(d + "/err", "w"), text=True)
url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
port = int(url.rsplit(":", 1)[1])
w = d + "/w"
subprocess.run(["git", "init", "-q", w], check=True)
open(w + "/a", "w").write("x")
subprocess.run(["git", "-C", w, "add", "a"], check=True)
subprocess.run(["git", "-C", w, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "a"], check=True)
subprocess.run(["git", "-C", w, "push", "-q", url + "/r.git", "HEAD:refs/heads/main"], check=True)
tip = subprocess.run(["git", "-C", w, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
ZERO = "0" * 40
body = b"PACK" + struct.pack(">II", 2, 0)
EMPTY_PACK = body + hashlib.sha1(body).digest()


def pkt(b):
    return b"%04x" % (len(b) + 4) + b


def status(k):
    return int(re.search(k + r":\s+(\d+)", open("/proc/%d/status" % p.pid).read()).group(1))


def post(parts, length):
    """POSTs the body made of `parts` (an iterable of bytes) of `length` bytes."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.putrequest("POST", "/r.git/git-receive-pack")
    c.putheader("Content-Type", "application/x-git-receive-pack-request")
    c.putheader("Content-Length", str(length))
    c.endheaders()
    for part in parts:
        c.send(part)
    r = c.getresponse()
    out = r.read()
    return r.status, out


def commands(names, caps):
    out = []
    for i, n in enumerate(names):
        line = ("%s %s %s" % (ZERO, tip, n)).encode()
        if i == 0:
            line += b"\0" + caps.encode()
        out.append(pkt(line))
    out.append(b"0000")
    return b"".join(out)


def scenario(title, make):
    """`make(i)` gives (parts, length) for request i."""
    time.sleep(0.5)
    open("/proc/%d/clear_refs" % p.pid, "w").write("5")
    idle = status("VmRSS")
    results = [None] * concurrency

    def run(i):
        parts, length = make(i)
        results[i] = post(parts, length)

    t = time.time()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    took = time.time() - t
    peak = status("VmHWM")
    first = results[0]
    said = first[1][:160].decode("latin-1").replace("\n", " | ")
    print("%-52s %d × in %6.1f s: VmHWM %7.1f MiB above idle (%.1f MiB idle); HTTP %d %r"
          % (title, concurrency, took, (peak - idle) / 1024, idle / 1024, first[0], said))
    sys.stdout.flush()


CAPS = "report-status push-options"


def options_request(n_options, size, tag):
    def make(i):
        head = commands(["refs/heads/%s-%d" % (tag, i)], CAPS)
        option = pkt(b"o" * (size - 4))  # `size` bytes a pkt-line

        def parts():
            yield head
            chunk = option * 64
            left = n_options
            while left >= 64:
                yield chunk
                left -= 64
            if left:
                yield option * left
            yield b"0000"
            yield EMPTY_PACK

        return parts(), len(head) + n_options * len(option) + 4 + len(EMPTY_PACK)
    return make


def names_request(n, name_of, caps="report-status"):
    def make(i):
        b = commands([name_of(i, j) for j in range(n)], caps) + EMPTY_PACK
        return [b], len(b)
    return make


scenario("push options far over the limit (10,000 × 65 KB)", options_request(10_000, 65_000, "over"))
scenario("push options at the limit (1,000 × 64 B), webhook", options_request(1_000, 64, "at"))
scenario("1,000 ref names of 4,000 B (2,000 parts), webhook",
         names_request(1_000, lambda i, j: "refs/heads/%s%d-%d" % ("d/" * 1_994, i, j)))
scenario("400 ref names of 64 KB (refused per ref)",
         names_request(400, lambda i, j: "refs/heads/%d-%d/%s" % (i, j, "x/" * 32_000)))
scenario("a command list over its cap (9,000 × 4,000 B)",
         names_request(9_000, lambda i, j: "refs/heads/c%s%d-%d" % ("d/" * 1_994, i, j)))
time.sleep(10)
print("webhook deliveries: %d, largest %d bytes" % (len(received), max(received or [0])))
outbox = [os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d + "/store/.gitstow") for f in fs]
print("outbox entries left: %d" % len(outbox))
p.kill()
hook.shutdown()
shutil.rmtree(d)
