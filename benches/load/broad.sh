#!/usr/bin/env bash
# A broad crawl: one request to each of N distinct origins through robotsgate, then the same
# N again (cached), and what the process holds during and after (issue 31.7).
#
#   bash benches/load/broad.sh                   # N = 10000 and 100000
#   NS="20000" bash benches/load/broad.sh        # one size
#   RG_EXTRA='upstream_idle_max = 0' bash benches/load/broad.sh   # more [proxy] lines
#
# The origins are http://127.A.B.C:18081/ — distinct loopback addresses, all served by one
# nginx (listening on 0.0.0.0:18081: every 127/8 address reaches it; nothing else is served).
# robotsgate runs with its default configuration but for the listen address, the guard
# opened to loopback, the audit log in the work folder and the admin listener; wrk (one
# thread, CONNS keep-alive connections, pinned to GEN_CPU) sends absolute-form requests
# through it, each origin once per pass, and stops after N answers.
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
SETTLE=${SETTLE:-25}
RG_EXTRA=${RG_EXTRA:-}
ORIGIN=18081
RG_PORT=13140
ADMIN=19140

command -v wrk >/dev/null || { log "installing wrk"; apt_install wrk; }
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

cat >"$WORK/crawl.lua" <<'EOF'
-- One request per origin, origins 127.A.B.C (C in 1..254), N of them, then stop.
local n = tonumber(os.getenv("N"))
local sent, answered, bad = 0, 0, 0
request = function()
    local i = sent % n
    sent = sent + 1
    local a = 1 + math.floor(i / (254 * 256))
    local b = math.floor(i / 254) % 256
    local c = 1 + i % 254
    return wrk.format("GET", string.format("http://127.%d.%d.%d:%s/1k", a, b, c, os.getenv("ORIGIN")))
end
response = function(status, headers, body)
    answered = answered + 1
    if status ~= 200 then bad = bad + 1 end
    if answered >= n then
        io.stderr:write(string.format("answers %d, not 200: %d\n", answered, bad))
        wrk.thread:stop()
    end
end
EOF

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
upstream() { ss -Htn state established "( dport = :$ORIGIN )" | wc -l; }
idle_metric() { curl -s "http://127.0.0.1:$ADMIN/metrics" | awk '/^robotsgate_upstream_idle_connections / {print $2}'; }
pass() { # N -> requests/s
    local out
    out=$(N=$1 ORIGIN=$ORIGIN taskset -c "$GEN_CPU" wrk -t1 -c"$CONNS" -d600s -s "$WORK/crawl.lua" \
        "http://127.0.0.1:$RG_PORT/" 2>&1)
    echo "$out" >>"$WORK/logs/wrk.log"
    echo "$out" | grep -q 'not 200: 0' || { echo "$out" >&2; die "answers other than 200"; }
    echo "$out" | awk '/^Requests\/sec/ {print $2}'
}

printf '%-7s %-9s %-9s %-9s %-9s %-6s %-9s %-9s %-6s %-9s %-5s\n' N cold/s cached/s peakMB runMB runFD runConns settledMB setFD setConns idle
for n in $NS; do
    cat >"$WORK/rg.toml" <<EOF
[proxy]
listen = "127.0.0.1:$RG_PORT"
$RG_EXTRA
[agent]
token = "benchbot"
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
    cold=$(pass "$n")
    cached=$(pass "$n")
    run_rss=$(rss_kb "$RG_PID") run_fd=$(fds "$RG_PID") run_conns=$(upstream)
    sleep "$SETTLE" # the measurement: what is left once the idle timeout has passed
    printf '%-7s %-9s %-9s %-9s %-9s %-6s %-9s %-9s %-6s %-9s %-5s\n' "$n" "$cold" "$cached" \
        "$(( $(hwm_kb "$RG_PID") / 1024 ))" "$(( run_rss / 1024 ))" "$run_fd" "$run_conns" \
        "$(( $(rss_kb "$RG_PID") / 1024 ))" "$(fds "$RG_PID")" "$(upstream)" "$(idle_metric)"
    kill "$RG_PID"
    wait "$RG_PID" 2>/dev/null || true
    RG_PID=
done
