#!/usr/bin/env bash
# bench/idlesessions.sh: what an idle session costs toolgate (issue 25).
#
#   bench/idlesessions.sh [toolgate checkout, default this repository]
#
# Builds toolgate (static, as releases are), serves the builtin calc on
# 127.0.0.1:$PORT (19460) with room for 20,000 sessions, and runs
# bench/idlesessions: STEPS (1000,5000) sessions, each an initialize and
# one call, left open; toolgate's RSS before and after each step.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "${1:-$HERE/..}" && pwd)
PORT=${PORT:-19460}
W=$(mktemp -d "${TMPDIR:-/tmp}/idlesessions.XXXXXX")
trap 'kill "$pid" 2>/dev/null; rm -rf "$W"' EXIT
# Static and with the Makefile's build tags (TAGS= for none), as make build.
(cd "$REPO" && CGO_ENABLED=0 go build -tags "${TAGS-grpcnotrace}" -o "$W/toolgate" ./cmd/toolgate)
(cd "$HERE/.." && go build -o "$W/idlesessions" ./bench/idlesessions)
printf 'server:\n  listen: 127.0.0.1:%s\n  max_sessions: 20000\nbuiltin: [calc]\n' "$PORT" > "$W/tg.yaml"
"$W/toolgate" serve --config "$W/tg.yaml" --log-level error >"$W/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
echo "== $REPO ($(cd "$REPO" && git rev-parse --short HEAD))"
"$W/idlesessions" -url "http://127.0.0.1:$PORT/mcp" -pid "$pid" -steps "${STEPS:-1000,5000}"
