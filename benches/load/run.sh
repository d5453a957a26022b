#!/usr/bin/env bash
# Load benchmark: robotsgate against a direct connection, Squid and HAProxy, on loopback.
#
#   bash benches/load/run.sh              # everything, about 15 minutes
#   SECTIONS="plain" RUNS=1 DURATION=5 bash benches/load/run.sh   # a quick look
#
# It installs what it needs (oha with cargo, nginx-light, squid, haproxy and openssl from
# Debian's packages, when missing), builds robotsgate in release mode, and starts an nginx
# origin (plain and TLS), Squid (cache off), HAProxy and robotsgate, all on 127.0.0.1.
# The load generator
# (oha, one worker thread) is pinned to GEN_CPU; origin and proxies share SRV_CPU.
# Every run is DURATION seconds with keep-alive; each row is the median of RUNS runs, and
# the targets compared in one table take their runs in turn.
# A run with any answer other than 200 fails the benchmark (a fast 403 is not a result).
#
# Sections (SECTIONS, space-separated; default all):
#   plain   direct, squid, haproxy, robotsgate enforce + audit log, robotsgate mode off;
#           1 KiB and 100 KiB bodies, concurrency 32 and 256
#   tls     direct TLS, squid CONNECT tunnel, robotsgate TLS interception (enforce + audit)
#   cold    1000 concurrent requests to an origin robotsgate has not cached yet
#   memory  RSS over a 60 s run; bytes per cached origin and per open connection
#
# Results: a table on stdout, raw oha JSON under $WORK/results.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/benches/load"
WORK=${WORK:-$(mktemp -d /tmp/robotsgate-load.XXXXXX)}
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
GEN_CPU=${GEN_CPU:-0}
SRV_CPU=${SRV_CPU:-1}
SECTIONS=${SECTIONS:-plain tls cold memory}
OHA_VERSION=1.16.0

ORIGIN_PORT=18080
ORIGIN_TLS_PORT=18443
SQUID_PORT=13128
HAPROXY_PORT=13130
RG_PORT=13129
ADMIN_PORT=19090

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# --- tools -------------------------------------------------------------------------------
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
    as_root apt-get install -y "$@" >/dev/null 2>&1 ||
        { as_root apt-get update >/dev/null && as_root apt-get install -y "$@" >/dev/null; }
}
export PATH="$HOME/.cargo/bin:/usr/sbin:/sbin:$PATH"
if ! oha --version 2>/dev/null | grep -q "$OHA_VERSION"; then
    log "installing oha $OHA_VERSION (cargo install)"
    cargo install oha --version "$OHA_VERSION" --locked
fi
command -v nginx >/dev/null || { log "installing nginx-light"; apt_install nginx-light; }
command -v squid >/dev/null || { log "installing squid"; apt_install squid; }
command -v haproxy >/dev/null || { log "installing haproxy"; apt_install haproxy; }
command -v openssl >/dev/null || { log "installing openssl"; apt_install openssl; }
command -v taskset >/dev/null || apt_install util-linux

log "building robotsgate (release)"
(cd "$ROOT" && cargo build --release --quiet)
RG="$ROOT/target/release/robotsgate"

