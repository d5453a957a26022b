#!/usr/bin/env bash
# Load benchmark: robotsgate against a direct connection, Squid and HAProxy, on loopback.
#
#   bash benches/load/run.sh              # everything, about 15 minutes
#   SECTIONS="plain" RUNS=1 DURATION=5 bash benches/load/run.sh   # a quick look
#   RG_BASELINE_BIN=/work/baseline/robotsgate-80db995 SECTIONS="plain tls" bash benches/load/run.sh
#   RG_BIN=/path/to/robotsgate bash benches/load/run.sh   # measure that binary, build nothing
#
# It installs what it needs (oha with cargo, nginx-light, squid, haproxy and openssl from
# Debian's packages, when missing), builds robotsgate in release mode, and starts an nginx
# origin (plain and TLS), Squid (cache off), HAProxy and robotsgate, all on 127.0.0.1.
# The load generator
# (oha, one worker thread) is pinned to GEN_CPU; origin and proxies share SRV_CPU.
# Every run is DURATION seconds with keep-alive; each row is the median of RUNS runs, and
# the targets compared in one table take their runs in turn. Each run follows a warm-up of
# WARMUP requests (default 1000) on connections of its own, at the run's concurrency,
# outside the measurement: robotsgate is started afresh for every run (its mode, a fresh
# audit log) while the other servers run throughout, and the warm-up gives every target a
# process that has served before (robots.txt fetched, memory in use). The measured run
# still opens its connections anew. WARMUP=0 measures as before 2026-11-29; the cold
# section measures a fresh process's first requests.
# A run with any answer other than 200 fails the benchmark (a fast 403 is not a result).
#
# Sections (SECTIONS, space-separated; default all):
#   plain   direct, squid, haproxy, robotsgate enforce + audit log, robotsgate mode off;
#           1 KiB and 100 KiB bodies, concurrency 32 and 256
#   tls     direct TLS, squid CONNECT tunnel, robotsgate TLS interception (enforce + audit)
#   cold    1000 concurrent requests to an origin robotsgate has not cached yet
#   memory  RSS over a 60 s run; bytes per cached origin and per open connection
#
# Baseline (RG_BASELINE_BIN=/path/to/another/robotsgate): the plain and tls sections also
# run that binary (targets robotsgate_base, robotsgate_base_off, robotsgate_base_intercept)
# on RG_BASE_PORT, in the same rounds as the binary built here (in the plain section every
# target takes its turn in an order rotated by one each round; in tls the two take turns
# going first), and the summary adds "this build vs base" as the median of the paired runs.
# The baseline binary reads the same benches/load/robotsgate.toml.
#
# A shorter plain section: PLAIN_CASES (default "1k-c32 1k-c256 100k-c32 100k-c256") and
# ANCHORS (default "direct squid haproxy"; "" leaves them out).
#
# RG_AUDIT: more [audit] lines for the binary built here (not the baseline, which may not
# know them), e.g. RG_AUDIT='durability = "synced"'; "\n" separates two lines.
#
# Results: a table on stdout, raw oha JSON under $WORK/results.
set -euo pipefail

# shellcheck source=benches/load/common.sh
. "$(dirname "$0")/common.sh"
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
WARMUP=${WARMUP:-1000}
SECTIONS=${SECTIONS:-plain tls cold memory}
RG_BASELINE_BIN=${RG_BASELINE_BIN:-}
PLAIN_CASES=${PLAIN_CASES:-1k-c32 1k-c256 100k-c32 100k-c256}
ANCHORS=${ANCHORS-direct squid haproxy}

SQUID_PORT=13128
HAPROXY_PORT=13130
RG_PORT=13129
ADMIN_PORT=19090
RG_BASE_PORT=13131
RG_BASE_ADMIN_PORT=19091

# --- tools -------------------------------------------------------------------------------
need_tools squid haproxy
build_robotsgate
if [ -n "$RG_BASELINE_BIN" ]; then
    [ -x "$RG_BASELINE_BIN" ] || die "RG_BASELINE_BIN=$RG_BASELINE_BIN is not an executable file"
    RG_BASE=$(cd "$(dirname "$RG_BASELINE_BIN")" && pwd)/$(basename "$RG_BASELINE_BIN")
    log "baseline: $RG_BASE as robotsgate_base (port $RG_BASE_PORT)"
