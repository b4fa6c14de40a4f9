#!/usr/bin/env bash
# A single-node Ceph RADOS Gateway (S3) on 127.0.0.1 for gitstow's S3 tests.
#
#   bash scripts/s3-radosgw.sh start    # apt-installs if needed, (re)starts, creates user + bucket
#   eval "$(bash scripts/s3-radosgw.sh env)"   # export S3_* for `cargo test -p gitstow-store`
#   bash scripts/s3-radosgw.sh status   # exit 0 when the gateway answers
#   bash scripts/s3-radosgw.sh stop     # stops the daemons and wipes the data
#
# Environment (defaults in brackets): S3_ENDPOINT [http://127.0.0.1:7480],
# S3_REGION [us-east-1], S3_ACCESS_KEY, S3_SECRET_KEY (fixed test keys),
# S3_BUCKET [gitbucket], CEPH_DIR [/tmp/ceph-ci].
#
# Debian bookworm: radosgw/ceph 16.2.15 (Pacific). `start` needs root (apt-get)
# unless radosgw, ceph-mon, ceph-osd and curl are installed already.
# One mon + one OSD (memstore: data in RAM, gone on stop) + radosgw (beast).
# No mgr, no systemd, no cephx (auth "none"), loopback only.
#
# Idempotent: `start` on a running gateway stops it (by pid file, and by the
# exact config path on the command line in case the pid files are gone) and
# starts a fresh one; `stop` on a stopped one does nothing. Calls are
# serialised by a lock file, so two concurrent `start`s do not interleave.
# A daemon that does not come up fails `start` with its log tail.
# This is the project's copy of the CI recipe in shared/ci/s3-radosgw.sh.
set -euo pipefail

export S3_ENDPOINT="${S3_ENDPOINT:-http://127.0.0.1:7480}"
export S3_REGION="${S3_REGION:-us-east-1}"
export S3_ACCESS_KEY="${S3_ACCESS_KEY:-GITS3TESTACCESSKEY01}"
export S3_SECRET_KEY="${S3_SECRET_KEY:-gits3testsecretkey0000000000000000000000}"
export S3_BUCKET="${S3_BUCKET:-gitbucket}"
export CEPH_DIR="${CEPH_DIR:-/tmp/ceph-ci}"
RGW_PORT="${S3_ENDPOINT##*:}"
RGW_PORT="${RGW_PORT%%/*}"
MON_PORT=6789

ACTION="${1:-start}"

die() {
  echo "s3-radosgw: $*" >&2
  exit 1
}

print_env() {
  local v
  for v in S3_ENDPOINT S3_REGION S3_ACCESS_KEY S3_SECRET_KEY S3_BUCKET CEPH_DIR; do
    printf 'export %s=%q\n' "$v" "${!v}"
  done
}

gateway_up() {
  curl -s -o /dev/null --max-time 2 "$S3_ENDPOINT/"
}

case "$ACTION" in
  env)
    print_env
    exit 0
    ;;
  status)
    if gateway_up; then echo "radosgw answers at $S3_ENDPOINT"; exit 0; fi
    echo "radosgw does not answer at $S3_ENDPOINT" >&2
    exit 1
    ;;
  start | stop) ;;
  *) die "usage: $0 start|stop|env|status" ;;
esac

# One start/stop at a time (the lock file lives next to, not in, CEPH_DIR,
# which stop deletes).
exec 9>"${CEPH_DIR%/}.lock"
flock 9

