#!/usr/bin/env python3
"""Clone CPU of two gitstow builds, alternating, on one input: the check
that a change leaves the clone where it was (plan 0015, point 2 of issue
#44). Stdlib only.

usage: python3 benches/clone_compare.py BEFORE_BINARY AFTER_BINARY REPO [CLONES]

Each build serves its own local store (`--no-maintenance`), REPO's heads
and tags are pushed to each once, then CLONES (default 4) `git clone
--mirror`s are made from each, alternating which goes first. A clone's
figure is the daemon's utime+stime (+ children) from /proc/PID/stat, from
before the client starts to a second after it exits. Prints each clone's
figure and the median, with the load average at the end; the first clone
of each build warms its caches.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def start(binary, d):
    p = subprocess.Popen(
        [binary, "serve", "--store", f"file://{d}/store", "--create-store", "--listen", "127.0.0.1:0", "--no-maintenance"],
        stdout=subprocess.PIPE,
        stderr=open(f"{d}/err", "w"),
        text=True,
    )
    url = re.search(r"http://\S+", p.stdout.readline()).group(0)
    return p, url


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    builds = {"before": sys.argv[1], "after": sys.argv[2]}
    repo, clones = sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 4
    print("load at the start", open("/proc/loadavg").read().strip())
    work = tempfile.mkdtemp(prefix="clone-compare-")
    servers, res = {}, {}
    try:
        for name, binary in builds.items():
            d = os.path.join(work, name)
            os.makedirs(d)
            servers[name] = start(binary, d)
            subprocess.run(
                ["git", "-C", repo, "push", "-q", f"{servers[name][1]}/r.git",
                 "refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*"],
                check=True,
            )
            res[name] = []
        time.sleep(2)
        for i in range(clones):
            for name in (["before", "after"] if i % 2 == 0 else ["after", "before"]):
                p, url = servers[name]
                dst = os.path.join(work, f"c-{name}-{i}")
                c0 = cpu(p.pid)
                subprocess.run(["git", "clone", "-q", "--mirror", f"{url}/r.git", dst], check=True)
                time.sleep(1.0)
                res[name].append(round(cpu(p.pid) - c0, 2))
                shutil.rmtree(dst)
    finally:
        for p, _ in servers.values():
            p.terminate()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    print("load at the end", open("/proc/loadavg").read().strip())
    for name, v in res.items():
        print(f"{name}: {v} s, median {sorted(v)[len(v) // 2]} s")


if __name__ == "__main__":
    main()