mkdir -p "$WORK"/{www,results,logs}
chmod 755 "$WORK" "$WORK/www"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# --- the origin --------------------------------------------------------------------------
printf 'User-agent: *\nDisallow: /private\n' >"$WORK/www/robots.txt"
head -c 768 /dev/urandom | base64 -w0 >"$WORK/www/1k"
head -c 76800 /dev/urandom | base64 -w0 >"$WORK/www/100k"
chmod 644 "$WORK"/www/*

if [ ! -f "$WORK/origin.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=robotsgate bench origin CA" -keyout "$WORK/origin-ca-key.pem" \
        -out "$WORK/origin-ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
        -keyout "$WORK/origin-key.pem" -out "$WORK/origin.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$WORK/origin.ext"
    openssl x509 -req -in "$WORK/origin.csr" -CA "$WORK/origin-ca.pem" -CAkey "$WORK/origin-ca-key.pem" \
        -CAcreateserial -days 2 -extfile "$WORK/origin.ext" -out "$WORK/origin.pem" 2>/dev/null
    chmod 644 "$WORK"/origin*.pem
fi

sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$ORIGIN_PORT|g" -e "s|@TLS_PORT@|$ORIGIN_TLS_PORT|g" \
    "$HERE/nginx.conf" >"$WORK/nginx.conf"
taskset -c "$SRV_CPU" nginx -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

# --- squid -------------------------------------------------------------------------------
mkdir -p "$WORK/squid"
sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$SQUID_PORT|g" "$HERE/squid.conf" >"$WORK/squid.conf"
if [ "$(id -u)" = 0 ] && id proxy >/dev/null 2>&1; then chown -R proxy "$WORK/squid"; fi
taskset -c "$SRV_CPU" squid -N -f "$WORK/squid.conf" &
PIDS+=($!)

# --- haproxy -----------------------------------------------------------------------------
sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$HAPROXY_PORT|g" -e "s|@ORIGIN_PORT@|$ORIGIN_PORT|g" \
    "$HERE/haproxy.cfg" >"$WORK/haproxy.cfg"
taskset -c "$SRV_CPU" haproxy -f "$WORK/haproxy.cfg" -db 2>>"$WORK/logs/haproxy.log" &
PIDS+=($!)

# --- robotsgate --------------------------------------------------------------------------
[ -f "$WORK/ca/ca.pem" ] || "$RG" ca init --dir "$WORK/ca" >/dev/null
RG_PID=
start_robotsgate() { # MODE [extra config lines]
    local mode=$1 extra=${2:-}
    stop_robotsgate
    rm -rf "$WORK/audit.jsonl" "$WORK/snapshots"
    sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$RG_PORT|g" -e "s|@ADMIN_PORT@|$ADMIN_PORT|g" \
        -e "s|@MODE@|$mode|g" -e "s|@TLS_PORT@|$ORIGIN_TLS_PORT|g" "$HERE/robotsgate.toml" \
        >"$WORK/robotsgate.toml"
    printf '%s\n' "$extra" >>"$WORK/robotsgate.toml"
    taskset -c "$SRV_CPU" "$RG" run --config "$WORK/robotsgate.toml" 2>>"$WORK/logs/robotsgate.log" &
    RG_PID=$!
    wait_http "http://127.0.0.1:$ADMIN_PORT/readyz"
}
stop_robotsgate() {
    if [ -n "$RG_PID" ]; then
        kill "$RG_PID" 2>/dev/null || true
        wait "$RG_PID" 2>/dev/null || true
        RG_PID=
    fi
}
wait_http() { # URL [proxy]
    for _ in $(seq 100); do
        if curl -sf -o /dev/null ${2:+--proxy "$2"} "$1"; then return 0; fi
        sleep 0.1
    done
    die "$1 did not answer"
}

wait_http "http://127.0.0.1:$ORIGIN_PORT/1k"
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k" "http://127.0.0.1:$SQUID_PORT"
wait_http "http://127.0.0.1:$ORIGIN_PORT/1k" "http://127.0.0.1:$HAPROXY_PORT"

# --- measuring ---------------------------------------------------------------------------
# run_one NAME I CONCURRENCY URL [oha args...]: run I of NAME; the JSON goes to
# results/NAME.I.json. The targets compared in a table take their runs in turn (direct,
# squid, ..., robotsgate, then the next round), so that this VM's drift over minutes
# falls on all of them alike instead of on whichever ran last.
run_one() {
    local name=$1 i=$2 conc=$3 url=$4
    shift 4
    if [ -n "$RG_PID" ]; then : >"$WORK/audit.jsonl" 2>/dev/null || true; fi
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -z "${DURATION}s" -c "$conc" \
        --output-format json "$@" "$url" >"$WORK/results/$name.$i.json"
    python3 "$HERE/report.py" check "$WORK/results/$name.$i.json" || die "$name run $i"
}
row() { python3 "$HERE/report.py" row "$1" "$WORK/results"; }
URL_PLAIN="http://127.0.0.1:$ORIGIN_PORT"
URL_TLS="https://localhost:$ORIGIN_TLS_PORT"
PROXY_SQUID="http://127.0.0.1:$SQUID_PORT"
PROXY_HAPROXY="http://127.0.0.1:$HAPROXY_PORT"
PROXY_RG="http://127.0.0.1:$RG_PORT"

for section in $SECTIONS; do
case $section in
plain)
    log "plain HTTP through the proxies (${RUNS} x ${DURATION}s each)"
    for size in 1k 100k; do
        for c in 32 256; do
            case_="$size-c$c" url="$URL_PLAIN/$size"
            for i in $(seq "$RUNS"); do
                run_one "direct-$case_" "$i" "$c" "$url"
                run_one "squid-$case_" "$i" "$c" "$url" -x "$PROXY_SQUID"
                run_one "haproxy-$case_" "$i" "$c" "$url" -x "$PROXY_HAPROXY"
                start_robotsgate enforce
                run_one "robotsgate-$case_" "$i" "$c" "$url" -x "$PROXY_RG"
                decisions=$(grep -c '"type":"decision"' "$WORK/audit.jsonl" || true)
                [ "${decisions:-0}" -gt 0 ] || die "enforce mode wrote no decisions to the audit log"
                start_robotsgate off
                run_one "robotsgate_off-$case_" "$i" "$c" "$url" -x "$PROXY_RG"
            done
            for t in direct squid haproxy robotsgate robotsgate_off; do row "$t-$case_"; done
        done
    done
    stop_robotsgate
    ;;
tls)
    log "HTTPS (${RUNS} x ${DURATION}s each)"
    start_robotsgate enforce
    for c in 32 256; do
        for i in $(seq "$RUNS"); do
            run_one "direct_tls-1k-c$c" "$i" "$c" "$URL_TLS/1k" --cacert "$WORK/origin-ca.pem"
            run_one "squid_connect-1k-c$c" "$i" "$c" "$URL_TLS/1k" -x "$PROXY_SQUID" \
                --cacert "$WORK/origin-ca.pem"
            run_one "robotsgate_intercept-1k-c$c" "$i" "$c" "$URL_TLS/1k" -x "$PROXY_RG" \
                --cacert "$WORK/ca/ca.pem"
        done
        for t in direct_tls squid_connect robotsgate_intercept; do row "$t-1k-c$c"; done
    done
    stop_robotsgate
    ;;
cold)
    log "cold origin: 1000 concurrent requests, robots.txt not cached"
    : >"$WORK/logs/robots-access.log"
    start_robotsgate enforce
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n 1000 -c 1000 --output-format json \
        -x "$PROXY_RG" "$URL_PLAIN/1k" >"$WORK/results/cold.json"
    python3 "$HERE/report.py" cold "$WORK/results/cold.json" "$WORK/logs/robots-access.log" \
        "http://127.0.0.1:$ADMIN_PORT/metrics"
    stop_robotsgate
    ;;
memory)
    log "memory: RSS during 60 s at 1 KiB c256, then per cached origin and per connection"
    start_robotsgate enforce
    python3 "$HERE/report.py" rss-watch "$RG_PID" 60 >"$WORK/results/rss.txt" &
    watcher=$!
    taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -z 60s -c 256 --output-format json \
        -x "$PROXY_RG" "$URL_PLAIN/1k" >"$WORK/results/rss-load.json"
    wait "$watcher"
    python3 "$HERE/report.py" check "$WORK/results/rss-load.json"
    cat "$WORK/results/rss.txt"
    # Many origins: static DNS names, all pointing at the origin.
    names=$(python3 -c 'print("\n".join(f"\"o{i}.bench\" = [\"127.0.0.1\"]" for i in range(5000)))')
    start_robotsgate enforce "$(printf '[dns.static]\n%s' "$names")"
    python3 "$HERE/report.py" per-origin "$RG_PID" "127.0.0.1:$RG_PORT" "$ORIGIN_PORT" 5000 \
        "http://127.0.0.1:$ADMIN_PORT/metrics"
    start_robotsgate enforce
    python3 "$HERE/report.py" per-connection "$RG_PID" "127.0.0.1:$RG_PORT" "$ORIGIN_PORT" 2000
    stop_robotsgate
    ;;
*) die "unknown section $section" ;;
esac
done

log "summary (median of $RUNS runs of ${DURATION}s; generator on cpu$GEN_CPU, origin + proxy on cpu$SRV_CPU)"
python3 "$HERE/report.py" table "$WORK/results"
echo "raw results: $WORK/results" >&2