fi

# --- the origin --------------------------------------------------------------------------
start_origin

# --- squid -------------------------------------------------------------------------------
mkdir -p "$WORK/squid"
sed -e "s|@WORK@|$WORK|g" -e "s|@PORT@|$SQUID_PORT|g" "$HERE/squid.conf" >"$WORK/squid.conf"
if [ "$(id -u)" = 0 ] && id proxy >/dev/null 2>&1; then chown -R proxy "$WORK/squid"; fi
taskset -c "$SRV_CPU" squid -N -f "$WORK/squid.conf" &
PIDS+=($!)

# --- haproxy -----------------------------------------------------------------------------
start_haproxy "$HAPROXY_PORT"

# --- robotsgate --------------------------------------------------------------------------
[ -f "$WORK/ca/ca.pem" ] || "$RG" ca init --dir "$WORK/ca" >/dev/null
# start_robotsgate MODE [extra config lines]: the binary measured, on RG_PORT; and
# start_robotsgate_base, the same with RG_BASELINE_BIN on RG_BASE_PORT. One robotsgate runs
# at a time (each start stops the one running), with the same audit log path.
start_robotsgate() { AUDIT_LINES=${RG_AUDIT:-} start_rg "$RG" "$RG_PORT" "$ADMIN_PORT" robotsgate "$@"; }
start_robotsgate_base() { AUDIT_LINES= start_rg "$RG_BASE" "$RG_BASE_PORT" "$RG_BASE_ADMIN_PORT" robotsgate-base "$@"; }
start_rg() { # BIN PORT ADMIN_PORT LOG_NAME MODE [extra config lines]; AUDIT_LINES: [audit] lines
    local bin=$1 port=$2 admin=$3 name=$4 mode=$5 extra=${6:-}
    stop_robotsgate
    rm -rf "$WORK/audit.jsonl"* "$WORK/snapshots"
    write_rg_config "$mode" "$port" "$admin" "$WORK/robotsgate.toml" "$extra" "${AUDIT_LINES:-}"
    taskset -c "$SRV_CPU" "$bin" run --config "$WORK/robotsgate.toml" 2>>"$WORK/logs/$name.log" &
    RG_PID=$!
    wait_http "http://127.0.0.1:$admin/readyz"
}
stop_robotsgate() {
    if [ -n "$RG_PID" ]; then
        kill "$RG_PID" 2>/dev/null || true
        wait "$RG_PID" 2>/dev/null || true
        RG_PID=
    fi
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
    # The audit log is not emptied between runs (the running proxy hashes what it wrote
    # back from the file for its checkpoints): each run's decisions are found after where
    # the file ended before it. A full run writes a few GB there.
    if [ "$WARMUP" -gt 0 ]; then
        taskset -c "$GEN_CPU" oha --no-tui --worker-threads 1 -n "$WARMUP" -c "$conc" \
            --output-format json "$@" "$url" >"$WORK/warmup.json"
        python3 "$HERE/report.py" check "$WORK/warmup.json" || die "$name warm-up $i"
    fi
    AUDIT_FROM=$(stat -c %s "$WORK/audit.jsonl" 2>/dev/null || echo 0)
    settle
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
PROXY_RG_BASE="http://127.0.0.1:$RG_BASE_PORT"
BASE_TARGETS=()
if [ -n "$RG_BASELINE_BIN" ]; then BASE_TARGETS=(robotsgate_base robotsgate_base_off); fi

check_decisions() {
    local decisions
    decisions=$(tail -c +$((AUDIT_FROM + 1)) "$WORK/audit.jsonl" | grep -c '"type":"decision"' || true)
    [ "${decisions:-0}" -gt 0 ] || die "enforce mode wrote no decisions to the audit log"
}
# plain_rg_runs current|base I CONCURRENCY URL: run I of robotsgate (or robotsgate_base)
# enforce + audit, then mode off, for case_.
plain_rg_runs() {
    local which=$1 i=$2 c=$3 url=$4
    if [ "$which" = current ]; then
        start_robotsgate enforce
        run_one "robotsgate-$case_" "$i" "$c" "$url" -x "$PROXY_RG"
        check_decisions
        start_robotsgate off
        run_one "robotsgate_off-$case_" "$i" "$c" "$url" -x "$PROXY_RG"
    else
        start_robotsgate_base enforce
        run_one "robotsgate_base-$case_" "$i" "$c" "$url" -x "$PROXY_RG_BASE"
        check_decisions
        start_robotsgate_base off
        run_one "robotsgate_base_off-$case_" "$i" "$c" "$url" -x "$PROXY_RG_BASE"
    fi
}
# tls_rg_run current|base I CONCURRENCY: run I through interception (enforce + audit).
tls_rg_run() {
    local which=$1 i=$2 c=$3
    if [ "$which" = current ]; then
        start_robotsgate enforce
        run_one "robotsgate_intercept-1k-c$c" "$i" "$c" "$URL_TLS/1k" -x "$PROXY_RG" \
            --cacert "$WORK/ca/ca.pem"
    else
        start_robotsgate_base enforce
        run_one "robotsgate_base_intercept-1k-c$c" "$i" "$c" "$URL_TLS/1k" -x "$PROXY_RG_BASE" \
            --cacert "$WORK/ca/ca.pem"
    fi
}

for section in $SECTIONS; do
case $section in
plain)
    log "plain HTTP through the proxies (${RUNS} x ${DURATION}s each)"
    for case_ in $PLAIN_CASES; do
        c=${case_#*-c} url="$URL_PLAIN/${case_%-c*}"
        # shellcheck disable=SC2206 # ANCHORS is a list
        groups=($ANCHORS current)
        if [ -n "$RG_BASELINE_BIN" ]; then groups+=(base); fi
        for i in $(seq "$RUNS"); do
            for k in $(turns "$i" "${#groups[@]}"); do
                g=${groups[$k]}
                case $g in
                direct) run_one "direct-$case_" "$i" "$c" "$url" ;;
                squid) run_one "squid-$case_" "$i" "$c" "$url" -x "$PROXY_SQUID" ;;
                haproxy) run_one "haproxy-$case_" "$i" "$c" "$url" -x "$PROXY_HAPROXY" ;;
                current | base) plain_rg_runs "$g" "$i" "$c" "$url" ;;
                *) die "unknown anchor $g (direct, squid, haproxy)" ;;
                esac
            done
        done
        # shellcheck disable=SC2086 # ANCHORS is a list
        for t in $ANCHORS robotsgate robotsgate_off "${BASE_TARGETS[@]}"; do row "$t-$case_"; done
    done
    stop_robotsgate
    ;;
