#!/usr/bin/env bash
# bench/peerbench.sh: the shared harness's scenario (../shared/peerbench) for
# toolgate, every kind, both protocol eras, C=1/16/64, in one command (issue 16).
#
#   bench/peerbench.sh [toolgate checkout, default this repository]
#   N=5000 N1=1000 FLAT_N=20000 bench/peerbench.sh    # a quick look
#
# The harness's own programs do the work: its load generator (a separate
# mcp-go client process, one session per worker), its `echo` upstream (stdio
# and streamable HTTP) and its REST echo server. For each kind, in one round:
#
#   stdio  toolgate -> the upstream over stdio (up__echo)   vs  the upstream directly over HTTP
#   http   toolgate -> the upstream over HTTP  (up__echo)   vs  the upstream directly over HTTP
#   rest   toolgate's REST tool rest_echo -> restecho       vs  the upstream directly over HTTP
#   calc   toolgate's builtin calc                          vs  a bare mcp-go server with the same
#                                                               calc (bench -serve-calc)
#
# The direct baseline of every kind is measured in the same round, just
# before toolgate, at each era and C (2025-11-25 sessions, then 2026-07-28
# negotiated by mcp-go's client with -protocol auto). Then toolgate's RSS is
# read at start (before any call), after 10,000 calls and after FLAT_N.
#
# toolgate runs with its defaults (validation, metrics, lifecycle events,
# retries, the guards) except for one line: the load generator sends the
# same arguments on every call, so the loop guard (issue 12) would block the
# fourth call of each session; the configs set guards.loop.tools.<tool>: off
# for the measured tool only. The guard's cost on calls that vary is in
# BenchmarkPipeline (gateway/bench_test.go). No auth is configured (as in
# the harness).
#
# Env: N (20000, calls at C=16 and 64) N1 (3000, at C=1) CS ("1 16 64")
#      KINDS ("stdio http rest calc") ROUNDS (1) FLAT_N (100000, 0 to skip)
#      PEERBENCH (../shared/peerbench) WORK (scratch, default a temp dir)
#      TG_ARGS (extra `toolgate serve` flags) PPROF (seconds: CPU profile of
#      toolgate at C=16, 2025 era, per kind, into $WORK/results/<time>/cpu-<kind>.pprof;
#      toolgate is then built with -tags pprof, which serves net/http/pprof
#      on TOOLGATE_PPROF=127.0.0.1:6060, so its RSS figures are not the
#      default build's; off by default)
# Output: $WORK/results/<time>/table.md (ratios and latencies, RSS, and CPU
# per call of each process and of the machine, from /proc) and
# results.jsonl. Runs in a network namespace with only loopback (unshare
# -n; root, or user namespaces).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ "${PEERBENCH_IN_NETNS:-}" != 1 ]]; then
  REPO=$(cd "${1:-$HERE/..}" && pwd)
  PB=$(cd "${PEERBENCH:-$HERE/../../shared/peerbench}" && pwd) || exit 1
  export PEERS=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/tg-peerbench.XXXXXX")}
  mkdir -p "$PEERS/bin" "$PEERS/cfg"
  (cd "$PB/upstream" && go build -o "$PEERS/bin/upstream" . && go build -o "$PEERS/bin/restecho" ./restecho) || exit 1
  (cd "$PB/loadgen" && go build -o "$PEERS/bin/loadgen" .) || exit 1
  # The Makefile's build tags (TAGS= for none), and pprof with PPROF=1.
  tags=${TAGS-grpcnotrace}; [[ ${PPROF:-0} != 0 ]] && tags=${tags:+$tags,}pprof
  # Static, as make build and release builds are (the shared run.sh's plain
  # go build links libc: about 1.7 MB more RSS at start).
  (cd "$REPO" && CGO_ENABLED=0 go build -tags "$tags" -o "$PEERS/bin/toolgate" ./cmd/toolgate) || exit 1
  (cd "$HERE/.." && go build -o "$PEERS/bin/bench" ./bench) || exit 1
  guard() { printf 'guards:\n  loop:\n    tools:\n      %s: "off"\n' "$1"; }
  { printf 'server:\n  listen: 127.0.0.1:19400\nupstreams:\n  - name: up\n    transport: stdio\n    command: %s/bin/upstream\n    args: ["-transport", "stdio"]\n' "$PEERS"; guard up__echo; } > "$PEERS/cfg/tg-stdio.yaml"
  { printf 'server:\n  listen: 127.0.0.1:19401\nupstreams:\n  - name: up\n    transport: streamable-http\n    url: http://127.0.0.1:18080/mcp\n'; guard up__echo; } > "$PEERS/cfg/tg-http.yaml"
  { printf 'server:\n  listen: 127.0.0.1:19402\nrest:\n  - name: rest_echo\n    description: echo\n    url: http://127.0.0.1:18081/echo\n    query: { msg: "{message}" }\n'; guard rest_echo; } > "$PEERS/cfg/tg-rest.yaml"
  { printf 'server:\n  listen: 127.0.0.1:19403\nbuiltin: [calc]\n'; guard calc; } > "$PEERS/cfg/tg-calc.yaml"
  export PEERBENCH_IN_NETNS=1 PEERS
  if [[ $(id -u) == 0 ]]; then exec unshare -n "$0"; else exec unshare -rn "$0"; fi