install_missing() {
  local pkgs=()
  command -v curl >/dev/null || pkgs+=(curl ca-certificates)
  if ! command -v radosgw >/dev/null || ! command -v radosgw-admin >/dev/null \
    || ! command -v ceph-osd >/dev/null || ! command -v ceph-mon >/dev/null \
    || ! command -v monmaptool >/dev/null || ! command -v ceph >/dev/null; then
    pkgs+=(radosgw ceph-mon ceph-osd ceph-common)
  fi
  [ ${#pkgs[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing ${pkgs[*]} and not root: install them or run as root"
  echo "s3-radosgw: installing ${pkgs[*]} (a few minutes the first time)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

# Pids of the daemons started with our config file (whatever their pid files
# say), gateway first, monitor last.
our_pids() {
  local conf="$CEPH_DIR/ceph.conf" p cmd prog
  for prog in radosgw ceph-osd ceph-mon; do
    for p in /proc/[0-9]*; do
      cmd=$( { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
      case "$cmd" in
        "$prog -c $conf "* | */"$prog -c $conf "*) echo "${p#/proc/}" ;;
      esac
    done
  done
}

# Whether process $1 still runs (a zombie does not).
alive() {
  local state
  state=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

wait_gone() {
  local pid=$1 i
  for i in $(seq 1 100); do alive "$pid" || return 0; sleep 0.1; done
  echo "s3-radosgw: pid $pid did not stop in 10s; killing it" >&2
  kill -9 "$pid" 2>/dev/null || true
}

s3_radosgw_stop() {
  # Only processes whose command line names our config file: a stale pid
  # file could name an unrelated process by now.
  local pid
  # Gateway first, monitor last: a gateway whose monitor is gone hangs on exit.
  for pid in $(our_pids); do
    kill "$pid" 2>/dev/null || true
    wait_gone "$pid"
  done
  rm -rf "$CEPH_DIR"
}

port_busy() {
  # /proc/net/tcp lists local addresses as HEX_IP:HEX_PORT; state 0A = LISTEN.
  local hex
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

wait_for() {
  # wait_for SECONDS DESCRIPTION LOG COMMAND...
  local secs=$1 what=$2 log=$3 i
  shift 3
  for i in $(seq 1 $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "s3-radosgw: $what did not come up within ${secs}s; last lines of $log:" >&2
  tail -n 30 "$log" >&2 2>/dev/null || true
  exit 1
}

if [ "$ACTION" = stop ]; then
  s3_radosgw_stop
  echo "radosgw stopped"
  exit 0
fi

install_missing
s3_radosgw_stop
for port in "$MON_PORT" "$RGW_PORT"; do
  for _ in $(seq 1 50); do port_busy "$port" || break; sleep 0.1; done
  port_busy "$port" && die "port $port on this machine is in use by another process"
done

mkdir -p "$CEPH_DIR"/{mon-a,osd-0,run,log,rgw}
FSID=$(cat /proc/sys/kernel/random/uuid)
cat >"$CEPH_DIR/ceph.conf" <<EOF
[global]
fsid = $FSID
mon_host = v1:127.0.0.1:$MON_PORT
public_network = 127.0.0.0/8
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
run_dir = $CEPH_DIR/run
log_file = $CEPH_DIR/log/\$name.log
admin_socket = $CEPH_DIR/run/\$name.asok
pid_file = $CEPH_DIR/run/\$name.pid
osd_pool_default_size = 1
osd_pool_default_min_size = 1
# A throwaway single-node test cluster: start even when the host disk is fuller
# than the monitor's default 5 % free (it refused to start at 3 % free).
mon_data_avail_crit = 1
mon_data_avail_warn = 2
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_max_pg_per_osd = 1000
osd_crush_chooseleaf_type = 0
ms_bind_ipv6 = false
ms_bind_msgr2 = false
[mon]
mon_data = $CEPH_DIR/mon-\$id
[osd]
osd_data = $CEPH_DIR/osd-\$id
osd_objectstore = memstore
memstore_device_bytes = 4294967296
[client.rgw.ci]
# Nagle off, as docs/s3.md asks of an RGW that serves gitstow
rgw_frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw_data = $CEPH_DIR/rgw
rgw_dns_name = 127.0.0.1
EOF
C=(-c "$CEPH_DIR/ceph.conf")
LOG="$CEPH_DIR/log"

monmaptool --create --fsid "$FSID" --add a "127.0.0.1:$MON_PORT" "$CEPH_DIR/monmap" >/dev/null
ceph-mon "${C[@]}" --mkfs -i a --monmap "$CEPH_DIR/monmap"
ceph-mon "${C[@]}" -i a 9>&-
wait_for 30 "ceph-mon" "$LOG/mon.a.log" ceph "${C[@]}" --connect-timeout 2 mon stat

OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
OSD_ID=$(ceph "${C[@]}" --connect-timeout 30 osd new "$OSD_UUID")
[ "$OSD_ID" = 0 ] || die "expected OSD id 0, got $OSD_ID"
ceph-osd "${C[@]}" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >/dev/null 2>&1
# Right after `osd new` the monitor sometimes refuses the OSD's first crush
# update ("mon_cmd_maybe_osd_create fail: 'wrong fsid'") and ceph-osd exits;
# starting it again a moment later works.
for attempt in 1 2 3 4 5; do
  ceph-osd "${C[@]}" -i "$OSD_ID" 9>&- 2>>"$LOG/osd-start.err" && break
  [ "$attempt" = 5 ] && { tail -n 5 "$LOG/osd-start.err" >&2; die "ceph-osd did not start"; }
  echo "s3-radosgw: ceph-osd start failed (attempt $attempt); retrying" >&2
  sleep 1
done
osd_up() { ceph "${C[@]}" --connect-timeout 2 osd stat 2>/dev/null | grep -q ' 1 up'; }
wait_for 60 "ceph-osd" "$LOG/osd.0.log" osd_up

radosgw "${C[@]}" -n client.rgw.ci 9>&-
wait_for 120 "radosgw" "$LOG/client.rgw.ci.log" gateway_up

radosgw-admin "${C[@]}" user create --uid=ci --display-name=ci \
  --access-key="$S3_ACCESS_KEY" --secret="$S3_SECRET_KEY" >/dev/null
# Create the bucket with curl's built-in SigV4 (curl >= 7.75; the explicit
# x-amz-content-sha256 header is needed by curl 7.88 + radosgw). A bucket that
# exists already (409 BucketAlreadyOwnedByYou) is fine.
status=$(curl -s -o "$CEPH_DIR/bucket-create.out" -w '%{http_code}' -X PUT \
  --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$S3_ENDPOINT/$S3_BUCKET")
case "$status" in
  200 | 409) ;;
  *) die "creating bucket $S3_BUCKET failed with HTTP $status: $(cat "$CEPH_DIR/bucket-create.out")" ;;
esac
echo "radosgw ready at $S3_ENDPOINT (key $S3_ACCESS_KEY, bucket $S3_BUCKET)"