tls)
    log "HTTPS (${RUNS} x ${DURATION}s each)"
    # Without a baseline one robotsgate serves the whole section; with one, each run starts
    # its binary afresh, and the two take turns going first as in the plain section.
    if [ -z "$RG_BASELINE_BIN" ]; then start_robotsgate enforce; fi
    for c in 32 256; do
        for i in $(seq "$RUNS"); do
            run_one "direct_tls-1k-c$c" "$i" "$c" "$URL_TLS/1k" --cacert "$WORK/origin-ca.pem"
            run_one "squid_connect-1k-c$c" "$i" "$c" "$URL_TLS/1k" -x "$PROXY_SQUID" \
                --cacert "$WORK/origin-ca.pem"
            if [ -z "$RG_BASELINE_BIN" ]; then
                run_one "robotsgate_intercept-1k-c$c" "$i" "$c" "$URL_TLS/1k" -x "$PROXY_RG" \
                    --cacert "$WORK/ca/ca.pem"
            elif [ $((i % 2)) = 0 ]; then
                tls_rg_run base "$i" "$c"
                tls_rg_run current "$i" "$c"
            else
                tls_rg_run current "$i" "$c"
                tls_rg_run base "$i" "$c"
            fi
        done
        for t in direct_tls squid_connect robotsgate_intercept ${RG_BASELINE_BIN:+robotsgate_base_intercept}; do
            row "$t-1k-c$c"
        done
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