fi
ip link set lo up 2>/dev/null || true
if [[ $(ip -o link | wc -l) != 1 ]]; then echo "not in a loopback-only netns; refusing" >&2; exit 1; fi

N=${N:-20000} N1=${N1:-3000} CS=${CS:-1 16 64} KINDS=${KINDS:-stdio http rest calc}
ROUNDS=${ROUNDS:-1} FLAT_N=${FLAT_N:-100000} PPROF=${PPROF:-0}
B=$PEERS/bin
OUT=$PEERS/results/$(date +%Y%m%d-%H%M%S); mkdir -p "$OUT"
RES=$OUT/results.jsonl; : > "$RES"

log() { echo "== $*" >&2; }
wait_port() {
  local i; for ((i = 0; i < 200; i++)); do ss -ltnH "sport = :$1" | grep -q . && return 0; sleep 0.1; done
  log "port $1 never opened"; return 1
}
rss() { ps -o rss= -p "$1" 2>/dev/null | tr -d ' '; }
stop() { local p; for p in "$@"; do kill "$p" 2>/dev/null; done; for p in "$@"; do wait "$p" 2>/dev/null; done; }

# ticks PID...: the CPU time (user + system, clock ticks) the processes have used.
ticks() { local p t=0; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$t"; }
# machine: the machine's busy and idle clock ticks (steal in neither).
machine() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $5 + $6}' /proc/stat; }
HZ=$(getconf CLK_TCK)

