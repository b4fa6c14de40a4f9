#!/usr/bin/env bash
# Kept for its old interface; benches/side_by_side.py does the work (see
# benches/README.md). Extra options (--runs, --out, --no-fsck, ...) go through
# SIDE_BY_SIDE_ARGS, e.g. SIDE_BY_SIDE_ARGS="--runs 1 --out report.md".
#
#   benches/side-by-side.sh SRC_REPO NAME [REFSPEC...]     (REFSPECs default to --mirror)
set -eu
[ $# -ge 2 ] || { echo "usage: $0 SRC_REPO NAME [REFSPEC...]" >&2; exit 2; }
src=$1 name=$2; shift 2
args=(--repo "$src" --name "$name")
for r in "$@"; do args+=("--refspec=$r"); done
# shellcheck disable=SC2086
exec python3 "$(dirname "$0")/side_by_side.py" "${args[@]}" ${SIDE_BY_SIDE_ARGS:-}
