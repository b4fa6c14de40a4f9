#!/usr/bin/env python3
"""git over SSH side by side: `gitstow serve --ssh-listen` against OpenSSH's
sshd running git-upload-pack / git-receive-pack on loopback (the standard
self-hosted setup), on the same repository (issue #23). Stdlib only.

usage: python3 benches/ssh_side_by_side.py --repo SRC [--name NAME] [--runs 3]
           [--behind 100] [--branch master] [--gitstow target/release/gitstow]
           [--sshd /usr/sbin/sshd] [--workdir DIR] [--out FILE.md]

sshd is Debian's `openssh-server` (`apt-get install openssh-server`); it
runs as a foreground daemon on a free port with its own host key, config
and authorized_keys in the work dir (`AcceptEnv GIT_PROTOCOL`, so clients
speak protocol v2 to it, as the git documentation recommends).

Each run, on each server (the order alternates by run):
1. push: the branches and tags of SRC with BRANCH BEHIND commits behind
   its tip, into an empty repository;
   - git's repository then gets what a tuned server does after a push:
     `git repack -adb` (bitmaps) and `git commit-graph write --reachable`,
     not measured; gitstow runs on its defaults (automatic maintenance).
2. clone: `git clone --bare`;
3. incremental push: BRANCH to its tip (BEHIND commits);
4. incremental fetch: into the clone of 2, BRANCH's new commits.

Figures (benches/README.md has the method of side_by_side.py, reused):
- wall: the git client command's elapsed time;
- server CPU: gitstow's daemon (utime+stime of its threads, from /proc)
  against sshd's listener with every process it waited for (the per-
  connection sshd processes, the shell, git-upload-pack / receive-pack /
  pack-objects / index-pack: cutime+cstime of the listener), both until
  the CPU stops moving after the client exits;
- peak RSS: gitstow's VmHWM (in brackets: above its resident size when
  the operation began, i.e. without the caches and heap earlier requests
  left) against the peak of the summed RSS of sshd's process tree (sampled
  every 20 ms; git's own caches are the kernel's page cache, not counted);
Ratios are gitstow / sshd+git; medians over the runs.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import side_by_side as sbs  # noqa: E402  (git, timed_client, proc_cpu, gitstow_phase, ...)

PHASES = ["push", "clone", "incremental push", "incremental fetch"]


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)


def ssh_command(key):
    return ("ssh -i %s -o IdentitiesOnly=yes -o IdentityAgent=none -o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR" % key)


def tree(pid):
    """pid and every descendant of it."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class TreeRss(threading.Thread):
    """Peak of the summed VmRSS of a process tree, sampled every 20 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stop, self.peak = pid, threading.Event(), 0

    def run(self):
        while True:
            total = 0
            for p in tree(self.pid):
                try:
                    total += sbs.proc_status(p).get("VmRSS", 0)
                except OSError:
                    pass
            self.peak = max(self.peak, total)
            if self.stop.wait(0.02):
                return


def sshd_phase(pid, client_args, err_path):
    sampler = TreeRss(pid)
    cpu0 = sbs.proc_cpu(pid)
    sampler.start()
    wall = sbs.timed_client(client_args, err_path)
    (cpu1, _), deadline = sbs.proc_cpu(pid), time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.3)
        cpu2, _ = sbs.proc_cpu(pid)
        settled, cpu1 = cpu2 - cpu1 < 0.02 and len(tree(pid)) == 1, cpu2
        if settled:
            break
    sampler.stop.set()
    sampler.join()
    return {"wall": wall, "cpu": cpu1 - cpu0[0], "peak": sampler.peak}


def start_sshd(a, work, key):
    os.makedirs("/run/sshd", exist_ok=True)
    host_key = os.path.join(work, "sshd_host_ed25519")
    keygen(host_key)
    auth = os.path.join(work, "authorized_keys")
    shutil.copy(key + ".pub", auth)
    os.chmod(auth, 0o600)
    port = sbs.free_port()
    cfg = os.path.join(work, "sshd_config")
    with open(cfg, "w") as f:
        f.write("\n".join([
            "Port %d" % port, "ListenAddress 127.0.0.1", "HostKey " + host_key,
            "AuthorizedKeysFile " + auth, "PidFile " + os.path.join(work, "sshd.pid"),
            "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "AcceptEnv GIT_PROTOCOL", "PrintMotd no", "X11Forwarding no", ""]))
    p = subprocess.Popen([a.sshd, "-D", "-e", "-f", cfg], stderr=open(os.path.join(work, "sshd.err"), "w"))
    for _ in range(100):
        try:
            import socket
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return p, port


def start_gitstow(a, work, key):
    store = "file://" + os.path.join(work, "gs-store")
    gs = [a.gitstow]
    out = subprocess.run(gs + ["token", "create", "--create-store", "--name", "bench", "--grant", "*:write",
                               "--store", store], capture_output=True, text=True)
    if out.returncode:
        sys.exit("token create: " + out.stderr)
    out = subprocess.run(gs + ["key", "add", "--token", "bench", key + ".pub", "--store", store],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit("key add: " + out.stderr)
    port = sbs.free_port()
    err = open(os.path.join(work, "gitstow.err"), "w")
    p = subprocess.Popen(gs + ["serve", "--listen", "127.0.0.1:0", "--store", store, "--create-store",
                               "--ssh-listen", "127.0.0.1:%d" % port],
                         stdout=subprocess.PIPE, stderr=err, text=True)
    for line in p.stdout:
        if "gitstow ssh on" in line:
            break
    else:
        sys.exit("gitstow did not start (see %s)" % err.name)
    threading.Thread(target=p.stdout.read, daemon=True).start()
    return p, port


def one_side(a, run, side, work, key, src):
    """The four phases on one server: {phase: figures}."""
    os.makedirs(work)
    if side == "gitstow":
        proc, port = start_gitstow(a, work, key)
        url = "ssh://git@127.0.0.1:%d/bench/%s.git" % (port, a.name)
        phase = lambda args, tag: sbs.gitstow_phase(proc.pid, args, os.path.join(work, tag + ".err"))
    else:
        proc, port = start_sshd(a, work, key)
        bare = os.path.join(work, "srv", a.name + ".git")
        sbs.git("init", "--quiet", "--bare", bare)
        url = "ssh://root@127.0.0.1:%d%s" % (port, bare)
        phase = lambda args, tag: sshd_phase(proc.pid, args, os.path.join(work, tag + ".err"))
    os.environ["GIT_SSH_COMMAND"] = ssh_command(key)
    res = {}
    try:
        client = os.path.join(work, "client.git")
        sbs.git("clone", "--quiet", "--bare", src, client)
        tip = sbs.git("-C", client, "rev-parse", a.branch).stdout.strip()
        sbs.git("-C", client, "update-ref", "refs/heads/" + a.branch, "%s~%d" % (tip, a.behind))
        res["push"] = phase(["-C", client, "push", "--quiet", url,
                             "refs/heads/*:refs/heads/*", "refs/tags/*:refs/tags/*"], "push")
        if side == "sshd":
            sbs.git("-C", bare, "repack", "-adbq")
            sbs.git("-C", bare, "commit-graph", "write", "--reachable")
        clone = os.path.join(work, "clone.git")
        res["clone"] = phase(["clone", "--quiet", "--bare", url, clone], "clone")
        sbs.git("-C", client, "update-ref", "refs/heads/" + a.branch, tip)
        res["incremental push"] = phase(["-C", client, "push", "--quiet", url, a.branch], "ipush")
        res["incremental fetch"] = phase(["-C", clone, "fetch", "--quiet", url,
                                          "refs/heads/%s:refs/heads/%s" % (a.branch, a.branch)], "ifetch")
        got = sbs.git("-C", clone, "rev-parse", a.branch).stdout.strip()
        if got != tip:
            sys.exit("%s: the clone's %s is %s, not %s" % (side, a.branch, got, tip))
        res["refs"] = sbs.git("-C", clone, "for-each-ref", "--format=%(objectname) %(refname)").stdout
    finally:
        proc.terminate()
        proc.wait()
    return res


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repo", required=True)
    p.add_argument("--name")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--behind", type=int, default=100)
    p.add_argument("--branch", default="master")
    p.add_argument("--gitstow", default=os.path.join(HERE, "..", "target", "release", "gitstow"))
    p.add_argument("--sshd", default="/usr/sbin/sshd")
    p.add_argument("--workdir")
    p.add_argument("--out")
    a = p.parse_args()
    a.name = a.name or os.path.basename(a.repo.rstrip("/")).removesuffix(".git")
    a.loadavg = os.getloadavg()
    for tool in (a.sshd, a.gitstow):
        if not os.path.exists(tool):
            sys.exit("missing %s (sshd: apt-get install openssh-server; gitstow: cargo build --release)" % tool)
    base = tempfile.mkdtemp(prefix="ssh-sbs-", dir=a.workdir)
    key = os.path.join(base, "client_ed25519")
    keygen(key)
    runs = []
    for i in range(a.runs):
        order = ["gitstow", "sshd"] if i % 2 == 0 else ["sshd", "gitstow"]
        r = {}
        for side in order:
            sbs.log("run %d: %s" % (i + 1, side))
            r[side] = one_side(a, i, side, os.path.join(base, "run%d-%s" % (i, side)), key, a.repo)
        if r["gitstow"].pop("refs") != r["sshd"].pop("refs"):
            sys.exit("the two clones differ in their refs")
        runs.append(r)
        shutil.rmtree(os.path.join(base, "run%d-gitstow" % i), ignore_errors=True)
        shutil.rmtree(os.path.join(base, "run%d-sshd" % i), ignore_errors=True)
    med = lambda side, ph, k: statistics.median(r[side][ph][k] for r in runs)
    lines = ["# git over SSH: gitstow vs OpenSSH sshd + git, %s" % a.name, "",
             "`python3 benches/ssh_side_by_side.py --repo %s --runs %d --behind %d --branch %s`"
             % (a.name, a.runs, a.behind, a.branch), "",
             "Medians of %d runs; server CPU in seconds, RSS in MiB; ratio = gitstow / sshd+git." % a.runs, "",
             "| operation | wall gitstow | wall sshd+git | CPU gitstow | CPU sshd+git | CPU ratio "
             "| peak RSS gitstow (above idle) | peak RSS sshd+git | RSS ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for ph in PHASES:
        gc, sc = med("gitstow", ph, "cpu"), med("sshd", ph, "cpu")
        gr, sr = med("gitstow", ph, "peak") / 2**20, med("sshd", ph, "peak") / 2**20
        ga = med("gitstow", ph, "above_idle") / 2**20
        lines.append("| %s | %.2f s | %.2f s | %.2f | %.2f | %.2f× | %.0f (%.0f) | %.0f | %.2f× |" % (
            ph, med("gitstow", ph, "wall"), med("sshd", ph, "wall"), gc, sc, gc / sc if sc else 0,
            gr, ga, sr, gr / sr if sr else 0))
    lines += ["", "Per run (gitstow CPU / sshd+git CPU, s):", ""]
    for i, r in enumerate(runs):
        lines.append("- run %d: " % (i + 1) + "; ".join(
            "%s %.2f / %.2f" % (ph, r["gitstow"][ph]["cpu"], r["sshd"][ph]["cpu"]) for ph in PHASES))
    lines += ["", "Machine:", ""] + ["- " + m for m in sbs.machine(a)]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
