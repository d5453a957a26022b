#!/usr/bin/env bash
# Fleet mode (issue 17): three robotsgate replicas of one binary, alone and sharing a Redis,
# and one replica alone.
#
#   bash benches/load/fleet.sh [BIN]          # BIN defaults to target/release/robotsgate
#   DURATION=8 CONC=16 ROUNDS=5 bash benches/load/fleet.sh BIN
#   SETTINGS="fleet alone" bash benches/load/fleet.sh BIN   # only these, in this order
#
# Settings: "single": one replica, no [cluster] (the three load generators all send to it);
# "alone": three replicas, no [cluster]; "fleet": three replicas with [cluster] on a
# redis-server started here on REDIS_PORT. Each of ROUNDS rounds runs every setting once
# (the order turns by one each round), with its replicas (proxies 13131..13133) started
# fresh:
#   cold    1000 requests at once for one origin none of them has cached (334 + 333 + 333
#           at concurrency 334/333/333 through the three): robots.txt fetches at the origin
#           (nginx's log; the fleet must make 1) and the answers that were not 200;
#   cached  then, the copy cached everywhere, an oha per replica for DURATION seconds at
#           CONC: requests per second summed over the three, and each one's p99.
# The machine's cores are shared by the replicas, the three load generators and Redis, so
# "cached" compares the settings with each other on this machine, nothing more; the summary
# gives each round's fleet req/s over alone and over single, and their medians.
set -euo pipefail

BENCH_NAME=robotsgate-fleet
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
DURATION=${DURATION:-8}
CONC=${CONC:-16}
ROUNDS=${ROUNDS:-1}
SETTINGS=${SETTINGS:-single alone fleet}
REDIS_PORT=${REDIS_PORT:-16390}
PORTS=(13131 13132 13133)
ADMINS=(19131 19132 19133)

need_tools redis-server
if [ $# = 0 ]; then
    build_robotsgate
    BIN=$RG
else
    BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
fi
start_origin
mkdir -p "$WORK/results" "$WORK/logs"
[ -f "$WORK/ca/ca.pem" ] || "$BIN" ca init --dir "$WORK/ca" >/dev/null
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
    >"$WORK/logs/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" PING 2>/dev/null | grep -q PONG && break; sleep 0.1; done
redis-cli -p "$REDIS_PORT" PING | grep -q PONG || die "redis-server did not answer"

REPLICAS=()
start_replicas() { # SETTING
    local setting=$1 extra="" i last=2
    [ "$setting" = fleet ] && extra=$(printf '[cluster]\nredis = "redis://127.0.0.1:%s/0"' "$REDIS_PORT")
    [ "$setting" = single ] && last=0
    REPLICAS=()
    for i in $(seq 0 $last); do
        local conf="$WORK/replica-$i.toml"
        write_rg_config enforce "${PORTS[$i]}" "${ADMINS[$i]}" "$conf" "$extra"
        sed -i -e "s|$WORK/audit.jsonl|$WORK/audit-$setting-$i.jsonl|" \
            -e "s|$WORK/snapshots|$WORK/snapshots-$setting-$i|" "$conf"
        taskset -c "$SRV_CPU" "$BIN" run --config "$conf" 2>"$WORK/logs/replica-$setting-$i.log" &
        REPLICAS+=($!)
        PIDS+=($!)
    done
    for i in $(seq 0 $last); do wait_ready "http://127.0.0.1:${ADMINS[$i]}/readyz" "${REPLICAS[$i]}" 30; done
}
# The proxy port load generator I sends to under SETTING.
port_for() { if [ "$1" = single ]; then echo "${PORTS[0]}"; else echo "${PORTS[$2]}"; fi; }
stop_replicas() {
    local p
    for p in "${REPLICAS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${REPLICAS[@]}"; do wait "$p" 2>/dev/null || true; done
}

URL="http://127.0.0.1:$ORIGIN_PORT/1k"
ROWS=()
read -r -a SETS <<<"$SETTINGS"
for round in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 $((${#SETS[@]} - 1))); do
    setting=${SETS[$(((k + round - 1) % ${#SETS[@]}))]}
    log "round $round, $setting: $BIN"
    redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null
    # Each run starts with empty audit logs (they would grow round after round).
    rm -rf "$WORK"/audit-* "$WORK"/snapshots-*
    : >"$WORK/logs/robots-access.log"
    start_replicas "$setting"
    pids=()
    for i in 0 1 2; do
        n=$((i == 0 ? 334 : 333))
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$n" -c "$n" --output-format json \
            -x "http://127.0.0.1:$(port_for "$setting" "$i")" "$URL" >"$WORK/results/$setting-cold-$i.json" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    fetches=$(grep -c 'GET /robots.txt' "$WORK/logs/robots-access.log" || true)
    not200=$(python3 - "$WORK/results/$setting-cold-"{0,1,2}.json <<'EOF'
import json, sys
bad = 0
for path in sys.argv[1:]:
    r = json.load(open(path))
    bad += sum(n for code, n in r.get("statusCodeDistribution", {}).items() if code != "200")
    bad += sum(r.get("errorDistribution", {}).values())
print(bad)
EOF
)
    pids=()
    for i in 0 1 2; do
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -z "${DURATION}s" -c "$CONC" --output-format json \
            -x "http://127.0.0.1:$(port_for "$setting" "$i")" "$URL" >"$WORK/results/$setting-cached-$i.json" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    cached=$(python3 - "$WORK/results/$setting-cached-"{0,1,2}.json <<'EOF'
import json, sys
rps, p99 = 0.0, []
for path in sys.argv[1:]:
    r = json.load(open(path))
    rps += r["metrics"]["requests_per_sec"]
    p99.append(r["metrics"]["latency_ms"]["p99"])
print(f"{rps:.0f} req/s, p99 " + " / ".join(f"{p:.2f}" for p in p99) + " ms")
EOF
)
    stop_replicas
    ROWS+=("$(printf 'round %s  %-6s  cold: %s robots.txt fetch(es), %s answer(s) not 200  |  cached: %s' \
        "$round" "$setting" "$fetches" "$not200" "$cached")")
  done
done

printf '\n%s (cold 1000 at once; cached %s s at c%s from each of three generators)\n' "$BIN" "$DURATION" "$CONC"
printf '%s\n' "${ROWS[@]}"
printf '%s\n' "${ROWS[@]}" | python3 -c '
import re, sys, statistics
rps = {}
for line in sys.stdin:
    m = re.match(r"round (\d+)\s+(\w+)\s.*cached: (\d+) req/s", line)
    if m:
        rps[(int(m[1]), m[2])] = int(m[3])
for base in ("alone", "single"):
    ratios = [rps[(r, "fleet")] / rps[(r, base)] for (r, s) in rps if s == base and (r, "fleet") in rps]
    if ratios:
        print(f"fleet / {base}: " + " ".join(f"{x:.3f}" for x in ratios) + f"  median {statistics.median(ratios):.3f}")
'
