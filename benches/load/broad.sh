#!/usr/bin/env bash
# A broad crawl: one request to each of N distinct origins through robotsgate, then the same
# N again (cached), and what the process holds during and after (issue 31.7).
#
#   bash benches/load/broad.sh                   # N = 10000 and 100000
#   NS="20000" bash benches/load/broad.sh        # one size
#   RG_EXTRA='upstream_idle_max = 0' bash benches/load/broad.sh   # more [proxy] lines
#   RG_POLICY='cache_max_idle = "20s"' SETTLE=65 bash benches/load/broad.sh   # [policy] lines
#   RG_BIN=/path/to/robotsgate bash benches/load/broad.sh   # another binary, not built here
#
# The origins are http://127.A.B.C:18081/ — distinct loopback addresses, all served by one
# nginx (listening on 0.0.0.0:18081: every 127/8 address reaches it; nothing else is served).
# robotsgate runs with its default configuration but for the listen address, the guard
# opened to loopback, the audit log in the work folder and the admin listener; oha (CONNS
# keep-alive connections, pinned to GEN_CPU) sends N absolute-form requests through it per
# pass, each to an origin drawn at random from the N (so a pass touches about 63% of them,
# the second pass partly new ones: the count of origins robotsgate fetched robots.txt for is
# reported).
#
# Reported per N: requests/s of the cold pass (robots.txt fetched per origin) and of the
# cached pass; robotsgate's peak RSS (VmHWM), RSS and open descriptors right after the
# passes and once the idle timeout has passed (settled), its upstream connections open
# (established to the origin port) and the pool's idle count (metric
# robotsgate_upstream_idle_connections).
set -euo pipefail
BENCH_NAME=robotsgate-broad
# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
NS=${NS:-10000 100000}
CONNS=${CONNS:-64}
# The idle timeout (15 s), then a quiet spell of 30-35 s before the freed heap goes back.
SETTLE=${SETTLE:-55}
RG_EXTRA=${RG_EXTRA:-}
RG_POLICY=${RG_POLICY:-}
ORIGIN=18081
RG_PORT=13140
ADMIN=19140

command -v oha >/dev/null || { log "installing oha"; cargo install oha --version 1.16.0 --locked; }
command -v nginx >/dev/null || { log "installing nginx-light"; apt_install nginx-light; }
command -v ss >/dev/null || apt_install iproute2
build_robotsgate

mkdir -p "$WORK"/{www,logs}
chmod 755 "$WORK" "$WORK/www"
printf 'User-agent: *\nDisallow: /private\n' >"$WORK/www/robots.txt"
head -c 768 /dev/urandom | base64 -w0 >"$WORK/www/1k"
chmod 644 "$WORK"/www/*
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/logs/nginx-error.log warn;
events { worker_connections 65536; }
worker_rlimit_nofile 70000;
http {
    access_log off;
    keepalive_requests 100000;
    server { listen 0.0.0.0:$ORIGIN; root $WORK/www; }
}
EOF
ulimit -n 1048576 2>/dev/null || ulimit -n 65536 || true
taskset -c "$SRV_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

urls() { # N -> the file of N origins' URLs, 127.A.B.C with C in 1..254
    python3 - "$1" "$ORIGIN" >"$WORK/urls-$1.txt" <<'PY'
import sys
n, port = int(sys.argv[1]), sys.argv[2]
for i in range(n):
    print(f"http://127.{1 + i // (254 * 256)}.{(i // 254) % 256}.{1 + i % 254}:{port}/1k")
PY
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
upstream() { ss -Htn state established "( dport = :$ORIGIN )" | wc -l; }
idle_metric() { curl -s "http://127.0.0.1:$ADMIN/metrics" | awk '/^robotsgate_upstream_idle_connections / {print $2}'; }
pass() { # N -> requests/s
    local out
    out=$(taskset -c "$GEN_CPU" oha -n "$1" -c "$CONNS" --no-tui --output-format json \
        -x "http://127.0.0.1:$RG_PORT" --urls-from-file "$WORK/urls-$1.txt")
    echo "$out" >>"$WORK/logs/oha.log"
    echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
codes = r.get("statusCodeDistribution", {})
bad = sum(v for k, v in codes.items() if k != "200") + sum(r.get("errorDistribution", {}).values())
if bad:
    sys.exit("answers other than 200: %s %s" % (codes, r.get("errorDistribution")))
print(round(r["summary"]["requestsPerSec"]))
'
}
metric() { curl -s "http://127.0.0.1:$ADMIN/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
origins_metric() { curl -s "http://127.0.0.1:$ADMIN/metrics" | awk '/^robotsgate_robots_fetches_total/ {s += $2} END {print s + 0}'; }

printf '%-7s %-8s %-8s %-8s %-7s %-6s %-6s %-9s %-10s %-6s %-9s %-5s %-8s %-8s %-7s\n' N origins pass1/s pass2/s peakMB runMB runFD runConns settledMB setFD setConns idle cached cacheMB lanes
for n in $NS; do
    cat >"$WORK/rg.toml" <<EOF
[proxy]
listen = "127.0.0.1:$RG_PORT"
$RG_EXTRA
[agent]
token = "benchbot"
[policy]
$RG_POLICY
[guard]
allow = ["127.0.0.0/8"]
[audit]
path = "$WORK/audit.jsonl"
snapshots = "$WORK/snapshots"
[admin]
listen = "127.0.0.1:$ADMIN"
[log]
level = "warn"
EOF
    rm -rf "$WORK/audit.jsonl"* "$WORK/snapshots"
    taskset -c "$SRV_CPU" "$RG" run --config "$WORK/rg.toml" 2>>"$WORK/logs/robotsgate.log" &
    RG_PID=$!
    wait_http "http://127.0.0.1:$ADMIN/healthz"
    urls "$n"
    cold=$(pass "$n")
    cached=$(pass "$n")
    origins=$(origins_metric)
    run_rss=$(rss_kb "$RG_PID") run_fd=$(fds "$RG_PID") run_conns=$(upstream)
    sleep "$SETTLE" # the measurement: what is left once the idle timeout has passed
    printf '%-7s %-8s %-8s %-8s %-7s %-6s %-6s %-9s %-10s %-6s %-9s %-5s %-8s %-8s %-7s\n' "$n" "$origins" "$cold" "$cached" \
        "$(( $(hwm_kb "$RG_PID") / 1024 ))" "$(( run_rss / 1024 ))" "$run_fd" "$run_conns" \
        "$(( $(rss_kb "$RG_PID") / 1024 ))" "$(fds "$RG_PID")" "$(upstream)" "$(idle_metric)" \
        "$(metric robotsgate_robots_cache_entries)" "$(( $(metric robotsgate_robots_cache_bytes) / 1048576 ))" \
        "$(metric robotsgate_pacing_lanes)"
    kill "$RG_PID"
    wait "$RG_PID" 2>/dev/null || true
    RG_PID=
done
