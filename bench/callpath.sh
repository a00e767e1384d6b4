#!/usr/bin/env bash
# bench/callpath.sh: how many toolgate functions one tools/call runs
# through (issue 25), counted from coverage counters of the real binary.
#
#   bench/callpath.sh [toolgate checkout, default this repository] [era]
#
# era is 2025 (default: a streamable-HTTP session, initialize then calls)
# or 2026 (2026-07-28 requests with no session). The call is up__echo on
# the shared harness's echo upstream (../shared/peerbench/upstream) over
# stdio, the loop guard off for it. The binary is built with -cover; it
# serves one warm call, then CALLS (100) more in a second run, and
# bench/callpath counts the functions whose counters grew by CALLS or
# more: those that ran on every call, bytes in to bytes out, the executor
# included (a second line leaves executors/ out).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "${1:-$HERE/..}" && pwd)
ERA=${2:-2025}
CALLS=${CALLS:-100}
PB=$(cd "${PEERBENCH:-$HERE/../../shared/peerbench}" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/callpath.XXXXXX")
trap 'rm -rf "$W"' EXIT
(cd "$PB/upstream" && go build -o "$W/upstream" .)
(cd "$REPO" && go build -cover -covermode=count -coverpkg=github.com/toolgate/toolgate/... -o "$W/toolgate" ./cmd/toolgate)
(cd "$HERE/.." && go build -o "$W/callpath" ./bench/callpath)
PORT=${PORT:-19450}
printf 'server:\n  listen: 127.0.0.1:%s\nupstreams:\n  - name: up\n    transport: stdio\n    command: %s/upstream\n    args: ["-transport", "stdio"]\nguards:\n  loop:\n    tools:\n      up__echo: "off"\n' "$PORT" "$W" > "$W/tg.yaml"
URL=http://127.0.0.1:$PORT/mcp
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"callpath","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}'

post() { # body [extra curl args...]
  local body=$1; shift
  curl -sS -o /dev/null -w '%{http_code}' -X POST "$URL" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' "$@" --data-binary "$body"
}

run() { # calls profile
  local dir=$W/cov-$1; mkdir -p "$dir"
  GOCOVERDIR=$dir "$W/toolgate" serve --config "$W/tg.yaml" --log-level error >"$W/serve-$1.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.1; done
  local hdr=() call
  if [[ $ERA == 2025 ]]; then
    local sid
    sid=$(curl -sS -D - -o /dev/null -X POST "$URL" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
      --data-binary '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"callpath","version":"1"}}}' |
      tr -d '\r' | awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}')
    hdr=(-H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25')
    post '{"jsonrpc":"2.0","method":"notifications/initialized"}' "${hdr[@]}" >/dev/null
    call='{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"hello"}}}'
  else
    hdr=(-H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: up__echo')
    call='{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"message":"hello"},'"$META"'}}'
  fi
  local code
  for ((i = 0; i <= $1; i++)); do
    code=$(post "$call" "${hdr[@]}")
    [[ $code == 200 ]] || { echo "call $i: HTTP $code" >&2; cat "$W/serve-$1.log" >&2; kill "$pid"; exit 1; }
  done
  kill -TERM "$pid"; wait "$pid" || true
  go tool covdata textfmt -i "$dir" -o "$W/$1.txt"
}
run 0
run "$CALLS"
echo "== $REPO ($(cd "$REPO" && git rev-parse --short HEAD)), era $ERA: functions run on every call"
"$W/callpath" -root "$REPO" -calls "$CALLS" "$W/0.txt" "$W/$CALLS.txt"
echo "== without executors/"
"$W/callpath" -root "$REPO" -calls "$CALLS" -skip executors/ "$W/0.txt" "$W/$CALLS.txt" | tail -1
[[ -n ${LIST:-} ]] && "$W/callpath" -root "$REPO" -calls "$CALLS" -list "$W/0.txt" "$W/$CALLS.txt" > "$LIST"
exit 0
