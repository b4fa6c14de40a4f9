#!/usr/bin/env bash
# Side by side: push a repository to `gitstow serve` (local store) and to
# canonical `git http-backend`, clone both back, and print wall times, the
# gitstow daemon's CPU and peak RSS (VmHWM) and the http-backend children's
# peak RSS and CPU, then check that both clones have identical refs and
# objects and that gitstow's clone passes `git fsck --full --strict`.
#
#   benches/side-by-side.sh SRC_REPO NAME [REFSPEC...]
#
# SRC_REPO: a (bare) repository to push, e.g. a mirror of a public project.
# REFSPECs default to --mirror. Needs target/release/gitstow
# (cargo build --release -p gitstow) and ../shared/tools/git-http-backend-server.py
# (or HTTP_BACKEND_SERVER=path). Port 18098 is used for http-backend.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
SRC=$1; NAME=$2; shift 2
if [ $# -eq 0 ]; then set -- --mirror; fi
HB_SERVER=${HB_SERVER:-${HTTP_BACKEND_SERVER:-$here/../shared/tools/git-http-backend-server.py}}
B=$(mktemp -d /tmp/side-by-side.XXXXXX)
"$here/target/release/gitstow" serve --listen 127.0.0.1:0 --store "file://$B/gs-data" > "$B/gs.out" 2> "$B/gs.err" &
GS=$!
python3 -c '
import resource,subprocess,sys,signal
p=subprocess.Popen(["python3",sys.argv[3],sys.argv[1],"18098"])
signal.signal(signal.SIGTERM, lambda *a: p.terminate())
p.wait()
r=resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[2],"w").write("%d %.2f %.2f\n"%(r.ru_maxrss, r.ru_utime, r.ru_stime))
' "$B/hb-data" "$B/hb.rusage" "$HB_SERVER" &
HB=$!
sleep 1.5
URL=$(sed -n 's/gitstow listening on //p' "$B/gs.out")
t() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>"$B/last.err" || { echo "FAILED: $*"; tail -5 "$B/last.err"; }; echo "$(date +%s.%N) - $s" | bc; }
cpu() { awk '{print ($14+$15)/100}' "/proc/$GS/stat"; }
c0=$(cpu)
echo "gitstow push:  $(t git -C "$SRC" push -q "$URL/$NAME.git" "$@") s"
c1=$(cpu); hwm_push=$(grep VmHWM "/proc/$GS/status" | awk '{print $2" "$3}')
echo "gitstow clone: $(t git clone -q --mirror "$URL/$NAME.git" "$B/gs-clone") s"
c2=$(cpu)
echo "http-backend push:  $(t git -C "$SRC" push -q "http://127.0.0.1:18098/$NAME.git" "$@") s"
echo "http-backend clone: $(t git clone -q --mirror "http://127.0.0.1:18098/$NAME.git" "$B/hb-clone") s"
echo "gitstow daemon CPU: push $(echo "$c1-$c0" | bc) s, clone $(echo "$c2-$c1" | bc) s"
echo "gitstow daemon VmHWM: after push $hwm_push, after clone $(grep VmHWM "/proc/$GS/status" | awk '{print $2" "$3}')"
kill "$GS"; kill "$HB"; wait "$HB" 2>/dev/null; sleep 0.5
read -r rss ut st < "$B/hb.rusage"
echo "http-backend children (push + clone): peak RSS $rss kB, CPU user $ut s + sys $st s"
echo "gitstow stored bytes: $(du -sb "$B/gs-data" | cut -f1)"
git -C "$B/gs-clone" count-objects -v | grep -E "in-pack|size-pack"
git -C "$B/gs-clone" fsck --full --strict >/dev/null 2>&1 && echo "fsck of the gitstow clone: ok" || echo "fsck of the gitstow clone: FAILED"
diff <(git -C "$B/gs-clone" for-each-ref) <(git -C "$B/hb-clone" for-each-ref) >/dev/null && echo "refs: identical" || echo "refs: DIFFER"
diff <(git -C "$B/gs-clone" rev-list --all --objects | sort) <(git -C "$B/hb-clone" rev-list --all --objects | sort) >/dev/null && echo "objects: identical" || echo "objects: DIFFER"
grep -E "receive-pack|upload-pack" "$B/gs.err" | grep -v "wants=0\|commands=0" | cut -c1-400
rm -rf "$B"
