#!/usr/bin/env python3
"""Admin commands on S3 against the local store (issue 48, plan 0016).

1. `gitstow fsck --all` of each REPO (a bare mirror, e.g. one `fetch`
   brought) whose branches and tags are pushed through `gitstow serve` into a
   local store and into a fresh prefix of the S3 bucket: wall seconds per
   run, and the S3 run's request count (fsck's `Store requests:` line).
2. `gitstow repo list` of N empty repositories (made with `repo create`,
   8 at a time) on a fresh S3 prefix: wall seconds per run.

Each measurement runs RUNS times; the report gives every run, the median,
the load average before each part, and the S3 endpoint's answer to one
small GET (the per-request floor). S3 settings come from the environment
the tests use (S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, S3_BUCKET,
S3_REGION: `eval "$(bash scripts/s3-radosgw.sh env)"`). Stdlib only.

usage: python3 benches/admin_s3.py BINARY [--runs 3] [--repos 1000]
                                   [--out FILE.md] REPO...
"""
import argparse, os, re, statistics, subprocess, sys, tempfile, time, uuid

ap = argparse.ArgumentParser()
ap.add_argument("binary")
ap.add_argument("repo", nargs="+")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--repos", type=int, default=1000)
ap.add_argument("--out")
a = ap.parse_args()

for v in ["S3_ENDPOINT", "S3_ACCESS_KEY", "S3_SECRET_KEY", "S3_BUCKET"]:
    if not os.environ.get(v):
        sys.exit(f"admin_s3: {v} is not set (eval \"$(bash scripts/s3-radosgw.sh env)\")")
env = dict(os.environ,
           AWS_ACCESS_KEY_ID=os.environ["S3_ACCESS_KEY"],
           AWS_SECRET_ACCESS_KEY=os.environ["S3_SECRET_KEY"],
           AWS_ENDPOINT_URL=os.environ["S3_ENDPOINT"],
           AWS_REGION=os.environ.get("S3_REGION", "us-east-1"))
bucket = os.environ["S3_BUCKET"]
run_id = uuid.uuid4().hex[:8]
tmp = tempfile.mkdtemp(prefix="admin-s3-")
lines = []
# `serve --create-store` exists from plan 0016 step 2 on (an older binary
# makes a missing local store unasked).
CREATE_STORE = "--create-store" in subprocess.run([a.binary, "serve", "--help"],
                                                  capture_output=True, text=True).stdout


def say(s=""):
    print(s, flush=True)
    lines.append(s)


def load():
    return open("/proc/loadavg").read().split()[:3]


def serve_push(store, name, mirror):
    """Push `mirror` to `name` through a serve on `store`; returns seconds."""
    p = subprocess.Popen([a.binary, "serve", "--listen", "127.0.0.1:0", "--store", store,
                          "--no-maintenance", *(["--create-store"] if CREATE_STORE else []), "--tmp-dir", tmp], env=env,
                         stdout=subprocess.PIPE, stderr=open(f"{tmp}/serve.err", "a"), text=True)
    try:
        url = re.search(r"(http://\S+)", p.stdout.readline()).group(1)
        t = time.monotonic()
        subprocess.run(["git", "push", "-q", f"{url}/{name}.git", "refs/heads/*:refs/heads/*",
                        "refs/tags/*:refs/tags/*"], cwd=mirror,
                       check=True, capture_output=True)
        return time.monotonic() - t
    finally:
        p.terminate()
        p.wait()


def timed(args):
    t = time.monotonic()
    r = subprocess.run([a.binary, *args], env=env, capture_output=True, text=True)
    wall = time.monotonic() - t
    if r.returncode != 0:
        sys.exit(f"admin_s3: {' '.join(args)} failed ({r.returncode}): {r.stdout}{r.stderr}")
    return wall, r


def floor_ms():
    """Median of 20 anonymous `GET /` over one connection (http.client)."""
    import http.client, urllib.parse
    u = urllib.parse.urlparse(os.environ["S3_ENDPOINT"])
    c = http.client.HTTPConnection(u.hostname, u.port or 80)
    ts = []
    for _ in range(20):
        t = time.monotonic()
        c.request("GET", "/")
        c.getresponse().read()
        ts.append(time.monotonic() - t)
    return statistics.median(ts) * 1000


say(f"# Admin commands on S3 against the local store ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
say()
say(f"`python3 benches/admin_s3.py {a.binary} --runs {a.runs} --repos {a.repos} {' '.join(a.repo)}`;")
say(f"S3: {os.environ['S3_ENDPOINT']} (anonymous `GET /`: median {floor_ms():.2f} ms); {os.cpu_count()} cores.")
say()
say("## fsck --all")
say()
say("| repository | store | push s | fsck s, each run | median | S3 requests |")
say("|---|---|---|---|---|---|")
for mirror in a.repo:
    name = os.path.basename(mirror.rstrip("/")).removesuffix(".git")
    if name == "repo":
        name = os.path.basename(os.path.dirname(mirror.rstrip("/")))
    stores = [("local", f"file://{tmp}/local-{name}"), ("S3", f"s3://{bucket}/admin-{run_id}-{name}")]
    say(f"<!-- load before {name}: {' '.join(load())} -->")
    for kind, store in stores:
        pushed = serve_push(store, "r", mirror)
        walls, requests = [], "-"
        for _ in range(a.runs):
            wall, r = timed(["fsck", "--store", store, "--all", "--progress"])
            walls.append(wall)
            assert ": ok" in r.stdout, r.stdout
            m = re.search(r"Store requests: (\d+) \(([^)]*)\)", r.stderr)
            if m:
                requests = f"{m.group(1)} ({m.group(2)})"
        say(f"| {name} | {kind} | {pushed:.1f} | {', '.join(f'{w:.2f}' for w in walls)} | "
            f"{statistics.median(walls):.2f} | {requests} |")
    say(f"<!-- load after {name}: {' '.join(load())} -->")
say()
say(f"## repo list of {a.repos} repositories on S3")
say()
store = f"s3://{bucket}/admin-{run_id}-many"
t = time.monotonic()
procs = []
for i in range(a.repos):
    procs.append(subprocess.Popen([a.binary, "repo", "create", "--store", store, f"org/r{i}"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if len(procs) >= 8:
        assert procs.pop(0).wait() == 0
for p in procs:
    assert p.wait() == 0
say(f"Made with `repo create`, 8 at a time, in {time.monotonic() - t:.1f} s. Load before listing: {' '.join(load())}.")
say()
walls = []
for _ in range(a.runs):
    wall, r = timed(["repo", "list", "--store", store])
    walls.append(wall)
    assert r.stdout.count("\n") == a.repos + 1, r.stdout[-300:]
say(f"| runs (s) | median |")
say("|---|---|")
say(f"| {', '.join(f'{w:.2f}' for w in walls)} | {statistics.median(walls):.2f} |")
say()
say(f"Load at the end: {' '.join(load())}.")
if a.out:
    open(a.out, "w").write("\n".join(lines) + "\n")