# load KIND ERA C TARGET PID URL TOOL ARGS EXPECT N: one loadgen run, one line of $RES.
# Beside the load generator's figures it records the CPU per call of the
# process measured (the direct upstream, or toolgate), of what toolgate
# calls (its stdio child, the HTTP upstream, restecho), and of the whole
# machine, and the machine's idle share: at C=16 and 64 the three
# processes share 2 CPUs, so a ratio is a ratio of CPU per call when the
# machine is busy.
load() {
  local kind=$1 era=$2 c=$3 tgt=$4 pid=$5 url=$6 tool=$7 args=$8 expect=$9 n=${10} proto=() out behind=()
  local warm=$((c > 20 ? c * 2 : 50))
  [[ $era == 2026 ]] && proto=(-protocol auto)
  if [[ $tgt == toolgate ]]; then
    case $kind in stdio) mapfile -t behind < <(pgrep -P "$pid");; http) behind=("$UP");; rest) behind=("$RE");; esac
  fi
  local t0 b0 m0 i0 t1 b1 m1 i1
  t0=$(ticks "$pid") b0=$(ticks "${behind[@]}"); read -r m0 i0 < <(machine)
  out=$("$B/loadgen" -json -label "$kind-$tgt" -url "$url" -tool "$tool" -args "$args" -expect "$expect" \
        -n "$n" -c "$c" -warmup "$warm" -max-duration 120s -pid "$pid" "${proto[@]}" 2>>"$OUT/loadgen.err")
  t1=$(ticks "$pid") b1=$(ticks "${behind[@]}"); read -r m1 i1 < <(machine)
  [[ $out == \{* ]] || out='{"fatal":"'$(tail -c 200 "$OUT/loadgen.err" | tr '"\n' "' ")'"}'
  # Per call made: a run the load generator cut short (-max-duration)
  # made fewer than n.
  jq -c --arg k "$kind" --arg e "$era" --argjson c "$c" --arg t "$tgt" --argjson r "$ROUND" \
    --argjson tt "$((t1 - t0))" --argjson bt "$((b1 - b0))" --argjson mt "$((m1 - m0))" --argjson hz "$HZ" --argjson warm "$warm" \
    --argjson idle "$(( (i1 - i0) * 100 / (m1 - m0 + i1 - i0 + 1) ))" \
    '((.ok // 0) + (.errors // 0) + $warm) as $calls | def us(x): if $calls > 0 then (x * 1000000 / $hz / $calls | floor) else 0 end;
     . + {kind: $k, era: $e, conc: $c, target: $t, round: $r, cpu_us: us($tt), behind_cpu_us: us($bt), machine_cpu_us: us($mt), idle_pct: $idle}' <<<"$out" >> "$RES"
  log "$kind $era c=$c $tgt: $(tail -n1 "$RES" | jq -r '"\(.calls_per_s // 0 | floor) calls/s p50 \(.p50_ms) ms p99 \(.p99_ms) ms errors \(.errors) cpu/call \(.cpu_us)+\(.behind_cpu_us) us, machine \(.machine_cpu_us) us, idle \(.idle_pct)% \(.first_error // .fatal // "")"')"
}

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  for kind in $KINDS; do
    case $kind in
      stdio) port=19400 tool=up__echo dtool=echo;;
      http) port=19401 tool=up__echo dtool=echo;;
      rest) port=19402 tool=rest_echo dtool=echo;;
      calc) port=19403 tool=calc dtool=calc;;
    esac
    args='{"message":"hello"}' expect=hello durl=http://127.0.0.1:18080/mcp
    [[ $kind == calc ]] && args='{"expression":"(2+3)*4"}' expect=20 durl=http://127.0.0.1:18082/mcp
    if [[ $kind == calc ]]; then
      "$B/bench" -serve-calc 127.0.0.1:18082 -timeout 4h 2>>"$OUT/bare.log" & UP=$!; RE=
      wait_port 18082 || exit 1
    else
      "$B/upstream" -transport http -addr 127.0.0.1:18080 2>>"$OUT/upstream.log" & UP=$!
      "$B/restecho" -addr 127.0.0.1:18081 2>>"$OUT/restecho.log" & RE=$!
      wait_port 18080 && wait_port 18081 || exit 1
    fi
    # Start from a binary that is not in the page cache, as after an
    # install or a reboot: pages the linker has just written sit in the
    # cache in large folios, and each one that start-up touches is mapped
    # whole: two builds a line apart started at 30 and 37 MB that way, and
    # at 28.6 and 28.0 MB from a cold cache.
    sync "$B/toolgate" && dd if="$B/toolgate" iflag=nocache count=0 status=none
    TOOLGATE_PPROF=127.0.0.1:6060 "$B/toolgate" serve --config "$PEERS/cfg/tg-$kind.yaml" --log-level warn ${TG_ARGS:-} >"$OUT/toolgate-$kind.log" 2>&1 & GW=$!
    wait_port $port || exit 1
    sleep 1
    start=$(rss "$GW")
    for era in 2025 2026; do
      for c in $CS; do
        n=$N; [[ $c == 1 ]] && n=$N1
        load "$kind" $era "$c" direct "$UP" "$durl" "$dtool" "$args" "$expect" "$n"
        if [[ $PPROF != 0 && $c == 16 && $era == 2025 ]]; then
          curl -s -o "$OUT/cpu-$kind.pprof" "http://127.0.0.1:6060/debug/pprof/profile?seconds=$PPROF" & PP=$!
        fi
        load "$kind" $era "$c" toolgate "$GW" "http://127.0.0.1:$port/mcp" "$tool" "$args" "$expect" "$n"
        [[ -n ${PP:-} ]] && { wait "$PP"; PP=; }
      done
    done
    after10=0 afterN=0
    if [[ $FLAT_N -gt 0 ]]; then
      "$B/loadgen" -json -url "http://127.0.0.1:$port/mcp" -tool "$tool" -args "$args" -expect "$expect" \
        -n 10000 -c 16 -max-duration 300s >/dev/null 2>>"$OUT/loadgen.err"; after10=$(rss "$GW")
      "$B/loadgen" -json -url "http://127.0.0.1:$port/mcp" -tool "$tool" -args "$args" -expect "$expect" \
        -n $((FLAT_N - 10000)) -c 16 -max-duration 600s >/dev/null 2>>"$OUT/loadgen.err"; afterN=$(rss "$GW")
    fi
    jq -nc --arg k "$kind" --argjson r "$ROUND" --argjson s "${start:-0}" --argjson a "${after10:-0}" --argjson b "${afterN:-0}" \
      --argjson n "$FLAT_N" '{rss: true, kind: $k, round: $r, start_kb: $s, after10k_kb: $a, afterN_kb: $b, flat_n: $n}' >> "$RES"
    log "$kind RSS KB: start $start, after 10k $after10, after $FLAT_N $afterN"
    stop "$GW" "$UP" ${RE:-}
  done
