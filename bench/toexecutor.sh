#!/usr/bin/env bash
# bench/toexecutor.sh: how many toolgate functions a tools/call runs
# through from the gateway's handler to the executor (issue 25).
#
#   bench/toexecutor.sh [toolgate checkout, default this repository] [era]
#
# era is 2025 (default: a streamable-HTTP session) or 2026 (2026-07-28
# requests, no session). This repository's bench/toexecutor is built, in a
# scratch module whose go.mod is the checkout's with toolgate replaced by
# the checkout, so an older checkout needs nothing of it, with
# -cover -covermode=atomic over the probe and every package of the
# checkout but bench's. The probe proxies up__echo of an upstream over
# streamable HTTP in the same process and snapshots the coverage counters
# just before the client sends each of CALLS (20) calls and when the
# upstream's tool handler starts. bench/callpath -window counts the
# functions whose counters grew between the two on every call, the
# executor (executors/<kind>, executors/mcpup here) left out; executors'
# dispatcher counts. The gateway handler's stack at the upstream's entry
# is counted too. LIST=file writes the functions to file, STACK=file that
# stack.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "${1:-$HERE/..}" && pwd)
ERA=${2:-2025}
CALLS=${CALLS:-20}
W=$(mktemp -d "${TMPDIR:-/tmp}/toexecutor.XXXXXX")
trap 'rm -rf "$W"' EXIT
M=$W/probe
mkdir -p "$M" "$W/exit"
cp "$HERE/toexecutor/main.go" "$REPO/go.sum" "$M/"
sed 's|^module .*|module toexecutorprobe|' "$REPO/go.mod" > "$M/go.mod"
printf '\nrequire github.com/toolgate/toolgate v0.0.0\n\nreplace github.com/toolgate/toolgate => %s\n' "$REPO" >> "$M/go.mod"
PKGS=$(cd "$REPO" && go list ./... | grep -v '/bench\(/\|$\)' | paste -sd,)
(cd "$M" && GOWORK=off GOFLAGS=-mod=mod go build -cover -covermode=atomic -coverpkg="toexecutorprobe,$PKGS" -o "$W/toexecutor" . 2>&1 |
  { grep -v '^warning: no packages being built depend on' || true; })
(cd "$HERE/.." && go build -o "$W/callpath" ./bench/callpath)
GOCOVERDIR=$W/exit "$W/toexecutor" -era "$ERA" -calls "$CALLS" -out "$W/snap"
for call in "$W"/snap/call-*; do
  for at in sent entry; do go tool covdata textfmt -i "$call/$at" -o "$call/$at.txt"; done
done
echo "== $REPO ($(cd "$REPO" && git rev-parse --short HEAD)), era $ERA: functions from the handler to the executor"
"$W/callpath" -root "$REPO" -window "$W/snap" -skip executors/
[[ -n ${LIST:-} ]] && "$W/callpath" -root "$REPO" -window "$W/snap" -skip executors/ -list > "$LIST"
echo "== the handler's goroutine when the upstream's handler starts"
cat "$W/snap/depth.txt"
[[ -n ${STACK:-} ]] && cp "$W/snap/stack.txt" "$STACK"
exit 0
