#!/usr/bin/env bash
# Paired A/B of `robotsgate ingress` binaries against nginx as a reverse proxy: per target
# and round, req/s, p99 and the CPU time per request of the target's own process, user
# and system apart (from /proc/PID/task/*/stat), the targets taking turns in every round.
# Set-up as benches/load/ingress.sh (nginx site and the proxies on SRV_CPU, oha with one
# worker on GEN_CPU, 1 KiB, c32, keep-alive, GPTBot allowed: every request decided,
# recorded in the audit log and forwarded; identity checks off), but a fixed number of
# requests per run instead of a duration, so the CPU figures count the same work.
#
#   bash benches/load/ingress-ab.sh OLD_BIN NEW_BIN           # any number of binaries
#   REQUESTS=60000 ROUNDS=4 bash benches/load/ingress-ab.sh A B
#   OHA_ARGS=--disable-keepalive ...    # more oha options (there: a new connection a request)
set -euo pipefail

BENCH_NAME=robotsgate-ingress-ab
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
REQUESTS=${REQUESTS:-60000}
ROUNDS=${ROUNDS:-3}
OHA_ARGS=${OHA_ARGS:-}
NGINX_PROXY_PORT=13160
FIRST_PORT=13161
UA="Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
[ "$#" -ge 1 ] || die "usage: ingress-ab.sh BIN [BIN ...]"
need_tools

start_origin
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k"

start_nginx_proxy "$NGINX_PROXY_PORT"
targets=("nginx:$NGINX_PROXY_WORKER:$NGINX_PROXY_PORT")

printf '[verify]\nenabled = false\n' >"$WORK/ingress.toml"
port=$FIRST_PORT
i=0
for bin in "$@"; do
    name="rg$i-$(basename "$bin")"
    taskset -c "$SRV_CPU" "$bin" ingress --listen "127.0.0.1:$port" --config "$WORK/ingress.toml" \
        --upstream "http://127.0.0.1:$ORIGIN_PORT" --audit-log "$WORK/audit-$name.jsonl" \
        2>"$WORK/logs/$name.log" &
    PIDS+=($!)
    wait_ready "http://127.0.0.1:$port/1k" "$!" 30
    targets+=("$name:$!:$port")
    port=$((port + 1))
    i=$((i + 1))
done

load() { # PORT N: oha's JSON on stdout
    # shellcheck disable=SC2086 # OHA_ARGS: options, split on spaces
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$2" -c 32 -H "User-Agent: $UA" $OHA_ARGS \
        --output-format json "http://127.0.0.1:$1/1k"
}
hz=$(getconf CLK_TCK)
for t in "${targets[@]}"; do IFS=: read -r _ _ p <<<"$t"; load "$p" 3000 >/dev/null; done # warm-up
printf '| round | target | req/s | p99 ms | user µs/req | system µs/req |\n|---|---|---:|---:|---:|---:|\n'
for r in $(seq 1 "$ROUNDS"); do
    for k in $(turns "$r" "${#targets[@]}"); do
        t=${targets[$k]}
        IFS=: read -r name pid p <<<"$t"
        settle
        read -r u0 s0 < <(cpu_ticks "$pid")
        load "$p" "$REQUESTS" >"$WORK/$name.$r.json"
        read -r u1 s1 < <(cpu_ticks "$pid")
        python3 - "$WORK/$name.$r.json" "$r" "$name" "$((u1 - u0))" "$((s1 - s0))" "$hz" "$REQUESTS" <<'PY'
import json, sys
path, r, name, du, ds, hz, n = sys.argv[1:]
d = json.load(open(path))
codes = d.get("statusCodeDistribution", {})
if set(codes) != {"200"}:
    sys.exit(f"{name} round {r}: answers other than 200: {codes}")
us = lambda ticks: int(ticks) * 1e6 / int(hz) / int(n)
print(f"| {r} | {name} | {d['summary']['requestsPerSec']:,.0f} | {d['latencyPercentiles']['p99'] * 1000:.2f} "
      f"| {us(du):.1f} | {us(ds):.1f} |")
PY
    done
done
