#!/usr/bin/env bash
# Where the proxy's time goes on the CPU itself (not under valgrind): `perf record` with the
# software clock (works on VMs without hardware counters) over a fixed number of proxied
# requests, for HAProxy and each robotsgate binary given; prints each one's flat profile
# (share of samples by shared object and symbol, kernel included).
#
#   bash benches/load/profile.sh [BIN ...]           # default: this checkout, built in release
#   CONC=256 REQUESTS=100000 bash benches/load/profile.sh OLD NEW
#   TOP=60 ...                                       # rows per profile (default 40)
#   RG_MODE=off ...                                  # policy.mode (default enforce)
#   OHA_ARGS=--disable-keepalive ...                 # more oha options (there: a new client
#                                                    # connection for every request)
#
# Set-up as benches/load/perreq.sh: nginx origin and the proxy pinned to SRV_CPU, oha (one
# worker thread) on GEN_CPU, a warm-up of 1,000 requests outside the recording. Callgrind
# (callgrind.sh) counts instructions; this shows where time goes that instructions do not
# explain (cache misses at high concurrency, the kernel's share). perf data stays in $WORK.
set -euo pipefail

BENCH_NAME=robotsgate-profile
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
REQUESTS=${REQUESTS:-100000}
OHA_ARGS=${OHA_ARGS:-}
CONC=${CONC:-32}
TOP=${TOP:-40}
RG_PORT=13129
ADMIN_PORT=19090
HAPROXY_PORT=13130

need_tools haproxy
command -v perf >/dev/null || { log "installing linux-perf"; apt_install linux-perf; }
binaries "$@"

start_origin
start_haproxy "$HAPROXY_PORT"
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k"
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k" "http://127.0.0.1:$HAPROXY_PORT"
"${BINS[0]}" ca init --dir "$WORK/ca" >/dev/null 2>&1 || true

# record NAME PROXY_URL PID: warm-up, then REQUESTS requests with perf recording PID.
record() {
    local name=$1 proxy=$2 pid=$3 perf_pid
    # shellcheck disable=SC2086 # OHA_ARGS: options, split on spaces
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n 1000 -c "$CONC" -x "$proxy" $OHA_ARGS \
        "http://127.0.0.1:$ORIGIN_PORT/1k" >/dev/null
    perf record -q -e cpu-clock -F 4000 -p "$pid" -o "$WORK/$name.perf" 2>"$WORK/logs/perf-$name.log" &
    perf_pid=$!
    sleep 1 # perf attaches to every thread before the run starts
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$REQUESTS" -c "$CONC" -x "$proxy" $OHA_ARGS \
        --output-format json "http://127.0.0.1:$ORIGIN_PORT/1k" >"$WORK/results/$name.json"
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    python3 "$HERE/report.py" check "$WORK/results/$name.json" || die "$name: answers other than 200"
    log "$name: $(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("{:,.0f} req/s, p99 {:.2f} ms".format(r["summary"]["requestsPerSec"], r["latencyPercentiles"]["p99"] * 1000))' "$WORK/results/$name.json")"
    perf report -i "$WORK/$name.perf" --stdio --no-children --sort dso,sym --percent-limit 0.3 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -n "$TOP"
}

record haproxy "http://127.0.0.1:$HAPROXY_PORT" "$HAPROXY_PID"
for i in "${!BINS[@]}"; do
    start_rg "${BINS[$i]}" "$i"
    record "rg$i-$(basename "${BINS[$i]}")" "http://127.0.0.1:$RG_PORT" "$RG_PID"
    end_rg
done