done

# The table: per kind, era and C, the median over rounds.
jq -rs '
  def med: sort | if length == 0 then 0 elif length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  def f(n): . * pow(10; n) | round / pow(10; n);
  (map(select(.rss != true and .fatal == null)) | group_by([.kind, .era, .conc]) | map(
    . as $g | ($g[0]) as $h |
    [$g[] | select(.target == "direct")] as $d | [$g[] | select(.target == "toolgate")] as $t |
    ([$d[] | .round] | unique | map(. as $r | (([$t[] | select(.round == $r) | .calls_per_s] | med) / ([$d[] | select(.round == $r) | .calls_per_s] | med)))) as $ratios |
    "| \($h.kind) | \($h.era) | \($h.conc) | \([$d[].calls_per_s] | med | round) | \([$t[].calls_per_s] | med | round) | **\($ratios | med | f(2))** | \([$d[].p50_ms] | med | f(3)) | \([$t[].p50_ms] | med | f(3)) | \((([$t[].p50_ms] | med) - ([$d[].p50_ms] | med)) | f(3)) | \([$d[].p99_ms] | med | f(2)) | \([$t[].p99_ms] | med | f(2)) | \([$t[].errors] | add) |"
  )) as $rows |
  (map(select(.rss == true)) | group_by(.kind) | map(
    "| \(.[0].kind) | \([.[].start_kb] | med / 1024 | f(1)) | \([.[].after10k_kb] | med / 1024 | f(1)) | \([.[].afterN_kb] | med / 1024 | f(1)) (\(.[0].flat_n)) | \(if ([.[].after10k_kb] | med) > 0 then (([.[].afterN_kb] | med) / ([.[].after10k_kb] | med) | f(2)) else "-" end) |")) as $mem |
  (map(select(.rss != true and .fatal == null)) | group_by([.kind, .era, .conc]) | map(
    . as $g | ($g[0]) as $h |
    [$g[] | select(.target == "direct")] as $d | [$g[] | select(.target == "toolgate")] as $t |
    "| \($h.kind) | \($h.era) | \($h.conc) | \([$d[].cpu_us // 0] | med) | \([$t[].cpu_us // 0] | med) | \([$t[].behind_cpu_us // 0] | med) | \([$d[].machine_cpu_us // 0] | med) | \([$t[].machine_cpu_us // 0] | med) | \([$d[].idle_pct // 0] | med) / \([$t[].idle_pct // 0] | med) |"
  )) as $cpu |
  (map(select(.fatal != null)) | map("- failed: \(.kind) \(.era) c=\(.conc) \(.target): \(.fatal)")) as $fails |
  (["| kind | era | C | direct calls/s | toolgate calls/s | toolgate/direct | direct p50 ms | toolgate p50 ms | added p50 ms | direct p99 ms | toolgate p99 ms | toolgate errors |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"] + $rows +
   ["", "| kind | toolgate RSS at start MB | after 10k calls MB | after N calls MB (N) | after N / after 10k |", "|---|---:|---:|---:|---:|"] + $mem +
   ["", "CPU per call (µs, from /proc; medians over rounds): the direct upstream; toolgate and what it calls (its stdio child, the HTTP upstream, restecho); the whole machine for each; the machine idle share.", "",
    "| kind | era | C | direct upstream | toolgate | behind toolgate | machine, direct | machine, toolgate | idle % direct / toolgate |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"] + $cpu + [""] + $fails) | .[]
' "$RES" > "$OUT/table.md"
cat "$OUT/table.md"
echo "results: $OUT" >&2
